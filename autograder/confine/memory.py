"""The memory limit where no cgroup can be made (a container without cgroup permission: Gradescope, PrairieLearn):
a watch of what the jail's processes hold resident, the same rule as the memory cgroup's.

RLIMIT_AS, what stood here before, counts reserved address space: an untouched 1 GiB array, or the address space
JAX reserves by the machine's core count (1.5 GB VmPeak for one small interpret-mode kernel on 2 cores, more on
16), counted as used, so honest notebooks failed there and nowhere else. The cgroup counts pages in use; so does
this watch: every `interval_s` it sums, over the jail's processes, their resident anonymous and shared-memory
pages (a library's file pages, which the kernel can drop and read again, not at all), plus what `extra_bytes`
says (files the jail keeps in a shared tmpfs), and kills the jail the first time the sum passes the limit.

What it gives up against the cgroup: the check is periodic, so a burst faster than `interval_s` can pass the
limit by what it allocates in that time before it is stopped (the machine's own memory is the only hard bound
meanwhile); files in a tmpfs outside `extra_bytes` are not counted; a page two of its processes share (shared
memory both map, a fork's pages not yet copied) counts for each, so a jail of many forks is judged more strictly
than by the cgroup.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

from autograder.confine import procfs

PAGE = os.sysconf("SC_PAGE_SIZE")
INTERVAL_S = 0.05


def resident_bytes(pid: int) -> int:
    """What `pid` holds in memory that counts against a jail: its resident anonymous and shared-memory pages
    (/proc/<pid>/status's RssAnon + RssShmem: kernel counters, read in microseconds; smaps_rollup's proportional
    shares took 20 ms for one JAX process), read off a live thread of it (autograder.confine.procfs: a main thread
    that exited while others run holds no counters). A library's file pages, which the kernel can drop and read
    again, do not count. 0 once it is gone."""
    status = procfs.live_status(pid)
    if status is None:
        return 0
    return sum(int((procfs.field(status, name) or [b"0"])[0]) * 1024 for name in (b"RssAnon", b"RssShmem"))


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass
    return out


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (bubblewrap's jail: its pid namespace's orphans are reparented to the
    namespace's init, a child of `pid`, so none leaves the tree), from each thread's /proc children list."""
    seen, todo = [], [pid]
    while todo and len(seen) < 100_000:
        p = todo.pop()
        if p in seen or not os.path.exists(f"/proc/{p}"):
            continue
        seen.append(p)
        todo += _children(p)
    return seen


def tmpfs_bytes(path: str, size: int) -> int | None:
    """The bytes in use in the tmpfs of `size` bytes mounted at `path` (statvfs: what its files hold, unlinked ones
    still open included); None where `path` is not such a mount (a process still setting up its mounts sees the
    host's) or cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    if st.f_blocks * st.f_frsize > size:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def mount_namespace(pid: int) -> str | None:
    """The mount namespace `pid` lives in (its /proc/<pid>/ns/mnt link), None once it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def shm_bytes(uid: int, folder: str = "/dev/shm") -> int:
    """The disk blocks of what `uid` keeps in `folder` (a tmpfs: memory), the tree below each entry it owns."""
    total = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if st.st_uid != uid:
                continue
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                for top, _, files in os.walk(entry.path):
                    for name in files:
                        total += os.lstat(os.path.join(top, name)).st_blocks * 512
        except OSError:
            pass
    return total


class ResidentWatch:
    """Calls `kill` once, from a thread of its own, the first time `members()`' resident memory (plus
    `extra_bytes()`) passes `limit_mb`; `over` then says so. stop() ends the watch (idempotent)."""

    def __init__(
        self,
        members: Callable[[], list[int]],
        limit_mb: int,
        kill: Callable[[], None],
        *,
        extra_bytes: Callable[[], int] | None = None,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.limit = limit_mb * 2**20
        self.over = False
        self.peak = 0
        self._members = members
        self._extra = extra_bytes
        self._kill = kill
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jail-memory-watch", daemon=True)
        self._thread.start()

    def used(self) -> int:
        return sum(resident_bytes(pid) for pid in self._members()) + (self._extra() if self._extra else 0)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            used = self.used()
            self.peak = max(self.peak, used)
            if used > self.limit:
                self.over = True
                self._kill()
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
