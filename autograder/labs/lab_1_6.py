"""LAB·1.6 hidden checks: explicit copies (add_copies: x, y and the output in HBM, the kernel's own DMAs) and online
softmax's statistics (row_logsumexp: a running max and a rescaled running sum over feature blocks).

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml. The rules,
tolerances, inputs and diagnoses live in pallas_course.lab_1_6_rules (the notebook's visible checks apply the same,
pallas_course.lab_checks); here only the inputs are the grade's own: fresh each run, more sizes. A kernel whose
copies would hang (a wait no copy signals) or leave memory unwritten (a copy never waited) never runs: the judge
refuses it while rebuilding, in pallas_course.copy_rules' words.
"""

from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from autograder.labs.harness import TestFailure, call, expect_close, fresh_seed, one_pallas_call, random_array
from pallas_course import lab_1_6_rules as R
from pallas_course import rules

BF16 = ml_dtypes.bfloat16

# (shape, rows_per_block); None: the default (8). Square and rectangular, more than one block each.
COPIES_F32_CASES = [((64, 256), None), ((256, 256), 64), ((96, 384), 32)]
COPIES_BF16_CASES = [((64, 512), 16), ((128, 128), 32)]
# (shape, rows_per_block, cols_per_block); None, None: the defaults (8, 128). Several feature steps each.
LSE_F32_CASES = [((64, 512), None, None), ((96, 1024), 32, 256), ((128, 768), 16, 128)]
LSE_BF16_CASES = [((64, 512), 16, 128), ((32, 1024), 16, 256)]
LSE_SCHEDULE_CASES = [((64, 512), None, None), ((96, 1024), 32, 256), ((256, 384), 64, 128)]
STABILITY_CASES = [((64, 512), 16, 128), ((32, 1024), 8, 256)]


def families(test: str) -> frozenset[str]:
    """The families of this test's cases (lab_1_6_rules.*_families): the notebook's visible checks must show each."""
    found: set[str] = set()
    if test in ("add_copies_schedule", "add_copies_values"):
        for dtype, cases in ((np.float32, COPIES_F32_CASES), (BF16, COPIES_BF16_CASES)):
            for shape, r in cases:
                found |= R.copies_families(shape, dtype, r)
    elif test == "logsumexp_values":
        for dtype, lse_cases in ((np.float32, LSE_F32_CASES), (BF16, LSE_BF16_CASES)):
            for shape, r, c in lse_cases:
                found |= R.logsumexp_families(shape, dtype, r, c)
    elif test == "logsumexp_schedule":
        for shape, r, c in LSE_SCHEDULE_CASES:
            found |= R.logsumexp_families(shape, np.float32, r, c)
    elif test == "logsumexp_stability":
        for shape, r, c in STABILITY_CASES:
            found |= R.logsumexp_families(shape, np.float32, r, c, "large logits")
    return frozenset(found)


def _kw(**blocks: int | None) -> dict[str, int]:
    return {k: v for k, v in blocks.items() if v is not None}


def _label(fn: str, args: str, shape: tuple[int, int], dtype: Any, kw: dict[str, int]) -> str:
    extra = "".join(f", {k}={v}" for k, v in kw.items())
    return f"{fn}({args}{extra}) on {shape} {np.dtype(dtype)}"


def _fails(test: str, problem: str | None) -> None:
    if problem is not None:
        raise TestFailure(f"{test}: {problem}")


# ---------------------------------------------------------------------------------------------- add_copies


def add_copies_schedule(add_copies: Callable[..., Any]) -> None:
    """x, y and the output in HBM; VMEM buffers and DMA semaphores; three copies per step, waits after starts."""
    import jax

    test = "add_copies_schedule"
    for dtype, cases in ((np.float32, COPIES_F32_CASES), (BF16, COPIES_BF16_CASES)):
        for shape, r in cases:
            kw = _kw(rows_per_block=r)
            label = _label("add_copies", "x, y", shape, dtype, kw)
            x = jax.ShapeDtypeStruct(shape, dtype)
            pc = one_pallas_call(test, label, add_copies, x, x, **kw)
            _fails(test, R.copies_schedule_problem(label, pc, shape, dtype, r))


