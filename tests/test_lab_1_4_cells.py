"""Each check judges its own function (issue 27, point 3): LAB·1.4's notebook run cell by cell, with one helper
wrong, fails that helper's check cell alone, and no other cell (no check blaming another helper, no demo cell
crashing with a TypeError far from the mistake)."""

from __future__ import annotations

import contextlib
import io
import re

import nbformat
import pytest

from autograder.cells import is_test
from autograder.course_manifest import REPO_ROOT, manifest
from autograder.notebook_code import apply_edits
from pallas_course.notebooks import strip_markers
from tests.mistakes import _exec

LAB = manifest().lab("lab-1.4-pipelining-profile")

STEP_RETURN = "    return dma_bytes / hbm, flops * passes / peak"
WRONG = {
    # the output block double-buffered: the working-set cell used to trace matmul_pipeline_off and fail there
    "matmul_pipeline_off": (
        {
            "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j), pipeline_mode=one_buffer),": "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),"
        },
        "check_pipeline_off(matmul_pipeline_off)",
    ),
    # one number instead of the pair: the 4096³ demo cell used to crash unpacking it
    "step_times": (
        {STEP_RETURN: "    return dma_bytes / hbm + flops * passes / peak"},
        "check_step_times(step_times)",
    ),
    # the f32 scratch counted once per buffer (it is one copy)
    "vmem_working_set": (
        {"    return blocks + scratch": "    return blocks + scratch * buffers"},
        "check_working_set(vmem_working_set, matmul)",
    ),
    # every multiple of 128, divisible or not (1408 on v6e at 4096³)
    "choose_blocks": (
        {
            "    sizes = lambda dim: [s for s in range(128, dim + 1, 128) if dim % s == 0]": "    sizes = lambda dim: list(range(128, dim + 1, 128))"
        },
        "check_block_choice(choose_blocks, matmul)",
    ),
}


def _cells() -> list[str]:
    nb = nbformat.read(REPO_ROOT / LAB.source, as_version=4)
    return [strip_markers(c.source) for c in nb.cells if c.cell_type == "code" and not is_test(c)]


@pytest.mark.parametrize("helper", sorted(WRONG))
def test_one_wrong_helper_fails_its_own_check_cell_alone(helper: str) -> None:
    edits, own_check = WRONG[helper]
    failed: dict[int, str] = {}
    printed: dict[int, str] = {}
    namespace: dict = {"__name__": f"notebook:{LAB.id}"}
    for i, src in enumerate(apply_edits(_cells(), edits)):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                _exec(src, REPO_ROOT / LAB.source, namespace)
        except Exception as exc:  # noqa: BLE001 - which cells fail is the point
            failed[i] = f"{type(exc).__name__}: {exc}"
        printed[i] = out.getvalue()
    sources = _cells()
    assert failed, f"{helper}: no cell failed"
    wrong = {i: why for i, why in failed.items() if own_check not in sources[i]}
    assert not wrong, f"{helper}: cells other than its own check failed: {wrong}"
    if helper == "choose_blocks":  # the demo says the choice is wrong, in the grade's words; never "legal"
        demo = next(printed[i] for i, s in enumerate(sources) if "show_block_choices(" in s)
        assert re.search(
            r"v6e : 4096³ bfloat16 -> blocks \(\d+, \d+, \d+\), ✗ choose_blocks chose .* does not divide", demo
        ), demo
    if helper == "step_times":
        demo = next(printed[i] for i, s in enumerate(sources) if "show_block_choices(" in s)
        assert "returned" in demo and "not a pair (dma_s, compute_s)" in demo, demo
