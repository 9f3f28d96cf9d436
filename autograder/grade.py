"""Grade submissions: find them, read them, restore the instructor's cells, execute, score.

Each submission's cells run in a fresh jail and its hidden tests outside it (autograder.engine); a broken
one gets a score of 0 and a reason, and never stops the rest of the batch. autograder.batch runs
many of these in parallel and resumably.
"""
from __future__ import annotations

import copy
import functools
import os
from pathlib import Path
from typing import Iterator

import nbformat
from nbformat import NotebookNode

from autograder.engine import execute
from autograder.feedback import sanitize
from autograder.restore import restore
from autograder.results import SubmissionResult, TestResult
from autograder.sandbox import Limits
from autograder.score import score_tests, written_status
from pallas_course.manifest import REPO_ROOT, LabSpec, manifest

def _zero(lab: LabSpec | None, message: str) -> list[TestResult]:
    if lab is None:
        return []
    return [TestResult(name=t.id, points=0, max_points=t.points, passed=False, message=message) for t in lab.tests]


def zero_result(path: Path, label: str, why: str) -> SubmissionResult:
    """0 on every test of the lab `path` names (if any), with `why` as the reason."""
    lab = _which_lab(path, None)
    return SubmissionResult(submission=label, lab=lab.id if lab else None, score=0,
                            max_score=lab.autograded_max if lab else 0, tests=_zero(lab, why), error=why)


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


MAX_NOTEBOOK_MB = 20   # a lab notebook is well under 1 MB; anything this big is not a submission


def _read(path: Path) -> NotebookNode:
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_MB * 2**20:
        raise ValueError(f"the file is {size / 2**20:.0f} MB; a submission may be at most {MAX_NOTEBOOK_MB} MB")
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


@functools.lru_cache(maxsize=None)
def _distinct_cell_ids() -> dict[str, frozenset[str]]:
    """Each lab's grade ids that no other lab uses (not "setup" and the like)."""
    ids: dict[str, set[str]] = {}
    for lab in manifest().labs:
        try:
            nb = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
        except OSError:
            continue
        ids[lab.id] = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None}
    shared = {i for a in ids for b in ids if a != b for i in ids[a] & ids[b]}
    return {lab: frozenset(own - shared) for lab, own in ids.items()}


def _lab_of_cells(nb: NotebookNode) -> LabSpec | None:
    """The lab whose own cells this notebook holds most of, if any."""
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells} - {None}
    best, best_n = None, 0
    for lab_id, own in _distinct_cell_ids().items():
        if len(own & ids) > best_n:
            best, best_n = manifest().lab(lab_id), len(own & ids)
    return best


def grade_one(path: Path, *, label: str | None = None, keep: Path | None = None,
              keep_full: Path | None = None, limits: Limits | None = None) -> SubmissionResult:
    """Grade one notebook; never raises for a bad submission.

    `keep`: where to save the executed copy a student may receive (hidden tests and their tracebacks
    removed); `keep_full`: where to save it whole (for the instructor and nbgrader's formgrader).
    """
    label = label or str(path)
    try:
        nb = _read(path)
    except Exception as e:  # noqa: BLE001 - corrupt JSON, truncated file, wrong schema, too big
        why = f"could not read the notebook ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]})"
        return zero_result(path, label, why)
    lab = _which_lab(path, nb)
    if lab is None:
        names = ", ".join(Path(l.notebook).name for l in manifest().labs)
        why = f"{path.name} is not a notebook of this course (expected one of: {names})"
        return SubmissionResult(submission=label, lab=None, score=0, max_score=0, tests=[], error=why)
    if not lab.tests:
        why = f"{lab.id} has no autograded tests yet"
        return SubmissionResult(submission=label, lab=lab.id, score=0, max_score=0, tests=[], error=why)
    holds = _lab_of_cells(nb)
    mismatch = None
    if holds is not None and holds.id != lab.id:
        mismatch = (f"this notebook holds the cells of {holds.code} ({holds.id}), not of {lab.code}, the lab its "
                    f"file name names")
        ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
        if not ids & _distinct_cell_ids().get(lab.id, frozenset()):
            # Not one cell of the named lab: its tests would find none of their functions (nbgrader runs it
            # to the same 0). Submit {lab.notebook}'s own file.
            return zero_result(path, label, f"{mismatch}; none of {lab.code}'s cells is in it, so every test "
                                            f"scores 0 (submit the {lab.code} notebook)")

    source = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    release = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    notes = restore(nb, source, release)
    limits = limits or Limits()
    run = execute(copy.deepcopy(nb), lab, limits=limits, cell_timeout_s=limits.cell_timeout_s, jailed=limits.jailed)
    limit_output(run.notebook)
    for where, notebook in ((keep, sanitize(run.notebook) if keep else None), (keep_full, run.notebook)):
        if where is not None:
            where.parent.mkdir(parents=True, exist_ok=True)
            tmp_path = where.with_name(f".{where.name}.tmp")
            nbformat.write(notebook, tmp_path)
            os.replace(tmp_path, where)
    tests = score_tests(run.notebook, lab, run.stopped, stopped_in=run.stopped_in, replied=run.replied)
    if run.stopped:
        notes.append(f"the run stopped early: {run.stopped}")
    return SubmissionResult(
        submission=label, lab=lab.id, score=sum(t.points for t in tests), max_score=lab.autograded_max,
        tests=tests, written=written_status(run.notebook, lab), notes=notes, error=mismatch or run.stopped)


def limit_output(nb: NotebookNode) -> None:
    """nbgrader's LimitOutput (autograde runs it before scoring): at most 1000 stream lines per cell, tracebacks
    shortened. Run here too, so a cell that prints past the limit scores the same on both paths."""
    from nbgrader.preprocessors import LimitOutput

    LimitOutput().preprocess(nb, {})


def grade_many(paths: list[Path], *, root: Path | None = None, keep_dir: Path | None = None,
               limits: Limits | None = None) -> Iterator[SubmissionResult]:
    """Grade one after another in this process (the kernels are still sandboxed); `autograder.batch`
    grades in parallel, resumably."""
    for path in paths:
        label = submission_label(path, root)
        keep = keep_dir / "executed" / safe_relpath(label) if keep_dir else None
        yield grade_one(path, label=label, keep=keep, limits=limits)


def safe_relpath(label: str) -> Path:
    """`label` as a path that stays inside the folder it is joined to (no leading /, no ..)."""
    parts = [p for p in Path(label).parts if p not in ("/", "..", ".", "")]
    return Path(*parts) if parts else Path("submission.ipynb")


def submission_label(path: Path, root: Path | None) -> str:
    """The submission's name in every record and report: its path under `root`, always printable text."""
    from autograder.untrusted import relative_name

    return relative_name(path, root)
