"""Every compiler refusal of issue 26 in the course's words (pallas_course.errors): the cause and the fix, the block
as the student wrote it, and the stub message for the stub alone. Each kernel here is correct in TPU interpret mode
and refused by the real TPU compiler (jax 0.10.2 + libtpu 0.0.42.1, deviceless v5e and v6e)."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.judge import compile_rule
from autograder.labs.harness import TestFailure, call
from autograder.session.testing import LocalFunction
from pallas_course import errors, tpu_compile
from pallas_course.runtime import interpret_params

S = jax.ShapeDtypeStruct
F32 = jnp.float32
IP = interpret_params()


def _rows(body: Callable[[Any], Any], block: tuple[int, ...] = (8, 512), shape: tuple[int, int] = (256, 512)) -> Any:
    def kernel(x_ref, o_ref):
        o_ref[...] = body(x_ref[...]).astype(o_ref.dtype)

    def fn(x):
        spec = pl.BlockSpec(block, lambda i: (i, 0))
        return pl.pallas_call(
            kernel,
            grid=(shape[0] // block[0],),
            in_specs=[spec],
            out_specs=spec,
            out_shape=S(shape, x.dtype),
            interpret=IP,
        )(x)

    return fn


def int8_dot(a, b):
    """int8 x int8 with an int32 result: the MXU's native integer product on v5e, v5p and v6e."""
    return pl.pallas_call(
        lambda a_ref, b_ref, o_ref: o_ref.__setitem__(
            ..., jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.int32)
        ),
        out_shape=S((a.shape[0], b.shape[1]), jnp.int32),
        interpret=IP,
    )(a, b)


def int8_by_int32(a, b):
    """int8 by int32: two integer types in one product."""
    return int8_dot(a, b)


def int_identity_transpose(x):
    """x.T as an identity matmul on int32 blocks."""

    def kernel(x_ref, o_ref):
        eye = lax.broadcasted_iota(jnp.int32, (128, 128), 0) == lax.broadcasted_iota(jnp.int32, (128, 128), 1)
        o_ref[...] = lax.dot_general(eye.astype(jnp.int32), x_ref[...], (((1,), (1,)), ((), ())))

    return pl.pallas_call(
        kernel,
        grid=(2, 4),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (j, i)),
        out_shape=S((512, 256), x.dtype),
        interpret=IP,
    )(x)


def half_lane_k_split(a, b):
    """K split by a fori_loop into 64-wide lane slices: starts the compiler cannot prove 128-aligned."""

    def kernel(a_ref, b_ref, o_ref):
        def body(t, acc):
            off = pl.multiple_of(t * 64, 64)
            return acc + jnp.dot(a_ref[:, pl.ds(off, 64)], b_ref[pl.ds(off, 64), :], preferred_element_type=F32)

        o_ref[...] = lax.fori_loop(0, 2, body, jnp.zeros((128, 128), F32))

    return pl.pallas_call(
        kernel,
        grid=(2, 2),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, 0)), pl.BlockSpec((128, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=S((256, 256), F32),
        interpret=IP,
    )(a, b)


def huge_scratch(x):
    """A 256 MiB VMEM scratch (beyond the rebuild's array cap, so compiled directly here)."""

    def kernel(x_ref, o_ref, s_ref):
        s_ref[...] = jnp.zeros_like(s_ref)
        o_ref[...] = x_ref[...] + s_ref[pl.ds(0, 8), pl.ds(0, 512)]

    spec = pl.BlockSpec((8, 512), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        grid=(32,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=S(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((16384, 4096), F32)],
        interpret=IP,
    )(x)


def squeezed_rows(x, g):
    """g carved into (None, 512) blocks, one row of g per step: a squeezed dimension, then 512."""

    def kernel(x_ref, g_ref, o_ref):
        o_ref[...] = x_ref[...] * g_ref[...]

    return pl.pallas_call(
        kernel,
        grid=(32,),
        in_specs=[pl.BlockSpec((8, 512), lambda i: (i, 0)), pl.BlockSpec((None, 512), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)),
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x, g)


def element_rows(x):
    """pl.Element on the first dimension only."""
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
        grid=(32,),
        in_specs=[pl.BlockSpec((pl.Element(8), 512), lambda i: (i * 8, 0))],
        out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)),
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x)


