"""The visible `check(...)`: what a student reads when a kernel is wrong."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from pallas_course.check import _SIGNED_DEFAULT_NAN, CheckFailure, check


def test_pass_prints_one_line(capsys) -> None:
    x = jnp.ones((256, 256))
    check("add", x, x)
    out = capsys.readouterr().out
    assert out.startswith("✓ add: matches (max error 0, exact)")
    assert out.rstrip().endswith("visible checks passed; the grade also tests other shapes and dtypes")


def test_pass_says_whether_the_tolerance_is_relative(capsys) -> None:
    x = jnp.ones((8, 128))
    check("softmax bf16", x, x, tol=2**-7, atol=1e-30)
    assert "tol 0.0078125 relative (absolute floor 1e-30)" in capsys.readouterr().out
    check("matmul", x, x, tol=1e-3)
    assert "tol 0.001, absolute and relative" in capsys.readouterr().out


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


def test_every_value_unwritten_names_rebinding_the_ref() -> None:
    """`o_ref = x + y` writes nothing: every value is interpret mode's NaN fill."""
    with pytest.raises(CheckFailure, match=r"all 32768 values are NaN: .*never stores.*`o_ref = value` only rebinds"):
        check("add", jnp.full((128, 256), jnp.nan), jnp.ones((128, 256)))


@pytest.mark.skipif(not _SIGNED_DEFAULT_NAN, reason="only x86 computes NaNs with the sign bit set")
def test_computed_nan_is_not_called_unwritten() -> None:
    """exp overflow then inf / inf: a computed NaN (x86's default NaN, sign bit set), not the fill."""
    big = jnp.full((8, 128), 1e4)
    e = jnp.exp(big)
    with pytest.raises(CheckFailure) as failure:
        check("softmax", e / e.sum(-1, keepdims=True), jnp.full((8, 128), 1 / 128), tol=1e-5)
    assert "the kernel computed these NaNs" in str(failure.value)
    assert "nobody wrote" not in str(failure.value)


def test_suspect_named_first() -> None:
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    with pytest.raises(CheckFailure, match=r"^layernorm: this is what g and b swapped gives"):
        check("layernorm", x + 1, x, tol=1e-5, suspects={"reduced over the wrong axis": x * 2, "g and b swapped": x + 1})


def test_an_error_in_the_checked_function_is_explained_first() -> None:
    from jax.experimental import pallas as pl

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref + y_ref

    x = jnp.ones((8, 128))
    add = lambda: pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, x)
    with pytest.raises(CheckFailure) as failure:
        check("add", add, x + x)
    lines = str(failure.value).splitlines()
    assert lines[0].startswith("add: a ref is used as an array")
    assert lines[1].startswith("  at test_check.py, line ") and "x_ref + y_ref" in lines[1]
    assert failure.value.kind == "ref-as-array" and "Traceback" in failure.value.raw
