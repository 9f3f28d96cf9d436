"""Reports of grading results: a terminal table, JSON and CSV.

Each submission is written on its own: a failure while writing one is recorded against it (`Failures`) and
the others are still written. Student strings reach the terminal as `rich.text.Text` (never markup) and
the CSV through `untrusted.for_csv` (no formulas); records are already plain text (autograder.results).
"""
from __future__ import annotations

import contextlib
import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autograder import untrusted
from autograder.results import SubmissionResult, TestResult

if TYPE_CHECKING:
    from autograder.record import Outcome


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
                r = SubmissionResult.model_validate(r.model_dump())   # through the validators (cap)
            out.append(r)
        return out


def _record(r: SubmissionResult) -> dict[str, Any]:
    try:
        return r.model_dump()
    except Exception as e:  # noqa: BLE001 - keep the submission in the file, with why its record is missing
        return {"submission": r.submission, "lab": r.lab, "score": 0.0, "max_score": 0.0, "tests": [],
                "failed": untrusted.plain(f"its record could not be written ({type(e).__name__}: {e})")}


def to_json(results: Sequence[SubmissionResult]) -> str:
    return json.dumps([_record(r) for r in results], indent=2, ensure_ascii=False)


CSV_COLUMNS = ["submission", "lab", "score", "max_score", "test", "points", "max_points", "passed", "message"]


def csv_rows(r: SubmissionResult) -> list[list[Any]]:
    """A submission's rows: one per test; one with its error (or why it was not handled) if it has no tests."""
    c = untrusted.for_csv
    if not r.tests:
        return [[c(r.submission), r.lab or "", r.score, r.max_score, "", "", "", "", c(r.failed or r.error or "")]]
    return [[c(r.submission), r.lab, r.score, r.max_score, t.name, t.points, t.max_points, t.passed, c(t.message)]
            for t in r.tests]


def write_csv(results: Sequence[SubmissionResult], path: Path, failures: Failures | None = None) -> None:
    """One row per (submission, test); a submission that could not be graded gets one row with its error."""
    failures = failures or Failures()
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in results:
            with failures.guard(r.submission, "results.csv"):
                w.writerows(csv_rows(r))


def write_reports(results: Sequence[SubmissionResult], out_dir: Path,
                  failures: Failures | None = None) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / "results.json", out_dir / "results.csv"
    json_path.write_text(to_json(results) + "\n", encoding="utf-8")
    write_csv(results, csv_path, failures)
    return json_path, csv_path


def verdict(t: TestResult) -> Text:
    """"✓ passed", "◐ PARTIAL 2.7/3 · why" or "✗ why", the message as text."""
    if t.status == "passed":
        return Text("✓ passed", style="green")
    if t.status == "partial":
        return Text.assemble((f"◐ PARTIAL {t.points:g}/{t.max_points:g}", "yellow"), " · ", untrusted.plain(t.message))
    return Text.assemble(("✗", "red"), " ", untrusted.plain(t.message))


def submission_table(r: SubmissionResult) -> Table:
    title = Text(f"{untrusted.plain(r.submission)} · {r.lab or 'unknown lab'} · {r.score:g}/{r.max_score:g}")
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("test")
    table.add_column("points", justify="right")
    table.add_column("result")
    for t in r.tests:
        table.add_row(Text(t.name), f"{t.points:g}/{t.max_points:g}", verdict(t))
    for w in r.written:
        table.add_row(Text(w.name), f"–/{w.max_points:g}", Text.assemble(("written", "yellow"), ": ", w.status))
    if (r.error or r.failed) and not r.tests:
        table.add_row("–", "0", Text(untrusted.plain(r.failed or r.error), style="red"))
    return table


