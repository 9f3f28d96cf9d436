"""The jail without namespaces: where bubblewrap cannot start (Docker's default seccomp profile denies new
namespaces to a container without CAP_SYS_ADMIN, as on Gradescope and PrairieLearn), student code runs as a
uid of its own instead, needing nothing but root (the uid's bookkeeping is autograder.confine.uids):

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
  (autograder.confine.memory: its uid's processes, counted by thread group) and the rlimit on processes of its
  uid; CPU time and file size by rlimits always;
- a seccomp filter (autograder.jail.syscall_filter.fallback_filter): no sockets (the agent talks over its pipes),
  io_uring, ptrace, process_vm_*, namespaces, mounts, bpf, perf_event_open, userfaultfd, the keyring;
- the results are the grader's: the jail writes nothing but its pipes and its own folder (Landlock, where the kernel
  has it: no file made or changed anywhere else, /tmp, /var/tmp and /dev/shm included; root-owned folders are not
  writable to it anyway), and everything its uid runs, or left in the shared temporary folders or as System V
  objects, goes with the jail;
- nothing its uid can write is read by the grader as an instruction: a jail's processes are found by their real
  uid (which an unprivileged process cannot change) and signalled one by one through a pidfd, never by kill(-1);
  the orphan sweep trusts only folders and records the grader itself made (owned by it, writable by no one else),
  never a uid or pid read from a name in /tmp.

Where it may run: in a container that holds one submission (the Gradescope and PrairieLearn doors, which opt in
with COURSE_JAIL=auto), or where the instructor asks for it (`course grade --jail-without-namespaces`); never as
a silent fallback on an instructor's machine (autograder.jail.jails.jail_kind).

What it does not give that bubblewrap does: it sees the host's process list and /proc/net (no pid or network
namespace: it cannot connect, ptrace or read other users' /proc/<pid>/environ), and every file readable by
"other" (system files, world-readable folders); it may write to world-writable folders while it runs (removed
with it) and its disk writes are bounded only per file (RLIMIT_FSIZE), not by a tmpfs.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Sequence

from autograder.confine import chain, memory, uids
from autograder.confine.cgroups import Cgroups
from autograder.confine.chain import SYSTEM_PATH
from autograder.confine.paths import other_can_reach, other_can_read
from autograder.course_manifest import COURSE_YML, REPO_ROOT
from autograder.jail import syscall_filter
from autograder.jail.agent_env import helpers_dir, python_binds
from autograder.jail.handle import UID, Jail, JailLimits


def secrets() -> list[Path]:
    """The grader's files a jailed uid must not read, those that exist: solutions/, the grader's own package
    (checks, keys) wherever it was imported from, the instructor's course.yml, the gradebook, grades/."""
    import autograder

    paths = [
        REPO_ROOT / "solutions",
        Path(autograder.__file__).resolve().parent,
        COURSE_YML,
        REPO_ROOT / "gradebook.db",
        REPO_ROOT / "grades",
        REPO_ROOT / "submitted",
    ]
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
            if (
                target.is_relative_to(top)
                and not _within(target, allowed)
                and other_can_read(target)
                and other_can_reach(path.parent)
            ):
                found.append(str(path))
            continue
        if any(a.is_relative_to(path) for a in allowed):  # the way down to the jail's Python: look inside
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
    """What the jail's Python needs to read: the interpreter and its environment (agent_env.python_binds)."""
    return sorted({*python_binds(), os.path.realpath(sys.executable)})


def problem() -> str | None:
    """None when a jail without namespaces can run here; else one line saying why not and what to change."""
    if sys.platform != "linux":
        return f"it needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return "it runs student code as a uid of its own, which needs the grader to run as root"
    missing = [tool for tool in ("setpriv", "prlimit") if shutil.which(tool, path=SYSTEM_PATH) is None]
    if missing:
        return f"{', '.join(missing)} (util-linux) missing"
    if syscall_filter.fallback_filter() is None:
        return "no seccomp filter for this machine's ABI (sockets would stay open)"
    readable = exposed()
    if readable:
        shown = " ".join(readable[:6]) + (f" and {len(readable) - 6} more" if len(readable) > 6 else "")
        return (
            f"the grader's files are readable by other users, so by the jail's uid: {shown} "
            f"(`chmod -R o= {' '.join(readable)}`; the Gradescope door's setup.sh does it)"
        )
    unreachable = [p for p in python_paths() if not other_can_read(p)]
    if unreachable:
        return (
            f"the jail's Python is not readable by other users: {', '.join(unreachable)} (install the "
            "course's Python where others may read it, as the Gradescope door's setup.sh does)"
        )
    return None


# ------------------------------------------------------------------------------------------- a jail's folder


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


def _rewrite(value: str, inside: list[str], stage: uids.Stage) -> str:
    """An environment value naming a jail path (under /tmp, or at or above a bind's target) as the jail sees it."""
    parts = []
    for part in value.split(os.pathsep):
        hit = (
            part.startswith("/")
            and part != "/"
            and (
                part == "/tmp"
                or part.startswith("/tmp/")
                or any(i == part or i.startswith(part + "/") or part.startswith(i + "/") for i in inside)
            )
        )
        parts.append(stage.path(part) if hit else part)
    return os.pathsep.join(parts)


def start(
    argv: list[str],
    *,
    binds: Sequence[str | tuple[str, str]],
    env: Mapping[str, str],
    limits: JailLimits,
    cwd: str,
    files: Mapping[str, bytes],
    cgroups: Cgroups | None,
    note: str,
) -> Jail:
    """autograder.jail.jails.start()'s jail without namespaces (same arguments; `cgroups` its groups or None): binds
    with a target of their own and `files` are copied into the jail's folder, the others (the Python environment)
    must be readable by "other" (checked by problem())."""
    stage = uids.reserve()
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
        jail_env = {
            key: _rewrite(value, inside, stage) for key, value in {"HOME": "/tmp/home", "TMPDIR": "/tmp", **env}.items()
        }
        # Where Landlock is there, the jail makes and changes files in its own folder alone (on disk, not in a tmpfs):
        # nothing in /tmp, /var/tmp or /dev/shm, so no memory outside its processes for the watch to walk (issue 42).
        # Where it is not, the watch walks what its uid keeps in /dev/shm (docs/grader.md, "Not defended").
        writable = str(stage.root) if syscall_filter.landlock_abi() >= 1 else None
        shm = None if writable else (lambda: memory.shm_bytes(stage.uid))
        program = syscall_filter.fallback_filter()
        assert program is not None  # problem() refused otherwise
        cmd = [
            *chain.wrapper("course-jail"),
            *chain.prlimit(limits, cgroups=cgroups is not None),
            *chain.guarded(stage.uid, no_new_privs=True),
            *syscall_filter.loader_argv(sys.executable, program, argv, writable=writable),
        ]
        wrapper_env = chain.wrapper_env(cgroups.procs_files() if cgroups else [])
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**jail_env, **wrapper_env, "PATH": jail_env.get("PATH", SYSTEM_PATH)},
            cwd=stage.path(cwd) if cwd.startswith("/tmp") else cwd,
            start_new_session=True,
        )
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        stage.remove()
        raise
    return Jail(
        process,
        limits=limits,
        cgroups=cgroups,
        stage=None,
        jailed=True,
        note=note,
        kind=UID,
        uid_stage=stage,
        extra_bytes=shm if cgroups is None else None,
    )
