"""The grader: hidden checks per lab, the notebook runner, scoring, reports and nbgrader glue."""
import os

# The grader computes on the CPU (references, the compile step's deviceless topologies); with libtpu installed
# (requirements.txt) JAX would otherwise first try to start a TPU runtime here and print its failure to stderr.
# setdefault: JAX_PLATFORMS set by the caller wins. The jail sets its own (autograder.jail_session.jail_env).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
