"""`check(name, actual, expected, tol=...)`: the visible check every lab cell ends with.

The comparison (`compare`) is shared with the grader, so a student sees the same diagnosis in a visible
check as in a hidden test's message: shape or dtype mismatch, NaN (blocks never written), and otherwise
the largest error and the first wrong block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

DEFAULT_BLOCK = 128


class CheckFailure(AssertionError):
    """A kernel's output is not what it should be; the message says how and where."""


@dataclass(frozen=True)
class Mismatch:
    kind: str                 # "shape", "dtype", "nan" or "values"
    message: str


def _as_f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _block_grid(shape: tuple[int, ...], block: Sequence[int] | None) -> tuple[int, ...]:
    if block is None:
        block = [min(d, DEFAULT_BLOCK) for d in shape[-2:]]
    block = tuple(block)[-len(shape[-2:]):] if shape else ()
    return tuple(max(1, b) for b in block)


def _blocks_of(mask: np.ndarray, block: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Block indices (over the last two dims) that hold at least one True, in row-major order."""
    if mask.ndim == 0:
        return [()] if bool(mask) else []
    flat = mask.reshape((-1,) + mask.shape[-len(block):]).any(axis=0)
    idx = np.argwhere(flat)
    blocks = sorted({tuple(int(i) // b for i, b in zip(row, block)) for row in idx})
    return blocks


def _fmt_block(block: tuple[int, ...]) -> str:
    return "×".join(str(b) for b in block)


def _blocks_phrase(blocks: list[tuple[int, ...]], shape: tuple[int, ...], block: tuple[int, ...]) -> str:
    total = int(np.prod([-(-d // b) for d, b in zip(shape[-len(block):], block)])) if block else 1
    return (f"{len(blocks)} of {total} blocks of {_fmt_block(block)} wrong, the first is block "
            f"{tuple(blocks[0])}")


def compare(actual: Any, expected: Any, *, tol: float = 0.0, block: Sequence[int] | None = None,
            name: str = "output", atol: float | None = None) -> Mismatch | None:
    """None when `actual` matches `expected` within `tol` (absolute and relative), else a diagnosis.

    `atol`, when given, replaces `tol` as the absolute part: |actual - expected| <= atol + tol * |expected|
    (for outputs far below 1, such as softmax probabilities, where an absolute `tol` would accept anything).
    """
    if not hasattr(actual, "shape") or not hasattr(actual, "dtype"):
        return Mismatch("type", f"{name}: got a {type(actual).__name__}, expected an array "
                                 f"of shape {tuple(np.shape(expected))}; did the function return its result?")
    a_shape, e_shape = tuple(actual.shape), tuple(np.shape(expected))
    if a_shape != e_shape:
        return Mismatch("shape", f"{name}: shape {a_shape}, expected {e_shape}; look at out_shape and the grid")
    a_dtype, e_dtype = np.dtype(actual.dtype), np.dtype(getattr(expected, "dtype", np.float64))
    if a_dtype != e_dtype:
        return Mismatch("dtype", f"{name}: dtype {a_dtype}, expected {e_dtype}; out_shape should carry the "
                                 f"input's dtype, and the kernel should cast back with .astype(o_ref.dtype)")
    a, e = _as_f64(actual), _as_f64(expected)
    blk = _block_grid(a_shape, block)
    nan = np.isnan(a) & ~np.isnan(e)
    if nan.any():
        blocks = _blocks_of(nan, blk)
        return Mismatch("nan", (
            f"{name}: {int(nan.sum())} of {a.size} values are NaN; {_blocks_phrase(blocks, a_shape, blk)}. "
            "Under TPU interpret mode memory that nobody wrote reads as NaN: does the grid cover every output "
            "block, is the accumulator initialised, and does each index map point where you think?"))
    with np.errstate(invalid="ignore"):
        err = np.abs(a - e)
        bad = ~(err <= (tol if atol is None else atol) + tol * np.abs(e)) & ~(np.isnan(a) & np.isnan(e))
    if not bad.any():
        return None
    err = np.where(bad, np.nan_to_num(err, nan=np.inf), 0)
    worst = np.unravel_index(int(np.argmax(err)), a.shape)
    where = list(int(i) for i in worst)
    blocks = _blocks_of(bad, blk)
    return Mismatch("values", (
        f"{name}: {int(bad.sum())} of {a.size} values differ by more than tol={tol:g}"
        f"{'' if atol is None else f' (relative; atol={atol:g})'}; the largest error is "
        f"{float(err[worst]):.3g} at {where} (got {a[worst]:.6g}, expected {e[worst]:.6g}); "
        f"{_blocks_phrase(blocks, a_shape, blk)}"))


def max_error(actual: Any, expected: Any) -> float:
    return float(np.max(np.abs(_as_f64(actual) - _as_f64(expected)), initial=0.0))


def check(name: str, actual: Any, expected: Any, tol: float = 0.0, *, block: Sequence[int] | None = None) -> None:
    """Print a one-line pass, or raise CheckFailure explaining what is wrong and where.

    `tol` is both the absolute and the relative tolerance (0 means exact). `block` is the block shape
    used to name the first wrong block; it defaults to 128 on each of the last two dims.
    """
    mismatch = compare(actual, expected, tol=tol, block=block, name=name)
    if mismatch is not None:
        raise CheckFailure(mismatch.message)
    print(f"✓ {name}: matches, max error {max_error(actual, expected):.3g} (tol {tol:g}), shape "
          f"{tuple(actual.shape)} {np.dtype(actual.dtype)}")
