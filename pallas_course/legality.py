"""BlockSpec legality and the VMEM budget, in one place: the rules the chapter quotes and the grader enforces.

Three levels, because TPU tooling rejects bad blocks at three different moments (the course's one table of
them is `pallas_course.tiling`; this module applies it):

* ``lowering``: the Pallas TPU lowering (``jax/_src/pallas/mosaic/lowering.py``, the block-shape check) refuses
  the kernel: last two dims divisible by (8, 128) or equal the array's, whatever the dtype. This is what
  ``jax.jit(f).trace(...).lower(lowering_platforms=('tpu',))`` catches on a CPU machine, and what
  `lowering_accepts` asks JAX directly; the tests hold the model to it in both directions.
* ``compile``: lowering passes but Mosaic refuses at compile time (needs libtpu or a TPU): an 8-bit array is
  tiled (32, 128), so a block of 8, 16 or 24 rows fails with ``E2002 CompileTimeMosaicMisalignedBlockAndTiling``.
* ``note``: legal, but worth saying (a bf16 block of 8 rows takes its own bytes in VMEM, course_tools.bench.tpu_layout's
  record, but copies half of XLA's 16-row HBM tiles, layout T(8,128)(2,1); a grid that does not divide the array leaves a
  partial last block).

The VMEM working set is compared with two different numbers: the chip's physical VMEM and the compiler's
default scoped limit (much smaller on v5e: 16 MiB of 128 MiB), which is what a kernel really gets unless it
passes ``pltpu.CompilerParams(vmem_limit_bytes=...)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from . import tiling
from .chips import Chip, chip as chip_by_name
from .kernel_trace import PallasCallInfo

Severity = Literal["lowering", "compile", "note"]

LOWERING_SOURCE = tiling.LOWERING_SOURCE
COMPILE_SOURCE = tiling.COMPILE_SOURCE
TILE_SOURCE = tiling.TILE_SOURCE
# Default buffers per blocked operand when no pl.Buffered(n) is given: the TPU pipeline double-buffers.
DEFAULT_BUFFER_COUNT = 2
# EX·09's sandbox models a copy kernel: the same BlockSpec in and out, so two operands, each with its buffers.
SANDBOX_OPERANDS = 2
VMEM_SOURCE = (
    "jax 0.10.2 jax/_src/pallas/mosaic/lowering.py ('Force single-buffering pipelining for trivial "
    "windowing in VMEM'); bytes per buffer fitted to the compiler's own numbers: the course's record vmem-padding.json, "
    "course_tools.bench.tpu_layout, jax 0.10.2 + libtpu 0.0.42.1, deviceless v5e, 2026-12-04"
)


class BlockSpecError(ValueError):
    """The question itself is malformed (rank mismatch, non-positive sizes), not an illegal BlockSpec."""


@dataclass(frozen=True)
class RuleCheck:
    """One rule applied to one block dimension."""

    rule: str  # "lane rule", "sublane rule", "native tile", "rank-1 rule", "partial block"
    axis: int  # array axis the rule looks at
    expression: str  # the arithmetic, e.g. "bn % 128 == 0"
    ok: bool
    severity: Severity  # what happens when not ok
    message: str  # plain words: the thing, the value, the rule and the fix
    source: str


@dataclass(frozen=True)
class BlockVerdict:
    """Legality of one BlockSpec over one array on one chip, with its grid and bytes."""

    array_shape: tuple[int, ...]
    block_shape: tuple[int | None, ...]
    dtype: str
    chip: str
    checks: tuple[RuleCheck, ...]
    grid: tuple[int, ...]
    block_bytes: int

    @property
    def lowers(self) -> bool:
        """What the Pallas TPU lowering will say (checkable on CPU)."""
        return not any(not c.ok and c.severity == "lowering" for c in self.checks)

    @property
    def legal(self) -> bool:
        """Lowers and compiles (as far as the rules know)."""
        return not self.violations

    @property
    def violations(self) -> list[str]:
        return [c.message for c in self.checks if not c.ok and c.severity != "note"]

    @property
    def notes(self) -> list[str]:
        return [c.message for c in self.checks if not c.ok and c.severity == "note"]

    @property
    def num_blocks(self) -> int:
        return math.prod(self.grid)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            lowers=self.lowers,
            legal=self.legal,
            violations=self.violations,
            notes=self.notes,
            num_blocks=self.num_blocks,
        )
        return d


@dataclass(frozen=True)
class VmemEntry:
    name: str  # "in[0]", "out[0]", "scratch[0]"
    bytes_per_buffer: int
    buffers: int

    @property
    def bytes(self) -> int:
        return self.bytes_per_buffer * self.buffers


@dataclass(frozen=True)
class VmemBudget:
    """VMEM working set against the chip's capacity and its default scoped limit."""

    chip: str
    entries: tuple[VmemEntry, ...]
    vmem_bytes: int  # physical, per TensorCore
    default_scoped_vmem_bytes: int  # what a kernel gets by default
    vmem_limit_bytes: int | None  # pltpu.CompilerParams(vmem_limit_bytes=...), if given
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def working_set_bytes(self) -> int:
        return sum(e.bytes for e in self.entries)

    @property
    def limit_bytes(self) -> int:
        """The limit the compiler enforces for this kernel."""
        return self.vmem_limit_bytes or self.default_scoped_vmem_bytes

    @property
    def fits_limit(self) -> bool:
        return self.working_set_bytes <= self.limit_bytes

    @property
    def fits_capacity(self) -> bool:
        return self.working_set_bytes <= self.vmem_bytes

    def verdict(self) -> str:
        # Binary units throughout, as the compiler prints its limits: "34 MB within 32 MiB" misleads.
        ws = fmt_mib(self.working_set_bytes)
        if self.fits_limit:
            return f"fits: working set {ws} is within the {fmt_mib(self.limit_bytes)} scoped VMEM limit on {self.chip}"
        if self.fits_capacity:
            return (
                f"over the scoped limit: working set {ws} exceeds the {fmt_mib(self.limit_bytes)} scoped VMEM "
                f"limit on {self.chip} (expect CompileTimeScopedVmemOom); it fits the {fmt_mib(self.vmem_bytes)} "
                f"physical VMEM, so raise pltpu.CompilerParams(vmem_limit_bytes=...) or shrink the blocks"
            )
        return (
            f"does not fit: working set {ws} exceeds the {fmt_mib(self.vmem_bytes)} physical VMEM of one "
            f"{self.chip} TensorCore; shrink the blocks or the buffer count"
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["entries"] = [dict(asdict(e), bytes=e.bytes) for e in self.entries]
        d.update(
            working_set_bytes=self.working_set_bytes,
            limit_bytes=self.limit_bytes,
            fits_limit=self.fits_limit,
            fits_capacity=self.fits_capacity,
            verdict=self.verdict(),
        )
        return d


def fmt_bytes(n: int) -> str:
    """Decimal units as the chapter prints them: 131,072 B -> '131 KB', 134,217,728 B -> '134 MB'."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            return f"{n / scale:.0f} {unit}"
    return f"{n} B"


def fmt_mib(n: int) -> str:
    """Binary units, as the compiler prints limits: 16,777,216 B -> '16 MiB'."""
    return f"{n / 2**20:.4g} MiB"


def _as_chip(c: Chip | str) -> Chip:
    return c if isinstance(c, Chip) else chip_by_name(c)


def stored_bits(dtype: np.dtype) -> int:
    """Bits per element of `dtype` as Mosaic stores a block of it: bool blocks are stored as 32-bit
    (lowering.py BOOL_MEMREF_TYPE), every other dtype at its own width."""
    return 32 if dtype == np.bool_ else dtype.itemsize * 8


def _dim_name(axis: int, rank: int) -> str:
    return {rank - 1: "minor (lane) dim", rank - 2: "second-minor (sublane) dim"}.get(axis, f"dim {axis}")


def check_block(
    array_shape: Sequence[int],
    block_shape: Sequence[int | None],
    dtype: Any,
    chip: Chip | str,
) -> BlockVerdict:
    """Legality of BlockSpec(`block_shape`) over an array of `array_shape` and `dtype` on `chip`.

    A `None` block dim is squeezed (size 1 in the kernel), as in `pl.BlockSpec((None, 8, 128), ...)`.
    """
    c = _as_chip(chip)
    dt = np.dtype(dtype)
    shape = tuple(int(s) for s in array_shape)
    block = tuple(None if b is None else int(b) for b in block_shape)
    if len(shape) != len(block):
        raise BlockSpecError(f"block shape {block} has rank {len(block)} but the array {shape} has rank {len(shape)}")
    if not shape:
        raise BlockSpecError("a BlockSpec needs an array of rank >= 1")
    for s, b in zip(shape, block):
        if s <= 0 or (b is not None and b <= 0):
            raise BlockSpecError(f"sizes must be positive: array {shape}, block {block}")
    dims = tuple(1 if b is None else b for b in block)
    rank = len(shape)
    bits = stored_bits(dt)
    checks: list[RuleCheck] = []
    name = dt.name

    if rank >= 2:
        bn, n = dims[-1], shape[-1]
        ok = bn == n or bn % c.lanes == 0
        checks.append(
            RuleCheck(
                "lane rule",
                rank - 1,
                f"bn % {c.lanes} == 0 or bn == {n}",
                ok,
                "lowering",
                f"minor (lane) dim: block {bn} must be a multiple of {c.lanes} or equal the array's {n}; "
                f"try {max(c.lanes, bn // c.lanes * c.lanes)} or {n}",
                LOWERING_SOURCE,
            )
        )
        bm, m = dims[-2], shape[-2]
        ok = bm == m or bm % c.sublanes == 0
        checks.append(
            RuleCheck(
                "sublane rule",
                rank - 2,
                f"bm % {c.sublanes} == 0 or bm == {m}",
                ok,
                "lowering",
                f"second-minor (sublane) dim: block {bm} must be a multiple of {c.sublanes} or equal the array's {m}; "
                f"try {max(c.sublanes, bm // c.sublanes * c.sublanes)} or {m}",
                LOWERING_SOURCE,
            )
        )
        tile_row = tiling.row(bits)
        tile = tile_row.native_tile[0]
        if tile_row.misaligned is not None:
            ok = bm == m or bm % tile == 0
            severity: Severity = tile_row.misaligned
            if severity == "compile":
                msg = (
                    f"second-minor (sublane) dim: a {name} array is tiled ({tile}, {c.lanes}) in HBM, so block {bm} "
                    f"must be a multiple of {tile} or equal the array's {m}; Mosaic rejects it at compile time"
                )
            else:
                msg = (
                    f"second-minor (sublane) dim: {bm} rows of {name} fill only part of the native "
                    f"({tile}, {c.lanes}) tile; legal, but a multiple of {tile} uses whole packed vregs"
                )
            checks.append(
                RuleCheck("native tile", rank - 2, f"bm % {tile} == 0 or bm == {m}", ok, severity, msg, tile_row.source)
            )
    else:
        b0, n0 = dims[0], shape[0]
        packing = 32 // bits
        chunk = c.sublanes * c.lanes
        min_tiling = c.lanes * packing
        pow2 = b0 & (b0 - 1) == 0
        ok = b0 == n0 or b0 % chunk == 0 or (b0 >= min_tiling and pow2)
        checks.append(
            RuleCheck(
                "rank-1 rule",
                0,
                f"b == {n0} or b % {chunk} == 0 or (b >= {min_tiling} and b is a power of 2)",
                ok,
                "lowering",
                f"rank-1 block {b0} of {name} must equal the array's {n0}, be a multiple of {chunk} "
                f"({c.sublanes}x{c.lanes}), or be a power of 2 of at least {min_tiling} (128 x 32/{bits}); "
                f"or reshape to 2-D",
                LOWERING_SOURCE,
            )
        )

    grid = tuple(math.ceil(s / b) for s, b in zip(shape, dims))
    for axis, (s, b) in enumerate(zip(shape, dims)):
        if b > s:
            checks.append(
                RuleCheck(
                    "partial block",
                    axis,
                    f"{b} <= {s}",
                    False,
                    "note",
                    f"{_dim_name(axis, rank)}: block {b} is larger than the array's {s}, so the single block is padded "
                    f"(out-of-bounds reads are unspecified, writes are dropped)",
                    LOWERING_SOURCE,
                )
            )
        elif s % b:
            checks.append(
                RuleCheck(
                    "partial block",
                    axis,
                    f"{s} % {b} == 0",
                    False,
                    "note",
                    f"{_dim_name(axis, rank)}: {s} is not a multiple of block {b}, so the last of {grid[axis]} blocks is "
                    f"partial (out-of-bounds reads are unspecified, writes are dropped)",
                    LOWERING_SOURCE,
                )
            )
    block_bytes = math.prod(dims) * dt.itemsize
    return BlockVerdict(shape, block, name, c.name, tuple(checks), grid, block_bytes)


def vmem_block_bytes(block_shape: Sequence[int | None], dtype: Any) -> int:
    """Bytes one buffer of a block takes in VMEM, as the compiler allocates it: the last dim rounded up to whole
    128-lane rows; the second-minor rounded up to a multiple of 8 rows, or below 8 rows to a power of two and at
    least one 32-bit sublane (2 bf16 or 4 int8 rows). Fitted to every measurement in the course's record, to
    within its 1 KiB bisection step (the (1, 128) float32 row measures 1,024 B where the model says 512),
    vmem-padding.json (course_tools.bench.tpu_layout; jax 0.10.2 + libtpu 0.0.42.1, deviceless v5e): a (1, d) float32 block takes d x 4 bytes (not a whole
    (8, 128) tile per 128 lanes), 3 rows take 4, 12 take 16; a (1, d) bfloat16 block takes 2 rows, int8 4.
    Blocks of whole (8, 128) tiles, every matmul block in the course, are exactly their bytes."""
    dims = [1 if b is None else int(b) for b in block_shape]
    dt = np.dtype(dtype)
    lanes = -(-dims[-1] // tiling.LANES) * tiling.LANES
    rows = dims[-2] if len(dims) >= 2 else 1
    sublane_rows = max(1, 4 // dt.itemsize)
    if rows < tiling.SUBLANES:
        rows = max(sublane_rows, 1 << (rows - 1).bit_length())
    else:
        rows = -(-rows // tiling.SUBLANES) * tiling.SUBLANES
    return math.prod(dims[:-2]) * rows * lanes * dt.itemsize


def sandbox_budget(
    verdict: BlockVerdict,
    *,
    buffers: int = DEFAULT_BUFFER_COUNT,
    scratch_bytes: int = 0,
    vmem_limit_bytes: int | None = None,
) -> VmemBudget:
    """The EX·09 sandbox's working set: a copy kernel with this BlockSpec in and out, each block held `buffers`
    times (2 by default, 1 with pl.Buffered(1)), at the bytes the compiler allocates for it, plus scratch."""
    c = chip_by_name(verdict.chip)
    per_buffer = vmem_block_bytes(verdict.block_shape, verdict.dtype)
    entries = [VmemEntry(name, per_buffer, buffers) for name in ("in[0]", "out[0]")[:SANDBOX_OPERANDS]]
    if scratch_bytes:
        entries.append(VmemEntry("scratch", scratch_bytes, 1))
    return _budget(c, entries, vmem_limit_bytes)


def _budget(c: Chip, entries: list[VmemEntry], vmem_limit_bytes: int | None) -> VmemBudget:
    return VmemBudget(
        chip=c.name,
        entries=tuple(entries),
        vmem_bytes=c.vmem_bytes,
        default_scoped_vmem_bytes=c.default_scoped_vmem_bytes,
        vmem_limit_bytes=vmem_limit_bytes,
        sources={
            "vmem_bytes": c.source("vmem_bytes"),
            "default_scoped_vmem_bytes": c.source("default_scoped_vmem_bytes"),
        },
    )


@dataclass(frozen=True)
class PallasCallReport:
    """Every operand's verdict and the kernel's VMEM budget, for one traced pallas_call."""

    name: str
    grid: tuple[int, ...]
    operands: tuple[tuple[str, BlockVerdict], ...]  # ("in[0]", verdict)
    budget: VmemBudget

    @property
    def lowers(self) -> bool:
        return all(v.lowers for _, v in self.operands)

    @property
    def legal(self) -> bool:
        return all(v.legal for _, v in self.operands)

    @property
    def violations(self) -> list[str]:
        return [f"{name}: {msg}" for name, v in self.operands for msg in v.violations]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "grid": list(self.grid),
            "lowers": self.lowers,
            "legal": self.legal,
            "violations": self.violations,
            "operands": [{"operand": n, **v.to_dict()} for n, v in self.operands],
            "budget": self.budget.to_dict(),
        }


def check_pallas_call(
    info: PallasCallInfo,
    chip: Chip | str,
    *,
    buffers: int | None = None,
    vmem_limit_bytes: int | None = None,
) -> PallasCallReport:
    """Legality of every BlockSpec of a traced pallas_call, and its VMEM working set on `chip`.

    Working set = sum over blocked operands of block bytes x buffers + scratch. Buffers: 1 for an operand whose
    block is the whole array at a constant-zero index map (jax 0.10.2 single-buffers a trivial window), else
    pl.Buffered(n) if the kernel set it, else `buffers`, else 2. Block bytes as the compiler allocates them
    (`vmem_block_bytes`). Operands in SMEM/ANY are not counted (nothing was traced for them here).
    """
    c = _as_chip(chip)
    operands = []
    entries = []
    for b in info.blocks:
        label = f"{b.role}[{b.position}]"
        operands.append((label, check_block(b.array_shape, b.block_shape, b.dtype, c)))
        n = 1 if b.trivial_window else (b.buffer_count or buffers or DEFAULT_BUFFER_COUNT)
        entries.append(VmemEntry(label, vmem_block_bytes(b.block_shape, b.dtype), n))
    for i, (shape, dtype, space) in enumerate(info.scratch):
        if "smem" in space.lower() or "semaphore" in space.lower():
            continue
        entries.append(VmemEntry(f"scratch[{i}]", math.prod(shape) * np.dtype(dtype).itemsize, 1))
    return PallasCallReport(info.name, info.grid, tuple(operands), _budget(c, entries, vmem_limit_bytes))


# --- the oracle the model is tested against -------------------------------------------------------------


def lowering_accepts(
    array_shape: Sequence[int],
    block_shape: Sequence[int | None],
    dtype: Any,
    chip: Chip | str = "v5e",
) -> tuple[bool, str]:
    """Ask JAX: does a copy kernel with this BlockSpec lower for TPU on this (CPU) machine?

    Runs under an abstract mesh whose device is `chip`, because the rank-1 rule reads `pltpu.get_tpu_info()`,
    which otherwise fails with "Unsupported TPU device kind: cpu". Returns (ok, first line of the error).
    """
    import jax
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    from jax.sharding import AbstractDevice, AbstractMesh

    c = _as_chip(chip)
    shape = tuple(array_shape)
    dims = tuple(1 if b is None else b for b in block_shape)
    grid = tuple(math.ceil(s / b) for s, b in zip(shape, dims))
    spec = pl.BlockSpec(tuple(block_shape), lambda *g: g)

    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        return pl.pallas_call(
            copy_kernel, grid=grid, in_specs=[spec], out_specs=spec, out_shape=jax.ShapeDtypeStruct(shape, x.dtype)
        )(x)

    mesh = AbstractMesh(
        (1,), ("x",), abstract_device=AbstractDevice(device_kind=c.device_kind, num_cores=1, platform="tpu")
    )
    try:
        # interpret mode off here, whatever a notebook's setup() switched on for the process: it would lower for
        # the CPU, and the TPU lowering would refuse every block ("different from the lowering platform tpu")
        with jax.sharding.use_abstract_mesh(mesh), pltpu.force_tpu_interpret_mode(None):
            jax.jit(f).trace(jax.ShapeDtypeStruct(shape, np.dtype(dtype))).lower(lowering_platforms=("tpu",))
    except Exception as e:  # noqa: BLE001 - any lowering error is the answer
        return False, str(e).strip().splitlines()[0]
    return True, ""
