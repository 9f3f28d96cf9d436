"""A process as /proc tells it, by thread group: a process whose main thread exited while another thread runs
(`pthread_exit` from the main thread) reads as a zombie in /proc/<pid>/status, with no memory counters, though
it runs and holds everything it held. Membership, uid and memory are read off a live thread of the group."""

from __future__ import annotations

import os


def _dead(status: bytes) -> bool:
    for line in status.splitlines():
        if line.startswith(b"State:"):
            parts = line.split()
            return len(parts) > 1 and parts[1] in (b"Z", b"X")
    return True


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def live_status(pid: int) -> bytes | None:
    """/proc/<pid>/status of the thread group `pid` while any of its threads lives: the leader's, or a live
    thread's where the leader has exited; None once every thread is gone or a zombie."""
    status = _read(f"/proc/{pid}/status")
    if status is None:
        return None
    if not _dead(status):
        return status
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        if tid != str(pid):
            status = _read(f"/proc/{pid}/task/{tid}/status")
            if status is not None and not _dead(status):
                return status
    return None


def field(status: bytes, name: bytes) -> list[bytes]:
    """The values of `name:` in a status text (e.g. b"Uid" -> [real, effective, saved, fs])."""
    for line in status.splitlines():
        if line.startswith(name + b":"):
            return line.split()[1:]
    return []
