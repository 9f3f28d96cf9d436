"""nbgrader's door (autograder.doors.nbgrader_engine) refuses what `course grade` refuses, with the same reason,
before nbgrader reads or copies anything (a symbolic link, a special file), and grades by the same reader
and steps (autograder.steps.pipeline.NBGRADER, each once): a notebook valid as JSON but not against nbformat's
schema, one with over 20 MB of saved outputs, one with a test cell twice, one that is not JSON, another lab's
notebook under this lab's name and one with another lab's cell added get the same score on both doors."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import cells
from autograder.doors import nbgrader_engine
from autograder.steps.discover import LINK, SPECIAL, find_submissions
from autograder.doors.nbgrader_engine import JailedExecute, read_submissions
from autograder.steps.pipeline import grade_submission
from autograder.steps.submission import read_submission
from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT, manifest
from tests.nbgrader_course import generated_course, nbgrader

LAB = "lab-1.1-first-kernels"
STAGE = manifest().stage.id
NAME = Path(manifest().lab(LAB).notebook).name


def _resources(student: str, name: str) -> dict:
    return {"nbgrader": {"notebook": name, "student": student, "assignment": STAGE}, "metadata": {"path": "."}}


def _place(root: Path, student: str) -> Path:
    """Where nbgrader's submitted/ holds `student`'s notebook under `root`."""
    path = root / student / STAGE / NAME
    path.parent.mkdir(parents=True)
    return path


def _hook(path: Path) -> list[str]:
    notebooks = [str(path)]
    read_submissions(assignment=STAGE, student="*", notebooks=notebooks)  # nbgrader passes its globs
    return notebooks


def _exported(path: Path, student: str) -> nbformat.NotebookNode:
    """What nbgrader's sanitizing gets for the notebook at `path` (the exporter, as nbgrader calls it)."""
    text, _ = nbgrader_engine.SubmittedNotebook().from_filename(str(path), _resources(student, Path(NAME).stem))
    return nbformat.reads(text, as_version=4)


def _test_outputs(nb: nbformat.NotebookNode) -> list[str]:
    ids = {t.id for t in manifest().lab(LAB).tests}
    return [c.outputs[0]["evalue"] for c in nb.cells if cells.grade_id(c) in ids]


def test_a_symlinked_notebook_is_refused_before_nbgrader_reads_it(tmp_path: Path) -> None:
    """Never opened: nbgrader gets the released notebook, and every test fails with course grade's reason."""
    lab = manifest().lab(LAB)
    _place(tmp_path, "linker").symlink_to(REPO_ROOT / lab.source)  # the model answers, one link away
    path = tmp_path / "linker" / STAGE / NAME
    assert _hook(path) == [str(path)]
    nb = _exported(path, "linker")
    assert not any("BEGIN SOLUTION" in c.source for c in nb.cells)  # the release, not what the link points at
    out, _ = JailedExecute().preprocess(nb, _resources("linker", Path(NAME).stem))
    assert set(_test_outputs(out)) == {
        "not graded: a symbolic link: never followed (it could point at solutions/ or at another student's work)"
    }
    assert [s.reason for s in find_submissions([tmp_path]).skipped] == [LINK]  # course grade's reason


def test_a_special_file_is_refused_with_course_grades_reason(tmp_path: Path) -> None:
    os.mkfifo(_place(tmp_path, "fifo"))  # opening it would block nbgrader
    path = tmp_path / "fifo" / STAGE / NAME
    _hook(path)
    out, _ = JailedExecute().preprocess(_exported(path, "fifo"), _resources("fifo", Path(NAME).stem))
    assert set(_test_outputs(out)) == {f"not graded: {SPECIAL}"}


def test_the_door_runs_each_step_once(tmp_path: Path) -> None:
    """The exporter runs identify and restore on the bytes the hook read (the file is not read again);
    JailedExecute resumes with execute and score."""
    from autograder.steps import engines
    from autograder.steps.execute import Execution

    engines.register("fake", lambda nb, lab, limits: Execution(nb, stopped=None))
    path = _place(tmp_path, "walker")
    path.write_text(nbformat.writes(filled_in(LAB)))
    assert _hook(path) == [str(path)]
    resources = _resources("walker", Path(NAME).stem)
    path.write_text("changed after the hook read it")
    text, _ = nbgrader_engine.SubmittedNotebook().from_filename(str(path), resources)
    assert nbformat.reads(text, as_version=4).cells  # the bytes read, restored
    key = ("walker", STAGE, Path(NAME).stem)
    assert nbgrader_engine._found[key].done == ("identify", "restore")
    nbformat.write(nbformat.v4.new_notebook(), path)  # what the sanitizing pass wrote: read back as it is
    again, _ = nbgrader_engine.SubmittedNotebook().from_filename(str(path), resources)
    assert nbformat.reads(again, as_version=4).cells == []
    seen = []
    real = nbgrader_engine.pipeline.run

    def spy(steps, g, **kw):
        out = real(steps, g, **kw)
        seen.append(out.done)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nbgrader_engine.pipeline, "run", spy)
        JailedExecute(engine="fake").preprocess(nbformat.reads(text, as_version=4), resources)
    assert seen == [("identify", "restore", "execute", "score")]


