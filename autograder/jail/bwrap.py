"""Start a command inside a jail: the only place student code runs.

The jail is Debian's bubblewrap (`bwrap`) plus one cgroup v1 group per jail and controller:

- user, pid, net, ipc, uts (and cgroup) namespaces; uid/gid 65534 inside *and* on the host (a root grader
  switches to 65534 before bwrap, so a file the jail could reach by accident is judged by "other" bits);
  where the cgroups are not writable, a uid of its own on the host instead (autograder.jail.uid.reserve: unused,
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
- a seccomp filter denying the kernel keyring (autograder.jail.syscall_filter: Linux has no keyring namespace).

Start-up chain (one process, each step exec'ing the next, so the cgroups hold everything from bwrap on):
`[unshare --mount] sh -c WRAPPER` joins the cgroups (and, only when a bind source sits below a folder uid
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
  kill_orphans() (called by every start()) kills such a jail and removes a dead grader's cgroups.
- Leave the jail with kill() or a `with` block, also after a normal exit: that frees its cgroups.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from autograder.jail import memory, syscall_filter
from autograder.course_manifest import REPO_ROOT

if TYPE_CHECKING:
    from autograder.jail import uid as jail_uid

NOBODY = 65534
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "course-jail-"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
STAGE_DIR = "/tmp"   # mount points for re-bound folders (covered by a tmpfs in the jail's own namespace)
BWRAP, UID = "bubblewrap", "uid"   # the two jails (jail_kind)
KIND_ENV = "COURSE_JAIL"           # which jail: see jail_kind
AUTO = "auto"                      # COURSE_JAIL=auto: bubblewrap, else the jail without namespaces (opted in)
UID_FLAG = "--jail-without-namespaces"   # `course grade`'s opt-in (sets COURSE_JAIL=auto)
NO_JAIL_LOSES = ("`--no-jail` runs student code as a plain process with the same limits but no namespaces: "
                 "it can then read what the grading user can, see its processes and use the network")

# Runs as the grader's user before anything student-controlled: join the cgroups, then (in a private mount
# namespace made by `unshare --mount`) bind each folder uid 65534 cannot reach onto a tmpfs it can. The
# mounts live only in that namespace and vanish with the jail.
_WRAPPER = r"""
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


@dataclass(frozen=True)
class JailLimits:
    """What one jail may use, all of it together (cgroups), or per process where only rlimits apply."""

    memory_mb: int = 4096      # RAM of everything in the jail, shared memory and tmpfs included (cgroup)
    pids: int = 256            # processes and threads (cgroup pids.max): a fork bomb stops here
    cpu_s: int = 1200          # CPU seconds per process (RLIMIT_CPU: SIGXCPU, then SIGKILL 2 s later)
    file_mb: int = 256         # largest single file (RLIMIT_FSIZE)
    tmpfs_mb: int = 512        # size of the writable scratch tmpfs (/tmp in the jail; HOME lives there too)
    cpus: float = 1.0          # CPUs the whole jail may use at once (cgroup cpu quota; a notebook runs on one
                               # thread: see autograder.jail.session's XLA flags), with an equal share under contention

    def __post_init__(self) -> None:
        for name in ("memory_mb", "pids", "cpu_s", "file_mb", "tmpfs_mb", "cpus"):
            if getattr(self, name) <= 0:
                raise ValueError(f"JailLimits.{name}={getattr(self, name)} should be > 0")


class JailUnavailable(RuntimeError):
    """No jail can be made on this machine; the message says why and what `--no-jail` gives up."""


# ------------------------------------------------------------------------------------------- what exists

def _bwrap_flags() -> list[str]:
    return ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--new-session",
            "--uid", str(NOBODY), "--gid", str(NOBODY), "--cap-drop", "ALL"]


def _tool(name: str) -> str:
    """A system tool by absolute path: the unjailed command's PATH is the student's to choose."""
    return shutil.which(name, path=SYSTEM_PATH) or name


# Runs after setpriv set the parent-death signal: if the grader died before that, stop here (PPID is no
# longer the grader), since no signal would ever come. bwrap re-arms the signal for its own processes.
_GUARD = '[ "$PPID" = "$1" ] || exit 125; shift; exec "$@"'


