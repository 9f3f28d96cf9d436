"""A traced computation as plain data: what the jail sends instead of a structure and values it computed.

The jail traces the student's function on abstract inputs (shapes and dtypes: no values) and describes the
resulting jaxpr. The grader (autograder.judge.rebuild) rebuilds the computation from this description with its own
JAX primitives, looked up by name in an allow-list, then traces, runs and compiles what it rebuilt itself.
Nothing in a description is believed: a name is looked up, a parameter is parsed, a shape is re-derived by
binding the grader's primitive, and anything else is refused.

Format (FORMAT_VERSION 1), JSON only; arrays (the traced function's constants) travel beside it as .npy
blobs on the wire (autograder.jail.jail_agent.wire), referred to by position:

    description = {"version": 1, "jaxpr": JAXPR, "out_tree": TREE}
    JAXPR  = {"in": [AVAL...], "consts": [[const index, AVAL]...], "eqns": [EQN...], "out": [ATOM...]}
             variables are numbered in order of definition within one JAXPR: its inputs, then its
             constants, then each equation's outputs (a dropped output still takes a number)
    AVAL   = {"shape": [int...], "dtype": name, "weak": bool}
           | {"ref": AVAL, "space": memory space name or null}              (a Ref, inside kernels)
           | {"semaphores": "dma" or "regular", "shape": [int...]}         (a semaphore array: a Ref's inner)
    ATOM   = {"v": variable number} | {"lit": number or bool or "nan"/"inf"/"-inf", "aval": AVAL}
    EQN    = {"p": primitive name, "in": [ATOM...], "out": [AVAL...], "params": {name: PARAM}}
             a pallas_call's EQN may add "at": [file, line, function, source line], where the student's code
             launched it: read only for messages (optional: a description without it reads the same)
    PARAM  = null | bool | int | float | str | [PARAM...]
           | {"tuple": [PARAM...]} | {"dtype": name} | {"enum": [class name, member name]}
           | {"named": [class name, {field: PARAM}]} | {"jaxpr": JAXPR} | {"closed": JAXPR}
           | {"float": "nan"/"inf"/"-inf"} | {"opaque": type name}       (what cannot travel: refused
                                                                             unless the grader ignores it)
    get / swap / addupdate: params {"transforms": [{"index": [INDEX...]}...]}, INDEX = {"slice": [START,
        size, stride]} | {"int": int} | {"leaf": k}; START = int | {"leaf": k}; leaf k is the k-th operand
        after the ref (and after the value, for swap and addupdate)
    dma_start / dma_wait (a copy's .start() and .wait()): params {"copy": [PART, PART, PART, PART, PART], and
        dma_start's "priority", "add"}, the five parts of pltpu.make_async_copy's descriptor: source, destination,
        destination semaphore, source semaphore, device id; PART = null | {"ref": k, "transforms": [{"index":
        [INDEX...]}...]} | {"opaque": type name}; k and every leaf are positions among the equation's own operands
    pallas_call: params {"name", "arg_names" (the kernel's parameters), "grid": [int...], "num_inputs", "kernel": JAXPR, "blocks": [BLOCK...],
        "scratch": [AVAL...], "compiler_params": {field: PARAM} or null, "input_output_aliases": [[in, out]...],
        "num_scalar_prefetch", "mesh"}, BLOCK = {"array": AVAL, "block_shape": [{"blocked": n} |
        {"squeezed": null} | {"element": [n, lo, hi]} | {"other": type name}...], "index_map": JAXPR,
        "buffer_count": int or null, "memory_space": name or null}
    TREE   = {"leaf": k} | {"tuple": [TREE...]} | {"list": [TREE...]} | {"dict": [[key, TREE]...]} | null

Caps (a description over one is refused, whatever it holds) are here so both sides read one number.
A jax upgrade can change primitives and their parameters: compat/newest_jax.sh round-trips every solution
kernel through describe and rebuild (tests/test_rebuild.py) under the newest jax; FORMAT_VERSION changes
whenever this layout does, and the grader refuses any other version.
"""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from .wire import dtype_name

FORMAT_VERSION = 2  # 2: semaphores and the copies' dma_start / dma_wait

