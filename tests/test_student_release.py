"""`course release`: what students get works on its own and gives nothing away.

The scan and the site checks are fast. The end-to-end test (marked slow: a clean virtualenv from the student
requirements, then every released notebook through papermill twice) installs nothing of this repository but
the release's own wheel, and runs with the repository off the path.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml

from course_tools.release import NEVER_SHIPPED, build_release, release_warnings
from autograder import cells
from pallas_course import notebooks
from pallas_course.manifest import Manifest
from autograder.course_manifest import REPO_ROOT, manifest

BEFORE = dt.date(2026, 12, 1)  # before every reveal date in course.yml
AFTER = dt.date(2027, 1, 31)  # after every reveal date


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory):
    return build_release(manifest().stage.id, tmp_path_factory.mktemp("release") / "stage-1", today=BEFORE)


def _normal(text: str) -> str:
    """Lines stripped of their indentation, blank ones dropped: code compares the same in any file."""
    return "\n".join(l.strip() for l in text.splitlines() if l.strip())


def _texts(root: Path) -> dict[str, str]:
    """Every file of the release as text (the wheel's members included; a notebook as its cells' sources and
    outputs, a page with its HTML entities decoded), normalised by `_normal`."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as z:
                out |= {f"{path.name}!{n}": z.read(n).decode("utf-8", "replace") for n in z.namelist()}
        elif path.suffix == ".ipynb":
            out[str(path.relative_to(root))] = (
                path.read_text()
                + "\n"
                + "\n".join(
                    c.source + "\n" + json.dumps(c.get("outputs", [])) for c in nbformat.read(path, as_version=4).cells
                )
            )
        elif path.is_file():
            out[str(path.relative_to(root))] = path.read_text(errors="replace")
    return {k: _normal(html.unescape(v)) for k, v in out.items()}


def _regions(cell: nbformat.NotebookNode) -> list[list[str]]:
    """The instructor-only regions of a solution or hidden-test cell: between the nbgrader markers (the whole
    cell where it has none), as lists of non-blank, non-comment lines."""
    regions: list[list[str]] = []
    current: list[str] | None = None
    markers = notebooks.SOLUTION_MARKERS + cells.HIDDEN_TEST_MARKERS
    for line in cell.source.splitlines():
        if line.strip() in markers[0::2]:
            current = []
        elif line.strip() in markers[1::2]:
            regions.append(current or [])
            current = None
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())
    if not any(m in cell.source for m in markers):
        regions.append([l.strip() for l in cell.source.splitlines() if l.strip() and not l.strip().startswith("#")])
    return regions


def _secrets() -> dict[str, str]:
    """Text only the instructor has: every three consecutive lines of a solution or hidden-test region (all of
    a shorter region; 30 characters at least: one boilerplate line is no answer), keys and rubrics. No exemption: a teaching cell that
    hands out another lab's answer shows up here."""
    secrets: dict[str, str] = {}
    for lab in manifest().labs:
        for cell in notebooks.read(REPO_ROOT / lab.source).cells:
            if cells.is_solution(cell) or cells.is_test(cell):
                for region in _regions(cell):
                    n = min(3, len(region))
                    for text in ("\n".join(region[i : i + n]) for i in range(len(region) - n + 1)):
                        if len(text) >= 30:
                            secrets[text] = f"{lab.code} solution/test cell"
        for w in lab.written:
            secrets |= {_normal(r): f"{lab.code} rubric" for r in w.rubric}
    for key in (REPO_ROOT / "autograder" / "keys").glob("*.yml"):
        for line in key.read_text().splitlines():
            if len(line.strip()) >= 20 and not line.strip().startswith("#"):
                secrets[line.strip()] = f"key {key.name}"
    return secrets


def test_release_holds_no_solution_hidden_test_key_or_rubric(release) -> None:
    texts = _texts(release.out)
    found = [
        f"{where}: {what} ({secret[:60]!r})"
        for secret, what in _secrets().items()
        for where, text in texts.items()
        if secret in text
    ]
    assert not found, "\n".join(found[:20])
    for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS"):
        # (pallas_course/notebooks.py names the markers it strips; no notebook, page or data file holds one)
        assert not [w for w, t in texts.items() if marker in t and not w.endswith(".py")]
    assert not [w for w in texts if w.startswith(("autograder", "course_tools", "solutions")) or "!autograder/" in w]


