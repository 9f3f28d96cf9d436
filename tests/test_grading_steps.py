"""Each step of grading called alone: read → identify → restore → execute → score → record → schedule → report,
and the doors' declared lists (autograder.steps.pipeline) run by the one runner.

The engine is a stand-in registered as "fake" (autograder.steps.engines) everywhere but one end-to-end test, so
these run in seconds; real jails are covered there, in test_grade_cli.py and test_grader_batch.py.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat import NotebookNode

import autograder.doors.batch as batch
from autograder import cells
import autograder.steps.submission as submission_module
from course_tools.demo import filled_in
from autograder.steps.discover import Discovery
from autograder.steps.execute import Execution
from autograder.fingerprint import grader_fingerprint
from autograder.steps import engines, pipeline
from autograder.steps.pipeline import Graded, Grading, grade_payload, grade_submission
from autograder.doors.course_grade import GradeOptions, write_report
from autograder.steps.identify import Ungradable, identify
from autograder.steps.record import GRADER_FAILED, Outcome, plan, record, record_failure
from autograder.steps.report import Failures
from autograder.jail.limits import Limits
from autograder.steps.store import EXECUTED, INSTRUCTOR, Store
from autograder.steps.submission import Submission, read_submission, submission_label
from autograder.course_manifest import REPO_ROOT, manifest

LAB = "lab-1.1-first-kernels"
NAME = f"{LAB}.ipynb"
LABEL = f"amy/stage-1/{NAME}"


def _read(paths: list[Path], root: Path) -> list[Submission]:
    """The read step, as `course grade` labels them under `root`."""
    return [read_submission(p, submission_label(p, root)) for p in paths]


def _submission(nb: NotebookNode | str, name: str = NAME, label: str = LABEL) -> Submission:
    text = nb if isinstance(nb, str) else nbformat.writes(nb)
    return Submission.from_bytes(name, label, text.encode())


def fake_engine(failing: set[str] = frozenset(), calls: list[dict] | None = None) -> str:  # type: ignore[assignment]
    """An engine that runs nothing, registered as "fake": every cell finishes; the hidden tests in `failing`
    raise. Returns its name."""

    def execute(nb: NotebookNode, lab: Any, limits: Limits) -> Execution:
        if calls is not None:
            calls.append({"nb": nb, "lab": lab.id, "limits": limits})
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            cell.execution_count = i + 1
            gid = cells.grade_id(cell)
            if cells.is_test(cell) and gid in failing:
                cell.outputs = [
                    nbformat.v4.new_output("error", ename="AssertionError", evalue=f"{gid} is wrong", traceback=[])
                ]
        return Execution(nb, None, frozenset(range(len(nb.cells))))

    engines.register("fake", execute)
    return "fake"


def _identified(nb: NotebookNode | str, **kwargs: Any) -> Grading:
    return pipeline.identify(Grading(_submission(nb, **kwargs)))


def _prepared(
    nb: NotebookNode | str,
    failing: set[str] = frozenset(),
    calls: list[dict] | None = None,  # type: ignore[assignment]
    limits: Limits | None = None,
) -> Grading:
    return pipeline.restore(
        dataclasses.replace(_identified(nb), engine=fake_engine(failing, calls), limits=limits or Limits())
    )


@pytest.fixture(scope="module")
def solved() -> NotebookNode:
    return filled_in(LAB)


# read


def test_read_hashes_the_whole_file_and_keeps_a_bounded_prefix(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / NAME
    path.write_bytes(b"x" * 100)
    monkeypatch.setattr(submission_module, "MAX_BYTES", 10)
    sub = read_submission(path, LABEL)
    assert (sub.name, sub.label, sub.size, sub.problem) == (NAME, LABEL, 100, None)
    assert sub.sha256 == hashlib.sha256(b"x" * 100).hexdigest() and sub.data == b"x" * 11


def test_read_of_an_unreadable_file_says_why(tmp_path: Path) -> None:
    sub = read_submission(tmp_path, LABEL)  # a folder: cannot be read as a file
    assert sub.data == b"" and sub.problem and "IsADirectoryError" in sub.problem


# identify


def test_identify_names_the_lab(solved: NotebookNode) -> None:
    found = _identified(solved)
    assert found.lab.id == LAB and found.mismatch is None and found.notebook.cells and found.result is None


def test_identify_recognises_a_renamed_file_by_its_cells(solved: NotebookNode) -> None:
    assert _identified(solved, name="my work.ipynb").lab.id == LAB


def test_the_identify_step_records_a_zero_with_why() -> None:
    g = _identified('{"cells": [')
    assert g.notebook is None and g.lab.id == LAB and g.result.score == 0
    assert g.result.error.startswith("could not read the notebook (NotJSONError")


@pytest.mark.parametrize(
    "text, why, lab",
    [
        ('{"cells": [', "could not read the notebook (NotJSONError", LAB),
        (
            '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "x": 1}',
            "could not read the notebook (",
            LAB,
        ),
    ],
)
def test_identify_refuses_a_broken_notebook_with_why(text: str, why: str, lab: str) -> None:
    with pytest.raises(Ungradable) as e:
        identify(_submission(text))
    assert e.value.why.startswith(why) and e.value.lab.id == lab


def test_identify_refuses_what_is_not_a_lab_or_too_big() -> None:
    empty = nbformat.writes(nbformat.v4.new_notebook())
    with pytest.raises(Ungradable, match="notes.ipynb is not a notebook of this course") as e:
        identify(_submission(empty, name="notes.ipynb"))
    assert e.value.lab is None
    huge = Submission(NAME, LABEL, "0" * 64, b"{}", 30 * 2**20)
    with pytest.raises(Ungradable, match="the file is 30 MB; a submission may be at most 20 MB"):
        identify(huge)
    unreadable = Submission(NAME, LABEL, "0" * 64, b"", 0, "PermissionError: Permission denied")
    with pytest.raises(Ungradable, match=r"could not read the notebook \(PermissionError"):
        identify(unreadable)


def test_identify_a_notebook_of_another_lab() -> None:
    other = nbformat.read(REPO_ROOT / manifest().lab("lab-1.2-tiled-matmul").notebook, as_version=4)
    with pytest.raises(Ungradable, match="holds the cells of LAB·1.2.*none of LAB·1.1's cells is in it"):
        identify(_submission(other))


# restore


def test_restore_brings_back_the_hidden_tests_and_leaves_its_input_alone() -> None:
    stub = nbformat.read(REPO_ROOT / manifest().lab(LAB).notebook, as_version=4)
    found = _identified(stub)
    before = nbformat.writes(found.notebook)
    prepared = pipeline.restore(found)
    tests = [c for c in prepared.notebook.cells if cells.is_test(c)]
    assert len(tests) == len(manifest().lab(LAB).tests)
    assert all("BEGIN HIDDEN TESTS" in c.source for c in tests)
    assert nbformat.writes(found.notebook) == before and "BEGIN HIDDEN TESTS" not in before


def test_restore_notes_what_was_changed(solved: NotebookNode) -> None:
    nb = copy.deepcopy(solved)
    test = next(c for c in nb.cells if cells.is_test(c))
    test.source = "pass  # full marks, please"
    prepared = pipeline.restore(_identified(nb))
    assert any("was changed; the original was restored" in n for n in prepared.notes)


# execute


def test_execute_hands_the_engine_a_copy_and_the_limits(solved: NotebookNode) -> None:
    calls: list[dict] = []
    limits = Limits(cell_s=7)
    prepared = _prepared(solved, calls=calls, limits=limits)
    ran = pipeline.execute(prepared)
    [call] = calls
    assert (call["lab"], call["limits"]) == (LAB, limits)
    assert call["nb"] is not prepared.notebook and ran.run.notebook is call["nb"]
    assert all(c.get("execution_count") is None for c in prepared.notebook.cells if c.cell_type == "code")


def test_engines_by_name() -> None:
    assert {"jail", "no-jail"} <= set(engines.ENGINES) and not engines.is_jailed("no-jail")
    with pytest.raises(ValueError, match="no engine 'papermill'; the engines are jail, no-jail"):
        engines.get("papermill")


# score


def test_score_counts_nbgrader_points_and_hides_the_tests(solved: NotebookNode) -> None:
    graded = pipeline.score(pipeline.execute(_prepared(solved, {"add_bf16"})))
    r = graded.result
    assert (r.submission, r.lab, r.score, r.max_score, r.error) == (LABEL, LAB, 5.0, 6.0, None)
    assert {t.name: t.message for t in r.tests if not t.passed} == {"add_bf16": "add_bf16 is wrong"}
    assert "lab_1_1.add_f32" in graded.full and "lab_1_1.add_f32" not in graded.executed
    assert nbformat.reads(graded.executed, as_version=4).cells


def test_score_of_a_run_that_stopped(solved: NotebookNode) -> None:
    prepared = pipeline.restore(_identified(solved))
    first_test = next(i for i, c in enumerate(prepared.notebook.cells) if cells.is_test(c))
    run = Execution(prepared.notebook, "the kernel died", frozenset(range(first_test)), stopped_in=first_test)
    r = pipeline.score(dataclasses.replace(prepared, run=run)).result
    assert r.score == 0 and r.error == "the kernel died"
    assert "the run stopped early: the kernel died" in r.notes


# the doors (the steps declared once each, one runner) and the worker's task


def test_the_doors_are_declared_step_lists() -> None:
    names = [step.__name__ for step in pipeline.COURSE_GRADE]
    assert names == ["identify", "restore", "execute", "score"]
    assert [step.__name__ for step in pipeline.NBGRADER] == names  # nbgrader's door identifies too


def test_the_runner_visits_each_step_once_in_order(solved: NotebookNode, monkeypatch) -> None:
    seen: list[str] = []

    def step(name: str):
        def s(g: Grading) -> Grading:
            seen.append(name)
            return dataclasses.replace(g, result=pipeline.zero(None, g.label, "stop") if name == "b" else None)

        s.__name__ = name
        return s

    g = pipeline.run([step("a"), step("b"), step("c")], Grading(_submission(solved)))
    assert seen == ["a", "b"] and g.result.error == "stop" and g.done == ("a", "b")


def test_the_runner_resumes_where_the_record_stands(solved: NotebookNode) -> None:
    """nbgrader's door runs its steps in two callers: the second resumes, and no step runs twice."""
    g = pipeline.run(pipeline.NBGRADER, Grading(_submission(solved), engine=fake_engine()), through="restore")
    assert g.done == ("identify", "restore") and g.run is None
    g = pipeline.run(pipeline.NBGRADER, g)
    assert g.done == ("identify", "restore", "execute", "score") and g.result.score == 6.0


