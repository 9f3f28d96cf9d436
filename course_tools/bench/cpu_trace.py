"""LAB·1.4's recorded trace for students without a TPU: the lab's trace recipe (jax.profiler.trace) run on this CPU,
in TPU interpret mode, on the chapter's matmul at 256³ with 128 blocks (a 2 x 2 x 2 grid), and the events inside its
annotation kept with their provenance. It is a CPU trace of the interpreter, and says so: each grid step shows as the
interpreter's io_callbacks (its simulated DMAs and memory), not as the TPU's pipeline.

Run with `python -m course_tools.bench.cpu_trace`; writes pallas_course/records/lab-1.4-cpu-trace.json (shipped in the
student wheel: LAB·1.4 draws it with pallas_course.trace_svg).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from autograder.course_manifest import REPO_ROOT
from course_tools.bench.common import dist_version, machine
from course_tools.bench_records import course_commit

OUT = REPO_ROOT / "pallas_course" / "records" / "lab-1.4-cpu-trace.json"
SIZE, BLOCK = 256, 128
ANNOTATION = f"matmul {SIZE}³, {BLOCK} blocks"


def record() -> dict[str, Any]:
    import jax

    from autograder.labs import reference_kernels
    from pallas_course.runtime import interpret_params, setup

    setup("tpu-interpret", quiet=True)
    reference_kernels.INTERP = interpret_params()
    a = jax.random.normal(jax.random.key(0), (SIZE, SIZE))
    b = jax.random.normal(jax.random.key(1), (SIZE, SIZE))
    run = jax.jit(lambda x, y: reference_kernels.matmul(x, y, bm=BLOCK, bn=BLOCK, bk=BLOCK))
    jax.block_until_ready(run(a, b))  # compile outside the trace, as the lab does
    logdir = Path(tempfile.mkdtemp(prefix="lab-1.4-cpu-trace-"))
    with jax.profiler.trace(str(logdir), create_perfetto_trace=True):
        with jax.profiler.TraceAnnotation(ANNOTATION):
            jax.block_until_ready(run(a, b))
    events = json.load(gzip.open(next(logdir.rglob("perfetto_trace.json.gz"))))
    events = events["traceEvents"] if isinstance(events, dict) else events
    threads = {
        (e["pid"], e["tid"]): e.get("args", {}).get("name", "")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    (window,) = [e for e in events if e.get("ph") == "X" and e["name"] == ANNOTATION]
    t0, t1 = window["ts"], window["ts"] + window["dur"]
    kept = sorted(
        (
            {
                "name": e["name"],
                "ts_us": round(e["ts"] - t0, 3),
                "dur_us": round(e.get("dur", 0), 3),
                "thread": threads.get((e["pid"], e["tid"]), str(e["tid"])).split("/")[0],
            }
            for e in events
            if e.get("ph") == "X" and e["name"].startswith("io_callback") and t0 <= e["ts"] <= t1
        ),
        key=lambda e: e["ts_us"],
    )
    return {
        "what": (
            "a CPU trace of LAB·1.4's trace recipe in TPU interpret mode: the io_callback events (the "
            "interpreter's simulated DMAs and memory accesses) inside the annotation"
        ),
        "annotation": ANNOTATION,
        "grid": [SIZE // BLOCK] * 3,
        "window_us": round(t1 - t0, 3),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "provenance": {
            "commit": course_commit(),
            "python": sys.version.split()[0],
            "jax": dist_version("jax"),
            "jaxlib": dist_version("jaxlib"),
            "machine": machine(),
            "device": "CPU (TPU interpret mode): not a TPU trace",
        },
        "events": kept,
    }


def main() -> None:
    data = record()
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO_ROOT)}: {len(data['events'])} events in {data['window_us'] / 1e3:.1f} ms")


if __name__ == "__main__":
    main()
