"""What goes wrong across the grader's folders, in one module at the bottom (as papermill's exceptions.py): the
jail's and the judge's failures, which the session, the checks, the steps and the doors all read.

Exceptions local to one module stay there (wire.WireError, budgets.OverBudget, zygote.ZygoteFailed,
jails.JailUnavailable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class StudentGone(RuntimeError):
    """The jailed process ended (exit, crash, limit) or stopped answering: `why` says which, in words."""

    def __init__(self, why: str, *, silent: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.silent = silent  # True: it stopped answering (a hang), rather than ended


class BadAnswer(RuntimeError):
    """The jail answered with data that does not follow the wire format (a broken or forged agent)."""


class SetupFailed(RuntimeError):
    """The jail could not start the grading agent, or its helpers are not the grader's: a problem of this
    machine's set-up, never of a submission (no student code has run yet), so nobody may be scored for it.
    The message holds the jail's own words (bubblewrap's or Python's stderr)."""


@dataclass(frozen=True)
class StudentError(Exception):
    """The student's function raised; fields as the agent described it (data, not an exception object)."""

    phase: str  # "trace", "run", "call", "rebuild" (the grader refused the traced computation) or
    # "judge" (the grader's rebuild, run or compile of it overran its box: text says which)
    ename: str
    text: str  # the error's one line that matters
    not_implemented: bool
    explanation: str | None = None

    def __str__(self) -> str:
        return self.text


def student_error_from(err: Any) -> StudentError:
    """The agent's (or the judge's) description of an error, as untrusted data, capped: a StudentError."""
    if not isinstance(err, dict):
        raise BadAnswer("a failed call without an error description")
    text = err.get("text")
    explanation = err.get("explanation")
    return StudentError(
        phase=str(err.get("phase", "run"))[:20],
        ename=str(err.get("ename", "Error"))[:100],
        text=str(text)[:2000] if text else "an error without a message",
        not_implemented=err.get("not_implemented") is True,
        explanation=str(explanation)[:2000] if explanation else None,
    )


def judge_error(text: str) -> StudentError:
    """The judge's rebuild, run or compile of a student's computation overran its box: `text` says which."""
    return StudentError(phase="judge", ename="Overrun", text=text[:2000], not_implemented=False)


class Overrun(RuntimeError):
    """The judge was stopped (a limit, the deadline) or ended while answering; `why` says it to the student."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