def test_course_grade_walks_the_class_steps_once_in_order(tmp_path: Path) -> None:
    """discover → read → grade (each submission identify → restore → execute → score, then recorded) →
    report, declared once and run by the pipeline's runner."""
    from autograder.doors.course_grade import COURSE_GRADE, ClassGrading

    assert [step.__name__ for step in COURSE_GRADE] == ["discover", "read", "grade", "report"]
    path = tmp_path / "in" / "amy" / "stage-1" / NAME
    path.parent.mkdir(parents=True)
    nbformat.write(filled_in(LAB), path)
    c = pipeline.run(
        COURSE_GRADE, ClassGrading((tmp_path / "in",), GradeOptions(out=tmp_path / "out", engine=fake_engine()))
    )
    assert c.done == ("discover", "read", "grade", "report")
    assert [s.label for s in c.submissions] == [LABEL] and c.submissions[0].data == path.read_bytes()
    assert [o.result.score for o in c.outcomes] == [6.0] and c.run is not None
    assert (tmp_path / "out" / "results.json").is_file()


def test_grade_submission_chains_the_steps(solved: NotebookNode) -> None:
    graded = grade_submission(_submission(solved), Limits(), fake_engine({"transpose_values"}))
    assert graded.result.score == 4.0 and graded.seconds > 0 and graded.grader == grader_fingerprint(LAB)


