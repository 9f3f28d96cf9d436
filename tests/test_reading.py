"""LAB·1.5, the Tokamax reading: the source comes from the pinned tokamax, the grader-side key grades with
partial credit, a stale key says so, and the kernel matches tokamax's reference under TPU interpret mode.
(That the student-facing package carries no key is tests/test_walks.py's, which needs no tokamax.)"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from typing import Any

import json

import nbformat
import numpy as np
import pytest

from pallas_course.check import CheckFailure
from hypothesis import given, settings, strategies as st

from pallas_course import tokamax_reading, walks as W

if W.installed_version("tokamax") is None:
    pytest.skip(
        "tokamax is not installed (pip install tokamax==0.0.12, pinned in requirements.txt): "
        "the reading reads its source",
        allow_module_level=True,
    )

from autograder.labs.harness import TestFailure
from autograder.labs import lab_1_5
from autograder.course_manifest import REPO_ROOT, manifest

LAB = manifest().lab(lab_1_5.LAB)
POINTS = LAB.test("margin_marks").points
BEFORE, AFTER = LAB.reveal - dt.timedelta(days=1), LAB.reveal  # the reveal date, from course.yml


@pytest.fixture(scope="module")
def key() -> W.Walk:
    """The reading with the grader's key laid over it (autograder/keys/tokamax_reading.yml)."""
    return lab_1_5.key()


def _key_margin(key: W.Walk) -> dict[int, str]:
    return {n: m for n, m in key.marks.items() if m != "blank"}


def _flip(mark: str) -> str:
    return "schedule" if mark == "algorithm" else "algorithm"


def test_source_is_the_installed_tokamax_with_its_line_numbers(key: W.Walk) -> None:
    """Lines 66-340 of the package file, read with inspect: the helper, the kernel and its wrapper."""
    import inspect

    import tokamax._src.ops.linear_softmax_cross_entropy_loss.pallas_mosaic_tpu_kernel as module

    file_lines = Path(inspect.getsourcefile(module)).read_text().split("\n")
    assert key.origin.startswith(f"tokamax {tokamax_reading.PIN}, ")
    assert (key.first_line, key.last_line) == (66, 340)
    assert key.lines == file_lines[65:340]
    assert key.text(129).startswith("def linear_softmax_cross_entropy_loss_forward_pallas_kernel(")
    assert key.text(337).strip() == "grid=(num_b_blocks, num_v_blocks, num_h_blocks),"


def test_the_key_is_not_copied_code(key: W.Walk) -> None:
    """walks.yml stores notes and a hash, the grader's key marks and a hash, never tokamax's lines."""
    for path in (W.DATA_PATH, lab_1_5.KEY_PATH):
        data = path.read_text()
        for n in key.code_lines():
            text = key.text(n).strip()
            if len(text) > 30:
                assert text not in data, f"line {n} of tokamax is copied into {path.name}"


def test_key_is_current_and_written_for_the_pin(key: W.Walk) -> None:
    """The key fits the installed (pinned) lines: every code line marked, the hash the same as the notes'."""
    raw = lab_1_5.load_key()
    assert key.stale is None, key.stale
    assert raw["walk"] == tokamax_reading.WALK_ID
    assert raw["written_for"] == {"package": tokamax_reading.PACKAGE, "version": tokamax_reading.PIN}
    student = tokamax_reading.reading()
    assert raw["source_hash"] == student.key_hash == student.source_hash == key.source_hash
    assert raw["first_line"] == key.first_line
    assert set(key.marks) == {n for n, _ in key.numbered()}
    assert [n for n, m in sorted(key.marks.items()) if m != "blank"] == key.code_lines()
    graded = key.graded_lines()
    assert (len(graded), sum(1 for n in graded if key.marks[n] == "algorithm")) == (137, 45)  # lab_1_5's docstring


def test_a_key_that_does_not_fit_the_lines_refuses_to_grade(key: W.Walk, tmp_path: Path) -> None:
    """A grader-side key with a mark on a blank line and an unmarked code line: stale, and no grading."""
    import yaml

    raw = lab_1_5.load_key()
    raw["marks"] = {
        "algorithm": raw["marks"]["algorithm"] + ", 78",
        "schedule": raw["marks"]["schedule"].replace("82, ", ""),
    }
    path = tmp_path / "key.yml"
    path.write_text(yaml.safe_dump(raw))
    bad = lab_1_5.key(path)
    assert "line 78 is marked algorithm but has no code" in bad.stale
    assert "code lines without a mark: 82" in bad.stale
    assert bad.stale.startswith(f"the key's marks don't fit the code ({path})")


