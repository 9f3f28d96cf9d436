"""course.yml agrees with the notebooks and the grader: one manifest, nothing written twice differently."""

from __future__ import annotations

import importlib
from pathlib import Path

import nbformat
import pytest

from autograder.course_manifest import REPO_ROOT, ManifestError, load, manifest

LABS = manifest().labs
SEED_NOTEBOOKS = [
    "lab-1.1-first-kernels",
    "lab-1.2-tiled-matmul",
    "lab-1.3-fused-softmax-layernorm",
    "lab-1.4-pipelining-profile",
]
# After the seed's four: week 3's Tokamax reading, in its own notebook (issue 7), and week 4's explicit copies and
# online softmax (issue 43), same path convention.
LATER_NOTEBOOKS = ["lab-1.5-reading-tokamax", "lab-1.6-copies-online-softmax"]


def _graded_cells(path: Path) -> dict[str, dict]:
    nb = nbformat.read(path, as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: dict(c.metadata["nbgrader"], cell_type=c.cell_type)
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade")
    }


def test_labs_with_the_seed_paths() -> None:
    assert [Path(l.notebook).stem for l in LABS] == SEED_NOTEBOOKS + LATER_NOTEBOOKS
    for lab in LABS:
        assert lab.notebook == f"labs/stage-1/{Path(lab.notebook).name}"
        assert lab.source == f"solutions/stage-1/{Path(lab.notebook).name}"


@pytest.mark.parametrize("lab", [l for l in LABS if l.tests], ids=lambda l: l.id)
def test_points_match_the_notebook(lab) -> None:
    """Every test and written answer in course.yml is a graded cell with the same points, and back."""
    cells = _graded_cells(REPO_ROOT / lab.source)
    expected = {t.id: t.points for t in lab.tests} | {w.id: w.points for w in lab.written}
    assert {k: v["points"] for k, v in cells.items()} == expected
    for w in lab.written:
        assert cells[w.id]["solution"] and cells[w.id]["cell_type"] == "markdown", w.id


@pytest.mark.parametrize("lab", [l for l in LABS if l.tests], ids=lambda l: l.id)
def test_grader_has_a_check_per_test(lab) -> None:
    module = importlib.import_module(lab.grader)
    missing = [t.id for t in lab.tests if not callable(getattr(module, t.id, None))]
    assert not missing, f"{lab.grader} lacks checks for {missing}"


def test_bad_manifest_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "course.yml"
    bad.write_text((REPO_ROOT / "course.yml").read_text().replace("points: 2,", "points: -2,", 1))
    with pytest.raises(ManifestError, match=r"labs\.0\.tests\.0\.points: .*greater than 0"):
        load(bad)


def test_missing_manifest_says_where(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="not found"):
        load(tmp_path / "course.yml")


@pytest.mark.parametrize("lab", [l for l in LABS if (REPO_ROOT / l.source).exists()], ids=lambda l: l.id)
def test_colab_install_spec_matches_the_manifest(lab) -> None:
    """The parameters cell installs the helpers from where course.yml says they live."""
    nb = nbformat.read(REPO_ROOT / lab.source, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "one cell tagged parameters, for papermill"
    assert f'COURSE_PIP = "{manifest().course.colab_pip}"' in params[0].source
    assert 'MODE = "auto"' in params[0].source


def test_the_wheel_reads_what_the_release_writes_and_the_grader_reads_the_rest() -> None:
    """The wheel's schema (pallas_course.manifest) reads the release's course.yml, which holds no field of the
    grader's schema (autograder.course_manifest) that the wheel's lacks; the grader's reads them all."""
    import yaml

    from autograder.public_manifest import public_manifest
    from pallas_course import manifest as student

    raw = yaml.safe_load((REPO_ROOT / "course.yml").read_text())
    public = public_manifest(raw, "pallas-from-zero @ https://example.invalid/x.whl")
    m = student.Manifest.model_validate(public)
    assert [lab.id for lab in m.labs] == [lab.id for lab in LABS]
    for lab in public["labs"]:
        assert set(lab) <= set(student.LabSpec.model_fields), lab["id"]
        assert all(set(t) <= set(student.TestSpec.model_fields) for t in lab["tests"]), lab["id"]
        assert all(set(w) <= set(student.WrittenSpec.model_fields) for w in lab["written"]), lab["id"]
    assert all(lab.source and lab.grader for lab in LABS) and manifest().compile_rule("add_f32") is not None


def test_the_grader_s_schema_refuses_a_misspelt_field(tmp_path: Path) -> None:
    bad = tmp_path / "course.yml"
    bad.write_text(
        (REPO_ROOT / "course.yml")
        .read_text()
        .replace("    checks:", "    chekcs:", 1)
        .replace(", checks: ", ", chekcs: ", 1)
    )
    with pytest.raises(ManifestError, match=r"labs\.0\.tests\.0\.chekcs: Extra inputs are not permitted"):
        load(bad)
