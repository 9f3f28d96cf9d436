"""`nbgrader autograde`'s door into the same pipeline as `course grade` (autograder.steps.pipeline.NBGRADER:
identify → restore → execute → score), each step run once, on the bytes read once.

nbgrader_config.py (autograder.doors.nbgrader_setup) sets three hooks:
- `read_submissions`, nbgrader's pre-convert hook: before nbgrader reads or copies anything of a student's
  submission, each submitted notebook is checked as `course grade` checks it (a symbolic link, a fifo or a
  device is refused with the same reason, autograder.steps.discover.refusal, and never opened: it scores 0 with
  that reason), and read as `course grade` reads it (autograder.steps.submission.read_submission: the bytes,
  hashed, bounded).
- `SubmittedNotebook`, nbgrader's exporter: where nbgrader would read the submitted file, the pipeline's
  identify and restore run on those bytes, and nbgrader's own sanitizing gets the restored notebook. One that
  cannot be graded (unreadable, not valid against nbformat's schema, too big, another lab's notebook) is
  handed over as the lab's released notebook, so nbgrader's steps run on it and record the 0.
- `JailedExecute`, where nbgrader's `Execute` preprocessor was: the rest of the steps (execute, score), so the
  notebook nbgrader scores is the one `course grade` scores; one that could not be graded gets the reason
  in each of its test cells as their error: 0, as under `course grade`.
nbgrader then scores the outputs with its own rule (SaveAutoGrades): both doors give the same score.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import NotebookExporter
from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Float, Integer, Unicode

from autograder import cells
from autograder.steps import engines, pipeline
from autograder.steps.discover import refusal
from autograder.steps.execute import error_output
from autograder.steps.restore import restore
from autograder.jail.limits import CELL_TIMEOUT_S, DEFAULT_MEMORY_MB, DEFAULT_WALL_S, Limits
from autograder.steps.submission import Submission, read_submission
from autograder.course_manifest import manifest

# Each submitted notebook's grading, per (student, assignment, notebook id): as the hook read (or refused) it,
# waiting for nbgrader's sanitizing pass to ask for it; then, once the exporter has run identify and restore,
# for JailedExecute. nbgrader runs the hook, the exporter and the preprocessors in one process, one student
# after another.
_read: dict[tuple[str, str, str], pipeline.Grading] = {}
_found: dict[tuple[str, str, str], pipeline.Grading] = {}
RESTORED = "restore"  # the step after which nbgrader's sanitizing takes the notebook


def _log(message: str) -> None:
    from traitlets.config import Application

    app = Application.instance() if Application.initialized() else None
    if app is not None:
        app.log.error(message)


def read_submissions(*, assignment: str, student: str, notebooks: list[str]) -> None:
    """nbgrader's pre-convert hook: read each submitted notebook, or refuse it with `course grade`'s reason
    without opening it (nbgrader then never opens it either: its exporter hands over the lab's released
    notebook, scored 0 with the reason). `assignment` and `student` may be nbgrader's globs ("*"): each
    notebook's own are read from its path, submitted/<student>/<assignment>/<notebook>.ipynb."""
    for path in notebooks:
        p = Path(path)
        key = (p.parent.parent.name, p.parent.name, p.stem)
        label = "/".join(key[:2] + (p.name,))
        _found.pop(key, None)  # a grading from an earlier run of this process is not this one's
        why = refusal(p)
        if why is None:
            _read[key] = pipeline.Grading(read_submission(p, label))
            continue
        why = f"not graded: {why}"
        _log(f"{label}: {why}")
        submission = Submission.from_bytes(p.name, label, b"", problem=why)
        lab = manifest().lab_for_notebook(p.name)
        _read[key] = pipeline.Grading(submission, lab=lab, result=pipeline.zero(lab, label, why))


def _key(resources: dict[str, Any]) -> tuple[str, str, str]:
    meta = resources.get("nbgrader", {})
    return meta.get("student", ""), meta.get("assignment", ""), meta.get("notebook", resources.get("unique_key", ""))


