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


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                   if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        kb = int(next(l.split()[1] for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")))
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return {"cpu_count": os.cpu_count(), "cpu_model": cpu, "memory": mem, "machine": platform.machine(),
            "system": f"{platform.system()} {platform.release()}"}


def python_bytecode() -> str:
    """Whether this Python reads its imports' bytecode from .pyc files (as a pip install leaves them) or compiles
    every import at each start (an install without them, PYTHONDONTWRITEBYTECODE set): seconds per process, in
    every grading time (`make bytecode` writes them)."""
    import jax

    cached = Path(importlib.util.cache_from_source(jax.__file__)).is_file()
    return ("cached: .pyc beside the sources" if cached else "not cached: each process compiles its imports") + \
        (" (PYTHONDONTWRITEBYTECODE set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "")


def grading_provenance(**extra: object) -> dict:
    """What a grading time depends on, beside `extra`: the checkout's provenance (commit, versions, device), the
    grading tools' versions, whether imports' bytecode is cached, the machine and its load."""
    from course_tools.bench_records import provenance

    prov = provenance().model_dump(mode="json")
    prov.update(nbgrader_version=dist_version("nbgrader"), papermill_version=dist_version("papermill"),
                python_bytecode=python_bytecode(), load_average_1_5_15=list(os.getloadavg()), **machine(), **extra)
    return prov
