"""One memory, one pids and (where the controller is there) one cpu cgroup (v1) per confined child, made below
this process's own groups, so an outer limit still holds. Where they are not writable (a container without
cgroup permission, or COURSE_JAIL_NO_CGROUPS=1) the child's memory is watched instead (autograder.confine.memory)
and its processes are bounded by the rlimit of its uid (autograder.confine.chain)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from autograder.confine.limits import ProcessLimits

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "course-jail-"  # every child's groups, the judge's too: course-jail-<grader>-<start>-<hex>
NO_CGROUPS_ENV = "COURSE_JAIL_NO_CGROUPS"  # "1": limits as where cgroups are not writable (the platforms' rule)


def cgroup_dir(controller: str) -> Path:
    """This process's own group of `controller` (children nest below it, so an outer limit still holds)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(","):
                return CGROUP_ROOT / controller / path.lstrip("/")
    except OSError:
        pass
    return CGROUP_ROOT / controller


def _controller_writable(controller: str) -> bool:
    return os.access(cgroup_dir(controller), os.W_OK) and (cgroup_dir(controller) / "cgroup.procs").exists()


def writable() -> bool:
    """Whether children get memory and pids cgroups here (never with COURSE_JAIL_NO_CGROUPS=1)."""
    if os.environ.get(NO_CGROUPS_ENV) == "1":
        return False
    return all(_controller_writable(c) for c in ("memory", "pids"))


def cpu_writable() -> bool:
    return _controller_writable("cpu") and (cgroup_dir("cpu") / "cpu.cfs_quota_us").exists()


class Cgroups:
    """One memory, one pids and (where the controller is there) one cpu group for a child, made below this
    process's own groups."""

    def __init__(self, name: str, limits: ProcessLimits) -> None:
        self.dirs: dict[str, Path] = {}
        try:
            for controller in ("memory", "pids"):
                d = cgroup_dir(controller) / name
                d.mkdir()
                self.dirs[controller] = d
            mem = self.dirs["memory"]
            limit = str(limits.memory_mb * 2**20)
            (mem / "memory.limit_in_bytes").write_text(limit)
            if (mem / "memory.memsw.limit_in_bytes").exists():  # RAM + swap: no escape into swap
                (mem / "memory.memsw.limit_in_bytes").write_text(limit)
            (self.dirs["pids"] / "pids.max").write_text(str(limits.pids))
        except OSError:
            self.remove()
            raise
        if cpu_writable():
            self._cpu(name, limits)

    def _cpu(self, name: str, limits: ProcessLimits) -> None:
        """Every child the same weight, whatever its number of processes, and a ceiling of `limits.cpus`. Best
        effort: where the host refuses (a parent's smaller quota), the memory and pids limits still hold."""
        cpu = cgroup_dir("cpu") / name
        try:
            cpu.mkdir()
            self.dirs["cpu"] = cpu
            (cpu / "cpu.shares").write_text("1024")
            period = int((cpu / "cpu.cfs_period_us").read_text())
            (cpu / "cpu.cfs_quota_us").write_text(str(max(1000, int(limits.cpus * period))))
        except (OSError, ValueError):
            pass  # a group made but not limited still only holds this child; kill() removes it either way

    @classmethod
    def adopt(cls, controller: str, path: Path) -> Cgroups:
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
            for _ in range(200):  # rmdir is refused until the last killed process is gone
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
