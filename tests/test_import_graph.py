"""Imports point one way: course_tools -> autograder -> pallas_course. A student's wheel holds pallas_course
alone, so it must import nothing else of ours; the grader must not reach up into the instructor tools."""
from __future__ import annotations

import ast
import re
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
    assert imports == [], f"the wheel imports nbgrader: {imports}; nbgrader is the grader's (autograder.cells)"
    assert reads == [], (f"the wheel reads nbgrader cell metadata: {reads}; move the reading to autograder/cells.py, "
                         "the grader's one reader of it")


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in `path` but its docstrings (prose may name other parts)."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs]


# Folders of the repository that the wheel, installed alone, does not have; and git (the command, a `.git` folder).
REPOSITORY_PATHS = ("solutions/", "autograder/", "bench/")
GIT = re.compile(r"^git$|(^|/)\.git(/|$)")


def test_the_student_wheel_knows_nothing_of_the_repository() -> None:
    """Installed from its wheel, pallas_course has no repository around it: it names no repository root, no
    folder of the other parts, no git, and never reaches above its own folder."""
    wheel = sorted((ROOT / "pallas_course").rglob("*.py"))
    roots = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in wheel for node in ast.walk(ast.parse(p.read_text()))
             if (isinstance(node, ast.Name) and node.id == "REPO_ROOT")
             or (isinstance(node, ast.Attribute) and node.attr == "REPO_ROOT")
             or (isinstance(node, ast.alias) and node.name == "REPO_ROOT")]
    assert roots == [], (f"the wheel uses REPO_ROOT: {roots}; the repository root lives in "
                         "autograder.course_manifest, and what needs it belongs to the grader or course_tools")
    paths = [f"{p.relative_to(ROOT)}:{line} {text!r}" for p in wheel for line, text in _code_strings(p)
             if any(r in text for r in REPOSITORY_PATHS) or GIT.search(text)]
    assert paths == [], (f"the wheel's code names repository paths or git: {paths}; reading the repository belongs "
                         "to course_tools (solution notebooks: course_tools.walks; bench/ and the commit: "
                         "course_tools.bench_records) or the grader (autograder.course_manifest)")
    prose = [f"{p.relative_to(ROOT)}:{n}" for p in wheel for n, line in enumerate(p.read_text().splitlines(), 1)
             if any(r in line for r in REPOSITORY_PATHS)]
    assert prose == [], (f"the wheel's comments or docstrings point into the repository's folders: {prose}; "
                         "name a module (autograder.labs.lab_1_4), never a path a student does not have")
    above = [f"{p.relative_to(ROOT)}:{n}" for p in wheel for n, line in enumerate(p.read_text().splitlines(), 1)
             if "__file__" in line and (".parent.parent" in line or ".parents[" in line)]
    assert above == [], f"the wheel reaches above its own folder: {above}; it has only itself (and its data files)"


GRADER_FIELDS = {"source", "grader", "checks", "rubric"}


def test_the_student_wheel_s_manifest_has_no_grader_fields() -> None:
    """pallas_course.manifest is course.yml as a student may read it: no model-answer notebook, checks module,
    hidden-test description or rubric (the grader's schema, autograder.course_manifest, adds them;
    autograder.public_manifest leaves them out of the wheel's course.yml). The compile rule is public (issue 27):
    the notebook's "as graded" checks compile for its chips, as the grade does."""
    from pydantic import BaseModel

    from pallas_course import manifest

    models = [m for m in vars(manifest).values()
              if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == manifest.__name__]
    found = sorted(f"{m.__name__}.{f}" for m in models for f in m.model_fields if f in GRADER_FIELDS)
    assert models and found == [], (f"the wheel's course.yml schema has grader fields: {found}; move them to "
                                     "autograder/course_manifest.py")
    assert "compile" in manifest.LabSpec.model_fields and manifest.Manifest.compile_rule


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
    assert readers == ["autograder/cells.py", "autograder/doors/nbgrader_engine.py", "autograder/fingerprint.py"]


# What the grader or the tools do, by name, and where it lives.
NOT_THE_WHEELS = {
    "with_key": "autograder/labs/walk_key.py", "public_manifest": "autograder/public_manifest.py",
    "apply_edits": "autograder (the notebooks' edits)", "definition_cells": "autograder (cells)",
    "grade_id": "autograder/cells.py", "is_test_cell": "autograder/cells.py",
    "from_data": "autograder/judge/parse.py (the grader parses the jail's description itself)",
    "MalformedTrace": "autograder/judge/parse.py (Refused)", "to_data": "autograder/judge/structure.py (structure_data)",
    "notebook_lines": "course_tools/walks.py", "course_commit": "course_tools/bench_records.py",
    "append_records": "course_tools/bench_records.py", "read_records": "course_tools/bench_records.py",
    "default_out_dir": "course_tools/bench_records.py",
}


def test_the_grader_s_own_helpers_live_in_the_grader() -> None:
    """The key's overlay on a walk, the public cut of course.yml, the validation of what the jail sends, reading
    the solution notebooks and keeping bench records are the grader's or the tools', not the wheel's."""
    defined = {f"{node.name} (pallas_course/{p.relative_to(ROOT / 'pallas_course')}:{node.lineno})": node.name
               for p in sorted((ROOT / "pallas_course").rglob("*.py")) for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in NOT_THE_WHEELS}
    assert not defined, "; ".join(f"{where} belongs in {NOT_THE_WHEELS[name]}" for where, name in defined.items())


