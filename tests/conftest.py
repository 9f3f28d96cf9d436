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

import pytest  # noqa: E402

# `python -m pytest -q -n 2 --dist loadgroup` (README, CI) spreads the tests over two processes. Most files build
# something costly once per module (a graded batch, a generated nbgrader course, the site), so each file's tests
# stay together on one process; only these files, many independent checks on cheap fixtures, are spread test by
# test. Without xdist the mark does nothing.
SPREAD_TEST_BY_TEST = {"test_mutants.py", "test_mistakes.py", "test_release.py", "test_check.py", "test_errors.py",
                       "test_legality.py", "test_wire.py", "test_jail.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name not in SPREAD_TEST_BY_TEST:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