def _guarded(*, drop_root: bool = True, uid: int = NOBODY) -> list[str]:
    """setpriv: a root grader's jail becomes `uid` on the host too (65534, or the jail's own: start()), with no
    supplementary groups; every jail gets SIGKILL when the grader (documented: its thread that started the jail)
    ends."""
    drop = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if drop_root and os.geteuid() == 0 else []
    return [_tool("setpriv"), *drop, "--pdeathsig=KILL", "--", "/bin/sh", "-c", _GUARD, "course-jail",
            str(os.getpid())]


@lru_cache(maxsize=4)
def _probe(bwrap: str, euid: int) -> str | None:
    """Run a trivial jail once: user namespaces can be off (sysctl, AppArmor) even where bwrap exists."""
    del euid   # part of the cache key: dropping to 65534 needs root
    missing = [tool for tool in ("setpriv", "prlimit", "unshare") if not shutil.which(tool, path=SYSTEM_PATH)]
    if missing:
        return f"{', '.join(missing)} (util-linux) missing"
    cmd = [*_guarded(), bwrap, *_bwrap_flags(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
           "--", "/bin/true"]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                              env={"PATH": SYSTEM_PATH})
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


def jail_kind() -> str | None:
    """Which jail start() makes here: BWRAP where bubblewrap can start one; UID (autograder.jail.uid, no
    namespaces) only where asked for: COURSE_JAIL=auto (the platform doors, in a container that holds one
    submission, where Docker's default seccomp profile denies new namespaces; `course grade
    --jail-without-namespaces`) where bubblewrap cannot and the jail without namespaces can, COURSE_JAIL=uid even
    where bubblewrap works. None otherwise: never a silent fall-back on an instructor's machine."""
    from autograder.jail import uid as jail_uid

    choice = os.environ.get(KIND_ENV, "")
    if choice == UID:
        return UID if jail_uid.problem() is None else None
    if bwrap_problem() is None:
        return BWRAP
    if choice == AUTO and jail_uid.problem() is None:
        return UID
    return None


def jail_problem() -> str | None:
    """None when a jail (bubblewrap, or the jail without namespaces) can be made here; else one line saying
    why not."""
    from autograder.jail import uid as jail_uid

    if jail_kind() is not None:
        return None
    choice = os.environ.get(KIND_ENV, "")
    if choice == UID:
        return f"the jail without namespaces cannot run: {jail_uid.problem()}"
    problem = bwrap_problem()
    if choice == AUTO:
        return f"{problem}; nor the jail without namespaces: {jail_uid.problem()}"
    if sys.platform != "linux" or shutil.which("bwrap") is None:
        return problem   # install bubblewrap: the answer on an instructor's machine
    return (f"{problem}; the jail without namespaces (a uid of its own, no pid or network namespace: "
            f"docs/grader.md) is made for a container that holds one submission and runs only when asked for "
            f"(`course grade {UID_FLAG}`, COURSE_JAIL=auto)")


def require_jail() -> None:
    """Raise JailUnavailable, in one line naming --no-jail and what it loses, where no jail can be made."""
    problem = jail_problem()
    if problem is not None:
        raise JailUnavailable(f"cannot jail student code: {problem}; {NO_JAIL_LOSES}")


