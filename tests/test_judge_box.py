"""The judge in its box (autograder.judge): static budgets before anything runs, then memory, CPU time and wall
clock around the grader's own rebuild, run and compile of a student's computation, each costing only the request
that overran; a killed grader leaves no judge, cgroup or temporary folder behind.

The attacks are ordinary notebook code, described as the jail describes it (jail_agent.calls.invoke). Every
limit here fires by what is done (bytes, FLOPs, trips, CPU seconds, work far past a wall clock), never by how
loaded the machine is: each attack needs many times its limit.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.confine import orphans
from autograder.jail.jail_agent.calls import invoke, reply
from autograder.judge import box, budgets, client
from autograder.judge.box import BoxLimits
from autograder.judge.budgets import Budgets, OverBudget
from autograder.judge.client import BoxedJudge
from autograder.judge.testing import LocalJudge
from autograder.course_manifest import REPO_ROOT
from tests.hostile import STALLING_ADD, STALLING_TRANSPOSE

F32 = jnp.float32
X = np.ones((16, 128), np.float32)
AVALS = (jax.ShapeDtypeStruct((16, 128), F32),) * 2


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once `pid` no longer exists (a killed grader's judge dies with it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _kernel(x_ref, y_ref, o_ref, *scratch):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def add_with_scratch(n: int, side: int = 4096):
    """A correct add holding `n` unused (side, side) f32 VMEM scratch buffers (64 MiB each at 4096)."""

    def f(x, y):
        return pl.pallas_call(
            _kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            scratch_shapes=[pltpu.VMEM((side, side), F32) for _ in range(n)],
        )(x, y)

    return f


def add_beside_matmuls(x, y):
    """A correct add that also traces to 8 XLA matmuls of 4096^2 beside its kernel (results unused)."""
    m = jnp.full((4096, 4096), 0.5, F32)
    for _ in range(8):
        m = m @ m
    return add(x, y)


def add_fori_matmuls(side: int = 1024, trips: int = 4096):
    def f(x, y):
        m = lax.fori_loop(0, trips, lambda i, m: (m @ m) * 0.5, jnp.full((side, side), 0.5, F32))
        return add(x, y) + jnp.sum(m) * 0

    return f


def add_many_steps(x, y):
    """A correct add whose grid revisits the one block 65,537 times (a fori_loop of 8 in each of 8,193 steps)."""

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = lax.fori_loop(0, 8, lambda i, v: v * 1.0, x_ref[...] + y_ref[...])

    return pl.pallas_call(
        kernel,
        grid=(8_193,),
        in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0))] * 2,
        out_specs=pl.BlockSpec(x.shape, lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def add_big_kernel_dots(x, y):
    """A correct add whose kernel also multiplies two 512^2 blocks at each of 512 grid steps (1.4e11 FLOPs)."""

    def kernel(a_ref, o_ref):
        o_ref[...] = a_ref[...] @ a_ref[...]

    big = jnp.full((512, 512), 1.0, F32)
    pl.pallas_call(
        kernel,
        grid=(8, 8, 8),
        in_specs=[pl.BlockSpec((512, 512), lambda i, j, k: (0, 0))],
        out_specs=pl.BlockSpec((512, 512), lambda i, j, k: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((512, 512), F32),
    )(big)
    return add(x, y)


def add_many_intermediates(x, y):
    """A correct add beside 20 elementwise passes over a 4096^2 array: 1.3 GB of results, few FLOPs."""
    m = jnp.full((4096, 4096), 0.5, F32)
    for _ in range(20):
        m = m + 1.0
    return add(x, y)


def add_index_map_matmul(x, y):
    """A correct add whose index maps each compute a 2048^2 matmul from an iota at every grid step (its result times
    0): 1.7e10 FLOPs per evaluation, that the kernel's body does not show (issue 33)."""

    def index(i):
        a = lax.broadcasted_iota(F32, (2048, 2048), 0)
        return (i + (a @ a)[0, 0].astype(jnp.int32) * 0, 0)

    spec = pl.BlockSpec((8, 128), index)
    return pl.pallas_call(
        _kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def _described(fn: Any, avals: tuple = AVALS) -> tuple[dict[str, Any], list[bytes]]:
    header, blobs = reply(invoke(fn, [np.zeros(a.shape, a.dtype) for a in avals], {}))
    return json.loads(json.dumps(header)), blobs


def _refused(fn: Any, b: Budgets = budgets.BUDGETS) -> str:
    header, blobs = _described(fn)
    with pytest.raises(OverBudget) as e:
        budgets.check(header["description"], sum(map(len, blobs)), 2 * X.nbytes, b)
    return str(e.value)


# ----------------------------------------------------------------------------- static budgets (and a mutant each)

# attack -> (the budget it is over, the words of the refusal)
ATTACKS = {
    "200 unused 64 MiB scratch buffers": (
        add_with_scratch(200),
        "max_scratch_bytes",
        "of scratch, more than the 128 MB",
    ),
    "3 unused 64 MiB scratch buffers": (add_with_scratch(3), "max_scratch_bytes", "of VMEM any course chip has"),
    "20 passes over a 4096^2 array": (add_many_intermediates, "max_bytes", "of arrays (operands, constants"),
    "8 XLA matmuls of 4096^2": (add_beside_matmuls, "max_flops_outside", "FLOPs outside its kernels"),
    "fori_loop of 4096 matmuls": (add_fori_matmuls(256), "max_flops_outside", "FLOPs outside its kernels"),
    "512^2 dots in 512 grid steps": (add_big_kernel_dots, "max_flops_inside", "its kernels compute about"),
    "a 2048^2 matmul in each index map": (add_index_map_matmul, "max_flops_inside", "body and index maps x grid"),
    "65,537 grid steps and loop trips": (add_many_steps, "max_trips", "grid steps and loop iterations"),
}


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_is_refused_before_anything_runs(attack: str) -> None:
    fn, _, words = ATTACKS[attack]
    assert words in _refused(fn)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_bound_is_what_refuses_its_attack(attack: str) -> None:
    """The mutant of each bound: without it (that budget unlimited), its attack is no longer refused for it."""
    fn, bound, words = ATTACKS[attack]
    header, blobs = _described(fn)
    lifted = dataclasses.replace(budgets.BUDGETS, **{bound: 10**18})
    if bound == "max_scratch_bytes" and "200" in attack:  # 12.5 GB of scratch is also over the bytes budget
        lifted = dataclasses.replace(lifted, max_bytes=10**18)
    try:
        budgets.check(header["description"], sum(map(len, blobs)), 2 * X.nbytes, lifted)
    except OverBudget as e:
        assert words not in str(e)


def _jaxprs(node: Any, path: tuple = ()) -> Iterator[tuple]:
    """The path of every jaxpr in a description (a mapping with in, consts, eqns and out), however it is nested."""
    if isinstance(node, dict):
        if {"in", "consts", "eqns", "out"} <= set(node):
            yield path
        for k, v in node.items():
            yield from _jaxprs(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _jaxprs(v, (*path, i))


def everywhere(x, y):
    """Every place a description holds a jaxpr: a jit, a fori_loop, a while loop, a cond, a kernel, its pl.when,
    its index maps."""

    def kernel(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(0) >= 0)
        def _():
            o_ref[...] = lax.fori_loop(0, 2, lambda i, v: v + 0.0, x_ref[...] + y_ref[...])

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    out = pl.pallas_call(
        kernel, grid=(2,), in_specs=[spec, spec], out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype)
    )(x, y)
    out = jax.jit(lambda o: lax.while_loop(lambda c: c[0] < 1, lambda c: (c[0] + 1, c[1]), (0, o))[1])(out)
    return lax.cond(out[0, 0] > 0, lambda o: o, lambda o: o * 1.0, out)


def test_the_budgets_walk_every_jaxpr_the_description_carries() -> None:
    """Issue 33: a 4096^3 product (1.4e11 FLOPs, over both FLOP budgets run once) added to any one jaxpr of the
    description, wherever it is nested, is counted and refused; the description without it passes."""
    header, blobs = _described(everywhere)
    desc = header["description"]
    budgets.check(desc, sum(map(len, blobs)), 2 * X.nbytes)
    big = {"shape": [4096, 4096], "dtype": "float32", "weak": False}
    dot = {
        "p": "dot_general",
        "in": [{"lit": 0, "aval": big}] * 2,
        "out": [big],
        "params": {
            "dimension_numbers": {
                "tuple": [{"tuple": [{"tuple": [1]}, {"tuple": [0]}]}, {"tuple": [{"tuple": []}, {"tuple": []}]}]
            }
        },
    }
    paths = list(_jaxprs(desc))
    kinds = {"index_map", "kernel", "branches", "body_jaxpr", "cond_jaxpr", "jaxpr"}
    assert kinds <= {str(k) for p in paths for k in p}, paths
    for path in paths:
        forged = copy.deepcopy(desc)
        node = forged
        for k in path:
            node = node[k]
        node["eqns"].append(dot)
        with pytest.raises(OverBudget, match="FLOPs"):
            budgets.check(forged, sum(map(len, blobs)), 2 * X.nbytes)


def test_the_lab_kernels_are_far_inside_every_budget() -> None:
    """The honest side: a 1024^3 matmul kernel (the labs' largest) with 512 grid steps costs a few % of each."""

    def matmul(a, b):
        def kernel(a_ref, b_ref, o_ref):
            @pl.when(pl.program_id(2) == 0)
            def _():
                o_ref[...] = jnp.zeros_like(o_ref)

            o_ref[...] += a_ref[...] @ b_ref[...]

        return pl.pallas_call(
            kernel,
            grid=(8, 8, 8),
            out_shape=jax.ShapeDtypeStruct((1024, 1024), F32),
            in_specs=[
                pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                pl.BlockSpec((128, 128), lambda i, j, k: (k, j)),
            ],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        )(a, b)

    header, _ = _described(matmul, (jax.ShapeDtypeStruct((1024, 1024), F32),) * 2)
    c = budgets.cost(header["description"])
    b = budgets.BUDGETS
    assert c.flops_inside < b.max_flops_inside / 10 and c.trips < b.max_trips / 10 and c.bytes < b.max_bytes / 10
    budgets.check(header["description"], 0, 8 * 2**20)


def test_an_over_budget_kernel_loses_its_test_with_the_reason() -> None:
    from autograder.labs.harness import TestFailure, call
    from autograder.session.testing import LocalFunction

    with pytest.raises(
        TestFailure,
        match=r"add_f32: the grader could not rebuild what add\(x, y\) traced to: a "
        r"pallas_call asks for 12\.5 GB of scratch",
    ):
        call("add_f32", "add(x, y)", LocalFunction(add_with_scratch(200)), X, X)


# ------------------------------------------------------------------------------------------------ the box


@pytest.fixture
def no_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The static budgets lifted, so that the box's own limits are what an attack meets."""
    monkeypatch.setattr(client, "check_budgets", lambda *a, **k: None)


def _judge(**kw: Any) -> BoxedJudge:
    limits = BoxLimits(**{k: kw.pop(k) for k in list(kw) if k in {f.name for f in dataclasses.fields(BoxLimits)}})
    wall = kw.pop("wall_s", 600.0)
    return BoxedJudge(
        limits=limits, deadline=time.monotonic() + wall, cell_timeout_s=kw.pop("cell_timeout_s", 300.0), wall_s=wall
    )


def _trace(judge: BoxedJudge, fn: Any) -> client.Traced:
    header, blobs = _described(fn)
    return judge.trace(header, blobs, AVALS)


def _still_serves(judge: BoxedJudge) -> None:
    """After an overrun the batch goes on: the same judge (a fresh child) grades an honest kernel."""
    traced = _trace(judge, add)
    out, error = judge.run(traced, [X, X])
    assert error is None and np.array_equal(out, X + X)


def _no_leftovers(b: Any) -> None:
    assert not Path(b.tmp).exists()
    assert b.cgroups is None or not any(d.exists() for d in b.cgroups.dirs.values())


def test_an_honest_kernel_is_judged_in_the_box() -> None:
    judge = _judge()
    try:
        traced = _trace(judge, add)
        assert traced.error is None and traced.structure.pallas_calls[0].grid == ()
        out, error = judge.run(traced, [X, X])
        assert error is None and np.array_equal(out, X + X)
        child = judge.box
        assert child.process.pid != os.getpid() and child.cgroups is not None
        del out
        _replies_are_held_within_the_cap(judge)
    finally:
        judge.close()
    _no_leftovers(child)


def add_with_extras(x, y):
    """A correct add that also returns four 4000 x 4096 f32 arrays: 262 MB beside its 8 KB answer."""
    extra = jnp.zeros((4000, 4096), F32)
    return (add(x, y), *(extra + i for i in range(4)))


def _replies_are_held_within_the_cap(judge: BoxedJudge) -> None:
    """Issue 33: what a submission's grading holds of its replies is counted while it lives and capped
    (autograder.held): released when dropped; a reply past the cap is never sent, costs its test with the
    reason, and the same judge serves the next request."""
    import gc

    held = judge.held
    traced = _trace(judge, add)
    kept = [judge.run(traced, [X + i, X])[0] for i in range(3)]
    assert held.bytes == 3 * X.nbytes
    del kept
    gc.collect()
    assert held.bytes == 0
    out, error = judge.run(_trace(judge, add_with_extras), [X, X])
    assert out is None and error.phase == "judge", error
    assert error.text == (
        "the grader's run of your kernel returned 250 MB of arrays, over the 64 MB the grader keeps "
        "of one notebook's results at once (the lab's tests compare a few MB): return only what the "
        "function is asked for"
    ), error.text
    assert held.peak < 2**20  # nothing of it was decoded
    # the cap is on what is held at once: with room for two results, a third waits for one to be dropped
    held.limit = 2 * X.nbytes
    first, second = (judge.run(traced, [X, X])[0] for _ in range(2))
    out, error = judge.run(traced, [X, X])
    assert out is None and "beside" not in error.text and "over the 0 MB" in error.text, error.text
    del first
    out, error = judge.run(traced, [X, X])
    assert error is None and np.array_equal(out, X + X)


@pytest.mark.usefixtures("no_budgets")
def test_memory_past_the_box_costs_only_that_run() -> None:
    judge = _judge(memory_mb=1024)
    try:
        traced = _trace(judge, add_with_scratch(24))  # 1.5 GB of scratch, allocated by the run
        assert traced.error is None
        child = judge.box
        out, error = judge.run(traced, [X, X])
        assert out is None and error.phase == "judge"
        assert (
            error.text == "the grader's run of your kernel needed more than 1024 MB (the grader's memory limit for it)"
        )
        _no_leftovers(child)
        _still_serves(judge)
    finally:
        judge.close()


@pytest.mark.usefixtures("no_budgets")
def test_cpu_time_past_the_box_costs_only_that_run() -> None:
    judge = _judge(cpu_s=10)  # the child's own start-up takes ~3 CPU s; the loop would take hours
    try:
        traced = _trace(judge, add_fori_matmuls())
        out, error = judge.run(traced, [X, X])
        assert out is None and error.text == (
            "the grader's run of your kernel used more than 10 s of CPU time (the grader's limit for it)"
        )
        _still_serves(judge)
    finally:
        judge.close()


@pytest.mark.usefixtures("no_budgets")
def test_a_run_past_its_wall_clock_costs_only_that_run() -> None:
    judge = _judge(cell_timeout_s=4)  # the run needs hours; 4 s is only a backstop
    try:
        traced = _trace(judge, add_fori_matmuls())
        out, error = judge.run(traced, [X, X])
        assert error.text == "the grader's run of your kernel took more than 4 s (the grader's limit for its run)"
        _still_serves(judge)
    finally:
        judge.close()


@pytest.mark.usefixtures("no_budgets")
def test_the_notebook_s_timeout_bounds_the_judge_too() -> None:
    judge = _judge(wall_s=15)
    try:
        traced = _trace(judge, add_fori_matmuls())
        error = traced.error or judge.run(traced, [X, X])[1]
        assert "ran past the notebook's 15 s wall-clock limit (--timeout)" in error.text
        assert judge._past_deadline()
    finally:
        judge.close()


def stalling_add(x, y):
    """A correct add with a pl.when branch that never runs but does two read-modify-writes of a 4096^2 f32
    scratch, vmem_limit_bytes raised: libtpu takes minutes on it (2048^2 took 4.8 s on a quiet machine)."""

    def kernel(x_ref, y_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

        @pl.when(pl.program_id(0) < 0)
        def _():
            s_ref[...] = s_ref[...] * 2.0 + 1.0
            s_ref[...] = jnp.sin(s_ref[...]) @ s_ref[...]

    return pl.pallas_call(
        kernel,
        grid=(1,),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0))] * 2,
        out_specs=pl.BlockSpec(x.shape, lambda i: (0, 0)),
        scratch_shapes=[pltpu.VMEM((4096, 4096), F32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 2**20),
    )(x, y)


