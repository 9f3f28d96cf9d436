"""The course's own pictures: the TensorCore diagram (pallas_course.tensorcore_svg) states the chip's constants and
the tiling table's tiles; LAB·1.4's recorded trace (pallas_course.trace_svg) draws every event of its record, and
says it is a CPU trace with the record's provenance."""

from __future__ import annotations

import re

from pallas_course import tiling
from pallas_course.chips import chip
from pallas_course.tensorcore_svg import tensorcore_svg
from pallas_course.trace_svg import load_record, trace_svg


def test_tensorcore_picture_states_the_chip_and_the_tiles() -> None:
    for name in ("v5e", "v6e"):
        c, svg = chip(name), tensorcore_svg(name)
        assert svg.startswith("<svg") and svg.endswith("</svg>")
        assert f"{c.mxu} × {c.mxu} systolic" in svg and f"{c.hbm_bytes_per_s / 1e9:,.0f} GB/s" in svg
        assert "8 sublanes" in svg and "× 128 lanes" in svg
        assert str(tiling.native_tile(16)) in svg and str(tiling.native_tile(8)) in svg


def test_recorded_trace_is_a_cpu_record_drawn_whole() -> None:
    rec = load_record()
    assert rec["provenance"]["device"].startswith("CPU") and rec["provenance"]["jax"] and rec["date"]
    svg = trace_svg(rec)
    assert len(re.findall(r"<rect [^>]*><title>io_callback", svg)) == len(rec["events"])
    assert "CPU trace (TPU interpret mode, not a TPU)" in svg and rec["provenance"]["commit"][:10] in svg
    steps = rec["grid"][0] * rec["grid"][1] * rec["grid"][2]
    assert f"step {steps - 1}<" in svg and f"step {steps}<" not in svg
