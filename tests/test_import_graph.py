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


def _import_aliases(path: Path, root: Path) -> list[tuple[int, str, ast.alias, bool]]:
    """(line, absolute module, alias, from-import) for each name every import in `path` binds, relative ones
    resolved, lazy (function-level) and TYPE_CHECKING ones included: `import a.b as c` gives ("a.b", c, False),
    `from .m import x` gives ("<its package>.m", x, True)."""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, alias, False) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            found += [(node.lineno, module, alias, True) for alias in node.names]
    return found


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in `path`, relative ones resolved, lazy ones included."""
    return list(dict.fromkeys((line, module) for line, module, _, _ in _import_aliases(path, root)))


def back_edges(parts: dict[str, set[str]] = ALLOWED, root: Path = ROOT) -> list[str]:
    edges = []
    for part, allowed in parts.items():
        for path in sorted((root / part).rglob("*.py")):
            for line, module in _imports(path, root):
                top = module.split(".")[0]
                if top in parts and top not in allowed:
                    edges.append(
                        f"{path.relative_to(root)}:{line} imports {module} ({part} may import "
                        f"{', '.join(sorted(allowed))})"
                    )
    return edges


def test_no_part_imports_a_part_above_it() -> None:
    assert back_edges() == []


def test_the_walk_finds_a_back_edge(tmp_path: Path) -> None:
    """The check itself: a lazy, relative-free import from the student package into the grader is caught."""
    (tmp_path / "pallas_course").mkdir()
    (tmp_path / "pallas_course" / "__init__.py").write_text("")
    (tmp_path / "pallas_course" / "x.py").write_text("def f():\n    from autograder.grade import grade\n")
    assert back_edges(ALLOWED, tmp_path) == [
        "pallas_course/x.py:2 imports autograder.grade (pallas_course may import pallas_course)"
    ]


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_every_part_is_a_package(part: str) -> None:
    assert (ROOT / part / "__init__.py").is_file()


# What each part holds, beyond the arrows: the student wheel knows notebooks as a student sees them and nothing
# of nbgrader; presentation (tables, progress) and benchmarks live with the tools, not in the grader.
PRESENTATION = ("rich.table", "rich.progress", "rich.console")


def _modules(part: str) -> dict[Path, list[tuple[int, str]]]:
    return {p: _imports(p, ROOT) for p in sorted((ROOT / part).rglob("*.py"))}


def test_the_student_wheel_knows_nothing_of_nbgrader() -> None:
    imports = [
        f"{p.relative_to(ROOT)}:{line} {m}"
        for p, found in _modules("pallas_course").items()
        for line, m in found
        if m.split(".")[0] == "nbgrader"
    ]
    reads = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for p in sorted((ROOT / "pallas_course").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Constant) and node.value == "nbgrader"
    ]
    assert imports == [], f"the wheel imports nbgrader: {imports}; nbgrader is the grader's (autograder.cells)"
    assert reads == [], (
        f"the wheel reads nbgrader cell metadata: {reads}; move the reading to autograder/cells.py, "
        "the grader's one reader of it"
    )


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in `path` but its docstrings (prose may name other parts)."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


# Folders of the repository that the wheel, installed alone, does not have; and git (the command, a `.git` folder).
REPOSITORY_PATHS = ("solutions/", "autograder/", "bench/")
GIT = re.compile(r"^git$|(^|/)\.git(/|$)")


def test_the_student_wheel_knows_nothing_of_the_repository() -> None:
    """Installed from its wheel, pallas_course has no repository around it: it names no repository root, no
    folder of the other parts, no git, and never reaches above its own folder."""
    wheel = sorted((ROOT / "pallas_course").rglob("*.py"))
    roots = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for p in wheel
        for node in ast.walk(ast.parse(p.read_text()))
        if (isinstance(node, ast.Name) and node.id == "REPO_ROOT")
        or (isinstance(node, ast.Attribute) and node.attr == "REPO_ROOT")
        or (isinstance(node, ast.alias) and node.name == "REPO_ROOT")
    ]
    assert roots == [], (
        f"the wheel uses REPO_ROOT: {roots}; the repository root lives in "
        "autograder.course_manifest, and what needs it belongs to the grader or course_tools"
    )
    paths = [
        f"{p.relative_to(ROOT)}:{line} {text!r}"
        for p in wheel
        for line, text in _code_strings(p)
        if any(r in text for r in REPOSITORY_PATHS) or GIT.search(text)
    ]
    assert paths == [], (
        f"the wheel's code names repository paths or git: {paths}; reading the repository belongs "
        "to course_tools (solution notebooks: course_tools.walks; bench/ and the commit: "
        "course_tools.bench_records) or the grader (autograder.course_manifest)"
    )
    prose = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in wheel
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if any(r in line for r in REPOSITORY_PATHS)
    ]
    assert prose == [], (
        f"the wheel's comments or docstrings point into the repository's folders: {prose}; "
        "name a module (autograder.labs.lab_1_4), never a path a student does not have"
    )
    above = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in wheel
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "__file__" in line and (".parent.parent" in line or ".parents[" in line)
    ]
    assert above == [], f"the wheel reaches above its own folder: {above}; it has only itself (and its data files)"


GRADER_FIELDS = {"source", "grader", "checks", "rubric"}


def test_the_student_wheel_s_manifest_has_no_grader_fields() -> None:
    """pallas_course.manifest is course.yml as a student may read it: no model-answer notebook, checks module,
    hidden-test description or rubric (the grader's schema, autograder.course_manifest, adds them;
    autograder.public_manifest leaves them out of the wheel's course.yml). The compile rule is public (issue 27):
    the notebook's "as graded" checks compile for its chips, as the grade does."""
    from pydantic import BaseModel

    from pallas_course import manifest

    models = [
        m
        for m in vars(manifest).values()
        if isinstance(m, type) and issubclass(m, BaseModel) and m.__module__ == manifest.__name__
    ]
    found = sorted(f"{m.__name__}.{f}" for m in models for f in m.model_fields if f in GRADER_FIELDS)
    assert models and found == [], (
        f"the wheel's course.yml schema has grader fields: {found}; move them to autograder/course_manifest.py"
    )
    assert "compile" in manifest.LabSpec.model_fields and manifest.Manifest.compile_rule


def test_presentation_and_benchmarks_are_not_the_graders() -> None:
    shown = [
        f"{p.relative_to(ROOT)}:{line} {m}"
        for p, found in _modules("autograder").items()
        for line, m in found
        if m.startswith(PRESENTATION)
    ]
    assert shown == []
    assert not [p.name for p in (ROOT / "autograder").glob("*.py") if p.name.startswith(("bench", "demo"))]


def test_one_reader_of_nbgrader_metadata_in_the_grader() -> None:
    """Only autograder/cells.py reads or writes a cell's `nbgrader` metadata (the other mentions: nbgrader's
    resources in its door, the package's version in the fingerprint)."""
    readers = sorted(
        {
            str(p.relative_to(ROOT))
            for p in sorted((ROOT / "autograder").rglob("*.py"))
            for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, ast.Constant) and node.value == "nbgrader"
        }
    )
    assert readers == ["autograder/cells.py", "autograder/doors/nbgrader_engine.py", "autograder/fingerprint.py"]


