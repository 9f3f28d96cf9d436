"""Feedback pages, nbgrader's CSV columns, and the merge into an nbgrader gradebook (what the formgrader reads)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from typer.testing import CliRunner

from course_tools.demo import demo_submissions
from autograder.steps.export import NBGRADER_COLUMNS, assignment_max_score
from autograder.steps.feedback import REMOVED, sanitize, to_html, to_markdown
from autograder.steps.results import SubmissionResult, TestResult, WrittenResult
from course_tools.cli import app
from autograder.course_manifest import manifest
from tests.nbgrader_course import generated_course, nbgrader

runner = CliRunner()
LAB = "lab-1.1-first-kernels"
STAGE = manifest().stage.id
EXPECTED = {"demo-solution": 6.0, "demo-stub": 0.0, "demo-wrong-transpose": 3.0}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A generated nbgrader course with the demo set submitted, graded by `course grade --gradebook`."""
    root = generated_course(tmp_path_factory.mktemp("course"))
    shutil.copytree(demo_submissions(tmp_path_factory.mktemp("demo")), root / "submitted")
    (root / "submitted" / "demo-solution" / STAGE / "timestamp.txt").write_text("2026-11-29 10:00:00.000000 UTC")
    # Plants, never graded as the student their folders name: a stub deep in demo-solution's folder under
    # demo-wrong-transpose's name, and a stub in a folder of its own under demo-solution's name.
    stub = root / "submitted" / "demo-stub" / STAGE / f"{LAB}.ipynb"
    for planted in (
        f"demo-solution/{STAGE}/demo-wrong-transpose/{STAGE}",
        f"aa-planter/{STAGE}/x/demo-solution/{STAGE}",
    ):
        (root / "submitted" / planted).mkdir(parents=True)
        shutil.copyfile(stub, root / "submitted" / planted / f"{LAB}.ipynb")
    out = tmp_path_factory.mktemp("grades")
    result = runner.invoke(
        app,
        ["grade", str(root / "submitted"), "--out", str(out), "--jobs", "2", "--gradebook", str(root / "gradebook.db")],
    )
    assert result.exit_code == 0, result.output
    return root, out


def test_gradebook_holds_the_autograde_scores(course) -> None:
    """Each test's auto score as graded; written answers: answered ones wait for a grader, a stub scores 0."""
    from nbgrader.api import Gradebook

    root, _ = course
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student, score in EXPECTED.items():
            nb = gb.find_submission_notebook(LAB, STAGE, student)
            grades = {g.name: g for g in nb.grades}
            assert sum(grades[t.id].auto_score for t in manifest().lab(LAB).tests) == score, student
            written = grades["index_map_swap"]
            if student == "demo-stub":
                assert written.auto_score == 0 and not written.needs_manual_grade
                comment = gb.find_comment("index_map_swap", LAB, STAGE, student)
                assert comment.auto_comment == "No response."
            else:
                assert written.auto_score is None and written.needs_manual_grade, student
        assert str(gb.find_submission(STAGE, "demo-solution").timestamp).startswith("2026-11-29 10:00:00")