def _cgroup_dir(controller: str) -> Path:
    """This process's own group of `controller` (jails nest below it, so an outer limit still holds)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(","):
                return CGROUP_ROOT / controller / path.lstrip("/")
    except OSError:
        pass
    return CGROUP_ROOT / controller


def _writable(controller: str) -> bool:
    return os.access(_cgroup_dir(controller), os.W_OK) and (_cgroup_dir(controller) / "cgroup.procs").exists()


NO_CGROUPS_ENV = "COURSE_JAIL_NO_CGROUPS"   # "1": limits as where cgroups are not writable (the platforms' rule)


def _cgroups_writable() -> bool:
    if os.environ.get(NO_CGROUPS_ENV) == "1":
        return False
    return all(_writable(c) for c in ("memory", "pids"))


def _cpu_writable() -> bool:
    return _writable("cpu") and (_cgroup_dir("cpu") / "cpu.cfs_quota_us").exists()


def limits_note() -> str:
    """One line for reports: how the limits are enforced on this machine."""
    if _cgroups_writable():
        cpu = "a fair share of the CPU (at most 1 CPU)" if _cpu_writable() else "no CPU share (no cpu cgroup here)"
        return ("limits: memory (shared memory and tmpfs included), processes and "
                f"{cpu} per jail by cgroups; CPU time and file size per process by rlimits")
    why = f"{NO_CGROUPS_ENV}=1" if os.environ.get(NO_CGROUPS_ENV) == "1" else "no cgroup permission here"
    # counted per real uid: each jail's own uid where the grader is root (start()), else the grader's user's
    procs = "a uid of each jail's own" if os.geteuid() == 0 else "the grader's user (shared by all its jails)"
    return (f"limits: {why}, so memory per jail by a watch of its processes' resident memory "
            "(autograder.jail.memory: used, not reserved, as the cgroup counts; checked every "
            f"{memory.INTERVAL_S:g} s), processes by the rlimit of {procs}, CPU time and file "
            "size per process by rlimits")


def python_binds() -> list[str]:
    """The read-only paths a Python process of this environment needs: the venv and the base Python.
    Never the repository root, /root or / (a venv inside the repository is bound as just its folder)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    # The venv's own path too when it is a symlink, since the jail starts sys.executable by that name.
    paths |= {os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)}
    too_wide = {"/", "/root", "/home", "/work", str(REPO_ROOT)}
    return sorted(p for p in paths if p not in too_wide and not REPO_ROOT.is_relative_to(p))


def _system_binds() -> list[str]:
    """/usr and the merged-/usr links (/bin, /lib, ...) or, on older systems, those folders themselves."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def _nobody_can_reach(path: str) -> bool:
    """Whether uid 65534 can walk down to `path` (each folder above it searchable by "other")."""
    p = Path(path).resolve()
    for parent in reversed(p.parents):
        try:
            if not parent.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


# ----------------------------------------------------------------------------------------------- cgroups

class _Cgroups:
    """One memory, one pids and (where the controller is there) one cpu group for a jail, made below this
    process's own groups."""

    def __init__(self, name: str, limits: JailLimits) -> None:
        self.dirs: dict[str, Path] = {}
        try:
            for controller in ("memory", "pids"):
                d = _cgroup_dir(controller) / name
                d.mkdir()
                self.dirs[controller] = d
            mem = self.dirs["memory"]
            limit = str(limits.memory_mb * 2**20)
            (mem / "memory.limit_in_bytes").write_text(limit)
            if (mem / "memory.memsw.limit_in_bytes").exists():   # RAM + swap: no escape into swap
                (mem / "memory.memsw.limit_in_bytes").write_text(limit)
            (self.dirs["pids"] / "pids.max").write_text(str(limits.pids))
        except OSError:
            self.remove()
            raise
        if _cpu_writable():
            self._cpu(name, limits)

    def _cpu(self, name: str, limits: JailLimits) -> None:
        """Every jail the same weight, whatever its number of processes, and a ceiling of `limits.cpus`. Best
        effort: where the host refuses (a parent's smaller quota), the memory and pids limits still hold."""
        cpu = _cgroup_dir("cpu") / name
        try:
            cpu.mkdir()
            self.dirs["cpu"] = cpu
            (cpu / "cpu.shares").write_text("1024")
            period = int((cpu / "cpu.cfs_period_us").read_text())
            (cpu / "cpu.cfs_quota_us").write_text(str(max(1000, int(limits.cpus * period))))
        except (OSError, ValueError):
            pass   # a group made but not limited still only holds this jail; kill() removes it either way

    @classmethod
    def adopt(cls, controller: str, path: Path) -> _Cgroups:
        group = cls.__new__(cls)
        group.dirs = {controller: path}
        return group

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> list[int]:
        d = self.dirs.get("pids") or self.dirs.get("memory")
        try:
            return [int(x) for x in (d / "cgroup.procs").read_text().split()] if d else []
        except OSError:
            return []

    def oom_kills(self) -> int:
        """How many processes the memory limit has killed (memory.oom_control's oom_kill)."""
        try:
            text = (self.dirs["memory"] / "memory.oom_control").read_text()
        except (KeyError, OSError):
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def kill_all(self) -> None:
        """SIGKILL everything in the groups until they are empty (a fork racing the kill is caught by the
        next round; the pid namespace's init dying takes the rest with it)."""
        deadline = time.monotonic() + 5
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.005)

    def remove(self) -> None:
        for controller, d in list(self.dirs.items()):
            for _ in range(200):   # rmdir is refused until the last killed process is gone
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)
            else:
                continue
            del self.dirs[controller]