def test_release_names_no_instructor_only_path(release) -> None:
    """What students read (the notebooks, the site, the README) names no file they do not get: no solutions/ or
    autograder/ path (the site's EX·02 once said its frames came from solutions/stage-1/...)."""
    texts = _texts(release.out)
    found = [
        f"{where}: {path}"
        for where, text in texts.items()
        if where.endswith((".ipynb", ".html", ".md"))
        for path in ("solutions/", "autograder/")
        if path in text
    ]
    assert not found, found
    # nor does the wheel: its code, its course.yml and its walk data (a walk names the lab's notebook)
    wheel = [
        f"{where}: {path}"
        for where, text in texts.items()
        if "!pallas_course/" in where
        for path in ("solutions/", "autograder/", "bench/")
        if path in text
    ]
    assert not wheel, wheel


def test_release_layout_and_requirements(release) -> None:
    names = sorted(p.name for p in (release.out / "labs").iterdir())
    assert names == sorted(Path(lab.notebook).name for lab in manifest().labs)
    reqs = (release.out / "requirements.txt").read_text()
    for package in NEVER_SHIPPED:
        assert f"\n{package}==" not in reqs.lower()
    assert f"./wheels/{release.wheel.name}" in reqs and "\njaxtyping==" in reqs
    # no tokamax (nor flax, optax, orbax...): the wheel ships the two files LAB·1.5 reads and runs, with the licence
    assert "tokamax" not in reqs.lower()
    # the TPU compiler where it installs, so the "as graded" checks compile as the grade does (issue 27)
    assert (
        '\nlibtpu==0.0.42.1; sys_platform == "linux" and (platform_machine == "x86_64" or platform_machine == '
        '"aarch64")\n'
    ) in reqs
    readme = (release.out / "README.md").read_text()
    assert "installs the course's pinned jax (`jax[tpu]==0.10.2`" in readme and "keeps Colab's own jax" not in readme
    assert "macOS and Windows have no libtpu: there the\nchecks say once that nothing was compiled" in readme
    assert release.warnings == release_warnings(manifest())  # course.yml's release.github: still the course's
    with zipfile.ZipFile(release.wheel) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
        public = yaml.safe_load(z.read("pallas_course/course.yml"))
    assert tops == {"pallas_course", "pallas_from_zero-0.1.0.dist-info"}
    with zipfile.ZipFile(release.wheel) as z:
        vendored = sorted(n for n in z.namelist() if n.startswith("pallas_course/vendored/"))
    assert vendored == [
        "pallas_course/vendored/index.json",
        "pallas_course/vendored/tokamax-0.0.12/LICENSE",
        "pallas_course/vendored/tokamax-0.0.12/tokamax/_src/ops/linear_softmax_cross_entropy_loss/"
        "pallas_mosaic_tpu_kernel.py",
        "pallas_course/vendored/tokamax-0.0.12/tokamax/_src/ops/linear_softmax_cross_entropy_loss/reference.py",
    ], vendored
    # course.yml as students may read it: the wheel's schema reads it, and none of the grader's fields is there
    assert Manifest.model_validate(public).labs
    assert not [(lab["id"], f) for lab in public["labs"] for f in ("source", "grader") if f in lab]
    # the compile rule is public: the notebooks' "as graded" checks compile for its chips as the grade does
    assert all(
        lab.get("compile") == raw_lab.compile.model_dump()
        for lab, raw_lab in zip(public["labs"], manifest().labs)
        if raw_lab.compile is not None
    )
    assert not [t["id"] for lab in public["labs"] for t in lab["tests"] if "checks" in t]
    assert not [w["id"] for lab in public["labs"] for w in lab["written"] if "rubric" in w]


