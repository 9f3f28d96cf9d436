"""What `course schedule` and the site can draw: the reference kernels (autograder.labs.reference_kernels), their
sizes, and their traced pallas_calls and schedules with the chapter's names and line numbers.

Why here and not beside the kernels: drawing is presentation; the kernels decide LAB·1.4's grade, and a
change to how they are drawn must regrade nothing (autograder.fingerprint hashes what the grader imports).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import jax
import jax.numpy as jnp

from autograder.labs.reference_kernels import (
    layernorm,
    layernorm_kernel,
    matmul,
    matmul_kernel,
    softmax,
    softmax_kernel,
    transpose,
    transpose_kernel,
)
from pallas_course.schedule import DISPLAY

# name -> (wrapper, kernel): what `course schedule` and the notebooks can draw.
KERNELS: dict[str, tuple[Callable, Callable]] = {
    "matmul": (matmul, matmul_kernel),
    "transpose": (transpose, transpose_kernel),
    "softmax": (softmax, softmax_kernel),
    "layernorm": (layernorm, layernorm_kernel),
}

# The sizes each wrapper takes, in the order `course schedule` lists them, with the chapter's defaults.
SIZES: dict[str, dict[str, int]] = {
    "matmul": {"m": 128, "n": 128, "k": 512, "bm": 128, "bn": 128, "bk": 128},
    "transpose": {"m": 256, "n": 256, "bm": 128, "bn": 128},
    "softmax": {"rows": 256, "d": 512, "rows_per_block": 8},
    "layernorm": {"rows": 256, "d": 512, "rows_per_block": 8},
}


# How the chapter names each kernel's operands and writes its compute: pallas_course.schedule.DISPLAY.


def _example_args(name: str, sizes: dict[str, int], dtype: Any) -> tuple[tuple[Any, ...], dict[str, int]]:
    s = {**SIZES[name], **sizes}
    unknown = set(sizes) - set(SIZES[name])
    if unknown:
        raise ValueError(f"{name} takes sizes {', '.join(SIZES[name])}; got unknown {', '.join(sorted(unknown))}")
    sds = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731 - abstract: nothing is allocated
    if name == "matmul":
        return (sds(s["m"], s["k"]), sds(s["k"], s["n"])), {"bm": s["bm"], "bn": s["bn"], "bk": s["bk"]}
    if name == "transpose":
        return (sds(s["m"], s["n"]),), {"bm": s["bm"], "bn": s["bn"]}
    if name == "softmax":
        return (sds(s["rows"], s["d"]),), {"rows_per_block": s["rows_per_block"]}
    return (sds(s["rows"], s["d"]), sds(s["d"]), sds(s["d"])), {"rows_per_block": s["rows_per_block"]}


def trace_reference(name: str, dtype: Any = jnp.float32, **sizes: int):
    """The one pallas_call `name` launches at `sizes` (abstract trace: nothing runs)."""
    from pallas_course.kernel_trace import trace

    if name not in KERNELS:
        raise KeyError(f"no reference kernel {name!r}; choose one of {', '.join(KERNELS)}")
    args, kwargs = _example_args(name, sizes, dtype)
    return trace(KERNELS[name][0], *args, **kwargs).pallas_calls[0]


def reference_schedule(name: str, depth: int = 2, dtype: Any = jnp.float32, **sizes: int):
    """The pipeline schedule of reference kernel `name`, traced at `sizes`, with the chapter's names and lines."""
    from pallas_course.kernel_lines import code_map
    from pallas_course.schedule import schedule

    info = trace_reference(name, dtype, **sizes)
    wrapper, kernel = KERNELS[name]
    names, expression = DISPLAY[name]
    return schedule(info, depth, names=names, expression=expression, code=code_map(kernel, wrapper))


def source_lines(name: str) -> list[str]:
    """The kernel and its wrapper as the chapter numbers them: line 1 is `def <name>_kernel(...)`."""
    wrapper, kernel = KERNELS[name]
    return (
        inspect.getsource(kernel).rstrip("\n").split("\n") + [""] + inspect.getsource(wrapper).rstrip("\n").split("\n")
    )
