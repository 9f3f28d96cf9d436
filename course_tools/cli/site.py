"""`course site build`: the chapter site, one static page built from the course's own sources."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._app import app, fail

site_app = typer.Typer(
    help="The chapter site: stage 01 as a static page (opens from disk or any static host).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(site_app, name="site")


@site_app.command("build")
def build(
    out: Annotated[
        Optional[Path],
        typer.Option(
            "--out", help="Folder to write index.html into (default: _build/site in the checkout; ignored by git)."
        ),
    ] = None,
    preview: Annotated[
        bool,
        typer.Option(
            "--preview",
            help="The instructor's private preview: every lab's model "
            "code, whatever its reveal date. Never publish this page.",
        ),
    ] = False,
    today: Annotated[
        Optional[str],
        typer.Option(
            "--today", help="Build as of this day (YYYY-MM-DD) instead of today: which labs' reveal dates have come."
        ),
    ] = None,
) -> None:
    """Build the stage 01 page: chapter, instruments, walks, labs, plan, self-test and GATE 01.

    Reads course.yml, site/content/ (the site's own words), the labs' source notebooks (their site:show cells,
    and the matmul solution's pallas_call, traced for the EX·02/07/12 frames), the legality rules and chip
    constants for EX·09, and the bench records for GATE 01. Writes one self-contained index.html: styles and
    scripts inline, nothing fetched at run time. Edit a notebook and build again to update the page.

    Each lab's model code (its site:show cells, the walks and listings that show it) appears from its `reveal:`
    date in course.yml on, as in the release (`course release`); before it the page shows the stubs and the date.
    `--preview` shows every lab's model code: the instructor's own page, not one to publish.

    Examples:

        course site build                          # -> _build/site/index.html, as students may see it today

        course site build --out /tmp/pfz-site      # e.g. to publish from a static host

        course site build --preview                # every model answer, for the instructor's eyes only
    """
    import datetime as dt

    from course_tools.site.build import DEFAULT_OUT, SiteError, build as build_site, quiet_libtpu_without_a_tpu

    if preview and today:
        raise fail("--preview shows every lab's model code whatever the day; give --today or --preview, not both")
    try:
        public_on = None if preview else (dt.date.fromisoformat(today) if today else dt.date.today())
    except ValueError:
        raise fail(f"--today {today!r} is not a date (YYYY-MM-DD)") from None
    quiet_libtpu_without_a_tpu()
    try:
        result = build_site(out or DEFAULT_OUT, public_on=public_on)
    except SiteError as e:
        raise fail(str(e)) from None
    typer.echo(f"wrote {result.index} ({result.bytes / 1024:.0f} KiB) in {result.seconds:.1f} s")
    typer.echo(
        "  PREVIEW: every lab's model code is on this page; do not publish it"
        if preview
        else f"  as of {public_on}: each lab's model code from its reveal date on (--preview: all of it)"
    )
    typer.echo(f"  frames: EX·02 {result.frames['ex02']}, EX·07 {result.frames['ex07']}, EX·12 {result.frames['ex12']}")
    for code, where in result.labs.items():
        typer.echo(f"  {code}: {where}")
    for code, where in result.walks.items():
        typer.echo(f"  {code}: {where}")
    typer.echo(f"  {result.gate}")
    for note in result.notes:
        typer.echo(f"  note: {note}")