def test_formgrader_finds_the_executed_notebooks(course) -> None:
    """autograded/<student>/<assignment>/<notebook>.ipynb, the whole executed notebook, for the formgrader."""
    root, _ = course
    for student in EXPECTED:
        nb = nbformat.read(root / "autograded" / student / STAGE / f"{LAB}.ipynb", as_version=4)
        assert any("BEGIN HIDDEN TESTS" in c.source for c in nb.cells)
        # each student's own notebook, not one planted in (or under the name of) another's folder
        own = nbformat.read(root / "submitted" / student / STAGE / f"{LAB}.ipynb", as_version=4)
        answers = [c.source for c in own.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
        assert answers and answers == [
            c.source for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")
        ], student
    assert sorted(p.name for p in (root / "autograded").iterdir()) == sorted(EXPECTED)


def test_csv_matches_nbgrader_export(course, tmp_path: Path) -> None:
    """nbgrader-grades.csv has `nbgrader export`'s columns and, before manual grading, its numbers."""
    root, out = course
    ours = list(csv.DictReader((out / "nbgrader-grades.csv").open()))
    assert list(ours[0]) == NBGRADER_COLUMNS
    run = nbgrader(root, "export", "--to", str(tmp_path / "export.csv"))
    assert run.returncode == 0, run.stdout + run.stderr
    theirs = {r["student_id"]: r for r in csv.DictReader((tmp_path / "export.csv").open())}
    for row in ours:
        other = theirs[row["student_id"]]
        for key in ("assignment", "raw_score", "score", "max_score", "late_submission_penalty"):
            a, b = row[key], other[key]
            assert (float(a) == float(b)) if key != "assignment" else a == b, (row["student_id"], key, a, b)
    assert float(ours[0]["max_score"]) == assignment_max_score()
    assert {r["student_id"]: float(r["raw_score"]) for r in ours} == EXPECTED


def test_nbgrader_export_writes_under_grades_by_default(course, tmp_path: Path) -> None:
    """Without --to, `nbgrader export` writes <course root>/grades/grades.csv (the folder made, ignored by git),
    the same file as with --to; not nbgrader's ./grades.csv, an untracked file in the repository's root."""
    root, _ = course
    run = nbgrader(root, "export")
    assert run.returncode == 0, run.stdout + run.stderr
    assert nbgrader(root, "export", "--to", str(tmp_path / "asked.csv")).returncode == 0
    assert (root / "grades" / "grades.csv").read_text() == (tmp_path / "asked.csv").read_text()
    assert f"Exporting grades to {root / 'grades' / 'grades.csv'}" in run.stdout + run.stderr


def test_feedback_pages(course) -> None:
    """One Markdown and one HTML page per submission: tests, points, messages, written answers' status."""
    _, out = course
    md = (out / "feedback" / "demo-wrong-transpose" / STAGE / f"{LAB}.md").read_text()
    assert "**Autograded score: 3 / 6**" in md
    assert "| transpose_schedule | 0 / 1 |" in md and "must swap its indices" in md
    assert "| index_map_swap | – / 1 | answered: awaiting manual grading |" in md
    page = (out / "feedback" / "demo-stub" / STAGE / f"{LAB}.html").read_text()
    assert "<td>add_f32</td><td>0 / 2</td>" in page and "not implemented yet" in page
    assert "not answered" in page


def test_feedback_escapes_html() -> None:
    """A message is text, never markup."""
    r = SubmissionResult(
        submission="s.ipynb",
        lab=LAB,
        score=0,
        max_score=1,
        tests=[TestResult(name="t", points=0, max_points=1, passed=False, message="<script>x</script>")],
        written=[WrittenResult(name="w", max_points=1, status="not answered")],
    )
    assert "<script>" not in to_html(r) and "&lt;script&gt;" in to_html(r)
    assert "<script>" not in to_markdown(r) and "\\<script\\>x\\</script\\>" in to_markdown(r)


def test_partial_credit_is_partial_everywhere() -> None:
    """LAB·1.5's margin_marks gives partial credit: "PARTIAL 2.7/3", never "no credit" or a plain FAIL."""
    t = TestResult(name="margin_marks", points=2.7, max_points=3, passed=False, message="no credit")
    assert t.message == "partial credit: 2.7 of 3 points" and t.status == "partial"
    r = SubmissionResult(submission="s.ipynb", lab=LAB, score=2.7, max_score=3, tests=[t])
    assert "| margin_marks | 2.7 / 3 | PARTIAL 2.7/3 · partial credit: 2.7 of 3 points |" in to_markdown(r)
    assert '<tr class="partial"><td>margin_marks</td><td>2.7 / 3</td><td>PARTIAL 2.7/3 · partial' in to_html(r)


def test_sanitize_strips_hidden_tests_and_tracebacks() -> None:
    """The hidden region goes, the header stays, an error keeps its one-line message, the student's prints stay."""
    cell = nbformat.v4.new_code_cell(
        "# Hidden test · t · 1 point\n### BEGIN HIDDEN TESTS\nsecret_check(f)\n### END HIDDEN TESTS"
    )
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t", "points": 1}
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="student print\n"),
        nbformat.v4.new_output("stream", name="stderr", text="/x/lab.py:3: UserWarning: careful\n  secret_line()\n"),
        nbformat.v4.new_output(
            "error",
            ename="TestFailure",
            evalue="t: wrong",
            traceback=["Traceback", "  File lab.py, in secret_check", "    secret_line()"],
        ),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    clean = sanitize(nb).cells[0]
    assert clean.source == f"# Hidden test · t · 1 point\n{REMOVED}"
    assert clean.outputs[0].text == "student print\n"
    assert "secret" not in clean.outputs[1].text and "UserWarning" in clean.outputs[1].text
    assert clean.outputs[2].traceback == ["TestFailure: t: wrong"]
    assert "secret_check" in nb.cells[0].source, "the instructor's copy is untouched"


