"""The jail: the only place student code runs, and the grader's side of it.

`jails` says which jail this machine makes and is the one door to it (`start`); `bwrap` is bubblewrap's jail
(namespaces, cgroups, rlimits, a read-only file system) and `uid` the jail without namespaces, where no namespace
can be made (Docker's default profile: Gradescope, PrairieLearn: a uid of its own, file modes, rlimits);
`handle` the grader's handle on a running jail of any kind; `agent_env` what the agent sees (its environment, binds
and files); `syscall_filter` the seccomp filters they run under; `limits` what one submission may use (the grading
policy, one place). What bounds a child process at all (cgroups, the start-up chain, uids, the memory watch, the
orphan sweep) is autograder.confine's, shared with the judge. `jail_agent/` is what runs inside: bound read-only
into the jail alone as the top-level package `jail_agent`, it imports nothing of autograder (the standard library,
numpy, IPython, jax and pallas_course, bound beside it).

Import rule: jail/ imports confine/, the agent, the top-level modules of autograder and pallas_course; never the
judge (a sibling), session/, labs/, steps/ or doors/ (tests/test_import_graph.py holds every folder to its line).
"""
