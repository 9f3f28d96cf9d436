"""`check(name, actual, expected, tol=...)`: the visible check every lab cell ends with.

The comparison (`compare`) is shared with the grader, so a student sees the same diagnosis in a visible
check as in a hidden test's message: shape or dtype mismatch, NaN (blocks never written), and otherwise
the largest error and the first wrong block.
"""
from __future__ import annotations

import html
import platform
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pallas_course.errors import explain

DEFAULT_BLOCK = 128


class CheckFailure(AssertionError):
    """A kernel's output is not what it should be; the message says how and where (first lines first)."""

    raw: str = ""            # the full traceback of the error behind it, when there was one
    kind: str = ""           # a stable id: an errors.explain kind, or a Mismatch kind


@dataclass(frozen=True)
class Mismatch:
    kind: str                 # "type", "shape", "dtype", "nan" or "values"
    message: str
    cause: str = ""           # for "nan": "never-written", "never-written-at-all" or "computed"


# Interpret mode fills memory nobody wrote with np.nan, a NaN whose sign bit is clear; a NaN computed on an x86
# CPU (inf - inf, 0 / 0, inf / inf, e.g. an exp that overflowed) is the x86 default NaN, sign bit set. ARM
# computes positive NaNs, so there the sign cannot tell the two apart and the message names both causes.
_SIGNED_DEFAULT_NAN = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")

NEVER_WRITTEN_AT_ALL = ("no value of the output was ever written: the kernel never stores into its output ref. "
                        "Store with o_ref[...] = value; `o_ref = value` only rebinds the name (and writes nothing)")
NEVER_WRITTEN = ("under TPU interpret mode memory that nobody wrote reads as NaN, so these blocks were never "
                 "written: does the grid cover every output block (n // block, not one short), is the "
                 "accumulator initialised, and does each index map point where you think?")
COMPUTED = ("the kernel computed these NaNs (an exp that overflowed to inf, then inf / inf; 0 / 0; "
            "sqrt of a negative): they are not unwritten memory. Keep intermediate values in range, e.g. subtract "
            "each row's max before jnp.exp")


def _nan_cause(a: np.ndarray, nan: np.ndarray) -> str:
    negative = np.signbit(a[nan])
    if _SIGNED_DEFAULT_NAN and negative.any():
        return "computed"
    if np.isinf(a).any():
        return "computed"
    if not _SIGNED_DEFAULT_NAN:
        return "unknown"
    return "never-written-at-all" if nan.all() else "never-written"


def _nan_message(name: str, a: np.ndarray, nan: np.ndarray, blocks: list[tuple[int, ...]], shape: tuple[int, ...],
                 blk: tuple[int, ...]) -> str:
    head = f"{name}: {int(nan.sum())} of {a.size} values are NaN; {_blocks_phrase(blocks, shape, blk)}. "
    cause = _nan_cause(a, nan)
    if cause == "computed":
        return head + COMPUTED
    if cause == "never-written-at-all":
        return f"{name}: all {a.size} values are NaN: {NEVER_WRITTEN_AT_ALL}"
    if cause == "never-written":
        return head + NEVER_WRITTEN[0].upper() + NEVER_WRITTEN[1:]
    return head + ("Either the kernel never wrote them (" + NEVER_WRITTEN + ") or it computed them (" + COMPUTED + ")")


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
        return Mismatch("nan", _nan_message(name, a, nan, blocks, a_shape, blk), cause=_nan_cause(a, nan))
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


PASSED = "visible checks passed; the grade also tests other shapes and dtypes"


def tolerance_phrase(tol: float, atol: float | None = None) -> str:
    """How `compare` reads `tol` and `atol`, in words: |actual - expected| <= atol + tol * |expected|."""
    if tol == 0 and not atol:
        return "exact"
    if atol is None:
        return f"tol {tol:g}, absolute and relative: |error| <= {tol:g} + {tol:g}·|expected|"
    return f"tol {tol:g} relative (absolute floor {atol:g})"


def _run_under_course_mode(thunk: Callable[[], Any]) -> Any:
    """Call the student's code the way the grade does: under TPU interpret mode wherever the course interprets
    (so a pallas_call that forgot interpret=INTERP is checked like the grade checks it)."""
    import jax

    from pallas_course.runtime import course_mode

    with course_mode():
        return jax.block_until_ready(thunk())


