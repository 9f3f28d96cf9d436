"""What decides a score, as one hash: which grader graded a submission, and whether a batch changed it.

`grader_fingerprint(lab)` covers what decides that lab's scores and nothing else:
- the lab's notebooks (its solutions/ source, which holds the hidden tests, and the released notebook),
- the code that runs while it is graded: the grading steps (SCORING_ENTRY), the agent in the jail, the lab's
  checks module, and every module of ours these import, or the lab's notebooks import, found by reading
  their imports (so the engine and whatever rebuilds a student's computation come in with the engine,
  and a report table, the exports or the instructor tools do not),
- the parts of course.yml a grade reads: the stage, the lab's own entry (tests, points, written answers and
  their rubric) and the chips,
- the versions of jax, numpy, nbgrader and the notebook stack.
Python files are hashed as their syntax tree without docstrings, so a comment, a docstring or a layout edit
regrades nothing. A worker stamps its results with the fingerprint (a result from a different grader is
refused) and a stored record keeps it (a re-run reuses a record only while it still matches).

`GraderFilesGuard` stops a --no-jail batch whose notebooks changed any file of the course's code (every
module of the three parts, not only the scoring ones: a report could be forged too).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from pathlib import Path

import nbformat

from autograder.course_manifest import REPO_ROOT, LabSpec, manifest
from pallas_course import pyparse

PACKAGES = ("autograder", "pallas_course")  # where modules that decide a score can live
# The grading steps and the agent in the jail: where the walk of imports starts.
SCORING_ENTRY = (
    "autograder.steps.pipeline",
    "autograder.doors.nbgrader_engine",
    "autograder.jail.jail_agent.agent",
    "autograder.jail.jail_agent.calls",
    "autograder.jail.jail_agent.wire",
)
JAIL_PACKAGE = "jail_agent"  # how the agent's package is named inside the jail
# Data the checks read: answer keys (autograder/keys/), the walks' lines and notes (LAB·1.5's reading).
SCORING_DATA = ("autograder/keys", "pallas_course/walks.yml")
# Installed packages that decide a score too (an upgrade regrades).
SCORING_PACKAGES = ("jax", "jaxlib", "numpy", "ml_dtypes", "nbgrader", "nbclient", "papermill", "ipykernel", "tokamax")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError as e:
        h.update(f"unreadable: {e}".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------------- which modules score


def _module_file(name: str, root: Path) -> Path | None:
    if name.split(".")[0] == JAIL_PACKAGE:
        name = "autograder.jail." + name
    if name.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported(tree: ast.AST, package: list[str]) -> set[str]:
    """Every module `tree` imports (lazy ones too; relative ones resolved against `package`), and for
    `from a import b` both `a` and `a.b` (b may be a module)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            names |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return names


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return st.st_mtime_ns, st.st_size


def _notebook_imports(path: Path) -> frozenset[str]:
    return _notebook_imports_at(path, *_stamp(path))


@functools.lru_cache(maxsize=64)
def _notebook_imports_at(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """The modules a notebook's code cells import (cells that are not Python, e.g. magics, are skipped)."""
    names: set[str] = set()
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError):
        return names
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        source = "\n".join(line for line in str(cell.source).split("\n") if not line.lstrip().startswith(("%", "!")))
        try:
            names |= _imported(pyparse.parse(source), [])
        except SyntaxError:
            continue
    return frozenset(names)