def test_a_broken_submission_scores_zero_without_running() -> None:
    calls: list[dict] = []
    graded = grade_submission(_submission('{"cells": ['), Limits(), fake_engine(calls=calls))
    r = graded.result
    assert not calls and r.score == 0 and r.max_score == 6 and r.error.startswith("could not read the notebook")
    assert all(t.message == r.error for t in r.tests) and graded.executed is None


def test_the_task_returns_plain_data(solved: NotebookNode) -> None:
    sub = _submission(solved)
    payload = grade_payload(sub, Limits(), fake_engine())
    assert json.loads(json.dumps(payload)) == payload
    assert Graded.model_validate(payload).result.score == 6.0
    assert pickle.loads(pickle.dumps(sub)) == sub


# record and plan


def _graded(score_: float = 6.0) -> Graded:
    from autograder.steps.pipeline import zero

    r = zero(manifest().lab(LAB), LABEL, "x").model_copy(update={"score": score_, "error": None})
    return Graded(result=r, executed="{}\n", full='{"whole": 1}\n', seconds=1.5, grader=grader_fingerprint(LAB))


def test_record_keeps_the_notebooks_and_the_record_then_plan_reuses_it(tmp_path: Path) -> None:
    store, sub = Store(tmp_path), Submission.from_bytes(NAME, LABEL, b"notebook")
    outcome = record(store, sub, _graded())
    assert outcome == Outcome(LABEL, _graded().result, False, 1.5)
    assert store.notebook_path(EXECUTED, LABEL).read_text() == "{}\n"
    assert store.notebook_path(INSTRUCTOR, LABEL).read_text() == '{"whole": 1}\n'
    assert store.get(LABEL).notebook_sha256 == sub.sha256
    todo, reused = plan([sub], store)
    assert not todo and reused == [Outcome(LABEL, outcome.result, True, 1.5)]
    assert plan([sub], store, force=True).todo == [sub]
    changed = Submission.from_bytes(NAME, LABEL, b"resubmitted")
    assert plan([changed], store).todo == [changed]