# What the grader or the tools do, by name, and where it lives.
NOT_THE_WHEELS = {
    "with_key": "autograder/labs/walk_key.py",
    "public_manifest": "autograder/public_manifest.py",
    "apply_edits": "autograder (the notebooks' edits)",
    "definition_cells": "autograder (cells)",
    "grade_id": "autograder/cells.py",
    "is_test_cell": "autograder/cells.py",
    "from_data": "autograder/judge/parse.py (the grader parses the jail's description itself)",
    "MalformedTrace": "autograder/judge/parse.py (Refused)",
    "to_data": "autograder/judge/structure.py (structure_data)",
    "notebook_lines": "course_tools/walks.py",
    "course_commit": "course_tools/bench_records.py",
    "append_records": "course_tools/bench_records.py",
    "read_records": "course_tools/bench_records.py",
    "default_out_dir": "course_tools/bench_records.py",
}


def test_the_grader_s_own_helpers_live_in_the_grader() -> None:
    """The key's overlay on a walk, the public cut of course.yml, the validation of what the jail sends, reading
    the solution notebooks and keeping bench records are the grader's or the tools', not the wheel's."""
    defined = {
        f"{node.name} (pallas_course/{p.relative_to(ROOT / 'pallas_course')}:{node.lineno})": node.name
        for p in sorted((ROOT / "pallas_course").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in NOT_THE_WHEELS
    }
    assert not defined, "; ".join(f"{where} belongs in {NOT_THE_WHEELS[name]}" for where, name in defined.items())


# ---- the grader's folders (issue 30)
# autograder/ is split by where code runs and what it decides: each folder and the folders it may import
# ("top": the modules directly in autograder/, which every folder may use; pallas_course is open to all but the
# wheel's rules above). Each folder's __init__.py says the same in words.
GRADER_FOLDERS: dict[str, set[str]] = {
    "jail_agent": set(),  # inside the jail, bound alone: nothing of ours
    "top": {"top"},  # failures, held, course_manifest, cells, fingerprint...
    "confine": {"top"},  # what any child is held to: no jail, no judge
    "jail": {"top", "jail_agent", "confine"},  # the jail never knows a judge exists
    "judge": {"top", "jail_agent", "confine"},  # nor the judge a jail: siblings on confine/
    "session": {"top", "jail_agent", "confine", "jail", "judge"},  # one submission's jail and judge, together
    "labs": {"top", "jail_agent", "judge", "session"},  # the checks call through the session, compile
    "steps": {"top", "jail_agent", "jail", "judge", "session", "labs"},  # execute runs the checks
    "doors": {"top", "jail_agent", "confine", "jail", "judge", "session", "labs", "steps", "doors"},
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
                edges.append(
                    f"{path.relative_to(root)}:{line} imports {module} (autograder/{me} may import "
                    f"{', '.join(sorted(GRADER_FOLDERS[me])) or 'nothing of autograder'})"
                )
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
    found = [
        f"{p.relative_to(ROOT)}:{node.lineno}"
        for p in sorted(agent.rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] in ("autograder", "jail_agent", "course_tools")
        )
        or (isinstance(node, ast.ImportFrom) and node.level > 1)
        or (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] in ("autograder", "jail_agent", "course_tools") for a in node.names)
        )
    ]
    assert found == [], f"the agent imports outside its folder: {found} (inside the jail only it is there)"


