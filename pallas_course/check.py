"""`check(name, actual, expected, tol=...)`: the visible check every lab cell ends with.

The comparison (`compare`) is shared with the grader, so a student sees the same diagnosis in a visible
check as in a hidden test's message: shape or dtype mismatch, NaN (blocks never written), and otherwise
the largest error and the first wrong block.
"""
from __future__ import annotations

import contextlib
import functools
import html
import platform
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from pallas_course.errors import explain
from pallas_course.rules import as_f64, dtype_name

DEFAULT_BLOCK = 128


class CheckFailure(AssertionError):
    """A kernel's output is not what it should be; the message says how and where (first lines first)."""

    raw: str = ""            # the full traceback of the error behind it, when there was one
    kind: str = ""           # a stable id: an errors.explain kind, or a Mismatch kind


@dataclass(frozen=True)
class Mismatch:
    kind: str                 # "type", "shape", "dtype", "nan" or "values"
    message: str
    cause: str = ""           # for "nan": "never-written", "never-written-at-all", "never-initialised",
                              # "never-written-unknown", "computed" or "unknown"


# Interpret mode fills memory nobody wrote with np.nan, a NaN whose sign bit is clear; a NaN computed on an x86
# CPU (inf - inf, 0 / 0, inf / inf, e.g. an exp that overflowed) is the x86 default NaN, sign bit set. ARM
# computes positive NaNs, so there the sign cannot tell the two apart and the message names both causes.
_SIGNED_DEFAULT_NAN = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")

NEVER_WRITTEN_AT_ALL = ("no value of the output was ever written: the kernel never stores into its output ref. "
                        "Store with o_ref[...] = value; `o_ref = value` only rebinds the name (and writes nothing)")
NEVER_INITIALISED = ("the kernel reads {ref} (+=) before anything is stored there: it accumulates into memory it "
                     "never zeroed. Under TPU interpret mode memory nobody wrote reads as NaN, and NaN + x stays NaN "
                     "through every K step. Zero it on the first K step: @pl.when(pl.program_id(2) == 0) then "
                     "{store} = jnp.zeros_like(...)")
# Where the trace cannot be read: both causes of an output that is NaN everywhere, neither guessed.
ALL_NAN_UNKNOWN = ("nothing written into the output survived. Either the kernel never stores into o_ref (store with "
                   "o_ref[...] = value; `o_ref = value` only rebinds the name), or it accumulates (+=) into o_ref or "
                   "a scratch it never zeroed (under TPU interpret mode that memory reads as NaN): zero it under "
                   "@pl.when(pl.program_id(2) == 0)")
STORES_NEVER_RUN = ("the kernel does store into its output, yet nothing it stored survived: does a pl.when guard the "
                    "store with a condition that is never true (the last K step is pl.num_programs(2) - 1)?")
NEVER_WRITTEN = ("under TPU interpret mode memory that nobody wrote reads as NaN, so these blocks were never "
                 "written: does the grid cover every output block (n // block, not one short), is the "
                 "accumulator initialised, and does each index map point where you think?")
COMPUTED = ("the kernel computed these NaNs: they are not unwritten memory. Look for an inf meeting an inf or a "
            "zero (an exp that overflowed, then inf / inf; a variance of 0 without eps, then 0 * rsqrt(0)), 0 / 0, "
            "or the sqrt of a negative")


def _nan_cause(a: np.ndarray, nan: np.ndarray) -> str:
    negative = np.signbit(a[nan])
    if _SIGNED_DEFAULT_NAN and negative.any():
        return "computed"
    if np.isinf(a).any():
        return "computed"
    if not _SIGNED_DEFAULT_NAN:
        return "unknown"
    return "never-written-at-all" if nan.all() else "never-written"


def _all_nan_cause(kernel: Any) -> tuple[str, str]:
    """(cause, message) of an output that is NaN everywhere, from the traced kernel when there is one."""
    if kernel is None:
        return "never-written-unknown", ALL_NAN_UNKNOWN
    from pallas_course.kernel_trace import read_before_written, stores

    unread = read_before_written(kernel)
    if unread:
        ref = unread[0]
        store = "o_ref[...]" if ref == "o_ref" else ("acc_ref[...]" if "scratch" in ref else f"{ref}[...]")
        return "never-initialised", NEVER_INITIALISED.format(ref=ref, store=store)
    if not stores(kernel):
        return "never-written-at-all", NEVER_WRITTEN_AT_ALL
    if unread is None:
        return "never-written-unknown", ALL_NAN_UNKNOWN
    return "never-written-unknown", STORES_NEVER_RUN


