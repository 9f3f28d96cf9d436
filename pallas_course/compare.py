"""The comparison every check stands on, the notebook's and the grader's: `compare` (shape, dtype, NaN never
written or computed, otherwise the largest error and the first wrong block), `explained` (a rule's diagnosis
first), CheckFailure and how a failure reads (`failure_text`).

A student sees the same diagnosis in a visible check (pallas_course.check) as in a hidden test's message
(autograder.labs.harness). This module stands below the notebook's API: the checks (check, lab_checks,
lab_1_3_rules, lab_1_4_checks) and the grader import it from here, not from pallas_course.check, which
re-exports it for the notebooks.
"""

from __future__ import annotations

import html
import platform
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from pallas_course.errors import explain
from pallas_course.rules import as_f64

DEFAULT_BLOCK = 128


class CheckFailure(AssertionError):
    """A kernel's output is not what it should be; the message says how and where (first lines first)."""

    raw: str = ""  # the full traceback of the error behind it, when there was one
    kind: str = ""  # a stable id: an errors.explain kind, or a Mismatch kind


@dataclass(frozen=True)
class Mismatch:
    kind: str  # "type", "shape", "dtype", "nan" or "values"
    message: str
    cause: str = ""  # for "nan": "never-written", "never-written-at-all", "never-initialised",
    # "never-written-unknown", "computed" or "unknown"


# Interpret mode fills memory nobody wrote with np.nan, a NaN whose sign bit is clear; a NaN computed on an x86
# CPU (inf - inf, 0 / 0, inf / inf, e.g. an exp that overflowed) is the x86 default NaN, sign bit set. ARM
# computes positive NaNs, so there the sign cannot tell the two apart and the message names both causes.
_SIGNED_DEFAULT_NAN = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")

NEVER_WRITTEN_AT_ALL = (
    "no value of the output was ever written: the kernel never stores into its output ref. "
    "Store with o_ref[...] = value; `o_ref = value` only rebinds the name (and writes nothing)"
)
NEVER_INITIALISED = (
    "the kernel reads {ref} (+=) before anything is stored there: it accumulates into memory it "
    "never zeroed. Under TPU interpret mode memory nobody wrote reads as NaN, and NaN + x stays NaN "
    "through every K step. Zero it on the first K step: @pl.when(pl.program_id({axis}) == 0) then "
    "{store} = jnp.zeros_like(...) (the reduction's starting value: 0 for a sum, -inf for a max, "
    "jnp.full_like(..., -jnp.inf))"
)
# The same read in a kernel whose grid revisits no output block: there is no K to accumulate over.
NOTHING_TO_ACCUMULATE = (
    "the kernel reads {ref} (+=) before anything is stored there: it adds into memory nobody "
    "wrote, and under TPU interpret mode that memory reads as NaN. Each grid step of this kernel "
    "writes its own output block once, with nothing to accumulate over: store the value, "
    "{store} = ... (=, not +=)"
)
# Where the trace cannot be read: both causes of an output that is NaN everywhere, neither guessed.
ALL_NAN_UNKNOWN = (
    "nothing written into the output survived. Either the kernel never stores into o_ref (store with "
    "o_ref[...] = value; `o_ref = value` only rebinds the name), or it accumulates (+=) into o_ref or "
    "a scratch it never zeroed (under TPU interpret mode that memory reads as NaN): zero it under "
    "@pl.when(pl.program_id(2) == 0)"
)
STORES_NEVER_RUN = (
    "the kernel does store into its output, yet nothing it stored survived: does a pl.when guard the "
    "store with a condition that is never true (the last K step is pl.num_programs(2) - 1)?"
)
NEVER_WRITTEN = (
    "under TPU interpret mode memory that nobody wrote reads as NaN, so these blocks were never "
    "written: does the grid cover every output block (n // block, not one short), is the "
    "accumulator initialised, and does each index map point where you think?"
)
COMPUTED = (
    "the kernel computed these NaNs: they are not unwritten memory. Look for an inf meeting an inf or a "
    "zero (an exp that overflowed, then inf / inf; a variance of 0 without eps, then 0 * rsqrt(0)), 0 / 0, "
    "or the sqrt of a negative"
)


