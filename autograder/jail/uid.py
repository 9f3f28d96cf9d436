"""The jail without namespaces: where bubblewrap cannot start (Docker's default seccomp profile denies new
namespaces to a container without CAP_SYS_ADMIN, as on Gradescope and PrairieLearn), student code runs as a
uid of its own instead, needing nothing but root:

- a fresh unprivileged uid per jail (UID_RANGE, unused: no passwd entry, no process), no supplementary
  groups, no_new_privs: it reads only what "other" may read, and jails graded side by side cannot signal,
  ptrace or read each other's files;
- the grader's files unreadable to it: start() refuses (problem()) while anything of the checkout (its .git,
  solutions/, the grader's package with its checks and keys, the instructor's course.yml, the gradebook) or of
  the grader's package wherever it was imported from is readable by "other", found by walking them (exposed()),
  or while the jail's Python is not (`chmod o= ...`: the Gradescope door's setup.sh arranges both);
- what bubblewrap would bind read-only is copied into the jail's own folder (STAGE_ROOT/course-jail-uid-<uid>:
  the course helpers, the agent, the public course.yml), paths in its environment rewritten to match (Jail.path);
  its HOME and TMPDIR are folders of its own there (mode 700);
- the same cgroups (memory, pids, cpu) where they are writable, else the watch of its resident memory
  (autograder.jail.memory: its uid's processes and its files in /dev/shm) and the rlimit on processes of its
  uid; CPU time and file size by rlimits always;
- a seccomp filter (autograder.jail.syscall_filter.fallback_filter): no sockets (the agent talks over its pipes),
  io_uring, ptrace, process_vm_*, namespaces, mounts, bpf, perf_event_open, userfaultfd, the keyring;
- the results are the grader's: the jail writes nothing but its pipes (root-owned folders are not writable
  to it), and everything its uid runs, or left in /tmp, /var/tmp and /dev/shm, goes with the jail;
- nothing its uid can write is read by the grader as an instruction: a jail's processes are found by their real
  uid (which an unprivileged process cannot change) and signalled one by one through a pidfd, never by kill(-1);
  the orphan sweep trusts only folders and records the grader itself made (owned by it, writable by no one else),
  never a uid or pid read from a name in /tmp.

Where it may run: in a container that holds one submission (the Gradescope and PrairieLearn doors, which opt in
with COURSE_JAIL=auto), or where the instructor asks for it (`course grade --jail-without-namespaces`); never as
a silent fallback on an instructor's machine (autograder.jail.bwrap.jail_kind).

What it does not give that bubblewrap does: it sees the host's process list and /proc/net (no pid or network
namespace: it cannot connect, ptrace or read other users' /proc/<pid>/environ), and every file readable by
"other" (system files, world-readable folders); it may write to world-writable folders while it runs (removed
with it) and its disk writes are bounded only per file (RLIMIT_FSIZE), not by a tmpfs.
"""
from __future__ import annotations

import os
import pwd
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from autograder.course_manifest import COURSE_YML, REPO_ROOT

if TYPE_CHECKING:
    from autograder.jail.bwrap import Jail, JailLimits, _Cgroups

UID_RANGE = range(61000, 65000)   # Debian's 60000-64999 "globally allocated" block has no users by default; below
                                  # 65536, so the uids exist in a container whose user namespace maps 0-65535
STAGE_ROOT = "/tmp"
STAGE_PREFIX = "course-jail-uid-"
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")   # world-writable: what the jail's uid leaves here is removed


def _tool(name: str) -> str:
    from autograder.jail.bwrap import _tool as tool

    return tool(name)


# ------------------------------------------------------------------------------------ what "other" may read

