"""`course autograder`: one lab's grader for Gradescope (autograder.zip) or PrairieLearn (a question folder, its
course files and its image's Dockerfile). Both carry the course's source tree (`course_tree`: the grader, the
student helpers, the instructor tools, solutions/, labs/, course.yml, the grader's requirements) and enter
through autograder.doors' doors. The scripts beside this file are the templates (@NAME@ filled in).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import uuid
import zipfile
from pathlib import Path

from autograder.course_manifest import REPO_ROOT, LabSpec, manifest

HERE = Path(__file__).resolve().parent
TREE = ("autograder", "pallas_course", "course_tools", "solutions", "labs")
TOP_FILES = ("course.yml", "pyproject.toml", "bench/platform-needs.json")  # the last: what each lab needs of
# the container (doors.platforms.fit)
UV_VERSION = "0.13.9"  # uv from PyPI, where apt has none of PYTHONS
# The Pythons setup.sh may build the grader's environment from: requirements.txt's pins have wheels for these
# (PyPI's simple index, 2026-12-04: jaxlib and libtpu cp311-cp314, numpy 2.4.6 cp311-cp314); 3.11 is what CI
# tests, 3.12 and 3.13 are the distributions' own on Ubuntu 24.04 and Debian 13 (compat/fresh-roots.json).
PYTHONS = ("3.11", "3.12", "3.13")
NOT_FOR_GRADING = ("pytest", "pytest-xdist", "hypothesis", "playwright", "greenlet", "-e ")  # tests, the site
PL_FOLDER = "pallas-course"  # under the PrairieLearn course's serverFilesCourse/
DEFAULT_IMAGE = "pallas-from-zero/grader:0.1"


def _tracked(folder: str) -> list[str]:
    """The files git tracks under `folder` (nothing local: no gradebook, grades or caches), else all files."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", folder],
            capture_output=True,
            check=True,
        ).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        return sorted(
            str(p.relative_to(REPO_ROOT))
            for p in (REPO_ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )


def grader_requirements() -> str:
    """requirements.txt without the test and site stack and without the course itself (`-e .`): the course's
    code is the tree's, on the grader's PYTHONPATH, and never in the environment the jail can read."""
    keep = [
        line
        for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
        if not line.strip().startswith(NOT_FOR_GRADING)
    ]
    return "\n".join(keep) + "\n"


def course_tree() -> dict[str, bytes]:
    """{path under course/: bytes}: what the grader reads, links replaced by what they point to (a zip holds none)."""
    files: dict[str, bytes] = {}
    for folder in TREE:
        for rel in _tracked(folder):
            path = REPO_ROOT / rel
            if path.is_file():
                files[rel] = path.read_bytes()
    for name in TOP_FILES:
        files[name] = (REPO_ROOT / name).read_bytes()
    files["requirements.txt"] = grader_requirements().encode()
    return files


def _template(name: str, **values: str) -> str:
    text = (HERE / name).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    return text


def jail_reads() -> tuple[list[str], list[str]]:
    """What a jail reads through read-only binds of the course tree (bubblewrap binds the agent and the student
    helpers from where the grader imported them, and its uid 65534 then reads them by their "other" bits), as
    paths under course/; and, among them, the copies of the checkout's links (pallas_course/course.yml is the
    instructor's course.yml: the jail gets the public one over it), which stay unreadable."""
    import importlib.util

    import pallas_course

    spec = importlib.util.find_spec("autograder.jail.jail_agent")
    assert spec is not None and spec.origin is not None
    folders = [Path(spec.origin).parent, Path(pallas_course.__file__).parent]
    reads = [str(f.resolve().relative_to(REPO_ROOT)) for f in folders]
    hidden = sorted(str(p.relative_to(REPO_ROOT)) for f in folders for p in f.rglob("*") if p.is_symlink())
    return reads, hidden


def _modes() -> dict[str, str]:
    reads, hidden = jail_reads()
    return {"JAIL_READS": " ".join(reads), "JAIL_HIDDEN": " ".join(hidden)}


def _lab(lab_id: str) -> LabSpec:
    return manifest().lab(lab_id)


def gradescope_zip(lab_id: str, out: Path) -> Path:
    """out/autograder.zip: setup.sh and run_autograder at its root, the course tree under course/."""
    lab = _lab(lab_id)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "autograder.zip"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, _template(name, LAB=lab.id, UV_VERSION=UV_VERSION, PYTHONS=" ".join(PYTHONS), **_modes()))
        for rel, data in sorted(course_tree().items()):
            info = zipfile.ZipInfo(f"course/{rel}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    target.write_bytes(buf.getvalue())
    return target


def assessment_entry(lab: LabSpec) -> dict[str, object]:
    """The question's entry in an assessment's infoAssessment.json (a zone's `questions`): the autograded points
    as autoPoints, the written answers' as manualPoints (graded by hand in PrairieLearn's manual grading)."""

    def points(x: float) -> float | int:
        return int(x) if float(x).is_integer() else x

    entry: dict[str, object] = {"id": lab.id, "autoPoints": points(lab.autograded_max)}
    manual = sum(w.points for w in lab.written)
    if manual:
        entry["manualPoints"] = points(manual)
    return entry


def prairielearn_question(lab_id: str, out: Path, *, image: str = DEFAULT_IMAGE, timeout_s: int = 600) -> Path:
    """A PrairieLearn course fragment under `out`: questions/<lab>/ (info.json, question.html),
    serverFilesCourse/pallas-course/ (run.sh, the entrypoint, and the course tree), image/ (Dockerfile and
    the requirements it installs) and assessment-question.json (the question's entry for infoAssessment.json).
    Returns the question's folder."""
    from autograder.doors.prairielearn import MAX_TIMEOUT_S

    lab = _lab(lab_id)
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"PrairieLearn's timeout is at most {MAX_TIMEOUT_S} s, not {timeout_s}")
    notebook = Path(lab.notebook).name
    question = out / "questions" / lab.id
    grader = out / "serverFilesCourse" / PL_FOLDER
    question.mkdir(parents=True, exist_ok=True)
    info = {
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"pallas-from-zero/{manifest().course.id}/{lab.id}")),
        "title": f"{lab.code} {lab.title}",
        "topic": manifest().stage.title,
        "tags": [manifest().stage.id, lab.code],
        "type": "v3",
        "singleVariant": True,
        "gradingMethod": "External",
        "externalGradingOptions": {  # current schema: external grading is on by gradingMethod (no "enabled")
            "image": image,
            "serverFilesCourse": [f"{PL_FOLDER}/"],
            "entrypoint": f"/grade/serverFilesCourse/{PL_FOLDER}/run.sh {lab.id}",
            "timeout": timeout_s,
        },
    }
    (question / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    (question / "question.html").write_text(
        _template("question.html", TITLE=f"{lab.code} {lab.title}", NOTEBOOK=notebook)
    )
    for rel, data in course_tree().items():
        p = grader / "course" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    run = grader / "run.sh"
    run.write_text(_template("run.sh", LAB=lab.id, **_modes()))
    os.chmod(run, 0o755)
    (out / "assessment-question.json").write_text(json.dumps(assessment_entry(lab), indent=2) + "\n")
    image_dir = out / "image"
    image_dir.mkdir(parents=True, exist_ok=True)
    (image_dir / "Dockerfile").write_text(_template("Dockerfile", IMAGE=image))
    (image_dir / "requirements.txt").write_text(grader_requirements())
    return question
