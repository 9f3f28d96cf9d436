"""`course bench`: time the GATE 01 workloads on this machine and append the records to bench/."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._app import app, fail


class Workload(str, Enum):
    matmul = "matmul"
    softmax = "softmax"


@app.command("bench")
def bench(
    quick: Annotated[
        bool, typer.Option("--quick", help="Smaller CPU shapes, for a smoke test (no effect on TPU/GPU shapes).")
    ] = False,
    out: Annotated[
        Optional[Path], typer.Option("--out", help="Directory for the records file (default: the checkout's bench/).")
    ] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="Timed calls per case; the median of these is the number.")] = 20,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="Untimed calls first (compilation, first touch).")] = 3,
    only: Annotated[Optional[Workload], typer.Option("--only", help="Run one workload.")] = None,
) -> None:
    """Time GATE 01's kernels against their XLA baselines, with full provenance.

    Runs matmul_acc (the block sweep in course.yml) against jnp.dot at 4096³ bf16, and the fused softmax
    against the unfused XLA chain at 32k+ rows and several widths. On a TPU the kernels are compiled at the
    gate's shapes; on a GPU they go through Pallas' GPU backend and never decide a TPU gate; on CPU they
    run in interpret mode at reduced shapes, recorded `gating: false`.

    Writes one new file, {backend}-{chip}-{time}.jsonl, one record a line. Then `course gates`.

    Examples:  course bench --quick    ·    course bench --only matmul --n 50    ·    course bench --out /tmp/b
    """
    import jax
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from course_tools.bench_records import default_out_dir, provenance, record_file_name
    from pallas_course.bench import BenchRecordError
    from course_tools.bench_workloads import mode_note, plan, run_bench
    from course_tools.gate_spec import gate
    from autograder.course_manifest import ManifestError

    console = Console(stderr=True)
    backend, kind = jax.default_backend(), jax.devices()[0].device_kind
    try:
        cases = plan(gate("GATE-01"), backend=backend, quick=quick, only=only.value if only else None)
    except (ManifestError, KeyError) as e:
        raise fail(str(e)) from None
    out_file = (out or default_out_dir()) / record_file_name(provenance())
    typer.echo(mode_note(backend, kind))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("bench", total=len(cases))

        def progress(items):
            for case in items:
                bar.update(task, description=case.label)
                yield case
                bar.advance(task)

        try:
            records = run_bench(cases, out_file=out_file, warmup=warmup, n=n, progress=progress)
        except BenchRecordError as e:
            raise fail(str(e)) from None
    for rec in records:
        cfg = " ".join(f"{k}={v}" for k, v in rec.config.items())
        dims = "×".join(map(str, rec.shape.values()))
        value = (
            f"{rec.median_ms:10.3f} ms ± {rec.iqr_ms:.3f} IQR" if rec.status == "ok" else f"skipped: {rec.skip_reason}"
        )
        typer.echo(f"  {rec.impl:<20} {dims:<16} {cfg:<26} {value}")
    skipped = sum(r.status != "ok" for r in records)
    typer.echo(
        f"{len(records)} records ({skipped} skipped, gating: {str(records[0].gating).lower() if records else '-'}) "
        f"-> {out_file}"
    )