def test_the_grader_keeps_few_modules_at_its_top() -> None:
    top = sorted(p.name for p in (ROOT / "autograder").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules directly in autograder/: {top}; give them a folder"


@pytest.mark.parametrize(
    "folder",
    sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "autograder").rglob("*") if p.is_dir() and any(p.glob("*.py"))
    ),
)
def test_each_grader_folder_says_what_lives_there(folder: str) -> None:
    init = ROOT / folder / "__init__.py"
    assert init.is_file(), f"{folder} has no __init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc.split()) >= 15, f"{folder}/__init__.py: say in a paragraph what lives there"


def test_the_folder_check_finds_a_back_edge(tmp_path: Path) -> None:
    """The check itself: a step reaching up into a door, and the agent into the grader, are caught."""
    for folder in (
        "autograder",
        "autograder/steps",
        "autograder/doors",
        "autograder/jail",
        "autograder/jail/jail_agent",
    ):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "autograder/steps/x.py").write_text("def f():\n    from autograder.doors import batch\n")
    (tmp_path / "autograder/jail/jail_agent/y.py").write_text("import autograder.cells\n")
    assert grader_back_edges(tmp_path) == [
        "autograder/jail/jail_agent/y.py:1 imports autograder.cells (autograder/jail_agent may import nothing of "
        "autograder)",
        "autograder/steps/x.py:2 imports autograder.doors (autograder/steps may import jail, jail_agent, judge, "
        "labs, session, top)",
    ]


def test_every_parse_of_python_source_is_one_at_a_time(monkeypatch) -> None:
    """CPython 3.11's AST converter is not safe on two threads at once (pallas_course.pyparse): the grader parses
    on two (its fingerprint meanwhile), so no module calls ast.parse but pyparse, and pyparse serializes."""
    import threading
    import time

    from pallas_course import pyparse

    direct = [
        f"{p.relative_to(ROOT)}:{n}"
        for pkg in ("autograder", "pallas_course", "course_tools")
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if p.name != "pyparse.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bast\.parse\(", line)
    ]
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


