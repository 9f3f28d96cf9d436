"""The jail student code runs in (autograder/jail/bwrap.py): what it cannot see, reach or exhaust.

Each test runs a tiny Python script inside a fresh jail. Without bwrap or user namespaces the tests skip
and say why; under CI (CI=true) they fail instead, since CI must prove the jail."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.confine import cgroups as confine_cgroups
from autograder.jail import jails as jail
from autograder.jail.agent_env import python_binds
from autograder.jail.handle import JailLimits

REPO = Path(__file__).resolve().parents[1]
SMALL = JailLimits(memory_mb=256, pids=64, cpu_s=30, file_mb=16, tmpfs_mb=32)


def _need(problem: str | None) -> None:
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must be able to jail student code: {problem}")
    pytest.skip(problem)


NO_JAIL_NEEDED = {
    "test_no_jail_runs_a_plain_process_with_the_given_environment_and_limits",
    "test_without_bwrap_jail_problem_says_so_and_start_refuses",
    "test_python_binds_are_the_environment_folders_never_the_repository_or_root",
}


@pytest.fixture(autouse=True)
def jail_available(request: pytest.FixtureRequest) -> None:
    if request.function.__name__ not in NO_JAIL_NEEDED:
        _need(jail.jail_problem())


@pytest.fixture
def cgroups() -> None:
    _need(None if confine_cgroups.writable() else "no permission to make cgroups here (memory and pids limits)")


def run(
    script: str,
    *,
    limits: JailLimits = SMALL,
    binds: list | None = None,
    env: dict | None = None,
    jailed: bool = True,
    timeout: float = 30,
    stdin: bytes = b"",
) -> tuple[str, str, str]:
    """(stdout, stderr, ended) of `python -c script` in a fresh jail."""
    with jail.start(
        [sys.executable, "-c", script],
        binds=python_binds() if binds is None else binds,
        env=env or {},
        limits=limits,
        jailed=jailed,
    ) as j:
        out, err = j.process.communicate(stdin, timeout=timeout)
        j.wait()
        return out.decode(), err.decode(), j.ended() or ""


def test_the_jail_sees_nothing_of_the_repository_root_or_the_graders_environment(monkeypatch):
    monkeypatch.setenv("COURSE_SECRET_FOR_TEST", "hunter2")
    script = f"""
import os
for p in [{str(REPO / "solutions")!r}, {str(REPO / "autograder")!r}, {str(REPO / "autograder/keys")!r},
          {str(REPO / "course.yml")!r}, "/root/.bashrc", "/home", {str(REPO / "grades")!r}, "/etc/passwd", "/sys"]:
    try:
        open(p).read() if os.path.isfile(p) else os.listdir(p)
        print("READ", p)
    except OSError:
        pass
print(sorted(os.listdir("/root")), sorted(os.listdir("/root/.pyenv")))
print("hunter2" in repr(dict(os.environ)), sorted(os.environ))
"""
    out, err, ended = run(script, env={"GIVEN": "1"})
    assert (ended, err) == ("exit 0", "")
    reads, listing, env_line = out.splitlines()[:-2], out.splitlines()[-2], out.splitlines()[-1]
    assert reads == []
    assert listing == "['.pyenv'] ['versions']"  # /root is only the path down to the bound Python
    assert env_line.startswith("False ") and "'GIVEN'" in env_line and "COURSE_SECRET" not in env_line


def test_python_binds_are_the_environment_folders_never_the_repository_or_root():
    binds = python_binds()
    assert sys.prefix in binds or os.path.realpath(sys.prefix) in binds
    for wide in ("/", "/root", str(REPO)):
        assert wide not in binds
    assert not any(REPO.is_relative_to(b) for b in binds)


def test_proc_shows_only_the_jail_and_no_host_sockets(tmp_path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "grader.sock"))
    server.listen()
    script = f"""
