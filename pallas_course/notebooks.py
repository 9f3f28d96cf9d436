"""Lab notebooks as a student sees them: their cells, tags and the code the site and the walks show.

The walks (and the site) read `site:show` cells from here, and the release reads the tags that say what a
cell is. Cell sources and metadata are data: nothing here executes a notebook. nbgrader's metadata is the
grader's to read (autograder.cells); executing the course's own notebooks in-process is
autograder.notebook_code's.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Mapping

import nbformat
from nbformat import NotebookNode

from pallas_course import pyparse

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
SHOW_TAG = "site:show"


def read(path: Path | str) -> NotebookNode:
    return nbformat.read(Path(path), as_version=4)


def tags(cell: Mapping[str, Any]) -> list[str]:
    raw = cell.get("metadata", {}).get("tags", [])
    return [t for t in raw if isinstance(t, str)] if isinstance(raw, list) else []


def is_parameters_cell(cell: Mapping[str, Any]) -> bool:
    return "parameters" in tags(cell)


def strip_markers(source: str) -> str:
    """`source` less the solution markers (`### BEGIN/END SOLUTION` lines)."""
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
    tree = pyparse.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(source.split("\n")[start - 1 : node.end_lineno])
    return None
