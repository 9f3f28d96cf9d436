"""Confinement: what any child process the grader starts is held to, written once for the jail and the judge.

It knows nothing of students, notebooks, jails or judges, only of child processes and their bounds:
- limits.py: ProcessLimits, what one child may use (memory, processes, CPU seconds and share, file size, tmpfs);
- cgroups.py: one memory, pids and cpu cgroup per child, where they are writable (else the watch, memory.py);
- chain.py: the start-up chain every child goes through (join the cgroups -> rlimits -> setpriv with the
  parent-death signal -> the guard that stops if the grader already died), as argv and, for a forked child, in
  process, from one table of rlimits;
- uids.py: a uid of a child's own (reserved, its processes found by real uid, killed, its leftovers removed);
- paths.py: what a uid with only "other" bits may reach, read or change;
- memory.py: the resident-memory watch where no memory cgroup can be had;
- orphans.py: the one sweep of what a dead grader left (cgroups, staging folders, uids, temporary folders);
- env.py: the child's scrubbed environment and XLA flags;
- child.py: the handle every confined child shares (its kill, its end, its stderr tail).

Import rule: confine/ imports the top-level modules of autograder only; jail/ and judge/ both stand on it and
never on each other (tests/test_import_graph.py).
"""
