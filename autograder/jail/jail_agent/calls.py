"""Call one of the student's functions for the grader: trace it on the shapes the grader sent and describe
the traced computation as data (jail_agent.description), or, for a function of no arrays, call it.

Nothing here computes a value the grader uses: it rebuilds the described computation with its own primitives
and runs that (autograder.judge.rebuild), so structure and values belong together and neither is a claim of the
jail. Used by the jail's agent, and in-process by the tests of the checks (autograder.session.testing.LocalFunction),
so both run this same code.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from .wire import Spec, encode


class CallFailed(Exception):
    """The student's function raised (while being traced, or while running): `info` says what, as data."""

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("text", ""))
        self.info = info


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence Python warnings and absl/jax logging around student calls."""
    loggers = [logging.getLogger(n) for n in ("absl", "jax")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def first_line(e: BaseException) -> str:
    """The one line of an exception that says what went wrong."""
    text = str(e).strip().splitlines()
    # Interpret mode runs the kernel in a callback: the real error (an out-of-bounds block index, a revisited
    # output block) is the last line of the traceback wrapped in "CpuCallback error", not the first line.
    if text and "CpuCallback error" in text[0] and len(text) > 1 and ": " in text[-1]:
        return text[-1].strip()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def describe_error(e: BaseException, phase: str, at: Any = None) -> dict[str, Any]:
    """The error as plain data. `at`: the student's frame where the traceback has none (the grader's run)."""
    info: dict[str, Any] = {
        "phase": phase,
        "ename": type(e).__name__[:100],
        "text": first_line(e)[:2000],
        "not_implemented": isinstance(e, NotImplementedError),
    }
    try:  # the student helpers' translator, where this version of them has one
        from pallas_course.errors import explain, is_stub  # type: ignore[import-not-found]

        # the stub is the student's own `raise NotImplementedError`, not JAX saying it lacks something
        info["not_implemented"] = is_stub(e)
        info["explanation"] = str(explain(e, at=at).summary)[:2000]
    except Exception:  # noqa: BLE001 - an explanation is a courtesy; the first line always travels
        pass
    return info


# The helpers a LAB·1.4 function may have stand in, and the method of pallas_course.check.YourMatmul (the course's
# models read off the notebook's own `matmul`, as its visible checks use them) that answers for each.
STAND_INS = {"step_times": "step_times", "vmem_working_set": "working_set"}
MAX_RECORDED = 5000  # calls recorded per helper (a block search makes at most a few hundred)


@contextlib.contextmanager
def stand_ins(namespace: dict[str, Any], names: list[Any] | None, record: dict[str, list[Any]]) -> Iterator[None]:
    """While grading one function alone: each helper named (STAND_INS) answers as the course's model of the
    notebook's own `matmul`, or, where that model cannot answer (no matmul, a broken one), as the student's own
    helper. Nothing of the grader's is needed, so nothing of the grader's enters the jail. Every answer is recorded
    in `record` ({name: [[parameters, value], ...]}): the grader judges the function against those values too, so
    one wrong helper costs only its own test."""
    import inspect

    saved: dict[str, Any] = {}
    try:
        for name in [n for n in (names or []) if isinstance(n, str) and n in STAND_INS]:
            own = namespace.get(name)
            if not callable(own):
                continue
            try:
                signature = inspect.signature(own)
            except (TypeError, ValueError):
                continue
            rows = record.setdefault(name, [])

            def helper(
                *args: Any,
                _own: Any = own,
                _sig: Any = signature,
                _rows: list = rows,
                _method: str = STAND_INS[name],
                **kwargs: Any,
            ) -> Any:
                try:
                    bound = _sig.bind(*args, **kwargs)
                    bound.apply_defaults()
                    value = getattr(_model(namespace), _method)(*bound.arguments.values())
                    params = dict(bound.arguments)
                except Exception:  # noqa: BLE001 - the model cannot answer here: the student's own helper does
                    value, params = _own(*args, **kwargs), None
                if params is not None and len(_rows) < MAX_RECORDED:
                    _rows.append([params, value])
                return value

            helper.__name__ = name
            saved[name] = own
            namespace[name] = helper
        yield
    finally:
        namespace.update(saved)


def _model(namespace: dict[str, Any]) -> Any:
    """pallas_course.check.YourMatmul of the notebook's `matmul`, made once per matmul."""
    from pallas_course.lab_1_4_rules import YourMatmul

    matmul = namespace.get("matmul")
    if not callable(matmul):
        raise LookupError("the notebook defines no matmul")
    cached = _MODELS.get(id(matmul))
    if cached is None or cached.matmul is not matmul:
        cached = _MODELS[id(matmul)] = YourMatmul(matmul)
    return cached


