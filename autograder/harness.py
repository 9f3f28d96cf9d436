"""What every hidden check stands on: run a student's function safely, look at what it launched,
compare against a float64 NumPy reference, and fail with one clear sentence.

Hidden test cells stay thin (`lab_1_1.add_f32(add)`); everything here runs in the notebook's kernel
under nbgrader and under `course grade` alike, so both paths give the same score.
"""
from __future__ import annotations

import contextlib
import logging
import os
import warnings
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from autograder.guard import verify as _verify_environment
from pallas_course.check import compare
from pallas_course.kernel_trace import PallasCallInfo, Trace, trace


class TestFailure(AssertionError):
    """A hidden test failed; the message is what the student reads next to the lost points."""

    __test__ = False   # not a pytest test class


def untampered(test: str) -> None:
    """Fail `test` if the notebook replaced a library or grader function the checks rely on (see
    autograder/guard.py; a no-op outside a grading kernel)."""
    _verify_environment(lambda message: TestFailure(f"{test}: {message}"))


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence Python warnings and absl logging: nbgrader scores a test cell 0 if it writes to stderr."""
    absl = logging.getLogger("absl")
    jax_log = logging.getLogger("jax")
    levels = absl.level, jax_log.level
    absl.setLevel(logging.ERROR)
    jax_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        absl.setLevel(levels[0])
        jax_log.setLevel(levels[1])


def fresh_seed() -> int:
    """New inputs every run (a kernel can't be tuned to one input); the seed goes into failure messages."""
    return int.from_bytes(os.urandom(4), "little")


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: Any, *, scale: float = 1.0,
                 offset: float = 0.0) -> Any:
    import jax.numpy as jnp

    return jnp.asarray((rng.standard_normal(shape) * scale + offset).astype(np.float32)).astype(dtype)


def as_f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    # Interpret mode runs the kernel in a callback: the real error (an out-of-bounds block index, a revisited
    # output block) is the last line of the traceback wrapped in "CpuCallback error", not the first line.
    if text and "CpuCallback error" in text[0] and len(text) > 1 and ": " in text[-1]:
        return text[-1].strip()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def call(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run the student's `fn` under forced TPU interpret mode; any exception becomes a TestFailure.

    Forcing the mode here (not only in the set-up cell) means a kernel graded on any machine runs
    with the checks for revisited output blocks and unwritten memory, whatever `interpret=` it passed.
    """
    import jax
    from jax.experimental.pallas import tpu as pltpu

    from pallas_course.runtime import interpret_params

    untampered(test)
    with quiet():
        try:
            with pltpu.force_tpu_interpret_mode(interpret_params()):
                return jax.block_until_ready(fn(*args, **kwargs))
        except NotImplementedError as e:
            raise TestFailure(f"{test}: {label} is not implemented yet ({_first_line(e)})") from None
        except Exception as e:  # noqa: BLE001 - any crash in student code is a lost test, with its reason
            pltpu.reset_tpu_interpret_mode_state()
            raise TestFailure(f"{test}: {label} raised {_first_line(e)}") from None


def traced(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """Trace the student's `fn` abstractly; a failure to trace is a TestFailure with its reason."""
    untampered(test)
    with quiet():
        try:
            return trace(fn, *args, **kwargs)
        except NotImplementedError as e:
            raise TestFailure(f"{test}: {label} is not implemented yet ({_first_line(e)})") from None
        except Exception as e:  # noqa: BLE001
            raise TestFailure(f"{test}: {label} raised {_first_line(e)} while being traced") from None


def one_pallas_call(test: str, label: str, fn: Callable[..., Any], *args: Any, outside_min_size: int = 0,
                    **kwargs: Any) -> PallasCallInfo:
    """The single pallas_call `fn` launches, with no computation around it.

    This is what makes a pure-jnp bypass (`x + y`, `x.T`) score 0, and a "fused" kernel that does half
    its work in XLA lose the points: each extra XLA op over the array is another HBM round trip.
    `outside_min_size` tolerates XLA work on operands smaller than that many elements (e.g. casting a
    LayerNorm's (d,) scale), never on the array the kernel streams.
    """
    t = traced(test, label, fn, *args, **kwargs)
    if not t.pallas_calls:
        ops = ", ".join(dict.fromkeys(t.outside)) or "no operations at all"
        raise TestFailure(f"{test}: {label} launches no pallas_call; it computed with XLA ({ops}). "
                          "The work must happen inside a Pallas kernel")
    if len(t.pallas_calls) > 1:
        raise TestFailure(f"{test}: {label} launches {len(t.pallas_calls)} pallas_calls; this kernel should be "
                          "one pallas_call (one HBM round trip)")
    work = t.work_outside(outside_min_size)
    if work:
        ops = ", ".join(dict.fromkeys(work))
        raise TestFailure(f"{test}: {label} computes outside its kernel ({ops}); move that work into the "
                          "kernel body so the array makes one trip through HBM")
    return t.pallas_calls[0]


def expect_close(test: str, label: str, actual: Any, expected: Any, *, tol: float = 0.0,
                 block: Sequence[int] | None = None, seed: int | None = None, atol: float | None = None) -> None:
    untampered(test)
    mismatch = compare(actual, expected, tol=tol, block=block, name=label, atol=atol)
    if mismatch is not None:
        where = f" [inputs from seed {seed}]" if seed is not None else ""
        raise TestFailure(f"{test}: {mismatch.message}{where}")


def expect_equal(test: str, what: str, got: Any, want: Any, hint: str) -> None:
    if got != want:
        raise TestFailure(f"{test}: {what} is {got}, expected {want}; {hint}")
