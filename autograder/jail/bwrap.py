"""Bubblewrap's jail: the jail student code runs in wherever bubblewrap can start one (autograder.jail.jails
says which jail; this module makes this one).

The jail is Debian's bubblewrap (`bwrap`) plus one cgroup v1 group per jail and controller:

- user, pid, net, ipc, uts (and cgroup) namespaces; uid/gid 65534 inside *and* on the host (a root grader
  switches to 65534 before bwrap, so a file the jail could reach by accident is judged by "other" bits);
  where the cgroups are not writable, a uid of its own on the host instead (autograder.confine.uids.reserve: unused,
  owning nothing, so "other" bits still judge), so that the rlimit on processes, counted per uid, is each jail's
  own: 65534 shared by every jail let one notebook's processes starve the jail started beside it of threads;
  no capabilities; no nested user namespaces; a new session; it dies with the grader (die-with-parent);
- a file system made of a read-only /usr (and the /bin, /lib* links), its own /proc (only the jail's
  processes), a minimal /dev, a size-limited tmpfs at /tmp (HOME=/tmp/home) and another at /dev/shm, then
  (mounted after those, so a Python or a checkout under /tmp is not hidden by the jail's own /tmp: bwrap
  applies its arguments in order) read-only binds of what the caller names (`python_binds()` plus course
  helpers) and small read-only files passed as data (`files`: no temporary file on the host); "/" and /dev
  themselves are read-only. Nothing of /etc, /root, /home, /work, /sys or the repository unless bound;
- memory (anonymous, shared and tmpfs pages together, no swap) and processes/threads capped by the
  `memory` and `pids` cgroups; a fair share of the CPU and at most `cpus` CPUs by the `cpu` cgroup (so
  one jail's spinning processes cannot starve a neighbour graded beside it); CPU seconds and file size by
  rlimits (per process), no core files;
- a seccomp filter denying the kernel keyring (Linux has no keyring namespace) and memory no process maps
  (memfd_create, System V IPC: autograder.jail.syscall_filter).

Start-up chain (one process, each step exec'ing the next, so the cgroups hold everything from bwrap on):
(autograder.confine.chain) `[unshare --mount] sh -c WRAPPER` joins the cgroups (and, only when a bind source sits below a folder uid
65534 cannot enter, such as /root/.pyenv below /root, re-binds it in a private mount namespace onto a
tmpfs bwrap can reach) -> `prlimit` -> `setpriv` (root: drop to 65534; arm the parent-death signal) ->
`sh` guard (stop if the grader died before that) -> `bwrap` -> the command.

For the caller:
- Drain and cap the pipes. A jail that writes to stdout/stderr blocks when a pipe is full, and it can
  write without end: read with a cap, never `communicate()` it unbounded.
- Call start() from a thread that outlives the jail (the main thread, or a pool thread that stays): Linux
  documents the parent-death signal as following the *thread* that started the process (on the 6.18
  kernel here a jail outlived its starting thread, but do not rely on it).
- The jail's command should exit when its stdin reaches EOF: if the grader dies in bwrap's first
  milliseconds (before bwrap re-arms the signal for its own processes), that EOF is the only news it gets.
  autograder.confine.orphans.kill_orphans() (called by every start()) kills such a jail and removes a dead
  grader's cgroups.
- Leave the jail with kill() or a `with` block, also after a normal exit: that frees its cgroups.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

from autograder.confine import chain, uids
from autograder.confine.cgroups import Cgroups
from autograder.confine.chain import NOBODY, SYSTEM_PATH
from autograder.confine.orphans import STAGE_DIR
from autograder.confine.paths import other_can_reach
from autograder.jail import syscall_filter
from autograder.jail.handle import Jail, JailLimits


def _bwrap_flags() -> list[str]:
    return [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--cap-drop",
        "ALL",
    ]


@lru_cache(maxsize=4)
def _probe(bwrap: str, euid: int) -> str | None:
    """Run a trivial jail once: user namespaces can be off (sysctl, AppArmor) even where bwrap exists."""
    del euid  # part of the cache key: dropping to 65534 needs root
    missing = [tool for tool in ("setpriv", "prlimit", "unshare") if not shutil.which(tool, path=SYSTEM_PATH)]
    if missing:
        return f"{', '.join(missing)} (util-linux) missing"
    cmd = [
        *chain.guarded(),
        bwrap,
        *_bwrap_flags(),
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        "/bin/true",
    ]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env={"PATH": SYSTEM_PATH})
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap could not run: {e}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap cannot make a jail here: {(why[-1] if why else f'exit {done.returncode}')[:200]}"
    return None


def bwrap_problem() -> str | None:
    """None when bubblewrap can make a jail here; else one line saying why not."""
    if sys.platform != "linux":
        return f"jails need Linux namespaces (this is {sys.platform})"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (`apt-get install bubblewrap`)"
    try:
        if int(Path("/proc/sys/user/max_user_namespaces").read_text()) == 0:
            return "user namespaces are off (sysctl user.max_user_namespaces = 0)"
    except (OSError, ValueError):
        pass
    return _probe(bwrap, os.geteuid())


def _system_binds() -> list[str]:
    """/usr and the merged-/usr links (/bin, /lib, ...) or, on older systems, those folders themselves."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def _bwrap_args(
    binds: Sequence[str | tuple[str, str]],
    env: Mapping[str, str],
    limits: JailLimits,
    cwd: str,
    staged: dict[str, str],
    files: Mapping[str, int],
    seccomp: int | None,
) -> list[str]:
    tmpfs = str(limits.tmpfs_mb * 2**20)
    # The mounts that cover whole folders first, the binds into them after: bwrap applies its arguments in
    # order, and a bind under /tmp placed before `--tmpfs /tmp` would be hidden by it.
    args = [
        shutil.which("bwrap") or "bwrap",
        *_bwrap_flags(),
        *_system_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        tmpfs,
        "--tmpfs",
        "/dev/shm",
        "--size",
        tmpfs,
        "--tmpfs",
        "/tmp",
        "--dir",
        "/tmp/home",
    ]
    for bind in binds:
        host, inside = (bind, bind) if isinstance(bind, str) else bind
        args += ["--ro-bind", staged.get(host, host), inside]
    for inside, fd in files.items():
        args += ["--ro-bind-data", str(fd), inside]
    if seccomp is not None:
        args += ["--seccomp", str(seccomp)]
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", cwd, "--clearenv"]
    for key, value in {"HOME": "/tmp/home", "TMPDIR": "/tmp", **env}.items():
        args += ["--setenv", key, value]
    return [*args, "--"]


