"""The jail's description of a traced computation, parsed into the grader's own data model (Jaxpr, Eqn, Aval,
Literal): names, parameters and shapes checked and turned into the types the grader's primitives expect.

The description (autograder.jail.jail_agent.description) is JSON; nothing of it is believed. Anything the parser
cannot read into the model is refused with a sentence the student can act on (`Refused`); autograder.judge.rebuild
evaluates what it parsed.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass
from typing import Any, Sequence

import jax
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.jail.jail_agent import description as fmt
from autograder.jail.jail_agent import wire
from autograder.judge import copies, vocabulary


class Refused(ValueError):
    """A description the grader will not rebuild; the message is for the student. `named`: the refusal is a
    mistake the lab names, in its rule's words (pallas_course.rules), read as the notebook's check reads it."""

    def __init__(self, text: str, *, named: bool = False) -> None:
        super().__init__(text)
        self.named = named


def not_allowed(name: str) -> Refused:
    return Refused(vocabulary.refusal(name))


# Derived from what the installed JAX lowers (autograder.judge.vocabulary): every name the rebuild takes, and those
# it evaluates in place.
INLINED = vocabulary.INLINED
ALLOWED = vocabulary.rebuilt()

_ENUMS = {
    "Precision": lax.Precision,
    "RoundingMethod": lax.RoundingMethod,
    "GatherScatterMode": lax.GatherScatterMode,
    "DotAlgorithmPreset": lax.DotAlgorithmPreset,
    "FftType": lax.FftType,
    "RandomAlgorithm": lax.RandomAlgorithm,
}
_NAMED = {
    "GatherDimensionNumbers": lax.GatherDimensionNumbers,
    "ScatterDimensionNumbers": lax.ScatterDimensionNumbers,
    "ConvDimensionNumbers": lax.ConvDimensionNumbers,
}


_WEAK_PYTHON = {"int32": int, "float32": float, "bool": bool}
MEMORY_SPACES = {
    None: None,
    "default": None,
    "vmem": pltpu.VMEM,
    "smem": pltpu.SMEM,
    "any": pl.ANY,
    "hbm": pltpu.HBM,  # as pl.ANY for a kernel that copies its own blocks (LAB·1.6)
}

# ------------------------------------------------------------------------------------------- parsed form


@dataclass(frozen=True)
class Aval:
    shape: tuple[int, ...]
    dtype: np.dtype
    ref: str | None = None  # the memory space of a Ref ("" for the default), None for an array
    weak: bool = False
    semaphores: str | None = None  # "dma" for an array of DMA semaphores (dtype is then a placeholder), else None

    @property
    def struct(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(self.shape, self.dtype)


@dataclass(frozen=True)
class Literal:
    value: Any  # a numpy scalar, or a Python one where the original was weakly typed


@dataclass(frozen=True)
class Eqn:
    name: str
    inputs: tuple[Any, ...]  # int: a variable, or a Literal
    outputs: tuple[Aval, ...]
    params: dict[str, Any]


@dataclass(frozen=True)
class Place:
    """Where the student's code launched a pallas_call, as the jail recorded it (description's "at"): plain text
    for a message, never believed for anything else."""

    file: str
    line: int
    function: str
    source: str

    @classmethod
    def read(cls, raw: Any) -> Place | None:
        if (
            not isinstance(raw, list)
            or len(raw) != 4
            or not all(isinstance(raw[i], str) for i in (0, 2, 3))
            or not isinstance(raw[1], int)
            or isinstance(raw[1], bool)
            or not 0 < raw[1] < 10**7
        ):
            return None
        one_line = [" ".join(str(s).split())[: fmt.MAX_TEXT] for s in (raw[0], raw[2], raw[3])]
        return cls(one_line[0], raw[1], one_line[1], one_line[2])

    def frame(self) -> Any:
        """As a traceback.FrameSummary, for pallas_course.errors.explain(at=...)."""
        import traceback

        return traceback.FrameSummary(self.file, self.line, self.function, line=self.source or None)


def places_in(description: Any, limit: int = 200_000) -> list[tuple[str | None, Place]]:
    """(kernel name, Place) of each pallas_call a raw description carries, in order: read for a refusal's message
    before (or without) a rebuild; `limit` bounds the nodes walked."""
    out: list[tuple[str | None, Place]] = []
    stack: list[Any] = [description]
    while stack and limit > 0:
        x, limit = stack.pop(), limit - 1
        if isinstance(x, dict):
            if x.get("p") == "pallas_call" and (place := Place.read(x.get("at"))) is not None:
                params = x.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                out.append((name if isinstance(name, str) else None, place))
            stack.extend(reversed(list(x.values())))
        elif isinstance(x, list):
            stack.extend(reversed(x))
    return out


def frames_in(description: Any) -> list[tuple[str | None, Any]]:
    """places_in's, as traceback.FrameSummary: what pallas_course.errors (explain's `at`, place_for) reads."""
    return [(name, place.frame()) for name, place in places_in(description)]


def where_in(description: Any, error_text: str) -> str:
    """The "\n  at your cell, line ..." line for a refusal of `description` (the student's pallas_call it came
    from, pallas_course.errors.place_for), or "" where there is none to name."""
    from pallas_course.errors import place_for, where

    frame = place_for(frames_in(description), error_text)
    return "" if frame is None else "\n" + where(frame)


@dataclass(frozen=True)
class Jaxpr:
    inputs: tuple[Aval, ...]
    consts: tuple[np.ndarray, ...]
    eqns: tuple[Eqn, ...]
    outputs: tuple[Any, ...]


class Parser:
    def __init__(self, consts: Sequence[Any]) -> None:
        self.consts = consts
        self.equations = 0
        self.const_bytes = 0
        self.wide = False  # a 64-bit dtype appears: rebuilt under jax.enable_x64, as the notebook traced it

    # ---- leaves
    def dtype(self, name: Any) -> np.dtype:
        try:
            dt = wire.dtype_named(name)
        except wire.WireError:
            raise Refused(f"dtype {str(name)[:40]!r} is not one this lab allows") from None
        self.wide = self.wide or dt.itemsize == 8
        return dt

    def aval(self, d: Any) -> Aval:
        if not isinstance(d, dict):
            raise Refused("a malformed value type")
        if "ref" in d:
            inner = self.aval(d["ref"])
            space = d.get("space")
            if space is not None and not isinstance(space, str):
                raise Refused("a malformed memory space")
            return Aval(inner.shape, inner.dtype, (space or "").lower()[: fmt.MAX_TEXT], semaphores=inner.semaphores)
        if "opaque" in d:
            raise Refused(f"a value of type `{str(d['opaque'])[:80]}` is not one this lab allows")
        if "semaphores" in d:
            return self.semaphores(d)
        shape = d.get("shape")
        if (
            not isinstance(shape, list)
            or len(shape) > fmt.MAX_RANK
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**31 for n in shape)
        ):
            raise Refused("a malformed array shape")
        if math.prod(shape) > fmt.MAX_ELEMENTS:
            raise Refused(
                f"an array of shape {tuple(shape)} is over the grader's limit of {fmt.MAX_ELEMENTS:,} elements"
            )
        return Aval(tuple(shape), self.dtype(d.get("dtype")), weak=d.get("weak") is True)

    @staticmethod
    def semaphores(d: dict[str, Any]) -> Aval:
        shape = d.get("shape")
        if (
            not isinstance(shape, list)
            or len(shape) > 2
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= copies.MAX_SEMAPHORES for n in shape)
        ):
            raise Refused(f"an array of semaphores other than up to {copies.MAX_SEMAPHORES} in one or two dimensions")
        if math.prod(shape) > copies.MAX_SEMAPHORES:
            raise Refused(f"more than {copies.MAX_SEMAPHORES} semaphores")
        if d.get("semaphores") != "dma":
            raise Refused(copies.REGULAR_SEMAPHORES)
        return Aval(tuple(shape), np.dtype(np.int32), semaphores="dma")

    def literal(self, d: dict[str, Any]) -> np.ndarray:
        a = self.aval(d.get("aval"))
        if a.shape or a.ref is not None:
            raise Refused("a literal that is not a scalar")
        v = d.get("lit")
        if isinstance(v, str) and v in ("nan", "inf", "-inf"):
            v = float(v)
        if not isinstance(v, (bool, int, float)):
            raise Refused("a malformed literal")
        try:
            value = np.asarray(v).astype(a.dtype)
        except (OverflowError, ValueError):
            raise Refused("a literal out of its dtype's range") from None
        if a.weak and a.dtype.name in _WEAK_PYTHON:
            # a Python scalar binds weakly typed, as the original literal did: JAX forwards a conversion of a
            # strongly typed value to its own dtype instead of recording it, which would change the structure
            return _WEAK_PYTHON[a.dtype.name](value)
        return value

    # ---- parameters
    def param(self, v: Any, depth: int) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.param(x, depth) for x in v[:10_000]]
        if not isinstance(v, dict) or len(v) != 1:
            raise Refused("a malformed parameter")
        ((tag, body),) = v.items()
        if tag == "tuple" and isinstance(body, list):
            return tuple(self.param(x, depth) for x in body[:10_000])
        if tag == "dtype":
            return self.dtype(body)
        if tag == "float" and body in ("nan", "inf", "-inf"):
            return float(body)
        if tag == "enum" and isinstance(body, list) and len(body) == 2 and body[0] in _ENUMS:
            try:
                return _ENUMS[body[0]][str(body[1])]
            except KeyError:
                raise Refused(f"{body[0]}.{str(body[1])[:40]} is not a known value") from None
        if (
            tag == "named"
            and isinstance(body, list)
            and len(body) == 2
            and body[0] in _NAMED
            and isinstance(body[1], dict)
        ):
            cls = _NAMED[body[0]]
            fields = {k: self.param(x, depth) for k, x in body[1].items()}
            if set(fields) != set(cls._fields):
                raise Refused(f"malformed {body[0]}")
            return cls(**fields)
        if tag in ("jaxpr", "closed"):
            return self.jaxpr(body, depth + 1)
        if tag == "opaque":
            raise Refused(f"a parameter of type `{str(body)[:80]}` is not one this lab allows")
        raise Refused(f"a parameter tagged {str(tag)[:40]!r} is not one this lab allows")

    # ---- jaxprs
    def jaxpr(self, d: Any, depth: int) -> Jaxpr:
        if depth > fmt.MAX_DEPTH:
            raise Refused(f"the computation nests deeper than {fmt.MAX_DEPTH} levels")
        if not isinstance(d, dict) or not all(isinstance(d.get(k), list) for k in ("in", "consts", "eqns", "out")):
            raise Refused("a malformed jaxpr")
        inputs = tuple(self.aval(a) for a in d["in"][:10_000])
        consts = []
        for item in d["consts"][:10_000]:
            if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], int):
                raise Refused("a malformed constant")
            k, a = item[0], self.aval(item[1])
            if not 0 <= k < len(self.consts) or not isinstance(self.consts[k], np.ndarray):
                raise Refused("a constant that did not travel")
            value = self.consts[k]
            if value.shape != a.shape or value.dtype != a.dtype:
                raise Refused("a constant whose value does not match its type")
            self.const_bytes += value.nbytes
            if self.const_bytes > fmt.MAX_CONST_BYTES:
                raise Refused(f"constants over the grader's limit of {fmt.MAX_CONST_BYTES:,} bytes")
            consts.append(value)
        defined = len(inputs) + len(consts)
        eqns = []
        for e in d["eqns"]:
            self.equations += 1
            if self.equations > fmt.MAX_EQUATIONS:
                raise Refused(f"more than {fmt.MAX_EQUATIONS:,} operations")
            eqn = self.eqn(e, defined, depth)
            eqns.append(eqn)
            defined += len(eqn.outputs)
        outputs = tuple(self.atom(a, defined) for a in d["out"][:10_000])
        return Jaxpr(inputs, tuple(consts), tuple(eqns), outputs)

    def atom(self, a: Any, defined: int) -> Any:
        if isinstance(a, dict) and "v" in a:
            k = a["v"]
            if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < defined:
                raise Refused("a variable used before it is defined")
            return k
        if isinstance(a, dict) and "lit" in a:
            return Literal(self.literal(a))
        raise Refused("a malformed operand")

    def eqn(self, e: Any, defined: int, depth: int) -> Eqn:
        if not isinstance(e, dict) or not isinstance(e.get("p"), str):
            raise Refused("a malformed operation")
        name = e["p"]
        if name not in ALLOWED:
            raise not_allowed(name)
        if (
            not isinstance(e.get("in"), list)
            or not isinstance(e.get("out"), list)
            or not isinstance(e.get("params"), dict)
        ):
            raise Refused(f"a malformed `{name[:80]}`")
        inputs = tuple(self.atom(a, defined) for a in e["in"][:100_000])
        outputs = tuple(self.aval(a) for a in e["out"][:10_000])
        raw = e["params"]
        if name == "pallas_call":
            params = self.pallas_call(raw, depth)
        elif name in ("get", "swap", "addupdate"):
            params = {"transforms": self.transforms(raw.get("transforms"))}
        elif name in ("dma_start", "dma_wait"):
            params = self.copy(name, raw, len(inputs))
        elif name in INLINED:
            key = INLINED[name]
            if key not in raw:
                raise Refused(f"`{name}` without its body")
            params = {key: self.param(raw[key], depth)}
            if name in ("jit", "pjit"):
                fname = raw.get("name")
                params["name"] = fname if isinstance(fname, str) and fname.isidentifier() else "jitted"
        else:
            params = {str(k): self.param(v, depth) for k, v in raw.items()}
        return Eqn(name, inputs, outputs, params)

    def transforms(self, raw: Any) -> list[list[Any]]:
        if not isinstance(raw, list) or len(raw) > 8:
            raise Refused("a malformed ref index")
        out = []
        for t in raw:
            if not isinstance(t, dict) or not isinstance(t.get("index"), list) or len(t["index"]) > fmt.MAX_RANK:
                raise Refused("only indexing (`ref[...]`, `ref[pl.ds(...)]`, `ref.at[...]`) of refs is allowed")
            index = []
            for ix in t["index"]:
                if not isinstance(ix, dict) or len(ix) != 1:
                    raise Refused("a malformed ref index")
                ((kind, body),) = ix.items()
                if kind == "slice" and isinstance(body, list) and len(body) == 3:
                    index.append(("slice", *(self.start(b) for b in body)))
                elif kind in ("int", "leaf") and isinstance(body, int) and not isinstance(body, bool):
                    index.append((kind, body))
                else:
                    raise Refused("this way of indexing a ref is not one this lab allows")
            out.append(index)
        return out

    def copy(self, name: str, raw: dict[str, Any], n_in: int) -> dict[str, Any]:
        """A copy's .start() or .wait() (description.py's dma_start / dma_wait): its source, destination and
        semaphore, each an operand and its indexing; no remote copy (no source semaphore, no device)."""
        parts = raw.get("copy")
        if set(raw) - {"copy", "priority", "add"} or not isinstance(parts, list) or len(parts) != 5:
            raise Refused(f"a `{name}` of a copy other than pltpu.make_async_copy(src, dst, sem) on this TensorCore")
        if parts[3] is not None or parts[4] is not None:
            raise Refused(copies.REMOTE)
        read = []
        for part in parts[:3]:
            ref = part.get("ref") if isinstance(part, dict) else None
            if (
                not isinstance(ref, int)
                or isinstance(ref, bool)
                or not 0 <= ref < n_in
                or set(part) != {"ref", "transforms"}
            ):
                raise Refused(f"a malformed `{name}`")
            read.append((ref, self.transforms(part["transforms"])))
        priority, add = raw.get("priority", 0), raw.get("add", False)
        if name == "dma_start" and (priority != 0 or add is not False):
            raise Refused("a copy with a priority or add=True: the course's copies use .start() as it is")
        return {"copy": tuple(read)}

    @staticmethod
    def start(b: Any) -> Any:
        if isinstance(b, int) and not isinstance(b, bool):
            return b
        if isinstance(b, dict) and set(b) == {"leaf"} and isinstance(b["leaf"], int):
            return ("leaf", b["leaf"])
        raise Refused("a malformed ref slice")

    def pallas_call(self, raw: dict[str, Any], depth: int) -> dict[str, Any]:
        grid = raw.get("grid")
        if (
            not isinstance(grid, list)
            or len(grid) > 6
            or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g for g in grid)
        ):
            raise Refused("a pallas_call grid that is not a tuple of sizes")
        if math.prod(grid) > fmt.MAX_GRID_POINTS:
            raise Refused(f"a grid of {math.prod(grid):,} steps is over the grader's limit of {fmt.MAX_GRID_POINTS:,}")
        if raw.get("num_scalar_prefetch") or raw.get("mesh") is not None:
            raise Refused("scalar prefetch and meshes are not used in this lab")
        blocks = []
        raw_blocks = raw.get("blocks")
        if not isinstance(raw_blocks, list) or len(raw_blocks) > 64:
            raise Refused("malformed BlockSpecs")
        for b in raw_blocks:
            if not isinstance(b, dict):
                raise Refused("a malformed BlockSpec")
            space = b.get("memory_space")
            if space not in MEMORY_SPACES or b.get("transforms") or b.get("lookahead"):
                raise Refused("a BlockSpec with this memory space, transforms or lookahead is not used in this lab")
            dims = []
            for dim in b.get("block_shape") or []:
                if not isinstance(dim, dict) or len(dim) != 1:
                    raise Refused("a malformed block shape")
                ((kind, body),) = dim.items()
                if kind == "blocked" and isinstance(body, int) and 0 < body < 2**31:
                    dims.append(body)
                elif kind == "squeezed":
                    dims.append(None)
                elif (
                    kind == "element"
                    and isinstance(body, list)
                    and len(body) == 3
                    and all(isinstance(x, int) and 0 <= x < 2**31 for x in body)
                ):
                    dims.append(pl.Element(body[0], (body[1], body[2])))
                else:
                    raise Refused(f"a block dimension of kind {str(kind)[:40]!r} is not one this lab allows")
            count = b.get("buffer_count")
            if count is not None and (not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 8):
                raise Refused("pl.Buffered takes a buffer count from 1 to 8")
            array = self.aval(b.get("array"))
            if array.ref is not None or len(dims) != len(array.shape):
                raise Refused("a BlockSpec whose block shape does not match its array")
            blocks.append(
                {
                    "array": array,
                    "block_shape": tuple(dims),
                    "buffer_count": count,
                    "memory_space": space,
                    "index_map": self.jaxpr(b.get("index_map"), depth + 1),
                }
            )
        n_in = raw.get("num_inputs")
        if not isinstance(n_in, int) or not 0 <= n_in <= len(blocks):
            raise Refused("a malformed pallas_call")
        scratch = []
        for s in raw.get("scratch") or []:
            a = self.aval(s)
            if a.ref not in ("vmem", "smem") and not (a.semaphores and a.ref == "semaphore_mem"):
                raise Refused(
                    "scratch other than pltpu.VMEM, pltpu.SMEM or pltpu.SemaphoreType.DMA is not used in this lab"
                )
            scratch.append(a)
        cp = raw.get("compiler_params")
        compiler_params = None
        if cp is not None:
            if not isinstance(cp, dict):
                raise Refused("malformed compiler parameters")
            fields = {k: self.param(v, depth) for k, v in cp.items()}
            unknown = set(fields) - {"dimension_semantics", "vmem_limit_bytes"}
            if unknown:
                raise Refused(f"compiler parameter `{sorted(unknown)[0][:40]}` is not used in this lab")
            sem = fields.get("dimension_semantics")
            if sem is not None:
                if not isinstance(sem, tuple) or not all(s in ("parallel", "arbitrary") for s in sem):
                    raise Refused("dimension_semantics takes one of 'parallel' or 'arbitrary' per grid axis")
                if len(sem) != len(grid):  # a mistake the lab names: refused in the rule's own words
                    from pallas_course.rules import semantics_length_problem

                    raise Refused(semantics_length_problem(grid, sem) or "", named=True)
            limit = fields.get("vmem_limit_bytes")
            if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit < 2**40):
                raise Refused("a malformed vmem_limit_bytes")
            compiler_params = fields
        aliases = raw.get("input_output_aliases") or []
        if not isinstance(aliases, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
            for p in aliases
        ):
            raise Refused("malformed input_output_aliases")
        name = raw.get("name")
        arg_names = raw.get("arg_names")
        if not (
            isinstance(arg_names, list)
            and len(arg_names) <= 256
            and all(isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n) for n in arg_names)
            and len(set(arg_names)) == len(arg_names)
        ):
            arg_names = None  # the kernel's parameters get names of the grader's
        kernel = self.jaxpr(raw.get("kernel"), depth + 1)
        hang = copies.problem(kernel)
        if hang is not None:
            raise Refused(hang)
        return {
            "name": name[:100] if isinstance(name, str) and name.isprintable() else None,
            "grid": tuple(grid),
            "arg_names": arg_names,
            "blocks": blocks,
            "num_inputs": n_in,
            "kernel": kernel,
            "scratch": scratch,
            "compiler_params": compiler_params,
            "input_output_aliases": {int(i): int(o) for i, o in aliases},
        }
