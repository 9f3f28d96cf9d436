"""Run one notebook headlessly with papermill, in its own sandboxed kernel process and its own folder.

The kernel is started through `autograder.sandbox` (memory and wall-clock limits, Landlock where the OS has
it) with the tamper guard installed before the first cell (`autograder.guard`). Cells run as nbgrader runs
them: a cell over the per-cell timeout is interrupted and gets nbgrader's `CellTimeoutError`, errors don't
stop the run, and an error reply without an error output gets one (nbgrader's `Execute.on_cell_executed`),
so both paths score the same outputs.

Folders: `workdir/run` is the kernel's (its cwd, the only place it may write); `workdir/private` holds the
notebook papermill writes and the watchdog's status line, out of the kernel's reach.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.guard import KERNEL_ARGUMENTS
from autograder.sandbox import Limits, grader_read_paths, kernel_env, kill_leftovers, landlock_abi

GRADING_MODE = "tpu-interpret"
MODE_ENV = "PALLAS_COURSE_MODE"      # pallas_course.runtime.MODE_ENV, without importing jax here
CELL_TIMEOUT_S = 120
ERROR_MARKER_TAG = "papermill-error-cell-tag"   # papermill.execute.ERROR_MARKER_TAG
# nbgrader's Execute.error_on_timeout, so a timed-out cell reads the same on both paths
TIMEOUT_ERROR = {"ename": "CellTimeoutError", "evalue": "",
                 "traceback": ["\x1b[0;31mCellTimeoutError\x1b[0m: No reply from kernel before timeout"]}


@dataclass(frozen=True)
class Execution:
    notebook: NotebookNode          # the executed notebook (partial if the run stopped early)
    stopped: str | None             # why the run stopped before the last cell, if it did
    replied: frozenset[int] = field(default_factory=frozenset)   # cells that finished (got an execute reply)
    stopped_in: int | None = None   # the cell running when the run stopped


def _kernel_manager_class(workdir: Path, private: Path, limits: Limits, token: str) -> type:
    from jupyter_client.manager import AsyncKernelManager

    launcher = [sys.executable, "-m", "autograder.sandbox", "--workdir", str(workdir),
                "--status", str(private / "kernel-status"), "--log", str(private / "kernel.log"),
                "--wall-s", str(limits.wall_s),
                "--memory-mb", str(limits.memory_mb), "--file-mb", str(limits.file_mb)]
    for path in grader_read_paths():
        launcher += ["--read", path]
    env = kernel_env(workdir, token)

    class SandboxedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            return [*launcher, "--", *super().format_kernel_cmd(extra_arguments)]

        async def _async_pre_start_kernel(self, **kw: Any) -> Any:
            kw["env"] = env
            kw["cwd"] = str(workdir)
            return await super()._async_pre_start_kernel(**kw)

    return SandboxedKernelManager


MAX_CELL_OUTPUT_BYTES = 2 * 2**20   # stream and display output kept per cell; errors are always kept


def _engine() -> str:
    """papermill's nbclient engine with a cap on each cell's output (a print loop must not fill the
    grader's memory); registered once per process as "course-grade"."""
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines

    if "course-grade" in papermill_engines._engines:
        return "course-grade"

    class CappedClient(PapermillNotebookClient):
        def output(self, outs: list, msg: dict, display_id: Any, cell_index: int) -> Any:
            kind = msg.get("msg_type")
            if kind in ("stream", "display_data", "execute_result", "update_display_data"):
                used = self._course_used = getattr(self, "_course_used", {})
                size = len(json.dumps(msg.get("content", {}), default=str))
                used[cell_index] = used.get(cell_index, 0) + size
                if used[cell_index] > MAX_CELL_OUTPUT_BYTES:
                    if used[cell_index] - size <= MAX_CELL_OUTPUT_BYTES:
                        outs.append(nbformat.v4.new_output(
                            "stream", name="stdout",
                            text=f"\n... output past {MAX_CELL_OUTPUT_BYTES // 2**20} MB dropped by the grader ...\n"))
                    return None
            return super().output(outs, msg, display_id, cell_index)

    class CappedEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                     stdout_file: Any = None, stderr_file: Any = None, start_timeout: int = 60,
                                     execution_timeout: Any = None, **kwargs: Any) -> Any:
            kwargs.pop("input_path", None)
            kwargs.pop("timeout", None)
            kwargs.pop("startup_timeout", None)
            quiet = logging.getLogger("autograder.kernel_client")   # timeouts and deaths end up in the result
            quiet.setLevel(logging.CRITICAL)
            return CappedClient(nb_man, timeout=execution_timeout, startup_timeout=start_timeout,
                                kernel_name=kernel_name, log=quiet, log_output=log_output,
                                stdout_file=stdout_file, stderr_file=stderr_file, **kwargs).execute()

    papermill_engines.register("course-grade", CappedEngine)
    return "course-grade"


