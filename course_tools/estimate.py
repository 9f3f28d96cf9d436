"""A model of a kernel's time, to hold a gate's slot until a real TPU run replaces it.

The model reads the kernel's real schedule: it traces the wrapper at the gate's shape (nothing runs) and
takes the grid, each operand's block shape, dtype and index map from the traced pallas_call. From those:

    steps              S = prod(grid)
    fetches of a block = number of steps at which its block index changes (Pallas skips a re-fetch when
                         consecutive steps map to the same block), found by probing the index map one grid
                         axis at a time: a block that depends on axes up to d is fetched prod(grid[:d+1]) times
    compute per step   c = FLOPs per step / peak FLOP/s   (matmul: 2·bm·bn·bk on the MXU)
    time               = prologue DMA + max(S·c, remaining DMA bytes / HBM B/s) + S·overhead + epilogue DMA

Assumptions, stated with every estimate: the pipeline is double-buffered so DMA hides under compute in the
steady state (bounds are averaged over steps); compute runs at the chip's peak bf16 FLOP/s; DMAs run at the
chip's HBM bandwidth; a fixed per-step overhead (course.yml `gates.estimate.step_overhead_s`, fitted to the
JAX docs' v5e matmul); VPU/EUP work (softmax's max, exp, sum, divide) hides under DMA; one TensorCore.
XLA baselines are modelled at their roofline, max(FLOPs / peak, bytes / bandwidth) per op, with no dispatch
cost: GATE 01's softmax baseline, XLA's own fused softmax, at one read and one write of the array, is the HBM
roofline itself, so the estimate can only put the kernel at or above it (each grid step adds its fixed cost).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

from pallas_course.chips import Chip, chip as chip_named
from pallas_course.cost_model import (  # also re-exported
    fused_softmax_bytes,
    memory_bound_seconds,
    step_seconds,
    unfused_softmax_bytes,
)
from pallas_course.legality import check_pallas_call
from .gate_spec import EstimateAssumptions, Gate, MatmulCriterion, SoftmaxCriterion
from pallas_course.kernel_trace import BlockInfo, PallasCallInfo


@dataclass(frozen=True)
class KernelEstimate:
    """The modelled time of one kernel config, with the terms that produced it."""

    config: dict[str, int]
    steps: int
    flops_per_step: float
    bytes_moved: float
    vmem_working_set_bytes: int
    compute_s: float
    dma_s: float
    overhead_s: float
    time_s: float

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.dma_s else "memory"


@dataclass(frozen=True)
class CriterionEstimate:
    """The best modelled config against the modelled baseline, at every shape the criterion names."""

    chip: str
    device_kind: str
    ratios: dict[str, float]  # shape label -> best kernel time / baseline time
    best: dict[str, KernelEstimate]  # shape label -> the kernel config that gave it
    baseline_s: dict[str, float]
    passes: bool  # would the estimate meet the threshold (never a PASS by itself)
    summary: str  # the `est.` row
    assumptions: tuple[str, ...]


# ------------------------------------------------------------------------------------------------ schedule


def fetch_count(block: BlockInfo, grid: tuple[int, ...]) -> int:
    """How many times Pallas moves this block between HBM and VMEM over the whole grid.

    The block index changes exactly when a grid axis it depends on changes; visiting the grid row-major
    (last axis fastest), that happens prod(grid[:d+1]) times for the deepest such axis d, once if none.
    Dependence is probed from the origin one axis at a time (exact for the affine index maps labs write).
    """
    origin = (0,) * len(grid)
    at_origin = block.block_index(*origin)
    deepest = -1
    for axis, size in enumerate(grid):
        if size > 1:
            probe = tuple(1 if a == axis else 0 for a in range(len(grid)))
            if block.block_index(*probe) != at_origin:
                deepest = axis
    return math.prod(grid[: deepest + 1])


def model_pallas_call(
    call: PallasCallInfo, *, flops_per_step: float, chip: Chip, step_overhead_s: float, config: dict[str, int]
) -> KernelEstimate:
    """Time of one traced pallas_call on `chip` under the module's assumptions."""
    steps = math.prod(call.grid)
    bw = chip.hbm_bytes_per_s
    in_bytes = sum(fetch_count(b, call.grid) * b.block_bytes for b in call.inputs)
    out_bytes = sum(fetch_count(b, call.grid) * b.block_bytes for b in call.outputs)
    prologue = sum(b.block_bytes for b in call.inputs)  # first blocks: nothing to hide behind yet
    epilogue = sum(b.block_bytes for b in call.outputs)  # last writeback: nothing after it
    steady_bytes = in_bytes + out_bytes - prologue - epilogue
    dma_s, compute_s = step_seconds(steady_bytes, steps * flops_per_step, chip)  # the course's step-time model
    overhead_s = steps * step_overhead_s
    working_set = check_pallas_call(call, chip).budget.working_set_bytes  # double-buffered blocks + scratch
    return KernelEstimate(
        config=config,
        steps=steps,
        flops_per_step=flops_per_step,
        bytes_moved=in_bytes + out_bytes,
        vmem_working_set_bytes=working_set,
        compute_s=compute_s,
        dma_s=dma_s,
        overhead_s=overhead_s,
        time_s=(prologue + epilogue) / bw + max(compute_s, dma_s) + overhead_s,
    )


