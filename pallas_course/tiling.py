"""The course's one tiling table: which block shapes a TPU takes, by dtype width, and what refuses the rest.

Everything that states the rule quotes this module: `legality.check_block` (and its JavaScript twin
site/js/legality.js, which reads the same rows through course_tools/site/sandbox_data.py), the error texts
in `errors.py`, LAB·1.4's table (its markdown is `markdown_table()`, checked verbatim by tests/test_tiling.py)
and the chapter site. Two different things are easy to confuse, so the table keeps them apart:

* the **lowering rule** (jax 0.10.2 `jax/_src/pallas/mosaic/lowering.py`, `_check_block_mappings`): a block's
  last two dimensions are divisible by 8 and 128, or equal the array's, *whatever the dtype*. A CPU can check it.
* the **native tile** of an array in memory: 8 sublanes x 128 lanes of 32 bits, so a narrower dtype packs
  32 // bits rows into each sublane: (8, 128) for 32-bit, (16, 128) for 16-bit, (32, 128) for 8-bit. A block
  that is not a whole number of native tiles is refused by Mosaic at compile time for 8-bit arrays (E2002),
  and only costs half-filled vregs for 16-bit ones.

The "what fails where" column is a record, not a reading: the course's tiling-compile.json, copy kernels
compiled deviceless for v5e and v6e (course_tools.bench.tpu_layout); the course's tests hold the table to it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["lowering", "compile", "note"]

SUBLANES = 8  # rows of one vreg (32-bit sublanes)
LANES = 128  # columns of one vreg

LOWERING_RULE = (
    "a block's last two dimensions must be divisible by 8 and 128, or equal the array's own, whatever the dtype"
)
LOWERING_SOURCE = "jax 0.10.2 jax/_src/pallas/mosaic/lowering.py, _check_block_mappings; docs/pallas/grid_blockspec.md"
COMPILE_SOURCE = (
    "deviceless compile, jax 0.10.2 + libtpu 0.0.42.1, v5e and v6e, 2026-12-04 (the course's record "
    "tiling-compile.json, course_tools.bench.tpu_layout): "
    "8-bit blocks of 8, 16, 24 or 40 rows fail with E2002 CompileTimeMosaicMisalignedBlockAndTiling, "
    "'has tiling (32, 128)'; 16-bit blocks of 8 and 24 rows compile"
)
TILE_SOURCE = "jax 0.10.2 jax/_src/pallas/mosaic/tpu_info.py, TpuInfo.get_sublane_tiling; FACTS.md native tiles"


@dataclass(frozen=True)
class TileRow:
    """One dtype width: its native tile and what happens to a block whose rows are not a whole tile."""

    bits: int
    dtypes: str  # examples, as the table prints them
    native_tile: tuple[int, int]  # (rows, lanes) of one packed vreg-sized tile
    misaligned: Severity | None  # a block that passes the lowering rule but not the native tile
    what_happens: str  # the table's last column, in words
    source: str


TABLE: tuple[TileRow, ...] = (
    TileRow(
        32,
        "float32, int32 (bool is stored as 32-bit)",
        (SUBLANES, LANES),
        None,
        "the native tile is the lowering rule: nothing more to check",
        LOWERING_SOURCE,
    ),
    TileRow(
        16,
        "bfloat16, float16, int16",
        (2 * SUBLANES, LANES),
        "note",
        "legal: a block of 8 or 24 rows compiles and takes only its own bytes in VMEM, but in HBM XLA keeps 16-bit arrays in 16-row tiles (layout T(8,128)(2,1)), so its copies move half-tiles (a speed note)",
        TILE_SOURCE + "; " + COMPILE_SOURCE,
    ),
    TileRow(
        8,
        "int8, float8_e4m3fn, ...",
        (4 * SUBLANES, LANES),
        "compile",
        "lowers, then Mosaic refuses it at compile time: E2002 CompileTimeMosaicMisalignedBlockAndTiling",
        COMPILE_SOURCE,
    ),
)


def row(bits: int) -> TileRow:
    """The table's row for a dtype `bits` wide (bool counts as 32, as Mosaic stores it; 64-bit as 32)."""
    for r in TABLE:
        if bits >= r.bits:
            return r
    return TABLE[-1]


def native_tile(bits: int) -> tuple[int, int]:
    return row(bits).native_tile


def markdown_table() -> str:
    """The table as LAB·1.4 and the site print it."""
    lines = [
        "| dtype width | examples | lowering rule (any dtype) | native tile | a block of whole (8, 128) "
        "but not whole native tiles |",
        "|---|---|---|---|---|",
    ]
    for r in TABLE:
        lines.append(
            f"| {r.bits}-bit | {r.dtypes} | last two dims divisible by (8, 128) or equal the array's "
            f"| ({r.native_tile[0]}, {r.native_tile[1]}) | {r.what_happens} |"
        )
    return "\n".join(lines)


def as_data() -> dict[str, Any]:
    """JSON-ready, for the site's legality.js (the same rows, not a copy of their numbers)."""
    return {
        "lowering_rule": LOWERING_RULE,
        "sublanes": SUBLANES,
        "lanes": LANES,
        "rows": [dict(asdict(r), native_tile=list(r.native_tile)) for r in TABLE],
    }