def test_a_result_from_another_grader_is_refused_and_retried(tmp_path: Path) -> None:
    store, sub = Store(tmp_path), Submission.from_bytes(NAME, LABEL, b"nb")
    payload = _graded().model_copy(update={"grader": "0" * 16}).model_dump(mode="json")
    outcome = record(store, sub, payload)
    assert outcome.result.score == 0 and outcome.result.error.startswith(GRADER_FAILED)
    assert "different version of the course" in outcome.result.error
    assert store.get(LABEL).retry and not store.notebook_path(EXECUTED, LABEL).exists()
    assert plan([sub], store).todo == [sub]


def test_a_save_failure_is_that_submissions_only(tmp_path: Path) -> None:
    store = Store(tmp_path)
    (tmp_path / EXECUTED).write_text("a file where a folder should be")
    outcome = record(store, Submission.from_bytes(NAME, LABEL, b"nb"), _graded())
    assert "saving its results failed (" in outcome.result.error and store.get(LABEL).retry
    other = Store(tmp_path / "other")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "submissions").write_text("not a folder: no record can be written")
    failed = record_failure(other, Submission.from_bytes(NAME, LABEL, b"nb"), "its worker process died twice")
    assert "died twice" in failed.result.error and other.get(LABEL) is None


# schedule