def _status_line(private: Path) -> str | None:
    try:
        return (private / "kernel-status").read_text().strip() or None
    except OSError:
        return None


def _why_stopped(error: BaseException, status: str | None, limits: Limits, cell_timeout_s: int) -> str:
    from nbclient.exceptions import CellTimeoutError

    if isinstance(error, CellTimeoutError) and not (status and status.startswith("wall-clock")):
        return (f"a cell ran past the {cell_timeout_s} s per-cell limit and did not stop when interrupted "
                "(an infinite loop inside a kernel?); the cells after it did not run")
    if status and status.startswith("wall-clock"):
        return (f"the notebook ran past the {limits.wall_s:g} s wall-clock limit and was stopped "
                "(an infinite loop or a hung kernel?)")
    if status and status.startswith("signal"):
        sig = status.split()[-1]
        if sig in ("SIGABRT", "SIGKILL", "SIGBUS"):
            return (f"the kernel died ({sig}): a crash, or memory beyond the {limits.memory_mb} MB limit")
        return f"the kernel crashed ({sig})"
    if status and status.startswith("exit"):
        return f"the kernel exited ({status}): a cell ended the process (os._exit?)"
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first}".rstrip(": ")


def execute(nb: NotebookNode, workdir: Path, *, cell_timeout_s: int = CELL_TIMEOUT_S,
            limits: Limits | None = None) -> Execution:
    """Execute `nb` under `workdir` in a sandboxed kernel under forced TPU interpret mode."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    limits = limits or Limits()
    cell_timeout_s = limits.cell_s or cell_timeout_s
    run_dir, private = workdir / "run", workdir / "private"
    run_dir.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    in_path, out_path = private / "submission.ipynb", private / "executed.ipynb"
    nbformat.write(nb, in_path)
    # The kernel inherits this: the set-up cell then picks interpret mode even if a student hard-coded
    # MODE, and the hidden checks force it again around every call.
    os.environ[MODE_ENV] = GRADING_MODE
    logging.getLogger("papermill").setLevel(logging.ERROR)
    token = uuid.uuid4().hex
    replied: set[int] = set()
    running: list[int] = []

    def on_cell_start(cell: NotebookNode, cell_index: int, **_: Any) -> None:
        running[:] = [cell_index]

    def on_cell_executed(cell: NotebookNode, cell_index: int, execute_reply: dict, **_: Any) -> None:
        replied.add(cell_index)
        content = execute_reply.get("content", {})
        if content.get("status") == "error" and not any(
                o.get("output_type") == "error" and o.get("ename") == content.get("ename") for o in cell.outputs):
            cell.outputs.append(nbformat.v4.new_output(
                "error", ename=content.get("ename", ""), evalue=content.get("evalue", ""),
                traceback=content.get("traceback") or ["ERROR: An error occurred while showtraceback was disabled"]))

    stopped = None
    try:
        papermill.execute_notebook(
            str(in_path), str(out_path),
            parameters={"MODE": GRADING_MODE},
            kernel_name="python3",
            engine_name=_engine(),
            progress_bar=False,
            execution_timeout=cell_timeout_s,
            # what nbgrader's Execute does; see the module docstring
            allow_errors=True, interrupt_on_timeout=True, error_on_timeout=TIMEOUT_ERROR,
            extra_arguments=list(KERNEL_ARGUMENTS),
            kernel_manager_class=_kernel_manager_class(run_dir, private, limits, token),
            on_cell_start=on_cell_start, on_cell_executed=on_cell_executed,
            shutdown_kernel="immediate",
        )
    except PapermillExecutionError:
        pass  # cell errors are recorded in the outputs; scoring reads them there
    except Exception as e:  # noqa: BLE001 - a dead kernel or a timeout ends the run, not the batch
        stopped = _why_stopped(e, _status_line(private), limits, cell_timeout_s)
    finally:
        kill_leftovers(token)
    executed = nbformat.read(out_path, as_version=4) if out_path.exists() else nb
    # papermill's error banner and anchor cells would shift every index after them
    executed.cells = [c for c in executed.cells if ERROR_MARKER_TAG not in c.get("metadata", {}).get("tags", [])]
    stopped_in = running[0] if stopped and running and running[0] not in replied else None
    return Execution(executed, stopped, frozenset(replied), stopped_in)


def sandbox_is_on() -> bool:
    return landlock_abi() > 0
