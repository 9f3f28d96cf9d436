"""Class-sized grading: `course grade --jobs 2` against plain nbgrader (and the course's own nbgrader door), same
scores student by student. Two classes: 20 different LAB·1.1 submissions (the solution, the corpus's alternatives and
mutants, the stub, partial and differently spelled answers), and 10 students each handing in all five labs.

Run with `python -m course_tools.bench.grading_batch [--class NAME] [--repeats N]` (or `make bench-batch`); writes
bench/grading-batch.json with its provenance (machine, load, versions, commit, sandbox). Each time is the wall clock
(and CPU seconds) of the whole command in a fresh process, start-up included, as an instructor sees it; the
commands alternate, `--repeats` rounds (default 1: a plain nbgrader run of a class takes minutes).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from course_tools.bench.common import dist_version, grading_provenance, run_counting_cpu
from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT, manifest

OUT = REPO_ROOT / "bench" / "grading-batch.json"
LAB = "lab-1.1-first-kernels"
ADD_CALL = "    return pl.pallas_call(\n        add_kernel,"
# The plain nbgrader course: nbgrader's own Execute (the hidden tests inline, run in the notebook's kernel by the
# checks' in-process path), no jail, no compile step (libtpu hidden from its kernel), nothing of this course's
# nbgrader door. What an instructor would run without this course's grader.
PLAIN_CONFIG = """c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "labs"
c.ClearSolutions.code_stub = {{"python": {stub!r}}}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
c.OverwriteCells.add_missing_cells = True
c.Execute.timeout = {timeout}
"""
NO_LIBTPU = "raise ImportError('libtpu hidden: the plain nbgrader reference has no compile step')\n"


def _edited(lab_id: str, edits: dict[str, str]) -> nbformat.NotebookNode | None:
    """The filled-in notebook with text edits (tests/mutants' form: old -> new, anywhere in its code); None
    when an edit's text is not there."""
    nb = filled_in(lab_id)
    for old, new in edits.items():
        cell = next((c for c in nb.cells if c.cell_type == "code" and old in c.source), None)
        if cell is None:
            return None
        cell.source = cell.source.replace(old, new)
    return nb


def lab_variants(lab_id: str) -> list[tuple[str, nbformat.NotebookNode]]:
    """Different submissions of one lab: the solution, the corpus's alternatives (right) and mutants (wrong;
    tests/mutants), the untouched stub. Mutants the compile rule alone catches are left out: the plain nbgrader
    reference compiles nothing, so they would score differently there by design."""
    import importlib

    out = [("solution", filled_in(lab_id))]
    try:
        corpus = importlib.import_module(f"tests.mutants.{lab_id[:7].replace('-', '_').replace('.', '_')}")
    except ImportError:
        corpus = None
    for alt in getattr(corpus, "ALTERNATIVES", []):
        if (nb := _edited(lab_id, alt.edits)) is not None:
            out.append((f"alternative: {alt.name}", nb))
    for m in getattr(corpus, "MUTANTS", []):
        if any("compile" in t for t in m.targets.values()):
            continue
        if (nb := _edited(lab_id, m.edits)) is not None:
            out.append((f"mutant: {m.name}", nb))
    out.append(("stub", nbformat.read(REPO_ROOT / manifest().lab(lab_id).notebook, as_version=4)))
    return out


def class_of_20() -> list[tuple[str, dict[str, nbformat.NotebookNode]]]:
    """20 different LAB·1.1 submissions: the variants, then partial answers (one kernel written, the other a stub)
    and right answers written differently."""
    stub = nbformat.read(REPO_ROOT / manifest().lab(LAB).notebook, as_version=4)
    variants = lab_variants(LAB)
    solution = filled_in(LAB)
    for kernel in ("add", "transpose"):  # only this kernel written
        nb = copy.deepcopy(stub)
        for cell, done in zip(nb.cells, solution.cells):
            if cell.cell_type == "code" and f"def {kernel}" in done.source:
                cell.source = done.source
        variants.append((f"only {kernel} written", nb))
    spelled = [
        (
            "add via jnp.add in a jax.jit",
            {"o_ref[...] = x_ref[...] + y_ref[...]": "o_ref[...] = jax.jit(jnp.add)(x_ref[...], y_ref[...])"},
        ),
        ("transpose via swapaxes", {"o_ref[...] = x_ref[...].T": "o_ref[...] = jnp.swapaxes(x_ref[...], 0, 1)"}),
        ("add with a print in its cell", {ADD_CALL: "    print('add', x.shape)\n" + ADD_CALL}),
        ("transpose kernel via jnp.transpose", {"o_ref[...] = x_ref[...].T": "o_ref[...] = jnp.transpose(x_ref[...])"}),
    ]
    for what, edits in spelled:
        if len(variants) < 20 and (nb := _edited(LAB, edits)) is not None:
            variants.append((what, nb))
    return [(what, {LAB: nb}) for what, nb in variants[:20]]


def class_of_10() -> list[tuple[str, dict[str, nbformat.NotebookNode]]]:
    """10 students, each with all five labs; student i hands in variant i of each lab (cycling)."""
    labs = [lab.id for lab in manifest().labs if lab.tests]
    variants = {lab: lab_variants(lab) for lab in labs}
    return [
        (
            ", ".join(f"{lab[:7]}: {variants[lab][i % len(variants[lab])][0]}" for lab in labs),
            {lab: variants[lab][i % len(variants[lab])][1] for lab in labs},
        )
        for i in range(10)
    ]


def write_class(submitted: Path, students: list[tuple[str, dict[str, nbformat.NotebookNode]]]) -> dict[str, str]:
    """The students in nbgrader's layout; returns student -> what they handed in."""
    stage = manifest().stage.id
    kinds: dict[str, str] = {}
    for n, (what, notebooks) in enumerate(students, 1):
        student = f"student-{n:02d}"
        for lab_id, nb in notebooks.items():
            path = submitted / student / stage / f"{lab_id}.ipynb"
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
        kinds[student] = what
    return kinds


def _nbgrader_scores(root: Path) -> dict[str, float]:
    """Each student's autograded points over every notebook, from the gradebook at `root`."""
    from nbgrader.api import Gradebook

    tests = {t.id for lab in manifest().labs for t in lab.tests}
    stage = manifest().stage.id
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return {
            s.student.id: sum(g.score for nb in s.notebooks for g in nb.grades if g.name in tests)
            for s in gb.find_assignment(stage).submissions
        }


def _course_scores(out: Path) -> dict[str, float]:
    scores: dict[str, float] = {}
    for r in json.loads((out / "results.json").read_text()):
        student = r["submission"].split("/")[0]
        scores[student] = scores.get(student, 0.0) + r["score"]
    return scores


def _course_reasons(out: Path, students: set[str]) -> dict[str, list]:
    """What course grade said about `students` (the ones whose scores differ), for the record."""
    found: dict[str, list] = {}
    for r in json.loads((out / "results.json").read_text()):
        student = r["submission"].split("/")[0]
        if student in students:
            found.setdefault(student, []).append(
                {
                    "lab": r["lab"],
                    "error": r["error"],
                    "notes": r["notes"],
                    "failed": [t["message"] for t in r["tests"] if not t["passed"]],
                }
            )
    return found


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
    return {
        "alone_s": round(alone, 2),
        "pair_s": [round(t, 2) for t in pair],
        "speedup_of_two": round(2 * alone / max(pair), 2),
    }


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict:
    load = os.getloadavg()[0]
    run, wall, cpu, how = run_counting_cpu(cmd, cwd, env)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2) if cpu is not None else None,
        "cpu_counted_by": how,
        "load_1min_before": round(load, 2),
        "load_1min_after": round(os.getloadavg()[0], 2),
    }