def test_the_batch_schedules_in_the_order_given_and_survives_a_failing_task(tmp_path: Path, monkeypatch) -> None:
    paths = []
    for student in ("cy", "al", "bo"):
        path = tmp_path / "in" / student / NAME
        path.parent.mkdir(parents=True)
        path.write_text(student)
        paths.append(path)
    graded: list[str] = []

    def task(sub: Submission, limits: Limits, engine: str) -> dict:
        graded.append(sub.label)
        if sub.data == b"al":
            raise RuntimeError("grader bug")
        r = _graded().result.model_copy(update={"submission": sub.label})
        return _graded().model_copy(update={"result": r}).model_dump(mode="json")

    monkeypatch.setattr(batch, "grade_payload", task)
    planned: list[tuple[int, int]] = []
    outcomes = batch.grade_each(
        _read(paths, tmp_path / "in"),
        out_dir=tmp_path / "out",
        engine="no-jail",
        on_plan=lambda todo, reused: planned.append((todo, reused)),
    )
    assert [o.label for o in outcomes] == [f"{s}/{NAME}" for s in ("cy", "al", "bo")] and planned == [(3, 0)]
    assert [o.result.score for o in outcomes] == [6.0, 0, 6.0]
    assert "grader bug" in outcomes[1].result.error
    again = batch.grade_each(_read(paths, tmp_path / "in"), out_dir=tmp_path / "out", engine="no-jail")
    assert [o.reused for o in again] == [True, False, True] and graded[3:] == [f"al/{NAME}"]


# report


def test_report_writes_every_output_from_outcomes_alone(tmp_path: Path) -> None:
    result = _graded().result
    found = Discovery(None, notebooks=[Path(LABEL)])
    run = write_report(found, [Outcome(LABEL, result, False, 1.0)], GradeOptions(out=tmp_path), Failures())
    assert [r["score"] for r in json.loads((tmp_path / "results.json").read_text())] == [6.0]
    assert (tmp_path / "results.csv").exists() and (tmp_path / "nbgrader-grades.csv").exists()
    assert list((tmp_path / "feedback").rglob("*.md")) and run.exit_code == 0


# one submission end to end, through the real jail


def test_end_to_end_through_the_jail(solved: NotebookNode) -> None:
    graded = grade_submission(_submission(solved), Limits())
    assert (graded.result.score, graded.result.error) == (6.0, None), graded.result


class _SessionStandIn:
    """A session whose cells all finish at once (the jail is not what this is about)."""

    def run_cell(self, source: str) -> tuple[list, int]:
        return [], 1

    def mark_jail_cpu(self, event: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_notebook_past_its_timeout_in_the_judge_is_the_notebook_s_result(solved: NotebookNode, monkeypatch) -> None:
    """Issue 33: the judge stopped at the notebook's deadline (its compiles, each within the compile rule's limit,
    together past --timeout: autograder.judge.client re-raises Overrun there) ends the run with the wall-clock
    reason, like a cell past it: the tests reached keep their scores, the rest are lost with the reason, and the
    result is final (no grader failure for a re-run to grade again). The stand-in check waits past the deadline
    before it raises: the outcome does not depend on the machine's speed."""
    import time

    from autograder.failures import Overrun
    from autograder.steps import execute as execute_step

    wall_s = 1.0

    def check(test: Any, session: Any) -> list:
        if test.function != "add_bf16":
            return []  # passes
        time.sleep(wall_s + 0.2)
        raise Overrun(f"ran past the notebook's {wall_s:g} s wall-clock limit (--timeout)")

    monkeypatch.setattr(execute_step.warm, "take", lambda *a, **k: _SessionStandIn())
    monkeypatch.setattr(execute_step, "run_check", check)
    graded = grade_submission(_submission(solved), Limits(wall_s=wall_s), engines.JAIL)
    r = graded.result
    why = "the notebook ran past the 1 s wall-clock limit and was stopped"
    assert r.error.startswith(why), r.error
    assert r.score == 2.0 and [t.name for t in r.tests if t.passed] == ["add_f32"], r.tests
    lost = {t.name: t.message for t in r.tests if not t.passed}
    assert lost["add_bf16"].startswith(f"the run stopped during this test: {why}"), lost
    assert all(m.startswith(f"the run stopped before this test ({why}") for n, m in lost.items() if n != "add_bf16")
    assert GRADER_FAILED not in json.dumps(graded.model_dump())