def test_without_the_key_file_the_grader_says_where_it_lives(monkeypatch, tmp_path: Path) -> None:
    """An install of the helpers package has no autograder/keys/: the test cannot grade, and says why."""
    monkeypatch.setattr(lab_1_5, "KEY_PATH", tmp_path / "keys" / "tokamax_reading.yml")
    with pytest.raises(TestFailure, match=r"^margin_marks: cannot grade here: the key is not here: .*grader-side only"):
        lab_1_5.margin_marks({66: "algorithm"})


def test_pinned_release_matches_requirements() -> None:
    reqs = (REPO_ROOT / "requirements.txt").read_text().split("\n")
    assert f"tokamax=={tokamax_reading.PIN}" in reqs


def test_key_gets_full_marks(key: W.Walk, capsys) -> None:
    assert lab_1_5.margin_marks(_key_margin(key)) == POINTS
    assert f"= {POINTS:g} of {POINTS:g}" in capsys.readouterr().out


def test_key_written_as_ranges_gets_full_marks() -> None:
    """A student may write ranges; blank lines inside them are ignored, and single lines win over ranges."""
    raw = lab_1_5.load_key()
    margin: dict = {}
    for mark in ("schedule", "algorithm"):
        for part in raw["marks"][mark].split(","):
            lo, _, hi = part.strip().partition("-")
            margin[range(int(lo), int(hi or lo) + 1)] = mark[0]  # "a" / "s" abbreviations
    assert lab_1_5.margin_marks(margin) == POINTS
    overlapping = {range(66, 341): "schedule"} | {n: "algorithm" for n in parse_key("algorithm")}
    assert lab_1_5.margin_marks(overlapping) == POINTS


def test_any_form_the_notebook_allows_is_graded_through_the_wire() -> None:
    """Ranges, ints and both mixed, as the jail sends them (tagged ranges, keys that are not strings): full
    marks, not "unhashable dict key". A range of 10**18 lines costs nothing: only the reading's lines are read."""
    from autograder.jail.jail_agent import wire

    raw = lab_1_5.load_key()
    as_ranges: dict = {}
    for mark in ("schedule", "algorithm"):
        for part in raw["marks"][mark].split(","):
            lo, _, hi = part.strip().partition("-")
            as_ranges[range(int(lo), int(hi or lo) + 1)] = mark
    as_ints = {n: m for r, m in as_ranges.items() for n in r}
    mixed = {range(0, 10**18): "schedule"} | {n: "algorithm" for n in parse_key("algorithm")}
    for margin in (as_ranges, as_ints, mixed):
        blobs: list[bytes] = []
        sent = wire.decode(json.loads(json.dumps(wire.encode(margin, blobs))), blobs)
        assert sent == margin
        assert lab_1_5.margin_marks(sent) == POINTS


_HUGE = 2**63 - 1
_KEYS = st.one_of(
    st.integers(-_HUGE, _HUGE),
    st.builds(range, st.integers(-_HUGE, _HUGE), st.integers(-_HUGE, _HUGE), st.integers(-400, 400).filter(bool)),
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, st.sampled_from(["a", "s", "algorithm", "schedule", "copper"]), max_size=6))
def test_any_margin_of_ints_and_ranges_is_read_quickly_and_never_fails(marks: dict) -> None:
    """Whatever ints and ranges (any size, step or sign the wire lets through) a margin holds: read, never an
    error, only code lines of the reading marked, anything else named as not understood."""
    w = tokamax_reading.reading()
    margin = tokamax_reading.read_margin(marks, w)
    assert set(margin.marks) <= set(w.code_lines())
    assert all(isinstance(p, str) and len(p) < 300 for p in margin.problems)


