"""The judge: the grader's own rebuild, run, structure and compile of a student's traced computation, in a bounded,
killable child process of its own (never in the process that decides a score, never beside student code).

- box.py: the child process and its limits (cgroups where writable, rlimits always, the parent-death signal);
- budgets.py: static budgets on a description, checked before anything is allocated or run;
- protocol.py: what crosses between the grader and the child (JSON and .npy only): the structure the checks
  read, as data, and the grader-side view of it with kernel_trace's API;
- server.py: the child's entry (`python -m autograder.judge.server`): rebuild, trace, run, compile;
- client.py: what autograder.jail.session calls: one judge per submission, restarted after an overrun;
- parse.py: the jail's description parsed into the grader's own data model (Jaxpr, Eqn, Aval), or `Refused`;
- rebuild.py: the grader's own copy of a student's traced computation, rebuilt from what parse.py read: its
  primitives bound, its loops guarded (`rebuild`, `Refused`, `Computation`, `guarded_loops`);
- structure.py: the structure the checks read of a trace, as data (`structure_data`, the round-trip check's);
- compile_rule.py: it must compile: the compile step and the rule that scores it.

The judge may import the jail's agent (its wire and description formats), jail/ (the box borrows the jail's
limits, the server answers with the session's error types), the top-level modules and pallas_course; never
labs/, steps/ or doors/ (tests/test_import_graph.py).
"""
