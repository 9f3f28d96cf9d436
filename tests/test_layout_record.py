"""LAB·1.2's layout lesson quotes a record: bench/rowmax-layout.json (course_tools.bench.reduction_layout), the LLO
operations the real TPU compiler emits per grid step for the lab's rowmax and rowmax_dense. CI holds the record's
shape and what the lesson says of it, not libtpu's output (the record is re-made with libtpu, by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from course_tools.bench.reduction_layout import count_ops
from pallas_course.notebooks import read

ROOT = Path(__file__).resolve().parent.parent
RECORD = json.loads((ROOT / "bench" / "rowmax-layout.json").read_text())
LESSON = next(
    c.source
    for c in read(ROOT / "solutions" / "stage-1" / "lab-1.2-tiled-matmul.ipynb").cells
    if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "md-rowmax-dense"
)


def test_record_has_its_provenance_and_both_kernels_on_both_chips() -> None:
    p = RECORD["provenance"]
    assert p["libtpu"] and p["jax"] and p["commit"] and p["device"].startswith("none: deviceless")
    assert {(r["chip"], r["kernel"]) for r in RECORD["rows"]} == {
        (c, k) for c in ("v5e", "v6e") for k in ("rowmax", "rowmax_dense")
    }
    for r in RECORD["rows"]:
        assert r["dtype"] == "float32" and (r["bm"], r["bn"]) == (8, 512) and set(r) >= {"every_step", "under_when"}


def test_the_lesson_says_what_the_record_holds() -> None:
    """rowmax: a cross-lane max and a one-lane masked store on every step; rowmax_dense: neither on any step, its one
    cross-lane max under a pl.when; the lesson names the record, the libtpu that made it and the ops it quotes."""
    for r in RECORD["rows"]:
        every, when = r["every_step"], r["under_when"]
        if r["kernel"] == "rowmax":
            assert every.get("llo.vmax.xlane.f32") == 1 and every.get("llo.vector_store_masked") == 1
        else:
            assert "llo.vmax.xlane.f32" not in every and "llo.vector_store_masked" not in every
            assert when.get("llo.vmax.xlane.f32") == 1 and every.get("llo.vector_store") == 1
            assert every.get("llo.vmax.f32") == r["bn"] // 128  # one elementwise fold per 128-lane slice
    assert "bench/rowmax-layout.json" in LESSON and f"libtpu {RECORD['provenance']['libtpu']}" in LESSON
    for op in ("`vmax.xlane`", "`vector_store_masked`", "four elementwise `vmax`", "one full `vector_store`"):
        assert op in LESSON
    assert "Array Layouts" in LESSON and "Reductions" in LESSON


def test_counting_reads_the_nesting_of_pl_when() -> None:
    dump = """module {
  func.func @k(%arg0: i32) attributes {x = 1} {
    %0 = llo.constant {value = 0 : i32} : i32
    %1 = llo.vector_load %arg0 : i32 -> vector<8x128xf32>
    scf.if %5 {
      %2 = llo.vmax.xlane.f32 %1 : vector<8x128xf32> -> vector<8x128xf32>
      llo.vector_store %2 into %arg0 : vector<8x128xf32> into i32
    } {in_layout = []}
    llo.vector_store_masked %1 into %arg0 masked %1 : vector<8x128xf32> into i32, vector<8x128xi1>
    return {in_layout = []}
  }
  func.func @other(%arg0: i32) {
    %1 = llo.vector_load %arg0 : i32 -> vector<8x128xf32>
  }
}"""
    assert count_ops(dump, "k") == {
        "every_step": {"llo.vector_load": 1, "llo.vector_store_masked": 1},
        "under_when": {"llo.vector_store": 1, "llo.vmax.xlane.f32": 1},
    }