def test_released_notebooks_install_the_published_wheel_and_carry_a_badge(release) -> None:
    m = manifest()
    for lab in m.labs:
        nb = nbformat.read(release.out / "labs" / Path(lab.notebook).name, as_version=4)
        params = next(c for c in nb.cells if notebooks.is_parameters_cell(c)).source
        extras = "[reading]" if lab.helpers_extras else ""
        assert f'COURSE_PIP = "pallas-from-zero{extras} @ {release.wheel_url}"' in params
        assert release.wheel_url.endswith(f"/wheels/{release.wheel.name}")
        assert "git+https://github.com/pallas-from-zero/pallas-from-zero" not in json.dumps(nb)
        assert (
            nb.cells[0].source.startswith("[![Open In Colab]")
            and m.release.colab_url(f"labs/{Path(lab.notebook).name}") in nb.cells[0].source
        )


def test_student_site_withholds_code_until_the_reveal_date(release, tmp_path: Path) -> None:
    from course_tools.site.build import build

    before = (release.out / "site" / "index.html").read_text()
    lab = manifest().labs[0]
    assert f"{lab.code}&#39;s model code appears here on {lab.reveal}" in before
    solution_line = "o_ref[...] = x_ref[...] + y_ref[...]"
    assert solution_line not in before
    build(tmp_path, public_on=AFTER)
    assert solution_line in (tmp_path / "index.html").read_text()


def test_walks_are_baked_or_withheld(release) -> None:
    with zipfile.ZipFile(release.wheel) as z:
        walks = yaml.safe_load(z.read("pallas_course/walks.yml"))["walks"]
    matmul = next(w for w in walks if w["id"] == "matmul")
    assert "lines" not in matmul["source"] and "2026-12-14" in matmul["source"]["withheld"]


_ALONE = """import sys
import pallas_course
from pallas_course import bench, chips, manifest, walks
m = manifest.manifest()
assert [l.id for l in m.labs] and chips.chips() and m.gates[0]["estimate"]["step_overhead_s"]
ws = {w.id: w for w in walks.walks()}
assert "2026-12-14" in ws["matmul"].missing, ws["matmul"].missing
assert bench.collect_provenance().course_commit is None
ours = sorted(n for n in sys.modules if n.split(".")[0] in ("autograder", "course_tools", "nbgrader"))
assert not ours, ours
print(pallas_course.__file__)
"""


