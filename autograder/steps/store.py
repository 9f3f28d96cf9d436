"""Where graded submissions are kept, written atomically, so a batch can be killed and re-run.

Under the output folder: `submissions/<key>.json` (key: a hash of the submission's label), one `Record` per
submission (its result, the SHA-256 of the notebook graded and the grader's fingerprint, see
autograder.fingerprint); `executed/<label>` (the executed notebook safe to hand back) and
`instructor/<label>` (the whole executed notebook). The store only stores: which record still stands is
the record step's decision (autograder.steps.record). What another run left in executed/ and instructor/ is removed
by the report step (`remove_all_but`); the records stay, and one whose notebooks are gone is graded again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

from pydantic import BaseModel, ConfigDict

from autograder.steps.results import SubmissionResult
from autograder.steps.submission import safe_relpath

EXECUTED, INSTRUCTOR = "executed", "instructor"


class Record(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    notebook_sha256: str
    grader: str  # grader_fingerprint(lab) when graded
    graded_at: str
    seconds: float
    retry: bool = False  # the grader itself failed (not the notebook): a re-run grades it again
    result: SubmissionResult
    kept: tuple[str, ...] = ()  # the executed notebooks kept beside it (EXECUTED, INSTRUCTOR)


class Store:
    """The records, `<out>/submissions/`, and the executed notebooks beside them."""

    def __init__(self, out_dir: Path) -> None:
        self.out = out_dir
        self.dir = out_dir / "submissions"

    def path(self, label: str) -> Path:
        return self.dir / f"{hashlib.sha256(label.encode()).hexdigest()[:20]}.json"

    def get(self, label: str) -> Record | None:
        try:
            return Record.model_validate_json(self.path(label).read_text())
        except (OSError, ValueError):
            return None  # missing, half-written by an older crash, or from another schema: grade again

    def put(self, record: Record) -> Path:
        path = self.path(record.label)
        write_atomic(path, record.model_dump_json(indent=2) + "\n")
        return path

    def notebook_path(self, kind: str, label: str) -> Path:
        """Where the `kind` (EXECUTED or INSTRUCTOR) copy of `label`'s executed notebook is kept."""
        return self.out / kind / safe_relpath(label)

    def put_notebooks(self, label: str, *, executed: str | None, full: str | None) -> tuple[str, ...]:
        """Keep the executed notebooks; returns the kinds kept (for the record's `kept`)."""
        kept = []
        for kind, text in ((EXECUTED, executed), (INSTRUCTOR, full)):
            if text:
                write_atomic(self.notebook_path(kind, label), text)
                kept.append(kind)
        return tuple(kept)

    def has_notebooks(self, record: Record) -> bool:
        """The executed notebooks `record` was kept with are still there (another run's report may have removed
        them, or a person)."""
        return all(self.notebook_path(kind, record.label).is_file() for kind in record.kept)

    def notebook_paths(self, labels: Iterable[str]) -> set[Path]:
        """Where the executed notebooks of `labels` are kept, whether or not they are there."""
        return {self.notebook_path(kind, label) for label in labels for kind in (EXECUTED, INSTRUCTOR)}


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader (or a crash) sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def remove_all_but(folder: Path, keep: set[Path]) -> list[Path]:
    """Remove every file (or link) under `folder` not in `keep`, then the folders left empty; links are removed,
    never followed. Returns what was removed."""
    removed: list[Path] = []
    if not folder.is_dir() or folder.is_symlink():
        return removed
    for parent, dirs, files in os.walk(folder, topdown=False):
        here = Path(parent)
        for name in files + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            if path not in keep:
                path.unlink()
                removed.append(path)
        if here != folder and not any(here.iterdir()):
            here.rmdir()
    return removed
