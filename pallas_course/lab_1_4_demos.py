"""LAB·1.4's demo cells (printouts, not checks): each calls the student's own helpers, and where one of them answers
wrongly or raises, the line says which helper and what it returned, instead of the cell crashing with a TypeError
far from the mistake. Whether an answer is right is said by the grade's rule (pallas_course.check), judged by the
course's models of the notebook's matmul, as the check cells judge it: a demo never passes on a wrong answer (a
block that does not divide the matrix is not "legal")."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pallas_course.lab_1_4_checks import course_helpers
from pallas_course.lab_1_4_rules import YourMatmul, block_choice_problem
from pallas_course.rules import dtype_name


def _args(args: tuple[Any, ...]) -> str:
    return "(" + ", ".join(dtype_name(a) if isinstance(a, (type, np.dtype)) else repr(a) for a in args) + ")"


def _call(name: str, fn: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    """(answer, None), or (None, one line saying what the helper raised)."""
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 - the student's helper: say what happened, go on with the next chip
        from pallas_course.errors import explain

        first = explain(exc).summary.splitlines()[0].removeprefix("✗ ")
        return None, f"{name}{_args(args)} raised: {first}"


def _pair(name: str, got: Any, args: tuple[Any, ...]) -> tuple[float, float] | str:
    """A (dma_s, compute_s) pair of numbers, or the line that says it is not one."""
    ok = (
        isinstance(got, (tuple, list))
        and len(got) == 2
        and all(isinstance(v, (int, float)) or hasattr(v, "__float__") for v in got)
    )
    if not ok:
        return f"{name}{_args(args)} returned {got!r}, not a pair (dma_s, compute_s): its check cell says what is wrong"
    return float(got[0]), float(got[1])


def _step_times(
    step_times: Callable[..., Any], bm: int, bn: int, bk: int, dtype: Any, chip: str
) -> tuple[float, float] | str:
    got, err = _call("step_times", step_times, bm, bn, bk, dtype, chip)
    return err if err else _pair("step_times", got, (bm, bn, bk, dtype_name(dtype), chip))


_MODEL = {"step_times": "step_times", "vmem_working_set": "working_set"}


def _broken_helpers(fn: Callable[..., Any], model: YourMatmul, dtype: Any, chip: str) -> dict[str, str]:
    """The helpers `fn` calls (step_times, vmem_working_set, from the notebook) that raise or answer in the wrong
    form at one ordinary block: {name: what they did}."""
    namespace = getattr(fn, "__globals__", {})
    broken: dict[str, str] = {}
    if callable(namespace.get("step_times")):
        times = _step_times(namespace["step_times"], 128, 128, 128, dtype, chip)
        if isinstance(times, str):
            broken["step_times"] = f"your {times}"
    if callable(namespace.get("vmem_working_set")):
        got, err = _call("vmem_working_set", namespace["vmem_working_set"], 128, 128, 128, dtype)
        if err or isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)):
            broken["vmem_working_set"] = (
                f"your {err or f'vmem_working_set(128, 128, 128, {dtype_name(dtype)}) returned {got!r}, not a number of bytes'}"
            )
    return broken


def show_fed_blocks(
    smallest_fed_block: Callable[..., Any],
    step_times: Callable[..., Any],
    dtype: Any,
    chips: Any,
    matmul: Callable[..., Any] | None = None,
) -> None:
    """For each chip: your smallest fed block and your step times there (a step_times that answers in the wrong form
    is said once, and the course's model of `matmul` stands in for it while smallest_fed_block runs)."""
    chips = list(chips)
    stand_in = {}
    if matmul is not None:
        model = YourMatmul(matmul)
        broken = _broken_helpers(smallest_fed_block, model, dtype, chips[0])
        if "step_times" in broken:
            print(
                f"{broken['step_times']}: smallest_fed_block, which calls it, runs here with the course's "
                "step_times (read off your matmul) standing in; step_times's check cell says what to fix"
            )
            stand_in = {"step_times": model.step_times}
    for c in chips:
        with course_helpers(smallest_fed_block, stand_in):
            fed, err = _call("smallest_fed_block", smallest_fed_block, dtype, c)
        if err:
            print(f"{c:4}: {err}")
            continue
        if not isinstance(fed, int) or isinstance(fed, bool):
            print(f"{c:4}: smallest_fed_block returned {fed!r} (no fed block, or not a block size): see its check")
            continue
        times = _step_times(step_times, fed, fed, fed, dtype, c)
        if isinstance(times, str):
            print(f"{c:4}: {dtype_name(dtype)} blocks of at least {fed}; {times}")
            continue
        dma, mxu = times
        print(
            f"{c:4}: {dtype_name(dtype)} blocks of at least {fed} keep the MXU fed "
            f"(at {fed}: DMA {dma * 1e9:.0f} ns, MXU {mxu * 1e9:.0f} ns)"
        )


def show_block_choices(
    choose_blocks: Callable[..., Any],
    step_times: Callable[..., Any],
    matmul: Callable[..., Any],
    m: int,
    n: int,
    k: int,
    dtype: Any,
    chips: Any,
) -> None:
    """For each chip: your choose_blocks at (m, n, k), the grade's verdict on it (judged by the course's models of
    your matmul), then your step times and the legality model's working set of those blocks."""
    from pallas_course.legality import fmt_mib

    model = YourMatmul(matmul)
    size = f"{m}x{n}x{k}" if len({m, n, k}) > 1 else f"{m}³"
    chips = list(chips)
    stand_in = _broken_helpers(choose_blocks, model, dtype, chips[0])
    for name, why in stand_in.items():
        print(
            f"{why}: choose_blocks, which calls it, runs here with the course's {name} (read off your matmul) "
            f"standing in; {name}'s check cell says what to fix"
        )
    for c in chips:
        with course_helpers(choose_blocks, {n: getattr(model, _MODEL[n]) for n in stand_in}):
            got, err = _call("choose_blocks", choose_blocks, m, n, k, dtype, c)
        if err:
            print(f"{c:4}: {err}")
            continue
        problem = block_choice_problem(got, m, n, k, dtype, c, model.step_times, model.report)
        if problem is not None and not (isinstance(got, (tuple, list)) and len(got) == 3):
            print(f"{c:4}: choose_blocks {problem}")
            continue
        bm, bn, bk = (int(v) for v in got)
        verdict = "as graded ✓" if problem is None else f"✗ choose_blocks {problem}"
        line = f"{c:4}: {size} {dtype_name(dtype)} -> blocks ({bm}, {bn}, {bk}), {verdict}"
        if problem is None:
            budget = model.report(m, n, k, bm, bn, bk, dtype, c).budget
            times = _step_times(step_times, bm, bn, bk, dtype, c)
            steps = (
                f"; {times}"
                if isinstance(times, str)
                else f"; MXU {times[1] * 1e9:.0f} ns vs DMA {times[0] * 1e9:.0f} ns per step (your step_times)"
            )
            line += (
                f"{steps}; working set {fmt_mib(budget.working_set_bytes)} of a "
                f"{fmt_mib(budget.default_scoped_vmem_bytes)} limit"
            )
        print(line)