def _started(pid: int) -> str:
    """When `pid` started (clock ticks since boot), so a reused pid is not taken for its grader."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "gone"


def kill_orphans() -> int:
    """Kill the jails of graders that died without cleaning up, and remove their cgroups; returns how many
    jails. (die-with-parent covers a grader's death except in bwrap's first milliseconds, and nothing
    removes a dead grader's cgroups.) start() calls it; jail groups are named after their grader's pid and
    start time."""
    found = 0
    for controller in ("pids", "memory", "cpu"):
        try:
            entries = list(os.scandir(_cgroup_dir(controller)))
        except OSError:
            continue
        for entry in entries:
            parts = entry.name[len(CGROUP_PREFIX):].split("-")
            if not entry.name.startswith(CGROUP_PREFIX) or len(parts) != 3 or not parts[0].isdigit():
                continue
            if _started(int(parts[0])) == parts[1]:
                continue   # its grader is alive
            group = _Cgroups.adopt(controller, Path(entry.path))
            found += controller == "pids" and bool(group.pids())
            group.kill_all()
            group.remove()
            for stage in Path(STAGE_DIR).glob(f"{entry.name}-*"):   # empty once its mount namespace is gone
                try:
                    stage.rmdir()
                except OSError:
                    pass
    from autograder.jail import uid as jail_uid

    return found + jail_uid.kill_orphans()


# ------------------------------------------------------------------------------------------------ a jail

def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Jail:
    """A running jail. `process` has binary stdin/stdout/stderr pipes; drain and cap them (see the module
    docstring). Use as a context manager (its exit kills and closes the pipes), or call kill(): it ends
    everything in the jail and frees the cgroups, also after a normal exit; the pipes stay readable."""

    def __init__(self, process: subprocess.Popen, *, limits: JailLimits, cgroups: _Cgroups | None,
                 stage: str | None, jailed: bool, note: str, kind: str | None = BWRAP,
                 uid_stage: "jail_uid.Stage | None" = None, own_uid: "jail_uid.Stage | None" = None) -> None:
        self.process = process
        self.limits = limits
        self.jailed = jailed
        self.kind = kind if jailed else None   # BWRAP, UID, or None (--no-jail)
        self.limits_note = note
        self._cgroups = cgroups
        self._stage = stage
        self._uid_stage = uid_stage
        self._own_uid = own_uid       # bubblewrap's jail without cgroups: its host uid (start())
        self._killed = False
        self._ended: str | None = None
        # No memory cgroup: the same rule (resident memory of the whole jail) kept by a watch.
        self._watch = None if cgroups is not None else memory.ResidentWatch(
            self._members, limits.memory_mb, self._memory_kill,
            extra_bytes=(lambda: memory.shm_bytes(uid_stage.uid)) if uid_stage is not None else None)

    def _members(self) -> list[int]:
        """The jail's processes: those of its uid (the jail without namespaces, or bubblewrap's with a uid of its
        own), else its main process's tree."""
        stage = self._uid_stage or self._own_uid
        if stage is not None:
            from autograder.jail import uid as jail_uid

            return jail_uid.uid_processes(stage.uid)
        return memory.descendants(self.process.pid) if self.process.poll() is None else []

    def _memory_kill(self) -> None:
        """Over the memory limit (the watch's thread): everything in the jail, as the cgroup's OOM killer would."""
        members = self._members()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        stage = self._uid_stage or self._own_uid
        if stage is not None:
            from autograder.jail import uid as jail_uid

            jail_uid.kill_uid(stage.uid)
        else:
            import psutil

            for pid in members:
                try:
                    psutil.Process(pid).kill()   # psutil checks it is still the process listed
                except psutil.Error:
                    pass

    def path(self, inside: str) -> str:
        """Where the jailed process finds the jail path `inside` (a bind's target, or under /tmp): the same
        path in bubblewrap's jail; under the jail without namespaces, its copy in the jail's own folder."""
        return self._uid_stage.path(inside) if self._uid_stage is not None else inside

    # How the jail's main process ended, in words. bwrap exits 128+N when its command died of signal N.
    def _describe(self, code: int) -> str:
        sig = -code if code < 0 else (code - 128 if self.kind == BWRAP and 128 < code < 128 + 65 else 0)
        if code != 0 and self._watch is not None and self._watch.over:
            return f"memory limit ({self.limits.memory_mb} MB)"
        if self._killed:
            return "killed by the grader"
        if code != 0 and self._cgroups is not None and self._cgroups.oom_kills() > 0:
            return f"memory limit ({self.limits.memory_mb} MB)"
        if sig == signal.SIGXCPU:
            return f"CPU time limit ({self.limits.cpu_s} s)"
        if sig:
            return f"signal {_signal_name(sig)}"
        return f"exit {code}"

    def wait(self, timeout: float | None = None) -> int | None:
        """The main process's exit code (bwrap passes its command's on; 128+N for signal N), or None if it
        is still running after `timeout` seconds."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        if self._ended is None:
            self._ended = self._describe(code)
        return code

    def ended(self) -> str | None:
        """How the jail ended, once its main process has: "exit 3", "signal SIGSEGV", "memory limit (4096
        MB)", "CPU time limit (1200 s)", "killed by the grader"; None while it runs."""
        if self._ended is None and self.process.poll() is not None:
            self.wait()
        return self._ended

    def kill(self) -> None:
        """Kill everything in the jail and free its cgroups; idempotent."""
        if self._watch is not None and self.process.poll() is None and not self._watch.over:
            self._watch.stop()   # before the kill: what the grader kills is not over any limit
        if self.process.poll() is None:
            self._killed = True
            if self._cgroups is not None:
                self._cgroups.kill_all()
            try:   # bwrap's children die with it (die-with-parent); unjailed, the whole session goes
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                pass
            self.process.wait()
        self.ended()
        if self._watch is not None:
            self._watch.stop()
        if self._cgroups is not None:
            self._cgroups.kill_all()   # anything an unjailed process left behind
            self._cgroups.remove()
        for own in (self._uid_stage, self._own_uid):   # everything its uid runs or left in the shared temp folders
            if own is not None:
                own.remove()
        self._uid_stage = self._own_uid = None
        if self._stage is not None:
            try:
                os.rmdir(self._stage)
            except OSError:
                pass
            self._stage = None

    def __enter__(self) -> Jail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def _rlimits(limits: JailLimits, *, cgroups: bool) -> list[str]:
    mb = 2**20
    args = [f"--cpu={limits.cpu_s}:{limits.cpu_s + 2}", f"--fsize={limits.file_mb * mb}", "--core=0"]
    if not cgroups:   # the fallback: processes per uid. Memory: the Jail's watch (never RLIMIT_AS: see memory.py)
        args += [f"--nproc={limits.pids}"]
    return [_tool("prlimit"), *args, "--"]


