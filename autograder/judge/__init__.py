"""The judge: the grader's own rebuild, run, structure and compile of a student's traced computation, in a bounded,
killable child process of its own (never in the process that decides a score, never beside student code).

- box.py: the child process and its limits (autograder.confine's cgroups where writable, rlimits always, the
  parent-death signal), forked by zygote.py's warm parent where it can;
- budgets.py: static budgets on a description, checked before anything is allocated or run;
- protocol.py: what crosses between the grader and the child (JSON and .npy only): the structure the checks
  read, as data, and the grader-side view of it with kernel_trace's API;
- server.py: the child's entry (`python -m autograder.judge.server`): rebuild, trace, run, compile;
- client.py: what autograder.session calls: one judge per submission, restarted after an overrun;
- testing.py: LocalJudge, the same work in the tests' own process (the tests of the checks; never grading);
- parse.py: the jail's description parsed into the grader's own data model (Jaxpr, Eqn, Aval), or `Refused`;
- rebuild.py: the grader's own copy of a student's traced computation, rebuilt from what parse.py read: its
  primitives bound, its loops guarded (`rebuild`, `Refused`, `Computation`, `guarded_loops`);
- structure.py: the structure the checks read of a trace, as data (`structure_data`, the round-trip check's);
- compile_rule.py: it must compile: the compile step and the rule that scores it.

Import rule: the judge may import confine/ (its box stands on the same machinery as the jail), the jail's agent
(its wire and description formats: the contract at the bottom), the top-level modules (autograder.failures'
error types) and pallas_course; never jail/ (a sibling), session/, labs/, steps/ or doors/
(tests/test_import_graph.py).
"""
