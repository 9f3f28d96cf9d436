"""LAB·1.1 hidden checks: add and transpose.

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml.
"""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from autograder.harness import (TestFailure, as_f64, call, expect_close, expect_equal, fresh_seed,
                                one_pallas_call, random_array)

# add keeps the seed's single whole-array block, so any shape works; these cover square and rectangular.
ADD_SHAPES = [(256, 256), (128, 512), (384, 128)]
# (shape, bm, bn): square, rectangular both ways, several block multiples, >1 block on every axis.
TRANSPOSE_CASES = [((256, 256), 128, 128), ((256, 512), 128, 256), ((512, 256), 256, 128), ((384, 256), 128, 128)]


def _add_case(test: str, add: Callable[..., Any], dtype: Any, tol: float) -> None:
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for shape in ADD_SHAPES:
        x, y = random_array(rng, shape, dtype), random_array(rng, shape, dtype)
        one_pallas_call(test, "add(x, y)", add, x, y)
        out = call(test, "add(x, y)", add, x, y)
        expected = (as_f64(x) + as_f64(y)).astype(np.dtype(dtype))
        expect_close(test, f"add(x, y) on {shape} {np.dtype(dtype)}", out, expected, tol=tol, seed=seed)


def add_f32(add: Callable[..., Any]) -> None:
    """One pallas_call computes the sum; exact on f32 (a single f32 add is correctly rounded)."""
    _add_case("add_f32", add, np.float32, tol=0.0)


def add_bf16(add: Callable[..., Any]) -> None:
    """bf16 in, bf16 out. Tolerance 2**-8 relative: the sum may be rounded once to bf16 or via f32."""
    _add_case("add_bf16", add, ml_dtypes.bfloat16, tol=2.0**-8)


def transpose_schedule(transpose: Callable[..., Any]) -> None:
    """Grid (m/bm, n/bn); in block (bm, bn) at (i, j); out block (bn, bm) at (j, i)."""
    import jax
    import jax.numpy as jnp

    test = "transpose_schedule"
    for shape, bm, bn in TRANSPOSE_CASES:
        label = f"transpose(x, bm={bm}, bn={bn}) on {shape}"
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        pc = one_pallas_call(test, label, transpose, x, bm=bm, bn=bn)
        m, n = shape
        expect_equal(test, f"the grid of {label}", pc.grid, (m // bm, n // bn),
                     "one grid step per (bm, bn) block of x, so the grid is (m // bm, n // bn)")
        if len(pc.inputs) != 1 or len(pc.outputs) != 1:
            raise TestFailure(f"{test}: {label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; "
                              "expected one BlockSpec in in_specs and one in out_specs")
        src, dst = pc.inputs[0], pc.outputs[0]
        expect_equal(test, f"the input block of {label}", src.block_shape, (bm, bn),
                     "the input BlockSpec should carve x into (bm, bn) blocks")
        expect_equal(test, f"the output block of {label}", dst.block_shape, (bn, bm),
                     "a transposed (bm, bn) block is a (bn, bm) block")
        for point in pc.grid_points():
            i, j = point
            if src.block_index(*point) != (i, j):
                raise TestFailure(f"{test}: {label}: the input index map sends grid point {point} to block "
                                  f"{src.block_index(*point)}; step (i, j) should read block (i, j) of x")
            if dst.block_index(*point) != (j, i):
                raise TestFailure(f"{test}: {label}: the output index map sends grid point {point} to block "
                                  f"{dst.block_index(*point)}; the transpose of block (i, j) lands at block "
                                  f"({j}, {i}), so the out index map must swap its indices")


def transpose_values(transpose: Callable[..., Any]) -> None:
    """Exact (transposing moves values, it never rounds) on f32 and bf16, several shapes and blocks."""
    test = "transpose_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for dtype in (np.float32, ml_dtypes.bfloat16):
        for shape, bm, bn in TRANSPOSE_CASES:
            label = f"transpose(x, bm={bm}, bn={bn}) on {shape} {np.dtype(dtype)}"
            x = random_array(rng, shape, dtype)
            one_pallas_call(test, label, transpose, x, bm=bm, bn=bn)
            out = call(test, label, transpose, x, bm=bm, bn=bn)
            expect_close(test, label, out, np.asarray(x).T, tol=0.0, block=(bn, bm), seed=seed)
