"""LAB·1.3 hidden checks: fused softmax and LayerNorm, the bytes-over-bandwidth model of the softmax, and a kernel
with a ragged last block (column sums over a pl.cdiv grid, masked).

Each function is one graded test; its name is the nbgrader grade_id and the test id in course.yml.
Every test first checks the structure (one pallas_call, nothing computed over the array outside it), so a
pure-jnp bypass scores 0 with a reason. References are float64 NumPy on the very inputs the kernel got.
When values are wrong, the row statistics of the output say *why* (rows not summing to 1, NaN from an
overflowing exp, LayerNorm rows without mean 0 / variance 1, eps missing), and the message leads with that.
"""

from __future__ import annotations

from typing import Any, Callable

import ml_dtypes
import numpy as np

from autograder.labs.harness import TestFailure, call, fresh_seed, one_pallas_call, schedule_call
from pallas_course import lab_checks, rules
from pallas_course.lab_1_3_rules import (
    ROWS_CHOICE_CASES as VISIBLE_ROWS_CASES,
    SOFTMAX_TIME_CASES as VISIBLE_TIME_CASES,
    rows_choice_families,
    rows_choice_label,
    rows_choice_problem,
    softmax_time_families,
    softmax_time_label,
    softmax_time_problem,
)
from pallas_course.compare import compare, explained, form_mismatch
from pallas_course.kernel_trace import PallasCallInfo

BF16 = ml_dtypes.bfloat16

# The rules, tolerances, diagnoses, input kinds and families live in pallas_course.rules (the notebook's visible
# checks apply the same ones, pallas_course.lab_checks); here only the inputs are the grade's own: fresh each run,
# more sizes.
SOFTMAX_F32, SOFTMAX_BF16 = rules.SOFTMAX_F32, rules.SOFTMAX_BF16
LAYERNORM_F32, LAYERNORM_BF16, LAYERNORM_EDGE = rules.LAYERNORM_F32, rules.LAYERNORM_BF16, rules.LAYERNORM_EDGE

# (shape, rows_per_block) for the graded runs; None means "call with the default" (8). Non-square, more
# than one block each, d a multiple of 128. bf16 blocks keep rows a multiple of 16 (its native sublane tile).
SOFTMAX_F32_CASES = [((64, 256), None), ((96, 384), 32), ((128, 1024), 16)]
SOFTMAX_BF16_CASES = [((64, 512), 16), ((96, 256), 32)]
STABILITY_CASE = ((64, 512), 16)
LAYERNORM_F32_CASES = [((64, 256), None), ((96, 512), 32), ((48, 1024), 16)]
LAYERNORM_BF16_CASES = [((64, 384), 16), ((128, 256), 32)]
EDGE_CASE = ((64, 512), 16)
# Structure only (traced, nothing runs): any legal shape is free, so more of them.
FUSED_CASES = [
    ((64, 256), np.float32, None),
    ((96, 384), np.float32, 32),
    ((256, 512), np.float32, 64),
    ((128, 1024), BF16, 16),
    ((64, 128), BF16, 32),
]

# column_sums: rows a multiple of the block first (a missing zeroing shows there, so NaN later is the edge's), then a
# partial last block of several, then one partial block alone (n < rows_per_block).
# (shape, rows_per_block, dtype): the lab grades its functions "in float32 and bfloat16" (its introduction), and the
# sums are float32 whatever x's dtype
COLUMN_SUMS_CASES = [
    ((64, 256), None, np.float32),
    ((200, 128), 16, np.float32),
    ((20, 384), 32, np.float32),
    ((136, 256), 16, BF16),
]
# softmax_seconds: the notebook's cases and more of the same families (both dtypes; a JAX device per chip and per
# TensorCore; steps- and bytes-bound)
SOFTMAX_TIME_CASES = list(VISIBLE_TIME_CASES) + [
    (4096, 128, "float32", "v6e", 128),
    (1024, 384, "bfloat16", "v5e", 16),
    (131072, 2048, "bfloat16", "v7x", 512),
]
# rows_per_block: the notebook's cases and more of the same families (both dtypes, both scoped limits)
ROWS_CHOICE_CASES = list(VISIBLE_ROWS_CASES) + [
    (16384, 2048, "float32", "v6e"),
    (4096, 128, "bfloat16", "v5e"),
]

CAST_HINT = (
    "the kernel stores a float32 value into a lower-precision output block: cast back with "
    ".astype(o_ref.dtype) before storing"
)


