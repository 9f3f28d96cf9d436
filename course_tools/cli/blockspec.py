"""`course blockspec`: is a BlockSpec legal on a chip, how many blocks, how many bytes, does it fit VMEM."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ._app import app, fail


def _ints(text: str, flag: str, allow_none: bool = False) -> tuple:
    out = []
    for part in text.split(","):
        part = part.strip()
        if allow_none and part.lower() in ("none", "_"):
            out.append(None)
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise fail(f"{flag}={text!r}: give comma-separated integers, e.g. 2048,2048") from None
    return tuple(out)


@app.command()
def blockspec(
    shape: Annotated[str, typer.Option("--shape", help="Array shape, comma-separated, e.g. 2048,2048.")],
    block: Annotated[
        str, typer.Option("--block", help="Block shape, comma-separated, e.g. 256,256 (None squeezes a dim).")
    ],
    dtype: Annotated[str, typer.Option("--dtype", help="Element type: float32, bfloat16, int8, ...")] = "float32",
    chip: Annotated[
        str,
        typer.Option("--chip", help="Chip from course.yml (v4, v5e, v5p, v6e, v7x) or a device kind ('TPU v5 lite')."),
    ] = "v5e",
    buffers: Annotated[
        int,
        typer.Option(
            "--buffers",
            help="Buffers per operand of a copy kernel with this "
            "BlockSpec in and out: 2 (the default pipeline) or 1 (pl.Buffered(1)).",
        ),
    ] = 2,
    vmem_limit_bytes: Annotated[
        int,
        typer.Option(
            "--vmem-limit-bytes",
            help="A kernel's pltpu.CompilerParams(vmem_limit_bytes=...); 0 = the chip's default scoped limit.",
        ),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Check one BlockSpec against the TPU tiling rules and the chip's VMEM.

    Says legal or names each violation (lane rule, sublane rule, native tile, rank-1 rule), then the grid,
    bytes per block and the VMEM working set against both the chip's physical VMEM and the compiler's
    default scoped limit, with the source of each constant.

    Examples:

        course blockspec --shape 2048,2048 --block 256,256 --dtype bfloat16 --chip v5e     # EX·09

        course blockspec --shape 256,256 --block 100,128 --json
    """
    import numpy as np

    from pallas_course.chips import ChipError
    from pallas_course.legality import BlockSpecError, check_block, fmt_bytes, fmt_mib, sandbox_budget

    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise fail(f"--dtype={dtype!r} is not a dtype; try float32, bfloat16 or int8") from None
    if buffers not in (1, 2):
        raise fail(f"--buffers={buffers}: Pallas TPU pipelines hold 1 or 2 buffers per operand")
    try:
        verdict = check_block(_ints(shape, "--shape"), _ints(block, "--block", allow_none=True), dt, chip)
    except (BlockSpecError, ChipError) as e:
        raise fail(str(e)) from None
    budget = sandbox_budget(verdict, buffers=buffers, vmem_limit_bytes=vmem_limit_bytes or None)
    if as_json:
        typer.echo(json.dumps({"verdict": verdict.to_dict(), "budget": budget.to_dict()}, indent=1))
        return
    head = "legal" if verdict.legal else ("illegal (lowers, but does not compile)" if verdict.lowers else "illegal")
    typer.echo(
        f"{head}: BlockSpec{verdict.block_shape} on the {verdict.array_shape} {verdict.dtype} array, "
        f"chip {verdict.chip}"
    )
    for c in verdict.checks:
        mark = "ok  " if c.ok else ("note" if c.severity == "note" else "FAIL")
        typer.echo(f"  {mark} {c.rule}: {c.expression}" + ("" if c.ok else f" -- {c.message}"))
    typer.echo(f"grid {' x '.join(map(str, verdict.grid))} = {verdict.num_blocks} blocks")
    typer.echo(f"bytes/block {fmt_bytes(verdict.block_bytes)} ({verdict.block_bytes:,} B)")
    typer.echo(
        f"VMEM working set (copy kernel: 2 operands x {buffers} buffers) {fmt_bytes(budget.working_set_bytes)} "
        f"({budget.working_set_bytes:,} B) / {fmt_bytes(budget.vmem_bytes)}"
    )
    typer.echo(f"VMEM budget {budget.vmem_bytes:,} B for {verdict.chip}, source: {budget.sources['vmem_bytes']}")
    typer.echo(
        f"default scoped limit {fmt_mib(budget.default_scoped_vmem_bytes)}, source: "
        f"{budget.sources['default_scoped_vmem_bytes']}"
    )
    typer.echo(budget.verdict())
