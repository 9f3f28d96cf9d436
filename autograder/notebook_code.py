"""A notebook's definitions as plain Python: the parameters, the set-up and every cell that defines a
function, without the checks and tests. Used to load a solution, a stub or a mutant in-process."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import nbformat
from nbformat import NotebookNode

_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def _is_test(cell: NotebookNode) -> bool:
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nbg.get("grade")) and not nbg.get("solution")


def _defines(cell: NotebookNode) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return "parameters" in tags or gid == "setup" or "\ndef " in "\n" + cell.source


def definition_cells(nb: NotebookNode) -> list[str]:
    return ["\n".join(l for l in c.source.splitlines() if l.strip() not in _MARKERS)
            for c in nb.cells if c.cell_type == "code" and not _is_test(c) and _defines(c)]


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
    """Execute the definitions of the notebook at `path` (after `edits`) and return its namespace."""
    nb = nbformat.read(Path(path), as_version=4)
    cells = apply_edits(definition_cells(nb), edits or {})
    namespace: dict[str, Any] = {"__name__": f"notebook:{Path(path).stem}"}
    for src in cells:
        exec(compile(src, str(path), "exec"), namespace)   # noqa: S102 - our own notebooks
        if "MODE" in namespace and "INTERP" not in namespace:
            namespace["MODE"] = mode
    return namespace