def test_before_the_reveal_date_feedback_counts_and_never_names_a_line(key: W.Walk, capsys) -> None:
    """A margin marking everything "algorithm" learns how many lines disagree per category, not which: no line
    number of the reading appears in what it prints (the one-submission leak of the whole key)."""
    assert lab_1_5.margin_marks({range(66, 341): "algorithm"}, on=BEFORE) == 0
    out = capsys.readouterr().out
    alg, sch = (sum(1 for n in key.graded_lines() if key.marks[n] == m) for m in ("algorithm", "schedule"))
    assert f"algorithm lines marked algorithm {alg}/{alg}" in out
    assert f"schedule lines marked schedule 0/{sch} ({sch} marked the other way, 0 not marked)" in out
    assert f"which lines disagree is shown from {LAB.reveal}" in out
    assert not [int(x) for x in re.findall(r"\d+", out) if 66 <= int(x) <= 340 and int(x) not in (alg, sch)], out
    margin = _key_margin(key)
    for n in (82, 204):
        margin[n] = _flip(margin[n])
    lab_1_5.margin_marks(margin, on=BEFORE)
    out = capsys.readouterr().out
    assert "82" not in out and "204" not in out and "marked differently" not in out


def test_from_the_reveal_date_feedback_names_the_lines(key: W.Walk, capsys) -> None:
    margin = _key_margin(key)
    for n in (82, 204):
        margin[n] = _flip(margin[n])
    del margin[192]
    lab_1_5.margin_marks(margin, on=AFTER)
    out = capsys.readouterr().out
    assert "marked differently from the key: 82, 204" in out and "not marked: 192" in out


def test_the_grader_s_today_is_the_reveal_clock(monkeypatch, capsys) -> None:
    """The hidden test cell passes no date: the grader's today decides (tests move it)."""
    monkeypatch.setattr(lab_1_5, "today", lambda: BEFORE)
    lab_1_5.margin_marks({range(66, 341): "algorithm"})
    assert "which lines disagree is shown from" in capsys.readouterr().out
    monkeypatch.setattr(lab_1_5, "today", lambda: AFTER)
    lab_1_5.margin_marks({range(66, 341): "algorithm"})
    assert "marked differently from the key: " in capsys.readouterr().out


def test_the_solution_writes_out_the_key_and_agrees_with_it(key: W.Walk) -> None:
    """The solution's answer cell holds the model answer as code (the jail cannot see the key), exactly what
    `python -m autograder.labs.lab_1_5 --write-solution` writes from the key, and it means the key's marks."""
    from autograder.cells import grade_id

    nb = nbformat.read(REPO_ROOT / LAB.source, as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == lab_1_5.SOLUTION_CELL]
    region = lab_1_5.solution_region(cell.source)
    assert region == lab_1_5.model_answer(), "run `python -m autograder.labs.lab_1_5 --write-solution`"
    assert "import" not in region and "key_margin" not in region
    namespace: dict = {}
    exec(region, namespace)  # noqa: S102 - the course's own model answer
    assert tokamax_reading.read_margin(namespace["marks"], key).marks == _key_margin(key)


def parse_key(mark: str) -> list[int]:
    return W.parse_ranges(lab_1_5.load_key()["marks"][mark])


def test_half_wrong_margin_gets_about_half(key: W.Walk, capsys) -> None:
    """Every second graded line flipped: partial credit, read by nbgrader from the number returned."""
    margin = _key_margin(key)
    for i, n in enumerate(key.graded_lines()):
        if i % 2:
            margin[n] = _flip(margin[n])
    score = lab_1_5.margin_marks(margin, on=AFTER)
    assert 0.4 * POINTS < score < 0.6 * POINTS
    out = capsys.readouterr().out
    assert "marked differently from the key: " in out and "smaller share" in out


def test_a_few_wrong_lines_cost_a_little(key: W.Walk) -> None:
    margin = _key_margin(key)
    for n in (82, 204, 192, 209):  # two schedule lines, two algorithm lines
        margin[n] = _flip(margin[n])
    alg = sum(1 for n in key.graded_lines() if key.marks[n] == "algorithm")
    assert lab_1_5.margin_marks(margin) == pytest.approx(np.floor(POINTS * (alg - 2) / alg * 100) / 100)


def test_one_colour_margin_gets_nothing(key: W.Walk) -> None:
    """Two thirds of the graded lines are schedule: marking them all schedule must not earn two thirds."""
    assert lab_1_5.margin_marks({range(66, 341): "schedule"}) == 0
    assert lab_1_5.margin_marks({range(66, 341): "algorithm"}) == 0


