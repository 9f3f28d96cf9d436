"""A schedule test reads the call's data, not its kernel body (issue 44): a body that fails to trace costs the values
test alone (autograder.labs.harness.schedule_call, the jail's jail_agent.calls.kernel_bodies_skipped)."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from jax.experimental import pallas as pl

from autograder.jail.jail_agent import calls
from autograder.labs import lab_1_1
from autograder.labs.harness import TestFailure


def _transpose(body, out_map=lambda i, j: (j, i)):
    def transpose(x, bm=128, bn=128):
        m, n = x.shape
        return pl.pallas_call(
            body,
            grid=(m // bm, n // bn),
            in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((bn, bm), out_map),
            out_shape=jax.ShapeDtypeStruct((n, m), x.dtype),
        )(x)

    return transpose


def _no_t(x_ref, o_ref):  # the block stored as read: fails to trace on non-square blocks
    o_ref[...] = x_ref[...]


def _stub(x_ref, o_ref):
    raise NotImplementedError("not written yet: replace this line with your code")


def test_a_right_schedule_keeps_its_points_when_the_body_fails_to_trace() -> None:
    lab_1_1.transpose_schedule(_transpose(_no_t))
    with pytest.raises(TestFailure, match=r"transpose never taken|stored as they were read"):
        lab_1_1.transpose_values(_transpose(_no_t))


def test_a_wrong_schedule_still_fails_with_its_own_cause_when_the_body_fails() -> None:
    with pytest.raises(TestFailure) as failure:
        lab_1_1.transpose_schedule(_transpose(_no_t, out_map=lambda i, j: (i, j)))
    assert re.search(r"out index map must swap|belongs at block \(j, i\)", str(failure.value)), failure.value


def test_the_stub_body_still_fails_the_schedule() -> None:
    with pytest.raises(TestFailure, match="not implemented yet"):
        lab_1_1.transpose_schedule(_transpose(_stub))


def test_the_no_op_bodies_are_undone_after_the_trace() -> None:
    from jax._src.pallas import pallas_call as module

    real = module._trace_kernel_to_jaxpr
    answer = calls.invoke(_transpose(_no_t), [np.zeros((256, 512), np.float32)], {"bm": 128, "bn": 256}, bodies=False)
    assert module._trace_kernel_to_jaxpr is real
    (pc,) = [e for e in answer["description"]["jaxpr"]["eqns"] if e["p"] == "pallas_call"]
    assert pc["params"]["kernel"]["eqns"] == [] and pc["params"]["grid"] == [2, 2]
    assert pc["params"]["arg_names"] == ["x_ref", "o_ref"]  # the student's kernel's parameters, its body a no-op
    with pytest.raises(calls.CallFailed):
        calls.invoke(_transpose(_no_t), [np.zeros((256, 512), np.float32)], {"bm": 128, "bn": 256})