def _nan_message(name: str, a: np.ndarray, nan: np.ndarray, blocks: list[tuple[int, ...]], shape: tuple[int, ...],
                 blk: tuple[int, ...], kernel: Any = None) -> str:
    where = "" if a.ndim < 2 else f"; {_blocks_phrase(blocks, shape, blk)}"
    head = (f"{name}: the value is NaN. " if a.ndim == 0 else f"{name}: {int(nan.sum())} of {a.size} values are NaN{where}. ")
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
            name: str = "output", atol: float | None = None, kernel: Any = None) -> Mismatch | None:
    """None when `actual` matches `expected` within `tol` (absolute and relative), else a diagnosis.

    `atol`, when given, replaces `tol` as the absolute part: |actual - expected| <= atol + tol * |expected|
    (for outputs far below 1, such as softmax probabilities, where an absolute `tol` would accept anything).
    `kernel`, the traced pallas_call that produced `actual` (kernel_trace.PallasCallInfo), tells an output never
    stored from an accumulator never zeroed when every value is NaN; without it the message names both.
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
    if a.ndim == 0:     # a scalar check: the value, no blocks
        return Mismatch("values", f"{name}: got {a.item():.6g}, expected {e.item():.6g} "
                                  f"(off by {float(err):.3g}, more than {tolerance})")
    worst = np.unravel_index(int(np.argmax(err)), a.shape)
    where = list(int(i) for i in worst)
    if a.ndim == 1 and a.size <= 16:     # a short list: name its entries, no blocks
        wrong = [int(i) for i in np.flatnonzero(bad)]
        return Mismatch("values", f"{name}: got {_short_list(a)}, expected {_short_list(e)}; entr"
                                  f"{'y' if len(wrong) == 1 else 'ies'} {', '.join(map(str, wrong))} differ{'s' * (len(wrong) == 1)} by more "
                                  f"than {tolerance}")
    blocks = _blocks_of(bad, blk)
    return Mismatch("values", (
        f"{name}: {int(bad.sum())} of {a.size} values differ by more than {tolerance}; the largest error is "
        f"{float(err[worst]):.3g} at {where} (got {a[worst]:.6g}, expected {e[worst]:.6g}); "
        f"{_blocks_phrase(blocks, a_shape, blk)}"))


def _short_list(v: np.ndarray) -> str:
    return "[" + ", ".join(f"{float(x):.6g}" for x in v) + "]"


def explained(mismatch: Mismatch, hint: str | None) -> str:
    """What a student reads for a mismatch, with a rule's diagnosis (`hint`, None when it names no cause) first.
    NaNs never written (or never zeroed) keep compare's own text: an overflow or eps hint would name the wrong
    cause; computed NaNs get the hint instead of compare's generic text; other mismatches get both."""
    if not hint and mismatch.kind == "values":     # no cause named: say so rather than guess
        return (f"{mismatch.message}; no usual mistake gives these values (the cause is not one this check "
                "knows): start from the first wrong block")
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
    thunk = actual if callable(actual) else None
    if thunk is not None:
        try:
            actual = _run_under_course_mode(thunk)
        except CheckFailure:
            raise
        except Exception as exc:   # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"{name}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw = explanation.raw
            failure.kind = explanation.kind
            raise failure from None
        _refuse_unlowerable(name, thunk)
    mismatch = compare(actual, expected, tol=tol, block=block, name=name, atol=atol)
    if mismatch is not None and mismatch.cause == "never-written-unknown" and thunk is not None:
        mismatch = compare(actual, expected, tol=tol, block=block, name=name, atol=atol, kernel=_one_call(thunk))
    if mismatch is not None:
        named = _suspect(actual, suspects, tol, atol) if mismatch.kind in ("values", "nan") else None
        message = mismatch.message if named is None else f"{name}: this is what {named} gives. {mismatch.message}"
        failure = CheckFailure(message)
        failure.kind = mismatch.kind if named is None else "suspect"
        raise failure
    print(f"✓ {name}: matches (max error {max_error(actual, expected):.3g}, {tolerance_phrase(tol, atol)}), "
          f"shape {tuple(actual.shape)} {np.dtype(actual.dtype)}, on this input")


def _one_call(thunk: Callable[[], Any]) -> Any:
    """The one pallas_call `thunk` launches, traced (nothing runs), or None."""
    from pallas_course.kernel_trace import trace

    try:
        calls = trace(thunk).pallas_calls
    except Exception:   # noqa: BLE001 - it ran a moment ago; without a trace the message names both causes
        return None
    return calls[0] if len(calls) == 1 else None


def _refuse_unlowerable(name: str, thunk: Callable[[], Any]) -> None:
    """The grade compiles each kernel for a TPU (autograder.judge.compile_rule); what the TPU lowering has no rule for
    (erfc from gelu(approximate=False), sort, cumsum) fails there, so it fails here too, in the same words,
    read off the traced kernel (no libtpu needed). Interpret mode alone would run it and print ✓."""
    from pallas_course.errors import unlowered_in
    from pallas_course.kernel_trace import trace

    try:
        calls = trace(thunk).pallas_calls
    except Exception:  # noqa: BLE001 - it just ran; a trace that fails now says nothing about lowering
        return
    for pc in calls:
        prim = unlowered_in(pc.kernel_primitives())
        if prim is not None:
            explained = explain(NotImplementedError(f"Unimplemented primitive in Pallas TPU lowering for tc: {prim}"),
                                locate=False)
            failure = CheckFailure(f"{name}: {explained.summary.removeprefix('✗ ')}")
            failure.kind = explained.kind
            raise failure


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


# ------------------------------------------------------------------------------------------------------------
# LAB·1.4 (pipelining): the course's models of one matmul step and its VMEM budget read off a matmul
# (YourMatmul; the arithmetic is pallas_course.cost_model's), and the rules the grade applies to
# smallest_fed_block, largest_square_block and choose_blocks. One copy, used by the notebook's
# visible checks (check_fed_block, check_budget_line, check_block_choice) and by the grader (autograder.labs.lab_1_4),
# so a visible check and the hidden test say the same thing in the same words. No number is typed in: a traced
# model matmul answers (schedule, its dot, the legality model) and every chip constant comes from course.yml.

