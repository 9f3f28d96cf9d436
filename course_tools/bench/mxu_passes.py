"""How many MXU passes a matmul block costs, by dtype and precision, as the TPU compiler writes it: the record the
course's step model takes its `mxu_passes` from (course.yml `chips`, tests/test_mxu_passes.py holds them equal).

Run with `python -m course_tools.bench.mxu_passes` (`make mxu-passes`; needs libtpu, requirements.txt). For each
chip of the deviceless topologies (pallas_course.tpu_compile) and each (dtype, precision), a pallas_call whose
kernel is one `jnp.dot` of two (s, s) blocks is compiled on this CPU with Mosaic's pass dumps switched on
(`LIBTPU_INIT_ARGS=--xla_mosaic_dump_to=<dir>`, read by libtpu when it loads: hence a fresh process per record).
In the dump after `lower-to-llo`, every `llo.vmatmul` (`llo.vmatmul.mubr` on v6e) pushes one vreg of the left
operand through the MXU: 8 sublanes of 32-bit words, which hold 8 rows of float32, 16 of bfloat16 (packed in
pairs) or 32 of int8. Rows pushed = Σ over those instructions of the rows their vreg holds. bfloat16 is one pass
by definition (the MXU's native format); passes = rows pushed / the bfloat16 product's rows pushed, same chip
and shape.

What it is and is not: a count of the instructions the compiler emits, not a timing. Reading it as MXU time takes
the scaling book's MXU model (one left-operand row a cycle per MXU, "bf16[8,128] @ bf16[128,128] every 8
cycles", jax-ml.github.io/scaling-book/tpus/) as holding for every operand format: an inference, stated here.
int8's own rate is tpu_info's int8_ops_per_second (twice bf16's on v5e/v6e); the record only shows that it
compiles and is one pass.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from autograder.course_manifest import REPO_ROOT

OUT = REPO_ROOT / "bench" / "mxu-passes.json"
SIZES = (128, 256)
# (dtype, precision name or None for the default, result dtype)
CASES = (
    ("bfloat16", None, "float32"),
    ("float32", None, "float32"),
    ("float32", "HIGH", "float32"),
    ("float32", "HIGHEST", "float32"),
    ("int8", None, "int32"),
)
ROWS_PER_PUSH = {"f32": 8, "bf16": 16, "s8": 32}  # one vreg: 8 sublanes x 32 bits, packed narrow types
VMATMUL = re.compile(r'"llo\.vmatmul(?:\.\w+)?".*?data_format = #llo\.matmul_data_format<(\w+)>.*?matmul_mode<(\w+)>')


def _one(chip: str, size: int, dtype: str, precision: str | None, out: str, dump: Path) -> dict[str, Any]:
    """Compile one dot in this process (whose libtpu dumps to `dump`) and count what the compiler wrote."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from pallas_course import tpu_compile

    prec = None if precision is None else getattr(jax.lax.Precision, precision)

    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision=prec, preferred_element_type=jnp.dtype(out))

    def f(a, b):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((size, size), jnp.dtype(out)))(a, b)

    before = set(os.listdir(dump))
    s = jax.ShapeDtypeStruct((size, size), jnp.dtype(dtype))
    res = tpu_compile.compile_for(f, s, s, chip=chip)
    row: dict[str, Any] = {
        "chip": chip,
        "dtype": dtype,
        "precision": precision or "DEFAULT",
        "m": size,
        "k": size,
        "n": size,
        "compiles": res.ok,
    }
    if not res.ok:
        row["compiler"] = res.message.replace(f"{REPO_ROOT}/", "")[:300]
        return row
    llo = [p for p in set(os.listdir(dump)) - before if p.endswith("post-lower-to-llo.txt")]
    if len(llo) != 1:
        raise RuntimeError(f"expected one lower-to-llo dump for {row}, found {llo}")
    found = VMATMUL.findall((dump / llo[0]).read_text())
    pushed = sum(ROWS_PER_PUSH[fmt] for fmt, _ in found)
    row |= {
        "vmatmul": len(found),
        "formats": sorted({fmt for fmt, _ in found}),
        "modes": sorted({mode for _, mode in found}),
        "rows_pushed": pushed,
    }
    return row


def _child(chip: str, dump: str) -> None:
    rows = [_one(chip, s, d, p, o, Path(dump)) for s in SIZES for d, p, o in CASES]
    for row in rows:  # bfloat16 (CASES[0]) is one pass: every other row relative to it, same chip and size
        if row["compiles"]:
            bf16 = next(r for r in rows if r["m"] == row["m"] and r["dtype"] == "bfloat16")
            row["passes"] = row["rows_pushed"] / bf16["rows_pushed"]
    print(json.dumps(rows))


def record(chips: list[str]) -> dict[str, Any]:
    """One fresh process per chip (LIBTPU_INIT_ARGS is read once, when libtpu loads)."""
    from course_tools.bench.common import dist_version, machine
    from course_tools.bench_records import course_commit
    from pallas_course import tpu_compile

    rows: list[dict[str, Any]] = []
    for chip in chips:
        with tempfile.TemporaryDirectory(prefix="mosaic-dump-") as dump:
            env = {**os.environ, "LIBTPU_INIT_ARGS": f"--xla_mosaic_dump_to={dump}", "JAX_PLATFORMS": "cpu"}
            run = subprocess.run(
                [sys.executable, "-m", "course_tools.bench.mxu_passes", "--child", chip, dump],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=1200,
            )
            if run.returncode != 0:
                raise RuntimeError(f"{chip}: {run.stderr[-3000:]}")
            rows += json.loads(run.stdout.strip().splitlines()[-1])
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "method": __doc__,
        "command": "python -m course_tools.bench.mxu_passes (make mxu-passes)",
        "provenance": {
            "commit": course_commit(),
            "python": sys.version.split()[0],
            "jax": dist_version("jax"),
            "jaxlib": dist_version("jaxlib"),
            "libtpu": tpu_compile.libtpu_version(),
            "machine": machine(),
            "device": "none: deviceless compile on the CPU, topologies "
            + ", ".join(tpu_compile.TOPOLOGIES[c] for c in chips),
        },
        "what": "MXU passes of one (s, s) x (s, s) jnp.dot in a pallas_call, counted in Mosaic's LLO output",
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("CHIP", "DUMP"), help=argparse.SUPPRESS)
    parser.add_argument("--chips", default="v4,v5e,v5p,v6e", help="comma-separated course.yml chips")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return
    rec = record(args.chips.split(","))
    args.out.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