def families(test: str) -> frozenset[str]:
    """The families of this test's cases (rules.rows_families): the notebook's visible checks must show each."""
    cases: list[tuple[Any, Any, Any, str]] = []
    if test == "softmax_values":
        cases = [(s, np.float32, r, "") for s, r in SOFTMAX_F32_CASES] + [
            (s, BF16, r, "") for s, r in SOFTMAX_BF16_CASES
        ]
    elif test == "softmax_stability":
        cases = [(STABILITY_CASE[0], np.float32, STABILITY_CASE[1], "large logits")]
    elif test == "layernorm_values":
        cases = [(s, np.float32, r, "") for s, r in LAYERNORM_F32_CASES] + [
            (s, BF16, r, "") for s, r in LAYERNORM_BF16_CASES
        ]
    elif test == "layernorm_edge":
        cases = [(EDGE_CASE[0], np.float32, EDGE_CASE[1], "edge rows")]
    elif test in ("softmax_fused", "layernorm_fused"):
        cases = [(s, dt, r, "") for s, dt, r in FUSED_CASES]
    elif test == "column_sums_ragged":
        return frozenset().union(*(rules.column_sums_families(s, r, t) for s, r, t in COLUMN_SUMS_CASES))
    elif test == "softmax_time_model":
        return frozenset().union(*(softmax_time_families(*c) for c in SOFTMAX_TIME_CASES))
    elif test == "rows_per_block_choice":
        return frozenset().union(*(rows_choice_families(*c) for c in ROWS_CHOICE_CASES))
    found: set[str] = set()
    for shape, dtype, r, kind in cases:
        found |= rules.rows_families(shape, dtype, r, kind)
    return frozenset(found)


def visible_families(test: str) -> frozenset[str]:
    """The families the notebook's visible checks show: the kernels' check cells (pallas_course.lab_checks) and
    check_softmax_seconds's cases (pallas_course.lab_1_3_rules)."""
    if test == "softmax_time_model":
        return frozenset().union(*(softmax_time_families(*c) for c in VISIBLE_TIME_CASES))
    if test == "rows_per_block_choice":
        return frozenset().union(*(rows_choice_families(*c) for c in VISIBLE_ROWS_CASES))
    return lab_checks.visible_families(test)


def _kw(r: int | None) -> dict[str, int]:
    return {} if r is None else {"rows_per_block": r}


def _label(fn: str, args: str, shape: tuple[int, int], dtype: Any, r: int | None) -> str:
    rpb = "" if r is None else f", rows_per_block={r}"
    return f"{fn}({args}{rpb}) on {shape} {np.dtype(dtype)}"


def _with_hints(e: TestFailure) -> TestFailure:
    msg = str(e)
    if "Invalid dtype for `swap`" in msg and "astype(o_ref.dtype)" not in msg:
        msg = f"{msg}; {CAST_HINT}"
    return TestFailure(msg)


