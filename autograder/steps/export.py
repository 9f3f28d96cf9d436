"""Hand the grades to nbgrader's side: a CSV with `nbgrader export`'s columns, and the autograde results merged
into an nbgrader gradebook (with the executed notebooks under `autograded/`), so the formgrader shows each
student's autograded tests next to the written answers still to grade.

Both follow nbgrader's own rules: a submission belongs to the student and assignment its path names in
nbgrader's layout (`<student>/<assignment>/<notebook>.ipynb`); a test cell's score is `determine_grade`;
a written answer left as handed out scores 0 with the comment "No response.", an answered one waits for a
grader (`needs_manual_grade`); an assignment's max score counts every lab of the stage, tests and written
answers alike.

Both count one result per (student, lab), chosen by `one_per_student_lab` (so they always agree), take the
submission time from the validated `timestamp` of the record (autograder.steps.discover), and handle each
submission on its own: one that cannot be exported is recorded in `failures` and the others go on.
Student strings go into the CSV through `untrusted.for_csv` (no spreadsheet formulas).
"""

from __future__ import annotations

import csv
import shutil
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import nbformat

from autograder import cells, untrusted
from autograder.steps.report import Failures
from autograder.steps.results import SubmissionResult
from autograder.course_manifest import manifest

NBGRADER_COLUMNS = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
]


class GradebookError(RuntimeError):
    """The gradebook cannot take these results (missing assignment, not an nbgrader database)."""


def student_of(label: str) -> str | None:
    """The student a submission belongs to in nbgrader's layout, `<student>/<assignment>/<notebook>.ipynb`
    from the folder given (autograder.steps.discover.nbgrader_place: never a folder deeper inside)."""
    from autograder.steps.discover import nbgrader_place

    place = nbgrader_place(label)
    return place[0] if place else None


def _student_id(label: str) -> str | None:
    """The CSV's student: nbgrader's layout, or a notebook graded on its own (`alice.ipynb`) by its name;
    None for anything else (a notebook deeper in some folder belongs to no one it could be exported as)."""
    if student_of(label) is not None:
        return student_of(label)
    return Path(label).stem if len(Path(label).parts) == 1 else None


def assignment_max_score() -> float:
    return float(
        sum(t.points for lab in manifest().labs for t in lab.tests)
        + sum(w.points for lab in manifest().labs for w in lab.written)
    )


def _timestamp(root: Path | None, r: SubmissionResult) -> str:
    """The record's validated timestamp; without one (results not from `course grade`), timestamp.txt beside
    the submission, validated the same way."""
    from autograder.steps.discover import parse_timestamp, read_timestamp

    if r.timestamp or root is None:
        return (parse_timestamp(r.timestamp).value or "") if r.timestamp else ""
    return read_timestamp((root / r.submission).parent).value or ""


def one_per_student_lab(results: Sequence[SubmissionResult]) -> tuple[list[SubmissionResult], list[str]]:
    """The results to export, one per (student, lab): the file named as the lab if there is one, else the
    first by path. Returns them and one line per result left out."""
    chosen: dict[tuple[str, str], SubmissionResult] = {}
    stage = manifest().stage.id
    notes = []
    for r in sorted(results, key=lambda r: (Path(r.submission).name != _lab_file(r.lab), r.submission)):
        if r.lab is None:
            continue
        student = _student_id(r.submission)
        if student is None:
            notes.append(f"{r.submission}: not exported, not <student>/{stage}/<notebook>.ipynb (no student)")
            continue
        chosen.setdefault((student, r.lab), r)
    kept = {id(r) for r in chosen.values()}
    notes += [
        f"{r.submission}: not exported, {chosen[(student, r.lab)].submission} is this student's {r.lab}"
        for r in results
        if r.lab is not None and id(r) not in kept and (student := _student_id(r.submission)) is not None
    ]
    return [r for r in results if id(r) in kept], notes


def _lab_file(lab_id: str | None) -> str | None:
    return Path(manifest().lab(lab_id).notebook).name if lab_id else None


def write_nbgrader_csv(
    results: Sequence[SubmissionResult], path: Path, *, root: Path | None = None, failures: Failures | None = None
) -> Path:
    """One row per student (the assignment is the stage), nbgrader export's columns; written answers count
    0 until graded by hand, as in nbgrader before manual grading."""
    failures = failures or Failures()
    stage = manifest().stage.id
    raw: dict[str, float] = defaultdict(float)
    stamps: dict[str, str] = {}
    for r in one_per_student_lab(results)[0]:
        with failures.guard(r.submission, "nbgrader-grades.csv"):
            student = _student_id(r.submission) or ""  # one_per_student_lab kept only results with one
            stamp = _timestamp(root, r)
            raw[student] += r.score
            stamps[student] = max(stamps.get(student, ""), stamp)
    path.parent.mkdir(parents=True, exist_ok=True)
    c = untrusted.for_csv
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(NBGRADER_COLUMNS)
        for student in sorted(raw):
            w.writerow(
                [
                    stage,
                    "",
                    c(stamps[student]),
                    c(student),
                    "",
                    "",
                    "",
                    raw[student],
                    0.0,
                    max(0.0, raw[student]),
                    assignment_max_score(),
                ]
            )
    return path