def print_table(results: Sequence[SubmissionResult], console: Console | None = None,
                failures: Failures | None = None) -> None:
    console = console or Console()
    failures = failures or Failures()
    for r in results:
        with failures.guard(r.submission, "the table"):
            console.print(submission_table(r))
            for note in r.notes:
                console.print(Text(f"  note: {note}"))
            for ignored in r.ignored:
                console.print(Text(f"  not graded: {ignored.name}: {ignored.reason}"))
            if r.failed:
                console.print(Text(f"  could not be handled: {r.failed}", style="red"))


def summary_rows(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Per lab: submissions, mean score, full marks, zero, errors, reused."""
    rows: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        r = o.result
        row = rows.setdefault(r.lab or "(not a lab)", {"lab": r.lab or "(not a lab)", "submissions": 0,
                                                       "max": r.max_score, "total": 0.0, "full": 0, "zero": 0,
                                                       "errors": 0, "reused": 0})
        row["submissions"] += 1
        row["total"] += r.score
        row["full"] += int(r.max_score > 0 and r.score >= r.max_score)
        row["zero"] += int(r.score == 0)
        row["errors"] += int(r.error is not None)
        row["reused"] += int(o.reused)
    for row in rows.values():
        row["mean"] = row["total"] / row["submissions"] if row["submissions"] else 0.0
    return list(rows.values())


def print_summary(rows: Sequence[dict], *, sandbox: str, console: Console | None = None, failed: int = 0,
                  refused: int = 0, ignored: int = 0) -> None:
    """One line per lab: how many submissions, the mean, full marks, zeros, errors, reused records; then how
    many submissions could not be handled, and how many files were refused or ignored."""
    console = console or Console()
    table = Table(title="Summary", title_justify="left")
    for col, justify in (("lab", "left"), ("submissions", "right"), ("mean", "right"), ("full marks", "right"),
                         ("zero", "right"), ("errors", "right"), ("reused", "right")):
        table.add_column(col, justify=justify)
    for row in rows:
        table.add_row(Text(str(row["lab"])), str(row["submissions"]), f"{row['mean']:.2f}/{row['max']:g}",
                      str(row["full"]), str(row["zero"]), str(row["errors"]), str(row["reused"]))
    console.print(table)
    console.print(Text(f"  kernels ran under: {sandbox}"))
    console.print(Text(handled_line(failed, refused, ignored), style="red" if failed or refused else ""))


def handled_line(failed: int, refused: int, ignored: int) -> str:
    return (f"  could not be handled: {failed} submission(s) (grader or report failure: see 'failed' in "
            f"results.json); refused: {refused} file(s) (links, special files); ignored: {ignored} extra "
            "notebook(s) beside a lab's own")


class BatchProgress:
    """A progress bar on stderr (a line per submission where stderr is not a terminal). The display never
    stops a batch: a failure to show one submission is recorded against it."""

    def __init__(self, console: Console | None = None, failures: Failures | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console or Console(stderr=True)
        self.failures = failures or Failures()
        self.progress = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.description}", markup=False), console=self.console,
                                 transient=False, disable=not self.console.is_terminal)
        self.task = None
        self.total = 0

    def __enter__(self) -> "BatchProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def planned(self, todo: int, reused: int) -> None:
        self.total += todo + reused   # called once per batch run; a run may have two (see grade_command)
        if self.task is None:
            self.task = self.progress.add_task("", total=self.total)
        else:
            self.progress.update(self.task, total=self.total)
        if not self.console.is_terminal:
            self.console.print(f"grading {todo} submission(s); {reused} unchanged since the last run, reused")

    def advance(self, outcome: Any) -> None:   # autograder.record.Outcome
        r = outcome.result
        with self.failures.guard(r.submission, "the progress display"):
            line = untrusted.plain(f"{'reused' if outcome.reused else 'graded'} {r.submission}: "
                                   f"{r.score:g}/{r.max_score:g}", 300).replace("\n", " ")
            if self.task is not None:
                self.progress.update(self.task, advance=1, description=line)
            if not self.console.is_terminal and not outcome.reused:
                self.console.print(Text(line), soft_wrap=True)