def _bwrap_args(binds: Sequence[str | tuple[str, str]], env: Mapping[str, str], limits: JailLimits,
                cwd: str, staged: dict[str, str], files: Mapping[str, int], seccomp: int | None) -> list[str]:
    tmpfs = str(limits.tmpfs_mb * 2**20)
    # The mounts that cover whole folders first, the binds into them after: bwrap applies its arguments in
    # order, and a bind under /tmp placed before `--tmpfs /tmp` would be hidden by it.
    args = [shutil.which("bwrap") or "bwrap", *_bwrap_flags(), *_system_binds(),
            "--proc", "/proc", "--dev", "/dev", "--size", tmpfs, "--tmpfs", "/dev/shm",
            "--size", tmpfs, "--tmpfs", "/tmp", "--dir", "/tmp/home"]
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
    fd = os.memfd_create(name, 0)   # inheritable: it travels through sh, prlimit and setpriv to bwrap
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def start(argv: list[str], *, binds: Sequence[str | tuple[str, str]], env: Mapping[str, str],
          limits: JailLimits, cwd: str = "/tmp", jailed: bool = True,
          files: Mapping[str, bytes] | None = None) -> Jail:
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
    name = f"{CGROUP_PREFIX}{os.getpid()}-{_started(os.getpid())}-{secrets.token_hex(4)}"
    cgroups: _Cgroups | None = None
    note = limits_note()
    if _cgroups_writable():
        try:
            cgroups = _Cgroups(name, limits)
        except OSError as e:
            note = f"limits: this jail's cgroups could not be made ({e.strerror}), so rlimits only"

    wrapper_env = {"COURSE_JAIL_CGROUPS": " ".join(cgroups.procs_files() if cgroups else [])}
    staged: dict[str, str] = {}
    stage: str | None = None
    prefix = ["/bin/sh", "-c", _WRAPPER, "course-jail"]
    fds: list[int] = []
    own_uid: jail_uid.Stage | None = None
    if kind == UID:
        from autograder.jail import uid as jail_uid

        return jail_uid.start(argv, binds=binds, env=env, limits=limits, cwd=cwd, files=files or {},
                              cgroups=cgroups, note=note, wrapper=[*prefix, "--"], wrapper_env=wrapper_env,
                              rlimits=_rlimits(limits, cgroups=cgroups is not None))
    if jailed:
        hosts = [b if isinstance(b, str) else b[0] for b in binds]
        unreachable = sorted({h for h in hosts if os.geteuid() == 0 and not _nobody_can_reach(h)})
        if unreachable:
            stage = tempfile.mkdtemp(prefix=name + "-", dir=STAGE_DIR)
            staged = {h: f"{stage}/{i}" for i, h in enumerate(unreachable)}
            wrapper_env["COURSE_JAIL_STAGE"] = stage
            prefix = [_tool("unshare"), "--mount", "--propagation", "private", *prefix, *unreachable]
        file_fds = {inside: _data_fd(data, "course-jail-file") for inside, data in (files or {}).items()}
        program = syscall_filter.keyring_filter()
        seccomp = _data_fd(program, "course-jail-seccomp") if program is not None else None
        fds = [*file_fds.values(), *([seccomp] if seccomp is not None else [])]
        if cgroups is None and os.geteuid() == 0:
            # processes are then bounded by RLIMIT_NPROC, which counts per real uid: a uid of the jail's own
            from autograder.jail import uid as jail_uid

            own_uid = jail_uid.reserve()
        cmd = [*prefix, "--", *_rlimits(limits, cgroups=cgroups is not None),
               *_guarded(uid=NOBODY if own_uid is None else own_uid.uid),
               *_bwrap_args(binds, env, limits, cwd, staged, file_fds, seccomp), *argv]
        popen_env, popen_cwd = {"PATH": SYSTEM_PATH, **wrapper_env}, "/"
    else:
        cmd = [*prefix, "--", *_rlimits(limits, cgroups=cgroups is not None), *_guarded(drop_root=False), *argv]
        popen_env, popen_cwd = {**env, **wrapper_env}, cwd   # the wrapper unsets its own variables
    try:
        process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=popen_env, cwd=popen_cwd, start_new_session=True, pass_fds=fds)
    except BaseException:
        if cgroups is not None:
            cgroups.remove()
        if stage is not None:
            os.rmdir(stage)
        if own_uid is not None:
            own_uid.remove()
        raise
    finally:
        for fd in fds:   # the child has its copies; bwrap reads them before running the command
            os.close(fd)
    return Jail(process, limits=limits, cgroups=cgroups, stage=stage, jailed=jailed, note=note, own_uid=own_uid)