MAX_EQUATIONS = 20_000  # all jaxprs together (a lab kernel has a few dozen)
MAX_DEPTH = 8  # sub-jaxprs in sub-jaxprs (a pl.when in a kernel in a jit: 3)
MAX_ELEMENTS = 2**24  # elements of any one array the computation holds (64 MiB of f32)
MAX_CONST_BYTES = 64 * 2**20  # all constants together
MAX_GRID_POINTS = 16_384  # grid steps of one pallas_call (the labs' largest: a few hundred)
MAX_LOOP_STEPS = 4_096  # iterations of one loop (scan length, while-loop iterations)
MAX_STEPS = 2**20  # grid steps times the iterations of the loops they run
MAX_RANK = 8
MAX_TEXT = 200  # a name, a dtype, a memory space


class Leaf:
    """Stands for the k-th flat operand of an indexer while its transforms are described."""

    def __init__(self, k: int) -> None:
        self.k = k


def aval(a: Any) -> dict[str, Any]:
    inner = getattr(a, "inner_aval", None)
    if inner is not None:  # a Ref (kernel operands, scratch)
        space = getattr(a, "memory_space", None)
        return {"ref": aval(inner), "space": None if space is None else str(space)[:MAX_TEXT]}
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is None or dtype is None:
        return {"opaque": type(a).__name__[:MAX_TEXT]}
    kind = type(dtype).__name__
    if kind in ("dma_semaphore", "DMASemaphore", "semaphore", "Semaphore"):  # pltpu.SemaphoreType.DMA / REGULAR
        try:
            return {"semaphores": "dma" if "dma" in kind.lower() else "regular", "shape": [int(d) for d in shape]}
        except TypeError:
            return {"opaque": kind[:MAX_TEXT]}
    try:
        return {
            "shape": [int(d) for d in shape],
            "dtype": dtype_name(dtype),
            "weak": bool(getattr(a, "weak_type", False)),
        }
    except TypeError:  # a symbolic dimension, an extended dtype (a PRNG key)
        return {"opaque": type(a).__name__[:MAX_TEXT]}


