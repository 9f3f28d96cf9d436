"""The Gradescope and PrairieLearn doors, built as instructors build them (`course autograder ...`) and run in
stand-in trees on this machine (root): results.json against schemas written from the platforms' specs, the
scores against `course grade`'s, and the jail without namespaces under a stand-in of Docker's seccomp profile
(tests/no_namespaces.py), with tests/hostile.py's cases and a notebook that reads every file it can reach.

The Gradescope stand-in runs the zip's own setup.sh, with the course's Python 3.11 taken from Debian
(/usr/bin/python3.11) and, instead of installing requirements.txt from PyPI (minutes), this environment's
site-packages put on its path (COURSE_SETUP_REUSE_SITE): the same packages, installed once. The full install was
run by hand (docs/platforms.md records it).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from typing import Iterator

import jsonschema
import nbformat
import pytest
from typer.testing import CliRunner

from autograder.course_manifest import REPO_ROOT, manifest
from autograder.jail.bwrap import jail_problem
from autograder.jail.uid import other_can_read
from course_tools.cli import app
from course_tools.demo import filled_in
from tests import hostile, no_namespaces

LAB = hostile.LAB
NAME = hostile.NAME
DEBIAN_PYTHON = "/usr/bin/python3.11"
LIMITS = ["--cell-timeout", "10", "--timeout", "200", "--memory", "2048"]
runner = CliRunner()

if os.geteuid() != 0 or jail_problem():
    pytest.skip("the doors' tests run as root with a jail (as CI does)", allow_module_level=True)

# ------------------------------------------------------------------------------ schemas, from the specs

_VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
_FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
# gradescope/autograder_samples docs/specs.md ("Output format", "Test case status", "Output String Formatting")
GRADESCOPE_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["score"],
    "properties": {
        "score": {"type": "number"}, "execution_time": {"type": "number"}, "output": {"type": "string"},
        "output_format": _FORMAT, "test_output_format": _FORMAT, "test_name_format": _FORMAT,
        "visibility": _VISIBILITY, "stdout_visibility": _VISIBILITY, "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number"},
                "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"}, "name_format": _FORMAT,
                "number": {"type": "string"}, "output": {"type": "string"}, "output_format": _FORMAT,
                "tags": {"type": "array", "items": {"type": "string"}}, "visibility": _VISIBILITY,
                "extra_data": {"type": "object"}}}}}}
# PrairieLearn docs/externalGrading.md ("Grading results"): score in [0, 1] unless gradable is false; any other
# key is allowed at the top; at most 1 MB.
PRAIRIELEARN_SCHEMA = {
    "type": "object",
    "properties": {
        "gradable": {"type": "boolean"}, "score": {"type": "number", "minimum": 0, "maximum": 1},
        "format_errors": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "message": {"type": "string"}, "output": {"type": "string"}, "images": {"type": "array"},
        "tests": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "points", "max_points"],
            "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                           "points": {"type": "number"}, "max_points": {"type": "number"},
                           "message": {"type": "string"}, "output": {"type": "string"},
                           "images": {"type": "array"}}}}},
    "if": {"properties": {"gradable": {"const": False}}, "required": ["gradable"]},
    "then": {"required": ["format_errors"]}, "else": {"required": ["score"]}}


def _valid_gradescope(data: dict) -> dict:
    jsonschema.validate(data, GRADESCOPE_SCHEMA)
    return data


def _valid_prairielearn(path: Path) -> dict:
    assert path.stat().st_size < 1_000_000
    data = json.loads(path.read_text())
    jsonschema.validate(data, PRAIRIELEARN_SCHEMA)
    return data


# ------------------------------------------------------------------------ the Gradescope stand-in

def _secret_digests(tree: Path) -> dict[str, str]:
    """SHA-256 of the first MiB of each grader-only file of an installed tree (the checks, keys, solutions,
    the instructor's course.yml; not the agent, the jail's own, nor the public helpers and released labs)."""
    out = {}
    for p in [*(tree / "autograder").rglob("*"), *(tree / "solutions").rglob("*"), tree / "course.yml"]:
        if p.is_file() and "jail_agent" not in p.parts and "__pycache__" not in p.parts and p.stat().st_size > 200:
            out[hashlib.sha256(p.read_bytes()[:2**20]).hexdigest()] = str(p.relative_to(tree))
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    result = runner.invoke(app, ["autograder", "gradescope", "--lab", LAB, "--out", str(out / "gs")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["autograder", "prairielearn", "--lab", LAB, "--out", str(out / "pl")])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def gradescope(built: Path) -> Iterator[Path]:
    """/autograder stood in for: the zip unzipped to source/, its setup.sh run there as root."""
    site = sysconfig.get_paths()["purelib"]
    if not (os.path.exists(DEBIAN_PYTHON) and other_can_read(DEBIAN_PYTHON) and other_can_read(site)):
        pytest.fail(f"the stand-in needs {DEBIAN_PYTHON} and {site} readable by other users")
    root = Path(tempfile.mkdtemp(prefix="course-gradescope-", dir="/tmp"))
    (root / "source").mkdir()
    with zipfile.ZipFile(built / "gs" / "autograder.zip") as z:
        z.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        os.chmod(root / "source" / name, 0o755)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "GRADESCOPE_ROOT": str(root), "COURSE_SETUP_OFFLINE": "1",
           "COURSE_SETUP_PYTHON": DEBIAN_PYTHON, "COURSE_SETUP_REUSE_SITE": site}
    done = subprocess.run(["bash", "./setup.sh"], cwd=root / "source", env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "course autograder ready" in done.stdout
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _run_autograder(root: Path, files: dict[str, bytes], *, docker: bool = True) -> dict:
    """One submission through run_autograder, from /autograder's stand-in, with a bare environment (and,
    with `docker`, under the stand-in of Docker's seccomp profile)."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    for name, data in files.items():
        (root / "submission" / name).write_bytes(data)
    cmd = ["/bin/bash", str(root / "run_autograder")]
    done = subprocess.run(no_namespaces.argv(cmd) if docker else cmd, cwd=root, capture_output=True, text=True,
                          env={"GRADESCOPE_ROOT": str(root)}, timeout=400)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return _valid_gradescope(json.loads((root / "results" / "results.json").read_text()))


