"""Where a grading's time goes: timestamped spans, written only when COURSE_GRADE_TIMELINE names a file.

    COURSE_GRADE_TIMELINE=/tmp/t.jsonl course grade nb.ipynb      (course_tools.bench.grading_profile reads it)

Each record is one JSON line: the event's name, its wall-clock start and end (time.time(), one clock for every
process on the machine, jailed or not), the CPU seconds of the recording process over the span, its pid and
thread, and a few fields of the grader's own (a cell's index, a test's id, a chip): never a student's text.
Lines are appended with one write each (O_APPEND), so the grader, its workers and the judge share a file. Off
(the variable unset), `span` costs one dictionary lookup and records nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Any, Iterator

ENV = "COURSE_GRADE_TIMELINE"


def path() -> str | None:
    return os.environ.get(ENV) or None


def enabled() -> bool:
    return path() is not None


def record(event: str, start: float, end: float, cpu_s: float | None = None, **fields: Any) -> None:
    """One finished span (or, start == end, an instant)."""
    where = path()
    if where is None:
        return
    line = {
        "event": event,
        "start": start,
        "end": end,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        **({"cpu_s": round(cpu_s, 6)} if cpu_s is not None else {}),
        **fields,
    }
    data = (json.dumps(line, default=str) + "\n").encode()
    fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def mark(event: str, **fields: Any) -> None:
    now = time.time()
    record(event, now, now, **fields)


@contextlib.contextmanager
def span(event: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """Time the block; the yielded dict takes more fields found inside it (a count, an outcome)."""
    if path() is None:
        yield {}
        return
    extra: dict[str, Any] = {}
    start, cpu = time.time(), time.process_time()
    try:
        yield extra
    finally:
        record(event, start, time.time(), time.process_time() - cpu, **fields, **extra)


def process_started() -> float:
    """When this process started, in time.time()'s clock (from /proc: its start ticks against the uptime, 10 ms)."""
    try:
        ticks = int(open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time()


def cpu_of(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes `pids` have used so far, read from /proc (the jail's, seen
    from the host)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / tick
