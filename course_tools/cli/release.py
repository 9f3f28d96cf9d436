"""`course release STAGE --out DIR`: the student release (course_tools/release.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import typer

from ._app import app, fail


@app.command()
def release(
    stage: str = typer.Argument(..., help="The stage to release, e.g. stage-1."),
    out: Path = typer.Option(..., "--out", help="Folder to write (created; an earlier release there is replaced)."),
    today: str = typer.Option(
        "",
        "--today",
        help="Release as of this day (YYYY-MM-DD; default today): decides "
        "which labs' model code is public (course.yml `reveal:`).",
    ),
) -> None:
    """Build what students get: lab notebooks, the helpers' wheel, requirements, README, the student site."""
    from course_tools.release import ReleaseError, build_release

    try:
        day = dt.date.fromisoformat(today) if today else None
    except ValueError:
        raise fail(f"--today {today!r} is not a date (YYYY-MM-DD)") from None
    try:
        r = build_release(stage, out, today=day)
    except ReleaseError as e:
        raise fail(str(e)) from None
    typer.echo(f"released {stage} as of {r.today} to {r.out}")
    typer.echo(f"  wheel     {r.wheel.relative_to(r.out)} (set-up cells install {r.wheel_url})")
    typer.echo(f"  notebooks {len(r.notebooks)} in labs/, each with an Open in Colab badge")
    typer.echo(f"  public    {', '.join(r.revealed) or 'no lab code yet'}")
    for code, when in r.withheld.items():
        typer.echo(f"  withheld  {code}'s model code until {when}")
    typer.echo("publish: push the folder as the root of the release repository (course.yml release.github)")
    for line in r.warnings:
        typer.echo(f"warning: {line}", err=True)
