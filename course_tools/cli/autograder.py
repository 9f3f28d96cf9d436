"""`course autograder gradescope|prairielearn --lab LAB --out DIR`: one lab's grader for a platform
(course_tools/platforms; the doors are autograder/doors; docs/platforms.md says how to publish)."""

from __future__ import annotations

from pathlib import Path

import typer

from ._app import app, fail

autograder_app = typer.Typer(
    help="Build one lab's autograder for Gradescope or PrairieLearn (docs/platforms.md).", no_args_is_help=True
)
app.add_typer(autograder_app, name="autograder")


def _lab_id(lab: str) -> str:
    from autograder.course_manifest import manifest

    ids = [l.id for l in manifest().labs]
    if lab not in ids:
        raise fail(f"no lab {lab!r} in course.yml; labs are {', '.join(ids)}")
    if not manifest().lab(lab).tests:
        raise fail(f"{lab} has no autograded tests")
    return lab


@autograder_app.command()
def gradescope(
    lab: str = typer.Option(..., "--lab", help="The course.yml lab id, e.g. lab-1.1-first-kernels."),
    out: Path = typer.Option(..., "--out", help="Folder to write autograder.zip into (created)."),
) -> None:
    """Write DIR/autograder.zip: setup.sh and run_autograder at its root, the course's grader beside them.
    Upload it as the programming assignment's autograder (docs/platforms.md)."""
    from course_tools.platforms import gradescope_zip

    path = gradescope_zip(_lab_id(lab), out)
    typer.echo(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MB) for {lab}")


@autograder_app.command()
def prairielearn(
    lab: str = typer.Option(..., "--lab", help="The course.yml lab id, e.g. lab-1.1-first-kernels."),
    out: Path = typer.Option(
        ..., "--out", help="Folder to write into: questions/, serverFilesCourse/, image/, assessment-question.json."
    ),
    image: str = typer.Option(
        "pallas-from-zero/grader:0.1",
        "--image",
        help="The grading image's name, as `docker pull` takes it (build it from image/Dockerfile and push it there).",
    ),
    timeout: int = typer.Option(
        None,
        "--timeout",
        min=1,
        max=600,
        help="externalGradingOptions.timeout in seconds (default: the course's fit, docs/platforms.md; at most 600).",
    ),
) -> None:
    """Write a PrairieLearn question (info.json with external grading, question.html), the grader's files for
    serverFilesCourse/, the image's Dockerfile, and the question's entry for infoAssessment.json."""
    from autograder.doors.platforms import PL_TIMEOUT_S
    from course_tools.platforms import prairielearn_question

    question = prairielearn_question(_lab_id(lab), out, image=image, timeout_s=timeout or PL_TIMEOUT_S)
    typer.echo(
        f"wrote {question} (info.json, question.html), {out / 'serverFilesCourse'}, {out / 'image'} and "
        f"{out / 'assessment-question.json'} (autoPoints, manualPoints for your infoAssessment.json)"
    )
