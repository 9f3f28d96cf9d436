"""LAB·1.3 hidden checks: fused softmax and LayerNorm.

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

from autograder.harness import (TestFailure, as_f64, call, expect_equal, fresh_seed, one_pallas_call,
                                random_array)
from pallas_course.check import compare
from pallas_course.kernel_trace import PallasCallInfo

BF16 = ml_dtypes.bfloat16
EPS = 1e-6

# Tolerances. `tol` is relative; `atol` the absolute floor (see pallas_course.check.compare).
# softmax f32: exp is good to ~1 ulp, a sum of d <= 1024 positive terms in f32 to ~log2(d) ulp in a tree
# order (we measured <= 5e-7 relative under interpret mode); 1e-5 leaves room for other reduction orders
# (the TPU's lane reductions). The absolute floor 1e-30 only forgives probabilities below f32's range
# (exp underflows at x - max < -87), never a visibly wrong one: softmax outputs are ~1/d, so an absolute
# tolerance of the usual size would accept almost anything.
SOFTMAX_F32 = dict(tol=1e-5, atol=1e-30)
# softmax bf16: the f32 result is rounded once to bf16, half an ulp, at most 2**-8 relative at the bottom
# of a binade (measured 0.996 * 2**-8). 2**-7, one bf16 ulp, allows either rounding of the f32 value.
SOFTMAX_BF16 = dict(tol=2.0**-7, atol=1e-30)
# LayerNorm f32: outputs are O(1); mean and variance in f32 carry ~log2(d) ulp (measured <= 1.2e-6 abs);
# 1e-5 absolute + relative is ~10x that.
LAYERNORM_F32 = dict(tol=1e-5)
# LayerNorm bf16: the f32 result rounded once to bf16 (<= 2**-8 relative, measured 0.0034 of 1 + |y|);
# 2**-7 absolute + relative, one bf16 ulp.
LAYERNORM_BF16 = dict(tol=2.0**-7)
# LayerNorm edge rows with |mean| = 1e3, f32: the f32 inputs are exact for the reference, but the kernel's
# f32 mean of d values near 1e3 is only good to a few ulp of 1e3 (ulp 6e-5), and that error shifts every
# output of the row (std 1): measured <= 2.4e-4 at d = 1024 for the two-pass variance. 3e-3 is >10x that;
# the one-pass variance mean(x**2) - mean(x)**2 is off by ~0.65 there (cancellation at 1e6 in f32).
LAYERNORM_EDGE = dict(tol=3e-3)

# (shape, rows_per_block) for the graded runs; None means "call with the default" (8). Non-square, more
# than one block each, d a multiple of 128. bf16 blocks keep rows a multiple of 16 (its native sublane tile).
SOFTMAX_F32_CASES = [((64, 256), None), ((96, 384), 32), ((128, 1024), 16)]
SOFTMAX_BF16_CASES = [((64, 512), 16), ((96, 256), 32)]
LAYERNORM_F32_CASES = [((64, 256), None), ((96, 512), 32), ((48, 1024), 16)]
LAYERNORM_BF16_CASES = [((64, 384), 16), ((128, 256), 32)]
# Structure only (traced, nothing runs): any legal shape is free, so more of them.
FUSED_CASES = [((64, 256), np.float32, None), ((96, 384), np.float32, 32), ((256, 512), np.float32, 64),
               ((128, 1024), BF16, 16), ((64, 128), BF16, 32)]

CAST_HINT = ("the kernel stores a float32 value into a lower-precision output block: cast back with "
             ".astype(o_ref.dtype) before storing")


def _kw(r: int | None) -> dict[str, int]:
    return {} if r is None else {"rows_per_block": r}


def _label(fn: str, args: str, shape: tuple[int, int], dtype: Any, r: int | None) -> str:
    rpb = "" if r is None else f", rows_per_block={r}"
    return f"{fn}({args}{rpb}) on {shape} {np.dtype(dtype)}"


def _with_hints(e: TestFailure) -> TestFailure:
    msg = str(e)
    if "Invalid dtype for `swap`" in msg:
        msg = f"{msg}; {CAST_HINT}"
    return TestFailure(msg)


def _run(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return call(test, label, fn, *args, **kwargs)
    except TestFailure as e:
        raise _with_hints(e) from None


# ---------------------------------------------------------------------------------------------- structure

def _fused_call(test: str, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> PallasCallInfo:
    """The one pallas_call `fn` launches, with no work over x outside it.

    Work on the (d,)-sized g and b (a cast, a reshape) is allowed: it is not a trip of x through HBM.
    Anything that reads or writes an array as large as x outside the kernel (exp in XLA, a mean taken
    before the call, the whole answer in jnp) is a lost test.
    """
    try:
        return one_pallas_call(test, label, fn, *args, outside_min_size=_size_of(args[0]), **kwargs)
    except TestFailure as e:
        raise _with_hints(e) from None


def _size_of(x: Any) -> int:
    return int(np.prod(x.shape))


def _check_row_blocks(test: str, label: str, pc: PallasCallInfo, shape: tuple[int, int], dtype: Any,
                      r: int, n_params: int) -> None:
    """grid (n // r,); x (and out) in (r, d) blocks at (i, 0); each of the n_params parameters whole."""
    n, d = shape
    expect_equal(test, f"the grid of {label}", pc.grid, (n // r,),
                 "one grid step per block of rows_per_block rows, so the grid is (n // rows_per_block,)")
    if len(pc.inputs) != 1 + n_params or len(pc.outputs) != 1:
        raise TestFailure(f"{test}: {label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected "
                          f"{1 + n_params} BlockSpecs in in_specs and one in out_specs")
    out = pc.outputs[0]
    expect_equal(test, f"the output of {label}", (out.array_shape, np.dtype(out.dtype)), (shape, np.dtype(dtype)),
                 "out_shape is x's shape and dtype")
    for blk, what in ((pc.inputs[0], "input x"), (out, "output")):
        expect_equal(test, f"the {what} block of {label}", blk.block_shape, (r, d),
                     "a block is rows_per_block whole rows: (rows_per_block, d); the feature axis is not split "
                     "because each row's reduction needs all of it")
    for point in pc.grid_points():
        (i,) = point
        for blk, what in ((pc.inputs[0], "input x"), (out, "output")):
            got = blk.block_index(*point)
            if got != (i, 0):
                raise TestFailure(f"{test}: {label}: the {what} index map sends grid step {i} to block {got}; step "
                                  f"i reads and writes row block i, all features: lambda i: (i, 0)")
    for k, blk in enumerate(pc.inputs[1:]):
        what = "g" if k == 0 else "b"
        if blk.array_shape and int(np.prod(blk.array_shape)) != d:
            raise TestFailure(f"{test}: {label}: the {what} operand has shape {blk.array_shape}; expected the "
                              f"{d} values of {what}, e.g. {what}.reshape(1, -1)")
        if tuple(blk.block_shape) != tuple(blk.array_shape):
            raise TestFailure(f"{test}: {label}: {what} is carved into {blk.block_shape} blocks of "
                              f"{blk.array_shape}; every step needs all of {what}, one whole block")
        for point in pc.grid_points():
            got = blk.block_index(*point)
            if any(got):
                raise TestFailure(f"{test}: {label}: the {what} index map sends grid step {point[0]} to block "
                                  f"{got}; every step reads the one block of {what}: lambda i: (0, 0)")


def _fail(test: str, label: str, mismatch: Any, hint: str | None, seed: int) -> None:
    """Raise with the likely cause first. NaNs are told apart by compare (pallas_course.check, as the visible
    checks do): memory never written (a short grid; nothing stored at all, e.g. `o_ref = value`) gets compare's
    text and no hint, since an overflow or eps hint would name the wrong cause; computed NaNs get the hint
    (overflow, no eps) instead of compare's text; where the two cannot be told apart, both."""
    where = f" [inputs from seed {seed}]"
    if mismatch.kind == "nan" and mismatch.cause.startswith("never-written"):
        raise TestFailure(f"{test}: {mismatch.message}{where}")
    if hint and mismatch.kind == "nan" and mismatch.cause == "computed":
        raise TestFailure(f"{test}: {label}: {hint}{where}")
    if hint:
        raise TestFailure(f"{test}: {label}: {hint}. {mismatch.message}{where}")
    raise TestFailure(f"{test}: {mismatch.message}{where}")


# ------------------------------------------------------------------------------------------------ softmax

def softmax_ref(x: Any) -> np.ndarray:
    x = as_f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_hint(x: Any, out: Any) -> str | None:
    a = as_f64(out)
    bad = ~np.isfinite(a)
    if bad.any() and np.abs(as_f64(x)).max() > 80:
        return (f"{int(bad.sum())} values are NaN or inf on logits up to {np.abs(as_f64(x)).max():.3g}: exp "
                "overflows float32 past 88 (and 0/0 below -88); subtract each row's max before jnp.exp, "
                "softmax(x) = softmax(x - max(x))")
    if bad.any():
        return None
    sums = a.sum(axis=-1)
    if np.abs(sums - 1).max() > 1e-2:
        return (f"rows of the output do not sum to 1 (row sums from {sums.min():.3g} to {sums.max():.3g}): the "
                "max and the sum must both reduce over the features, axis=-1 of the block, not over its rows")
    return None


def _expect(test: str, label: str, x: Any, out: Any, expected: np.ndarray, r: int, seed: int, tols: dict,
            hint: Callable[[], str | None]) -> None:
    """Shape and dtype first (in x's dtype), then values in float64 against `tols`; `hint()` names the likely
    cause when values are wrong."""
    shape_dtype = compare(out, expected.astype(np.dtype(x.dtype)), tol=np.inf, name=label)
    if shape_dtype is None or shape_dtype.kind == "nan":
        mismatch = compare(as_f64(out), expected, name=label, block=(r, x.shape[1]), **tols)
    else:
        mismatch = shape_dtype
    if mismatch is None:
        return
    _fail(test, label, mismatch, hint() if mismatch.kind in ("nan", "values") else None, seed)


def _expect_softmax(test: str, label: str, x: Any, out: Any, r: int, seed: int, tols: dict) -> None:
    _expect(test, label, x, out, softmax_ref(x), r, seed, tols, lambda: _softmax_hint(x, out))


def _softmax_case(test: str, softmax: Callable[..., Any], rng: np.random.Generator, shape: tuple[int, int],
                  dtype: Any, r: int | None, seed: int, x: Any = None) -> None:
    label = _label("softmax", "x", shape, dtype, r)
    if x is None:
        x = random_array(rng, shape, dtype, scale=3.0)
    _fused_call(test, label, softmax, x, **_kw(r))
    out = _run(test, label, softmax, x, **_kw(r))
    _expect_softmax(test, label, x, out, r or 8, seed, SOFTMAX_F32 if dtype == np.float32 else SOFTMAX_BF16)


def softmax_values(softmax: Callable[..., Any]) -> None:
    """f32 and bf16 at several shapes and rows_per_block (the default 8 included), fresh inputs."""
    test = "softmax_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for shape, r in SOFTMAX_F32_CASES:
        _softmax_case(test, softmax, rng, shape, np.float32, r, seed)
    for shape, r in SOFTMAX_BF16_CASES:
        _softmax_case(test, softmax, rng, shape, BF16, r, seed)


def softmax_stability(softmax: Callable[..., Any]) -> None:
    """f32 logits around +1e4 and -1e4 (a random sign per row, spread 3): finite and correct."""
    test = "softmax_stability"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    shape, r = (64, 512), 16
    offset = rng.choice([-1e4, 1e4], size=(shape[0], 1))
    x = random_array(rng, shape, np.float32, scale=3.0, offset=offset)
    _softmax_case(test, softmax, rng, shape, np.float32, r, seed, x=x)


def softmax_fused(softmax: Callable[..., Any]) -> None:
    """One pallas_call; grid (n // rows_per_block,); x and out blocks (rows_per_block, d) at (i, 0)."""
    import jax

    test = "softmax_fused"
    for shape, dtype, r in FUSED_CASES:
        label = _label("softmax", "x", shape, dtype, r)
        pc = _fused_call(test, label, softmax, jax.ShapeDtypeStruct(shape, dtype), **_kw(r))
        _check_row_blocks(test, label, pc, shape, dtype, r or 8, n_params=0)


# ---------------------------------------------------------------------------------------------- LayerNorm

def layernorm_ref(x: Any, g: Any, b: Any) -> np.ndarray:
    x = as_f64(x)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * as_f64(g) + as_f64(b)


def _params(rng: np.random.Generator, d: int, dtype: Any) -> tuple[Any, Any]:
    import jax.numpy as jnp

    g = rng.uniform(0.5, 1.5, d).astype(np.float32)     # away from 0, so (out - b) / g recovers the normalised rows
    b = (0.5 * rng.standard_normal(d)).astype(np.float32)
    return jnp.asarray(g).astype(dtype), jnp.asarray(b).astype(dtype)


def _layernorm_hint(x: Any, g: Any, b: Any, out: Any, rows: dict[str, np.ndarray]) -> str | None:
    """Why the output is wrong, from the row statistics of z = (out - b) / g (which should be ~N(0, 1))."""
    a, xs = as_f64(out), as_f64(x)
    z = (a - as_f64(b)) / as_f64(g)
    nan_rows = np.isnan(a).any(axis=-1)
    const = rows.get("constant", np.zeros(0, int))
    if nan_rows.any() and const.size and nan_rows[const].all() and not nan_rows[np.setdiff1d(np.arange(len(a)), const)].any():
        return ("the constant rows (variance exactly 0) come out NaN: 0 * rsqrt(0) or 0 / 0; eps belongs inside, "
                "rsqrt(var + 1e-6)")
    if nan_rows.any():
        return None
    mean, var = z.mean(axis=-1), z.var(axis=-1)
    xvar = xs.var(axis=-1)
    want = xvar / (xvar + EPS)            # the variance of a normalised row: 1, less where var is near eps
    normal = rows["normal"]
    if np.abs(mean[normal]).max() > 0.05 or np.abs(var[normal] - want[normal]).max() > 0.05:
        return (f"output rows do not have mean 0 and variance 1 before g and b are applied (row means up to "
                f"{np.abs(mean[normal]).max():.3g}, variances from {var[normal].min():.3g} to "
                f"{var[normal].max():.3g}): the mean and the variance must both reduce over the features, "
                "axis=-1 of the block, not over its rows")
    if const.size and np.abs(z[const]).max() > 0.05:
        return ("the constant rows (variance exactly 0) should come out as b: (x - mu) is 0 there, and eps keeps "
                "rsqrt(var + 1e-6) finite")
    tiny = rows.get("tiny", np.zeros(0, int))
    if tiny.size and np.abs(var[tiny] - want[tiny]).max() > 0.05:
        return (f"rows whose variance is about eps are scaled wrong (variance of the normalised row "
                f"{var[tiny].mean():.3g}, expected {want[tiny].mean():.3g}): eps is 1e-6, added to the variance "
                "inside rsqrt(var + 1e-6), not to the standard deviation")
    offset = rows.get("offset", np.zeros(0, int))
    if offset.size and np.abs(var[offset] - want[offset]).max() > 0.01:
        return ("rows with a large mean (|mean| ~ 1e3) lose precision: subtract the mean first and take "
                "var = mean((x - mu)**2); mean(x**2) - mu**2 cancels catastrophically in float32")
    return None


def _expect_layernorm(test: str, label: str, x: Any, g: Any, b: Any, out: Any, r: int, seed: int, tols: dict,
                      rows: dict[str, np.ndarray]) -> None:
    _expect(test, label, x, out, layernorm_ref(x, g, b), r, seed, tols, lambda: _layernorm_hint(x, g, b, out, rows))


def _layernorm_case(test: str, layernorm: Callable[..., Any], x: Any, g: Any, b: Any, r: int | None, seed: int,
                    tols: dict, rows: dict[str, np.ndarray]) -> None:
    label = _label("layernorm", "x, g, b", tuple(x.shape), x.dtype, r)
    _fused_call(test, label, layernorm, x, g, b, **_kw(r))
    out = _run(test, label, layernorm, x, g, b, **_kw(r))
    _expect_layernorm(test, label, x, g, b, out, r or 8, seed, tols, rows)


def layernorm_values(layernorm: Callable[..., Any]) -> None:
    """f32 and bf16, random g and b; rows with their own mean (|mean| <~ 6) and scale (0.5 to 2)."""
    test = "layernorm_values"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for cases, dtype, tols in ((LAYERNORM_F32_CASES, np.float32, LAYERNORM_F32),
                               (LAYERNORM_BF16_CASES, BF16, LAYERNORM_BF16)):
        for shape, r in cases:
            n, d = shape
            scale = rng.uniform(0.5, 2.0, (n, 1))
            offset = 2.0 * rng.standard_normal((n, 1))
            x = random_array(rng, shape, dtype, scale=scale, offset=offset)
            g, b = _params(rng, d, dtype)
            _layernorm_case(test, layernorm, x, g, b, r, seed, tols, {"normal": np.arange(n)})


def layernorm_edge(layernorm: Callable[..., Any]) -> None:
    """f32, four kinds of rows shuffled together: plain N(0, 1); mean +-1e3 (std 1); constant (variance 0,
    dyadic values so the f32 mean is exact); std 1e-3 (variance ~ eps, where eps = 1e-6 changes the answer)."""
    import jax.numpy as jnp

    test = "layernorm_edge"
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    (n, d), r = (64, 512), 16
    kinds = np.repeat(np.arange(4), n // 4)
    rng.shuffle(kinds)
    rows = {name: np.flatnonzero(kinds == k) for k, name in enumerate(("normal", "offset", "constant", "tiny"))}
    x = rng.standard_normal((n, d))
    x[rows["offset"]] += rng.choice([-1e3, 1e3], size=(len(rows["offset"]), 1))
    x[rows["constant"]] = rng.integers(-64, 65, size=(len(rows["constant"]), 1)) / 8.0
    x[rows["tiny"]] *= 1e-3
    x = jnp.asarray(x.astype(np.float32))
    g, b = _params(rng, d, np.float32)
    _layernorm_case(test, layernorm, x, g, b, r, seed, LAYERNORM_EDGE, rows)


def layernorm_fused(layernorm: Callable[..., Any]) -> None:
    """One pallas_call; grid (n // rows_per_block,); x and out in (rows_per_block, d) blocks at (i, 0);
    g and b each one whole block, the same at every step."""
    import jax

    test = "layernorm_fused"
    for shape, dtype, r in FUSED_CASES:
        label = _label("layernorm", "x, g, b", shape, dtype, r)
        x = jax.ShapeDtypeStruct(shape, dtype)
        p = jax.ShapeDtypeStruct((shape[1],), dtype)
        pc = _fused_call(test, label, layernorm, x, p, p, **_kw(r))
        _check_row_blocks(test, label, pc, shape, dtype, r or 8, n_params=2)
