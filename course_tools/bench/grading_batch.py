"""Class-sized grading: 20 LAB·1.1 submissions (right and wrong) through serial `nbgrader autograde` and through
`course grade --jobs 2`. Both must give every student the same score; the number is the throughput ratio.

Run with `python -m course_tools.bench.grading_batch` (or `make bench-batch`); writes bench/grading-batch.json with its
provenance (machine, load, versions, commit, sandbox). Each time is the wall clock of the whole command in a
fresh process, start-up included, as an instructor sees it: `nbgrader autograde <stage> --force` over all 20,
and `course grade submitted/ --jobs 2 --force`. The two commands alternate, `--repeats` times each (default
3), after one untimed run of each; the ratio is the median over (nbgrader, course grade) pairs, whose runs
share the machine's state (on a shared machine, other users' load comes and goes).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from course_tools.bench.common import dist_version, grading_provenance, timed
from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT, manifest

OUT = REPO_ROOT / "bench" / "grading-batch.json"
LAB = "lab-1.1-first-kernels"
ADD_CALL = "    return pl.pallas_call(\n        add_kernel,"

# (how many, what, edits to the solution): 10 right, 10 wrong in five different ways.
MIX = [
    (10, "solution", {}),
    (3, "transpose out index map (i, j)", {"transpose": ("lambda i, j: (j, i)", "lambda i, j: (i, j)")}),
    (3, "add kernel subtracts", {"add_kernel": ("x_ref[...] + y_ref[...]", "x_ref[...] - y_ref[...]")}),
    (2, "transpose kernel copies its block", {"transpose_kernel": ("x_ref[...].T", "x_ref[...]")}),
    (2, "add bypasses Pallas (x + y in XLA)", {}),   # the edit spans cells: see write_class
]


def write_class(submitted: Path) -> dict[str, str]:
    """20 students in nbgrader's layout; returns student -> what their notebook is."""
    stage = manifest().stage.id
    kinds: dict[str, str] = {}
    n = 0
    for count, what, edits in MIX:
        for _ in range(count):
            n += 1
            student = f"student-{n:02d}"
            nb = filled_in(LAB, edits)
            if what.startswith("add bypasses"):
                for cell in nb.cells:
                    if ADD_CALL in cell.source:
                        cell.source = cell.source.replace(ADD_CALL, "    return x + y\n" + ADD_CALL)
            path = submitted / student / stage / f"{LAB}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
            kinds[student] = what
    return kinds


def _nbgrader_scores(root: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    lab = manifest().lab(LAB)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {s.student.id: sum(g.score for g in gb.find_submission_notebook(LAB, manifest().stage.id,
                                                                               s.student.id).grades
                                  if g.name in {t.id for t in lab.tests})
                for s in gb.find_assignment(manifest().stage.id).submissions}


def _course_scores(out: Path) -> dict[str, float]:
    return {r["submission"].split("/")[0]: r["score"] for r in json.loads((out / "results.json").read_text())}


def _course_reasons(out: Path, students: set[str]) -> dict[str, dict]:
    """What course grade said about `students` (the ones whose scores differ), for the record."""
    return {r["submission"].split("/")[0]: {"error": r["error"], "notes": r["notes"],
                                             "failed": [t["message"] for t in r["tests"] if not t["passed"]]}
            for r in json.loads((out / "results.json").read_text()) if r["submission"].split("/")[0] in students}


SPIN = "import time\nt = time.perf_counter()\nx = 0\nfor i in range(20_000_000):\n    x += i * i\nprint(time.perf_counter() - t)"


def cpu_parallelism() -> dict:
    """What the machine gives two processes at once: the same pure-Python loop alone, then two copies side by
    side; speedup = 2 x alone / slower of the pair (2.0: two whole cores; a VM's vCPUs that share a physical
    core, or a busy host, give less). `--jobs 2` cannot beat serial grading by more than this."""
    def spin(n: int) -> list[float]:
        procs = [subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True) for _ in range(n)]
        return [float(p.communicate()[0]) for p in procs]

    alone = spin(1)[0]
    pair = spin(2)
    return {"alone_s": round(alone, 2), "pair_s": [round(t, 2) for t in pair],
            "speedup_of_two": round(2 * alone / max(pair), 2)}


