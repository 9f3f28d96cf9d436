"""A uid of a confined child's own: reserved by the grader (a folder it made, holding its record), the child's
processes found by that real uid (which an unprivileged process cannot change) and killed one by one through a
pidfd, never by kill(-1), and what the uid left in the world-writable folders removed with it.

Used by the jail without namespaces (every jail a uid of its own) and by bubblewrap's jail where no cgroups can be
made (so the rlimit on processes, counted per real uid, is each jail's own).
"""

from __future__ import annotations

import os
import pwd
import random
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.confine import grader
from autograder.confine.paths import ours

UID_RANGE = range(61000, 65000)  # Debian's 60000-64999 "globally allocated" block has no users by default; below
# 65536, so the uids exist in a container whose user namespace maps 0-65535
STAGE_ROOT = "/tmp"
STAGE_PREFIX = "course-jail-uid-"
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable: what a child's uid leaves here is removed


def _real_uid(pid: int) -> int | None:
    """The real uid of `pid` (the first of /proc/<pid>/status's Uid line), None once it is gone or a zombie (dead,
    holding nothing, waiting for its parent to collect it)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def uid_processes(uid: int) -> list[int]:
    """The processes whose real uid is `uid`: a jail's, since its uid is one the grader allotted to it alone and an
    unprivileged process cannot change its real uid. (/proc/<pid>'s owner, the effective uid, narrows the scan.)"""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid and _real_uid(int(entry.name)) == uid:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _pidfd_alive(pidfd: int) -> bool:
    """Whether the process a pidfd refers to still runs (its fdinfo's Pid is -1 once it has exited)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            return any(line.startswith("Pid:") and int(line.split()[1]) > 0 for line in f)
    except (OSError, ValueError):
        return False


def _kill_if_uid(pid: int, uid: int) -> None:
    """SIGKILL `pid` if its real uid is `uid`, through a pidfd: the process checked is the one signalled, even if
    `pid` is reused meanwhile (the pidfd is opened first; it still runs after its uid was read, so that read was
    of it)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        if _real_uid(pid) == uid and _pidfd_alive(pidfd):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)


def kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is `uid`, one by one, repeated until none is left (a fork racing the
    kill is caught by the next round). Never a signal to -1, never a uid outside UID_RANGE."""
    if uid not in UID_RANGE:
        raise ValueError(f"uid {uid} is not a jail's (UID_RANGE)")
    deadline = time.monotonic() + 5
    while (pids := uid_processes(uid)) and time.monotonic() < deadline:
        for pid in pids:
            _kill_if_uid(pid, uid)
        time.sleep(0.005)


def _remove_owned(uid: int) -> None:
    """What `uid` left at the top of the world-writable folders (only that uid's: it is the jail's alone)."""
    for folder in SHARED_TMP:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


@dataclass
class Stage:
    """A jail's uid and its own folder: the copies of what bubblewrap would bind, its HOME and TMPDIR."""

    uid: int
    root: Path

    def path(self, inside: str) -> str:
        """Where the jail finds `inside` (a jail path under /tmp or /opt/...): its copy in this folder."""
        return str(self.root) + inside if inside.startswith("/") else inside

    def remove(self) -> None:
        kill_uid(self.uid)
        _remove_owned(self.uid)
        shutil.rmtree(self.root, ignore_errors=True)


RECORD = "grader"  # in a jail's folder: "<grader pid> <its start time> <uid>", written by the grader, mode 600


def reserve() -> Stage:
    """An unused uid of UID_RANGE, reserved by making its folder (mkdir is atomic: one grader per uid). The
    folder is the grader's (root's, mode 711) and holds the grader's record of the uid it allotted."""
    rng = random.SystemRandom()
    for _ in range(200):
        uid = rng.choice(UID_RANGE)
        try:
            pwd.getpwuid(uid)
            continue  # a user of this system
        except KeyError:
            pass
        root = Path(STAGE_ROOT) / f"{STAGE_PREFIX}{uid}"
        try:
            root.mkdir(mode=0o700)
        except FileExistsError:
            continue
        if uid_processes(uid):
            root.rmdir()
            continue
        fd = os.open(root / RECORD, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()} {grader.started(os.getpid())} {uid}\n")
        os.chmod(root, 0o711)  # the jail enters it (its own folders below), lists nothing
        return Stage(uid, root)
    raise OSError("no free uid for a jail in UID_RANGE")


def record(root: Path) -> tuple[int, str, int] | None:
    """A jail folder's record (grader pid, its start time, the uid it allotted), if the grader wrote it."""
    if not ours(root):
        return None
    try:
        fd = os.open(root / RECORD, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not ours(fd):
            return None
        pid, started, uid = os.read(fd, 200).decode().split()
        return int(pid), started, int(uid)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