BLOCK_STEP = 128          # block sizes the lab searches: multiples of the 128-lane width
SEARCH_LIMIT = 8192       # ... up to this size (the notebook's docstrings say the same)
# choose_blocks keeps its working set within this fraction of the default scoped VMEM limit: the compiler needs
# VMEM of its own beyond the pipeline buffers (for bf16 matmuls, seen with libtpu 0.0.42.1: up to about one
# float32 (bm, bn) block), so a choice that fills the limit fails to compile.
VMEM_HEADROOM = 0.75

# The cases: the grade runs exactly these (autograder.labs.lab_1_4 imports them) and the notebook's visible checks
# run every one of them, so a helper that loses points fails its check cell first, on the same case, in the same
# words. The grade's only extra is pipeline_off's fresh random inputs.
FED_BLOCK_CASES: tuple[tuple[str, str], ...] = (
    ("bfloat16", "v4"), ("bfloat16", "v5e"), ("bfloat16", "v5p"), ("bfloat16", "v6e"), ("bfloat16", "v7x"),
    ("float32", "v5e"))
BUDGET_LINE_CASES: tuple[tuple[str, str, int], ...] = (
    ("float32", "v5e", 2), ("bfloat16", "v5e", 2), ("float32", "v6e", 2), ("bfloat16", "v6e", 2), ("float32", "v5e", 1))
# (m, k, n, bm, bn, bk): the matmul switched off at a square grid of square blocks and a non-square one of
# rectangular blocks
PIPELINE_OFF_CASES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (256, 512, 256, 128, 128, 128), (128, 512, 384, 64, 128, 256))
# (bm, bn, bk, dtype, chip): both dtypes, square and rectangular blocks, chips of one TensorCore and of two
STEP_CASES: tuple[tuple[int, int, int, str, str], ...] = (
    (128, 128, 128, "bfloat16", "v5e"), (512, 1024, 1024, "bfloat16", "v5e"), (256, 512, 128, "float32", "v6e"),
    (128, 256, 512, "bfloat16", "v4"), (1024, 128, 256, "bfloat16", "v5p"))
# (bm, bn, bk, dtype, buffers, acc_scratch): both dtypes, one and two buffers, each with and without the f32
# accumulator (the scratch with 2 buffers: one copy of it, whatever the buffer count)
WORKING_SET_CASES: tuple[tuple[int, int, int, str, int, bool], ...] = (
    (128, 128, 128, "float32", 2, False), (512, 256, 1024, "bfloat16", 2, False), (256, 512, 128, "bfloat16", 1, False),
    (1024, 1024, 1024, "float32", 2, True), (128, 256, 512, "bfloat16", 1, True))
# (m, n, k, dtype, chip): the large sizes on each Colab chip, f32, and a non-square product on a two-core chip
BLOCK_CHOICE_CASES: tuple[tuple[int, int, int, str, str], ...] = (
    (4096, 4096, 4096, "bfloat16", "v5e"), (4096, 4096, 4096, "bfloat16", "v6e"), (4096, 4096, 4096, "float32", "v5e"),
    (2048, 8192, 1024, "bfloat16", "v4"))


def visible_cases(test: str) -> tuple[tuple[Any, ...], ...]:
    """The cases the notebook's visible check of LAB·1.4's graded test `test` runs (each check_* below)."""
    return {"pipeline_off": PIPELINE_OFF_CASES, "step_time_model": STEP_CASES, "working_set": WORKING_SET_CASES,
            "fed_block": FED_BLOCK_CASES, "budget_line": BUDGET_LINE_CASES,
            "block_choice": BLOCK_CHOICE_CASES}.get(test, ())


def fed_block_label(dtype: Any, chip: str) -> str:
    return f"smallest_fed_block({dtype_name(dtype)}, {chip!r})"


def budget_line_label(dtype: Any, chip: str, buffers: int) -> str:
    return f"largest_square_block({dtype_name(dtype)}, {chip!r}, buffers={buffers})"


def pipeline_off_label(m: int, k: int, n: int, bm: int, bn: int, bk: int) -> str:
    return f"matmul_pipeline_off(a, b, bm={bm}, bn={bn}, bk={bk}) on ({m}, {k}) @ ({k}, {n})"


