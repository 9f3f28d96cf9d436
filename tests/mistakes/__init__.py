"""Typical beginner mistakes, as edits to a solution notebook's code, with what the student must read.

Each mistake is checked two ways (tests/test_mistakes.py): the first five lines the visible `check(...)`
cells show name it (`shown`, a regex), and the visible checks and the hidden checks agree (both fail, or
both pass: `hidden` lists the hidden tests that must fail; every other test of the edited kernel must pass).

Speed (CI runs this on 2 cores): a lab's set-up cell runs once (`Lab.base`); only the check cells of the
kernels a mistake touches run their checks (the others still run, with `check` a no-op, for the inputs they
define); and `SMALL` shrinks the visible checks' shapes (fewer interpreted grid steps, same rules).
"""

from __future__ import annotations

import contextlib
import linecache
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import nbformat

from autograder.notebook_code import apply_edits


@dataclass(frozen=True)
class Mistake:
    name: str
    why: str  # the mistake, in a student's terms
    edits: dict[str, str]  # old text in the solution's code -> new text
    shown: str  # regex the first five lines of the failing visible check must match
    hidden: tuple[str, ...]  # hidden tests that must fail
    passing: tuple[str, ...] = field(default=())  # hidden tests that must still pass
    graded: str = ""  # regex every failing hidden test's message must match (the same cause)


# Smaller inputs for the visible checks, per lab (old -> new, every occurrence): still more than one block in
# each direction a kernel tiles, so a grid, an index map or an accumulator that is wrong still shows.
SMALL: dict[str, dict[str, str]] = {
    "lab-1.2-tiled-matmul": {
        "(512, 512), jnp.float32)": "(256, 256), jnp.float32)",
        "(256, 1024), jnp.bfloat16)": "(256, 512), jnp.bfloat16)",
        "(1024, 256), jnp.bfloat16)": "(512, 256), jnp.bfloat16)",
    },
    "lab-1.3-fused-softmax-layernorm": {"(256, 512), jnp.float32)": "(64, 512), jnp.float32)"},
}

# Cells that are neither definitions nor checks but define what a later check reads (run as definitions).
INPUTS: dict[str, tuple[str, ...]] = {
    "lab-1.4-pipelining-profile": (
        "on = trace(matmul, A, B)",
        "from pallas_course.chips import chips\n",
        "from pallas_course.legality import check_pallas_call",
    )
}


def _is_hidden_test(cell: Any) -> bool:
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nbg.get("grade")) and not nbg.get("solution")


def _is_setup(cell: Any) -> bool:
    md = cell.get("metadata", {})
    return "parameters" in md.get("tags", []) or md.get("nbgrader", {}).get("grade_id") == "setup"


def _defines(cell: Any) -> bool:
    return _is_setup(cell) or "\ndef " in "\n" + cell.source


def _strip(source: str) -> str:
    return "\n".join(l for l in source.splitlines() if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))


def _shrink(source: str, small: Mapping[str, str]) -> str:
    for old, new in small.items():
        source = source.replace(old, new)
    return source


@dataclass
class Lab:
    """One lab notebook, its set-up cell run once; each mistake runs from a copy of that namespace."""

    path: Path
    setup: list[str]
    cells: list[tuple[str, str]]  # (role, source): "definition" or "check", in notebook order
    base: dict[str, Any]

    @classmethod
    def load(cls, path: Path, *, mode: str = "tpu-interpret") -> "Lab":
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code" and not _is_hidden_test(c)]
        setup = [_strip(c.source) for c in code if _is_setup(c)]
        small, inputs = SMALL.get(path.stem, {}), INPUTS.get(path.stem, ())
        cells = [
            ("check", _shrink(_strip(c.source), small))
            if "check" in c.metadata.get("tags", [])
            else ("definition", _strip(c.source))
            for c in code
            if not _is_setup(c)
            and ("check" in c.metadata.get("tags", []) or _defines(c) or any(t in c.source for t in inputs))
        ]
        base: dict[str, Any] = {"__name__": f"notebook:{path.stem}"}
        for src in setup:
            _exec(src, path, base)
            if "MODE" in base and "INTERP" not in base:
                base["MODE"] = mode
        return cls(path, setup, cells, base)

    def run(self, edits: Mapping[str, str], kernels: Iterable[str]) -> tuple[dict[str, Any], str | None]:
        """Run the (edited) definitions and the visible checks; return the namespace and what the student
        reads first for the first failing check of `kernels` (None when every such check passes)."""
        from pallas_course.check import failure_text

        sources = apply_edits([s for _, s in self.cells], edits)
        namespace = dict(self.base)
        names = "|".join(map(re.escape, kernels))
        calls = re.compile(
            r"\b(?:" + names + r")\(|check_kernel\(\"(?:" + names + r")\"|\b(?:" + names + r")\b, matmul\)"
        )
        failure: str | None = None
        for (role, _), src in zip(self.cells, sources):
            if role == "definition":
                _exec(src, self.path, namespace)
                continue
            if failure is not None:
                continue
            ours = bool(calls.search(src))
            try:
                with contextlib.nullcontext() if ours else _no_checks(namespace):
                    _exec(src, self.path, namespace)
            except Exception as exc:  # noqa: BLE001 - a failing cell is what we look at
                failure = failure_text(exc)
        return namespace, failure


def _exec(src: str, path: Path, namespace: dict[str, Any]) -> None:
    """As IPython runs a cell: a cell file name, its source in linecache (inspect.getsource works on it)."""
    name = f"/tmp/ipykernel_0/{path.stem}-{zlib.crc32(src.encode()):08x}.py"
    linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
    exec(compile(src, name, "exec"), namespace)  # noqa: S102 - our own notebooks


@contextlib.contextmanager
def _no_checks(namespace: dict[str, Any]) -> Iterator[None]:
    """Another kernel's check cell: its inputs are defined, its checks (and the kernels they run) skipped."""
    import pallas_course.check as check_module
    import pallas_course.lab_checks as lab_checks

    def skip(*args: Any, **kwargs: Any) -> None:
        return None

    runners = (
        "check_pipeline_off",
        "check_step_times",
        "check_working_set",
        "check_fed_block",
        "check_budget_line",
        "check_block_choice",
    )
    saved = namespace.get("check"), {n: getattr(check_module, n) for n in runners}, lab_checks.check_kernel
    namespace["check"], lab_checks.check_kernel = skip, skip
    for n in runners:
        setattr(check_module, n, skip)
    try:
        yield
    finally:
        namespace["check"], lab_checks.check_kernel = saved[0], saved[2]
        for n, f in saved[1].items():
            setattr(check_module, n, f)
