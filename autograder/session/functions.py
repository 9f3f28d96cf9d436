"""The student's functions as the hidden checks reach them: proxies whose calls the grader answers itself.

The hidden checks receive `StudentFunction`s instead of functions. Calling one sends the agent the inputs'
shapes and dtypes (the values, drawn here, never leave this process) and gets back a description of what the
function traced to (jail_agent.description). The grader rebuilds that computation with its own primitives
(autograder.judge.rebuild), reads the structure from its rebuild, and runs the rebuild on its inputs for the values:
nothing the jail says is believed. Where the function lives says a subclass: autograder.session.session
.RemoteFunction (grading: in the jailed notebook), autograder.session.testing.LocalFunction (the tests of the checks).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from autograder.confine.env import compile_like_the_jail
from autograder.failures import BadAnswer, StudentError, student_error_from
from autograder.held import Held
from autograder.jail.jail_agent import wire
from autograder.judge.client import JudgeClient, JudgedComputation, Traced

if TYPE_CHECKING:
    from pallas_course.kernel_trace import Trace


@dataclass(frozen=True)
class Invocation:
    structure: Trace | None
    result: Any
    error: StudentError | None = None  # the rebuilt computation failed to run (the structure stands)
    computation: JudgedComputation | None = None  # what was graded: the judge's rebuild (None for plain calls)
    own: dict[str, list[Any]] | None = None  # what the stand-in helpers answered: {name: [[params, value]]}


def _encode_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, list[bytes]]:
    blobs: list[bytes] = []
    return wire.encode(list(args), blobs), wire.encode(dict(kwargs), blobs), blobs


def _key(enc_args: Any, enc_kwargs: Any, blobs: list[bytes]) -> str:
    h = hashlib.sha256(json.dumps([enc_args, enc_kwargs]).encode())
    for b in blobs:
        h.update(hashlib.sha256(b).digest())
    return h.hexdigest()


def _is_array(x: Any) -> bool:
    """What the jail treats as an array argument once it crossed the wire (wire.encode: arrays and specs)."""
    if type(x).__name__ == "ShapeDtypeStruct":
        return True
    return (
        hasattr(x, "__array__")
        and hasattr(x, "shape")
        and hasattr(x, "dtype")
        and not isinstance(x, (np.generic, bool, int, float))
    )


class StudentFunction:
    """A student's function the checks may trace and run; subclasses say where it is traced."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self._cache: dict[str, Invocation] = {}
        self._traced: dict[str, Traced] = {}

    def _judge(self) -> JudgeClient:
        """The judge that rebuilds, runs and compiles what this function traced to (autograder.judge.client)."""
        raise NotImplementedError

    def _send(
        self, enc_args: Any, enc_kwargs: Any, blobs: list[bytes], stand_in: list[str] | None, bodies: bool = True
    ) -> tuple[dict[str, Any], list[bytes]]:
        """The jail's reply to one call (a header and its blobs), unchecked. `bodies=False`: every kernel body
        traced as a no-op (jail_agent.calls.kernel_bodies_skipped)."""
        raise NotImplementedError

    def _rebuilt(self, traced: Traced) -> None:
        """Called with each new rebuild (LocalFunction checks it against the direct trace)."""

    def invoke(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        run: bool,
        stand_in: list[str] | None = None,
        ahead: Callable[[Any], None] | None = None,
        bodies: bool = True,
    ) -> Invocation:
        """Trace (and if `run`, execute) the function on these inputs.

        With arrays among the arguments, the jail is sent only their shapes and dtypes; it describes what the
        function traced to, the grader rebuilds that (autograder.judge.rebuild) and reads the structure from its
        rebuild, and runs the rebuild on these inputs for the values. One description per shapes, one run per
        inputs: the structure check and the value check of one case see one computation. Without arrays it is a
        plain call in the jail. `stand_in`: helpers the function calls that answer as the course's model of the
        notebook's own matmul (jail_agent.calls.stand_ins); what they answered comes back in `own`. Only names
        travel in, never a value of the grader's. `ahead(computation)`, called once the computation is rebuilt and
        before it runs, lets the grader start work on it beside the run (the compile rule's compiles).
        `bodies=False` (structure only): the jail traces each kernel body as a no-op, so only the schedule (grid,
        BlockSpecs, out_shape, compiler params) is the student's; the grader rebuilds that as it rebuilds any trace."""
        names = [str(n) for n in stand_in] if stand_in else None
        positions = [i for i, a in enumerate(args) if _is_array(a)]
        if not positions:
            enc_args, enc_kwargs, blobs = _encode_call(args, kwargs)
            key = _key([enc_args, names], enc_kwargs, blobs)
            if key not in self._cache:
                self._cache[key] = plain_answer(
                    *self._send(enc_args, enc_kwargs, blobs, names), held=self._judge().held
                )
            return self._cache[key]
        import jax

        in_avals = tuple(jax.ShapeDtypeStruct(tuple(args[i].shape), args[i].dtype) for i in positions)
        abstract = list(args)
        for i, a in zip(positions, in_avals):
            abstract[i] = a
        enc_args, enc_kwargs, blobs = _encode_call(tuple(abstract), kwargs)
        trace_key = _key([enc_args, names] + ([] if bodies else ["no bodies"]), enc_kwargs, blobs)
        traced = self._traced.get(trace_key)
        if traced is None:
            traced = self._traced[trace_key] = self._judge().trace(
                *self._send(enc_args, enc_kwargs, blobs, names, bodies), in_avals
            )
            self._rebuilt(traced)
        if traced.error is not None:  # the student's error, or the grader refused what was traced
            raise traced.error
        if not bodies:  # a schedule alone: never run, its values are not the student's kernel's
            return Invocation(traced.structure, None, computation=traced.computation)
        if not run or any(type(args[i]).__name__ == "ShapeDtypeStruct" for i in positions):
            return Invocation(traced.structure, None, computation=traced.computation)
        if ahead is not None and traced.computation is not None:
            ahead(traced.computation)
        enc_args, enc_kwargs, blobs = _encode_call(args, kwargs)
        key = _key([enc_args, names], enc_kwargs, blobs)
        if key not in self._cache:
            result, error = self._judge().run(traced, [args[i] for i in positions])
            self._cache[key] = Invocation(traced.structure, result, error, traced.computation)
        return self._cache[key]

    def __repr__(self) -> str:
        return f"<the student's {self.name}>"


