"""What `course grade` does once its arguments are parsed: the whole pipeline, found submissions in, reports out.

    _grade    the batch (autograder.batch: read, plan, grade in the jail and check outside, record)
    _attach   what discovery found beside each result: timestamps, ignored and refused files
    report    feedback pages, nbgrader-grades.csv, the gradebook, results.json and results.csv

Outputs under `out`: results.json and results.csv (the JSON contract of `course grade --json`),
nbgrader-grades.csv (`nbgrader export`'s columns), feedback/<submission>.md and .html, executed/ (notebooks
safe to hand back: no hidden tests), instructor/ (the whole executed notebooks), submissions/ (one record per
submission; see autograder.store). With a gradebook: the scores merged into it (autograder.export).

No submission can stop the batch: what is found is decided by autograder.discover (links and special files
refused, extra notebooks ignored, timestamps validated), and a failure while showing or writing one
submission is recorded in its `failed` field (report.Failures) while the others go on. `GradeRun.unhandled`
counts the submissions that could not be handled; the command exits with `EXIT_UNHANDLED` when there are any.

A notebook whose path is not plain text (bytes that are not UTF-8, control characters) is graded from a
copy under `out/.staged/`, named as shown (U+FFFD for each such byte), so every label, record key and
report path is text.
"""
from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder import engines
from autograder.batch import run_batch
from autograder.discover import Discovery, Skipped
from autograder.export import GradebookError, merge_into_gradebook, one_per_student_lab, write_nbgrader_csv
from autograder.feedback import feedback_stem, write_feedback
from autograder.record import GRADER_FAILED, Outcome
from autograder.report import Failures, to_json, write_reports
from autograder.results import IgnoredFile, SubmissionResult
from autograder.limits import Limits
from autograder.store import INSTRUCTOR

EXIT_UNHANDLED = 3     # some submissions could not be handled (each says why in results.json)
STAGED = ".staged"


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
    jailed: bool = True

    def limits(self) -> Limits:
        return Limits(wall_s=self.timeout_s, memory_mb=self.memory_mb, cell_s=self.cell_timeout_s)

    @property
    def engine(self) -> str:
        return engines.JAIL if self.jailed else engines.NO_JAIL


@dataclass
class GradeRun:
    outcomes: list[Outcome]
    results: list[SubmissionResult] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: Failures = field(default_factory=Failures)
    refused: int = 0
    ignored: int = 0
    error: str | None = None     # a problem of the whole run (the gradebook), reported after the rest
    jailed: bool = True          # False: graded with --no-jail (the summary says what that loses)

    @property
    def json_text(self) -> str:
        return to_json(self.results)

    @property
    def unhandled(self) -> int:
        return sum(r.failed is not None for r in self.results)

    @property
    def exit_code(self) -> int:
        return EXIT_UNHANDLED if self.unhandled else 0


def _root(given: Sequence[Path]) -> Path | None:
    return given[0] if len(given) == 1 and given[0].is_dir() else None


def _batch_label(path: Path, root: Path | None) -> str:
    """The label autograder.batch gives `path` (grade.submission_label's rule)."""
    return str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)


def _stage(path: Path, label: str, staging: Path) -> Path:
    """A copy of `path` at `staging/<label>`, the label's parts kept inside `staging`."""
    parts = [p for p in Path(label).parts if p not in ("/", "..", ".", "")] or ["submission.ipynb"]
    dest = staging.joinpath(*parts)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest, follow_symlinks=False)
    return dest


class Progress:
    """What the batch tells as it goes (course_tools.grading_report.BatchProgress shows it); silent here."""

    def planned(self, todo: int, reused: int) -> None:
        """Called once per batch run (a run may have two: see _grade) with how many to grade and reuse."""

    def advance(self, outcome: Any) -> None:
        """Called with each Outcome as it arrives."""


