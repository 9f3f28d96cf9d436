"""Build the chapter site: gather every source, render site/templates, write one self-contained page.

Sources, each read where it lives: course.yml (stage, labs, deliverables, weeks), site/content/ (our words),
the labs' source notebooks (`site:show` cells; the matmul solution's pallas_call for the frames),
pallas_course.legality and chips (EX·09's constants), course_tools.gates (GATE 01, the data behind
`course gates --json`). The output is `index.html` with its styles inline and its ES modules carried in an
import map as data: URLs, so the page opens from disk (file://, where browsers refuse to fetch module
files) as well as from any static host, and fetches nothing at run time.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup

from pallas_course import legality
from autograder.course_manifest import REPO_ROOT, LabSpec, Manifest, load as load_manifest
from pallas_course.schedule import Frame, Schedule, blocks_by_operand

from . import content as content_mod
from .frames import LabSchedules, LabTraceError, matmul_schedules
from .notebook_cells import ShownCell, shown_cells
from .sandbox_data import legality_data
from .walk_steps import Walk, build_walk

ASSETS = REPO_ROOT / "site"
DEFAULT_OUT = REPO_ROOT / "_build" / "site"
CONTENT_FILE = "content/stage-1.yml"
# ES modules, in the order they are listed in the import map; main.js boots the page.
MODULES = ("legality", "stepper", "sandbox", "selftest", "main")


class SiteError(ValueError):
    """The site cannot be built: a source is missing or malformed (the message says which and how to fix it)."""


@dataclass(frozen=True)
class BuildResult:
    index: Path
    bytes: int
    seconds: float
    frames: dict[str, int]  # instrument -> frame count
    labs: dict[str, str]  # lab code -> source notebook, or why nothing is shown
    walks: dict[str, str]  # walk code -> where its steps came from
    gate: str  # "GATE 01 QUEUED"
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ views


def _hbm_rows(s: Schedule) -> list[tuple[str, list[str]]]:
    return list(blocks_by_operand(s).items())


def frame_view(s: Schedule, f: Frame, unit: str) -> dict[str, Any]:
    """One frame as the template draws it: HBM blocks, VMEM slots, compute, transfers, skipped copies."""
    moving = {t.block: t.kind for t in f.transfers if t.action != "wait"}
    filling = {t.slot: t.kind for t in f.transfers if t.action != "wait"}
    waited = {t.slot for t in f.transfers if t.action == "wait"}
    slot_owner = {
        slot: s.operands[key]
        for key in s.operands
        for slot in s.slot_names
        if slot.rstrip("0123456789") == s.operands[key].lower()
    }
    roles = {name: ("out" if key.startswith("out") else "in") for key, name in s.operands.items()}
    hbm = [
        {"name": name, "role": roles[name], "blocks": [{"label": b, "moving": moving.get(b)} for b in blocks]}
        for name, blocks in _hbm_rows(s)
    ]
    slots = [
        {
            "slot": slot,
            "held": f.slots.get(slot),
            "role": roles.get(slot_owner.get(slot, ""), "in"),
            "moving": filling.get(slot),
            "waited": slot in waited,
        }
        for slot in s.slot_names
    ]
    moves = [
        f"{t.block} → {t.slot}" if t.kind == "fetch" else f"{t.slot} → {t.block} (HBM)"
        for t in f.transfers
        if t.action != "wait"
    ]
    waits = [t.slot for t in f.transfers if t.action == "wait"]
    return {
        "index": f.index,
        "n": len(s.frames),
        "label": f.label,
        "caption": f.caption,
        "phase": f.phase,
        "idle": f.idle,
        "lines": list(f.lines),
        "compute": f.compute,
        "unit": unit,
        "hbm": hbm,
        "slots": slots,
        "moves": moves,
        "waits": waits,
        "skipped": [k.block for k in f.skipped],
        "grid_point": list(f.grid_point) if f.grid_point is not None else None,
    }


def _listing(lines: tuple[str, ...], marks: tuple[str, ...], first: int = 1) -> list[dict[str, Any]]:
    return [{"no": i, "text": text, "mark": mark} for i, (text, mark) in enumerate(zip(lines, marks), first)]


def _line_ranges(lines: list[int] | tuple[int, ...]) -> str:
    """(2, 3, 4, 6) -> "2–4, 6"."""
    out, run = [], []
    for ln in sorted(lines):
        if run and ln == run[-1] + 1:
            run.append(ln)
            continue
        if run:
            out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [ln]
    if run:
        out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _step_view(walk: Walk, step) -> dict[str, Any]:
    """A walk step: its lines, its note, and (while there is no note) what kind of lines it lights."""
    idx = [n - walk.first_line for n in step.lines if 0 <= n - walk.first_line < len(walk.listing)]
    kinds = {walk.marks[i] for i in idx} - {"plain"}
    kind = "alg" if kinds == {"alg"} else "sch" if kinds == {"sch"} else "plain"
    words = {"alg": "algorithm", "sch": "schedule"}.get(kind, "algorithm and schedule" if kinds else "")
    first = next((walk.listing[i].strip() for i in idx if walk.listing[i].strip()), "")
    return {
        "lines": list(step.lines),
        "note": step.note,
        "ranges": _line_ranges(step.lines),
        "kind": kind,
        "kind_words": words,
        "first_text": first if len(first) <= 60 else first[:57] + "...",
    }


@dataclass(frozen=True)
class LabView:
    spec: LabSpec
    cells: list[ShownCell]
    exists: bool
    shown_from: str = ""  # the notebook the cells come from (the stubs until the reveal date)
    withheld: str | None = None  # student mode, before the reveal date: when the model code appears

    @property
    def anchor(self) -> str:
        return content_mod.lab_anchor(self.spec.code)


def _sizes_text(s: LabSchedules) -> str:
    z = s.sizes
    return (
        f"A ({z['m']}, {z['k']}) @ B ({z['k']}, {z['n']}) {s.dtype}, blocks bm={z['bm']}, bn={z['bn']}, "
        f"bk={z['bk']}: grid {s.info.grid}"
    )


def _fill(note: str, **values: str) -> str:
    for key, value in values.items():
        note = note.replace("{" + key + "}", value)
    return note


# ------------------------------------------------------------------------------------------------ scripts


def import_map(assets: Path) -> str:
    """The page's modules as an import map of data: URLs ("pfz/<name>" -> the module's source)."""
    imports = {}
    for name in MODULES:
        path = assets / "js" / f"{name}.js"
        try:
            source = path.read_text()
        except FileNotFoundError:
            raise SiteError(f"{path}: missing; the page's modules live in site/js/") from None
        imports[f"pfz/{name}"] = "data:text/javascript;charset=utf-8," + urllib.parse.quote(source, safe="")
    return json.dumps({"imports": imports}, indent=1)


def _json_script(data: Any) -> Markup:
    """JSON for a <script type="application/json"> block ('</' cannot end the element early)."""
    return Markup(json.dumps(data, separators=(",", ":")).replace("</", "<\\/"))


# ------------------------------------------------------------------------------------------------ build


def _lab_for_kernel(m: Manifest, kernel: str) -> LabSpec:
    for lab in m.labs:
        if kernel in lab.kernels:
            return lab
    raise SiteError(f"course.yml: no lab lists kernel {kernel!r} under `kernels:`; the instruments draw its schedule")


def withheld_note(lab: LabSpec) -> str:
    when = f"on {lab.reveal.isoformat()}" if lab.reveal else "when your instructor publishes it"
    return f"{lab.code}'s model code appears here {when}; until then this shows the cells you fill in."


def gather(root: Path = REPO_ROOT, assets: Path = ASSETS, public_on: dt.date | None = None) -> dict[str, Any]:
    """Everything the template needs, computed from the sources under `root` and `assets`.

    `public_on` builds the student site as of that day: a lab's `site:show` code (its cells, its walks, the
    EX·12 listing) appears only from its `reveal` date in course.yml; before it, the stubs students fill in.
    None builds the instructor's page, with every solution."""
    from pallas_course.bench import BenchRecordError
    from course_tools.gates import evaluate
    from autograder.course_manifest import ManifestError

    try:
        m = load_manifest(root / "course.yml")
    except Exception as e:  # noqa: BLE001 - ManifestError and friends: one line for the CLI
        raise SiteError(str(e)) from None
    try:
        content = content_mod.load(assets / CONTENT_FILE, {lab.code for lab in m.labs})
    except content_mod.ContentError as e:
        raise SiteError(str(e)) from None
    hidden = {lab.code for lab in m.labs if public_on is not None and not lab.revealed(public_on)}
    labs = []
    for lab in m.labs:
        shown = lab.notebook if lab.code in hidden else lab.source
        path = root / shown
        labs.append(
            LabView(
                lab,
                shown_cells(path) if path.exists() else [],
                path.exists(),
                shown,
                withheld_note(lab) if lab.code in hidden else None,
            )
        )
    by_code = {lab.code: lab for lab in m.labs}

    try:
        sched = matmul_schedules(root, _lab_for_kernel(m, "matmul"))
    except LabTraceError as e:
        raise SiteError(str(e)) from None
    listing = _listing(sched.listing, sched.marks)
    matmul_lab = _lab_for_kernel(m, "matmul")
    if matmul_lab.code in hidden:  # the schedule stays; the model code's text goes until its reveal date
        listing = [{**row, "text": ""} for row in listing]
        listing[0]["text"] = f"# {withheld_note(matmul_lab)}"
    ex = content.instruments
    origin_note = sched.origin + (f" (reference copy: {sched.fallback})" if sched.fallback else "")
    if public_on is not None:  # students get the lab's notebook, never the instructor's source or tools
        origin_note = f"{matmul_lab.code}'s notebook ({matmul_lab.notebook})"
    instruments = {
        "ex02": {
            "meta": ex["ex02"],
            "frames": [frame_view(sched.depth2, f, sched.unit) for f in sched.depth2.frames],
            "note": _fill(
                ex["ex02"].note,
                function=f"{sched.wrapper}()",
                notebook=origin_note,
                sizes=_sizes_text(sched),
                depth=str(sched.depth2.depth),
            ),
        },
        "ex07": {
            "meta": ex["ex07"],
            "frames": [frame_view(sched.depth1, f, sched.unit) for f in sched.depth1.frames],
            "note": _fill(ex["ex07"].note),
        },
        "ex12": {
            "meta": ex["ex12"],
            "frames": [frame_view(sched.depth2, f, sched.unit) for f in sched.depth2.frames],
            "listing": listing,
            "note": _fill(ex["ex12"].note, notebook=origin_note),
        },
    }
    for key in ("ex02", "ex07", "ex12"):
        instruments[key]["idle"] = sum(f["idle"] for f in instruments[key]["frames"])

    sandbox = ex["ex09"]
    d = sandbox.defaults or {}
    dtypes = sandbox.dtypes or ["float32", "bfloat16"]
    data = legality_data(dtypes)
    if str(d.get("dtype")) not in data["dtypes"] or str(d.get("chip")) not in data["chips"]:
        raise SiteError(
            f"{assets / CONTENT_FILE}: instruments.ex09.defaults names dtype {d.get('dtype')!r} and chip "
            f"{d.get('chip')!r}; dtypes are {', '.join(data['dtypes'])}, chips {', '.join(data['chips'])}"
        )
    verdict = legality.check_block((d["m"], d["n"]), (d["bm"], d["bn"]), np.dtype(str(d["dtype"])), str(d["chip"]))
    budget = legality.sandbox_budget(verdict)
    instruments["ex09"] = {
        "meta": sandbox,
        "defaults": d,
        "data": data,
        "verdict": verdict.to_dict(),
        "budget": budget.to_dict(),
        "note": _fill(sandbox.note),
    }

    walks = []
    # Only the walks the content file places: the walk data also holds LAB·1.5's graded reading, which belongs
    # to that lab, not the chapter page. It carries no marks (students write them; the key is grader-side only,
    # autograder/keys/tokamax_reading.yml), so nothing here could publish the key.
    for spec in content.walks:
        if spec.lab in hidden:
            walk = Walk(
                spec.id,
                spec.code,
                spec.title,
                (),
                (),
                (),
                by_code[spec.lab].notebook,
                None,
                missing=f"{spec.lab}'s model code appears here on {by_code[spec.lab].reveal}",
            )
            walks.append({"walk": walk, "listing": [], "steps": []})
            continue
        try:
            walk = build_walk(root, spec, by_code[spec.lab].source)
        except ValueError as e:  # walks.yml malformed (pallas_course.walks.WalkDataError)
            raise SiteError(str(e)) from None
        walks.append(
            {
                "walk": walk,
                "listing": _listing(walk.listing, walk.marks, walk.first_line),
                "steps": [_step_view(walk, s) for s in walk.steps],
            }
        )

    gate_spec = next((g for g in m.gates if g.get("stage") == m.stage.id), None)
    if gate_spec is None:
        raise SiteError(f"course.yml: no gate has `stage: {m.stage.id}`")
    try:
        gate = evaluate(gate_spec["id"])
    except (BenchRecordError, ManifestError, KeyError) as e:  # as `course gates` reports them
        raise SiteError(str(e).strip("'\"")) from None

    # LAB·1.4's budget line as the real TPU compiler judged it (course_tools.bench.budget_line), with its provenance
    budget_file = root / "bench" / "budget-line.json"
    budget_line = json.loads(budget_file.read_text()) if budget_file.exists() else None

    return {
        "course": m.course,
        "stage": m.stage,
        "labs": labs,
        "content": content,
        "instruments": instruments,
        "figures": figures(),
        "walks": walks,
        "gate": gate,
        "sched": sched,
        "line_ranges": _line_ranges,
        "budget_line": budget_line,
        "breadcrumb": content.breadcrumb.replace("{track_chapter}", str(m.course.track_chapter)),
        "plan": _plan(content, m),
    }


