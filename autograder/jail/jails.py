"""Which jail student code runs in here, and the one door to it: `start()`.

- bubblewrap's (autograder.jail.bwrap) wherever it can start one;
- the jail without namespaces (autograder.jail.uid), only where asked for (COURSE_JAIL=auto: the platform doors, in
  a container that holds one submission; `course grade --jail-without-namespaces`; COURSE_JAIL=uid);
- a plain process with the same limits (`--no-jail`, the instructor's explicit choice: jailed=False).

Every start sweeps what dead graders left (autograder.confine.orphans) and gives the jail its cgroups where they
are writable (autograder.confine.cgroups), else its memory is watched (autograder.confine.memory).

For the caller:
- Drain and cap the pipes (autograder.confine.child.Tail). A jail that writes to stdout/stderr blocks when a pipe
  is full, and it can write without end: read with a cap, never `communicate()` it unbounded.
- Call start() from a thread that outlives the jail (the main thread, or a pool thread that stays): Linux
  documents the parent-death signal as following the *thread* that started the process.
- The jail's command should exit when its stdin reaches EOF: if the grader dies in the jail's first milliseconds
  (before the signal is armed), that EOF is the only news it gets; the next start's sweep kills such a jail.
- Leave the jail with kill() or a `with` block, also after a normal exit: that frees its cgroups.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from typing import Mapping, Sequence

from autograder.confine import chain, grader, memory
from autograder.confine.cgroups import CGROUP_PREFIX, NO_CGROUPS_ENV, Cgroups, cpu_writable, writable
from autograder.confine.orphans import kill_orphans
from autograder.jail import bwrap, uid
from autograder.jail.handle import BWRAP, UID, Jail, JailLimits

KIND_ENV = "COURSE_JAIL"  # which jail: see jail_kind
AUTO = "auto"  # COURSE_JAIL=auto: bubblewrap, else the jail without namespaces (opted in)
UID_FLAG = "--jail-without-namespaces"  # `course grade`'s opt-in (sets COURSE_JAIL=auto)
NO_JAIL_LOSES = (
    "`--no-jail` runs student code as a plain process with the same limits but no namespaces: "
    "it can then read what the grading user can, see its processes and use the network"
)


class JailUnavailable(RuntimeError):
    """No jail can be made on this machine; the message says why and what `--no-jail` gives up."""


def jail_kind() -> str | None:
    """Which jail start() makes here: BWRAP where bubblewrap can start one; UID (autograder.jail.uid, no
    namespaces) only where asked for: COURSE_JAIL=auto (the platform doors, in a container that holds one
    submission, where Docker's default seccomp profile denies new namespaces; `course grade
    --jail-without-namespaces`) where bubblewrap cannot and the jail without namespaces can, COURSE_JAIL=uid even
    where bubblewrap works. None otherwise: never a silent fall-back on an instructor's machine."""
    choice = os.environ.get(KIND_ENV, "")
    if choice == UID:
        return UID if uid.problem() is None else None
    if bwrap.bwrap_problem() is None:
        return BWRAP
    if choice == AUTO and uid.problem() is None:
        return UID
    return None


def jail_problem() -> str | None:
    """None when a jail (bubblewrap, or the jail without namespaces) can be made here; else one line saying
    why not."""
    if jail_kind() is not None:
        return None
    choice = os.environ.get(KIND_ENV, "")
    if choice == UID:
        return f"the jail without namespaces cannot run: {uid.problem()}"
    problem = bwrap.bwrap_problem()
    if choice == AUTO:
        return f"{problem}; nor the jail without namespaces: {uid.problem()}"
    if sys.platform != "linux" or shutil.which("bwrap") is None:
        return problem  # install bubblewrap: the answer on an instructor's machine
    return (
        f"{problem}; the jail without namespaces (a uid of its own, no pid or network namespace: "
        f"docs/grader.md) is made for a container that holds one submission and runs only when asked for "
        f"(`course grade {UID_FLAG}`, COURSE_JAIL=auto)"
    )


def require_jail() -> None:
    """Raise JailUnavailable, in one line naming --no-jail and what it loses, where no jail can be made."""
    problem = jail_problem()
    if problem is not None:
        raise JailUnavailable(f"cannot jail student code: {problem}; {NO_JAIL_LOSES}")


def limits_note() -> str:
    """One line for reports: how the limits are enforced on this machine."""
    if writable():
        cpu = "a fair share of the CPU (at most 1 CPU)" if cpu_writable() else "no CPU share (no cpu cgroup here)"
        return (
            "limits: memory (shared memory and tmpfs included), processes and "
            f"{cpu} per jail by cgroups; CPU time and file size per process by rlimits"
        )
    why = f"{NO_CGROUPS_ENV}=1" if os.environ.get(NO_CGROUPS_ENV) == "1" else "no cgroup permission here"
    # counted per real uid: each jail's own uid where the grader is root (start()), else the grader's user's
    procs = "a uid of each jail's own" if os.geteuid() == 0 else "the grader's user (shared by all its jails)"
    return (
        f"limits: {why}, so memory per jail by a watch of its processes' resident memory "
        "(autograder.confine.memory: used, not reserved, as the cgroup counts; checked every "
        f"{memory.INTERVAL_S:g} s), processes by the rlimit of {procs}, CPU time and file "
        "size per process by rlimits"
    )


def start(
    argv: list[str],
    *,
    binds: Sequence[str | tuple[str, str]],
    env: Mapping[str, str],
    limits: JailLimits,
    cwd: str = "/tmp",
    jailed: bool = True,
    files: Mapping[str, bytes] | None = None,
) -> Jail:
    """Start argv inside a fresh jail with stdin/stdout/stderr as binary pipes.

    `binds`: host paths bound read-only into the jail at the same path, or (host, jail_path) pairs. `files`:
    {jail path: bytes}, read-only files made from data (bound after `binds`, so one may cover a file of a
    bound folder); not available with jailed=False, which binds nothing. `env` is
    the jail's whole environment (HOME and TMPDIR default to the tmpfs). jailed=False (the instructor's
    explicit --no-jail only): a plain subprocess with the same env and limits (cgroups and rlimits) in a
    new session, without namespaces or binds; `cwd` is then a host folder.

    Call it from a thread that outlives the jail (the parent-death signal may follow the thread). Raises
    JailUnavailable (jailed=True) where jail_problem() says no jail can be made."""
    kind = jail_kind() if jailed else None
    if jailed:
        require_jail()
    kill_orphans()
    name = f"{CGROUP_PREFIX}{grader.tag()}-{secrets.token_hex(4)}"
    cgroups: Cgroups | None = None
    note = limits_note()
    if writable():
        try:
            cgroups = Cgroups(name, limits)
        except OSError as e:
            note = f"limits: this jail's cgroups could not be made ({e.strerror}), so rlimits only"
    if kind == UID:
        return uid.start(
            argv, binds=binds, env=env, limits=limits, cwd=cwd, files=files or {}, cgroups=cgroups, note=note
        )
    if jailed:
        return bwrap.start(
            argv, binds=binds, env=env, limits=limits, cwd=cwd, files=files or {}, name=name, cgroups=cgroups, note=note
        )
    cmd = [
        *chain.wrapper("course-jail"),
        *chain.prlimit(limits, cgroups=cgroups is not None),
        *chain.guarded(None),
        *argv,
    ]
    try:  # the wrapper unsets its own variables
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**env, **chain.wrapper_env(cgroups.procs_files() if cgroups else [])},
            cwd=cwd,
            start_new_session=True,
        )
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        raise
    return Jail(process, limits=limits, cgroups=cgroups, stage=None, jailed=False, note=note)
