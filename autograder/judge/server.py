"""The judge's side: rebuild a described computation, read its structure, run it, compile it.

`python -m autograder.judge.server` is the child process autograder.judge.box starts: it reads requests
(autograder.judge.protocol) on stdin and answers on stdout, nothing else. No student code is ever here: only the
description the jail sent (rebuilt with the grader's own primitives, autograder.judge.rebuild), its constants, and the
grader's inputs. `Judge.handle` is the same work for the tests' LocalJudge (autograder.judge.testing), in their own
process.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.failures import BadAnswer, StudentError, student_error_from
from autograder.held import arrays as held_arrays
from autograder.jail.jail_agent import wire


@dataclass(frozen=True)
class Rebuilt:
    """One traced computation, as the grader rebuilt it: its structure, or why there is none."""

    computation: Any  # autograder.judge.rebuild.Computation, or None
    structure: Any  # pallas_course.kernel_trace.Trace, or None
    closed: Any = None  # the rebuilt computation's jaxpr: what the structure is read from
    closed_run: Any = None  # what runs: the same, but with the grader's limit on while loops
    error: StudentError | None = None


def refusal(e: Exception) -> StudentError:
    from autograder.judge.rebuild import Refused

    text = str(e) if isinstance(e, Refused) else f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    ename = "Named" if getattr(e, "named", False) else "Refused"  # Named: a mistake the lab names (parse.Refused)
    return StudentError(phase="rebuild", ename=ename, text=text[:2000], not_implemented=False)


def rebuilt(header: dict[str, Any], blobs: list[bytes], in_avals: tuple[Any, ...]) -> Rebuilt:
    """The grader's own rebuild of the computation the jail described, traced for its structure."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from autograder.jail.jail_agent.calls import quiet
    from autograder.judge.rebuild import guarded_loops, rebuild
    from pallas_course.kernel_trace import trace_jaxpr
    from pallas_course.runtime import interpret_params

    if header.get("ok") is not True:
        return Rebuilt(None, None, error=student_error_from(header.get("error")))
    try:
        consts = wire.decode_reply(header.get("consts", []), blobs)
    except wire.WireError as e:
        raise BadAnswer(f"malformed answer ({e})") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as e:
        # data of a shape the decoder did not foresee: still the jail's junk, never the grader's failure
        raise BadAnswer(f"malformed answer ({type(e).__name__}: {str(e)[:200]})") from None
    try:
        computation = rebuild(header.get("description"), consts if isinstance(consts, list) else [], in_avals)
        with quiet(), pltpu.force_tpu_interpret_mode(interpret_params()):
            closed = jax.make_jaxpr(computation.fn)(*computation.in_avals)
            closed_run = closed
            if computation.loops:
                with guarded_loops():  # a new function: JAX caches traces by function, not by this context
                    closed_run = jax.make_jaxpr(lambda *a: computation.fn(*a))(*computation.in_avals)
        structure = trace_jaxpr(closed)
    except Exception as e:  # noqa: BLE001 - whatever the description holds, it costs this call, not the grader
        from autograder.judge.parse import where_in

        refused = refusal(e)
        text = refused.text + where_in(header.get("description"), refused.text)
        return Rebuilt(None, None, error=dataclasses.replace(refused, text=text[:2400]))
    return Rebuilt(computation, structure, closed, closed_run)


