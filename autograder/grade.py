"""Grade submissions: find them, read them, restore the instructor's cells, execute, score.

Each submission runs in a fresh papermill kernel in a scratch folder; a broken one gets a score of 0 and
a reason, and never stops the rest of the batch.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterable, Iterator

import nbformat
from nbformat import NotebookNode

from autograder.execute import execute
from autograder.restore import restore
from autograder.results import SubmissionResult, TestResult
from autograder.score import score_tests, written_status
from pallas_course.manifest import REPO_ROOT, LabSpec, manifest

SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", ".git"}


class SubmissionNotFound(FileNotFoundError):
    """A path given to the grader does not exist or holds no notebooks."""


def find_submissions(paths: Iterable[Path | str]) -> list[Path]:
    """Notebooks named by `paths`: a notebook itself, or every notebook under a folder."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            nbs = sorted(p for p in path.rglob("*.ipynb") if not SKIP_DIRS & set(p.parts))
            if not nbs:
                raise SubmissionNotFound(f"{path}: no .ipynb files in this folder")
            found.extend(nbs)
        else:
            raise SubmissionNotFound(f"{path}: no such file or folder")
    return found


def _zero(lab: LabSpec | None, message: str) -> list[TestResult]:
    if lab is None:
        return []
    return [TestResult(name=t.id, points=0, max_points=t.points, passed=False, message=message) for t in lab.tests]


def _which_lab(path: Path, nb: NotebookNode | None) -> LabSpec | None:
    lab = manifest().lab_for_notebook(path.name)
    if lab is not None or nb is None:
        return lab
    # A renamed file: recognise the lab by its graded cells.
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
    for candidate in manifest().labs:
        if candidate.tests and {t.id for t in candidate.tests} & ids:
            return candidate
    return None


def _read(path: Path) -> NotebookNode:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


def grade_one(path: Path, *, label: str | None = None, keep: Path | None = None) -> SubmissionResult:
    """Grade one notebook; never raises for a bad submission. `keep`: where to save the executed copy."""
    label = label or str(path)
    try:
        nb = _read(path)
    except Exception as e:  # noqa: BLE001 - corrupt JSON, truncated file, wrong schema
        lab = _which_lab(path, None)
        why = f"could not read the notebook ({type(e).__name__}: {str(e).strip().splitlines()[0][:200]})"
        return SubmissionResult(submission=label, lab=lab.id if lab else None, score=0,
                                max_score=lab.autograded_max if lab else 0, tests=_zero(lab, why), error=why)
    lab = _which_lab(path, nb)
    if lab is None:
        names = ", ".join(Path(l.notebook).name for l in manifest().labs)
        why = f"{path.name} is not a notebook of this course (expected one of: {names})"
        return SubmissionResult(submission=label, lab=None, score=0, max_score=0, tests=[], error=why)
    if not lab.tests:
        why = f"{lab.id} has no autograded tests yet"
        return SubmissionResult(submission=label, lab=lab.id, score=0, max_score=0, tests=[], error=why)

    source = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    release = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    notes = restore(nb, source, release)
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        run = execute(nb, Path(tmp))
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(run.notebook, keep)
    tests = score_tests(run.notebook, lab, run.stopped)
    if run.stopped:
        notes.append(f"the run stopped early: {run.stopped}")
    return SubmissionResult(
        submission=label, lab=lab.id, score=sum(t.points for t in tests), max_score=lab.autograded_max,
        tests=tests, written=written_status(run.notebook, lab), notes=notes, error=run.stopped)


def grade_many(paths: list[Path], *, root: Path | None = None, keep_dir: Path | None = None) -> Iterator[SubmissionResult]:
    for path in paths:
        label = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
        keep = keep_dir / "executed" / label if keep_dir else None
        yield grade_one(path, label=label, keep=keep)