def test_ungraded_lines_and_unreadable_entries(key: W.Walk, capsys) -> None:
    """Either mark on an ungraded line is fine; a mark that is not a mark is named and ignored."""
    margin = _key_margin(key)
    for n in key.ungraded:
        margin[n] = _flip(margin[n])
    margin[500] = "schedule"
    margin["82"] = "schedule"
    margin[82] = "copper"
    score = lab_1_5.margin_marks(margin, on=AFTER)
    out = capsys.readouterr().out
    assert 0 < score < POINTS  # line 82 now unmarked
    assert "not marked: 82" in out
    assert "'copper' is not a mark" in out and "the reading has lines 66-340; 500 ignored" in out
    assert "a key is a line number or a range" in out


def test_a_value_that_is_no_mark_is_named_as_such_not_as_the_other_way(key: W.Walk, capsys) -> None:
    """Issue 37: the whole reading marked schedule, the algorithm lines then marked "compute" (not a mark): the grade
    tallied them "marked the other way" (the range's schedule stood in), where the notebook says "'compute' is not a
    mark". Both now say the lines are marked 'compute', which is not a mark, and neither counts them."""
    algorithm = [n for n in key.graded_lines() if key.marks[n] == "algorithm"]
    margin = {range(66, 341): "schedule", **{n: "compute" for n in algorithm}}
    assert lab_1_5.margin_marks(margin, on=BEFORE) == 0
    out = capsys.readouterr().out
    assert (
        f"algorithm lines marked algorithm 0/{len(algorithm)} (0 marked the other way, 0 not marked, "
        f"{len(algorithm)} marked 'compute', which is not a mark)"
    ) in out
    with pytest.raises(CheckFailure, match=r"marked 'compute', which is not a mark \(so not marked\): \d"):
        tokamax_reading.check_form(margin)


def test_stub_scores_nothing_and_says_why() -> None:
    with pytest.raises(TestFailure, match=r"^margin_marks: not implemented yet: no line of the reading is marked"):
        lab_1_5.margin_marks({})
    with pytest.raises(TestFailure, match="not implemented yet.*should be a dict"):
        lab_1_5.margin_marks(None)


def test_changed_source_makes_the_key_stale(key: W.Walk, monkeypatch) -> None:
    """A release whose lines differ: the grader refuses, naming the version and the source hash."""
    real = W.package_lines

    def shifted(module: str, functions: list[str]):
        first, lines, rel = real(module, functions)
        return first, lines[:20] + ["  # a new comment in a later release"] + lines[20:], rel

    monkeypatch.setattr(W, "package_lines", shifted)
    monkeypatch.setattr(W, "installed_version", lambda package: "0.0.13")
    with pytest.raises(
        TestFailure,
        match=r"^margin_marks: the key is stale for tokamax 0\.0\.13 \(source hash "
        r"[0-9a-f]{16}\): the marks were written for tokamax==0\.0\.12 "
        rf"\(source hash {key.source_hash}\)",
    ):
        lab_1_5.margin_marks(_key_margin(key))


def test_same_lines_in_another_release_still_grade(key: W.Walk, monkeypatch) -> None:
    """The key is keyed to the text, not the version number: unchanged lines grade as before."""
    monkeypatch.setattr(W, "installed_version", lambda package: "0.0.13")
    assert lab_1_5.margin_marks(_key_margin(key)) == POINTS


def test_without_tokamax_the_grader_says_what_to_install(monkeypatch) -> None:
    monkeypatch.setattr(tokamax_reading, "installed_version", lambda package: None)
    with pytest.raises(
        TestFailure, match=r"cannot grade here: tokamax is not installed: .*pip install tokamax==0\.0\.12"
    ):
        lab_1_5.margin_marks({66: "algorithm"})


def test_check_form_never_says_right_or_wrong(key: W.Walk, capsys) -> None:
    margin = _key_margin(key)
    for n in key.graded_lines():
        margin[n] = _flip(margin[n])
    tokamax_reading.check_form(margin)
    out = capsys.readouterr().out
    assert "194 of 194 code lines marked" in out and "every code line has a mark" in out
    assert out.startswith("✓ marks:") and "whether a mark is right is decided by the grade" in out
    with pytest.raises(CheckFailure, match=r"not marked yet: 200, 204-210, 212-217, "):
        tokamax_reading.check_form({range(66, 200): "s"})


