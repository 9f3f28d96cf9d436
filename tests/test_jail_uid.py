"""The jail without namespaces' parts that need no grading: its seccomp filter (what it denies, what Python, JAX's
threads and the agent still need), the stand-in of Docker's profile, and its refusals (the grader's files
readable to other users, a Python they cannot read). End to end: tests/test_platforms.py."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.jail import bwrap as jail, uid as jail_uid
from autograder.jail.syscall_filter import fallback_filter, loader_argv, no_namespaces_filter
from tests import no_namespaces

if sys.platform != "linux" or fallback_filter() is None:
    pytest.skip("the seccomp filters know x86_64 and aarch64 Linux", allow_module_level=True)

PROBE = r"""
import ctypes, os, socket, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno
out = {
    "inet": errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
    "inet6": errno_of(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)),
    "unix": errno_of(lambda: socket.socket(socket.AF_UNIX)),
    "socketpair": errno_of(lambda: socket.socketpair()),
    "unshare_user": (libc.unshare(0x10000000), ctypes.get_errno())[1],
}
sleeper = subprocess.Popen(["/bin/sleep", "30"])   # a child of its own to attach to, never a process of the test's
attached = libc.ptrace(16, sleeper.pid, 0, 0)            # PTRACE_ATTACH
out["ptrace"] = ctypes.get_errno() if attached != 0 else 0
sleeper.kill()
t = threading.Thread(target=lambda: None); t.start(); t.join()
out["thread"] = 0
out["child"] = subprocess.run(["/bin/true"]).returncode
print(out)
"""


def _run(program: bytes, code: str) -> dict:
    done = subprocess.run(loader_argv(sys.executable, program, [sys.executable, "-c", code]), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout)  # noqa: S307 - our own probe's dict


def test_the_fallback_filter_denies_sockets_namespaces_and_ptrace_but_not_threads_or_children() -> None:
    got = _run(fallback_filter(), PROBE)
    assert got == {"inet": 1, "inet6": 1, "unix": 1, "socketpair": 0, "unshare_user": 1, "ptrace": 1,
                   "thread": 0, "child": 0}, got


def test_dockers_profile_stand_in_stops_bubblewrap_and_leaves_sockets() -> None:
    got = _run(no_namespaces_filter(), PROBE)
    assert got["inet"] == 0 and got["unshare_user"] == 1 and got["thread"] == 0
    bwrap = subprocess.run(no_namespaces.argv([shutil.which("bwrap") or "/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "/bin/true"]),
                           capture_output=True, text=True, timeout=60)
    assert bwrap.returncode != 0 and "namespace" in bwrap.stderr, bwrap.stderr


def test_other_can_read_follows_every_folder_above() -> None:
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        _other_can_read_cases(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def _other_can_read_cases(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_text("x")
    os.chmod(tmp_path, 0o711)
    os.chmod(tmp_path / "a", 0o755)
    os.chmod(tmp_path / "a" / "f", 0o644)
    if not jail_uid.other_can_reach(tmp_path):
        pytest.skip(f"{tmp_path.parent} is not searchable by other users")
    assert jail_uid.other_can_read(tmp_path / "a" / "f")
    os.chmod(tmp_path / "a", 0o750)
    assert not jail_uid.other_can_read(tmp_path / "a" / "f") and not jail_uid.other_can_read(tmp_path / "a")
    os.chmod(tmp_path / "a", 0o701)
    assert jail_uid.other_can_read(tmp_path / "a")   # enter and open a known name: readable


def test_the_jail_without_namespaces_refuses_while_the_graders_files_are_readable(monkeypatch) -> None:
    """This checkout is readable by all (mode 755), so the jail without namespaces must refuse here, naming the
    files and the command that fixes it; with COURSE_JAIL=uid, jail_problem says so in one line."""
    if os.geteuid() != 0:
        pytest.skip("the jail without namespaces needs root")
    readable = [p for p in jail_uid.secrets() if jail_uid.other_can_read(p)]
    if not readable:
        pytest.skip("this checkout's grader files are already unreadable to other users")
    problem = jail_uid.problem()
    assert problem is not None and problem.startswith("the grader's files are readable by other users")
    assert "chmod -R o=" in problem and str(readable[0]) in problem
    monkeypatch.setenv(jail.KIND_ENV, jail.UID)
    assert jail.jail_kind() is None
    assert jail.jail_problem() == f"the jail without namespaces cannot run: {problem}"
    with pytest.raises(jail.JailUnavailable) as e:
        jail.start(["true"], binds=[], env={}, limits=jail.JailLimits())
    assert "\n" not in str(e.value) and "--no-jail" in str(e.value)
