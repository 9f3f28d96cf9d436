"""The hidden checks against the solution, the student stub, and the mutant corpus, lab by lab.

Checks are called in-process on the notebooks' own definitions (fast); tests/test_grade_cli.py runs the
same notebooks through papermill and nbgrader end to end.
"""
from __future__ import annotations

import importlib
import re
from typing import Any

import pytest

from autograder.harness import TestFailure
from autograder.notebook_code import load
from pallas_course.manifest import REPO_ROOT, LabSpec, manifest
from tests.mutants import Alternative, Mutant

CORPUS_MODULES = ["tests.mutants.lab_1_1", "tests.mutants.lab_1_2", "tests.mutants.lab_1_3", "tests.mutants.lab_1_4"]


def _corpus() -> list[Any]:
    return [importlib.import_module(m) for m in CORPUS_MODULES]


def _lab(module: Any) -> LabSpec:
    return manifest().lab(module.LAB)


def _checks(lab: LabSpec) -> Any:
    return importlib.import_module(lab.grader)


def _run(lab: LabSpec, namespace: dict[str, Any], test_id: str) -> None:
    spec = lab.test(test_id)
    getattr(_checks(lab), test_id)(namespace[spec.kernel])


def _params(kind: str) -> list[Any]:
    out = []
    for module in _corpus():
        lab = _lab(module)
        if kind == "tests":
            out += [pytest.param(lab, t.id, id=f"{lab.id}:{t.id}") for t in lab.tests]
        elif kind == "mutants":
            out += [pytest.param(lab, m, t, id=f"{m.name}:{t}") for m in module.MUTANTS for t in m.targets]
        elif kind == "others":
            out += [pytest.param(lab, m, t, id=f"{m.name}:{t}") for m in module.MUTANTS for t in m.others_pass]
        elif kind == "alternatives":
            out += [pytest.param(lab, a, t.id, id=f"{a.name}:{t.id}") for a in module.ALTERNATIVES for t in lab.tests
                    if any(t.kernel in old or t.kernel in new for old, new in a.edits.items())]
    return out


@pytest.fixture(scope="module")
def solutions() -> dict[str, dict[str, Any]]:
    return {m.LAB: load(REPO_ROOT / _lab(m).source) for m in _corpus()}


@pytest.fixture(scope="module")
def stubs() -> dict[str, dict[str, Any]]:
    return {m.LAB: load(REPO_ROOT / _lab(m).notebook) for m in _corpus()}


@pytest.mark.parametrize("lab,test_id", _params("tests"))
def test_solution_passes(lab: LabSpec, test_id: str, solutions: dict) -> None:
    """The instructor's solution earns every point."""
    _run(lab, solutions[lab.id], test_id)


@pytest.mark.parametrize("lab,test_id", _params("tests"))
def test_stub_fails_with_not_implemented(lab: LabSpec, test_id: str, stubs: dict) -> None:
    """The untouched student notebook earns nothing, and the message says why."""
    with pytest.raises(TestFailure, match="not implemented yet"):
        _run(lab, stubs[lab.id], test_id)


@pytest.mark.parametrize("lab,mutant,test_id", _params("mutants"))
def test_mutant_loses_targeted_test(lab: LabSpec, mutant: Mutant, test_id: str) -> None:
    """Each known-wrong kernel loses the test it targets, with a message that names the cause."""
    namespace = load(REPO_ROOT / lab.source, mutant.edits)
    with pytest.raises(TestFailure) as failure:
        _run(lab, namespace, test_id)
    message = str(failure.value)
    assert message.startswith(f"{test_id}: "), message
    assert re.search(mutant.targets[test_id], message), f"{mutant.name} ({mutant.why}): {message}"


@pytest.mark.parametrize("lab,mutant,test_id", _params("others"))
def test_mutant_keeps_untargeted_test(lab: LabSpec, mutant: Mutant, test_id: str) -> None:
    """Tests are targeted: a mistake in one place costs the points of that place only."""
    _run(lab, load(REPO_ROOT / lab.source, mutant.edits), test_id)


@pytest.mark.parametrize("lab,alt,test_id", _params("alternatives"))
def test_alternative_keeps_full_marks(lab: LabSpec, alt: Alternative, test_id: str) -> None:
    """Other correct ways to write a kernel are not penalised."""
    _run(lab, load(REPO_ROOT / lab.source, alt.edits), test_id)


@pytest.mark.parametrize("module", _corpus(), ids=lambda m: m.LAB)
def test_every_graded_test_has_a_mutant(module: Any) -> None:
    """A hidden test that no known-wrong kernel fails cannot be shown to work: that is a defect."""
    targeted = {t for m in module.MUTANTS for t in m.targets}
    untargeted = [t.id for t in _lab(module).tests if t.id not in targeted]
    assert not untargeted, f"tests no mutant targets: {untargeted}"
