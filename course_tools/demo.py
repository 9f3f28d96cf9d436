"""The bundled demo set `course grade --demo` grades: a full-marks solution, the untouched student stub,
and a plausible wrong submission (transpose's output index map not swapped), in nbgrader's
submitted/<student>/<assignment>/ layout."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.cells import grade_id, is_solution
from autograder.course_manifest import REPO_ROOT, manifest
from pallas_course.notebooks import strip_markers

DEMO_LAB = "lab-1.1-first-kernels"


def filled_in(
    lab_id: str, edits: dict[str, tuple[str, str]] | None = None, *, student: NotebookNode | None = None
) -> NotebookNode:
    """The student notebook (labs/, or `student`: e.g. a released one) with every solution cell answered as in
    solutions/, then `edits` applied: {grade_id: (old, new)} text replacements that turn a right answer into a
    wrong one."""
    lab = manifest().lab(lab_id)
    student = student if student is not None else nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    source = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    answers = {grade_id(c): c.source for c in source.cells if is_solution(c)}
    nb = copy.deepcopy(student)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in answers:
            cell.source = strip_markers(answers[gid])
        if gid in (edits or {}):
            old, new = edits[gid]
            if old not in cell.source:
                raise ValueError(f"demo edit for {gid!r}: {old!r} is not in the cell")
            cell.source = cell.source.replace(old, new)
    return nb


def demo_submissions(dest: Path | None = None) -> Path:
    """Write the demo set under `dest` (a new temporary folder by default) and return that folder."""
    dest = Path(dest or tempfile.mkdtemp(prefix="course-demo-"))
    lab = manifest().lab(DEMO_LAB)
    name = Path(lab.notebook).name
    stage = manifest().stage.id
    notebooks = {
        "demo-solution": filled_in(DEMO_LAB),
        "demo-stub": nbformat.read(REPO_ROOT / lab.notebook, as_version=4),
        "demo-wrong-transpose": filled_in(DEMO_LAB, {"transpose": ("lambda i, j: (j, i)", "lambda i, j: (i, j)")}),
    }
    for student, nb in notebooks.items():
        path = dest / student / stage / name
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return dest
