"""Bad and hostile submissions (tests/hostile.py): each gets its exact score and a reason through
`course grade --jobs 2`, and the same points test by test through `nbgrader autograde` (in CI the cases where
nbgrader's own path differs, NBGRADER_CI; the rest under -m slow and in `make configurations`); the batch and the
other students' results are untouched; nothing leaves the jail; nothing hidden reaches a student."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import nbformat
import pytest
from typer.testing import CliRunner

from course_tools.demo import filled_in
from autograder.steps.execute import execute
from autograder.jail.jails import jail_problem
from autograder.steps.restore import restore
from autograder.jail.limits import Limits
from course_tools.cli import app
from autograder.course_manifest import REPO_ROOT, manifest
from tests import hostile
from tests.nbgrader_course import generated_course, nbgrader

runner = CliRunner()
CASES = {h.student: h for h in hostile.build(None)}
# The two that hang are graded apart, under a short per-cell limit that keeps them cheap; every other case under
# nbgrader's own 120 s, so no verdict depends on how fast a loaded machine runs a cell (with 10 s for all, a cell
# or a judge's run that took 10 s under load cost points). --memory 2048 is far above a lab's needs and below the
# 6 GB bomb. The hangs' own right answers (hang-in-cell: 6/6) run without the visible check cells' work
# (hostile.py), so each of their requests stays far under 10 s.
HANGS = {"hang-in-cell", "hang-in-kernel"}
LIMITS = ["--timeout", "900", "--memory", "2048"]
HANG_LIMITS = ["--cell-timeout", "10", "--timeout", "200", "--memory", "2048"]
NBGRADER_LIMITS = ["--JailedExecute.wall_s=900", "--JailedExecute.memory_mb=2048"]
NBGRADER_HANG_LIMITS = ["--JailedExecute.timeout=10", "--JailedExecute.wall_s=200", "--JailedExecute.memory_mb=2048"]

if jail_problem() and os.environ.get("CI") != "true":
    pytest.skip(f"no jail on this machine: {jail_problem()}", allow_module_level=True)


class Listeners:
    """What a jailed notebook must never reach: a TCP and a UDP port on this host, a UNIX socket."""

    def __init__(self, tmp: Path) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.path = str(tmp / "grader.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.path)
        self.unix.listen()
        self.heard: list[str] = []
        for sock, kind in ((self.tcp, "tcp"), (self.unix, "unix")):
            threading.Thread(target=self._accept, args=(sock, kind), daemon=True).start()
        threading.Thread(target=self._datagrams, daemon=True).start()

    def _accept(self, sock: socket.socket, kind: str) -> None:
        while True:
            try:
                sock.accept()
            except OSError:
                return
            self.heard.append(kind)

    def _datagrams(self) -> None:
        while True:
            try:
                self.udp.recv(100)
            except OSError:
                return
            self.heard.append("udp")

    def close(self) -> None:
        for s in (self.tcp, self.udp, self.unix):
            s.close()


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    lis = Listeners(tmp_path_factory.mktemp("sockets"))
    yield lis
    lis.close()


@pytest.fixture(scope="module")
def submissions(tmp_path_factory: pytest.TempPathFactory, listeners: Listeners) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    hostile.build(root, port=listeners.port, socket_path=listeners.path)
    return root


def _split(submissions: Path, root: Path) -> tuple[Path, Path]:
    """The cases as two classes: those that hang, and the rest."""
    rest, hangs = root / "rest", root / "hangs"
    for student in CASES:
        shutil.copytree(submissions / student, (hangs if student in HANGS else rest) / student)
    return rest, hangs


@pytest.fixture(scope="module")
def graded(submissions: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """Every case through `course grade --jobs 2`: the hangs in a run of their own (`out` is the other run's)."""
    rest, hangs = _split(submissions, tmp_path_factory.mktemp("classes"))
    out, hang_out = tmp_path_factory.mktemp("grades"), tmp_path_factory.mktemp("grades-hangs")
    os.environ[hostile.SECRET_ENV] = "s3cret-of-the-grader"
    records = {}
    try:
        for folder, where, limits in ((rest, out, LIMITS), (hangs, hang_out, HANG_LIMITS)):
            result = runner.invoke(app, ["grade", str(folder), "--out", str(where), "--jobs", "2", "--json", *limits])
            assert result.exit_code == 0, result.output
            records.update({r["submission"].split("/")[0]: r for r in json.loads(result.stdout)})
    finally:
        del os.environ[hostile.SECRET_ENV]
    return records, out


# nbgrader's door in CI: the cases where its own path differs from `course grade`'s (nbgrader reads, restores,
# times out and records the notebook: corrupt files, deleted or renamed cells, retagged or rewritten tests, the
# per-cell limit, output volume). The attacks on the engine behind both doors (forged descriptions and values,
# primitives of its own, probes, network, processes, memory, start-up files) go through nbgrader under -m slow
# here and in `make configurations`' nbgrader row (tests/test_configurations.py), the whole corpus each.
NBGRADER_CI = {
    "ok-solution",
    "hang-in-cell",
    "hang-in-kernel",
    "crash-exit",
    "corrupt-truncated",
    "corrupt-binary",
    "other-lab",
    "deleted-cells",
    "renamed",
    "rewrite-tests",
    "skip-execution",
    "huge-output",
}


def _autograde(submissions: Path, course: Path, students: list[str]) -> dict[str, dict[str, float]]:
    """`students` through `nbgrader autograde` (one run, students one after another; the hangs in their own)."""
    from nbgrader.api import Gradebook

    course = generated_course(course)
    for student in students:
        shutil.copytree(submissions / student, course / "submitted" / student)
    runs = [(f"--CourseDirectory.student_id_exclude={','.join(sorted(HANGS))}", NBGRADER_LIMITS)]
    if HANGS & set(students):
        runs.append(("--student=hang-in-*", NBGRADER_HANG_LIMITS))
    for which, limits in runs:
        run = nbgrader(course, "autograde", manifest().stage.id, "--force", which, *limits)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            nb = gb.find_submission_notebook(hostile.LAB, manifest().stage.id, student)
            scores[student] = {g.name: g.score for g in nb.grades}
    return scores


@pytest.fixture(scope="module")
def autograded(submissions: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    return _autograde(submissions, tmp_path_factory.mktemp("course"), sorted(NBGRADER_CI & set(CASES)))


@pytest.fixture(scope="module")
def autograded_rest(submissions: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, float]]:
    return _autograde(submissions, tmp_path_factory.mktemp("course-rest"), sorted(set(CASES) - NBGRADER_CI))


def _reasons(record: dict) -> list[str]:
    return [record.get("error") or ""] + [t["message"] for t in record["tests"]]


@pytest.mark.parametrize("student", list(CASES))
def test_each_gets_its_score_and_reason(graded, student: str) -> None:
    records, _ = graded
    case, record = CASES[student], records[student]
    assert record["score"] == case.score, (case.what, record)
    assert any(re.search(case.reason, r) for r in _reasons(record)), (case.reason, _reasons(record))


def _same_scores(records: dict, autograded: dict[str, dict[str, float]], student: str) -> None:
    lab = manifest().lab(hostile.LAB)
    mine = {t["name"]: t["points"] for t in records[student]["tests"]}
    theirs = {t.id: autograded[student].get(t.id) for t in lab.tests}
    assert theirs == mine, student


@pytest.mark.parametrize("student", sorted(NBGRADER_CI & set(CASES)))
def test_nbgrader_gives_the_same_scores(graded, autograded, student: str) -> None:
    """Both front doors enter one engine: the same score for every test, under attack too."""
    _same_scores(graded[0], autograded, student)


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(set(CASES) - NBGRADER_CI))
def test_nbgrader_gives_the_same_scores_under_the_engines_attacks(graded, autograded_rest, student: str) -> None:
    _same_scores(graded[0], autograded_rest, student)


