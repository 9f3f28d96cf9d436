"""Grading as data: one submission's grading is a frozen `Grading` record, each step a function from one
record to the next, and each door the list of its steps, run by one runner (`run`).

    COURSE_GRADE  identify → restore → execute → score   (each submission, in this process or a worker; the
                  class around it, discover → read → [these] → record → report, is
                  autograder.doors.course_grade.COURSE_GRADE, run by the same runner)
    NBGRADER      identify → restore → execute → score   (autograder.doors.nbgrader_engine: nbgrader's exporter runs
                  the first two on the bytes nbgrader's pre-convert hook read, its Execute the last two;
                  nbgrader then limits the output again, a no-op, and saves its own grades from the same outputs)

    identify  the submission's bytes as a validated notebook, and its lab          (autograder.steps.identify)
    restore   the instructor's cells put back from solutions/, as nbgrader does   (autograder.steps.restore)
    execute   its cells on an engine by name: in a jail, the hidden tests outside (autograder.steps.engines)
    score     nbgrader's output limit and rule, the notebooks whole and safe to hand back (autograder.steps.score)

A step that finds the submission cannot be graded records a 0 with the reason in `result`; the runner then
skips the rest. Nothing raises for a bad submission. The record keeps the names of the steps done, so a
door split across two callers (nbgrader's) resumes where it stopped and no step runs twice.
`grade_payload` is the task a worker runs: a Submission in, plain data (a `Graded`) out.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

import nbformat
from nbformat import NotebookNode
from pydantic import BaseModel, ConfigDict

from autograder import timeline
from autograder.steps import engines, identify as identify_step, restore as restore_step
from autograder.steps.execute import Execution
from autograder.steps.feedback import sanitize
from autograder.fingerprint import grader_fingerprint
from autograder.steps.results import SubmissionResult, TestResult
from autograder.jail.limits import Limits
from autograder.steps.score import score_tests, written_status
from autograder.steps.submission import Submission, read_submission
from autograder.course_manifest import REPO_ROOT, LabSpec


@dataclass(frozen=True)
class Grading:
    """Where one submission's grading stands: what each step added, in order."""

    submission: Submission
    limits: Limits = field(default_factory=Limits)
    engine: str = engines.JAIL
    lab: LabSpec | None = None  # identify: the lab it is graded as
    notebook: NotebookNode | None = None  # identify: as submitted, validated; restore: instructor's cells back
    mismatch: str | None = None  # identify: it holds another lab's cells than its name says
    notes: tuple[str, ...] = ()  # restore: what it changed, one line each
    run: Execution | None = None  # execute: the executed notebook, where and why it stopped
    result: SubmissionResult | None = None  # score, or a 0 with why from the step that stopped the grading
    executed: str | None = None  # score: the executed notebook safe to hand back (nbformat JSON)
    full: str | None = None  # score: whole, for the instructor and nbgrader's formgrader
    done: tuple[str, ...] = ()  # the steps run so far, in order (the runner keeps it)

    @property
    def label(self) -> str:
        return self.submission.label

    @property
    def stopped(self) -> bool:
        """A result is recorded: scored, or a 0 with why from a step that found it cannot be graded."""
        return self.result is not None


Step = Callable[[Grading], Grading]


def identify(g: Grading) -> Grading:
    try:
        found = identify_step.identify(g.submission)
    except identify_step.Ungradable as e:
        return dataclasses.replace(g, lab=e.lab, result=zero(e.lab, g.label, e.why))
    return dataclasses.replace(g, lab=found.lab, notebook=found.notebook, mismatch=found.mismatch)


def lab_notebooks(lab: LabSpec) -> tuple[NotebookNode, NotebookNode]:
    """The lab's source (solutions/, with the hidden tests) and its notebook as released to students."""
    return (nbformat.read(REPO_ROOT / lab.source, as_version=4), nbformat.read(REPO_ROOT / lab.notebook, as_version=4))


def restore(g: Grading) -> Grading:
    """The locked and deleted graded cells restored from solutions/, as nbgrader's OverwriteCells does."""
    assert g.lab is not None and g.notebook is not None
    nb = copy.deepcopy(g.notebook)
    notes = restore_step.restore(nb, *lab_notebooks(g.lab))
    return dataclasses.replace(g, notebook=nb, notes=(*g.notes, *notes))


def execute(g: Grading) -> Grading:
    """The cells on the grading's engine (a copy of the notebook: the record keeps the restored one). The
    grader's fingerprint, which the result is stamped with (a walk of the grader's imports: 1 s the first time
    in a process), is computed meanwhile, while this process mostly waits for the jail."""
    assert g.lab is not None and g.notebook is not None
    threading.Thread(target=grader_fingerprint, args=(g.lab.id,), name="fingerprint-meanwhile", daemon=True).start()
    return dataclasses.replace(g, run=engines.get(g.engine)(copy.deepcopy(g.notebook), g.lab, g.limits))


