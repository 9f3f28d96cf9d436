"""The guided walks (WALK·matmul, WALK·softmax): a numbered listing and the steps that move through it.

The listing is always the lab notebook's own `site:show` cells (kernel, a blank line, wrapper: the
numbering kernel_lines uses). Notes and per-line marks come from the shared walk data (pallas_course/walks.yml,
read here by course_tools.walks) when it has this walk; until then the walk steps through the code one
statement at a time (the kernel's signature, each statement of its body, the wrapper's set-up, then each
argument group of the pallas_call), without notes, coloured by the cells' copper/steel tags.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from pallas_course import pyparse
from pallas_course.notebooks import def_text

from .content import WalkSpec
from .notebook_cells import Mark, cell_defining, listing_marks, shown_cells


@dataclass(frozen=True)
class WalkStep:
    lines: tuple[int, ...]  # 1-based listing lines this step highlights
    note: str | None  # the walk data's note, None when there is none yet


@dataclass(frozen=True)
class Walk:
    anchor: str  # the walk's id on the page
    code: str  # "WALK·matmul"
    title: str
    listing: tuple[str, ...]
    marks: tuple[Mark, ...]
    steps: tuple[WalkStep, ...]
    origin: str  # where the code came from
    notes_from: str | None  # "pallas_course/walks.yml" when steps and notes came from the walk data
    first_line: int = 1  # the number of listing[0] (a package file's own numbering for readings)
    stale: str | None = None  # the walk data's warning that its notes may not fit the current code
    missing: str | None = None  # why the walk could not be drawn (the lab is not written yet)


def _def_text(source: str, name: str) -> str:
    """The text of `def name` in `source`, from its first decorator to its last line."""
    text = def_text(source, name)
    if text is None:
        raise LookupError(f"no `def {name}` in the cell the walk names")
    return text


def _span(node: ast.AST, offset: int = 0) -> tuple[int, ...]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return tuple(range(start + offset, (node.end_lineno or node.lineno) + offset + 1))


def statement_steps(listing: tuple[str, ...]) -> tuple[WalkStep, ...]:
    """One step per statement: kernel signature, kernel statements, wrapper set-up, pallas_call arguments."""
    tree = pyparse.parse("\n".join(listing))
    steps: list[tuple[int, ...]] = []
    kernel, wrapper = (n for n in tree.body if isinstance(n, ast.FunctionDef))
    steps.append((kernel.lineno,))
    steps += [_span(s) for s in kernel.body]
    setup = [s for s in wrapper.body if not isinstance(s, ast.Return)]
    steps.append((wrapper.lineno,) + tuple(ln for s in setup for ln in _span(s)))
    ret = next((s for s in wrapper.body if isinstance(s, ast.Return)), None)
    call = ret.value if ret is not None else None
    inner = call.func if isinstance(call, ast.Call) and isinstance(call.func, ast.Call) else call
    if isinstance(inner, ast.Call):
        head = (ret.lineno,) + tuple(ln for a in inner.args for ln in _span(a))
        groups: list[tuple[int, ...]] = []
        tail: list[int] = []
        for kw in inner.keywords:
            if kw.arg in ("grid", "in_specs", "out_specs"):
                groups.append(tuple(range(kw.lineno, (kw.value.end_lineno or kw.lineno) + 1)))
            else:
                tail += _span(kw.value)
        end = (call.end_lineno or call.lineno) if isinstance(call, ast.Call) else ret.end_lineno
        last = max(tail + [g[-1] for g in groups] + [ret.lineno])
        tail += list(range(last + 1, (end or last) + 1))
        if groups:
            groups[0] = tuple(sorted(set(head) | set(groups[0])))
        else:
            tail = list(head) + tail
        steps += groups
        if tail:
            steps.append(tuple(sorted(set(tail))))
    elif ret is not None:
        steps.append(_span(ret))
    return tuple(WalkStep(tuple(sorted(set(s))), None) for s in steps)


_MARKS: dict[str, Mark] = {"algorithm": "alg", "schedule": "sch", "blank": "plain"}


def _from_data(w, anchor: str) -> Walk:
    """A walk from pallas_course.walks: its lines, marks, steps and notes."""
    first = int(w.first_line)
    listing = tuple(w.lines)
    marks = tuple(_MARKS.get(w.marks.get(first + i, "blank"), "plain") for i in range(len(listing)))
    steps = tuple(WalkStep(tuple(s.lines), s.note) for s in w.steps)
    return Walk(
        anchor, w.code, w.title, listing, marks, steps, w.origin, "pallas_course/walks.yml", first, w.stale, w.missing
    )


def build_walk(root: Path, spec: WalkSpec, notebook: str) -> Walk:
    """The walk `spec`: from the walk data when it has steps for it, else from `notebook`'s site:show cells."""
    from course_tools import walks

    try:
        data = walks.walk(spec.code, root=root)
    except KeyError:
        data = None
    if data is not None and not data.missing and data.steps:
        return _from_data(data, spec.id)
    path = root / notebook
    cells = shown_cells(path) if path.exists() else []
    kernel, wrapper = cell_defining(cells, spec.kernel), cell_defining(cells, spec.wrapper)
    if kernel is None or wrapper is None:
        why = (
            f"{notebook} does not exist yet"
            if not path.exists()
            else f"{notebook} has no site:show cells defining {spec.kernel} and {spec.wrapper}"
        )
        return Walk(spec.id, spec.code, spec.title, (), (), (), notebook, None, missing=why)
    listing = tuple(
        _def_text(kernel.source, spec.kernel).split("\n") + [""] + _def_text(wrapper.source, spec.wrapper).split("\n")
    )
    return Walk(
        spec.id,
        spec.code,
        spec.title,
        listing,
        listing_marks(kernel, wrapper, listing),
        statement_steps(listing),
        notebook,
        None,
    )