def test_no_output_of_a_cell_run_after_a_hidden_test_is_handed_back() -> None:
    """Issue 33: a cell after the hidden tests could print the shapes they called the student's functions on (every
    case). The copy handed back keeps the outputs of the cells before the first hidden test and the tests' own;
    after it, one note, nothing that tells which cell printed, the grader's reason where the run stopped; the
    instructor's copy keeps everything."""
    from autograder.steps.feedback import AFTER_TESTS

    def code(source: str, *outputs: Any, test: bool = False) -> Any:
        cell = nbformat.v4.new_code_cell(source)
        if test:
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": source, "points": 1}
        cell.outputs, cell.execution_count = list(outputs), 7
        return cell

    said = nbformat.v4.new_output("stream", name="stdout", text="seen: [(256, 256), (128, 512)]\n")
    stopped = nbformat.v4.new_output(
        "error",
        ename="KernelStopped",
        evalue="the run stopped during this cell",
        traceback=["KernelStopped: the run stopped during this cell"],
    )
    nb = nbformat.v4.new_notebook(
        cells=[
            code("before", nbformat.v4.new_output("stream", name="stdout", text="mine\n")),
            code(
                "t1", nbformat.v4.new_output("error", ename="TestFailure", evalue="t1: wrong", traceback=[]), test=True
            ),
            nbformat.v4.new_markdown_cell("text"),
            code("print(seen)", said),
            code("quiet"),
            code("t2", test=True),
            code("print(seen) again", said, stopped),
        ]
    )
    clean = sanitize(nb).cells
    assert clean[0].outputs[0].text == "mine\n" and clean[0].execution_count == 7
    assert clean[1].outputs[0].evalue == "t1: wrong"
    assert [o.get("text") for o in clean[3].outputs] == [AFTER_TESTS + "\n"] and clean[3].execution_count is None
    assert clean[4].outputs == [] and clean[6].outputs == [stopped]
    assert "seen" not in json.dumps([c.get("outputs") for c in clean])
    assert nb.cells[3].outputs == [said], "the instructor's copy is untouched"


def test_lab_1_5_feedback_shows_the_counts_per_category() -> None:
    """The feedback page of a partial LAB·1.5 margin says how many lines of each category were marked which way
    (the hidden test's own tally), not only "partial credit: X of 3" (issue 27, point 5)."""
    from autograder.course_manifest import REPO_ROOT, manifest
    from autograder.steps.score import score_tests

    lab = manifest().lab("lab-1.5-reading-tokamax")
    nb = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    (cell,) = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "margin_marks"]
    tally = (
        "margin_marks: algorithm lines marked algorithm 40/45 (5 marked the other way, 0 not marked); schedule "
        "lines marked schedule 90/92 (2 marked the other way, 0 not marked); credit = 3 x the smaller share = "
        "2.66 of 3"
    )
    cell.execution_count = 1
    cell.outputs = [
        nbformat.v4.new_output(
            "stream",
            name="stdout",
            text=tally + "\nwhich lines disagree is shown from 2026-12-21 (the lab's reveal date)\n",
        ),
        nbformat.v4.new_output("execute_result", data={"text/plain": "2.66"}, execution_count=1),
    ]
    (t,) = [r for r in score_tests(nb, lab) if r.name == "margin_marks"]
    assert t.status == "partial" and t.points == 2.66
    assert t.message == "partial credit: 2.66 of 3 points · " + tally.removeprefix("margin_marks: ")
    r = SubmissionResult(submission="s.ipynb", lab=lab.id, score=2.66, max_score=3, tests=[t])
    assert "algorithm lines marked algorithm 40/45 (5 marked the other way, 0 not marked)" in to_html(r)
    assert "schedule lines marked schedule 90/92" in to_markdown(r)
