"""What the judge's box costs: grading time per notebook and memory per worker, before and after it.

Run with `python -m course_tools.bench.judge_box --before DIR [--after DIR2]` (DIR: a checkout of the commit before
the box, e.g. `git worktree add /tmp/base 3910b2c`; DIR2, default this checkout, one with it); writes
bench/judge-box.json with its provenance.

Method: one worker's grading of the LAB·1.1 and LAB·1.2 solution notebooks, one after the other, in a fresh
process started in each checkout (this virtualenv; the checkout's own `autograder` and `pallas_course` come first
on sys.path), `pipeline.grade_one` as `course grade` calls it. Runs alternate before, after, before, after, ...
(paired: a pair shares the machine's state), after one untimed warm-up of each; reported: medians of N of each
measure and the median of the per-pair differences. Measures per run: wall clock per notebook; CPU seconds of the
grader process, and of its children (the jails, and after the box the judges); the grader's peak RSS (the
worker's memory: before, it held the rebuilds, interpret-mode runs and libtpu itself) and, after, each judge's
peak RSS (VmHWM, read just before it is closed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from course_tools.bench.common import grading_provenance
from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT

OUT = REPO_ROOT / "bench" / "judge-box.json"
LABS = ("lab-1.1-first-kernels", "lab-1.2-tiled-matmul")
N = 3

# Runs in a fresh process in one checkout: grade each notebook, report times, CPU and memory as JSON.
WORKER = r"""
import json, os, resource, sys, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
peaks = []
try:
    from autograder.judge import box as judge_box
    real_close = judge_box.Box.close
    def close(self):
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
            peaks.append(int(next(l.split()[1] for l in status.splitlines() if l.startswith("VmHWM"))) / 1024)
        except (OSError, StopIteration):
            pass
        real_close(self)
    judge_box.Box.close = close
except ImportError:
    judge_box = None
try:
    from autograder.jail.limits import Limits
    from autograder.steps.pipeline import grade_one
except ImportError:   # the layout before autograder/ was split by where code runs
    from autograder.limits import Limits
    from autograder.pipeline import grade_one
import autograder
assert autograder.__file__.startswith(os.getcwd()), autograder.__file__
out = []
for path in sys.argv[1:]:
    t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = grade_one(Path(path), limits=Limits(wall_s=900))
    c1, k1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out.append({"notebook": Path(path).name, "wall_s": time.perf_counter() - t0,
                "grader_cpu_s": c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime,
                "children_cpu_s": k1.ru_utime + k1.ru_stime - k0.ru_utime - k0.ru_stime,
                "score": r.score, "max_score": r.max_score})
print(json.dumps({"notebooks": out, "grader_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "judge_peak_rss_mb": peaks, "boxed": judge_box is not None}))
"""


def _run(checkout: Path, notebooks: list[Path]) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, *map(str, notebooks)],
        cwd=checkout,
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"grading in {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True).stdout.strip()


def _summary(runs: list[dict]) -> dict:
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    per = {}
    for i, lab in enumerate(LABS):
        per[lab] = {
            key: med([r["notebooks"][i][key] for r in runs]) for key in ("wall_s", "grader_cpu_s", "children_cpu_s")
        }
        # the grader's own CPU and its waited children's: the judges (the jails' agents run under bubblewrap, whose
        # children are reaped inside the jail's pid namespace, so their CPU is not in either number)
        per[lab]["grader_and_judge_cpu_s"] = med(
            [r["notebooks"][i]["grader_cpu_s"] + r["notebooks"][i]["children_cpu_s"] for r in runs]
        )
        per[lab]["score"] = f"{runs[0]['notebooks'][i]['score']}/{runs[0]['notebooks'][i]['max_score']}"
    judges = [p for r in runs for p in r["judge_peak_rss_mb"]]
    return {
        "per_notebook": per,
        "grader_peak_rss_mb": med([r["grader_peak_rss_mb"] for r in runs]),
        "judge_peak_rss_mb": med(judges) if judges else None,
        "samples": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the commit before the judge's box")
    parser.add_argument("--after", type=Path, default=REPO_ROOT, help="a checkout with the box (default: this one)")
    parser.add_argument("-n", type=int, default=N)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs of each first (0: caches already warm)")
    args = parser.parse_args()
    import tempfile

    import nbformat

    with tempfile.TemporaryDirectory() as tmp:
        notebooks = []
        for lab in LABS:
            path = Path(tmp) / f"{lab}.ipynb"
            nbformat.write(filled_in(lab), path)
            notebooks.append(path)
        load_before = list(os.getloadavg())
        for _ in range(args.warmup):  # file caches, bytecode
            _run(args.before, notebooks), _run(args.after, notebooks)
        before, after = [], []
        for i in range(args.n):
            before.append(_run(args.before, notebooks))
            after.append(_run(args.after, notebooks))
            print(
                f"pair {i + 1}: before {[round(n['wall_s'], 1) for n in before[-1]['notebooks']]} s, after "
                f"{[round(n['wall_s'], 1) for n in after[-1]['notebooks']]} s",
                file=sys.stderr,
            )
        load_after = list(os.getloadavg())
    diffs = {
        lab: round(
            statistics.median(
                [a["notebooks"][i]["wall_s"] - b["notebooks"][i]["wall_s"] for a, b in zip(after, before)]
            ),
            3,
        )
        for i, lab in enumerate(LABS)
    }
    report = {
        "benchmark": "the judge's box: grading time per notebook and memory per worker, before and after",
        "method": (
            f"{args.n} pairs, alternated (before, after), after {args.warmup} untimed warm-up run(s) of each: one fresh worker process "
            f"per run grades the {' and '.join(LABS)} solution notebooks one after the other "
            "(autograder.pipeline.grade_one, as course grade does; jailed); medians of each measure, and the median "
            "of the per-pair differences of wall clock (after minus before); CPU: the grader's own and its waited "
            "children's (the judges); the jails' CPU is in neither (bubblewrap reaps them inside the jail's pid "
            "namespace)"
        ),
        "before": {"commit": _git(args.before, "rev-parse", "HEAD"), **_summary(before)},
        "after": {"commit": _git(args.after, "rev-parse", "HEAD"), **_summary(after)},
        "after_minus_before_wall_s_median_of_pairs": diffs,
        "after_minus_before_cpu_s_median_of_pairs": {
            lab: round(
                statistics.median(
                    [
                        a["notebooks"][i]["grader_cpu_s"]
                        + a["notebooks"][i]["children_cpu_s"]
                        - b["notebooks"][i]["grader_cpu_s"]
                        - b["notebooks"][i]["children_cpu_s"]
                        for a, b in zip(after, before)
                    ]
                ),
                3,
            )
            for i, lab in enumerate(LABS)
        },
        "provenance": grading_provenance(
            load_average_at_start=load_before,
            load_average_at_end=load_after,
            note="2 vCPUs shared with 4 other engineers' builds and tests: noisy; "
            "CPU seconds are steadier than wall clock",
        ),
    }
    OUT.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
