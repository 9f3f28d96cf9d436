"""One submission's grading session, above the jail and the judge: `session` starts a submission's judge
(autograder.judge) and its jailed agent (autograder.jail) and closes both; `functions` holds the proxies the hidden
checks call (StudentFunction: the jail describes, the judge rebuilds, runs and compiles); `warm` starts sessions
ahead of the submission that will use them; `testing` is the tests of the checks' own LocalFunction, the same round
trip in the tests' process (grading never uses it).

Import rule: session/ may import jail/, judge/, confine/, the agent and the top-level modules of autograder; never
labs/, steps/ or doors/, which stand on it (tests/test_import_graph.py).
"""
