"""Explicit copies in the judge (LAB·1.6): pltpu.make_async_copy's .start() and .wait() on DMA semaphores are
described, rebuilt with the public API and run to the kernel's own values; what would hang, run away or cannot be
rebuilt is refused before anything runs, in pallas_course.copy_rules' words (the notebook's check says the same).

What TPU interpret mode does with each mistake (jax 0.10.2, measured 2026-12-06, pallas_course.copy_rules): a wait
no copy signals never returns, a copy never waited leaves NaN, a copy out of bounds raises in the run.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.failures import StudentError
from autograder.judge import budgets, vocabulary
from autograder.judge.structure import structure_data
from autograder.labs.harness import TestFailure, call
from autograder.session.testing import LocalFunction
from pallas_course import copy_rules
from pallas_course.kernel_trace import trace_jaxpr
from pallas_course.runtime import interpret_params

ROWS = 8


def _copies(body, *, semaphores=pltpu.SemaphoreType.DMA((2,)), grid=4):
    """x -> 2x over row blocks, the copies written by `body(i, x_hbm, o_hbm, buf, sem)`."""

    def kernel(x_hbm, o_hbm, buf, sem):
        body(pl.program_id(0), x_hbm, o_hbm, buf, sem)

    def fn(x):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(grid,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((ROWS, x.shape[1]), x.dtype), semaphores],
        )(x)

    return fn


def _in(i, x_hbm, buf, sem):
    return pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf, sem.at[0])


def _out(i, o_hbm, buf, sem):
    return pltpu.make_async_copy(buf, o_hbm.at[pl.ds(i * ROWS, ROWS)], sem.at[1])


def right(i, x_hbm, o_hbm, buf, sem):
    c = _in(i, x_hbm, buf, sem)
    c.start()
    c.wait()
    buf[...] = buf[...] * 2
    c = _out(i, o_hbm, buf, sem)
    c.start()
    c.wait()


def _x(rows: int = 4 * ROWS) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((rows, 256)).astype(np.float32)


def _refusal(fn, x: np.ndarray) -> StudentError:
    with pytest.raises(StudentError) as refused:
        LocalFunction(fn).invoke((x,), {}, run=True)
    return refused.value


def test_copies_are_rebuilt_and_run_to_the_kernel_s_values_and_structure() -> None:
    x = _x()
    fn = _copies(right)
    answer = LocalFunction(fn).invoke((x,), {}, run=True)
    assert answer.error is None
    with pltpu.force_tpu_interpret_mode(interpret_params()):
        direct = np.asarray(fn(x))
    np.testing.assert_array_equal(answer.result, direct)
    np.testing.assert_array_equal(answer.result, 2 * x)
    assert structure_data(answer.structure) == structure_data(trace_jaxpr(jax.make_jaxpr(fn)(x)))
    assert {"dma_start", "dma_wait"} <= vocabulary.rebuilt()


def _wait_first(i, x_hbm, o_hbm, buf, sem):
    c = _in(i, x_hbm, buf, sem)
    c.wait()
    c.start()
    right(i, x_hbm, o_hbm, buf, sem)


def _never_started(i, x_hbm, o_hbm, buf, sem):
    _in(i, x_hbm, buf, sem).wait()
    right(i, x_hbm, o_hbm, buf, sem)


def _never_waited(i, x_hbm, o_hbm, buf, sem):
    _in(i, x_hbm, buf, sem).start()
    c = _out(i, o_hbm, buf, sem)
    c.start()
    c.wait()


def _start_in_one_branch(i, x_hbm, o_hbm, buf, sem):
    c = _in(i, x_hbm, buf, sem)
    pl.when(i == 0)(c.start)
    c.wait()
    right(i, x_hbm, o_hbm, buf, sem)


def _wrong_semaphore(i, x_hbm, o_hbm, buf, sem):
    pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf, sem.at[0]).start()
    pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf, sem.at[1]).wait()
    right(i, x_hbm, o_hbm, buf, sem)


@pytest.mark.parametrize(
    "body,cause",
    [
        (_wait_first, copy_rules.WAIT_FIRST),
        (_never_started, copy_rules.WAIT_FIRST),
        (_start_in_one_branch, copy_rules.NEVER_WAITED),  # the branch starts, its block never waits
        (_wrong_semaphore, copy_rules.WAIT_FIRST),
        (_never_waited, copy_rules.NEVER_WAITED),
    ],
)
def test_a_wait_no_copy_signals_or_a_copy_never_waited_is_refused_before_it_runs(body, cause) -> None:
    """In interpret mode a wait with no start before it would hang the run (a wait that never returns): refused statically."""
    refused = _refusal(_copies(body), _x())
    assert refused.phase == "rebuild"
    assert cause in refused.text


def test_a_copy_loop_is_refused_by_the_budget_on_copies() -> None:
    def looping(i, x_hbm, o_hbm, buf, sem):
        def again(k, carry):
            c = _in(i, x_hbm, buf, sem)
            c.start()
            c.wait()
            return carry

        jax.lax.fori_loop(0, 4096, again, 0)
        right(i, x_hbm, o_hbm, buf, sem)

    refused = _refusal(_copies(looping), _x())
    assert refused.ename == "OverBudget"
    assert "copies (make_async_copy(...).start() x grid steps x loops)" in refused.text
    assert f"limit of {budgets.BUDGETS.max_copies:,}" in refused.text


def test_a_copy_out_of_bounds_fails_in_the_run_with_interpret_mode_s_error_explained() -> None:
    def past_the_end(i, x_hbm, o_hbm, buf, sem):
        c = pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS + 4, ROWS)], buf, sem.at[0])
        c.start()
        c.wait()
        right(i, x_hbm, o_hbm, buf, sem)

    answer = LocalFunction(_copies(past_the_end)).invoke((_x(),), {}, run=True)
    assert answer.error is not None
    assert "Out-of-bounds read" in answer.error.text  # TPU interpret mode's own words (jax 0.10.2)
    assert "reads past the end of its ref" in (answer.error.explanation or "")  # pallas_course.errors'
    with pytest.raises(TestFailure, match=r"add_f32: add\(x, y\) raised an error: a copy .*reads past the end"):
        call("add_f32", "add(x, y)", _copies(past_the_end), _x())


@pytest.mark.parametrize(
    "fn_of,cause",
    [
        ("sync_copy", copy_rules.SYNC_COPY),
        ("regular", copy_rules.REGULAR_SEMAPHORES),
    ],
)
def test_what_the_grader_does_not_rebuild_is_refused_with_the_course_s_words(fn_of: str, cause: str) -> None:
    def sync(i, x_hbm, o_hbm, buf, sem):
        pltpu.sync_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf)
        right(i, x_hbm, o_hbm, buf, sem)

    fn = _copies(sync) if fn_of == "sync_copy" else _copies(right, semaphores=pltpu.SemaphoreType.REGULAR((2,)))
    if fn_of == "regular":

        def signalled(i, x_hbm, o_hbm, buf, sem):
            pl.semaphore_signal(sem.at[0], 1)
            pl.semaphore_wait(sem.at[0], 1)

        fn = _copies(signalled, semaphores=pltpu.SemaphoreType.REGULAR((2,)))
    refused = _refusal(fn, _x())
    assert refused.phase == "rebuild"
    assert cause in refused.text


def test_the_budget_counts_copies_and_their_bytes() -> None:
    from autograder.jail.jail_agent.calls import invoke

    x = _x()
    description = invoke(_copies(right), [x], {})["description"]
    cost = budgets.cost(description)
    assert cost.copies == 2 * 4  # in and out, 4 grid steps
    assert cost.copy_bytes == 2 * 4 * ROWS * 256 * 4
