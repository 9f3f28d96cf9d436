"""What crosses the trust boundary: JSON and .npy bytes only, checked on arrival (autograder/jail/jail_agent/wire.py;
the description of a traced computation: tests/test_rebuild.py), and one traced computation for structure and
values (jail_agent/calls.py)."""

from __future__ import annotations

import io
import os
import pickle

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.experimental import pallas as pl

from autograder.labs.harness import TestFailure, call, traced
from autograder.jail.jail_agent import wire
from autograder.session.testing import LocalFunction


def _roundtrip(value: object) -> object:
    blobs: list[bytes] = []
    data = wire.encode(value, blobs)
    header, back = wire.Reader(_pipe(wire.pack({"v": data}, blobs))).read(timeout=5)
    return wire.decode(header["v"], back)


def _pipe(data: bytes) -> int:
    """A pipe holding `data`, then closed (written from a thread: more than a pipe's buffer would block)."""
    import threading

    r, w = os.pipe()

    def feed() -> None:
        try:
            os.write(w, data)
        except OSError:  # the reader stopped early and closed its end
            pass
        finally:
            os.close(w)

    threading.Thread(target=feed, daemon=True).start()
    return r


def test_values_round_trip_with_their_types() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    bf = x.astype(ml_dtypes.bfloat16)
    back = _roundtrip({"a": (x, bf, np.dtype(np.float32)), 3: [None, 1.5, "s"]})
    assert isinstance(back, dict) and set(back) == {"a", 3}
    got_x, got_bf, dt = back["a"]
    assert got_x.dtype == np.float32 and np.array_equal(got_x, x)
    assert got_bf.dtype == ml_dtypes.bfloat16 and np.array_equal(got_bf, bf)
    assert dt == np.float32 and back[3] == [None, 1.5, "s"]


def test_a_pickle_never_loads() -> None:
    """An object array saved with pickle is refused (allow_pickle=False), whatever its tag says."""
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(wire.WireError, match="not a plain .npy array"):
        wire.decode({"__array__": 0, "dtype": "float32"}, [buf.getvalue()])
    with pytest.raises(wire.WireError):
        wire.decode({"__array__": 0, "dtype": "object"}, [pickle.dumps(object)])


def test_objects_travel_as_their_type_name_only() -> None:
    class Sneaky:
        def __array__(self, *a: object, **k: object) -> np.ndarray:
            return np.ones(3)

    back = _roundtrip([Sneaky()])
    assert isinstance(back[0], wire.Opaque) and "Sneaky" in repr(back[0])


def test_oversized_and_garbled_frames_are_refused() -> None:
    import struct

    with pytest.raises(wire.WireError, match="over the"):
        wire.Reader(_pipe(struct.pack(">Q", wire.MAX_HEADER_BYTES + 1))).read(timeout=5)
    with pytest.raises(wire.WireError, match="not JSON"):
        wire.Reader(_pipe(struct.pack(">Q", 5) + b"{nope")).read(timeout=5)
    with pytest.raises(wire.PeerGone):
        wire.Reader(_pipe(b"")).read(timeout=5)
    r, w = os.pipe()
    with pytest.raises(wire.PeerSilent):
        wire.Reader(r).read(timeout=0.2)
    os.close(w)


def _transpose(x, bm=128, bn=128):
    m, n = x.shape
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...].T),
        grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),
        out_shape=jax.ShapeDtypeStruct((n, m), x.dtype),
        interpret=True,
    )(x)


def test_structure_survives_the_description() -> None:
    """Grid, blocks, index maps and kernel primitives as the grader reads them off its rebuild of the jail's
    description."""
    (pc,) = traced("t", "transpose", _transpose, jax.ShapeDtypeStruct((256, 512), jnp.float32)).pallas_calls
    assert pc.grid == (2, 4) and pc.outputs[0].block_shape == (128, 128)
    assert pc.outputs[0].block_index(0, 3) == (3, 0) and pc.inputs[0].block_index(1, 2) == (1, 2)
    assert {"transpose", "get", "swap"} <= pc.kernel_primitives()


