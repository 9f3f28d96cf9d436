"""`course grade`: grade notebooks (their cells in a jail, the hidden checks outside it, under TPU interpret
mode), in parallel and resumably; print a table, write JSON/CSV, feedback pages and (on request) the nbgrader
gradebook."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._app import app, fail


@app.command()
def grade(
    paths: Annotated[
        Optional[list[Path]],
        typer.Argument(help="Notebooks, or folders searched for notebooks (e.g. submitted/ in nbgrader's layout)."),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Folder for results.json, results.csv, "
            "nbgrader-grades.csv, feedback/, executed/ (safe to hand back), "
            "instructor/ (whole) and submissions/ (one record each).",
        ),
    ] = Path("grades"),
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the results as JSON on stdout instead of the table.")
    ] = False,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo", help="Grade the bundled demo set: the LAB·1.1 solution, its student stub and a wrong submission."
        ),
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Submissions graded at once, each in its own worker process (about one per CPU core).",
        ),
    ] = 1,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Grade every submission again, even those whose notebook and grader are unchanged since the last run.",
        ),
    ] = False,
    scheduler: Annotated[
        Optional[str],
        typer.Option(
            "--scheduler",
            help="Grade on Dask distributed: a "
            "scheduler address (tcp://host:8786), or 'local' for a "
            "LocalCluster of --jobs workers.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=1, help="Wall-clock limit per submission, in seconds; the kernel is killed past it."
        ),
    ] = 600,
    cell_timeout: Annotated[
        Optional[int],
        typer.Option(
            "--cell-timeout",
            min=1,
            help="Per-cell limit, in "
            "seconds (nbgrader's c.Execute.timeout, 120); the "
            "cell is interrupted and the run goes on.",
        ),
    ] = None,
    memory: Annotated[int, typer.Option("--memory", min=256, help="Memory limit per kernel, in MB.")] = 4096,
    gradebook: Annotated[
        Optional[Path],
        typer.Option(
            "--gradebook",
            help="Merge the autograde scores into "
            "this nbgrader gradebook.db (and copy the executed "
            "notebooks to autograded/ beside it) for the "
            "formgrader.",
        ),
    ] = None,
    no_jail: Annotated[
        bool,
        typer.Option(
            "--no-jail",
            help="Grade without the jail, where none can be made "
            "(macOS, no bubblewrap). Student code then runs as a plain process "
            "with your rights: it can read solutions/, your files and the "
            "network, and so forge its score. Only for trusted notebooks.",
        ),
    ] = False,
    jail_without_namespaces: Annotated[
        bool,
        typer.Option(
            "--jail-without-namespaces",
            help="Where bubblewrap cannot make a jail (a container without namespaces), "
            "jail each notebook as a uid of its own instead (needs root and the grader's files unreadable to other "
            "users; it sees the machine's processes and world-readable files: docs/grader.md, 'Configurations'). "
            "Made for a container that grades one course's submissions, never needed where bubblewrap works.",
        ),
    ] = False,
) -> None:
    """Grade submissions against the hidden tests.

    Each notebook's cells run headlessly in its own jail (wall-clock and memory limits; on Linux, no access
    to solutions/ or other submissions), under forced TPU interpret mode, after its set-up and hidden-test
    cells are restored from solutions/; the hidden tests run outside the jail. Results are stored per submission as they
    arrive: a re-run grades only what changed, and an interrupted run loses nothing graded.
    Exits 0 when every submission was handled, whatever the scores; 3 when some could not be (a grader or
    report failure, a link or special file refused): each says why in results.json ('failed'), and the
    others are graded and written as usual.

    Examples:

        course grade submitted/                      # every notebook under nbgrader's submitted/ folder

        course grade submitted/ --jobs 8             # 8 at a time; re-run to pick up new submissions

        course grade submitted/ --gradebook gradebook.db   # then grade the written answers in formgrader

        course grade submitted/ --scheduler tcp://10.0.0.5:8786   # on a Dask cluster

        course grade my-lab-1.1.ipynb --json         # one notebook, machine-readable

        course grade --demo                          # the bundled demo set

    Warning: without --force, a stored result is reused when the notebook, the grader's files and the
    versions of jax, numpy and nbgrader are unchanged; after changing anything else that decides scores
    (a hand-edited environment), grade with --force.
    """
    import os

    from autograder import timeline
    from autograder.jail.jails import AUTO, KIND_ENV

    timeline.record("course grade process until its command", timeline.process_started(), time.time())
    if jail_without_namespaces:
        os.environ[KIND_ENV] = AUTO  # before any jail or worker starts: they read it
    ahead = scheduler is None and jobs <= 1 and not no_jail and bool(paths or demo)
    if ahead:
        # the first jail and judge start now, while this process imports and reads the notebooks (autograder.session.warm)
        from autograder.session import warm
        from autograder.jail.limits import Limits

        warm.start_ahead(Limits(wall_s=timeout, memory_mb=memory, cell_s=cell_timeout))
    from autograder.doors.batch import start_workers

    if scheduler is None:
        start_workers(jobs)  # first: the workers' imports then overlap with the imports below
    from rich.console import Console

    from autograder.steps import engines
    from autograder.steps.discover import SubmissionNotFound
    from autograder.doors.course_grade import GradeOptions, run_grade
    from autograder.untrusted import plain
    from course_tools.demo import demo_submissions
    from course_tools.grading_report import BatchProgress, print_run

    from autograder.judge.compile_rule import libtpu_warning

    timeline.mark("course grade imports done")
    if (warning := libtpu_warning()) is not None:
        typer.echo(warning, err=True)  # once, before anything is graded
    if demo:
        paths = [demo_submissions()]
    elif not paths:
        raise fail("give at least one notebook or folder to grade, or --demo")
    try:
        options = GradeOptions(
            out=out,
            jobs=jobs,
            force=force,
            scheduler=scheduler,
            timeout_s=timeout,
            cell_timeout_s=cell_timeout,
            memory_mb=memory,
            gradebook=gradebook,
            engine=engines.NO_JAIL if no_jail else engines.JAIL,
        )
        run = run_grade(
            paths, options, progress=lambda failures: BatchProgress(Console(stderr=True, quiet=as_json), failures)
        )
    except (SubmissionNotFound, ValueError, RuntimeError) as e:
        raise fail(plain(e)) from None
    finally:
        if ahead:
            warm.discard()  # one started ahead that no grading took (nothing to grade, a refused file)
    with timeline.span("print the table"):
        if as_json:
            sys.stdout.write(run.json_text + "\n")
        else:
            print_run(run)
    if run.error:
        raise fail(plain(run.error))
    if run.exit_code:
        typer.echo(
            f"{run.unhandled} submission(s) could not be handled; each says why in {out / 'results.json'} ('failed')",
            err=True,
        )
        raise typer.Exit(code=run.exit_code)
