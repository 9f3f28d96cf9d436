"""LAB·1.4's VMEM budget line, predicted and confirmed by the real TPU compiler; the record the site shows.

Run with `python -m course_tools.bench.budget_line` (or `make budget-line`); needs libtpu (requirements.txt).
For each chip of the compile rules and each dtype: the largest square block b (a multiple of 128) whose
double-buffered (b, b, b) matmul working set fits the chip's default scoped VMEM limit (the legality model,
pallas_course.legality, on the traced reference matmul), then the compiler's verdict (pallas_course.tpu_compile,
deviceless) at b and at b + 128. Writes bench/budget-line.json with its provenance (chip, topology, versions,
date, method). Nothing runs a kernel: these are compile verdicts, not timings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import jax.numpy as jnp

from autograder.labs import reference_kernels
from course_tools.bench.common import dist_version, machine
from course_tools.bench_records import course_commit
from course_tools.reference_schedules import trace_reference
from pallas_course import legality, tpu_compile
from autograder.course_manifest import REPO_ROOT, manifest

OUT = REPO_ROOT / "bench" / "budget-line.json"
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
METHOD = (
    "predicted: pallas_course.legality.check_pallas_call on the traced reference matmul "
    "(the chapter's matmul, reference_kernels.py, blocks (b, b, b), arrays (2b, 2b), 2 buffers, no scratch) "
    "against course.yml's default_scoped_vmem_bytes; confirmed: pallas_course.tpu_compile.compile_for on the same "
    "matmul (interpret mode off), deviceless, for the chip's topology, at b and b + 128"
)


def working_set(b: int, dtype: Any, chip: str) -> int:
    info = trace_reference("matmul", dtype, m=2 * b, n=2 * b, k=2 * b, bm=b, bn=b, bk=b)
    return legality.check_pallas_call(info, chip).budget.working_set_bytes


def scoped_limit(dtype: Any, chip: str) -> int:
    """The VMEM limit the legality model applies to the reference matmul on `chip`."""
    return legality.check_pallas_call(
        trace_reference("matmul", dtype, m=256, n=256, k=256, bm=128, bn=128, bk=128), chip
    ).budget.limit_bytes


def predicted_line(dtype: Any, chip: str) -> int | None:
    limit = scoped_limit(dtype, chip)
    fits = [b for b in range(128, 8192 + 1, 128) if working_set(b, dtype, chip) <= limit]
    return max(fits) if fits else None


def confirm(chip: str, dtype_name: str) -> dict[str, Any]:
    dtype = DTYPES[dtype_name]
    line = predicted_line(dtype, chip)
    rows = []
    for b in (line, line + 128) if line else ():
        a = jax_struct((2 * b, 2 * b), dtype)
        result = tpu_compile.compile_for(
            lambda x, y, b=b: reference_kernels.matmul(x, y, bm=b, bn=b, bk=b), a, a, chip=chip
        )
        rows.append(
            {
                "block": b,
                "predicted_bytes": working_set(b, dtype, chip),
                "compiles": result.ok,
                "skipped": result.skipped,
                "compiler": result.message,
                "seconds": round(result.seconds, 2),
            }
        )
    limit = scoped_limit(dtype, chip)
    agrees = bool(rows) and rows[0]["compiles"] and not rows[1]["compiles"]
    return {
        "chip": chip,
        "topology": tpu_compile.TOPOLOGIES[chip],
        "dtype": dtype_name,
        "limit_bytes": limit,
        "predicted_line": line,
        "verdicts": rows,
        "agrees": agrees,
    }


def jax_struct(shape: tuple[int, ...], dtype: Any) -> Any:
    import jax

    return jax.ShapeDtypeStruct(shape, dtype)


def record(chips: list[str]) -> dict[str, Any]:
    if not tpu_compile.available():
        raise SystemExit(tpu_compile.install_hint())
    reference_kernels.INTERP = False
    rows = [confirm(chip, name) for chip in chips for name in DTYPES]
    return {
        "what": "LAB·1.4's VMEM budget line for a double-buffered square matmul: predicted, then compiled",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "method": METHOD,
        "provenance": {
            "commit": course_commit(),
            "python": sys.version.split()[0],
            "jax": dist_version("jax"),
            "jaxlib": dist_version("jaxlib"),
            "libtpu": tpu_compile.libtpu_version(),
            "machine": machine(),
            "device": "none: deviceless compile on the CPU",
        },
        "lines": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = sorted({c for lab in manifest().labs if lab.compile for c in lab.compile.chips})
    parser.add_argument(
        "--chips", default=",".join(default), help="comma-separated chips (default: the compile rules')"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    data = record([c for c in args.chips.split(",") if c])
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    for r in data["lines"]:
        cells = " · ".join(
            f"b={v['block']}: predicted {v['predicted_bytes'] / 2**20:.2f} MiB, "
            f"{'compiles' if v['compiles'] else 'fails: ' + v['compiler']}"
            for v in r["verdicts"]
        )
        print(
            f"{r['chip']:4} {r['dtype']:8} line {r['predicted_line']} ({'agrees' if r['agrees'] else 'DISAGREES'}): "
            f"{cells}"
        )
    print(f"wrote {args.out.relative_to(REPO_ROOT) if args.out.is_relative_to(REPO_ROOT) else args.out}")


if __name__ == "__main__":
    main()
