"""Batches: parallel workers, one record per submission written as it arrives, re-runs that grade only what
changed, a killed run that loses nothing graded, Dask distributed, the progress lines and the summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

import autograder.doors.batch as batch
import autograder.fingerprint
from course_tools.demo import filled_in
from autograder.fingerprint import grader_fingerprint
from autograder.steps.record import Plan, new_record, plan
from autograder.steps.store import Store
from autograder.steps.submission import Submission, read_submission, submission_label
from course_tools.cli import app
from autograder.course_manifest import manifest

runner = CliRunner()
LAB = "lab-1.1-first-kernels"
NAME = f"{LAB}.ipynb"


def _corrupt(root: Path, student: str, text: str = '{"cells": [') -> Path:
    """A submission that needs no kernel to grade (0, could not read): cheap batch fodder."""
    path = root / student / manifest().stage.id / NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _read(paths: list[Path], root: Path) -> list[Submission]:
    """The read step, as `course grade` labels them under `root`."""
    return [read_submission(p, submission_label(p, root)) for p in paths]


def _plan(paths: list[Path], root: Path, store: Store, *, force: bool = False) -> Plan:
    return plan(_read(paths, root), store, force=force)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("submitted")
    path = root / "alice" / manifest().stage.id / NAME
    path.parent.mkdir(parents=True)
    nbformat.write(filled_in(LAB), path)
    _corrupt(root, "bob")
    return root


@pytest.fixture(scope="module")
def first_run(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("grades")
    result = runner.invoke(app, ["grade", str(folder), "--out", str(out), "--jobs", "2"])
    assert result.exit_code == 0, result.output
    return out, result


def test_parallel_run_grades_and_summarises(first_run) -> None:
    """--jobs 2: a line per graded submission on stderr, the tables and a summary on stdout."""
    out, result = first_run
    assert "graded alice/stage-1/" in result.stderr and "graded bob/stage-1/" in result.stderr
    assert "Summary" in result.stdout and "6/6" in result.stdout
    assert "kernels ran under:" in result.stdout
    records = list((out / "submissions").glob("*.json"))
    assert len(records) == 2 and not list((out / "submissions").glob(".*.tmp"))


def test_rerun_reuses_unchanged_submissions(folder: Path, first_run) -> None:
    """Same notebooks, same grader: nothing is graded again, the results are the same."""
    out, _ = first_run
    before = json.loads((out / "results.json").read_text())
    result = runner.invoke(app, ["grade", str(folder), "--out", str(out), "--jobs", "2"])
    assert result.exit_code == 0, result.output
    assert "grading 0 submission(s); 2 unchanged" in result.stderr
    assert json.loads((out / "results.json").read_text()) == before


def test_changed_notebook_is_graded_again(folder: Path, first_run, tmp_path: Path) -> None:
    """A resubmitted notebook is graded again; the unchanged one is reused."""
    out, _ = first_run
    copy = tmp_path / "submitted"
    shutil.copytree(folder, copy)
    shutil.copytree(out, tmp_path / "grades")
    _corrupt(copy, "bob", '{"cells": [ {')  # bob resubmits (still broken)
    result = runner.invoke(app, ["grade", str(copy), "--out", str(tmp_path / "grades")])
    assert result.exit_code == 0, result.output
    assert "grading 1 submission(s); 1 unchanged" in result.stderr
    assert "graded bob/" in result.stderr and "graded alice/" not in result.stderr


def test_force_and_a_changed_grader_regrade(folder: Path, first_run) -> None:
    """--force plans every submission; a record from another grader version no longer counts."""
    out, _ = first_run
    paths = sorted(folder.rglob("*.ipynb"))
    store = Store(out)
    todo, reused = _plan(paths, folder, store)
    assert not todo and len(reused) == 2
    todo, reused = _plan(paths, folder, store, force=True)
    assert len(todo) == 2 and not reused
    record = store.get("bob/stage-1/" + NAME)
    store.put(record.model_copy(update={"grader": "0" * 16}))
    todo, _ = _plan(paths, folder, store)
    assert [j.label for j in todo] == ["bob/stage-1/" + NAME]
    store.put(record)


def test_killed_run_loses_nothing_graded(tmp_path: Path) -> None:
    """The run dies after its first result: that result is on disk, and the re-run grades only the rest."""
    root = tmp_path / "submitted"
    paths = [_corrupt(root, s, '{"cells": [' + s) for s in ("ann", "ben", "cid")]
    seen = []

    def die_after_first(outcome: batch.Outcome) -> None:
        seen.append(outcome.label)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        batch.grade_each(_read(paths, root), out_dir=tmp_path / "grades", on_outcome=die_after_first)
    assert len(seen) == 1 and Store(tmp_path / "grades").get(seen[0]) is not None
    todo, reused = _plan(paths, root, Store(tmp_path / "grades"))
    assert [o.label for o in reused] == seen and len(todo) == 2


def test_sigkill_of_the_grader_keeps_results_and_leaves_no_process(tmp_path: Path) -> None:
    """`kill -9` of a `course grade --jobs 2` run: what was graded stays on disk, its workers and kernels go
    away by themselves, and the next run grades only the rest."""
    import os
    import subprocess
    import sys
    import time

    import psutil

    root, out = tmp_path / "submitted", tmp_path / "grades"
    for student in ("amy", "bea"):  # both graded at once: one kept, one cut by the kill (or both kept)
        path = root / student / manifest().stage.id / NAME
        path.parent.mkdir(parents=True)
        nbformat.write(filled_in(LAB), path)
    course = Path(sys.executable).parent / "course"
    proc = subprocess.Popen(
        [str(course), "grade", str(root), "--jobs", "2", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=os.environ.copy(),
    )
    deadline = time.monotonic() + 180
    while not list((out / "submissions").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    tree = psutil.Process(proc.pid).children(recursive=True)
    proc.kill()
    proc.wait()
    kept = list((out / "submissions").glob("*.json"))
    assert kept, "nothing was graded before the kill"
    gone, alive = psutil.wait_procs(tree, timeout=40)
    assert not alive, f"still running after the grader was killed: {[p.cmdline()[:4] for p in alive]}"
    result = runner.invoke(app, ["grade", str(root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"grading {2 - len(kept)} submission(s); {len(kept)} unchanged" in result.stderr
    assert [r["score"] for r in json.loads((out / "results.json").read_text())] == [6.0, 6.0]


def test_grader_failure_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash of the grader itself (not the notebook) is recorded as such, and the next run tries again."""
    root = tmp_path / "submitted"
    paths = [_corrupt(root, "dan")]

    def broken(*args: object) -> dict:
        raise OSError("disk full")

    monkeypatch.setattr(batch, "grade_payload", broken)
    [outcome] = batch.grade_each(_read(paths, root), out_dir=tmp_path / "grades")
    assert outcome.result.score == 0 and "the grader failed on this submission" in outcome.result.error
    assert "disk full" in outcome.result.error
    todo, _ = _plan(paths, root, Store(tmp_path / "grades"))
    assert len(todo) == 1


