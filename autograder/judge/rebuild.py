"""The grader's own copy of a student's traced computation, rebuilt from the jail's description.

The jail describes what the student's function traced to (autograder.jail.jail_agent.description: names, parameters,
shapes, as JSON); nothing of it is believed. Each equation is rebuilt with the grader's own JAX primitive,
looked up by name in ALLOWED (never an object of the student's), its parameters parsed into the types that
primitive expects, and bound: JAX re-derives every shape and effect, and a described shape that does not match
is refused. A pallas_call is rebuilt through the public API (pl.pallas_call, pl.BlockSpec, pltpu.VMEM): its
kernel and index maps are grader functions that evaluate the rebuilt jaxprs. The result is a plain JAX
function of arrays: the grader traces it for the structure, runs it for the values and hands it to the TPU
compiler. Anything it cannot rebuild is refused with a sentence the student can act on (`Refused`).

The parsing of the description is autograder.judge.parse's; the structure as data, autograder.judge.structure's.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.jail.jail_agent import description as fmt
from autograder.judge import vocabulary

# The parsed form and the refusals live in autograder.judge.parse; named here too, where callers import them.
from autograder.judge.parse import (
    ALLOWED,
    INLINED,
    MEMORY_SPACES,
    Aval,
    Eqn,
    Jaxpr,
    Literal,
    Parser,
    Refused,
    frames_in,
    not_allowed,
)

__all__ = [
    "ALLOWED",
    "GLUE",
    "INLINED",
    "LAX_PRIMITIVES",
    "SPECIAL",
    "Computation",
    "LoopLimit",
    "Refused",
    "canonical_names",
    "evaluate",
    "guarded_loops",
    "not_allowed",
    "rebuild",
]

# ------------------------------------------------------------------------------------------- the vocabulary
# Derived from what the installed JAX lowers (autograder.judge.vocabulary): bound as they are, or rebuilt by hand.
LAX_PRIMITIVES = vocabulary.bound()
SPECIAL = vocabulary.SPECIAL

# Ops the rebuild itself adds, which the student's trace did not have: lax.switch clamps a cond's index.
GLUE = frozenset({"clamp"})
# rng_bit_generator's algorithms that draw the same bits on every platform (as the enum, or its value as described)
_SAME_BITS_EVERYWHERE = [
    a for alg in (lax.RandomAlgorithm.RNG_THREE_FRY, lax.RandomAlgorithm.RNG_PHILOX) for a in (alg, alg.value)
]
# A scatter's combining function, as the grader writes it (the description's copy is not read): lax.scatter_*.
_SCATTER = {
    "scatter": None,
    "scatter-add": lax.add,
    "scatter-sub": lax.sub,
    "scatter-mul": lax.mul,
    "scatter-min": lax.min,
    "scatter-max": lax.max,
}


@dataclass(frozen=True)
class Computation:
    """The rebuilt computation: `fn(*arrays)` returns what the student's function returned, computed by the
    grader's own primitives; `in_avals` are the arrays it takes (the grader's, not the jail's claim)."""

    fn: Callable[..., Any]
    in_avals: tuple[jax.ShapeDtypeStruct, ...]
    loops: bool = False  # it has while loops: run it traced under guarded_loops()
    unflatten: Callable[[list[Any]], Any] = list  # flat results (as its jaxpr returns them) -> what fn returns
    # SHA-256 of what it was rebuilt from (description, constants, input avals): the same digest, the same
    # computation (autograder.judge.compile_rule compiles it once per process)
    digest: str | None = None
    # (kernel name, traceback.FrameSummary) of each pallas_call, where the student's code launched it, as the jail
    # recorded it (autograder.judge.parse.frames_in): for messages only (pallas_course.errors.place_for picks one)
    places: tuple[tuple[str | None, Any], ...] = ()

    def for_compiler(self) -> Callable[..., Any]:
        """`fn` rebuilt with canonical names (kernel_0, in0_ref, fn_0): what the TPU compiler is handed. A new
        function each time: JAX caches traces by function, not by the naming context."""

        def canonical(*arrays: Any) -> Any:
            with canonical_names():
                return self.fn(*arrays)

        return canonical


# ------------------------------------------------------------------------------------------- loops and steps


