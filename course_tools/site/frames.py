"""The frames EX·02, EX·07 and EX·12 play: the schedule model run on the lab solution's real pallas_call.

The lab's source notebook (course.yml `source:`) is executed for its definitions
(autograder.notebook_code.load), its wrapper is traced abstractly at the chapter's sizes
(pallas_course.kernel_trace: nothing runs), and pallas_course.schedule turns the traced grid and BlockSpecs
into frames at 2 buffers and at 1. Lines come from the notebook's own `site:show` cells
(pallas_course.kernel_lines). Only when the lab is not written yet (no notebook, no such function, or a stub
that raises) do the frames come from the reference kernels (autograder.labs.reference_kernels), and the page says so.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from autograder.labs import reference_kernels
from course_tools import reference_schedules
from pallas_course.kernel_lines import code_map
from pallas_course.kernel_trace import PallasCallInfo, trace
from autograder.course_manifest import LabSpec
from pallas_course.schedule import DISPLAY, Schedule, schedule

from .notebook_cells import Mark, cell_defining, function_from_cell, listing_marks, shown_cells


class LabTraceError(ValueError):
    """The lab's solution is written but its pallas_call cannot be traced at the chapter's sizes."""


@dataclass(frozen=True)
class LabSchedules:
    """One kernel's pipeline at depth 2 and depth 1, with the listing its frames point into."""

    kernel: str  # "matmul_kernel"
    wrapper: str  # "matmul"
    sizes: dict[str, int]
    dtype: str
    info: PallasCallInfo
    depth2: Schedule
    depth1: Schedule
    listing: tuple[str, ...]  # kernel, blank line, wrapper (kernel_lines numbering)
    marks: tuple[Mark, ...]  # alg/sch/plain per listing line
    origin: str  # the file the pallas_call came from (repo-relative)
    fallback: str | None  # why reference_kernels stood in, or None

    @property
    def unit(self) -> str:
        """What computes: the MXU for a kernel with a matmul, the core otherwise (the model's captions agree)."""
        return "MXU" if "dot_general" in self.info.kernel_primitives() else "core"


def _matmul_args(sizes: dict[str, int], dtype: Any) -> tuple[tuple[Any, ...], dict[str, int]]:
    sds = lambda *shape: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731 - abstract: nothing is allocated
    return (sds(sizes["m"], sizes["k"]), sds(sizes["k"], sizes["n"])), {k: sizes[k] for k in ("bm", "bn", "bk")}


def _load_namespace(path: Path) -> dict[str, Any]:
    from autograder.notebook_code import load

    with contextlib.redirect_stdout(io.StringIO()):  # the set-up cell announces its mode
        return load(path)


def matmul_schedules(root: Path, lab: LabSpec, dtype: Any = np.float32) -> LabSchedules:
    """EX·02/07/12's matmul, from `lab`'s source notebook under `root` (reference_kernels if not written)."""
    sizes = dict(reference_schedules.SIZES["matmul"])
    names, expression = DISPLAY["matmul"]
    args, kwargs = _matmul_args(sizes, dtype)
    path = root / lab.source
    reason = None
    try:
        if not path.exists():
            raise LookupError(f"{lab.source} does not exist yet")
        cells = shown_cells(path)
        kernel_cell, wrapper_cell = cell_defining(cells, "matmul_kernel"), cell_defining(cells, "matmul")
        if kernel_cell is None or wrapper_cell is None:
            raise LookupError(f"{lab.source} has no site:show cells defining matmul_kernel and matmul")
        try:
            namespace = _load_namespace(path)
            info = trace(namespace["matmul"], *args, **kwargs).pallas_calls[0]
        except (LookupError, NotImplementedError):
            raise
        except Exception as e:  # a written lab that does not load or trace is a bug to report
            first = str(e).splitlines()[0] if str(e) else ""
            raise LabTraceError(
                f"{lab.source}: its definitions do not load and trace matmul at the chapter's sizes "
                f"({type(e).__name__}: {first}); fix the notebook and build again"
            ) from e
        kernel_fn = function_from_cell(kernel_cell, "matmul_kernel", namespace, lab.id)
        wrapper_fn = function_from_cell(wrapper_cell, "matmul", namespace, lab.id)
        code = code_map(kernel_fn, wrapper_fn)
        marks = listing_marks(kernel_cell, wrapper_cell, code.lines)
        origin = lab.source
    except (LookupError, NotImplementedError, IndexError) as e:  # not written yet: missing, or still a stub
        reason = str(e) or type(e).__name__
        info = reference_schedules.trace_reference("matmul", dtype, **sizes)
        code = code_map(reference_kernels.matmul_kernel, reference_kernels.matmul)
        k_len = code.lines.index("")
        marks = tuple(["alg"] * k_len + ["plain"] + ["sch"] * (len(code.lines) - k_len - 1))
        origin = "autograder/labs/reference_kernels.py"
    return LabSchedules(
        kernel="matmul_kernel",
        wrapper="matmul",
        sizes=sizes,
        dtype=np.dtype(dtype).name,
        info=info,
        depth2=schedule(info, 2, names=names, expression=expression, code=code),
        depth1=schedule(info, 1, names=names, expression=expression, code=code),
        listing=code.lines,
        marks=marks,
        origin=origin,
        fallback=reason,
    )
