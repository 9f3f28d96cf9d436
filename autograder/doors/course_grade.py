"""`course grade` for a class, declared: a frozen `ClassGrading` record, each step a function from one record to
the next, run by the pipeline's runner (autograder.steps.pipeline.run), each once, in order:

    COURSE_GRADE  discover → read → grade → report
    discover  the notebooks under the paths given, and the files not graded with why (autograder.steps.discover)
    read      each notebook's bytes, labelled and hashed, read once (autograder.steps.submission)
    grade     each submission a stored record does not answer through pipeline.COURSE_GRADE (identify →
              restore → execute → score) here, on local workers or on Dask, and recorded as it arrives
              (autograder.doors.batch, autograder.steps.record): a killed run loses nothing graded
    report    what discovery found attached (timestamps, ignored and refused files), then feedback pages,
              nbgrader-grades.csv, the gradebook, results.json and results.csv

Outputs under `out`: results.json and results.csv (the JSON contract of `course grade --json`),
nbgrader-grades.csv (`nbgrader export`'s columns), feedback/<submission>.md and .html, executed/ (notebooks
safe to hand back: no hidden tests), instructor/ (the whole executed notebooks), submissions/ (one record per
submission; see autograder.steps.store). With a gradebook: the scores merged into it (autograder.steps.export). The report
leaves in feedback/, executed/ and instructor/ this run's submissions only: what an earlier run into the same
folder left there (the demo's, another class's) is removed; its records in submissions/ stay, and one graded
again later is graded anew, as its notebooks are gone.

No submission can stop the batch: what is found is decided by autograder.steps.discover (links and special files
refused, extra notebooks ignored, timestamps validated), and a failure while showing or writing one
submission is recorded in its `failed` field (report.Failures) while the others go on. `GradeRun.unhandled`
counts the submissions that could not be handled; the command exits with `EXIT_UNHANDLED` when there are any.
Every label, record key and report path is text: a path's odd bytes show as U+FFFD (autograder.untrusted).
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder.steps import engines
from autograder.doors.batch import grade_each
from autograder.steps.discover import Discovery, Skipped, find_submissions
from autograder.steps.export import GradebookError, merge_into_gradebook, one_per_student_lab, write_nbgrader_csv
from autograder.steps.feedback import feedback_paths, feedback_stem, write_feedback
from autograder.steps.record import GRADER_FAILED, Outcome
from autograder.steps.report import Failures, to_json, write_reports
from autograder.steps.results import IgnoredFile, SubmissionResult
from autograder.jail.limits import Limits
from autograder.steps.pipeline import run
from autograder.steps.store import EXECUTED, INSTRUCTOR, Store, remove_all_but
from autograder.steps.submission import Submission, read_submission

EXIT_UNHANDLED = 3  # some submissions could not be handled (each says why in results.json)


@dataclass(frozen=True)
class GradeOptions:
    out: Path = Path("grades")
    jobs: int = 1
    force: bool = False
    scheduler: str | None = None
    timeout_s: float = 600
    cell_timeout_s: int | None = None
    memory_mb: int = 4096
    gradebook: Path | None = None
    engine: str = engines.JAIL  # autograder.steps.engines' name: "no-jail" for `--no-jail`

    def limits(self) -> Limits:
        return Limits(wall_s=self.timeout_s, memory_mb=self.memory_mb, cell_s=self.cell_timeout_s)


@dataclass
class GradeRun:
    outcomes: list[Outcome]
    results: list[SubmissionResult] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: Failures = field(default_factory=Failures)
    refused: int = 0
    ignored: int = 0
    error: str | None = None  # a problem of the whole run (the gradebook), reported after the rest
    jailed: bool = True  # False: graded with --no-jail (the summary says what that loses)

    @property
    def json_text(self) -> str:
        return to_json(self.results)

    @property
    def unhandled(self) -> int:
        return sum(r.failed is not None for r in self.results)

    @property
    def exit_code(self) -> int:
        return EXIT_UNHANDLED if self.unhandled else 0


def _folders(label: str) -> list[str]:
    return [str(p) for p in Path(label).parents]


def _attach(found: Discovery, outcomes: list[Outcome]) -> list[Outcome]:
    """Each result with its timestamp, its grader failure, and the files of its folder not graded; a file
    not graded with no result beside it becomes a result of its own (score 0, the reason)."""
    by_label = {found.label(p): p for p in found.notebooks}
    by_folder: dict[str, list[int]] = {}
    for i, o in enumerate(outcomes):
        by_folder.setdefault(str(Path(o.result.submission).parent), []).append(i)
    extra: dict[int, list[IgnoredFile]] = {}
    alone: list[Skipped] = []
    for s in found.skipped:
        near = next((by_folder[f] for f in _folders(s.label) if f in by_folder), None)
        if near is None:
            alone.append(s)
        for i in near or []:
            extra.setdefault(i, []).append(IgnoredFile(name=s.label, reason=s.reason))
    out = []
    for i, o in enumerate(outcomes):
        r = o.result
        update: dict = {"ignored": [*r.ignored, *extra.get(i, [])]}
        path = by_label.get(r.submission)
        stamp = found.timestamps.get(path) if path is not None else None
        if stamp is not None:
            update["timestamp"] = stamp.value
            if stamp.problem:
                update["notes"] = [*r.notes, stamp.problem]
        if r.error and r.error.startswith(GRADER_FAILED) and not r.failed:
            update["failed"] = r.error
        out.append(
            Outcome(
                o.label, SubmissionResult.model_validate(r.model_copy(update=update).model_dump()), o.reused, o.seconds
            )
        )
    for s in alone:
        out.append(Outcome(s.label, _not_graded(s.label, s.reason, failed=s.refused), False, 0.0))
    return out


def _not_graded(label: str, why: str, *, failed: bool) -> SubmissionResult:
    from autograder.steps.discover import lab_file_names
    from autograder.course_manifest import manifest

    lab_id = lab_file_names().get(Path(label).name)
    top = manifest().lab(lab_id).autograded_max if lab_id else 0
    why = why if why.startswith("not graded") else f"not graded: {why}"
    return SubmissionResult(
        submission=label, lab=lab_id, score=0, max_score=top, tests=[], error=why, failed=why if failed else None
    )


class Progress:
    """What the batch tells as it goes (course_tools.grading_report.BatchProgress shows it); silent here."""

    def planned(self, todo: int, reused: int) -> None:
        """Called once with how many submissions to grade and how many stored records answer."""

    def advance(self, outcome: Any) -> None:
        """Called with each Outcome as it arrives."""


@dataclass(frozen=True)
class ClassGrading:
    """Where grading a class stands: what each step added, in order (the runner keeps `done`)."""

    given: tuple[Path, ...]
    options: GradeOptions
    progress: Progress = field(default_factory=Progress)  # told as the batch goes (a display, or silent)
    failures: Failures = field(default_factory=Failures)  # met on the way, each against its submission
    found: Discovery | None = None  # discover
    submissions: tuple[Submission, ...] = ()  # read
    outcomes: tuple[Outcome, ...] = ()  # grade: each result, as recorded (or reused)
    run: GradeRun | None = None  # report
    done: tuple[str, ...] = ()

    @property
    def stopped(self) -> bool:
        return False  # a class always goes to its report; a problem of the whole run raises


def discover(c: ClassGrading) -> ClassGrading:
    return dataclasses.replace(c, found=find_submissions(c.given))


def read(c: ClassGrading) -> ClassGrading:
    assert c.found is not None
    return dataclasses.replace(c, submissions=tuple(read_submission(p, c.found.label(p)) for p in c.found.notebooks))


def grade(c: ClassGrading) -> ClassGrading:
    o = c.options
    outcomes = grade_each(
        list(c.submissions),
        out_dir=o.out,
        jobs=o.jobs,
        force=o.force,
        limits=o.limits(),
        scheduler=o.scheduler,
        engine=o.engine,
        on_plan=c.progress.planned,
        on_outcome=c.progress.advance,
    )
    return dataclasses.replace(c, outcomes=tuple(outcomes))


def report(c: ClassGrading) -> ClassGrading:
    assert c.found is not None
    return dataclasses.replace(c, run=write_report(c.found, _attach(c.found, list(c.outcomes)), c.options, c.failures))


COURSE_GRADE = (discover, read, grade, report)


def run_grade(
    given: Sequence[Path], options: GradeOptions, *, progress: Callable[[Failures], Any] | None = None
) -> GradeRun:
    """Grade the notebooks under `given` and write the reports (COURSE_GRADE). `progress(failures)`: a context
    manager with Progress's methods (a display), told as the batch goes; a failure to show one submission goes
    into `failures`. Raises SubmissionNotFound for a path with nothing to grade."""
    failures = Failures()
    with progress(failures) if progress else contextlib.nullcontext(Progress()) as shown:
        c = run(COURSE_GRADE, ClassGrading(tuple(given), options, shown, failures), through="grade")
    c = run(COURSE_GRADE, c)
    assert c.run is not None
    return c.run


def _remove_other_runs(out: Path, outcomes: Sequence[Outcome]) -> list[str]:
    """Leave in feedback/, executed/ and instructor/ the files of this run's submissions only; what could not be
    removed is a note (the reports of this run are right either way)."""
    keep = Store(out).notebook_paths(o.label for o in outcomes)
    keep |= {p for o in outcomes for p in feedback_paths(out, o.result)}
    notes = []
    for folder in ("feedback", EXECUTED, INSTRUCTOR):
        try:
            remove_all_but(out / folder, keep)
        except OSError as e:
            notes.append(f"{out / folder} still holds files of an earlier run ({type(e).__name__}: {e})")
    return notes


def write_report(found: Discovery, outcomes: list[Outcome], options: GradeOptions, failures: Failures) -> GradeRun:
    """The report and export step: feedback pages, nbgrader-grades.csv, the gradebook (if given), then
    results.json and results.csv with every failure met on the way."""
    run = GradeRun(
        outcomes,
        [o.result for o in outcomes],
        failures=failures,
        jailed=engines.is_jailed(options.engine),
        refused=sum(s.refused for s in found.skipped),
        ignored=sum(not s.refused for s in found.skipped),
    )
    out, root = options.out, found.root
    out.mkdir(parents=True, exist_ok=True)
    for r in run.results:
        with failures.guard(r.submission, f"the feedback page ({feedback_stem(out, r).name})"):
            write_feedback(r, out)
    run.notes += _remove_other_runs(out, run.outcomes)
    nbgrader_csv = write_nbgrader_csv(run.results, out / "nbgrader-grades.csv", root=root, failures=failures)
    run.notes += one_per_student_lab(run.results)[1]
    if options.gradebook is not None:
        try:
            run.notes += [
                n
                for n in merge_into_gradebook(
                    run.results, options.gradebook, instructor_dir=out / INSTRUCTOR, root=root, failures=failures
                )
                if n not in run.notes
            ]
        except GradebookError as e:
            run.error = str(e)
    run.results = failures.apply(run.results)
    run.outcomes = [Outcome(o.label, r, o.reused, o.seconds) for o, r in zip(run.outcomes, run.results)]
    json_path, csv_path = write_reports(run.results, out, failures)
    run.written += [json_path, csv_path, nbgrader_csv, out / "feedback"]
    if options.gradebook is not None and run.error is None:
        run.written.append(options.gradebook)
    return run
