"""The grader: what decides a score, never shipped to students, in folders by where its code runs.

jail/ (the only place student code runs; jail_agent/ inside it, bound alone), judge/ (the grader's own rebuild,
run and compile of what a student's function traced to, in a bounded child), labs/ (the hidden checks, one module
per lab, and the harness they stand on; keys/ their grader-side data), steps/ (the pipeline and one step a
module: discover, read, identify, restore, execute, score, record, report, feedback, export) and doors/ (every
way in: course grade, nbgrader, Gradescope, PrairieLearn). The modules here are what every folder uses
(course_manifest, public_manifest, cells, untrusted, fingerprint, notebook_code) and import no folder. Each
folder imports only those before it in this list, but the jail and the judge use each other (a session starts its
judge, the judge's box borrows the jail's limits): tests/test_import_graph.py holds them to it.
"""

import os

# The grader computes on the CPU (references, the compile step's deviceless topologies); with libtpu installed
# (requirements.txt) JAX would otherwise first try to start a TPU runtime here and print its failure to stderr.
# setdefault: JAX_PLATFORMS set by the caller wins. The jail sets its own (autograder.jail.agent_env.jail_env).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
