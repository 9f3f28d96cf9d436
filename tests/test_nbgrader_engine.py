"""nbgrader's door (autograder.nbgrader_engine.JailedExecute) refuses what `course grade` refuses, before any
cell runs: a symbolic link (it could point at a solution notebook) and a notebook of no lab of this course."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder.nbgrader_engine import JailedExecute
from pallas_course.manifest import REPO_ROOT, manifest


def _resources(folder: Path, name: str) -> dict:
    return {"nbgrader": {"notebook": name}, "metadata": {"path": str(folder)}}


def test_a_symlinked_notebook_is_refused(tmp_path: Path) -> None:
    lab = manifest().labs[0]
    name = Path(lab.notebook).stem
    (tmp_path / f"{name}.ipynb").symlink_to(REPO_ROOT / lab.source)   # the model answers, one link away
    nb = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    with pytest.raises(ValueError, match="is a symbolic link; hand in the notebook itself"):
        JailedExecute().preprocess(nb, _resources(tmp_path, name))


def test_a_notebook_of_no_lab_is_refused(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nbformat.write(nb, tmp_path / "holiday-photos.ipynb")
    with pytest.raises(ValueError, match="not a notebook of this course"):
        JailedExecute().preprocess(nb, _resources(tmp_path, "holiday-photos"))