def _steps(j: Jaxpr, outer: int = 1) -> int:
    """An upper bound of the steps `j` runs: grid points times loop iterations, nested loops multiplied."""
    worst = outer
    for e in j.eqns:
        inner = outer
        if e.name == "pallas_call":
            inner = outer * math.prod(e.params["grid"])
        elif e.name == "scan":
            length = e.params.get("length")
            if not isinstance(length, int) or not 0 <= length <= fmt.MAX_LOOP_STEPS:
                raise Refused(f"a loop of more than {fmt.MAX_LOOP_STEPS:,} iterations")
            inner = outer * max(length, 1)
        elif e.name == "while":
            inner = outer * fmt.MAX_LOOP_STEPS
        for v in e.params.values():
            for sub in _subs(v):
                worst = max(worst, _steps(sub, inner))
        worst = max(worst, inner)
        if worst > fmt.MAX_STEPS:
            raise Refused(f"the grid and loops run over {fmt.MAX_STEPS:,} steps, the grader's limit")
    return worst


def _has_while(j: Jaxpr) -> bool:
    return any(e.name == "while" or any(_has_while(sub) for v in e.params.values() for sub in _subs(v)) for e in j.eqns)


def _subs(v: Any) -> list[Jaxpr]:
    if isinstance(v, Jaxpr):
        return [v]
    if isinstance(v, (list, tuple)):
        return [s for x in v for s in _subs(x)]
    if isinstance(v, dict):
        return [s for x in v.values() for s in _subs(x)]
    return []


# ------------------------------------------------------------------------------------------- evaluation


def _check(value: Any, want: Aval, what: str) -> None:
    got = jax.typeof(value) if hasattr(jax, "typeof") else jax.core.get_aval(value)
    inner = getattr(got, "inner_aval", got)
    if want.semaphores is not None or not isinstance(inner.dtype, np.dtype):
        # an array of DMA semaphores (the grader allocates them itself: pltpu.SemaphoreType.DMA)
        if want.semaphores is None or inner is got or tuple(inner.shape) != want.shape or not _dma_semaphores(inner):
            raise Refused(f"{what} is described as other than it is (semaphores where arrays are, or the reverse)")
        return
    if tuple(inner.shape) != want.shape or np.dtype(inner.dtype) != want.dtype or (want.ref is None) != (inner is got):
        raise Refused(
            f"{what} is described as {want.dtype.name}{list(want.shape)} but is "
            f"{np.dtype(inner.dtype).name}{list(inner.shape)}"
        )


def evaluate(j: Jaxpr, args: Sequence[Any]) -> list[Any]:
    """Bind `j`'s equations, with the grader's primitives, on `args` (arrays, tracers or refs)."""
    if len(args) != len(j.inputs):
        raise Refused("a jaxpr called with the wrong number of operands")
    for a, want in zip(args, j.inputs):
        _check(a, want, "an operand")
    env: list[Any] = [*args, *j.consts]

    def read(x: Any) -> Any:
        return x.value if isinstance(x, Literal) else env[x]

    for e in j.eqns:
        ins = [read(x) for x in e.inputs]
        outs = _bind(e, ins)
        if len(outs) != len(e.outputs):
            raise Refused(f"`{e.name}` is described with {len(e.outputs)} results but has {len(outs)}")
        for o, want in zip(outs, e.outputs):
            _check(o, want, f"the result of `{e.name}`")
        env += outs
    return [read(x) for x in j.outputs]


def _dma_semaphores(aval: Any) -> bool:
    from jax._src.pallas.mosaic import core as tpu_core  # the DMA semaphore dtype has no public name

    return jnp.issubdtype(aval.dtype, tpu_core.dma_semaphore)


def _copy(e: Eqn, ins: list[Any]) -> list[Any]:
    """A copy's .start() or .wait(), rebuilt with the public API: pltpu.make_async_copy(src, dst, sem), each ref
    indexed as described (parse.Parser.copy; leaves are the equation's operands)."""
    refs = []
    for ref, transforms in e.params["copy"]:
        target = ins[ref]
        for t in transforms:
            target = target.at[_index(t, ins)]
        refs.append(target)
    try:
        copy = pltpu.make_async_copy(*refs)
        copy.start() if e.name == "dma_start" else copy.wait()
    except (TypeError, ValueError, IndexError) as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise Refused(f"a copy (pltpu.make_async_copy) with these refs is not one JAX takes ({first})") from None
    return []