def run(repeats: int = 3, jobs: int = 2) -> dict:
    from autograder.jail.limits import sandbox_status

    bindir = Path(sys.executable).parent
    stage = manifest().stage.id
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        root = Path(tmp) / "course"
        shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
        nbg = [sys.executable, "-m", "nbgrader"]
        flags = [f"--CourseDirectory.root={root}", f"--db=sqlite:///{root / 'gradebook.db'}"]
        timed(nbg + ["generate_assignment", stage, "--force"] + flags, REPO_ROOT)
        kinds = write_class(root / "submitted")
        nbgrader_cmd = nbg + ["autograde", stage, "--force"] + flags
        course_cmd = [str(bindir / "course"), "grade", str(root / "submitted"), "--jobs", str(jobs), "--force",
                      "--out", str(Path(tmp) / "grades")]
        timed(nbgrader_cmd, REPO_ROOT)     # warm-up: file caches, compiled bytecode
        timed(course_cmd, REPO_ROOT)
        times: dict[str, list[float]] = {"nbgrader": [], "course": []}
        loads: list[dict] = []
        parallelism = [cpu_parallelism()]
        for _ in range(repeats):
            for key, cmd in (("nbgrader", nbgrader_cmd), ("course", course_cmd)):
                before = os.getloadavg()[0]
                times[key].append(timed(cmd, REPO_ROOT))
                loads.append({"run": key, "load_1min_before": round(before, 2),
                              "load_1min_after": round(os.getloadavg()[0], 2)})
            print(f"nbgrader {times['nbgrader'][-1]:.1f} s, course grade {times['course'][-1]:.1f} s", file=sys.stderr)
        parallelism.append(cpu_parallelism())
        theirs, ours = _nbgrader_scores(root), _course_scores(Path(tmp) / "grades")
        differ = _course_reasons(Path(tmp) / "grades", {s for s in kinds if theirs.get(s) != ours.get(s)})
    median = {k: statistics.median(v) for k, v in times.items()}
    # Each nbgrader run and the course grade run right after it share the machine's state (other users'
    # load comes and goes): the ratio is the median of these pairs' ratios.
    pair_ratios = [a / b for a, b in zip(times["nbgrader"], times["course"])]
    n = len(kinds)
    prov = grading_provenance(dask_version=dist_version("dask"), distributed_version=dist_version("distributed"),
                              sandbox=sandbox_status())
    # Uncommitted edits to what decides a score (other files, e.g. the site, don't change this benchmark).
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no", "--",
                            "autograder", "solutions", "labs", "course.yml", ":(glob)pallas_course/*.py"],
                           capture_output=True, text=True).stdout
    prov["scoring_files_dirty"] = [line[3:] for line in dirty.splitlines()]
    return {
        "benchmark": "grading a class: course grade --jobs N vs nbgrader autograde",
        "method": (f"{n} LAB·1.1 submissions in nbgrader's layout; wall clock of each whole command in a fresh "
                   f"process (start-up included); 1 untimed run of each, then {repeats} pairs (nbgrader, then "
                   "course grade); throughput_ratio = median over pairs of nbgrader time / course grade time "
                   "(ratio_of_medians beside it); 1-minute load average around each run. Kernels in TPU "
                   "interpret mode on the CPU."),
        "commands": {"nbgrader": "nbgrader autograde stage-1 --force (serial: nbgrader has no parallel autograde)",
                     "course": f"course grade submitted/ --jobs {jobs} --force"},
        "submissions": {what: sum(1 for k in kinds.values() if k == what) for what in dict.fromkeys(kinds.values())},
        "scores_identical": theirs == ours,
        "differences": differ,
        "scores": {s: {"kind": kinds[s], "nbgrader": theirs.get(s), "course_grade": ours.get(s)} for s in sorted(kinds)},
        "nbgrader_s": [round(t, 2) for t in times["nbgrader"]],
        "course_grade_s": [round(t, 2) for t in times["course"]],
        "nbgrader_per_submission_s": round(median["nbgrader"] / n, 2),
        "course_grade_per_submission_s": round(median["course"] / n, 2),
        "throughput_ratio": round(statistics.median(pair_ratios), 2),
        "pair_ratios": [round(r, 2) for r in pair_ratios],
        "ratio_of_medians": round(median["nbgrader"] / median["course"], 2),
        "target_ratio": 1.8,
        "load": loads,
        "cpu_parallelism": {"what": cpu_parallelism.__doc__.split(";")[0].strip(), "before_and_after": parallelism},
        "provenance": prov,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m course_tools.bench.grading_batch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    report = run(args.repeats, args.jobs)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"scores identical: {report['scores_identical']}; throughput ratio {report['throughput_ratio']}x "
          f"(nbgrader {report['nbgrader_per_submission_s']} s, course grade "
          f"{report['course_grade_per_submission_s']} s per submission); wrote {args.out}")
    if not report["scores_identical"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
