"""A class batch with hostile folders among ordinary ones: every ordinary submission graded, each hostile one
with a reason, the exports in agreement, nothing of a student's shown as markup.

Grading is stubbed at `autograder.doors.batch.grade_payload` (the task a worker runs for one submission): the
"notebooks" here are small JSON files saying which points and messages the stub returns, so 30 submissions
take seconds, not 30 kernels. Real grading is covered by test_grade_cli.py and test_grader_export.py.
"""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import autograder.doors.batch
from autograder.doors.course_grade import EXIT_UNHANDLED
from autograder.steps.results import SubmissionResult, TestResult
from autograder.fingerprint import grader_fingerprint
from autograder.steps.submission import Submission
from autograder.untrusted import CUT, MAX_CHARS
from course_tools.cli import app
from autograder.course_manifest import REPO_ROOT, manifest
from tests.small_gradebook import small_gradebook

LAB = "lab-1.1-first-kernels"
FILE = f"{LAB}.ipynb"
STAGE = manifest().stage.id
ORDINARY = [f"student{i:02d}" for i in range(25)]
BIG = "=HYPERLINK(\"http://x\")\x1b[31m[bold]red[/]" + "x" * 5_000_000
NOT_UTF8 = os.fsdecode(b"ren\xe9e\x1b")  # Latin-1 e-acute and an ESC: shown as ren\ufffde\ufffd
# aaron has a lab of his own beside his plants; mallory has only plants (so they are results of their own)
PLANTED = [
    f"aaron/{STAGE}/bob/{STAGE}/{FILE}",
    f"aaron/{STAGE}/x/carl/{STAGE}/{FILE}",
    f"mallory/{STAGE}/bob/{STAGE}/{FILE}",
    f"mallory/x/y/carl/{STAGE}/{FILE}",
    f"mallory/{STAGE}/a/b/bob/{STAGE}/bob/{STAGE}/{FILE}",
    f"mallory/{FILE}",
]


def stub_payload(submission: Submission, limits: Any, engine: str = "jail") -> dict[str, Any]:
    """What a worker returns, from the stub notebook's JSON: {"points": [...], "message": "..."}."""
    spec, label = json.loads(submission.data or b"{}"), submission.label
    lab = manifest().lab(LAB)
    points = spec.get("points", [t.points for t in lab.tests])
    tests = [
        TestResult(
            name=t.id,
            points=p,
            max_points=t.points,
            passed=p >= t.points,
            message="passed" if p >= t.points else "no credit" if p > 0 else spec.get("message", "wrong"),
        )
        for t, p in zip(lab.tests, points)
    ]
    result = SubmissionResult(submission=label, lab=LAB, score=sum(points), max_score=lab.autograded_max, tests=tests)
    return {
        "result": result.model_dump(mode="json"),
        "seconds": 0.01,
        "grader": grader_fingerprint(LAB),
        "executed": None,
        "full": None,
    }


