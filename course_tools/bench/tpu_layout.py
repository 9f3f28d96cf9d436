"""What the real TPU compiler says about block shapes and VMEM layout: the records pallas_course.tiling and the
legality model's VMEM bytes are held to (tests/test_tiling.py).

Run with `python -m course_tools.bench.tpu_layout` (needs libtpu, requirements.txt). Two records, deviceless
compiles on this CPU (pallas_course.tpu_compile), nothing runs a kernel:

* bench/tiling-compile.json: a copy kernel with (rows, cols) blocks, per dtype and chip: compiles, refused by the
  Pallas lowering, or refused by Mosaic (E2002);
* bench/vmem-padding.json: the scoped VMEM one extra operand costs, found by bisecting `vmem_limit_bytes` (1 KiB
  steps) on a kernel that also streams two (8, 16384) float32 blocks (2 MiB: 2 operands x 2 buffers), for
  whole-array operands (single-buffered by jax 0.10.2: trivial window) and one windowed (1, d) operand.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from typing import Any, Callable

from autograder.course_manifest import REPO_ROOT
from course_tools.bench.common import dist_version, machine
from course_tools.bench_records import course_commit
from pallas_course import tpu_compile

TILING_OUT = REPO_ROOT / "bench" / "tiling-compile.json"
PADDING_OUT = REPO_ROOT / "bench" / "vmem-padding.json"
D = 16384
TILING_BLOCKS = ((8, 128), (16, 128), (24, 128), (32, 128), (40, 128), (4, 128), (8, 64))
TILING_DTYPES = ("float32", "bfloat16", "int8", "float8_e4m3fn")
# (dtype, operand shape, "trivial" | "windowed"): whole-array operands of 1 to 40 rows, and one (None, 1, d) block
PADDING_CASES = (
    [("float32", (r, D), "trivial") for r in (1, 2, 3, 5, 8, 12)]
    + [("float32", (1, D - 64), "trivial"), ("float32", (1, 128), "trivial")]
    + [("bfloat16", (r, D), "trivial") for r in (1, 3, 8, 16, 24)]
    + [("int8", (r, D), "trivial") for r in (1, 8, 32, 40)]
    + [("float32", (4, 1, D), "windowed")]
)


def _provenance() -> dict[str, Any]:
    return {
        "commit": course_commit(),
        "python": sys.version.split()[0],
        "jax": dist_version("jax"),
        "jaxlib": dist_version("jaxlib"),
        "libtpu": tpu_compile.libtpu_version(),
        "machine": machine(),
        "device": "none: deviceless compile on the CPU",
    }


def _copy(rows: int, cols: int, shape: tuple[int, int]) -> Callable[..., Any]:
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def f(x):
        spec = pl.BlockSpec((rows, cols), lambda i, j: (i, j))
        return pl.pallas_call(
            kernel,
            grid=(shape[0] // rows, shape[1] // cols),
            in_specs=[spec],
            out_specs=spec,
            out_shape=jax.ShapeDtypeStruct(shape, x.dtype),
        )(x)

    return f


def tiling_record(chips: list[str]) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    rows = []
    for chip in chips:
        for dtype in TILING_DTYPES:
            for r, c in TILING_BLOCKS:
                shape = (r * 8, 256)
                res = tpu_compile.compile_for(
                    _copy(r, c, shape), jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)), chip=chip
                )
                where = (
                    "compiles"
                    if res.ok
                    else "cannot judge"
                    if res.skipped
                    else "mosaic E2002"
                    if "E2002" in res.message
                    else "lowering"
                    if "Pallas TPU lowering" in res.message
                    else "other"
                )
                rows.append(
                    {
                        "chip": chip,
                        "dtype": dtype,
                        "array": list(shape),
                        "block": [r, c],
                        "outcome": where,
                        # the checkout's path, which the compiler's message names, as the repository's
                        "compiler": res.message.replace(f"{REPO_ROOT}/", "")[:300],
                    }
                )
    return {"what": "copy kernels with (rows, cols) blocks: where each is refused", "rows": rows}


def _needs(dtype: str, shape: tuple[int, ...], kind: str, chip: str) -> int:
    """Smallest vmem_limit_bytes (1 KiB steps) with which the kernel compiles."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def make(limit: int) -> Callable[..., Any]:
        def kernel(x_ref, g_ref, o_ref):
            o_ref[...] = x_ref[...]
            o_ref[0:1, 0:128] += g_ref[0:1, 0:128].astype(o_ref.dtype)  # g is read, so it is allocated

        g_spec = (
            pl.BlockSpec(shape, lambda i: (0,) * len(shape))
            if kind == "trivial"
            else pl.BlockSpec((None, *shape[1:]), lambda i: (i, 0, 0))
        )

        def f(x, g):
            return pl.pallas_call(
                kernel,
                grid=(4,),
                in_specs=[pl.BlockSpec((8, D), lambda i: (i, 0)), g_spec],
                out_specs=pl.BlockSpec((8, D), lambda i: (i, 0)),
                out_shape=jax.ShapeDtypeStruct((32, D), x.dtype),
                compiler_params=pltpu.CompilerParams(vmem_limit_bytes=limit),
            )(x, g)

        return f

    avals = (jax.ShapeDtypeStruct((32, D), jnp.float32), jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)))
    lo, hi = 0, 16 * 2**20
    while hi - lo > 1024:
        mid = (lo + hi) // 2 // 1024 * 1024
        if tpu_compile.compile_for(make(mid), *avals, chip=chip).ok:
            hi = mid
        else:
            lo = mid
    return hi


def padding_record(chip: str) -> dict[str, Any]:
    import numpy as np

    base = 2 * 2 * 8 * D * 4  # x and out, (8, D) float32, 2 buffers each
    rows = []
    for dtype, shape, kind in PADDING_CASES:
        needs = _needs(dtype, shape, kind, chip)
        rows.append(
            {
                "chip": chip,
                "dtype": dtype,
                "shape": list(shape),
                "kind": kind,
                "operand_bytes": int(np.prod(shape)) * np.dtype(dtype).itemsize,
                "compiler_needs_bytes": needs,
                "extra_bytes": needs - base,
            }
        )
    return {
        "what": "the scoped VMEM one extra operand costs, as the compiler allocates it",
        "base_bytes": base,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chips", default="v5e,v6e", help="chips of the tiling record (the padding one: the first)")
    args = parser.parse_args(argv)
    if not tpu_compile.available():
        raise SystemExit(tpu_compile.install_hint())
    chips = [c for c in args.chips.split(",") if c]
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for out, rec in ((TILING_OUT, tiling_record(chips)), (PADDING_OUT, padding_record(chips[0]))):
        out.write_text(
            json.dumps({"date": now, "method": __doc__, "provenance": _provenance(), **rec}, indent=1) + "\n"
        )
        print(f"wrote {out.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
