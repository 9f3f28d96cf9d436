"""What `course grade` shows on the terminal: a table per submission, the summary per lab, the progress bar.

Student strings reach the terminal as `rich.text.Text` (never markup). The display never stops a batch: a
failure to show one submission is recorded against it (autograder.steps.report.Failures).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from autograder import untrusted
from autograder.steps.report import Failures
from autograder.steps.results import SubmissionResult, TestResult
from autograder.jail.limits import sandbox_status

if TYPE_CHECKING:
    from autograder.doors.course_grade import GradeRun
    from autograder.steps.record import Outcome

TABLES_UP_TO = 10  # print one table per submission for batches this small; the summary always


def print_run(run: GradeRun, console: Console | None = None) -> None:
    """A batch as `course grade` prints it: the tables (small batches), the summary, its notes, what it wrote."""
    console = console or Console()
    if len(run.results) <= TABLES_UP_TO:
        print_table(run.results, console, run.failures)
    print_summary(
        summary_rows(run.outcomes),
        sandbox=sandbox_status(run.jailed),
        console=console,
        failed=run.unhandled,
        refused=run.refused,
        ignored=run.ignored,
    )
    for note in run.notes:
        console.print(Text(f"  {untrusted.plain(note)}"))
    console.print(Text("wrote " + " and ".join(str(p) for p in run.written[:2])), soft_wrap=True)
    if len(run.written) > 2:
        console.print(Text("  also: " + ", ".join(str(p) for p in run.written[2:])), soft_wrap=True)


def verdict(t: TestResult) -> Text:
    """ "✓ passed", "◐ PARTIAL 2.7/3 · why" or "✗ why", the message as text."""
    if t.status == "passed":
        note = t.message.removeprefix("passed · ") if t.message.startswith("passed · ") else ""
        return Text.assemble(("✓ passed", "green"), *((" · ", untrusted.plain(note)) if note else ()))
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


def print_table(
    results: Sequence[SubmissionResult], console: Console | None = None, failures: Failures | None = None
) -> None:
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
        row = rows.setdefault(
            r.lab or "(not a lab)",
            {
                "lab": r.lab or "(not a lab)",
                "submissions": 0,
                "max": r.max_score,
                "total": 0.0,
                "full": 0,
                "zero": 0,
                "errors": 0,
                "reused": 0,
            },
        )
        row["submissions"] += 1
        row["total"] += r.score
        row["full"] += int(r.max_score > 0 and r.score >= r.max_score)
        row["zero"] += int(r.score == 0)
        row["errors"] += int(r.error is not None)
        row["reused"] += int(o.reused)
    for row in rows.values():
        row["mean"] = row["total"] / row["submissions"] if row["submissions"] else 0.0
    return list(rows.values())


def print_summary(
    rows: Sequence[dict],
    *,
    sandbox: str,
    console: Console | None = None,
    failed: int = 0,
    refused: int = 0,
    ignored: int = 0,
) -> None:
    """One line per lab: how many submissions, the mean, full marks, zeros, errors, reused records; then how
    many submissions could not be handled, and how many files were refused or ignored."""
    console = console or Console()
    table = Table(title="Summary", title_justify="left")
    for col, justify in (
        ("lab", "left"),
        ("submissions", "right"),
        ("mean", "right"),
        ("full marks", "right"),
        ("zero", "right"),
        ("errors", "right"),
        ("reused", "right"),
    ):
        table.add_column(col, justify=justify)
    for row in rows:
        table.add_row(
            Text(str(row["lab"])),
            str(row["submissions"]),
            f"{row['mean']:.2f}/{row['max']:g}",
            str(row["full"]),
            str(row["zero"]),
            str(row["errors"]),
            str(row["reused"]),
        )
    console.print(table)
    console.print(Text(f"  kernels ran under: {sandbox}"))
    console.print(Text(handled_line(failed, refused, ignored), style="red" if failed or refused else ""))


def handled_line(failed: int, refused: int, ignored: int) -> str:
    return (
        f"  could not be handled: {failed} submission(s) (grader or report failure: see 'failed' in "
        f"results.json); refused: {refused} file(s) (links, special files); ignored: {ignored} extra "
        "notebook(s) beside a lab's own"
    )


class BatchProgress:
    """A progress bar on stderr (a line per submission where stderr is not a terminal). The display never
    stops a batch: a failure to show one submission is recorded against it."""

    def __init__(self, console: Console | None = None, failures: Failures | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console or Console(stderr=True)
        self.failures = failures or Failures()
        self.progress = Progress(
            TextColumn("grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}", markup=False),
            console=self.console,
            transient=False,
            disable=not self.console.is_terminal,
        )
        self.task = None

    def __enter__(self) -> "BatchProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def planned(self, todo: int, reused: int) -> None:
        self.task = self.progress.add_task("", total=todo + reused)
        if not self.console.is_terminal:
            self.console.print(f"grading {todo} submission(s); {reused} unchanged since the last run, reused")

    def advance(self, outcome: Any) -> None:  # autograder.steps.record.Outcome
        r = outcome.result
        with self.failures.guard(r.submission, "the progress display"):
            line = untrusted.plain(
                f"{'reused' if outcome.reused else 'graded'} {r.submission}: {r.score:g}/{r.max_score:g}", 300
            ).replace("\n", " ")
            if self.task is not None:
                self.progress.update(self.task, advance=1, description=line)
            if not self.console.is_terminal and not outcome.reused:
                self.console.print(Text(line), soft_wrap=True)