def test_grader_files_changing_mid_batch_stop_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Graded with --no-jail, a grader file that changes during the batch stops it with a one-line reason."""
    root = tmp_path / "submitted"
    paths = [_corrupt(root, s) for s in ("eve", "fay")]
    watched = tmp_path / "lab_1_1.py"
    watched.write_text("checks")
    monkeypatch.setattr(autograder.fingerprint, "grader_files", lambda: [watched])
    with pytest.raises(batch.GraderModified, match="grader files changed during the batch"):
        batch.grade_each(
            _read(paths, root),
            out_dir=tmp_path / "grades",
            engine="no-jail",
            on_outcome=lambda o: watched.write_text("checks that always pass"),
        )


def test_records_are_written_whole(tmp_path: Path) -> None:
    """A record is replaced atomically: a reader sees the old one or the new one."""
    from autograder.steps.pipeline import zero_result

    store = Store(tmp_path)
    result = zero_result(Path(NAME), "x/" + NAME, "why")
    store.put(new_record("x/" + NAME, "a" * 64, result, 1.0))
    store.put(new_record("x/" + NAME, "b" * 64, result, 2.0))
    assert store.get("x/" + NAME).notebook_sha256 == "b" * 64
    assert store.get("x/" + NAME).grader == grader_fingerprint(LAB)
    assert [p.name for p in (tmp_path / "submissions").iterdir()] == [store.path("x/" + NAME).name]


def test_dask_local_cluster(folder: Path, tmp_path: Path) -> None:
    """--scheduler local: the same grading on a Dask LocalCluster, the same scores."""
    pytest.importorskip("distributed")
    result = runner.invoke(
        app, ["grade", str(folder), "--out", str(tmp_path), "--scheduler", "local", "--jobs", "1", "--json"]
    )
    assert result.exit_code == 0, result.output
    scores = {r["submission"].split("/")[0]: r["score"] for r in json.loads(result.stdout)}
    assert scores == {"alice": 6.0, "bob": 0.0}
    assert (tmp_path / "executed" / "alice" / "stage-1" / NAME).exists()