def _run(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return call(test, label, fn, *args, **kwargs)
    except TestFailure as e:
        raise _with_hints(e) from None


# ---------------------------------------------------------------------------------------------- structure


def _fused_call(
    test: str, label: str, fn: Callable[..., Any], *args: Any, schedule: bool = False, **kwargs: Any
) -> PallasCallInfo:
    """The one pallas_call `fn` launches, with no work over x outside it.

    Work on the (d,)-sized g and b (a cast, a reshape) is allowed: it is not a trip of x through HBM.
    Anything that reads or writes an array as large as x outside the kernel (exp in XLA, a mean taken
    before the call, the whole answer in jnp) is a lost test. `schedule`: the test reads the call's data alone
    (the *_fused tests), so a kernel body that fails to trace costs the values tests, not it (schedule_call).
    """
    get = schedule_call if schedule else one_pallas_call
    try:
        return get(test, label, fn, *args, outside_min_size=_size_of(args[0]), **kwargs)
    except TestFailure as e:
        raise _with_hints(e) from None


def _size_of(x: Any) -> int:
    return int(np.prod(x.shape))


def _check_row_blocks(
    test: str, label: str, pc: PallasCallInfo, shape: tuple[int, int], dtype: Any, r: int, n_params: int
) -> None:
    problem = rules.row_blocks_problem(label, pc, shape, dtype, r, n_params)
    if problem:
        raise TestFailure(f"{test}: {problem}")


def _expect(
    test: str,
    label: str,
    x: Any,
    out: Any,
    expected: np.ndarray,
    r: int,
    seed: int,
    tols: dict,
    hint: Callable[[], str | None],
    pc: PallasCallInfo,
) -> None:
    """Shape and dtype first (in x's dtype), then values in float64 against `tols`; `hint()` names the likely
    cause when values are wrong (pallas_course.compare.explained decides which text leads)."""
    mismatch = form_mismatch(out, expected.astype(np.dtype(x.dtype)), name=label)
    if mismatch is None:
        mismatch = compare(rules.as_f64(out), expected, name=label, block=(r, x.shape[1]), kernel=pc, **tols)
    if mismatch is None:
        return
    text = explained(mismatch, hint() if mismatch.kind in ("nan", "values") else None)
    raise TestFailure(f"{test}: {text} [inputs from seed {seed}]")


# ------------------------------------------------------------------------------------------------ softmax


def _softmax_case(test: str, softmax: Callable[..., Any], x: Any, r: int | None, seed: int) -> None:
    import jax.numpy as jnp

    x = jnp.asarray(x)
    label = _label("softmax", "x", tuple(x.shape), x.dtype, r)
    pc = _fused_call(test, label, softmax, x, **_kw(r))
    out = _run(test, label, softmax, x, **_kw(r))
    tols = SOFTMAX_F32 if x.dtype == np.float32 else SOFTMAX_BF16
    _expect(
        test, label, x, out, rules.softmax_ref(x), r or 8, seed, tols, lambda: rules.softmax_hint(x, out, r or 8), pc
    )


def softmax_values(softmax: Callable[..., Any]) -> None:
    """f32 and bf16 at several shapes and rows_per_block (the default 8 included), fresh inputs."""
    test = "softmax_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for dtype, cases in ((np.float32, SOFTMAX_F32_CASES), (BF16, SOFTMAX_BF16_CASES)):
        for shape, r in cases:
            _softmax_case(test, softmax, rules.softmax_inputs(rng, shape, dtype), r, seed)


def softmax_stability(softmax: Callable[..., Any]) -> None:
    """f32 logits around +1e4 and -1e4 (a random sign per row, spread 3): finite and correct."""
    test = "softmax_stability"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    shape, r = STABILITY_CASE
    _softmax_case(test, softmax, rules.large_logits(rng, shape), r, seed)


def softmax_fused(softmax: Callable[..., Any]) -> None:
    """One pallas_call; grid (n // rows_per_block,); x and out blocks (rows_per_block, d) at (i, 0); rows "parallel"."""
    import jax

    test = "softmax_fused"
    for shape, dtype, r in FUSED_CASES:
        label = _label("softmax", "x", shape, dtype, r)
        pc = _fused_call(test, label, softmax, jax.ShapeDtypeStruct(shape, dtype), schedule=True, **_kw(r))
        _check_row_blocks(test, label, pc, shape, dtype, r or 8, n_params=0)


# ---------------------------------------------------------------------------------------------- LayerNorm


def layernorm_ref(x: Any, g: Any, b: Any) -> np.ndarray:
    return rules.layernorm_ref(x, g, b)


def _layernorm_case(
    test: str, layernorm: Callable[..., Any], x: Any, g: Any, b: Any, r: int | None, seed: int, tols: dict
) -> None:
    import jax.numpy as jnp

    x, g, b = jnp.asarray(x), jnp.asarray(g), jnp.asarray(b)
    label = _label("layernorm", "x, g, b", tuple(x.shape), x.dtype, r)
    pc = _fused_call(test, label, layernorm, x, g, b, **_kw(r))
    out = _run(test, label, layernorm, x, g, b, **_kw(r))
    _expect(
        test,
        label,
        x,
        out,
        rules.layernorm_ref(x, g, b),
        r or 8,
        seed,
        tols,
        lambda: rules.layernorm_hint(x, g, b, out, tols["tol"], r or 8),
        pc,
    )


def layernorm_values(layernorm: Callable[..., Any]) -> None:
    """f32 and bf16, random g and b; rows with their own mean (|mean| <~ 6) and scale (0.5 to 2)."""
    test = "layernorm_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for cases, dtype, tols in (
        (LAYERNORM_F32_CASES, np.float32, LAYERNORM_F32),
        (LAYERNORM_BF16_CASES, BF16, LAYERNORM_BF16),
    ):
        for shape, r in cases:
            _layernorm_case(test, layernorm, *rules.layernorm_inputs(rng, shape, dtype), r, seed, tols)


