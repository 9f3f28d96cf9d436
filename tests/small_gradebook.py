"""A gradebook.db as `nbgrader generate_assignment` records it for LAB·1.1 (assignment, notebook, grade and
solution cells), made with nbgrader's API in well under a second, for tests that merge records into it
without running nbgrader (tests.nbgrader_course runs the real thing)."""

from __future__ import annotations

from pathlib import Path

from autograder.course_manifest import manifest


def small_gradebook(path: Path, lab_id: str = "lab-1.1-first-kernels") -> Path:
    from nbgrader.api import Gradebook

    stage, lab = manifest().stage.id, manifest().lab(lab_id)
    notebook = Path(lab.notebook).stem
    with Gradebook(f"sqlite:///{path}") as gb:
        gb.update_or_create_assignment(stage)
        gb.update_or_create_notebook(notebook, stage)
        for t in lab.tests:
            gb.update_or_create_grade_cell(t.id, notebook, stage, max_score=t.points, cell_type="code")
        for w in lab.written:
            gb.update_or_create_grade_cell(w.id, notebook, stage, max_score=w.points, cell_type="markdown")
            gb.update_or_create_solution_cell(w.id, notebook, stage)
    return path
