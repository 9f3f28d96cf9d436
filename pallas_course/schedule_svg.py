"""Draw a Schedule as a steppable picture: one self-contained HTML fragment of inline SVG frames.

Reads only the frames (pallas_course.schedule computes them). No CDN, no JavaScript: stepping uses radio
inputs and CSS, so the picture works in a Jupyter output (`IPython.display.HTML(schedule_html(s))`), in a
static page, and with scripts off; without CSS every frame is simply listed in order. Site scripts may
enhance it through the `data-*` attributes (frame index, phase, idle, source lines).
"""

from __future__ import annotations

import itertools
from html import escape

from .schedule import blocks_by_operand, Frame, Schedule

_ids = itertools.count()

W, BOX_W, BOX_H, GAP = 720, 64, 28, 6
COLORS = {
    "fetch": "#4a7fb5",
    "writeback": "#b5704a",
    "resident": "#e8eef5",
    "empty": "#f4f4f4",
    "idle": "#bbbbbb",
    "busy": "#c98a2b",
}


def _box(x: float, y: float, text: str, fill: str, *, stroke: str = "#555", bold: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    return (
        f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="3" fill="{fill}" stroke="{stroke}"/>'
        f'<text x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 4}" text-anchor="middle" font-size="11"{weight}>'
        f'{escape(text)}</text>'
    )


def _hbm_blocks(s: Schedule) -> dict[str, list[str]]:
    return blocks_by_operand(s)


def frame_svg(s: Schedule, f: Frame) -> str:
    """One frame as an SVG element."""
    moving = {t.block: t.kind for t in f.transfers if t.action != "wait"}
    waited = {t.slot for t in f.transfers if t.action == "wait"}
    parts: list[str] = []
    y = 8
    parts.append(f'<text x="4" y="{y + 18}" font-size="12" font-weight="bold">HBM</text>')
    for name, row in _hbm_blocks(s).items():
        x = 60
        parts.append(f'<text x="{x}" y="{y + 18}" font-size="11">{escape(name)}</text>')
        x += 18
        for blk in row:
            kind = moving.get(blk)
            parts.append(_box(x, y, blk, COLORS[kind] if kind else COLORS["empty"], bold=bool(kind)))
            x += BOX_W + GAP
        y += BOX_H + GAP
    y += 10
    parts.append(f'<text x="4" y="{y + 18}" font-size="12" font-weight="bold">VMEM</text>')
    x = 60
    for slot in s.slot_names:
        held = f.slots.get(slot)
        fill = COLORS["resident"] if held else COLORS["empty"]
        stroke = "#222" if slot in waited else "#555"
        parts.append(f'<text x="{x + BOX_W / 2}" y="{y - 2}" text-anchor="middle" font-size="10">{escape(slot)}</text>')
        parts.append(_box(x, y + 2, held or "empty", fill, stroke=stroke))
        x += BOX_W + GAP
        if x + BOX_W > W:
            x, y = 60, y + BOX_H + 16
    y += BOX_H + 18
    unit = "idle" if f.idle else (f.compute or "")
    parts.append(
        f'<rect x="60" y="{y}" width="{W - 70}" height="{BOX_H}" rx="3" '
        f'fill="{COLORS["idle"] if f.idle else COLORS["busy"]}" stroke="#555"/>'
    )
    parts.append(f'<text x="70" y="{y + 18}" font-size="12">compute · {escape(unit)}</text>')
    y += BOX_H + 8
    moves = (
        ", ".join(
            f"{t.block} → {t.slot}" if t.kind == "fetch" else f"{t.slot} → {t.block}"
            for t in f.transfers
            if t.action != "wait"
        )
        or "none"
    )
    parts.append(f'<text x="60" y="{y + 14}" font-size="11">transfers: {escape(moves)}</text>')
    y += 22
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {y}" width="100%" '
        f'style="max-width:{W}px" role="img" aria-label="{escape(f.caption)}">{"".join(parts)}</svg>'
    )


def schedule_html(s: Schedule, *, title: str | None = None, show_source: bool = True) -> str:
    """The whole schedule as a steppable HTML fragment (radio inputs + CSS; no script, no external files)."""
    uid = f"sched{next(_ids)}"
    n = len(s.frames)
    title = title or f"{s.kernel}: grid {s.grid}, {s.depth} buffer(s) per operand, {n} frames"
    css = [
        f".{uid} input{{position:absolute;opacity:0}}",
        f".{uid} .frame{{display:none}}",
        f".{uid} .nav label{{display:inline-block;padding:1px 6px;margin:1px;border:1px solid #999;"
        f"border-radius:3px;cursor:pointer;font:12px monospace}}",
        f".{uid} pre{{font-size:12px;line-height:1.35;margin:4px 0}}",
        f".{uid} .ln{{display:block}}",
    ]
    radios, frames, nav = [], [], []
    for f in s.frames:
        fid = f"{uid}-f{f.index}"
        radios.append(f'<input type="radio" name="{uid}" id="{fid}"{" checked" if f.index == 1 else ""}>')
        nav.append(f'<label for="{fid}" title="{escape(f.label)}">{f.index:02d}</label>')
        css.append(f"#{fid}:checked ~ .frames .f{f.index}{{display:block}}")
        css.append(f"#{fid}:checked ~ .nav label[for={fid}]{{background:#333;color:#fff}}")
        for ln in f.lines:
            css.append(f"#{fid}:checked ~ .frames .f{f.index} .l{ln}{{background:#fde9b8}}")
        prev_next = "".join(
            f'<label for="{uid}-f{j}">{arrow}</label>'
            for j, arrow in ((f.index - 1, "◀ prev"), (f.index + 1, "next ▶"))
            if 1 <= j <= n
        )
        source = ""
        if show_source and s.source:
            source = (
                "<pre>"
                + "".join(f'<span class="ln l{i}">{i:>2} {escape(line)}</span>' for i, line in enumerate(s.source, 1))
                + "</pre>"
            )
        frames.append(
            f'<div class="frame f{f.index}" data-frame="{f.index}" data-phase="{f.phase}" '
            f'data-idle="{str(f.idle).lower()}" data-lines="{",".join(map(str, f.lines))}">'
            f'<p><b>{f.index:02d}/{n:02d}</b> {escape(f.label)} · {escape(f.caption)} <i>({f.phase})</i></p>'
            f'{frame_svg(s, f)}<div class="nav">{prev_next}</div>{source}</div>'
        )
    return (
        f'<div class="{uid} pallas-schedule" data-frames="{n}" data-depth="{s.depth}">'
        f'<style>{"".join(css)}</style><p><b>{escape(title)}</b></p>{"".join(radios)}'
        f'<div class="nav">{"".join(nav)}</div><div class="frames">{"".join(frames)}</div></div>'
    )


def display(s: Schedule) -> None:
    """Show `s` in a Jupyter output."""
    from IPython.display import HTML, display as ipy_display

    ipy_display(HTML(schedule_html(s)))