def test_the_zip_has_setup_and_run_autograder_at_its_root_and_no_tests(built: Path) -> None:
    with zipfile.ZipFile(built / "gs" / "autograder.zip") as z:
        names = z.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    assert {"setup.sh", "run_autograder"} <= set(names)
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert f"course/{manifest().lab(LAB).source}" in names and "course/autograder/doors/gradescope.py" in names
    assert not [n for n in names if n.startswith(("course/tests/", "course/bench/")) or "__pycache__" in n]
    with zipfile.ZipFile(built / "gs" / "autograder.zip") as z:
        pins = z.read("course/requirements.txt").decode()
    assert "jax==0.10.2" in pins and "-e ." not in pins and "pytest" not in pins


def test_setup_sh_leaves_the_graders_files_unreadable_to_other_users(gradescope: Path) -> None:
    assert not other_can_read(gradescope / "source")
    assert other_can_read(gradescope / "course-env" / "bin" / "python")


# ---------------------------------------------- the jail without namespaces: course grade, hostile cases

# Reads every file it can reach (but the machine's own: system folders, the development checkouts under /work or
# wherever this one lives (CI's is /check/work/main), and other folders in /tmp, none of which a platform's image
# has) and prints the first 96 bits of the SHA-256 of each: whole digests of a CI machine's ~15,000 files passed
# the cell's 1,000,000-character output cap.
WALKER = '''
import hashlib, os
SKIP = ("/proc", "/sys", "/dev", "/usr", "/work", "/run", "/var/lib", "/var/cache", CHECKOUT)
seen, denied = {}, 0
for top, dirs, files in os.walk("/", onerror=lambda e: None):
    dirs[:] = [d for d in dirs if not os.path.join(top, d).startswith(SKIP)
               and not (top == "/tmp" and os.path.join(top, d) != ROOT)]
    for f in files:
        p = os.path.join(top, f)
        try:
            with open(p, "rb") as fh:
                seen[hashlib.sha256(fh.read(1 << 20)).hexdigest()[:DIGITS]] = p
        except OSError:
            denied += 1
print("WALKED", len(seen), "read,", denied, "denied")
print("DIGESTS", " ".join(sorted(seen)))
'''
DIGITS = 24
SUBSET = ["ok-solution", "probe-outside", "network", "processes"]   # the full set: -m slow