def add16(x, y):
    spec = pl.BlockSpec((16, 512), lambda i: (i, 0))
    return pl.pallas_call(
        lambda x_ref, y_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + y_ref[...]),
        grid=(x.shape[0] // 16,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x, y)


def thirds_in_f64(x):
    """A notebook with jax_enable_x64 whose kernel divides in float64."""
    with jax.enable_x64(True):
        return _rows(lambda v: v.astype(jnp.float64) / 3.0)(x)


X = np.random.default_rng(6).normal(size=(256, 512)).astype(np.float32)

# name: (function, inputs, error kind, words the explanation must hold, words it must not)
CASES: dict[str, tuple[Callable[..., Any], tuple[Any, ...], str, tuple[str, ...], tuple[str, ...]]] = {
    "Bad lhs/rhs type: a transpose by an int32 identity matmul": (
        int_identity_transpose,
        (X.astype(np.int32),),
        "tpu-dot-type",
        (
            "the TPU's matrix unit (MXU) multiplies bfloat16 and float32 blocks, and int8 blocks with an int32 "
            "result on v5e, v5p and v6e",
            "multiplies int32",
            "keep int8 data int8 on both sides and pass preferred_element_type=jnp.int32",
            "cast int32 operands to float32",
            "write x_ref[...].T instead",
        ),
        ("MosaicError", "Bad lhs", "integer blocks", "cast both operands"),
    ),
    "Mix int/int: int8 by int32": (
        int8_by_int32,
        (X[:128, :128].astype(np.int8), X[:128, :128].astype(np.int32)),
        "tpu-dot-type",
        ("mixes two integer types", "keep int8 data int8 on both sides"),
        ("MosaicError", "NYI"),
    ),
    "pl.ds lane start not provably aligned": (
        half_lane_k_split,
        (X[:, :128], X[:128, :256]),
        "tpu-alignment",
        ("the start of a pl.ds in dimension 1 must be a multiple of 128", "pl.multiple_of(start, 128)"),
        ("MosaicError", "E2003"),
    ),
    "(None, 512) block": (
        squeezed_rows,
        (X, X[:32]),
        "tpu-tiling",
        ("block (None, 512) of args[1] (array (32, 512)) breaks the TPU tiling rule", "(None, 512) reads as (1, 512)"),
        ("(512,)",),
    ),
    "pl.Element on one dimension": (
        element_rows,
        (X,),
        "tpu-element",
        ("mixes pl.Element dimensions with plain block sizes",),
        ("stub", "NotImplementedError"),
    ),
    "float16 add": (
        add16,
        (X.astype(np.float16), X.astype(np.float16)),
        "tpu-vector-type",
        ("no TPU vector layout", "cast float16 data to bfloat16"),
        ("stub", "NotImplementedError"),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_refusal_reads_as_cause_and_fix(libtpu, name) -> None:
    fn, args, kind, words, never = CASES[name]
    answer = LocalFunction(fn).invoke(tuple(jax.numpy.asarray(a) for a in args), {}, run=True)
    assert answer.error is None, answer.error  # correct in TPU interpret mode
    verdict = compile_rule.compile_verdict(
        compile_rule.for_compiler(answer.computation), answer.computation.in_avals, ["v5e", "v6e"]
    )
    assert len(verdict.rejections) == 2, verdict
    for r in verdict.rejections:
        assert r.error_kind == kind, (r.error_kind, r.message)
        for w in words:
            assert w in r.explanation, (w, r.explanation)
        for w in never:
            assert w not in r.explanation, (w, r.explanation)


def test_int8_products_compile_where_the_mxu_has_them(libtpu) -> None:
    """F4 of the second review: int8 x int8 -> int32 is native on v5e, v5p and v6e (libtpu 0.0.42.1), v4 refuses it
    ("Unsupported matmul RHS type") and the explanation says so without advising float for the others."""
    s8 = S((128, 128), jnp.int8)
    for chip in ("v5e", "v5p", "v6e"):
        r = tpu_compile.compile_for(int8_dot, s8, s8, chip=chip)
        assert r.ok, (chip, r)
    r = tpu_compile.compile_for(int8_dot, s8, s8, chip="v4")
    assert r.rejected and r.error_kind == "tpu-dot-type", r
    assert "this chip has no int8 matrix product" in r.explanation
    assert "run on a chip with an int8 MXU (v5e, v5p, v6e)" in r.explanation


def test_an_oversized_scratch_is_told_about_scratch(libtpu) -> None:
    r = tpu_compile.compile_for(huge_scratch, S((256, 512), F32), chip="v5e")
    assert r.rejected and r.error_kind == "tpu-vmem-scratch", r
    assert (
        "its scratch buffers (scratch_shapes) need 268,435,456 bytes of VMEM, more than the chip's 134,217,728"
        in r.explanation
    )
    assert "make the scratch_shapes smaller" in r.explanation and "bk" not in r.explanation


def test_a_float64_kernel_gets_the_true_reason(libtpu) -> None:
    """Rebuilt with its 64-bit types (not narrowed, which read as a `div` whose dtype does not match), run, and
    refused by the compiler for what it is."""
    with pytest.raises(TestFailure) as failure:
        call("add_f32", "thirds(x)", LocalFunction(thirds_in_f64), jnp.asarray(X))
    message = str(failure.value)
    assert "does not compile for v5e and v6e" in message
    assert "it computes in 64-bit types (float64, int64), which a TPU kernel does not have" in message
    assert "div" not in message and "stub" not in message


def test_the_stub_message_is_for_the_stub_only(libtpu, monkeypatch) -> None:
    """The student's own `raise NotImplementedError` is the stub; JAX's NotImplementedError (a lowering that lacks
    something) is explained as what it is."""
    namespace: dict[str, Any] = {}
    exec(compile("def add(x, y):\n    raise NotImplementedError\n", "/tmp/ipykernel_1/cell.py", "exec"), namespace)  # noqa: S102 - a notebook cell
    with pytest.raises(NotImplementedError) as stub:
        namespace["add"](1, 2)
    assert errors.is_stub(stub.value)
    assert errors.explain(stub.value).summary.startswith("✗ this function is still the stub")

    seen: list[BaseException] = []  # the lowering's own error, as the compile step explains it
    explain = errors.explain

    def keep(exc: BaseException, **kw: Any) -> Any:
        seen.append(exc)
        return explain(exc, **kw)

    monkeypatch.setattr(errors, "explain", keep)
    assert tpu_compile.compile_for(element_rows, S((256, 512), F32), chip="v5e").rejected
    monkeypatch.undo()
    (lowered,) = seen
    assert isinstance(lowered, NotImplementedError) and not errors.is_stub(lowered)
    summary = errors.explain(lowered, locate=False).summary
    assert "stub" not in summary and "mixes pl.Element" in summary
    other = errors.explain(NotImplementedError("some lowering it lacks"), locate=False)
    assert other.kind == "jax-not-implemented" and "JAX does not implement this" in other.summary
