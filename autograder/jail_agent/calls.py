"""Call one of the student's functions on inputs the grader sent: trace it once, report the structure of
that traced computation, and (when asked) execute *that same computation* on the inputs.

Executing the traced jaxpr, rather than calling the function again, is what makes structure and values
belong together: a function that launches a pallas_call when traced and computes with XLA when called
cannot show the grader one and hand it the other. Used by the jail's agent, and in-process by the tests
of the checks (autograder.student.LocalFunction), so both run this same code.
"""
from __future__ import annotations

import contextlib
import logging
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from .wire import Spec


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


def describe_error(e: BaseException, phase: str) -> dict[str, Any]:
    info: dict[str, Any] = {"phase": phase, "ename": type(e).__name__[:100], "text": first_line(e)[:2000],
                            "not_implemented": isinstance(e, NotImplementedError)}
    try:   # the student helpers' translator, where this version of them has one
        from pallas_course.errors import explain  # type: ignore[import-not-found]

        info["explanation"] = str(explain(e).summary)[:2000]
    except Exception:  # noqa: BLE001 - an explanation is a courtesy; the first line always travels
        pass
    return info


def canonical_key(params: dict[str, Any]) -> str:
    """A call's bound parameters as one comparable string (dtypes by name, so jnp.bfloat16 == np.dtype)."""
    import json

    def norm(v: Any) -> Any:
        if isinstance(v, (bool, int, float, str)) or v is None:
            return v
        try:
            return np.dtype(v).name
        except TypeError:
            return repr(v)

    return json.dumps({k: norm(v) for k, v in sorted(params.items())})


@contextlib.contextmanager
def references(namespace: dict[str, Any], tables: dict[str, list[Any]] | None) -> Iterator[None]:
    """While grading one function alone: each of its helpers named in `tables` answers from the grader's
    reference values ([[parameters, result], ...]) where it has one, and from the student's own helper
    elsewhere. So one wrong helper costs its own test, not every test of the functions that call it."""
    import inspect

    saved: dict[str, Any] = {}
    try:
        for name, rows in (tables or {}).items():
            own = namespace.get(name)
            if not callable(own):
                continue
            known = {canonical_key(dict(params)): result for params, result in rows}
            signature = inspect.signature(own)

            def helper(*args: Any, _own: Any = own, _known: dict = known, _sig: Any = signature, **kwargs: Any) -> Any:
                try:
                    bound = _sig.bind(*args, **kwargs)
                    bound.apply_defaults()
                    key = canonical_key(dict(bound.arguments))
                except TypeError:
                    return _own(*args, **kwargs)
                if key in _known:
                    value = _known[key]
                    return tuple(value) if isinstance(value, list) else value
                return _own(*args, **kwargs)

            helper.__name__ = name
            saved[name] = own
            namespace[name] = helper
        yield
    finally:
        namespace.update(saved)


def _is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, Spec))


def _jax_value(x: Any) -> Any:
    import jax
    import jax.numpy as jnp

    if isinstance(x, Spec):
        return jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jnp.asarray(x)


def invoke(fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], *, run: bool,
           tables: dict[str, list[Any]] | None = None) -> dict[str, Any]:
    """{"structure": trace data or None, "result": what the call returned (arrays as numpy), and "error"
    when the traced computation failed to run (its structure still stands).

    With array arguments (numpy arrays or Specs) the function is traced once; its structure is reported and,
    if `run`, that traced computation is executed under TPU interpret mode. Without, it is a plain Python call
    (LAB·1.4's models). Raises CallFailed with the student's error as data."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from pallas_course.kernel_trace import to_data, trace_jaxpr
    from pallas_course.runtime import interpret_params

    if not callable(fn):
        raise CallFailed({"phase": "call", "ename": "TypeError", "not_implemented": False,
                          "text": f"TypeError: it is a {type(fn).__name__}, not a function"})
    positions = [i for i, a in enumerate(args) if _is_array(a)]
    with quiet(), pltpu.force_tpu_interpret_mode(interpret_params()):
        if not positions:
            try:
                with references(getattr(fn, "__globals__", {}), tables):
                    return {"structure": None, "result": fn(*args, **kwargs)}
            except Exception as e:  # noqa: BLE001 - the student's error is the answer
                pltpu.reset_tpu_interpret_mode_state()
                raise CallFailed(describe_error(e, "run")) from None
        traced_args = [_jax_value(args[i]) for i in positions]

        def student(*arrays: Any) -> Any:
            full = list(args)
            for i, a in zip(positions, arrays):
                full[i] = a
            return fn(*full, **kwargs)

        try:
            closed, out_shape = jax.make_jaxpr(student, return_shape=True)(*traced_args)
        except Exception as e:  # noqa: BLE001
            raise CallFailed(describe_error(e, "trace")) from None
        structure = to_data(trace_jaxpr(closed))
        if not run:
            return {"structure": structure, "result": None}
        if any(isinstance(args[i], Spec) for i in positions):
            raise CallFailed({"phase": "run", "ename": "ValueError", "not_implemented": False,
                              "text": "ValueError: abstract arrays cannot be run"})
        try:
            flat = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *jax.tree_util.tree_leaves(traced_args))
            flat = jax.block_until_ready(flat)
        except Exception as e:  # noqa: BLE001 - the structure stands; the run's error goes with it
            pltpu.reset_tpu_interpret_mode_state()
            return {"structure": structure, "result": None, "error": describe_error(e, "run")}
        result = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), [np.asarray(x) for x in flat])
        return {"structure": structure, "result": result}
