"""What decides a score, as one hash: which grader graded a submission, and whether a batch changed it.

`grader_fingerprint(lab)` covers the hidden checks, the lab's source and released notebooks, the grading code,
course.yml and the versions of jax, numpy, nbgrader and the notebook stack. A worker stamps its results with
it (a result from a different grader is refused) and a stored record keeps it (a re-run reuses a record only
while it still matches). `GraderFilesGuard` stops a --no-jail batch whose notebooks changed these files.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from pallas_course.manifest import REPO_ROOT, LabSpec, manifest

# Installed packages that decide a score too (an upgrade regrades).
SCORING_PACKAGES = ("jax", "jaxlib", "numpy", "ml_dtypes", "nbgrader", "nbclient", "papermill", "ipykernel")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as e:
        h.update(f"unreadable: {e}".encode())
    return h.hexdigest()


def lab_files(lab: LabSpec | None) -> list[Path]:
    import autograder

    grader = [p for d in autograder.__path__ for p in sorted(Path(d).rglob("*.py"))]
    files = grader + sorted((REPO_ROOT / "pallas_course").glob("*.py")) + [REPO_ROOT / "course.yml"]
    if lab is not None:
        module = REPO_ROOT / (lab.grader.replace(".", "/") + ".py")
        files += [REPO_ROOT / lab.source, REPO_ROOT / lab.notebook, module]
    return files


def grader_files() -> list[Path]:
    """Every file that decides some lab's score (what a submission must never be able to change)."""
    files = {p for lab in manifest().labs for p in lab_files(lab)} | set(lab_files(None))
    return sorted(files)


@functools.lru_cache(maxsize=1)   # what this process imported stays what it runs, whatever pip does meanwhile
def _versions() -> str:
    import importlib.metadata

    out = []
    for name in SCORING_PACKAGES:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} missing")
    return ";".join(out)


def _hash_files(files: list[Path]) -> str:
    h = hashlib.sha256(_versions().encode())
    for f in files:
        h.update(str(f.relative_to(REPO_ROOT)).encode())
        h.update(sha256_file(f).encode() if f.exists() else b"missing")
    return h.hexdigest()[:16]


def grader_fingerprint(lab_id: str | None) -> str:
    """Changes whenever anything that decides `lab_id`'s scores changes (computed afresh: a few ms)."""
    lab = manifest().lab(lab_id) if lab_id else None
    return _hash_files(lab_files(lab))


def files_snapshot(files: list[Path]) -> dict[Path, str]:
    return {f: sha256_file(f) if f.exists() else "missing" for f in files}


def changed_files(before: dict[Path, str]) -> list[str]:
    now = files_snapshot(list(before))
    return [str(f.relative_to(REPO_ROOT) if f.is_relative_to(REPO_ROOT) else f) for f in before if now[f] != before[f]]


class GraderModified(RuntimeError):
    """A grader file changed during the batch: a submission may have written outside its folder."""


class GraderFilesGuard:
    """Without a jail (--no-jail) a notebook can write the grader's files: snapshot them, then `check` after
    each submission, so the batch stops at the first one that changed them."""

    def __init__(self) -> None:
        self.before = files_snapshot(grader_files())

    def check(self, results_dir: Path) -> None:
        changed = changed_files(self.before)
        if changed:
            raise GraderModified(
                f"grader files changed during the batch ({', '.join(changed[:5])}): a submission may have "
                "written outside its folder (graded with --no-jail). Restore them (git checkout -- <files>), "
                f"then re-run with --force; results so far are in {results_dir}")
