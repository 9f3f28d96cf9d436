"""Where one grading's time goes: `course grade` of the LAB·1.1 solution, phase by phase, against papermill alone.

Run with `python -m course_tools.bench.grading_profile [--runs N]` (or `make bench-profile`); writes
bench/grading-profile.json with its provenance. The two commands alternate (papermill, then course grade), N
times each after one untimed run of each, in fresh processes; each course grade runs with COURSE_GRADE_TIMELINE
set (autograder.timeline: spans the grader, its threads and the judge write, and the jail agent's own start-up
told in its hello) and each command's CPU seconds are those of everything it started (a cpuacct cgroup per
command where one can be made: the jail, the judge and the judges' zygote included; else its children's rusage).
The phases on the critical path are the grading process's main thread in time order; what other threads or
processes do meanwhile is listed beside them. Medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import nbformat

from course_tools.bench.common import grading_provenance, run_counting_cpu
from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT, manifest

OUT = REPO_ROOT / "bench" / "grading-profile.json"
LAB = "lab-1.1-first-kernels"
RUNS = 5
# Spans that hold others on the main thread: their own time is what their children leave.
PARENTS = {"step grade", "step execute"}


def _timed(cmd: list[str], env: dict[str, str]) -> dict:
    """Wall clock and CPU seconds (everything the command started: course_tools.bench.common.run_counting_cpu) of
    one fresh command."""
    load, start = os.getloadavg()[0], time.time()
    run, wall, cpu, how = run_counting_cpu(cmd, REPO_ROOT, env, timeout=1800)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return {
        "start": start,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_counted_by": how,
        "load_1min_before": load,
        "load_1min_after": os.getloadavg()[0],
    }


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phases(events: list[dict], started: float, ended: float) -> dict:
    """One run's timeline, read: the main thread's phases in order (gaps named by what follows them), what
    ran off the critical path, and the sums by kind (cells, hidden tests and what they spent: jail calls,
    rebuilds, runs of the rebuild, compiles)."""
    grader = next(e["pid"] for e in events if e["event"] == "course grade process until its command")
    main = sorted((e for e in events if e["pid"] == grader and e["thread"] == "MainThread"), key=lambda e: e["start"])
    # the main thread's outermost spans, in order; the parents (grade, execute) are split into their children
    top: list[dict] = []
    for e in main:
        if e["event"] in PARENTS or (top and e["end"] <= top[-1]["end"] and top[-1]["event"] not in PARENTS):
            continue
        top.append(e)
    path: list[dict] = []
    at = started
    for e in top:
        if e["start"] - at > 0.005:
            path.append({"phase": f"(between) before {e['event']}", "wall_s": e["start"] - at})
        name = e["event"] + (f" {e['cell']}" if "cell" in e else "") + (f" {e['test']}" if "test" in e else "")
        path.append({"phase": name, "wall_s": e["end"] - e["start"], "cpu_s": e.get("cpu_s")})
        at = max(at, e["end"])
    path.append({"phase": "(after the last span) exit", "wall_s": ended - at})
    sums: dict[str, dict] = defaultdict(lambda: {"n": 0, "wall_s": 0.0, "cpu_s": 0.0})
    for e in events:
        where = (
            "jail"
            if e.get("where") == "jail"
            else "grader"
            if e["pid"] == grader and e["thread"] == "MainThread"
            else "grader, other thread"
            if e["pid"] == grader
            else "other process (judge, worker)"
        )
        key = f"{e['event']} [{where}]"
        sums[key]["n"] += 1
        sums[key]["wall_s"] += e["end"] - e["start"]
        sums[key]["cpu_s"] += e.get("cpu_s") or 0.0
    end = [e for e in events if e["event"] == "jail cpu at the end"]
    jail_cpu = max((e.get("jail_cpu_s", 0.0) for e in end), default=None)
    judge_cpu = max((e.get("judge_cpu_s", 0.0) for e in end), default=None)
    agent = next((e for e in events if e["event"] == "jail agent"), None)
    jail_start = next((e for e in events if e["event"] in ("jail and judge start", "jail start")), None)
    detail = {}
    if agent and jail_start:
        detail = {
            "bubblewrap and the jail's Python until the agent's first line": agent["start"] - jail_start["start"],
            "the agent's imports (IPython, jax, Pallas, the course helpers) until ready": agent["end"] - agent["start"],
            "the agent's CPU until ready": agent.get("cpu_s"),
        }
    return {
        "critical_path": path,
        "sums": dict(sums),
        "jail_cpu_s": jail_cpu,
        "judge_cpu_s": judge_cpu,
        "jail_start": detail,
    }


def _median_path(runs: list[dict]) -> list[dict]:
    """The phases of the runs, by name and position, with their median wall and CPU seconds."""
    names = [p["phase"] for p in runs[0]["profile"]["critical_path"]]
    out = []
    for i, name in enumerate(names):
        rows = [p for r in runs for p in r["profile"]["critical_path"] if p["phase"] == name]
        walls = [p["wall_s"] for p in rows]
        cpus = [p["cpu_s"] for p in rows if p.get("cpu_s") is not None]
        out.append(
            {
                "phase": name,
                "n": len(rows),
                "median_wall_s": round(statistics.median(walls), 3),
                **({"median_cpu_s": round(statistics.median(cpus), 3)} if cpus else {}),
            }
        )
    return out


def _median_sums(runs: list[dict]) -> dict:
    keys = sorted({k for r in runs for k in r["profile"]["sums"]})
    out = {}
    for k in keys:
        rows = [r["profile"]["sums"].get(k, {"n": 0, "wall_s": 0.0, "cpu_s": 0.0}) for r in runs]
        out[k] = {
            "n": statistics.median(x["n"] for x in rows),
            "median_wall_s": round(statistics.median(x["wall_s"] for x in rows), 3),
            "median_cpu_s": round(statistics.median(x["cpu_s"] for x in rows), 3),
        }
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["median_wall_s"]))


def run(runs: int = RUNS) -> dict:
    bindir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        root = Path(tmp)
        nb = root / "submitted" / "bench-student" / manifest().stage.id / f"{LAB}.ipynb"
        nb.parent.mkdir(parents=True)
        nbformat.write(filled_in(LAB), nb)
        papermill = [
            str(bindir / "papermill"),
            "--no-progress-bar",
            str(nb),
            str(root / "pm.ipynb"),
            "-p",
            "MODE",
            "tpu-interpret",
        ]
        course = [str(bindir / "course"), "grade", str(nb), "--out", str(root / "g"), "--force", "--json"]
        env = dict(os.environ)
        _timed(papermill, env)  # warm-up: file caches
        _timed(course, env)
        pairs = []
        for i in range(runs):
            pm = _timed(papermill, env)
            timeline = root / f"timeline-{i}.jsonl"
            cg = _timed(course, {**env, "COURSE_GRADE_TIMELINE": str(timeline)})
            events = _events(timeline)
            cg["profile"] = phases(events, cg["start"], cg["start"] + cg["wall_s"])
            cg["events"] = len(events)
            scores = json.loads((root / "g" / "results.json").read_text())
            cg["score"] = [r["score"] for r in scores]
            pairs.append({"papermill": pm, "course_grade": cg})
            print(
                f"papermill {pm['wall_s']:.2f} s, course grade {cg['wall_s']:.2f} s (load {pm['load_1min_before']:.1f})",
                file=sys.stderr,
            )
    cgs = [p["course_grade"] for p in pairs]
    pms = [p["papermill"] for p in pairs]
    med = lambda xs: round(statistics.median(xs), 3)  # noqa: E731 - one local rounding
    return {
        "benchmark": "grading profile: one LAB·1.1 notebook",
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
        "commands": {
            "course_grade": "course grade <nb> --out <tmp> --force --json (COURSE_GRADE_TIMELINE set)",
            "papermill": "papermill --no-progress-bar <nb> <out> -p MODE tpu-interpret",
        },
        "runs": runs,
        "course_grade": {
            "median_wall_s": med([c["wall_s"] for c in cgs]),
            "median_cpu_s": med([c["cpu_s"] for c in cgs]),
            "wall_s": [round(c["wall_s"], 3) for c in cgs],
            "cpu_s": [round(c["cpu_s"], 3) for c in cgs],
            "median_jail_cpu_s": med([c["profile"]["jail_cpu_s"] or 0 for c in cgs]),
            "median_judge_cpu_s": med([c["profile"]["judge_cpu_s"] or 0 for c in cgs]),
            "scores": [c["score"] for c in cgs],
        },
        "papermill": {
            "median_wall_s": med([p["wall_s"] for p in pms]),
            "median_cpu_s": med([p["cpu_s"] for p in pms]),
            "wall_s": [round(p["wall_s"], 3) for p in pms],
            "cpu_s": [round(p["cpu_s"], 3) for p in pms],
        },
        "overhead_s": {
            "median_of_pairs_wall": med([c["wall_s"] - p["wall_s"] for c, p in zip(cgs, pms)]),
            "median_of_pairs_cpu": med([c["cpu_s"] - p["cpu_s"] for c, p in zip(cgs, pms)]),
            "target_wall": 1.5,
        },
        "critical_path": _median_path(cgs),
        "jail_start": {
            k: med([c["profile"]["jail_start"].get(k) or 0 for c in cgs])
            for k in (cgs[0]["profile"]["jail_start"] or {})
        },
        "by_kind": _median_sums(cgs),
        "load_1min": [
            [round(p["papermill"]["load_1min_before"], 2), round(p["course_grade"]["load_1min_before"], 2)]
            for p in pairs
        ],
        "provenance": grading_provenance(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.bench.grading_profile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    report = run(args.runs)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    o = report["overhead_s"]
    print(
        f"course grade {report['course_grade']['median_wall_s']} s, papermill {report['papermill']['median_wall_s']} s: "
        f"+{o['median_of_pairs_wall']} s wall, +{o['median_of_pairs_cpu']} s CPU (medians of pairs); wrote {args.out}"
    )


if __name__ == "__main__":
    main()
