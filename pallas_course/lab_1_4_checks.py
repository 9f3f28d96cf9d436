"""The notebook's visible checks of LAB·1.4's helpers and of matmul_pipeline_off (check_fed_block, ...,
check_pipeline_off): the grade's rules (pallas_course.lab_1_4_rules) on every case the grade runs, with the course's
models of the student's matmul standing in for the helpers a function calls. The first failure raises a
CheckFailure that says what is wrong; a pass prints one line.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from pallas_course.compare import PASSED, CheckFailure, compare, explained
from pallas_course.errors import explain
from pallas_course.lab_1_4_rules import (
    BLOCK_CHOICE_CASES,
    BUDGET_LINE_CASES,
    FED_BLOCK_CASES,
    LEGAL_OR_NOT_CASES,
    PIPELINE_OFF_CASES,
    legal_or_not_label,
    legal_or_not_problem,
    STEP_CASES,
    WORKING_SET_CASES,
    YourMatmul,
    block_choice_label,
    block_choice_problem,
    budget_line_label,
    budget_line_problem,
    fed_block_label,
    fed_block_problem,
    pipeline_off_label,
    pipeline_off_problem,
    step_label,
    step_time_problem,
    working_set_label,
    working_set_problem,
)


@contextlib.contextmanager
def course_helpers(fn: Callable[..., Any], helpers: Mapping[str, Callable[..., Any]]) -> Iterator[None]:
    """While `fn` runs: each helper named in `helpers` that `fn`'s module (the notebook) defines is the course's
    model instead (the grade does the same with reference values), so `fn` is checked on its own."""
    namespace = getattr(fn, "__globals__", {})
    saved = {n: namespace[n] for n in helpers if callable(namespace.get(n))}
    try:
        namespace.update({n: helpers[n] for n in saved})
        yield
    finally:
        namespace.update(saved)


def _check_cases(
    name: str,
    fn: Callable[..., Any],
    cases: Sequence[tuple[Any, ...]],
    label: Callable[..., str],
    problem: Callable[..., str | None],
    helpers: Mapping[str, Callable[..., Any]],
    call: Callable[..., Any],
    judged: str | None = None,
) -> None:
    """Each case: `call(fn, *case)` with the course's `helpers`, then the grade's rule, `problem(got, *case)`."""
    import ml_dtypes  # noqa: F401 - the cases name bfloat16

    names = list(helpers)
    alone = (
        f"checked on its own: the course's {' and '.join(names)} (read off your matmul) stand"
        f"{'s' if len(names) == 1 else ''} in for yours here, as in the grade"
        if names
        else judged or "judged by the course's models of your matmul, as the grade judges it by its own"
    )
    for case in cases:
        where = label(*case)
        try:
            with course_helpers(fn, helpers):
                got = call(fn, *case)
        except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"{name}: {where}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw, failure.kind = explanation.raw, explanation.kind
            raise failure from None
        wrong = problem(got, *case)
        if wrong is not None:
            failure = CheckFailure(f"{name}: {where} {wrong}\n({alone})")
            failure.kind = "values"
            raise failure
    done = "visible checks passed" if judged else PASSED  # a judged-only check runs every case the grade does
    print(f"✓ {name}: right in {len(cases)} cases ({'; '.join(label(*c) for c in cases)}), {alone}; {done}")


def check_fed_block(smallest_fed_block: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's fed_block rule on the visible cases; your matmul's modelled step times stand in for step_times."""
    model = YourMatmul(matmul)
    _check_cases(
        "smallest_fed_block",
        smallest_fed_block,
        FED_BLOCK_CASES,
        fed_block_label,
        lambda got, dtype, chip: fed_block_problem(got, dtype, chip, model.step_times),
        {"step_times": model.step_times},
        lambda fn, dtype, chip: fn(np.dtype(dtype), chip),
    )