def test_check_form_reads_the_usual_abbreviations_and_says_what_is_missing(key: W.Walk) -> None:
    """ "algo"/"sched" (any case) read as the words; one kind of mark only, or an entry not understood, is said
    before grading, with the counts per category, never which mark is right (issue 27, points 2 and 5)."""
    margin = tokamax_reading.read_margin({66: "Algo", 67: "SCHED", 68: " alg ", 69: "Sch", 70: "maybe"})
    assert margin.marks == {66: "algorithm", 67: "schedule", 68: "algorithm", 69: "schedule"}
    assert margin.problems == ["70: 'maybe' is not a mark; use 'algorithm' or 'schedule'"]
    with pytest.raises(CheckFailure) as e:
        tokamax_reading.check_form({range(66, 341): "sched"})
    text = str(e.value)
    assert "194 of 194 code lines marked (0 algorithm, 194 schedule)" in text
    assert "no line is marked algorithm" in text and "a margin of one kind earns 0" in text
    with pytest.raises(CheckFailure, match=r"not understood: 70: 'maybe' is not a mark"):
        tokamax_reading.check_form({range(66, 341): "algo", 70: "maybe", 71: "Sched"})


# ------------------------------------------------------------------------------ the kernel, interpret mode


def _run(b: int, h: int, v: int, blocks: dict, reduction: str = "sum", forward: Any = None):
    from pallas_course.runtime import interpret_params

    x, labels, w = tokamax_reading.example_inputs(b, h, v, seed=1)
    with tokamax_reading.on_this_machine(interpret_params()):
        loss, lse = (forward or tokamax_reading.forward())(x, labels, w, reduction=reduction, **blocks)
    ref_loss, ref_lse = tokamax_reading.reference()(x, labels, w, reduction=reduction)
    return (
        np.asarray(loss, np.float64),
        np.asarray(lse, np.float64),
        np.asarray(ref_loss, np.float64),
        np.asarray(ref_lse, np.float64),
    )


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_kernel_matches_its_reference_in_interpret_mode(reduction: str) -> None:
    """Grid (2, 2, 3) with a ragged last H block, as the notebook runs it."""
    loss, lse, ref_loss, ref_lse = _run(
        256, 320, 512, dict(b_block_size=128, h_block_size=128, v_block_size=256), reduction
    )
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)


def test_ragged_vocabulary_counts_each_padded_logit_as_zero() -> None:
    """What the notebook's last run shows (tokamax 0.0.12): the padded V columns enter the logsumexp as logits
    of 0, so lse = logaddexp(reference, log(padding)). The written margin note's rubric depends on this."""
    loss, lse, ref_loss, ref_lse = _run(256, 256, 640, dict(b_block_size=128, h_block_size=128, v_block_size=256))
    pad = 3 * 256 - 640
    assert np.max(np.abs(lse - ref_lse)) > 0.05
    np.testing.assert_allclose(lse, np.logaddexp(ref_lse, np.log(pad)), rtol=1e-5, atol=1e-5)


def test_the_solution_s_mask_on_line_209_fixes_the_ragged_vocabulary() -> None:
    """LAB·1.5's fix in code: tokamax_reading.forward_with_mask with the solution's masked_logits (padded columns to
    -inf) gives the reference's logsumexp and loss on the ragged run; the rest of the file is the one read."""
    from autograder.notebook_code import load

    masked_logits = load(REPO_ROOT / LAB.source)["masked_logits"]
    fixed = tokamax_reading.forward_with_mask(masked_logits)
    loss, lse, ref_loss, ref_lse = _run(
        256, 256, 640, dict(b_block_size=128, h_block_size=128, v_block_size=256), forward=fixed
    )
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)