def pipeline_off_families(m: int, k: int, n: int, bm: int, bn: int, bk: int) -> frozenset[str]:
    from pallas_course.rules import grid_families

    return grid_families((m // bm, n // bn, k // bk), (bm, bn, bk))


def pipeline_off_problem(label: str, pc: Any, m: int, k: int, n: int, bm: int, bn: int, bk: int) -> str | None:
    """The matmul's grid (K innermost, not "parallel") and blocks, every BlockSpec single-buffered."""
    grid = (m // bm, n // bn, k // bk)
    if pc.grid != grid:
        return f"the grid of {label} is {pc.grid}, expected {grid}; keep the matmul's grid (m // bm, n // bn, k // bk), K innermost"
    semantics = tuple(str(s) for s in pc.dimension_semantics or ())
    if len(semantics) == 3 and "parallel" in semantics[2].lower():
        # Steps along K add into one C block: "parallel" lets a two-core chip run them on both cores at once
        # (a race), and TPU interpret mode runs a "parallel" axis in shuffled order (the init lands mid-run).
        return (f"{label} marks K, the grid axis it accumulates over, \"parallel\" (dimension_semantics={semantics}): "
                "its steps all add into the same C block, so they must run in order on one core; make K \"arbitrary\"")
    if len(pc.inputs) != 2 or len(pc.outputs) != 1:
        return (f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected the matmul's two "
                "in_specs (A, B) and one out_specs (C)")
    names = {"in[0]": "A's BlockSpec (in_specs[0])", "in[1]": "B's BlockSpec (in_specs[1])",
             "out[0]": "C's BlockSpec (out_specs)"}
    want_blocks = {"in[0]": (bm, bk), "in[1]": (bk, bn), "out[0]": (bm, bn)}
    for blk in pc.blocks:
        key = f"{blk.role}[{blk.position}]"
        if tuple(blk.block_shape) != want_blocks[key]:
            return (f"the block of {names[key]} in {label} is {tuple(blk.block_shape)}, expected {want_blocks[key]}; "
                    "switching the pipeline off changes the buffering, not the blocks")
        if blk.buffer_count != 1:
            has = ("no pipeline_mode, so it gets the default 2 buffers" if blk.buffer_count is None
                   else f"pipeline_mode=pl.Buffered({blk.buffer_count})")
            return (f"{names[key]} in {label} has {has}; with the pipeline off every BlockSpec, the output's too, "
                    "takes pipeline_mode=pl.Buffered(1)")
    return None


def step_label(bm: int, bn: int, bk: int, dtype: Any, chip: str) -> str:
    return f"step_times({bm}, {bn}, {bk}, {dtype_name(dtype)}, {chip!r})"


def working_set_label(bm: int, bn: int, bk: int, dtype: Any, buffers: int, acc_scratch: bool) -> str:
    return f"vmem_working_set({bm}, {bn}, {bk}, {dtype_name(dtype)}, buffers={buffers}, acc_scratch={acc_scratch})"


def step_families(bm: int, bn: int, bk: int, dtype: Any, chip: str) -> frozenset[str]:
    from pallas_course.chips import chip as chip_named

    cores = chip_named(chip).tensorcores_per_chip
    return frozenset({dtype_name(dtype), "square blocks" if bm == bn == bk else "rectangular blocks",
                      "one TensorCore per chip" if cores == 1 else "several TensorCores per chip"})


def working_set_families(bm: int, bn: int, bk: int, dtype: Any, buffers: int, acc_scratch: bool) -> frozenset[str]:
    return frozenset({dtype_name(dtype), f"{buffers} buffer{'s' * (buffers != 1)}",
                      "an f32 scratch accumulator" if acc_scratch else "no scratch"})


def block_choice_label(m: int, n: int, k: int, dtype: Any, chip: str) -> str:
    return f"choose_blocks({m}, {n}, {k}, {dtype_name(dtype)}, {chip!r})"


class YourMatmul:
    """The course's models read off the notebook's own `matmul` (the pasted LAB·1.2 one), as the step-time and
    working-set checks do: the schedule says what a steady step copies, its dot its FLOPs, the legality model
    its VMEM. It stands in for the student's step_times and vmem_working_set while another function is checked.

    Tracing per call would make a block search take seconds, so `matmul` is traced once per dtype, with bm, bn
    and bk set to sizes no other dimension has, and every other block size is that trace with its dimensions
    renamed (a traced block dimension that is none of them: traced at the asked sizes instead)."""

    BASE = (256, 384, 640)      # bm, bn, bk of the one trace: distinct, and none is 3 x another

    def __init__(self, matmul: Callable[..., Any]) -> None:
        self.matmul = matmul
        self._base: dict[str, Any] = {}
        self._exact: dict[tuple[Any, ...], Any] = {}

    def _trace(self, m: int, k: int, n: int, bm: int, bn: int, bk: int, dtype: str) -> Any:
        import jax

        from pallas_course.kernel_trace import trace

        key = (m, k, n, bm, bn, bk, dtype)
        if key not in self._exact:
            a, b = jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype)
            self._exact[key] = trace(self.matmul, a, b, bm=bm, bn=bn, bk=bk).pallas_calls[0]
        return self._exact[key]

    def info(self, bm: int, bn: int, bk: int, dtype: Any) -> Any:
        """The pallas_call of `matmul` on (bm, 3 bk) @ (3 bk, bn) with blocks (bm, bn, bk): grid (1, 1, 3)."""
        import dataclasses

        name = dtype_name(dtype)
        b_m, b_n, b_k = self.BASE
        if name not in self._base:
            self._base[name] = self._trace(b_m, 3 * b_k, b_n, b_m, b_n, b_k, name)
        base = self._base[name]
        sizes = {b_m: bm, b_n: bn, b_k: bk, 3 * b_k: 3 * bk}

        def renamed(shape: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(d if d is None else sizes[d] for d in shape)

        try:
            return dataclasses.replace(
                base,
                inputs=tuple(dataclasses.replace(x, array_shape=renamed(x.array_shape), block_shape=renamed(x.block_shape))
                             for x in base.inputs),
                outputs=tuple(dataclasses.replace(x, array_shape=renamed(x.array_shape), block_shape=renamed(x.block_shape))
                              for x in base.outputs),
                scratch=tuple((renamed(shape), dt, space) for shape, dt, space in base.scratch))
        except KeyError:
            return self._trace(bm, 3 * bk, bn, bm, bn, bk, name)

    def step_times(self, bm: int, bn: int, bk: int, dtype: Any, chip: str) -> tuple[float, float]:
        from pallas_course.cost_model import step_seconds

        moved, flops, _ = self.step_detail(bm, bn, bk, dtype)
        return step_seconds(moved, flops, chip)

    def step_detail(self, bm: int, bn: int, bk: int, dtype: Any) -> tuple[int, int, str]:
        """(bytes, FLOPs, what moves) of one steady step, read off the schedule and the dot of `matmul`."""
        from pallas_course.cost_model import dot_flops, steady_step

        info = self.info(bm, bn, bk, dtype)
        moved, what = steady_step(info)
        b_m, b_n, b_k = self.BASE       # the dot of the traced step, its (bm, bk) x (bk, bn) renamed like the blocks
        flops = dot_flops(self._base[dtype_name(dtype)].kernel_jaxpr) * (bm * bn * bk) // (b_m * b_n * b_k)
        return moved, flops, what

    def budget(self, bm: int, bn: int, bk: int, dtype: Any, chip: str, buffers: int = 2,
               acc_scratch: bool = False) -> Any:
        """The legality model's budget of `matmul` with these blocks; with `acc_scratch`, plus the f32 (bm, bn)
        scratch accumulator LAB·1.2's matmul_acc adds (one copy: scratch is not pipelined)."""
        import dataclasses

        from pallas_course.legality import check_pallas_call

        info = self.info(bm, bn, bk, dtype)
        if acc_scratch:
            info = dataclasses.replace(info, scratch=info.scratch + (((bm, bn), np.dtype(np.float32), "vmem"),))
        return check_pallas_call(info, chip, buffers=buffers).budget

    def working_set(self, bm: int, bn: int, bk: int, dtype: Any, buffers: int = 2, acc_scratch: bool = False) -> int:
        return self.budget(bm, bn, bk, dtype, "v5e", buffers, acc_scratch).working_set_bytes

    def report(self, m: int, n: int, k: int, bm: int, bn: int, bk: int, dtype: Any, chip: str) -> Any:
        from pallas_course.legality import check_pallas_call

        return check_pallas_call(self._trace(m, k, n, bm, bn, bk, dtype_name(dtype)), chip)


def _ns(seconds: float) -> str:
    return f"{seconds * 1e9:.4g} ns"


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def budget_entries(budget: Any) -> str:
    return ", ".join(f"{e.name} {e.bytes_per_buffer:,} B x {e.buffers}" for e in budget.entries)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value)


def _close(got: float, want: float, rel: float = 1e-6) -> bool:
    return abs(got - want) <= rel * abs(want)


StepDetail = Callable[[int, int, int, Any], "tuple[int, int, str]"]     # -> (bytes, FLOPs, what moves)


def step_time_problem(got: Any, bm: int, bn: int, bk: int, dtype: Any, chip: str, detail: StepDetail) -> str | None:
    """(DMA s, MXU s) of one steady step: the bytes the schedule streams over HBM B/s, the dot's FLOPs over bf16
    FLOP/s, course.yml's per-chip numbers."""
    from pallas_course.chips import chip as chip_named
    from pallas_course.cost_model import step_seconds

    if not isinstance(got, (tuple, list)) or len(got) != 2 or any(_number(v) is None for v in got):
        return f"returned {got!r}; expected a pair of numbers (dma_s, compute_s)"
    dma, mxu = (float(v) for v in got)
    c = chip_named(chip)
    moved, flops, what = detail(bm, bn, bk, dtype)
    want_dma, want_mxu = step_seconds(moved, flops, c)
    if _close(dma, want_dma) and _close(mxu, want_mxu):
        return None
    if _close(dma, want_mxu) and _close(mxu, want_dma):
        return "returned (compute, DMA); the order is (dma_s, compute_s)"
    cores = c.tensorcores_per_chip
    units = {1e3: "milliseconds", 1e6: "microseconds", 1e9: "nanoseconds"}
    for factor, unit in units.items():
        if (_close(dma, want_dma * factor) or _close(mxu, want_mxu * factor)) and not (
                _close(dma, want_dma) and _close(mxu, want_mxu)):
            return (f"gives ({dma:.4g}, {mxu:.4g}), {factor:.0e} times the step's times in seconds: it returns "
                    f"{unit}; return seconds, bytes / (B/s) and FLOPs / (FLOP/s) as they stand "
                    f"(expected ({want_dma:.4g}, {want_mxu:.4g}) s)")
    if cores > 1 and (_close(dma, cores * want_dma) or _close(mxu, cores * want_mxu)):
        return (f"gives DMA {_ns(dma)} and MXU {_ns(mxu)}, expected {_ns(want_dma)} and {_ns(want_mxu)}: {cores} times "
                f"too long, as with one TensorCore's share of {chip}'s bandwidth and FLOP/s ({chip} has {cores} "
                "TensorCores per chip); the lab's step times use course.yml's per-chip numbers as they stand, "
                "hbm_bytes_per_s and bf16_flops_per_s")
    if not _close(dma, want_dma):
        got_bytes = dma * c.hbm_bytes_per_s
        size = np.dtype(dtype_name(dtype)).itemsize
        other = next((s for s in (1, 2, 4, 8) if s != size and _close(got_bytes, moved // size * s)), None)
        hint = (f"; that is {other} bytes per element, but {dtype_name(dtype)} has {size}: take the element size "
                "from the dtype argument, np.dtype(dtype).itemsize") if other is not None else ""
        return (f"gives DMA {_ns(dma)} (= {got_bytes:,.0f} bytes at {chip}'s {c.hbm_bytes_per_s:.3g} B/s), expected "
                f"{_ns(want_dma)}: a steady step streams {what} of {dtype_name(dtype)}, {moved:,} bytes; C stays in "
                f"VMEM across K{hint}")
    hint = ""
    if dtype_name(dtype) != "bfloat16" and _close(mxu, 2 * want_mxu):
        hint = (f"; twice the expected time for {dtype_name(dtype)}, as with half the bf16 peak: the lab's convention "
                "is the bf16 peak for every dtype (course.yml's bf16_flops_per_s, one number per chip), so a "
                f"{dtype_name(dtype)} step is timed at it too")
    return (f"gives MXU {_ns(mxu)} (= {mxu * c.bf16_flops_per_s:,.0f} FLOPs at {chip}'s {c.bf16_flops_per_s:.3g} bf16 "
            f"FLOP/s), expected {_ns(want_mxu)}: the step's dot is 2·bm·bn·bk = {flops:,} FLOPs (a multiply and an add "
            f"each){hint}")


def working_set_problem(got: Any, bm: int, bn: int, bk: int, dtype: Any, buffers: int, acc_scratch: bool,
                        budget: Any) -> str | None:
    """Blocks x buffers x bytes for A, B and C, plus one f32 (bm, bn) accumulator when asked: the legality model."""
    value = _number(got)
    if value is None:
        return f"returned {got!r} ({type(got).__name__}); expected a number of bytes"
    want = budget.working_set_bytes
    if value == want:
        return None
    hint = " (the scratch accumulator is not pipelined: one copy)"
    size = np.dtype(dtype_name(dtype)).itemsize
    if acc_scratch and size != 4 and value == want - bm * bn * 4 + bm * bn * size:
        hint = (f": the accumulator is counted in {dtype_name(dtype)}, but it is float32 whatever the inputs "
                f"(bm·bn·4 bytes, one copy: np.dtype(np.float32).itemsize, not np.dtype(dtype).itemsize)")
    return f"is {value:,.0f} bytes, expected {want:,}: {budget_entries(budget)}{hint}"


# The rules. Each takes the answer and the case, and the models it judges by (the grade passes its own traced
# model matmul; the notebook's checks pass YourMatmul), and returns None or what is wrong, after the call's label.
StepModel = Callable[[int, int, int, Any, str], "tuple[float, float]"]
BudgetModel = Callable[[int, int, int, Any, str, int], Any]            # -> legality.VmemBudget
ReportModel = Callable[[int, int, int, int, int, int, Any, str], Any]  # -> legality.PallasCallReport


def fed_block_problem(got: Any, dtype: Any, chip: str, step_times: StepModel) -> str | None:
    """The smallest fed square block: fed at `got` (compute >= DMA) and starved one step below; None if no
    square block up to SEARCH_LIMIT is fed."""
    def fed(b: int) -> bool:
        dma, mxu = step_times(b, b, b, dtype, chip)
        return mxu >= dma

    if got is None:
        first = next((b for b in range(BLOCK_STEP, SEARCH_LIMIT + 1, BLOCK_STEP) if fed(b)), None)
        return None if first is None else f"returned None, but a ({first}, {first}, {first}) step is fed"
    if not _is_int(got) or got % BLOCK_STEP or not BLOCK_STEP <= got <= SEARCH_LIMIT:
        return (f"returned {got!r}; expected the block size b (an int among {BLOCK_STEP}, {2 * BLOCK_STEP}, ..., "
                f"{SEARCH_LIMIT}), or None")
    b = int(got)
    dma, mxu = step_times(b, b, b, dtype, chip)
    if dma > mxu:
        return f"is {b}; at {b} a step copies for {_ns(dma)} and computes for {_ns(mxu)}, so the MXU still waits"
    if b > BLOCK_STEP and fed(b - BLOCK_STEP):
        dma, mxu = step_times(b - BLOCK_STEP, b - BLOCK_STEP, b - BLOCK_STEP, dtype, chip)
        return (f"is {b}; the MXU is fed there, but so is {b - BLOCK_STEP}, which is smaller (a step copies for "
                f"{_ns(dma)} and computes for {_ns(mxu)})")
    return None


def budget_line_problem(got: Any, dtype: Any, chip: str, buffers: int, budget: BudgetModel) -> str | None:
    """The largest square block within the default scoped limit: fits at `got` and not one step above (or `got`
    is SEARCH_LIMIT); None if not even BLOCK_STEP fits."""
    if got is None:
        at = budget(BLOCK_STEP, BLOCK_STEP, BLOCK_STEP, dtype, chip, buffers)
        return None if not at.fits_limit else f"returned None, but {BLOCK_STEP} fits ({at.verdict()})"
    if not _is_int(got) or got % BLOCK_STEP or not BLOCK_STEP <= got <= SEARCH_LIMIT:
        return (f"returned {got!r}; expected the block size b (an int among {BLOCK_STEP}, {2 * BLOCK_STEP}, ..., "
                f"{SEARCH_LIMIT}), or None")
    b = int(got)
    at = budget(b, b, b, dtype, chip, buffers)
    if not at.fits_limit:
        return f"is {b}; at {b}: {at.verdict()}"
    if b < SEARCH_LIMIT:
        above = budget(b + BLOCK_STEP, b + BLOCK_STEP, b + BLOCK_STEP, dtype, chip, buffers)
        if above.fits_limit:
            return f"is {b}; {b} fits ({at.verdict()}), but so does {b + BLOCK_STEP} ({above.verdict()})"
    return None


def block_choice_problem(got: Any, m: int, n: int, k: int, dtype: Any, chip: str, step_times: StepModel,
                         report: ReportModel) -> str | None:
    """(bm, bn, bk) divide the shapes, are legal BlockSpecs, feed the MXU and use at most VMEM_HEADROOM of the
    default scoped limit."""
    from pallas_course.legality import fmt_mib

    if not isinstance(got, (tuple, list)) or len(got) != 3 or not all(_is_int(v) for v in got):
        return f"returned {got!r}; expected three ints (bm, bn, bk)"
    bm, bn, bk = (int(v) for v in got)
    for name, block, dim_name, dim in (("bm", bm, "m", m), ("bn", bn, "n", n), ("bk", bk, "k", k)):
        if block <= 0 or dim % block:
            return (f"chose {name}={block}, which does not divide {dim_name}={dim}; the grid {dim_name} // {name} "
                    "would leave part of the matrix out")
    legality = report(m, n, k, bm, bn, bk, dtype, chip)
    if not legality.legal:
        return f"chose ({bm}, {bn}, {bk}), which is not a legal BlockSpec on {chip}: {legality.violations[0]}"
    dma, mxu = step_times(bm, bn, bk, dtype, chip)
    if mxu < dma:
        return (f"chose ({bm}, {bn}, {bk}), which starves the MXU: a step copies for {_ns(dma)} and computes for "
                f"{_ns(mxu)}; grow bm and bn (bk does not change the ratio)")
    budget = legality.budget
    chosen = (f"chose ({bm}, {bn}, {bk}), whose working set is {fmt_mib(budget.working_set_bytes)} "
              f"({budget_entries(budget)})")
    if not budget.fits_limit:
        return f"{chosen}: {budget.verdict()}"
    if budget.working_set_bytes > VMEM_HEADROOM * budget.default_scoped_vmem_bytes:
        return (f"{chosen}: inside {chip}'s {fmt_mib(budget.default_scoped_vmem_bytes)} default scoped limit but "
                f"above {VMEM_HEADROOM:.0%} of it, which leaves the compiler no headroom for its own temporaries; "
                "it would likely fail to compile")
    return None


@contextlib.contextmanager
def course_helpers(fn: Callable[..., Any], helpers: Mapping[str, Callable[..., Any]]) -> Iterator[None]:
    """While `fn` runs: each helper named in `helpers` that `fn`'s module (the notebook) defines is the course's
    model instead (the grade does the same with reference values), so `fn` is checked on its own."""
    namespace = getattr(fn, "__globals__", {})
    saved = {n: namespace[n] for n in helpers if callable(namespace.get(n))}
    try:
        namespace.update({n: helpers[n] for n in saved})
        yield
    finally:
        namespace.update(saved)


def _check_cases(name: str, fn: Callable[..., Any], cases: Sequence[tuple[Any, ...]], label: Callable[..., str],
                 problem: Callable[..., str | None], helpers: Mapping[str, Callable[..., Any]],
                 call: Callable[..., Any]) -> None:
    """Each case: `call(fn, *case)` with the course's `helpers`, then the grade's rule, `problem(got, *case)`."""
    import ml_dtypes  # noqa: F401 - the cases name bfloat16

    names = list(helpers)
    alone = (f"checked on its own: the course's {' and '.join(names)} (read off your matmul) stand"
             f"{'s' if len(names) == 1 else ''} in for yours here, as in the grade" if names
             else "judged by the course's models of your matmul, as the grade judges it by its own")
    for case in cases:
        where = label(*case)
        try:
            with course_helpers(fn, helpers):
                got = call(fn, *case)
        except Exception as exc:   # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"{name}: {where}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw, failure.kind = explanation.raw, explanation.kind
            raise failure from None
        wrong = problem(got, *case)
        if wrong is not None:
            failure = CheckFailure(f"{name}: {where} {wrong}\n({alone})")
            failure.kind = "values"
            raise failure
    print(f"✓ {name}: right in {len(cases)} cases ({'; '.join(label(*c) for c in cases)}), {alone}; {PASSED}")


def check_fed_block(smallest_fed_block: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's fed_block rule on the visible cases; your matmul's modelled step times stand in for step_times."""
    model = YourMatmul(matmul)
    _check_cases("smallest_fed_block", smallest_fed_block, FED_BLOCK_CASES, fed_block_label,
                 lambda got, dtype, chip: fed_block_problem(got, dtype, chip, model.step_times),
                 {"step_times": model.step_times}, lambda fn, dtype, chip: fn(np.dtype(dtype), chip))


def check_budget_line(largest_square_block: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's budget_line rule on the visible cases; your matmul's modelled working set stands in."""
    model = YourMatmul(matmul)
    _check_cases("largest_square_block", largest_square_block, BUDGET_LINE_CASES, budget_line_label,
                 lambda got, dtype, chip, buffers: budget_line_problem(got, dtype, chip, buffers, model.budget),
                 {"vmem_working_set": model.working_set},
                 lambda fn, dtype, chip, buffers: fn(np.dtype(dtype), chip, buffers=buffers))


def check_block_choice(choose_blocks: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's block_choice rules on the visible cases; your matmul's models stand in for both helpers."""
    model = YourMatmul(matmul)
    _check_cases("choose_blocks", choose_blocks, BLOCK_CHOICE_CASES, block_choice_label,
                 lambda got, m, n, k, dtype, chip: block_choice_problem(got, m, n, k, dtype, chip, model.step_times,
                                                                        model.report),
                 {"step_times": model.step_times, "vmem_working_set": model.working_set},
                 lambda fn, m, n, k, dtype, chip: fn(m, n, k, np.dtype(dtype), chip))


def check_step_times(step_times: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's step_time_model rule on the visible cases, judged by the schedule and dot of your matmul."""
    model = YourMatmul(matmul)
    _check_cases("step_times", step_times, STEP_CASES, step_label,
                 lambda got, bm, bn, bk, dtype, chip: step_time_problem(got, bm, bn, bk, dtype, chip, model.step_detail),
                 {}, lambda fn, bm, bn, bk, dtype, chip: fn(bm, bn, bk, np.dtype(dtype), chip))


def check_working_set(vmem_working_set: Callable[..., Any], matmul: Callable[..., Any]) -> None:
    """The grade's working_set rule on the visible cases, judged by the legality model of your matmul (plus the
    f32 scratch accumulator where the case asks for one)."""
    model = YourMatmul(matmul)
    _check_cases("vmem_working_set", vmem_working_set, WORKING_SET_CASES, working_set_label,
                 lambda got, bm, bn, bk, dtype, buffers, acc: working_set_problem(
                     got, bm, bn, bk, dtype, buffers, acc, model.budget(bm, bn, bk, dtype, "v5e", buffers, acc)),
                 {}, lambda fn, bm, bn, bk, dtype, buffers, acc: fn(bm, bn, bk, np.dtype(dtype), buffers=buffers,
                                                                   acc_scratch=acc))


def check_pipeline_off(matmul_pipeline_off: Callable[..., Any]) -> None:
    """The grade's pipeline_off rules on the visible cases: the trace (one pallas_call, the matmul's grid and blocks,
    pl.Buffered(1) everywhere), then the values against a float64 product, under the grade's interpret mode."""
    import jax
    import jax.numpy as jnp

    from pallas_course import graded_compile
    from pallas_course.kernel_trace import trace
    from pallas_course.rules import MATMUL_F32, one_kernel_problem

    def fail(message: str, kind: str, raw: str = "") -> CheckFailure:
        failure = CheckFailure(f"matmul_pipeline_off: {message}")
        failure.kind, failure.raw = kind, raw
        return failure

    compiled: list[str] = []
    graded_compile.prefetch([(functools.partial(matmul_pipeline_off, bm=bm, bn=bn, bk=bk),
                              [jax.ShapeDtypeStruct((m, k), jnp.float32), jax.ShapeDtypeStruct((k, n), jnp.float32)],
                              graded_compile.rule_chips(["pipeline_off"]))
                             for m, k, n, bm, bn, bk in PIPELINE_OFF_CASES])
    for m, k, n, bm, bn, bk in PIPELINE_OFF_CASES:
        label = pipeline_off_label(m, k, n, bm, bn, bk)
        rng = np.random.default_rng([20, m, k, n])
        a = jnp.asarray(rng.standard_normal((m, k)).astype(np.float32))
        b = jnp.asarray(rng.standard_normal((k, n)).astype(np.float32))
        try:
            t = trace(matmul_pipeline_off, a, b, bm=bm, bn=bn, bk=bk)
            problem = one_kernel_problem(label, t) or pipeline_off_problem(label, t.pallas_calls[0], m, k, n, bm, bn, bk)
            if problem:
                raise fail(problem, "structure")
            out = _run_under_course_mode(lambda: matmul_pipeline_off(a, b, bm=bm, bn=bn, bk=bk))
        except CheckFailure:
            raise
        except Exception as exc:   # noqa: BLE001 - any error in student code is a failed check, explained
            e = explain(exc)
            raise fail(f"{label}: {e.summary.removeprefix('✗ ')}", e.kind, e.raw) from None
        # It must compile (course.yml's compile rule), as graded: after the run, before the values.
        chips = graded_compile.rule_chips(["pipeline_off"])
        result = graded_compile.compile_case(functools.partial(matmul_pipeline_off, bm=bm, bn=bn, bk=bk),
                                             [jax.ShapeDtypeStruct(a.shape, a.dtype),
                                                jax.ShapeDtypeStruct(b.shape, b.dtype)], chips)
        if result.rejected:
            raise fail(graded_compile.refusal(label, result, t), "compile")
        if result.not_here:
            graded_compile.say_once(chips, result.not_here)
        compiled.append(graded_compile.phrase(result))
        expected = (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)
        mismatch = compare(out, expected, block=(bm, bn), name=label, kernel=t.pallas_calls[0], **MATMUL_F32)
        if mismatch is not None:
            raise fail(explained(mismatch, None), mismatch.kind)
    done = "; ".join(dict.fromkeys(c for c in compiled if c))
    print(f"✓ matmul_pipeline_off: {len(PIPELINE_OFF_CASES)} cases as graded "
          f"({'; '.join(pipeline_off_label(*c) for c in PIPELINE_OFF_CASES)}){'; ' + done if done else ''}; {PASSED}")
