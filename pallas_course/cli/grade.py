"""`course grade`: grade notebooks with papermill under TPU interpret mode, print a table, write JSON/CSV."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._app import app, fail


@app.command()
def grade(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Notebooks, or folders searched for notebooks (e.g. submitted/ in nbgrader's layout).")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for results.json, results.csv and the "
                                      "executed notebooks.")] = Path("grades"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON on stdout instead of "
                                          "the table.")] = False,
    demo: Annotated[bool, typer.Option("--demo", help="Grade the bundled demo set: the LAB·1.1 solution, "
                                       "its student stub and a wrong submission.")] = False,
) -> None:
    """Grade submissions against the hidden tests.

    Each notebook runs headlessly with papermill in its own kernel, under forced TPU interpret mode, after
    its set-up and hidden-test cells are restored from solutions/ (a notebook cannot edit or delete them).
    Exits 0 whenever grading ran, whatever the scores.

    Examples:

        course grade submitted/                      # every notebook under nbgrader's submitted/ folder

        course grade my-lab-1.1.ipynb --json         # one notebook, machine-readable

        course grade --demo                          # the bundled demo set
    """
    from autograder.demo import demo_submissions
    from autograder.grade import SubmissionNotFound, find_submissions, grade_many
    from autograder.report import print_table, to_json, write_reports

    if demo:
        root = demo_submissions()
        paths = [root]
    elif not paths:
        raise fail("give at least one notebook or folder to grade, or --demo")
    else:
        root = paths[0] if len(paths) == 1 and paths[0].is_dir() else None
    try:
        notebooks = find_submissions(paths)
    except SubmissionNotFound as e:
        raise fail(str(e)) from None
    results = []
    for result in grade_many(notebooks, root=root, keep_dir=out):
        results.append(result)
        if not as_json:
            typer.echo(f"graded {result.submission}: {result.score:g}/{result.max_score:g}", err=True)
    json_path, csv_path = write_reports(results, out)
    if as_json:
        sys.stdout.write(to_json(results) + "\n")
    else:
        print_table(results)
        typer.echo(f"wrote {json_path} and {csv_path}")
