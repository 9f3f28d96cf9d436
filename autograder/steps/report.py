"""The results of a batch as files: results.json and results.csv, and what could not be done (`Failures`).

Each submission is written on its own: a failure while writing one is recorded against it (`Failures`) and
the others are still written. Student strings reach the CSV through `untrusted.for_csv` (no formulas);
records are already plain text (autograder.steps.results). Tables and progress on the terminal are
course_tools.grading_report's.
"""

from __future__ import annotations

import contextlib
import csv
import json
from pathlib import Path
from typing import Any, Iterator, Sequence

from autograder import untrusted
from autograder.steps.results import SubmissionResult


class Failures:
    """What could not be done for which submission, one line each; the batch goes on without it."""

    def __init__(self) -> None:
        self.by_submission: dict[str, list[str]] = {}

    def add(self, submission: str, what: str, error: BaseException | str) -> None:
        why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.by_submission.setdefault(submission, []).append(untrusted.plain(f"{what} failed ({why})", 500))

    @contextlib.contextmanager
    def guard(self, submission: str, what: str) -> Iterator[None]:
        try:
            yield
        except Exception as e:  # noqa: BLE001 - one submission's failure must not stop the others
            self.add(submission, what, e)

    def apply(self, results: Sequence[SubmissionResult]) -> list[SubmissionResult]:
        """The results with each one's failures in its `failed` field."""
        out = []
        for r in results:
            lines = self.by_submission.get(r.submission)
            if lines:
                r = r.model_copy(update={"failed": "; ".join(([r.failed] if r.failed else []) + lines)})
                r = SubmissionResult.model_validate(r.model_dump())  # through the validators (cap)
            out.append(r)
        return out


def _record(r: SubmissionResult) -> dict[str, Any]:
    try:
        return r.model_dump()
    except Exception as e:  # noqa: BLE001 - keep the submission in the file, with why its record is missing
        return {
            "submission": r.submission,
            "lab": r.lab,
            "score": 0.0,
            "max_score": 0.0,
            "tests": [],
            "failed": untrusted.plain(f"its record could not be written ({type(e).__name__}: {e})"),
        }


def to_json(results: Sequence[SubmissionResult]) -> str:
    return json.dumps([_record(r) for r in results], indent=2, ensure_ascii=False)


CSV_COLUMNS = ["submission", "lab", "score", "max_score", "test", "points", "max_points", "passed", "message"]


def csv_rows(r: SubmissionResult) -> list[list[Any]]:
    """A submission's rows: one per test; one with its error (or why it was not handled) if it has no tests."""
    c = untrusted.for_csv
    if not r.tests:
        return [[c(r.submission), r.lab or "", r.score, r.max_score, "", "", "", "", c(r.failed or r.error or "")]]
    return [
        [c(r.submission), r.lab, r.score, r.max_score, t.name, t.points, t.max_points, t.passed, c(t.message)]
        for t in r.tests
    ]


def write_csv(results: Sequence[SubmissionResult], path: Path, failures: Failures | None = None) -> None:
    """One row per (submission, test); a submission that could not be graded gets one row with its error."""
    failures = failures or Failures()
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in results:
            with failures.guard(r.submission, "results.csv"):
                w.writerows(csv_rows(r))


def write_reports(
    results: Sequence[SubmissionResult], out_dir: Path, failures: Failures | None = None
) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / "results.json", out_dir / "results.csv"
    json_path.write_text(to_json(results) + "\n", encoding="utf-8")
    write_csv(results, csv_path, failures)
    return json_path, csv_path
