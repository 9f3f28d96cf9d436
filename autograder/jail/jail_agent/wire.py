"""The wire format between the grader and the jail: frames of JSON plus raw .npy blobs, nothing else.

A frame is an 8-byte big-endian header length, the UTF-8 JSON header, then the blobs the header lists
(`"blobs": [size, ...]`), each the bytes of one .npy file. Values inside the header are JSON, with a few
tagged objects for what JSON lacks: {"__array__": k} (blob k), {"__spec__": {"shape", "dtype"}} (an abstract
array), {"__dtype__": name}, {"__tuple__": [...]}, {"__range__": [start, stop, step]},
{"__dict__": [[key, value], ...]} (keys that are not strings), {"__opaque__": type name} (a value that cannot travel). Arrays are loaded with
allow_pickle=False; bfloat16 travels as its uint16 bits with the dtype named in the tag. No pickle, ever.

The reader trusts nothing: any bytes become a frame or a WireError (never RecursionError, TypeError,
MemoryError...): a header nested deeper than MAX_HEADER_DEPTH, a key that cannot be a key, an abstract array
in a reply (`decode_reply`: abstract arrays only travel from the grader to the jail) are refused with a reason.
tests/test_wire.py fuzzes it with hypothesis.
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time
from typing import Any, BinaryIO

import numpy as np

MAX_HEADER_BYTES = 8 * 2**20  # a header is JSON text: messages, outputs, a trace's tables
MAX_BLOB_BYTES = 64 * 2**20  # one array (the labs' largest is 4 MB)
MAX_FRAME_BYTES = 256 * 2**20  # header and blobs together
MAX_DEPTH = 32  # a value's nesting
MAX_HEADER_DEPTH = 200  # a whole header's nesting (a trace's data included)
ALLOWED_DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
)


class WireError(ValueError):
    """A frame or value that does not follow the wire format (a broken or forged peer)."""


class PeerGone(EOFError):
    """The other side closed its end (it exited or was killed)."""


class PeerSilent(TimeoutError):
    """No complete frame arrived before the deadline."""


def _bf16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def dtype_named(name: Any) -> np.dtype:
    if not isinstance(name, str) or name not in ALLOWED_DTYPES:
        raise WireError(f"dtype {name!r} is not one of {', '.join(ALLOWED_DTYPES)}")
    return _bf16() if name == "bfloat16" else np.dtype(name)


def dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name


# --------------------------------------------------------------------------------------------- values


def encode(value: Any, blobs: list[bytes], depth: int = 0) -> Any:
    """`value` as JSON-able data, arrays appended to `blobs` as .npy bytes."""
    if depth > MAX_DEPTH:
        return {"__opaque__": "nesting too deep"}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if np.isfinite(f) else {"__float__": repr(f)}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"__dtype__": dtype_name(value)}
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None and type(value).__name__ == "ShapeDtypeStruct":
        return {"__spec__": {"shape": [int(d) for d in shape], "dtype": dtype_name(dtype)}}
    if hasattr(value, "__array__") and shape is not None and dtype is not None:
        arr = np.asarray(value)
        name = dtype_name(arr.dtype)
        if name not in ALLOWED_DTYPES:
            return {"__opaque__": f"array of {name}"}
        buf = io.BytesIO()
        np.save(buf, arr.view(np.uint16) if name == "bfloat16" else arr, allow_pickle=False)
        blobs.append(buf.getvalue())
        return {"__array__": len(blobs) - 1, "dtype": name}
    if isinstance(value, range):  # LAB·1.5's margins use ranges as keys
        return {"__range__": [value.start, value.stop, value.step]}
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v, blobs, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, blobs, depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not any(k.startswith("__") for k in value):
            return {k: encode(v, blobs, depth + 1) for k, v in value.items()}
        return {"__dict__": [[encode(k, blobs, depth + 1), encode(v, blobs, depth + 1)] for k, v in value.items()]}
    return {"__opaque__": type(value).__name__[:100]}


class Opaque:
    """A value the other side had but could not send (an object of its own type): shown by its type name."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name} object>"


def load_array(data: bytes, dtype: str) -> np.ndarray:
    want = dtype_named(dtype)
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - a pickle, a truncated or forged file: whatever numpy raises for it
        raise WireError(f"not a plain .npy array ({type(e).__name__}: {str(e)[:100]})") from None
    if not isinstance(arr, np.ndarray):
        raise WireError("not a plain .npy array")
    if want.name == "bfloat16":
        if arr.dtype != np.uint16:
            raise WireError("a bfloat16 array must travel as uint16 bits")
        return arr.view(want)
    if arr.dtype != want:
        raise WireError(f"array tagged {dtype} holds {arr.dtype}")
    return arr


def decode_reply(value: Any, blobs: list[bytes]) -> Any:
    """`decode` for what the jail sends back: values only (an abstract array is never an answer)."""
    return decode(value, blobs, specs=False)


