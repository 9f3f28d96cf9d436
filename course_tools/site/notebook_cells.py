"""What the site takes from a lab notebook: its `site:show` cells, verbatim, and each line's colour.

A cell tagged `site:show` is shown on the page exactly as the notebook holds it, less nbgrader's
`### BEGIN/END SOLUTION` marker lines. A cell tagged `copper` is algorithm (what a grid step computes), one
tagged `steel` is schedule (grid, BlockSpecs, index maps); inside a copper cell, a line that asks the grid
where it is (`pl.program_id`, `pl.num_programs`) is schedule too. Untagged cells (the checks) stay plain.
"""

from __future__ import annotations

import ast
import linecache
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import nbformat

from pallas_course import pyparse
from pallas_course.notebooks import SHOW_TAG, shown_code

Mark = Literal["alg", "sch", "plain"]
_GRID_QUERY = re.compile(r"\bpl\.(program_id|num_programs)\s*\(")


@dataclass(frozen=True)
class ShownCell:
    index: int  # position in the notebook (0-based, as nbformat counts)
    source: str  # verbatim, solution markers removed
    role: Mark  # from the copper/steel tags
    marks: tuple[Mark, ...]  # one per line of `source`

    @property
    def lines(self) -> list[str]:
        return self.source.split("\n")

    def defines(self, name: str) -> bool:
        return re.search(rf"^def {re.escape(name)}\(", self.source, re.M) is not None


def line_marks(lines: list[str], role: Mark) -> tuple[Mark, ...]:
    """Each line's colour in a cell of `role`; blank lines take the cell's colour."""
    if role != "alg":
        return tuple(role for _ in lines)
    return tuple("sch" if _GRID_QUERY.search(line) else "alg" for line in lines)


def shown_cells(path: Path) -> list[ShownCell]:
    """The `site:show` cells of the notebook at `path`, in notebook order."""
    nb = nbformat.read(path, as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if SHOW_TAG not in tags:
            continue
        role: Mark = "alg" if "copper" in tags else "sch" if "steel" in tags else "plain"
        source = shown_code(cell.source).rstrip("\n")
        out.append(ShownCell(i, source, role, line_marks(source.split("\n"), role)))
    return out


def cell_defining(cells: list[ShownCell], name: str) -> ShownCell | None:
    return next((c for c in cells if c.defines(name)), None)


def function_from_cell(cell: ShownCell, name: str, namespace: dict[str, Any], label: str) -> Callable:
    """`name` as defined by `cell`'s text, compiled so that `inspect.getsource` returns that text.

    The notebook's definitions run once, in `namespace` (autograder.notebook_code.load); this re-compiles the
    shown cell under its own file name in linecache, so kernel_lines can read line numbers from what the page
    prints, not from the .ipynb file.
    """
    filename = f"<site:{label}:cell{cell.index}>"
    text = cell.source + "\n"
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    scope = dict(namespace)
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 - our own notebooks' shown cells
    return scope[name]


def listing_marks(kernel: ShownCell, wrapper: ShownCell, listing: tuple[str, ...]) -> tuple[Mark, ...]:
    """Colours of a kernel + blank + wrapper listing (kernel_lines numbering), from the two cells' tags."""
    k_len = _def_length(kernel.source)
    marks = list(line_marks(list(listing[:k_len]), kernel.role)) + ["plain"]
    marks += list(line_marks(list(listing[k_len + 1 :]), wrapper.role))
    return tuple(marks[: len(listing)])


def _def_length(source: str) -> int:
    """Lines of the first function definition in `source` (what inspect.getsource returns for it)."""
    fn = next(n for n in pyparse.parse(source).body if isinstance(n, ast.FunctionDef))
    start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
    return (fn.end_lineno or fn.lineno) - start + 1
