"""Reference copies of the stage-01 lab kernels, exactly as the chapter prints them.

Why a copy: the lab notebooks are not importable as modules, and `course schedule` must draw a *real*
pallas_call (traced by kernel_trace), never a schedule typed in by hand. The kernel bodies and wrappers below
are the seed's text verbatim (the site locks schedule frames to these line numbers, see `source_lines`), except
that `INTERP` is a module flag defaulting to True so everything runs on CPU.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_course.schedule import DISPLAY

# interpret=True runs the kernels on CPU; the notebooks set it from the backend.
INTERP = True


def matmul_kernel(a_ref, b_ref, o_ref):
    k = pl.program_id(2)
    @pl.when(k == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)

def matmul(a, b, bm=128, bn=128, bk=128):
    m, k = a.shape
    _, n = b.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        interpret=INTERP,
    )(a, b)


def transpose_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].T

def transpose(x, bm=128, bn=128):
    m, n = x.shape
    return pl.pallas_call(
        transpose_kernel,
        grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),
        out_shape=jax.ShapeDtypeStruct((n, m), x.dtype),
        interpret=INTERP,
    )(x)


def softmax_kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)

def softmax(x, rows_per_block=8):
    n, d = x.shape
    return pl.pallas_call(
        softmax_kernel,
        grid=(n // rows_per_block,),
        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=INTERP,
    )(x)


def layernorm_kernel(x_ref, g_ref, b_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    y = (x - mu) * jax.lax.rsqrt(var + 1e-6)
    o_ref[...] = (y * g_ref[...] + b_ref[...]).astype(o_ref.dtype)

def layernorm(x, g, b, rows_per_block=8):
    n, d = x.shape
    return pl.pallas_call(
        layernorm_kernel,
        grid=(n // rows_per_block,),
        in_specs=[
            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),
            pl.BlockSpec((1, d), lambda i: (0, 0)),
            pl.BlockSpec((1, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=INTERP,
    )(x, g.reshape(1, -1), b.reshape(1, -1))


# LAB·1.2's matmul with an f32 scratch accumulator, as the notebook's solution writes it: the bench kernel
# (course_tools.bench_workloads.matmul_acc wraps it in its own schedule).
def matmul_acc_kernel(a_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)
    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    @pl.when(k == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


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
    return inspect.getsource(kernel).rstrip("\n").split("\n") + [""] + \
        inspect.getsource(wrapper).rstrip("\n").split("\n")