def decode(value: Any, blobs: list[bytes], depth: int = 0, *, specs: bool = True) -> Any:
    """The inverse of `encode`; raises WireError on anything else. Arrays come back as numpy arrays,
    abstract arrays as {"shape": tuple, "dtype": np.dtype} specs (`Spec`), unless `specs` is False."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deep")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [decode(v, blobs, depth + 1, specs=specs) for v in value]
    if not isinstance(value, dict):
        raise WireError(f"unexpected JSON value {type(value).__name__}")
    if "__array__" in value:
        k = value["__array__"]
        if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(blobs):
            raise WireError("array reference out of range")
        return load_array(blobs[k], value.get("dtype"))
    if "__spec__" in value and not specs:
        raise WireError("an abstract array (shape and dtype only) where values belong")
    if "__spec__" in value:
        spec = value["__spec__"]
        if not isinstance(spec, dict):
            raise WireError("bad spec")
        shape = spec.get("shape")
        if (
            not isinstance(shape, list)
            or len(shape) > 8
            or not all(isinstance(d, int) and 0 <= d < 2**31 for d in shape)
        ):
            raise WireError("bad spec shape")
        return Spec(tuple(shape), dtype_named(spec.get("dtype")))
    if "__dtype__" in value:
        return dtype_named(value["__dtype__"])
    if "__float__" in value:
        text = value["__float__"]
        if text not in ("nan", "inf", "-inf"):
            raise WireError("bad float")
        return float(text)
    if "__range__" in value:
        items = value["__range__"]
        if (
            not isinstance(items, list)
            or len(items) != 3
            or items[2] == 0
            or not all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**63 for v in items)
        ):
            raise WireError("bad range")
        return range(*items)
    if "__tuple__" in value:
        items = value["__tuple__"]
        if not isinstance(items, list):
            raise WireError("bad tuple")
        return tuple(decode(v, blobs, depth + 1, specs=specs) for v in items)
    if "__dict__" in value:
        items = value["__dict__"]
        if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
            raise WireError("bad dict")
        out = {}
        for k, v in items:
            key = decode(k, blobs, depth + 1, specs=specs)
            if not isinstance(key, (int, float, str, bool, tuple, range)) and key is not None:
                raise WireError("unhashable dict key")
            try:
                hash(key)
            except TypeError:  # a tuple holding a list, an array, a dict
                raise WireError("unhashable dict key (a tuple holding something unhashable)") from None
            out[key] = decode(v, blobs, depth + 1, specs=specs)
        return out
    if "__opaque__" in value:
        return Opaque(str(value["__opaque__"])[:100])
    if any(k.startswith("__") for k in value):
        raise WireError("unknown tag")
    return {k: decode(v, blobs, depth + 1, specs=specs) for k, v in value.items()}


class Spec:
    """An abstract array (shape and dtype only): what jax.ShapeDtypeStruct is on the other side."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape, self.dtype = shape, dtype

    def __repr__(self) -> str:
        return f"Spec({self.shape}, {self.dtype.name})"


# --------------------------------------------------------------------------------------------- frames


def pack(header: dict[str, Any], blobs: list[bytes] | None = None) -> bytes:
    blobs = blobs or []
    text = json.dumps({**header, "blobs": [len(b) for b in blobs]}, allow_nan=False).encode()
    return struct.pack(">Q", len(text)) + text + b"".join(blobs)


def send(stream: BinaryIO, header: dict[str, Any], blobs: list[bytes] | None = None) -> None:
    stream.write(pack(header, blobs))
    stream.flush()


def _too_deep(value: Any, limit: int) -> bool:
    """Whether JSON data nests past `limit` (walked without recursion: the data may be adversarial)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return True
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return False


class Reader:
    """Reads frames from a file descriptor with a deadline and size limits (the peer is not trusted)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def _fill(self, n: int, deadline: float | None) -> None:
        while len(self.buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PeerSilent("no reply before the deadline")
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    raise PeerSilent("no reply before the deadline")
            chunk = os.read(self.fd, max(65536, min(n - len(self.buf), 16 * 2**20)))
            if not chunk:
                raise PeerGone("the other side closed the pipe")
            self.buf += chunk

    def _take(self, n: int, deadline: float | None) -> bytes:
        self._fill(n, deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read(self, timeout: float | None = None) -> tuple[dict[str, Any], list[bytes]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        (size,) = struct.unpack(">Q", self._take(8, deadline))
        if size > MAX_HEADER_BYTES:
            raise WireError(f"a header of {size:,} bytes is over the {MAX_HEADER_BYTES:,}-byte limit")
        try:
            header = json.loads(self._take(size, deadline))
        except (ValueError, RecursionError):  # not JSON, not UTF-8, a number too long, nested past the parser
            raise WireError("the header is not JSON this reader takes") from None
        if _too_deep(header, MAX_HEADER_DEPTH):
            raise WireError(f"the header is nested deeper than {MAX_HEADER_DEPTH} levels")
        sizes = header.get("blobs", []) if isinstance(header, dict) else None
        if not isinstance(sizes, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= MAX_BLOB_BYTES for s in sizes
        ):
            raise WireError("bad blob sizes")
        if size + sum(sizes) > MAX_FRAME_BYTES:
            raise WireError(f"a frame of {size + sum(sizes):,} bytes is over the {MAX_FRAME_BYTES:,}-byte limit")
        return header, [self._take(s, deadline) for s in sizes]
