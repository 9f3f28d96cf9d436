"""Run a submission's kernel as an untrusted process: a memory limit, a wall-clock limit, and (on Linux with
Landlock) no access to the file system outside the grader's code and the submission's own folder.

`course grade` starts every kernel through this launcher (`python -m autograder.sandbox ... -- <kernel
command>`). The launcher forks: the child confines itself and execs the kernel; the parent stays outside as a
watchdog. The watchdog kills the kernel and everything it started when the wall-clock limit passes, when the
grader asks (SIGTERM), or when the kernel exits, and writes one line saying which into a status file the
kernel cannot reach.

What the child sets before exec, and so what student code runs under:

- rlimits: data (heap and anonymous mappings, Linux) or address space (elsewhere) at `memory_mb`, file size
  at `file_mb`, no core files; a root grader's capabilities are dropped, so the limits cannot be raised.
- Landlock (Linux >= 5.13): read and execute only under the Python installation, the system folders
  (/usr, /lib*, /bin, /sbin, /etc, /proc, /sys, a few /dev files), the grader's own packages (pallas_course,
  autograder) and course.yml; read and write only in the submission's scratch folder. solutions/, the
  gradebook, grades/, other submissions and the rest of the repository are out of reach. With Landlock ABI
  4+ the kernel may bind only its own five ports and connect to none; with ABI 6+ it cannot signal processes
  outside its sandbox (the grader, other kernels).

Without Landlock (macOS, older kernels, some containers) only the limits apply; `sandbox_status()` says so.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import signal
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

DEFAULT_WALL_S = 600
DEFAULT_MEMORY_MB = 4096
DEFAULT_FILE_MB = 512
RUN_TOKEN_ENV = "COURSE_GRADE_RUN"   # every process of one graded kernel carries it; see kill_leftovers

# Landlock ABI (linux/landlock.h). Syscall numbers are the same on x86_64 and aarch64.
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_V1 = (1 << 13) - 1                       # every right of ABI 1 (execute .. make_sym)
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_NET_BIND, _NET_CONNECT = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 1, 38, 36

READ_ONLY_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys")
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


@dataclass(frozen=True)
class Limits:
    """What one submission may use. `cell_s` is nbgrader's per-cell timeout (the cell is interrupted and
    the run goes on, as in nbgrader); `wall_s` bounds the whole run (the kernel is killed)."""

    wall_s: float = DEFAULT_WALL_S
    memory_mb: int = DEFAULT_MEMORY_MB
    file_mb: int = DEFAULT_FILE_MB
    cell_s: int | None = None        # None: the course's CELL_TIMEOUT_S (nbgrader's c.Execute.timeout)

    def __post_init__(self) -> None:
        for name in ("wall_s", "memory_mb", "file_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name}={getattr(self, name)} should be > 0")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where Landlock is unavailable."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    abi = _libc().syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(abi, 0)


def sandbox_status() -> str:
    """One line for reports: what the kernel of every submission runs under."""
    abi = landlock_abi()
    if abi == 0:
        return ("file-system sandbox off (Landlock unavailable here): a notebook can read and write whatever "
                "the grading user can; memory and wall-clock limits still apply")
    extra = [] if abi < 4 else ["no network"]
    if abi >= 6:
        extra.append("no signals to other processes")
    return (f"Landlock ABI {abi}: reads limited to Python, the grader's code and course.yml, writes to the "
            f"submission's folder" + ("; " + ", ".join(extra) if extra else ""))


def _fs_rights(abi: int) -> int:
    rights = _FS_V1
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


def _add_path(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return   # a path that does not exist here needs no rule
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        attr = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, attr, 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def landlock(read: Sequence[str], write: Sequence[str], bind_ports: Sequence[int]) -> int:
    """Confine this process (and what it execs) to `read` (read/execute) and `write` (everything) paths and
    the TCP ports in `bind_ports`; returns the ABI used, 0 if Landlock is unavailable."""
    abi = landlock_abi()
    if abi == 0:
        return 0
    libc = _libc()
    handled_fs = _fs_rights(abi)
    fields = [handled_fs]
    if abi >= 4:
        fields.append(_NET_BIND | _NET_CONNECT)
    if abi >= 6:
        fields.append(_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
    attr = ctypes.create_string_buffer(struct.pack(f"={len(fields)}Q", *fields), 8 * len(fields))
    ruleset = libc.syscall(_SYS_CREATE, attr, ctypes.c_size_t(8 * len(fields)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in read:
            _add_path(libc, ruleset, path, _EXECUTE | _READ_FILE | _READ_DIR, handled_fs)
        for path in write:
            _add_path(libc, ruleset, path, handled_fs, handled_fs)
        if abi >= 4:
            # port 0: an ephemeral port (ipykernel's IOPub pipe for subprocess output binds one)
            for port in [*bind_ports, 0]:
                rule = ctypes.create_string_buffer(struct.pack("=QQ", _NET_BIND, port), 16)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, rule, 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule(port {port})")
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _drop_capabilities() -> None:
    """A grader running as root would otherwise let the kernel raise its own hard limits."""
    if os.geteuid() != 0 or sys.platform != "linux":
        return
    libc = _libc()
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    header = ctypes.create_string_buffer(struct.pack("=Ii", 0x20080522, 0), 8)   # _LINUX_CAPABILITY_VERSION_3
    data = ctypes.create_string_buffer(bytes(24), 24)                               # 2 x {eff, perm, inh} = 0
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def set_limits(memory_mb: int, file_mb: int) -> None:
    import resource

    memory = memory_mb * 2**20
    kind = resource.RLIMIT_DATA if sys.platform == "linux" else resource.RLIMIT_AS
    resource.setrlimit(kind, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb * 2**20, file_mb * 2**20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def grader_read_paths() -> list[str]:
    """What a kernel must read to run a lab: Python, its packages, the course helpers and course.yml. The
    repository root itself (and so solutions/, the gradebook, grades/, submissions) is never on the list."""
    import importlib.util

    from pallas_course.manifest import MANIFEST_PATH, REPO_ROOT

    repo = REPO_ROOT.resolve()
    paths: list[str] = list(READ_ONLY_SYSTEM) + list(DEV_FILES)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        paths.append(prefix)
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        p = Path(entry).resolve()
        if repo == p or repo.is_relative_to(p):   # the repo, or a folder holding it: too wide
            continue
        paths.append(str(p))
    for package in ("pallas_course", "autograder"):
        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            paths.extend(str(Path(p).resolve()) for p in spec.submodule_search_locations)
    paths.append(str(MANIFEST_PATH))
    return sorted(set(paths))


def kernel_env(workdir: Path, token: str) -> dict[str, str]:
    """The kernel's environment: its home, caches and temp files inside its own folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JPY_", "DASK_"))}
    home = workdir / ".home"
    tmp = workdir / ".tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    env.update(HOME=str(home), TMPDIR=str(tmp), IPYTHONDIR=str(home / ".ipython"),
               MPLCONFIGDIR=str(home / ".mpl"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_CONFIG_HOME=str(home / ".config"), PYTHONDONTWRITEBYTECODE="1")
    env[RUN_TOKEN_ENV] = token
    return env


