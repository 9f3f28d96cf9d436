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