def layernorm_edge(layernorm: Callable[..., Any]) -> None:
    """f32, four kinds of rows shuffled together: plain N(0, 1); mean +-1e3 (std 1); constant (variance 0,
    dyadic values so the f32 mean is exact); std 1e-3 (variance ~ eps, where eps = 1e-6 changes the answer)."""
    test = "layernorm_edge"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    shape, r = EDGE_CASE
    _layernorm_case(test, layernorm, *rules.layernorm_edge_inputs(rng, shape), r, seed, LAYERNORM_EDGE)


def layernorm_fused(layernorm: Callable[..., Any]) -> None:
    """One pallas_call; grid (n // rows_per_block,); x and out in (rows_per_block, d) blocks at (i, 0);
    g and b each one whole block, the same at every step; rows "parallel"."""
    import jax

    test = "layernorm_fused"
    for shape, dtype, r in FUSED_CASES:
        label = _label("layernorm", "x, g, b", shape, dtype, r)
        x = jax.ShapeDtypeStruct(shape, dtype)
        p = jax.ShapeDtypeStruct((shape[1],), dtype)
        pc = _fused_call(test, label, layernorm, x, p, p, schedule=True, **_kw(r))
        _check_row_blocks(test, label, pc, shape, dtype, r or 8, n_params=2)


# ------------------------------------------------------------------------------ the ragged edge: column sums


def column_sums_ragged(column_sums: Callable[..., Any]) -> None:
    """One pallas_call over a pl.cdiv grid, x in (rows_per_block, d) blocks, the (1, d) f32 sums carried in the
    output block; n not a multiple of rows_per_block (and once a multiple, once smaller), float64 reference."""
    import jax.numpy as jnp

    test = "column_sums_ragged"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for shape, r, dtype in COLUMN_SUMS_CASES:
        x = jnp.asarray(rules.column_sums_inputs(rng, shape, dtype))
        label = _label("column_sums", "x", shape, dtype, r)
        pc = _fused_call(test, label, column_sums, x, **_kw(r))
        problem = rules.column_sums_schedule_problem(label, pc, shape, r or 8)
        if problem:
            raise TestFailure(f"{test}: {problem}")
        out = _run(test, label, column_sums, x, **_kw(r))
        expected = rules.column_sums_ref(x)
        mismatch = form_mismatch(out, expected.astype(np.float32), name=label)
        if mismatch is None:
            mismatch = compare(
                rules.as_f64(out), expected, name=label, block=(1, shape[1]), kernel=pc, **rules.COLUMN_SUMS
            )
        if mismatch is not None:
            hint = rules.column_sums_hint(x, out, r or 8, pc) if mismatch.kind in ("nan", "values") else None
            text = lab_checks.explained_for("column_sums", mismatch, hint)
            raise TestFailure(f"{test}: {text} [inputs from seed {seed}]")


# ------------------------------------------------------------------------- the bytes-over-bandwidth model


def softmax_time_model(softmax_seconds: Callable[..., Any]) -> None:
    """Seconds of the fused softmax on one JAX device: 2·n·d·itemsize bytes (x read once, the output written once)
    over the device's HBM B/s, plus n // rows_per_block steps x course.yml's step_overhead_s, per dtype and chip
    (pallas_course.lab_1_3_rules)."""
    test = "softmax_time_model"
    for n, d, dtype, chip, rows in SOFTMAX_TIME_CASES:
        label = softmax_time_label(n, d, dtype, chip, rows)
        got = call(test, label, softmax_seconds, n, d, np.dtype(dtype), chip, rows)
        problem = softmax_time_problem(got, n, d, dtype, chip, rows)
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")


def rows_per_block_choice(rows_per_block: Callable[..., Any]) -> None:
    """Rows per block for the fused softmax: a legal block that divides n, a step of at least 1 MiB in and out (or
    the whole array), the double-buffered blocks within half the default scoped VMEM limit
    (pallas_course.lab_1_3_rules.rows_choice_problem)."""
    test = "rows_per_block_choice"
    for n, d, dtype, chip in ROWS_CHOICE_CASES:
        label = rows_choice_label(n, d, dtype, chip)
        got = call(test, label, rows_per_block, n, d, np.dtype(dtype), chip)
        problem = rows_choice_problem(got, n, d, dtype, chip)
        if problem is not None:
            raise TestFailure(f"{test}: {label} {problem}")
