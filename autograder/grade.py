"""Grade one submission: identify → prepare → execute → score, each step a function a test can call alone.

    identify(submission)             -> Identified  the notebook validated, its lab named (autograder.identify)
    prepare(identified)              -> Prepared    the instructor's cells restored (autograder.restore)
    execute_cells(prepared, limits)  -> Execution   its cells run in a fresh jail, its hidden tests outside
                                                    it (autograder.engine)
    score(prepared, execution)       -> Graded      nbgrader's output limit and scoring (autograder.score),
                                                    the executed notebooks: whole, and safe to hand back

`grade_submission` chains them; a broken submission gets a score of 0 and a reason, never an exception.
`grade_payload` is the same as the task a worker runs (local or Dask): a Submission in, plain data out.
Finding submissions, storing and reporting them are autograder.discover, .record and .report.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import nbformat
from nbformat import NotebookNode
from pydantic import BaseModel, ConfigDict

from autograder import engine
from autograder.feedback import sanitize
from autograder.fingerprint import grader_fingerprint
from autograder.identify import Identified, Ungradable, identify, lab_named
from autograder.restore import restore
from autograder.results import SubmissionResult, TestResult
from autograder.sandbox import Limits
from autograder.score import score_tests, written_status
from autograder.submission import Submission, read_submission, safe_relpath, submission_label
from pallas_course.manifest import REPO_ROOT, LabSpec

__all__ = ["Graded", "Prepared", "execute_cells", "grade_one", "grade_payload", "grade_submission", "prepare",
           "safe_relpath", "score", "submission_label", "zero", "zero_result"]


class Graded(BaseModel):
    """What grading one submission gives: its result and its executed notebooks (as nbformat JSON text)."""
    model_config = ConfigDict(frozen=True)

    result: SubmissionResult
    executed: str | None = None   # safe to hand back: hidden tests and their tracebacks removed
    full: str | None = None       # whole, for the instructor and nbgrader's formgrader
    seconds: float = 0.0
    grader: str = ""              # grader_fingerprint(lab) where it was graded: a different one is refused


@dataclass(frozen=True)
class Prepared:
    identified: Identified
    notebook: NotebookNode        # the submission with the instructor's cells restored, outputs cleared
    notes: tuple[str, ...]        # what restoring changed, one line each

    @property
    def lab(self) -> LabSpec:
        return self.identified.lab


Execute = Callable[..., engine.Execution]   # engine.execute's signature: (nb, lab, *, limits, cell_timeout_s, jailed)


def prepare(identified: Identified) -> Prepared:
    """Restore the locked and deleted graded cells from solutions/, as nbgrader's OverwriteCells does."""
    lab = identified.lab
    nb = copy.deepcopy(identified.notebook)
    source = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    release = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    notes = restore(nb, source, release)
    return Prepared(identified, nb, tuple(notes))


def execute_cells(prepared: Prepared, limits: Limits, execute: Execute | None = None) -> engine.Execution:
    """Run the cells in the jail and the hidden tests outside it (`engine.execute`, or a stand-in for tests)."""
    return (execute or engine.execute)(copy.deepcopy(prepared.notebook), prepared.lab, limits=limits,
                   cell_timeout_s=limits.cell_timeout_s, jailed=limits.jailed)


def score(prepared: Prepared, run: engine.Execution) -> Graded:
    """Score the executed notebook with nbgrader's rules (its output limited first, in place, as nbgrader's
    autograde does); keep it whole, and sanitized for the student."""
    lab, label = prepared.lab, prepared.identified.submission.label
    nb = run.notebook
    limit_output(nb)
    tests = score_tests(nb, lab, run.stopped, stopped_in=run.stopped_in, replied=run.replied)
    notes = [*prepared.notes, *run.notes] + ([f"the run stopped early: {run.stopped}"] if run.stopped else [])
    result = SubmissionResult(
        submission=label, lab=lab.id, score=sum(t.points for t in tests), max_score=lab.autograded_max,
        tests=tests, written=written_status(nb, lab), notes=notes,
        error=prepared.identified.mismatch or run.stopped)
    return Graded(result=result, executed=_text(sanitize(nb)), full=_text(nb))


def grade_submission(submission: Submission, limits: Limits | None = None,
                     execute: Execute | None = None) -> Graded:
    """All of one submission's grading; never raises for a bad submission (it scores 0 with the reason)."""
    start = time.perf_counter()
    try:
        prepared = prepare(identify(submission))
    except Ungradable as e:
        graded = Graded(result=zero(e.lab, submission.label, e.why))
    else:
        graded = score(prepared, execute_cells(prepared, limits or Limits(), execute))
    return graded.model_copy(update={"seconds": time.perf_counter() - start,
                                     "grader": grader_fingerprint(graded.result.lab)})


def grade_payload(submission: Submission, limits: Limits) -> dict[str, Any]:
    """The task a worker runs: a top-level function of plain data (a Submission holds bytes and text), so it
    pickles to local workers and Dask alike; returns plain data, read back with `Graded.model_validate`."""
    return grade_submission(submission, limits).model_dump(mode="json")


def limit_output(nb: NotebookNode) -> None:
    """nbgrader's LimitOutput (autograde runs it before scoring): at most 1000 stream lines per cell, tracebacks
    shortened. Run here too, so a cell that prints past the limit scores the same on both paths."""
    from nbgrader.preprocessors import LimitOutput

    LimitOutput().preprocess(nb, {})


def _text(nb: NotebookNode) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"   # as nbformat.write saves it


def zero(lab: LabSpec | None, label: str, why: str) -> SubmissionResult:
    """0 on every test of `lab` (if any), with `why` as the reason."""
    tests = [TestResult(name=t.id, points=0, max_points=t.points, passed=False, message=why)
             for t in (lab.tests if lab else [])]
    return SubmissionResult(submission=label, lab=lab.id if lab else None, score=0,
                            max_score=lab.autograded_max if lab else 0, tests=tests, error=why)


def zero_result(path: Path | str, label: str, why: str) -> SubmissionResult:
    """0 on every test of the lab the file `path` names (if any), with `why` as the reason."""
    return zero(lab_named(Path(path).name), label, why)


def grade_one(path: Path, *, label: str | None = None, keep: Path | None = None,
              keep_full: Path | None = None, limits: Limits | None = None) -> SubmissionResult:
    """Grade the notebook at `path` in this process (its cells still jailed); never raises for a bad one.

    `keep`: where to save the executed copy a student may receive; `keep_full`: where to save it whole.
    """
    from autograder.store import write_atomic

    graded = grade_submission(read_submission(path, label or str(path)), limits)
    for where, text in ((keep, graded.executed), (keep_full, graded.full)):
        if where is not None and text is not None:
            write_atomic(where, text)
    return graded.result
