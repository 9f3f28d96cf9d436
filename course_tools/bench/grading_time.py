"""How long grading takes: `course grade`, `nbgrader autograde` and plain papermill on the same notebooks.

Run with `python -m course_tools.bench.grading_time [--only TEXT]` (or `make bench-grading`); writes
bench/grading-time.json with its provenance (`--only` re-times the matching cases and keeps the others).
Each number is the wall-clock time of the whole command in a fresh process (start-up included, as an
instructor sees it): one untimed warm-up run, then the median of N.
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
from dataclasses import dataclass
from pathlib import Path

import nbformat

from course_tools.bench.common import grading_provenance, timed
from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT, LabSpec, manifest

OUT = REPO_ROOT / "bench" / "grading-time.json"
N = 5  # LAB·1.1 cases (issue 2 asks for the median of 5)
N_STAGE = 3  # whole-stage cases take 20-90 s a run
STUDENT = "bench-student"


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    command: list[str]
    n: int


TMP = "{tmp}"  # how a command shows the run's temporary folder: a path of this machine, gone after the run


def _measure(case: Case, root: Path) -> dict:
    timed(case.command, REPO_ROOT)  # warm-up: file caches, compiled bytecode
    samples = [timed(case.command, REPO_ROOT) for _ in range(case.n)]
    print(
        f"{case.name}: median {statistics.median(samples):.2f} s of {case.n} {[round(s, 2) for s in samples]}",
        file=sys.stderr,
    )
    shown = " ".join(Path(c).name if i == 0 else c for i, c in enumerate(case.command)).replace(str(root), TMP)
    return {
        "case": case.name,
        "what": case.what,
        "command": shown,
        "n": case.n,
        "median_s": round(statistics.median(samples), 3),
        "min_s": round(min(samples), 3),
        "max_s": round(max(samples), 3),
        "samples_s": [round(s, 3) for s in samples],
    }


def _submission(folder: Path, labs: list[LabSpec]) -> Path:
    """One student's notebooks, answered as in solutions/, in nbgrader's submitted/<student>/<stage>/."""
    folder = folder / STUDENT / manifest().stage.id
    folder.mkdir(parents=True)
    for lab in labs:
        nbformat.write(filled_in(lab.id), folder / Path(lab.notebook).name)
    return folder


def _cases(root: Path) -> list[Case]:
    bindir = Path(sys.executable).parent
    course = str(bindir / "course")
    stage = manifest().stage.id
    labs = [lab for lab in manifest().labs if lab.tests and (REPO_ROOT / lab.source).exists()]
    one = _submission(root / "submitted", labs[:1]) / Path(labs[0].notebook).name
    nbgrader = [sys.executable, "-m", "nbgrader"]
    flags = [f"--CourseDirectory.root={root}", f"--db=sqlite:///{root / 'gradebook.db'}"]
    cases = [
        Case(
            "course grade · LAB·1.1",
            "one LAB·1.1 submission graded by `course grade`",
            [course, "grade", str(one), "--out", str(root / "g1"), "--force"],
            N,
        ),
        Case(
            "papermill alone · LAB·1.1",
            "the same notebook executed by papermill, no grading",
            [
                str(bindir / "papermill"),
                "--no-progress-bar",
                str(one),
                str(root / "pm.ipynb"),
                "-p",
                "MODE",
                "tpu-interpret",
            ],
            N,
        ),
        Case(
            "nbgrader autograde · LAB·1.1",
            "the same submission through `nbgrader autograde` (one student)",
            nbgrader + ["autograde", stage, "--student", STUDENT, "--force"] + flags,
            N,
        ),
    ]
    for name, chosen, jobs in (
        ("labs 1.1-1.3", labs[:3], 1),
        ("labs 1.1-1.3", labs[:3], 2),
        (f"all {len(labs)} labs", labs, 2),
    ):
        folder = _submission(root / f"stage-{len(chosen)}-{jobs}", chosen)
        how = "serial" if jobs == 1 else f"{jobs} notebooks at a time"
        cases.append(
            Case(
                f"course grade · stage 1, {name}, --jobs {jobs}",
                f"one student's {', '.join(l.code for l in chosen)} in one `course grade` ({how})",
                [
                    course,
                    "grade",
                    str(folder.parent.parent),
                    "--out",
                    str(root / f"g{len(chosen)}-{jobs}"),
                    "--force",
                    "--jobs",
                    str(jobs),
                ],
                N_STAGE,
            )
        )
    return cases


COMPILE_CASE = "compile step · LAB·1.1"
N_COMPILE = 3


def _compile_step(n: int = N_COMPILE) -> dict:
    """What the real TPU compiler adds to grading one LAB·1.1 notebook: the seconds spent compiling (every
    compile-rule test on the solution, course_tools.bench.compile_step), in n fresh processes."""
    runs = []
    for _ in range(n):
        out = subprocess.run(
            [sys.executable, "-m", "course_tools.bench.compile_step", "LAB·1.1"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
            env={**os.environ, "JAX_PLATFORMS": "cpu", "PALLAS_COURSE_MODE": "tpu-interpret"},
        )
        if out.returncode != 0:
            raise RuntimeError(f"compile step failed:\n{out.stderr[-3000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    samples = [r["compile_s"] for r in runs]
    print(f"{COMPILE_CASE}: median {statistics.median(samples):.2f} s of {n} {samples}", file=sys.stderr)
    return {
        "case": COMPILE_CASE,
        "what": "seconds the grade spends in the real TPU compiler (libtpu, deviceless) for "
        f"one LAB·1.1 notebook: {runs[0]['compiles']} compiles ({', '.join(runs[0]['tests'])} on the solution, "
        f"chips {', '.join(runs[0]['chips'])}), each process fresh (its first compile builds the topology)",
        "command": "python -m course_tools.bench.compile_step LAB·1.1",
        "n": n,
        "compiles": runs[0]["compiles"],
        "median_s": round(statistics.median(samples), 3),
        "min_s": min(samples),
        "max_s": max(samples),
        "samples_s": samples,
        "first_compile_s": [r["first_compile_s"] for r in runs],
        "libtpu": runs[0]["libtpu"],
    }


def run(only: str = "") -> list[dict]:
    """Time every case (or those whose name contains `only`)."""
    compile_case = [_compile_step()] if only in COMPILE_CASE else []
    return _run_commands(only) + compile_case


def _run_commands(only: str) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        root = Path(tmp)
        cases = [c for c in _cases(root) if only in c.name]
        if any("nbgrader" in c.name for c in cases):  # nbgrader needs the generated assignment
            shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "nbgrader",
                    "generate_assignment",
                    manifest().stage.id,
                    "--force",
                    f"--CourseDirectory.root={root}",
                    f"--db=sqlite:///{root / 'gradebook.db'}",
                ],
                cwd=REPO_ROOT,
                capture_output=True,
                check=True,
            )
        return [_measure(c, root) for c in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="re-time only the cases whose name contains this text")
    args = parser.parse_args()
    results = run(args.only)
    report = json.loads(OUT.read_text()) if args.only and OUT.exists() else {"results": []}
    kept = [r for r in report["results"] if r["case"] not in {x["case"] for x in results}]
    order = [c.name for c in _cases_names()] + [COMPILE_CASE]
    report.update(
        benchmark="grading time",
        method=f"wall clock of the whole command in a fresh process, 1 untimed warm-up then the median of "
        f"{N} (LAB·1.1 cases) or {N_STAGE} (whole-stage cases); kernels in TPU interpret mode on the CPU; "
        f"{TMP} in a command: the run's temporary folder",
        results=sorted(kept + results, key=lambda r: order.index(r["case"]) if r["case"] in order else 99),
    )
    report.setdefault("provenance", {})[args.only or "all"] = grading_provenance()
    OUT.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT}")


def _cases_names() -> list[Case]:
    with tempfile.TemporaryDirectory() as tmp:
        return _cases(Path(tmp))


if __name__ == "__main__":
    main()