def _plain_course(root: Path, submitted: Path) -> tuple[list[str], dict[str, str]]:
    """A plain nbgrader course at `root` (its own nbgrader_config.py, solutions/ with the hidden tests inline):
    the autograde command and its environment (libtpu hidden: no compile step)."""
    from autograder.doors.nbgrader_setup import CODE_STUB
    from autograder.jail.limits import CELL_TIMEOUT_S

    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    (root / "nbgrader_config.py").write_text(
        PLAIN_CONFIG.format(root=str(root), stub=CODE_STUB, timeout=CELL_TIMEOUT_S)
    )
    hide = root / "no-libtpu"
    hide.mkdir()
    (hide / "libtpu.py").write_text(NO_LIBTPU)
    env = {
        **os.environ,
        "PYTHONPATH": f"{hide}{os.pathsep}{REPO_ROOT}",
        "JAX_PLATFORMS": "cpu",
        # nbgrader runs `alembic` by name: this Python's scripts first, the virtualenv activated or not
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PALLAS_COURSE_MODE": "tpu-interpret",
    }
    nbg = [sys.executable, "-m", "nbgrader"]
    made = subprocess.run(
        nbg + ["generate_assignment", manifest().stage.id, "--force"], cwd=root, env=env, capture_output=True, text=True
    )
    if made.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{made.stdout[-2000:]}\n{made.stderr[-3000:]}")
    shutil.copytree(submitted, root / "submitted")
    return nbg + ["autograde", manifest().stage.id, "--force"], env


