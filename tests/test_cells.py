"""The grader's one reader of nbgrader's cell metadata (autograder.cells) agrees with nbgrader.utils, so both
doors read a cell the same way, and reads a student's malformed metadata without raising."""

from __future__ import annotations

import itertools

import nbformat
import pytest
from nbgrader import utils

from autograder import cells

FLAGS = list(itertools.product([None, False, True], repeat=4))  # grade, solution, locked, task


def _cell(cell_type: str, grade, solution, locked, task) -> nbformat.NotebookNode:
    meta = {k: v for k, v in dict(grade=grade, solution=solution, locked=locked, task=task).items() if v is not None}
    make = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
    return make("x = 1", metadata={"nbgrader": {"grade_id": "a", "points": 1, **meta}})


@pytest.mark.parametrize("cell_type", ["code", "markdown"])
def test_predicates_agree_with_nbgrader(cell_type: str) -> None:
    for flags in FLAGS:
        cell = _cell(cell_type, *flags)
        for ours, theirs in (
            (cells.is_grade, utils.is_grade),
            (cells.is_solution, utils.is_solution),
            (cells.is_locked, utils.is_locked),
            (cells.is_task, utils.is_task),
        ):
            assert ours(cell) == bool(theirs(cell)), (ours.__name__, flags)
        assert cells.is_test(cell) == (
            cell_type == "code" and bool(utils.is_grade(cell)) and not utils.is_solution(cell)
        )
    bare = nbformat.v4.new_code_cell("x")
    assert [f(bare) for f in (cells.is_grade, cells.is_solution, cells.is_locked, cells.is_task)] == [
        bool(f(bare)) for f in (utils.is_grade, utils.is_solution, utils.is_locked, utils.is_task)
    ]


@pytest.mark.parametrize(
    "metadata",
    [
        [1],
        "x",
        {"nbgrader": [1]},
        {"nbgrader": "grade"},
        {"nbgrader": None},
        {"nbgrader": {"grade_id": 5, "grade": True}},
    ],
)
def test_malformed_metadata_reads_as_no_nbgrader_cell(metadata) -> None:
    cell = {"cell_type": "code", "source": "", "metadata": metadata}
    assert cells.grade_id(cell) is None and cells.checksum(cell) is None
    assert not cells.is_solution(cell) and not cells.is_task(cell)


def test_checksum_and_grade_are_nbgraders() -> None:
    cell = _cell("code", True, True, None, None)
    cell.metadata.nbgrader["checksum"] = utils.compute_checksum(cell)
    assert cells.unchanged(cell) and cells.grade(cell) == 0  # an unanswered answer scores 0
    cell.source = "x = 2"
    assert not cells.unchanged(cell) and cells.grade(cell) is None  # answered: waits for a person