# The mistakes LAB·1.5's text names for masked_logits (its "Now fix it" cell, its hint and the margin note's model
# answer), as edits to the solution's function: each is named with its cause by the notebook's check_mask, and each
# is a real mistake (tokamax's forward with it misses the reference on the lab's ragged run). masked_logits is not
# graded (the margin note is), so the notebook's check is its one judgement.
COL = "    col = v_index * v_block_size + jax.lax.broadcasted_iota(jnp.int32, xw.shape, 1)\n"
MASK = "    return jnp.where(col < v_dim, xw, -jnp.inf)"
MASK_MISTAKES = {
    # the reading's own bug: 0 is the value that adds nothing to a sum (column_sums), not to a logsumexp
    "masks_with_zero": ({MASK: "    return jnp.where(col < v_dim, xw, 0.0)"}, r"come out 0, not -inf.*exp\(0\) = 1"),
    # the hint: "a column's index in the whole vocabulary is v_index * v_block_size + iota"
    "no_block_offset": (
        {COL: "    col = jax.lax.broadcasted_iota(jnp.int32, xw.shape, 1)\n"},
        r"no block offset.*v_index \* v_block_size",
    ),
    # "along columns this time"
    "iota_along_rows": (
        {COL: COL.replace("xw.shape, 1)", "xw.shape, 0)")},
        r"the mask runs along the rows.*broadcasted_iota\(jnp\.int32, xw\.shape, 1\)",
    ),
    # "the columns at or past v_dim must add nothing"
    "keeps_column_v_dim": ({MASK: MASK.replace("col < v_dim", "col <= v_dim")}, r"column v_dim itself is kept"),
}


def _solution_mask(edits: dict[str, str]) -> Any:
    from autograder.notebook_code import load

    return load(REPO_ROOT / LAB.source, edits)["masked_logits"]


def test_check_mask_passes_the_solution_and_a_very_negative_number(capsys) -> None:
    tokamax_reading.check_mask(_solution_mask({}))
    tokamax_reading.check_mask(_solution_mask({MASK: MASK.replace("-jnp.inf", "-1e30")}))  # the note allows it
    assert capsys.readouterr().out.count("✓ masked_logits") == 2


@pytest.mark.parametrize("name", sorted(MASK_MISTAKES))
def test_each_mask_mistake_the_lab_names_is_named_with_its_cause(name: str) -> None:
    edits, cause = MASK_MISTAKES[name]
    masked_logits = _solution_mask(edits)
    with pytest.raises(CheckFailure) as failure:
        tokamax_reading.check_mask(masked_logits)
    assert re.search(cause, str(failure.value)), failure.value
    assert "no usual mistake" not in str(failure.value)
    _, lse, _, ref_lse = _run(
        256,
        256,
        640,
        dict(b_block_size=128, h_block_size=128, v_block_size=256),
        forward=tokamax_reading.forward_with_mask(masked_logits),
    )
    assert not np.allclose(lse, ref_lse, rtol=1e-5, atol=1e-5), f"{name}: the forward matches the reference"


def test_check_mask_explains_the_stub() -> None:
    def masked_logits(xw, v_index, v_block_size, v_dim):
        raise NotImplementedError("not written yet: replace this line with your code")

    with pytest.raises(CheckFailure, match="still the stub"):
        tokamax_reading.check_mask(masked_logits)


# ------------------------------------------------------------------ through the notebook, as students hand it in


def test_course_grade_reads_the_partial_credit(key: W.Walk, tmp_path: Path) -> None:
    """The student notebook with a half-wrong margin: `course grade` (papermill, nbgrader's scoring rule)
    gives the partial score the check returns, and the written note awaits a person."""
    from autograder.steps.pipeline import grade_one

    nb = nbformat.read(REPO_ROOT / LAB.notebook, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "marks")
    margin = _key_margin(key)
    for i, n in enumerate(key.graded_lines()):
        if i % 2:
            margin[n] = _flip(margin[n])
    cell.source = "marks = " + repr(margin)
    path = tmp_path / Path(LAB.notebook).name
    nbformat.write(nb, path)
    expected = lab_1_5.margin_marks(margin)
    result = grade_one(path)
    assert result.error is None, result.error
    assert [t.points for t in result.tests] == [expected]
    assert 0 < result.score < POINTS


