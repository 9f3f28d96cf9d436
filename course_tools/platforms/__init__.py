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
TOP_FILES = ("course.yml", "pyproject.toml")
UV_VERSION = "0.13.9"                    # uv from PyPI, where Gradescope's image has no Python 3.11
NOT_FOR_GRADING = ("pytest", "pytest-xdist", "hypothesis", "playwright", "greenlet", "-e ")   # tests, the site
PL_FOLDER = "pallas-course"              # under the PrairieLearn course's serverFilesCourse/
DEFAULT_IMAGE = "pallas-from-zero/grader:0.1"


def _tracked(folder: str) -> list[str]:
    """The files git tracks under `folder` (nothing local: no gradebook, grades or caches), else all files."""
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard", "--", folder], capture_output=True,
                             check=True).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        return sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / folder).rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts)


def grader_requirements() -> str:
    """requirements.txt without the test and site stack and without the course itself (`-e .`): the course's
    code is the tree's, on the grader's PYTHONPATH, and never in the environment the jail can read."""
    keep = [line for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
            if not line.strip().startswith(NOT_FOR_GRADING)]
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
            z.writestr(info, _template(name, LAB=lab.id, UV_VERSION=UV_VERSION))
        for rel, data in sorted(course_tree().items()):
            info = zipfile.ZipInfo(f"course/{rel}", date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    target.write_bytes(buf.getvalue())
    return target


def prairielearn_question(lab_id: str, out: Path, *, image: str = DEFAULT_IMAGE, timeout_s: int = 600) -> Path:
    """A PrairieLearn course fragment under `out`: questions/<lab>/ (info.json, question.html),
    serverFilesCourse/pallas-course/ (run.sh, the entrypoint, and the course tree) and image/ (Dockerfile and
    the requirements it installs). Returns the question's folder."""
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
        "externalGradingOptions": {
            "enabled": True,
            "image": image,
            "serverFilesCourse": [f"{PL_FOLDER}/"],
            "entrypoint": f"/grade/serverFilesCourse/{PL_FOLDER}/run.sh {lab.id}",
            "timeout": timeout_s,
        },
    }
    (question / "info.json").write_text(json.dumps(info, indent=2) + "\n")
    (question / "question.html").write_text(_template("question.html", TITLE=f"{lab.code} {lab.title}",
                                                      NOTEBOOK=notebook))
    for rel, data in course_tree().items():
        p = grader / "course" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    run = grader / "run.sh"
    run.write_text(_template("run.sh", LAB=lab.id))
    os.chmod(run, 0o755)
    image_dir = out / "image"
    image_dir.mkdir(parents=True, exist_ok=True)
    (image_dir / "Dockerfile").write_text(_template("Dockerfile", IMAGE=image))
    (image_dir / "requirements.txt").write_text(grader_requirements())
    return question
