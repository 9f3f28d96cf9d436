"""Score an executed notebook exactly as nbgrader does (`nbgrader.utils.determine_grade`), and say why
each test lost its points."""

from __future__ import annotations

import re
from typing import Iterable

from nbformat import NotebookNode

from autograder import cells
from autograder.cells import grade_id
from autograder.steps.results import TestResult, WrittenResult
from autograder.course_manifest import LabSpec
from pallas_course.compile_verdict import NOT_COMPILED

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _reason(cell: NotebookNode) -> str:
    outputs = cell.get("outputs", [])
    for out in outputs:
        if out.get("output_type") == "error":
            value = _ANSI.sub("", str(out.get("evalue", ""))).strip()
            ename = out.get("ename", "error")
            if ename == "NameError" and value:
                return (
                    f"{value}: the hidden tests call the functions by the names and signatures the lab "
                    "gave them; keep those"
                )
            return value if value else ename
    for out in outputs:
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            text = _ANSI.sub("", "".join(out.get("text", ""))).strip().splitlines()
            return "the test wrote to stderr, which scores 0: " + (text[0] if text else "")
    return "no credit"


def _note(cell: NotebookNode) -> str:
    """What a passing test says beside its points: the grader's own "not compiled: ..." line (the compile rule
    could not be applied: autograder.judge.compile_rule), never silent full marks."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            for line in "".join(out.get("text", "")).splitlines():
                if line.startswith(NOT_COMPILED + ":"):
                    return line.strip()[:400]
    return ""


def _tally(cell: NotebookNode, test_id: str) -> str:
    """The line a test printed about its own credit ("margin_marks: algorithm lines marked algorithm 40/45 ..."),
    which feedback shows beside a partial score (a hidden test's own print: autograder.labs.lab_1_5)."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            for line in "".join(out.get("text", "")).splitlines():
                if line.startswith(f"{test_id}: "):
                    return line.strip()[len(test_id) + 2 :][:600]
    return ""


def score_tests(
    nb: NotebookNode,
    lab: LabSpec,
    stopped: str | None = None,
    *,
    stopped_in: int | None = None,
    replied: Iterable[int] | None = None,
) -> list[TestResult]:
    """One result per test in course.yml, in that order; a test missing from the run scores 0.

    `stopped_in`: the cell running when the run stopped (its outputs are partial: it scores 0, where
    nbgrader's rule would read "no output" as full marks). `replied`: the cells that finished; a test cell
    outside it never finished and scores 0.
    """
    finished = set(replied) if replied is not None else None
    by_id = {grade_id(c): (i, c) for i, c in enumerate(nb.cells) if grade_id(c)}
    results = []
    for spec in lab.tests:
        index, cell = by_id.get(spec.id, (None, None))
        if cell is None:
            results.append(
                TestResult(
                    name=spec.id,
                    points=0,
                    max_points=spec.points,
                    passed=False,
                    message="the test cell is missing from the notebook",
                )
            )
            continue
        if index == stopped_in:
            results.append(
                TestResult(
                    name=spec.id,
                    points=0,
                    max_points=spec.points,
                    passed=False,
                    message=f"the run stopped during this test: {stopped}",
                )
            )
            continue
        ran = cell.get("execution_count") is not None or cell.get("outputs")
        if not ran or (finished is not None and index not in finished):
            why = f"the run stopped before this test ({stopped})" if stopped else "this test did not run"
            results.append(TestResult(name=spec.id, points=0, max_points=spec.points, passed=False, message=why))
            continue
        points = cells.grade(cell)
        points = float(points or 0)
        passed = points >= spec.points
        message = ("passed" + (f" · {_note(cell)}" if _note(cell) else "")) if passed else _reason(cell)
        if 0 < points < spec.points and message == "no credit":
            message = f"partial credit: {points:g} of {spec.points:g} points"
        if not passed and _tally(cell, spec.id):  # LAB·1.5: the counts per category, on the feedback page too
            message += f" · {_tally(cell, spec.id)}"
        results.append(TestResult(name=spec.id, points=points, max_points=spec.points, passed=passed, message=message))
    return results


def written_status(nb: NotebookNode, lab: LabSpec) -> list[WrittenResult]:
    by_id = {grade_id(c): c for c in nb.cells if grade_id(c)}
    out = []
    for spec in lab.written:
        cell = by_id.get(spec.id)
        answered = (
            cell is not None and cell.source.strip() not in ("", "YOUR ANSWER HERE") and not cells.unchanged(cell)
        )
        out.append(
            WrittenResult(
                name=spec.id,
                max_points=spec.points,
                status="answered: awaiting manual grading" if answered else "not answered",
            )
        )
    return out