def test_squeezed_block_dims_are_understood() -> None:
    def f(x):
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, x_ref[...] * 2),
            grid=(4,),
            in_specs=[pl.BlockSpec((pl.Squeezed(), 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((None, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            interpret=True,
        )(x)

    pc = traced("t", "f(x)", f, jax.ShapeDtypeStruct((4, 128), jnp.float32)).pallas_calls[0]
    assert pc.inputs[0].block_shape == (None, 128) and pc.outputs[0].block_index(2) == (2, 0)


def test_values_come_from_the_traced_computation() -> None:
    """A function that launches a pallas_call when traced and computes with XLA when called is judged by
    what it traced: the XLA branch never answers."""

    def two_faced(x):
        if isinstance(x, jax.core.Tracer):
            return pl.pallas_call(
                lambda x_ref, o_ref: o_ref.__setitem__(Ellipsis, jnp.zeros_like(o_ref)),
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                interpret=True,
            )(x)
        return x + 1

    x = np.ones((8, 128), np.float32)
    fn = LocalFunction(two_faced)
    assert traced("t", "f(x)", fn, x).pallas_calls
    assert np.array_equal(call("t", "f(x)", fn, x), np.zeros_like(x))


def test_student_errors_arrive_as_data() -> None:
    def broken(x):
        raise NotImplementedError("not written yet")

    with pytest.raises(TestFailure, match=r"t: f\(x\) is not implemented yet \(NotImplementedError: not written yet\)"):
        call("t", "f(x)", broken, np.ones((8, 128), np.float32))


def test_a_vmapped_kernel_is_understood() -> None:
    """jax.vmap over a pallas_call adds a squeezed grid axis; structure and values both come through."""

    def add(x, y):
        return pl.pallas_call(
            lambda a, b, o: o.__setitem__(Ellipsis, a[...] + b[...]),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            interpret=True,
        )(x, y)

    x = np.ones((4, 8, 128), np.float32)
    pc = traced("t", "vmap(add)", jax.vmap(add), x, x).pallas_calls[0]
    assert pc.grid == (4,) and pc.inputs[0].block_shape == (None, 8, 128) and pc.inputs[0].block_index(2) == (2, 0, 0)
    assert np.array_equal(call("t", "vmap(add)", jax.vmap(add), x, x), 2 * x)


# ---------------------------------------------------------------- fuzzed: any shape is data or a refusal

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402 - the fuzzed tests' imports, with them

from autograder.steps import execute as engine  # noqa: E402 - the fuzzed tests' imports, with them
from autograder import failures  # noqa: E402 - the fuzzed tests' imports, with them
from autograder.judge.server import rebuilt  # noqa: E402 - the fuzzed tests' imports, with them
from autograder.session.functions import plain_answer  # noqa: E402 - the fuzzed tests' imports, with them

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAGS = [
    "__array__",
    "__spec__",
    "__dtype__",
    "__float__",
    "__tuple__",
    "__range__",
    "__dict__",
    "__opaque__",
    "__x__",
    "shape",
    "dtype",
    "blobs",
    "ok",
    "error",
    "structure",
    "result",
    "own",
    "description",
    "consts",
    "outputs",
    "output_type",
    "data",
    "text",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(
        ["float32", "bfloat16", "object", "stream", "error", "display_data", "execute_result", "nan", "-inf", "run"]
    ),
)
json_values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.sampled_from(TAGS) | st.text(max_size=4), kids, max_size=4)
    ),
    max_leaves=40,
)


def _npy(arr: np.ndarray, *, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


blob_lists = st.lists(
    st.one_of(
        st.binary(max_size=120),
        st.just(_npy(np.ones((2, 3), np.float32))),
        st.just(_npy(np.array([{"x": 1}], dtype=object), allow_pickle=True)),
        st.just(_npy(np.arange(4, dtype=np.uint16))),
        st.binary(max_size=40).map(lambda b: _npy(np.ones(3, np.float32))[:60] + b),
    ),
    max_size=3,
)


@FUZZ
@given(value=json_values, blobs=blob_lists)
def test_any_value_decodes_or_is_refused(value: object, blobs: list[bytes]) -> None:
    for decode in (wire.decode, wire.decode_reply):
        try:
            decode(value, blobs)
        except wire.WireError:
            pass


@FUZZ
@given(value=json_values, blobs=blob_lists, noise=st.binary(max_size=64), cut=st.integers(0, 400))
def test_any_bytes_are_a_frame_or_a_wire_error(value: object, blobs: list[bytes], noise: bytes, cut: int) -> None:
    import json
    import struct

    text = json.dumps({"v": value, "blobs": [len(b) for b in blobs]}).encode()
    whole = struct.pack(">Q", len(text)) + text + b"".join(blobs)
    for data in (whole, whole[:cut], noise, struct.pack(">Q", len(noise)) + noise, whole + noise):
        fd = _pipe(data)
        try:
            wire.Reader(fd).read(timeout=2)
        except (wire.WireError, wire.PeerGone):
            pass
        finally:
            os.close(fd)


@FUZZ
@given(header=st.dictionaries(st.sampled_from(TAGS), json_values, max_size=5), ok=st.booleans(), blobs=blob_lists)
def test_any_reply_is_an_answer_a_student_error_or_a_bad_answer(header: dict, ok: bool, blobs: list[bytes]) -> None:
    """The grader's readers of a call's reply (a plain call's value; a traced call's description, rebuilt):
    nothing else ever comes out of them."""
    reply = {**header, "ok": ok} if ok else header
    try:
        plain_answer(reply, blobs)
    except (failures.StudentError, failures.BadAnswer):
        pass
    try:
        traced = rebuilt(reply, blobs, ())
        assert (traced.error is None) != (traced.structure is None)
    except failures.BadAnswer:
        pass


@FUZZ
@given(
    raw=json_values
    | st.dictionaries(st.sampled_from(TAGS), json_values, max_size=5).map(
        lambda d: {**d, "output_type": d.get("output_type", "stream")}
    )
)
def test_any_output_the_jail_sends_is_a_valid_output_or_dropped(raw: object) -> None:
    import nbformat

    out = engine.clean_output(raw)
    if out is not None:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(outputs=[out])])
        nbformat.validate(nb)


def test_the_shapes_that_failed_the_grader_are_refused_with_a_reason() -> None:
    """Nested 100,000 deep (RecursionError before), an abstract array where values belong and a tuple key
    holding a list (TypeError before): each a WireError or BadAnswer, which scores that notebook 0."""
    import struct

    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(wire.WireError, match="not JSON"):
        wire.Reader(_pipe(struct.pack(">Q", len(deep)) + deep)).read(timeout=5)
    nested = ('{"v": ' + "[" * 500 + "]" * 500 + "}").encode()
    with pytest.raises(wire.WireError, match="nested deeper"):
        wire.Reader(_pipe(struct.pack(">Q", len(nested)) + nested)).read(timeout=5)
    with pytest.raises(failures.BadAnswer, match="abstract array"):
        plain_answer({"ok": True, "result": {"__spec__": {"shape": [2], "dtype": "float32"}}}, [])
    with pytest.raises(wire.WireError, match="unhashable"):
        wire.decode({"__dict__": [[{"__tuple__": [[1]]}, 1]]}, [])
    with pytest.raises(failures.BadAnswer, match="unhashable"):
        plain_answer({"ok": True, "result": {"__dict__": [[{"__tuple__": [[1]]}, 1]]}}, [])
