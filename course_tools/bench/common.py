"""What both grading benchmarks share: timing a whole command, the machine it ran on, package versions."""
from __future__ import annotations

import importlib.metadata
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
