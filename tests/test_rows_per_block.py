"""LAB·1.3's memory-bound model (issue 43, F1 and F2): times per JAX device, the steps term, and the rows a block
should hold; the VMEM bound held to the real TPU compiler on the lab's own softmax kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from pallas_course import tpu_compile
from pallas_course.chips import chip
from pallas_course.cost_model import (
    fused_softmax_bytes,
    memory_bound_seconds,
    row_block_fits,
    row_block_moves_enough,
    step_overhead,
)
from pallas_course.lab_1_3_rules import ROWS_CHOICE_CASES, rows_choice_problem, softmax_time_problem


def test_the_reviews_numbers_for_the_default_rows() -> None:
    """(32768, 1024) float32 on v5e: 0.33 ms of bytes, 0.91 ms more for 4,096 steps of 8 rows."""
    moved = fused_softmax_bytes(32768, 1024, np.float32)
    assert memory_bound_seconds(moved, "v5e") == pytest.approx(3.27e-4, rel=1e-2)
    assert memory_bound_seconds(moved, "v5e", 4096) - memory_bound_seconds(moved, "v5e") == pytest.approx(
        9.13e-4, rel=1e-2
    )
    assert step_overhead()[0] == 2.23e-7 and "matmul.md" in step_overhead()[1]


def test_bandwidth_per_jax_device() -> None:
    """v5e/v6e: the chip's; v7x: one TensorCore's; megacore: both cores only with a "parallel" axis."""
    assert chip("v5e").device_hbm_bytes_per_s(False) == chip("v5e").hbm_bytes_per_s
    assert chip("v7x").device_hbm_bytes_per_s(True) == chip("v7x").hbm_bytes_per_s / 2
    assert chip("v4").device_hbm_bytes_per_s(False) == chip("v4").hbm_bytes_per_s / 2
    assert chip("v4").device_hbm_bytes_per_s(True) == chip("v4").hbm_bytes_per_s


def test_the_per_device_answer_is_right_and_the_per_chip_one_is_named() -> None:
    n, d, rows = 16384, 512, 64
    fixed = n // rows * step_overhead()[0]
    moved = fused_softmax_bytes(n, d, np.float32)
    assert softmax_time_problem(moved / 3.7e12 + fixed, n, d, "float32", "v7x", rows) is None
    wrong = softmax_time_problem(moved / 7.4e12 + fixed, n, d, "float32", "v7x", rows)
    assert wrong is not None and "with v7x's bandwidth per chip" in wrong and "get_tpu_info" in wrong


def test_every_rows_case_has_a_right_answer_and_8_is_not_one() -> None:
    for n, d, dtype, c in ROWS_CHOICE_CASES:
        assert any(rows_choice_problem(r, n, d, dtype, c) is None for r in range(1, n + 1) if n % r == 0)
    assert "under 1 MiB" in rows_choice_problem(8, 32768, 1024, "float32", "v5e")


def _softmax(rows: int):
    def kernel(x_ref, o_ref):
        x = x_ref[...].astype(jnp.float32)
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)

    def f(x):
        n, d = x.shape
        spec = pl.BlockSpec((rows, d), lambda i: (i, 0))
        return pl.pallas_call(
            kernel, grid=(n // rows,), in_specs=[spec], out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype)
        )(x)

    return f


@pytest.mark.parametrize(("n", "d", "dtype", "c"), [c for c in ROWS_CHOICE_CASES if c[3] in tpu_compile.TOPOLOGIES])
def test_the_largest_accepted_rows_compile(libtpu, n, d, dtype, c) -> None:
    """The VMEM bound is on the safe side of the compiler: the largest rows the rule accepts compile."""
    ok = [r for r in range(1, n + 1) if n % r == 0 and rows_choice_problem(r, n, d, dtype, c) is None]
    assert ok and row_block_fits(max(ok), d, dtype, c) and row_block_moves_enough(min(ok), n, d, dtype)
    res = tpu_compile.compile_for(_softmax(max(ok)), jax.ShapeDtypeStruct((n, d), jnp.dtype(dtype)), chip=c)
    assert res.ok, (max(ok), res.message)


def test_a_block_the_rule_refuses_for_vmem_is_refused_by_the_compiler(libtpu) -> None:
    """(1024, 1024) float32 on v5e: the rule's refusal is the compiler's too ("Scoped allocation ... 17.84M")."""
    assert not row_block_fits(1024, 1024, "float32", "v5e")
    res = tpu_compile.compile_for(_softmax(1024), jax.ShapeDtypeStruct((32768, 1024), jnp.float32), chip="v5e")
    assert res.rejected and "17.84M" in res.message