def _index(index: list[Any], leaves: list[Any]) -> tuple[Any, ...]:
    def value(x: Any) -> Any:
        if isinstance(x, tuple) and x[0] == "leaf":
            if not 0 <= x[1] < len(leaves):
                raise Refused("a ref index out of range")
            return leaves[x[1]]
        return x

    out = []
    for ix in index:
        if ix[0] == "slice":
            start, size, stride = (value(x) for x in ix[1:])
            if not isinstance(size, int) or not isinstance(stride, int):
                raise Refused("a ref slice of dynamic size")
            out.append(pl.ds(start, size, stride))
        elif ix[0] == "int":
            out.append(ix[1])
        else:
            out.append(value(ix))
    return tuple(out)


def _ref_target(ref: Any, transforms: list[list[Any]], leaves: list[Any]) -> tuple[Any, Any]:
    target = ref
    for t in transforms[:-1]:
        target = target.at[_index(t, leaves)]
    return target, (_index(transforms[-1], leaves) if transforms else ...)


def _bind(e: Eqn, ins: list[Any]) -> list[Any]:
    p = e.params
    name = e.name
    if name == "rng_bit_generator" and p.get("algorithm") not in _SAME_BITS_EVERYWHERE:
        raise Refused(vocabulary.PLATFORM_DEPENDENT["rng_bit_generator"])
    if name in _SCATTER:
        combine = _SCATTER[name]
        p = dict(p, update_jaxpr=None, update_consts=())
        if combine is not None and ins:
            from jax._src.lax import lax as lax_internal

            jaxpr, consts = lax_internal._reduction_jaxpr(combine, jax.core.ShapedArray((), jnp.result_type(ins[0])))
            p.update(update_jaxpr=jaxpr, update_consts=consts)
    if name in LAX_PRIMITIVES:
        prim = LAX_PRIMITIVES[name]
        try:
            out = prim.bind(*ins, **p)
        except (TypeError, ValueError) as e:  # operands or parameters JAX's own `name` does not take
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            raise Refused(f"`{name}` with these operands and parameters is not JAX's `{name}` ({first})") from None
        return list(out) if prim.multiple_results else [out]
    if name in ("jit", "pjit"):
        # a jit again (not inlined: JAX would fold the body's operations on literal operands differently)
        body = _jaxpr_param(p, "jaxpr")

        def jitted(*args: Any) -> list[Any]:
            return evaluate(body, args)

        jitted.__name__ = jitted.__qualname__ = _canonical("fn") or p["name"]
        return list(jax.jit(jitted)(*ins))
    if name in INLINED:
        return evaluate(_jaxpr_param(p, INLINED[name]), ins)
    if name == "get":
        target, idx = _ref_target(ins[0], p["transforms"], ins[1:])
        return [jax.ref.get(target, idx)]
    if name == "swap":
        target, idx = _ref_target(ins[0], p["transforms"], ins[2:])
        return [jax.ref.swap(target, idx, ins[1])]
    if name == "addupdate":
        target, idx = _ref_target(ins[0], p["transforms"], ins[2:])
        jax.ref.addupdate(target, idx, ins[1])
        return []
    if name in ("dma_start", "dma_wait"):
        if not _IN_KERNEL.get():
            raise Refused(f"a `{name}` outside a Pallas kernel")
        return _copy(e, ins)
    if name in ("program_id", "num_programs"):
        axis = p.get("axis")
        if set(p) != {"axis"} or not isinstance(axis, int) or isinstance(axis, bool) or ins:
            raise Refused(f"a malformed `{name}`")
        return [(pl.program_id if name == "program_id" else pl.num_programs)(axis)]
    if name == "multiple_of":
        values = p.get("values")
        if set(p) != {"values"} or len(ins) != 1:
            raise Refused("a malformed `multiple_of`")
        return [pl.multiple_of(ins[0], list(values) if isinstance(values, tuple) else values)]
    if name == "platform_index":
        if set(p) != {"platforms"} or ins:
            raise Refused("a malformed `platform_index`")
        return [np.int32(tpu_branch(p["platforms"]))]
    if name == "cond":
        return _cond(p, ins)
    if name == "while":
        return _while(p, ins)
    if name == "scan":
        return _scan(p, ins)
    if name == "pallas_call":
        return _pallas_call(p, ins)
    raise not_allowed(name)


def _jaxpr_param(p: dict[str, Any], key: str) -> Jaxpr:
    j = p.get(key)
    if not isinstance(j, Jaxpr):
        raise Refused(f"a malformed `{key}`")
    return j