def _nan_cause(a: np.ndarray, nan: np.ndarray) -> str:
    negative = np.signbit(a[nan])
    if _SIGNED_DEFAULT_NAN and negative.any():
        return "computed"
    if np.isinf(a).any():
        return "computed"
    if not _SIGNED_DEFAULT_NAN:
        return "unknown"
    return "never-written-at-all" if nan.all() else "never-written"


NEVER_COPIED_OUT = (
    "the output is left in HBM (memory_space=pl.ANY), where only a copy writes it, and nothing reached it: copy "
    "each result block out, pltpu.make_async_copy(o_buf, o_hbm.at[pl.ds(i * rows, rows)], sem.at[2]), .start() "
    "then .wait()"
)


def _all_nan_cause(kernel: Any) -> tuple[str, str]:
    """(cause, message) of an output that is NaN everywhere, from the traced kernel when there is one."""
    if kernel is None:
        return "never-written-unknown", ALL_NAN_UNKNOWN
    from pallas_course.kernel_trace import read_before_written, stores

    if any(getattr(b, "memory_space", "") in ("any", "hbm") for b in getattr(kernel, "outputs", ())):
        return "never-copied-out", NEVER_COPIED_OUT
    unread = read_before_written(kernel)
    if unread:
        ref = unread[0]
        store = "o_ref[...]" if ref == "o_ref" else ("acc_ref[...]" if "scratch" in ref else f"{ref}[...]")
        axis = _revisit_axis(kernel)
        if axis is None:  # nothing to accumulate over (add, a transpose): each step writes its block once
            return "never-initialised", NOTHING_TO_ACCUMULATE.format(ref=ref, store=store)
        return "never-initialised", NEVER_INITIALISED.format(ref=ref, store=store, axis=axis)
    if not stores(kernel):
        return "never-written-at-all", NEVER_WRITTEN_AT_ALL
    if unread is None:
        return "never-written-unknown", ALL_NAN_UNKNOWN
    return "never-written-unknown", STORES_NEVER_RUN


def _revisit_axis(kernel: Any) -> int | None:
    """The grid axis along which the first output's block stays put (a reduction axis, such as a matmul's K), if
    the grid has one of more than one step; None when every step writes a block of its own."""
    outputs, grid = getattr(kernel, "outputs", ()), tuple(getattr(kernel, "grid", ()))
    if not outputs:
        return None
    origin = (0,) * len(grid)
    for axis, size in reversed(list(enumerate(grid))):
        if size > 1:
            step = tuple(1 if a == axis else 0 for a in range(len(grid)))
            try:
                if outputs[0].block_index(*step) == outputs[0].block_index(*origin):
                    return axis
            except Exception:  # noqa: BLE001 - an index map that fails here is judged elsewhere
                return None
    return None


def _nan_message(
    name: str,
    a: np.ndarray,
    nan: np.ndarray,
    blocks: list[tuple[int, ...]],
    shape: tuple[int, ...],
    blk: tuple[int, ...],
    kernel: Any = None,
) -> str:
    where = "" if a.ndim < 2 else f"; {_blocks_phrase(blocks, shape, blk)}"
    head = (
        f"{name}: the value is NaN. "
        if a.ndim == 0
        else f"{name}: {int(nan.sum())} of {a.size} values are NaN{where}. "
    )
    cause = _nan_cause(a, nan)
    if cause == "computed":
        return head + COMPUTED
    if cause == "never-written-at-all":
        return f"{name}: all {a.size} values are NaN: {_all_nan_cause(kernel)[1]}"
    if cause == "never-written":
        return head + NEVER_WRITTEN[0].upper() + NEVER_WRITTEN[1:]
    return head + ("Either the kernel never wrote them (" + NEVER_WRITTEN + ") or it computed them (" + COMPUTED + ")")


