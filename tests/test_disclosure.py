"""Nothing grader-side in what goes into the jail or comes back to the student (autograder.labs.disclosure).

LAB·1.4: grading choose_blocks and the two searches sends the jail the case and the names of the helpers
to stand in, never a value the grader computed (once: 560 rows of reference step times and working sets that
a notebook could print). LAB·1.5: a margin that marks every line "algorithm", graded through the jail before
the reveal date, gets back counts only: no line of the key in the executed notebook or the feedback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from autograder.labs.disclosure import instructor_only
from autograder.notebook_code import load
from autograder.session.testing import LocalFunction
from autograder.course_manifest import REPO_ROOT, manifest


def test_lab_1_4_sends_the_jail_only_the_case_and_helper_names(monkeypatch) -> None:
    from autograder.labs import lab_1_4

    sent: list[str] = []
    real = LocalFunction._send

    def spy(self, enc_args, enc_kwargs, blobs, stand_in):
        sent.append(json.dumps([enc_args, enc_kwargs, stand_in]))
        assert not blobs
        return real(self, enc_args, enc_kwargs, blobs, stand_in)

    monkeypatch.setattr(LocalFunction, "_send", spy)
    ns = load(REPO_ROOT / manifest().lab("lab-1.4-pipelining-profile").source)
    lab_1_4.fed_block(ns["smallest_fed_block"])
    lab_1_4.budget_line(ns["largest_square_block"])
    lab_1_4.block_choice(ns["choose_blocks"])
    assert len(sent) == len(lab_1_4.FED_BLOCK_CASES) + len(lab_1_4.BUDGET_LINE_CASES) + len(lab_1_4.BLOCK_CHOICE_CASES)
    for request in sent:
        assert '"step_times", "vmem_working_set"' in request
        assert not re.search(r"\d\.\d|e-\d", request), request  # no float: no step time, no reference value


def test_what_an_agent_may_answer_for_its_helpers_is_only_data() -> None:
    """The stand-ins' record is plain data, checked on arrival: a forged one is a malformed answer."""
    from autograder.failures import BadAnswer
    from autograder.session.functions import plain_answer

    with pytest.raises(BadAnswer, match="own: not a mapping of lists"):
        plain_answer({"ok": True, "result": 1, "own": [1, 2]}, [])


def test_lab_1_5_one_colour_margin_through_the_jail_gets_counts_only(tmp_path: Path, monkeypatch) -> None:
    """The attack of issue 19: mark every line "algorithm", hand it in, read the key off the feedback."""
    from pallas_course import walks as W

    if W.installed_version("tokamax") is None:
        pytest.skip("tokamax is not installed: the reading reads its source")
    import datetime as dt

    from autograder.steps.feedback import to_markdown
    from autograder.steps.pipeline import grade_one
    from autograder.labs import lab_1_5

    lab = manifest().lab(lab_1_5.LAB)
    monkeypatch.setattr(lab_1_5, "today", lambda: lab.reveal - dt.timedelta(days=1))
    nb = nbformat.read(REPO_ROOT / lab.notebook, as_version=4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "marks"]
    cell.source = 'marks = {range(66, 341): "algorithm"}'
    path = tmp_path / Path(lab.notebook).name
    nbformat.write(nb, path)
    executed, full = tmp_path / "executed.ipynb", tmp_path / "full.ipynb"
    result = grade_one(path, keep=executed, keep_full=full)
    assert result.error is None and result.score == 0, result
    handed_back = executed.read_text() + to_markdown(result) + json.dumps(result.model_dump())
    assert "schedule lines marked schedule 0/" in handed_back
    assert "marked differently from the key" not in handed_back
    key = lab_1_5.key()
    schedule = W.format_ranges([n for n in key.graded_lines() if key.marks[n] == "schedule"])
    for run in schedule.split(", "):
        if "-" in run:
            assert run not in handed_back, run
    assert not instructor_only(executed.read_text() + to_markdown(result)), instructor_only(handed_back)
