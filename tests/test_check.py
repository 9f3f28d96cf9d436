"""The visible `check(...)`: what a student reads when a kernel is wrong."""
from __future__ import annotations

import jax.numpy as jnp
import pytest

from pallas_course.check import CheckFailure, check


def test_pass_prints_one_line(capsys) -> None:
    x = jnp.ones((256, 256))
    check("add", x, x)
    assert capsys.readouterr().out.startswith("✓ add: matches, max error 0")


def test_shape_mismatch() -> None:
    with pytest.raises(CheckFailure, match=r"add: shape \(256, 128\), expected \(256, 256\); look at out_shape"):
        check("add", jnp.ones((256, 128)), jnp.ones((256, 256)))


def test_dtype_mismatch() -> None:
    with pytest.raises(CheckFailure, match="dtype bfloat16, expected float32"):
        check("add", jnp.ones((8, 128), jnp.bfloat16), jnp.ones((8, 128)))


def test_nan_means_blocks_never_written() -> None:
    """NaN reads as "never written" under TPU interpret mode; the message names the first such block."""
    x = jnp.ones((256, 256))
    with pytest.raises(CheckFailure) as e:
        check("transpose", x.at[128:, :128].set(jnp.nan), x)
    msg = str(e.value)
    assert "16384 of 65536 values are NaN" in msg
    assert "1 of 4 blocks of 128×128 wrong, the first is block (1, 0)" in msg
    assert "memory that nobody wrote reads as NaN" in msg


def test_values_name_the_worst_error_and_first_wrong_block() -> None:
    x = jnp.zeros((256, 512))
    with pytest.raises(CheckFailure) as e:
        check("matmul", x.at[200, 300].set(5.0).at[10, 400].set(1.0), x, tol=1e-3, block=(128, 256))
    msg = str(e.value)
    assert "2 of 131072 values differ by more than tol=0.001" in msg
    assert "the largest error is 5 at [200, 300] (got 5, expected 0)" in msg
    assert "2 of 4 blocks of 128×256 wrong, the first is block (0, 1)" in msg


def test_tolerance_is_absolute_and_relative() -> None:
    check("softmax", jnp.array([1000.0, 1e-6]) * (1 + 1e-6), jnp.array([1000.0, 1e-6]), tol=1e-5)


def test_not_an_array() -> None:
    with pytest.raises(CheckFailure, match="got a NoneType, expected an array"):
        check("add", None, jnp.ones(3))
