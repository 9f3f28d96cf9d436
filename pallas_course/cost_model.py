"""The course's cost models, one home: the time of a pipeline step (DMA and MXU), the time of a memory-bound row
kernel (its HBM bytes over bandwidth, plus a fixed cost per grid step), the rows a row kernel's block should hold,
and a kernel's VMEM working set. Every time is per JAX device, as pltpu.get_tpu_info() counts it (per TensorCore,
times the TensorCores the kernel runs on: pallas_course.chips.Chip.device_hbm_bytes_per_s).

LAB·1.4's visible checks (pallas_course.check, on the student's own traced matmul), its grade
(autograder.labs.lab_1_4, on the grader's traced matmul), the gates' estimates (course_tools.estimate)
and the bench kernels' VMEM limit (course_tools.bench_workloads) all call these with their own inputs. The
working set of a *traced* pallas_call is the legality model's (pallas_course.legality.check_pallas_call);
the closed forms below are that same arithmetic for the lab's matmul, with no trace.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from pallas_course.chips import Chip, chip as chip_named

DEFAULT_BUFFERS = 2  # Pallas double-buffers each BlockSpec unless told otherwise (pl.Buffered(n))


def _chip(chip: Chip | str) -> Chip:
    return chip if isinstance(chip, Chip) else chip_named(chip)


def _itemsize(dtype: Any) -> int:
    import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy

    return np.dtype(dtype).itemsize


# ------------------------------------------------------------------------------------------------ step time


def matmul_passes(dtype: Any, chip: Chip | str) -> float:
    """MXU passes of one matmul block of `dtype` at the precision the course's kernels ask for it
    (pallas_course.precision.matmul_precision: HIGHEST on float32, the default otherwise): course.yml's mxu_passes,
    counted by course_tools.bench.mxu_passes (float32 at HIGHEST: 6 passes on v4, v5e, v5p, v6e)."""
    from pallas_course.precision import matmul_precision

    precision = matmul_precision(dtype)
    return _chip(chip).passes(np.dtype(dtype).name, None if precision is None else precision.name)


def step_seconds(
    moved_bytes: float, flops: float, chip: Chip | str, passes: float = 1.0, parallel: bool = True
) -> tuple[float, float]:
    """(DMA s, MXU s) on one JAX device: bytes over its HBM B/s, FLOPs x MXU passes over its bf16 FLOP/s (a pass
    is one bf16 push of each block: float32 at HIGHEST takes 6, `matmul_passes`). `parallel`: the grid has a
    "parallel" axis (the lab's matmul: i and j), so a megacore device's two TensorCores both work."""
    c = _chip(chip)
    return (
        moved_bytes / c.device_hbm_bytes_per_s(parallel),
        flops * passes / c.device_bf16_flops_per_s(parallel),
    )


def matmul_step(bm: int, bn: int, bk: int, dtype: Any) -> tuple[int, int]:
    """(bytes, FLOPs) of one steady matmul step: one (bm, bk) A and one (bk, bn) B block stream in (C stays in
    VMEM across K); the dot is 2·bm·bn·bk. What `steady_step` and `steady_flops` read off a traced matmul."""
    return (bm * bk + bk * bn) * _itemsize(dtype), 2 * bm * bn * bk


def matmul_step_detail(bm: int, bn: int, bk: int, dtype: Any) -> tuple[int, int, str]:
    """`matmul_step` with what moves, in `steady_step`'s words: the lab's matmul's steady step, no trace."""
    return (*matmul_step(bm, bn, bk, dtype), f"one {(bm, bk)} A block and one {(bk, bn)} B block")


STEADY_POINT = (0, 0, 1)  # the steady-state step of a (1, 1, >= 3) matmul grid: one in the middle of K


def steady_flops(info: Any) -> tuple[int, bool]:
    """(FLOPs, exact) of the dots the steady-state grid step (0, 0, 1) of a traced matmul pallas_call runs, as it
    runs them (pallas_course.step_work): the `pl.when` branch that step takes (the add after the first K step, not
    the first step's assignment), each loop its trip count. `exact` is False where a branch or a trip count
    depended on data: then the most expensive branch and the loop body once."""
    from pallas_course.step_work import step_work

    work = step_work(info.kernel_jaxpr, info.grid, STEADY_POINT)
    return work.flops, work.exact


def steady_step(info: Any) -> tuple[int, str]:
    """(bytes, what moves) of the steady-state grid step (0, 0, 1) of a traced matmul pallas_call whose grid is
    (1, 1, >= 3), read off its depth-2 schedule: the blocks whose copies start there."""
    from pallas_course.schedule import schedule

    frame = next(f for f in schedule(info, 2).frames if f.grid_point == STEADY_POINT)
    blocks = {f"{b.role}[{b.position}]": b for b in info.blocks}
    started = [t for t in frame.transfers if t.kind == "fetch" and t.action == "start"]
    what = " and ".join(
        f"one {blocks[t.operand].block_shape} {'AB'[blocks[t.operand].position]} block" for t in started
    )
    return sum(blocks[t.operand].block_bytes for t in started), what


# ---------------------------------------------------------------------------------------- memory-bound kernels
# Softmax and LayerNorm do a few VPU operations per element and no matmul, while a chip's FLOP/s per HBM byte/s is
# in the hundreds (v5e: 1.97e14 / 8.2e11 = 240): they wait on HBM, so their time is their HBM bytes over the
# device's bandwidth, plus the fixed cost of each grid step the matmul model charges too (course.yml
# gates.estimate.step_overhead_s): at 8 rows of 1024 float32 a step moves 64 KiB, 80 ns on v5e, against that
# fixed 223 ns. LAB·1.3's softmax_seconds and rows_per_block (graded by pallas_course.lab_1_3_rules) use these.

MIN_STEP_BYTES = 2**20  # a row kernel's step should move at least this (in + out): its fixed cost then <= ~15 % on v5e
ROW_VMEM_SHARE = 0.5  # ... and its double-buffered in and out blocks at most this share of the scoped VMEM limit


def step_overhead() -> tuple[float, str]:
    """(seconds, source): the fixed cost of one grid step beyond its DMA and MXU time, course.yml's
    gates.estimate.step_overhead_s (fitted on v5e; the one constant the gate estimates charge every step)."""
    from pallas_course.manifest import manifest

    est = next(g["estimate"] for g in manifest().gates if "estimate" in g)
    return float(est["step_overhead_s"]), str(est["step_overhead_source"])


def memory_bound_seconds(moved_bytes: float, chip: Chip | str, steps: int = 0, parallel: bool = False) -> float:
    """Seconds to move `moved_bytes` through HBM at one JAX device's bandwidth, plus `steps` x the fixed cost of a
    grid step. `parallel`: the row axis is "parallel" (on a megacore chip, both TensorCores stream)."""
    return moved_bytes / _chip(chip).device_hbm_bytes_per_s(parallel) + steps * step_overhead()[0]


def row_block_bytes(rows: int, d: int, dtype: Any) -> int:
    """Bytes of one (rows, d) block of `dtype`."""
    return rows * d * _itemsize(dtype)


def row_block_fits(rows: int, d: int, dtype: Any, chip: Chip | str) -> bool:
    """The row kernel's in and out blocks, double-buffered, within ROW_VMEM_SHARE of the default scoped limit: the
    rest is for the float32 values the body computes (libtpu 0.0.42.1, v5e: (1024, 1024) float32 blocks, 16 MiB of
    buffers, need 17.84 MiB and fail; (768, 1024), 12 MiB, compile; the course's tests hold the rule to the compiler)."""
    need = blocks_working_set((row_block_bytes(rows, d, dtype),) * 2)
    return need <= ROW_VMEM_SHARE * _chip(chip).default_scoped_vmem_bytes


def row_block_moves_enough(rows: int, n: int, d: int, dtype: Any) -> bool:
    """A step reads and writes at least MIN_STEP_BYTES, or the block is the whole array."""
    return rows >= n or 2 * row_block_bytes(rows, d, dtype) >= MIN_STEP_BYTES


def fused_softmax_bytes(n: int, d: int, dtype: Any) -> int:
    """HBM bytes of the fused softmax of an (n, d) array: x read once, the output (x's dtype) written once."""
    return 2 * n * d * _itemsize(dtype)


def unfused_softmax_bytes(n: int, d: int, dtype: Any) -> int:
    """HBM bytes of the unfused chain (course_tools.bench_workloads.xla_softmax_unfused, GATE 01's baseline), one
    jit per op, each reading its inputs from HBM and writing its output back: max reads x, writes m [n]; subtract
    reads x and m, writes z; exp reads z, writes e; sum reads e, writes s [n]; divide reads e and s, writes the
    result. Five reads and three writes of the (n, d) array, four of the (n, 1) row statistics."""
    nd = n * d
    reads = nd + (nd + n) + nd + nd + (nd + n)
    writes = n + nd + nd + n + nd
    return (reads + writes) * _itemsize(dtype)


# ------------------------------------------------------------------------------------------------ VMEM


def blocks_working_set(block_bytes: Iterable[int], buffers: int = DEFAULT_BUFFERS, scratch_bytes: int = 0) -> int:
    """Every block x its buffers, plus scratch (one copy: scratch is not pipelined)."""
    return sum(block_bytes) * buffers + scratch_bytes


def matmul_working_set(
    bm: int, bn: int, bk: int, dtype: Any, buffers: int = DEFAULT_BUFFERS, acc_scratch: bool = False
) -> int:
    """The matmul's (bm, bk) A, (bk, bn) B and (bm, bn) C blocks x `buffers`, plus the f32 (bm, bn) scratch
    accumulator when asked (float32 whatever the inputs): the legality model of that pallas_call, with no trace."""
    size = _itemsize(dtype)
    return blocks_working_set(
        (bm * bk * size, bk * bn * size, bm * bn * size), buffers, bm * bn * 4 if acc_scratch else 0
    )