def _class_run(gradescope: Path, tmp_path_factory: pytest.TempPathFactory, students: list[str]) -> tuple[dict, Path]:
    """`course grade --jobs 2 --jail-without-namespaces`, as the stand-in installed it, under the stand-in of
    Docker's profile and without cgroups, as on the platforms."""
    work = Path(tempfile.mkdtemp(prefix="course-class-", dir="/tmp"))   # mode 700: nothing for the jails
    subs, out = work / "submitted", work / "grades"
    tree = gradescope / "source" / "course"
    hostile.build(subs, repo=tree)
    for student in os.listdir(subs):
        if student not in students:
            shutil.rmtree(subs / student)
    if "walker" in students:
        stub = nbformat.read(REPO_ROOT / manifest().lab(LAB).notebook, as_version=4)
        stub.cells.insert(3, nbformat.v4.new_code_cell(WALKER.replace("ROOT", repr(str(gradescope))).replace(
            "CHECKOUT", repr(str(REPO_ROOT))).replace("DIGITS", str(DIGITS))))
        (subs / "walker" / manifest().stage.id).mkdir(parents=True)
        nbformat.write(stub, subs / "walker" / manifest().stage.id / NAME)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "PYTHONPATH": str(tree),
           hostile.SECRET_ENV: "s3cret-of-the-grader",
           "COURSE_JAIL_NO_CGROUPS": "1"}   # the platforms' containers: no cgroup permission (the memory watch)
    cmd = [str(gradescope / "course-env" / "bin" / "python"), "-c", "from course_tools.cli import main; main()", "grade", str(subs),
           "--out", str(out), "--jobs", "2", "--json", "--jail-without-namespaces", *LIMITS]
    try:
        done = subprocess.run(no_namespaces.argv(cmd), cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return {r["submission"].split("/")[0]: r for r in json.loads(done.stdout)}, out
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


@pytest.fixture(scope="module")
def class_run(gradescope: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, Path]]:
    records, out = _class_run(gradescope, tmp_path_factory, [*SUBSET, "walker"])
    yield records, out
    shutil.rmtree(out.parent, ignore_errors=True)


def _cell_output(out: Path, student: str, needle: str) -> str:
    nb = nbformat.read(out / "instructor" / student / manifest().stage.id / NAME, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if needle in c.source for o in c.get("outputs", []))


def test_hostile_cases_score_the_same_without_namespaces(class_run) -> None:
    records, _ = class_run
    cases = {h.student: h for h in hostile.build(None)}
    for student in SUBSET:
        assert records[student]["score"] == cases[student].score, (student, records[student])


def test_without_namespaces_the_probes_reach_no_grader_file_nor_the_network(class_run) -> None:
    """What the jail without namespaces denies, and the three things it cannot (docs/platforms.md): the host's
    process list and /proc/net/unix (no pid or network namespace), and writing a world-writable folder (removed
    with the jail)."""
    _, out = class_run
    text = _cell_output(out, "probe-outside", "def probe")
    allowed = sorted(line.split(" ", 2)[1] + " " + line.split(" ", 2)[2].split(" ")[0]
                     for line in text.splitlines() if line.startswith("ALLOWED"))
    assert allowed == ["host processes", "host sockets", "write var"], text
    assert text.count("denied") == 10, text
    uid = int(text.split("uid ")[-1].split()[0])
    assert uid in range(61000, 65000)
    assert not Path("/var/tmp/course-hostile-pwned").exists()
    net = _cell_output(out, "network", "def probe")
    assert "ALLOWED" not in net and net.count("denied") == 4 and "PermissionError" in net, net