import os
print(sorted(p for p in os.listdir("/proc") if p.isdigit()), os.getpid())
print(os.path.exists("/proc/{os.getpid()}/cmdline"), os.path.exists("/proc/{os.getppid()}/environ"))
print(open("/proc/net/unix").read().count("\\n"), "grader.sock" in open("/proc/net/unix").read())
"""
    try:
        out, err, ended = run(script)
    finally:
        server.close()
    assert ended == "exit 0", err
    assert out.splitlines() == ["['1', '2'] 2", "False False", "1 False"]  # pid 1 is bwrap's reaper


def test_no_network_tcp_udp_or_host_unix_sockets(tmp_path):
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(tmp_path / "s"))
    unix.listen()
    abstract = socket.socket(socket.AF_UNIX)  # abstract names belong to the network namespace
    abstract.bind(f"\0course-jail-test-{os.getpid()}")
    abstract.listen()
    script = f"""
import socket
for family, address in [(socket.AF_INET, ("127.0.0.1", {tcp.getsockname()[1]})),
                        (socket.AF_UNIX, {str(tmp_path / "s")!r}),
                        (socket.AF_UNIX, {abstract.getsockname()!r})]:
    try:
        socket.socket(family).connect(address)
        print("connected", address)
    except OSError as e:
        print(type(e).__name__)
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp.getsockname()[1]}))
try:
    socket.create_connection(("pypi.org", 443), timeout=2)
    print("internet")
except OSError as e:
    print(type(e).__name__)
"""
    try:
        out, err, ended = run(script)
        udp.settimeout(0.2)
        with pytest.raises(TimeoutError):
            udp.recv(16)
    finally:
        tcp.close(), udp.close(), unix.close(), abstract.close()
    assert ended == "exit 0", err
    assert out.splitlines() == ["ConnectionRefusedError", "FileNotFoundError", "ConnectionRefusedError", "gaierror"]


def test_runs_as_uid_65534_inside_and_on_the_host_with_no_capabilities():
    script = """
import os, sys
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(os.getuid(), os.getgid(), os.getgroups(), status["CapEff"].strip(), status["CapBnd"].strip())
sys.stdout.flush()
sys.stdin.read()
"""
    with jail.start([sys.executable, "-c", script], binds=python_binds(), env={}, limits=SMALL) as j:
        line = j.process.stdout.readline().decode()
        host_uids = {
            int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
            for pid in ([j.process.pid] + (j.cgroups.pids() if j.cgroups else []))
        }
        j.process.stdin.close()
        assert j.wait(10) == 0
    assert line.split() == ["65534", "65534", "[]", "0000000000000000", "0000000000000000"]
    assert host_uids == {65534} or os.geteuid() != 0


def test_sysv_shared_memory_never_reaches_the_host():
    """Denied in the jail (issue 42: memory no watch counts), and the jail's own IPC namespace besides."""
    key = 0x5EED0C0
    script = f"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget({key}, 4096, 0o1000 | 0o600) >= 0)   # IPC_CREAT
"""
    out, err, ended = run(script)
    assert (ended, out.split()) == ("exit 0", ["False"]), err
    host = Path("/proc/sysvipc/shm").read_text().split("\n")[1:]
    assert not any(line.split() and line.split()[0] == str(key) for line in host)


def test_a_fork_bomb_stops_at_the_pids_limit_and_the_grader_is_fine(cgroups):
    script = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, type(e).__name__)
"""
    t = time.monotonic()
    out, err, ended = run(script, limits=JailLimits(pids=24, memory_mb=512, cpu_s=30, file_mb=4, tmpfs_mb=4))
    n, error = out.split()
    assert (ended, error) == ("exit 0", "BlockingIOError"), err
    assert 10 < int(n) < 24  # bwrap, its reaper and the script's own threads count too
    assert time.monotonic() - t < 10  # the sleeping children died with the jail's main process
    assert subprocess.run(["true"]).returncode == 0


def test_a_setsid_child_does_not_outlive_the_main_process():
    marker = f"course-jail-test-{os.getpid()}-{time.monotonic_ns()}"
    script = f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(60)   # {marker}
    os._exit(0)
time.sleep(0.3)
"""
    out, err, ended = run(script)
    assert ended == "exit 0", err
    assert _wait_for(lambda: not _marked(marker), timeout=2)


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


MEMORY_HOGS = {
    "shared anonymous mmap": """
