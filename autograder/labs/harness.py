"""What every hidden check stands on: run a student's function safely, look at what it launched,
compare against a float64 NumPy reference, and fail with one clear sentence.

Hidden test cells stay thin (`lab_1_1.add_f32(add)`). The checks run in the grader's process, never in the
notebook's: the student's functions arrive as `autograder.session.functions.StudentFunction` proxies into the jail,
and only plain data comes back (autograder.steps.execute runs them, for `course grade` and nbgrader alike).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from autograder.judge import compile_rule
from autograder.jail.jail_agent.calls import quiet  # noqa: F401 - the checks' name for it (LAB·1.4's models)
from autograder.failures import StudentError
from autograder.session.functions import StudentFunction
from autograder.session.testing import LocalFunction
from pallas_course import rules
from pallas_course.compare import compare, explained
from pallas_course.kernel_trace import PallasCallInfo, Trace


class TestFailure(AssertionError):
    """A hidden test failed; the message is what the student reads next to the lost points."""

    __test__ = False  # not a pytest test class


def fresh_seed() -> int:
    """New inputs every run (a kernel can't be tuned to one input); the seed goes into failure messages."""
    return int.from_bytes(os.urandom(4), "little")


def random_array(
    rng: np.random.Generator, shape: Sequence[int], dtype: Any, *, scale: Any = 1.0, offset: Any = 0.0
) -> Any:
    import jax.numpy as jnp

    # rounded to `dtype` by NumPy (rules.random_array), not by an XLA op that would compile once per shape and
    # dtype in the grader
    return jnp.asarray(rules.random_array(rng, shape, dtype, scale=scale, offset=offset))


def student_function(fn: Any) -> StudentFunction:
    """The student's function as the checks reach it: already a proxy under grading; a plain function
    (the tests of the checks) is called in this process by the same code the jail runs."""
    return fn if isinstance(fn, StudentFunction) else LocalFunction(fn)


def _failure(test: str, label: str, e: StudentError) -> TestFailure:
    if e.not_implemented:
        return TestFailure(f"{test}: {label} is not implemented yet ({e.text})")
    if e.phase == "judge":  # the grader's rebuild, run or compile of it overran its box: the text says which
        return TestFailure(f"{test}: {label}: {e.text}")
    if e.phase == "rebuild" and e.ename == "Named":  # a mistake the lab names, in the notebook check's words
        return TestFailure(f"{test}: {label}: {e.text}")
    if e.phase == "rebuild":
        return TestFailure(f"{test}: the grader could not rebuild what {label} traced to: {e.text}")
    where = " while being traced" if e.phase == "trace" else ""
    # the student helpers' explanation (pallas_course.errors: the mistake, their line, the fix) instead of the raw
    # error, which it says again in other words: one message per failure
    if e.explanation:
        return TestFailure(f"{test}: {label} raised an error{where}: {e.explanation.removeprefix('✗ ')}")
    return TestFailure(f"{test}: {label} raised {e.text}{where}")


def _runnable(args: Sequence[Any]) -> bool:
    """Concrete arrays (not jax.ShapeDtypeStruct): the traced computation can also be executed."""
    return not any(type(a).__name__ == "ShapeDtypeStruct" for a in args)


def _answer(
    test: str,
    label: str,
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    stand_in: list[str] | None = None,
) -> Any:
    try:
        answer = student_function(fn).invoke(
            tuple(args), kwargs, run=True, stand_in=stand_in, ahead=compile_rule.ahead(test)
        )
    except StudentError as e:
        raise _failure(test, label, e) from None
    if answer.error is not None:
        raise _failure(test, label, answer.error)
    # It must compile (course.yml's `compile:` rule of the lab): the same computation, for the real TPU compiler.
    rejected = compile_rule.check(test, label, answer)
    if rejected is not None:
        raise TestFailure(f"{test}: {rejected}")
    return answer


def call(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What the student's `fn` returns for these inputs (run in the jail under forced TPU interpret mode, from
    the very computation `traced` reports); any error of the student's, or the real TPU compiler's rejection of
    that computation where the lab's compile rule lists `test` (autograder.judge.compile_rule), becomes a TestFailure."""
    return _answer(test, label, fn, args, kwargs).result


def call_alone(
    test: str, label: str, fn: Callable[..., Any], *args: Any, stand_in: list[str], **kwargs: Any
) -> tuple[Any, dict[str, list[Any]]]:
    """`call` with the helpers named in `stand_in` answered, in the jail, by the course's model of the notebook's
    own matmul (as its visible checks do; nothing of the grader's enters the jail), and what they answered
    ({name: [[params, value], ...]}, plain data) for the grader to judge `fn` by: one wrong helper costs only its
    own test."""
    answer = _answer(test, label, fn, args, kwargs, stand_in)
    own = answer.own or {}
    return answer.result, {
        name: [r for r in own.get(name) or [] if isinstance(r, list) and len(r) == 2 and isinstance(r[0], dict)]
        for name in stand_in
    }


def traced(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Trace:
    """What the student's `fn` launches for these inputs, traced once; with concrete inputs the same traced
    computation is also run, and `call` with the same inputs returns its values."""
    try:
        # a test the compile rule lists compiles what it runs (`call`, next): the compiles start beside this run
        answer = student_function(fn).invoke(args, kwargs, run=_runnable(args), ahead=compile_rule.ahead(test))
    except StudentError as e:
        raise _failure(test, label, e) from None
    return _structure(test, label, answer.structure)


def _structure(test: str, label: str, structure: Trace | None) -> Trace:
    if structure is None:
        raise TestFailure(f"{test}: {label} was given no arrays, so there is nothing to trace")
    return structure


def _one_of(test: str, label: str, t: Trace, outside_min_size: int = 0) -> PallasCallInfo:
    problem = rules.one_kernel_problem(label, t, outside_min_size)
    if problem:
        raise TestFailure(f"{test}: {problem}")
    return t.pallas_calls[0]


def one_pallas_call(
    test: str, label: str, fn: Callable[..., Any], *args: Any, outside_min_size: int = 0, **kwargs: Any
) -> PallasCallInfo:
    """The single pallas_call `fn` launches, with no computation around it.

    This is what makes a pure-jnp bypass (`x + y`, `x.T`) score 0, and a "fused" kernel that does half
    its work in XLA lose the points: each extra XLA op over the array is another HBM round trip.
    `outside_min_size` tolerates XLA work on operands smaller than that many elements (e.g. casting a
    LayerNorm's (d,) scale), never on the array the kernel streams.
    """
    return _one_of(test, label, traced(test, label, fn, *args, **kwargs), outside_min_size)


def schedule_call(
    test: str, label: str, fn: Callable[..., Any], *args: Any, outside_min_size: int = 0, **kwargs: Any
) -> PallasCallInfo:
    """`one_pallas_call` for a schedule test, whose rule reads only the call's data: grid, BlockSpecs (block shapes,
    index maps), out_shape, compiler params. A kernel body that fails to trace (a value stored into a block of
    another shape, a ref used as an array) is the values test's failure, named there; here the same call is traced
    again with each kernel body a no-op of the same refs (jail_agent.calls.kernel_bodies_skipped) and the schedule
    read from that, which the grader rebuilds as it rebuilds any trace (nothing of the jail's is believed; the
    schedule is the student's either way). The stub (NotImplementedError), and an error the no-op body does not
    remove (the grid, a BlockSpec, the wrapper), still fail with the first error."""
    student = student_function(fn)
    try:
        answer = student.invoke(args, kwargs, run=False)
    except StudentError as e:
        if e.phase != "trace" or e.not_implemented:
            raise _failure(test, label, e) from None
        try:
            answer = student.invoke(args, kwargs, run=False, bodies=False)
        except StudentError:
            raise _failure(test, label, e) from None
    return _one_of(test, label, _structure(test, label, answer.structure), outside_min_size)


def expect_close(
    test: str,
    label: str,
    actual: Any,
    expected: Any,
    *,
    tol: float = 0.0,
    block: Sequence[int] | None = None,
    seed: int | None = None,
    atol: float | None = None,
    kernel: PallasCallInfo | None = None,
    hint: Callable[[], str | None] | None = None,
) -> None:
    """`kernel` (the traced call) tells an accumulator never zeroed from an output never stored; `hint()`, called
    only on a mismatch, is the rule's diagnosis of a wrong answer (pallas_course.compare.explained)."""
    mismatch = compare(actual, expected, tol=tol, block=block, name=label, atol=atol, kernel=kernel)
    if mismatch is not None:
        where = f" [inputs from seed {seed}]" if seed is not None else ""
        named = hint() if hint is not None and mismatch.kind == "values" else None
        raise TestFailure(f"{test}: {explained(mismatch, named)}{where}")
