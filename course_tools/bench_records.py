"""The kernels' bench records as the course repository keeps them: JSONL files in `bench/`, one record a line,
each stamped with the checkout's commit (pallas_course.bench makes and validates the records).

`append_records` and `read_records` refuse any record, written or hand-edited, that lacks a field;
`record_file_name` names a run's file; `provenance` is pallas_course.bench's with the checkout's commit.

    append_records("bench/my-run.jsonl", [rec])
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping

from autograder.course_manifest import REPO_ROOT
from pallas_course.bench import (
    BenchRecord,
    BenchRecordError,
    Provenance,
    collect_provenance,
    installed_commit,
    validate_record,
)

BENCH_DIR = REPO_ROOT / "bench"


@functools.cache
def course_commit() -> str | None:
    """The course's git commit: the checkout's HEAD, else the commit pip recorded for a git install."""
    if (REPO_ROOT / ".git").exists():
        try:
            out = subprocess.run(
                ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
            )
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return installed_commit()


def provenance(*, now: dt.datetime | None = None) -> Provenance:
    """The provenance of a number measured now, with the commit of the course it was measured at."""
    return collect_provenance(now=now, commit=course_commit())


def _line_count(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)


def append_records(path: Path | str, records: Iterable[BenchRecord | Mapping[str, Any]]) -> Path:
    """Append `records` to the JSONL file `path`. Every record is validated first; none is written if one fails."""
    path = Path(path)
    first_line = _line_count(path) + 1
    lines = []
    for offset, rec in enumerate(records):
        valid = validate_record(rec, path=str(path), line=first_line + offset, action="write")
        lines.append(valid.model_dump_json())
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for line in lines:
            f.write(line + "\n")
    return path


def read_records(path: Path | str) -> list[BenchRecord]:
    """Every record in a `.jsonl` file, or in every `*.jsonl` under a directory (sorted by name).

    Blank lines are skipped; anything else that is not a complete record raises BenchRecordError.
    """
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    out = []
    for file in files:
        for number, text in enumerate(file.read_text().splitlines(), start=1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise BenchRecordError(str(file), number, [f"not valid JSON ({e.msg})"]) from None
            if not isinstance(data, dict):
                raise BenchRecordError(str(file), number, ["not a JSON object"])
            out.append(validate_record(data, path=str(file), line=number))
    return out


def default_out_dir() -> Path:
    """The checkout's `bench/` when running from one, else `./bench` (a pip-installed package has no repo)."""
    return BENCH_DIR if (REPO_ROOT / ".git").exists() else Path.cwd() / "bench"


def record_file_name(prov: Provenance) -> str:
    """`{backend}-{chip}-{UTC time}.jsonl`, e.g. `tpu-tpu-v5-lite-20261129T221500Z.jsonl`, `cpu-20261129T...`."""
    chip = re.sub(r"[^a-z0-9]+", "-", prov.device_kind.lower()).strip("-")
    stamp = prov.timestamp.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    parts = [prov.backend] + ([chip] if chip and chip != prov.backend else []) + [stamp]
    return "-".join(parts) + ".jsonl"
