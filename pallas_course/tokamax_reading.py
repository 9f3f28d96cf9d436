"""LAB·1.5's reading: Tokamax's linear + softmax cross-entropy forward kernel, from the installed package.

The code is read at run time with `inspect` from the pinned tokamax release: the installed package in the course
repository, the two files the release copies verbatim into the wheel for students (pallas_course.vendored: tokamax
and what it pulls in stay out of the student install); its line numbers are the package file's. The walk data (`pallas_course.walks`, id
`tokamax-lsce-forward`, `graded: true`) holds the notes. The instructor's marks are not in this package:
they are LAB·1.5's key, grader-side only (read by autograder.labs.lab_1_5), so nothing here can tell a
student whether a mark is right.

What a notebook calls:

    show()                  the reading, numbered, with an empty margin where a mark is due
    show(marks)             the same with the student's margin: A (algorithm), S (schedule), · (not yet)
    check_form(marks)       the check before grading: how many lines are marked per category, which
                            are not, and anything not understood (✓ when complete); never right or wrong
    read_margin(marks)      the marks as {line: "algorithm" | "schedule"} plus what was not understood
    forward(), reference()  tokamax's kernel wrapper and its reference.py function
    check_mask(masked_logits)  the fix in code, alone: each mistake the lab names (0 for -inf, no block offset,
                            the iota along the rows, <= for <) named with its cause, or ✓
    forward_with_mask(fn)   tokamax's forward with line 209 taking the logsumexp of fn's masked logits
    on_this_machine(INTERP) where tokamax's pallas_call runs (it takes no interpret=, so force the mode)
    example_inputs(...)     x, labels, w of a given size, with logits of order 1

A student's margin is a dict from a line number, or a `range` of line numbers, to "algorithm" or
"schedule" ("algo", "alg", "a" and "sched", "sch", "s" do too, in any case). Later entries win over earlier ones, and a single line number wins over
any range that contains it, so `{range(228, 341): "schedule", 246: "algorithm"}` means what it says.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from pallas_course.walks import Walk, format_ranges, installed_version, walk

PACKAGE = "tokamax"
PIN = "0.0.12"  # requirements.txt pins the same release; so does the grader's key
WALK_ID = "tokamax-lsce-forward"
_OPS = "tokamax._src.ops.linear_softmax_cross_entropy_loss"
KERNEL, REFERENCE = f"{_OPS}.pallas_mosaic_tpu_kernel", f"{_OPS}.reference"
# The files the reading reads and runs; they import only jax and jaxtyping, so `course release` ships them in the
# wheel (pallas_course.vendored) and a student installs no tokamax.
VENDORED = (KERNEL, REFERENCE)
# What a margin may say (case and surrounding blanks ignored): the words, and the usual abbreviations.
_ALIASES = {
    "algorithm": "algorithm",
    "algo": "algorithm",
    "alg": "algorithm",
    "a": "algorithm",
    "schedule": "schedule",
    "sched": "schedule",
    "sch": "schedule",
    "s": "schedule",
}


class TokamaxMissing(ModuleNotFoundError):
    """tokamax is not installed, so there is nothing to read."""


def require() -> str:
    """The installed tokamax version; TokamaxMissing with the fix when there is none."""
    version = installed_version(PACKAGE)
    if version is None:
        raise TokamaxMissing(
            f"tokamax is not installed: this reading needs tokamax=={PIN} "
            f"(`pip install tokamax=={PIN}`, or `pip install -r requirements.txt`), "
            "then restart the kernel"
        )
    return version


def reading() -> Walk:
    """The reading as a walk: lines from the installed tokamax, notes from the walk data; no marks."""
    require()
    return walk(WALK_ID)


@dataclass(frozen=True)
class Margin:
    marks: dict[int, str]  # line -> "algorithm" | "schedule", code lines only
    problems: list[str] = field(default_factory=list)  # entries that were not understood (ignored)
    # code lines whose own entry (the one that would mark them: a line's over a range's, a later range's over an
    # earlier one's) is no mark, e.g. "compute": line -> that value as written. Such a line is not marked, and
    # feedback says why, rather than letting a broader entry's mark stand in for it.
    not_a_mark: dict[int, str] = field(default_factory=dict)


class _NotAMark(str):
    """An entry's value that is no mark, kept where it applies so it covers its lines as a mark would."""


def _mark(value: Any) -> str | None:
    return _ALIASES.get(value.strip().lower()) if isinstance(value, str) else None