def _data_fd(data: bytes, name: str) -> int:
    """An in-memory file holding `data`, read from the start by bwrap (nothing written to the disk)."""
    fd = os.memfd_create(name, 0)  # inheritable: it travels through sh, prlimit and setpriv to bwrap
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def start(
    argv: list[str],
    *,
    binds: Sequence[str | tuple[str, str]],
    env: Mapping[str, str],
    limits: JailLimits,
    cwd: str,
    files: Mapping[str, bytes],
    name: str,
    cgroups: Cgroups | None,
    note: str,
) -> Jail:
    """autograder.jail.jails.start()'s bubblewrap jail (same arguments; `name` is the jail's cgroups' name, which
    also prefixes its staging folder, `cgroups` its groups or None). A bind source uid 65534 cannot reach (a
    folder below /root, for a root grader) is re-bound where it can, in a mount namespace of the jail's own."""
    wrapper_env = chain.wrapper_env(cgroups.procs_files() if cgroups else [])
    staged: dict[str, str] = {}
    stage: str | None = None
    hosts = [b if isinstance(b, str) else b[0] for b in binds]
    unreachable = sorted({h for h in hosts if os.geteuid() == 0 and not other_can_reach(h)})
    prefix = chain.wrapper("course-jail")
    if unreachable:
        stage = tempfile.mkdtemp(prefix=name + "-", dir=STAGE_DIR)
        staged = {h: f"{stage}/{i}" for i, h in enumerate(unreachable)}
        wrapper_env[chain.STAGE_ENV] = stage
        prefix = [
            chain.tool("unshare"),
            "--mount",
            "--propagation",
            "private",
            *chain.wrapper("course-jail", unreachable),
        ]
    file_fds = {inside: _data_fd(data, "course-jail-file") for inside, data in files.items()}
    program = syscall_filter.bwrap_filter()
    seccomp = _data_fd(program, "course-jail-seccomp") if program is not None else None
    fds = [*file_fds.values(), *([seccomp] if seccomp is not None else [])]
    own_uid: uids.Stage | None = None
    try:
        if cgroups is None and os.geteuid() == 0:
            # processes are then bounded by RLIMIT_NPROC, which counts per real uid: a uid of the jail's own
            own_uid = uids.reserve()
        cmd = [
            *prefix,
            *chain.prlimit(limits, cgroups=cgroups is not None),
            *chain.guarded(NOBODY if own_uid is None else own_uid.uid),
            *_bwrap_args(binds, env, limits, cwd, staged, file_fds, seccomp),
            *argv,
        ]
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": SYSTEM_PATH, **wrapper_env},
            cwd="/",
            start_new_session=True,
            pass_fds=fds,
        )
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        if stage is not None:
            os.rmdir(stage)
        if own_uid is not None:
            own_uid.remove()
        raise
    finally:
        for fd in fds:  # the child has its copies; bwrap reads them before running the command
            os.close(fd)
    # without a memory cgroup, what the jail keeps in its two tmpfs mounts is counted by the watch as the cgroup
    # would count it
    return Jail(
        process,
        limits=limits,
        cgroups=cgroups,
        stage=stage,
        jailed=True,
        note=note,
        own_uid=own_uid,
        tmpfs=("/tmp", "/dev/shm") if cgroups is None else (),
    )