@functools.lru_cache(maxsize=512)
def _module_imports_at(path: Path, root: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """What the module at `path` imports (with the packages above each), read once per version of the file."""
    try:
        tree = pyparse.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return frozenset()  # hashed as it is (see _file_hash); it imports nothing we can read
    package = list(path.relative_to(root).parent.parts)
    return frozenset(m for name in _imported(tree, package) for m in _with_parents(name))


def scoring_modules(start: set[str], root: Path = REPO_ROOT) -> list[Path]:
    """The files of our modules in `start` and of every module of ours they import, transitively."""
    seen: dict[Path, None] = {}
    todo = [m for name in start for m in _with_parents(name)]
    while todo:
        path = _module_file(todo.pop(), root)
        if path is None or path in seen:
            continue
        seen[path] = None
        todo += _module_imports_at(path, root, *_stamp(path))
    return sorted(seen)


def lab_files(lab: LabSpec | None, root: Path = REPO_ROOT) -> list[Path]:
    """The files that decide `lab`'s scores (the grading code alone for no lab)."""
    start = set(SCORING_ENTRY)
    notebooks: list[Path] = []
    if lab is not None:
        notebooks = [root / lab.source, root / lab.notebook]
        start |= {lab.grader} if lab.grader else set()
        for nb in notebooks:
            start |= _notebook_imports(nb)
    data = [
        f
        for d in SCORING_DATA
        for f in ([root / d] if (root / d).is_file() else sorted((root / d).rglob("*")))
        if not f.is_dir()
    ]
    return scoring_modules(start, root) + notebooks + data


def grader_files(root: Path = REPO_ROOT) -> list[Path]:
    """Every file a --no-jail submission must never change: all of the course's code, its notebooks and
    course.yml (what decides a score, and what reports it)."""
    code = [p for part in (*PACKAGES, "course_tools") for p in sorted((root / part).rglob("*.py"))]
    labs = [root / p for lab in manifest().labs for p in (lab.source, lab.notebook)]
    return sorted(set(code + labs + [root / "course.yml"]))


# ------------------------------------------------------------------------------------------------- hashing


@functools.lru_cache(maxsize=1)  # what this process imported stays what it runs, whatever pip does meanwhile
def _versions() -> str:
    import importlib.metadata

    out = []
    for name in SCORING_PACKAGES:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name} missing")
    return ";".join(out)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


@functools.lru_cache(maxsize=512)
def _code_hash(path: Path, mtime_ns: int, size: int) -> str:
    """A Python file's meaning: its syntax tree less docstrings (comments and layout are not in the tree)."""
    try:
        tree = pyparse.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return sha256_file(path)
    return hashlib.sha256(ast.dump(_without_docstrings(tree)).encode()).hexdigest()


def _file_hash(path: Path) -> str:
    if not path.exists():
        return "missing"
    if path.suffix == ".py":
        return _code_hash(path, *_stamp(path))
    return sha256_file(path)


def _manifest_part(lab: LabSpec | None) -> str:
    """What course.yml says that a grade reads: the stage, the lab's own entry and the chips."""
    m = manifest()
    part = {"stage": m.stage.id, "lab": lab.model_dump(mode="json") if lab else None, "chips": m.chips}
    return json.dumps(part, sort_keys=True, default=str)


def fingerprint(lab: LabSpec | None, root: Path = REPO_ROOT) -> str:
    h = hashlib.sha256(_versions().encode())
    h.update(_manifest_part(lab).encode())
    for f in lab_files(lab, root):
        h.update(str(f.relative_to(root)).encode())
        h.update(_file_hash(f).encode())
    return h.hexdigest()[:16]


def grader_fingerprint(lab_id: str | None) -> str:
    """Changes whenever anything that decides `lab_id`'s scores changes (computed afresh: a few ms)."""
    return fingerprint(manifest().lab(lab_id) if lab_id else None)


# ------------------------------------------------------------------------------------------------ the guard


def files_snapshot(files: list[Path]) -> dict[Path, str]:
    return {f: sha256_file(f) if f.exists() else "missing" for f in files}


def changed_files(before: dict[Path, str]) -> list[str]:
    now = files_snapshot(list(before))
    return [str(f.relative_to(REPO_ROOT) if f.is_relative_to(REPO_ROOT) else f) for f in before if now[f] != before[f]]


class GraderModified(RuntimeError):
    """A grader file changed during the batch: a submission may have written outside its folder."""


class GraderFilesGuard:
    """Without a jail (--no-jail) a notebook can write the grader's files: snapshot them, then `check` after
    each submission, so the batch stops at the first one that changed them."""

    def __init__(self) -> None:
        self.before = files_snapshot(grader_files())

    def check(self, results_dir: Path) -> None:
        changed = changed_files(self.before)
        if changed:
            raise GraderModified(
                f"grader files changed during the batch ({', '.join(changed[:5])}): a submission may have "
                "written outside its folder (graded with --no-jail). Restore them (git checkout -- <files>), "
                f"then re-run with --force; results so far are in {results_dir}"
            )