def score(g: Grading) -> Grading:
    """Score the executed notebook with nbgrader's rules (its output limited first, in place, as nbgrader's
    autograde does); keep it whole, and sanitized for the student."""
    assert g.lab is not None and g.run is not None
    lab, run, nb = g.lab, g.run, g.run.notebook
    limit_output(nb)
    tests = score_tests(nb, lab, run.stopped, stopped_in=run.stopped_in, replied=run.replied)
    notes = [*g.notes, *run.notes] + ([f"the run stopped early: {run.stopped}"] if run.stopped else [])
    result = SubmissionResult(
        submission=g.label,
        lab=lab.id,
        score=sum(t.points for t in tests),
        max_score=lab.autograded_max,
        tests=tests,
        written=written_status(nb, lab),
        notes=notes,
        error=g.mismatch or run.stopped,
    )
    return dataclasses.replace(g, result=result, executed=_text(sanitize(nb)), full=_text(nb))


COURSE_GRADE: tuple[Step, ...] = (identify, restore, execute, score)
NBGRADER: tuple[Step, ...] = (identify, restore, execute, score)


class State(Protocol):
    """What the runner needs of a record: the steps done, and whether it can go on."""

    @property
    def done(self) -> tuple[str, ...]: ...

    @property
    def stopped(self) -> bool: ...


S = TypeVar("S", bound=State)


def run(steps: Sequence[Callable[[S], S]], state: S, *, through: str | None = None) -> S:
    """`steps` in order, each at most once: those `state` has not done yet, until one stops it (a grading
    with its result) or, with `through`, once the step of that name is done."""
    for step in steps:
        if state.stopped:
            break
        if step.__name__ in state.done:
            continue
        with timeline.span(f"step {step.__name__}"):
            done = step(state)
        state = dataclasses.replace(done, done=(*state.done, step.__name__))  # type: ignore[type-var]
        if step.__name__ == through:
            break
    return state


# ------------------------------------------------------------------------------------ the worker's task


class Graded(BaseModel):
    """What grading one submission gives, as plain data: its result and its executed notebooks."""

    model_config = ConfigDict(frozen=True)

    result: SubmissionResult
    executed: str | None = None  # safe to hand back: hidden tests and their tracebacks removed
    full: str | None = None  # whole, for the instructor and nbgrader's formgrader
    seconds: float = 0.0
    grader: str = ""  # grader_fingerprint(lab) where it was graded: a different one is refused


def grade_submission(submission: Submission, limits: Limits | None = None, engine: str = engines.JAIL) -> Graded:
    """`course grade`'s steps for one submission; never raises for a bad submission (it scores 0 with why)."""
    start = time.perf_counter()
    g = run(COURSE_GRADE, Grading(submission, limits or Limits(), engine))
    assert g.result is not None
    return Graded(
        result=g.result,
        executed=g.executed,
        full=g.full,
        seconds=time.perf_counter() - start,
        grader=grader_fingerprint(g.result.lab),
    )


def grade_payload(submission: Submission, limits: Limits, engine: str = engines.JAIL) -> dict[str, Any]:
    """The task a worker runs: a top-level function of plain data (a Submission holds bytes and text), so it
    pickles to local workers and Dask alike; returns plain data, read back with `Graded.model_validate`."""
    return grade_submission(submission, limits, engine).model_dump(mode="json")


def grade_one(
    path: Path,
    *,
    label: str | None = None,
    keep: Path | None = None,
    keep_full: Path | None = None,
    limits: Limits | None = None,
) -> SubmissionResult:
    """Grade the notebook at `path` in this process (its cells still jailed); never raises for a bad one.

    `keep`: where to save the executed copy a student may receive; `keep_full`: where to save it whole.
    """
    from autograder.steps.store import write_atomic

    graded = grade_submission(read_submission(path, label or str(path)), limits)
    for where, text in ((keep, graded.executed), (keep_full, graded.full)):
        if where is not None and text is not None:
            write_atomic(where, text)
    return graded.result


# ------------------------------------------------------------------------------------------------ helpers


def limit_output(nb: NotebookNode) -> None:
    """nbgrader's LimitOutput (autograde runs it before scoring): at most 1000 stream lines per cell, tracebacks
    shortened. Run here too, so a cell that prints past the limit scores the same on both doors (a second
    pass, nbgrader's, changes nothing)."""
    from nbgrader.preprocessors import LimitOutput

    LimitOutput().preprocess(nb, {})


def _text(nb: NotebookNode) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"  # as nbformat.write saves it


def zero(lab: LabSpec | None, label: str, why: str) -> SubmissionResult:
    """0 on every test of `lab` (if any), with `why` as the reason."""
    tests = [
        TestResult(name=t.id, points=0, max_points=t.points, passed=False, message=why)
        for t in (lab.tests if lab else [])
    ]
    return SubmissionResult(
        submission=label,
        lab=lab.id if lab else None,
        score=0,
        max_score=lab.autograded_max if lab else 0,
        tests=tests,
        error=why,
    )


def zero_result(path: Path | str, label: str, why: str) -> SubmissionResult:
    """0 on every test of the lab the file `path` names (if any), with `why` as the reason."""
    return zero(identify_step.lab_named(Path(path).name), label, why)
