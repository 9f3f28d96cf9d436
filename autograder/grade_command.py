"""What `course grade` does once its arguments are parsed: grade the batch, then write every report.

Outputs under `out`: results.json and results.csv (the JSON contract of `course grade --json`),
nbgrader-grades.csv (`nbgrader export`'s columns), feedback/<submission>.md and .html, executed/ (notebooks
safe to hand back: no hidden tests), instructor/ (the whole executed notebooks), submissions/ (one record per
submission; see autograder.store). With a gradebook: the scores merged into it (autograder.export).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from rich.console import Console

from autograder.batch import Outcome, run_batch, summary_rows
from autograder.export import merge_into_gradebook, write_nbgrader_csv
from autograder.feedback import write_feedback
from autograder.report import BatchProgress, print_summary, print_table, to_json, write_reports
from autograder.results import SubmissionResult
from autograder.sandbox import Limits, sandbox_status

TABLES_UP_TO = 10   # print one table per submission for batches this small; the summary always


@dataclass(frozen=True)
class GradeOptions:
    out: Path = Path("grades")
    jobs: int = 1
    force: bool = False
    scheduler: str | None = None
    timeout_s: float = 600
    cell_timeout_s: int | None = None
    memory_mb: int = 4096
    gradebook: Path | None = None

    def limits(self) -> Limits:
        return Limits(wall_s=self.timeout_s, memory_mb=self.memory_mb, cell_s=self.cell_timeout_s)


@dataclass
class GradeRun:
    outcomes: list[Outcome]
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def results(self) -> list[SubmissionResult]:
        return [o.result for o in self.outcomes]

    @property
    def json_text(self) -> str:
        return to_json(self.results)

    def print(self, console: Console | None = None) -> None:
        console = console or Console()
        if len(self.outcomes) <= TABLES_UP_TO:
            print_table(self.results, console)
        print_summary(summary_rows(self.outcomes), sandbox=sandbox_status(), console=console)
        for note in self.notes:
            console.print(f"  {note}", highlight=False)
        console.print("wrote " + " and ".join(str(p) for p in self.written[:2]), highlight=False, soft_wrap=True)
        if len(self.written) > 2:
            console.print("  also: " + ", ".join(str(p) for p in self.written[2:]), highlight=False, soft_wrap=True)


def _root(given: Sequence[Path]) -> Path | None:
    return given[0] if len(given) == 1 and given[0].is_dir() else None


def run_grade(notebooks: list[Path], given: Sequence[Path], options: GradeOptions, *, quiet: bool = False) -> GradeRun:
    """Grade `notebooks` (found under `given`) and write the reports; progress on stderr unless `quiet`."""
    root = _root(given)
    progress = BatchProgress(Console(stderr=True, quiet=quiet))
    with progress:
        outcomes = run_batch(notebooks, out_dir=options.out, root=root, jobs=options.jobs, force=options.force,
                             limits=options.limits(), scheduler=options.scheduler, on_plan=progress.planned,
                             on_outcome=progress.advance)
    run = GradeRun(outcomes)
    results = run.results
    json_path, csv_path = write_reports(results, options.out)
    run.written += [json_path, csv_path, write_nbgrader_csv(results, options.out / "nbgrader-grades.csv", root=root)]
    for r in results:
        write_feedback(r, options.out)
    run.written.append(options.out / "feedback")
    if options.gradebook is not None:
        run.notes += merge_into_gradebook(results, options.gradebook, instructor_dir=options.out / "instructor",
                                          root=root)
        run.written.append(options.gradebook)
    return run