def test_the_worked_example_is_public_runs_and_names_no_instructor_file() -> None:
    """The rule's worked example is a kernel of no lab, in the notebook itself: students see it from day one,
    with no path into solutions/ and no "source hash None" before a reveal date. Its code runs and sums rows."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from pallas_course.runtime import interpret_params

    text = (REPO_ROOT / LAB.notebook).read_text()
    assert "solutions/" not in text and "source hash" not in text and 'walk("' not in text
    nb = nbformat.read(REPO_ROOT / LAB.notebook, as_version=4)
    (example,) = [c.source for c in nb.cells if c.cell_type == "markdown" and "def rowsum_kernel" in c.source]
    rows = [line for line in example.split("```")[1].splitlines() if "│" in line]
    marks = [line.split("│")[0].split()[1:] for line in rows]
    assert all(m in ([], ["A"], ["S"], ["S-"]) for m in marks), marks
    code = "\n".join(line.split("│ ", 1)[1] if "│ " in line else "" for line in rows)
    namespace = {"pl": pl, "jnp": jnp, "jax": jax, "INTERP": interpret_params()}
    exec(code, namespace)  # noqa: S102 - the walk's own example code
    x = jnp.asarray(np.random.default_rng(0).standard_normal((16, 1024)).astype(np.float32))
    np.testing.assert_allclose(np.asarray(namespace["rowsum"](x)), np.asarray(x).sum(1, keepdims=True), rtol=1e-5)


def test_student_notebook_has_no_key(key: W.Walk) -> None:
    text = (REPO_ROOT / LAB.notebook).read_text()
    assert ".marks.items()" not in text and "BEGIN SOLUTION" not in text
    assert "key_margin" not in text and "autograder" not in text


def test_what_a_student_can_call_gives_no_marks(key: W.Walk, capsys) -> None:
    """Everything the notebook imports, run as a student would: the reading's walk, its render and JSON, the
    reading helpers. None of it holds a mark or an ungraded line of the key."""
    student = tokamax_reading.reading()
    assert student.graded and student.marks == {} and student.ungraded == frozenset()
    assert W.walk("WALK·tokamax").marks == {} and W.walk("tokamax-lsce-forward").to_json()["marks"] == {}
    assert student.code_lines() == key.code_lines()  # the margin's `·` lines are still right
    assert student.graded_lines() == key.code_lines()  # which lines the key leaves out is not said
    rendered = W.render(student)
    assert all(
        line[len(str(student.last_line)) + 1 :].startswith("  │") for line in rendered.split("\n")[3:] if "│" in line
    ), "render shows a mark for the graded reading"
    tokamax_reading.show()
    with pytest.raises(CheckFailure) as e:
        tokamax_reading.check_form({range(66, 341): "s"})
    assert "194 of 194 code lines marked (0 algorithm, 194 schedule)" in str(e.value)


@pytest.mark.slow  # CI: test_course_grade_reads_the_partial_credit (the same engine), and nbgrader's door on
# LAB·1.5's solution (tests/test_solutions_both_doors.py)
def test_nbgrader_autograde_gives_the_same_partial_credit(key: W.Walk, tmp_path: Path) -> None:
    """`nbgrader autograde` itself reads the number the hidden test cell ends with: the same partial score
    as `course grade`, and the margin note awaits manual grading."""
    from nbgrader.api import Gradebook

    from tests.nbgrader_course import nbgrader

    stage = manifest().stage.id
    (tmp_path / "solutions" / stage).mkdir(parents=True)
    shutil.copy(REPO_ROOT / LAB.source, tmp_path / LAB.source)  # this lab alone: quicker than all of them
    run = nbgrader(tmp_path, "generate_assignment", stage, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    nb = nbformat.read(REPO_ROOT / LAB.notebook, as_version=4)
    margin = _key_margin(key)
    for i, n in enumerate(key.graded_lines()):
        if i % 3 == 0:
            margin[n] = _flip(margin[n])
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    cells["marks"].source = "marks = " + repr(margin)
    cells["margin_note"].source = "Line 92 sets the padded logits to 0, and the logsumexp counts them."
    student = tmp_path / "submitted" / "student-a" / stage
    student.mkdir(parents=True)
    nbformat.write(nb, student / Path(LAB.notebook).name)
    run = nbgrader(tmp_path, "autograde", stage, "--force")
    assert run.returncode == 0, run.stdout + run.stderr
    expected = lab_1_5.margin_marks(margin)
    assert 0 < expected < POINTS
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        grades = {g.name: g for g in gb.find_submission_notebook(LAB.id, stage, "student-a").grades}
        assert grades["margin_marks"].auto_score == pytest.approx(expected)
        assert grades["margin_note"].needs_manual_grade
