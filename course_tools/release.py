"""`course release`: what students get, and nothing else.

DIR/
  labs/<lab>.ipynb        the nbgrader-generated stubs (labs/), each with an "Open in Colab" badge and its
                          set-up cell's COURSE_PIP set to the wheel's published URL
  wheels/<wheel>          the student helpers alone (pallas_course/pyproject.toml), with a public course.yml
                          (no rubrics, no hidden-test descriptions) and the walk data baked in
  requirements.txt        the student's pins: jax, the notebook stack, the wheel; no grading or test stack
  README.md               how to start, locally and on Colab
  site/index.html         the chapter site in student mode: each lab's model code from its reveal date on

Nothing is read from solutions/ but what course.yml makes public: a revealed lab's `site:show` code (on the site
and in the walks that show it). The release is a function of the repository and `today`.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml

from pallas_course import notebooks
from autograder.public_manifest import public_manifest
from autograder.course_manifest import REPO_ROOT, LabSpec, Manifest, load as load_manifest

WHEEL_NAME = "pallas-from-zero"
# requirements.txt lines a student needs (by package name); the grading, test and site stacks stay out.
# libtpu (Linux x86_64/aarch64 only, by its marker): the checks compile each kernel for the course's chips, as the
# grade does; elsewhere they say once that nothing was compiled.
# No tokamax: the wheel ships the two files of it LAB·1.5 reads and runs (vendor_reading); they need jaxtyping.
STUDENT_PACKAGES = (
    "jax",
    "jaxlib",
    "libtpu",
    "numpy",
    "ml_dtypes",
    "jupyterlab",
    "notebook",
    "ipykernel",
    "nbformat",
    "jsonschema",
    "PyYAML",
    "pydantic",
    "jaxtyping",
)
NEVER_SHIPPED = ("nbgrader", "papermill", "dask", "distributed", "playwright", "pytest", "hypothesis")
# course.yml's `release.github` as the course ships: the authors' repository. Until an instructor sets their own,
# every Colab badge and set-up cell of their release sends students there.
COURSE_GITHUB = "pallas-from-zero/stage-1"


class ReleaseError(ValueError):
    """The release cannot be built; the message says what to fix."""


@dataclass(frozen=True)
class Release:
    out: Path
    today: dt.date
    wheel: Path
    wheel_url: str
    notebooks: list[Path]
    revealed: list[str]  # lab codes whose model code is public in this release
    withheld: dict[str, str] = field(default_factory=dict)  # lab code -> reveal date ("never")
    warnings: list[str] = field(default_factory=list)  # one line each, for whoever publishes it


def release_warnings(m: Manifest) -> list[str]:
    """What the release is built despite: course.yml fields still set for the course's own repository."""
    if m.release is not None and m.release.github == COURSE_GITHUB:
        return [
            f"course.yml release.github is still the course's default ({COURSE_GITHUB}): set it to the "
            "GitHub repository (owner/name) you push this release to; every Colab badge and install URL "
            "names it"
        ]
    return []


# ------------------------------------------------------------------------------------------- the wheel


def baked_walks(walks_raw: dict[str, Any], m: Manifest, today: dt.date, root: Path) -> dict[str, Any]:
    """walks.yml with each notebook walk's code baked in (its lab revealed) or withheld (not yet)."""
    from course_tools.walks import notebook_lines

    by_source = {lab.source: lab for lab in m.labs}
    out = json.loads(json.dumps(walks_raw))
    for w in out["walks"]:
        src = w["source"]
        if "notebook" not in src:
            continue
        lab = by_source.get(src["notebook"])
        if lab is None:
            raise ReleaseError(
                f"walks.yml: walk {w['id']} reads {src['notebook']}, which no lab in course.yml has as its source"
            )
        # Students have the lab's notebook, not its solution: the walk names the one they have.
        src["notebook"] = lab.notebook
        if lab.revealed(today):
            src["lines"] = notebook_lines(root / lab.source, list(src["functions"]))
            src["origin"] = f"{lab.code}'s model code ({', '.join(src['functions'])}), public since {lab.reveal}"
        else:
            when = f"on {lab.reveal}" if lab.reveal else "when your instructor publishes it"
            src["withheld"] = (
                f"{lab.code}'s model code appears {when}: the course release after that day carries this walk"
            )
    return out


