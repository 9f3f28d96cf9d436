"""Typical beginner mistakes, as edits to a solution notebook's code, with what the student must read.

Each mistake is checked two ways (tests/test_mistakes.py): the first five lines the visible `check(...)`
cells show name it (`shown`, a regex), and the visible checks and the hidden checks agree (both fail, or
both pass: `hidden` lists the hidden tests that must fail; every other test of the edited kernel must pass).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import nbformat

from autograder.notebook_code import apply_edits


@dataclass(frozen=True)
class Mistake:
    name: str
    why: str                        # the mistake, in a student's terms
    edits: dict[str, str]           # old text in the solution's code -> new text
    shown: str                      # regex the first five lines of the failing visible check must match
    hidden: tuple[str, ...]         # hidden tests that must fail
    passing: tuple[str, ...] = field(default=())   # hidden tests that must still pass


def _is_hidden_test(cell: Any) -> bool:
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nbg.get("grade")) and not nbg.get("solution")


def visible_cells(path: Path, edits: Mapping[str, str]) -> list[tuple[str, str]]:
    """(role, source) of the notebook's code, edited: definitions, then the tagged visible checks, in order."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and not _is_test(c)]
    sources = ["\n".join(l for l in c.source.splitlines() if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
               for c in cells]
    sources = apply_edits(sources, edits)
    roles = ["check" if "check" in c.metadata.get("tags", []) else "definition" if _defines(c) else "other"
             for c in cells]
    return [(r, s) for r, s in zip(roles, sources) if r != "other"]


def _is_test(cell: Any) -> bool:
    return _is_hidden_test(cell)


def _defines(cell: Any) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    return "parameters" in tags or gid == "setup" or "\ndef " in "\n" + cell.source


def run_visible(path: Path, edits: Mapping[str, str], *, mode: str = "tpu-interpret") -> tuple[dict[str, Any], str | None]:
    """Run the definitions and the visible checks; return the namespace and what the student reads first for
    the first failing check (None when every visible check passes)."""
    from pallas_course.check import failure_text

    namespace: dict[str, Any] = {"__name__": f"notebook:{path.stem}"}
    failure: str | None = None
    cells = visible_cells(path, edits)
    # Check cells also define inputs later cells use, so none is skipped before the first failure.
    for role, src in cells:
        if role == "check" and failure is not None:
            continue
        try:
            exec(compile(src, f"/tmp/ipykernel_0/{path.stem}.py", "exec"), namespace)   # noqa: S102
        except Exception as exc:   # noqa: BLE001 - a failing cell is what we look at
            if role == "definition":
                raise
            failure = failure or failure_text(exc)
        if "MODE" in namespace and "INTERP" not in namespace:
            namespace["MODE"] = mode
    return namespace, failure
