"""Run one notebook headlessly with papermill, in its own kernel process and its own folder."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from pallas_course.runtime import MODE_ENV

GRADING_MODE = "tpu-interpret"
CELL_TIMEOUT_S = 120


@dataclass(frozen=True)
class Execution:
    notebook: NotebookNode          # the executed notebook (partial if the run stopped early)
    stopped: str | None             # why the run stopped before the last cell, if it did


def execute(nb: NotebookNode, workdir: Path, *, cell_timeout_s: int = CELL_TIMEOUT_S) -> Execution:
    """Execute `nb` in `workdir` under forced TPU interpret mode; errors in cells don't stop the run."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    in_path, out_path = workdir / "submission.ipynb", workdir / "executed.ipynb"
    nbformat.write(nb, in_path)
    # The kernel inherits this process's environment: the set-up cell then picks interpret mode even
    # if a student hard-coded MODE, and the hidden checks force it again around every call.
    os.environ[MODE_ENV] = GRADING_MODE
    logging.getLogger("papermill").setLevel(logging.ERROR)
    stopped = None
    try:
        papermill.execute_notebook(
            str(in_path), str(out_path),
            parameters={"MODE": GRADING_MODE},
            kernel_name="python3",
            progress_bar=False,
            cwd=str(workdir),
            execution_timeout=cell_timeout_s,
            allow_errors=True,   # like nbgrader: run every cell so every test gets a result
        )
    except PapermillExecutionError:
        pass  # cell errors are recorded in the outputs; scoring reads them there
    except Exception as e:  # noqa: BLE001 - a dead kernel or a timeout ends the run, not the batch
        stopped = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    executed = nbformat.read(out_path, as_version=4) if out_path.exists() else nb
    return Execution(executed, stopped)