def failure_text(exc: BaseException) -> str:
    """What a student reads first for a failed cell: a CheckFailure's own lines, else the explanation."""
    if isinstance(exc, CheckFailure):
        return str(exc)
    return explain(exc).summary


def show(exc: BaseException) -> None:
    """Display a failure: the two or three lines first, the raw traceback folded (HTML <details> in Jupyter)."""
    summary = failure_text(exc)
    raw = getattr(exc, "raw", None) or explain(exc).raw
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display
        in_notebook = get_ipython() is not None and "IPKernelApp" in get_ipython().config
    except ImportError:
        in_notebook = False
    if in_notebook:
        display(HTML(f"<pre>{html.escape(summary)}</pre><details><summary>full traceback</summary>"
                     f"<pre>{html.escape(raw)}</pre></details>"))
    else:
        print(summary, file=sys.stderr)
        print("── full traceback ──\n" + raw, file=sys.stderr)


def _suspect(actual: Any, suspects: Mapping[str, Any] | None, tol: float, atol: float | None) -> str | None:
    for label, wrong in (suspects or {}).items():
        if compare(actual, wrong, tol=tol, atol=atol) is None:
            return label
    return None


def check(name: str, actual: Any, expected: Any, tol: float = 0.0, *, block: Sequence[int] | None = None,
          atol: float | None = None, suspects: Mapping[str, Any] | None = None) -> None:
    """Print a one-line pass, or raise CheckFailure whose first lines say what is wrong and where.

    `actual` is the output, or better a zero-argument function producing it (`lambda: add(x, y)`): then it runs
    here under the grade's TPU interpret mode, and an error it raises becomes a short explanation (the raw
    traceback stays on the exception, `.raw`). `tol` is both the absolute and the relative tolerance (0 means
    exact) unless `atol` gives the absolute part. `suspects` maps a named mistake to the output that mistake
    would give: a failure that matches one says so first. `block` names the first wrong block (default 128 on
    each of the last two dims).
    """
    if callable(actual):
        try:
            actual = _run_under_course_mode(actual)
        except CheckFailure:
            raise
        except Exception as exc:   # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"{name}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw = explanation.raw
            failure.kind = explanation.kind
            raise failure from None
    mismatch = compare(actual, expected, tol=tol, block=block, name=name, atol=atol)
    if mismatch is not None:
        named = _suspect(actual, suspects, tol, atol) if mismatch.kind in ("values", "nan") else None
        message = mismatch.message if named is None else f"{name}: this is what {named} gives. {mismatch.message}"
        failure = CheckFailure(message)
        failure.kind = mismatch.kind if named is None else "suspect"
        raise failure
    print(f"✓ {name}: matches (max error {max_error(actual, expected):.3g}, {tolerance_phrase(tol, atol)}), "
          f"shape {tuple(actual.shape)} {np.dtype(actual.dtype)}; {PASSED}")


def check_one_kernel(name: str, fn: Callable[..., Any], *args: Any, outside_min_size: int = 0, **kwargs: Any) -> None:
    """The grade's structural rule, visible: `fn(*args)` launches one pallas_call and computes nothing outside
    it (work on operands smaller than `outside_min_size` elements, such as a (d,) scale, is allowed)."""
    from pallas_course.kernel_trace import trace

    t = trace(fn, *args, **kwargs)
    if not t.pallas_calls:
        raise CheckFailure(f"{name}: launches no pallas_call; it computed with XLA "
                           f"({', '.join(dict.fromkeys(t.outside)) or 'nothing'}). The work must happen inside a "
                           "Pallas kernel")
    if len(t.pallas_calls) > 1:
        raise CheckFailure(f"{name}: launches {len(t.pallas_calls)} pallas_calls; this kernel should be one")
    work = t.work_outside(outside_min_size)
    if work:
        raise CheckFailure(f"{name}: computes outside its kernel ({', '.join(dict.fromkeys(work))}); move that work "
                           "into the kernel body (a cast too: cast the accumulator with .astype(o_ref.dtype) "
                           "before the store) so the array makes one trip through HBM")
    print(f"✓ {name}: one pallas_call, nothing computed outside it")
