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
