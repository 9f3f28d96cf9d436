"""How long a student waits for each visible check cell: the five labs (labs/, filled in from solutions/) run in
a fresh Jupyter kernel each, `--repeat` times, timed per cell by nbclient (the kernel's own execute_input ->
execute_reply); writes bench/student-checks.json (one record per label: each check cell's median and runs).

    python -m course_tools.bench.student_checks --label after

The budget (issue 29, point 4): each check cell <= 2 s median, none over 5 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

OUT = Path("bench/student-checks.json")
BUDGET_MEDIAN_S, BUDGET_MAX_S = 2.0, 5.0


def _seconds(cell: dict) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda s: dt.datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731 - one local parse
    return (parse(end) - parse(start)).total_seconds()


def run_lab(lab_id: str) -> tuple[dict[int, float], dict[int, str], list[str]]:
    """One filled-in lab in a fresh kernel: {cell index: seconds} of its check cells, their first lines, errors."""
    from nbclient import NotebookClient

    from course_tools.demo import filled_in

    nb = filled_in(lab_id)
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=True,
        allow_errors=True,
        resources={"metadata": {"path": str(Path.cwd())}},
    ).execute()
    times, heads, errors = {}, {}, []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors += [
            f"cell {i}: {o.get('ename')}: {str(o.get('evalue'))[:200]}"
            for o in cell.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        if "check" in cell.metadata.get("tags", []):
            s = _seconds(cell)
            if s is not None:
                times[i] = s
                heads[i] = next((l for l in cell.source.splitlines() if l.strip()), "")[:100]
    return times, heads, errors


def main(argv: list[str] | None = None) -> int:
    from autograder.course_manifest import manifest
    from course_tools.bench.common import machine
    from course_tools.bench_records import provenance
    from pallas_course import tpu_compile

    parser = argparse.ArgumentParser(prog="python -m course_tools.bench.student_checks", description=__doc__)
    parser.add_argument("--label", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    cells: list[dict] = []
    errors: dict[str, list[str]] = {}
    for lab in manifest().labs:
        runs: dict[int, list[float]] = {}
        heads: dict[int, str] = {}
        for _ in range(args.repeat):
            times, h, errs = run_lab(lab.id)
            heads |= h
            if errs:
                errors[lab.code] = errs
            for i, s in times.items():
                runs.setdefault(i, []).append(round(s, 3))
        cells += [
            {
                "lab": lab.code,
                "cell": i,
                "first_line": heads[i],
                "median_s": round(statistics.median(r), 3),
                "max_s": max(r),
                "runs_s": r,
            }
            for i, r in sorted(runs.items())
        ]
    over = [c for c in cells if c["median_s"] > BUDGET_MEDIAN_S or c["max_s"] > BUDGET_MAX_S]
    record = {
        "label": args.label,
        "what": "each visible check cell (tag `check`) of the five labs, labs/ filled in from solutions/, each lab "
        f"in a fresh Jupyter kernel, {args.repeat} runs; seconds from the kernel's execute_input to "
        "execute_reply (nbclient record_timing)",
        "budget": f"median <= {BUDGET_MEDIAN_S} s, max <= {BUDGET_MAX_S} s per cell",
        "over_budget": [f"{c['lab']} cell {c['cell']}: median {c['median_s']} s, max {c['max_s']} s" for c in over],
        "errors": errors,
        "libtpu": tpu_compile.libtpu_version(),
        "cells": cells,
        "provenance": {
            **provenance().model_dump(mode="json"),
            **machine(),
            "load_average_1_5_15_start": [round(x, 2) for x in load0],
            "load_average_1_5_15_end": [round(x, 2) for x in os.getloadavg()],
            "note": "2 CPU cores shared with other engineers' work: wall times are noisy (see the load)",
            "python": sys.version.split()[0],
            "total_s": round(time.perf_counter() - t0, 1),
        },
    }
    records = json.loads(args.out.read_text()) if args.out.exists() else []
    records = [r for r in records if r.get("label") != args.label] + [record]
    args.out.write_text(json.dumps(records, indent=1) + "\n")
    print(json.dumps({"label": args.label, "over_budget": record["over_budget"], "errors": errors}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