def vendor_reading(stage: Path) -> dict[str, Any]:
    """Copy the files LAB·1.5's reading reads and runs (pallas_course.tokamax_reading.VENDORED) verbatim from the
    installed, pinned tokamax into the staged wheel's vendored/ folder, with tokamax's LICENSE and an index
    (pallas_course.vendored reads it); the student install then needs no tokamax (nor flax, optax, orbax...)."""
    import importlib.util
    from importlib import metadata

    from pallas_course import tokamax_reading

    package, pin = tokamax_reading.PACKAGE, tokamax_reading.PIN
    try:
        version = metadata.version(package)
    except metadata.PackageNotFoundError:
        raise ReleaseError(
            f"{package} is not installed here: the release ships two of its files for LAB·1.5 "
            f"(pip install -r requirements.txt pins {package}=={pin})"
        ) from None
    if version != pin:
        raise ReleaseError(
            f"{package} {version} is installed, but LAB·1.5 reads {package}=={pin} (its key and notes "
            f"were written for it): install {package}=={pin}"
        )
    root = stage / "vendored" / f"{package}-{version}"
    modules = {}
    for name in tokamax_reading.VENDORED:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise ReleaseError(f"{name} is not in {package} {version}")
        rel = Path(*name.split(".")).with_suffix(".py")
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(spec.origin, root / rel)
        modules[name] = f"{package}-{version}/{rel.as_posix()}"
    licences = [f for f in metadata.distribution(package).files or [] if f.name.upper().startswith("LICENSE")]
    if not licences:
        raise ReleaseError(f"{package} {version} carries no LICENSE file: the release ships its files only with it")
    shutil.copy2(licences[0].locate(), root / "LICENSE")
    entry = {"version": version, "license": "Apache-2.0 (LICENSE beside the files; headers kept)", "modules": modules}
    (stage / "vendored" / "index.json").write_text(json.dumps({package: entry}, indent=1) + "\n")
    return entry


def build_wheel(
    m: Manifest, raw_manifest: dict[str, Any], colab_pip: str, today: dt.date, root: Path, dest: Path
) -> Path:
    """Stage pallas_course/ with its public data and build the wheel into `dest`."""
    package = root / "pallas_course"
    with tempfile.TemporaryDirectory(prefix="pfz-wheel-") as tmp:
        stage = Path(tmp) / "pallas_course"
        stage.mkdir()
        for path in sorted(package.glob("*.py")):
            shutil.copy2(path, stage / path.name)
        # recorded figures the notebooks draw (LAB·1.4's CPU trace), each with its provenance: public
        shutil.copytree(package / "records", stage / "records")
        vendor_reading(stage)
        shutil.copy2(package / "pyproject.toml", stage / "pyproject.toml")
        (stage / "course.yml").write_text(
            yaml.safe_dump(public_manifest(raw_manifest, colab_pip), sort_keys=False, allow_unicode=True, width=120)
        )
        walks_raw = yaml.safe_load((package / "walks.yml").read_text())
        (stage / "walks.yml").write_text(
            yaml.safe_dump(baked_walks(walks_raw, m, today, root), sort_keys=False, allow_unicode=True, width=120)
        )
        dest.mkdir(parents=True, exist_ok=True)
        run = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), str(stage)],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            raise ReleaseError(f"building the student wheel failed:\n{run.stderr.strip()[-2000:]}")
    wheels = sorted(dest.glob("pallas_from_zero-*.whl"))
    if len(wheels) != 1:
        raise ReleaseError(f"expected one pallas_from_zero wheel in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]


# ------------------------------------------------------------------------------------------ notebooks


def _setup_spec(lab: LabSpec, wheel_url: str) -> str:
    extras = f"[{','.join(lab.helpers_extras)}]" if lab.helpers_extras else ""
    return f"{WHEEL_NAME}{extras} @ {wheel_url}"


def release_notebook(lab: LabSpec, path: Path, wheel_url: str, colab_url: str) -> nbformat.NotebookNode:
    """The generated stub at `path`, with COURSE_PIP set and an "Open in Colab" badge on top."""
    nb = notebooks.read(path)
    params = [c for c in nb.cells if c.cell_type == "code" and notebooks.is_parameters_cell(c)]
    if len(params) != 1:
        raise ReleaseError(f"{path}: expected one cell tagged `parameters`, found {len(params)}")
    lines = params[0].source.split("\n")
    hits = [i for i, line in enumerate(lines) if line.startswith("COURSE_PIP =")]
    if len(hits) != 1:
        raise ReleaseError(f"{path}: the parameters cell must set COURSE_PIP on one line")
    comment = lines[hits[0]].partition("#")[2].strip()
    lines[hits[0]] = f"COURSE_PIP = {json.dumps(_setup_spec(lab, wheel_url))}" + (f"  # {comment}" if comment else "")
    params[0].source = "\n".join(lines)
    badge = nbformat.v4.new_markdown_cell(
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url})"
    )
    badge.metadata["tags"] = ["colab-badge"]
    nb.cells.insert(0, badge)
    return nb


# ------------------------------------------------------------------------------------------ the rest


