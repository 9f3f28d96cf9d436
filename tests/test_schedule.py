"""The pipeline schedule model: the seed's EX·02 / EX·07 / EX·12 frames, and the grid order JAX really runs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental.pallas import tpu as pltpu

from autograder.labs import reference_kernels
from course_tools.reference_schedules import reference_schedule, trace_reference
from pallas_course import kernel_trace
from pallas_course.schedule import schedule

SEED = {"m": 128, "n": 128, "k": 512, "bm": 128, "bn": 128, "bk": 128}


@pytest.fixture(scope="module")
def double():
    return reference_schedule("matmul", 2, **SEED)


@pytest.fixture(scope="module")
def single():
    return reference_schedule("matmul", 1, **SEED)


def test_ex02_six_frames_double_buffered(double):
    """EX·02: one output block, K in 4 blocks, depth 2 -> 6 frames."""
    assert len(double.frames) == 6
    assert [f.phase for f in double.frames] == ["prologue", "steady", "steady", "steady", "epilogue", "epilogue"]


def test_ex02_frame_one_text(double):
    """Frame 1 is the seed's sentence, and compute is idle."""
    f = double.frames[0]
    assert (
        f"{f.label} · {f.caption}"
        == "grid step 0 · DMA A0, B0 into the first slot pair; the MXU has no data yet and waits"
    )
    assert f.idle and f.compute is None
    assert [(t.block, t.slot, t.action) for t in f.transfers] == [("A0", "a0", "start"), ("B0", "b0", "start")]
    assert f.slots == {"a0": "A0", "a1": None, "b0": "B0", "b1": None, "c0": None, "c1": None}


def test_ex02_steady_state_overlaps(double):
    """Step k computes on one slot pair while block k+1 streams into the other."""
    f = double.frames[2]
    assert f.grid_point == (0, 0, 1) and f.compute == "C += A1·B1" and not f.idle
    started = [(t.block, t.slot) for t in f.transfers if t.action == "start"]
    waited = [(t.block, t.slot) for t in f.transfers if t.action == "wait"]
    assert started == [("A2", "a0"), ("B2", "b0")] and waited == [("A1", "a1"), ("B1", "b1")]


def test_ex02_output_resident_then_written_back_once(double):
    """C stays in VMEM across K; the only write-back is the last frame."""
    wbs = [(f.index, t.block) for f in double.frames for t in f.transfers if t.kind == "writeback"]
    assert wbs == [(6, "C")]


def test_ex07_nine_frames_pipeline_off(single):
    """EX·07: depth 1 -> 9 frames; every load idles the MXU."""
    assert len(single.frames) == 9
    f = single.frames[0]
    assert f"{f.label} · {f.caption}" == "load 1 · DMA A0, B0 into VMEM; the MXU sits idle the whole transfer"
    assert all(f.idle for f in single.frames if f.label.startswith("load"))


def test_idle_frames_compare(double, single):
    """Double buffering leaves 2 idle frames (fill and drain); the pipeline off leaves 5."""
    assert double.idle_frames == 2 and single.idle_frames == 5


def test_ex12_frames_lock_to_source_lines(double):
    """k == 0 runs the init lines 3-5 and the accumulate line 6; later steps only line 6; DMAs are lines 15-16."""
    src = double.source
    assert src[0] == "def matmul_kernel(a_ref, b_ref, o_ref):"
    assert double.frames[0].lines == (15, 16)
    assert double.frames[1].lines == (2, 3, 4, 5, 6, 15, 16)
    assert double.frames[2].lines == (2, 6, 15, 16)
    assert src[6 - 1].lstrip().startswith("o_ref[...] +=")
    assert double.frames[-1].lines == (18,)  # out_specs line: the write-back


def test_skipped_copy_when_index_unchanged():
    """layernorm's gamma/beta have a constant index map: copied once, then skipped."""
    s = reference_schedule("layernorm", 2, rows=32, d=128)
    fetched = [t.block for f in s.frames for t in f.transfers if t.kind == "fetch" and t.action == "start"]
    assert fetched.count("G") == 1 and fetched.count("B") == 1
    assert any(sk.block == "G" and "unchanged" in sk.reason for f in s.frames for sk in f.skipped)
    assert "the core has no data yet" in s.frames[0].caption  # no matmul: not the MXU


def test_two_output_blocks_write_back_overlaps():
    """With two output blocks the first is written back while the second is computed."""
    s = reference_schedule("matmul", 2, m=256, n=128, k=256)
    wb = [(f.index, t.block, t.action) for f in s.frames for t in f.transfers if t.kind == "writeback"]
    assert wb == [(4, "C0", "start"), (6, "C1", "start+wait")]
    assert s.frames[3].compute == "C1 = 0; C1 += A(1,0)·B0"


def test_depth_must_be_one_or_two():
    """Other depths are valid Pallas but not drawn: NotImplementedError says so."""
    info = trace_reference("matmul", **SEED)
    with pytest.raises(NotImplementedError, match="depth=3"):
        schedule(info, 3)


def test_default_names_come_from_ref_names():
    """Without display names, operands are named after the kernel's refs (a_ref -> A)."""
    info = trace_reference("matmul", **SEED)
    assert schedule(info, 2).operands == {"in[0]": "A", "in[1]": "B", "out[0]": "O"}


def _recorded_order(fn, *args):
    points = []

    def recorder(token, grid_point, core_id):
        points.append(tuple(int(g) for g in grid_point))
        return token

    try:
        with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(grid_point_recorder=recorder)):
            jax.block_until_ready(fn(*args))
    finally:
        pltpu.reset_tpu_interpret_mode_state()
    return points


@pytest.mark.parametrize("sizes", [SEED, {"m": 256, "n": 256, "k": 256, "bm": 128, "bn": 128, "bk": 128}])
def test_grid_order_matches_tpu_interpret_mode(sizes):
    """The model's step order equals the grid points TPU interpret mode reports for the same kernel."""
    a = jnp.ones((sizes["m"], sizes["k"]), jnp.float32)
    b = jnp.ones((sizes["k"], sizes["n"]), jnp.float32)
    blocks = {k: sizes[k] for k in ("bm", "bn", "bk")}
    recorded = _recorded_order(lambda x, y: reference_kernels.matmul(x, y, **blocks), a, b)
    model = reference_schedule("matmul", 2, **sizes)
    assert recorded == list(model.steps)
    assert [f.grid_point for f in model.frames if f.grid_point is not None] == recorded


def test_schedule_of_a_traced_call_is_json_ready(double):
    """to_dict() carries every frame with plain values (the site reads it)."""
    import json

    d = json.loads(json.dumps(double.to_dict()))
    assert d["num_frames"] == 6 and d["frames"][0]["transfers"][0]["block"] == "A0"


def test_trace_of_student_style_call():
    """Any traced pallas_call can be drawn, not only the references."""
    x = jax.ShapeDtypeStruct((256, 256), jnp.float32)
    info = kernel_trace.trace(reference_kernels.transpose, x).pallas_calls[0]
    s = schedule(info, 2)
    assert len(s.frames) == 4 + 2
    assert [t.block for t in s.frames[0].transfers] == ["X(0,0)"]
