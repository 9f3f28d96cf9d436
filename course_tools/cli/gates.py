"""`course gates`: each gate's PASS, FAIL or QUEUED, from course.yml's criteria and the bench records."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._app import app, fail


@app.command("gates")
def gates(
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON (for the site).")] = False,
    records: Annotated[
        Optional[Path], typer.Option("--records", help="Directory of *.jsonl records (default: the checkout's bench/).")
    ] = None,
    gate_id: Annotated[str, typer.Option("--gate", help="Which gate in course.yml.")] = "GATE-01",
) -> None:
    """Print GATE 01: each criterion PASS or FAIL from TPU records, else QUEUED with its estimate.

    Only records of a compiled run on one of the gate's TPU chips, at the criterion's dtype and shape, taken
    at or after the kernel's last commit, can pass or fail a criterion; the rest are listed as ignored with
    the reason. A queued criterion shows the kernel model's `est.` row and what the model assumes.

    Examples:  course gates    ·    course gates --json > site/_data/gates.json    ·    course gates --records tests/fixtures/gate01-pass
    """
    from pallas_course.bench import BenchRecordError
    from course_tools.gates import evaluate, render_text
    from autograder.course_manifest import ManifestError

    if records is not None and not records.is_dir():
        raise fail(f"--records {records}: not a directory; pass the folder that holds the *.jsonl records")
    try:
        result = evaluate(gate_id, records)
    except (BenchRecordError, ManifestError, KeyError) as e:
        raise fail(str(e).strip("'\"")) from None
    typer.echo(result.model_dump_json(indent=2) if json_out else render_text(result))