def merge_into_gradebook(
    results: Sequence[SubmissionResult],
    gradebook: Path,
    *,
    instructor_dir: Path,
    root: Path | None = None,
    failures: Failures | None = None,
) -> list[str]:
    """Record autograde scores in `gradebook` (an nbgrader gradebook.db) as `nbgrader autograde` would, and
    copy each executed notebook to `autograded/<student>/<assignment>/` beside it. Returns one line per
    submission left out (not in nbgrader's layout, not a lab)."""
    from nbgrader.api import Gradebook, MissingEntry

    stage = manifest().stage.id
    failures = failures or Failures()
    results, skipped = one_per_student_lab(results) if results else ([], [])
    skipped = list(skipped)
    if not gradebook.exists():
        raise GradebookError(
            f"{gradebook}: no such gradebook; nbgrader creates it with `nbgrader generate_assignment {stage}`"
        )
    course_root = gradebook.resolve().parent
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{gradebook.resolve()}") as gb:
        warnings.simplefilter("ignore")  # SQLAlchemy's autoflush notes from nbgrader's own add_submission
        try:
            gb.find_assignment(stage)
        except MissingEntry:
            raise GradebookError(
                f"{gradebook} has no assignment {stage!r}: run `nbgrader generate_assignment "
                f"{stage}` in the course folder first"
            ) from None
        for r in results:
            try:
                _merge_one(gb, r, stage, course_root, instructor_dir, root, skipped, gradebook)
            except Exception as e:  # noqa: BLE001 - one submission's failure must not stop the merge
                gb.db.rollback()
                failures.add(r.submission, "the gradebook merge", e)
    return skipped


def _merge_one(
    gb: Any,
    r: SubmissionResult,
    stage: str,
    course_root: Path,
    instructor_dir: Path,
    root: Path | None,
    skipped: list[str],
    gradebook: Path,
) -> None:
    """One submission into the gradebook, committed on its own."""
    from nbgrader.api import MissingEntry

    from autograder.steps.submission import safe_relpath

    student = student_of(r.submission)
    if student is None or r.lab is None:
        skipped.append(f"{r.submission}: not <student>/{stage}/<notebook>.ipynb or not a lab; not merged")
        return
    lab = manifest().lab(r.lab)
    notebook_id = Path(lab.notebook).stem
    try:
        gb.find_notebook(notebook_id, stage)
    except MissingEntry:
        skipped.append(
            f"{r.submission}: {gradebook} has no notebook {notebook_id!r} in {stage!r} "
            f"(re-run `nbgrader generate_assignment {stage}`); not merged"
        )
        return
    gb.update_or_create_student(student)
    stamp = _timestamp(root, r)
    if stamp:
        gb.update_or_create_submission(stage, student, timestamp=stamp)
    else:
        gb.update_or_create_submission(stage, student)
    executed = instructor_dir / safe_relpath(r.submission)
    nb = nbformat.read(executed, as_version=4) if executed.exists() else None
    if nb is not None:
        for cell in nb.cells:
            gid = cells.grade_id(cell)
            if not gid:
                continue
            if cells.is_grade(cell):
                grade = gb.find_grade(gid, notebook_id, stage, student)
                grade.auto_score = cells.grade(cell)
                grade.needs_manual_grade = grade.manual_score is not None or grade.auto_score is None
            if cells.is_solution(cell) or cells.is_task(cell):
                comment = gb.find_comment(gid, notebook_id, stage, student)
                comment.auto_comment = "No response." if cells.unchanged(cell) and not cells.is_task(cell) else None
        dest = course_root / "autograded" / student / stage / f"{notebook_id}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(executed, dest)
    else:  # unreadable submission: the tests as scored, written answers as unanswered
        scores = {t.name: t.points for t in r.tests} | {w.name: 0.0 for w in r.written}
        for name, points in scores.items():
            grade = gb.find_grade(name, notebook_id, stage, student)
            grade.auto_score = points
            grade.needs_manual_grade = grade.manual_score is not None
    gb.db.commit()