def test_a_notebook_of_no_lab_is_refused(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    with pytest.raises(ValueError, match="not a notebook of this course"):
        JailedExecute().preprocess(nb, _resources("nobody", "holiday-photos"))


def _off_schema(nb: nbformat.NotebookNode) -> str:
    """`nb` as JSON with one code cell's execution_count a string, as some editors write it."""
    raw = json.loads(nbformat.writes(nb))
    next(c for c in raw["cells"] if c["cell_type"] == "code")["execution_count"] = "1"
    return json.dumps(raw)


def _big(nb: nbformat.NotebookNode) -> str:
    """`nb` with 21 MB of saved output in its first code cell."""
    nb = copy.deepcopy(nb)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (21 << 20))]
    return nbformat.writes(nb)


def _twice(nb: nbformat.NotebookNode) -> str:
    nb = copy.deepcopy(nb)
    i, test = next((i, c) for i, c in enumerate(nb.cells) if cells.is_grade(c) and cells.grade_id(c) == "add_f32")
    nb.cells.insert(i + 1, copy.deepcopy(test))
    return nbformat.writes(nb)


def test_an_off_schema_notebook_scores_zero_from_the_bytes_read(tmp_path: Path) -> None:
    """Through the preprocessor alone: the reason lands in every test cell, so nbgrader scores 0 too."""
    path = _place(tmp_path, "editor")
    path.write_text(_off_schema(filled_in(LAB)))
    assert _hook(path) == [str(path)]
    nb = nbformat.read(path, as_version=4)  # nbgrader reads it without validating
    out, _ = JailedExecute().preprocess(nb, _resources("editor", Path(NAME).stem))
    tests = [c for c in out.cells if cells.grade_id(c) in {t.id for t in manifest().lab(LAB).tests}]
    assert tests and all(c.outputs[0]["evalue"].startswith("could not read the notebook") for c in tests)
    assert grade_submission(read_submission(path, "x")).result.error.startswith("could not read the notebook")


def _foreign_cell(nb: nbformat.NotebookNode) -> str:
    """`nb` with LAB·1.2's first test cell added at the end: it runs, ungraded (nbgrader's own OverwriteCells
    fails on it)."""
    other = filled_in("lab-1.2-tiled-matmul")
    nb = copy.deepcopy(nb)
    nb.cells.append(next(c for c in other.cells if cells.is_test(c)))
    return nbformat.writes(nb)


def test_both_doors_give_the_same_scores(tmp_path: Path) -> None:
    """`nbgrader autograde` and `course grade` on the same odd submissions: the same points for every test."""
    from nbgrader.api import Gradebook

    course = generated_course(tmp_path / "course")
    solution = filled_in(LAB)
    texts = {
        "off-schema": _off_schema(solution),
        "big-outputs": _big(solution),
        "test-twice": _twice(solution),
        "not-json": "{not json",
        "other-lab": nbformat.writes(filled_in("lab-1.2-tiled-matmul")),
        "foreign-cell": _foreign_cell(solution),
    }
    submitted = course / "submitted"
    for student, text in texts.items():
        (submitted / student / STAGE).mkdir(parents=True)
        (submitted / student / STAGE / NAME).write_text(text)
    (submitted / "linker" / STAGE).mkdir(parents=True)
    (submitted / "linker" / STAGE / NAME).symlink_to(REPO_ROOT / manifest().lab(LAB).source)
    run = nbgrader(course, "autograde", STAGE, "--force")
    assert f"linker/{STAGE}/{NAME}: not graded: a symbolic link: never followed" in run.stderr
    linked = nbformat.read(course / "autograded" / "linker" / STAGE / NAME, as_version=4)
    assert not any("BEGIN SOLUTION" in c.source for c in linked.cells)  # the release, scored 0
    tests = [t.id for t in manifest().lab(LAB).tests]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        theirs = {
            s: {
                g.name: g.score
                for g in gb.find_submission_notebook(Path(NAME).stem, STAGE, s).grades
                if g.name in tests
            }
            for s in [*texts, "linker"]
        }
    assert sum(theirs.pop("linker").values()) == 0
    ours = {
        s: {t.name: t.points for t in grade_submission(read_submission(submitted / s / STAGE / NAME, s)).result.tests}
        for s in texts
    }
    assert theirs == ours
    assert sum(ours["test-twice"].values()) == 6 and sum(ours["off-schema"].values()) == 0
    assert sum(ours["big-outputs"].values()) == 0 and sum(ours["foreign-cell"].values()) == 6
    assert sum(ours["not-json"].values()) == 0 and sum(ours["other-lab"].values()) == 0
    for student, why in (
        ("not-json", "could not read the notebook"),
        ("other-lab", "this notebook holds the cells of LAB·1.2"),
    ):
        assert f"{student}/{STAGE}/{NAME}: {why}" in run.stderr  # the reason, once, in nbgrader's log
        assert run.stderr.count(f"{student}/{STAGE}/{NAME}: {why}") == 1
    assert "Traceback" not in run.stderr and run.returncode == 0
    shutil.rmtree(course)