def read_margin(marks: Any, w: Walk | None = None) -> Margin:
    """A student's margin as {code line: mark}; entries that can't be read go to `problems`."""
    w = w or reading()
    if not isinstance(marks, Mapping):
        return Margin(
            {}, [f"marks should be a dict from line numbers to 'algorithm' or 'schedule', got {type(marks).__name__}"]
        )
    code = set(w.code_lines())
    problems: list[str] = []
    ranged: dict[int, str] = {}
    single: dict[int, str] = {}
    for key, value in marks.items():
        mark: str | None = _mark(value)
        if mark is None:
            problems.append(f"{key!r}: {value!r} is not a mark; use 'algorithm' or 'schedule'")
            if not isinstance(key, (int, range)) or isinstance(key, bool):
                continue
            mark = _NotAMark(_cap_repr(value))
        if isinstance(key, range):
            # the reading's lines in it, never list(key): range(0, 10**18) is one honest-looking entry
            lines, into = [n for n in range(w.first_line, w.last_line + 1) if n in key], ranged
            ends = sorted((key[0], key[-1])) if key else []  # bool(), not len(): len overflows past 2**63
            outside = bool(ends) and (ends[0] < w.first_line or ends[1] > w.last_line)
            what = f"lines outside {w.first_line}-{w.last_line}" if key else "an empty range: nothing"
        elif isinstance(key, int) and not isinstance(key, bool):
            lines, into = [key], single
            outside, what = not w.first_line <= key <= w.last_line, str(key)
        else:
            problems.append(f"{key!r}: a key is a line number or a range of line numbers, got {type(key).__name__}")
            continue
        if (outside or not lines) and not isinstance(mark, _NotAMark):
            problems.append(f"{key!r}: the reading has lines {w.first_line}-{w.last_line}; {what} ignored")
        for n in lines:
            if n in code:
                into[n] = mark
    merged = ranged | single
    return Margin(
        {n: m for n, m in merged.items() if not isinstance(m, _NotAMark)},
        problems,
        {n: str(m) for n, m in merged.items() if isinstance(m, _NotAMark)},
    )


