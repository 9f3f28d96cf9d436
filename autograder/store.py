"""Where graded submissions are kept, written atomically, so a batch can be killed and re-run.

Under the output folder: `submissions/<key>.json` (key: a hash of the submission's label), one `Record` per
submission (its result, the SHA-256 of the notebook graded and the grader's fingerprint, see
autograder.fingerprint); `executed/<label>` (the executed notebook safe to hand back) and
`instructor/<label>` (the whole executed notebook). The store only stores: which record still stands is
the record step's decision (autograder.record).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from autograder.results import SubmissionResult
from autograder.submission import safe_relpath

EXECUTED, INSTRUCTOR = "executed", "instructor"


class Record(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    notebook_sha256: str
    grader: str                   # grader_fingerprint(lab) when graded
    graded_at: str
    seconds: float
    retry: bool = False           # the grader itself failed (not the notebook): a re-run grades it again
    result: SubmissionResult


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
            return None   # missing, half-written by an older crash, or from another schema: grade again

    def put(self, record: Record) -> Path:
        path = self.path(record.label)
        write_atomic(path, record.model_dump_json(indent=2) + "\n")
        return path

    def notebook_path(self, kind: str, label: str) -> Path:
        """Where the `kind` (EXECUTED or INSTRUCTOR) copy of `label`'s executed notebook is kept."""
        return self.out / kind / safe_relpath(label)

    def put_notebooks(self, label: str, *, executed: str | None, full: str | None) -> None:
        for kind, text in ((EXECUTED, executed), (INSTRUCTOR, full)):
            if text:
                write_atomic(self.notebook_path(kind, label), text)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader (or a crash) sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
