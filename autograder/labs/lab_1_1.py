"""LAB·1.1 hidden checks: add and transpose.

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml.
"""

from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from autograder.labs.harness import (
    TestFailure,
    call,
    expect_close,
    fresh_seed,
    one_pallas_call,
    random_array,
    schedule_call,
)
from pallas_course import rules
from pallas_course.rules import as_f64

# The rules, tolerances and families live in pallas_course.rules (the notebook's visible checks apply the same ones,
# pallas_course.lab_checks); here only the inputs are the grade's own: fresh each run, more sizes.
# add keeps the seed's single whole-array block, so any shape works; these cover square and rectangular.
ADD_SHAPES = [(256, 256), (128, 512), (384, 128)]
# (shape, bm, bn): square, rectangular both ways, several block multiples, >1 block on every axis.
TRANSPOSE_CASES = [((256, 256), 128, 128), ((256, 512), 128, 256), ((512, 256), 256, 128), ((384, 256), 128, 128)]


def families(test: str) -> frozenset[str]:
    """The families of this test's cases (rules.*_families): the notebook's visible checks must show each."""
    found: set[str] = set()
    if test in ("add_f32", "add_bf16"):
        for shape in ADD_SHAPES:
            found |= rules.array_families(shape, np.float32 if test == "add_f32" else ml_dtypes.bfloat16)
    elif test == "transpose_schedule":
        for shape, bm, bn in TRANSPOSE_CASES:
            found |= rules.transpose_families(shape, bm, bn, np.float32)
    elif test == "transpose_values":
        for dtype in (np.float32, ml_dtypes.bfloat16):
            for shape, bm, bn in TRANSPOSE_CASES:
                found |= rules.transpose_families(shape, bm, bn, dtype)
    return frozenset(found)


def _add_case(test: str, add: Callable[..., Any], dtype: Any, tols: dict[str, float]) -> None:
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for shape in ADD_SHAPES:
        x, y = random_array(rng, shape, dtype), random_array(rng, shape, dtype)
        pc = one_pallas_call(test, "add(x, y)", add, x, y)
        out = call(test, "add(x, y)", add, x, y)
        expected = (as_f64(x) + as_f64(y)).astype(np.dtype(dtype))
        expect_close(
            test,
            f"add(x, y) on {shape} {np.dtype(dtype)}",
            out,
            expected,
            seed=seed,
            kernel=pc,
            **tols,
            hint=lambda: rules.add_hint(x, y, out),
        )


def add_f32(add: Callable[..., Any]) -> None:
    """One pallas_call computes the sum; exact on f32 (a single f32 add is correctly rounded)."""
    _add_case("add_f32", add, np.float32, rules.ADD_F32)


def add_bf16(add: Callable[..., Any]) -> None:
    """bf16 in, bf16 out. Tolerance 2**-8 relative: the sum may be rounded once to bf16 or via f32."""
    _add_case("add_bf16", add, ml_dtypes.bfloat16, rules.ADD_BF16)


def _fails(test: str, problem: str | None) -> None:
    if problem is not None:
        raise TestFailure(f"{test}: {problem}")


def transpose_schedule(transpose: Callable[..., Any]) -> None:
    """Grid (m/bm, n/bn); in block (bm, bn) at (i, j); out block (bn, bm) at (j, i)."""
    import jax
    import jax.numpy as jnp

    test = "transpose_schedule"
    for shape, bm, bn in TRANSPOSE_CASES:
        label = f"transpose(x, bm={bm}, bn={bn}) on {shape}"
        x = jax.ShapeDtypeStruct(shape, jnp.float32)
        pc = schedule_call(test, label, transpose, x, bm=bm, bn=bn)
        _fails(test, rules.transpose_schedule_problem(label, pc, shape, bm, bn))


def transpose_values(transpose: Callable[..., Any]) -> None:
    """Exact (transposing moves values, it never rounds) on f32 and bf16, several shapes and blocks."""
    test = "transpose_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for dtype in (np.float32, ml_dtypes.bfloat16):
        for shape, bm, bn in TRANSPOSE_CASES:
            label = f"transpose(x, bm={bm}, bn={bn}) on {shape} {np.dtype(dtype)}"
            x = random_array(rng, shape, dtype)
            pc = one_pallas_call(test, label, transpose, x, bm=bm, bn=bn)
            out = call(test, label, transpose, x, bm=bm, bn=bn)
            expect_close(
                test,
                label,
                out,
                np.asarray(x).T,
                block=(bn, bm),
                seed=seed,
                kernel=pc,
                **rules.TRANSPOSE,
                hint=lambda: rules.transpose_hint(x, out, bm, bn),
            )
