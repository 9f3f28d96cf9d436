"""The environment of a confined child (the jail's agent, the judge): nothing of the grader's (no tokens, no paths
to its files), one thread for XLA, BLAS and OpenMP, Pallas' TPU interpret mode on the CPU. Each child adds its own
HOME, TMPDIR and PYTHONPATH (autograder.jail.agent_env, autograder.judge.box)."""

from __future__ import annotations

import os

from pallas_course.xla_flags import fast_compile_xla_flags


def xla_flags() -> str:
    """The jail's and the judge's XLA flags: pallas_course.xla_flags' (one home for them: the student's own kernel
    runs under them too where it interprets on a CPU), on one thread: interpret-mode kernels gain nothing from
    XLA's thread pools, and children run side by side (--jobs) would only fight over the cores with them."""
    return f"--xla_cpu_multi_thread_eigen=false {fast_compile_xla_flags()}".strip()


def compile_like_the_jail() -> None:
    """The grader runs the rebuilt kernels in interpret mode itself (autograder.judge.rebuild): it compiles their
    interpreters with the jail's flags, set before this process first uses XLA (a flag set later is ignored;
    an XLA_FLAGS of the caller's own wins)."""
    if "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = xla_flags()


def child_env() -> dict[str, str]:
    """What every confined child's environment holds, before its own HOME, TMPDIR, PYTHONPATH and TPU_LOG_DIR."""
    return {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "JAX_PLATFORMS": "cpu",
        "PALLAS_COURSE_MODE": "tpu-interpret",
        "PYTHONUNBUFFERED": "1",
        "PALLAS_COURSE_CHECK_COMPILE": "0",  # the grader compiles outside the jail (compile_rule)
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "MPLBACKEND": "agg",
        "XLA_FLAGS": xla_flags(),
        # one thread for BLAS and OpenMP too (see xla_flags)
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
