"""Imports point one way: course_tools -> autograder -> pallas_course. A student's wheel holds pallas_course
alone, so it must import nothing else of ours; the grader must not reach up into the instructor tools."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each part and the parts it may import (itself included).
ALLOWED = {
    "pallas_course": {"pallas_course"},
    "autograder": {"autograder", "pallas_course"},
    "course_tools": {"course_tools", "autograder", "pallas_course"},
}


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in `path`, relative ones resolved, lazy ones included."""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            found.append((node.lineno, ".".join([*base, node.module] if node.module else base)))
    return found


def back_edges(parts: dict[str, set[str]] = ALLOWED, root: Path = ROOT) -> list[str]:
    edges = []
    for part, allowed in parts.items():
        for path in sorted((root / part).rglob("*.py")):
            for line, module in _imports(path, root):
                top = module.split(".")[0]
                if top in parts and top not in allowed:
                    edges.append(f"{path.relative_to(root)}:{line} imports {module} ({part} may import "
                                 f"{', '.join(sorted(allowed))})")
    return edges


def test_no_part_imports_a_part_above_it() -> None:
    assert back_edges() == []


def test_the_walk_finds_a_back_edge(tmp_path: Path) -> None:
    """The check itself: a lazy, relative-free import from the student package into the grader is caught."""
    (tmp_path / "pallas_course").mkdir()
    (tmp_path / "pallas_course" / "__init__.py").write_text("")
    (tmp_path / "pallas_course" / "x.py").write_text("def f():\n    from autograder.grade import grade\n")
    assert back_edges(ALLOWED, tmp_path) == [
        "pallas_course/x.py:2 imports autograder.grade (pallas_course may import pallas_course)"]


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_every_part_is_a_package(part: str) -> None:
    assert (ROOT / part / "__init__.py").is_file()


# What each part holds, beyond the arrows: the student wheel knows notebooks as a student sees them and nothing
# of nbgrader; presentation (tables, progress) and benchmarks live with the tools, not in the grader.
PRESENTATION = ("rich.table", "rich.progress", "rich.console")


def _modules(part: str) -> dict[Path, list[tuple[int, str]]]:
    return {p: _imports(p, ROOT) for p in sorted((ROOT / part).rglob("*.py"))}


def test_the_student_wheel_knows_nothing_of_nbgrader() -> None:
    imports = [f"{p.relative_to(ROOT)}:{line} {m}" for p, found in _modules("pallas_course").items()
               for line, m in found if m.split(".")[0] == "nbgrader"]
    reads = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in sorted((ROOT / "pallas_course").rglob("*.py"))
             for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Constant) and node.value == "nbgrader"]
    assert imports == [] and reads == []


def test_presentation_and_benchmarks_are_not_the_graders() -> None:
    shown = [f"{p.relative_to(ROOT)}:{line} {m}" for p, found in _modules("autograder").items()
             for line, m in found if m.startswith(PRESENTATION)]
    assert shown == []
    assert not [p.name for p in (ROOT / "autograder").glob("*.py") if p.name.startswith(("bench", "demo"))]


def test_one_reader_of_nbgrader_metadata_in_the_grader() -> None:
    """Only autograder/cells.py reads or writes a cell's `nbgrader` metadata (the other mentions: nbgrader's
    resources in its door, the package's version in the fingerprint)."""
    readers = sorted({str(p.relative_to(ROOT)) for p in sorted((ROOT / "autograder").rglob("*.py"))
                      for node in ast.walk(ast.parse(p.read_text()))
                      if isinstance(node, ast.Constant) and node.value == "nbgrader"})
    assert readers == ["autograder/cells.py", "autograder/fingerprint.py", "autograder/nbgrader_engine.py"]


def test_the_grader_s_own_helpers_live_in_the_grader() -> None:
    """The key's overlay on a walk and the public cut of course.yml are the grader's, not the wheel's."""
    defined = {node.name for p in sorted((ROOT / "pallas_course").rglob("*.py"))
               for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.FunctionDef)}
    assert not defined & {"with_key", "public_manifest", "apply_edits", "definition_cells", "grade_id", "is_test_cell"}
