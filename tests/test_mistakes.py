"""The mistake corpus (tests/mistakes/corpus.py): for each typical mistake, the first five lines a student
reads from the visible checks name it, and the visible checks and the hidden checks agree."""

from __future__ import annotations

import importlib
import re

import pytest

from autograder.labs.harness import TestFailure
from autograder.course_manifest import REPO_ROOT, manifest
from tests.mistakes import Lab, Mistake
from tests.mistakes.corpus import MISTAKES

CASES = [pytest.param(lab, m, id=m.name) for lab, ms in MISTAKES.items() for m in ms]


@pytest.fixture(scope="module")
def labs() -> dict[str, Lab]:
    """Each lab's set-up cell, run once for every mistake of the module (loaded on first use)."""
    return {}


def test_corpus_has_thirty_mistakes() -> None:
    assert sum(len(ms) for ms in MISTAKES.values()) >= 30
    graded_on_inputs = [lab for lab in manifest().labs if lab.kernels]  # LAB·1.5's reading is graded against a key
    assert all(MISTAKES.get(lab.id) for lab in graded_on_inputs), "LAB·1.1-1.4 and 1.6 each have mistakes"


@pytest.mark.parametrize("lab_id,mistake", CASES)
def test_visible_and_hidden_agree(labs: dict[str, Lab], lab_id: str, mistake: Mistake, monkeypatch) -> None:
    from pallas_course.graded_compile import SWITCH_ENV

    if "compile" not in mistake.shown:
        # the visible checks' own TPU compiles (libtpu) only matter to the mistakes the compiler refuses, whose
        # `shown` says so; the grade still compiles every case (compile_rule), so agreement is still tested
        monkeypatch.setenv(SWITCH_ENV, "0")
    lab = manifest().lab(lab_id)
    if lab_id not in labs:
        labs[lab_id] = Lab.load(REPO_ROOT / lab.source)
    kernels = {lab.test(t).kernel for t in mistake.hidden + mistake.passing}
    namespace, shown = labs[lab_id].run(mistake.edits, kernels)
    checks = importlib.import_module(lab.grader)
    if mistake.hidden:
        assert shown is not None, f"{mistake.name}: every visible check passed, the grade fails {mistake.hidden}"
        first_five = "\n".join(shown.splitlines()[:5])
        assert re.search(mistake.shown, first_five), f"{mistake.name} ({mistake.why}):\n{first_five}"
    else:
        assert shown is None, f"{mistake.name}: a visible check fails, but the grade passes:\n{shown}"
    for test_id in mistake.hidden:
        with pytest.raises(TestFailure) as failure:
            getattr(checks, test_id)(namespace[lab.test(test_id).kernel])
        if mistake.graded:
            assert re.search(mistake.graded, str(failure.value)), f"{mistake.name}, graded: {failure.value}"
    for test_id in mistake.passing:
        getattr(checks, test_id)(namespace[lab.test(test_id).kernel])
