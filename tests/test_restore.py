"""Restoring the instructor's cells before a submission runs, as nbgrader does."""

from __future__ import annotations

import copy

import nbformat
import pytest

from autograder.steps.restore import restore
from autograder.course_manifest import REPO_ROOT, manifest

LAB = manifest().lab("lab-1.1-first-kernels")


@pytest.fixture()
def source():
    return nbformat.read(REPO_ROOT / LAB.source, as_version=4)


@pytest.fixture()
def release():
    return nbformat.read(REPO_ROOT / LAB.notebook, as_version=4)


def _cell(nb, gid):
    return next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)


def test_untouched_release_restores_quietly(source, release) -> None:
    """Hidden tests come back into a notebook as handed out, with no notes."""
    nb = copy.deepcopy(release)
    assert restore(nb, source, release) == []
    assert "lab_1_1.add_f32(add)" in _cell(nb, "add_f32").source


def test_edited_test_cell_is_restored(source, release) -> None:
    nb = copy.deepcopy(release)
    _cell(nb, "add_f32").source = "pass  # nothing to see"
    notes = restore(nb, source, release)
    assert notes == ["cell 'add_f32' was changed; the original was restored"]
    assert _cell(nb, "add_f32").source == _cell(source, "add_f32").source


def test_deleted_test_cell_is_added_back_in_place(source, release) -> None:
    nb = copy.deepcopy(release)
    nb.cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") != "add_bf16"]
    notes = restore(nb, source, release)
    assert notes == ["cell 'add_bf16' was missing; it was added back"]
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells]
    assert ids.index("add_bf16") == ids.index("add_f32") + 1


def test_points_cannot_be_edited(source, release) -> None:
    nb = copy.deepcopy(release)
    _cell(nb, "add_f32").metadata["nbgrader"]["points"] = 100
    restore(nb, source, release)
    assert _cell(nb, "add_f32").metadata["nbgrader"]["points"] == 2


def test_student_code_is_kept_and_outputs_cleared(source, release) -> None:
    nb = copy.deepcopy(release)
    _cell(nb, "add_kernel").source = "def add_kernel(x_ref, y_ref, o_ref):\n    o_ref[...] = x_ref[...] + y_ref[...]"
    _cell(nb, "add_kernel").outputs = [nbformat.v4.new_output("stream", text="hi")]
    restore(nb, source, release)
    assert "x_ref[...] + y_ref[...]" in _cell(nb, "add_kernel").source
    assert _cell(nb, "add_kernel").outputs == []