def add_copies_values(add_copies: Callable[..., Any]) -> None:
    """x + y: exact on f32 (a copy and one add), within one bf16 rounding on bf16."""
    test = "add_copies_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for dtype, cases, tols in ((np.float32, COPIES_F32_CASES, R.COPIES_F32), (BF16, COPIES_BF16_CASES, R.COPIES_BF16)):
        for shape, r in cases:
            kw = _kw(rows_per_block=r)
            label = _label("add_copies", "x, y", shape, dtype, kw)
            x, y = random_array(rng, shape, dtype), random_array(rng, shape, dtype)
            pc = one_pallas_call(test, label, add_copies, x, y, **kw)
            out = call(test, label, add_copies, x, y, **kw)
            expected = (rules.as_f64(x) + rules.as_f64(y)).astype(np.dtype(dtype))
            expect_close(
                test,
                label,
                out,
                expected,
                block=(r or R.DEFAULT_ROWS, shape[1]),
                seed=seed,
                kernel=pc,
                **tols,
                hint=lambda: R.copies_hint(x, y, out, r or R.DEFAULT_ROWS),
            )


# ---------------------------------------------------------------------------------------------- row_logsumexp


def logsumexp_schedule(row_logsumexp: Callable[..., Any]) -> None:
    """Grid (n/rows, d/cols), features last and "arbitrary", rows "parallel"; (rows, 1) f32 out; f32 scratch."""
    import jax

    test = "logsumexp_schedule"
    for shape, r, c in LSE_SCHEDULE_CASES:
        kw = _kw(rows_per_block=r, cols_per_block=c)
        label = _label("row_logsumexp", "x", shape, np.float32, kw)
        pc = one_pallas_call(test, label, row_logsumexp, jax.ShapeDtypeStruct(shape, np.float32), **kw)
        _fails(test, R.logsumexp_schedule_problem(label, pc, shape, r, c))


def _lse_case(
    test: str, row_logsumexp: Callable[..., Any], x: Any, shape: Any, dtype: Any, r: Any, c: Any, seed: int
) -> None:
    kw = _kw(rows_per_block=r, cols_per_block=c)
    label = _label("row_logsumexp", "x", shape, dtype, kw)
    pc = one_pallas_call(test, label, row_logsumexp, x, **kw)
    # a "parallel" feature axis runs its steps shuffled in interpret mode (NaN, wrong sums): named before the values
    _fails(test, rules.accumulated_axis_parallel_problem(label, pc, "the running max and sum"))
    out = call(test, label, row_logsumexp, x, **kw)
    expect_close(
        test,
        label,
        out,
        R.logsumexp_ref(x).astype(np.float32),
        block=(r or R.DEFAULT_ROWS, 1),
        seed=seed,
        kernel=pc,
        **R.LOGSUMEXP,
        hint=lambda: R.logsumexp_hint(x, out, r or R.DEFAULT_ROWS, c or R.DEFAULT_COLS),
    )


def logsumexp_values(row_logsumexp: Callable[..., Any]) -> None:
    """log Σ exp of every row against float64, f32 and bf16 inputs, rows whose max grows and rows whose max is first."""
    import jax.numpy as jnp

    test = "logsumexp_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for dtype, cases in ((np.float32, LSE_F32_CASES), (BF16, LSE_BF16_CASES)):
        for shape, r, c in cases:
            x = jnp.asarray(R.logsumexp_inputs(rng, shape, dtype))
            _lse_case(test, row_logsumexp, x, shape, dtype, r, c, seed)


def logsumexp_stability(row_logsumexp: Callable[..., Any]) -> None:
    """f32 logits around +1e4 and -1e4: exp overflows without the max subtracted, a max started at 0 underflows."""
    import jax.numpy as jnp

    test = "logsumexp_stability"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for shape, r, c in STABILITY_CASES:
        x = jnp.asarray(rules.large_logits(rng, shape))
        _lse_case(test, row_logsumexp, x, shape, np.float32, r, c, seed)
