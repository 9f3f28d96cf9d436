"""`nbgrader autograde`'s door into the same engine as `course grade`.

nbgrader_config.py puts `JailedExecute` where nbgrader's `Execute` preprocessor was (c.Autograde.
autograde_preprocessors): after nbgrader has restored the locked cells from its gradebook, the notebook's
cells are reset from solutions/ (tags and metadata included), run in the jail, and its hidden tests run
outside it, exactly as under `course grade`. nbgrader then scores the outputs with its own rule
(SaveAutoGrades), so both paths give the same score by construction.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer

from autograder.engine import execute
from autograder.restore import restore
from autograder.sandbox import CELL_TIMEOUT_S, DEFAULT_MEMORY_MB, DEFAULT_WALL_S, Limits
from pallas_course.manifest import REPO_ROOT, manifest


class JailedExecute(NbGraderPreprocessor):
    timeout = Integer(CELL_TIMEOUT_S, help="Per-cell (and per-test) limit, in seconds.").tag(config=True)
    wall_s = Float(DEFAULT_WALL_S, help="Wall-clock limit for one notebook, in seconds.").tag(config=True)
    memory_mb = Integer(DEFAULT_MEMORY_MB, help="Memory limit for one notebook's jail, in MB.").tag(config=True)
    jailed = Bool(True, help="Run student code in the jail (False only on a machine without one: student code "
                             "then runs with the grader's rights).").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        name = f"{resources.get('nbgrader', {}).get('notebook', resources.get('unique_key', ''))}.ipynb"
        folder = resources.get("metadata", {}).get("path")
        if folder and (Path(folder) / name).is_symlink():
            # as `course grade` does: a link could point at a solution notebook; never grade what it points at
            raise ValueError(f"{name} is a symbolic link; hand in the notebook itself")
        lab = manifest().lab_for_notebook(name)
        if lab is None:
            raise ValueError(f"{name} is not a notebook of this course: nothing to grade it against")
        source = nbformat.read(REPO_ROOT / lab.source, as_version=4)
        release = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
        restore(nb, source, release)
        limits = Limits(wall_s=self.wall_s, memory_mb=self.memory_mb, cell_s=self.timeout, jailed=self.jailed)
        run = execute(nb, lab, limits=limits, cell_timeout_s=limits.cell_timeout_s, jailed=limits.jailed)
        if run.stopped:
            self.log.warning("%s: %s", name, run.stopped)
        return run.notebook, resources
