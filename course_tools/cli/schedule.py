"""`course schedule`: print the pipeline frames of a lab kernel at given sizes and buffer depth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._app import app, fail


@app.command()
def schedule(
    kernel: Annotated[str, typer.Argument(help="Lab kernel to draw: matmul, transpose, softmax or layernorm.")],
    m: Annotated[Optional[int], typer.Option("--m", help="matmul/transpose: rows of A (of X).")] = None,
    n: Annotated[Optional[int], typer.Option("--n", help="matmul/transpose: columns of B (of X).")] = None,
    k: Annotated[Optional[int], typer.Option("--k", help="matmul: the reduction length.")] = None,
    bm: Annotated[Optional[int], typer.Option("--bm", help="matmul/transpose: block rows.")] = None,
    bn: Annotated[Optional[int], typer.Option("--bn", help="matmul/transpose: block columns.")] = None,
    bk: Annotated[Optional[int], typer.Option("--bk", help="matmul: block length along K.")] = None,
    rows: Annotated[Optional[int], typer.Option("--rows", help="softmax/layernorm: rows of X.")] = None,
    d: Annotated[Optional[int], typer.Option("--d", help="softmax/layernorm: features per row.")] = None,
    rows_per_block: Annotated[
        Optional[int], typer.Option("--rows-per-block", help="softmax/layernorm: rows per block.")
    ] = None,
    buffers: Annotated[
        int,
        typer.Option(
            "--buffers",
            help="Buffers per operand: 2 = double-buffered (the TPU default), 1 = pipeline off (pl.Buffered(1)).",
        ),
    ] = 2,
    dtype: Annotated[
        str, typer.Option("--dtype", help="Element type of the arrays (float32, bfloat16, ...).")
    ] = "float32",
    html: Annotated[
        Optional[Path],
        typer.Option("--html", help="Also write the steppable picture to this self-contained HTML file."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the schedule as JSON instead of text.")] = False,
) -> None:
    """Draw the grid of a lab kernel as a software pipeline, one frame per line.

    The kernel's real pallas_call is traced at the sizes given (nothing runs), and the frames follow from its
    grid and BlockSpecs: which DMA starts or is waited on, into which slot, what compute works on, which
    copies are skipped, and when the output is written back. Unset sizes take the chapter's defaults.

    Examples:

        course schedule matmul --m 128 --n 128 --k 512 --bm 128 --bn 128 --bk 128 --buffers 2   # EX·02, 6 frames

        course schedule matmul --k 512 --buffers 1                                         # EX·07, 9 frames

        course schedule layernorm --rows 64 --json
    """
    import numpy as np

    from course_tools.reference_schedules import KERNELS, SIZES, reference_schedule, trace_reference
    from pallas_course.schedule import coverage_gaps

    if kernel not in KERNELS:
        raise fail(f"no lab kernel {kernel!r}; choose one of {', '.join(KERNELS)}")
    given = {
        "m": m,
        "n": n,
        "k": k,
        "bm": bm,
        "bn": bn,
        "bk": bk,
        "rows": rows,
        "d": d,
        "rows_per_block": rows_per_block,
    }
    sizes = {key: v for key, v in given.items() if v is not None}
    extra = set(sizes) - set(SIZES[kernel])
    if extra:
        flags = ", ".join("--" + e.replace("_", "-") for e in sorted(extra))
        allowed = ", ".join("--" + e.replace("_", "-") for e in SIZES[kernel])
        raise fail(f"{kernel} does not take {flags}; its sizes are {allowed}")
    bad = [f"--{key.replace('_', '-')}={v}" for key, v in sizes.items() if v <= 0]
    if bad:
        raise fail(f"sizes must be positive: {', '.join(bad)}")
    if buffers not in (1, 2):
        raise fail(f"--buffers={buffers}: draw 1 (pipeline off) or 2 (double-buffered)")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise fail(f"--dtype={dtype!r} is not a dtype; try float32 or bfloat16") from None
    try:
        gaps = coverage_gaps(trace_reference(kernel, dt, **sizes))
        if gaps:
            raise fail(
                f"the grid does not cover the arrays ({'; '.join(gaps)}): make each size a multiple of its block"
            )
        sched = reference_schedule(kernel, buffers, dt, **sizes)
    except (ValueError, TypeError) as e:
        raise fail(f"{kernel} cannot be traced at these sizes: {str(e).splitlines()[0]}") from None
    if html is not None:
        from pallas_course.schedule_svg import schedule_html

        html.write_text(schedule_html(sched))
    if as_json:
        typer.echo(json.dumps(sched.to_dict(), indent=1))
        return
    width = len(str(len(sched.frames)))
    typer.echo(
        f"{sched.kernel}: grid {sched.grid}, {buffers} buffer(s) per operand, {len(sched.frames)} frames, "
        f"{sched.idle_frames} idle"
    )
    for f in sched.frames:
        typer.echo(f"{f.index:0{width}d}/{len(sched.frames):0{width}d} {f.phase:<8} {f.label} · {f.caption}")
