"""What grading produces: one record per submission, one per test. The JSON and CSV reports and the
nbgrader comparison all read these records."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TestResult(BaseModel):
    model_config = ConfigDict(frozen=True)
    __test__ = False   # not a pytest test class

    name: str
    points: float
    max_points: float
    passed: bool
    message: str


class WrittenResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    max_points: float
    status: str        # "answered: awaiting manual grading" or "not answered"


class SubmissionResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    submission: str            # path as given (or relative to the folder given)
    lab: str | None            # course.yml lab id, None if the file matches no lab
    score: float               # autograded points earned
    max_score: float           # autograded points available
    tests: list[TestResult]
    written: list[WrittenResult] = []
    notes: list[str] = []      # what the grader restored or noticed, one line each
    error: str | None = None   # why grading could not run normally (corrupt file, no such lab, ...)
