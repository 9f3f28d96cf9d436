"""One notebook through the trust boundary: its cells run in the jail, its hidden tests run here.

`execute(nb, lab)` walks the (restored) notebook in order. A code cell that is not a hidden test is sent to
the jailed agent (autograder.session.session.Session) and its outputs come back as data. A hidden-test cell is not
sent anywhere: the check it names (`lab_1_1.add_f32(add)`, read from solutions/, never from the submission)
runs in this process, and reaches the student's functions only through the agent, with inputs drawn here.
The test's outcome is written into the cell as nbgrader expects it (an error output: 0; a number: partial
credit; nothing: full marks), so `course grade` and `nbgrader autograde` (autograder.doors.nbgrader_engine) score
the same outputs with nbgrader's own rule. Every hidden-test cell gets an explicit outcome: one the run never
reached holds the reason as an error, never an empty (full-marks) output.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder import cells, timeline
from autograder.labs.harness import TestFailure
from autograder.jail.limits import CELL_TIMEOUT_S, GRADING_MODE
from autograder.failures import BadAnswer, Overrun, StudentGone
from autograder.session import warm
from autograder.session.session import Session
from autograder.course_manifest import REPO_ROOT, LabSpec
from pallas_course import pyparse

MAX_TEXT = 100_000  # characters of one output field kept from the jail
# Characters of all the notebook's cell outputs kept, together: the caps per field and per cell (the agent's)
# alone let 600 small cells of floods make a 2 x 568 MB notebook and a 4.4 GB grader. The hidden tests'
# outcomes (written here, small) are always kept; past the budget a cell's outputs are dropped, with one note.
MAX_NOTEBOOK_OUTPUT = 2_000_000
CHECKS_PACKAGE = "autograder.labs."


@dataclass(frozen=True)
class Execution:
    notebook: NotebookNode  # the executed notebook (partial if the run stopped early)
    stopped: str | None  # why the run stopped before the last cell, if it did
    replied: frozenset[int] = field(default_factory=frozenset)  # cells that finished
    stopped_in: int | None = None  # the cell running when the run stopped
    notes: tuple[str, ...] = ()  # what the grader did to the notebook's outputs (a cut), for the feedback


@dataclass(frozen=True)
class HiddenTest:
    """What a hidden-test cell of solutions/ runs: `module.function(*arguments)`, arguments by name."""

    grade_id: str
    module: str
    function: str
    arguments: tuple[str, ...]


class BadHiddenTest(ValueError):
    """A hidden-test cell in solutions/ that is not of the one shape the engine runs (a course bug)."""


def parse_hidden_test(grade_id: str, source: str) -> HiddenTest:
    """`from autograder.labs import lab_1_1` then `lab_1_1.add_f32(add)`: nothing else is allowed."""
    body = [n for n in pyparse.parse(source).body]
    imports = {
        a.asname or a.name: f"{n.module}.{a.name}"
        for n in body
        if isinstance(n, ast.ImportFrom)
        for a in n.names
        if n.module
    }
    calls = [n.value for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    if len(calls) != 1 or len(body) != len(calls) + sum(isinstance(n, ast.ImportFrom) for n in body):
        raise BadHiddenTest(f"{grade_id}: a hidden test is one import and one call of a check")
    call = calls[0]
    if not (
        isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in imports
        and not call.keywords
        and all(isinstance(a, ast.Name) for a in call.args)
    ):
        raise BadHiddenTest(f"{grade_id}: expected `<lab module>.<check>(<name>, ...)`")
    module = imports[call.func.value.id]
    if not module.startswith(CHECKS_PACKAGE):
        raise BadHiddenTest(f"{grade_id}: checks live in {CHECKS_PACKAGE}*, not {module}")
    return HiddenTest(grade_id, module, call.func.attr, tuple(a.id for a in call.args))


@functools.lru_cache(maxsize=None)
def _hidden_tests(source_path: Path, mtime: float) -> dict[str, HiddenTest]:
    nb = nbformat.read(source_path, as_version=4)
    tests = {}
    for cell in nb.cells:
        if cells.is_test(cell):
            gid = cells.meta(cell)["grade_id"]
            tests[gid] = parse_hidden_test(gid, cell.source)
    return tests


def hidden_tests(lab: LabSpec) -> dict[str, HiddenTest]:
    """The lab's hidden tests, from its solutions/ notebook (the submission's copy is never read for this)."""
    path = REPO_ROOT / lab.source
    return _hidden_tests(path, path.stat().st_mtime)


# ------------------------------------------------------------------------------------------------ outputs


def _text(v: Any) -> str:
    if isinstance(v, list):
        v = "".join(str(x) for x in v)
    s = str(v) if v is not None else ""
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT] + f"\n... [cut: {len(s) - MAX_TEXT:,} more characters]"


def clean_output(raw: Any) -> NotebookNode | None:
    """An output the jail sent, rebuilt from its fields (only nbformat's output kinds, capped), or None."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get("output_type")
    if kind == "stream":
        name = raw.get("name") if raw.get("name") in ("stdout", "stderr") else "stdout"
        return nbformat.v4.new_output("stream", name=name, text=_text(raw.get("text")))
    if kind in ("display_data", "execute_result"):
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        clean = {str(k)[:100]: _text(v) for k, v in list(data.items())[:20] if isinstance(k, str)}
        if kind == "execute_result":
            count = raw.get("execution_count")
            return nbformat.v4.new_output(kind, data=clean, execution_count=count if isinstance(count, int) else None)
        return nbformat.v4.new_output(kind, data=clean)
    if kind == "error":
        tb = raw.get("traceback")
        lines = [_text(x)[:2000] for x in tb[:200]] if isinstance(tb, list) else []
        return nbformat.v4.new_output(
            "error", ename=_text(raw.get("ename"))[:200], evalue=_text(raw.get("evalue")), traceback=lines
        )
    return None


def _size(output: NotebookNode) -> int:
    """Characters an output holds (every string in it)."""
    if output.output_type == "stream":
        return len(output.text)
    if output.output_type == "error":
        return len(output.ename) + len(output.evalue) + sum(len(line) for line in output.traceback)
    return sum(len(k) + len(v) for k, v in output.get("data", {}).items())


class OutputBudget:
    """The notebook's outputs kept, all cells together, up to MAX_NOTEBOOK_OUTPUT characters."""

    def __init__(self, limit: int = MAX_NOTEBOOK_OUTPUT) -> None:
        self.limit, self.used, self.dropped = limit, 0, 0
        self.cut_at: int | None = None  # the cell where the cut began

    def keep(self, index: int, outputs: list[NotebookNode]) -> list[NotebookNode]:
        kept: list[NotebookNode] = []
        for output in outputs:
            n = _size(output)
            if self.cut_at is None and self.used + n <= self.limit:
                self.used += n
                kept.append(output)
                continue
            self.dropped += n
            if self.cut_at is None:
                self.cut_at = index
                kept.append(nbformat.v4.new_output("stream", name="stdout", text=f"\n... [cut: {self.note()}]\n"))
        return kept

    def note(self) -> str:
        return (
            f"the notebook's outputs passed the grader's limit of {self.limit:,} characters in all; from "
            f"cell {(self.cut_at or 0) + 1} on, its cells' outputs were dropped (the tests' outcomes are kept)"
        )


def error_output(ename: str, evalue: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


# -------------------------------------------------------------------------------------------------- checks


def run_check(test: HiddenTest, session: Session) -> list[NotebookNode]:
    """Run one hidden test here, against the student's functions in the jail; its outcome as outputs."""
    check = getattr(importlib.import_module(test.module), test.function)
    try:
        args = [session.argument(name) for name in test.arguments]
    except NameError as e:
        return [error_output("NameError", str(e))]
    except BadAnswer as e:  # a value that is not data this test can take: this test's 0, the run goes on
        return [
            error_output("TestFailure", f"{test.function}: the notebook's process answered with malformed data ({e})")
        ]
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            earned = check(*args)
    except TestFailure as e:
        outputs = [error_output("TestFailure", str(e))]
    except BadAnswer as e:
        outputs = [
            error_output("TestFailure", f"{test.function}: the notebook's process answered with malformed data ({e})")
        ]
    else:
        outputs = []
        if isinstance(earned, (int, float)) and not isinstance(earned, bool):
            outputs.append(
                nbformat.v4.new_output("execute_result", data={"text/plain": repr(float(earned))}, execution_count=None)
            )
    if printed.getvalue():
        outputs.insert(0, nbformat.v4.new_output("stream", name="stdout", text=_text(printed.getvalue())))
    return outputs


# ------------------------------------------------------------------------------------------------ the run


def _why_stopped(gone: StudentGone, *, wall_s: float, cell_timeout_s: float, deadline: float) -> str:
    why = gone.why
    if time.monotonic() >= deadline - 0.5:
        return (
            f"the notebook ran past the {wall_s:g} s wall-clock limit and was stopped "
            "(an infinite loop, a hung kernel, or kernels the TPU compiler is slow on?)"
        )
    if gone.silent:
        return (
            f"a cell ran past the {cell_timeout_s:g} s per-cell limit and did not stop when interrupted "
            "(an infinite loop inside a kernel?); the cells after it did not run"
        )
    if why.startswith("memory"):
        return f"the kernel died: {why}"
    if why.startswith("CPU"):
        return f"the kernel was stopped: {why}"
    if why.startswith("signal"):
        sig = why.split()[-1]
        if sig in ("SIGABRT", "SIGKILL", "SIGBUS"):
            return f"the kernel died ({sig}): a crash, or memory beyond the limit"
        return f"the kernel crashed ({sig})"
    if why.startswith("exit"):
        return f"the kernel exited ({why}): a cell ended the process (os._exit?)"
    return f"the kernel stopped ({why})"


def _import_meanwhile(modules: list[str]) -> None:
    """Import what the checks and the scoring will need in a thread, while this process waits for the jail to
    start and run the first cells (for one notebook graded alone, nbgrader's import alone is 3 s). A batch
    worker has them imported already; a failed import shows up again, in order, where it is needed."""
    import sys
    import threading

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - raised again where the module is used
                pass

    if any(name not in sys.modules for name in modules):
        threading.Thread(target=load, name="import-meanwhile", daemon=True).start()


def execute(
    nb: NotebookNode, lab: LabSpec, *, limits: Any, cell_timeout_s: float = CELL_TIMEOUT_S, jailed: bool = True
) -> Execution:
    """Run `nb` (already restored from solutions/) cell by cell; fill in every cell's outputs (in place)."""
    tests = hidden_tests(lab)
    _import_meanwhile([t.module for t in tests.values()] + ["nbgrader.preprocessors"])
    started = time.monotonic()
    deadline = started + limits.wall_s
    replied: set[int] = set()
    budget = OutputBudget()
    stopped: str | None = None
    stopped_in: int | None = None
    # A jail that cannot start (or imports other helpers than ours) raises student.SetupFailed: the machine's
    # fault, before any student code ran, so never a 0 for the submission.
    session = warm.take(limits, cell_timeout_s=cell_timeout_s, jailed=jailed, deadline=deadline)
    session.mark_jail_cpu("jail cpu after start")
    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            gid = cells.grade_id(cell)
            cell.outputs = []
            cell.execution_count = None
            if stopped is not None:
                if gid in tests:
                    cell.outputs = [error_output("TestFailure", f"the run stopped before this test ({stopped})")]
                continue
            try:
                if gid in tests:
                    with timeline.span("hidden test", cell=index, test=gid):
                        cell.outputs = run_check(tests[gid], session)
                    cell.execution_count = index + 1
                else:
                    with timeline.span("cell", cell=index, graded=gid is not None):
                        outputs, count = session.run_cell(cell.source)
                    cell.outputs = budget.keep(index, [o for o in map(clean_output, outputs) if o is not None])
                    del outputs
                    cell.execution_count = count
                    if "parameters" in cell.get("metadata", {}).get("tags", []):
                        session.run_cell(f"MODE = {GRADING_MODE!r}")  # papermill's injected parameters
                replied.add(index)
            except (StudentGone, BadAnswer, Overrun) as e:
                # Overrun: the judge stopped at the notebook's deadline (its compiles, each within its own limit,
                # took the notebook past --timeout): the notebook's doing, so its result, never a grader failure
                gone = (
                    e
                    if isinstance(e, StudentGone)
                    else StudentGone(e.why, silent=True)
                    if isinstance(e, Overrun)
                    else StudentGone(f"malformed answer: {e}")
                )
                stopped = _why_stopped(gone, wall_s=limits.wall_s, cell_timeout_s=cell_timeout_s, deadline=deadline)
                stopped_in = index
                cell.outputs = [
                    error_output(
                        "TestFailure" if gid in tests else "KernelStopped",
                        f"the run stopped during this cell: {stopped}",
                    )
                ]
    finally:
        session.mark_jail_cpu("jail cpu at the end")
        with timeline.span("jail close"):
            session.close()
    notes = (budget.note() + f" ({budget.dropped:,} characters dropped)",) if budget.cut_at is not None else ()
    return Execution(nb, stopped, frozenset(replied), stopped_in, notes)