def _notebook(path: Path, **spec: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    return path


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    course = tmp_path_factory.mktemp("course")
    small_gradebook(course / "gradebook.db")
    sub = course / "submitted"
    for student in ORDINARY:
        _notebook(sub / student / STAGE / FILE)
        (sub / student / STAGE / "timestamp.txt").write_text("2026-11-29 10:00:00.000000 UTC")
    # 1. a link to the instructor's solution, named as the lab: refused, never read
    (sub / "linda" / STAGE).mkdir(parents=True)
    (sub / "linda" / STAGE / FILE).symlink_to(REPO_ROOT / "solutions" / STAGE / FILE)
    # 2. a fifo named as the lab: refused, never opened (opening one would block the batch)
    (sub / "fifi" / STAGE).mkdir(parents=True)
    os.mkfifo(sub / "fifi" / STAGE / FILE)
    # 3. the same lab three times: the file named as the lab graded, the copies ignored
    _notebook(sub / "dan" / STAGE / FILE)
    _notebook(sub / "dan" / STAGE / "lab-1.1 copy.ipynb")
    _notebook(sub / "dan" / STAGE / "old" / FILE)
    # 4. markup in a folder and a file name, a timestamp that is not a date, messages that are formulas
    eve = sub / "eve[" / STAGE
    _notebook(eve / FILE, points=[2, 0, 0.5, 0], message="=cmd|' /C calc'!A0 [link=file:///etc]x[/link]")
    _notebook(eve / "]x[bold].ipynb")
    (eve / "timestamp.txt").write_text("yesterday-ish [/]")
    # 5. a name that is not UTF-8 with a terminal escape; a 5 MB message with escapes and markup
    _notebook(sub / NOT_UTF8 / STAGE / FILE, points=[0, 0, 0, 0], message=BIG)
    # 6. notebooks planted deeper in a student's folder, named after other students' folders, at any depth
    for planted in PLANTED:
        _notebook(sub / planted, points=[0, 0, 0, 0], message="planted")
    for student in ("bob", "carl", "aaron"):
        _notebook(sub / student / STAGE / FILE)
    out = tmp_path_factory.mktemp("grades")
    mp = pytest.MonkeyPatch()
    mp.setattr(autograder.doors.batch, "grade_payload", stub_payload)
    try:
        run = CliRunner().invoke(
            app, ["grade", str(sub), "--out", str(out), "--gradebook", str(course / "gradebook.db")]
        )
    finally:
        mp.undo()
    records = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {
        "run": run,
        "out": out,
        "course": course,
        "by": {r["submission"].split("/")[0]: r for r in records},
        "records": records,
    }


def test_ordinary_ones_graded_hostile_ones_each_with_a_reason(batch) -> None:
    run, by = batch["run"], batch["by"]
    assert run.exit_code == EXIT_UNHANDLED, run.output
    assert "2 submission(s) could not be handled" in run.output
    for student in ORDINARY:
        r = by[student]
        assert (r["score"], r["error"], r["failed"], r["timestamp"]) == (
            6,
            None,
            None,
            "2026-11-29 10:00:00.000000 UTC",
        ), r
    assert "symbolic link: never followed" in by["linda"]["failed"] and by["linda"]["score"] == 0
    assert "not a regular file" in by["fifi"]["failed"]
    assert by["dan"]["score"] == 6 and by["dan"]["submission"] == f"dan/{STAGE}/{FILE}"
    assert sorted(i["name"] for i in by["dan"]["ignored"]) == [
        f"dan/{STAGE}/lab-1.1 copy.ipynb",
        f"dan/{STAGE}/old/{FILE}",
    ]
    assert all("is the file named as the lab" in i["reason"] for i in by["dan"]["ignored"])
    eve = by["eve["]
    assert eve["score"] == 2.5 and eve["timestamp"] is None
    assert any("timestamp.txt is not a date" in n for n in eve["notes"])
    assert [i["name"] for i in eve["ignored"]] == [f"eve[/{STAGE}/]x[bold].ipynb"]
    assert {t["name"]: t["message"] for t in eve["tests"]}["transpose_schedule"] == "partial credit: 0.5 of 1 points"
    renee = by["ren\ufffde\ufffd"]
    assert renee["failed"] is None and renee["score"] == 0
    assert len(batch["records"]) == 25 + 5 + 3 + 4  # bob, carl, aaron; mallory's 4 plants, each a 0 of its own


def test_messages_are_capped_and_plain(batch) -> None:
    message = batch["by"]["ren\ufffde\ufffd"]["tests"][1]["message"]
    assert message.startswith('=HYPERLINK("http://x")[bold]red[/]') and "\x1b" not in message
    assert len(message) <= MAX_CHARS + len(CUT.format(n=10**7))
    assert message.endswith(CUT.format(n=len(BIG) - MAX_CHARS - len("\x1b[31m")))
    assert (batch["out"] / "results.json").stat().st_size < 200_000


def test_csv_cells_are_never_formulas(batch) -> None:
    for name in ("results.csv", "nbgrader-grades.csv"):
        for row in csv.reader((batch["out"] / name).open(encoding="utf-8")):
            assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row), (name, row)
    rows = list(csv.DictReader((batch["out"] / "results.csv").open(encoding="utf-8")))
    assert any(r["message"].startswith("'=cmd|") for r in rows)


def test_exports_agree_one_result_per_student_and_lab(batch) -> None:
    """nbgrader-grades.csv and the gradebook: dan counted once, eve merged without a time, the refused
    ones at 0, everyone else at 6."""
    from nbgrader.api import Gradebook

    csv_rows = {r["student_id"]: r for r in csv.DictReader((batch["out"] / "nbgrader-grades.csv").open())}
    assert float(csv_rows["dan"]["raw_score"]) == 6 and float(csv_rows["eve["]["raw_score"]) == 2.5
    assert {float(csv_rows[s]["raw_score"]) for s in ORDINARY} == {6.0}
    with Gradebook(f"sqlite:///{batch['course'] / 'gradebook.db'}") as gb:
        for student, row in csv_rows.items():
            if student in ("linda", "fifi"):
                continue
            nb = gb.find_submission_notebook(LAB, STAGE, student)
            score = sum(g.auto_score or 0 for g in nb.grades if g.name in {t.id for t in manifest().lab(LAB).tests})
            assert score == float(row["raw_score"]), student
        assert gb.find_submission(STAGE, "eve[").timestamp is None