import mmap
m = mmap.mmap(-1, 512 * 2**20, flags=mmap.MAP_SHARED)
for i in range(0, len(m), 4096):
    m[i] = 1
""",
    "/dev/shm": """
with open("/dev/shm/hog", "wb") as f:
    for _ in range(512):
        f.write(b"x" * 2**20)
""",
    "the /tmp tmpfs": """
for i in range(32):
    with open(f"/tmp/hog{i}", "wb") as f:
        for _ in range(16):
            f.write(b"x" * 2**20)
""",
}


@pytest.mark.parametrize("how", MEMORY_HOGS)
def test_memory_past_the_limit_ends_the_jail_with_memory_limit(how, cgroups):
    limits = JailLimits(memory_mb=128, pids=64, cpu_s=30, file_mb=1024, tmpfs_mb=1024)
    out, err, ended = run(MEMORY_HOGS[how], limits=limits)
    assert ended == "memory limit (128 MB)", (out, err)


def test_a_busy_loop_ends_with_cpu_time_limit():
    out, err, ended = run("while True: pass", limits=JailLimits(cpu_s=1, pids=64, memory_mb=256))
    assert ended == "CPU time limit (1 s)", err


def test_tmpfs_size_and_file_size_limits():
    script = """
import os

def fill(path, mb):
    try:
        with open(path, "wb") as f:
            for _ in range(mb):
                f.write(b"x" * 2**20)
        return "ok"
    except OSError as e:
        return e.strerror
print(fill("/tmp/big", 24))          # one file past file_mb
os.remove("/tmp/big")
print(fill("/tmp/a", 12), fill("/tmp/b", 12), fill("/tmp/c", 12))   # together past tmpfs_mb
"""
    out, err, ended = run(script, limits=JailLimits(memory_mb=256, pids=64, cpu_s=30, file_mb=16, tmpfs_mb=32))
    assert ended == "exit 0", err
    assert out.splitlines() == ["File too large", "ok ok No space left on device"]


def test_writes_outside_tmp_fail():
    script = f"""
import os
for path in ["/x", "/usr/x", "/dev/x", "/proc/x", {sys.prefix + "/x"!r}, {sys.base_prefix + "/x"!r}, "/root/x"]:
    try:
        open(path, "w").close()
        print("WROTE", path)
    except OSError:
        pass
open("/tmp/ok", "w").close(); open(os.environ["HOME"] + "/ok", "w").close()
print(os.environ["HOME"], os.getcwd())
"""
    out, err, ended = run(script)
    assert (ended, out.splitlines()) == ("exit 0", ["/tmp/home /tmp"]), err


def test_jax_runs_a_pallas_call_in_tpu_interpret_mode_inside():
    script = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

def double_plus_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + 1

x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
y = pl.pallas_call(double_plus_one, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                   interpret=pltpu.InterpretParams())(x)
print(bool(jnp.array_equal(y, x * 2 + 1)), jax.default_backend())
"""
    out, err, ended = run(
        script,
        env={"JAX_PLATFORMS": "cpu"},
        timeout=120,
        limits=JailLimits(memory_mb=2048, pids=256, cpu_s=120, file_mb=16, tmpfs_mb=64),
    )
    assert (ended, out.split()) == ("exit 0", ["True", "cpu"]), err[-2000:]


def test_how_it_ended_in_words():
    assert run("raise SystemExit(3)")[2] == "exit 3"
    assert run("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")[2] == "signal SIGSEGV"
    with jail.start(
        [sys.executable, "-c", "import time; time.sleep(60)"], binds=python_binds(), env={}, limits=SMALL
    ) as j:
        assert j.wait(0.2) is None and j.ended() is None
        j.kill()
        j.kill()  # idempotent
        assert j.ended() == "killed by the grader"
        assert all(not d.exists() for d in (j.cgroups.dirs.values() if j.cgroups else []))