def check_budget_line(largest_square_block: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's budget_line rule on the visible cases; your matmul's modelled working set stands in."""
    model = YourMatmul(matmul)
    _check_cases(
        "largest_square_block",
        largest_square_block,
        BUDGET_LINE_CASES,
        budget_line_label,
        lambda got, dtype, chip, buffers: budget_line_problem(got, dtype, chip, buffers, model.budget),
        {"vmem_working_set": model.working_set},
        lambda fn, dtype, chip, buffers: fn(np.dtype(dtype), chip, buffers=buffers),
    )


def check_block_choice(choose_blocks: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's block_choice rules on the visible cases; your matmul's models stand in for both helpers."""
    model = YourMatmul(matmul)
    _check_cases(
        "choose_blocks",
        choose_blocks,
        BLOCK_CHOICE_CASES,
        block_choice_label,
        lambda got, m, n, k, dtype, chip: block_choice_problem(
            got, m, n, k, dtype, chip, model.step_times, model.report
        ),
        {"step_times": model.step_times, "vmem_working_set": model.working_set},
        lambda fn, m, n, k, dtype, chip: fn(m, n, k, np.dtype(dtype), chip),
    )


def check_legal_or_not(blockspec_verdict: Callable[..., Any]) -> None:
    """The grade's legal_or_not rule on every case it runs: the verdict of the course's tiling table."""
    _check_cases(
        "blockspec_verdict",
        blockspec_verdict,
        LEGAL_OR_NOT_CASES,
        legal_or_not_label,
        legal_or_not_problem,
        {},
        lambda fn, shape, block, dtype: fn(shape, block, np.dtype(dtype)),
        judged="judged by the course's tiling table, the cases the grade runs",
    )


def check_step_times(step_times: Callable[..., Any], matmul: Callable[..., Any] | None = None) -> None:
    """The grade's step_time_model rule on the visible cases, judged against the lab's matmul (one dot a step, the A and
    B blocks streamed: cost_model.matmul_step_detail), as the grade judges it: step_times alone, never your kernel's
    faults (`matmul` is accepted and not used)."""
    from pallas_course.cost_model import matmul_step_detail

    _check_cases(
        "step_times",
        step_times,
        STEP_CASES,
        step_label,
        lambda got, bm, bn, bk, dtype, chip: step_time_problem(got, bm, bn, bk, dtype, chip, matmul_step_detail),
        {},
        lambda fn, bm, bn, bk, dtype, chip: fn(bm, bn, bk, np.dtype(dtype), chip),
        judged="judged against the lab's matmul (one dot a step), as the grade judges it",
    )


def check_working_set(vmem_working_set: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's working_set rule on the visible cases, judged by the legality model of your matmul (plus the
    f32 scratch accumulator where the case asks for one)."""
    model = YourMatmul(matmul)
    _check_cases(
        "vmem_working_set",
        vmem_working_set,
        WORKING_SET_CASES,
        working_set_label,
        lambda got, bm, bn, bk, dtype, buffers, acc: working_set_problem(
            got, bm, bn, bk, dtype, buffers, acc, model.budget(bm, bn, bk, dtype, "v5e", buffers, acc)
        ),
        {},
        lambda fn, bm, bn, bk, dtype, buffers, acc: fn(bm, bn, bk, np.dtype(dtype), buffers=buffers, acc_scratch=acc),
    )


def check_pipeline_off(matmul_pipeline_off: Callable[..., Any]) -> None:
    """The grade's pipeline_off rules on the visible cases: the trace (one pallas_call, the matmul's grid and blocks,
    pl.Buffered(1) everywhere), then the values against a float64 product, under the grade's interpret mode."""
    import jax
    import jax.numpy as jnp

    from pallas_course import graded_compile
    from pallas_course.kernel_trace import trace
    from pallas_course.rules import MATMUL_F32, one_kernel_problem
    from pallas_course.runtime import run_under_course_mode

    def fail(message: str, kind: str, raw: str = "") -> CheckFailure:
        failure = CheckFailure(f"matmul_pipeline_off: {message}")
        failure.kind, failure.raw = kind, raw
        return failure

    compiled: list[str] = []
    graded_compile.prefetch(
        [
            (
                functools.partial(matmul_pipeline_off, bm=bm, bn=bn, bk=bk),
                [jax.ShapeDtypeStruct((m, k), jnp.float32), jax.ShapeDtypeStruct((k, n), jnp.float32)],
                graded_compile.rule_chips(["pipeline_off"]),
            )
            for m, k, n, bm, bn, bk in PIPELINE_OFF_CASES
        ]
    )
    for m, k, n, bm, bn, bk in PIPELINE_OFF_CASES:
        label = pipeline_off_label(m, k, n, bm, bn, bk)
        rng = np.random.default_rng([20, m, k, n])
        a = jnp.asarray(rng.standard_normal((m, k)).astype(np.float32))
        b = jnp.asarray(rng.standard_normal((k, n)).astype(np.float32))
        try:
            t = trace(matmul_pipeline_off, a, b, bm=bm, bn=bn, bk=bk)
            problem = one_kernel_problem(label, t) or pipeline_off_problem(
                label, t.pallas_calls[0], m, k, n, bm, bn, bk
            )
            if problem:
                raise fail(problem, "structure")
            out = run_under_course_mode(lambda: matmul_pipeline_off(a, b, bm=bm, bn=bn, bk=bk))
        except CheckFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
            e = explain(exc)
            raise fail(f"{label}: {e.summary.removeprefix('✗ ')}", e.kind, e.raw) from None
        # It must compile (course.yml's compile rule), as graded: after the run, before the values.
        chips = graded_compile.rule_chips(["pipeline_off"])
        result = graded_compile.compile_case(
            functools.partial(matmul_pipeline_off, bm=bm, bn=bn, bk=bk),
            [jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(b.shape, b.dtype)],
            chips,
        )
        if result.rejected:
            raise fail(graded_compile.refusal(label, result, t), "compile")
        if result.not_here:
            graded_compile.say_once(chips, result.not_here)
        compiled.append(graded_compile.phrase(result))
        expected = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)
        mismatch = compare(out, expected, block=(bm, bn), name=label, kernel=t.pallas_calls[0], **MATMUL_F32)
        if mismatch is not None:
            raise fail(explained(mismatch, None), mismatch.kind)
    done = "; ".join(dict.fromkeys(c for c in compiled if c))
    print(
        f"✓ matmul_pipeline_off: {len(PIPELINE_OFF_CASES)} cases as graded "
        f"({'; '.join(pipeline_off_label(*c) for c in PIPELINE_OFF_CASES)}){'; ' + done if done else ''}; {PASSED}"
    )