def figures() -> dict[str, Markup]:
    """The pictures a section may show (content.Section.figure), computed: one TensorCore from course.yml's v5e and
    v6e constants (pallas_course.tensorcore_svg), and the course's one tiling table (pallas_course.tiling)."""
    from html import escape

    from pallas_course import tiling
    from pallas_course.tensorcore_svg import tensorcore_svg

    head = (
        "dtype width",
        "examples",
        "lowering rule (any dtype)",
        "native tile",
        "a block of whole (8, 128) but not whole native tiles",
    )
    rows = "".join(
        f"<tr><td>{r.bits}-bit</td><td>{escape(r.dtypes)}</td><td>last two dims divisible by (8, 128) "
        f"or equal the array's</td><td>{r.native_tile}</td><td>{escape(r.what_happens)}</td></tr>"
        for r in tiling.TABLE
    )
    sources = escape(f"{tiling.LOWERING_SOURCE} · {tiling.COMPILE_SOURCE}")
    table = (
        f'<div class="table-wrap"><table class="tiling"><thead><tr>{"".join(f"<th>{h}</th>" for h in head)}</tr></thead>'
        f'<tbody>{rows}</tbody></table></div><p class="source">sources: {sources}</p>'
    )
    return {"tensorcore": Markup(tensorcore_svg("v5e") + tensorcore_svg("v6e")), "tiling-table": Markup(table)}