def _cap_repr(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def not_a_mark_lines(margin: Margin, lines: Any = None) -> dict[str, list[int]]:
    """{value that is no mark: the code lines (of `lines`, when given) it covers}, in line order."""
    found: dict[str, list[int]] = {}
    for n, value in sorted(margin.not_a_mark.items()):
        if lines is None or n in lines:
            found.setdefault(value, []).append(n)
    return found


def show(marks: Any = None, *, lines: range | None = None) -> None:
    """Print the reading with line numbers and a margin (the student's marks when given)."""
    w = reading()
    margin = read_margin(marks, w).marks if marks is not None else {}
    code = set(w.code_lines())
    print(f"{w.origin} · source hash {w.source_hash}")
    width = len(str(w.last_line))
    for n, text in w.numbered():
        if lines is not None and n not in lines:
            continue
        m = {"algorithm": "A", "schedule": "S"}.get(margin.get(n, ""), "·" if n in code else " ")
        print(f"{n:>{width}} {m} │ {text}")


def check_form(marks: Any) -> None:
    """The check before grading: the margin's form, never whether a mark is right (this package has no key).
    Passes (one ✓ line) when every code line has a mark, every entry is understood and both kinds of mark are
    used; else raises CheckFailure saying which lines are unmarked, which entries were not understood, and the
    counts per category marked."""
    from pallas_course.compare import CheckFailure

    w = reading()
    margin = read_margin(marks, w)
    code = w.code_lines()
    unmarked = [n for n in code if n not in margin.marks and n not in margin.not_a_mark]
    counts = {m: sum(1 for v in margin.marks.values() if v == m) for m in ("algorithm", "schedule")}
    head = (
        f"{len(margin.marks)} of {len(code)} code lines marked "
        f"({counts['algorithm']} algorithm, {counts['schedule']} schedule)"
    )
    wrong = [f"not marked yet: {format_ranges(unmarked)}"] if unmarked else []
    wrong += [f"not understood: {p}" for p in margin.problems]
    wrong += [
        f"marked {value}, which is not a mark (so not marked): {format_ranges(lines)}"
        for value, lines in not_a_mark_lines(margin).items()
    ]
    one = [m for m, c in counts.items() if c == 0]
    if margin.marks and len(one) == 1:
        wrong.append(
            f"no line is marked {one[0]}: the reading has lines of both kinds, and the credit is the smaller "
            "of the two shares (algorithm lines marked algorithm, schedule lines marked schedule), so a "
            "margin of one kind earns 0"
        )
    read_only = (
        "this check reads the form of your margin only; whether a mark is right is decided by the grade, "
        "against the instructor's key, which this notebook does not have"
    )
    if not margin.marks and not margin.problems:
        wrong = [f"nothing is marked yet: the margin is still the stub; mark the lines {w.first_line}-{w.last_line}"]
    if wrong:
        failure = CheckFailure("marks: " + head + "\n" + "\n".join(wrong) + f"\n({read_only})")
        failure.kind = "form"
        raise failure
    print(
        f"✓ marks: every code line has a mark: {head}; every entry read ('algorithm'/'algo'/'alg'/'a', "
        f"'schedule'/'sched'/'sch'/'s'); {read_only}"
    )


def forward() -> Any:
    """tokamax's forward: linear_softmax_cross_entropy_loss_fwd_pallas_mosaic_tpu (the reading's last function)."""
    require()
    from pallas_course import vendored

    return vendored.import_module(KERNEL).linear_softmax_cross_entropy_loss_fwd_pallas_mosaic_tpu


# The ragged-vocabulary bug: this line takes the logsumexp of the whole V block, the padded columns of the last one
# included (their logits are 0: line 92 zeroed w there), so each adds exp(0) = 1. LAB·1.5 fixes it in code.
LSE_LINE = 209
LSE_TEXT = "lse_block = jax.nn.logsumexp(xw_tiled[...], axis=-1)"


def forward_with_mask(masked_logits: Any) -> Any:
    """tokamax's forward with its one ragged-V line fixed by `masked_logits(xw, v_index, v_block_size, v_dim)`: line
    209 takes the logsumexp of what it returns for this V block's logits instead of the logits themselves. The rest
    of the file is the one read, line for line (the module is its own copy: tokamax's stays as it is)."""
    import types
    from pathlib import Path

    require()
    from pallas_course import vendored

    original = vendored.import_module(KERNEL)
    lines = Path(original.__file__).read_text().split("\n")
    line = lines[LSE_LINE - 1]
    if line.strip() != LSE_TEXT:
        raise RuntimeError(
            f"line {LSE_LINE} of {original.__file__} is {line.strip()!r}, not {LSE_TEXT!r}: "
            "this is not the tokamax release the lab reads"
        )
    indent = line[: len(line) - len(line.lstrip())]
    lines[LSE_LINE - 1] = (
        f"{indent}lse_block = jax.nn.logsumexp(masked_logits(xw_tiled[...], v_index, v_block_size, v_dim), axis=-1)"
    )
    fixed = types.ModuleType(f"{original.__name__}_masked")
    fixed.__dict__["masked_logits"] = masked_logits
    exec(compile("\n".join(lines), f"{original.__file__} (line {LSE_LINE} masked)", "exec"), fixed.__dict__)  # noqa: S102 - the course's own vendored tokamax source, a line masked
    return fixed.linear_softmax_cross_entropy_loss_fwd_pallas_mosaic_tpu


# masked_logits' probes: (v_dim, v_block_size), with as many rows as columns, so a mask along the wrong axis shows.
# V = 4 in blocks of 8 has a first block half padding and a second all padding, where a column index within the block
# (no offset) differs from no mask at all; V = 20 in blocks of 8 has the lab's case, a ragged last block.
MASK_PROBES = ((4, 8), (20, 8))
MASK_FIX = "jnp.where(col < v_dim, xw, -jnp.inf), col = v_index * v_block_size + jax.lax.broadcasted_iota(jnp.int32, xw.shape, 1)"


def _masks(x: Any, v_index: int, vb: int, v_dim: int) -> dict[tuple[str, str, str], Any]:
    """What each reading of the mask gives: (index, comparison, value) -> the masked logits."""
    import numpy as np

    local = np.broadcast_to(np.arange(vb)[None, :], x.shape)
    index = {
        "global": v_index * vb + local,
        "local": local,
        "rows": v_index * vb + np.arange(x.shape[0])[:, None] + 0 * local,
    }
    out = {}
    for where, col in index.items():
        for cmp, keep in (("<", col < v_dim), ("<=", col <= v_dim)):
            for value in ("-inf", "0"):
                out[(where, cmp, value)] = np.where(keep, x, -np.inf if value == "-inf" else 0.0)
    out[("none", "", "")] = x
    return out


_MASK_CAUSES = {
    "0": "the columns past v_dim come out 0, not -inf: 0 adds nothing to a sum (LAB·1.3's column_sums), but a "
    "logsumexp adds exp(0) = 1 for each, the reading's own bug (line 92 zeroes w there, so these logits are 0); "
    "mask with -inf, exp(-inf) = 0",
    "local": "the column index has no block offset: broadcasted_iota alone numbers the columns within this V block "
    "(0 to v_block_size - 1), so past the first block no padded column is ever at or past v_dim; a column's index "
    "in the whole vocabulary is v_index * v_block_size + jax.lax.broadcasted_iota(jnp.int32, xw.shape, 1)",
    "rows": "the mask runs along the rows: broadcasted_iota(..., 0) numbers xw's rows (the batch, B); the vocabulary "
    "is xw's columns, broadcasted_iota(jnp.int32, xw.shape, 1)",
    "<=": "column v_dim itself is kept: it is the first column past the end (columns 0 to v_dim - 1 are the "
    "vocabulary), so the columns at or past v_dim are padding: keep col < v_dim",
    "none": "nothing is masked: the padded columns keep their logits (0 in tokamax's kernel: line 92 zeroes w "
    "there), and the logsumexp counts exp(0) = 1 for each, line 209 as it was",
}


def mask_problem(masked_logits: Any) -> str | None:
    """Which of the mistakes LAB·1.5 names `masked_logits` makes (masking with 0, the reading's own value; the column
    index without its block offset; the iota along the rows; `<=` for `<`), each named with its cause, read off its
    output on small ragged probes (MASK_PROBES); None when every padded column takes no part in a logsumexp and every
    real one is kept. A mistake the probes cannot name is left to the forward check's values."""
    import jax.numpy as jnp
    import numpy as np

    for v_dim, vb in MASK_PROBES:
        rng = np.random.default_rng([v_dim, vb])
        for v_index in range(-(-max(v_dim, 2 * vb) // vb)):
            x = rng.standard_normal((vb, vb)).astype(np.float32) + 2.0  # never 0, so a 0 is the mask's
            got = np.asarray(masked_logits(jnp.asarray(x), jnp.int32(v_index), vb, v_dim), dtype=np.float64)
            col = v_index * vb + np.arange(vb)[None, :]
            pad = np.broadcast_to(col >= v_dim, x.shape)
            if got.shape == x.shape and np.array_equal(got[~pad], x[~pad]) and (got[pad] < x.min() - 50).all():
                continue
            found = [
                frozenset(c for c in key if c in _MASK_CAUSES)
                for key, want in _masks(x, v_index, vb, v_dim).items()
                if got.shape == want.shape and np.array_equal(got, want)
            ]
            # the fewest mistakes that give this output; where several readings do, each is named as a candidate
            fewest = sorted({f for f in found if not any(g < f for g in found)}, key=sorted)
            if not fewest:
                return None
            head = f"on V block {v_index} of a vocabulary of {v_dim} in blocks of {vb}: "
            said = ["; and ".join(_MASK_CAUSES[c] for c in sorted(f, key=list(_MASK_CAUSES).index)) for f in fewest]
            if len(said) > 1:
                head += f"{len(said)} mistakes give this output: " + " | or: ".join(said)
            else:
                head += said[0]
            return head + f" (the mask: {MASK_FIX})"
    return None


def check_mask(masked_logits: Any) -> None:
    """The notebook's check of `masked_logits` alone, before tokamax's forward runs it: a named mistake's cause
    (mask_problem), or one ✓ line."""
    from pallas_course.compare import CheckFailure
    from pallas_course.errors import explain

    try:
        problem = mask_problem(masked_logits)
    except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
        e = explain(exc)
        failure = CheckFailure(f"masked_logits: {e.summary.removeprefix('✗ ')}")
        failure.kind, failure.raw = e.kind, e.raw
        raise failure from None
    if problem:
        failure = CheckFailure(f"masked_logits: {problem}")
        failure.kind = "values"
        raise failure
    print(
        "✓ masked_logits: on ragged V blocks (V = 4 and V = 20 in blocks of 8) every real column is kept and every "
        "padded one takes no part in a logsumexp"
    )


def reference() -> Any:
    """tokamax's reference.py: plain jnp, the whole (B, V) logits at once."""
    require()
    from pallas_course import vendored

    return vendored.import_module(REFERENCE).linear_softmax_cross_entropy_loss_fwd_reference


@contextlib.contextmanager
def on_this_machine(interpret: Any) -> Iterator[None]:
    """Run tokamax's pallas_calls as the set-up cell decided: `interpret` is the notebook's INTERP.

    tokamax's pallas_call has no `interpret=` argument, so off a TPU the mode is forced around the call.
    """
    if interpret is False:
        yield
        return
    from jax.experimental.pallas import tpu as pltpu

    try:
        with pltpu.force_tpu_interpret_mode(interpret):
            yield
    except BaseException:
        pltpu.reset_tpu_interpret_mode_state()
        raise


def example_inputs(b: int, h: int, v: int, *, seed: int = 0, dtype: Any = None) -> tuple[Any, Any, Any]:
    """x (b, h), labels (b,) in [0, v), w (h, v) scaled by 1/sqrt(h) so the logits are of order 1.

    Unit-scale logits are what a trained model produces; with w of unit scale the logits would be of order
    sqrt(h) and a few terms would swamp every logsumexp.
    """
    import jax.numpy as jnp
    import numpy as np

    dtype = dtype or jnp.float32
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((b, h)).astype(np.float32)).astype(dtype)
    w = jnp.asarray((rng.standard_normal((h, v)) / np.sqrt(h)).astype(np.float32)).astype(dtype)
    labels = jnp.asarray(rng.integers(0, v, b), jnp.int32)
    return x, labels, w
