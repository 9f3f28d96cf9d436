"""LAB·1.2 hidden checks: rowmax, rowmax_dense, matmul, matmul_acc, matmul_gelu.

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml.
References are float64 NumPy products of the (already rounded) inputs.
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
from pallas_course.kernel_trace import PallasCallInfo

# The rules, tolerances and families live in pallas_course.rules (the notebook's visible checks apply the same ones,
# pallas_course.lab_checks); here only the inputs are the grade's own: fresh each run, more sizes.
# ((M, K, N), bm, bn, bk): M, K, N all different, several block sizes, more than one block on every axis.
CASES = [((256, 512, 384), 128, 128, 128), ((256, 512, 384), 128, 128, 256), ((512, 256, 256), 256, 128, 128)]
F32_TOL = rules.MATMUL_F32["tol"]
# Long K, small M and N: 16 K steps, where a bf16 running sum drifts by several bf16 roundings.
ACC_CASE = ((256, 2048, 256), 128, 128, 128)
# rowmax: ((m, n), bm, bn): more than one block on both axes, the grid square and not, bm = 8 (the default) and not.
ROWMAX_CASES = [((64, 1024), 8, 256), ((128, 2048), 32, 512)]


def families(test: str) -> frozenset[str]:
    """The families of this test's cases (rules.matmul_families): the notebook's visible checks must show each."""
    if test.startswith("rowmax"):
        return frozenset().union(*(rules.rowmax_families(shape, bm, bn, "float32") for shape, bm, bn in ROWMAX_CASES))
    if test == "matmul_precision":  # f32 and bf16 (the lab runs matmul on both)
        return frozenset().union(*(rules.matmul_families(*CASES[0], dtype) for dtype in ("float32", "bfloat16")))
    dtype = "bfloat16" if test.startswith("matmul_acc") else "float32"
    cases = [ACC_CASE] if test == "matmul_acc_f32_accumulator" else CASES
    if test == "matmul_gelu_fused":
        cases = [*cases, rules.GELU_PROBE]
    found: set[str] = set()
    for shape, bm, bn, bk in cases:
        found |= rules.matmul_families(shape, bm, bn, bk, dtype)
    return frozenset(found)


def _fails(test: str, problem: str | None) -> None:
    if problem is not None:
        raise TestFailure(f"{test}: {problem}")


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
        _fails(test, rules.matmul_schedule_problem(label, pc, shape, bm, bn, bk))
        checked.append((label, pc))
    return checked


def _rowmax_label(m: int, n: int, bm: int, bn: int) -> str:
    return f"rowmax(x, bm={bm}, bn={bn}) on ({m}, {n}) float32"


def rowmax_schedule(rowmax: Callable[..., Any]) -> None:
    """Grid (m/bm, n/bn), the reduced axis last and not "parallel"; x block (bm, bn) at (i, j) -> (bm, 1) at (i, 0)."""
    import jax

    test = "rowmax_schedule"
    for (m, n), bm, bn in ROWMAX_CASES:
        label = _rowmax_label(m, n, bm, bn)
        pc = schedule_call(test, label, rowmax, jax.ShapeDtypeStruct((m, n), "float32"), bm=bm, bn=bn)
        _fails(test, rules.rowmax_schedule_problem(label, pc, (m, n), bm, bn))


def rowmax_values(rowmax: Callable[..., Any]) -> None:
    """Exact f32 row maxima at several shapes and blocks, half the rows all negative (a running max started at 0
    fails them), under TPU interpret mode (a missing init reads NaN; the reduced axis first revisits the output)."""
    import jax.numpy as jnp

    test = "rowmax_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for (m, n), bm, bn in ROWMAX_CASES:
        label = _rowmax_label(m, n, bm, bn)
        x = jnp.asarray(rules.rowmax_inputs(rng, (m, n)))
        pc = one_pallas_call(test, label, rowmax, x, bm=bm, bn=bn)
        out = call(test, label, rowmax, x, bm=bm, bn=bn)
        expected = as_f64(x).max(axis=1, keepdims=True).astype(np.float32)
        expect_close(
            test,
            label,
            out,
            expected,
            block=(bm, 1),
            seed=seed,
            kernel=pc,
            **rules.ROWMAX,
            hint=lambda: rules.rowmax_hint(x, out, bn, bm),
        )


def _rowmax_dense_label(m: int, n: int, bm: int, bn: int) -> str:
    return f"rowmax_dense(x, bm={bm}, bn={bn}) on ({m}, {n}) float32"


def rowmax_dense_schedule(rowmax_dense: Callable[..., Any]) -> None:
    """rowmax's grid and x blocks, a lane-dense (bm, 128) output block at (i, 0), the reduced axis last and not
    "parallel", and no reduction across lanes on every column step (read off the trace: outside any pl.when)."""
    import jax

    test = "rowmax_dense_schedule"
    for (m, n), bm, bn in ROWMAX_CASES:
        label = _rowmax_dense_label(m, n, bm, bn)
        pc = one_pallas_call(test, label, rowmax_dense, jax.ShapeDtypeStruct((m, n), "float32"), bm=bm, bn=bn)
        _fails(test, rules.rowmax_dense_schedule_problem(label, pc, (m, n), bm, bn))


def rowmax_dense_values(rowmax_dense: Callable[..., Any]) -> None:
    """Each row's exact f32 max in all 128 lanes of its row, at several shapes and blocks, half the rows all
    negative, under TPU interpret mode."""
    import jax.numpy as jnp

    test = "rowmax_dense_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for (m, n), bm, bn in ROWMAX_CASES:
        label = _rowmax_dense_label(m, n, bm, bn)
        x = jnp.asarray(rules.rowmax_inputs(rng, (m, n)))
        pc = one_pallas_call(test, label, rowmax_dense, x, bm=bm, bn=bn)
        out = call(test, label, rowmax_dense, x, bm=bm, bn=bn)
        expect_close(
            test,
            label,
            out,
            rules.rowmax_dense_ref(x).astype(np.float32),
            block=(bm, rules.LANES),
            seed=seed,
            kernel=pc,
            **rules.ROWMAX_DENSE,
            hint=lambda: rules.rowmax_dense_hint(x, out, bn),
        )


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
        pc = one_pallas_call(test, label, fn, a, b, bm=bm, bn=bn, bk=bk)
        # K marked "parallel" runs in a shuffled order under interpret mode: its values are named by their cause
        _fails(test, rules.accumulated_axis_parallel_problem(label, pc, "the same output block"))
        out = call(test, label, fn, a, b, bm=bm, bn=bn, bk=bk)
        expected = epilogue(as_f64(a) @ as_f64(b)).astype(np.float32)
        expect_close(
            test,
            label,
            out,
            expected,
            block=(bm, bn),
            seed=seed,
            kernel=pc,
            **rules.MATMUL_F32,
            hint=lambda: rules.matmul_hint(a, b, out, bk, epilogue, blocks=(bm, bn)),
        )


def matmul_f32(matmul: Callable[..., Any]) -> None:
    """f32 values at several shapes and block sizes, under TPU interpret mode (a K-outermost grid fails)."""
    _values("matmul_f32", "matmul", matmul, lambda c: c)


def matmul_precision(matmul: Callable[..., Any]) -> None:
    """Every dot in the f32 kernel asks for precision HIGHEST, read off the trace (interpret mode on a CPU multiplies
    in full f32 whatever the dot asks; a TPU's MXU at the default precision rounds f32 inputs to bf16); on bf16 inputs
    none asks HIGHEST, and the kernel compiles (the TPU compiler refuses HIGHEST on bf16: "Bad lhs type")."""
    import jax

    test = "matmul_precision"
    (m, k, n), bm, bn, bk = CASES[0]
    label = f"matmul(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} float32"
    a, b = jax.ShapeDtypeStruct((m, k), "float32"), jax.ShapeDtypeStruct((k, n), "float32")
    pc = one_pallas_call(test, label, matmul, a, b, bm=bm, bn=bn, bk=bk)
    if not pc.dot_precisions:
        raise TestFailure(
            f"{test}: the kernel of {label} calls no jnp.dot: the matmul's product is the MXU's, "
            "jnp.dot(a_ref[...], b_ref[...], ...)"
        )
    _fails(test, rules.f32_precision_problem(label, pc))
    # the lab runs matmul on bf16 too: traced and compiled there (course.yml's compile rule lists this test), where
    # HIGHEST is refused by the TPU compiler and run by interpret mode
    seed = fresh_seed()
    label = f"matmul(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} bfloat16"
    a, b = _inputs(np.random.default_rng(seed), (m, k, n), ml_dtypes.bfloat16)
    pc = one_pallas_call(test, label, matmul, a, b, bm=bm, bn=bn, bk=bk)
    _fails(test, rules.matmul_precision_problem(label, pc, "bfloat16"))
    call(test, label, matmul, a, b, bm=bm, bn=bn, bk=bk)


def matmul_acc_schedule(matmul_acc: Callable[..., Any]) -> None:
    """One pallas_call with matmul's schedule; bf16 out; the cast happens inside the kernel."""
    test = "matmul_acc_schedule"
    for label, pc in _check_schedules(test, "matmul_acc", matmul_acc, "bfloat16"):
        _fails(test, rules.out_dtype_problem(label, pc, "bfloat16"))


def matmul_acc_semantics(matmul_acc: Callable[..., Any]) -> None:
    """dimension_semantics ("parallel", "parallel", "arbitrary"), read off the trace (nothing runs)."""
    import jax

    test = "matmul_acc_semantics"
    (m, k, n), bm, bn, bk = CASES[0]
    label = f"matmul_acc(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} bfloat16"
    a, b = jax.ShapeDtypeStruct((m, k), "bfloat16"), jax.ShapeDtypeStruct((k, n), "bfloat16")
    pc = one_pallas_call(test, label, matmul_acc, a, b, bm=bm, bn=bn, bk=bk)
    _fails(test, rules.matmul_semantics_problem(label, pc))


def matmul_acc_f32_accumulator(matmul_acc: Callable[..., Any]) -> None:
    """bf16 in and out, 16 K steps: every value within one bf16 step of the exact product.

    An f32 running sum rounded once is at most one bf16 step from the exact value. A bf16 running sum (the
    seed's `matmul` with bf16 inputs), a bf16 scratch, or per-step bf16 dots (no preferred_element_type), round
    16 times and drift further; comparing against this tight bound tells them apart.
    """
    test = "matmul_acc_f32_accumulator"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    shape, bm, bn, bk = ACC_CASE
    m, k, n = shape
    label = f"matmul_acc(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} bfloat16"
    a, b = _inputs(rng, shape, ml_dtypes.bfloat16)
    pc = one_pallas_call(test, label, matmul_acc, a, b, bm=bm, bn=bn, bk=bk)
    # K marked "parallel" runs in a shuffled order under interpret mode: its values are named by their cause
    _fails(test, rules.accumulated_axis_parallel_problem(label, pc, "the same accumulator"))
    _fails(test, rules.f32_accumulator_problem(label, pc) or rules.f32_dot_problem(label, pc))
    out = call(test, label, matmul_acc, a, b, bm=bm, bn=bn, bk=bk)
    exact = as_f64(a) @ as_f64(b)
    # Gross errors first (NaN, wrong blocks: off by ~sqrt(K)), with the usual diagnosis; a bf16 running sum
    # drifts by far less than sqrt(K)/8, so it reaches the tight bound below and its own message.
    expect_close(
        test,
        label,
        out,
        exact.astype(ml_dtypes.bfloat16),
        tol=0.0,
        atol=float(np.sqrt(k)) / 8,
        block=(bm, bn),
        seed=seed,
        kernel=pc,
        hint=lambda: rules.matmul_hint(a, b, out, bk, tol=rules.MATMUL_ACC_HINT_TOL, blocks=(bm, bn)),
    )
    problem = rules.bf16_accumulation_problem(label, out, exact, k)
    if problem:
        raise TestFailure(f"{test}: {problem} [inputs from seed {seed}]")


def matmul_gelu_values(matmul_gelu: Callable[..., Any]) -> None:
    """jax.nn.gelu(a @ b) at several shapes and block sizes (a GELU on every K step acts on partial sums)."""
    _values("matmul_gelu_values", "matmul_gelu", matmul_gelu, rules.gelu)


def matmul_gelu_fused(matmul_gelu: Callable[..., Any]) -> None:
    """One pallas_call; no GELU (or any other work) outside it; and its epilogue computes a GELU: judged by its values
    with b the identity (rules.GELU_PROBE), so the tanh form, the exact form and any rewrite of either pass."""
    test = "matmul_gelu_fused"
    _check_schedules(test, "matmul_gelu", matmul_gelu, "float32")
    seed = fresh_seed()
    (m, k, n), bm, bn, bk = rules.GELU_PROBE
    a, b = rules.gelu_probe_inputs(np.random.default_rng(seed))
    label = f"matmul_gelu(a, b, bm={bm}, bn={bn}, bk={bk}) on {m}×{k} @ {k}×{n} float32, b the identity"
    import jax.numpy as jnp

    args = (jnp.asarray(a), jnp.asarray(b))
    one_pallas_call(test, label, matmul_gelu, *args, bm=bm, bn=bn, bk=bk)
    out = call(test, label, matmul_gelu, *args, bm=bm, bn=bn, bk=bk)
    problem = rules.gelu_epilogue_problem(label, a, out)
    if problem:
        raise TestFailure(f"{test}: {problem} [inputs from seed {seed}]")
