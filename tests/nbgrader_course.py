"""A throwaway nbgrader course root for tests: solutions/ copied in, generate_assignment run there."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from autograder.course_manifest import REPO_ROOT, manifest


def nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    """Run nbgrader with this repo's config, but with `root` as the course root and its own gradebook."""
    cmd = [
        sys.executable,
        "-m",
        "nbgrader",
        *args,
        f"--CourseDirectory.root={root}",
        f"--db=sqlite:///{root / 'gradebook.db'}",
    ]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)


def generated_course(root: Path) -> Path:
    """Copy solutions/ under `root` and generate the release there; returns `root`."""
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    run = nbgrader(root, "generate_assignment", manifest().stage.id, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    return root
