"""`nbgrader autograde`'s door into the same pipeline as `course grade` (autograder.pipeline.NBGRADER).

nbgrader_config.py (autograder.nbgrader_setup) sets two hooks:
- `refuse_files`, nbgrader's pre-convert hook: before nbgrader reads or copies anything of a student's
  submission, each submitted notebook is checked as `course grade` checks it (a symbolic link, a fifo or a
  device is refused with the same reason, autograder.discover.refusal, and left out of the run), and read as
  `course grade` reads it (autograder.submission.read_submission: the bytes, hashed, bounded).
- `JailedExecute`, where nbgrader's `Execute` preprocessor was: the pipeline's steps on those bytes
  (identify, restore, execute, score), so the notebook nbgrader scores is the one `course grade` scores. A
  submission the pipeline cannot grade (not valid against nbformat's schema, too big, another lab's cells)
  comes back with each test cell holding the reason as its error: 0, as under `course grade`.
nbgrader then scores the outputs with its own rule (SaveAutoGrades): both doors give the same score.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer

from autograder import cells, engines, pipeline
from autograder.discover import refusal
from autograder.engine import error_output
from autograder.restore import deduplicate
from autograder.limits import CELL_TIMEOUT_S, DEFAULT_MEMORY_MB, DEFAULT_WALL_S, Limits
from autograder.submission import Submission, read_submission
from autograder.course_manifest import manifest

# What the pre-convert hook found, per (student, assignment, notebook id): the submission as read, or why
# it was refused. nbgrader runs the hook and the preprocessors in one process, one student after another.
_found: dict[tuple[str, str, str], Submission | str] = {}


def _log(message: str) -> None:
    from traitlets.config import Application

    app = Application.instance() if Application.initialized() else None
    if app is not None:
        app.log.error(message)


def refuse_files(*, assignment: str, student: str, notebooks: list[str]) -> None:
    """nbgrader's pre-convert hook: read each submitted notebook, or refuse it (taken out of `notebooks`,
    nbgrader's own list, so nbgrader never opens it). `assignment` and `student` may be nbgrader's globs
    ("*"): each notebook's own are read from its path, submitted/<student>/<assignment>/<notebook>.ipynb."""
    for path in list(notebooks):
        p = Path(path)
        key = (p.parent.parent.name, p.parent.name, p.stem)
        label = "/".join(key[:2] + (p.name,))
        why = refusal(p)
        if why is not None:
            notebooks.remove(path)
            _found[key] = why
            _log(f"{label}: not graded: {why}")
        else:
            _found[key] = read_submission(p, label)


def _submission(nb: NotebookNode, resources: dict[str, Any]) -> Submission:
    meta = resources.get("nbgrader", {})
    notebook_id = meta.get("notebook", resources.get("unique_key", ""))
    name = f"{notebook_id}.ipynb"
    found = _found.get((meta.get("student", ""), meta.get("assignment", ""), notebook_id))
    if isinstance(found, str):
        raise ValueError(f"{name}: not graded: {found}")
    if found is None:   # no hook ran (a preprocessor called on its own): the notebook as nbgrader read it
        found = Submission.from_bytes(name, name, nbformat.writes(nb).encode())
    return found


def zeros(nb: NotebookNode, g: pipeline.Grading) -> NotebookNode:
    """nbgrader's notebook with each of the lab's test cells failing with the reason the pipeline gave."""
    assert g.lab is not None and g.result is not None
    ids = {t.id for t in g.lab.tests}
    why = g.result.error or "not graded"
    for cell in nb.cells:
        if cell.cell_type == "code" and cells.grade_id(cell) in ids:
            cell.outputs = [error_output("TestFailure", why)]
    return nb


class DeduplicateIds(NbGraderPreprocessor):
    """nbgrader's DeduplicateIds by the rule `course grade` applies (autograder.restore.deduplicate), which
    nbgrader's own OverwriteCells can read: a test cell handed in twice no longer stops nbgrader."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        for note in deduplicate(nb):
            self.log.warning("%s", note)
        return nb, resources


class JailedExecute(NbGraderPreprocessor):
    timeout = Integer(CELL_TIMEOUT_S, help="Per-cell (and per-test) limit, in seconds.").tag(config=True)
    wall_s = Float(DEFAULT_WALL_S, help="Wall-clock limit for one notebook, in seconds.").tag(config=True)
    memory_mb = Integer(DEFAULT_MEMORY_MB, help="Memory limit for one notebook's jail, in MB.").tag(config=True)
    jailed = Bool(True, help="Run student code in the jail (False only on a machine without one: student code "
                             "then runs with the grader's rights).").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        submission = _submission(nb, resources)
        if manifest().lab_for_notebook(submission.name) is None:
            raise ValueError(f"{submission.name} is not a notebook of this course: nothing to grade it against")
        limits = Limits(wall_s=self.wall_s, memory_mb=self.memory_mb, cell_s=self.timeout)
        g = pipeline.run(pipeline.NBGRADER, pipeline.Grading(
            submission, limits, engines.JAIL if self.jailed else engines.NO_JAIL))
        assert g.result is not None
        if g.run is None:    # stopped before running: the reason in every test cell
            self.log.warning("%s: %s", submission.name, g.result.error)
            return zeros(nb, g), resources
        if g.result.error:
            self.log.warning("%s: %s", submission.name, g.result.error)
        return g.run.notebook, resources
