"""Shared fixtures. Every test runs on CPU; kernels run in TPU interpret mode."""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["PALLAS_COURSE_MODE"] = "tpu-interpret"
# Compile kernels' interpreters as the jail does (pallas_course.xla_flags.FAST_COMPILE_XLA_FLAGS: same results, about
# a third less time); set before anything starts XLA. Notebooks and commands the tests start inherit it.
from pallas_course.xla_flags import fast_compile_xla_flags

if fast_compile_xla_flags() and "XLA_FLAGS" not in os.environ:
    os.environ["XLA_FLAGS"] = fast_compile_xla_flags()

# `python -m pytest -q -n 2 --dist loadfile` (README, CI) spreads the tests over two processes a whole file at a time:
# most files build something costly once per module (a graded batch, a generated nbgrader course, the site).
# (Not --dist loadgroup: pytest-xdist 3.8 marks groups through Item._nodeid, which pytest 9 no longer reads.)

import sys

import pytest


@pytest.fixture(scope="session")
def libtpu() -> None:
    """The real TPU compiler's tests need libtpu, which requirements.txt pins for Linux: there (CI included) a
    missing libtpu fails these tests instead of skipping them; only where libtpu has no wheel are they skipped."""
    from pallas_course import tpu_compile

    if tpu_compile.available():
        return
    if not sys.platform.startswith("linux"):
        pytest.skip(f"libtpu has no wheel for {sys.platform}: the compiler's tests run on Linux (CI)")
    pytest.fail(
        "libtpu is missing: requirements.txt pins it (pip install -r requirements.txt); the compile tests "
        "must not be skipped on Linux"
    )