def _cond(p: dict[str, Any], ins: list[Any]) -> list[Any]:
    branches = p.get("branches")
    if not isinstance(branches, tuple) or not branches or not all(isinstance(b, Jaxpr) for b in branches) or not ins:
        raise Refused("a malformed `cond`")
    index, operands = ins[0], ins[1:]
    # Refs are closed over rather than passed: JAX hoists them as the original trace did (pl.when).
    refs = {i for i, o in enumerate(operands) if hasattr(jax.typeof(o), "inner_aval")}
    plain = [o for i, o in enumerate(operands) if i not in refs]

    def branch(b: Jaxpr) -> Callable[..., Any]:
        def run(*values: Any) -> list[Any]:
            it = iter(values)
            return evaluate(b, [operands[i] if i in refs else next(it) for i in range(len(operands))])

        return run

    if len(branches) == 1:
        return branch(branches[0])(*plain)
    if p.get("branches_platforms") is not None:
        # lax.platform_dependent: the TPU's branch alone, for the run and the compile alike (interpret mode on the
        # CPU would otherwise run the CPU's branch while the TPU compiler lowers another)
        chosen = tpu_branch(p["branches_platforms"])
        if chosen >= len(branches):
            raise Refused("a malformed `cond`")
        return branch(branches[chosen])(*plain)
    return list(lax.switch(index, [branch(b) for b in branches], *plain))


def tpu_branch(platforms: Any) -> int:
    """The branch of a `lax.platform_dependent` (its `platforms`: a tuple of platform names or None, the default,
    per branch) that a TPU takes: inside a Pallas kernel Mosaic's rule (the first branch naming "mosaic", else the
    default), outside one XLA's (the branch naming "tpu", else the default). The grader's run and compile both take
    it, so what is run for values is what the TPU compiler lowers."""
    if (
        not isinstance(platforms, tuple)
        or not platforms
        or not all(ps is None or (isinstance(ps, tuple) and all(isinstance(n, str) for n in ps)) for ps in platforms)
    ):
        raise Refused("a malformed `platform_dependent`")
    want = "mosaic" if _IN_KERNEL.get() else "tpu"
    named = [i for i, ps in enumerate(platforms) if ps is not None and want in ps]
    default = [i for i, ps in enumerate(platforms) if ps is None]
    if _IN_KERNEL.get():  # Mosaic takes the first of either
        found = sorted(named[:1] + default[:1])
    else:
        found = named[:1] or default[:1]
    if not found:
        where = "inside a Pallas kernel (`mosaic=`" if _IN_KERNEL.get() else "outside a kernel (`tpu=`"
        raise Refused(f"`lax.platform_dependent` has no branch a TPU takes {where} or `default=`): a TPU cannot run it")
    return found[0]


def _while(p: dict[str, Any], ins: list[Any]) -> list[Any]:
    cond_j, body_j = _jaxpr_param(p, "cond_jaxpr"), _jaxpr_param(p, "body_jaxpr")
    nc, nb = p.get("cond_nconsts"), p.get("body_nconsts")
    if not all(isinstance(n, int) and n >= 0 for n in (nc, nb)) or nc + nb > len(ins):
        raise Refused("a malformed `while`")
    cconsts, bconsts, init = ins[:nc], ins[nc : nc + nb], ins[nc + nb :]
    if not _GUARDED.get():
        return list(
            lax.while_loop(
                lambda c: evaluate(cond_j, [*cconsts, *c])[0],
                lambda c: tuple(evaluate(body_j, [*bconsts, *c])),
                tuple(init),
            )
        )

    # To run: at most MAX_LOOP_STEPS iterations, whatever the loop's own condition says, and an error after
    # (a loop that would not end on the chip must not pass here by being cut short).
    def cond(carry: tuple[Any, ...]) -> Any:
        (ok,) = evaluate(cond_j, [*cconsts, *carry[2:]])
        return jnp.logical_and(ok, carry[0] < fmt.MAX_LOOP_STEPS)

    def body(carry: tuple[Any, ...]) -> tuple[Any, ...]:
        return (carry[0] + 1, evaluate(cond_j, [*cconsts, *carry[2:]])[0], *evaluate(body_j, [*bconsts, *carry[2:]]))

    out = lax.while_loop(cond, body, (jnp.int32(0), jnp.bool_(True), *init))
    (still,) = evaluate(cond_j, [*cconsts, *out[2:]])
    jax.debug.callback(_loop_ended, jnp.logical_and(out[0] >= fmt.MAX_LOOP_STEPS, still))
    return list(out[2:])