def student_requirements(repo_requirements: str, wheel: str) -> str:
    keep = []
    for line in repo_requirements.splitlines():
        name = line.split("#")[0].strip().split("==")[0].split("[")[0].split(";")[0].strip()
        if name in STUDENT_PACKAGES:
            keep.append(line.split(" #")[0].strip())
    missing = sorted(set(STUDENT_PACKAGES) - {l.split("==")[0] for l in keep})
    if missing:
        raise ReleaseError(f"requirements.txt pins no {', '.join(missing)}; the student requirements need them")
    return (
        "# Pallas from Zero, stage 01: what a student installs (Python 3.11+). pip install -r requirements.txt\n"
        + "\n".join(keep)
        + f"\n# the course helpers\n./wheels/{wheel}\n"
    )


def student_readme(m: Manifest, labs: list[tuple[LabSpec, str]], wheel: str) -> str:
    rows = "\n".join(
        f"| {lab.code} | week {lab.week} | {lab.title} | `labs/{Path(lab.notebook).name}` | [Open in Colab]({url}) |"
        for lab, url in labs
    )
    return f"""# {m.course.title} · stage {m.stage.number:02d}: {m.stage.title}

{m.stage.summary}

| lab | when | what | notebook | Colab |
|---|---|---|---|---|
{rows}

## On your machine (a CPU laptop is enough)

```bash
python3 -m venv .venv && . .venv/bin/activate
pip install -r requirements.txt        # jax, JupyterLab and the course helpers ({wheel})
jupyter lab labs/
```

On Linux (x86_64 or aarch64) this also installs libtpu, the TPU compiler (~700 MB): the checks marked *as
graded* then compile each kernel for the course's chips (v5e and v6e) exactly as the grade does, and a kernel
the compiler refuses fails there first, with the grade's message. macOS and Windows have no libtpu: there the
checks say once that nothing was compiled, judge the values, and the grade compiles.

## On Colab

Click a lab's badge, then Runtime → Change runtime type → a TPU (v5e-1 or v6e-1) if you have one; kernels
compile for real there. On CPU the set-up cell says so and runs them in TPU interpret mode. The set-up cell,
run first in a fresh session, installs the course's pinned jax (`jax[tpu]==0.10.2`, with the libtpu that
matches it: Colab's own jax is older than the helpers need) and then the course helpers, before anything
imports jax; if jax was imported before it, it asks you to restart the session.

## Working a lab

Run the first two cells (parameters, set-up), then fill in each cell that says `raise NotImplementedError`
and run the `check(...)` cell under it until it prints ✓. Hidden tests grade the same functions on more
shapes and dtypes: keep names and signatures. Hand in the `.ipynb` (File → Download on Colab) as your
instructor asks. `site/index.html` is the chapter: open it from disk.
"""


def build_release(stage: str, out: Path, *, today: dt.date | None = None, root: Path = REPO_ROOT) -> Release:
    """Write the student release of `stage` to `out` (emptied first)."""
    from course_tools.site.build import build as build_site

    today = today or dt.date.today()
    raw = yaml.safe_load((root / "course.yml").read_text())
    m = load_manifest(root / "course.yml")
    if m.stage.id != stage:
        raise ReleaseError(f"course.yml has stage {m.stage.id!r}, not {stage!r}")
    if m.release is None:
        raise ReleaseError(
            "course.yml has no `release:` (github: owner/name, branch): set where students get "
            "the release; the notebooks install the helpers from there"
        )
    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not (out / ".course-release").exists()):
            raise ReleaseError(f"{out} exists and is not an earlier release; choose an empty or new folder")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / ".course-release").write_text(f"{stage} {today.isoformat()}\n")

    version = tomllib.loads((root / "pallas_course" / "pyproject.toml").read_text())["project"]["version"]
    wheel_url = m.release.raw_url(f"wheels/pallas_from_zero-{version}-py3-none-any.whl")
    probe = build_wheel(m, raw, f"{WHEEL_NAME} @ {wheel_url}", today, root, out / "wheels")
    if not wheel_url.endswith(probe.name):
        raise ReleaseError(f"the wheel is {probe.name}, not the name its URL was given ({wheel_url})")

    released, table = [], []
    (out / "labs").mkdir()
    for lab in m.labs:
        src = root / lab.notebook
        if not src.exists():
            raise ReleaseError(f"{lab.notebook} does not exist: run `nbgrader generate_assignment {stage} --force`")
        name = Path(lab.notebook).name
        colab = m.release.colab_url(f"labs/{name}")
        nbformat.write(release_notebook(lab, src, wheel_url, colab), out / "labs" / name)
        released.append(out / "labs" / name)
        table.append((lab, colab))

    (out / "requirements.txt").write_text(student_requirements((root / "requirements.txt").read_text(), probe.name))
    (out / "README.md").write_text(student_readme(m, table, probe.name))
    build_site(out / "site", root=root, public_on=today)
    return Release(
        out,
        today,
        probe,
        wheel_url,
        released,
        revealed=[lab.code for lab in m.labs if lab.revealed(today)],
        withheld={lab.code: str(lab.reveal or "never") for lab in m.labs if not lab.revealed(today)},
        warnings=release_warnings(m),
    )