_MODELS: dict[int, Any] = {}


@contextlib.contextmanager
def kernel_bodies_skipped() -> Iterator[None]:
    """Each pallas_call traced with its kernel body replaced by a no-op of the same refs: the grid, the BlockSpecs
    (block shapes, index maps), out_shape, scratch and compiler params are the student's, data of the call that
    jax builds before it traces the body (jax 0.10.2, jax/_src/pallas/pallas_call.py: `_pallas_call` makes the grid
    mapping, then traces the body in `_trace_kernel_to_jaxpr`); the body is not traced at all. A schedule test
    reads only that data, so a body that fails to trace does not cost it (issue 44)."""
    from jax._src.pallas import pallas_call as pallas_call_module

    real = pallas_call_module._trace_kernel_to_jaxpr

    def no_body(*refs: Any, **named: Any) -> None:
        return None

    def skipped(fun: Any, debug_info: Any, *rest: Any, **kw: Any) -> Any:
        return real(no_body, debug_info, *rest, **kw)  # the same debug_info: the kernel's name and parameters

    pallas_call_module._trace_kernel_to_jaxpr = skipped
    try:
        yield
    finally:
        pallas_call_module._trace_kernel_to_jaxpr = real


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, Spec))


def _abstract(x: Any) -> Any:
    import jax

    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def invoke(
    fn: Callable[..., Any],
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    stand_in: list[Any] | None = None,
    keep_jaxpr: bool = False,
    bodies: bool = True,
) -> dict[str, Any]:
    """What the grader needs of one call, as data.

    With array arguments (numpy arrays or Specs: only their shapes and dtypes are used) the function is traced
    once, and {"description": ..., "consts": [arrays]} describes the traced computation
    (jail_agent.description); nothing is computed here: the grader rebuilds and runs it. Without, it is a plain
    Python call (LAB·1.4's models) with the helpers in `stand_in` answered by stand_ins(): {"result": what it
    returned, "own": what they answered}. Raises CallFailed with the student's error.
    `keep_jaxpr` (in-process only: the tests' round-trip check) adds the traced ClosedJaxpr as "jaxpr".
    `bodies=False` traces every kernel body as a no-op (kernel_bodies_skipped): the schedule alone, for a schedule
    test whose kernel body failed to trace."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from pallas_course.runtime import interpret_params

    from .description import describe

    if not callable(fn):
        raise CallFailed(
            {
                "phase": "call",
                "ename": "TypeError",
                "not_implemented": False,
                "text": f"TypeError: it is a {type(fn).__name__}, not a function",
            }
        )
    positions = [i for i, a in enumerate(args) if _is_array(a)]
    with quiet(), pltpu.force_tpu_interpret_mode(interpret_params()):
        if not positions:
            record: dict[str, list[Any]] = {}
            try:
                with stand_ins(getattr(fn, "__globals__", {}), stand_in, record):
                    result = fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - the student's error is the answer
                pltpu.reset_tpu_interpret_mode_state()
                raise CallFailed(describe_error(e, "run")) from None
            return {"result": result, **({"own": record} if stand_in else {})}

        def student(*arrays: Any) -> Any:
            full = list(args)
            for i, a in zip(positions, arrays):
                full[i] = a
            return fn(*full, **kwargs)

        try:
            with contextlib.nullcontext() if bodies else kernel_bodies_skipped():
                closed, out_shape = jax.make_jaxpr(student, return_shape=True)(*[_abstract(args[i]) for i in positions])
        except Exception as e:  # noqa: BLE001 - whatever the student's function raises while traced is its error
            raise CallFailed(describe_error(e, "trace")) from None
    try:
        description, consts = describe(closed, jax.tree_util.tree_structure(out_shape))
    except Exception as e:  # noqa: BLE001 - e.g. a primitive of the student's named like one of JAX's
        raise CallFailed(
            {
                **describe_error(e, "trace"),
                "text": f"what it traced to cannot be described to the grader ({first_line(e)[:300]})",
            }
        ) from None
    return {"description": description, "consts": consts, **({"jaxpr": closed} if keep_jaxpr else {})}


def reply(answer: dict[str, Any]) -> tuple[dict[str, Any], list[bytes]]:
    """The reply to a call that `invoke` answered: its JSON header and the arrays beside it. The agent sends
    it; the tests' in-process stand-in for the jail builds it here too, so the mutant corpus checks this path."""
    blobs: list[bytes] = []
    if "description" in answer:
        return {"ok": True, "description": answer["description"], "consts": encode(answer["consts"], blobs)}, blobs
    return {"ok": True, "result": encode(answer["result"], blobs), "own": encode(answer.get("own"), blobs)}, blobs