def _loop_ended(cut: Any) -> None:
    if bool(cut):
        raise LoopLimit(
            f"a while loop ran past {fmt.MAX_LOOP_STEPS:,} iterations, the grader's limit (on a chip it may never end)"
        )


class LoopLimit(RuntimeError):
    """A rebuilt while loop ran into the grader's iteration limit while it was being run."""


_GUARDED: contextvars.ContextVar[bool] = contextvars.ContextVar("guarded_loops", default=False)
# While set: evaluating a Pallas kernel or index map, which Mosaic lowers on a TPU (tpu_branch)
_IN_KERNEL: contextvars.ContextVar[bool] = contextvars.ContextVar("in_kernel", default=False)
# While set: the names the rebuild gives kernels, their parameters and jitted functions are canonical (kernel_0,
# in0_ref, fn_0, numbered in order), never the names the description carries (a student's choice).
_CANONICAL: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("canonical_names", default=None)


@contextlib.contextmanager
def canonical_names() -> Iterator[None]:
    """Rebuild with canonical names only: what the compiler is handed (a student's names never reach it, so no
    name can change what its errors say)."""
    token = _CANONICAL.set({})
    try:
        yield
    finally:
        _CANONICAL.reset(token)


def _canonical(kind: str) -> str | None:
    """The next canonical name of `kind` ("kernel", "fn") while canonical_names() holds, else None."""
    counts = _CANONICAL.get()
    if counts is None:
        return None
    n = counts.get(kind, 0)
    counts[kind] = n + 1
    return f"{kind}_{n}"


@contextlib.contextmanager
def guarded_loops() -> Iterator[None]:
    """Rebuild while loops with the grader's iteration limit: for running, never for the structure or the
    compile (the limit is not the student's code)."""
    token = _GUARDED.set(True)
    try:
        yield
    finally:
        _GUARDED.reset(token)


@contextlib.contextmanager
def _in_kernel() -> Iterator[None]:
    token = _IN_KERNEL.set(True)
    try:
        yield
    finally:
        _IN_KERNEL.reset(token)


def _scan(p: dict[str, Any], ins: list[Any]) -> list[Any]:
    j = _jaxpr_param(p, "jaxpr")
    nconsts, ncarry, length = p.get("num_consts"), p.get("num_carry"), p.get("length")
    reverse, unroll = p.get("reverse", False), p.get("unroll", 1)
    if (
        not all(isinstance(n, int) and n >= 0 for n in (nconsts, ncarry, length))
        or nconsts + ncarry > len(ins)
        or not isinstance(reverse, bool)
        or not isinstance(unroll, (int, bool))
        or not 0 <= int(unroll) <= 64
    ):
        raise Refused("a malformed `scan`")
    consts, init, xs = ins[:nconsts], ins[nconsts : nconsts + ncarry], ins[nconsts + ncarry :]

    def body(carry: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
        out = evaluate(j, [*consts, *carry, *x])
        return out[:ncarry], out[ncarry:]

    carry, ys = lax.scan(body, list(init), list(xs), length=length, reverse=reverse, unroll=unroll)
    return [*carry, *ys]


def _pallas_call(p: dict[str, Any], ins: list[Any]) -> list[Any]:
    kernel_j: Jaxpr = p["kernel"]
    blocks = p["blocks"]
    n_in = p["num_inputs"]
    if len(ins) != n_in:
        raise Refused("a pallas_call with the wrong number of operands")

    def kernel(*refs: Any) -> None:
        with _in_kernel():
            if evaluate(kernel_j, refs):
                raise Refused("a kernel that returns values (kernels write their outputs to refs)")

    canonical = _canonical("kernel")
    names = p["arg_names"]
    if canonical is not None:  # for the compiler: nothing the student named
        kernel.__name__ = kernel.__qualname__ = canonical
        n_out, n_scratch = len(p["blocks"]) - n_in, len(p["scratch"])
        names = (
            [f"in{i}_ref" for i in range(n_in)]
            + [f"out{i}_ref" for i in range(n_out)]
            + [f"scratch{i}_ref" for i in range(n_scratch)]
        )
    elif p["name"]:  # the name kernel_trace reads (from the function, as for the student's own kernel)
        kernel.__name__ = kernel.__qualname__ = p["name"]
    if names and len(names) == len(kernel_j.inputs):
        # the student's parameter names, which interpret mode's errors quote ("input b_ref"), or canonical ones
        kernel.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]
        )

    def spec(b: dict[str, Any]) -> Any:
        imap: Jaxpr = b["index_map"]

        def index_map(*point: Any) -> tuple[Any, ...]:
            with _in_kernel():
                return tuple(evaluate(imap, point))

        mode = None if b["buffer_count"] is None else pl.Buffered(b["buffer_count"])
        space = MEMORY_SPACES[b["memory_space"]]
        return pl.BlockSpec(
            b["block_shape"], index_map, pipeline_mode=mode, **({} if space is None else {"memory_space": space})
        )

    scratch = [
        pltpu.SemaphoreType.DMA(s.shape)
        if s.semaphores
        else (pltpu.VMEM if s.ref == "vmem" else pltpu.SMEM)(s.shape, s.dtype)
        for s in p["scratch"]
    ]
    cp = p["compiler_params"]
    out_blocks = blocks[n_in:]
    call = pl.pallas_call(
        kernel,
        out_shape=tuple(b["array"].struct for b in out_blocks),
        grid=p["grid"],
        in_specs=[spec(b) for b in blocks[:n_in]],
        out_specs=tuple(spec(b) for b in out_blocks),
        scratch_shapes=scratch,
        input_output_aliases=p["input_output_aliases"],
        compiler_params=None if cp is None else pltpu.CompilerParams(**cp),
    )
    return list(call(*ins))


