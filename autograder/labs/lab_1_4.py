"""LAB·1.4 hidden checks: the pipeline switched off, per-step DMA and MXU time, the VMEM budget line, a block choice.

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml.

No expected number is typed in here. A matmul `pallas_call` is traced (nothing runs) and the course's models
answer (pallas_course.lab_1_4_rules' rules and pallas_course.cost_model's models, shared with the notebook's visible
checks): the schedule model says which blocks one steady-state grid step streams in, the kernel's own
`dot_general` gives its FLOPs, the legality model gives the VMEM working set and the chip's limits, and every
chip constant comes from course.yml through `pallas_course.chips`. The model matmul is the grader's own (the
reference kernels, autograder.labs.reference_kernels), so the judgement never rests on the student's code.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from autograder.labs.harness import TestFailure, call, call_alone, expect_close, fresh_seed, one_pallas_call, quiet
from pallas_course.lab_1_4_rules import (
    BLOCK_CHOICE_CASES,
    BUDGET_LINE_CASES,
    FED_BLOCK_CASES,
    LEGAL_OR_NOT_CASES,
    PIPELINE_OFF_CASES,
    STEP_CASES,
    WORKING_SET_CASES,
    block_choice_label,
    block_choice_problem,
    budget_line_label,
    budget_line_problem,
    fed_block_label,
    fed_block_problem,
    legal_or_not_label,
    legal_or_not_problem,
    pipeline_off_families,
    pipeline_off_label,
    pipeline_off_problem,
    step_families,
    step_label,
    step_time_problem,
    working_set_families,
    working_set_label,
    working_set_problem,
)
from pallas_course.cost_model import matmul_passes, steady_flops, steady_step, step_seconds
from pallas_course.kernel_trace import PallasCallInfo, trace
from pallas_course.legality import PallasCallReport, VmemBudget, check_pallas_call

# The rules and the cases live in pallas_course.lab_1_4_rules: the notebook's visible checks apply the same rules to the
# same cases (every one), judged by models read off the student's own matmul; here they are judged by the model
# matmul (autograder.labs.reference_kernels, never shipped).


def _dtype(dtype: Any) -> np.dtype:
    return np.dtype(dtype)


# ----------------------------------------------------------------------------------------------- the models


@functools.cache
def _model_call(
    m: int, k: int, n: int, bm: int, bn: int, bk: int, dtype: str, buffers: int = 2, acc_scratch: bool = False
) -> PallasCallInfo:
    """The lab's matmul as a traced pallas_call: `buffers` per BlockSpec (pl.Buffered), an f32 scratch if asked
    (the reference kernels, autograder.labs.reference_kernels)."""
    import jax
    import jax.numpy as jnp

    from autograder.labs.reference_kernels import configurable_matmul

    def matmul(a, b):  # traced only (interpret off): the pallas_call the TPU would compile
        return configurable_matmul(a, b, bm, bn, bk, buffers=buffers, acc_scratch=acc_scratch, interpret=False)

    dt = jnp.dtype(dtype)
    with quiet():
        (info,) = trace(matmul, jax.ShapeDtypeStruct((m, k), dt), jax.ShapeDtypeStruct((k, n), dt)).pallas_calls
    return info


@functools.cache
def _step(bm: int, bn: int, bk: int, dtype: str) -> tuple[int, int, str]:
    """(bytes, FLOPs, what moves) of one steady-state grid step, read off the depth-2 schedule of the matmul."""
    info = _model_call(bm, 3 * bk, bn, bm, bn, bk, dtype)  # grid (1, 1, 3): step 1 is steady state
    moved, what = steady_step(info)
    return moved, steady_flops(info)[0], what


def model_step_times(bm: int, bn: int, bk: int, dtype: Any, chip: str) -> tuple[float, float]:
    """(DMA seconds, MXU seconds) of one steady-state matmul step on one JAX device of `chip`, the dtype's MXU passes
    at the course's precision included (pallas_course.cost_model)."""
    moved, flops, _ = _step(bm, bn, bk, _dtype(dtype).name)
    return step_seconds(moved, flops, chip, matmul_passes(_dtype(dtype), chip))


