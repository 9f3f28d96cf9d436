"""The course's own notebooks (solutions, stubs, the test corpus' mutants) as plain Python: their definitions,
edited and executed in-process. Only ever on our own notebooks, never on a submission (those run in the jail).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from nbformat import NotebookNode

from autograder.cells import is_setup, is_test
from pallas_course.notebooks import is_parameters_cell, read, strip_markers


def _defines(cell: NotebookNode) -> bool:
    return is_parameters_cell(cell) or is_setup(cell) or "\ndef " in "\n" + cell.source


def definition_cells(nb: NotebookNode) -> list[str]:
    """The parameters, the set-up and every cell that defines a function, without the checks and tests."""
    return [strip_markers(c.source) for c in nb.cells if c.cell_type == "code" and not is_test(c) and _defines(c)]


def apply_edits(cells: list[str], edits: Mapping[str, str]) -> list[str]:
    """Replace each `old` text with `new`; `old` must occur in exactly one cell, once."""
    cells = list(cells)
    for old, new in edits.items():
        hits = [i for i, src in enumerate(cells) if old in src]
        if len(hits) != 1 or cells[hits[0]].count(old) != 1:
            raise ValueError(
                f"edit target must occur exactly once in the notebook's code; {old!r} occurs in {len(hits)} cells"
            )
        cells[hits[0]] = cells[hits[0]].replace(old, new)
    return cells


def load(path: Path | str, edits: Mapping[str, str] | None = None, *, mode: str = "tpu-interpret") -> dict[str, Any]:
    """Execute the definitions of the course's own notebook at `path` (after `edits`); return its namespace."""
    cells = apply_edits(definition_cells(read(path)), edits or {})
    namespace: dict[str, Any] = {"__name__": f"notebook:{Path(path).stem}"}
    for src in cells:
        exec(compile(src, str(path), "exec"), namespace)  # noqa: S102 - our own notebooks
        if "MODE" in namespace and "INTERP" not in namespace:
            namespace["MODE"] = mode
    return namespace
