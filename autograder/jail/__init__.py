"""The jail: the only place student code runs, and the grader's side of it.

`bwrap` starts a command in a bubblewrap jail (namespaces, cgroups, rlimits, a read-only file system) and,
where no namespace can be made (Docker's default profile: Gradescope, PrairieLearn), in `uid`'s jail without
namespaces (a separate uid, file modes, rlimits); `syscall_filter` is the seccomp filter they run under;
`limits` what one submission may use (the grading policy, one place); `session` the grader's handle on a
jailed agent (StudentFunction proxies for the notebook's functions, the judge started beside it).
`jail_agent/` is what runs inside: bound read-only into the jail alone as the top-level package `jail_agent`,
it imports nothing of autograder (the standard library, numpy, IPython, jax and pallas_course, bound beside
it). The rest may import the agent, the judge (a session starts one), the top-level modules of autograder and
pallas_course; never labs/, steps/ or doors/ (tests/test_import_graph.py holds every folder to its line).
"""