def model_budget(
    bm: int, bn: int, bk: int, dtype: Any, chip: str, buffers: int = 2, acc_scratch: bool = False
) -> VmemBudget:
    """The legality model's VMEM budget of the matmul with these blocks (the array shape does not matter)."""
    return check_pallas_call(_model_call(bm, bk, bn, bm, bn, bk, _dtype(dtype).name, buffers, acc_scratch), chip).budget


def _report(m: int, n: int, k: int, bm: int, bn: int, bk: int, dtype: Any, chip: str) -> PallasCallReport:
    return check_pallas_call(_model_call(m, k, n, bm, bn, bk, _dtype(dtype).name), chip)


def _budget(bm: int, bn: int, bk: int, dtype: Any, chip: str, buffers: int) -> VmemBudget:
    return model_budget(bm, bn, bk, dtype, chip, buffers)


# ---------------------------------------------- each function graded alone, against the student's own helpers
# smallest_fed_block calls the student's step_times, largest_square_block their vmem_working_set, choose_blocks
# both. While one is graded, those helpers answer, in the jail, as the course's model of the notebook's own
# matmul (pallas_course.lab_1_4_rules.YourMatmul, what the notebook's visible checks use; the student's own helper where
# that model cannot answer), and the jail reports what they answered. Nothing the grader computed enters the jail.
# The answer passes when it is right by the grader's models, or right by the values its helpers gave: so one
# wrong helper costs only its own test, and a function wrong whatever its helpers say fails with the models' reason.
STAND_IN = ["step_times", "vmem_working_set"]


class _NoAnswer(LookupError):
    """The helpers gave no usable answer for a call the rule needs: judge by the models alone."""


def _real(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _norm(v: Any) -> Any:
    if isinstance(v, (bool, int, str, np.integer)) or v is None:
        return v if not isinstance(v, np.integer) else int(v)
    try:
        return _dtype(v).name
    except TypeError:
        return repr(v)


def _call_key(params: dict[str, Any]) -> tuple[Any, ...]:
    """A helper call's arguments in signature order (whatever the student named them), dtypes by name."""
    return tuple(_norm(v) for v in params.values())


def _their_step_times(rows: list[Any]) -> Any:
    """A StepModel answering with the values step_times gave during the call."""
    table = {_call_key(p): v for p, v in rows}

    def step_times(bm: int, bn: int, bk: int, dtype: Any, chip: str) -> tuple[float, float]:
        v = table.get((bm, bn, bk, _dtype(dtype).name, chip))
        if not (isinstance(v, (tuple, list)) and len(v) == 2 and all(_real(x) for x in v)):
            raise _NoAnswer((bm, bn, bk))
        return float(v[0]), float(v[1])

    return step_times


def _their_budget(rows: list[Any]) -> Any:
    """A BudgetModel whose working set is what vmem_working_set gave during the call (the chip's limits are the
    model's)."""
    import dataclasses

    from pallas_course.legality import VmemEntry

    table = {_call_key(p): v for p, v in rows}

    def budget(bm: int, bn: int, bk: int, dtype: Any, chip: str, buffers: int) -> VmemBudget:
        v = table.get((bm, bn, bk, _dtype(dtype).name, buffers, False))
        if not _real(v):
            raise _NoAnswer((bm, bn, bk))
        return dataclasses.replace(
            model_budget(bm, bn, bk, dtype, chip, buffers), entries=(VmemEntry("vmem_working_set", int(v), 1),)
        )

    return budget


def _judged(by_models: str | None, by_theirs: Callable[[], str | None]) -> str | None:
    """The models' objection, unless the answer is right by the student's own helper values."""
    if by_models is None:
        return None
    try:
        return None if by_theirs() is None else by_models
    except _NoAnswer:
        return by_models


# -------------------------------------------------------------------------------------------------- checks


def pipeline_off(matmul_pipeline_off: Callable[..., Any]) -> None:
    """One pallas_call with the matmul's grid and blocks, every BlockSpec single-buffered; right values."""
    import jax
    import jax.numpy as jnp

    test = "pipeline_off"
    calls = []
    for m, k, n, bm, bn, bk in PIPELINE_OFF_CASES:
        label = pipeline_off_label(m, k, n, bm, bn, bk)
        a, b = jax.ShapeDtypeStruct((m, k), jnp.float32), jax.ShapeDtypeStruct((k, n), jnp.float32)
        pc = one_pallas_call(test, label, matmul_pipeline_off, a, b, bm=bm, bn=bn, bk=bk)
        calls.append(pc)
        problem = pipeline_off_problem(label, pc, m, k, n, bm, bn, bk)
        if problem is not None:
            raise TestFailure(f"{test}: {problem}")
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for (m, k, n, bm, bn, bk), pc in zip(PIPELINE_OFF_CASES, calls):
        label = f"matmul_pipeline_off(a, b, bm={bm}, bn={bn}, bk={bk}) on ({m}, {k}) @ ({k}, {n}) float32"
        a = jnp.asarray(rng.standard_normal((m, k)).astype(np.float32))
        b = jnp.asarray(rng.standard_normal((k, n)).astype(np.float32))
        out = call(test, label, matmul_pipeline_off, a, b, bm=bm, bn=bn, bk=bk)
        expected = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)
        expect_close(test, label, out, expected, tol=1e-3, block=(bm, bn), seed=seed, kernel=pc)