def _block_grid(shape: tuple[int, ...], block: Sequence[int] | None) -> tuple[int, ...]:
    if block is None:
        block = [min(d, DEFAULT_BLOCK) for d in shape[-2:]]
    block = tuple(block)[-len(shape[-2:]) :] if shape else ()
    return tuple(max(1, b) for b in block)


def _blocks_of(mask: np.ndarray, block: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Block indices (over the last two dims) that hold at least one True, in row-major order."""
    if mask.ndim == 0:
        return [()] if bool(mask) else []
    flat = mask.reshape((-1,) + mask.shape[-len(block) :]).any(axis=0)
    idx = np.argwhere(flat)
    blocks = sorted({tuple(int(i) // b for i, b in zip(row, block)) for row in idx})
    return blocks


def _fmt_block(block: tuple[int, ...]) -> str:
    return "×".join(str(b) for b in block)


def _blocks_phrase(blocks: list[tuple[int, ...]], shape: tuple[int, ...], block: tuple[int, ...]) -> str:
    total = int(np.prod([-(-d // b) for d, b in zip(shape[-len(block) :], block)])) if block else 1
    return f"{len(blocks)} of {total} blocks of {_fmt_block(block)} wrong, the first is block {tuple(blocks[0])}"


def form_mismatch(actual: Any, expected: Any, *, name: str = "output") -> Mismatch | None:
    """`compare`'s first half: None when `actual` is an array of `expected`'s shape and dtype, else the mismatch
    ("type", "shape" or "dtype"). The values are not looked at (an output checked in its own dtype here, in
    float64 by `compare` after)."""
    if not hasattr(actual, "shape") or not hasattr(actual, "dtype"):
        return Mismatch(
            "type",
            f"{name}: got a {type(actual).__name__}, expected an array "
            f"of shape {tuple(np.shape(expected))}; did the function return its result?",
        )
    a_shape, e_shape = tuple(actual.shape), tuple(np.shape(expected))
    if a_shape != e_shape:
        return Mismatch("shape", f"{name}: shape {a_shape}, expected {e_shape}; look at out_shape and the grid")
    a_dtype, e_dtype = np.dtype(actual.dtype), np.dtype(getattr(expected, "dtype", np.float64))
    if a_dtype != e_dtype:
        return Mismatch(
            "dtype",
            f"{name}: dtype {a_dtype}, expected {e_dtype}; out_shape should carry the "
            f"input's dtype, and the kernel should cast back with .astype(o_ref.dtype)",
        )
    return None


def compare(
    actual: Any,
    expected: Any,
    *,
    tol: float = 0.0,
    block: Sequence[int] | None = None,
    name: str = "output",
    atol: float | None = None,
    kernel: Any = None,
) -> Mismatch | None:
    """None when `actual` matches `expected` within `tol` (absolute and relative), else a diagnosis.

    `atol`, when given, replaces `tol` as the absolute part: |actual - expected| <= atol + tol * |expected|
    (for outputs far below 1, such as softmax probabilities, where an absolute `tol` would accept anything).
    `kernel`, the traced pallas_call that produced `actual` (kernel_trace.PallasCallInfo), tells an output never
    stored from an accumulator never zeroed when every value is NaN; without it the message names both.
    """
    form = form_mismatch(actual, expected, name=name)
    if form is not None:
        return form
    a_shape = tuple(actual.shape)
    a, e = as_f64(actual), as_f64(expected)
    blk = _block_grid(a_shape, block)
    nan = np.isnan(a) & ~np.isnan(e)
    if nan.any():
        blocks = _blocks_of(nan, blk)
        cause = _nan_cause(a, nan)
        if cause == "never-written-at-all":
            cause = _all_nan_cause(kernel)[0]
        return Mismatch("nan", _nan_message(name, a, nan, blocks, a_shape, blk, kernel), cause=cause)
    with np.errstate(invalid="ignore"):
        err = np.abs(a - e)
        bad = ~(err <= (tol if atol is None else atol) + tol * np.abs(e)) & ~(np.isnan(a) & np.isnan(e))
    if not bad.any():
        return None
    err = np.where(bad, np.nan_to_num(err, nan=np.inf), 0)
    tolerance = f"tol={tol:g}{'' if atol is None else f' (relative; atol={atol:g})'}"
    if a.ndim == 0:  # a scalar check: the value, no blocks
        return Mismatch(
            "values",
            f"{name}: got {a.item():.6g}, expected {e.item():.6g} (off by {float(err):.3g}, more than {tolerance})",
        )
    worst = np.unravel_index(int(np.argmax(err)), a.shape)
    where = list(int(i) for i in worst)
    if a.ndim == 1 and a.size <= 16:  # a short list: name its entries, no blocks
        wrong = [int(i) for i in np.flatnonzero(bad)]
        return Mismatch(
            "values",
            f"{name}: got {_short_list(a)}, expected {_short_list(e)}; entr"
            f"{'y' if len(wrong) == 1 else 'ies'} {', '.join(map(str, wrong))} differ{'s' * (len(wrong) == 1)} by more "
            f"than {tolerance}",
        )
    blocks = _blocks_of(bad, blk)
    return Mismatch(
        "values",
        (
            f"{name}: {int(bad.sum())} of {a.size} values differ by more than {tolerance}; the largest error is "
            f"{float(err[worst]):.3g} at {where} (got {a[worst]:.6g}, expected {e[worst]:.6g}); "
            f"{_blocks_phrase(blocks, a_shape, blk)}"
        ),
    )


def _short_list(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{float(x):.6g}" for x in v) + "]"


def explained(mismatch: Mismatch, hint: str | None) -> str:
    """What a student reads for a mismatch, with a rule's diagnosis (`hint`, None when it names no cause) first.
    NaNs never written (or never zeroed) keep compare's own text: an overflow or eps hint would name the wrong
    cause; computed NaNs get the hint instead of compare's generic text; other mismatches get both."""
    if not hint and mismatch.kind == "values":  # no cause named: say so rather than guess
        return (
            f"{mismatch.message}; no usual mistake gives these values (the cause is not one this check "
            "knows): start from the first wrong block"
        )
    if not hint or mismatch.kind not in ("nan", "values") or mismatch.cause.startswith("never"):
        return mismatch.message
    label = mismatch.message.split(": ", 1)[0]
    if mismatch.kind == "nan" and mismatch.cause == "computed":
        return f"{label}: {hint}"
    return f"{label}: {hint}. {mismatch.message}"


def max_error(actual: Any, expected: Any) -> float:
    return float(np.max(np.abs(as_f64(actual) - as_f64(expected)), initial=0.0))


PASSED = "visible checks passed; the grade also tests other shapes and dtypes"


def tolerance_phrase(tol: float, atol: float | None = None) -> str:
    """How `compare` reads `tol` and `atol`, in words: |actual - expected| <= atol + tol * |expected|."""
    if tol == 0 and not atol:
        return "exact"
    if atol is None:
        return f"tol {tol:g}, absolute and relative: |error| <= {tol:g} + {tol:g}·|expected|"
    return f"tol {tol:g} relative (absolute floor {atol:g})"


def failure_text(exc: BaseException) -> str:
    """What a student reads first for a failed cell: a CheckFailure's own lines, else the explanation."""
    if isinstance(exc, CheckFailure):
        return str(exc)
    return explain(exc).summary


def show(exc: BaseException) -> None:
    """Display a failure outside the notebook's own error display: its lines first, then the raw traceback."""
    summary = failure_text(exc)
    raw = getattr(exc, "raw", None) or explain(exc).raw
    print(summary, file=sys.stderr)
    print("── full traceback ──\n" + raw, file=sys.stderr)


def show_traceback_folded(exc: BaseException) -> None:
    """In Jupyter: the raw traceback behind a failure, folded (HTML <details>); its message is shown once, as the
    cell's error output, not here (runtime's notebook display)."""
    from IPython.display import HTML, display

    raw = getattr(exc, "raw", None) or explain(exc).raw
    display(HTML(f"<details><summary>full traceback</summary><pre>{html.escape(raw)}</pre></details>"))
