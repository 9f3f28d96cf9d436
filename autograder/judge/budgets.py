"""Static budgets on a description: what the judge refuses before anything is allocated or run.

The description's own caps (autograder.jail.jail_agent.description) bound its size; these bound what running it would
cost, read off the plain data alone (shapes, dtypes, loop lengths, grids): a walk of the JSON, no JAX. Each
bound is an upper estimate, so an honest lab kernel is far inside every one (the labs' largest graded product is
1024^3, a few MB of operands, a few hundred grid steps) and what exceeds one is refused with the reason:

- bytes: operands, constants, every equation's results (as if all were live at once) and scratch together;
- scratch: per pallas_call, no more than the largest VMEM of a TensorCore of any course chip (no TPU holds more);
- FLOPs outside the kernels (XLA work beside them) and inside them (kernel body and index maps x grid steps), loops
  multiplied;
- trips: grid steps and loop iterations, nested ones multiplied, all of them together;
- copies (pltpu.make_async_copy's .start()): how many start, and the bytes they move, over every grid step and
  loop iteration (a copy loop is refused here; a wait no copy signals, in autograder.judge.copies).

The box (autograder.judge.box) bounds what these cannot foresee: memory, CPU time, wall clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from autograder.jail.jail_agent import description as fmt

LARGEST_LAB_MATMUL_FLOPS = 2 * 1024**3  # 1024 x 1024 x 1024: the labs' largest graded product
INDEX_MAP_PASSES = 2  # the judge evaluates each index map per grid step for the run, and again for the structure


@dataclass(frozen=True)
class Budgets:
    max_bytes: int = 1 * 2**30  # with the box's 2 GB and the judge's own ~0.3 GB
    max_scratch_bytes: int = 128 * 2**20  # per pallas_call: v5e's and v6e's VMEM per TensorCore
    max_flops_outside: int = 16 * LARGEST_LAB_MATMUL_FLOPS
    max_flops_inside: int = 16 * LARGEST_LAB_MATMUL_FLOPS
    max_trips: int = 65_536  # grid steps and loop iterations, all together
    # Explicit copies, all grid steps and loops together. TPU interpret mode runs one in about 1 ms on this CPU
    # (about 1 ms each: 4,004 (8, 128) f32 copies took 4.1 s, jax 0.10.2, 2026-12-06); LAB·1.6's largest graded case starts 24.
    max_copies: int = 16_384
    max_copy_bytes: int = 1 * 2**30


BUDGETS = Budgets()


class OverBudget(ValueError):
    """What running the description would cost is over a budget; the message says which, for the student."""


def _untuple(p: Any) -> Any:
    if isinstance(p, dict) and "tuple" in p:
        return [_untuple(x) for x in p["tuple"]]
    if isinstance(p, list):
        return [_untuple(x) for x in p]
    return p


def _aval(a: Any) -> tuple[tuple[int, ...], int] | None:
    """(shape, bytes per element) of an AVAL, a Ref's inner one for a Ref; None if it is not one."""
    if isinstance(a, dict) and "ref" in a:
        a = a["ref"]
    if not isinstance(a, dict) or not isinstance(a.get("shape"), list):
        return None
    shape = tuple(d for d in a["shape"] if isinstance(d, int) and d >= 0)
    try:
        size = np.dtype(str(a.get("dtype"))).itemsize if a.get("dtype") != "bfloat16" else 2
    except TypeError:
        size = 8
    return shape, size


def _bytes(a: Any) -> int:
    got = _aval(a)
    return math.prod(got[0]) * got[1] if got else 0


def _elements(a: Any) -> int:
    got = _aval(a)
    return math.prod(got[0]) if got else 0


def _subs(params: Any) -> Iterator[Any]:
    """The sub-jaxprs among an equation's parameters."""
    if isinstance(params, dict):
        for k, v in params.items():
            if k in ("jaxpr", "closed") and isinstance(v, dict) and "eqns" in v:
                yield v
            else:
                yield from _subs(v)
    elif isinstance(params, list):
        for v in params:
            yield from _subs(v)


