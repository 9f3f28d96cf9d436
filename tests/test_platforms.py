"""The Gradescope and PrairieLearn doors, built as instructors build them (`course autograder ...`) and run in
stand-in trees on this machine (root): results.json against schemas written from the platforms' specs, the
scores against `course grade`'s, and the jail without namespaces under a stand-in of Docker's seccomp profile
(tests/no_namespaces.py), with tests/hostile.py's cases and a notebook that reads every file it can reach.

The Gradescope stand-in runs the zip's own setup.sh, with the course's Python 3.11 taken from Debian
(/usr/bin/python3.11) and, instead of installing requirements.txt from PyPI (minutes), this environment's
site-packages hard-linked into it (COURSE_SETUP_REUSE_SITE): the same packages, installed once. The full install
from the registries runs in fresh roots (compat/fresh_root.sh, `make fresh-roots`; compat/fresh-roots.jsonl);
here, its choice of Python per distribution is checked with apt stubbed (test_setup_sh_installs_...).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Iterator

import jsonschema
import nbformat
import pytest
from typer.testing import CliRunner

from autograder.course_manifest import REPO_ROOT, manifest
from autograder.confine.paths import other_can_read
from autograder.jail import syscall_filter
from autograder.jail.jails import jail_problem
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
    "type": "object",
    "additionalProperties": False,
    "required": ["score"],
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number"},
        "output": {"type": "string"},
        "output_format": _FORMAT,
        "test_output_format": _FORMAT,
        "test_name_format": _FORMAT,
        "visibility": _VISIBILITY,
        "stdout_visibility": _VISIBILITY,
        "extra_data": {"type": "object"},
        "leaderboard": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "score": {"type": "number"},
                    "max_score": {"type": "number"},
                    "status": {"enum": ["passed", "failed"]},
                    "name": {"type": "string"},
                    "name_format": _FORMAT,
                    "number": {"type": "string"},
                    "output": {"type": "string"},
                    "output_format": _FORMAT,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "visibility": _VISIBILITY,
                    "extra_data": {"type": "object"},
                },
            },
        },
    },
}
# PrairieLearn docs/externalGrading.md ("Grading results"): score in [0, 1] unless gradable is false; any other
# key is allowed at the top; at most 1 MB.
PRAIRIELEARN_SCHEMA = {
    "type": "object",
    "properties": {
        "gradable": {"type": "boolean"},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "format_errors": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "message": {"type": "string"},
        "output": {"type": "string"},
        "images": {"type": "array"},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "points", "max_points"],
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "points": {"type": "number"},
                    "max_points": {"type": "number"},
                    "message": {"type": "string"},
                    "output": {"type": "string"},
                    "images": {"type": "array"},
                },
            },
        },
    },
    "if": {"properties": {"gradable": {"const": False}}, "required": ["gradable"]},
    "then": {"required": ["format_errors"]},
    "else": {"required": ["score"]},
}


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
            out[hashlib.sha256(p.read_bytes()[: 2**20]).hexdigest()] = str(p.relative_to(tree))
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
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "GRADESCOPE_ROOT": str(root),
        "COURSE_SETUP_OFFLINE": "1",
        "COURSE_SETUP_PYTHON": DEBIAN_PYTHON,
        "COURSE_SETUP_REUSE_SITE": site,
    }
    done = subprocess.run(
        ["bash", "./setup.sh"], cwd=root / "source", env=env, capture_output=True, text=True, timeout=300
    )
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
    done = subprocess.run(
        no_namespaces.argv(cmd) if docker else cmd,
        cwd=root,
        capture_output=True,
        text=True,
        env={"GRADESCOPE_ROOT": str(root)},
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return _valid_gradescope(json.loads((root / "results" / "results.json").read_text()))


def test_the_zip_has_setup_and_run_autograder_at_its_root_and_no_tests(built: Path) -> None:
    with zipfile.ZipFile(built / "gs" / "autograder.zip") as z:
        names = z.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    assert {"setup.sh", "run_autograder"} <= set(names)
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert f"course/{manifest().lab(LAB).source}" in names and "course/autograder/doors/gradescope.py" in names
    assert not [
        n
        for n in names
        if n.startswith(("course/tests/", "course/bench/")) or "__pycache__" in n
        if n != "course/bench/platform-needs.json"
    ]
    with zipfile.ZipFile(built / "gs" / "autograder.zip") as z:
        pins = z.read("course/requirements.txt").decode()
    assert "jax==0.10.2" in pins and "-e ." not in pins and "pytest" not in pins


def test_setup_sh_leaves_the_graders_files_unreadable_to_other_users(gradescope: Path) -> None:
    assert not other_can_read(gradescope / "source")
    assert other_can_read(gradescope / "course-env" / "bin" / "python")
    # bubblewrap's uid 65534 reads the agent and the helpers through binds of the tree: those, by their own
    # modes (their folders above stay closed), and nothing else of the grader's
    from course_tools.platforms import jail_reads

    tree = gradescope / "source" / "course"
    reads, hidden = jail_reads()
    for rel in reads:
        for p in [tree / rel, *(tree / rel).rglob("*")]:
            want = stat.S_IROTH | (stat.S_IXOTH if p.is_dir() else 0)
            if str(p.relative_to(tree)) not in hidden:
                assert os.stat(p).st_mode & want == want, p
    assert hidden == ["pallas_course/course.yml"] and not os.stat(tree / hidden[0]).st_mode & 0o007
    assert not os.stat(tree / "autograder").st_mode & 0o007 and not os.stat(tree / "solutions").st_mode & 0o007


def test_the_installed_tree_starts_bubblewraps_agent(gradescope: Path) -> None:
    """The same artefact where the container lets bubblewrap make namespaces: its uid 65534 imports the agent
    and the helpers through the binds the grader makes (issue 33.7: 'No module named jail_agent.agent'), and reads
    the public course.yml, no rubric (-m slow: a whole grading there,
    test_gradescope_grades_the_solution_with_bubblewrap_from_the_same_artefact)."""
    probe = (
        "import sys; from autograder.jail import jails as jail; "
        "from autograder.jail.agent_env import agent_binds, agent_files, jail_env; "
        "j = jail.start([sys.executable, '-c', 'import os, jail_agent.agent, pallas_course as p; "
        "print(\"AGENT\", open(os.path.join(os.path.dirname(p.__file__), \"course.yml\")).read().count(\"rubric\"))'], "
        "binds=agent_binds(), "
        "env=jail_env(), limits=jail.JailLimits(), cwd='/tmp', files=agent_files()); "
        "out, err = j.process.communicate(timeout=120); j.kill(); print(out.decode(), err.decode()[-2000:]); "
        "print(agent_binds())"
    )
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "PYTHONPATH": str(gradescope / "source" / "course"),
    }
    done = subprocess.run(
        [str(gradescope / "course-env" / "bin" / "python"), "-c", probe],
        env=env,
        cwd=gradescope,
        capture_output=True,
        text=True,
        timeout=180,
    )  # not the checkout's
    assert "source/course/autograder/jail/jail_agent" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert "AGENT 0" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


PLANS = {  # the system's python3, the pythonX-venv packages apt offers -> what setup.sh installs
    "ubuntu-22.04": ("3.10", ["3.11"], "python: 3.11 apt", "python3.11 python3.11-venv"),
    "ubuntu-24.04": ("3.12", ["3.12"], "python: 3.12 apt", "python3.12 python3.12-venv"),
    "debian-12": ("3.11", ["3.11"], "python: 3.11 apt", "python3.11 python3.11-venv"),
    "debian-13": ("3.13", ["3.13"], "python: 3.13 apt", "python3.13 python3.13-venv"),
    "ubuntu-20.04": ("3.8", [], "python: none", "python3-pip"),
}


@pytest.mark.parametrize("system", list(PLANS))
def test_setup_sh_installs_the_distributions_own_python(built: Path, tmp_path: Path, system: str) -> None:
    """setup.sh's choice on each image instructors pick (compat/fresh-roots.jsonl: the real builds): the system's
    own Python where the pins have wheels for it, else one apt offers, else uv (GitHub), apt stubbed here."""
    own, offered, python, packages = PLANS[system]
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("sed", "grep", "cat", "env"):
        os.symlink(shutil.which(tool), bin_ / tool)
    (bin_ / "python3").write_text(f"#!/bin/sh\necho {own}\n")
    (bin_ / "apt-cache").write_text(
        "#!/bin/sh\ncase \"$2\" in\n"
        + "".join(f"  python{v}-venv) echo '  Candidate: {v}.0-1';;\n" for v in offered)
        + "esac\n"
    )
    for f in bin_.iterdir():
        if not f.is_symlink():
            f.chmod(0o755)
    with zipfile.ZipFile(built / "gs" / "autograder.zip") as z:
        (tmp_path / "setup.sh").write_bytes(z.read("setup.sh"))
    done = subprocess.run(
        ["/bin/bash", str(tmp_path / "setup.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": str(bin_), "COURSE_SETUP_PLAN": "1", "GRADESCOPE_ROOT": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [python, f"apt: bubblewrap util-linux ca-certificates {packages}"]


# ---------------------------------------------- the jail without namespaces: course grade, hostile cases

# Reads every file it can reach (but the machine's own: system folders, the development checkouts under /work or
# wherever this one lives (CI's is /check/work/main), `make fresh-roots`' Debian roots in /var/tmp/course-roots (2 GB
# of files: the walk ran past the cell's timeout), and other folders in /tmp, none of which a platform's image has) and prints the first 96 bits of the SHA-256 of each: whole digests of a CI machine's ~15,000 files passed
# the cell's 1,000,000-character output cap.
WALKER = '''
import hashlib, os
SKIP = ("/proc", "/sys", "/dev", "/usr", "/work", "/run", "/var/lib", "/var/cache", "/var/tmp/course-roots", CHECKOUT)
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
SUBSET = ["ok-solution", "probe-outside", "network", "processes"]  # the full set: -m slow


def _class_run(gradescope: Path, tmp_path_factory: pytest.TempPathFactory, students: list[str]) -> tuple[dict, Path]:
    """`course grade --jobs 2 --jail-without-namespaces`, as the stand-in installed it, under the stand-in of
    Docker's profile and without cgroups, as on the platforms."""
    work = Path(tempfile.mkdtemp(prefix="course-class-", dir="/tmp"))  # mode 700: nothing for the jails
    subs, out = work / "submitted", work / "grades"
    tree = gradescope / "source" / "course"
    hostile.build(subs, repo=tree)
    for student in os.listdir(subs):
        if student not in students:
            shutil.rmtree(subs / student)
    if "walker" in students:
        stub = nbformat.read(REPO_ROOT / manifest().lab(LAB).notebook, as_version=4)
        stub.cells.insert(
            3,
            nbformat.v4.new_code_cell(
                WALKER.replace("ROOT", repr(str(gradescope)))
                .replace("CHECKOUT", repr(str(REPO_ROOT)))
                .replace("DIGITS", str(DIGITS))
            ),
        )
        (subs / "walker" / manifest().stage.id).mkdir(parents=True)
        nbformat.write(stub, subs / "walker" / manifest().stage.id / NAME)
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "PYTHONPATH": str(tree),
        hostile.SECRET_ENV: "s3cret-of-the-grader",
        "COURSE_JAIL_NO_CGROUPS": "1",
    }  # the platforms' containers: no cgroup permission (the memory watch)
    cmd = [
        str(gradescope / "course-env" / "bin" / "python"),
        "-c",
        "from course_tools.cli import main; main()",
        "grade",
        str(subs),
        "--out",
        str(out),
        "--jobs",
        "2",
        "--json",
        "--jail-without-namespaces",
        *LIMITS,
    ]
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
    """What the jail without namespaces denies, and the two things it cannot (docs/platforms.md): the host's
    process list and /proc/net/unix (no pid or network namespace). Writing a world-writable folder is denied too
    where the kernel has Landlock (issue 42: it makes files in its own folder alone)."""
    _, out = class_run
    text = _cell_output(out, "probe-outside", "def probe")
    allowed = sorted(
        line.split(" ", 2)[1] + " " + line.split(" ", 2)[2].split(" ")[0]
        for line in text.splitlines()
        if line.startswith("ALLOWED")
    )
    landlock = syscall_filter.landlock_abi() >= 1
    assert allowed == ["host processes", "host sockets", *([] if landlock else ["write var"])], text
    assert text.count("denied") == (11 if landlock else 10), text
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
def test_every_hostile_case_scores_the_same_without_namespaces(
    gradescope: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
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
    assert all("score" in t for t in data["tests"]), "a written answer has no row: it would look graded"
    assert {t["name"]: t["score"] for t in data["tests"]} == {t["name"]: t["points"] for t in ours["tests"]}
    assert all(t["visibility"] == "visible" for t in data["tests"]) and data["stdout_visibility"] == "hidden"
    for w in ours["written"]:
        assert f"- {w['name']} ({w['max_points']:g} point): answered: awaiting manual grading" in data["output"]
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
    assert "enabled" not in options and 0 < options["timeout"] <= 600 and options["serverFilesCourse"]
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
def test_gradescope_grades_the_solution_with_bubblewrap_from_the_same_artefact(gradescope: Path) -> None:
    """Issue 33.7: where the container lets bubblewrap make namespaces, the artefact that grades without them
    (above) grades the solution the same, in bubblewrap's jail (CI: the agent's start alone,
    test_the_installed_tree_starts_bubblewraps_agent)."""
    data = _run_autograder(gradescope, {NAME: nbformat.writes(filled_in(LAB)).encode()}, docker=False)
    assert data["score"] == manifest().lab(LAB).autograded_max and data["extra_data"]["jail"] == "bubblewrap", data


@pytest.mark.slow
def test_prairielearn_entrypoint_grades_the_solution_as_course_grade_does(
    built: Path, class_run, tmp_path: Path
) -> None:
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


def test_a_renamed_notebook_is_graded_as_the_lab_and_says_so(built: Path, tmp_path: Path) -> None:
    """Graded as the assignment's lab, whatever its name (Colab's "Copy of ..."): PrairieLearn's upload takes any
    one .ipynb (question.html's file-patterns, matched as its element does: fnmatch, case-insensitive), and both
    doors grade it as the lab; here another lab's notebook, which identify then refuses by its cells (without
    starting a jail)."""
    import fnmatch
    import re

    from autograder.doors import gradescope, prairielearn

    html = (built / "pl" / "questions" / LAB / "question.html").read_text()
    patterns = re.findall(r'<pl-file-upload file-patterns="([^"]+)"', html)
    assert patterns == ["*.ipynb"] and "file-names" not in html and "5 MB" in html
    renamed = f"Copy of {NAME}"
    for name, ok in ((renamed, True), ("my work (1).IPYNB", True), ("answers.py", False)):
        assert bool(re.match(fnmatch.translate(patterns[0]), name, re.IGNORECASE)) == ok, name
    other = nbformat.writes(filled_in("lab-1.2-tiled-matmul")).encode()
    for folder in ("submission", "student"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / renamed).write_bytes(other)
    data = _valid_gradescope(gradescope.run(tmp_path, LAB))
    assert data["score"] == 0 and f"graded as {NAME} (submitted as {renamed})" in data["output"]
    assert "holds the cells of LAB·1.2" in data["output"]
    pl = (prairielearn.run(tmp_path, LAB), _valid_prairielearn(tmp_path / "results" / "results.json"))[1]
    assert pl["gradable"] is False and f"graded as {NAME} (submitted as {renamed})" in pl["format_errors"]


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


# ------------------------------------------------------------- the container's size, written answers, uploads


def _fake_machine(tmp_path: Path, *, v2: bool, memory_mb: int, quota: str) -> Path:
    """A stand-in /proc and /sys/fs/cgroup of a container: memory limit and CPU quota on its own group."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/meminfo").write_text("MemTotal:       65536000 kB\nMemFree:  1 kB\n")
    if v2:
        (tmp_path / "proc/self/cgroup").write_text("0::/docker/abc\n")
        group = tmp_path / "sys/fs/cgroup/docker/abc"
        group.mkdir(parents=True)
        (group / "memory.max").write_text(f"{memory_mb * 2**20}\n")
        (group / "cpu.max").write_text(f"{quota} 100000\n")
        (tmp_path / "sys/fs/cgroup/memory.max").write_text("max\n")
    else:
        (tmp_path / "proc/self/cgroup").write_text("4:memory:/\n3:cpu,cpuacct:/\n")
        for c in ("memory", "cpu"):
            (tmp_path / "sys/fs/cgroup" / c).mkdir(parents=True)
        (tmp_path / "sys/fs/cgroup/memory/memory.limit_in_bytes").write_text(f"{memory_mb * 2**20}\n")
        (tmp_path / "sys/fs/cgroup/cpu/cpu.cfs_quota_us").write_text(f"{quota}\n")
        (tmp_path / "sys/fs/cgroup/cpu/cpu.cfs_period_us").write_text("100000\n")
    return tmp_path


@pytest.mark.parametrize("v2", [True, False], ids=["cgroup2", "cgroup1"])
def test_the_door_reads_the_containers_size(tmp_path: Path, v2: bool) -> None:
    from autograder.doors.platforms import machine

    m = machine(_fake_machine(tmp_path, v2=v2, memory_mb=768, quota="50000"))
    assert (m.memory_mb, m.cpus) == (768, 0.5) and "cgroup" in m.memory_from
    unlimited = machine(_fake_machine(tmp_path / "big", v2=v2, memory_mb=2**40 // 2**20, quota="max" if v2 else "-1"))
    assert unlimited.memory_mb == 64000 and unlimited.memory_from == "/proc/meminfo MemTotal"


def _outcome(small: bool, **kw):
    from autograder.doors import platforms as door
    from autograder.steps.results import SubmissionResult, TestResult, WrittenResult

    lab = manifest().lab(LAB)
    tests = [
        TestResult(
            name=t.id,
            points=0 if i == 0 else t.points,
            max_points=t.points,
            passed=i != 0,
            message="the kernel died: memory beyond the limit" if i == 0 else "passed",
        )
        for i, t in enumerate(lab.tests)
    ]
    written = [
        WrittenResult(name=w.id, max_points=w.points, status="answered: awaiting manual grading") for w in lab.written
    ]
    result = SubmissionResult(
        submission=NAME,
        lab=LAB,
        score=sum(t.points for t in tests),
        max_score=lab.autograded_max,
        tests=tests,
        written=written,
    )
    have = door.Machine(512 if small else 4096, 0.5, "cgroup memory/memory.limit_in_bytes")
    why = door.fit(lab, have)
    assert (why is not None) == small
    if why:
        result = door._not_the_kernel(result, why)
    return door.Outcome(result, 3.0, {"jail": "uid"}, small=why, machine=have, **kw)


def test_a_container_too_small_says_so_in_every_result_and_blames_no_kernel() -> None:
    """Below the lab's measured need (bench/platform-needs.json), Gradescope's output names both sizes as the
    autograder's configuration and a test lost to memory names the container; PrairieLearn spends no attempt."""
    from autograder.doors import gradescope, platforms as door, prairielearn

    need = door.needs(LAB)["memory_mb"]
    gs = _valid_gradescope(gradescope.results(_outcome(True), "LAB·1.1"))
    line = gs["output"].splitlines()[1]
    assert line.startswith("The autograder's configuration, not your notebook") and "512 MB" in line, line
    assert f"needs {need} MB" in line and gs["extra_data"]["container"]["fits"] is False
    assert "container is smaller than grading needs" in gs["tests"][0]["output"]
    assert "smaller" not in gs["tests"][1]["output"]
    pl = prairielearn.results(_outcome(True), "LAB·1.1")
    jsonschema.validate(pl, PRAIRIELEARN_SCHEMA)
    assert pl["gradable"] is False and "512 MB" in pl["format_errors"][0] and f"{need} MB" in pl["format_errors"][0]
    fine = gradescope.results(_outcome(False), "LAB·1.1")
    assert "configuration" not in fine["output"] and fine["extra_data"]["container"]["fits"] is True
    assert prairielearn.results(_outcome(False), "LAB·1.1")["gradable"] is True


def test_written_answers_are_pending_and_shown_for_the_ta(built: Path) -> None:
    from autograder.doors import gradescope, prairielearn

    answer = "<b>swap</b> the index map:\nlambda i, j: (j, i)"
    outcome = _outcome(False, answers={w.id: answer for w in manifest().lab(LAB).written})
    gs = _valid_gradescope(gradescope.results(outcome, "LAB·1.1"))
    assert all("score" in t for t in gs["tests"]) and gs["test_output_format"] == gs["output_format"] == "text"
    w = manifest().lab(LAB).written[0]
    assert f"- {w.id} (1 point): answered: awaiting manual grading\n    | <b>swap</b> the index map:" in gs["output"]
    pl = prairielearn.results(outcome, "LAB·1.1")
    assert "awaiting manual grading\n    | <b>swap</b>" in pl["message"]  # escaped by PrairieLearn's element
    entry = json.loads((built / "pl" / "assessment-question.json").read_text())
    assert entry == {
        "id": LAB,
        "autoPoints": manifest().lab(LAB).autograded_max,
        "manualPoints": sum(x.points for x in manifest().lab(LAB).written),
    }


def _in_memory_group(mb: int, argv: list[str], **kw) -> subprocess.CompletedProcess:
    """argv in a fresh cgroup v1 memory group of `mb` MB (RAM and swap), a container's limit stood in for."""
    base = Path("/sys/fs/cgroup/memory")
    if not os.access(base, os.W_OK):
        pytest.skip("needs cgroup v1's memory controller, writable (this project's machines)")
    group = base / f"course-small-{os.getpid()}-{mb}"
    group.mkdir()
    try:
        (group / "memory.limit_in_bytes").write_text(str(mb * 2**20))
        if (group / "memory.memsw.limit_in_bytes").exists():
            (group / "memory.memsw.limit_in_bytes").write_text(str(mb * 2**20))
        return subprocess.run(
            ["/bin/sh", "-c", 'echo $$ > "$0/tasks" && exec "$@"', str(group), *argv],
            capture_output=True,
            text=True,
            **kw,
        )
    finally:
        for _ in range(300):  # what the command left (a jail's last process) ends within moments
            if not (group / "tasks").read_text().strip():
                break
            time.sleep(0.1)
        group.rmdir()


def test_a_small_container_is_read_from_the_kernel_and_said(tmp_path: Path) -> None:
    """The door in a 512 MB memory group (a stand-in for Gradescope's container, set lower than its 768 MB
    default): it reads the limit from the kernel's own files and its result says so, with both sizes."""
    (tmp_path / "submission").mkdir()
    code = (
        "import json, sys; from pathlib import Path; from autograder.doors import gradescope; "
        "print(json.dumps(gradescope.run(Path(sys.argv[1]), sys.argv[2])))"
    )
    done = _in_memory_group(512, [sys.executable, "-c", code, str(tmp_path), LAB], cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    data = _valid_gradescope(json.loads(done.stdout.splitlines()[-1]))
    assert data["extra_data"]["container"]["memory_mb"] == 512, data["extra_data"]
    assert "its container has 512 MB of memory, and grading LAB·1.1 needs" in data["output"], data["output"]


@pytest.mark.slow
def test_a_small_container_blames_no_kernel_for_what_it_lost(gradescope: Path) -> None:
    """LAB·1.3's solution in a 512 MB container (issue 34: 4/8 there, blamed on the kernel's memory): whatever it
    scores, the result says the container is the cause, and no lost test blames the kernel alone."""
    lab = "lab-1.3-fused-softmax-layernorm"
    for folder in ("submission", "results"):
        shutil.rmtree(gradescope / folder, ignore_errors=True)
        (gradescope / folder).mkdir()
    nbformat.write(filled_in(lab), gradescope / "submission" / Path(manifest().lab(lab).notebook).name)
    cmd = no_namespaces.argv(
        [str(gradescope / "course-env" / "bin" / "python"), "-P", "-m", "autograder.doors.gradescope", "--lab", lab]
    )
    # the jail's own cgroups would sit beside the container's group, outside its limit: here, as in a container
    # whose cgroups are read-only, the jail stays in it
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "GRADESCOPE_ROOT": str(gradescope),
        "PYTHONPATH": str(gradescope / "source" / "course"),
        "COURSE_JAIL_NO_CGROUPS": "1",
    }
    _in_memory_group(512, cmd, cwd=gradescope, env=env, timeout=600)
    data = _valid_gradescope(json.loads((gradescope / "results" / "results.json").read_text()))
    assert "The autograder's configuration, not your notebook" in data["output"], data["output"]
    for t in data["tests"]:
        assert t["score"] == t["max_score"] or "container is smaller than grading needs" in t["output"], t