def test_the_ci_slice_of_nbgrader_cases_is_of_the_corpus() -> None:
    assert NBGRADER_CI <= set(CASES) and HANGS <= NBGRADER_CI


def test_the_batch_is_untouched(graded, listeners: Listeners) -> None:
    """All submissions came back; the solution beside them has full marks; nothing was reached, written or
    left running outside the jails."""
    records, _ = graded
    assert set(records) == set(CASES)
    assert records["ok-solution"]["score"] == 6
    assert listeners.heard == []
    assert not (REPO_ROOT / "autograder" / "pwned.py").exists()
    assert not Path("/var/tmp/course-hostile-pwned").exists()
    left = subprocess.run(["pgrep", "-f", hostile.MARKER], capture_output=True, text=True).stdout.split()
    assert not left, f"processes a notebook started outlived its jail: {left}"


def _cell_output(out: Path, student: str, needle: str) -> str:
    nb = nbformat.read(out / "instructor" / student / "stage-1" / hostile.NAME, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if needle in c.source for o in c.get("outputs", []))


def test_nothing_outside_the_jail_is_reachable(graded) -> None:
    """Solutions, the key, the checks, the gradebook, the rubrics (the jail's course.yml is the public one),
    /root, the grader's environment, other processes and sockets, the repository: all denied; the notebook
    runs as nobody."""
    _, out = graded
    text = _cell_output(out, "probe-outside", "def probe")
    assert "ALLOWED" not in text, text
    assert text.count("denied") == 13, text
    assert "uid 65534" in text
    net = _cell_output(out, "network", "def probe")
    assert "ALLOWED" not in net and net.count("denied") == 4, net


def test_planted_files_and_processes_die_with_the_jail(graded) -> None:
    """A startup file planted in one jail's HOME forges nothing in the next; a fork bomb forges nothing."""
    _, out = graded
    planted = _cell_output(out, "startup-file", "00-forge.py")
    assert "planted" in planted  # inside its own tmpfs: allowed, and gone with the jail
    records, _ = graded
    assert records["zz-stub-after-startup"]["score"] == 0 and records["processes"]["score"] == 0


