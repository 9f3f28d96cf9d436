"""The grader's one reader of nbgrader's cell metadata: what a cell is (a test, an answer, locked), its grade
id, its checksum and its grade.

A submission's metadata is the student's: missing, not a mapping, or with values of any type. `meta` reads
it defensively, and every predicate below reads through it, so both doors (`course grade` and `nbgrader
autograde`) see a cell the same way. The predicates follow nbgrader.utils's rules (is_grade, is_solution,
is_locked, is_task; tests/test_cells.py checks they agree); scoring and checksums are nbgrader.utils's
own functions. nbgrader is imported only where a grade or checksum is computed: its import takes seconds,
and the engine overlaps it with the jail's start (autograder.steps.execute._import_meanwhile).
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from nbformat import NotebookNode, from_dict

HIDDEN_TEST_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def meta(cell: Mapping[str, Any]) -> NotebookNode:
    """A copy of the cell's nbgrader metadata ({} when it has none, or when it or the cell's metadata is not a
    mapping)."""
    metadata = cell.get("metadata", {})
    found = metadata.get("nbgrader", {}) if isinstance(metadata, Mapping) else {}
    return from_dict(dict(found) if isinstance(found, Mapping) else {})


def set_meta(cell: NotebookNode, values: Mapping[str, Any] | None) -> None:
    """Replace the cell's nbgrader metadata with a copy of `values`; None removes it."""
    if values is None:
        cell.metadata.pop("nbgrader", None)
    else:
        cell.metadata["nbgrader"] = from_dict(copy.deepcopy(dict(values)))


def has_grade_id(cell: Mapping[str, Any]) -> bool:
    """The metadata names a grade id, of whatever type (a course id or not)."""
    return "grade_id" in meta(cell)


def grade_id(cell: Mapping[str, Any]) -> str | None:
    gid = meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def is_grade(cell: Mapping[str, Any]) -> bool:
    return bool(meta(cell).get("grade", False))


def is_solution(cell: Mapping[str, Any]) -> bool:
    return bool(meta(cell).get("solution", False))


def is_task(cell: Mapping[str, Any]) -> bool:
    return bool(meta(cell).get("task", False))


def is_locked(cell: Mapping[str, Any]) -> bool:
    """nbgrader's rule: a solution is never locked, a graded cell always, any other cell as its flag says."""
    if is_solution(cell):
        return False
    return is_grade(cell) or bool(meta(cell).get("locked", False))


def is_test(cell: Mapping[str, Any]) -> bool:
    """An autograded test cell: a graded code cell that is not an answer."""
    return cell.get("cell_type") == "code" and is_grade(cell) and not is_solution(cell)


def is_setup(cell: Mapping[str, Any]) -> bool:
    return grade_id(cell) == "setup"


def checksum(cell: Mapping[str, Any]) -> Any:
    """The checksum nbgrader stored (the released cell's), or None."""
    return meta(cell).get("checksum")


def unchanged(cell: NotebookNode) -> bool:
    """The cell is as released: its stored checksum is nbgrader's checksum of it now."""
    from nbgrader.utils import compute_checksum

    return checksum(cell) is not None and checksum(cell) == compute_checksum(cell)


def grade(cell: NotebookNode) -> float | None:
    """nbgrader's score of an executed graded cell (nbgrader.utils.determine_grade): None when it waits for a
    person."""
    from nbgrader.utils import determine_grade

    return determine_grade(cell)[0]