def measure_class(
    name: str,
    students: list[tuple[str, dict[str, nbformat.NotebookNode]]],
    *,
    repeats: int,
    jobs: int,
    door: bool,
    sweep: tuple[int, ...] = (),
    spawned: bool = False,
) -> dict:
    """One class through plain nbgrader (serial), the course's nbgrader door (serial, if `door`) and `course grade
    --jobs N` (and at each --jobs of `sweep`), alternated `repeats` times; scores compared student by student."""
    bindir = Path(sys.executable).parent
    stage = manifest().stage.id
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        tmp_path = Path(tmp)
        submitted = tmp_path / "submitted"
        kinds = write_class(submitted, students)
        plain_cmd, plain_env = _plain_course(tmp_path / "plain", submitted)
        commands: dict[str, tuple[list[str], Path, dict[str, str] | None]] = {
            "plain_nbgrader": (plain_cmd, tmp_path / "plain", plain_env),
            "course_grade": (
                [
                    str(bindir / "course"),
                    "grade",
                    str(submitted),
                    "--jobs",
                    str(jobs),
                    "--force",
                    "--out",
                    str(tmp_path / "grades"),
                ],
                REPO_ROOT,
                None,
            ),
        }
        if spawned:  # the same command with each judge a Python of its own (no zygote): what the zygote saves
            commands["course_grade_spawned_judges"] = (
                [
                    str(bindir / "course"),
                    "grade",
                    str(submitted),
                    "--jobs",
                    str(jobs),
                    "--force",
                    "--out",
                    str(tmp_path / "grades-spawned"),
                ],
                REPO_ROOT,
                {**os.environ, "COURSE_JUDGE_ZYGOTE": "0"},
            )
        for k in sweep:
            if k != jobs:
                commands[f"course_grade_jobs_{k}"] = (
                    [
                        str(bindir / "course"),
                        "grade",
                        str(submitted),
                        "--jobs",
                        str(k),
                        "--force",
                        "--out",
                        str(tmp_path / f"grades-{k}"),
                    ],
                    REPO_ROOT,
                    None,
                )
        if door:
            root = tmp_path / "door"
            shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
            flags = [f"--CourseDirectory.root={root}", f"--db=sqlite:///{root / 'gradebook.db'}"]
            nbg = [sys.executable, "-m", "nbgrader"]
            subprocess.run(
                nbg + ["generate_assignment", stage, "--force"] + flags, cwd=REPO_ROOT, capture_output=True, check=True
            )
            shutil.copytree(submitted, root / "submitted")
            commands["nbgrader_door"] = (nbg + ["autograde", stage, "--force"] + flags, REPO_ROOT, None)
        runs: dict[str, list[dict]] = {k: [] for k in commands}
        for _ in range(repeats):
            for key, (cmd, cwd, env) in commands.items():
                runs[key].append(_timed(cmd, cwd, env))
                if key.startswith("course_grade") and runs[key][-1]["cpu_counted_by"] == "children's rusage":
                    # its workers, and the judges' zygotes, are processes it never waits for
                    runs[key][-1].update(cpu_s=None, cpu_s_why_none="forkserver workers are outside its rusage")
                print(f"{name}: {key} {runs[key][-1]['wall_s']:.1f} s", file=sys.stderr)
        scores = {
            "plain_nbgrader": _nbgrader_scores(tmp_path / "plain"),
            "course_grade": _course_scores(tmp_path / "grades"),
        }
        if door:
            scores["nbgrader_door"] = _nbgrader_scores(tmp_path / "door")
        differ = {s for s in kinds if len({sc.get(s) for sc in scores.values()}) > 1}
        reasons = _course_reasons(tmp_path / "grades", differ)
    n_notebooks = sum(len(nbs) for _, nbs in students)
    median = {k: statistics.median(r["wall_s"] for r in v) for k, v in runs.items()}
    pairs = [p["wall_s"] / c["wall_s"] for p, c in zip(runs["plain_nbgrader"], runs["course_grade"])]
    cpu_pairs = [
        c["cpu_s"] / p["cpu_s"]
        for p, c in zip(runs["plain_nbgrader"], runs["course_grade"])
        if c["cpu_s"] is not None and p["cpu_s"]
    ]
    cpu = {
        k: statistics.median(r["cpu_s"] for r in v) for k, v in runs.items() if all(r["cpu_s"] is not None for r in v)
    }
    by_jobs = {jobs: median["course_grade"], **{k: median[f"course_grade_jobs_{k}"] for k in sweep if k != jobs}}
    out = {
        "class": name,
        "students": len(students),
        "notebooks": n_notebooks,
        "submissions": {s: kinds[s] for s in sorted(kinds)},
        "scores_identical": not differ,
        "differences": reasons,
        "scores": {s: {k: sc.get(s) for k, sc in scores.items()} for s in sorted(kinds)},
        "runs": runs,
        "per_notebook_s": {k: round(v / n_notebooks, 2) for k, v in median.items()},
        "cpu_per_notebook_s": {k: round(v / n_notebooks, 2) for k, v in cpu.items()},
        "cpu_course_grade_over_plain_nbgrader": round(statistics.median(cpu_pairs), 3) if cpu_pairs else None,
        "throughput_notebooks_per_min_by_jobs": {
            str(k): round(60 * n_notebooks / v, 2) for k, v in sorted(by_jobs.items())
        },
        "speedup_over_plain_nbgrader": round(statistics.median(pairs), 2),
        "pair_ratios_plain_over_course": [round(r, 2) for r in pairs],
    }
    if door:
        out["speedup_over_nbgrader_door"] = round(
            statistics.median(d["wall_s"] / c["wall_s"] for d, c in zip(runs["nbgrader_door"], runs["course_grade"])), 2
        )
    return out


