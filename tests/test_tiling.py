"""The course's one tiling table (pallas_course.tiling) and the VMEM bytes per buffer, held to the real compiler's
records (bench/tiling-compile.json, bench/vmem-padding.json: course_tools/bench/tpu_layout.py), and quoted, not
retyped, by the legality model, the error texts and LAB·1.4. Reads records only: nothing compiles here."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import numpy as np
import pytest

from pallas_course import errors, tiling
from pallas_course.legality import check_block, vmem_block_bytes

ROOT = Path(__file__).resolve().parent.parent
TILING = json.loads((ROOT / "bench" / "tiling-compile.json").read_text())
PADDING = json.loads((ROOT / "bench" / "vmem-padding.json").read_text())


@pytest.mark.parametrize(
    "row", TILING["rows"], ids=lambda r: f"{r['chip']}-{r['dtype']}-{r['block'][0]}x{r['block'][1]}"
)
def test_legality_model_says_where_the_compiler_refuses(row: dict) -> None:
    """compiles <-> legal; refused by the lowering <-> does not lower; Mosaic E2002 <-> lowers, not legal."""
    v = check_block(row["array"], row["block"], np.dtype(row["dtype"]), row["chip"])
    assert row["outcome"] in ("compiles", "lowering", "mosaic E2002"), row
    assert (v.legal, v.lowers) == {"compiles": (True, True), "lowering": (False, False), "mosaic E2002": (False, True)}[
        row["outcome"]
    ], (row, v.violations)


def test_table_rows_match_the_record() -> None:
    """Each row's native tile and its misaligned verdict are what the compiler did with that width."""
    outcomes = {(r["dtype"], r["block"][0]): r["outcome"] for r in TILING["rows"] if r["block"][1] == 128}
    for dtype, bits in (("float32", 32), ("bfloat16", 16), ("int8", 8), ("float8_e4m3fn", 8)):
        row = tiling.row(bits)
        tile_rows = row.native_tile[0]
        half = tile_rows // 2 if tile_rows > 8 else None  # a multiple of 8 that is not of the native tile
        assert outcomes[(dtype, tile_rows)] == "compiles"
        if half is not None:
            assert outcomes[(dtype, half)] == {"note": "compiles", "compile": "mosaic E2002"}[row.misaligned]
    assert tiling.row(64) is tiling.row(32) and tiling.native_tile(16) == (16, 128)


@pytest.mark.parametrize(
    "row", PADDING["rows"], ids=lambda r: f"{r['dtype']}-{'x'.join(map(str, r['shape']))}-{r['kind']}"
)
def test_vmem_bytes_per_buffer_match_the_compiler(row: dict) -> None:
    """The compiler's extra scoped VMEM for one operand (bisected in 1 KiB steps) is the model's bytes x buffers:
    1 buffer for a whole-array operand at index (0, 0) (a trivial window), 2 for a windowed one."""
    shape = row["shape"]
    block = shape if row["kind"] == "trivial" else [None, *shape[1:]]
    buffers = 1 if row["kind"] == "trivial" else 2
    model = buffers * vmem_block_bytes(block, np.dtype(row["dtype"]))
    assert row["extra_bytes"] - 1024 < model <= row["extra_bytes"], (row, model)


def test_a_one_row_float32_block_is_not_a_whole_tile() -> None:
    """The review's 'a (1, d) f32 block occupies whole (8, 128) tiles' is not what the compiler allocates."""
    assert vmem_block_bytes((1, 16384), np.float32) == 16384 * 4
    assert vmem_block_bytes((1, 100), np.float32) == 128 * 4  # lanes do pad to 128
    assert vmem_block_bytes((256, 512), np.dtype("bfloat16")) == 256 * 512 * 2


def test_lab_1_4_quotes_the_table_verbatim() -> None:
    nb = nbformat.read(ROOT / "solutions" / "stage-1" / "lab-1.4-pipelining-profile.ipynb", as_version=4)
    assert any(tiling.markdown_table() in c.source for c in nb.cells if c.cell_type == "markdown")


def test_error_texts_state_the_table() -> None:
    """errors.py's tiling fix names the any-dtype (8, 128) rule and the 8-bit row's native tile, not a bf16 rule."""
    fix = next(p for p in errors.PATTERNS if p.kind == "tpu-tiling").fix
    eight = tiling.row(8).native_tile
    assert "multiples of 8 and 128" in fix and f"rows a multiple of {eight[0]}" in fix and str(eight) in fix
    assert "bf16" not in fix and "16 and 128" not in fix


BUDGET = json.loads((ROOT / "bench" / "budget-line.json").read_text())


@pytest.mark.parametrize("line", BUDGET["lines"], ids=lambda r: f"{r['chip']}-{r['dtype']}")
def test_budget_line_record_still_matches_the_model(line: dict) -> None:
    """bench/budget-line.json's predicted bytes are the model's today (its trivial-window and padding rules change
    nothing for a matmul of whole (8, 128) blocks over a larger array), and where the compiler reported its size
    for a float32 matmul it is exactly the prediction."""
    import re

    from course_tools.bench.budget_line import DTYPES, working_set

    for v in line["verdicts"]:
        predicted = working_set(v["block"], DTYPES[line["dtype"]], line["chip"])
        assert predicted == v["predicted_bytes"], (line["chip"], line["dtype"], v)
        size = re.search(r"Scoped allocation with size ([\d.]+)M", v["compiler"])
        if size and line["dtype"] == "float32":
            assert abs(float(size.group(1)) - predicted / 2**20) < 0.01, v


def test_layernorm_scale_and_shift_are_single_buffered() -> None:
    """E8: LayerNorm's (1, d) g and b, the whole array at index (0, 0), hold one buffer each (jax 0.10.2 trivial
    windowing), its x and output blocks two."""
    from course_tools.reference_schedules import trace_reference
    from pallas_course.legality import check_pallas_call

    info = trace_reference("layernorm", np.float32)
    entries = {e.name: e for e in check_pallas_call(info, "v5e").budget.entries}
    assert {n: e.buffers for n, e in entries.items()} == {"in[0]": 2, "in[1]": 1, "in[2]": 1, "out[0]": 2}
    d = info.inputs[1].array_shape[-1]
    assert entries["in[1]"].bytes_per_buffer == -(-d // 128) * 128 * 4
