"""Agreement by construction: every family of inputs a graded test covers (its dtypes, square and non-square grids,
rectangular blocks, the kinds of rows, the chips' core counts...) is one the notebook's visible checks run too,
under the same rule and tolerance, so a mistake that loses points fails a visible check first. The grade's
hidden cases may add fresh inputs and sizes, never a family the notebook does not show."""

from __future__ import annotations

import importlib
import re

import nbformat
import pytest

from pallas_course import lab_checks
from autograder.course_manifest import REPO_ROOT, manifest

LABS = [lab for lab in manifest().labs if lab.kernels]  # LAB·1.5's reading is graded against a key, not on inputs
TESTS = [pytest.param(lab, t.id, id=t.id) for lab in LABS for t in lab.tests]


def _visible(lab, test_id: str) -> frozenset[str]:
    checks = importlib.import_module(lab.grader)
    return (
        checks.visible_families(test_id)
        if hasattr(checks, "visible_families")
        else lab_checks.visible_families(test_id)
    )


def _runner_call(test_id: str, lab) -> str:
    """The call in the notebook's check cells that runs this test's visible cases."""
    kernel = lab.test(test_id).kernel
    if lab.id.startswith("lab-1.4"):
        return {
            "pipeline_off": "check_pipeline_off(matmul_pipeline_off",
            "step_time_model": "check_step_times(step_times",
            "working_set": "check_working_set(vmem_working_set",
            "fed_block": "check_fed_block(smallest_fed_block",
            "budget_line": "check_budget_line(largest_square_block",
            "block_choice": "check_block_choice(choose_blocks",
            "legal_or_not": "check_legal_or_not(blockspec_verdict",
        }.get(test_id, f"{kernel}(")
    if test_id == "softmax_time_model":  # LAB·1.3's model, a plain function: pallas_course.lab_1_3_rules
        return "check_softmax_seconds(softmax_seconds"
    if test_id == "rows_per_block_choice":  # LAB·1.3's block choice, a plain function too
        return "check_rows_per_block(rows_per_block"
    return f'check_kernel("{kernel}", {kernel})'


@pytest.mark.parametrize("lab,test_id", TESTS)
def test_every_hidden_family_is_shown(lab, test_id: str) -> None:
    hidden = importlib.import_module(lab.grader).families(test_id)
    assert hidden, f"{test_id}: the grade declares no families"
    unseen = hidden - _visible(lab, test_id)
    assert not unseen, f"{test_id}: the grade covers {sorted(unseen)}, which no visible check runs"


@pytest.mark.parametrize("lab,test_id", TESTS)
def test_the_notebook_runs_the_visible_cases(lab, test_id: str) -> None:
    """The visible cases are not only declared: a check cell of the lab (solution and stub alike) runs them."""
    call = _runner_call(test_id, lab)
    for path in (lab.source, lab.notebook):
        nb = nbformat.read(REPO_ROOT / path, as_version=4)
        checks = [c.source for c in nb.cells if c.cell_type == "code" and "check" in c.metadata.get("tags", [])]
        assert any(call in src for src in checks), f"{path}: no check cell calls {call}"


def test_visible_cases_use_the_graded_tolerances() -> None:
    """One home for the tolerances: the hidden checks read pallas_course.rules, and no check cell types in a
    looser one for a graded kernel (LAB·1.3's LayerNorm checked at 1e-4 let eps = 1e-5 through)."""
    from autograder.labs import lab_1_3
    from pallas_course import rules

    assert lab_1_3.LAYERNORM_F32 is rules.LAYERNORM_F32 and lab_1_3.SOFTMAX_F32 is rules.SOFTMAX_F32
    nb = nbformat.read(REPO_ROOT / "solutions/stage-1/lab-1.3-fused-softmax-layernorm.ipynb", as_version=4)
    tols = {
        float(t)
        for c in nb.cells
        if "check" in c.metadata.get("tags", [])
        for t in re.findall(r"\btol=([0-9.e+-]+)", c.source)
    }
    assert tols <= {1e-5, 3e-3}, tols


def _alternatives() -> list:
    from tests.mutants import lab_1_1, lab_1_2, lab_1_3

    return [pytest.param(m.LAB, a, id=a.name) for m in (lab_1_1, lab_1_2, lab_1_3) for a in m.ALTERNATIVES]


@pytest.mark.parametrize("lab_id,alt", _alternatives())
def test_alternatives_pass_the_visible_checks_too(lab_id: str, alt) -> None:
    """A correct spelling the grade accepts (a squeezed (None, d) BlockSpec for g, pl.Squeezed(), g passed 1-D...)
    gets ✓ from the visible checks as well."""
    from autograder.notebook_code import load

    lab = manifest().lab(lab_id)
    namespace = load(REPO_ROOT / lab.source, alt.edits)
    for kernel in sorted(lab_checks.CASES):
        if any(kernel in old or kernel in new for old, new in alt.edits.items()) and kernel in namespace:
            lab_checks.check_kernel(kernel, namespace[kernel])


def test_lab_1_5_check_shows_the_grade_s_categories(capsys) -> None:
    """LAB·1.5's check before grading (tokamax_reading.check_form, in a check cell of the solution and the stub)
    counts the margin per category, the categories the grade tallies (autograder.labs.lab_1_5), and reads nothing
    of the key: the same counts for any margin of the same form."""
    from autograder.labs import lab_1_5
    from pallas_course import tokamax_reading

    lab = manifest().lab(lab_1_5.LAB)
    for path in (lab.source, lab.notebook):
        nb = nbformat.read(REPO_ROOT / path, as_version=4)
        assert any(
            "tokamax_reading.check_form(marks)" in c.source
            for c in nb.cells
            if c.cell_type == "code" and "check" in c.metadata.get("tags", [])
        ), path
    graded = {m for m in lab_1_5.key().marks.values() if m != "blank"}
    assert graded == set(tokamax_reading._ALIASES.values()) == {"algorithm", "schedule"}
    key = {n: m for n, m in lab_1_5.key().marks.items() if m != "blank"}  # the key as a student's margin
    flipped = {n: {"algorithm": "schedule", "schedule": "algorithm"}[m] for n, m in key.items()}
    tokamax_reading.check_form(key)
    right = capsys.readouterr().out
    tokamax_reading.check_form(flipped)
    wrong = capsys.readouterr().out
    assert right.startswith("✓ marks:") and wrong.startswith("✓ marks:")
    assert re.sub(r"\(\d+ algorithm, \d+ schedule\)", "", right) == re.sub(
        r"\(\d+ algorithm, \d+ schedule\)", "", wrong
    )
