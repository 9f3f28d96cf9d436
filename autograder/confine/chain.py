"""The start-up chain every confined child goes through, written once.

One process, each step exec'ing the next, so the cgroups hold everything from the first step on:
`[unshare --mount] sh -c WRAPPER` joins the cgroups (and, for a jail, re-binds in a private mount namespace the
folders uid 65534 cannot reach) -> `prlimit` (the rlimits) -> `setpriv` (a root grader's child drops to its uid;
the parent-death signal is armed) -> the `sh` guard (stop if the grader died before that: no signal would ever
come) -> the command.

A child the judges' zygote forks goes through the same steps in process (`enter`), from the same rlimits table
(`rlimits`), so the two renderings cannot drift apart.
"""

from __future__ import annotations

import os
import shutil
from typing import Sequence

from autograder.confine.limits import ProcessLimits

NOBODY = 65534
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
CGROUPS_ENV = "COURSE_JAIL_CGROUPS"  # the WRAPPER's: the cgroup.procs files to join
STAGE_ENV = "COURSE_JAIL_STAGE"  # the WRAPPER's: where to re-bind the folders listed before "--"

# Runs as the grader's user before anything student-controlled: join the cgroups, then (in a private mount
# namespace made by `unshare --mount`) bind each folder uid 65534 cannot reach onto a tmpfs it can. The
# mounts live only in that namespace and vanish with the jail.
WRAPPER = r"""
set -eu
for procs in $COURSE_JAIL_CGROUPS; do echo $$ > "$procs"; done
if [ -n "${COURSE_JAIL_STAGE:-}" ]; then
  mount -t tmpfs -o mode=0755,size=64k course-jail-stage "$COURSE_JAIL_STAGE"
  i=0
  while [ "$1" != "--" ]; do
    if [ -d "$1" ]; then mkdir "$COURSE_JAIL_STAGE/$i"; else : > "$COURSE_JAIL_STAGE/$i"; fi
    mount --rbind "$1" "$COURSE_JAIL_STAGE/$i"
    i=$((i + 1))
    shift
  done
fi
shift
unset COURSE_JAIL_CGROUPS COURSE_JAIL_STAGE
exec "$@"
"""

# Runs after setpriv set the parent-death signal: if the grader died before that, stop here (PPID is no
# longer the grader), since no signal would ever come. bwrap re-arms the signal for its own processes.
GUARD = '[ "$PPID" = "$1" ] || exit 125; shift; exec "$@"'

# prlimit's option for each resource the chain sets
_PRLIMIT_FLAG = {"RLIMIT_CPU": "cpu", "RLIMIT_FSIZE": "fsize", "RLIMIT_CORE": "core", "RLIMIT_NPROC": "nproc"}


def tool(name: str) -> str:
    """A system tool by absolute path: the unjailed command's PATH is the student's to choose."""
    return shutil.which(name, path=SYSTEM_PATH) or name


def wrapper(tag: str, staged: Sequence[str] = ()) -> list[str]:
    """`sh -c WRAPPER`: joins the groups named in CGROUPS_ENV, re-binds `staged` (with STAGE_ENV), then runs
    what follows its "--"."""
    return ["/bin/sh", "-c", WRAPPER, tag, *staged, "--"]


def wrapper_env(procs_files: Sequence[str]) -> dict[str, str]:
    return {CGROUPS_ENV: " ".join(procs_files)}


def rlimits(limits: ProcessLimits, *, cgroups: bool) -> list[tuple[str, int, int]]:
    """(resource, soft, hard) for every rlimit a child gets: CPU seconds (SIGXCPU, then SIGKILL 2 s later), file
    size, no core; and where no pids cgroup counts its processes, RLIMIT_NPROC (per real uid). Memory is the
    cgroup's or the watch's, never RLIMIT_AS (autograder.confine.memory says why)."""
    mb = 2**20
    table = [
        ("RLIMIT_CPU", limits.cpu_s, limits.cpu_s + 2),
        ("RLIMIT_FSIZE", limits.file_mb * mb, limits.file_mb * mb),
        ("RLIMIT_CORE", 0, 0),
    ]
    if not cgroups:
        table.append(("RLIMIT_NPROC", limits.pids, limits.pids))
    return table


def prlimit(limits: ProcessLimits, *, cgroups: bool) -> list[str]:
    """`prlimit ... --`: rlimits() as the chain's argv step."""
    args = [
        f"--{_PRLIMIT_FLAG[name]}={soft}" if soft == hard else f"--{_PRLIMIT_FLAG[name]}={soft}:{hard}"
        for name, soft, hard in rlimits(limits, cgroups=cgroups)
    ]
    return [tool("prlimit"), *args, "--"]


def guarded(uid: int | None = NOBODY, *, no_new_privs: bool = False) -> list[str]:
    """setpriv, then the guard: a root grader's child becomes `uid` on the host too (None: stays the grader's
    user), with no supplementary groups; every child gets SIGKILL when the grader (documented: its thread that
    started the child) ends."""
    drop = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None and os.geteuid() == 0 else []
    return [
        tool("setpriv"),
        *drop,
        *(["--no-new-privs"] if no_new_privs else []),
        "--pdeathsig=KILL",
        "--",
        "/bin/sh",
        "-c",
        GUARD,
        "course-jail",
        str(os.getpid()),
    ]


def enter(procs_files: Sequence[str], limits: Sequence[tuple[str, int, int] | list], parent: int) -> None:
    """The chain in this process (a child forked by the judges' zygote, after its setsid): join the groups, set
    the rlimits (`rlimits()`' table), arm the parent-death signal, then stop (exit 125) if `parent` is already gone."""
    import ctypes
    import resource
    import signal

    for procs in procs_files:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    for name, soft, hard in limits:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the parent (and so the grader) died before the signal was armed
        os._exit(125)