def _grade(found: Discovery, options: GradeOptions, progress: Progress,
           failures: Failures) -> list[Outcome]:
    root = found.root
    plain, odd = [], []
    for path in found.notebooks:
        (plain if _batch_label(path, root) == found.label(path) else odd).append(path)
    batches: list[tuple[list[Path], Path | None]] = [(plain, root)] if plain else []
    if odd:
        staging = options.out / STAGED
        shutil.rmtree(staging, ignore_errors=True)
        staged = []
        for path in odd:
            try:
                staged.append(_stage(path, found.label(path), staging))
            except OSError as e:
                failures.add(found.label(path), "copying the notebook to grade it", e)
        batches.append((staged, staging))
    outcomes: list[Outcome] = []
    for paths, batch_root in batches:
        outcomes += run_batch(paths, out_dir=options.out, root=batch_root, jobs=options.jobs, force=options.force,
                              limits=options.limits(), scheduler=options.scheduler, engine=options.engine,
                              on_plan=progress.planned,
                              on_outcome=progress.advance)
    return outcomes


def _folders(label: str) -> list[str]:
    return [str(p) for p in Path(label).parents]


def _attach(found: Discovery, outcomes: list[Outcome], failures: Failures) -> list[Outcome]:
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
        out.append(Outcome(o.label, SubmissionResult.model_validate(r.model_copy(update=update).model_dump()),
                           o.reused, o.seconds))
    for label, lines in failures.by_submission.items():   # notebooks that never reached the batch
        if label not in {o.result.submission for o in out}:
            out.append(Outcome(label, _not_graded(label, "; ".join(lines), failed=True), False, 0.0))
    for s in alone:
        out.append(Outcome(s.label, _not_graded(s.label, s.reason, failed=s.refused), False, 0.0))
    return out


def _not_graded(label: str, why: str, *, failed: bool) -> SubmissionResult:
    from autograder.discover import lab_file_names
    from autograder.course_manifest import manifest

    lab_id = lab_file_names().get(Path(label).name)
    top = manifest().lab(lab_id).autograded_max if lab_id else 0
    why = why if why.startswith("not graded") else f"not graded: {why}"
    return SubmissionResult(submission=label, lab=lab_id, score=0, max_score=top, tests=[],
                            error=why, failed=why if failed else None)


def run_grade(found: Discovery | list[Path], given: Sequence[Path], options: GradeOptions, *,
              progress: Callable[[Failures], Any] | None = None) -> GradeRun:
    """Grade what `found` holds (a Discovery, or the notebooks themselves, found under `given`) and write
    the reports. `progress(failures)`: a context manager with Progress's methods (a display), told as the
    batch goes; a failure to show one submission goes into `failures`."""
    if not isinstance(found, Discovery):
        found = Discovery(_root(given), notebooks=list(found))
    failures = Failures()
    with (progress(failures) if progress else contextlib.nullcontext(Progress())) as shown:
        outcomes = _grade(found, options, shown, failures)
    return report(found, _attach(found, outcomes, failures), options, failures)


def report(found: Discovery, outcomes: list[Outcome], options: GradeOptions, failures: Failures) -> GradeRun:
    """The report and export step: feedback pages, nbgrader-grades.csv, the gradebook (if given), then
    results.json and results.csv with every failure met on the way."""
    run = GradeRun(outcomes, [o.result for o in outcomes], failures=failures, jailed=options.jailed,
                   refused=sum(s.refused for s in found.skipped), ignored=sum(not s.refused for s in found.skipped))
    out, root = options.out, found.root
    out.mkdir(parents=True, exist_ok=True)
    for r in run.results:
        with failures.guard(r.submission, f"the feedback page ({feedback_stem(out, r).name})"):
            write_feedback(r, out)
    nbgrader_csv = write_nbgrader_csv(run.results, out / "nbgrader-grades.csv", root=root, failures=failures)
    run.notes += one_per_student_lab(run.results)[1]
    if options.gradebook is not None:
        try:
            run.notes += [n for n in merge_into_gradebook(run.results, options.gradebook,
                                                          instructor_dir=out / INSTRUCTOR, root=root,
                                                          failures=failures)
                          if n not in run.notes]
        except GradebookError as e:
            run.error = str(e)
    run.results = failures.apply(run.results)
    run.outcomes = [Outcome(o.label, r, o.reused, o.seconds) for o, r in zip(run.outcomes, run.results)]
    json_path, csv_path = write_reports(run.results, out, failures)
    run.written += [json_path, csv_path, nbgrader_csv, out / "feedback"]
    if options.gradebook is not None and run.error is None:
        run.written.append(options.gradebook)
    return run
