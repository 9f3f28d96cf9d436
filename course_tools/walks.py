"""The guided walks as the course repository reads them: a notebook walk's code from its lab's solution
notebook under the repository root, the rest as the wheel's pallas_course.walks reads it.

The student wheel never reads a solution notebook: `course release` writes a revealed lab's walk code into the
wheel's walks.yml (course_tools.release.baked_walks); here the same code is read from the checkout, so the site,
the tests and the maintainers see the walks as they stand.

Maintainers: `python -m course_tools.walks [ID]` prints each walk numbered, with its marks, its steps and the
current source hash (paste it into pallas_course/walks.yml once the notes and marks fit the code again). A
graded walk prints without marks; `python -m autograder.labs.lab_1_5` prints LAB·1.5's reading with its key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from autograder.course_manifest import REPO_ROOT
from pallas_course import notebooks
from pallas_course.walks import DATA_PATH, Walk, build, entries, find, render


def notebook_lines(path: Path, functions: list[str]) -> list[str]:
    """The `site:show` cells of the notebook at `path` that define `functions`, joined by one blank line."""
    shown = notebooks.shown_sources(notebooks.read(path))
    parts = []
    for name in functions:
        found = [t for t in (notebooks.def_text(src, name) for src in shown) if t is not None]
        if not found:
            raise LookupError(f"{path.name} has no {notebooks.SHOW_TAG!r} cell defining {name}()")
        parts.append(found[0].rstrip("\n"))
    return "\n\n".join(parts).split("\n")


def with_code(raw: dict[str, Any], root: Path) -> dict[str, Any]:
    """The walks.yml entry `raw` with a notebook walk's code read from `root` (as a release bakes it in), or why
    it cannot be read; other walks as they are."""
    source = raw["source"]
    if "notebook" not in source or "lines" in source or "withheld" in source:
        return raw
    path = root / source["notebook"]
    try:
        if not path.exists():
            raise LookupError(
                f"{source['notebook']} does not exist here (walks read the course repository's solution notebooks)"
            )
        read = {
            "lines": notebook_lines(path, list(source["functions"])),
            "origin": f"{source['notebook']}, site:show cells defining {', '.join(source['functions'])}",
        }
    except LookupError as e:
        read = {"withheld": str(e)}
    return {**raw, "source": {**source, **read}}


def walks(*, root: Path | str = REPO_ROOT, data: Path | str = DATA_PATH) -> list[Walk]:
    """Every walk in walks.yml, with its code read now (notebooks under `root`, packages as installed)."""
    return [build(with_code(raw, Path(root))) for raw in entries(Path(data))]


def walk(key: str, *, root: Path | str = REPO_ROOT, data: Path | str = DATA_PATH) -> Walk:
    """One walk by id ("matmul") or code ("WALK·matmul"); KeyError names the walks there are."""
    return build(with_code(find(key, entries(Path(data))), Path(root)))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--json":
        print(json.dumps([w.to_json() for w in walks()], indent=1, ensure_ascii=False))
        return 0
    for w in walks():
        if not args or w.id in args or w.code in args:
            print(render(w), end="\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
