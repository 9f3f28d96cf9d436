"""What one grid step of a kernel runs: the FLOPs of its dots at a given grid point, read off the kernel's jaxpr as
the step would execute it.

A kernel body is not straight-line code: `pl.when` is a `cond` (a step runs one branch: a matmul that assigns on
the first K step and adds after does one dot per step, not two), `fori_loop`/`scan` run their body once per trip
(a loop over 5 sub-tiles is 5 dots), and a `while_loop` runs until its condition fails. The walk below knows the
grid position (`pl.program_id`, `pl.num_programs`) and every scalar computed from it and from literals, so it takes
the branch a step takes and runs each loop its trip count. Where a branch or a trip count depends on data the step
reads (not known from the grid position), it counts the most expensive branch and the loop body once, and says so
(`StepWork.exact` is False), so a caller can name that reading rather than present it as exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

MAX_TRIPS = 4096  # a loop simulated beyond this is counted as this many trips (no lab kernel comes near)

# Scalar arithmetic the walk evaluates when every operand is known (the grid position, literals, values made from
# them): what `pl.when(k == 0)`, `pl.when(k == pl.num_programs(2) - 1)` and a fori_loop's counter are made of.
_NUMPY: dict[str, Callable[..., Any]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "not": np.invert,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "rem": np.fmod,  # lax.rem truncates, like C (and np.fmod)
}


def _div(a: Any, b: Any) -> Any:
    """lax.div: integer division rounds toward zero (C), float division is true division."""
    a, b = np.asarray(a), np.asarray(b)
    if np.issubdtype(a.dtype, np.integer):
        return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
    return a / b


@dataclass(frozen=True)
class StepWork:
    flops: int  # FLOPs of the dots the step runs (2 x output size x contracted size each)
    exact: bool  # False: some branch or trip count depended on data, counted at its most expensive / once


def _is_literal(v: Any) -> bool:
    return type(v).__name__ == "Literal"


def _closed(sub: Any) -> Any:
    return getattr(sub, "jaxpr", sub)


def _subs(eqn: Any) -> list[Any]:
    found = []
    for v in eqn.params.values():
        for item in v if isinstance(v, (tuple, list)) else (v,):
            if hasattr(item, "eqns") or hasattr(getattr(item, "jaxpr", None), "eqns"):
                found.append(_closed(item))
    return found


def dot_general_flops(eqn: Any) -> int:
    """2 x output size x contracted size: a multiply and an add per term."""
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    return 2 * math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[d] for d in lhs_contract)


class _Walk:
    def __init__(self, grid: Sequence[int], grid_point: Sequence[int]) -> None:
        self.grid, self.point = tuple(grid), tuple(grid_point)
        self.exact = True

    def run(self, jaxpr: Any, known_in: Sequence[Any]) -> tuple[int, list[Any]]:
        """(FLOPs, known outputs: a value or None) of `jaxpr` with inputs `known_in` (a value or None each)."""
        jaxpr = _closed(jaxpr)
        env: dict[Any, Any] = {v: k for v, k in zip(jaxpr.invars, known_in) if k is not None}

        def read(v: Any) -> Any:
            return np.asarray(v.val) if _is_literal(v) else env.get(v)

        flops = 0
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            f, outs = self.eqn(eqn, ins)
            flops += f
            for var, value in zip(eqn.outvars, outs):
                if value is not None:
                    env[var] = value
        return flops, [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn: Any, ins: list[Any]) -> tuple[int, list[Any]]:
        name, params, none = eqn.primitive.name, eqn.params, [None] * len(eqn.outvars)
        if name == "program_id":
            return 0, [np.int32(self.point[params["axis"]])]
        if name == "num_programs":
            return 0, [np.int32(self.grid[params["axis"]])]
        if name == "dot_general":
            return dot_general_flops(eqn), none
        if name in _NUMPY or name in ("div", "convert_element_type", "select_n"):
            if any(v is None for v in ins):
                return 0, none
            if name == "convert_element_type":
                return 0, [np.asarray(ins[0]).astype(params["new_dtype"])]
            if name == "select_n":
                return 0, [ins[1 + int(ins[0])]] if np.ndim(ins[0]) == 0 else none
            return 0, [np.asarray((_div if name == "div" else _NUMPY[name])(*ins))]
        if name == "cond":
            return self.cond(eqn, ins)
        if name == "scan":
            return self.scan(eqn, ins)
        if name == "while":
            return self.while_(eqn, ins)
        subs = _subs(eqn)
        if len(subs) == 1 and len(subs[0].invars) == len(ins):  # pjit, closed_call, custom_jvp/vjp, remat
            return self.run(subs[0], ins)
        return sum(self.run(sub, [None] * len(sub.invars))[0] for sub in subs), none  # run_scoped and the like

    def cond(self, eqn: Any, ins: list[Any]) -> tuple[int, list[Any]]:
        branches, operands = eqn.params["branches"], ins[1:]
        if ins[0] is not None:
            index = int(np.clip(int(ins[0]), 0, len(branches) - 1))
            return self.run(branches[index], operands)
        self.exact = False  # taken or not depends on data: the most expensive branch
        return max(self.run(b, operands)[0] for b in branches), [None] * len(eqn.outvars)

    def scan(self, eqn: Any, ins: list[Any]) -> tuple[int, list[Any]]:
        p = eqn.params
        n_consts, n_carry, length = p["num_consts"], p["num_carry"], int(p["length"])
        consts, carry = ins[:n_consts], ins[n_consts : n_consts + n_carry]
        n_xs = len(ins) - n_consts - n_carry
        flops = 0
        for _ in range(min(length, MAX_TRIPS)):
            f, outs = self.run(p["jaxpr"], consts + carry + [None] * n_xs)
            flops, carry = flops + f, outs[:n_carry]
        flops = flops * length // min(length, MAX_TRIPS) if length else 0
        return flops, carry + [None] * (len(eqn.outvars) - n_carry)

    def while_(self, eqn: Any, ins: list[Any]) -> tuple[int, list[Any]]:
        p = eqn.params
        n_cond, n_body = p["cond_nconsts"], p["body_nconsts"]
        cond_consts, body_consts, carry = ins[:n_cond], ins[n_cond : n_cond + n_body], ins[n_cond + n_body :]
        flops = 0
        for _ in range(MAX_TRIPS):
            (go,) = self.run(p["cond_jaxpr"], cond_consts + carry)[1]
            if go is None:  # the trip count depends on data: the body once
                self.exact = False
                return flops + self.run(p["body_jaxpr"], body_consts + carry)[0], [None] * len(eqn.outvars)
            if not bool(go):
                return flops, carry
            f, carry = self.run(p["body_jaxpr"], body_consts + carry)
            flops += f
        return flops, [None] * len(eqn.outvars)


def step_work(kernel_jaxpr: Any, grid: Sequence[int], grid_point: Sequence[int]) -> StepWork:
    """The dot FLOPs the kernel body runs at `grid_point` of `grid`: the `pl.when` branches that step takes, each
    loop its trip count."""
    jaxpr = _closed(kernel_jaxpr)
    walk = _Walk(grid, grid_point)
    flops, _ = walk.run(jaxpr, [None] * len(jaxpr.invars))
    return StepWork(flops, walk.exact)