# ------------------------------------------------------------------------------------------- the entry point


def _out_tree(d: Any, n: int) -> Callable[[list[Any]], Any]:
    seen: list[int] = []

    def parse(x: Any, depth: int) -> Callable[[list[Any]], Any]:
        if depth > 16:
            raise Refused("a result nested too deep")
        if x is None:
            return lambda flat: None
        if not isinstance(x, dict) or len(x) != 1:
            raise Refused("a malformed result structure")
        ((kind, body),) = x.items()
        if kind == "leaf" and isinstance(body, int) and 0 <= body < n:
            seen.append(body)
            return lambda flat: flat[body]
        if kind in ("tuple", "list") and isinstance(body, list) and len(body) <= 1024:
            parts = [parse(i, depth + 1) for i in body]
            make = tuple if kind == "tuple" else list
            return lambda flat: make(f(flat) for f in parts)
        if (
            kind == "dict"
            and isinstance(body, list)
            and len(body) <= 1024
            and all(isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in body)
        ):
            parts2 = [(k, parse(v, depth + 1)) for k, v in body]
            return lambda flat: {k: f(flat) for k, f in parts2}
        raise Refused("the function returns something other than arrays")

    build = parse(d, 0)
    if sorted(seen) != list(range(n)):
        raise Refused("a malformed result structure")
    return build


def rebuild(description: Any, consts: Sequence[Any], in_avals: Sequence[jax.ShapeDtypeStruct]) -> Computation:
    """The computation `description` describes, rebuilt by the grader, taking arrays of `in_avals` (the
    arrays the grader will pass). Parsing only: the grader's tracing of `fn` binds (and checks) each
    equation. Raises Refused."""
    if not isinstance(description, dict):
        raise Refused("the description is not a mapping")
    if description.get("version") != fmt.FORMAT_VERSION:
        raise Refused(
            f"the description is of format {str(description.get('version'))[:20]}, not "
            f"{fmt.FORMAT_VERSION} (the jail's helpers and the grader differ)"
        )
    parser = Parser(consts)
    top = parser.jaxpr(description.get("jaxpr"), 0)
    _steps(top)
    want = tuple((tuple(a.shape), np.dtype(a.dtype), None) for a in in_avals)
    if tuple((a.shape, a.dtype, a.ref) for a in top.inputs) != want:
        raise Refused("the traced function takes other arrays than the ones the grader passed")
    unflatten = _out_tree(description.get("out_tree"), len(top.outputs))

    # A notebook that enabled x64 traced 64-bit types: rebuilt with them (JAX would otherwise narrow them to 32
    # bits and the rebuild would not be the student's computation); the compiler then says what a TPU says of them.
    def fn(*arrays: Any) -> Any:
        with jax.enable_x64(True) if parser.wide else contextlib.nullcontext():
            return unflatten(evaluate(top, arrays))

    return Computation(
        fn,
        tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in in_avals),
        _has_while(top),
        unflatten,
        places=tuple(frames_in(description)),
    )