def test_the_wheel_works_alone(release, tmp_path: Path) -> None:
    """The wheel unpacked with no repository around it: its course.yml reads with the student schema, its
    chips, gates and walks read, a bench provenance is made (no git, no commit), and nothing of the grader or
    the tools is imported. (The clean-virtualenv test below runs every notebook on it.)"""
    with zipfile.ZipFile(release.wheel) as z:
        z.extractall(tmp_path / "wheel")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(tmp_path / "wheel")}
    run = subprocess.run(
        [sys.executable, "-c", _ALONE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == str(tmp_path / "wheel" / "pallas_course" / "__init__.py")


_NO_TOKAMAX = """import sys, importlib.metadata as md
sys.modules["tokamax"] = None                    # as in a student's install: no tokamax package
version = md.version
md.version = lambda name: (_ for _ in ()).throw(md.PackageNotFoundError(name)) if name == "tokamax" else version(name)
import numpy as np
from pallas_course import tokamax_reading as T
from pallas_course.runtime import interpret_params
w = T.reading()
x, labels, wt = T.example_inputs(256, 320, 512)
with T.on_this_machine(interpret_params()):
    loss, lse = T.forward()(x, labels, wt, b_block_size=128, h_block_size=128, v_block_size=256)
ref_loss, ref_lse = T.reference()(x, labels, wt)
print(w.origin, w.source_hash, w.stale, float(np.abs(np.asarray(lse) - np.asarray(ref_lse)).max()))
"""


def test_the_wheel_reads_and_runs_lab_1_5_without_tokamax(release, tmp_path: Path) -> None:
    """The two vendored files give the same reading (lines, source hash: the grader's key fits) and the same
    kernel, with no tokamax installed."""
    from pallas_course import tokamax_reading

    with zipfile.ZipFile(release.wheel) as z:
        z.extractall(tmp_path / "wheel")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "PYTHONPATH": str(tmp_path / "wheel"),
        "JAX_PLATFORMS": "cpu",
    }
    run = subprocess.run(
        [sys.executable, "-c", _NO_TOKAMAX], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = run.stdout.strip().splitlines()[-1]
    here = tokamax_reading.reading()
    assert line.startswith(f"{here.origin} {here.source_hash} None "), line
    assert float(line.split()[-1]) < 1e-5, line


# ---------------------------------------------------------------------------------------- end to end


def _fill(stub: nbformat.NotebookNode, solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The stub with each solution region replaced by the model answer, except answers that read the key."""
    answers = {cells.grade_id(c): c.source for c in solution.cells if cells.is_solution(c)}
    for cell in stub.cells:
        answer = answers.get(cells.grade_id(cell))
        if cell.cell_type == "code" and answer is not None and "autograder" not in answer:
            cell.source = notebooks.strip_markers(answer)
    return stub


def _errors(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [
        (o.get("ename", ""), o.get("evalue", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def _is_stub_error(error: tuple[str, str]) -> bool:
    ename, evalue = error
    return (ename == "NotImplementedError" and "not written yet" in evalue) or (
        ename == "CheckFailure"
        and ("this function is still the stub" in evalue or "the margin is still the stub" in evalue)
    )


# Every cell runs, errors recorded in the output (papermill still raises at the end: read the output instead).
_PAPERMILL = """import sys, papermill
try:
    papermill.execute_notebook(sys.argv[1], sys.argv[2], cwd=sys.argv[3], kernel_name="python3",
                               allow_errors=True, execution_timeout=600, progress_bar=False)
except papermill.PapermillExecutionError:
    pass
"""


@dataclass
class LabServed:
    """What a JupyterLab server showed: its whole log, the page's config and every plugin's settings."""

    log: str
    page_config: dict
    settings: dict


def _get(url: str, token: str, method: str = "GET") -> bytes:
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def serve_lab(jupyter: Path, cwd: Path, env: dict[str, str], log: Path, timeout_s: float = 90) -> LabServed:
    """Start `jupyter lab` in `cwd` on a free port, wait until it answers, read /lab's page config and
    /lab/api/settings, then shut it down through its API (a signal would log a [C] line of its own)."""
    token = secrets.token_hex(16)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                str(jupyter),
                "lab",
                "--no-browser",
                "--ip=127.0.0.1",
                f"--port={port}",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                "--allow-root",
            ],  # (a no-op unless the tests run as root, as in a container)
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert server.poll() is None, f"jupyter lab exited ({server.returncode}):\n{log.read_text()}"
            assert time.monotonic() < deadline, f"jupyter lab did not answer in {timeout_s} s:\n{log.read_text()}"
            try:
                _get(f"{base}/api/status", token)
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.3)
        page = _get(f"{base}/lab", token).decode()
        found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
        assert found, page[:2000]
        settings = json.loads(_get(f"{base}/lab/api/settings", token))
        _get(f"{base}/api/shutdown", token, method="POST")
        server.wait(timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return LabServed(log.read_text(), json.loads(found.group(1)), settings)


def lab_problems(served: LabServed) -> list[str]:
    """What in a served JupyterLab would be nbgrader's: an error (or critical) line in the log, a line naming nbgrader, a
    lab extension (its menus: Formgrader, Assignments, Courses...) or plugin settings of nbgrader's."""
    problems = [
        f"log: {line}"
        for line in served.log.splitlines()
        if line.startswith(("[E ", "[C ")) or "nbgrader" in line.lower() or "formgrader" in line.lower()
    ]
    problems += [
        f"lab extension {e['name']}"
        for e in served.page_config.get("federated_extensions", [])
        if "nbgrader" in e["name"].lower()
    ]
    problems += [
        f"settings of {p['id']}"
        for p in served.settings["settings"]
        if re.search("nbgrader|formgrader", json.dumps(p), re.I)
    ]
    return problems


@pytest.mark.slow
def test_release_runs_in_a_clean_virtualenv(release, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"PATH": f"{venv / 'bin'}:{env['PATH']}", "JAX_PLATFORMS": "cpu", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # Jupyter's per-user folders in the test's own: the tester's ~/.jupyter (an nbgrader config, say) is no
    # part of the release.
    env |= {f"JUPYTER_{d}_DIR": str(tmp_path / f"jupyter-{d.lower()}") for d in ("CONFIG", "DATA", "RUNTIME")}

    def pip(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [py, "-m", "pip", "install", "-q", *a],
            cwd=release.out,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    run = pip("-r", "requirements.txt")
    assert run.returncode == 0, run.stderr[-2000:]
    # JupyterLab on the release: no nbgrader, so no server-extension error and no Formgrader menus.
    probe = subprocess.run(
        [
            py,
            "-c",
            "import importlib.util as u, pallas_course as p; "
            "print(u.find_spec('nbgrader'), u.find_spec('autograder'), p.__file__)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.startswith("None None ") and str(venv) in probe.stdout, probe.stdout + probe.stderr
    ext = subprocess.run(
        [str(venv / "bin" / "jupyter"), "server", "extension", "list"], env=env, capture_output=True, text=True
    )
    labext = subprocess.run(
        [str(venv / "bin" / "jupyter"), "labextension", "list"], env=env, capture_output=True, text=True
    )
    listing = ext.stdout + ext.stderr + labext.stdout + labext.stderr
    assert "nbgrader" not in listing and "[E]" not in listing, listing
    # What a student sees: JupyterLab started in the release serves no nbgrader error, extension or menu.
    served = serve_lab(venv / "bin" / "jupyter", release.out, env, tmp_path / "jupyterlab.log")
    assert "@jupyterlab/notebook-extension:tracker" in {p["id"] for p in served.settings["settings"]}, (
        "the settings read are not JupyterLab's"
    )
    assert not lab_problems(served), "\n".join(lab_problems(served)) + "\n" + served.log
    assert pip("papermill==2.7.0").returncode == 0  # the test's runner, not the student's

    failures = []
    for lab in manifest().labs:
        released = release.out / "labs" / Path(lab.notebook).name
        filled = tmp_path / f"filled-{released.name}"
        nbformat.write(_fill(nbformat.read(released, as_version=4), notebooks.read(REPO_ROOT / lab.source)), filled)
        for kind, path in (("stub", released), ("filled", filled)):
            out = tmp_path / f"out-{kind}-{released.name}"
            subprocess.run(
                [py, "-c", _PAPERMILL, str(path), str(out), str(release.out / "labs")],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            errors = _errors(nbformat.read(out, as_version=4))
            # A stub stops first at its own NotImplementedError (raw, or as a visible check explains it); cells
            # after it may fail for want of what it did not define.
            if kind == "stub" and not (errors and _is_stub_error(errors[0])):
                failures.append(f"stub {released.name}: first error {errors[:1] or 'none'}")
            if (
                kind == "filled"
                and errors
                and not any(
                    "autograder" in c.source
                    for c in notebooks.read(REPO_ROOT / lab.source).cells
                    if cells.is_solution(c)
                )
            ):
                failures.append(f"filled {released.name}: {errors}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_lab_check_sees_nbgrader_where_it_is_installed(tmp_path: Path) -> None:
    """The instructor's environment (requirements.txt: nbgrader) fails the check the release passes: it is no
    vacuous pass."""
    jupyter = Path(sys.executable).parent / "jupyter"
    env = os.environ | {
        f"JUPYTER_{d}_DIR": str(tmp_path / f"jupyter-{d.lower()}") for d in ("CONFIG", "DATA", "RUNTIME")
    }
    problems = lab_problems(serve_lab(jupyter, tmp_path, env, tmp_path / "jupyterlab.log"))
    assert "lab extension @jupyter/nbgrader" in problems and "settings of @jupyter/nbgrader:formgrader" in problems
    assert any(p.startswith("log: ") and "formgrader" in p for p in problems)
