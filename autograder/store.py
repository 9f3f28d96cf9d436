"""One record per graded submission, written atomically, so a batch can be killed and re-run.

`grades/submissions/<key>.json` (key: a hash of the submission's label) holds the result, the SHA-256 of the
notebook that was graded and the fingerprint of the grader that graded it: the hidden checks, the lab's
source and released notebooks, the grading code, course.yml and the versions of jax, numpy, nbgrader and
the notebook stack. A re-run reuses a record when both still match, and grades again otherwise (or always,
with `--force`).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from autograder.results import SubmissionResult
from pallas_course.manifest import REPO_ROOT, LabSpec, manifest

# What decides a score, besides the lab's own files (see lab_files): the grader's code (the benchmarks and
# the report writers aside: they decide no score), the student helpers the jail runs, course.yml.
NOT_SCORING = ("bench_batch.py", "bench_grading.py")


class Record(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    notebook_sha256: str
    grader: str                   # grader_fingerprint(lab) when graded
    graded_at: str
    seconds: float
    retry: bool = False           # the grader itself failed (not the notebook): a re-run grades it again
    result: SubmissionResult


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

    grader = [p for d in autograder.__path__ for p in sorted(Path(d).rglob("*.py")) if p.name not in NOT_SCORING]
    files = grader + sorted((REPO_ROOT / "pallas_course").glob("*.py")) + [REPO_ROOT / "course.yml"]
    if lab is not None:
        module = REPO_ROOT / (lab.grader.replace(".", "/") + ".py")
        files += [REPO_ROOT / lab.source, REPO_ROOT / lab.notebook, module]
    return files


def grader_files() -> list[Path]:
    """Every file that decides some lab's score (what a submission must never be able to change)."""
    files = {p for lab in manifest().labs for p in lab_files(lab)} | set(lab_files(None))
    return sorted(files)


# Installed packages that decide a score too (an upgrade regrades).
SCORING_PACKAGES = ("jax", "jaxlib", "numpy", "ml_dtypes", "nbgrader", "nbclient", "papermill", "ipykernel")


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


class Store:
    """The folder of records, `<out>/submissions/`."""

    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir / "submissions"

    def path(self, label: str) -> Path:
        return self.dir / f"{hashlib.sha256(label.encode()).hexdigest()[:20]}.json"

    def get(self, label: str) -> Record | None:
        try:
            return Record.model_validate_json(self.path(label).read_text())
        except (OSError, ValueError):
            return None   # missing, half-written by an older crash, or from another schema: grade again

    def fresh(self, label: str, notebook_sha256: str) -> Record | None:
        """The stored record if it still stands: same notebook, same grader, not a grader failure."""
        record = self.get(label)
        if record is None or record.retry or record.notebook_sha256 != notebook_sha256:
            return None
        if record.grader != grader_fingerprint(record.result.lab):
            return None
        return record

    def put(self, record: Record) -> Path:
        path = self.path(record.label)
        write_atomic(path, record.model_dump_json(indent=2) + "\n")
        return path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader (or a crash) sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def new_record(label: str, sha: str, result: SubmissionResult, seconds: float, *, retry: bool = False) -> Record:
    return Record(label=label, notebook_sha256=sha, grader=grader_fingerprint(result.lab),
                  graded_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                  seconds=round(seconds, 3), retry=retry, result=result)


def to_json_text(payload: Any) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False)
