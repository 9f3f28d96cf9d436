"""The fingerprint covers what decides a score and nothing else: editing a report, an export or a docstring
reuses every stored result; editing a check or the scoring code regrades (autograder.fingerprint)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder import fingerprint
from autograder.course_manifest import REPO_ROOT, manifest

LABS = [lab for lab in manifest().labs if lab.tests]


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    for part in ("autograder", "pallas_course", "solutions", "labs"):
        shutil.copytree(REPO_ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _prints(root: Path) -> dict[str, str]:
    return {lab.id: fingerprint.fingerprint(lab, root) for lab in LABS}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r}"
    path.write_text(text.replace(old, new, 1))


def test_a_copy_has_the_same_fingerprint(copy: Path) -> None:
    assert _prints(copy) == {lab.id: fingerprint.grader_fingerprint(lab.id) for lab in LABS}


def test_reports_exports_and_docstrings_reuse_every_result(copy: Path) -> None:
    before = _prints(copy)
    _edit(copy / "autograder/steps/report.py", '"""The results', '"""A typo fixed: the results')
    _edit(copy / "autograder/steps/report.py", "def to_json(", "def to_json_text(")  # not scoring: any edit
    _edit(copy / "autograder/steps/export.py", '"""Hand the grades', '"""Hand all the grades')
    _edit(copy / "autograder/steps/score.py", '"""Score an executed', '"""Score (a reworded docstring) an executed')
    _edit(copy / "autograder/steps/score.py", "def score_tests(", "# a comment\ndef score_tests(")
    assert _prints(copy) == before


def test_scoring_code_checks_and_notebooks_regrade(copy: Path) -> None:
    before = _prints(copy)
    _edit(copy / "autograder/labs/lab_1_1.py", "def ", "X = 1\n\n\ndef ")
    after = _prints(copy)
    assert after["lab-1.1-first-kernels"] != before["lab-1.1-first-kernels"]
    assert {k: v for k, v in after.items() if k != "lab-1.1-first-kernels"} == {
        k: v for k, v in before.items() if k != "lab-1.1-first-kernels"
    }
    _edit(copy / "autograder/steps/score.py", "def score_tests(", "Y = 2\n\n\ndef score_tests(")
    assert all(v != after[k] for k, v in _prints(copy).items())


def test_the_reference_kernels_regrade_lab_1_4_alone(copy: Path) -> None:
    """LAB·1.4's checks judge with the reference matmul (autograder/labs/reference_kernels.py): editing it regrades
    LAB·1.4 and no other lab."""
    lab_1_4 = "lab-1.4-pipelining-profile"
    before = _prints(copy)
    _edit(copy / "autograder/labs/reference_kernels.py", "def matmul_acc_kernel(", "Z = 3\n\n\ndef matmul_acc_kernel(")
    after = _prints(copy)
    assert after[lab_1_4] != before[lab_1_4]
    assert {k: v for k, v in after.items() if k != lab_1_4} == {k: v for k, v in before.items() if k != lab_1_4}


def test_what_is_hashed() -> None:
    names = {str(p.relative_to(REPO_ROOT)) for lab in LABS for p in fingerprint.lab_files(lab)}
    assert {
        "autograder/steps/execute.py",
        "autograder/steps/score.py",
        "autograder/steps/restore.py",
        "autograder/cells.py",
        "autograder/jail/jail_agent/calls.py",
        "pallas_course/kernel_trace.py",
        "pallas_course/runtime.py",
        "autograder/keys/tokamax_reading.yml",
    } <= names
    assert not names & {
        "autograder/steps/report.py",
        "autograder/steps/export.py",
        "autograder/doors/course_grade.py",
        "autograder/doors/batch.py",
    }
    assert not [n for n in names if n.startswith("course_tools/")]
    lab = manifest().lab("lab-1.1-first-kernels")
    assert {lab.source, lab.notebook, "autograder/labs/lab_1_1.py"} <= {
        str(p.relative_to(REPO_ROOT)) for p in fingerprint.lab_files(lab)
    }
    lab_1_4 = {
        str(p.relative_to(REPO_ROOT)) for p in fingerprint.lab_files(manifest().lab("lab-1.4-pipelining-profile"))
    }
    assert {"autograder/labs/lab_1_4.py", "autograder/labs/reference_kernels.py"} <= lab_1_4


def test_the_guard_watches_all_the_code() -> None:
    """--no-jail: a notebook that rewrites a report could forge results too, so the guard watches every file."""
    watched = {str(p.relative_to(REPO_ROOT)) for p in fingerprint.grader_files()}
    assert {
        "autograder/steps/report.py",
        "course_tools/grading_report.py",
        "course.yml",
        "autograder/steps/score.py",
    } <= watched


def test_the_grader_s_schema_and_course_yml_s_scoring_fields_are_covered() -> None:
    """course.yml's grader fields live in autograder.course_manifest (the wheel's pallas_course.manifest has
    none): both schemas are hashed as scoring code, and a lab's rubric, checks, compile rule and checks module
    are hashed as what course.yml says of it."""
    lab = manifest().lab("lab-1.1-first-kernels")
    names = {str(p.relative_to(REPO_ROOT)) for p in fingerprint.lab_files(lab)}
    assert {"autograder/course_manifest.py", "pallas_course/manifest.py"} <= names
    part = fingerprint._manifest_part(lab)
    assert lab.written[0].rubric[0] in part and lab.tests[0].checks in part and lab.grader in part
    assert lab.compile is not None and '"compile": {"chips": ["v5e", "v6e"]' in part
