"""The grader is bounded per notebook, and set-up faults stop it instead of scoring anyone 0.

- A notebook of many small floods (cells each displaying ten 99,000-character outputs, every one under the
  per-field and per-cell caps) leaves the grader under a fixed memory bound and writes under a fixed size,
  whatever the number of cells (autograder.steps.execute.MAX_NOTEBOOK_OUTPUT), with the cut named in the feedback;
  and the run leaves no file in the temporary folder.
- A jail that cannot start stops `course grade` (also `--demo`) with bubblewrap's own words and a non-zero
  exit before anyone is scored; a jail whose Python would import other helpers than the grader's stops it too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder.jail import jails as jail
from autograder.steps.execute import MAX_NOTEBOOK_OUTPUT
from course_tools.cli import app
from autograder.course_manifest import REPO_ROOT, manifest

LAB = "lab-1.1-first-kernels"
STAGE = manifest().stage.id
FLOOD = "from IPython.display import display\nfor i in range(10):\n    display({'text/plain': 'x' * 99_000}, raw=True)"
CELLS = 120  # 119 MB of outputs in all; the bounds below do not depend on it

# Runs in a fresh process (its peak RSS is its own): grade the untouched stub, then the flood, and report.
GRADE_TWICE = """
import json, resource, sys
from pathlib import Path
from autograder.steps.pipeline import grade_one
from autograder.jail.limits import Limits
stub, flood, out = map(Path, sys.argv[1:4])
grade_one(stub, keep=out / "stub.ipynb", keep_full=out / "stub-full.ipynb", limits=Limits(wall_s=600))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = grade_one(flood, keep=out / "flood.ipynb", keep_full=out / "flood-full.ipynb", limits=Limits(wall_s=600))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "after_kb": after, "notes": r.notes, "score": r.score, "error": r.error}))
"""


@pytest.fixture(autouse=True)
def jail_available() -> None:
    problem = jail.jail_problem()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must be able to jail student code: {problem}")
        pytest.skip(problem)


def test_many_small_floods_leave_the_grader_bounded_and_no_temp_files(tmp_path: Path) -> None:
    lab = manifest().lab(LAB)
    folder = tmp_path / "submitted" / "flo" / STAGE
    folder.mkdir(parents=True)
    stub = folder.parent.parent / "stub" / STAGE / f"{LAB}.ipynb"
    stub.parent.mkdir(parents=True)
    release = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    nbformat.write(release, stub)
    flood = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    flood.cells[1:1] = [nbformat.v4.new_code_cell(FLOOD) for _ in range(CELLS)]
    nbformat.write(flood, folder / f"{LAB}.ipynb")
    out, temp = tmp_path / "out", tmp_path / "temp"
    out.mkdir()
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run(
        [sys.executable, "-c", GRADE_TWICE, str(stub), str(folder / f"{LAB}.ipynb"), str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # The cut, named where the instructor and the student read it
    assert any(f"limit of {MAX_NOTEBOOK_OUTPUT:,} characters" in n for n in report["notes"]), report
    executed = (out / "flood.ipynb").read_text()
    assert "[cut: the notebook's outputs passed the grader's limit" in executed
    # Fixed bounds, independent of CELLS: what is written, and the grader's memory beyond grading the stub
    written = sum(p.stat().st_size for p in out.glob("flood*.ipynb"))
    assert written < 2 * (MAX_NOTEBOOK_OUTPUT + 1_000_000), written
    grown_mb = (report["after_kb"] - report["before_kb"]) / 1024
    assert grown_mb < 150, report
    # Nothing left in the temporary folder (it used to keep a course-public-*.yml per run)
    assert sorted(p.name for p in temp.iterdir()) == []


def test_a_jail_that_cannot_start_is_each_submissions_result_never_the_batchs_end(monkeypatch, tmp_path: Path) -> None:
    """A Python the jail cannot run (here: a path that does not exist): every submission is still handled, each a
    grader failure with bubblewrap's message (never the notebook's fault; a re-run grades it again), results.json is
    written for all, and the exit says some could not be handled (3). (One jail's failed start used to end the
    batch: the submissions after it were not graded and no results file was written.)"""
    import json

    monkeypatch.setattr(sys, "executable", "/tmp/nowhere/bin/python")
    run = CliRunner().invoke(app, ["grade", "--demo", "--out", str(tmp_path / "out"), "--force"])
    assert run.exit_code == 3, run.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(results) == 3
    for r in results:
        assert (
            r["failed"].startswith(
                "the grader failed on this submission, not the notebook (the jail could not start the grading agent"
            )
            and "execvp /tmp/nowhere/bin/python" in r["failed"]
        )
        assert r["failed"].endswith("a re-run grades it again")


def test_a_jail_started_ahead_that_failed_is_started_again_for_its_submission(monkeypatch) -> None:
    """The jail started ahead while the submission before ran (120 busy processes of it delayed the hello) failed:
    the submission gets a jail started now, not the failure (autograder.session.warm)."""
    from autograder.failures import SetupFailed
    from autograder.jail.limits import Limits
    from autograder.session import warm

    class Fine:
        def restart_clock(self, deadline: float) -> None:
            self.deadline = deadline

    starts = []

    def start(limits, cell_timeout_s, jailed, wall_s):
        starts.append(wall_s)
        if len(starts) == 1:
            raise SetupFailed("the jail could not start the grading agent (no hello within 120 s)")
        return Fine()

    monkeypatch.setattr(warm, "_start", start)
    limits = Limits(wall_s=30)
    warm.start_ahead(limits)
    session = warm.take(limits, cell_timeout_s=limits.cell_timeout_s, jailed=True, deadline=1e9)
    assert isinstance(session, Fine) and len(starts) == 2
    warm.discard()


def test_helpers_other_than_the_graders_stop_the_grader(monkeypatch) -> None:
    """Where the jail's Python would import pallas_course from anywhere but the grader's own folder (here: the
    helpers bound where its PYTHONPATH does not look, so the venv's editable finder answers), the Session
    refuses to start, naming both."""
    import time

    from autograder.failures import SetupFailed
    from autograder.jail import agent_env
    from autograder.session import session as student

    for module in (agent_env, student):  # where the helpers are bound, and where the session expects them
        monkeypatch.setattr(module, "JAIL_HELPERS", "/opt/elsewhere/pallas_course")
    with pytest.raises(SetupFailed, match="not the grader's own helpers"):
        with student.Session(limits=jail.JailLimits(), cell_timeout_s=60, deadline=time.monotonic() + 120):
            pass


FORGE_DEEP = '''
import gc, struct
agent = next(o for o in gc.get_objects() if type(o).__name__ == "Agent")
deep = b"[" * 100_000 + b"]" * 100_000
agent.out.write(struct.pack(">Q", len(deep)) + deep)
agent.out.flush()
'''


def test_a_forged_frame_nested_100000_deep_is_a_zero_with_a_reason() -> None:
    """A cell writes a frame nested 100,000 deep on the agent's own pipe (RecursionError in the grader
    before): the run stops with the reason, the tests score 0 with it, and grading goes on (no exception)."""
    from autograder.steps.execute import execute
    from autograder.steps.restore import restore
    from autograder.jail.limits import Limits
    from course_tools.demo import filled_in

    lab = manifest().lab(LAB)
    nb = filled_in(LAB)
    nb.cells.insert(3, nbformat.v4.new_code_cell(FORGE_DEEP))
    restore(
        nb, nbformat.read(REPO_ROOT / lab.source, as_version=4), nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    )
    run = execute(nb, lab, limits=Limits(wall_s=300))
    assert run.stopped and "malformed answer" in run.stopped and "not JSON" in run.stopped, run.stopped
    tests = [
        c
        for c in run.notebook.cells
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")
    ]
    assert tests and all(c.outputs and c.outputs[0].output_type == "error" for c in tests)
