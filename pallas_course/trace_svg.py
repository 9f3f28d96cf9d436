"""Draw LAB·1.4's recorded CPU trace (records/lab-1.4-cpu-trace.json, made by course_tools.bench.cpu_trace) as one
inline SVG: the io_callback events of TPU interpret mode inside the recipe's annotation, one lane per thread and
nesting depth, coloured by when each callback ran (every grid step; the first K step of each output block; the last
K step of each output block; once), with the grid steps marked. Every bar is an event of the record; the caption
says what machine recorded it, and that it is a CPU trace of the interpreter, not a TPU's.

The two once-per-output-block kinds are told apart by the step each event falls in (`step_of`, `kinds`), never by a
callback's number: in the 2 x 2 x 2 record, one callback runs at steps 0, 2, 4, 6 (k = 0) and two at 1, 3, 5, 7
(k = 1, the last). What they are was checked by running the recipe on a kernel without the `pl.when(k == 0)` zeroing
(jax 0.10.2, 2026-12-06): the k = 0 callback disappears and the last-step pair stays; so the first is the zeroing
store and the pair the output block's write-back at the end of its K steps.
"""

from __future__ import annotations

import bisect
import collections
import json
from html import escape
from importlib import resources
from typing import Any

W, LEFT, LANE_H, TOP = 760, 90, 16, 30
COLOURS = {"step": "#4a7fb5", "first-k": "#c98a2b", "last-k": "#8a4fb5", "block": "#b5654a", "once": "#9a9a9a"}
LEGEND = {
    "step": "ran at every grid step ({steps}×)",
    "first-k": "ran at the first K step of each output block: the pl.when(k == 0) zeroing store",
    "last-k": "ran at the last K step of each output block: its write-back",
    "block": "ran once per output block",
    "once": "ran once (set-up, copy-out)",
}


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


def step_starts(events: list[dict[str, Any]], counts: collections.Counter, steps: int) -> list[float]:
    """When each grid step began: the first of the every-step callbacks of each step."""
    per_step = [n for n, c in counts.items() if c == steps]
    return sorted(e["ts_us"] for e in events if e["name"] in per_step)[:: max(1, len(per_step))][:steps]


def step_of(ts_us: float, starts: list[float]) -> int:
    return max(0, bisect.bisect_right(starts, ts_us) - 1)


def kinds(rec: dict[str, Any]) -> dict[str, str]:
    """Each callback name's kind: "step", "first-k" / "last-k" (once per output block, at its first or last K step;
    the grid's last axis is K and changes fastest), "block" (once per block, elsewhere), or "once"."""
    events, grid = rec["events"], rec["grid"]
    steps = 1
    for g in grid:
        steps *= g
    counts = collections.Counter(e["name"] for e in events)
    starts = step_starts(events, counts, steps)
    k_steps = grid[-1]
    out = {}
    for name, c in counts.items():
        if c == steps:
            out[name] = "step"
        elif c == 1:
            out[name] = "once"
        else:
            ks = {step_of(e["ts_us"], starts) % k_steps for e in events if e["name"] == name}
            out[name] = "first-k" if ks == {0} else "last-k" if ks == {k_steps - 1} else "block"
    return out


def trace_svg(record: dict[str, Any] | None = None) -> str:
    rec = record or load_record()
    events, steps = rec["events"], 1
    for g in rec["grid"]:
        steps *= g
    counts = collections.Counter(e["name"] for e in events)
    kind = kinds(rec)
    placed = _lanes(events)
    rows = sorted({(t, d) for _, t, d in placed})
    row_y = {r: TOP + i * LANE_H for i, r in enumerate(rows)}
    span = max(e["ts_us"] + e["dur_us"] for e in events) or 1.0
    x = lambda us: LEFT + (W - LEFT - 10) * us / span  # noqa: E731 - one scale
    height = TOP + len(rows) * LANE_H + 80 + 14 * (len(set(kind.values())) - 1)
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
    for k, ts in enumerate(step_starts(events, counts, steps)):
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
    shown = [k for k in LEGEND if k in kind.values()]
    for i, k in enumerate(shown):  # one legend entry a line: the two per-block kinds need their words
        parts.append(
            f'<rect x="{LEFT}" y="{y + 14 * i - 9}" width="10" height="10" fill="{COLOURS[k]}"/>'
            f'<text x="{LEFT + 14}" y="{y + 14 * i}" font-size="10">io_callback '
            f"{escape(LEGEND[k].format(steps=steps))}</text>"
        )
    y += 14 * (len(shown) - 1)
    parts.append(
        f'<text x="{LEFT}" y="{y + 20}" font-size="9" fill="#666">Recorded {escape(rec["date"][:10])} by '
        f'course_tools.bench.cpu_trace, jax {escape(str(p.get("jax")))}, {escape(str(p["machine"].get("cpu_model")))} '
        f'({p["machine"].get("cpu_count")} cores), commit {escape(str(p.get("commit"))[:10])}.</text>'
        f'<text x="{LEFT}" y="{y + 34}" font-size="9" fill="#666">On a TPU the whole grid is one op named '
        f'after the kernel; here every grid step is the interpreter\'s Python.</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
