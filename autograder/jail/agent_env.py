"""What the jail's agent sees: its environment, the read-only binds (Python, the grader's own student helpers, the
agent) and the files it gets as data (course.yml as students may read it). Nothing else of the repository: not
solutions/, autograder/ (but the agent), the keys, the rubrics, grades/, the gradebook."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from autograder.confine.env import child_env
from autograder.course_manifest import REPO_ROOT

AGENT_DIR = Path(__file__).resolve().parent / "jail_agent"
JAIL_AGENT_ROOT = "/opt/course-grader"  # where the agent's folder appears in the jail (its PYTHONPATH)
JAIL_HELPERS = f"{JAIL_AGENT_ROOT}/pallas_course"  # on the jail's PYTHONPATH, ahead of site-packages and any
# editable install's finder (which may name another checkout)


def jail_env() -> dict[str, str]:
    """The jail's whole environment: nothing of the grader's (no tokens, no paths to its files)."""
    return {
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "IPYTHONDIR": "/tmp/home/.ipython",
        "MPLCONFIGDIR": "/tmp/home/.mpl",
        "XDG_CACHE_HOME": "/tmp/home/.cache",
        "XDG_CONFIG_HOME": "/tmp/home/.config",
        "PYTHONPATH": JAIL_AGENT_ROOT,
        "TPU_LOG_DIR": "/tmp/home/tpu_logs",  # libtpu's, private
        **child_env(),
    }


def python_binds() -> list[str]:
    """The read-only paths a Python process of this environment needs: the venv and the base Python.
    Never the repository root, /root or / (a venv inside the repository is bound as just its folder)."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    # The venv's own path too when it is a symlink, since the jail starts sys.executable by that name.
    paths |= {os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)}
    too_wide = {"/", "/root", "/home", "/work", str(REPO_ROOT)}
    return sorted(p for p in paths if p not in too_wide and not REPO_ROOT.is_relative_to(p))


def helpers_dir() -> Path:
    """The pallas_course/ folder this grader imported: the very files bound into the jail."""
    import pallas_course

    return Path(pallas_course.__file__).resolve().parent


def agent_binds() -> list[str | tuple[str, str]]:
    """What the jail sees, read-only: Python and its packages, the grader's own student helpers (bound where
    the jail's PYTHONPATH finds them first), the agent, and (agent_files) course.yml as students may read it."""
    return [*python_binds(), (str(helpers_dir()), JAIL_HELPERS), (str(AGENT_DIR), f"{JAIL_AGENT_ROOT}/jail_agent")]


@functools.lru_cache(maxsize=1)
def _public_manifest() -> bytes:
    """course.yml as students may read it (no rubrics, no hidden-test descriptions): the helpers in the jail
    read chips and labs from it; the instructor's file never enters. Made once per process, in memory."""
    import yaml

    from autograder.course_manifest import COURSE_YML
    from autograder.public_manifest import public_manifest

    raw = yaml.safe_load(COURSE_YML.read_text())
    return yaml.safe_dump(
        public_manifest(raw, raw.get("course", {}).get("colab_pip", "")), sort_keys=False, allow_unicode=True
    ).encode()


def agent_files() -> dict[str, bytes]:
    """Files the jail gets as data (no temporary file on the host): the public course.yml over the helpers'."""
    from pallas_course.manifest import MANIFEST_PATH

    # pallas_course/course.yml is a link to the repository's course.yml: the file goes where the link leads
    name = os.readlink(MANIFEST_PATH) if MANIFEST_PATH.is_symlink() else MANIFEST_PATH.name
    return {os.path.normpath(os.path.join(JAIL_HELPERS, name)): _public_manifest()}
