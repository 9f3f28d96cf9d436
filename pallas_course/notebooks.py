"""The one place that reads lab notebooks and their nbgrader metadata.

The grader loads a solution, stub or mutant in-process from here (`load`), the site and the walks read
`site:show` cells from here, and the release reads the tags that say what a cell is. Cell sources and
metadata are data: nothing here executes a notebook except `load`, which the course runs only on its own
notebooks (solutions, stubs and the test corpus' mutants).
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

import nbformat
from nbformat import NotebookNode

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_TEST_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
SHOW_TAG = "site:show"


def read(path: Path | str) -> NotebookNode:
    return nbformat.read(Path(path), as_version=4)


def nbgrader_meta(cell: Mapping[str, Any]) -> dict[str, Any]:
    """The cell's nbgrader metadata ({} when it has none, or when it is not a mapping)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return dict(meta) if isinstance(meta, Mapping) else {}


def grade_id(cell: Mapping[str, Any]) -> str | None:
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) else None


def tags(cell: Mapping[str, Any]) -> list[str]:
    raw = cell.get("metadata", {}).get("tags", [])
    return [t for t in raw if isinstance(t, str)] if isinstance(raw, list) else []


def is_test_cell(cell: Mapping[str, Any]) -> bool:
    """An autograded test cell: graded, not a solution region."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_solution_cell(cell: Mapping[str, Any]) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_parameters_cell(cell: Mapping[str, Any]) -> bool:
    return "parameters" in tags(cell)


def is_setup_cell(cell: Mapping[str, Any]) -> bool:
    return grade_id(cell) == "setup"


def strip_markers(source: str) -> str:
    """`source` less nbgrader's `### BEGIN/END SOLUTION` lines."""
    return "\n".join(line for line in source.split("\n") if line.strip() not in SOLUTION_MARKERS)


# The first line of a kernel cell names its half for the notebook's reader ("# copper: the algorithm, ...");
# the site colours the halves itself and shows the code as the seed does, from its `def`.
HALF_MARKERS = ("# copper:", "# steel:")


def shown_code(source: str) -> str:
    """A `site:show` cell's code as the site and the walks print it: no nbgrader markers, no half marker."""
    lines = strip_markers(source).split("\n")
    if lines and lines[0].startswith(HALF_MARKERS):
        lines = lines[1:]
    return "\n".join(lines)


def shown_sources(nb: NotebookNode) -> list[str]:
    """The code of every `site:show` cell (`shown_code`), in notebook order."""
    return [shown_code(c.source) for c in nb.cells if c.cell_type == "code" and SHOW_TAG in tags(c)]


def def_text(source: str, name: str) -> str | None:
    """`def name` in `source`, from its first decorator to its last line, or None."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(source.split("\n")[start - 1:node.end_lineno])
    return None


def _defines(cell: NotebookNode) -> bool:
    return is_parameters_cell(cell) or is_setup_cell(cell) or "\ndef " in "\n" + cell.source


def definition_cells(nb: NotebookNode) -> list[str]:
    """The parameters, the set-up and every cell that defines a function, without the checks and tests."""
    return [strip_markers(c.source) for c in nb.cells
            if c.cell_type == "code" and not is_test_cell(c) and _defines(c)]


def apply_edits(cells: list[str], edits: Mapping[str, str]) -> list[str]:
    """Replace each `old` text with `new`; `old` must occur in exactly one cell, once."""
    cells = list(cells)
    for old, new in edits.items():
        hits = [i for i, src in enumerate(cells) if old in src]
        if len(hits) != 1 or cells[hits[0]].count(old) != 1:
            raise ValueError(f"edit target must occur exactly once in the notebook's code; {old!r} occurs "
                             f"in {len(hits)} cells")
        cells[hits[0]] = cells[hits[0]].replace(old, new)
    return cells


def load(path: Path | str, edits: Mapping[str, str] | None = None, *, mode: str = "tpu-interpret") -> dict[str, Any]:
    """Execute the definitions of the course's own notebook at `path` (after `edits`); return its namespace."""
    cells = apply_edits(definition_cells(read(path)), edits or {})
    namespace: dict[str, Any] = {"__name__": f"notebook:{Path(path).stem}"}
    for src in cells:
        exec(compile(src, str(path), "exec"), namespace)   # noqa: S102 - our own notebooks
        if "MODE" in namespace and "INTERP" not in namespace:
            namespace["MODE"] = mode
    return namespace