# ---------------------------------------------------------------------------------------------- launcher

def _descendants(pid: int) -> list[int]:
    try:
        import psutil

        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except Exception:   # noqa: BLE001 - gone already, or psutil missing
        return []


def kill_tree(pid: int, *, include_root: bool = True) -> None:
    """SIGKILL `pid`'s descendants (collected first, so none is orphaned unseen), then `pid` itself."""
    for child in _descendants(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass
    if include_root:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def kill_leftovers(token: str) -> int:
    """Kill processes a graded kernel left behind (a daemon that escaped its process tree keeps the run's
    token in its environment); returns how many."""
    killed = 0
    try:
        import psutil
    except ImportError:
        return 0
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_TOKEN_ENV) == token:
                proc.kill()
                killed += 1
        except (psutil.Error, OSError):
            continue
    return killed


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"signal {name}"
    return f"exit {os.WEXITSTATUS(status)}"


def _connection_ports(cmd: Sequence[str]) -> list[int]:
    try:
        conn = Path(cmd[list(cmd).index("-f") + 1])
        info = json.loads(conn.read_text())
        return [int(info[k]) for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    except (ValueError, IndexError, OSError, KeyError):
        return []


def _child(args: argparse.Namespace, cmd: list[str]) -> None:
    """In the forked child: confine, then become the kernel. Never returns."""
    try:
        libc = _libc()
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if args.log:   # the kernel's own stdout/stderr (start-up warnings, crashes): a log, not our terminal
            fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        set_limits(args.memory_mb, args.file_mb)
        if args.landlock:
            conn = cmd[cmd.index("-f") + 1] if "-f" in cmd else None
            read = list(args.read) + ([conn] if conn else [])
            landlock(read, [args.workdir, "/dev/null"], _connection_ports(cmd))
        _drop_capabilities()
        os.execv(cmd[0], cmd)
    except BaseException as e:   # noqa: BLE001 - report and die; the watchdog records the exit
        os.write(2, f"course grade sandbox: cannot start the kernel: {type(e).__name__}: {e}\n".encode())
    os._exit(127)


def _write_status(path: str | None, text: str) -> None:
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m autograder.sandbox [options] -- KERNEL COMMAND", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m autograder.sandbox")
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--status", default=None)
    parser.add_argument("--log", default=None)
    parser.add_argument("--wall-s", type=float, default=DEFAULT_WALL_S)
    parser.add_argument("--memory-mb", type=int, default=DEFAULT_MEMORY_MB)
    parser.add_argument("--file-mb", type=int, default=DEFAULT_FILE_MB)
    parser.add_argument("--read", action="append", default=[])
    parser.add_argument("--no-landlock", dest="landlock", action="store_false")
    args = parser.parse_args(argv[:split])
    cmd = argv[split + 1:]
    if cmd and os.sep not in cmd[0]:
        cmd[0] = sys.executable if cmd[0] in ("python", "python3") else cmd[0]

    if sys.platform == "linux":
        parent = os.getppid()
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)   # orphans of the kernel come back to us
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)   # the grader died: clean up and go
        if os.getppid() != parent:
            return 1
    pid = os.fork()
    if pid == 0:
        _child(args, cmd)

    stop = {"why": None}

    def on_term(signum: int, _frame: object) -> None:
        stop["why"] = f"stopped by the grader ({signal.Signals(signum).name})"

    signal.signal(signal.SIGINT, signal.SIG_IGN)    # an interrupt is for the kernel (same process group)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    deadline = time.monotonic() + args.wall_s
    status = None
    while status is None and stop["why"] is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            status = st
            break
        if time.monotonic() > deadline:
            stop["why"] = f"wall-clock limit: killed after {args.wall_s:g} s"
            break
        time.sleep(0.05)
    kill_tree(os.getpid(), include_root=False)
    if status is None:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 0
    while True:   # reap what the kill left
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    _write_status(args.status, stop["why"] or _describe(status))
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