def _number(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    f = float(x)
    return f if math.isfinite(f) else repr(f)


class _Jaxpr:
    """Numbers the variables of one jaxpr as it is described."""

    def __init__(self, consts: list[np.ndarray]) -> None:
        self.ids: dict[int, int] = {}
        self.consts = consts

    def define(self, var: Any) -> None:
        self.ids[id(var)] = len(self.ids)

    def atom(self, x: Any) -> dict[str, Any]:
        if type(x).__name__ == "Literal":
            return {"lit": _number(np.asarray(x.val).item()), "aval": aval(x.aval)}
        return {"v": self.ids.get(id(x), -1)}


def jaxpr(j: Any, consts: list[np.ndarray], const_values: Any = ()) -> dict[str, Any]:
    """A Jaxpr (or ClosedJaxpr) as data; its constants' values are appended to `consts`."""
    if hasattr(j, "consts") and hasattr(j, "jaxpr"):
        j, const_values = j.jaxpr, j.consts
    scope = _Jaxpr(consts)
    for v in j.invars:
        scope.define(v)
    const_refs = []
    for v, value in zip(j.constvars, list(const_values) + [None] * len(j.constvars)):
        scope.define(v)
        if value is None:
            const_refs.append([-1, aval(v.aval)])
        else:
            consts.append(np.asarray(value))
            const_refs.append([len(consts) - 1, aval(v.aval)])
    eqns = []
    for e in j.eqns:
        eqns.append(
            {
                "p": str(e.primitive.name)[:MAX_TEXT],
                "in": [scope.atom(x) for x in e.invars],
                "out": [aval(v.aval) for v in e.outvars],
                "params": params(e, consts),
            }
        )
        if e.primitive.name == "pallas_call" and (place := at(e)) is not None:
            eqns[-1]["at"] = place
        for v in e.outvars:
            scope.define(v)
    return {
        "in": [aval(v.aval) for v in j.invars],
        "consts": const_refs,
        "eqns": eqns,
        "out": [scope.atom(x) for x in j.outvars],
    }


def at(e: Any) -> list[Any] | None:
    """[file, line, function, source line] of the student's code that launched this pallas_call (a notebook
    cell, else a file outside the libraries), or None: the grader's run of the rebuilt call names it when it
    fails there. Only a message reads it (a student who forges it misleads their own feedback)."""
    try:
        from pallas_course.errors import launched_from  # type: ignore[import-not-found]

        frame = launched_from(e)
    except Exception:  # noqa: BLE001 - a place is a courtesy: without the helpers or a traceback, none travels
        return None
    if frame is None or not isinstance(frame.lineno, int):
        return None
    return [str(frame.filename)[:MAX_TEXT], frame.lineno, str(frame.name)[:MAX_TEXT], (frame.line or "")[:MAX_TEXT]]


def param(v: Any, consts: list[np.ndarray]) -> Any:
    """One equation parameter as data (see the module's PARAM)."""
    if v is None or isinstance(v, (bool, str)):
        return v[:10_000] if isinstance(v, str) else v
    if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else {"float": repr(f)}
    if isinstance(v, enum.Enum):
        return {"enum": [type(v).__name__, v.name]}
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return {"dtype": dtype_name(v)}
    if hasattr(v, "consts") and hasattr(v, "jaxpr"):
        return {"closed": jaxpr(v, consts)}
    if hasattr(v, "eqns") and hasattr(v, "invars"):
        return {"jaxpr": jaxpr(v, consts)}
    if isinstance(v, tuple) and hasattr(v, "_fields"):  # a NamedTuple (GatherDimensionNumbers, ...)
        return {"named": [type(v).__name__, {f: param(getattr(v, f), consts) for f in v._fields}]}
    if isinstance(v, tuple):
        return {"tuple": [param(x, consts) for x in v]}
    if isinstance(v, list):
        return [param(x, consts) for x in v]
    try:  # jnp dtypes (jnp.float32 is a class that np.dtype understands)
        return {"dtype": dtype_name(v)} if isinstance(v, type) else {"opaque": type(v).__name__[:MAX_TEXT]}
    except TypeError:
        return {"opaque": type(v).__name__[:MAX_TEXT]}


def _start(x: Any) -> Any:
    if isinstance(x, Leaf):
        return {"leaf": x.k}
    if isinstance(x, (int, np.integer)):
        return int(x)
    return {"opaque": type(x).__name__[:MAX_TEXT]}


def _transforms(tree: Any) -> list[Any]:
    import jax

    return _indexers(jax.tree_util.tree_unflatten(tree, [Leaf(k) for k in range(tree.num_leaves)]))


def _indexers(transforms: Any) -> list[Any]:
    out: list[Any] = []
    for t in transforms:
        if type(t).__name__ != "NDIndexer":
            out.append({"opaque": type(t).__name__[:MAX_TEXT]})
            continue
        index = []
        for ix in t.indices:
            if type(ix).__name__ == "Slice":
                index.append({"slice": [_start(ix.start), _start(ix.size), _start(ix.stride)]})
            elif isinstance(ix, Leaf):
                index.append({"leaf": ix.k})
            elif isinstance(ix, (int, np.integer)):
                index.append({"int": int(ix)})
            else:
                index.append({"opaque": type(ix).__name__[:MAX_TEXT]})
        out.append({"index": index})
    return out


def _block_dim(d: Any) -> dict[str, Any]:
    kind = type(d).__name__
    if kind == "Blocked":
        return {"blocked": int(d.block_size)}
    if kind == "Squeezed" or d is None:
        return {"squeezed": None}
    if kind == "Element":
        lo, hi = d.padding
        return {"element": [int(d.block_size), int(lo), int(hi)]}
    return {"other": kind[:MAX_TEXT]}


def _compiler_params(cp: Any, consts: list[np.ndarray]) -> Any:
    import dataclasses

    if cp is None:
        return None
    if isinstance(cp, dict):  # {backend: params} in older jax
        cp = next(iter(cp.values()), None)
        if cp is None:
            return None
    if not dataclasses.is_dataclass(cp):
        return {"opaque": type(cp).__name__[:MAX_TEXT]}
    out = {}
    for f in dataclasses.fields(cp):
        value = getattr(cp, f.name)
        if f.default is not dataclasses.MISSING and value == f.default:
            continue  # only what the student set travels
        if f.name == "dimension_semantics" and value is not None:
            value = tuple(str(s).lower().split(".")[-1] for s in value)
        out[f.name] = param(value, consts)
    return out


def _pallas_call(p: dict[str, Any], consts: list[np.ndarray]) -> dict[str, Any]:
    gm = p["grid_mapping"]
    blocks = []
    for bm in gm.block_mappings:
        mode = bm.pipeline_mode
        space = getattr(bm.transformed_block_aval, "memory_space", None)
        blocks.append(
            {
                "array": aval(bm.array_aval),
                "block_shape": [_block_dim(d) for d in bm.block_shape],
                "index_map": jaxpr(bm.index_map_jaxpr, consts),
                "buffer_count": None if mode is None else int(mode.buffer_count),
                "lookahead": bool(getattr(mode, "use_lookahead", False)),
                "transforms": len(getattr(bm, "transforms", ()) or ()),
                "memory_space": None if space is None else str(space)[:MAX_TEXT],
            }
        )
    name = p.get("name")
    if not name:  # the kernel function's name, as kernel_trace reads it
        info = getattr(p["jaxpr"], "debug_info", None)
        name = (getattr(info, "func_src_info", None) or "").split(" ")[0] or None
    info = getattr(p["jaxpr"], "debug_info", None)
    arg_names = [str(n)[:MAX_TEXT] for n in (getattr(info, "arg_names", None) or ())]
    return {
        "name": None if name is None else str(name)[:MAX_TEXT],
        "arg_names": arg_names,
        "grid": [g if isinstance(g, int) else {"opaque": type(g).__name__} for g in gm.grid],
        "num_inputs": int(gm.num_inputs),
        "kernel": jaxpr(p["jaxpr"], consts),
        "blocks": blocks,
        "scratch": [aval(a) for a in gm.scratch_avals],
        "num_scalar_prefetch": int(getattr(gm, "num_index_operands", 0)),
        "compiler_params": _compiler_params(p.get("compiler_params"), consts),
        "input_output_aliases": [[int(i), int(o)] for i, o in p.get("input_output_aliases") or ()],
        "mesh": None if p.get("mesh") is None else {"opaque": type(p["mesh"]).__name__},
    }


def _copy_part(part: Any) -> Any:
    """One of a copy descriptor's five parts, its leaves numbered among the equation's operands."""
    if part is None:
        return None
    if isinstance(part, Leaf):
        return {"ref": part.k, "transforms": []}
    if type(part).__name__ == "TransformedRef" and isinstance(part.ref, Leaf):
        return {"ref": part.ref.k, "transforms": _indexers(part.transforms)}
    return {"opaque": type(part).__name__[:MAX_TEXT]}


def _copy(p: dict[str, Any], n: int) -> dict[str, Any]:
    """dma_start / dma_wait: the descriptor's parts (pltpu.make_async_copy), and start's priority and add."""
    try:
        parts = p["tree"].unflatten([Leaf(k) for k in range(n)])
        copy = [_copy_part(x) for x in parts] if isinstance(parts, tuple) else {"opaque": type(parts).__name__}
    except Exception:  # noqa: BLE001 - a tree of another jax: described as what cannot travel, refused there
        copy = {"opaque": "tree"}
    out: dict[str, Any] = {"copy": copy}
    for k in ("priority", "add"):
        if k in p:
            out[k] = param(p[k], [])
    if p.get("insert_dummy_device") or str(getattr(p.get("device_id_type"), "value", "mesh")) != "mesh":
        out["device_id_type"] = {"opaque": "DeviceIdType"}
    return out


def params(e: Any, consts: list[np.ndarray]) -> dict[str, Any]:
    name = e.primitive.name
    if name in ("dma_start", "dma_wait") and "tree" in e.params:
        return _copy(e.params, len(e.invars))
    if name == "pallas_call" and "grid_mapping" in e.params:
        return _pallas_call(e.params, consts)
    if name in ("get", "swap", "addupdate") and "tree" in e.params:
        return {"transforms": _transforms(e.params["tree"])}
    return {str(k)[:MAX_TEXT]: param(v, consts) for k, v in e.params.items()}


def tree(treedef: Any) -> Any:
    """The call's output structure (a pytree of arrays) as data: leaves numbered in flat order."""
    import jax

    counter = iter(range(treedef.num_leaves))
    value = jax.tree_util.tree_unflatten(treedef, [Leaf(0)] * treedef.num_leaves)

    def walk(x: Any) -> Any:
        if isinstance(x, Leaf):
            return {"leaf": next(counter)}
        if x is None:
            return None
        if isinstance(x, tuple):
            return {"tuple": [walk(i) for i in x]}
        if isinstance(x, list):
            return {"list": [walk(i) for i in x]}
        if isinstance(x, dict):
            return {"dict": [[str(k), walk(v)] for k, v in x.items()]}
        return {"opaque": type(x).__name__[:MAX_TEXT]}

    return walk(value)


def describe(closed: Any, out_treedef: Any) -> tuple[dict[str, Any], list[np.ndarray]]:
    """(the description, the constants it refers to) of a traced computation (a ClosedJaxpr)."""
    consts: list[np.ndarray] = []
    return {"version": FORMAT_VERSION, "jaxpr": jaxpr(closed, consts), "out_tree": tree(out_treedef)}, consts
