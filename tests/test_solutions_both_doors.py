"""Every solutions/ notebook, handed in as it is, earns full marks on both doors: `course grade` (the engine,
in this process) and `nbgrader autograde` (its own gradebook). Then nbgrader's `generate_feedback`, what a
student may be sent, shows none of the hidden tests. One set-up for the labs: slow, but run once.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from autograder.cells import is_test
from autograder.course_manifest import REPO_ROOT, manifest
from pallas_course.notebooks import read
from tests.nbgrader_course import generated_course, nbgrader

STUDENT = "model-answers"
STAGE = manifest().stage.id
LABS = manifest().labs
# nbgrader's door in CI: the first lab (its feedback's dropped outputs), the reading lab (partial-credit answers) and
# the newest; every lab under -m slow (`course grade` gives every solution full marks in CI: the same engine).
NBGRADER_CI = {"lab-1.1-first-kernels", "lab-1.5-reading-tokamax", "lab-1.6-copies-online-softmax"}
NBGRADER_LABS = [pytest.param(lab, id=lab.id, marks=() if lab.id in NBGRADER_CI else pytest.mark.slow) for lab in LABS]


@pytest.fixture(scope="module")
def course(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course root with the solution notebooks submitted by one student (NBGRADER_CI's, or every lab's where the
    slow tests run), autograded by nbgrader, and nbgrader's feedback generated."""
    every = "not slow" not in (request.config.getoption("markexpr") or "")
    root = generated_course(tmp_path_factory.mktemp("course"))
    folder = root / "submitted" / STUDENT / STAGE
    folder.mkdir(parents=True)
    for lab in LABS if every else [lab for lab in LABS if lab.id in NBGRADER_CI]:
        shutil.copy(REPO_ROOT / lab.source, folder / Path(lab.notebook).name)
    run = nbgrader(root, "autograde", STAGE, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    run = nbgrader(root, "generate_feedback", STAGE, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    return root


@pytest.mark.parametrize("lab", LABS, ids=[lab.id for lab in LABS])
def test_the_solution_scores_full_marks_with_course_grade(lab, tmp_path: Path) -> None:
    from autograder.steps.pipeline import grade_one

    path = tmp_path / Path(lab.notebook).name
    shutil.copy(REPO_ROOT / lab.source, path)
    result = grade_one(path)
    assert result.error is None, result.error
    lost = {t.name: t.message for t in result.tests if t.points != t.max_points}
    assert not lost and result.score == result.max_score == sum(t.points for t in lab.tests), lost


@pytest.mark.parametrize("lab", NBGRADER_LABS)
def test_the_solution_scores_full_marks_with_nbgrader_autograde(lab, course: Path) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = {g.name: g for g in gb.find_submission_notebook(lab.id, STAGE, STUDENT).grades}
        for test in lab.tests:
            g = grades[test.id]
            assert (g.auto_score, g.max_score) == (test.points, test.points), (test.id, g.auto_score)


@pytest.mark.parametrize("lab", NBGRADER_LABS)
def test_nbgrader_feedback_shows_no_hidden_test(lab, course: Path) -> None:
    """generate_feedback runs ClearHiddenTests (autograder.doors.nbgrader_setup): the hidden region of each test cell,
    the calls into the grader's checks, never reaches the feedback page."""
    page = (course / "feedback" / STUDENT / STAGE / f"{Path(lab.notebook).stem}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))  # the page as read, code highlighting and all
    hidden = [
        c.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0].strip()
        for c in read(REPO_ROOT / lab.source).cells
        if is_test(c) and "BEGIN HIDDEN TESTS" in c.source
    ]
    assert hidden, "every lab has hidden tests"
    assert "BEGIN HIDDEN TESTS" not in text
    for region in hidden:
        for line in region.splitlines():
            assert line.strip() not in text, line


def test_nbgrader_feedback_drops_what_cells_after_the_hidden_tests_printed(course: Path) -> None:
    """Issue 33: the cells run after the first hidden test could print how the tests called the student's functions;
    generate_feedback drops their outputs (autograder.steps.feedback.drop_outputs_after_tests), as `course grade`'s
    executed/ copy does. LAB·1.1's visible check of add (before the first hidden test) stays, transpose's goes;
    autograded/ keeps both for the instructor."""
    from autograder.steps.feedback import AFTER_TESTS

    lab = LABS[0]
    page = (course / "feedback" / STUDENT / STAGE / f"{Path(lab.notebook).stem}.html").read_text()
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "✓ add:" in text and "✓ transpose:" not in text and AFTER_TESTS[:60] in text
    autograded = read(course / "autograded" / STUDENT / STAGE / Path(lab.notebook).name)
    assert "✓ transpose:" in str([c.get("outputs") for c in autograded.cells])
