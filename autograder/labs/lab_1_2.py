"""LAB·1.2 hidden checks: matmul, matmul_acc, matmul_gelu.

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml.
References are float64 NumPy products of the (already rounded) inputs.
"""
from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from autograder.harness import (TestFailure, as_f64, call, expect_close, expect_equal, fresh_seed,
                                one_pallas_call, random_array)
from pallas_course.kernel_trace import PallasCallInfo

# ((M, K, N), bm, bn, bk): M, K, N all different, several block sizes, more than one block on every axis.
CASES = [((256, 512, 384), 128, 128, 128), ((256, 512, 384), 128, 128, 256), ((512, 256, 256), 256, 128, 128)]
# f32: a K-term dot in f32 is off from float64 by ~sqrt(K)·2^-24·|terms|, far below 1e-3 absolute and relative
# at K ≤ 512 with N(0, 1) inputs (|C| ~ 20); a missing or misplaced init or a wrong block misses by O(1).
F32_TOL = 1e-3
# Long K, small M and N: 16 K steps, where a bf16 running sum drifts by several bf16 roundings.
ACC_CASE = ((256, 2048, 256), 128, 128, 128)


def _schedule(test: str, label: str, pc: PallasCallInfo, shape: tuple[int, int, int], bm: int, bn: int, bk: int) -> None:
    m, k, n = shape
    grid = (m // bm, n // bn, k // bk)
    if pc.grid != grid and sorted(pc.grid) == sorted(grid) and pc.grid[-1] != k // bk:
        raise TestFailure(f"{test}: the grid of {label} is {pc.grid}; K must be the last (innermost) grid axis, "
                          f"{grid}, so each output block's K steps run back to back while it stays in VMEM")
    expect_equal(test, f"the grid of {label}", pc.grid, grid, "one step per (bm, bn) output block and bk slice "
                 "of K: grid=(m // bm, n // bn, k // bk)")
    if len(pc.inputs) != 2 or len(pc.outputs) != 1:
        raise TestFailure(f"{test}: {label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; "
                          "expected in_specs for a and b and one out_specs")
    a_spec, b_spec = pc.inputs
    o_spec = pc.outputs[0]
    expect_equal(test, f"the block of a in {label}", a_spec.block_shape, (bm, bk), "a is carved into (bm, bk) blocks")
    expect_equal(test, f"the block of b in {label}", b_spec.block_shape, (bk, bn), "b is carved into (bk, bn) blocks")
    expect_equal(test, f"the output block of {label}", o_spec.block_shape, (bm, bn), "C is carved into (bm, bn) blocks")
    for point in pc.grid_points():
        i, j, kk = point
        for spec, want, name in ((a_spec, (i, kk), "a"), (b_spec, (kk, j), "b"), (o_spec, (i, j), "the output")):
            got = spec.block_index(*point)
            if got != want:
                raise TestFailure(f"{test}: {label}: the index map of {name} sends grid step {point} to block {got}; "
                                  f"step (i, j, k) needs block {want} of {name}")


def _inputs(rng: np.random.Generator, shape: tuple[int, int, int], dtype: Any) -> tuple[Any, Any]:
    m, k, n = shape
    return random_array(rng, (m, k), dtype), random_array(rng, (k, n), dtype)


def _check_schedules(test: str, name: str, fn: Callable[..., Any], dtype: str) -> list[tuple[str, PallasCallInfo]]:
    """Trace `fn` (nothing runs) at every case and check matmul's schedule; returns (label, call) pairs."""
    import jax

    checked = []
    for shape, bm, bn, bk in CASES:
        m, k, n = shape
        label = f"{name}(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} {dtype}"
        a, b = jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype)
        pc = one_pallas_call(test, label, fn, a, b, bm=bm, bn=bn, bk=bk)
        _schedule(test, label, pc, shape, bm, bn, bk)
        checked.append((label, pc))
    return checked


def matmul_schedule(matmul: Callable[..., Any]) -> None:
    """Grid (M/bm, N/bn, K/bk) with K innermost; blocks (bm, bk), (bk, bn) -> (bm, bn) at (i, k), (k, j) -> (i, j)."""
    _check_schedules("matmul_schedule", "matmul", matmul, "float32")


def _values(test: str, name: str, fn: Callable[..., Any], epilogue: Callable[[np.ndarray], np.ndarray]) -> None:
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for shape, bm, bn, bk in CASES:
        m, k, n = shape
        label = f"{name}(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} float32"
        a, b = _inputs(rng, shape, np.float32)
        one_pallas_call(test, label, fn, a, b, bm=bm, bn=bn, bk=bk)
        out = call(test, label, fn, a, b, bm=bm, bn=bn, bk=bk)
        expected = epilogue(as_f64(a) @ as_f64(b)).astype(np.float32)
        expect_close(test, label, out, expected, tol=F32_TOL, block=(bm, bn), seed=seed)