@pytest.mark.usefixtures("no_budgets")  # its dead branch's 4096^3 matmul is over the FLOPs budget
def test_a_compile_past_its_limit_is_the_kernel_s_and_the_next_chip_is_not_tried(libtpu) -> None:
    from autograder.judge import compile_rule

    judge = _judge()
    try:
        traced = _trace(judge, stalling_add)
        v5e, v6e = traced.computation.verdicts(["v5e", "v6e"], 1)  # it takes minutes: past 1 s on any machine
        assert v5e.rejected and v5e.error_kind == "tpu-timeout" and v6e.skipped
        text = compile_rule.rejection_message("add(x, y)", ["v5e", "v6e"], v5e)
        assert "the TPU compiler did not finish within 1 s for v5e" in text
        assert v6e.message == "not tried: the compile for v5e did not finish"
        # the batch goes on: the same judge compiles an honest kernel for both chips within a real limit
        assert all(r.ok for r in _trace(judge, add).computation.verdicts(["v5e", "v6e"], 300))
    finally:
        judge.close()


@pytest.mark.usefixtures("no_budgets")  # its dead branch's 4096^3 matmul is over the FLOPs budget
def test_a_never_taken_branch_that_stalls_the_compiler_is_stopped(libtpu) -> None:
    """stalling_add (at 2048^2, 4.8 s on a quiet machine, within the 5 s limit: a verdict by speed): the limit
    stops it."""
    judge = _judge()
    try:
        traced = _trace(judge, stalling_add)
        assert traced.error is None
        t0 = time.monotonic()
        v5e, v6e = traced.computation.verdicts(["v5e", "v6e"], 5)
        assert time.monotonic() - t0 < 60
        assert v5e.error_kind == "tpu-timeout" and "did not finish within 5 s for v5e" in v5e.message, v5e
        assert v6e.skipped
    finally:
        judge.close()


