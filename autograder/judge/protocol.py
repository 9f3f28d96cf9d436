"""What crosses between the grader and its judge child: frames of JSON and .npy (autograder.jail.jail_agent.wire).

Requests (the grader's), one reply each:
    {"op": "trace", "key": K, "description": ..., "consts": ..., "in_avals": [[shape, dtype]...]} + const blobs
        -> {"ok": true, "structure": STRUCTURE} | {"ok": false, "error": ERROR}
    {"op": "run", "key": K, "inputs": [encoded arrays]} + input blobs
        -> {"ok": true, "result": encoded} + blobs | {"ok": false, "error": ERROR}
    {"op": "compile", "key": K, "chip": chip} -> {"ok": true, "result": COMPILE_RESULT}
    {"op": "forget", "key": K} -> {"ok": true}
The child holds what it rebuilt under K (the grader's digest of the description, its constants and the input
avals), so a run or a compile names it; it knows nothing else of the grader: no references, tolerances, keys or
points, only the description and the grader's inputs.

STRUCTURE is what the checks read of a traced computation (pallas_course.kernel_trace.Trace; surveyed uses:
pallas_course.rules, lab_checks, check.compare, legality.check_pallas_call, autograder/labs/*): each
pallas_call's name, grid, blocks (array and block shape, dtype, buffer count, the block index at every grid
point), scratch, dimension semantics, {primitive: result dtypes} of the kernel, the refs it reads before
writing; the primitives outside the kernels and their sizes. `view` turns it back into a Trace with the same
API (index maps become table lookups; there is no jaxpr), so the checks run unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # imported where used: kernel_trace imports jax, which a jail started ahead need not wait for
    from pallas_course.kernel_trace import BlockInfo, PallasCallInfo, Trace


class BadStructure(ValueError):
    """The judge's structure data is not of the form `view` reads."""


def structure(trace: Trace) -> dict[str, Any]:
    """A Trace as STRUCTURE (the child's side)."""
    from autograder.judge.structure import trace_data  # the round-trip check's own data form (structure_data)

    return trace_data(trace)


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise BadStructure(f"{what}: not a list of integers")
    return tuple(v)


def _block(d: Any, grid: tuple[int, ...]) -> BlockInfo:
    from pallas_course.kernel_trace import BlockInfo

    if not isinstance(d, dict):
        raise BadStructure("a block that is not a mapping")
    table = d.get("block_indices")
    points = list(np.ndindex(*grid)) if grid else [()]
    lookup: dict[tuple[int, ...], tuple[int, ...]] = {}
    if table is not None:
        if not isinstance(table, list) or len(table) != len(points):
            raise BadStructure("a block index table of the wrong length")
        lookup = {tuple(int(g) for g in p): _ints(idx, "a block index") for p, idx in zip(points, table)}

    def index_map(*point: Any) -> tuple[int, ...]:
        key = tuple(int(p) for p in point)
        if key not in lookup:
            raise IndexError(f"no block index recorded at grid point {key}")
        return lookup[key]

    block = d.get("block_shape")
    if not isinstance(block, list) or not all(
        b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in block
    ):
        raise BadStructure("a block shape that is not a list of sizes")
    count = d.get("buffer_count")
    role = d.get("role")
    if (
        role not in ("in", "out")
        or not isinstance(d.get("position"), int)
        or not (count is None or isinstance(count, int))
    ):
        raise BadStructure("a block of no known role")
    return BlockInfo(
        role=role,
        position=d["position"],
        array_shape=_ints(d.get("array_shape"), "an array shape"),
        dtype=_dtype(d.get("dtype")),
        block_shape=tuple(block),
        buffer_count=count,
        index_map=index_map,
        trivial_window=d.get("trivial_window") is True,
        memory_space=str(d.get("memory_space") or "")[:20],
    )


def _dtype(name: Any) -> np.dtype:
    from autograder.jail.jail_agent.wire import dtype_named

    try:
        return dtype_named(name)
    except Exception as e:
        raise BadStructure(f"an unknown dtype ({str(name)[:40]})") from e


def _call(d: Any) -> PallasCallInfo:
    from pallas_course.kernel_trace import PallasCallInfo

    if not isinstance(d, dict):
        raise BadStructure("a pallas_call that is not a mapping")
    grid = _ints(d.get("grid"), "a grid")
    scratch = d.get("scratch") or []
    ops = d.get("kernel_ops") or {}
    unread = d.get("unread")
    sem = d.get("dimension_semantics")
    dots = d.get("dot_precisions") or []
    masks = d.get("mask_products") or []
    lane = d.get("lane_reductions_every_step") or []
    if not (
        isinstance(scratch, list)
        and isinstance(ops, dict)
        and (unread is None or isinstance(unread, list))
        and (sem is None or isinstance(sem, list))
        and isinstance(dots, list)
        and isinstance(masks, list)
        and isinstance(lane, list)
    ):
        raise BadStructure("a malformed pallas_call")
    return PallasCallInfo(
        name=str(d.get("name", "kernel"))[:200],
        grid=grid,
        inputs=tuple(_block(b, grid) for b in d.get("inputs") or []),
        outputs=tuple(_block(b, grid) for b in d.get("outputs") or []),
        scratch=tuple((_ints(s[0], "a scratch shape"), _dtype(s[1]), str(s[2])[:40]) for s in scratch),
        dimension_semantics=None if sem is None else tuple(str(s)[:40] for s in sem),
        kernel_jaxpr=None,
        kernel_ops={str(k): tuple(str(t) for t in v) for k, v in ops.items() if isinstance(v, list)},
        unread=None if unread is None else tuple(str(u) for u in unread),
        dot_precisions=tuple(str(p)[:40] for p in dots),
        mask_products=tuple(str(m)[:40] for m in masks),
        lane_reductions_every_step=tuple(str(r)[:40] for r in lane),
    )


def view(data: Any) -> Trace:
    """STRUCTURE as a Trace the checks read as they read a direct trace (the grader's side)."""
    from pallas_course.kernel_trace import Trace

    if not isinstance(data, dict):
        raise BadStructure("a structure that is not a mapping")
    outside, sizes = data.get("outside") or [], data.get("outside_sizes") or []
    if not isinstance(outside, list) or not isinstance(sizes, list) or len(sizes) != len(outside):
        raise BadStructure("malformed work outside the kernels")
    return Trace(
        pallas_calls=tuple(_call(c) for c in data.get("pallas_calls") or []),
        outside=tuple(str(o) for o in outside),
        jaxpr=None,
        outside_sizes=_ints(sizes, "outside sizes"),
    )


def compile_result(r: Any) -> dict[str, Any]:
    """A pallas_course.tpu_compile.CompileResult as data."""
    return dataclasses.asdict(r)


def compile_result_from(d: Any) -> Any:
    from pallas_course.tpu_compile import CompileResult

    fields = {f.name for f in dataclasses.fields(CompileResult)}
    if not isinstance(d, dict) or not {"chip", "topology", "ok"} <= set(d):
        raise BadStructure("a compile verdict without chip, topology and ok")
    return CompileResult(**{k: v for k, v in d.items() if k in fields})