# ---- the grader's folders (issue 30)
# autograder/ is split by where code runs and what it decides: each folder and the folders it may import
# ("top": the modules directly in autograder/, which every folder may use; pallas_course is open to all but the
# wheel's rules above). Each folder's __init__.py says the same in words.
GRADER_FOLDERS: dict[str, set[str]] = {
    "jail_agent": set(),                                        # inside the jail, bound alone: nothing of ours
    "top": {"top"},                                             # course_manifest, cells, untrusted, fingerprint...
    "jail": {"top", "jail_agent", "judge"},                     # a session starts the judge beside the jail
    "judge": {"top", "jail_agent", "jail"},                     # the box borrows the jail's limits and errors
    "labs": {"top", "jail_agent", "jail", "judge"},             # the checks call through the jail, compile
    "steps": {"top", "jail_agent", "jail", "judge", "labs"},    # execute runs the checks
    "doors": {"top", "jail_agent", "jail", "judge", "labs", "steps", "doors"},
}
MAX_TOP_MODULES = 15


def _grader_folder(module: str) -> str:
    """Which of GRADER_FOLDERS an autograder module (dotted) belongs to."""
    parts = module.split(".")
    if parts[:3] == ["autograder", "jail", "jail_agent"]:
        return "jail_agent"
    if len(parts) > 1 and parts[1] in GRADER_FOLDERS.keys() - {"top", "jail_agent"}:
        return parts[1]
    return "top"


def grader_back_edges(root: Path = ROOT) -> list[str]:
    edges = []
    for path in sorted((root / "autograder").rglob("*.py")):
        me = _grader_folder(_module_name(path, root))
        for line, module in _imports(path, root):
            if module.split(".")[0] != "autograder":
                continue
            it = _grader_folder(module)
            if it != me and it not in GRADER_FOLDERS[me]:
                edges.append(f"{path.relative_to(root)}:{line} imports {module} (autograder/{me} may import "
                             f"{', '.join(sorted(GRADER_FOLDERS[me])) or 'nothing of autograder'})")
    return edges


def test_each_grader_folder_imports_only_the_folders_below_it() -> None:
    assert grader_back_edges() == []


def test_every_grader_folder_is_declared() -> None:
    """A new folder in autograder/ is given its line here (and a docstring saying it) before it holds code."""
    folders = sorted(p.name for p in (ROOT / "autograder").iterdir() if p.is_dir() and any(p.glob("*.py")))
    assert set(folders) <= set(GRADER_FOLDERS), f"undeclared folders: {set(folders) - set(GRADER_FOLDERS)}"


def test_the_agent_imports_only_itself() -> None:
    """The agent runs inside the jail from its bound folder, as the top-level package `jail_agent`, with no
    autograder around it: its imports of ours are relative (into itself) or pallas_course (bound beside it)."""
    agent = ROOT / "autograder" / "jail" / "jail_agent"
    found = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in sorted(agent.rglob("*.py"))
             for node in ast.walk(ast.parse(p.read_text()))
             if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                 and node.module.split(".")[0] in ("autograder", "jail_agent", "course_tools"))
             or (isinstance(node, ast.ImportFrom) and node.level > 1)
             or (isinstance(node, ast.Import)
                 and any(a.name.split(".")[0] in ("autograder", "jail_agent", "course_tools") for a in node.names))]
    assert found == [], f"the agent imports outside its folder: {found} (inside the jail only it is there)"


def test_the_grader_keeps_few_modules_at_its_top() -> None:
    top = sorted(p.name for p in (ROOT / "autograder").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in autograder/: {top}; give them a folder"


@pytest.mark.parametrize("folder", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "autograder").rglob("*")
                                          if p.is_dir() and any(p.glob("*.py"))))
def test_each_grader_folder_says_what_lives_there(folder: str) -> None:
    init = ROOT / folder / "__init__.py"
    assert init.is_file(), f"{folder} has no __init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc.split()) >= 15, f"{folder}/__init__.py: say in a paragraph what lives there"


def test_the_folder_check_finds_a_back_edge(tmp_path: Path) -> None:
    """The check itself: a step reaching up into a door, and the agent into the grader, are caught."""
    for folder in ("autograder", "autograder/steps", "autograder/doors", "autograder/jail",
                   "autograder/jail/jail_agent"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "autograder/steps/x.py").write_text("def f():\n    from autograder.doors import batch\n")
    (tmp_path / "autograder/jail/jail_agent/y.py").write_text("import autograder.cells\n")
    assert grader_back_edges(tmp_path) == [
        "autograder/jail/jail_agent/y.py:1 imports autograder.cells (autograder/jail_agent may import nothing of "
        "autograder)",
        "autograder/steps/x.py:2 imports autograder.doors (autograder/steps may import jail, jail_agent, judge, "
        "labs, top)"]


def test_every_parse_of_python_source_is_one_at_a_time(monkeypatch) -> None:
    """CPython 3.11's AST converter is not safe on two threads at once (pallas_course.pyparse): the grader parses
    on two (its fingerprint meanwhile), so no module calls ast.parse but pyparse, and pyparse serializes."""
    import threading
    import time

    from pallas_course import pyparse

    direct = [f"{p.relative_to(ROOT)}:{n}" for pkg in ("autograder", "pallas_course", "course_tools")
              for p in sorted((ROOT / pkg).rglob("*.py")) if p.name != "pyparse.py"
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"\bast\.parse\(", line)]
    assert not direct, direct

    inside, overlaps, real = [0], [], ast.parse

    def slow_parse(source, filename="<unknown>"):
        inside[0] += 1
        overlaps.append(inside[0])
        time.sleep(0.01)
        inside[0] -= 1
        return real(source, filename)

    monkeypatch.setattr(ast, "parse", slow_parse)
    threads = [threading.Thread(target=lambda: [pyparse.parse("x = 1") for _ in range(20)]) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(overlaps) == 60 and max(overlaps) == 1