def plain_answer(header: dict[str, Any], blobs: list[bytes], held: Held | None = None) -> Invocation:
    """The jail's reply to a plain call (no arrays): the value it returned, as data, counted in `held` (what the
    submission's grading holds: a reply past it costs this call, autograder.held)."""
    if header.get("ok") is not True:
        raise student_error_from(header.get("error"))
    why = held.overrun(sum(len(b) for b in blobs)) if held is not None else None
    if why is not None:
        raise StudentError(phase="call", ename="Overrun", text=f"it {why}", not_implemented=False)
    try:
        result = wire.decode_reply(header.get("result"), blobs)
        own = wire.decode_reply(header.get("own"), blobs)
        if held is not None:
            held.keep([result, own])
    except wire.WireError as e:
        raise BadAnswer(f"malformed answer ({e})") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise BadAnswer(f"malformed answer ({type(e).__name__}: {str(e)[:200]})") from None
    if own is not None and not (isinstance(own, dict) and all(isinstance(v, list) for v in own.values())):
        raise BadAnswer("malformed answer (own: not a mapping of lists)")
    return Invocation(None, result, own=own)


# The grader runs the rebuilt kernels in interpret mode (the tests' LocalJudge in this very process): their
# interpreters compile with the jail's XLA flags, set before this process first uses XLA.
compile_like_the_jail()
