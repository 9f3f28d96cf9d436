"""XLA flags for running kernels in TPU interpret mode on a CPU: one home for the grade (autograder.confine.env
sets them in the jail and the judge) and the student's own notebook (pallas_course.runtime.setup). No jax import:
the grader reads them before it starts anything.
"""

from __future__ import annotations

import functools

# XLA flags that compile interpret-mode kernels faster, by the jaxlib release they were measured on. Running a kernel
# in interpret mode is mostly XLA compiling its interpreter (one compile per distinct call): the loop emitters and
# LLVM -O0 compile it about 3x faster (LAB·1.1's transpose_values: 2.9 s -> 0.9 s of XLA compilation; a whole
# LAB·1.1 notebook in the jail 12.8 -> 8.8 CPU s, LAB·1.2 23.0 -> 15.0, jaxlib 0.10.2 on 2 cores). Neither changes
# what is computed: no fast-math either way. The grade's jail and judge run under them (autograder.confine.env),
# and the student's kernel too where it interprets on a CPU (setup). XLA aborts on a flag it does not know
# (jaxlib 0.12 has no xla_cpu_use_fusion_emitters), so a release not listed gets none of them.
FAST_COMPILE_XLA_FLAGS = {"0.10.2": "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"}


@functools.lru_cache(maxsize=1)
def fast_compile_xla_flags() -> str:
    """FAST_COMPILE_XLA_FLAGS for the installed jaxlib, or ""."""
    import importlib.metadata

    try:
        return FAST_COMPILE_XLA_FLAGS.get(importlib.metadata.version("jaxlib"), "")
    except importlib.metadata.PackageNotFoundError:
        return ""