@functools.cache
def _trace_one(
    workload: str, dtype: str, shape: tuple[tuple[str, int], ...], config: tuple[tuple[str, int], ...]
) -> PallasCallInfo:
    import jax
    import jax.numpy as jnp

    from . import bench_workloads as w
    from pallas_course.kernel_trace import trace

    s, cfg = dict(shape), dict(config)
    dt = jnp.dtype(dtype)
    if workload == "matmul":
        args = (jax.ShapeDtypeStruct((s["m"], s["k"]), dt), jax.ShapeDtypeStruct((s["k"], s["n"]), dt))
        fn: Callable[..., Any] = functools.partial(w.matmul_acc, **cfg)
    else:
        args = (jax.ShapeDtypeStruct((s["rows"], s["cols"]), dt),)
        fn = functools.partial(w.softmax, **cfg)
    (call,) = trace(fn, *args).pallas_calls
    return call


def traced_call(workload: str, dtype: str, shape: dict[str, int], config: dict[str, int]) -> PallasCallInfo:
    """The workload kernel's pallas_call at `shape` with `config`, traced abstractly (nothing runs)."""
    return _trace_one(workload, dtype, tuple(shape.items()), tuple(config.items()))


# ----------------------------------------------------------------------------------------------- baselines


def xla_matmul_s(m: int, n: int, k: int, itemsize: int, chip: Chip) -> float:
    """XLA's matmul at its roofline: 2mnk FLOPs at peak, or reading A, B and writing C once at full bandwidth."""
    return max(2 * m * n * k / chip.bf16_flops_per_s, (m * k + k * n + m * n) * itemsize / chip.hbm_bytes_per_s)


def xla_softmax_s(rows: int, cols: int, dtype: Any, chip: Chip) -> float:
    """XLA's own fused softmax (jax.jit(jax.nn.softmax)) at its roofline: x read once, the output written once at full
    bandwidth, the HBM bytes of LAB·1.3's model (pallas_course.cost_model); GATE 01's softmax baseline."""
    return memory_bound_seconds(fused_softmax_bytes(rows, cols, dtype), chip)


def xla_softmax_unfused_s(rows: int, cols: int, dtype: Any, chip: Chip) -> float:
    """The five-dispatch chain at full bandwidth: its HBM bytes (pallas_course.cost_model, LAB·1.3's model too)."""
    return memory_bound_seconds(unfused_softmax_bytes(rows, cols, dtype), chip)


# ------------------------------------------------------------------------------------------------ criteria


def _assumptions(a: EstimateAssumptions, chip: Chip) -> tuple[str, ...]:
    return (
        f"chip {chip.name} ({chip.device_kind}): {chip.bf16_flops_per_s:.3g} bf16 FLOP/s, "
        f"{chip.hbm_bytes_per_s:.3g} HBM B/s ({chip.source('hbm_bytes_per_s')})",
        "double-buffered pipeline: per-step DMA hides under compute; bounds averaged over steps",
        "MXU at peak FLOP/s for kernel and XLA alike; VPU/EUP work hides under DMA",
        f"fixed {a.step_overhead_s * 1e6:.3g} µs per grid step ({a.step_overhead_source})",
        "XLA baselines at their roofline, no dispatch cost (favours the baseline)",
        f"configs whose double-buffered blocks exceed {chip.name}'s physical VMEM are left out; those over its "
        f"default scoped limit ({chip.default_scoped_vmem_bytes // 2**20} MiB) raise vmem_limit_bytes, as the bench kernels do",
    )


