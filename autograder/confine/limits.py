"""What one confined child may use: one type for the jail and the judge's box (each names its own defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessLimits:
    """What one child may use, all of it together (cgroups), or per process where only rlimits apply."""

    memory_mb: int = 4096  # RAM of everything in it, shared memory and tmpfs included (cgroup, or the watch)
    pids: int = 256  # processes and threads (cgroup pids.max, or RLIMIT_NPROC): a fork bomb stops here
    cpu_s: int = 1200  # CPU seconds per process (RLIMIT_CPU: SIGXCPU, then SIGKILL 2 s later)
    file_mb: int = 256  # largest single file (RLIMIT_FSIZE)
    tmpfs_mb: int = 512  # size of the writable scratch tmpfs (a jail's /tmp; HOME lives there too)
    cpus: float = 1.0  # CPUs it may use at once (cgroup cpu quota; a notebook runs on one thread: see
    # autograder.confine.env's XLA flags), with an equal share under contention

    def __post_init__(self) -> None:
        for name in ("memory_mb", "pids", "cpu_s", "file_mb", "tmpfs_mb", "cpus"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{type(self).__name__}.{name}={getattr(self, name)} should be > 0")