@dataclass
class _Cost:
    bytes: int = 0
    scratch: int = 0  # the largest one pallas_call holds
    flops_outside: float = 0.0
    flops_inside: float = 0.0
    trips: int = 0
    copies: float = 0.0
    copy_bytes: float = 0.0


def _dot_flops(eqn: dict[str, Any], avals: dict[int, Any]) -> float:
    out = _elements((eqn.get("out") or [None])[0])
    ins = [
        avals.get(a.get("v")) if isinstance(a, dict) and "v" in a else a.get("aval") if isinstance(a, dict) else None
        for a in eqn.get("in") or []
    ]
    lhs = _aval(ins[0]) if ins else None
    try:
        contract = _untuple((eqn.get("params") or {}).get("dimension_numbers"))[0][0]
        k = math.prod(lhs[0][d] for d in contract) if lhs else 1
    except (TypeError, IndexError, KeyError):
        rhs = _aval(ins[1]) if len(ins) > 1 else None
        k = math.isqrt(max(1, math.prod(lhs[0]) * math.prod(rhs[0]) // max(out, 1))) if lhs and rhs else 1
    return 2.0 * out * max(k, 1)


def _window_bytes(part: Any, ins: list[Any]) -> int:
    """Bytes of a copy part's window (description.py's dma PART): its ref's shape, indexed by its transforms."""
    if not isinstance(part, dict) or not isinstance(part.get("ref"), int) or not 0 <= part["ref"] < len(ins):
        return 0
    got = _aval(ins[part["ref"]])
    if got is None:
        return 0
    shape, size = list(got[0]), got[1]
    for t in part.get("transforms") or []:
        index = t.get("index") if isinstance(t, dict) else None
        if not isinstance(index, list):
            continue
        kept = []
        for dim, ix in zip(shape, index + [None] * len(shape)):
            if ix is None:
                kept.append(dim)
            elif isinstance(ix, dict) and isinstance(ix.get("slice"), list) and len(ix["slice"]) == 3:
                n = ix["slice"][1]
                kept.append(n if isinstance(n, int) and 0 <= n <= dim else dim)
        shape = kept
    return math.prod(shape) * size


def _walk(j: Any, cost: _Cost, times: float, inside: bool) -> None:
    """Add `j`'s costs to `cost`, run `times` times (its enclosing grids and loops), `inside` a kernel. Every jaxpr the
    description carries is walked: nested ones (`_subs`), a pallas_call's kernel and its index maps."""
    if not isinstance(j, dict):
        return
    avals: dict[int, Any] = {}
    n = 0
    for a in j.get("in") or []:
        avals[n] = a
        n += 1
    for c in j.get("consts") or []:
        avals[n] = c[1] if isinstance(c, list) and len(c) == 2 else None
        n += 1
    for eqn in j.get("eqns") or []:
        if not isinstance(eqn, dict):
            continue
        name, params, outs = eqn.get("p"), eqn.get("params") or {}, eqn.get("out") or []
        for o in outs:
            avals[n] = o
            n += 1
        cost.bytes += sum(_bytes(o) for o in outs) if isinstance(outs, list) else 0
        ins = [avals.get(a["v"]) if isinstance(a, dict) and "v" in a else None for a in eqn.get("in") or []]
        work = (
            _dot_flops(eqn, avals)
            if name == "dot_general"
            else float(max([_elements(x) for x in ins + list(outs)] or [0]))
        )
        if name == "dma_start":
            parts = params.get("copy")
            operands = [avals.get(a["v"]) if isinstance(a, dict) and "v" in a else None for a in eqn.get("in") or []]
            cost.copies += times
            if isinstance(parts, list) and len(parts) > 1:
                cost.copy_bytes += times * _window_bytes(parts[1], operands)
        if inside:
            cost.flops_inside += work * times
        else:
            cost.flops_outside += work * times
        subs = list(_subs(params))
        if name == "pallas_call":
            grid = params.get("grid") if isinstance(params.get("grid"), list) else []
            steps = math.prod(g for g in grid if isinstance(g, int) and g > 0)
            cost.trips += int(times * steps)
            scratch = sum(_bytes(s) for s in params.get("scratch") or [])
            cost.scratch = max(cost.scratch, scratch)
            cost.bytes += scratch
            _walk(params.get("kernel"), cost, times * steps, True)
            # index maps run at every grid step, in the run and again for the structure (every grid point)
            for block in params.get("blocks") or []:
                if isinstance(block, dict):
                    _walk(block.get("index_map"), cost, INDEX_MAP_PASSES * times * steps, True)
            continue
        if name == "scan":
            length = params.get("length")
            trips = length if isinstance(length, int) and length > 0 else 1
        elif name == "while":
            trips = fmt.MAX_LOOP_STEPS  # the grader runs while loops under that limit
        else:
            trips = 1
        if trips > 1:
            cost.trips += int(times * trips)
        if name == "cond":  # one branch runs: the dearest counts
            branches = []
            for sub in subs:
                c = _Cost()
                _walk(sub, c, times, inside)
                branches.append(c)
            for c in branches:
                cost.bytes += c.bytes
                cost.scratch = max(cost.scratch, c.scratch)
                cost.trips += c.trips
            cost.flops_inside += max((c.flops_inside for c in branches), default=0.0)
            cost.flops_outside += max((c.flops_outside for c in branches), default=0.0)
            continue
        for sub in subs:
            _walk(sub, cost, times * trips, inside)


def cost(description: Any) -> _Cost:
    """The upper estimates of what running `description` costs. Raises OverBudget on data the walk cannot read
    (any description the jail's describe() makes is read: the mutant corpus goes through it)."""
    c = _Cost()
    try:
        _walk(description.get("jaxpr") if isinstance(description, dict) else None, c, 1.0, False)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError, OverflowError) as e:
        raise OverBudget(f"the grader cannot estimate what it would cost to run ({type(e).__name__})") from None
    return c


def _gb(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def check(description: Any, const_bytes: int, in_bytes: int, budgets: Budgets = BUDGETS) -> None:
    """Raise OverBudget, with the reason, where running `description` would cost more than `budgets`."""
    c = cost(description)
    total = c.bytes + const_bytes + in_bytes
    if c.scratch > budgets.max_scratch_bytes:
        raise OverBudget(
            f"a pallas_call asks for {_gb(c.scratch)} of scratch, more than the "
            f"{_gb(budgets.max_scratch_bytes)} of VMEM any course chip has: no TPU could run it"
        )
    if total > budgets.max_bytes:
        raise OverBudget(
            f"running it would hold up to {_gb(total)} of arrays (operands, constants, results and "
            f"scratch), over the grader's limit of {_gb(budgets.max_bytes)}"
        )
    if c.trips > budgets.max_trips:
        raise OverBudget(
            f"it runs {c.trips:,} grid steps and loop iterations, over the grader's limit of {budgets.max_trips:,}"
        )
    if c.copies > budgets.max_copies:
        raise OverBudget(
            f"its kernels start about {c.copies:,.0f} copies (make_async_copy(...).start() x grid steps x loops), "
            f"over the grader's limit of {budgets.max_copies:,}"
        )
    if c.copy_bytes > budgets.max_copy_bytes:
        raise OverBudget(
            f"its copies move about {_gb(c.copy_bytes)} (bytes per copy x copies started), over the grader's "
            f"limit of {_gb(budgets.max_copy_bytes)}"
        )
    if c.flops_outside > budgets.max_flops_outside:
        raise OverBudget(
            f"it computes about {c.flops_outside:.2g} FLOPs outside its kernels (XLA work beside them), "
            f"over the grader's limit of {budgets.max_flops_outside:.2g} (16 of the labs' largest "
            "matmuls)"
        )
    if c.flops_inside > budgets.max_flops_inside:
        raise OverBudget(
            f"its kernels compute about {c.flops_inside:.2g} FLOPs (body and index maps x grid steps x "
            f"loops), over the grader's limit of {budgets.max_flops_inside:.2g} (16 of the labs' largest "
            "matmuls)"
        )
