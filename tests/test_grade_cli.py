"""`course grade` end to end (papermill, real kernels), and agreement with `nbgrader autograde`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder.steps.record import plan
from autograder.steps.store import Store
from autograder.steps.submission import read_submission
from course_tools.demo import demo_submissions
from course_tools.cli import app
from autograder.course_manifest import manifest
from tests.nbgrader_course import generated_course, nbgrader

runner = CliRunner()
LAB = "lab-1.1-first-kernels"
EXPECTED = {"demo-solution": 6.0, "demo-stub": 0.0, "demo-wrong-transpose": 3.0}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = demo_submissions(tmp_path_factory.mktemp("submitted"))
    # Two broken submissions beside the demo set: they get a reason, the batch goes on.
    broken = root / "broken-json" / "stage-1"
    broken.mkdir(parents=True)
    (broken / f"{LAB}.ipynb").write_text('{"cells": [ {"cell_type": "code", "sou')
    stranger = root / "other-course" / "stage-1"
    stranger.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), stranger / "homework.ipynb")
    return root


@pytest.fixture(scope="module")
def graded(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    out = tmp_path_factory.mktemp("grades")
    result = runner.invoke(app, ["grade", str(demo), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    return {r["submission"].split("/")[0]: r for r in records}, out, result.stdout


def test_json_shape(graded) -> None:
    """--json: per submission, submission/lab/score/max_score/tests with name/points/max_points/passed/message."""
    by_student, _, _ = graded
    record = by_student["demo-solution"]
    assert set(record) >= {"submission", "lab", "score", "max_score", "tests"}
    assert record["lab"] == LAB and record["max_score"] == 6
    assert [t["name"] for t in record["tests"]] == [t.id for t in manifest().lab(LAB).tests]
    assert set(record["tests"][0]) == {"name", "points", "max_points", "passed", "message"}


def test_scores(graded) -> None:
    by_student, _, _ = graded
    assert {s: by_student[s]["score"] for s in EXPECTED} == EXPECTED


def test_wrong_submission_says_why(graded) -> None:
    tests = {t["name"]: t for t in graded[0]["demo-wrong-transpose"]["tests"]}
    assert not tests["transpose_schedule"]["passed"]
    assert "must swap its indices" in tests["transpose_schedule"]["message"]
    assert tests["add_f32"]["passed"] and tests["add_f32"]["message"] == "passed"


def test_stub_says_not_implemented(graded) -> None:
    for t in graded[0]["demo-stub"]["tests"]:
        assert "not implemented yet" in t["message"], t


def test_broken_submissions_get_a_reason(graded) -> None:
    by_student = graded[0]
    corrupt = by_student["broken-json"]
    assert corrupt["score"] == 0 and corrupt["lab"] == LAB and "could not read the notebook" in corrupt["error"]
    assert all(not t["passed"] for t in corrupt["tests"]) and len(corrupt["tests"]) == 4
    stranger = by_student["other-course"]
    assert stranger["lab"] is None and "not a notebook of this course" in stranger["error"]


def test_reports_written(graded) -> None:
    _, out, stdout = graded
    assert json.loads((out / "results.json").read_text()) == json.loads(stdout)
    rows = (out / "results.csv").read_text().splitlines()
    assert rows[0] == "submission,lab,score,max_score,test,points,max_points,passed,message"
    assert (out / "executed" / "demo-solution" / "stage-1" / f"{LAB}.ipynb").exists()


def test_table_output(demo: Path, tmp_path: Path) -> None:
    """Without --json: a table per submission and where the reports went."""
    one = demo / "demo-wrong-transpose"
    result = runner.invoke(app, ["grade", str(one), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "3/6" in result.stdout and "transpose_schedule" in result.stdout
    assert f"wrote {tmp_path / 'results.json'}" in result.stdout


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_new_run_leaves_only_its_own_submissions_beside_the_reports(graded, demo: Path, tmp_path: Path) -> None:
    """A run into a folder an earlier run wrote (here the demo set's) leaves in executed/, instructor/ and feedback/
    its own submissions only. The earlier run's records stay in submissions/; one whose notebooks are gone does not
    stand, so grading it again into this folder grades it anew and its notebooks come back."""
    _, first, _ = graded
    out = tmp_path / "grades"
    shutil.copytree(first, out)
    records = set((out / "submissions").iterdir())
    result = runner.invoke(app, ["grade", str(demo / "demo-wrong-transpose"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    label = f"stage-1/{LAB}.ipynb"
    assert _files(out / "executed") == _files(out / "instructor") == [label]
    assert _files(out / "feedback") == [f"stage-1/{LAB}.html", f"stage-1/{LAB}.md"]
    assert records < set((out / "submissions").iterdir())
    solution = read_submission(demo / "demo-solution" / "stage-1" / f"{LAB}.ipynb", f"demo-solution/{label}")
    assert [s.label for s in plan([solution], Store(out)).todo] == [solution.label]
    assert [o.label for o in plan([solution], Store(first)).reused] == [solution.label]


def test_missing_path_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["grade", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert "no such file or folder" in result.output and "Traceback" not in result.output


# -m slow (~30 s): CI holds the same promises elsewhere: the two doors' scores test by test on the hostile corpus
# (test_grader_isolation.test_nbgrader_gives_the_same_scores) and on every solution (test_solutions_both_doors), the
# written answers awaiting manual grading and the export (test_grader_export).
@pytest.mark.slow
def test_nbgrader_autograde_agrees(graded, demo: Path, tmp_path: Path) -> None:
    """Same submissions through `nbgrader autograde`: the same score per student, written answers in the
    gradebook awaiting manual grading, and `nbgrader export` lists every student."""
    from nbgrader.api import Gradebook

    course = generated_course(tmp_path)
    for student in EXPECTED:
        shutil.copytree(demo / student, course / "submitted" / student)
    run = nbgrader(course, "autograde", manifest().stage.id, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, score in EXPECTED.items():
            nb = gb.find_submission_notebook(LAB, manifest().stage.id, student)
            auto = {g.name: g for g in nb.grades}
            assert sum(auto[t.id].score for t in manifest().lab(LAB).tests) == graded[0][student]["score"] == score
            written = auto["index_map_swap"]
            assert written.max_score == 1
            if student != "demo-stub":
                assert written.auto_score is None and written.needs_manual_grade, student
    export = nbgrader(course, "export", "--to", str(tmp_path / "grades.csv"))
    assert export.returncode == 0, export.stdout + export.stderr
    text = (tmp_path / "grades.csv").read_text()
    for student in EXPECTED:
        assert student in text