def run(
    repeats: int = 1,
    jobs: int = 2,
    classes: tuple[str, ...] = ("lab-1.1 x 20", "5 labs x 10"),
    sweep: tuple[int, ...] = (),
    students: int | None = None,
    door: bool = True,
    spawned: bool = False,
) -> dict:
    from autograder.jail.limits import sandbox_status

    parallelism = [cpu_parallelism()]
    results = []
    if "lab-1.1 x 20" in classes:
        results.append(
            measure_class(
                "lab-1.1 x 20",
                class_of_20()[:students],
                repeats=repeats,
                jobs=jobs,
                door=door,
                sweep=sweep,
                spawned=spawned,
            )
        )
    if "5 labs x 10" in classes:
        results.append(
            measure_class(
                "5 labs x 10",
                class_of_10()[:students],
                repeats=repeats,
                jobs=jobs,
                door=False,
                sweep=sweep,
                spawned=spawned,
            )
        )
    parallelism.append(cpu_parallelism())
    prov = grading_provenance(
        dask_version=dist_version("dask"), distributed_version=dist_version("distributed"), sandbox=sandbox_status()
    )
    # Uncommitted edits to what decides a score (other files, e.g. the site, don't change this benchmark).
    dirty = subprocess.run(
        [
            "git",
            "-C",
            str(REPO_ROOT),
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            "autograder",
            "solutions",
            "labs",
            "course.yml",
            ":(glob)pallas_course/*.py",
        ],
        capture_output=True,
        text=True,
    ).stdout
    prov["scoring_files_dirty"] = [line[3:] for line in dirty.splitlines()]
    return {
        "benchmark": "grading a class: course grade --jobs N vs plain nbgrader (and the course's nbgrader door)",
        "method": (
            f"each class written in nbgrader's layout; wall clock and CPU seconds (`cpu_counted_by`: a cpuacct "
            "cgroup of the command's own where it can be made, so the workers, jails, judges and zygotes it "
            "starts count; else the children's rusage) of each "
            f"whole command in a fresh process, start-up included, {repeats} alternated round(s) (plain "
            "nbgrader, course grade, the door); speedup = median over rounds of plain nbgrader's time / course "
            "grade's; 1-minute load average around each run. plain nbgrader: its own Execute, the hidden "
            "tests inline (the checks' in-process path in the notebook's kernel), no jail, no compile step "
            "(libtpu hidden from its kernel), so mutants only the compile rule catches are not in the classes. "
            "Kernels in TPU interpret mode on the CPU."
        ),
        "commands": {
            "plain_nbgrader": "nbgrader autograde stage-1 --force (a plain nbgrader course: serial)",
            "nbgrader_door": "nbgrader autograde stage-1 --force (this course's nbgrader_config.py: serial)",
            "course_grade": f"course grade submitted/ --jobs {jobs} --force",
        },
        "classes": results,
        "targets": {"speedup_over_plain_nbgrader_at_jobs_2": 4.5, "cpu_course_grade_over_plain_nbgrader": 0.4},
        "cpu_parallelism": {"what": cpu_parallelism.__doc__.split(";")[0].strip(), "before_and_after": parallelism},
        "provenance": prov,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools.bench.grading_batch", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--class",
        dest="classes",
        action="append",
        choices=["lab-1.1 x 20", "5 labs x 10"],
        help="only this class (repeatable; default both)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--sweep", default="", help="also course grade at these --jobs, e.g. 1,2,4 (throughput by jobs)"
    )
    parser.add_argument("--students", type=int, default=None, help="only the first N students of each class")
    parser.add_argument("--no-door", action="store_true", help="leave out the course's nbgrader door")
    parser.add_argument(
        "--spawned-judges",
        action="store_true",
        help="also course grade with each judge a Python of its own (COURSE_JUDGE_ZYGOTE=0)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    report = run(
        args.repeats,
        args.jobs,
        tuple(args.classes or ("lab-1.1 x 20", "5 labs x 10")),
        tuple(int(k) for k in args.sweep.split(",") if k),
        args.students,
        not args.no_door,
        args.spawned_judges,
    )
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for c in report["classes"]:
        print(
            f"{c['class']}: scores identical: {c['scores_identical']}; course grade "
            f"{c['speedup_over_plain_nbgrader']}x plain nbgrader (per notebook: {c['per_notebook_s']}); CPU "
            f"{c['cpu_course_grade_over_plain_nbgrader']}x plain nbgrader's (per notebook: {c['cpu_per_notebook_s']}); "
            f"notebooks/min by --jobs: {c['throughput_notebooks_per_min_by_jobs']}"
        )
    print(f"wrote {args.out}")
    if not all(c["scores_identical"] for c in report["classes"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
