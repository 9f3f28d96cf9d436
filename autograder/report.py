"""Reports of grading results: a terminal table, JSON and CSV."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.table import Table

from autograder.results import SubmissionResult


def to_json(results: Sequence[SubmissionResult]) -> str:
    return json.dumps([r.model_dump() for r in results], indent=2, ensure_ascii=False)


CSV_COLUMNS = ["submission", "lab", "score", "max_score", "test", "points", "max_points", "passed", "message"]


def write_csv(results: Sequence[SubmissionResult], path: Path) -> None:
    """One row per (submission, test); a submission that could not be graded gets one row with its error."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for r in results:
            if not r.tests:
                w.writerow([r.submission, r.lab or "", r.score, r.max_score, "", "", "", "", r.error or ""])
            for t in r.tests:
                w.writerow([r.submission, r.lab, r.score, r.max_score, t.name, t.points, t.max_points,
                            t.passed, t.message])


def write_reports(results: Sequence[SubmissionResult], out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out_dir / "results.json", out_dir / "results.csv"
    json_path.write_text(to_json(results) + "\n")
    write_csv(results, csv_path)
    return json_path, csv_path


def print_table(results: Sequence[SubmissionResult], console: Console | None = None) -> None:
    console = console or Console()
    for r in results:
        title = f"{r.submission} · {r.lab or 'unknown lab'} · {r.score:g}/{r.max_score:g}"
        table = Table(title=title, title_justify="left", show_lines=False, expand=False)
        table.add_column("test")
        table.add_column("points", justify="right")
        table.add_column("result")
        for t in r.tests:
            mark = "[green]✓ passed[/]" if t.passed else f"[red]✗[/] {t.message}"
            table.add_row(t.name, f"{t.points:g}/{t.max_points:g}", mark)
        for w in r.written:
            table.add_row(w.name, f"–/{w.max_points:g}", f"[yellow]written[/]: {w.status}")
        if r.error and not r.tests:
            table.add_row("–", "0", f"[red]{r.error}[/]")
        console.print(table)
        for note in r.notes:
            console.print(f"  note: {note}")


def print_summary(rows: Sequence[dict], *, sandbox: str, console: Console | None = None) -> None:
    """One line per lab: how many submissions, the mean, full marks, zeros, errors, reused records."""
    console = console or Console()
    table = Table(title="Summary", title_justify="left")
    for col, justify in (("lab", "left"), ("submissions", "right"), ("mean", "right"), ("full marks", "right"),
                         ("zero", "right"), ("errors", "right"), ("reused", "right")):
        table.add_column(col, justify=justify)
    for row in rows:
        table.add_row(row["lab"], str(row["submissions"]), f"{row['mean']:.2f}/{row['max']:g}", str(row["full"]),
                      str(row["zero"]), str(row["errors"]), str(row["reused"]))
    console.print(table)
    console.print(f"  kernels ran under: {sandbox}")


class BatchProgress:
    """A progress bar on stderr (a line per submission where stderr is not a terminal)."""

    def __init__(self, console: Console | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console or Console(stderr=True)
        self.progress = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.description}"), console=self.console, transient=False,
                                 disable=not self.console.is_terminal)
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

    def advance(self, outcome) -> None:   # autograder.batch.Outcome
        r = outcome.result
        line = f"{'reused' if outcome.reused else 'graded'} {r.submission}: {r.score:g}/{r.max_score:g}"
        if self.task is not None:
            self.progress.update(self.task, advance=1, description=line)
        if not self.console.is_terminal and not outcome.reused:
            self.console.print(line, highlight=False, soft_wrap=True)
