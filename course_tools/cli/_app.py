"""The `course` Typer app. Commands live one per module beside this file and register on `app`."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="course",
    help="Pallas from Zero, stage 01: grade submissions, draw schedules, check BlockSpecs, bench, gates.",
    context_settings={"help_option_names": ["-h", "--help"]},
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class CourseError(Exception):
    """A user error the CLI reports in one line (no traceback) before exiting with code 1."""


def fail(message: str) -> "typer.Exit":
    """Print `message` as one line on stderr and return the Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def _version(value: bool) -> None:
    if value:
        from pallas_course import __version__

        typer.echo(f"course {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Pallas from Zero, stage 01: grade submissions, draw schedules, check BlockSpecs, bench, gates."""