def step_time_model(step_times: Callable[..., Any]) -> None:
    """(DMA s, MXU s) of one steady step: A and B blocks over HBM B/s, 2·bm·bn·bk over bf16 FLOP/s, per chip."""
    test = "step_time_model"
    for bm, bn, bk, dtype, chip in STEP_CASES:
        label = step_label(bm, bn, bk, dtype, chip)
        got = call(test, label, step_times, bm, bn, bk, _dtype(dtype), chip)
        problem = step_time_problem(got, bm, bn, bk, dtype, chip, lambda *c: _step(*c[:3], _dtype(c[3]).name))
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")


def fed_block(smallest_fed_block: Callable[..., Any]) -> None:
    """Smallest square block (multiple of 128) whose step computes at least as long as it copies, every chip."""
    test = "fed_block"
    for dtype, chip in FED_BLOCK_CASES:
        got, own = call_alone(
            test, fed_block_label(dtype, chip), smallest_fed_block, _dtype(dtype), chip, stand_in=STAND_IN
        )
        theirs = _their_step_times(own["step_times"])
        problem = _judged(
            fed_block_problem(got, dtype, chip, model_step_times), lambda: fed_block_problem(got, dtype, chip, theirs)
        )
        if problem is not None:
            raise TestFailure(f"{test}: {fed_block_label(dtype, chip)} {problem}")


def working_set(vmem_working_set: Callable[..., Any]) -> None:
    """Blocks x buffers x bytes for A, B and C, plus one f32 (bm, bn) accumulator when asked: the legality model."""
    test = "working_set"
    for bm, bn, bk, dtype, buffers, acc in WORKING_SET_CASES:
        label = working_set_label(bm, bn, bk, dtype, buffers, acc)
        got = call(test, label, vmem_working_set, bm, bn, bk, _dtype(dtype), buffers=buffers, acc_scratch=acc)
        problem = working_set_problem(
            got, bm, bn, bk, dtype, buffers, acc, model_budget(bm, bn, bk, dtype, "v5e", buffers, acc)
        )
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")


