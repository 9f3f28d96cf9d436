"""The record step, on either side of grading: which stored records still answer (plan), and keeping what
was graded (record), so a killed batch loses nothing graded and a re-run grades only what is new or changed.

A record stands while its notebook's SHA-256 and its grader's fingerprint (autograder.fingerprint) match and
it is not a grader failure (those are retried). Recording never raises: a failure to keep one submission's
results is recorded against that submission, and the batch goes on.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple

from autograder.fingerprint import grader_fingerprint
from autograder.steps.pipeline import Graded, zero_result
from autograder.steps.results import SubmissionResult
from autograder.steps.store import Record, Store
from autograder.steps.submission import Submission

GRADER_FAILED = "the grader failed"  # how the error of a grader failure starts (not the notebook's fault)


@dataclass(frozen=True)
class Outcome:
    label: str
    result: SubmissionResult
    reused: bool  # taken from a stored record, not graded in this run
    seconds: float


class Plan(NamedTuple):
    todo: list[Submission]  # to grade, in the order given
    reused: list[Outcome]  # answered by a stored record that still stands


def stands(record: Record | None, notebook_sha256: str, store: Store) -> bool:
    """The stored record still answers: same notebook, same grader, not a grader failure, its executed notebooks
    still kept (a later run into the same folder removes those of submissions it did not have)."""
    return (
        record is not None
        and not record.retry
        and record.notebook_sha256 == notebook_sha256
        and record.grader == grader_fingerprint(record.result.lab)
        and store.has_notebooks(record)
    )


def plan(submissions: Iterable[Submission], store: Store, *, force: bool = False) -> Plan:
    """Split into what to grade and what a stored record already answers (nothing, with `force`)."""
    todo, reused = [], []
    for sub in submissions:
        record = None if force else store.get(sub.label)
        if stands(record, sub.sha256, store):
            assert record is not None
            reused.append(Outcome(sub.label, record.result, True, record.seconds))
        else:
            todo.append(sub)
    return Plan(todo, reused)


def new_record(
    label: str,
    sha: str,
    result: SubmissionResult,
    seconds: float,
    *,
    retry: bool = False,
    grader: str | None = None,
    kept: tuple[str, ...] = (),
) -> Record:
    """`grader`: the fingerprint already checked against this grader's (else computed here); `kept`: the
    executed notebooks kept beside it."""
    return Record(
        label=label,
        notebook_sha256=sha,
        grader=grader or grader_fingerprint(result.lab),
        graded_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        seconds=round(seconds, 3),
        retry=retry,
        result=result,
        kept=kept,
    )


def record(store: Store, submission: Submission, graded: Graded | Mapping[str, Any]) -> Outcome:
    """Keep one graded submission (a Graded, or the plain data a worker returned): its executed notebooks,
    then its record. A result from a different grader, or a failure while saving, is a grader failure."""
    try:
        graded = graded if isinstance(graded, Graded) else Graded.model_validate(graded)
        if graded.grader != grader_fingerprint(graded.result.lab):
            return record_failure(
                store, submission, "graded by a different version of the course on the worker", graded.seconds
            )
        kept = store.put_notebooks(submission.label, executed=graded.executed, full=graded.full)
        store.put(
            new_record(
                submission.label, submission.sha256, graded.result, graded.seconds, grader=graded.grader, kept=kept
            )
        )
        return Outcome(submission.label, graded.result, False, graded.seconds)
    except Exception as e:  # noqa: BLE001 - a disk or record problem with one submission
        return record_failure(store, submission, f"saving its results failed ({type(e).__name__}: {e})")


def grader_failure(submission: Submission, why: str) -> SubmissionResult:
    return zero_result(
        submission.name,
        submission.label,
        f"{GRADER_FAILED} on this submission, not the notebook ({why}); a re-run grades it again",
    )


def record_failure(store: Store, submission: Submission, why: str, seconds: float = 0.0) -> Outcome:
    """The grader (not the notebook) failed on `submission`: 0 with why, and a record marked to retry. If even
    that record cannot be written, nothing is stored, which a re-run reads the same way."""
    result = grader_failure(submission, why)
    try:
        store.put(new_record(submission.label, submission.sha256, result, seconds, retry=True))
    except Exception:  # noqa: BLE001 - the outcome still says why; no record means graded again
        pass
    return Outcome(submission.label, result, False, seconds)