def test_one_compile_per_computation_and_chip_across_submissions(libtpu, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.judge import compile_rule

    monkeypatch.setattr(compile_rule, "_CACHE", compile_rule._Cache())
    asked: list[str] = []
    first, second = _judge(), _judge()
    try:
        for judge in (first, second):  # two submissions graded by one worker, the same kernel
            real = judge._request

            def spy(header, blobs, *, real=real, **kw):
                if header.get("op") == "compile":
                    asked.append(header["chip"])
                return real(header, blobs, **kw)

            monkeypatch.setattr(judge, "_request", spy)
            traced = _trace(judge, add)
            assert compile_rule._CACHE.verdict(traced.computation, ["v5e", "v6e"], 300).rejection is None
    finally:
        first.close()
        second.close()
    assert asked == ["v5e", "v6e"]


def add_one_row_blocks(x, y):
    """A right add on (1, 128) f32 blocks: interpret mode runs it, the TPU compiler refuses the 1-row block."""
    spec = pl.BlockSpec((1, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        _kernel,
        grid=(x.shape[0],),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def _verdicts_by_request(fn: Any) -> list[tuple[bool, str | None, str]]:
    judge = _judge()
    try:
        return [(r.ok, r.error_kind, r.message) for r in _trace(judge, fn).computation.verdicts(["v5e", "v6e"], 300)]
    finally:
        judge.close()


@pytest.mark.parametrize("fn", [add, add_one_row_blocks], ids=["accepted", "refused"])
def test_compiles_started_ahead_give_the_verdicts_of_compiles_on_request(libtpu, fn: Any) -> None:
    """The judge compiles beside the run when asked ahead (autograder.judge.server.Judge): same verdicts, the run
    in between unchanged."""
    judge = _judge()
    try:
        traced = _trace(judge, fn)
        judge.compile_ahead(traced.computation.digest, ["v5e", "v6e"])
        out, error = judge.run(traced, [X, X])
        assert error is None and np.array_equal(out, X + X)
        ahead = [(r.ok, r.error_kind, r.message) for r in traced.computation.verdicts(["v5e", "v6e"], 300)]
    finally:
        judge.close()
    assert ahead == _verdicts_by_request(fn)
    assert [ok for ok, *_ in ahead] == ([True, True] if fn is add else [False, False])


@pytest.mark.usefixtures("no_budgets")  # its dead branch's 4096^3 matmul is over the FLOPs budget
def test_a_compile_started_ahead_is_held_to_the_limit_of_its_request(libtpu) -> None:
    judge = _judge()
    try:
        traced = _trace(judge, stalling_add)
        judge.compile_ahead(traced.computation.digest, ["v5e", "v6e"])
        v5e, v6e = traced.computation.verdicts(["v5e", "v6e"], 1)
        assert v5e.error_kind == "tpu-timeout" and "did not finish within 1 s for v5e" in v5e.message, v5e
        assert v6e.skipped
        _still_serves(judge)  # a fresh child: nothing of the stalled compile is left in it
    finally:
        judge.close()


# ------------------------------------------------------------------- a verdict depends on its submission alone


@dataclasses.dataclass(frozen=True)
class _Judged:
    """A computation as the box's parent holds it (no fn here): its verdicts come from `answers`, in turn."""

    digest: str
    answers: list
    in_avals: tuple = AVALS
    fn: Any = None

    def verdicts(self, chips: list[str], timeout_s: float) -> list[Any]:
        return self.answers.pop(0)


def test_only_verdicts_of_the_computation_are_kept_for_another_submission(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile stopped at its limit (by what else ran in its submission's judge) is never handed to another
    submission with the same kernel; an accepted or refused kernel is (the compiler's verdict on it)."""
    from autograder.judge import compile_rule
    from pallas_course.tpu_compile import CompileResult

    monkeypatch.setattr(compile_rule, "_CACHE", compile_rule._Cache())
    ok = [CompileResult("v5e", "t", True), CompileResult("v6e", "t", True)]
    stopped = [
        CompileResult("v5e", "t", False, error_kind="tpu-timeout", message="did not finish within 60 s"),
        CompileResult("v6e", "t", False, skipped=True, error_kind="cannot-judge", message="not tried"),
    ]
    refused = [CompileResult("v5e", "t", False, error_kind="tpu-tiling", message="1-row block")] * 2
    answers = [stopped, ok]
    first, second, third = (_Judged("model", answers) for _ in range(3))
    assert compile_rule._CACHE.verdict(first, ["v5e", "v6e"]).rejection.error_kind == "tpu-timeout"
    assert compile_rule._CACHE.verdict(second, ["v5e", "v6e"]).compiled == ("v5e", "v6e")  # compiled again
    assert compile_rule._CACHE.verdict(third, ["v5e", "v6e"]).compiled == ("v5e", "v6e")  # kept: not asked
    assert answers == []
    answers += [refused]
    assert compile_rule._CACHE.verdict(_Judged("one-row", answers), ["v5e", "v6e"]).rejection.message == "1-row block"
    assert compile_rule._CACHE.known("one-row", ["v5e", "v6e"]) and not compile_rule._CACHE.known("model", ["v5e"])


def _threads_beyond(before: set[str]) -> set[str]:
    """This process's threads that `before` did not name, once those ending have ended (within 5 s); the judges'
    zygote's two (one per grading process, started by its first judge: they hold no submission's data) aside."""
    import threading

    def left() -> set[str]:
        return {t.name for t in threading.enumerate() if not t.name.startswith("judge-zygote")} - before

    deadline = time.monotonic() + 5
    while left() and time.monotonic() < deadline:
        time.sleep(0.02)
    return left()


@pytest.mark.usefixtures("no_budgets")  # its dead branch's 4096^3 matmul is over the FLOPs budget
def test_a_slow_compile_started_ahead_changes_no_other_verdict(libtpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33's attack, in the judge: one submission's `add` traces, on one case, to a kernel the compiler takes
    minutes on (by what it is given: stalling_add), started ahead and never asked for. Its other kernel (the
    model's add) still gets its own compile within the rule's limit, and the next submission graded by the same
    process gets the model's verdict; the first submission's pending compile, threads and temp folder end with it."""
    from autograder.judge import compile_rule

    monkeypatch.setattr(compile_rule, "_CACHE", compile_rule._Cache())
    import threading

    before = {t.name for t in threading.enumerate()}
    attack = _judge()
    try:
        stall, honest = _trace(attack, stalling_add), _trace(attack, add)
        attack.compile_ahead(stall.computation.digest, ["v5e", "v6e"])
        attack.compile_ahead(honest.computation.digest, ["v5e", "v6e"])
        assert compile_rule._CACHE.verdict(honest.computation, ["v5e", "v6e"], 60).rejection is None
        child = attack.box
    finally:
        attack.close()  # the submission ends while its stalled compile runs
    assert wait_gone(child.process.pid) and not Path(child.tmp).exists()
    _no_leftovers(child)
    assert not _threads_beyond(before)
    model = _judge()
    try:
        traced = _trace(model, add)
        assert compile_rule._CACHE.verdict(traced.computation, ["v5e", "v6e"], 60).compiled == ("v5e", "v6e")
    finally:
        model.close()


# ----------------------------------------------------------------------------- a fresh judge from a warm parent


def _proc(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text()


def test_each_judge_is_a_fresh_fork_of_a_stateless_zygote_with_the_box_s_chain() -> None:
    """Two submissions' judges: two processes forked from the grading process's one zygote (no Python start, no
    imports of their own), each in its own session, folder, cgroups and rlimits, as a judge started on its own
    was. The zygote never holds a thread (a fork copies only the one that forks) and keeps no judge once ended."""
    first, second = _judge(cpu_s=77), _judge()
    try:
        judges = []
        for judge in (first, second):
            traced = _trace(judge, add)  # each answers: it started, warmed up and serves
            assert traced.error is None
            judges.append(judge.box)
        zygote = box._ZYGOTE
        pids = [b.process.pid for b in judges]
        assert len(set(pids)) == 2 and os.getpid() not in pids
        for b, pid in zip(judges, pids):
            stat = _proc(pid, "stat").rsplit(")", 1)[1].split()
            assert int(stat[1]) == zygote.process.pid and int(stat[2]) == pid == int(
                stat[3]
            )  # ppid, own group and session
            assert os.readlink(f"/proc/{pid}/cwd") == b.tmp
            assert all(d.name in _proc(pid, "cgroup") for d in b.cgroups.dirs.values())
        cpu = [
            next(line for line in _proc(pid, "limits").splitlines() if line.startswith("Max cpu time")) for pid in pids
        ]
        assert cpu[0].split()[3:5] == ["77", "79"] and cpu[1].split()[3:5] == ["900", "902"]
        assert len(os.listdir(f"/proc/{zygote.process.pid}/task")) == 1
    finally:
        first.close()
        second.close()
    assert all(wait_gone(pid) for pid in pids)
    assert not [t for t in Path(f"/proc/{zygote.process.pid}/task/{zygote.process.pid}/children").read_text().split()]
    for b in judges:
        _no_leftovers(b)


def test_a_zygote_that_cannot_start_leaves_each_judge_a_process_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A zygote whose imports leave a thread (OpenBLAS's pool, here) refuses to fork (a fork would copy one thread of
    two): the submission's judge is then a Python of its own, not a set-up failure, and no later box asks a zygote."""
    from autograder.judge import zygote

    env = box._env
    monkeypatch.setattr(box, "_env", lambda tmp: {**env(tmp), "OPENBLAS_NUM_THREADS": "2"})
    monkeypatch.setattr(box, "_ZYGOTE", None)
    monkeypatch.setattr(box, "_ZYGOTE_FAILED", None)
    judge = _judge()
    try:
        traced = _trace(judge, add)
        out, error = judge.run(traced, [X, X])
        assert error is None and np.array_equal(out, X + X)
        assert not isinstance(judge.box.process, zygote.Forked)
        assert "threads after its imports: a fork would copy one" in box._ZYGOTE_FAILED
    finally:
        judge.close()


def test_a_judge_that_ends_before_its_hello_is_started_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42 (point 4): a judge that ends before it says it is ready (a starved machine: two graders side by side
    on 2 cores) is started once more, as a Python of its own, instead of ending the grading as "the judge could not
    start" (then with no reason at all where it wrote nothing on its stderr)."""
    real, starts = client.Box, []

    def first_dies(limits, *, own_process=False):
        b = real(limits, own_process=own_process)
        starts.append(own_process)
        if len(starts) == 1:
            os.kill(b.process.pid, signal.SIGKILL)  # before its hello
        return b

    monkeypatch.setattr(client, "Box", first_dies)
    judge = _judge()
    try:
        traced = _trace(judge, add)
        out, error = judge.run(traced, [X, X])
        assert error is None and np.array_equal(out, X + X) and starts == [False, True]
    finally:
        judge.close()


# --------------------------------------------------------------------------------------- a killed grader

GRADER = """
import json, sys, time
import numpy as np
from autograder.judge import client
from autograder.judge.box import BoxLimits
from tests.test_judge_box import AVALS, X, _described, add_fori_matmuls
client.check_budgets = lambda *a, **k: None
judge = client.BoxedJudge(limits=BoxLimits(), deadline=time.monotonic() + 600, cell_timeout_s=600, wall_s=600)
header, blobs = _described(add_fori_matmuls())
traced = judge.trace(header, blobs, AVALS)
b = judge.box
print(json.dumps({"pid": b.process.pid, "tmp": b.tmp, "cgroups": [str(d) for d in b.cgroups.dirs.values()]}),
      flush=True)
judge.run(traced, [X, X])   # hours: the grader is killed first
"""


def test_a_killed_grader_leaves_no_judge_cgroup_or_temp_folder() -> None:
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        line = grader.stdout.readline()
        left = json.loads(line)
        time.sleep(1.0)  # the run under way
        grader.send_signal(signal.SIGKILL)
        grader.wait(timeout=30)
    finally:
        if grader.poll() is None:
            grader.kill()
    assert wait_gone(left["pid"], timeout=20), "the judge outlived its grader"
    # what the next grading run does first (every jail and box start sweeps): the dead grader's groups and folder go
    orphans.kill_orphans()
    assert not Path(left["tmp"]).exists()
    assert not [d for d in left["cgroups"] if Path(d).exists()]


# ------------------------------------------------------------------------------------ the grader never rebuilds


def test_the_grading_process_never_rebuilds_or_compiles_itself() -> None:
    """Everything the doors import to grade, and not the rebuild nor the TPU compiler: those are the judge's."""
    code = (
        "import sys, importlib\n"
        "import autograder.steps.pipeline, autograder.steps.execute, autograder.labs.harness, autograder.doors.nbgrader_engine\n"
        "from autograder.course_manifest import manifest\n"
        "for lab in manifest().labs: importlib.import_module(lab.grader)\n"
        "print(sorted(m for m in sys.modules if m in ('autograder.judge.rebuild', 'libtpu', 'autograder.judge.server')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


# ------------------------------------------------------------------------------------------------ both doors

ADD_CELL = "def add(x, y):\n    return pl.pallas_call(\n"
DOOR_ATTACKS = {
    # student -> (their add, words in add_f32's reason)
    "scratch-200": (
        "def add(x, y):\n"
        "    from jax.experimental.pallas import tpu as pltpu\n"
        "    def kernel(x_ref, y_ref, o_ref, *scratch):\n"
        "        o_ref[...] = x_ref[...] + y_ref[...]\n"
        "    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP,\n"
        "        scratch_shapes=[pltpu.VMEM((4096, 4096), jnp.float32) for _ in range(200)])(x, y)\n",
        "of scratch, more than the 128 MB of VMEM any course chip has",
    ),
    "matmuls-8": (
        "def add(x, y):\n"
        "    m = jnp.full((4096, 4096), 0.5, jnp.float32)\n"
        "    for _ in range(8):\n"
        "        m = m @ m\n"
        "    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
        "                          interpret=INTERP)(x, y)\n",
        "FLOPs outside its kernels",
    ),
    # (No door attack aims at the box's wall clock: within the static budgets (65,536 grid steps, 3.4e10 FLOPs) a
    # run takes ~0.5-1 ms a step, so a slow grid's verdict would depend on the machine's speed and load; the wall
    # clock's own tests above give it hours of work against seconds.)
}
CELL_S = 30  # per hidden test and cell


def _door_class(submitted: Path) -> None:
    import nbformat

    from course_tools.demo import filled_in

    lab = "lab-1.1-first-kernels"
    stage = _manifest().stage.id
    for student, (source, _) in {**DOOR_ATTACKS, "honest": ("", "")}.items():
        nb = filled_in(lab)
        if source:
            (cell,) = [c for c in nb.cells if c.cell_type == "code" and ADD_CELL in c.source]
            cell.source = source
            for c in nb.cells:  # the notebook's own check of add (it would run the attack in the jail too)
                if c.cell_type == "code" and 'check("add"' in c.source:
                    c.source = ""
        path = submitted / student / stage / f"{lab}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)


def _manifest() -> Any:
    from autograder.course_manifest import manifest

    return manifest()


def _door_scores(tests: dict[str, tuple[float, str]]) -> None:
    """What both doors must give: the attacker loses add's tests with the reason, keeps transpose's; the honest
    student graded in the same batch gets full marks."""
    for student, (_, words) in DOOR_ATTACKS.items():
        got = tests[student]
        assert got["add_f32"][0] == 0 and words in got["add_f32"][1], (student, got["add_f32"])
        assert got["add_bf16"][0] == 0
        assert got["transpose_schedule"][0] == 1 and got["transpose_values"][0] == 2, (student, got)
    assert sum(p for p, _ in tests["honest"].values()) == 6, tests["honest"]


def test_course_grade_door_judges_the_attacks_in_the_box(tmp_path: Path) -> None:
    from autograder.jail.limits import Limits
    from autograder.steps.pipeline import grade_submission
    from autograder.steps.submission import read_submission

    _door_class(tmp_path)
    stage = _manifest().stage.id
    tests = {}
    for student in [*DOOR_ATTACKS, "honest"]:
        path = tmp_path / student / stage / "lab-1.1-first-kernels.ipynb"
        result = grade_submission(read_submission(path, student), Limits(cell_s=CELL_S)).result
        tests[student] = {t.name: (t.points, t.message or "") for t in result.tests}
    _door_scores(tests)


# Issue 33's cross-submission attack as a notebook, within every static budget: add's f32 case traces to a kernel
# whose never-taken branch makes the TPU compiler work for minutes (elementwise read-modify-writes of a 64 MB VMEM
# scratch: slow by what the compiler is given, whatever the machine's load), and fails its structure check (work
# outside the kernel), so the compile started ahead for it is never asked for; the bf16 case is the model's add.


@pytest.mark.slow  # ~1 min; test_a_slow_compile_started_ahead_changes_no_other_verdict proves it in the judge
def test_a_slow_compile_submission_leaves_the_model_solution_full_marks(libtpu, tmp_path: Path) -> None:
    """The attack, then the model solution, graded by one process (`course grade`'s door, as a batch worker
    does): the model gets 6/6 (5/6 before: its add_bf16 compile queued behind the attack's, timed out, and
    the timeout was kept for every later notebook with that kernel); the attacker loses add_f32 only."""
    import nbformat

    from autograder.jail.limits import Limits
    from autograder.steps.pipeline import grade_submission
    from autograder.steps.submission import read_submission
    from course_tools.demo import filled_in

    lab, stage = "lab-1.1-first-kernels", _manifest().stage.id
    attack = filled_in(lab)
    (cell,) = [c for c in attack.cells if c.cell_type == "code" and ADD_CELL in c.source]
    cell.source = STALLING_ADD
    for c in attack.cells:  # the notebook's own check of add would compile nothing (no compile in the jail)
        if c.cell_type == "code" and 'check("add"' in c.source:
            c.source = ""
    tests = {}
    for student, nb in (("attacker", attack), ("model", filled_in(lab))):
        path = tmp_path / student / stage / f"{lab}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        result = grade_submission(read_submission(path, student), Limits()).result
        tests[student] = {t.name: (t.points, t.message or "") for t in result.tests}
    assert sum(p for p, _ in tests["model"].values()) == 6, tests["model"]
    assert tests["attacker"]["add_f32"][0] == 0 and "outside" in tests["attacker"]["add_f32"][1], tests["attacker"]
    assert tests["attacker"]["add_bf16"][0] == 1, tests["attacker"]


@pytest.mark.slow  # CI: the same engine through `course grade` (above); nbgrader's door on budgets: make configurations
def test_nbgrader_door_judges_the_attacks_in_the_box(tmp_path: Path) -> None:
    import nbformat
    from nbgrader.api import Gradebook

    from autograder import cells
    from tests.nbgrader_course import generated_course, nbgrader

    course = generated_course(tmp_path / "course")
    _door_class(course / "submitted")
    stage = _manifest().stage.id
    run = nbgrader(course, "autograde", stage, "--force", f"--JailedExecute.timeout={CELL_S}")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    ids = {t.id for t in _manifest().lab("lab-1.1-first-kernels").tests}
    tests = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in [*DOOR_ATTACKS, "honest"]:
            nb = nbformat.read(course / "autograded" / student / stage / "lab-1.1-first-kernels.ipynb", as_version=4)
            said = {
                cells.grade_id(c): " ".join(o.get("evalue", "") for o in c.outputs)
                for c in nb.cells
                if cells.grade_id(c) in ids
            }
            tests[student] = {
                g.name: (g.score, said.get(g.name, ""))
                for g in gb.find_submission_notebook("lab-1.1-first-kernels", stage, student).grades
                if g.name in ids
            }
    _door_scores(tests)


# ------------------------------------------------------------------------------------- any description at all

from tests.test_rebuild import _paths  # noqa: E402 - every path into a description, as the rebuild's tests walk it


def test_a_description_damaged_anywhere_is_costed_rebuilt_or_refused() -> None:
    """Budgets, then the rebuild, on a real description with any one node replaced by junk: a structure or a
    refusal with a reason (the batch's BadAnswer at worst), never an exception of the grader's."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    from autograder.failures import BadAnswer

    junk = st.recursive(
        st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=8),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
        max_leaves=12,
    )
    header, blobs = _described(add_with_scratch(1, 128))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def damaged(data: Any) -> None:
        h = json.loads(json.dumps(header))
        path = data.draw(st.sampled_from(_paths(h["description"])[1:]))
        node = h["description"]
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = data.draw(junk)
        try:
            traced = LocalJudge().trace(h, blobs, AVALS)
        except BadAnswer:
            return
        assert (traced.error is None) != (traced.structure is None)
        assert traced.error is None or traced.error.text

    damaged()


@pytest.mark.slow
@pytest.mark.usefixtures("no_budgets")  # its dead branch's 4096^3 matmul is over the FLOPs budget
def test_a_stall_past_timeout_is_the_notebook_s_result(libtpu, tmp_path: Path) -> None:
    """Issue 33, end to end (`course grade --timeout 60`): transpose's compile stalls libtpu for minutes, cut by the
    notebook's deadline before its own 60 s limit. The result is the notebook's and final: each test reached is
    scored, the rest lost with the wall-clock reason; no grader failure for a re-run to grade anew. (The CI test of
    the same: tests/test_grading_steps.py::test_a_notebook_past_its_timeout_in_the_judge_is_the_notebook_s_result.)"""
    import nbformat
    from typer.testing import CliRunner

    from autograder.steps.record import GRADER_FAILED
    from course_tools.cli import app
    from course_tools.demo import filled_in

    lab, stage = "lab-1.1-first-kernels", _manifest().stage.id
    nb = filled_in(lab)
    for c in nb.cells:
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "transpose":
            c.source = STALLING_TRANSPOSE
        elif c.cell_type == "code" and 'check_kernel("transpose"' in c.source:
            c.source = ""  # the notebook's own check would compile it in the jail too
    path = tmp_path / "in" / "staller" / stage / f"{lab}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    run = CliRunner().invoke(
        app, ["grade", str(tmp_path / "in"), "--out", str(tmp_path / "out"), "--json", "--timeout", "60", "--jobs", "1"]
    )
    assert run.exit_code == 0, run.output[-3000:]
    (record,) = json.loads(run.stdout)
    why = "the notebook ran past the 60 s wall-clock limit and was stopped"
    assert GRADER_FAILED not in run.stdout and record["error"].startswith(why), record
    tests = {t["name"]: t for t in record["tests"]}
    assert why in tests["transpose_values"]["message"], tests
    assert all(t["passed"] or why in t["message"] for t in tests.values()), tests
