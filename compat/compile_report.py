"""The grade's compile step on whatever jax and libtpu are installed: every solution kernel of the compile rules
(course_tools.compile_cases.CASES) and every known reject (REJECTS), for v5e and v6e; printed as JSON.

What jax 0.10.2 + libtpu 0.0.42.1 (the pinned set) says is what the tests hold (tests/test_tpu_compile.py): every
solution compiles, every reject is refused with its kind. `differs_from_pinned` lists where this jax says
otherwise, so the record (compat/newest-jax.json) and the notebooks' advice can say so.
Run: python compat/compile_report.py   (compat/newest_jax_record.py runs it in the newest-JAX root)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("PALLAS_COURSE_MODE", "tpu-interpret")
CHIPS = ("v5e", "v6e")


def main() -> int:
    from autograder.notebook_code import load
    from course_tools.compile_cases import CASES, REJECT_CHIPS, REJECTS, row_kernel, structs
    from pallas_course import tpu_compile
    from autograder.course_manifest import manifest

    report: dict = {
        "versions": {"jax": _version("jax"), "jaxlib": _version("jaxlib"), "libtpu": tpu_compile.libtpu_version()},
        "solutions": [],
        "rejects": [],
        "differs_from_pinned": [],
    }
    if not tpu_compile.available():
        report["error"] = tpu_compile.install_hint()
        print(json.dumps(report))
        return 1
    for lab_id, cases in CASES.items():
        with contextlib.redirect_stdout(io.StringIO()):  # the set-up cell announces its mode
            ns = load(ROOT / manifest().lab(lab_id).source)
        for kernel, args, kwargs in cases:
            for chip in CHIPS:
                r = tpu_compile.compile_for(lambda *a, f=ns[kernel], k=kwargs: f(*a, **k), *structs(args), chip=chip)
                row = {
                    "lab": lab_id,
                    "kernel": kernel,
                    "args": args,
                    "kwargs": kwargs,
                    "chip": chip,
                    "ok": r.ok,
                    "skipped": r.skipped,
                    "kind": r.error_kind,
                    "message": r.message,
                    "seconds": round(r.seconds, 2),
                }
                report["solutions"].append(row)
                if not r.ok:
                    report["differs_from_pinned"].append(
                        f"{kernel} {args} on {chip}: compiled with the pinned set, here {r.error_kind}: {r.message}"
                    )
    for name, (body, block, shape, kind) in REJECTS.items():
        fn, args = row_kernel(body, block, shape)
        for chip in CHIPS:
            r = tpu_compile.compile_for(fn, *args, chip=chip)
            report["rejects"].append(
                {
                    "name": name,
                    "chip": chip,
                    "ok": r.ok,
                    "kind": r.error_kind,
                    "expected_kind": kind,
                    "message": r.message,
                    "seconds": round(r.seconds, 2),
                }
            )
            expected = kind if chip in REJECT_CHIPS.get(name, CHIPS) else None  # None: compiles
            report["rejects"][-1]["expected_kind"] = expected
            if (r.error_kind if not r.ok else None) != expected:
                verdict = "compiles" if r.ok else f"{r.error_kind}: {r.message}"
                pinned = f"refused ({expected})" if expected else "compiles"
                report["differs_from_pinned"].append(f"{name} on {chip}: with the pinned set {pinned}, here {verdict}")
    print(json.dumps(report))
    return 0


def _version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
