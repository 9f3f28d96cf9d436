"""Shared fixtures. Every test runs on CPU; kernels run in TPU interpret mode."""
from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["PALLAS_COURSE_MODE"] = "tpu-interpret"
# Compile kernels' interpreters as the jail does (autograder.student.FAST_COMPILE_XLA_FLAGS: same results, about
# a third less time); set before anything starts XLA. Notebooks and commands the tests start inherit it.
from autograder.student import fast_compile_xla_flags  # noqa: E402

if fast_compile_xla_flags() and "XLA_FLAGS" not in os.environ:
    os.environ["XLA_FLAGS"] = fast_compile_xla_flags()

# `python -m pytest -q -n 2 --dist loadfile` (README, CI) spreads the tests over two processes a whole file at a time:
# most files build something costly once per module (a graded batch, a generated nbgrader course, the site).
# (Not --dist loadgroup: pytest-xdist 3.8 marks groups through Item._nodeid, which pytest 9 no longer reads.)
