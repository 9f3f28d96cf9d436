"""Score an executed notebook exactly as nbgrader does (`nbgrader.utils.determine_grade`), and say why
each test lost its points."""
from __future__ import annotations

import re

from nbformat import NotebookNode

from autograder.results import TestResult, WrittenResult
from pallas_course.manifest import LabSpec

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _grade_id(cell: NotebookNode) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _reason(cell: NotebookNode) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            value = _ANSI.sub("", str(out.get("evalue", ""))).strip()
            return value if value else out.get("ename", "error")
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            text = _ANSI.sub("", "".join(out.get("text", ""))).strip().splitlines()
            return "the test wrote to stderr, which scores 0: " + (text[0] if text else "")
    return "no credit"


def score_tests(nb: NotebookNode, lab: LabSpec, stopped: str | None = None) -> list[TestResult]:
    """One result per test in course.yml, in that order; a test missing from the run scores 0."""
    from nbgrader.utils import determine_grade

    cells = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    results = []
    for spec in lab.tests:
        cell = cells.get(spec.id)
        if cell is None:
            results.append(TestResult(name=spec.id, points=0, max_points=spec.points, passed=False,
                                      message="the test cell is missing from the notebook"))
            continue
        if cell.get("execution_count") is None and not cell.get("outputs"):
            why = f"the run stopped before this test ({stopped})" if stopped else "this test did not run"
            results.append(TestResult(name=spec.id, points=0, max_points=spec.points, passed=False, message=why))
            continue
        points, _ = determine_grade(cell)
        points = float(points or 0)
        passed = points >= spec.points
        results.append(TestResult(name=spec.id, points=points, max_points=spec.points, passed=passed,
                                  message="passed" if passed else _reason(cell)))
    return results


def written_status(nb: NotebookNode, lab: LabSpec) -> list[WrittenResult]:
    from nbgrader.utils import compute_checksum

    cells = {_grade_id(c): c for c in nb.cells if _grade_id(c)}
    out = []
    for spec in lab.written:
        cell = cells.get(spec.id)
        checksum = cell.metadata["nbgrader"].get("checksum") if cell is not None else None
        answered = cell is not None and cell.source.strip() not in ("", "YOUR ANSWER HERE") and (
            checksum is None or checksum != compute_checksum(cell))
        out.append(WrittenResult(name=spec.id, max_points=spec.points,
                                 status="answered: awaiting manual grading" if answered else "not answered"))
    return out
