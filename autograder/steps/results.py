"""What grading produces: one record per submission, one per test. The JSON and CSV reports and the
nbgrader comparison all read these records.

Every string a student can influence (the submission's path, test messages, notes, errors, names of ignored
files) passes through `autograder.untrusted.plain` when a record is built, wherever it is built (the
grader, a worker's payload, a stored record): no control characters, at most `MAX_CHARS` characters.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from autograder.untrusted import MAX_NAME_CHARS, name as shown_name, plain

NO_CREDIT = "no credit"


class TestResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    __test__ = False  # not a pytest test class

    name: str
    points: float
    max_points: float
    passed: bool
    message: str

    _plain = field_validator("message", mode="before")(lambda v: plain(v))

    @model_validator(mode="before")
    @classmethod
    def _partial_says_so(cls, data: object) -> object:
        """A test with some but not all of its points has partial credit; "no credit" would be untrue."""
        if isinstance(data, dict) and plain(data.get("message") or "").strip() in (NO_CREDIT, ""):
            try:
                points, top = float(data["points"]), float(data["max_points"])
            except (KeyError, TypeError, ValueError):
                return data
            if 0 < points < top:
                data = {**data, "message": f"partial credit: {points:g} of {top:g} points"}
        return data

    @property
    def status(self) -> str:
        """ "passed", "partial" (some of its points) or "failed"."""
        if self.passed or (self.max_points > 0 and self.points >= self.max_points):
            return "passed"
        return "partial" if self.points > 0 else "failed"


class WrittenResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    max_points: float
    status: str  # "answered: awaiting manual grading" or "not answered"

    _plain = field_validator("status", mode="before")(lambda v: plain(v))


class IgnoredFile(BaseModel):
    """A file beside a submission that was not graded, and why."""

    model_config = ConfigDict(frozen=True)

    name: str  # path as shown (relative to the folder given)
    reason: str

    _name = field_validator("name", mode="before")(lambda v: shown_name(v))
    _plain = field_validator("reason", mode="before")(lambda v: plain(v))


class SubmissionResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    submission: str  # path as given (or relative to the folder given)
    lab: str | None  # course.yml lab id, None if the file matches no lab
    score: float  # autograded points earned
    max_score: float  # autograded points available
    tests: list[TestResult]
    written: list[WrittenResult] = []
    notes: list[str] = []  # what the grader restored or noticed, one line each
    error: str | None = None  # why grading could not run normally (corrupt file, no such lab, ...)
    # Added by `course grade` around the grading (all optional; older records read as before):
    timestamp: str | None = None  # timestamp.txt beside the submission, validated, as nbgrader stores it
    ignored: list[IgnoredFile] = []  # other files in the student's folder, not graded, each with why
    failed: str | None = None  # why this submission could not be handled (grader or report failure)

    _name = field_validator("submission", mode="before")(lambda v: plain(shown_name(v), MAX_NAME_CHARS))
    _notes = field_validator("notes", mode="before")(lambda v: [plain(n) for n in v] if isinstance(v, list) else v)
    _plain = field_validator("error", "failed", "timestamp", mode="before")(lambda v: None if v is None else plain(v))
