"""The reference kernels, one home: the stage-01 lab kernels exactly as the chapter prints them.

The grader traces them to judge LAB·1.4 (autograder/labs/lab_1_4.py: its models read the matmul's own
pallas_call, never the student's); the instructor tools draw them (course_tools.reference_schedules: `course
schedule`, the site's frames when a lab is not written yet), time them (course_tools.bench_workloads) and
compile them (course_tools.bench.budget_line); the tests import them from here. They live in the grader, which
the tools may import and the student wheel does not hold. The notebooks stay the students' source: these are
copies because a notebook is not importable as a module.

The chapter's kernel bodies and wrappers are the seed's text verbatim (the site locks schedule frames to these
line numbers, see course_tools.reference_schedules.source_lines), except that `INTERP` is a module flag
defaulting to True so everything runs on CPU. The `configurable_*` wrappers below them are the same schedules
with the knobs the grader's models and the bench turn, so the verbatim text stays as printed.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

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


# LAB·1.2's matmul with an f32 scratch accumulator, as the notebook's solution writes it: the bench's matmul
# and LAB·1.4's model of a matmul with a scratch (configurable_matmul(acc_scratch=True)). Its dimension semantics
# are the notebook's too (graded: matmul_acc_semantics): (i, j) blocks independent, K carried in order.
MATMUL_ACC_SEMANTICS = ("parallel", "parallel", "arbitrary")

def matmul_acc_kernel(a_ref, b_ref, o_ref, acc_ref):
    k = pl.program_id(2)
    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    @pl.when(k == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


# ------------------------------------------------------------ the same schedules, with the knobs turned

def configurable_matmul(a, b, bm: int = 128, bn: int = 128, bk: int = 128, *, buffers: int | None = None,
                        acc_scratch: bool = False, compiler_params: Any = None, interpret: Any = None):
    """`matmul`'s grid and BlockSpecs, with `buffers` per BlockSpec (pl.Buffered; None: Pallas' default, no
    pipeline_mode), LAB·1.2's f32 scratch accumulator (matmul_acc_kernel) if `acc_scratch`, the TPU
    `compiler_params`, and `interpret` (None: INTERP). LAB·1.4's grade traces it; the bench times it."""
    m, k = a.shape
    _, n = b.shape
    mode = {} if buffers is None else {"pipeline_mode": pl.Buffered(buffers)}
    return pl.pallas_call(
        matmul_acc_kernel if acc_scratch else matmul_kernel,
        grid=(m // bm, n // bn, k // bk),                     # K innermost: C (or the scratch) stays put over K
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk), **mode),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j), **mode),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j), **mode),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)] if acc_scratch else [],
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        compiler_params=compiler_params,
        interpret=INTERP if interpret is None else interpret,
    )(a, b)


def configurable_softmax(x, rows_per_block: int = 8, *, compiler_params: Any = None, interpret: Any = None):
    """`softmax`'s grid and BlockSpecs (blocked rows, whole rows: the reduction fits the block), with the TPU
    `compiler_params` and `interpret` (None: INTERP). The bench times it."""
    n, d = x.shape
    return pl.pallas_call(
        softmax_kernel,
        grid=(n // rows_per_block,),
        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=compiler_params,
        interpret=INTERP if interpret is None else interpret,
    )(x)
