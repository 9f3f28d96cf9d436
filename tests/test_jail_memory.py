"""One memory rule with and without cgroups (autograder.confine.memory): what a jail's processes hold resident counts,
what they only reserve does not. Without a memory cgroup (COURSE_JAIL_NO_CGROUPS=1: the platforms' containers),
the jail's watch stops a real hog with the same words as the cgroup, and lets address space alone through (JAX
reserves it by the core count)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from autograder.confine import memory, uids
from autograder.jail import jails as jail
from autograder.jail.agent_env import python_binds
from autograder.jail.handle import JailLimits

LIMITS = JailLimits(memory_mb=256, pids=256, cpu_s=60, file_mb=16, tmpfs_mb=32)

RESERVE_16G = """
import mmap
m = mmap.mmap(-1, 16 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0))
m[:1 << 20] = b"x" * (1 << 20)   # 1 MiB of it used
print("ran", len(m) >> 30)
"""
HOGS = {
    "anonymous pages": """
import time
held = []
while True:
    held.append(bytearray(64 << 20))   # zero-filled: every page touched
    time.sleep(0.01)
""",
    "shared memory": """
import mmap, time
m = mmap.mmap(-1, 2 << 30, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
for i in range(0, len(m), 4096):
    m[i] = 1
time.sleep(5)
""",
    # issue 42 (N1): the main thread exits (pthread_exit) while another holds the memory: /proc/<pid>/status then
    # reads as a zombie with no counters, and the watch counted 0
    "a thread whose main thread exited": """
import ctypes, threading, time
def hold():
    time.sleep(1)   # the main thread has exited by then
    held = []
    while True:
        held.append(bytearray(64 << 20))
        time.sleep(0.01)
threading.Thread(target=hold).start()
ctypes.CDLL(None).pthread_exit(None)
""",
    "a child's pages": """
import subprocess, sys, time
subprocess.run([sys.executable, "-c", "import time\\nh = [bytearray(64 << 20) for _ in range(40)]\\ntime.sleep(30)"])
""",
}


@pytest.fixture(autouse=True)
def no_cgroups(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = jail.jail_problem()
    if problem:
        pytest.skip(problem)
    monkeypatch.setenv(jail.NO_CGROUPS_ENV, "1")


def run(script: str, limits: JailLimits = LIMITS) -> tuple[str, str, str]:
    with jail.start([sys.executable, "-c", script], binds=python_binds(), env={}, limits=limits) as j:
        assert j.cgroups is None and j.watch is not None
        out, err = j.process.communicate(timeout=60)
        j.wait()
        return out.decode(), err.decode(), j.ended() or ""


def test_16_gb_of_untouched_address_space_runs_under_a_256_mb_limit() -> None:
    out, err, ended = run(RESERVE_16G)
    assert (out, ended) == ("ran 16\n", "exit 0"), err


@pytest.mark.parametrize("how", HOGS)
def test_a_memory_hog_ends_with_the_memory_limit_as_under_the_cgroup(how: str) -> None:
    out, err, ended = run(HOGS[how])
    assert ended == "memory limit (256 MB)", (out, err[-2000:])
    assert "memory per jail by a watch of its processes' resident memory" in jail.limits_note()


TMPFS_HOG = """
import os, time
f = open("/dev/shm/held", "wb")
os.unlink("/dev/shm/held")                 # unlinked, still open: no file left to find by walking
for _ in range(12):
    f.write(b"x" * (32 << 20))
    f.flush()
    time.sleep(0.05)
print("kept", flush=True)
time.sleep(30)
"""


def test_what_a_jail_keeps_in_its_tmpfs_counts_as_under_the_cgroup() -> None:
    """Issue 42 (N3, N6): the jail's /tmp and /dev/shm are tmpfs, memory the cgroup counts; the watch counts them
    too, by statvfs in the jail's mount namespace (no walk: unlinked files and any number of files included)."""
    limits = JailLimits(memory_mb=128, pids=64, cpu_s=60, file_mb=512, tmpfs_mb=512)
    out, err, ended = run(TMPFS_HOG, limits)
    assert ended == "memory limit (128 MB)" and "kept" not in out, (out, err[-2000:], ended)


def test_resident_bytes_counts_touched_pages_not_reserved_ones() -> None:
    import mmap

    before = memory.resident_bytes(os.getpid())
    m = mmap.mmap(-1, 1 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    reserved = memory.resident_bytes(os.getpid())
    m[: 64 << 20] = b"x" * (64 << 20)
    touched = memory.resident_bytes(os.getpid())
    m.close()
    assert reserved - before < 16 << 20 and touched - before > 60 << 20, (before, reserved, touched)


SPAWN_THREADS = """
import os, threading, time
threads = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(40)]
for t in threads:
    t.start()
print("uid", os.getuid(), "threads", len(threads))
"""
HOLD_ALL_PIDS = """
import os, subprocess, sys
kids = []
try:
    while True:
        kids.append(subprocess.Popen(["/bin/sleep", "30"]))
except OSError as e:
    print("held", len(kids), type(e).__name__, flush=True)
sys.stdin.readline()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a uid of the jail's own needs a root grader")
def test_a_jail_that_holds_every_process_it_may_have_leaves_its_neighbour_its_own() -> None:
    """Issue 33, found by `make configurations` (course grade, bubblewrap, the watch): without cgroups the rlimit
    on processes counts per uid; with every jail as uid 65534, one notebook's processes left the jail started
    beside it no thread to start (SIGABRT). Each such jail now runs as a uid of its own on the host: a jail that
    holds all its processes leaves the next one its full allowance, and both uids are gone with their jails."""
    limits = JailLimits(memory_mb=512, pids=64, cpu_s=60, file_mb=16, tmpfs_mb=32)
    with jail.start([sys.executable, "-c", HOLD_ALL_PIDS], binds=python_binds(), env={}, limits=limits) as hog:
        held = hog.process.stdout.readline().decode()
        assert held.startswith("held ") and int(held.split()[1]) >= 50, held
        out, err, ended = run(SPAWN_THREADS, limits)
        assert "threads 40" in out and ended == "exit 0", (out, err[-2000:], ended)
        hog_uid = hog._own_uid.uid
        assert len(uids.uid_processes(hog_uid)) >= 50 and "uid 65534 " in out
        hog.process.stdin.close()
    assert not uids.uid_processes(hog_uid)
    assert not (Path(uids.STAGE_ROOT) / f"{uids.STAGE_PREFIX}{hog_uid}").exists()
