"""What both grading benchmarks share: timing a whole command, the machine it ran on, package versions, and
their provenance."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import time
from pathlib import Path


def timed(cmd: list[str], cwd: Path) -> float:
    """The wall clock of `cmd` in a fresh process, start-up included; raises with its output if it fails."""
    start = time.perf_counter()
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600)
    elapsed = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return elapsed


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def run_counting_cpu(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 7200
) -> tuple[subprocess.CompletedProcess, float, float | None, str]:
    """Run `cmd`; return (the run, its wall clock, the CPU seconds of everything it started, how they were
    counted). Counted by a cpuacct cgroup of its own where one can be made (cgroup v1, root): every process the
    command starts is born in it and stays there (the jails and judges move to cgroups of other controllers only),
    so forkserver workers, jails, judges and the judges' zygote count even when nobody waits for them; read once
    the last of them has ended (at most 60 s after the command). Else the children's rusage, which misses what the
    command never waits for (None then for a command known to leave such processes: the caller says)."""
    import resource
    import secrets

    group = CPUACCT / f"course-bench-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        group.mkdir()
    except OSError:
        group = None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if group is not None:  # the shell joins the group, then becomes the command: nothing starts outside it
        cmd = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *cmd]
    run = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    wall = time.perf_counter() - start
    if group is None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return run, wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), "children's rusage"
    deadline = time.monotonic() + 60
    while (group / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = len((group / "cgroup.procs").read_text().split())
    cpu = int((group / "cpuacct.usage").read_text()) / 1e9
    how = "a cpuacct cgroup of its own (everything it started)" + (
        f"; {left} process(es) still there after 60 s" if left else ""
    )
    if not left:
        group.rmdir()
    return run, wall, cpu, how


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(
            l.split(":", 1)[1].strip()
            for l in Path("/proc/cpuinfo").read_text().splitlines()
            if l.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        kb = int(next(l.split()[1] for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")))
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu,
        "memory": mem,
        "machine": platform.machine(),
        "system": f"{platform.system()} {platform.release()}",
    }


def python_bytecode() -> str:
    """Whether this Python reads its imports' bytecode from .pyc files (as a pip install leaves them) or compiles
    every import at each start (an install without them, PYTHONDONTWRITEBYTECODE set): seconds per process, in
    every grading time (`make bytecode` writes them)."""
    import jax

    cached = Path(importlib.util.cache_from_source(jax.__file__)).is_file()
    return ("cached: .pyc beside the sources" if cached else "not cached: each process compiles its imports") + (
        " (PYTHONDONTWRITEBYTECODE set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    )


def grading_provenance(**extra: object) -> dict:
    """What a grading time depends on, beside `extra`: the checkout's provenance (commit, versions, device), the
    grading tools' versions, whether imports' bytecode is cached, the machine and its load."""
    from course_tools.bench_records import provenance

    prov = provenance().model_dump(mode="json")
    prov.update(
        nbgrader_version=dist_version("nbgrader"),
        papermill_version=dist_version("papermill"),
        python_bytecode=python_bytecode(),
        load_average_1_5_15=list(os.getloadavg()),
        **machine(),
        **extra,
    )
    return prov
