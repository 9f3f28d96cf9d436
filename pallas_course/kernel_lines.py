"""Which source lines of a kernel and its wrapper produce each schedule event (EX·12 locks frames to lines).

Read from the code with `ast`, never typed in: the `pl.BlockSpec(...)` calls inside `in_specs=` / `out_specs=`
name the lines that decide each DMA, the kernel body's statements are the compute lines, and a
`@pl.when(cond)` block counts only at grid points where `cond` holds (evaluated with the kernel's
`x = pl.program_id(n)` names bound to that grid point).

Lines are numbered as the chapter prints them: the kernel from line 1, a blank line, then the wrapper.
A kernel written another way (no BlockSpec calls, helpers in other functions) simply gets fewer lines.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass
from typing import Callable

from pallas_course import pyparse


@dataclass(frozen=True)
class _When:
    condition: ast.expr
    lines: frozenset[int]


@dataclass(frozen=True)
class CodeMap:
    """Source listing of kernel + wrapper and the line numbers behind each kind of schedule event."""

    lines: tuple[str, ...]
    in_spec_lines: tuple[int, ...]  # line of in_specs[i]'s BlockSpec
    out_spec_lines: tuple[int, ...]  # line of out_specs[i]'s BlockSpec
    grid_line: int | None
    body_lines: frozenset[int]  # kernel statements that always run
    whens: tuple[_When, ...]  # statements that run only under a pl.when
    program_ids: tuple[tuple[str, int], ...]  # (local name, grid axis)

    def compute_lines(self, grid_point: tuple[int, ...]) -> tuple[int, ...]:
        """Kernel lines that run at `grid_point`."""
        env = {name: grid_point[axis] for name, axis in self.program_ids if axis < len(grid_point)}
        active = set(self.body_lines)
        for w in self.whens:
            try:
                taken = bool(eval(compile(ast.Expression(w.condition), "<when>", "eval"), {"__builtins__": {}}, env))  # noqa: S307 - a kernel's own `pl.when` condition, no builtins
            except Exception:  # noqa: BLE001 - a condition we cannot evaluate statically: show the block rather than hide it
                taken = True
            if taken:
                active |= w.lines
        return tuple(sorted(active))


def _source(fn: Callable) -> tuple[list[str], ast.Module]:
    text = textwrap.dedent(inspect.getsource(fn)).rstrip("\n")
    return text.split("\n"), pyparse.parse(text)


def _program_id_axis(node: ast.AST) -> int | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "program_id"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return int(node.args[0].value)
    return None


def _when_condition(fn: ast.FunctionDef) -> ast.expr | None:
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "when" and dec.args:
            return dec.args[0]
    return None


def _span(node: ast.AST) -> set[int]:
    return set(range(node.lineno, (node.end_lineno or node.lineno) + 1))


def _blockspec_lines(node: ast.AST, offset: int) -> list[int]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [line for elt in node.elts for line in _blockspec_lines(elt, offset)]
    return [node.lineno + offset]


def code_map(kernel: Callable, wrapper: Callable | None = None) -> CodeMap:
    """Map `kernel` (and the `wrapper` that calls pallas_call) to numbered lines."""
    k_lines, k_tree = _source(kernel)
    fn = k_tree.body[0]
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    body: set[int] = set()
    whens: list[_When] = []
    pids: list[tuple[str, int]] = []
    for stmt in fn.body:
        if isinstance(stmt, ast.FunctionDef) and (cond := _when_condition(stmt)) is not None:
            whens.append(_When(cond, frozenset(_span(stmt) | {d.lineno for d in stmt.decorator_list})))
            continue
        body |= _span(stmt)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            axis = _program_id_axis(stmt.value)
            if axis is not None:
                pids.append((stmt.targets[0].id, axis))
    lines = list(k_lines)
    in_lines: list[int] = []
    out_lines: list[int] = []
    grid_line = None
    if wrapper is not None:
        w_lines, w_tree = _source(wrapper)
        offset = len(lines) + 1  # one blank line between kernel and wrapper
        lines += [""] + w_lines
        for node in ast.walk(w_tree):
            if isinstance(node, ast.keyword) and node.arg == "in_specs":
                in_lines = _blockspec_lines(node.value, offset)
            elif isinstance(node, ast.keyword) and node.arg == "out_specs":
                out_lines = _blockspec_lines(node.value, offset)
            elif isinstance(node, ast.keyword) and node.arg == "grid":
                grid_line = node.value.lineno + offset
    return CodeMap(
        tuple(lines), tuple(in_lines), tuple(out_lines), grid_line, frozenset(body), tuple(whens), tuple(pids)
    )