# ---- one graph of modules: no import cycle (R1), no private name read across modules (R2), pallas_course's layers
# Every module of the three packages and compat's scripts, by dotted name (pallas_course/vendored/, built by `course
# release`, holds tokamax's files verbatim: not ours). tests/ is not held to R1 and R2: a test may reach in.
FIRST_PARTY = ("autograder", "pallas_course", "course_tools", "compat")
NOT_OURS = ("pallas_course/vendored/",)


def _first_party_modules(root: Path = ROOT) -> dict[str, Path]:
    return {
        _module_name(p, root): p
        for part in FIRST_PARTY
        if (root / part).is_dir()
        for p in sorted((root / part).rglob("*.py"))
        if not p.relative_to(root).as_posix().startswith(NOT_OURS)
    }


def module_edges(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """Each first-party module -> {first-party module it imports: the first line}, lazy and TYPE_CHECKING imports
    included. `from pkg import module` is an edge to that module; `from m import name` and `import a.b` to the
    longest first-party prefix (m, a.b)."""
    modules = _first_party_modules(root)
    edges: dict[str, dict[str, int]] = {m: {} for m in modules}
    for m, path in modules.items():
        for line, module, alias, from_import in _import_aliases(path, root):
            target = f"{module}.{alias.name}" if from_import else module
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != m:
                edges[m].setdefault(target, line)
    return edges


def import_cycles(root: Path = ROOT) -> list[str]:
    """R1: each strongly connected component of more than one module (Tarjan), as its edges."""
    edges = module_edges(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [
        "; ".join(f"{m} -> {t} (line {edges[m][t]})" for m in cycle for t in sorted(edges[m]) if t in cycle)
        for cycle in sorted(cycles)
    ]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` of an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def private_reads(root: Path = ROOT) -> list[str]:
    """R2: `from m import _x` of a first-party module m, and `alias._x` where alias names a first-party module
    (`import m as alias`, `from pkg import m`, `import a.b` then `a.b._x`). Dunders are public; a private module's
    public names (`from ._app import app`) are not private reads."""
    modules = _first_party_modules(root)
    found = []
    for m, path in modules.items():
        where = path.relative_to(root)
        bound: dict[str, str] = {}  # a name in this module -> the first-party module it is bound to
        for line, module, alias, from_import in _import_aliases(path, root):
            if from_import and f"{module}.{alias.name}" in modules:
                bound[alias.asname or alias.name] = f"{module}.{alias.name}"
            elif from_import and module in modules and _private(alias.name):
                found.append(f"{where}:{line} imports {alias.name} from {module}")
            elif not from_import and alias.asname and module in modules:
                bound[alias.asname] = module
            elif not from_import and module.split(".")[0] in modules:
                bound[module.split(".")[0]] = module.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                head, _, rest = (_dotted(node.value) or "").partition(".")
                target = ".".join(filter(None, (bound.get(head), rest))) if head in bound else None
                if target in modules and target != m:
                    found.append(f"{where}:{node.lineno} reads {target}.{node.attr}")
    return found


def test_no_import_cycles() -> None:
    """R1: a cycle hidden behind a function-level import is still a cycle (the grader imports lazily to keep jax
    out until it is needed, so lazy imports are allowed; cycles are not)."""
    cycles = import_cycles()
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_no_private_name_crosses_a_module() -> None:
    """R2: a name with a leading underscore is its module's own; another module that needs it needs a public name."""
    reads = private_reads()
    assert reads == [], "private names read across modules:\n" + "\n".join(reads)


# pallas_course's order (no file moves: the notebooks import these paths). A module imports only its own layer or
# a lower one, lazy imports included; R1 keeps each layer acyclic. A new module gets its line here.
PALLAS_COURSE_LAYERS: dict[int, set[str]] = {
    0: {
        "__init__",
        "manifest",
        "tiling",
        "kernel_trace",
        "step_work",
        "errors",
        "rules",
        "pyparse",
        "xla_flags",
        "vendored",
        "notebooks",
        "copy_rules",
        "precision",
    },  # facts and formats
    1: {
        "chips",
        "legality",
        "cost_model",
        "schedule",
        "kernel_lines",
        "tpu_compile",
        "compile_verdict",
        "graded_compile",
        "compare",
    },  # models of the TPU, the compiler, comparison
    2: {"lab_1_3_rules", "lab_1_4_rules", "lab_1_6_rules", "walks"},  # the labs' rules and cases (the grader's too)
    3: {
        "runtime",
        "check",
        "lab_checks",
        "lab_1_4_checks",
        "lab_1_4_demos",
        "bench",
        "tokamax_reading",
        "schedule_svg",
        "trace_svg",
        "tensorcore_svg",
    },  # what notebook cells call, and the figures
}


def _pallas_course_layer_of(layers: dict[int, set[str]]) -> dict[str, int]:
    return {
        "pallas_course" if name == "__init__" else f"pallas_course.{name}": n
        for n, names in layers.items()
        for name in names
    }


def layer_violations(root: Path = ROOT, layers: dict[int, set[str]] = PALLAS_COURSE_LAYERS) -> list[str]:
    layer_of = _pallas_course_layer_of(layers)
    modules = _first_party_modules(root)
    return [
        f"{modules[m].relative_to(root)}:{line} imports {t} (layer {layer_of[t]}) from layer {layer_of[m]}"
        for m, targets in sorted(module_edges(root).items())
        if m in layer_of
        for t, line in sorted(targets.items())
        if layer_of.get(t, -1) > layer_of[m]
    ]


def unplaced_modules(root: Path = ROOT, layers: dict[int, set[str]] = PALLAS_COURSE_LAYERS) -> list[str]:
    layer_of = _pallas_course_layer_of(layers)
    return sorted(m for m in _first_party_modules(root) if m.split(".")[0] == "pallas_course" and m not in layer_of)


def test_no_pallas_course_module_imports_a_higher_layer() -> None:
    assert layer_violations() == []


def test_every_pallas_course_module_has_a_layer() -> None:
    layer_of = _pallas_course_layer_of(PALLAS_COURSE_LAYERS)
    assert sum(map(len, PALLAS_COURSE_LAYERS.values())) == len(layer_of), "a module is placed in two layers"
    assert unplaced_modules() == [], "give each a layer in PALLAS_COURSE_LAYERS"
    gone = sorted(set(layer_of) - set(_first_party_modules()))
    assert gone == [], f"PALLAS_COURSE_LAYERS places modules that do not exist: {gone}"


def test_the_graph_checks_find_a_planted_violation(tmp_path: Path) -> None:
    """The checks themselves: a cycle through a lazy and a TYPE_CHECKING import, `from pkg import module`, private
    reads both ways, an upward import and an unplaced module are caught; a dunder and tests/ are not."""
    files = {
        "pallas_course/__init__.py": "",
        "pallas_course/rules.py": "_secret = 1\n",
        "pallas_course/compare.py": "def f():\n    from pallas_course import check\n",
        "pallas_course/check.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pallas_course.compare import f\n"
        ),
        "pallas_course/new.py": "from pallas_course.rules import _secret\n",
        "autograder/__init__.py": "",
        "autograder/x.py": (
            "import pallas_course.rules as r\nfrom pallas_course import rules\n"
            "import pallas_course.rules\nfrom pallas_course import __version__\n"
            "a, b, c, d = r._secret, rules._secret, pallas_course.rules._secret, rules.__name__\n"
        ),
        "tests/test_x.py": "from pallas_course.rules import _secret\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert import_cycles(tmp_path) == [
        "pallas_course.check -> pallas_course.compare (line 3); pallas_course.compare -> pallas_course.check (line 2)"
    ]
    assert private_reads(tmp_path) == [
        "autograder/x.py:5 reads pallas_course.rules._secret",
        "autograder/x.py:5 reads pallas_course.rules._secret",
        "autograder/x.py:5 reads pallas_course.rules._secret",
        "pallas_course/new.py:1 imports _secret from pallas_course.rules",
    ]
    layers = {0: {"__init__", "rules"}, 1: {"compare"}, 3: {"check"}}
    assert layer_violations(tmp_path, layers) == [
        "pallas_course/compare.py:2 imports pallas_course.check (layer 3) from layer 1"
    ]
    assert unplaced_modules(tmp_path, layers) == ["pallas_course.new"]