def _grading(nb: NotebookNode, resources: dict[str, Any]) -> pipeline.Grading:
    """The grading the hook started for this notebook; without the hook (a preprocessor called on its own),
    one of the notebook as nbgrader read it."""
    key = _key(resources)
    found = _found.get(key) or _read.get(key)
    if found is None:
        name = f"{key[2]}.ipynb"
        found = pipeline.Grading(Submission.from_bytes(name, name, nbformat.writes(nb).encode()))
    return found


def _of_this_course(g: pipeline.Grading) -> pipeline.Grading:
    """`g`, if its file names a lab; nbgrader skips notebooks its gradebook does not know, so only a door used
    on its own meets one that does not."""
    if manifest().lab_for_notebook(g.submission.name) is None:
        raise ValueError(f"{g.submission.name} is not a notebook of this course: nothing to grade it against")
    return g


class SubmittedNotebook(NotebookExporter):
    """nbgrader's exporter, reading a submission by the pipeline: the first time nbgrader asks for a notebook
    the hook read (its sanitizing pass), identify and restore run on the bytes read, and nbgrader gets the
    restored notebook (or, for one that cannot be graded, the lab's released notebook); the file itself is
    not read again. Any other read (the autograde pass reads back what sanitizing wrote) is nbconvert's."""

    def from_filename(
        self, filename: str, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        key = _key(resources or {})
        g = _read.pop(key, None)
        if g is None:
            return super().from_filename(filename, resources, **kw)
        g = _found[key] = pipeline.run(pipeline.NBGRADER, _of_this_course(g), through=RESTORED)
        if g.stopped:  # JailedExecute puts the reason in its test cells
            assert g.lab is not None
            source, nb = pipeline.lab_notebooks(g.lab)
            restore(nb, source, nb)  # its hidden tests back, as nbgrader's OverwriteCells would put them
        else:
            assert g.notebook is not None
            nb = g.notebook
        return self.from_notebook_node(nb, resources, **kw)


def zeros(nb: NotebookNode, g: pipeline.Grading) -> NotebookNode:
    """nbgrader's notebook with each of the lab's test cells failing with the reason the pipeline gave."""
    assert g.lab is not None and g.result is not None
    ids = {t.id for t in g.lab.tests}
    why = g.result.error or "not graded"
    for cell in nb.cells:
        if cell.cell_type == "code" and cells.grade_id(cell) in ids:
            cell.outputs = [error_output("TestFailure", why)]
    return nb


class JailedExecute(NbGraderPreprocessor):
    timeout = Integer(CELL_TIMEOUT_S, help="Per-cell (and per-test) limit, in seconds.").tag(config=True)
    wall_s = Float(DEFAULT_WALL_S, help="Wall-clock limit for one notebook, in seconds.").tag(config=True)
    memory_mb = Integer(DEFAULT_MEMORY_MB, help="Memory limit for one notebook's jail, in MB.").tag(config=True)
    engine = Unicode(
        engines.JAIL,
        help="The engine the cells run on (autograder.steps.engines): 'jail', or 'no-jail' "
        "only on a machine without one (student code then runs with the grader's "
        "rights).",
    ).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        g = _of_this_course(_grading(nb, resources))
        limits = Limits(wall_s=self.wall_s, memory_mb=self.memory_mb, cell_s=self.timeout)
        g = pipeline.run(pipeline.NBGRADER, dataclasses.replace(g, limits=limits, engine=self.engine))
        assert g.result is not None
        if g.run is None:  # stopped before running: the reason in every test cell
            self.log.warning("%s: %s", g.label, g.result.error)
            return zeros(nb, g), resources
        if g.result.error:
            self.log.warning("%s: %s", g.label, g.result.error)
        return g.run.notebook, resources


class DropOutputsAfterTests(NbGraderPreprocessor):
    """generate_feedback's step: the outputs of the cells run after the first hidden test are not handed back
    (autograder.steps.feedback.drop_outputs_after_tests); autograded/ keeps them for the instructor."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        from autograder.steps.feedback import drop_outputs_after_tests

        return drop_outputs_after_tests(nb), resources