def budget_line(largest_square_block: Callable[..., Any]) -> None:
    """Largest square block (multiple of 128) whose working set fits the chip's default scoped VMEM limit."""
    test = "budget_line"
    for dtype, chip, buffers in BUDGET_LINE_CASES:
        label = budget_line_label(dtype, chip, buffers)
        got, own = call_alone(
            test, label, largest_square_block, _dtype(dtype), chip, buffers=buffers, stand_in=STAND_IN
        )
        theirs = _their_budget(own["vmem_working_set"])
        problem = _judged(
            budget_line_problem(got, dtype, chip, buffers, _budget),
            lambda: budget_line_problem(got, dtype, chip, buffers, theirs),
        )
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")


def block_choice(choose_blocks: Callable[..., Any]) -> None:
    """(bm, bn, bk) that divide the shapes, are legal BlockSpecs, feed the MXU and use <= 3/4 of the scoped limit;
    right by the models' step times and working sets, or by the values its helpers gave."""
    test = "block_choice"
    for m, n, k, dtype, chip in BLOCK_CHOICE_CASES:
        label = block_choice_label(m, n, k, dtype, chip)
        got, own = call_alone(test, label, choose_blocks, m, n, k, _dtype(dtype), chip, stand_in=STAND_IN)
        their_steps, their_budget = _their_step_times(own["step_times"]), _their_budget(own["vmem_working_set"])

        def their_report(
            m: int, n: int, k: int, bm: int, bn: int, bk: int, dtype: Any, chip: str, theirs: Any = their_budget
        ) -> PallasCallReport:
            import dataclasses

            return dataclasses.replace(
                _report(m, n, k, bm, bn, bk, dtype, chip), budget=theirs(bm, bn, bk, dtype, chip, 2)
            )

        problem = _judged(
            block_choice_problem(got, m, n, k, dtype, chip, model_step_times, _report),
            lambda: block_choice_problem(got, m, n, k, dtype, chip, their_steps, their_report),
        )
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")


def legal_or_not(blockspec_verdict: Callable[..., Any]) -> None:
    """Legal or not, and where it fails: the tiling table's verdict ("legal", "note", "compile", "lowering") for
    blocks of every dtype width, each verdict held to the real compiler by the course's tiling record."""
    test = "legal_or_not"
    for shape, block, dtype in LEGAL_OR_NOT_CASES:
        label = legal_or_not_label(shape, block, dtype)
        got = call(test, label, blockspec_verdict, shape, block, _dtype(dtype))
        problem = legal_or_not_problem(got, shape, block, dtype)
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")


def families(test: str) -> frozenset[str]:
    """The families of this test's cases: the notebook's visible checks must show each (tests/test_families.py).
    Each case is a family of its own (the notebook runs every one): its combination of dtype, chip, sizes,
    buffers and scratch."""
    return frozenset(
        _case_families(
            test,
            {
                "pipeline_off": PIPELINE_OFF_CASES,
                "step_time_model": STEP_CASES,
                "working_set": WORKING_SET_CASES,
                "fed_block": FED_BLOCK_CASES,
                "budget_line": BUDGET_LINE_CASES,
                "block_choice": BLOCK_CHOICE_CASES,
                "legal_or_not": LEGAL_OR_NOT_CASES,
            }.get(test, ()),
        )
    )


def _case_families(test: str, cases: Any) -> set[str]:
    named = {
        "pipeline_off": pipeline_off_families,
        "step_time_model": step_families,
        "working_set": working_set_families,
    }.get(test)
    found = {repr(tuple(case)) for case in cases}
    if named is not None:
        found |= set().union(*(named(*case) for case in cases))
    return found


def visible_families(test: str) -> frozenset[str]:
    """The families the notebook's visible checks show (pallas_course.lab_1_4_rules.visible_cases: its check cells'
    cases)."""
    from pallas_course.lab_1_4_rules import visible_cases

    return frozenset(_case_families(test, visible_cases(test)))
