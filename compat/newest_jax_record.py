"""Inside the newest-JAX root (compat/newest_jax.sh): run every solution notebook, the demo and the fast
tests, and write compat/newest-jax.json with the versions they ran on. Exits 1 when any step failed."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jax", "jaxlib", "libtpu", "numpy", "ml_dtypes", "tokamax", "nbgrader", "papermill", "pytest")
# The demo's scores, as tests/test_grade_cli.EXPECTED: a demo that exits 0 with every score 0 is no pass.
DEMO_EXPECTED = {"demo-solution": 6.0, "demo-stub": 0.0, "demo-wrong-transpose": 3.0}
# The one grading test of the fast files that needs a real jail (none can be made in a chroot: see below).
JAILED_TESTS = ("tests/test_grading_steps.py::test_end_to_end_through_the_jail",)


def _step(name: str, argv: list[str], timeout: int, keep_stdout: bool = False) -> dict[str, object]:
    t0 = time.perf_counter()
    stdout = ""
    try:
        run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        stdout = run.stdout
        shown = run.stderr if keep_stdout else run.stdout + run.stderr
        lines = shown.strip().splitlines()
        # The last lines, and every test pytest names as failed (its summary can be longer than the tail).
        failed = [l for l in lines[:-3] if l.startswith(("FAILED ", "ERROR "))]
        ok, tail = run.returncode == 0, failed + lines[-3:]
    except subprocess.TimeoutExpired:
        ok, tail = False, [f"timed out after {timeout} s"]
    print(f"{'ok ' if ok else 'FAIL'} {name} ({time.perf_counter() - t0:.0f} s)", flush=True)
    step: dict[str, object] = {"name": name, "ok": ok, "seconds": round(time.perf_counter() - t0, 1), "tail": tail}
    return step | ({"stdout": stdout} if keep_stdout else {})


def _demo_step() -> dict[str, object]:
    """`course grade --demo --no-jail`, passed only with the demo's expected scores."""
    out = tempfile.mkdtemp(prefix="newest-jax-demo-")
    step = _step(
        "course grade --demo --no-jail",
        ["course", "grade", "--demo", "--no-jail", "--json", "--out", out],
        900,
        keep_stdout=True,
    )
    try:
        scores = {r["submission"].split("/")[0]: r["score"] for r in json.loads(step.pop("stdout"))}
    except (ValueError, KeyError, TypeError) as e:
        scores = {"unreadable --json output": str(e)}
    step["scores"] = scores
    if scores != DEMO_EXPECTED:
        step["ok"] = False
        print(f"FAIL {step['name']}: scores {scores}", flush=True)
        step["tail"] = [*step["tail"], f"scores {scores}, expected {DEMO_EXPECTED}"]
    return step


def _xla_flags() -> dict[str, str | None]:
    """The XLA flags each step ran under. XLA aborts on a flag it does not know, so the jaxlib-0.10.2-only
    fast-compile flags (pallas_course.xla_flags.FAST_COMPILE_XLA_FLAGS) must be set nowhere here."""
    environment = os.environ.get("XLA_FLAGS")  # before the import below sets the grader's own
    from autograder.jail.agent_env import jail_env
    from pallas_course.xla_flags import fast_compile_xla_flags

    return {
        "environment (notebooks, demo, tests)": environment,
        "tests/conftest.py adds": fast_compile_xla_flags() or None,
        "graded notebook's process, and the grader's (running the rebuilt kernels)": jail_env()["XLA_FLAGS"],
    }


def _compile_step() -> tuple[dict[str, object], dict | None]:
    """The grade's compile step with this jax and its libtpu (compat/compile_report.py): per kernel and chip, and
    where it differs from the pinned set. A difference is recorded, not a failure; not running is a failure."""
    step = _step(
        "compile step (libtpu, deviceless)", [sys.executable, "compat/compile_report.py"], 900, keep_stdout=True
    )
    try:
        report = json.loads(step.pop("stdout").strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        step["ok"], report = False, None
        step["tail"] = [*step["tail"], f"unreadable report: {e}"]
    return step, report


def main() -> int:
    steps = []
    for nb in sorted((ROOT / "solutions").rglob("*.ipynb")):
        steps.append(
            _step(
                f"notebook {nb.relative_to(ROOT)}",
                [sys.executable, "-m", "papermill", "-p", "MODE", "tpu-interpret", str(nb), "/tmp/out.ipynb"],
                900,
            )
        )
    # --no-jail: the kernel refuses new user namespaces to a chrooted process, so no jail can be made in this
    # root; the jail itself is tested by the pinned set in CI. This checks that grading works on the newest jax.
    steps.append(_demo_step())
    tests = os.environ.get("FAST_TESTS", "").split()
    # No `unshare --mount-proc` here: inside a chroot it fails ("cannot change root filesystem propagation");
    # the fast tests list no processes.
    deselect = [a for t in JAILED_TESTS if t.split("::")[0] in tests for a in ("--deselect", t)]
    steps.append(
        _step("fast tests", [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests, *deselect], 1800)
    )
    compile_step, compile_report = _compile_step()
    steps.append(compile_step)
    marker = ROOT / ".commit"  # written by compat/newest_jax.sh: the copy has no .git
    lines = marker.read_text().splitlines() if marker.exists() else []
    commit, uncommitted = (lines[0] if lines else ""), lines[1:]
    record = {
        "what": "the course on the newest JAX: every solution notebook, the demo and the fast tests",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": (f"{commit} with uncommitted edits" if uncommitted else commit) or None,
        "uncommitted": uncommitted,  # `git status --porcelain` where the run was started: copied in too
        "python": platform.python_version(),
        "os": f"Debian {Path('/etc/debian_version').read_text().strip()} root (debootstrap), {platform.machine()}",
        "cpus": os.cpu_count(),
        "versions": {p: metadata.version(p) for p in PACKAGES},
        "xla_flags": _xla_flags(),
        "fast_tests_deselected": deselect[1::2],
        "fast_tests": tests,
        "steps": steps,
        # the grade's compile step on this jax (compat/compile_report.py): verdicts per kernel and chip, and where
        # they differ from the pinned jax 0.10.2 + libtpu 0.0.42.1
        "compile": compile_report,
        "ok": all(s["ok"] for s in steps),
    }
    (ROOT / "compat" / "newest-jax.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
