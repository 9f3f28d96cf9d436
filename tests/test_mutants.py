"""The hidden checks against the solution, the student stub, and the mutant corpus, lab by lab.

Checks are called in-process on the notebooks' own definitions (fast); tests/test_grade_cli.py runs the
same notebooks through papermill and nbgrader end to end.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import pytest

from autograder.labs.disclosure import instructor_only
from autograder.labs.harness import TestFailure
from autograder.notebook_code import load
from autograder.course_manifest import REPO_ROOT, LabSpec, manifest
from tests.mutants import Alternative, Mutant

CORPUS_MODULES = [
    "tests.mutants.lab_1_1",
    "tests.mutants.lab_1_2",
    "tests.mutants.lab_1_3",
    "tests.mutants.lab_1_4",
    "tests.mutants.lab_1_6",
]


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
            out += [
                pytest.param(lab, a, t.id, id=f"{a.name}:{t.id}")
                for a in module.ALTERNATIVES
                for t in lab.tests
                if any(t.kernel in old or t.kernel in new for old, new in a.edits.items())
            ]
    return out


@pytest.fixture(scope="module")
def solutions() -> dict[str, dict[str, Any]]:
    return {m.LAB: load(REPO_ROOT / _lab(m).source) for m in _corpus()}


@pytest.fixture(scope="module")
def stubs() -> dict[str, dict[str, Any]]:
    return {m.LAB: load(REPO_ROOT / _lab(m).notebook) for m in _corpus()}


@pytest.mark.slow  # CI: tests/test_solutions_both_doors.py grades every solution to full marks through both doors
@pytest.mark.parametrize("lab,test_id", _params("tests"))
def test_solution_passes(lab: LabSpec, test_id: str, solutions: dict) -> None:
    """The instructor's solution earns every point."""
    _run(lab, solutions[lab.id], test_id)


@pytest.mark.parametrize("lab,test_id", _params("tests"))
def test_stub_fails_with_not_implemented(lab: LabSpec, test_id: str, stubs: dict) -> None:
    """The untouched student notebook earns nothing, and the message says why."""
    with pytest.raises(TestFailure, match="not implemented yet") as failure:
        _run(lab, stubs[lab.id], test_id)
    assert not instructor_only(str(failure.value)), str(failure.value)


@pytest.mark.parametrize("lab,mutant,test_id", _params("mutants"))
def test_mutant_loses_targeted_test(lab: LabSpec, mutant: Mutant, test_id: str) -> None:
    """Each known-wrong kernel loses the test it targets, with a message that names the cause."""
    namespace = load(REPO_ROOT / lab.source, mutant.edits)
    with pytest.raises(TestFailure) as failure:
        _run(lab, namespace, test_id)
    message = str(failure.value)
    assert message.startswith(f"{test_id}: "), message
    assert not instructor_only(message), message  # autograder.labs.disclosure: what feedback never says
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


def test_semantics_enums_keep_the_mark() -> None:
    """LAB·1.2's dimension_semantics written with pltpu.PARALLEL / pltpu.ARBITRARY (enums, not strings) is read as
    the same semantics, through the jail's description and the judge's rebuild alike."""
    from autograder.labs import lab_1_2
    from tests.mutants import lab_1_2 as corpus

    lab = manifest().lab(corpus.LAB)
    lab_1_2.matmul_acc_semantics(load(REPO_ROOT / lab.source, corpus.SEMANTICS_ENUMS)["matmul_acc"])


def test_race_is_caught_by_the_shuffled_order_not_by_the_race_detector() -> None:
    """What catches a kernel that races, as docs/grader.md says (jax 0.10.2). The racing mutant marks K "parallel",
    so on a two-core chip both cores would add into one C block at once. Under the course's interpret params its values
    are wrong without any race detector: TPU interpret mode runs a "parallel" axis in a shuffled order, so the
    zeroing at K step 0 lands mid-run. `detect_races=True` flags nothing on the default one simulated core; only
    with `num_cores_or_threads=2` does it flag the race. (The grade also names the mistake from the trace:
    pipeline_off's "parallel" K rule, test_mutant_loses_targeted_test[pipeline_off_k_parallel:pipeline_off].)"""
    import dataclasses

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src.pallas.mosaic.interpret import interpret_pallas_call as interpreter  # the detector's verdict
    from jax.experimental.pallas import tpu as pltpu

    from pallas_course.runtime import interpret_params
    from tests.mutants import lab_1_4

    (racing,) = [m for m in lab_1_4.MUTANTS if m.name == "pipeline_off_k_parallel"]
    kernel = load(REPO_ROOT / _lab(lab_1_4).source, racing.edits)["matmul_pipeline_off"]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((128, 512), (512, 128)))  # one C block, K in 4
    want = a.astype(np.float64) @ b.astype(np.float64)

    def run(params: pltpu.InterpretParams) -> tuple[float, bool]:
        pltpu.reset_tpu_interpret_mode_state()
        with pltpu.force_tpu_interpret_mode(params):
            out = np.asarray(jax.block_until_ready(kernel(jnp.asarray(a), jnp.asarray(b))))
        races = interpreter.races
        return float(np.nanmax(np.abs(out - want), initial=np.inf)), bool(races is not None and races.races_found)

    course = interpret_params()
    assert not course.detect_races and course.num_cores_or_threads == 1, "the course's settings changed: retest"
    error, flagged = run(course)
    assert error > 1 and not flagged, "the course's settings: wrong values, from the order alone"
    assert run(dataclasses.replace(course, detect_races=True))[1] is False, "one core: the detector sees no race"
    assert run(dataclasses.replace(course, detect_races=True, num_cores_or_threads=2))[1] is True
    pltpu.reset_tpu_interpret_mode_state()


def test_the_visible_checks_run_every_case_the_grade_runs_lab_1_4() -> None:
    """LAB·1.4's visible checks run the grade's own cases (every one): a search right only where m == n
    (choice_square_only), once passing the notebook and failing the grade's 2048 x 8192 x 1024 case, now fails
    its check cell first, in the grade's words."""
    from pallas_course.check import CheckFailure, check_block_choice
    from tests.mutants import lab_1_4

    (square_only,) = [m for m in lab_1_4.MUTANTS if m.name == "choice_square_only"]
    namespace = load(REPO_ROOT / _lab(lab_1_4).source, square_only.edits)
    with pytest.raises(
        CheckFailure,
        match=r"choose_blocks\(2048, 8192, 1024, bfloat16, 'v4'\) chose .* does not "
        r"divide m=2048",
    ):
        check_block_choice(namespace["choose_blocks"], namespace["matmul"])