def _plan(content: content_mod.Content, m: Manifest) -> list[dict[str, Any]]:
    """The weeks of the content file, each with the course.yml labs of that week that no item names appended."""
    out = []
    for w in content.plan:
        named = {code for item in w.items for code in re.findall(r"\{lab:([^}]+)\}", item)}
        extra = [f"{{lab:{lab.code}}}: {lab.title}" for lab in m.labs if lab.week == w.week and lab.code not in named]
        out.append({"week": w.week, "title": w.title, "items": list(w.items) + extra})
    return out


def render(ctx: dict[str, Any], assets: Path = ASSETS) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(assets / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["zip"] = zip
    env.filters["inline"] = content_mod.inline
    env.filters["json_script"] = _json_script
    env.filters["pad2"] = lambda n: f"{int(n):02d}"
    env.filters["bytes"] = legality.fmt_bytes
    env.filters["mib"] = legality.fmt_mib
    try:
        css = (assets / "css" / "site.css").read_text()
    except FileNotFoundError:
        raise SiteError(f"{assets / 'css' / 'site.css'}: missing") from None
    return env.get_template("page.html.j2").render(**ctx, css=Markup(css), import_map=Markup(import_map(assets)))


def quiet_libtpu_without_a_tpu() -> None:
    """On a machine with no TPU chip (no /dev/accel*, no /dev/vfio device), libtpu (installed for the compile
    step) prints TPU_WORKER_HOSTNAMES and host-bounds errors when JAX starts; these values quiet it (FACTS.md).
    A TPU host keeps its own."""
    import glob
    import os

    if glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"):
        return
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("TPU_HOST_BOUNDS", "1,1,1")


def build(
    out: Path = DEFAULT_OUT, root: Path = REPO_ROOT, assets: Path = ASSETS, public_on: dt.date | None = None
) -> BuildResult:
    """Build the site into `out` (created if needed); returns what was written and where each part came from.
    `public_on`: the student site as of that day (see gather)."""
    t0 = time.perf_counter()
    ctx = gather(root, assets, public_on)
    html = render(ctx, assets)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(html, encoding="utf-8")
    sched: LabSchedules = ctx["sched"]
    notes = [f"frames from reference_kernels.py: {sched.fallback}"] if sched.fallback else []
    walks = {}
    for w in ctx["walks"]:
        walk: Walk = w["walk"]
        walks[walk.code] = (
            f"not drawn: {walk.missing}"
            if walk.missing
            else f"{walk.origin}, {len(walk.steps)} steps, "
            + (f"notes from {walk.notes_from}" if walk.notes_from else "no notes yet")
            + (" (STALE: the notes may not fit the code)" if walk.stale else "")
        )
    return BuildResult(
        index=index,
        bytes=len(html.encode()),
        seconds=time.perf_counter() - t0,
        frames={k: len(ctx["instruments"][k]["frames"]) for k in ("ex02", "ex07", "ex12")},
        labs={
            lab.spec.code: (
                f"{lab.shown_from}, {len(lab.cells)} site:show cells"
                + (f" (stubs: reveal {lab.spec.reveal})" if lab.withheld else "")
                if lab.exists
                else f"{lab.shown_from} not written yet"
            )
            for lab in ctx["labs"]
        },
        walks=walks,
        gate=f"{ctx['gate'].title} {ctx['gate'].status}",
        notes=notes,
    )
