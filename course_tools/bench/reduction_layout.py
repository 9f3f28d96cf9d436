"""What the real TPU compiler makes of LAB·1.2's two row maxima: `rowmax` (a (bm, 1) output, a cross-lane max on every
column step) and `rowmax_dense` (a lane-dense (bm, 128) output, the running max carried elementwise, one cross-lane
max on the last step). The lab's layout lesson quotes this record (tests/test_layout_record.py holds it to it).

Run with `python -m course_tools.bench.reduction_layout` (needs libtpu, requirements.txt). Deviceless compiles on this
CPU (pallas_course.tpu_compile) of the solution notebook's own kernels, with Mosaic's pass dump
(LIBTPU_INIT_ARGS=--xla_mosaic_dump_to=DIR); nothing runs a kernel. From the dump's last stage (finalize-llo), the
LLO operations of the kernel body are counted twice: those every grid step runs (outside any `scf.if`, i.e. any
pl.when) and those under a pl.when. The record is bench/rowmax-layout.json.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from autograder.course_manifest import REPO_ROOT
from course_tools.bench.common import dist_version, machine
from course_tools.bench_records import course_commit

OUT = REPO_ROOT / "bench" / "rowmax-layout.json"
NOTEBOOK = REPO_ROOT / "solutions" / "stage-1" / "lab-1.2-tiled-matmul.ipynb"
SHAPE, BM, BN = (1024, 4096), 8, 512  # the kernels' defaults: bm = 8, bn = 512 (four 128-lane slices a block)
_OP = re.compile(r"\b(llo\.[a-z_0-9]+(?:\.[a-z_0-9]+)*)")


def count_ops(dump_text: str, kernel_name: str) -> dict[str, dict[str, int]]:
    """{"every_step": {op: n}, "under_when": {op: n}} for the function `kernel_name` of one finalize-llo dump.

    The body's nesting is read off the braces: an op at the function's own depth runs on every grid step, one
    inside an `scf.if { ... }` only when its pl.when holds. `llo.type` and `llo.constant` are not work."""
    counts: dict[str, collections.Counter] = {"every_step": collections.Counter(), "under_when": collections.Counter()}
    depth, inside, base = 0, False, 0
    for line in dump_text.splitlines():
        stripped = line.strip()
        if not inside:
            if stripped.startswith(f"func.func @{kernel_name}("):
                inside, base, depth = True, 1, 1
            continue
        if stripped.startswith("}"):
            depth -= stripped.count("}") - stripped.count("{")
            if depth < base:
                break
            continue
        where = "every_step" if depth == base else "under_when"
        for op in _OP.findall(stripped.split("{")[0] if stripped.startswith("%") or stripped.startswith("llo") else ""):
            if op not in ("llo.type", "llo.constant"):
                counts[where][op] += 1
        depth += stripped.count("{") - stripped.count("}")
    return {k: dict(sorted(v.items())) for k, v in counts.items()}


def _final_dump(folder: Path) -> str:
    (found,) = [p for p in folder.iterdir() if p.name.endswith("-post-finalize-llo.txt")]
    return found.read_text()


def record(chips: list[str]) -> dict[str, Any]:
    import jax
    from jax.experimental import pallas as pl  # noqa: F401 - the notebook's own imports, loaded before it

    from autograder.notebook_code import load
    from pallas_course import tpu_compile

    ns = load(NOTEBOOK)
    rows = []
    x = jax.ShapeDtypeStruct(SHAPE, "float32")
    for chip in chips:
        for name in ("rowmax", "rowmax_dense"):
            dump = Path(os.environ["COURSE_MOSAIC_DUMP"]) / f"{chip}-{name}"
            dump.mkdir(parents=True)
            before = set(Path(os.environ["COURSE_MOSAIC_DUMP"]).glob("*.txt"))
            result = tpu_compile.compile_for(lambda v, f=ns[name]: f(v, bm=BM, bn=BN), x, chip=chip)
            if not result.ok:
                raise SystemExit(f"{name} did not compile for {chip}: {result.message}")
            new = sorted(set(Path(os.environ["COURSE_MOSAIC_DUMP"]).glob("*.txt")) - before)
            for p in new:
                p.rename(dump / p.name)
            rows.append(
                {
                    "chip": chip,
                    "kernel": name,
                    "array": list(SHAPE),
                    "dtype": "float32",
                    "bm": BM,
                    "bn": BN,
                    **count_ops(_final_dump(dump), f"{name}_kernel"),
                }
            )
    return {
        "what": f"LLO operations per grid step of LAB·1.2's rowmax and rowmax_dense ({SHAPE}, bm={BM}, bn={BN})",
        "rows": rows,
    }


def _provenance() -> dict[str, Any]:
    from pallas_course import tpu_compile

    return {
        "commit": course_commit(),
        "python": sys.version.split()[0],
        "jax": dist_version("jax"),
        "jaxlib": dist_version("jaxlib"),
        "libtpu": tpu_compile.libtpu_version(),
        "machine": machine(),
        "device": "none: deviceless compile on the CPU",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", default="v5e,v6e")
    args = parser.parse_args(argv)
    # before anything loads libtpu: the dump folder is read once, when it starts
    folder = tempfile.mkdtemp(prefix="rowmax-layout-")
    os.environ["COURSE_MOSAIC_DUMP"] = folder
    os.environ["LIBTPU_INIT_ARGS"] = (
        os.environ.get("LIBTPU_INIT_ARGS", "") + f" --xla_mosaic_dump_to={folder}"
    ).strip()
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    from pallas_course import tpu_compile

    if not tpu_compile.available():
        raise SystemExit(tpu_compile.install_hint())
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    rec = record([c for c in args.chips.split(",") if c])
    OUT.write_text(json.dumps({"date": now, "method": __doc__, "provenance": _provenance(), **rec}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