def other_can_reach(path: str | Path) -> bool:
    """Whether a uid with no group on the file (only "other" bits) can walk down to `path`."""
    p = Path(os.path.abspath(path))
    for parent in reversed(p.parents):
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def other_can_read(path: str | Path) -> bool:
    """Whether such a uid can read `path` (a file), or list or enter it (a folder, where a known name below it
    could then be opened). Symbolic links are judged where they lead."""
    if not other_can_reach(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISDIR(mode):
        return bool(mode & (stat.S_IROTH | stat.S_IXOTH))
    return bool(mode & stat.S_IROTH)


def secrets() -> list[Path]:
    """The grader's files a jailed uid must not read, those that exist: solutions/, the grader's own package
    (checks, keys) wherever it was imported from, the instructor's course.yml, the gradebook, grades/."""
    import autograder

    paths = [REPO_ROOT / "solutions", Path(autograder.__file__).resolve().parent, COURSE_YML,
             REPO_ROOT / "gradebook.db", REPO_ROOT / "grades", REPO_ROOT / "submitted"]
    return [p for p in paths if p.exists()]


def _within(path: Path, tops: list[Path]) -> bool:
    return any(path == t or path.is_relative_to(t) for t in tops)


def _walk_exposed(top: Path, allowed: list[Path], found: list[str]) -> None:
    """Everything under `top` that "other" can read, topmost first (what lies below one is not listed again),
    except `allowed` and what lies below them; the folders above an allowed path are entered and their entries
    judged one by one. Links are judged where they lead when that is under `top`, else left to the walk of
    where they lead (a link to a system file is no grader's file)."""
    stack = [top]
    while stack:
        path = stack.pop()
        if _within(path, allowed):
            continue
        if path.is_symlink():
            target = Path(os.path.realpath(path))
            if target.is_relative_to(top) and not _within(target, allowed) and other_can_read(target) \
                    and other_can_reach(path.parent):
                found.append(str(path))
            continue
        if any(a.is_relative_to(path) for a in allowed):   # the way down to the jail's Python: look inside
            try:
                stack.extend(sorted((Path(e.path) for e in os.scandir(path)), reverse=True))
            except OSError:
                pass
            continue
        if other_can_read(path):
            found.append(str(path))


def exposed() -> list[str]:
    """The grader's files the jail's uid could read, found by walking: everything in the checkout (its .git,
    solutions/, grades, anything an instructor left there) but the jail's Python environment, the grader's
    package wherever it was imported from, the other secrets() outside the checkout, and, in the Python
    environment, any package of the checkout's own but the student helpers (a non-editable install of the grader)."""
    from autograder.jail.session import helpers_dir

    allowed = [Path(p) for p in python_paths()]
    found: list[str] = []
    if other_can_reach(REPO_ROOT):
        _walk_exposed(REPO_ROOT, allowed, found)
    for path in secrets():
        if not path.resolve().is_relative_to(REPO_ROOT):
            _walk_exposed(path.resolve(), [], found)
    ours = {d.name for d in REPO_ROOT.iterdir() if (d / "__init__.py").is_file()} - {helpers_dir().name}
    for site in {p for p in sys.path if p and os.path.isdir(p) and _within(Path(p).resolve(), allowed)}:
        for name in ours:
            installed = Path(site) / name
            if installed.exists() and not installed.resolve().is_relative_to(REPO_ROOT):
                _walk_exposed(installed.resolve(), [], found)
    return list(dict.fromkeys(found))


def python_paths() -> list[str]:
    """What the jail's Python needs to read: the interpreter and its environment (jail.python_binds)."""
    from autograder.jail.bwrap import python_binds

    return sorted({*python_binds(), os.path.realpath(sys.executable)})


def problem() -> str | None:
    """None when a jail without namespaces can run here; else one line saying why not and what to change."""
    from autograder.jail import syscall_filter

    if sys.platform != "linux":
        return f"it needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "it runs student code as a uid of its own, which needs the grader to run as root"
    missing = [tool for tool in ("setpriv", "prlimit") if shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if missing:
        return f"{', '.join(missing)} (util-linux) missing"
    if syscall_filter.fallback_filter() is None:
        return "no seccomp filter for this machine's ABI (sockets would stay open)"
    readable = exposed()
    if readable:
        shown = " ".join(readable[:6]) + (f" and {len(readable) - 6} more" if len(readable) > 6 else "")
        return (f"the grader's files are readable by other users, so by the jail's uid: {shown} "
                f"(`chmod -R o= {' '.join(readable)}`; the Gradescope door's setup.sh does it)")
    unreachable = [p for p in python_paths() if not other_can_read(p)]
    if unreachable:
        return (f"the jail's Python is not readable by other users: {', '.join(unreachable)} (install the "
                "course's Python where others may read it, as the Gradescope door's setup.sh does)")
    return None


# ------------------------------------------------------------------------------------------- a jail's folder

def _started(pid: int) -> str:
    from autograder.jail.bwrap import _started as started

    return started(pid)


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


RECORD = "grader"   # in a jail's folder: "<grader pid> <its start time> <uid>", written by the grader, mode 600


def reserve() -> Stage:
    """An unused uid of UID_RANGE, reserved by making its folder (mkdir is atomic: one grader per uid). The
    folder is the grader's (root's, mode 711) and holds the grader's record of the uid it allotted."""
    rng = random.SystemRandom()
    for _ in range(200):
        uid = rng.choice(UID_RANGE)
        try:
            pwd.getpwuid(uid)
            continue        # a user of this system
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
            f.write(f"{os.getpid()} {_started(os.getpid())} {uid}\n")
        os.chmod(root, 0o711)   # the jail enters it (its own folders below), lists nothing
        return Stage(uid, root)
    raise OSError("no free uid for a jail in UID_RANGE")


def ours(path: Path | int) -> bool:
    """Whether `path` (or an open fd) was made by this grader's user and no one else can change it: owned by us,
    not a link, writable by neither group nor other. Anything a jail made fails this (it is another uid)."""
    try:
        st = os.fstat(path) if isinstance(path, int) else os.lstat(path)
    except OSError:
        return False
    return (st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode)
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _record(root: Path) -> tuple[int, str, int] | None:
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


def kill_orphans() -> int:
    """The jails of graders that died without cleaning up: their uids' processes killed, folders removed. Only
    folders the grader made and records it wrote count, and the uid is the record's, never a folder's name."""
    found = 0
    for root in Path(STAGE_ROOT).glob(f"{STAGE_PREFIX}*"):
        record = _record(root)
        if record is None:
            continue
        pid, started, uid = record
        if uid not in UID_RANGE or _started(pid) == started:
            continue   # not a jail's uid; or its grader is alive
        found += bool(uid_processes(uid))
        Stage(uid, root).remove()
    return found


def _copy_in(host: str, target: Path) -> None:
    """A read-only copy of `host` at `target`, readable by all (no compiled bytecode: the jail writes none)."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    if os.path.isdir(host):
        shutil.copytree(host, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        shutil.copy2(host, target)
    for dirpath, dirnames, filenames in os.walk(target):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, 0o644 | (0o111 if os.stat(p).st_mode & stat.S_IXUSR else 0))


def _rewrite(value: str, inside: list[str], stage: Stage) -> str:
    """An environment value naming a jail path (under /tmp, or at or above a bind's target) as the jail sees it."""
    parts = []
    for part in value.split(os.pathsep):
        hit = part.startswith("/") and part != "/" and (
            part == "/tmp" or part.startswith("/tmp/")
            or any(i == part or i.startswith(part + "/") or part.startswith(i + "/") for i in inside))
        parts.append(stage.path(part) if hit else part)
    return os.pathsep.join(parts)


def start(argv: list[str], *, binds: Sequence[str | tuple[str, str]], env: Mapping[str, str], limits: JailLimits,
          cwd: str, files: Mapping[str, bytes], cgroups: _Cgroups | None, note: str, wrapper: list[str],
          wrapper_env: dict[str, str], rlimits: list[str]) -> Jail:
    """jail.start()'s jail without namespaces (same arguments; `wrapper` joins the cgroups, `rlimits` is prlimit's
    command): binds with a target of their own and `files` are copied into the jail's folder, the others (the
    Python environment) must be readable by "other" (checked by problem())."""
    from autograder.jail import syscall_filter
    from autograder.jail.bwrap import Jail, SYSTEM_PATH

    stage = reserve()
    try:
        for sub in ("tmp", "tmp/home"):
            d = stage.root / sub
            d.mkdir(mode=0o700)
            os.chown(d, stage.uid, stage.uid)
        inside: list[str] = []
        for bind in binds:
            host, target = (bind, bind) if isinstance(bind, str) else bind
            if host == target:
                if not other_can_read(host):
                    raise OSError(f"{host} is not readable by the jail's uid")
                continue
            _copy_in(host, Path(stage.path(target)))
            inside.append(target)
        for target, data in files.items():
            p = Path(stage.path(target))
            p.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            if p.is_symlink():
                p.unlink()
            p.write_bytes(data)
            os.chmod(p, 0o644)
            inside.append(target)
        jail_env = {key: _rewrite(value, inside, stage) for key, value in
                    {"HOME": "/tmp/home", "TMPDIR": "/tmp", **env}.items()}
        program = syscall_filter.fallback_filter()
        assert program is not None   # problem() refused otherwise
        drop = [_tool("setpriv"), f"--reuid={stage.uid}", f"--regid={stage.uid}", "--clear-groups",
                "--no-new-privs", "--pdeathsig=KILL", "--", "/bin/sh", "-c",
                '[ "$PPID" = "$1" ] || exit 125; shift; exec "$@"', "course-jail", str(os.getpid())]
        cmd = [*wrapper, *rlimits, *drop, *syscall_filter.loader_argv(sys.executable, program, argv)]
        process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env={**jail_env, **wrapper_env, "PATH": jail_env.get("PATH", SYSTEM_PATH)},
                                   cwd=stage.path(cwd) if cwd.startswith("/tmp") else cwd,
                                   start_new_session=True)
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        stage.remove()
        raise
    return Jail(process, limits=limits, cgroups=cgroups, stage=None, jailed=True, note=note, kind="uid",
                uid_stage=stage)
