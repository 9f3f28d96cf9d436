"""The configurations the grader runs in, door × jail × memory rule (docs/grader.md, "Configurations"), each
grading one corpus: tests/hostile.py's cases (but the two that hang, whose verdict is a matter of timing: they have
tests/test_grader_isolation.py) and issue 33's (hostile.build_33). Of issue 33's classes one is not here: a stall
past `--timeout`, whose tests reached before the deadline depend on the machine's speed
(tests/test_judge_box.py::test_a_stall_past_timeout_is_the_notebook_s_result); its kernel is here, refused by the
budgets as every configuration runs them (c33-stalling-transpose). Every configuration must give the scores the
cases expect and the reference configuration's points, test by test.

CI checks the table against CONFIGURATIONS; its slice of the configurations is the memory rule without cgroups at
the jail's level (tests/test_jail_memory.py), the jail without namespaces in the Gradescope stand-in
(tests/test_platforms.py) and the reference configuration with nbgrader (tests/test_grader_isolation.py).
`make configurations` runs every configuration over the whole corpus (-m slow). The jail without namespaces runs only in the Gradescope stand-in
(tests/test_platforms.py's fixtures), whose checkout other users cannot read, under the stand-in of Docker's
profile (tests/no_namespaces.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from autograder.course_manifest import REPO_ROOT, manifest
from autograder.confine.cgroups import NO_CGROUPS_ENV
from autograder.jail import jails as jail
from course_tools.cli import app
from tests import hostile, no_namespaces

HANGS = {"hang-in-cell", "hang-in-kernel"}
LIMITS = ["--timeout", "900", "--memory", "2048"]  # the doors' memory (PLATFORM_LIMITS), below the 6 GB bomb


@dataclass(frozen=True)
class Configuration:
    door: str  # course grade, nbgrader, gradescope, prairielearn
    jail: str  # bubblewrap, uid (the jail without namespaces)
    memory: str  # cgroup, watch (autograder.confine.memory: where cgroups are not writable)

    @property
    def id(self) -> str:
        return f"{self.door}/{self.jail}/{self.memory}".replace(" ", "-")


REFERENCE = Configuration("course grade", "bubblewrap", "cgroup")
CONFIGURATIONS = [
    REFERENCE,
    Configuration("course grade", "bubblewrap", "watch"),
    Configuration("course grade", "uid", "cgroup"),
    Configuration("course grade", "uid", "watch"),
    Configuration("nbgrader", "bubblewrap", "cgroup"),
    Configuration("gradescope", "uid", "watch"),
    Configuration("gradescope", "bubblewrap", "watch"),
    Configuration("prairielearn", "bubblewrap", "cgroup"),
]


CASES_ENV = "COURSE_CONFIG_CASES"  # comma-separated fnmatch patterns: a part of the corpus (a quicker look)


def corpus(root: Path | None, repo: Path = REPO_ROOT) -> dict[str, hostile.Hostile]:
    from fnmatch import fnmatch

    cases = {h.student: h for h in hostile.build(root, repo=repo)}
    cases.update({h.student: h for h in hostile.build_33(root, repo=repo)})
    cases.update({h.student: h for h in hostile.build_42(root, repo=repo)})
    patterns = os.environ.get(CASES_ENV, "*").split(",")
    for student in list(cases):
        if student in HANGS or not any(fnmatch(student, p) for p in patterns):
            cases.pop(student)
            if root is not None:
                shutil.rmtree(root / student, ignore_errors=True)
    return cases


# ------------------------------------------------------------------------------------------------ CI


def test_the_docs_table_lists_every_configuration() -> None:
    """docs/grader.md's table and this module's list are one list: each row door | jail | memory."""
    text = (REPO_ROOT / "docs" / "grader.md").read_text()
    section = text.split("## Configurations", 1)[1].split("\n## ", 1)[0]
    rows = set()
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] in {"course grade", "nbgrader", "gradescope", "prairielearn"}:
            rows.add((cells[0], cells[1], cells[2]))
    assert rows == {(c.door, c.jail, c.memory) for c in CONFIGURATIONS}


@pytest.mark.slow  # ~10 s quiet; CI has the rule at the jail's level (tests/test_jail_memory.py)
def test_an_untouched_gib_scores_the_same_without_cgroups(monkeypatch, tmp_path: Path) -> None:
    """The honest notebook keeping an untouched 1 GiB array, at the doors' --memory 2048, with the memory rule of
    a container without cgroups (the watch): 6/6, as under the cgroup (the address-space rlimit gave 3/6)."""
    if jail.jail_problem():
        pytest.skip(jail.jail_problem())
    monkeypatch.setenv(NO_CGROUPS_ENV, "1")
    hostile.build_33(tmp_path / "in")
    for student in os.listdir(tmp_path / "in"):
        if student != "c33-reserve-1gib":
            shutil.rmtree(tmp_path / "in" / student)
    run = CliRunner().invoke(app, ["grade", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--json", *LIMITS])
    assert run.exit_code == 0, run.output
    record = json.loads(run.stdout)[0]
    assert record["score"] == 6, record


# ------------------------------------------------------------------------------------- all: -m slow


def _course_grade(
    folder: Path, out: Path, env: dict[str, str], python: str, *, docker: bool, extra: list[str]
) -> dict[str, dict[str, float]]:
    cmd = [
        python,
        "-c",
        "from course_tools.cli import main; main()",
        "grade",
        str(folder),
        "--out",
        str(out),
        "--jobs",
        "2",
        "--json",
        *extra,
        *LIMITS,
    ]
    done = subprocess.run(
        no_namespaces.argv(cmd) if docker else cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=out.parent,
    )
    if done.returncode != 0:
        results = out / "results.json"
        failed = [
            (r.get("submission"), r.get("failed"))
            for r in (json.loads(results.read_text()) if results.exists() else [])
            if r.get("failed")
        ]
        raise AssertionError(f"course grade exited {done.returncode}; failed: {failed}; {done.stderr[-3000:]}")
    return {
        r["submission"].split("/")[0]: {t["name"]: t["points"] for t in r["tests"]} for r in json.loads(done.stdout)
    }


def _nbgrader(folder: Path, work: Path) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    from tests.nbgrader_course import generated_course, nbgrader

    course = generated_course(work / "course")
    students = sorted(os.listdir(folder))
    for student in students:
        shutil.copytree(folder / student, course / "submitted" / student)
    run = nbgrader(
        course,
        "autograde",
        manifest().stage.id,
        "--force",
        "--JailedExecute.wall_s=900",
        "--JailedExecute.memory_mb=2048",
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {
            s: {g.name: g.score for g in gb.find_submission_notebook(hostile.LAB, manifest().stage.id, s).grades}
            for s in students
        }


def _gradescope(root: Path, folder: Path, env: dict[str, str], *, docker: bool) -> dict[str, dict[str, float]]:
    scores = {}
    for student in sorted(os.listdir(folder)):
        for sub in ("submission", "results"):
            shutil.rmtree(root / sub, ignore_errors=True)
            (root / sub).mkdir()
        shutil.copy(folder / student / manifest().stage.id / hostile.NAME, root / "submission" / hostile.NAME)
        cmd = ["/bin/bash", str(root / "run_autograder")]
        done = subprocess.run(
            no_namespaces.argv(cmd) if docker else cmd,
            cwd=root,
            capture_output=True,
            text=True,
            env={"GRADESCOPE_ROOT": str(root), **env},
            timeout=900,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        data = json.loads((root / "results" / "results.json").read_text())
        scores[student] = {t["name"]: t["score"] for t in data.get("tests", []) if "score" in t}
    return scores


def _prairielearn(built: Path, folder: Path, work: Path) -> dict[str, dict[str, float]]:
    from tests.test_platforms import _prairielearn_entrypoint

    scores = {}
    for student in sorted(os.listdir(folder)):
        data = _prairielearn_entrypoint(
            built, work / student, {hostile.NAME: (folder / student / manifest().stage.id / hostile.NAME).read_bytes()}
        )
        scores[student] = {t["name"]: t["points"] for t in data.get("tests", [])}
    return scores


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """(built artefacts, the Gradescope stand-in's /autograder): tests/test_platforms.py's, made once here."""
    from tests import test_platforms

    built = test_platforms.built.__wrapped__(tmp_path_factory)
    gen = test_platforms.gradescope.__wrapped__(built)
    root = next(gen)
    yield built, root
    next(gen, None)


def _grade(config: Configuration, stand_in: tuple[Path, Path], work: Path) -> tuple[dict, dict]:
    base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", hostile.SECRET_ENV: "s3cret-of-the-grader"}
    if config.memory == "watch":
        base[NO_CGROUPS_ENV] = "1"
    built, gs_root = stand_in
    installed = config.jail == "uid" or config.door == "gradescope"
    tree = gs_root / "source" / "course" if installed else REPO_ROOT
    folder = work / "submitted"
    cases = corpus(folder, repo=tree)
    if config.door == "course grade" and config.jail == "bubblewrap":
        scores = _course_grade(folder, work / "grades", {**os.environ, **base}, sys.executable, docker=False, extra=[])
    elif config.door == "course grade":
        scores = _course_grade(
            folder,
            work / "grades",
            {**base, "PYTHONPATH": str(tree)},
            str(gs_root / "course-env" / "bin" / "python"),
            docker=True,
            extra=["--jail-without-namespaces"],
        )
    elif config.door == "nbgrader":
        scores = _nbgrader(folder, work)
    elif config.door == "gradescope":
        scores = _gradescope(
            gs_root, folder, {k: v for k, v in base.items() if k != "PATH"}, docker=config.jail == "uid"
        )
    else:
        scores = _prairielearn(built, folder, work / "pl")
    return cases, scores


_reference: dict[str, dict[str, float]] = {}


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGURATIONS, ids=lambda c: c.id)
def test_every_configuration_scores_the_corpus_alike(config: Configuration, stand_in) -> None:
    if os.geteuid() != 0 or jail.jail_problem():
        pytest.skip("the configurations run as root with bubblewrap (as CI does)")
    work = Path(tempfile.mkdtemp(prefix="course-config-", dir="/tmp"))  # mode 700: nothing for the jails
    try:
        cases, scores = _grade(config, stand_in, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    totals = {s: sum(v for v in scores.get(s, {}).values() if v is not None) for s in cases}
    wrong = {s: (totals[s], c.score) for s, c in cases.items() if totals[s] != c.score}
    if config == REFERENCE:
        _reference.update(scores)
    # test by test, where this door reports tests (a notebook refused as a whole has none on PrairieLearn; nbgrader's
    # gradebook holds the written answers' cells too)
    differ = {
        s: (scores[s], _reference[s])
        for s in cases
        if s in _reference
        and scores.get(s)
        and any(scores[s].get(test) != points for test, points in _reference[s].items())
    }
    assert not wrong and not differ, {"totals (got, expected)": wrong, "tests (got, reference)": differ}
    assert _leftovers() == [], "what the row's jails left running or in the kernel after the door"


def _leftovers() -> list[str]:
    """Issue 42: what a jail makes dies with it, in every row: no process of a jail's uid (uid 65534, or one of
    UID_RANGE) runs once the door is done, counted by thread group (a main thread that exited while another runs
    reads as a zombie), and no System V object of one is left."""
    from autograder.confine import procfs, uids

    jailed = {65534, *uids.UID_RANGE}
    found = []
    deadline = time.monotonic() + 10  # a jail's last processes are being reaped as the door returns
    while True:
        found = []
        for entry in os.scandir("/proc"):
            status = procfs.live_status(int(entry.name)) if entry.name.isdigit() else None
            uid = procfs.field(status, b"Uid")[:1] if status is not None else []
            if uid and int(uid[0]) in jailed:
                found.append(f"pid {entry.name} of uid {int(uid[0])}")
        for kind in ("shm", "sem", "msg"):
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
            head = lines[0].split() if lines else []
            for line in lines[1:]:
                row = dict(zip(head, line.split()))
                if {int(row.get("uid", -1)), int(row.get("cuid", -1))} & jailed:
                    found.append(f"System V {kind} {line.split()[1]} of uid {row.get('cuid')}")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)