def run(traced: Rebuilt, arrays: list[Any]) -> tuple[Any, StudentError | None]:
    """The values of the rebuilt computation on the grader's own inputs, under the course's TPU interpret mode."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from autograder.jail.jail_agent.calls import describe_error, quiet
    from autograder.judge.rebuild import Refused
    from pallas_course.runtime import interpret_params

    closed = traced.closed_run
    # As device arrays, as the grader passed them before the judge had a box: with numpy operands, eval_jaxpr's
    # eager pallas_call left interpret mode's output-visit records of one run to a later one (mutant kernels then
    # read as "revisited output block" at random: tests/test_mutants.py)
    arrays = [jax.numpy.asarray(a) for a in arrays]
    with quiet(), pltpu.force_tpu_interpret_mode(interpret_params()):
        try:
            flat = jax.block_until_ready(jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *arrays))
        except Exception as e:  # noqa: BLE001 - the structure stands; the run's error goes with it
            _settle()
            pltpu.reset_tpu_interpret_mode_state()
            if isinstance(e, Refused):
                return None, refusal(e)
            from pallas_course.errors import place_for

            return None, student_error_from(describe_error(e, "run", at=place_for(traced.computation.places, str(e))))
    return traced.computation.unflatten([np.asarray(x) for x in flat]), None


def _settle() -> None:
    """Wait for what a failed run still has in flight (interpret mode's callbacks run on XLA's threads and write
    its global state): a reset before they end leaves their records to the next run, which then reads as, say,
    a revisited output block it never made."""
    import jax

    try:
        jax.effects_barrier()
    except Exception:  # noqa: BLE001 - the same failure, raised again by what it waited for
        pass


def _avals(raw: Any) -> tuple[Any, ...]:
    import jax

    if not isinstance(raw, list):
        raise BadAnswer("input avals that are not a list")
    return tuple(jax.ShapeDtypeStruct(tuple(int(d) for d in shape), wire.dtype_named(dtype)) for shape, dtype in raw)


def _failed(error: StudentError) -> tuple[dict[str, Any], list[bytes]]:
    return {"ok": False, "error": dataclasses.asdict(error)}, []


def _compile(traced: Rebuilt, chip: str) -> Any:
    from pallas_course import tpu_compile

    comp = traced.computation
    # canonical names only (autograder.judge.rebuild): nothing a student named reaches the compiler
    return tpu_compile.compile_avals(comp.for_compiler(), comp.in_avals, chip, places=comp.places)


def _compile_ahead(traced: Rebuilt, chip: str) -> Any:
    from autograder import timeline
    from autograder.jail.jail_agent.calls import quiet

    with timeline.span("judge compiles ahead"), quiet():
        return _compile(traced, chip)


class Judge:
    """What the child holds: the computations it rebuilt, by the grader's key, and the answers to requests.

    `compile_ahead` starts a computation's compiles on a thread of their own, so the compiler (which releases the
    GIL) works beside the interpret-mode run the grader asks for next; `compile` then takes the verdict started
    ahead, or compiles now. The grader's wall clock on each compile request is unchanged (a compile started ahead
    only had a head start), and the box's limits bound both threads."""

    def __init__(self) -> None:
        self.traced: dict[str, Rebuilt] = {}
        self._ahead: dict[tuple[str, str], Future[Any]] = {}
        self._pool: ThreadPoolExecutor | None = None

    def handle(self, header: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        from autograder.judge import protocol

        op, key = header.get("op"), str(header.get("key"))
        if op == "trace":
            traced = rebuilt(
                {"ok": True, "description": header.get("description"), "consts": header.get("consts")},
                blobs,
                _avals(header.get("in_avals")),
            )
            if traced.error is not None:
                return _failed(traced.error)
            self.traced[key] = traced
            return {"ok": True, "structure": protocol.structure(traced.structure)}, []
        if op == "forget":
            self.traced.pop(key, None)
            for k in [k for k in self._ahead if k[0] == key]:
                self._ahead.pop(k).cancel()
            return {"ok": True}, []
        traced = self.traced.get(key)
        if traced is None:
            return {"ok": False, "unknown": key}, []
        if op == "run":
            arrays = wire.decode_reply(header.get("inputs"), blobs)
            result, error = run(traced, list(arrays))
            if error is not None:
                return _failed(error)
            room = header.get("max_bytes")
            size = sum(a.nbytes for a in held_arrays(result))
            if isinstance(room, int) and size > room:  # not sent: the grader would not keep it (autograder.held)
                return {"ok": False, "too_big": size}, []
            out: list[bytes] = []
            return {"ok": True, "result": wire.encode(result, out)}, out
        if op == "compile_ahead":
            chips = header.get("chips")
            for chip in chips if isinstance(chips, list) else []:
                if (key, str(chip)) not in self._ahead:
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(1, thread_name_prefix="compile-ahead")
                    self._ahead[(key, str(chip))] = self._pool.submit(_compile_ahead, traced, str(chip))
            return {"ok": True}, []
        if op == "compile":
            chip = str(header.get("chip"))
            ahead = self._ahead.pop((key, chip), None)
            # One compile-ahead thread: a compile still queued behind another computation's (a slow one, started
            # ahead and never asked for) is done now instead, so this request's limit is spent on its own compile.
            if ahead is not None and ahead.cancel():
                ahead = None
            verdict = ahead.result() if ahead is not None else _compile(traced, chip)  # forget pops what it cancels
            return {"ok": True, "result": protocol.compile_result(verdict)}, []
        return {"ok": False, "bad": f"no such request: {str(op)[:40]}"}, []


def warm_up() -> None:
    """What a grading's first run and first compile would each pay once per judge (libtpu's load and every compile
    chip's topology, interpret mode's first trace and run), paid before the judge says it is ready, while the jail
    starts and runs the notebook's first cells: on the grader's own one-block kernel, never a student's. A failure
    here is left for the real request to meet and report."""
    try:
        import jax
        import jax.numpy as jnp
        from jax.experimental.pallas import tpu as pltpu

        from autograder.course_manifest import manifest
        from pallas_course import tpu_compile
        from pallas_course.graded_compile import warm_kernel
        from pallas_course.runtime import interpret_params

        fn = warm_kernel()
        with pltpu.force_tpu_interpret_mode(interpret_params()):
            jax.block_until_ready(fn(jnp.zeros((8, 128), jnp.float32)))
        _settle()
        pltpu.reset_tpu_interpret_mode_state()
        if tpu_compile.available():
            chips = dict.fromkeys(c for lab in manifest().labs if lab.compile for c in lab.compile.chips)
            for chip in chips:
                tpu_compile.compile_avals(fn, [jax.ShapeDtypeStruct((8, 128), jnp.float32)], chip)
    except Exception:  # noqa: BLE001 - met again, and reported, by the request that needs it
        pass


def main() -> None:
    """Serve requests on stdin until it closes. Frames go out on a private copy of stdout; fd 1 then points at
    stderr, so whatever a library prints cannot corrupt a frame."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    reader = wire.Reader(0)
    # Imports before saying ready, while the grader starts the jail beside us.
    import jax  # noqa: F401 - imported before saying ready
    import autograder.judge.rebuild  # noqa: F401 - imported before saying ready
    from autograder.jail.jail_agent.calls import quiet

    from autograder import timeline

    with timeline.span("judge warm-up"), quiet():
        warm_up()

    timeline.record("judge process until ready", timeline.process_started(), time.time(), time.process_time())
    wire.send(out, {"ready": True, "pid": os.getpid()})
    judge = Judge()
    while True:
        try:
            header, blobs = reader.read()
        except wire.PeerGone:
            return
        try:
            with timeline.span(f"judge serves {str(header.get('op'))[:20]}"), quiet():
                reply, reply_blobs = judge.handle(header, blobs)
        except BadAnswer as e:
            reply, reply_blobs = {"ok": False, "bad": str(e)[:2000]}, []
        except (wire.WireError, TypeError, ValueError, KeyError) as e:
            reply, reply_blobs = {"ok": False, "bad": f"{type(e).__name__}: {str(e)[:500]}"}, []
        except MemoryError:
            reply, reply_blobs = {"ok": False, "memory": True}, []
        wire.send(out, reply, reply_blobs)


if __name__ == "__main__":
    sys.exit(main())
