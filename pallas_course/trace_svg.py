"""Draw LAB·1.4's recorded CPU trace (records/lab-1.4-cpu-trace.json, made by course_tools.bench.cpu_trace) as one
inline SVG: the io_callback events of TPU interpret mode inside the recipe's annotation, one lane per thread and
nesting depth, coloured by how often each callback ran (once per grid step, once per output block, once), with
the grid steps marked. Every bar is an event of the record; the caption says what machine recorded it, and that
it is a CPU trace of the interpreter, not a TPU's.
"""

from __future__ import annotations

import collections
import json
from html import escape
from importlib import resources
from typing import Any

W, LEFT, LANE_H, TOP = 760, 90, 16, 30
COLOURS = {"step": "#4a7fb5", "block": "#c98a2b", "once": "#9a9a9a"}


def load_record() -> dict[str, Any]:
    return json.loads(resources.files("pallas_course").joinpath("records/lab-1.4-cpu-trace.json").read_text())


def _lanes(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str, int]]:
    """(event, thread, depth): depth is how many earlier events of its thread are still open when it starts."""
    out, open_ends = [], collections.defaultdict(list)
    for e in sorted(events, key=lambda e: (e["ts_us"], -e["dur_us"])):
        ends = [t for t in open_ends[e["thread"]] if t > e["ts_us"]]
        out.append((e, e["thread"], len(ends)))
        open_ends[e["thread"]] = ends + [e["ts_us"] + e["dur_us"]]
    return out


def trace_svg(record: dict[str, Any] | None = None) -> str:
    rec = record or load_record()
    events, steps = rec["events"], 1
    for g in rec["grid"]:
        steps *= g
    counts = collections.Counter(e["name"] for e in events)
    kind = {n: "step" if c == steps else "block" if c > 1 else "once" for n, c in counts.items()}
    placed = _lanes(events)
    rows = sorted({(t, d) for _, t, d in placed})
    row_y = {r: TOP + i * LANE_H for i, r in enumerate(rows)}
    span = max(e["ts_us"] + e["dur_us"] for e in events) or 1.0
    x = lambda us: LEFT + (W - LEFT - 10) * us / span  # noqa: E731 - one scale
    height = TOP + len(rows) * LANE_H + 80
    p = rec["provenance"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'font-family="sans-serif" role="img"><title>A CPU trace of TPU interpret mode: '
        f'{escape(rec["annotation"])}</title>',
        f'<text x="{LEFT}" y="16" font-size="12" font-weight="bold">CPU trace (TPU interpret mode, not a TPU): '
        f'{escape(rec["annotation"])}, grid {" × ".join(map(str, rec["grid"]))} = {steps} steps, '
        f'{span / 1e3:.1f} ms</text>',
    ]
    for (thread, depth), y in row_y.items():
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 11}" font-size="10" text-anchor="end">'
            f'{escape(thread)}{f" +{depth}" if depth else ""}</text>'
        )
    step_starts = sorted(e["ts_us"] for e in events if kind[e["name"]] == "step")[
        :: max(1, len([n for n in counts if kind[n] == "step"]))
    ]
    for k, ts in enumerate(step_starts[:steps]):
        parts.append(
            f'<line x1="{x(ts):.1f}" y1="{TOP - 4}" x2="{x(ts):.1f}" y2="{TOP + len(rows) * LANE_H}" '
            f'stroke="#4a7fb5" stroke-dasharray="2,2" stroke-width="0.8"/>'
            f'<text x="{x(ts) + 2:.1f}" y="{TOP - 6}" font-size="9" fill="#4a7fb5">step {k}</text>'
        )
    for e, thread, depth in placed:
        y = row_y[(thread, depth)]
        w = max(0.8, x(e["ts_us"] + e["dur_us"]) - x(e["ts_us"]))
        parts.append(
            f'<rect x="{x(e["ts_us"]):.1f}" y="{y}" width="{w:.1f}" height="{LANE_H - 3}" '
            f'fill="{COLOURS[kind[e["name"]]]}"><title>{escape(e["name"])}: {e["dur_us"]:.0f} µs</title></rect>'
        )
    y = TOP + len(rows) * LANE_H + 18
    for i, (k, words) in enumerate(
        (
            ("step", f"ran once per grid step ({steps}×)"),
            ("block", "ran once per output block"),
            ("once", "ran once (set-up, copy-out)"),
        )
    ):
        parts.append(
            f'<rect x="{LEFT + 230 * i}" y="{y - 9}" width="10" height="10" fill="{COLOURS[k]}"/>'
            f'<text x="{LEFT + 230 * i + 14}" y="{y}" font-size="10">io_callback {escape(words)}</text>'
        )
    parts.append(
        f'<text x="{LEFT}" y="{y + 20}" font-size="9" fill="#666">Recorded {escape(rec["date"][:10])} by '
        f'course_tools.bench.cpu_trace, jax {escape(str(p.get("jax")))}, {escape(str(p["machine"].get("cpu_model")))} '
        f'({p["machine"].get("cpu_count")} cores), commit {escape(str(p.get("commit"))[:10])}.</text>'
        f'<text x="{LEFT}" y="{y + 34}" font-size="9" fill="#666">On a TPU the whole grid is one op named '
        f'after the kernel; here every grid step is the interpreter\'s Python.</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
