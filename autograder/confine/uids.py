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
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.confine import chain, grader, procfs
from autograder.confine.paths import ours

UID_RANGE = range(61000, 65000)  # Debian's 60000-64999 "globally allocated" block has no users by default; below
# 65536, so the uids exist in a container whose user namespace maps 0-65535
# The jails' folders, each reserving its uid: in a folder of the grader's own that no jail can write (issue 42: in
# /tmp, a jail's leftover process re-made every course-jail-uid-* name, and every later jail, and the re-run, found
# no free uid). Every folder on the way is root's and writable by root alone; the jails only pass through it.
STAGE_ROOT = "/var/lib/course-grader/jails"
STAGE_PREFIX = "course-jail-uid-"
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")  # world-writable: what a child's uid leaves here is removed


def _real_uid(pid: int) -> int | None:
    """The real uid of the thread group `pid` (the first of its Uid line, read off a live thread: the main thread may
    have exited while another runs), None once it is gone or a zombie (dead, holding nothing, waiting for its
    parent to collect it)."""
    status = procfs.live_status(pid)
    uids = procfs.field(status, b"Uid") if status is not None else []
    try:
        return int(uids[0]) if uids else None
    except ValueError:
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


_SYSVIPC = {"shm": "-m", "sem": "-s", "msg": "-q"}  # /proc/sysvipc/<kind> -> ipcrm's option


def _remove_ipc(uid: int) -> None:
    """System V objects `uid` owns or made: without an IPC namespace they outlive every process (issue 42, N4: 2 GiB
    left after the door), and a later jail given the same uid could attach them. The jails' seccomp filter denies
    making them; this removes any all the same."""
    for kind, option in _SYSVIPC.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        head = lines[0].split() if lines else []
        if not {"uid", "cuid"} <= set(head):
            continue
        ident = head[1]  # shmid, semid or msqid
        for line in lines[1:]:
            row = dict(zip(head, line.split()))
            if str(uid) in (row.get("uid"), row.get("cuid")):
                subprocess.run([chain.tool("ipcrm"), option, row[ident]], capture_output=True, timeout=10)


@dataclass
class Stage:
    """A jail's uid and its own folder: the copies of what bubblewrap would bind, its HOME and TMPDIR."""

    uid: int
    root: Path

    def path(self, inside: str) -> str:
        """Where the jail finds `inside` (a jail path under /tmp or /opt/...): its copy in this folder."""
        return str(self.root) + inside if inside.startswith("/") else inside

    def remove(self) -> None:
        """End everything the uid runs and remove what it left: its files in the shared temporary folders, its
        System V objects, its folder."""
        kill_uid(self.uid)
        _remove_owned(self.uid)
        _remove_ipc(self.uid)
        shutil.rmtree(self.root, ignore_errors=True)


RECORD = "grader"  # in a jail's folder: "<pid namespace> <grader pid> <its start time> <uid>", by the grader, mode 600


def stage_root() -> Path:
    """STAGE_ROOT, made where missing (mode 711: the jails pass through, list nothing); OSError where it, or a folder
    above it, is not the grader's alone (writable by another user: a jail could then make names in it)."""
    root = Path(STAGE_ROOT)
    root.mkdir(mode=0o711, parents=True, exist_ok=True)
    for folder in [root, *root.parents]:
        if folder == Path("/"):
            break
        st = os.lstat(folder)
        if st.st_uid not in (0, os.geteuid()) or st.st_mode & 0o022 or not os.path.isdir(folder):
            raise OSError(
                f"{folder} is not the grader's alone (owner {st.st_uid}, mode {st.st_mode & 0o7777:o}): "
                f"the jails' uids are reserved in {STAGE_ROOT}"
            )
    return root


def reserve() -> Stage:
    """An unused uid of UID_RANGE, reserved by making its folder (mkdir is atomic: one grader per uid). The
    folder is the grader's (root's, mode 711) and holds the grader's record of the uid it allotted."""
    top = stage_root()
    rng = random.SystemRandom()
    for _ in range(200):
        uid = rng.choice(UID_RANGE)
        try:
            pwd.getpwuid(uid)
            continue  # a user of this system
        except KeyError:
            pass
        root = top / f"{STAGE_PREFIX}{uid}"
        try:
            root.mkdir(mode=0o700)
        except FileExistsError:
            continue
        if uid_processes(uid):
            root.rmdir()
            continue
        fd = os.open(root / RECORD, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{grader.tag().replace('-', ' ')} {uid}\n")
        os.chmod(root, 0o711)  # the jail enters it (its own folders below), lists nothing
        return Stage(uid, root)
    raise OSError("no free uid for a jail in UID_RANGE")


def record(root: Path) -> tuple[list[str], int] | None:
    """A jail folder's record ([pid namespace, grader pid, its start time] naming the grader: autograder.confine
    .grader.gone; the uid it allotted), if the grader wrote it."""
    if not ours(root):
        return None
    try:
        fd = os.open(root / RECORD, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if not ours(fd):
            return None
        *fields, uid = os.read(fd, 200).decode().split()
        return fields, int(uid)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)
