"""Colab, decided: the set-up cell installs the course's pinned jax (with its libtpu on a TPU runtime) before anything
imports jax, then the helpers' wheel. Checked here without a network: the pins, the wheel's requirements and what
Colab's TPU image keeps (compat/colab-tpu.txt) can be satisfied together, with `packaging`'s specifiers; a wheel
that cannot be installed gives one line that says why. `make check-colab` runs the whole thing in a stand-in of
Colab's image (compat/colab.json).
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from autograder.course_manifest import REPO_ROOT, manifest
from autograder.cells import is_setup as is_setup_cell

PIN = re.compile(r'"(?P<name>jax(?:\[tpu\])?)==(?P<version>[\d.]+)"')


def _pins(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", path.read_text(), re.M))


def _setup_source(notebook: str) -> str:
    nb = nbformat.read(REPO_ROOT / notebook, as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and is_setup_cell(c)]
    return cell.source


def _wheel_requirements(extras: tuple[str, ...] = ("tpu",)) -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pallas_course" / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


@pytest.mark.parametrize("lab", manifest().labs, ids=lambda lab: lab.code)
def test_setup_cell_pins_the_courses_jax(lab) -> None:
    """Both notebooks (source and release) pin requirements.txt's jax, with [tpu] where Colab has libtpu."""
    jax_pin = _pins(REPO_ROOT / "requirements.txt")["jax"]
    for notebook in (lab.source, lab.notebook):
        pins = dict(PIN.findall(_setup_source(notebook)))
        assert pins == {"jax[tpu]": jax_pin, "jax": jax_pin}, (notebook, pins)


def test_setup_pins_wheel_and_colab_image_are_satisfiable_together() -> None:
    """What pip will be asked on Colab, as specifiers: the set-up cell's jax, the wheel's requirements (with its
    [tpu] extra), jax's own (its [tpu] extra's libtpu included) and the packages of Colab's image the install
    leaves as they are. None may contradict another; the libtpu pinned for instructors is the one jax[tpu] picks."""
    jax_pin = Version(_pins(REPO_ROOT / "requirements.txt")["jax"])
    colab = {k.lower(): Version(v) for k, v in _pins(REPO_ROOT / "compat" / "colab-tpu.txt").items()}
    installed = {"jax": jax_pin}
    for req in _wheel_requirements():
        name = req.name.lower()
        if name == "jax":
            assert req.specifier.contains(jax_pin), f"the wheel needs {req}, the set-up cell installs jax {jax_pin}"
        elif name in colab:
            assert req.specifier.contains(colab[name]), f"the wheel needs {req}; Colab keeps {name} {colab[name]}"
    # jax's own requirements (this environment holds the pinned jax): Colab's kept packages must satisfy them,
    # and its [tpu] extra must accept requirements.txt's libtpu.
    assert Version(importlib.metadata.version("jax")) == jax_pin
    libtpu_pin = Version(_pins(REPO_ROOT / "requirements.txt")["libtpu"])
    for raw in importlib.metadata.requires("jax") or []:
        req = Requirement(raw)
        extra = req.marker is not None and "extra" in str(req.marker)
        if extra and not req.marker.evaluate({"extra": "tpu"}):
            continue
        name = req.name.lower()
        if name == "libtpu":
            assert req.specifier.contains(libtpu_pin), f"jax[tpu] needs {req}; requirements.txt pins {libtpu_pin}"
        elif name in colab and name not in installed and name not in ("jaxlib",):
            assert req.specifier.contains(colab[name]), f"jax needs {req}; Colab keeps {name} {colab[name]}"


def test_an_uninstallable_wheel_is_one_line_on_colab(tmp_path: Path) -> None:
    """The set-up cell on "Colab" (google.colab imported, the helpers not installed) with a wheel that does not
    exist: one RuntimeError line naming pip's cause, no CalledProcessError or pip traceback."""
    source = _setup_source(manifest().labs[0].source)
    install = source.split("\nimport jax\n")[0].replace('find_spec("pallas_course")', 'find_spec("no_such_course")')
    script = textwrap.dedent(f"""
        import sys, types
        sys.modules["google"] = types.ModuleType("google")
        sys.modules["google.colab"] = types.ModuleType("google.colab")
        COURSE_PIP = {str(tmp_path / "pallas_from_zero-0.1.0-py3-none-any.whl")!r}
        try:
            exec(compile({install!r}, "setup-cell", "exec"))
        except Exception as e:
            print(type(e).__name__, "|", e)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": str(tmp_path)},
    )
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout + out.stderr
    assert lines[0].startswith("RuntimeError | installing the course helpers failed: "), lines[0]
    # pip's own ERROR line (a venv made by uv has no pip at all: then that is the one line)
    assert re.search(
        r"failed: (ERROR: .*(pallas_from_zero-0\.1\.0|No such file|does not exist)|.*No module named pip)", lines[0]
    ), lines[0]
