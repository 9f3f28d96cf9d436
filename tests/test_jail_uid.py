"""The jail without namespaces' parts that need no grading: its seccomp filter (what it denies, what Python, JAX's
threads and the agent still need), the stand-in of Docker's profile, and its refusals (the grader's files
readable to other users, a Python they cannot read). End to end: tests/test_platforms.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autograder.confine import orphans, paths, uids
from autograder.jail import bwrap, jails as jail, uid as jail_uid
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
    "memfd": errno_of(lambda: os.memfd_create("x")),
}
shm = libc.shmget(0, 4096, 0o1600)   # IPC_PRIVATE
out["shmget"] = ctypes.get_errno() if shm < 0 else 0
if shm >= 0:
    libc.shmctl(shm, 0, None)   # IPC_RMID: nothing left behind where it is allowed
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
    done = subprocess.run(
        loader_argv(sys.executable, program, [sys.executable, "-c", code]), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return eval(done.stdout)  # noqa: S307 - our own probe's dict


def test_the_fallback_filter_denies_sockets_namespaces_ptrace_and_unmapped_memory_but_not_threads_or_children() -> None:
    got = _run(fallback_filter(), PROBE)
    assert got == {
        "inet": 1,
        "inet6": 1,
        "unix": 1,
        "socketpair": 0,
        "unshare_user": 1,
        "memfd": 1,
        "shmget": 1,
        "ptrace": 1,
        "thread": 0,
        "child": 0,
    }, got


def test_dockers_profile_stand_in_stops_bubblewrap_and_leaves_sockets() -> None:
    got = _run(no_namespaces_filter(), PROBE)
    assert got["inet"] == 0 and got["unshare_user"] == 1 and got["thread"] == 0
    bwrap = subprocess.run(
        no_namespaces.argv(
            [shutil.which("bwrap") or "/usr/bin/bwrap", "--unshare-all", "--ro-bind", "/", "/", "/bin/true"]
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
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
    if not paths.other_can_reach(tmp_path):
        pytest.skip(f"{tmp_path.parent} is not searchable by other users")
    assert paths.other_can_read(tmp_path / "a" / "f")
    os.chmod(tmp_path / "a", 0o750)
    assert not paths.other_can_read(tmp_path / "a" / "f") and not paths.other_can_read(tmp_path / "a")
    os.chmod(tmp_path / "a", 0o701)
    assert paths.other_can_read(tmp_path / "a")  # enter and open a known name: readable


def test_a_path_is_reached_through_the_folders_above_it_and_above_where_its_links_lead() -> None:
    """One walk for both jails (autograder.confine.paths): bubblewrap's staging asked where a link leads, the jail
    without namespaces' exposure walk asked the path as written; a path counts as reached only when both ways down
    are open to "other"."""
    root = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        opened, closed = root / "open", root / "closed"
        (closed / "target").mkdir(parents=True)
        opened.mkdir()
        os.chmod(closed, 0o700)
        os.chmod(closed / "target", 0o755)
        os.chmod(opened, 0o755)
        (opened / "link").symlink_to(closed / "target")
        (closed / "back").symlink_to(opened)
        assert paths.other_can_reach(opened / "f")
        assert not paths.other_can_reach(opened / "link" / "f")  # it leads below a closed folder
        assert not paths.other_can_reach(closed / "back" / "f")  # written through a closed folder
        assert not paths.other_can_reach(closed / "target")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_jail_without_namespaces_refuses_while_the_graders_files_are_readable(monkeypatch) -> None:
    """This checkout is readable by all (mode 755), so the jail without namespaces must refuse here, naming the
    files and the command that fixes it; with COURSE_JAIL=uid, jail_problem says so in one line."""
    if os.geteuid() != 0:
        pytest.skip("the jail without namespaces needs root")
    readable = [p for p in jail_uid.secrets() if paths.other_can_read(p)]
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


# ------------------------------------------------------- where it runs, and what of the jail's the grader reads


def test_course_grade_never_falls_back_to_it_unasked(monkeypatch) -> None:
    """Where bubblewrap cannot start, the jail without namespaces serves only when asked (COURSE_JAIL=auto: the
    platform doors, `course grade --jail-without-namespaces`); unasked, the refusal says why and names the flag."""
    monkeypatch.setattr(
        bwrap, "bwrap_problem", lambda: "bwrap cannot make a jail here: No permissions to create a new namespace"
    )
    monkeypatch.setattr(jail_uid, "problem", lambda: None)
    monkeypatch.delenv(jail.KIND_ENV, raising=False)
    assert jail.jail_kind() is None
    problem = jail.jail_problem()
    assert (
        problem.startswith("bwrap cannot make a jail here: No permissions")
        and "`course grade --jail-without-namespaces`" in problem
    )
    with pytest.raises(jail.JailUnavailable, match="--jail-without-namespaces"):
        jail.require_jail()
    monkeypatch.setenv(jail.KIND_ENV, jail.AUTO)
    assert jail.jail_kind() == jail.UID and jail.jail_problem() is None
    monkeypatch.setattr(bwrap, "bwrap_problem", lambda: None)
    assert jail.jail_kind() == jail.BWRAP  # auto: bubblewrap wherever it works


def _need_root() -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")


def _as_uid(uid: int, *cmd: str) -> subprocess.Popen:
    return subprocess.Popen([shutil.which("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd])


def test_kill_uid_signals_that_uids_processes_one_by_one_and_nothing_else() -> None:
    _need_root()
    uid = 64990
    jailed = [_as_uid(uid, "sleep", "60") for _ in range(2)]
    neighbour = _as_uid(uid + 1, "sleep", "60")
    try:
        deadline = time.monotonic() + 30
        while len(uids.uid_processes(uid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)  # setpriv has switched to the uid (a loaded machine takes its time)
        uids.kill_uid(uid)
        assert [p.wait(timeout=5) for p in jailed] == [-9, -9]
        assert neighbour.poll() is None and uids.uid_processes(uid) == []
        for wrong in (0, 1000, 65534):  # never a uid the grader did not allot, never kill(-1)
            with pytest.raises(ValueError):
                uids.kill_uid(wrong)
    finally:
        for p in [*jailed, neighbour]:
            p.kill()
            p.wait()


MAIN_THREAD_EXITS = """
import ctypes, sys, threading, time
threading.Thread(target=time.sleep, args=(60,)).start()
sys.stdout.write("ready\\n")
sys.stdout.flush()
ctypes.CDLL(None).pthread_exit(None)
"""


def test_a_process_whose_main_thread_exited_is_the_uids_and_is_killed() -> None:
    """Issue 42 (N1): a process whose main thread exited while another thread runs reads as a zombie in
    /proc/<pid>/status; uid_processes skipped it, so the watch, the kill and the reserve thought its uid free
    while it ran on after the jail. Membership is now by thread group: it is listed and killed."""
    _need_root()
    uid = 64989
    p = subprocess.Popen(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--",
            sys.executable,
            "-c",
            MAIN_THREAD_EXITS,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 10
        while b"Z" not in Path(f"/proc/{p.pid}/status").read_bytes().split(b"State:")[1][:4]:
            assert time.monotonic() < deadline, "the main thread did not exit"
            time.sleep(0.01)
        assert uids.uid_processes(uid) == [p.pid]
        uids.kill_uid(uid)
        assert p.wait(timeout=5) == -9 and uids.uid_processes(uid) == []
    finally:
        p.kill()
        p.wait()


def test_the_orphan_sweep_takes_no_uid_from_a_name_a_jail_could_make() -> None:
    """A cell made /tmp/course-jail-uid-0 with a 'record' of a dead grader, and a judge's folder name: the sweep
    (every jail start runs it) ignores them (the jail's uid made them, not the grader) and signals nothing; a
    grader-made folder whose record names a uid outside UID_RANGE is left too. Before, this got the grader
    SIGKILLed (kill -KILL -1 as uid 0). The jails' records now live where no jail can write (uids.STAGE_ROOT)."""
    _need_root()
    top = uids.stage_root()
    planted = Path("/tmp") / f"{uids.STAGE_PREFIX}0"
    ours = top / f"{uids.STAGE_PREFIX}{64991}"
    judge = Path("/tmp") / "course-judge-1-0-x"  # a dead grader's judge folder, by its name
    bystander = subprocess.Popen(["sleep", "60"])  # a root process the old sweep's kill(-1) as root would reach
    try:
        planted.mkdir()
        (planted / uids.RECORD).write_text("1 0 0\n")
        os.chown(planted / uids.RECORD, 64992, 64992)
        os.chown(planted, 64992, 64992)
        ours.mkdir(mode=0o711)
        (ours / uids.RECORD).write_text("1 0 0\n")  # a record of ours naming uid 0: refused all the same
        os.chmod(ours / uids.RECORD, 0o600)
        judge.mkdir()
        os.chown(judge, 64992, 64992)
        assert orphans.kill_orphans() == 0
        assert bystander.poll() is None and planted.exists() and ours.exists() and judge.exists()
    finally:
        bystander.kill()
        bystander.wait()
        for d in (planted, ours, judge):
            shutil.rmtree(d, ignore_errors=True)


def test_names_a_jail_makes_in_tmp_take_no_uid_from_the_next() -> None:
    """Issue 42 (N2): a jail's leftover process re-made every /tmp/course-jail-uid-* name, and every later jail in
    the batch (and the re-run) found no free uid. The reserve is in uids.STAGE_ROOT, which no jail can write: with
    every such name taken in /tmp, a uid is still reserved, and released."""
    _need_root()
    made = []
    try:
        for uid in list(uids.UID_RANGE)[:50]:
            p = Path("/tmp") / f"{uids.STAGE_PREFIX}{uid}"
            if not p.exists():
                p.mkdir()
                os.chown(p, 64992, 64992)
                made.append(p)
        stage = uids.reserve()
        try:
            assert stage.root.parent == Path(uids.STAGE_ROOT) and stage.uid in uids.UID_RANGE
            assert (os.stat(uids.STAGE_ROOT).st_mode & 0o777) == 0o711
        finally:
            stage.remove()
        assert not stage.root.exists()
    finally:
        for p in made:
            shutil.rmtree(p, ignore_errors=True)


def test_exposed_walks_the_checkout_git_included_and_spares_only_the_jails_python(monkeypatch, tmp_path) -> None:
    """The refusal's list comes from a walk: a file nobody listed (.git's objects, a notes file) is found, the
    venv inside the checkout is not; once the checkout is closed to others but the way down to its venv, none."""
    _need_root()
    root = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        checkout = root / "course"
        for d in (".git/objects/ab", ".venv/bin", "solutions", "pallas_course"):
            (checkout / d).mkdir(parents=True)
        for f in (
            ".git/objects/ab/cdef",
            ".venv/bin/python",
            "solutions/lab.ipynb",
            "notes.txt",
            "pallas_course/__init__.py",
        ):
            (checkout / f).write_text("x")
        for p in [checkout, *checkout.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        monkeypatch.setattr(jail_uid, "REPO_ROOT", checkout)
        monkeypatch.setattr(jail_uid, "python_paths", lambda: [str(checkout / ".venv")])
        monkeypatch.setattr(jail_uid, "secrets", lambda: [])
        found = jail_uid.exposed()
        assert sorted(found) == sorted(str(checkout / n) for n in (".git", "solutions", "notes.txt", "pallas_course"))
        for p in (".git", "solutions", "notes.txt", "pallas_course"):
            subprocess.run(["chmod", "-R", "o=", str(checkout / p)], check=True)
        os.chmod(checkout, 0o711)
        assert jail_uid.exposed() == []
        os.chmod(checkout / ".git" / "objects" / "ab" / "cdef", 0o644)  # below a closed folder: unreachable
        assert jail_uid.exposed() == []
        os.chmod(checkout / ".git", 0o755)  # the folder opened again: .git is listed once, its insides with it
        assert jail_uid.exposed() == [str(checkout / ".git")]
    finally:
        shutil.rmtree(root)