def shape_label(shape: dict[str, int]) -> str:
    """4096³ for a cube, else 32768×1024."""
    dims = list(shape.values())
    return f"{dims[0]}³" if len(dims) == 3 and len(set(dims)) == 1 else "×".join(map(str, dims))


def _fmt_cfg(cfg: dict[str, int]) -> str:
    if set(cfg) == {"bm", "bn", "bk"}:
        return f"blocks {cfg['bm']}×{cfg['bn']}×{cfg['bk']}"
    return ", ".join(f"{k}={v}" for k, v in cfg.items())


def _best(
    criterion: MatmulCriterion | SoftmaxCriterion, shape: dict[str, int], chip: Chip, a: EstimateAssumptions
) -> KernelEstimate | None:
    best = None
    for blocks in criterion.configs:
        cfg = blocks.model_dump()
        if isinstance(criterion, MatmulCriterion):
            cfg = {"bm": min(cfg["bm"], shape["m"]), "bn": min(cfg["bn"], shape["n"]), "bk": min(cfg["bk"], shape["k"])}
            flops = 2.0 * cfg["bm"] * cfg["bn"] * cfg["bk"]
        else:
            cfg = {"rows_per_block": min(cfg["rows_per_block"], shape["rows"])}
            flops = 0.0  # VPU work, assumed hidden under DMA
        call = traced_call(criterion.workload, criterion.dtype, shape, cfg)
        est = model_pallas_call(call, flops_per_step=flops, chip=chip, step_overhead_s=a.step_overhead_s, config=cfg)
        if est.vmem_working_set_bytes > chip.vmem_bytes:
            continue
        if best is None or est.time_s < best.time_s:
            best = est
    return best


def estimate_criterion(
    gate: Gate, criterion: MatmulCriterion | SoftmaxCriterion, chip: Chip | None = None
) -> CriterionEstimate:
    """The `est.` row for `criterion` on the gate's estimate chip (or `chip`)."""
    import numpy as np

    a = gate.estimate
    chip = chip or chip_named(a.chip)
    itemsize = np.dtype(criterion.dtype).itemsize if criterion.dtype != "bfloat16" else 2
    shapes = [criterion.shape_dict()] if isinstance(criterion, MatmulCriterion) else criterion.shapes()
    ratios, best, baseline = {}, {}, {}
    for shape in shapes:
        label = shape_label(shape)
        kern = _best(criterion, shape, chip, a)
        if kern is None:
            continue
        if isinstance(criterion, MatmulCriterion):
            base = xla_matmul_s(shape["m"], shape["n"], shape["k"], itemsize, chip)
        else:
            base = (xla_softmax_unfused_s if criterion.baseline == "xla_softmax_unfused" else xla_softmax_s)(
                shape["rows"], shape["cols"], criterion.dtype, chip
            )
        ratios[label], best[label], baseline[label] = kern.time_s / base, kern, base
    if isinstance(criterion, MatmulCriterion):
        (label,) = ratios
        r, k = ratios[label], best[label]
        passes = r <= criterion.time_ratio_at_most
        summary = (
            f"est. ~{r:.2f}x XLA at {label} {criterion.dtype} on {chip.name}, {_fmt_cfg(k.config)} "
            f"({k.bound}-bound, {k.steps} steps; needs <= {criterion.time_ratio_at_most}x) (pending run)"
        )
    else:
        worst = max(ratios, key=ratios.__getitem__)
        passes = all(r <= criterion.time_ratio_at_most for r in ratios.values())
        verdict = "within" if passes else "not within"
        summary = (
            f"est. {verdict} {criterion.time_ratio_at_most}x of the fused XLA softmax at its roofline: "
            f"{min(ratios.values()):.2f}x-{ratios[worst]:.2f}x its time "
            f"at {len(ratios)} shapes, rows {min(criterion.rows)}-{max(criterion.rows)}, widths "
            f"{min(criterion.widths)}-{max(criterion.widths)}, {criterion.dtype} on {chip.name} "
            f"(worst {worst}, {_fmt_cfg(best[worst].config)}) (pending run)"
        )
    return CriterionEstimate(
        chip=chip.name,
        device_kind=chip.device_kind,
        ratios=ratios,
        best=best,
        baseline_s=baseline,
        passes=passes,
        summary=summary,
        assumptions=_assumptions(a, chip),
    )
