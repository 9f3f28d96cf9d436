"""The identify step: a submission's bytes as a validated notebook, and the lab it is graded as.

The lab is the one its file name names; a renamed file is recognised by its graded cells. A notebook that
holds another lab's cells is graded as its name says, with the mismatch in its error (nbgrader does the
same); one that holds none of the named lab's cells scores 0 without running. Whatever cannot be graded
raises `Ungradable` with the reason, which becomes a score of 0 (autograder.steps.pipeline).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.cells import grade_id
from autograder.steps.submission import MAX_NOTEBOOK_MB, Submission
from autograder.course_manifest import REPO_ROOT, LabSpec, manifest


class Ungradable(Exception):
    """Why a submission scores 0 without running, and its lab where one is known."""

    def __init__(self, why: str, lab: LabSpec | None) -> None:
        super().__init__(why)
        self.why, self.lab = why, lab


@dataclass(frozen=True)
class Identified:
    submission: Submission
    notebook: NotebookNode  # as submitted, validated
    lab: LabSpec
    mismatch: str | None = None  # it holds another lab's cells than its name says (graded as its name says)


def identify(submission: Submission) -> Identified:
    """Read, validate and name the lab of `submission`; raises Ungradable with the reason."""
    if submission.problem is not None:
        raise Ungradable(f"could not read the notebook ({submission.problem})", lab_named(submission.name))
    try:
        nb = read_notebook(submission)
    except Exception as e:  # noqa: BLE001 - corrupt JSON, truncated file, wrong schema, too big, unreadable
        why = f"could not read the notebook ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]})"
        raise Ungradable(why, lab_named(submission.name)) from None
    lab = lab_named(submission.name) or lab_of_ids(_grade_ids(nb))
    if lab is None:
        names = ", ".join(Path(l.notebook).name for l in manifest().labs)
        raise Ungradable(f"{submission.name} is not a notebook of this course (expected one of: {names})", None)
    if not lab.tests:
        raise Ungradable(f"{lab.id} has no autograded tests yet", lab)
    holds = lab_of_cells(nb)
    mismatch = None
    if holds is not None and holds.id != lab.id:
        mismatch = (
            f"this notebook holds the cells of {holds.code} ({holds.id}), not of {lab.code}, the lab its "
            f"file name names"
        )
        if not _grade_ids(nb) & distinct_cell_ids().get(lab.id, frozenset()):
            # Not one cell of the named lab: its tests would find none of their functions (nbgrader runs it
            # to the same 0).
            raise Ungradable(
                f"{mismatch}; none of {lab.code}'s cells is in it, so every test scores 0 (submit "
                f"the {lab.code} notebook)",
                lab,
            )
    return Identified(submission, nb, lab, mismatch)


def read_notebook(submission: Submission) -> NotebookNode:
    """The notebook in `submission`'s bytes, validated against nbformat's schema; raises why not."""
    if submission.size > MAX_NOTEBOOK_MB * 2**20:
        raise ValueError(
            f"the file is {submission.size / 2**20:.0f} MB; a submission may be at most {MAX_NOTEBOOK_MB} MB"
        )
    nb = nbformat.reads(submission.data.decode("utf-8"), as_version=4)
    nbformat.validate(nb)
    return nb


def lab_named(file_name: str) -> LabSpec | None:
    """The lab whose notebook is called `file_name`, if any."""
    return manifest().lab_for_notebook(file_name)


def _grade_ids(nb: NotebookNode) -> set[str]:
    return {grade_id(c) for c in nb.cells} - {None}


def lab_of_ids(ids: set[str]) -> LabSpec | None:
    """A renamed file: the first lab that has a test among the graded cells `ids`."""
    for candidate in manifest().labs:
        if candidate.tests and {t.id for t in candidate.tests} & ids:
            return candidate
    return None


@functools.lru_cache(maxsize=None)
def distinct_cell_ids() -> dict[str, frozenset[str]]:
    """Each lab's grade ids that no other lab uses (not "setup" and the like)."""
    ids: dict[str, set[str]] = {}
    for lab in manifest().labs:
        try:
            nb = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
        except OSError:
            continue
        ids[lab.id] = _grade_ids(nb)
    shared = {i for a in ids for b in ids if a != b for i in ids[a] & ids[b]}
    return {lab: frozenset(own - shared) for lab, own in ids.items()}


def lab_of_cells(nb: NotebookNode) -> LabSpec | None:
    """The lab whose own cells this notebook holds most of, if any."""
    ids = _grade_ids(nb)
    best, best_n = None, 0
    for lab_id, own in distinct_cell_ids().items():
        if len(own & ids) > best_n:
            best, best_n = manifest().lab(lab_id), len(own & ids)
    return best