def test_no_jail_runs_a_plain_process_with_the_given_environment_and_limits(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_SECRET_FOR_TEST", "hunter2")
    # PWD (the shell's) and LC_CTYPE (Python's locale coercion) describe the process itself
    script = "import os; print(sorted(set(os.environ) - {'PWD', 'LC_CTYPE'}), os.getcwd()); raise SystemExit(4)"
    with jail.start(
        [sys.executable, "-c", script], binds=[], env={"GIVEN": "1"}, limits=SMALL, jailed=False, cwd=str(tmp_path)
    ) as j:
        out, err = j.process.communicate(timeout=30)
        assert (j.wait(), j.ended()) == (4, "exit 4"), err
    assert out.decode().split() == ["['GIVEN']", str(tmp_path)]
    _, err, ended = run("while True: pass", jailed=False, limits=JailLimits(cpu_s=1))
    assert ended == "CPU time limit (1 s)", err


def test_without_bwrap_jail_problem_says_so_and_start_refuses(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert jail.jail_problem() == "bubblewrap is not installed (`apt-get install bubblewrap`)"
    with pytest.raises(jail.JailUnavailable) as e:
        jail.start(["true"], binds=[], env={}, limits=SMALL)
    assert str(e.value) == (
        "cannot jail student code: bubblewrap is not installed (`apt-get install bubblewrap`); `--no-jail` runs "
        "student code as a plain process with the same limits but no namespaces: it can then read what the "
        "grading user can, see its processes and use the network"
    )


def test_the_jail_dies_with_the_grader():
    marker = f"course-jail-test-{os.getpid()}-{time.monotonic_ns()}"
    grader = f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
from autograder.jail import jails as jail
from autograder.jail.agent_env import python_binds
marker = sys.stdin.readline().strip()   # not in this process's own command line
j = jail.start([sys.executable, "-c", "import time; time.sleep(60)  # " + marker], binds=python_binds(),
               env={{}}, limits=jail.JailLimits())
print(*[str(d) for d in (j.cgroups.dirs.values() if j.cgroups else [])], j._stage or "", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", grader], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    proc.stdin.write(marker + "\n")
    proc.stdin.flush()
    leftovers = proc.stdout.readline().split()
    try:
        # the jailed Python runs (bwrap's own processes carry the marker in their arguments too)
        assert _wait_for(lambda: len(_marked(marker)) == 3), "the jailed process never started"
        proc.kill()  # the grader dies without cleaning up
        proc.wait()
        assert _wait_for(lambda: not _marked(marker)), "the jail outlived the grader"
    finally:
        proc.kill()
        jail.kill_orphans()  # what a killed grader cannot remove: its jail's cgroups
        for d in leftovers:
            _wait_for(lambda: _rmdir(d))  # the staging folder (an empty folder in /tmp)
    assert not any(Path(d).exists() for d in leftovers if d.startswith("/sys/"))


def test_kill_orphans_kills_the_jails_of_dead_graders_and_removes_their_cgroups(cgroups):
    group = confine_cgroups.cgroup_dir("pids") / f"{jail.CGROUP_PREFIX}{2**22 + 1}-0-test"  # no such grader pid
    group.mkdir()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (group / "cgroup.procs").write_text(str(sleeper.pid))
        assert jail.kill_orphans() == 1
        assert sleeper.wait(5) == -9 and not group.exists()
    finally:
        sleeper.kill()
        _rmdir(str(group))


def test_the_sweep_never_takes_another_pid_namespace_s_grader_for_dead(cgroups):
    """Issue 42 (N7): two graders in different pid namespaces (two containers) sharing one writable cgroup
    hierarchy: each looked the other's pid up in its own namespace, found it dead, and killed the other's jails.
    Groups carry their grader's pid namespace; the sweep judges only its own namespace's graders."""
    from autograder.confine import grader

    dead_pid = 2**22 + 1  # no such pid here
    theirs = confine_cgroups.cgroup_dir("pids") / f"{jail.CGROUP_PREFIX}1-{dead_pid}-0-test"  # namespace 1: not ours
    ours = confine_cgroups.cgroup_dir("pids") / f"{jail.CGROUP_PREFIX}{grader.namespace()}-{dead_pid}-0-test"
    sleepers = []
    try:
        for group in (theirs, ours):
            group.mkdir()
            sleepers.append(subprocess.Popen(["sleep", "30"]))
            (group / "cgroup.procs").write_text(str(sleepers[-1].pid))
        assert jail.kill_orphans() == 1
        assert sleepers[1].wait(5) == -9 and not ours.exists()
        assert sleepers[0].poll() is None and theirs.exists()
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        for group in (theirs, ours):
            _rmdir(str(group))


def _marked(marker: str) -> list[Path]:
    return [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]


def _wait_for(condition, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


def test_binds_are_read_only_and_reach_folders_uid_65534_could_not_enter(tmp_path):
    hidden = tmp_path / "hidden"  # pytest's temp folders are 0700, like /root
    (hidden / "pkg").mkdir(parents=True)
    (hidden / "pkg" / "helper.py").write_text("VALUE = 42\n")
    (hidden / "data.txt").write_text("course data")
    hidden.chmod(0o700)
    script = """
import sys
sys.path.insert(0, "/opt/course")
import helper
print(helper.VALUE, open("/opt/data.txt").read())
for path in ["/opt/course/x", "/opt/data.txt"]:
    try:
        open(path, "w").close()
        print("WROTE", path)
    except OSError as e:
        print(e.strerror)
"""
    binds = [*python_binds(), (str(hidden / "pkg"), "/opt/course"), (str(hidden / "data.txt"), "/opt/data.txt")]
    out, err, ended = run(script, binds=binds)
    assert (ended, out.splitlines()) == (
        "exit 0",
        ["42 course data", "Read-only file system", "Read-only file system"],
    ), err


# ------------------------------------------------------------------- between jails, and Python anywhere


def test_the_kernel_keyring_is_denied():
    """Linux has no keyring namespace: jails of uid 65534 would share the user keyring. keyctl, add_key and
    request_key fail with EPERM (autograder.jail.syscall_filter's seccomp filter), by any ABI."""
    from autograder.jail.syscall_filter import bwrap_filter

    if bwrap_filter() is None:
        pytest.skip("no keyring filter for this machine's ABI")
    script = """
import ctypes, errno, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[platform.machine()]
got = [libc.syscall(nr[2], 0, -3, 0), ctypes.get_errno()]                     # KEYCTL_GET_KEYRING_ID(@s)
got += [libc.syscall(nr[0], b"user", b"k", b"secret", 6, -4), ctypes.get_errno()]   # add_key to @u
got += [libc.syscall(nr[1], b"user", b"k", None, 0), ctypes.get_errno()]            # request_key
print(got, errno.EPERM)
"""
    out, err, ended = run(script)
    got, eperm = out.rsplit(" ", 1)
    assert got == str([-1, int(eperm)] * 3), out + err


def test_memory_no_process_maps_is_denied():
    """Issue 42 (N3, N4): 3 GB written into memfds nobody maps, or a System V segment after shmdt, is memory no watch
    of resident memory counts and, without an IPC namespace, outlives the jail: memfd_create and System V IPC fail
    with EPERM in every jail (the cgroup would have counted them: one verdict in every configuration)."""
    script = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
got = []
try:
    os.memfd_create("x")
    got.append("memfd")
except OSError as e:
    got.append(e.errno)
got += [libc.shmget(0, 1 << 20, 0o1600), ctypes.get_errno(), libc.semget(0, 1, 0o1600), ctypes.get_errno(),
        libc.msgget(0, 0o1600), ctypes.get_errno()]
print(got, errno.EPERM)
"""
    out, err, ended = run(script)
    got, eperm = out.rsplit(" ", 1)
    assert got == str([int(eperm), -1, int(eperm), -1, int(eperm), -1, int(eperm)]), out + err


def test_a_python_or_checkout_under_tmp_is_not_hidden_by_the_jails_tmp():
    """bwrap applies its arguments in order: the jail's own tmpfs on /tmp is mounted before the binds, so a
    venv (here: this one, bound at /tmp/course-venv) or a checkout under /tmp is still there."""
    inside = "/tmp/course-venv"
    binds = [*python_binds(), (sys.prefix, inside)]
    with jail.start(
        [f"{inside}/bin/python", "-c", "import sys, numpy; print(sys.prefix)"], binds=binds, env={}, limits=SMALL
    ) as j:
        out, err = j.process.communicate(timeout=60)
        assert (j.wait(), out.decode().strip()) == (0, inside), err.decode()


def test_each_jail_gets_an_equal_cpu_share_and_at_most_one_cpu(cgroups):
    """The cpu cgroup: every jail the same weight (cpu.shares) whatever its number of processes, and a ceiling
    of JailLimits.cpus (cfs quota), so one jail's spinners cannot push a neighbour past its cell timeout."""
    if not confine_cgroups.cpu_writable():
        _need("no permission to make cpu cgroups here")
    with jail.start(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        binds=python_binds(),
        env={},
        limits=JailLimits(cpus=0.5),
    ) as j:
        cpu = j.cgroups.dirs["cpu"]
        assert (cpu / "cpu.shares").read_text().strip() == "1024"
        period = int((cpu / "cpu.cfs_period_us").read_text())
        assert int((cpu / "cpu.cfs_quota_us").read_text()) == period // 2
        deadline = time.monotonic() + 10
        while not (cpu / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (cpu / "cgroup.procs").read_text().split(), "the jail's processes are in its cpu group"
    assert not cpu.exists()


SPINNERS = """
import os
for _ in range(40):
    if os.fork() == 0:
        os.setsid()   # each in a session of its own: the kernel's autogroup then weighs them as 40 neighbours
        while True: pass
import sys; sys.stdin.read()
"""
HONEST = """
import time
wall, cpu = time.perf_counter(), time.process_time()
n = 0
while time.process_time() - cpu < 0.5: n += 1
print(time.perf_counter() - wall)
"""


def test_a_jail_of_spinners_does_not_starve_its_neighbour(cgroups):
    """40 spinning processes in one jail (each in its own session), a single-threaded task in the next, as two
    submissions graded side by side: with a cpu group per jail the task's 0.5 CPU-seconds took 2.0 s here;
    without it 12 s (2 cores, a busy machine), enough to push a neighbour past its cell timeout."""
    if not confine_cgroups.cpu_writable():
        _need("no permission to make cpu cgroups here")
    with jail.start(
        [sys.executable, "-c", SPINNERS], binds=python_binds(), env={}, limits=JailLimits(pids=64, cpu_s=60)
    ) as spinners:
        time.sleep(1.0)  # the spinners are running
        out, err, _ = run(HONEST, timeout=120)
        assert spinners.process.poll() is None
    assert float(out) < 0.5 * 8, (out, err)


def test_the_jail_imports_the_graders_helpers_whatever_the_venv_says(tmp_path):
    """The trap: a venv installed editable from another checkout, whose finder maps pallas_course there.
    The jail binds the grader's own pallas_course where its PYTHONPATH finds it first."""
    from autograder.jail.agent_env import JAIL_HELPERS, agent_binds, agent_files, jail_env

    finders = list(Path(sys.prefix).glob("lib/python*/site-packages/__editable___*_finder.py"))
    if not finders:
        pytest.skip("the helpers are not installed editable here")
    other = tmp_path / "other"
    (other / "pallas_course").mkdir(parents=True)
    (other / "pallas_course" / "__init__.py").write_text("WHO = 'another checkout'\n")
    text = finders[0].read_text()
    mapping = text.split("MAPPING", 1)[1].split("\n", 1)[0]
    patched = text.replace(mapping, f": dict[str, str] = {{'pallas_course': {str(other / 'pallas_course')!r}}}", 1)
    files = {**agent_files(), str(finders[0]): patched.encode()}
    probe = "import os, pallas_course; print(os.path.realpath(pallas_course.__file__))"
    seen = []
    for env in (jail_env(), {**jail_env(), "PYTHONPATH": ""}):  # the grader's, and a control without it
        with jail.start(
            [sys.executable, "-c", probe], binds=[*agent_binds(), str(other)], env=env, limits=SMALL, files=files
        ) as j:
            out, err = j.process.communicate(timeout=60)
            seen.append(out.decode().strip() or err.decode()[-300:])
    assert seen == [f"{JAIL_HELPERS}/__init__.py", str(other / "pallas_course" / "__init__.py")]
