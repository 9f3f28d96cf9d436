"""labs/ is what nbgrader generates from solutions/, and gives nothing away."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course_manifest import REPO_ROOT, manifest
from tests.nbgrader_course import generated_course

LABS_WITH_SOURCES = [lab for lab in manifest().labs if (REPO_ROOT / lab.source).exists()]


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_labs_are_generated_from_solutions(tmp_path: Path) -> None:
    """`nbgrader generate_assignment` on solutions/ reproduces the committed labs/ byte for byte."""
    fresh = generated_course(tmp_path) / "labs"
    committed = REPO_ROOT / "labs"
    assert _files(fresh) == _files(committed), "labs/ has extra or missing files; regenerate it"
    stale = [f for f in sorted(_files(fresh)) if not filecmp.cmp(fresh / f, committed / f, shallow=False)]
    assert not stale, (
        f"labs/ is out of date for {stale}: run `nbgrader generate_assignment "
        f"{manifest().stage.id} --force` and commit labs/"
    )


@pytest.mark.parametrize("lab", LABS_WITH_SOURCES, ids=lambda l: l.id)
def test_student_notebook_hides_solutions_and_tests(lab) -> None:
    """No solution region, hidden test or grader import reaches a student."""
    text = (REPO_ROOT / lab.notebook).read_text()
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "from autograder", "autograder."):
        assert secret not in text, f"{lab.notebook} contains {secret!r}"


@pytest.mark.parametrize("lab", LABS_WITH_SOURCES, ids=lambda l: l.id)
def test_stubs_raise_not_implemented(lab) -> None:
    """Every cell a student fills in raises a clear NotImplementedError until they do."""
    nb = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    stubs = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]
    assert stubs, "no solution cells"
    for cell in stubs:
        assert 'raise NotImplementedError("not written yet' in cell.source, cell.source


# CI validates the first lab (nbgrader's in-process path, shared by every lab); the rest run with -m slow, as the
# graded doors already give every solution full marks in CI (tests/test_solutions_both_doors.py). ~50 s of CI.
@pytest.mark.parametrize(
    "lab",
    [pytest.param(lab, marks=() if i == 0 else pytest.mark.slow) for i, lab in enumerate(LABS_WITH_SOURCES)],
    ids=lambda l: l.id,
)
def test_nbgrader_validate_passes_on_the_solution(lab) -> None:
    """`nbgrader validate` runs the solution notebook and every test passes."""
    run = subprocess.run(
        [sys.executable, "-m", "nbgrader", "validate", str(REPO_ROOT / lab.source)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert "Success! Your notebook passes all the tests." in run.stdout, run.stdout + run.stderr