def test_a_student_is_who_the_top_folder_says(batch) -> None:
    """A notebook deeper in aaron's (or mallory's) folder is aaron's extra file, whatever the folders below
    are called: bob and carl keep their own 6/6 in nbgrader-grades.csv and the gradebook; mallory, who
    submitted nothing at <student>/<stage>/, is not exported at all; no record is anyone else's."""
    from nbgrader.api import Gradebook

    records = batch["records"]
    aaron = next(r for r in records if r["submission"] == f"aaron/{STAGE}/{FILE}")
    assert aaron["score"] == 6
    assert sorted(i["name"] for i in aaron["ignored"]) == sorted(PLANTED[:2])
    for planted in PLANTED[2:]:
        r = next(r for r in records if r["submission"] == planted)
        assert (r["score"], r["failed"]) == (0, None) and r["error"].startswith("not graded: "), r
        assert "mallory's folder" in r["error"] or "not in a student's folder" in r["error"], r["error"]
        assert not r["tests"]
    csv_rows = {
        r["student_id"]: float(r["raw_score"]) for r in csv.DictReader((batch["out"] / "nbgrader-grades.csv").open())
    }
    assert (csv_rows["bob"], csv_rows["carl"], csv_rows["aaron"]) == (6, 6, 6)
    assert "mallory" not in csv_rows and FILE[:-6] not in csv_rows
    with Gradebook(f"sqlite:///{batch['course'] / 'gradebook.db'}") as gb:
        for student in ("bob", "carl", "aaron"):
            nb = gb.find_submission_notebook(LAB, STAGE, student)
            assert sum(g.auto_score or 0 for g in nb.grades) == 6, student
        assert "mallory" not in {s.id for s in gb.students}
    assert any(f"mallory/{STAGE}/bob/{STAGE}/{FILE}: not exported" in line for line in batch["run"].output.splitlines())


def test_nbgrader_place_counts_from_the_top() -> None:
    from autograder.steps.discover import nbgrader_place
    from autograder.steps.export import student_of

    assert nbgrader_place(f"bob/{STAGE}/{FILE}") == ("bob", FILE)
    for label in (
        f"aaron/{STAGE}/bob/{STAGE}/{FILE}",
        f"x/bob/{STAGE}/{FILE}",
        f"{STAGE}/{FILE}",
        FILE,
        f"bob/other/{FILE}",
        f"bob/{STAGE}/notes.txt",
        "/".join(["a", STAGE] * 20 + [FILE]),
    ):
        assert nbgrader_place(label) is None and student_of(label) is None, label


def test_feedback_escapes_names_and_lists_what_was_ignored(batch) -> None:
    feedback = batch["out"] / "feedback"
    md = (feedback / "eve[" / STAGE / f"{LAB}.md").read_text(encoding="utf-8")
    assert "eve\\[" in md and "\\]x\\[bold\\]" in md and "\\[link=file:///etc\\]" in md
    assert not re.search(r"(?<!\\)[\[\]<>]", md), "every bracket escaped"
    page = (feedback / "dan" / STAGE / f"{LAB}.html").read_text(encoding="utf-8")
    assert "<h2>Not graded</h2>" in page and "lab-1.1 copy.ipynb" in page
    assert (feedback / "ren\ufffde\ufffd" / STAGE / f"{LAB}.md").exists()


def test_discovery_rules(tmp_path: Path) -> None:
    """Links inside are refused, the folder named on the command line is followed; two names that show the
    same: the second refused; a missing path or an empty folder is a one-line error."""
    from autograder.steps.discover import SubmissionNotFound, find_submissions

    real = tmp_path / "real"
    _notebook(real / "amy" / STAGE / FILE)
    (real / "amy" / STAGE / "peek").symlink_to(REPO_ROOT / "solutions", target_is_directory=True)
    _notebook(real / os.fsdecode(b"z\xff") / STAGE / FILE)
    _notebook(real / os.fsdecode(b"z\xfe") / STAGE / FILE)
    (tmp_path / "given").symlink_to(real, target_is_directory=True)
    found = find_submissions([tmp_path / "given"])
    assert [found.label(p) for p in found.notebooks] == [f"amy/{STAGE}/{FILE}", f"z\ufffd/{STAGE}/{FILE}"]
    assert [(s.label, s.refused) for s in found.skipped] == [
        (f"amy/{STAGE}/peek", True),
        (f"z\ufffd/{STAGE}/{FILE}", True),
    ]
    assert "shows the same as" in found.skipped[1].reason
    with pytest.raises(SubmissionNotFound, match="nope: no such file or folder"):
        find_submissions([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SubmissionNotFound, match="empty: no .ipynb files in this folder"):
        find_submissions([tmp_path / "empty"])
