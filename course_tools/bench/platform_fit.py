"""Does grading fit the platforms' machines? One notebook of each lab (its solution, filled in) through the
Gradescope door (`python -m autograder.doors.gradescope`, a fresh process as on the platform, `--jobs 1`:
one submission, one jail), in a cgroup of its own standing in for the container, at 1 CPU and at Gradescope's
default ½ CPU (cpu.cfs_quota_us).

Per lab and CPU share: the wall time of the whole process (start-up included), its CPU seconds (grader and
jail: cpuacct), and the container's memory: the peak of its anonymous and shared memory (sampled every 0.1 s from the
cgroup's memory.stat: what a memory limit cannot reclaim) and the cgroup's own max_usage_in_bytes (page cache
included, which the kernel drops before it kills). Writes bench/platform-fit.json with its provenance.

    python -m course_tools.bench.platform_fit [--labs lab-1.1-first-kernels,...] [--cpus 1,0.5]

Needs root and cgroup v1's memory and cpu controllers (this project's machines).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from autograder.course_manifest import REPO_ROOT, manifest
from course_tools.bench.common import grading_provenance
from course_tools.demo import filled_in

OUT = REPO_ROOT / "bench" / "platform-fit.json"
CGROUP = Path("/sys/fs/cgroup")


def _group(controller: str, name: str) -> Path:
    d = CGROUP / controller / name
    d.mkdir()
    return d


def _anon_bytes(memory: Path) -> int:
    stat = dict(line.split() for line in (memory / "memory.stat").read_text().splitlines())
    return int(stat.get("total_rss", 0)) + int(stat.get("total_shmem", 0))


def measure(lab_id: str, cpus: float, memory_mb: int | None = None) -> dict:
    """One solution notebook through the Gradescope door, in a fresh memory+cpu cgroup (limited to `memory_mb`,
    RAM and swap, as a container's limit would)."""
    root = Path(tempfile.mkdtemp(prefix="course-fit-"))
    name = f"course-fit-{os.getpid()}-{lab_id}-{cpus}".replace(".", "_")
    memory, cpu, cpuacct = _group("memory", name), _group("cpu", name), _group("cpuacct", name)
    try:
        period = int((cpu / "cpu.cfs_period_us").read_text())
        (cpu / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
        if memory_mb is not None:
            (memory / "memory.limit_in_bytes").write_text(str(memory_mb * 2**20))
            if (memory / "memory.memsw.limit_in_bytes").exists():
                (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_mb * 2**20))
        (root / "submission").mkdir()
        lab = manifest().lab(lab_id)
        nbformat.write(filled_in(lab_id), root / "submission" / Path(lab.notebook).name)
        env = {**os.environ, "GRADESCOPE_ROOT": str(root)}
        join = (
            f'echo $$ > {memory}/cgroup.procs && echo $$ > {cpu}/cgroup.procs && '
            f'echo $$ > {cpuacct}/cgroup.procs && exec "$@"'
        )
        start = time.perf_counter()
        process = subprocess.Popen(
            ["/bin/sh", "-c", join, "fit", sys.executable, "-m", "autograder.doors.gradescope", "--lab", lab_id],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        peak = [0, 0]  # the container's, the jail's (its own memory group, below the container's)

        def sample() -> None:
            while process.poll() is None:
                try:
                    peak[0] = max(peak[0], _anon_bytes(memory))
                    for jail in memory.glob("course-jail-*"):
                        peak[1] = max(peak[1], _anon_bytes(jail))
                except (OSError, ValueError):
                    pass
                time.sleep(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, err = process.communicate(timeout=1800)
        wall = time.perf_counter() - start
        sampler.join()
        try:
            results = json.loads((root / "results" / "results.json").read_text())
        except (OSError, ValueError):
            results = {"score": None}
        return {
            "lab": lab_id,
            "cpus": cpus,
            "memory_limit_mb": memory_mb,
            "wall_s": round(wall, 2),
            "cpu_s": round(int((cpuacct / "cpuacct.usage").read_text()) / 1e9, 2),
            "peak_anon_mb": round(peak[0] / 2**20),
            "jail_peak_anon_mb": round(peak[1] / 2**20),
            "max_usage_mb": round(int((memory / "memory.max_usage_in_bytes").read_text()) / 2**20),
            "score": results["score"],
            "max_score": lab.autograded_max,
            "jail": results.get("extra_data", {}).get("jail"),
            "exit": process.returncode,
            "stderr_tail": err[-300:] if process.returncode else "",
        }
    finally:
        for d in (memory, cpu, cpuacct):
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labs", default="", help="comma-separated lab ids (default: every lab with tests)")
    parser.add_argument("--cpus", default="1,0.5", help="CPU shares to measure at (cgroup cfs quota)")
    parser.add_argument(
        "--limited",
        default="lab-1.2-tiled-matmul:0.5:768",
        help="LAB:CPUS:MB runs under a container's memory limit too (comma-separated; default: the "
        "largest lab at Gradescope's default ½ vCPU and 768 MB)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    labs = [l for l in args.labs.split(",") if l] or [l.id for l in manifest().labs if l.tests]
    shares = [float(c) for c in args.cpus.split(",")]
    load_before = list(os.getloadavg())
    rows = []
    for lab_id in labs:
        for cpus in shares:
            row = measure(lab_id, cpus)
            print(json.dumps(row), file=sys.stderr)
            rows.append(row)
    for spec in filter(None, args.limited.split(",")):
        lab_id, cpus, mb = spec.split(":")
        row = measure(lab_id, float(cpus), int(mb))
        print(json.dumps(row), file=sys.stderr)
        rows.append(row)
    record = {
        "what": "one solution notebook per lab through the Gradescope door (python -m autograder.doors.gradescope), "
        "a fresh process in its own memory+cpu cgroup standing in for the platform's container, --jobs 1",
        "method": "wall: perf_counter around the process; cpu: the cgroup's cpuacct.usage (grader and jail); "
        "peak_anon_mb: max of the cgroup's total_rss + total_shmem sampled every 0.1 s (jail_peak_anon_mb: "
        "the same of the jail's own memory group, below it); max_usage_mb: memory.max_usage_in_bytes "
        "(page cache included); cpus: cpu.cfs_quota_us / cpu.cfs_period_us; memory_limit_mb: memory.limit_in_bytes "
        "and memsw of the cgroup (a container's limit), none where null",
        "rows": rows,
        "provenance": grading_provenance(
            load_average_before_1_5_15=load_before,
            note="2 cores shared with other engineers' runs: wall times are upper bounds; "
            "CPU seconds and memory are not load-dependent",
        ),
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
