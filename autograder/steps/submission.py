"""The read step: one submission as data, read once from disk, so every later step grades the bytes it hashed.

A `Submission` is what travels from the grader to a worker (local or Dask): the file's name (it names the
lab), its label (its name in every record and report), its SHA-256 (a changed file is graded again) and at
most `MAX_BYTES` + 1 of its bytes (anything bigger is not a lab notebook; identify says so).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

MAX_NOTEBOOK_MB = 20  # a lab notebook is well under 1 MB; anything this big is not a submission
MAX_BYTES = MAX_NOTEBOOK_MB * 2**20
CHUNK = 1 << 20


@dataclass(frozen=True)
class Submission:
    name: str  # the file's name: it names the lab
    label: str  # its name in every record and report (see submission_label)
    sha256: str  # of the whole file, or of why it could not be read
    data: bytes  # the notebook's bytes, at most MAX_BYTES + 1 of them
    size: int  # the file's size in bytes
    problem: str | None = None  # why the file could not be read (then data is empty)

    @classmethod
    def from_bytes(cls, name: str, label: str, data: bytes, problem: str | None = None) -> Submission:
        return cls(name, label, hashlib.sha256(data).hexdigest(), data[: MAX_BYTES + 1], len(data), problem)


def read_submission(path: Path, label: str) -> Submission:
    """Hash the whole file, keep at most MAX_BYTES + 1 of it; never raises (an unreadable file says why). Its
    name is kept as text (an odd byte shows as U+FFFD), as every label is."""
    from autograder.untrusted import name as as_text

    h, kept, size = hashlib.sha256(), bytearray(), 0
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
                size += len(chunk)
                if len(kept) <= MAX_BYTES:
                    kept += chunk[: MAX_BYTES + 1 - len(kept)]
    except OSError as e:
        why = f"{type(e).__name__}: {e.strerror or e}"
        return Submission(
            as_text(path.name), label, hashlib.sha256(f"unreadable: {why}".encode()).hexdigest(), b"", 0, why
        )
    return Submission(as_text(path.name), label, h.hexdigest(), bytes(kept), size)


def submission_label(path: Path, root: Path | None) -> str:
    """The submission's name in every record and report: its path under `root`, always printable text."""
    from autograder.untrusted import relative_name

    return relative_name(path, root)


def safe_relpath(label: str) -> Path:
    """`label` as a path that stays inside the folder it is joined to (no leading /, no ..)."""
    parts = [p for p in Path(label).parts if p not in ("/", "..", ".", "")]
    return Path(*parts) if parts else Path("submission.ipynb")