def test_output_volume_is_capped(graded) -> None:
    """300 MB of prints and a 50 MB exception become a bounded record and notebook."""
    _, out = graded
    assert (out / "results.json").stat().st_size < 2 * 2**20
    assert (out / "instructor" / "huge-output" / "stage-1" / hostile.NAME).stat().st_size < 4 * 2**20


HIDDEN = ["BEGIN HIDDEN TESTS", "lab_1_1.add_f32(add)", "lab_1_1.transpose_values(transpose)"]


def _hidden_source_lines() -> list[str]:
    """Distinctive lines of the hidden checks' source (autograder/labs/lab_1_1.py, the harness)."""
    lines = []
    for module in ("autograder/labs/lab_1_1.py", "autograder/labs/harness.py"):
        for line in (REPO_ROOT / module).read_text().splitlines():
            line = line.strip()
            if len(line) > 30 and not line.startswith(
                ("#", '"', "f\"", "from ", "import ", "def ", "raise TestFailure")
            ):
                lines.append(line)
    return lines


def test_nothing_hidden_reaches_a_student(graded) -> None:
    """Executed notebooks handed back and feedback pages hold no hidden-test code, no solution text and none
    of the grader's environment."""
    _, out = graded
    student_files = [
        *(out / "executed").rglob("*.ipynb"),
        *(out / "feedback").rglob("*.md"),
        *(out / "feedback").rglob("*.html"),
    ]
    assert len(student_files) >= 3 * 20
    secret = HIDDEN + _hidden_source_lines() + ["s3cret-of-the-grader"]
    for f in student_files:
        text = f.read_text()
        leaked = [s for s in secret if s in text]
        assert not leaked, f"{f}: {leaked[:3]}"
    # The model answer's kernel lines, in what the stub-based attacks get back: they could not read it.
    model_lines = ["x_ref[...] + y_ref[...]", "x_ref[...].T"]
    for student, case in CASES.items():
        if case.score == 0 and "not implemented" in case.reason:
            for f in (out / "executed" / student).rglob("*.ipynb"):
                assert not any(l in f.read_text() for l in model_lines), f


def _lab_notebook(extra_cells: list[str]) -> tuple[nbformat.NotebookNode, object]:
    lab = manifest().lab(hostile.LAB)
    source = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    release = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    nb = filled_in(hostile.LAB)
    for i, cell in enumerate(extra_cells):
        nb.cells.insert(3 + i, nbformat.v4.new_code_cell(cell))
    restore(nb, source, release)
    return nb, lab


def test_wall_clock_limit_stops_the_run() -> None:
    """Cells each within the per-cell limit, the whole past the wall clock: stopped, with that reason, and
    every hidden test not reached scores 0 with it."""
    nb, lab = _lab_notebook(["import time\ntime.sleep(4)"] * 4 + ["print('never')"])
    run = execute(nb, lab, limits=Limits(wall_s=12, cell_s=60), cell_timeout_s=60)
    assert run.stopped and "12 s wall-clock limit" in run.stopped, run.stopped
    assert not any("never" in str(c.get("outputs")) for c in run.notebook.cells)
    tests = [
        c
        for c in run.notebook.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade") and c.cell_type == "code"
    ]
    assert all(c.outputs and c.outputs[0].output_type == "error" for c in tests)


def test_no_jail_is_refused_with_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Where no jail can be made, grading refuses, naming the flag and what it loses."""
    import autograder.jail.jails as jail

    monkeypatch.setattr(jail.shutil, "which", lambda name, **where: None)
    nb, lab = _lab_notebook([])
    with pytest.raises(jail.JailUnavailable) as e:
        execute(nb, lab, limits=Limits(wall_s=60))
    assert "--no-jail" in str(e.value) and "\n" not in str(e.value)


def _until_listening(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_scheduler_workers_in_separate_processes(submissions: Path, tmp_path: Path) -> None:
    """`--scheduler tcp://…` with a scheduler and two workers started as their own processes over loopback:
    the workers run the same jail and checks, and a hostile submission on one cannot touch the other's."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    _until_listening(port)
    procs += [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_worker",
                address,
                "--nthreads",
                "1",
                "--no-dashboard",
                "--name",
                f"w{i}",
            ],
            env=env,
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(2)
    ]
    try:
        picked = tmp_path / "in"
        for student in ("ok-solution", "probe-outside", "processes"):
            shutil.copytree(submissions / student, picked / student)
        from distributed import Client

        with Client(address, timeout=60) as client:  # both workers up (their start, not a fixed sleep)
            client.wait_for_workers(2, timeout=120)
        result = runner.invoke(
            app, ["grade", str(picked), "--out", str(tmp_path / "out"), "--scheduler", address, "--json", *LIMITS]
        )
        assert result.exit_code == 0, result.output
        records = {r["submission"].split("/")[0]: r for r in json.loads(result.stdout)}
        assert records["ok-solution"]["score"] == 6
        assert records["probe-outside"]["score"] == 0 and records["processes"]["score"] == 0
        assert "ALLOWED" not in _cell_output(tmp_path / "out", "probe-outside", "def probe")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
