"""`check(name, actual, expected, tol=...)`: the visible check every lab cell ends with.

The comparison (pallas_course.compare) is shared with the grader, so a student sees the same diagnosis in a
visible check as in a hidden test's message: shape or dtype mismatch, NaN (blocks never written), and otherwise
the largest error and the first wrong block.

This module is also a facade whose path the notebooks import: the comparison's names and LAB·1.4's visible checks,
cases and rules stay importable from here. The package's own modules and the grader import them from the modules
that define them (compare, lab_1_4_checks, lab_1_4_rules), never from here.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

# The comparison every check stands on, importable from here as before (notebooks: failure_text; the tests)
from pallas_course.compare import (  # noqa: F401 - re-exported
    PASSED,
    CheckFailure,
    Mismatch,
    compare,
    explained,
    failure_text,
    form_mismatch,
    max_error,
    show,
    show_traceback_folded,
    tolerance_phrase,
)
from pallas_course.errors import explain

# LAB·1.4's visible checks, importable from here as before (the notebooks import them from here)
from pallas_course.lab_1_4_checks import (  # noqa: F401 - re-exported
    check_block_choice,
    check_budget_line,
    check_fed_block,
    check_legal_or_not,
    check_pipeline_off,
    check_step_times,
    check_working_set,
    course_helpers,
)

# LAB·1.4's cases, rules and model matmul, importable from here as before
from pallas_course.lab_1_4_rules import (  # noqa: F401 - re-exported
    BLOCK_CHOICE_CASES,
    BLOCK_STEP,
    BUDGET_LINE_CASES,
    FED_BLOCK_CASES,
    LEGAL_OR_NOT_CASES,
    PIPELINE_OFF_CASES,
    SEARCH_LIMIT,
    STEP_CASES,
    legal_or_not_label,
    legal_or_not_problem,
    VMEM_HEADROOM,
    WORKING_SET_CASES,
    BudgetModel,
    ReportModel,
    StepDetail,
    StepModel,
    YourMatmul,
    block_choice_label,
    block_choice_problem,
    budget_entries,
    budget_line_label,
    budget_line_problem,
    fed_block_label,
    fed_block_problem,
    pipeline_off_families,
    pipeline_off_label,
    pipeline_off_problem,
    step_families,
    step_label,
    step_time_problem,
    visible_cases,
    working_set_families,
    working_set_label,
    working_set_problem,
)


def _suspect(actual: Any, suspects: Mapping[str, Any] | None, tol: float, atol: float | None) -> str | None:
    for label, wrong in (suspects or {}).items():
        if compare(actual, wrong, tol=tol, atol=atol) is None:
            return label
    return None


def check(
    name: str,
    actual: Any,
    expected: Any,
    tol: float = 0.0,
    *,
    block: Sequence[int] | None = None,
    atol: float | None = None,
    suspects: Mapping[str, Any] | None = None,
) -> None:
    """Print a one-line pass, or raise CheckFailure whose first lines say what is wrong and where.

    `actual` is the output, or better a zero-argument function producing it (`lambda: add(x, y)`): then it runs
    here under the grade's TPU interpret mode, and an error it raises becomes a short explanation (the raw
    traceback stays on the exception, `.raw`). `tol` is both the absolute and the relative tolerance (0 means
    exact) unless `atol` gives the absolute part. `suspects` maps a named mistake to the output that mistake
    would give: a failure that matches one says so first. `block` names the first wrong block (default 128 on
    each of the last two dims).
    """
    thunk = actual if callable(actual) else None
    if thunk is not None:
        try:
            from pallas_course.runtime import run_under_course_mode  # jax, on first use

            actual = run_under_course_mode(thunk)
        except CheckFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"{name}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw = explanation.raw
            failure.kind = explanation.kind
            raise failure from None
        _refuse_unlowerable(name, thunk)
    mismatch = compare(actual, expected, tol=tol, block=block, name=name, atol=atol)
    if mismatch is not None and mismatch.cause == "never-written-unknown" and thunk is not None:
        mismatch = compare(actual, expected, tol=tol, block=block, name=name, atol=atol, kernel=_one_call(thunk))
    if mismatch is not None:
        named = _suspect(actual, suspects, tol, atol) if mismatch.kind in ("values", "nan") else None
        message = mismatch.message if named is None else f"{name}: this is what {named} gives. {mismatch.message}"
        failure = CheckFailure(message)
        failure.kind = mismatch.kind if named is None else "suspect"
        raise failure
    print(
        f"✓ {name}: matches (max error {max_error(actual, expected):.3g}, {tolerance_phrase(tol, atol)}), "
        f"shape {tuple(actual.shape)} {np.dtype(actual.dtype)}, on this input"
    )


def _one_call(thunk: Callable[[], Any]) -> Any:
    """The one pallas_call `thunk` launches, traced (nothing runs), or None."""
    from pallas_course.kernel_trace import trace

    try:
        calls = trace(thunk).pallas_calls
    except Exception:  # noqa: BLE001 - it ran a moment ago; without a trace the message names both causes
        return None
    return calls[0] if len(calls) == 1 else None


def _refuse_unlowerable(name: str, thunk: Callable[[], Any]) -> None:
    """The grade compiles each kernel for a TPU (autograder.judge.compile_rule); what the TPU lowering has no rule for
    (erfc from gelu(approximate=False), sort, cumsum) fails there, so it fails here too, in the same words,
    read off the traced kernel (no libtpu needed). Interpret mode alone would run it and print ✓."""
    from pallas_course.errors import unlowered_in
    from pallas_course.kernel_trace import trace

    try:
        calls = trace(thunk).pallas_calls
    except Exception:  # noqa: BLE001 - it just ran; a trace that fails now says nothing about lowering
        return
    for pc in calls:
        prim = unlowered_in(pc.kernel_primitives())
        if prim is not None:
            explained = explain(
                NotImplementedError(f"Unimplemented primitive in Pallas TPU lowering for tc: {prim}"), locate=False
            )
            failure = CheckFailure(f"{name}: {explained.summary.removeprefix('✗ ')}")
            failure.kind = explained.kind
            raise failure
