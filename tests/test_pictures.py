"""The course's own pictures: the TensorCore diagram (pallas_course.tensorcore_svg) states the chip's constants and
the tiling table's tiles; LAB·1.4's recorded trace (pallas_course.trace_svg) draws every event of its record, and
says it is a CPU trace with the record's provenance."""

from __future__ import annotations

import re

from pallas_course import tiling
from pallas_course.chips import chip
from pallas_course.tensorcore_svg import tensorcore_svg
from pallas_course.tensorcore_svg import peak_lines
from pallas_course.trace_svg import kinds, load_record, trace_svg


def test_tensorcore_picture_states_the_chip_and_the_tiles() -> None:
    for name in ("v5e", "v6e"):
        c, svg = chip(name), tensorcore_svg(name)
        assert svg.startswith("<svg") and svg.endswith("</svg>")
        assert f"each {c.mxu} × {c.mxu} systolic" in svg and f"{c.hbm_bytes_per_s / 1e9:,.0f} GB/s per chip" in svg
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


def test_tensorcore_picture_draws_tpu_info_s_mxus_and_the_other_units() -> None:
    """As many MXU boxes as tpu_info's num_mxus (4 on v5e, 2 on v6e), the VPU, the EUP and the XLU, and the peak
    derived from them per TensorCore; on a two-core chip the HBM bandwidth per chip and per TensorCore."""
    for name, mxus in (("v5e", 4), ("v6e", 2), ("v7x", 2)):
        c, svg = chip(name), tensorcore_svg(name)
        assert svg.count('class="mxu"') == mxus == c.num_mxus
        for unit in (">VPU<", ">EUP<", ">XLU<", "exp, reciprocal, rsqrt", "cross-lane reductions"):
            assert unit in svg, (name, unit)
        first, second = peak_lines(name)
        assert f"= {mxus} × 2 × {c.mxu}² × " in first and first in svg.replace("&#x27;", "'")
        assert second.replace("'", "&#x27;") in svg
    v5e, v7x = peak_lines("v5e"), peak_lines("v7x")
    assert "4 × 2 × 128² × 1.50 GHz = 1.97e14 bf16 FLOP/s" in v5e[0] and "1.5 GHz on v5e" in v5e[1]
    assert "× 2 TensorCores = 2.31e15 per chip" in v7x[1] and "no published clock" in v7x[1]
    assert "7,400 GB/s per chip" in tensorcore_svg("v7x") and "3,700 GB/s per TensorCore" in tensorcore_svg("v7x")


def test_recorded_trace_tells_the_first_k_step_from_the_last() -> None:
    """F8: the once-per-output-block callbacks are two events: one at each block's first K step (the zeroing), two
    at its last (the write-back); the picture gives each its colour and words, read off the steps of the record."""
    rec = load_record()
    k = kinds(rec)
    assert sorted(v for v in k.values() if v in ("first-k", "last-k", "block")) == ["first-k", "last-k", "last-k"]
    svg = trace_svg(rec)
    assert "first K step of each output block: the pl.when(k == 0) zeroing store" in svg
    assert "last K step of each output block: its write-back" in svg
    assert "ran once per output block" not in svg  # no event of this record is left without its K step
    first = [n for n, v in k.items() if v == "first-k"]
    assert svg.count('fill="#c98a2b"><title>') == sum(e["name"] in first for e in rec["events"]) == 4