def matmul_f32(matmul: Callable[..., Any]) -> None:
    """f32 values at several shapes and block sizes, under TPU interpret mode (a K-outermost grid fails)."""
    _values("matmul_f32", "matmul", matmul, lambda c: c)


def matmul_acc_schedule(matmul_acc: Callable[..., Any]) -> None:
    """One pallas_call with matmul's schedule; bf16 out; the cast happens inside the kernel."""
    test = "matmul_acc_schedule"
    for label, pc in _check_schedules(test, "matmul_acc", matmul_acc, "bfloat16"):
        expect_equal(test, f"the output dtype of {label}", str(pc.outputs[0].dtype), "bfloat16",
                     "the output keeps the inputs' dtype; cast the f32 accumulator on the last K step")


def _bf16_steps(out: np.ndarray, exact: np.ndarray, k: int) -> np.ndarray:
    """|out - exact| in bf16 steps (spacing of bf16 numbers, 8 significant bits) at |exact|.

    Values far below the typical magnitude sqrt(K) of a product of N(0, 1) inputs are measured at sqrt(K)/16
    instead: there even an f32 sum's absolute error (~sqrt(K)·2^-24) would be many tiny steps.
    """
    mag = np.maximum(np.abs(exact), np.sqrt(k) / 16)
    return np.abs(out - exact) / np.exp2(np.floor(np.log2(mag)) - 7)


def matmul_acc_f32_accumulator(matmul_acc: Callable[..., Any]) -> None:
    """bf16 in and out, 16 K steps: every value within one bf16 step of the exact product.

    An f32 running sum rounded once is at most one bf16 step from the exact value. A bf16 running sum (the
    seed's `matmul` with bf16 inputs), or per-step bf16 dots (no preferred_element_type), round 16 times and
    drift further; comparing against this tight bound tells them apart.
    """
    test = "matmul_acc_f32_accumulator"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    shape, bm, bn, bk = ACC_CASE
    m, k, n = shape
    label = f"matmul_acc(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} bfloat16"
    a, b = _inputs(rng, shape, ml_dtypes.bfloat16)
    pc = one_pallas_call(test, label, matmul_acc, a, b, bm=bm, bn=bn, bk=bk)
    # XLA on a CPU may skip a bf16 rounding between a dot and an f32 add (excess precision), so a dot
    # that returns bf16 can look right here and still round every partial product on a TPU: read it.
    for dtype in pc.kernel_out_dtypes("dot_general"):
        if dtype != "float32":
            raise TestFailure(f"{test}: the dot in the kernel of {label} returns {dtype}, so every partial "
                              "product is rounded before it is added: pass preferred_element_type=jnp.float32")
    out = call(test, label, matmul_acc, a, b, bm=bm, bn=bn, bk=bk)
    exact = as_f64(a) @ as_f64(b)
    # Gross errors first (NaN, wrong blocks: off by ~sqrt(K)), with the usual diagnosis; a bf16 running sum
    # drifts by far less than sqrt(K)/8, so it reaches the tight bound below and its own message.
    expect_close(test, label, out, exact.astype(ml_dtypes.bfloat16), tol=0.0, atol=float(np.sqrt(k)) / 8,
                 block=(bm, bn), seed=seed)
    steps = _bf16_steps(as_f64(out), exact, k)
    worst = float(steps.max())
    if worst > 1.0:
        frac = float((steps > 1.0).mean())
        raise TestFailure(f"{test}: {label}: {frac:.1%} of values are more than one bf16 step from the exact "
                          f"product (worst {worst:.1f} steps): the running sum is being rounded to bf16. Keep it "
                          "in an f32 VMEM scratch (with preferred_element_type=jnp.float32 on the dot) and cast "
                          f"once on the last K step [inputs from seed {seed}]")


def _gelu(x: np.ndarray) -> np.ndarray:
    """jax.nn.gelu's default: the tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def matmul_gelu_values(matmul_gelu: Callable[..., Any]) -> None:
    """jax.nn.gelu(a @ b) at several shapes and block sizes (a GELU on every K step acts on partial sums)."""
    _values("matmul_gelu_values", "matmul_gelu", matmul_gelu, _gelu)


def matmul_gelu_fused(matmul_gelu: Callable[..., Any]) -> None:
    """One pallas_call; no GELU (or any other work) outside it; the GELU's tanh is inside the kernel."""
    test = "matmul_gelu_fused"
    for label, pc in _check_schedules(test, "matmul_gelu", matmul_gelu, "float32"):
        # One rule everywhere: the tanh form (jax.nn.gelu's default) is asked for; the exact form
        # (approximate=False: erfc, or erf by hand) is accepted too, and both are within the values' tolerance.
        if not {"tanh", "erf", "erfc"} & pc.kernel_primitives():
            raise TestFailure(f"{test}: the kernel of {label} computes no GELU (no tanh, erf or erfc inside it); "
                              "apply jax.nn.gelu to the accumulator on the last K step")