def test_a_notebook_reading_every_file_it_can_reach_gets_no_grader_file(class_run, gradescope: Path) -> None:
    _, out = class_run
    text = _cell_output(out, "walker", "os.walk")
    assert "WALKED" in text, text[-2000:]
    digests = set(text.split("DIGESTS", 1)[1].split())
    secrets = _secret_digests(gradescope / "source" / "course")
    assert len(secrets) > 30 and len(digests) > 100, text[-2000:]
    short = {d[:DIGITS]: path for d, path in secrets.items()}
    leaked = sorted(short[d] for d in digests & set(short))
    assert not leaked, leaked


@pytest.mark.slow
def test_every_hostile_case_scores_the_same_without_namespaces(gradescope: Path,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    cases = {h.student: h for h in hostile.build(None)}
    records, out = _class_run(gradescope, tmp_path_factory, list(cases))
    try:
        wrong = {s: (records[s]["score"], c.score) for s, c in cases.items() if records[s]["score"] != c.score}
        assert not wrong, wrong
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


# ------------------------------------------------------------------------------- the doors' results

def test_gradescope_grades_the_solution_as_course_grade_does_without_namespaces(gradescope: Path, class_run) -> None:
    records, _ = class_run
    data = _run_autograder(gradescope, {NAME: nbformat.writes(filled_in(LAB)).encode()})
    ours = records["ok-solution"]
    assert data["score"] == ours["score"] == manifest().lab(LAB).autograded_max
    graded = [t for t in data["tests"] if "score" in t]
    assert {t["name"]: t["score"] for t in graded} == {t["name"]: t["points"] for t in ours["tests"]}
    assert all(t["visibility"] == "visible" for t in data["tests"]) and data["stdout_visibility"] == "hidden"
    written = [t for t in data["tests"] if "score" not in t]
    assert [t["output"] for t in written] == [w["status"] for w in ours["written"]]
    assert data["extra_data"]["jail"] == "uid" and "jailed without namespaces" in data["extra_data"]["sandbox"]
    assert data["execution_time"] > 0


def _prairielearn_entrypoint(built: Path, grade: Path, files: dict[str, bytes]) -> dict:
    """The question's entrypoint, as info.json names it, in a /grade stand-in, outside the image: with the course
    installed and `course` on PATH (this machine's jail: bubblewrap)."""
    shutil.copytree(built / "pl" / "serverFilesCourse", grade / "serverFilesCourse")
    for folder in ("student", "tests", "data"):
        (grade / folder).mkdir(parents=True)
    for name, data in files.items():
        (grade / "student" / name).write_bytes(data)
    info = json.loads((built / "pl" / "questions" / LAB / "info.json").read_text())
    assert info["gradingMethod"] == "External"
    options = info["externalGradingOptions"]
    assert options["enabled"] is True and 0 < options["timeout"] <= 600 and options["serverFilesCourse"]
    entry = options["entrypoint"].split()
    script = grade / Path(entry[0]).relative_to("/grade")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin", "PL_GRADE_ROOT": str(grade)}
    done = subprocess.run([str(script), *entry[1:]], env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-2000:]
    assert not other_can_read(grade / "serverFilesCourse")
    return _valid_prairielearn(grade / "results" / "results.json")


def test_prairielearn_entrypoint_refuses_a_file_that_is_no_notebook(built: Path, tmp_path: Path) -> None:
    data = _prairielearn_entrypoint(built, tmp_path / "grade", {NAME: b"not a notebook"})
    assert data["gradable"] is False and "could not read the notebook" in data["format_errors"][0]
    assert (built / "pl" / "image" / "Dockerfile").read_text().startswith("# The image")


def test_prairielearn_scores_what_course_grade_scored(class_run) -> None:
    """The door's mapping of course grade's own record (the solution's, graded without namespaces above)."""
    from autograder.doors import platforms as door, prairielearn
    from autograder.steps.results import SubmissionResult

    records, _ = class_run
    ours = SubmissionResult.model_validate(records["ok-solution"])
    data = prairielearn.within_cap(prairielearn.results(door.Outcome(ours, 12.5, {"jail": "uid"}), "LAB·1.1"))
    jsonschema.validate(data, PRAIRIELEARN_SCHEMA)
    assert data["gradable"] is True and data["score"] == ours.score / ours.max_score == 1.0
    assert {t["name"]: t["points"] for t in data["tests"]} == {t.name: t.points for t in ours.tests}


@pytest.mark.slow
def test_prairielearn_entrypoint_grades_the_solution_as_course_grade_does(built: Path, class_run,
                                                                        tmp_path: Path) -> None:
    records, _ = class_run
    data = _prairielearn_entrypoint(built, tmp_path / "grade", {NAME: nbformat.writes(filled_in(LAB)).encode()})
    ours = records["ok-solution"]
    assert data["gradable"] is True and data["score"] == ours["score"] / ours["max_score"] == 1.0
    assert {t["name"]: t["points"] for t in data["tests"]} == {t["name"]: t["points"] for t in ours["tests"]}
    assert data["extra_data"]["jail"] == "bubblewrap"


ODD = {
    "empty": ({}, "the submission is empty"),
    "several": ({"a.ipynb": b"{}", "b.ipynb": b"{}"}, "2 notebooks (a.ipynb, b.ipynb) and none named"),
    "not-json": ({NAME: bytes(range(256))}, "could not read the notebook"),
    "no-notebook": ({"answers.py": b"def add(x, y): return x + y\n"}, "no notebook was submitted"),
    "other-lab": ({NAME: nbformat.writes(filled_in("lab-1.2-tiled-matmul")).encode()}, "none of LAB·1.1's cells"),
}


@pytest.mark.parametrize("case", list(ODD))
def test_odd_submissions_give_valid_results_with_the_reason(case: str, tmp_path: Path) -> None:
    from autograder.doors import gradescope, prairielearn

    files, reason = ODD[case]
    for folder in ("submission", "student"):
        (tmp_path / folder).mkdir()
        for name, data in files.items():
            (tmp_path / folder / name).write_bytes(data)
    gs = _valid_gradescope(gradescope.run(tmp_path, LAB))
    assert gs["score"] == 0 and reason in gs["output"], gs["output"]
    assert all(t["score"] == 0 for t in gs["tests"] if "score" in t)
    pl = _valid_prairielearn((prairielearn.run(tmp_path, LAB), tmp_path / "results" / "results.json")[1])
    assert pl["gradable"] is False and any(reason in e for e in pl["format_errors"]), pl


def test_a_renamed_notebook_is_graded_as_the_lab_and_says_so(tmp_path: Path) -> None:
    """Graded as the assignment's lab, whatever its name: here another lab's notebook, which identify then
    refuses by its cells (without starting a jail)."""
    from autograder.doors import gradescope

    other = nbformat.writes(filled_in("lab-1.2-tiled-matmul")).encode()
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "my work (1).ipynb").write_bytes(other)
    data = _valid_gradescope(gradescope.run(tmp_path, LAB))
    assert data["score"] == 0 and f"graded as {NAME} (submitted as my work (1).ipynb)" in data["output"]
    assert "holds the cells of LAB·1.2" in data["output"]


def test_a_grader_that_cannot_start_still_writes_valid_results(tmp_path: Path, monkeypatch) -> None:
    from autograder.doors import gradescope, prairielearn

    def broken(*a, **k):
        raise RuntimeError("the jail could not start")

    monkeypatch.setattr("autograder.steps.pipeline.grade_submission", broken)
    for folder in ("submission", "student"):
        (tmp_path / folder).mkdir()
        nbformat.write(filled_in(LAB), tmp_path / folder / NAME)
    gs = _valid_gradescope(gradescope.run(tmp_path, LAB))
    assert gs["score"] == 0 and "problem of the autograder" in gs["output"] and gs["extra_data"]["grader_failed"]
    prairielearn.run(tmp_path, LAB)
    pl = _valid_prairielearn(tmp_path / "results" / "results.json")
    assert pl["gradable"] is False and "the jail could not start" in pl["format_errors"][0]
