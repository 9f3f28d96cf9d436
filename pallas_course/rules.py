"""The graded rules of LAB·1.1-1.3, one home: the notebooks' visible checks (pallas_course.lab_checks) and the
hidden checks (autograder.labs) apply these same functions, tolerances and diagnoses.

What stays hidden is only the grade's inputs (fresh random ones, more sizes), never a rule: every hidden case
belongs to a *family* (its dtype, whether its grid is square, whether its blocks are, the kind of rows...) read
off the case by the `*_families` functions below, and the visible checks run at least one case of every family
the grade covers (tests/test_families.py enumerates both and fails on a family the notebook never shows).

A rule returns None when the answer is right, else one sentence saying what is wrong (the caller puts the label
of the call in front). Nothing here imports `autograder`: this module ships to students.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

# ------------------------------------------------------------------------------------------------ tolerances
# One home, read by the grade and the notebook alike. `tol` is absolute and relative, `atol` replaces the
# absolute part (pallas_course.check.compare).

# add: one f32 add is correctly rounded (exact); a bf16 sum may be rounded once to bf16 or via f32.
ADD_F32 = dict(tol=0.0)
ADD_BF16 = dict(tol=2.0**-8)
# transposing moves values and never rounds
TRANSPOSE = dict(tol=0.0)
# matmul f32: a K-term dot in f32 is off from float64 by ~sqrt(K)·2^-24·|terms|, far below 1e-3 absolute and
# relative at K <= 512 with N(0, 1) inputs (|C| ~ 20); a missing or misplaced init or a wrong block misses by O(1).
MATMUL_F32 = dict(tol=1e-3)
# softmax f32: exp good to ~1 ulp, a sum of d <= 1024 positive terms in f32 to ~log2(d) ulp in a tree order
# (measured <= 5e-7 relative under interpret mode); 1e-5 leaves room for other reduction orders (the TPU's lane
# reductions). The absolute floor 1e-30 only forgives probabilities below f32's range (exp underflows at
# x - max < -87), never a visibly wrong one: softmax outputs are ~1/d.
SOFTMAX_F32 = dict(tol=1e-5, atol=1e-30)
# softmax bf16: the f32 result rounded once to bf16, at most 2**-8 relative (measured 0.996 * 2**-8); 2**-7,
# one bf16 ulp, allows either rounding of the f32 value.
SOFTMAX_BF16 = dict(tol=2.0**-7, atol=1e-30)
# LayerNorm f32: outputs are O(1); mean and variance in f32 carry ~log2(d) ulp (measured <= 1.2e-6 abs); 1e-5
# absolute + relative is ~10x that. eps = 1e-5 instead of 1e-6 moves a row of variance ~1 by ~4e-6 relative
# and a row of variance ~1e-6 (the edge rows) by ~30%.
LAYERNORM_F32 = dict(tol=1e-5)
# LayerNorm bf16: the f32 result rounded once to bf16 (<= 2**-8 relative, measured 0.0034 of 1 + |y|); 2**-7.
LAYERNORM_BF16 = dict(tol=2.0**-7)
# LayerNorm edge rows with |mean| = 1e3, f32: the kernel's f32 mean of d values near 1e3 is only good to a few
# ulp of 1e3 (ulp 6e-5), which shifts every output of the row (std 1): measured <= 2.4e-4 at d = 1024 for the
# two-pass variance. 3e-3 is >10x that; the one-pass variance mean(x**2) - mean(x)**2 is off by ~0.65 there.
LAYERNORM_EDGE = dict(tol=3e-3)
EPS = 1e-6
# column_sums f32: a sum of n <= 200 values of N(1, 1) in f32, in a blocked order, is off from float64 by a few ulp
# of the running sum (measured <= 1.5e-5 absolute under interpret mode, sums ~n); 1e-4 absolute and relative leaves
# room for other orders. A dropped tail or one row too many misses by ~1.
COLUMN_SUMS = dict(tol=1e-4)
# rowmax: a max picks one of its inputs, so it is exact in any order: tol 0. A running max started at 0 instead of
# -inf is off on every all-negative row (rules.rowmax_inputs makes half the rows so); a missing init reads NaN.
ROWMAX = dict(tol=0.0)
# rowmax_dense: the same maxima, in every one of the 128 lanes of its row: exact too
ROWMAX_DENSE = dict(tol=0.0)
LANES = 128  # a vreg's lanes (jax tpu_info num_lanes): rowmax_dense's lane-dense output is this wide
ROWMAX_NEGATIVE_OFFSET = 8.0  # every other row is N(0, 1) - 8: all its values negative
# matmul_acc's hints compare a bf16 output with what a mistake gives in float64: one bf16 rounding, 2**-8, twice
MATMUL_ACC_HINT_TOL = 2.0**-7

# ------------------------------------------------------------------------------------------------ families


def dtype_name(dtype: Any) -> str:
    import ml_dtypes  # noqa: F401 - registers bfloat16 with numpy

    return np.dtype(dtype).name


def array_families(shape: Iterable[int], dtype: Any) -> frozenset[str]:
    shape = tuple(shape)
    return frozenset({dtype_name(dtype), "square array" if len(set(shape)) == 1 else "rectangular array"})


def grid_families(grid: Iterable[int], blocks: Iterable[int]) -> frozenset[str]:
    """A grid whose axes differ catches swapped grid axes and index maps; rectangular blocks catch a block
    shape that is not transposed (or swapped operands)."""
    grid, blocks = tuple(grid), tuple(blocks)
    return frozenset(
        {
            "square grid" if len(set(grid)) == 1 else "non-square grid",
            "square blocks" if len(set(blocks)) == 1 else "rectangular blocks",
        }
    )


def transpose_families(shape: tuple[int, int], bm: int, bn: int, dtype: Any) -> frozenset[str]:
    m, n = shape
    return array_families(shape, dtype) | grid_families((m // bm, n // bn), (bm, bn))


def matmul_families(shape: tuple[int, int, int], bm: int, bn: int, bk: int, dtype: Any) -> frozenset[str]:
    m, k, n = shape
    # each pair of block sizes that differ is a family of its own: (bn, bk) swapped in B's BlockSpec shows only
    # where bn != bk, (bm, bk) in A's only where bm != bk
    pairs = {
        f"{p} != {q}" for p, q, u, v in (("bm", "bn", bm, bn), ("bn", "bk", bn, bk), ("bm", "bk", bm, bk)) if u != v
    } or {"bm = bn = bk"}
    return frozenset(
        {
            dtype_name(dtype),
            f"{'one K step' if k == bk else 'several K steps'}",
            "16 or more K steps" if k // bk >= 16 else "fewer than 16 K steps",
        }
        | pairs
    ) | grid_families((m // bm, n // bn), (bm, bn, bk))


def rowmax_families(shape: tuple[int, int], bm: int, bn: int, dtype: Any) -> frozenset[str]:
    """rowmax: the dtype, the grid's shape, whether bm differs from 8 (the default), several column steps."""
    m, n = shape
    return frozenset(
        {
            dtype_name(dtype),
            "several column steps" if n // bn > 1 else "one column step",
            "bm = 8" if bm == 8 else "bm != 8",
        }
    ) | grid_families((m // bm, n // bn), (bm, bn))


def rows_families(shape: tuple[int, int], dtype: Any, rows_per_block: int | None, kind: str = "") -> frozenset[str]:
    """softmax and LayerNorm: the dtype, the default rows_per_block or a chosen one, the kind of rows."""
    tags = {dtype_name(dtype), "default rows_per_block" if rows_per_block is None else "chosen rows_per_block"}
    return frozenset(tags | ({kind} if kind else set()))


def column_sums_families(shape: tuple[int, int], rows_per_block: int | None, dtype: Any = "float32") -> frozenset[str]:
    """column_sums: whether the rows end in a partial block (one of several, or the only one), the default
    rows_per_block or a chosen one, and x's dtype (LAB·1.3 grades its functions in float32 and bfloat16; the sums
    are float32 either way)."""
    n, r = shape[0], rows_per_block or 8
    edge = (
        "rows a multiple of rows_per_block"
        if n % r == 0
        else "one partial block only (n < rows_per_block)"
        if n < r
        else "a partial last block"
    )
    return frozenset(
        {
            edge,
            "default rows_per_block" if rows_per_block is None else "chosen rows_per_block",
            f"x in {dtype_name(dtype)}",
        }
    )


# ------------------------------------------------------------------------------------------------ references


def as_f64(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def gelu(x: np.ndarray) -> np.ndarray:
    """jax.nn.gelu's default: the tanh approximation."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def softmax_ref(x: Any) -> np.ndarray:
    x = as_f64(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def normalised(x: Any, eps: float = EPS) -> np.ndarray:
    x = as_f64(x)
    mu = x.mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)


def layernorm_ref(x: Any, g: Any, b: Any) -> np.ndarray:
    return normalised(x) * as_f64(g).reshape(-1) + as_f64(b).reshape(-1)


# ------------------------------------------------------------------------------------------------ inputs
# One generator per kind of input, seeded by the caller: the grade draws fresh seeds, the notebook fixed ones.


def random_array(
    rng: np.random.Generator, shape: Iterable[int], dtype: Any, *, scale: Any = 1.0, offset: Any = 0.0
) -> np.ndarray:
    """N(offset, scale) rounded to `dtype` by NumPy (ml_dtypes rounds to nearest even, as XLA's convert does)."""
    import ml_dtypes  # noqa: F401 - bfloat16

    return (rng.standard_normal(tuple(shape)) * scale + offset).astype(np.float32).astype(np.dtype(dtype))


def softmax_inputs(rng: np.random.Generator, shape: tuple[int, int], dtype: Any) -> np.ndarray:
    return random_array(rng, shape, dtype, scale=3.0)


def large_logits(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """f32 logits around +1e4 and -1e4 (a random sign per row, spread 3): exp overflows without the max."""
    return random_array(rng, shape, np.float32, scale=3.0, offset=rng.choice([-1e4, 1e4], size=(shape[0], 1)))


def column_sums_inputs(rng: np.random.Generator, shape: tuple[int, int], dtype: Any = np.float32) -> np.ndarray:
    """N(1, 1) in `dtype`: every row adds about 1 to each sum, so a dropped or doubled row shows."""
    return random_array(rng, shape, dtype, offset=1.0)


def column_sums_ref(x: Any) -> np.ndarray:
    """The (1, d) sums of x's rows, in float64."""
    return as_f64(x).sum(axis=0, keepdims=True)


def rowmax_inputs(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """f32 rows of N(0, 1), every other one shifted down by ROWMAX_NEGATIVE_OFFSET: all-negative rows, whose max a
    running max started at 0 gets wrong."""
    x = rng.standard_normal(shape)
    x[1::2] -= ROWMAX_NEGATIVE_OFFSET
    return x.astype(np.float32)


def layernorm_params(rng: np.random.Generator, d: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    g = rng.uniform(0.5, 1.5, d).astype(np.float32)  # away from 0, so (out - b) / g recovers the normalised rows
    b = (0.5 * rng.standard_normal(d)).astype(np.float32)
    return g.astype(np.dtype(dtype)), b.astype(np.dtype(dtype))


def layernorm_inputs(rng: np.random.Generator, shape: tuple[int, int], dtype: Any) -> tuple[np.ndarray, ...]:
    """Rows with their own mean (|mean| <~ 6) and scale (0.5 to 2: a variance down to 0.25, where eps = 1e-5
    instead of 1e-6 shows), random g and b."""
    n, d = shape
    x = random_array(rng, shape, dtype, scale=rng.uniform(0.5, 2.0, (n, 1)), offset=2.0 * rng.standard_normal((n, 1)))
    return (x, *layernorm_params(rng, d, dtype))


def layernorm_edge_inputs(rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """f32, four kinds of rows shuffled together: plain N(0, 1); mean +-1e3 (std 1); constant (variance 0, dyadic
    values so the f32 mean is exact); std 1e-3 (variance ~ eps, where eps = 1e-6 changes the answer)."""
    n, d = shape
    kinds = np.repeat(np.arange(4), n // 4)
    rng.shuffle(kinds)
    x = rng.standard_normal((n, d))
    offset, constant, tiny = (np.flatnonzero(kinds == k) for k in (1, 2, 3))
    x[offset] += rng.choice([-1e3, 1e3], size=(len(offset), 1))
    x[constant] = rng.integers(-64, 65, size=(len(constant), 1)) / 8.0
    x[tiny] *= 1e-3
    return (x.astype(np.float32), *layernorm_params(rng, d, np.float32))


# ------------------------------------------------------------------------------------------------ structure


def one_kernel_problem(label: str, t: Any, outside_min_size: int = 0) -> str | None:
    """A kernel is one pallas_call with no computation around it (work on operands smaller than
    `outside_min_size` elements, such as casting a LayerNorm's (d,) scale, is allowed)."""
    if not t.pallas_calls:
        ops = ", ".join(dict.fromkeys(t.outside)) or "no operations at all"
        return (
            f"{label} launches no pallas_call; it computed with XLA ({ops}). The work must happen inside a "
            "Pallas kernel"
        )
    if len(t.pallas_calls) > 1:
        return (
            f"{label} launches {len(t.pallas_calls)} pallas_calls; this kernel should be one pallas_call (one HBM "
            "round trip)"
        )
    work = t.work_outside(outside_min_size)
    if work:
        ops = ", ".join(dict.fromkeys(work))
        gelu_hint = (
            " (a GELU applied to the pallas_call's result: apply jax.nn.gelu to the accumulator on the last "
            "K step, inside the kernel)"
            if "tanh" in work or "erf" in work
            else ""
        )
        return (
            f"{label} computes outside its kernel ({ops}){gelu_hint}; move that work into the kernel body (a cast too: "
            "cast with .astype(o_ref.dtype) before the store) so the array makes one trip through HBM"
        )
    return None


def _equal(what: str, got: Any, want: Any, hint: str) -> str | None:
    return None if got == want else f"{what} is {got}, expected {want}; {hint}"


def transpose_schedule_problem(label: str, pc: Any, shape: tuple[int, int], bm: int, bn: int) -> str | None:
    """Grid (m/bm, n/bn); in block (bm, bn) at (i, j); out block (bn, bm) at (j, i)."""
    m, n = shape
    grid = (m // bm, n // bn)
    if _walks_in_the_other_order(pc, grid, bm, bn):
        # on a square grid the same kernel reads as both index maps swapped: name both readings
        what = (
            "its axes are in the other order (its steps are (j, i))"
            if pc.grid != grid
            else "its step (i, j) reads block (j, i) of x and writes block (i, j): the grid's axes are in the other "
            "order from its index maps (steps (j, i)), or both index maps are swapped"
        )
        return (
            f"the grid of {label} is {pc.grid}; {what}. Each step still transposes one block, but the lab's "
            "schedule walks x's blocks row by row: grid (m // bm, n // bn), and step (i, j) reads block (i, j), "
            "lambda i, j: (i, j), and writes block (j, i), lambda i, j: (j, i)"
        )
    if pc.grid == grid[::-1] != grid:
        return (
            f"the grid of {label} is {pc.grid}, expected {grid}: its axes are swapped. One grid step per "
            "(bm, bn) block of x, so the grid is (m // bm, n // bn), and step (i, j) reads block (i, j)"
        )
    wrong = _equal(
        f"the grid of {label}",
        pc.grid,
        grid,
        "one grid step per (bm, bn) block of x, so the grid is (m // bm, n // bn)",
    )
    if wrong:
        return wrong
    if len(pc.inputs) != 1 or len(pc.outputs) != 1:
        return (
            f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected one BlockSpec in "
            "in_specs and one in out_specs"
        )
    src, dst = pc.inputs[0], pc.outputs[0]
    wrong = _equal(
        f"the input block of {label}",
        tuple(src.block_shape),
        (bm, bn),
        "the input BlockSpec should carve x into (bm, bn) blocks",
    ) or _equal(
        f"the output block of {label}",
        tuple(dst.block_shape),
        (bn, bm),
        "a transposed (bm, bn) block is a (bn, bm) block",
    )
    if wrong:
        return wrong
    for point in pc.grid_points():
        i, j = point
        got_in, got_out = src.block_index(*point), dst.block_index(*point)
        if got_in == (j, i) != (i, j) and got_out == (i, j):
            return (
                f"{label}: both index maps are swapped: grid step {point} reads block {got_in} of x and writes "
                f"block {got_out}; step (i, j) reads block (i, j) of x, lambda i, j: (i, j), and writes its "
                "transpose at block (j, i), lambda i, j: (j, i)"
            )
        if got_in != (i, j):
            return (
                f"{label}: the input index map sends grid point {point} to block {got_in}; step (i, j) should "
                "read block (i, j) of x"
            )
        if got_out != (j, i):
            return (
                f"{label}: the output index map sends grid point {point} to block {got_out}; the transpose of "
                f"block (i, j) lands at block ({j}, {i}), so the out index map must swap its indices"
            )
    return None


def _walks_in_the_other_order(pc: Any, grid: tuple[int, int], bm: int, bn: int) -> bool:
    """A transpose whose grid is (n // bn, m // bm) and whose step (j, i) reads block (i, j) and writes block
    (j, i): right values, the other schedule (the axes in the other order; on a square grid the maps read swapped)."""
    if pc.grid != grid[::-1] or len(pc.inputs) != 1 or len(pc.outputs) != 1:
        return False
    src, dst = pc.inputs[0], pc.outputs[0]
    if tuple(src.block_shape) != (bm, bn) or tuple(dst.block_shape) != (bn, bm) or grid[0] == grid[1] == 1:
        return False
    try:
        return all(src.block_index(j, i) == (i, j) and dst.block_index(j, i) == (j, i) for j, i in pc.grid_points())
    except Exception:  # noqa: BLE001 - an index map that fails is named by the checks below
        return False


def out_dtype_problem(label: str, pc: Any, dtype: Any) -> str | None:
    got = pc.outputs[0].dtype if pc.outputs else None
    if got is not None and np.dtype(got) != np.dtype(dtype):
        return (
            f"the output of {label} is {np.dtype(got).name}, expected {dtype_name(dtype)}: out_shape carries "
            "the input's dtype, jax.ShapeDtypeStruct(shape, x.dtype)"
        )
    return None


def matmul_schedule_problem(label: str, pc: Any, shape: tuple[int, int, int], bm: int, bn: int, bk: int) -> str | None:
    """Grid (M/bm, N/bn, K/bk) with K innermost; blocks (bm, bk), (bk, bn) -> (bm, bn) at (i, k), (k, j) -> (i, j)."""
    m, k, n = shape
    grid = (m // bm, n // bn, k // bk)
    if pc.grid != grid and sorted(pc.grid) == sorted(grid) and pc.grid[-1] != k // bk:
        return (
            f"the grid of {label} is {pc.grid}; K must be the last (innermost) grid axis, {grid}, so each "
            "output block's K steps run back to back while it stays in VMEM"
        )
    wrong = _equal(
        f"the grid of {label}",
        pc.grid,
        grid,
        "one step per (bm, bn) output block and bk slice of K: grid=(m // bm, n // bn, k // bk)",
    )
    if wrong:
        return wrong
    if len(pc.inputs) != 2 or len(pc.outputs) != 1:
        return (
            f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected in_specs for a and b "
            "and one out_specs"
        )
    a_spec, b_spec = pc.inputs
    o_spec = pc.outputs[0]
    for spec, want, name, hint in (
        (a_spec, (bm, bk), "a", "a is carved into (bm, bk) blocks"),
        (b_spec, (bk, bn), "b", "b is carved into (bk, bn) blocks"),
        (o_spec, (bm, bn), "output", "C is carved into (bm, bn) blocks"),
    ):
        wrong = _equal(
            f"the output block of {label}" if name == "output" else f"the block of {name} in {label}",
            tuple(spec.block_shape),
            want,
            hint,
        )
        if wrong:
            return wrong
    for point in pc.grid_points():
        i, j, kk = point
        for spec, want, name in ((a_spec, (i, kk), "a"), (b_spec, (kk, j), "b"), (o_spec, (i, j), "the output")):
            got = spec.block_index(*point)
            if got != want:
                return (
                    f"{label}: the index map of {name} sends grid step {point} to block {got}; step (i, j, k) "
                    f"needs block {want} of {name}"
                )
    return accumulated_axis_parallel_problem(label, pc, "the same output block")


def semantics_length_problem(grid: Sequence[int], semantics: Sequence[Any] | None) -> str | None:
    """dimension_semantics with a length other than the grid's: the words of the notebook's check (through
    accumulated_axis_parallel_problem) and of the grade, where the grader's judge refuses to rebuild such a call
    (autograder.judge.parse; interpret mode fails on it, safe_zip of the grid and the semantics). One home."""
    sem = tuple(str(s).lower().split(".")[-1] for s in semantics or ())
    grid = tuple(int(g) for g in grid)
    if not sem or len(sem) == len(grid):
        return None
    return (
        f"dimension_semantics has {len(sem)} entries {sem} for a {len(grid)}-axis grid {grid}: one entry per grid "
        "axis, in the grid's order (the TPU compiler refuses lengths that differ)"
        + ("; the last, the axis whose steps add into one output block, \"arbitrary\"" if len(grid) > 1 else "")
    )


def accumulated_axis_parallel_problem(label: str, pc: Any, what: str) -> str | None:
    """The last grid axis carries an accumulator (`what`): marked "parallel" it may run out of order, or on the
    other TensorCore of a megacore chip at once (a race)."""
    semantics = tuple(str(s) for s in pc.dimension_semantics or ())
    wrong = semantics_length_problem(pc.grid, semantics)
    if wrong:
        return f"{label}: {wrong}"
    if semantics and "parallel" in semantics[-1].lower():
        return (
            f"{label} marks its last grid axis \"parallel\" (dimension_semantics={semantics}), but its steps all "
            f"add into {what}: they must run in order, on one core; make it \"arbitrary\" (TPU interpret mode "
            "runs a \"parallel\" axis in a shuffled order, so the zeroing lands mid-run)"
        )
    return None


def rowmax_schedule_problem(
    label: str, pc: Any, shape: tuple[int, int], bm: int, bn: int, out_lanes: int = 1
) -> str | None:
    """Grid (m/bm, n/bn), the reduced axis last; x block (bm, bn) at (i, j) -> out block (bm, out_lanes) at (i, 0)
    (1 for rowmax, LANES for rowmax_dense); the reduced axis not "parallel"."""
    m, n = shape
    grid = (m // bm, n // bn)
    if pc.grid == grid[::-1] != grid:
        return (
            f"the grid of {label} is {pc.grid}, expected {grid}: the column axis, the one reduced over, must be the "
            "last (innermost) grid axis, so each row block's column steps run back to back while its output "
            "block stays in VMEM"
        )
    wrong = _equal(
        f"the grid of {label}",
        pc.grid,
        grid,
        "one step per (bm, bn) block of x: grid=(m // bm, n // bn), the reduced axis last",
    )
    if wrong:
        return wrong
    if len(pc.inputs) != 1 or len(pc.outputs) != 1:
        return (
            f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected one BlockSpec in "
            "in_specs (x) and one in out_specs"
        )
    src, dst = pc.inputs[0], pc.outputs[0]
    wrong = _equal(
        f"the block of x in {label}", tuple(src.block_shape), (bm, bn), "x is carved into (bm, bn) blocks"
    ) or _equal(
        f"the output block of {label}",
        tuple(dst.block_shape),
        (bm, out_lanes),
        "the output (m, 1) is carved into (bm, 1) blocks, one max per row"
        if out_lanes == 1
        else f"the lane-dense output (m, {out_lanes}) is carved into (bm, {out_lanes}) blocks: each row's max in all "
        f"{out_lanes} lanes of its row, one whole vreg row (an (m, 1) output fills 1 lane of {out_lanes})",
    )
    if wrong:
        return wrong
    for point in pc.grid_points():
        i, j = point
        got_in, got_out = src.block_index(*point), dst.block_index(*point)
        if got_in != (i, j):
            return (
                f"{label}: the index map of x sends grid step {point} to block {got_in}; step (i, j) reads block "
                f"({i}, {j}) of x, lambda i, j: (i, j)"
            )
        if got_out != (i, 0):
            return (
                f"{label}: the output index map sends grid step {point} to block {got_out}; every column step of "
                f"row block i updates the same output block ({i}, 0), so the map ignores j: lambda i, j: (i, 0)"
            )
    return accumulated_axis_parallel_problem(label, pc, "the same output block")


def rowmax_dense_ref(x: Any) -> np.ndarray:
    """Each row's maximum in all LANES lanes of its row, float64: (m, LANES)."""
    return np.repeat(as_f64(x).max(axis=1, keepdims=True), LANES, axis=1)


def rowmax_dense_schedule_problem(label: str, pc: Any, shape: tuple[int, int], bm: int, bn: int) -> str | None:
    """rowmax's schedule with a lane-dense (bm, LANES) output block, and no reduction across lanes on every column
    step: the running max is carried elementwise (the VPU's work) and reduced across lanes once, on the last step."""
    problem = rowmax_schedule_problem(label, pc, shape, bm, bn, out_lanes=LANES)
    if problem:
        return problem
    every = getattr(pc, "lane_reductions_every_step", ())
    if every:
        return (
            f"{label} reduces across lanes ({', '.join(sorted(set(every)))} over the last axis) on every column "
            "step: that is the slow pattern this variant removes (Pallas TPU details, \"Reductions\": reductions "
            "over the last axis are the slowest). Fold each 128-lane slice of the block into the (bm, 128) running "
            "max with jnp.maximum on every step, and reduce across lanes once, under "
            "@pl.when(pl.program_id(1) == pl.num_programs(1) - 1)"
        )
    return None


def rowmax_dense_hint(x: Any, out: Any, bn: int) -> str | None:
    """Why rowmax_dense's values are wrong, when they are a named mistake's (None otherwise)."""
    X, got = as_f64(x), as_f64(out)
    m, n = X.shape
    if got.shape != (m, LANES) or n % LANES:
        return None
    want = X.max(axis=1, keepdims=True)
    lanes = X.reshape(m, n // LANES, LANES).max(axis=1)  # the running max, lane by lane, never reduced
    if np.array_equal(got, lanes) and not np.array_equal(lanes, np.repeat(want, LANES, axis=1)):
        return (
            "each lane holds the max of its own columns (c, c + 128, ...) only: the (bm, 128) running max is never "
            "reduced across lanes; on the last column step store jnp.broadcast_to(jnp.max(acc, axis=1, "
            "keepdims=True), o_ref.shape)"
        )
    if np.array_equal(got[:, :1], want) and not np.array_equal(got, np.repeat(want, LANES, axis=1)):
        return (
            "lane 0 of each row holds the row's max and the other lanes do not: broadcast the max to all 128 lanes, "
            "jnp.broadcast_to(row_max, o_ref.shape)"
        )
    if np.isneginf(got).all():
        return "every output is -inf, the start: the running max is never stored; store it on every column step"
    if np.array_equal(got, np.repeat(np.maximum(want, 0.0), LANES, axis=1)) and (want < 0).any():
        return (
            "the rows whose values are all negative come out 0: the running max starts at 0; start it at -inf on "
            "the first column step"
        )
    return None


def rowmax_hint(x: Any, out: Any, bn: int, bm: int | None = None) -> str | None:
    """Why rowmax's values are wrong, when they are a named mistake's (None otherwise)."""
    X, got = as_f64(x), as_f64(out)
    m, n = X.shape
    if got.shape != (m, 1):
        return None
    want = X.max(axis=1, keepdims=True)
    if np.isneginf(got).all():
        return (
            "every output is -inf, the start: the fold is computed but never stored; store it on every step, "
            "o_ref[...] = jnp.maximum(o_ref[...], jnp.max(x_ref[...], axis=1, keepdims=True))"
        )
    if bm and m % bm == 0 and m // bm >= 2:
        blocks = X.reshape(m // bm, bm, n)
        if np.array_equal(got, np.repeat(blocks.max(axis=(1, 2)), bm)[:, None]):
            return (
                "every row of a row block comes out as the same value, the whole block's max: jnp.max with no axis "
                "reduces the block to one number; reduce over its columns only, axis=1, keepdims=True"
            )
        first_last = blocks[0, :, -bn:].max(axis=1)
        if (
            np.array_equal(got[:bm, 0], first_last)
            and not np.array_equal(got[bm:], want[bm:])
            and not np.array_equal(first_last, want[:bm, 0])
        ):
            return (
                "the first row block holds its last column block's max alone and the later row blocks are wrong: "
                "the -inf start runs on every column step of row block 0 and never for the others, so it is keyed "
                "on the row axis, pl.program_id(0); key it on the reduced axis, @pl.when(pl.program_id(1) == 0)"
            )
    if np.array_equal(got, np.maximum(want, 0.0)) and (want < 0).any():
        return (
            "the rows whose values are all negative come out 0: the running max starts at 0, which is larger "
            "than all of them; start it at -inf, jnp.full_like(o_ref, -jnp.inf), on the first column step"
        )
    if n // bn >= 2:
        if np.array_equal(got, X[:, -bn:].max(axis=1, keepdims=True)):
            return (
                "each output holds the last column block's max alone: every step overwrites it; combine it with "
                "what is there, o_ref[...] = jnp.maximum(o_ref[...], ...), and reset it only on the first column "
                "step, @pl.when(pl.program_id(1) == 0)"
            )
        if np.array_equal(got, X[:, :bn].max(axis=1, keepdims=True)):
            return (
                "each output holds the first column block's max alone: the later column steps change nothing (the "
                "max is stored under pl.when(j == 0)); combine on every step"
            )
    return None


def matmul_semantics_problem(label: str, pc: Any) -> str | None:
    """dimension_semantics ("parallel", "parallel", "arbitrary"): the (i, j) blocks are independent, K accumulates."""
    sem = tuple(str(s) for s in pc.dimension_semantics or ())
    fix = 'compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))'
    if not sem:
        return (
            f"{label} sets no dimension_semantics, so every grid axis is \"arbitrary\" and a chip with two "
            f"TensorCores behind one device (megacore: v4, v5p) runs the whole grid on one of them; pass {fix}"
        )
    problem = accumulated_axis_parallel_problem(label, pc, "the same accumulator")
    if problem:
        return problem
    if len(sem) != 3 or any("parallel" not in s.lower() for s in sem[:2]):
        return (
            f"{label} marks its grid axes {sem}: the M and N axes compute independent output blocks, so mark "
            f"them \"parallel\" (a megacore chip splits them between its two TensorCores) and K \"arbitrary\": {fix}"
        )
    return None


F32_PRECISION_FIX = "pass precision=jax.lax.Precision.HIGHEST to jnp.dot"


BF16_PRECISION_FIX = (
    "choose the precision from the blocks' dtype, precision = jax.lax.Precision.HIGHEST if "
    "a_ref.dtype == jnp.float32 else None"
)


def matmul_precision_problem(label: str, pc: Any, dtype: Any) -> str | None:
    """The lab's precision rule on every dtype it runs matmul on: HIGHEST for f32 blocks (f32_precision_problem); on
    bf16 blocks no HIGHEST, which the TPU compiler refuses ("Bad lhs type", v5e and v6e) and interpret mode runs."""
    if dtype_name(dtype) == "float32":
        return f32_precision_problem(label, pc)
    if any(p.split("/")[0] == "HIGHEST" or p.endswith("/HIGHEST") for p in pc.dot_precisions):
        return (
            f"the dot in the kernel of {label} asks for precision HIGHEST on bfloat16 blocks, which the TPU compiler "
            "refuses (\"Bad lhs type\", v5e and v6e; interpret mode runs it): one MXU pass multiplies bf16 exactly, "
            f"so bf16 blocks need no request; {BF16_PRECISION_FIX}"
        )
    return None


def f32_precision_problem(label: str, pc: Any) -> str | None:
    """An f32 matmul's dots ask for precision HIGHEST: at the default precision the MXU rounds f32 inputs to bf16.
    Read off the trace: interpret mode on a CPU multiplies in full f32 whatever the dot asks."""
    for p in pc.dot_precisions:
        if p == "HIGHEST":
            continue
        if p == "DEFAULT":
            return (
                f"the dot in the kernel of {label} asks for the default precision: on a TPU the MXU then rounds its "
                "f32 inputs to bfloat16 (8 significant bits) before multiplying, so the f32 matmul is only "
                "bf16-accurate there, while interpret mode on a CPU multiplies in full f32 and hides it; "
                + F32_PRECISION_FIX
            )
        if "/" in p:
            return (
                f"the dot in the kernel of {label} asks a different precision per operand ({p}), which the TPU "
                f"lowering refuses (\"Per-operand dot precision unsupported\"); {F32_PRECISION_FIX}"
            )
        return (
            f"the dot in the kernel of {label} asks for precision {p}; inside a kernel the TPU lowering takes "
            f"DEFAULT (bf16 inputs) or HIGHEST (f32) only; {F32_PRECISION_FIX}"
        )
    return None


# "Computes a GELU" is judged by what the epilogue computes, not by which primitives appear: matmul_gelu is run with
# b the identity matrix and one K step, so its output is the GELU of a itself, and compared with both GELU forms
# (any rewrite keeps its marks: tanh(z) = 2·sigmoid(2z) - 1, the erf written out, jax.nn.gelu either way).
# ((M, K, N), bm, bn, bk): one K step (bk = K), so a GELU applied on every K step is applied once here too (that
# mistake is the values test's to catch); square, so b can be the identity.
GELU_PROBE = ((256, 256, 256), 128, 128, 256)
GELU_PROBE_RANGE = 6.0  # a spans [-6, 6]: both tails and the bend, where the tanh and erf forms differ most
# What makes a GELU here is its shape, not its digits: how close to either form is matmul_gelu_values's to judge
# (at 1e-3), with its own diagnosis (a mistyped constant, a GELU on the inputs). So the probe asks only whether the
# kernel's epilogue computes a GELU-shaped function of the product, measured against the nearer form, in units of
# 1 + |x| on a in [-6, 6]: either form in f32 is within 1.7e-7 (jax.nn.gelu both ways, the sigmoid and erf
# rewrites, XLA on the CPU), pl.reciprocal(approx=True) within 3e-3, 0.44715 typed for 0.044715 within 0.041,
# x * sigmoid(x) within 0.070, a ReLU within 0.10; what is no GELU is far: a @ b unchanged (no epilogue) and zero
# are off by 0.86, tanh by 0.71. 0.25 lies between.
GELU_PROBE_TOL = 0.25


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """The exact GELU, x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2))), in float64."""
    import math

    x = as_f64(x)
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def gelu_probe_inputs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) for the GELU probe: a spread over [-6, 6] (a fixed grid of the range, then random values), b the
    identity, so a @ b is a exactly and the kernel's output is its epilogue applied to a."""
    (m, k, n), _, _, _ = GELU_PROBE
    grid = np.linspace(-GELU_PROBE_RANGE, GELU_PROBE_RANGE, m * k // 4)
    rest = rng.uniform(-GELU_PROBE_RANGE, GELU_PROBE_RANGE, m * k - grid.size)
    a = rng.permutation(np.concatenate([grid, rest])).reshape(m, k).astype(np.float32)
    return a, np.eye(k, n, dtype=np.float32)


def gelu_epilogue_problem(label: str, a: Any, out: Any) -> str | None:
    """None when matmul_gelu(a, identity) is a GELU of a (tanh form or exact, within GELU_PROBE_TOL), else what it
    computes instead."""
    x, got = as_f64(a), as_f64(out)
    if got.shape != x.shape:
        return f"the kernel of {label} returns shape {got.shape}, expected {x.shape}"
    if not np.isfinite(got).all():
        return (
            f"the kernel of {label} computes no GELU: {int((~np.isfinite(got)).sum())} of its outputs are NaN or "
            "inf where gelu(a) is finite"
        )
    bound = GELU_PROBE_TOL * (1.0 + np.abs(x))  # a GELU's shape (the values test judges its digits)
    refs = {"the tanh form": gelu(x), "the exact (erf) form": gelu_exact(x)}
    if any((np.abs(got - ref) <= bound).all() for ref in refs.values()):
        return None
    if (np.abs(got - x) <= bound).all():
        return (
            f"the kernel of {label} computes no GELU: with b the identity matrix its output is a itself (a @ b "
            "unchanged); apply jax.nn.gelu to the accumulator on the last K step"
        )
    name, ref = min(refs.items(), key=lambda kv: float(np.max(np.abs(got - kv[1]) - bound)))
    i = np.unravel_index(int(np.argmax(np.abs(got - ref) - bound)), x.shape)
    return (
        f"the kernel of {label} computes no GELU: with b the identity matrix its output should be gelu(a) (either "
        f"form, within {GELU_PROBE_TOL:g} of 1 + |a|), but at a = {x[i]:.4g} it is "
        f"{got[i]:.6g} where {name} gives {ref[i]:.6g}; apply jax.nn.gelu to the accumulator on the last K step"
    )


def f32_dot_problem(label: str, pc: Any) -> str | None:
    # XLA on a CPU may skip a bf16 rounding between a dot and an f32 add (excess precision), so a dot that returns
    # bf16 can look right here and still round every partial product on a TPU: read it off the trace.
    for dtype in pc.kernel_out_dtypes("dot_general"):
        if dtype != "float32":
            return (
                f"the dot in the kernel of {label} returns {dtype}, so every partial product is rounded before "
                "it is added: pass preferred_element_type=jnp.float32"
            )
    return None


def f32_accumulator_problem(label: str, pc: Any) -> str | None:
    """A bf16 matmul accumulates in an f32 scratch: a scratch of another dtype rounds the running sum."""
    for shape, dtype, _space in pc.scratch:
        if np.dtype(dtype) != np.dtype(np.float32):
            return (
                f"{label} keeps its accumulator in a {np.dtype(dtype).name} scratch {tuple(shape)}, so the running sum "
                "is rounded on every K step: use an f32 scratch, scratch_shapes=[pltpu.VMEM((bm, bn), "
                "jnp.float32)], and cast once when storing into o_ref"
            )
    return None


def whole_block(block_shape: Iterable[int | None], array_shape: Iterable[int]) -> bool:
    """The block is the whole array: each dim equal, or squeezed (None, pl.Squeezed()) over a dim of size 1."""
    block_shape, array_shape = tuple(block_shape), tuple(array_shape)
    return len(block_shape) == len(array_shape) and all(
        b == a or (b is None and a == 1) for b, a in zip(block_shape, array_shape)
    )


def rows_parallel_problem(label: str, pc: Any) -> str | None:
    """The row axis marked "parallel": rows are independent, and on a megacore chip (v4, v5p: two TensorCores, one
    JAX device) only a "parallel" axis is split between the cores (Pallas TPU details, "Multicore TPU
    configurations"). GATE 01 times this schedule."""
    semantics = tuple(str(s).lower() for s in pc.dimension_semantics or ())
    if semantics and "parallel" in semantics[0]:
        return None
    said = f"marks it {semantics}" if semantics else "sets no dimension_semantics, so it is \"arbitrary\""
    return (
        f"{label} {said}: its rows are independent, so mark the row axis \"parallel\", compiler_params="
        "pltpu.CompilerParams(dimension_semantics=(\"parallel\",)); on a chip whose two TensorCores form one device "
        "(v4, v5p) the row blocks are then split between them, else one core does them all"
    )


def row_blocks_problem(label: str, pc: Any, shape: tuple[int, int], dtype: Any, r: int, n_params: int) -> str | None:
    """grid (n // r,); x (and out) in (r, d) blocks at (i, 0); each of the n_params parameters whole, at every step;
    the row axis "parallel"."""
    n, d = shape
    split = pc.inputs[0].block_shape[-1] if pc.inputs and pc.inputs[0].block_shape else None
    if split is not None and split < d:
        return (
            f"the input x block of {label} is {tuple(pc.inputs[0].block_shape)}: the feature axis is split into "
            f"blocks of {split}, so each step would normalise its piece by that piece's own statistics; a block "
            f"is rows_per_block whole rows, (rows_per_block, d) = ({r}, {d}), on the grid (n // rows_per_block,)"
        )
    wrong = _equal(
        f"the grid of {label}",
        pc.grid,
        (n // r,),
        "one grid step per block of rows_per_block rows, so the grid is (n // rows_per_block,)",
    )
    if wrong:
        return wrong
    if len(pc.inputs) != 1 + n_params or len(pc.outputs) != 1:
        return (
            f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected {1 + n_params} "
            "BlockSpecs in in_specs and one in out_specs"
        )
    out = pc.outputs[0]
    wrong = _equal(
        f"the output of {label}",
        (tuple(out.array_shape), np.dtype(out.dtype).name),
        (tuple(shape), dtype_name(dtype)),
        "out_shape is x's shape and dtype",
    )
    if wrong:
        return wrong
    for blk, what in ((pc.inputs[0], "input x"), (out, "output")):
        wrong = _equal(
            f"the {what} block of {label}",
            tuple(blk.block_shape),
            (r, d),
            "a block is rows_per_block whole rows: (rows_per_block, d); the feature axis is not split "
            "because each row's reduction needs all of it",
        )
        if wrong:
            return wrong
    for point in pc.grid_points():
        (i,) = point
        for blk, what in ((pc.inputs[0], "input x"), (out, "output")):
            got = blk.block_index(*point)
            if got != (i, 0):
                return (
                    f"{label}: the {what} index map sends grid step {i} to block {got}; step i reads and writes "
                    "row block i, all features: lambda i: (i, 0)"
                )
    for k, blk in enumerate(pc.inputs[1:]):
        what = "g" if k == 0 else "b"
        if blk.array_shape and int(np.prod(blk.array_shape)) != d:
            return (
                f"{label}: the {what} operand has shape {blk.array_shape}; expected the {d} values of {what}, "
                f"e.g. {what}.reshape(1, -1)"
            )
        if not whole_block(blk.block_shape, blk.array_shape):
            return (
                f"{label}: {what} is carved into {blk.block_shape} blocks of {blk.array_shape}; every step "
                f"needs all of {what}, one whole block"
            )
        for point in pc.grid_points():
            got = blk.block_index(*point)
            if any(got):
                return (
                    f"{label}: the {what} index map sends grid step {point[0]} to block {got}; every step "
                    f"reads the one block of {what}: lambda i: (0, 0)"
                )
    return rows_parallel_problem(label, pc)


# ------------------------------------------------------------------------------------------------ diagnoses


def _gelu_variants() -> list[tuple[str, Any]]:
    """GELUs written with a wrong constant (or none), as a student types them: (what, the function)."""

    def tanh_form(c: float, k: float, half: float = 0.5) -> Any:
        return lambda x: half * x * (1.0 + np.tanh(k * (x + c * x**3)))

    root = np.sqrt(2.0 / np.pi)
    return [
        ("0.0447 in place of 0.044715", tanh_form(0.0447, root)),
        ("0.44715 in place of 0.044715", tanh_form(0.44715, root)),
        ("no cubic term (0.044715 x**3 left out)", tanh_form(0.0, root)),
        ("sqrt(2 * pi) in place of sqrt(2 / pi)", tanh_form(0.044715, np.sqrt(2.0 * np.pi))),
        ("2 / pi in place of sqrt(2 / pi)", tanh_form(0.044715, 2.0 / np.pi)),
        ("no sqrt(2 / pi) factor", tanh_form(0.044715, 1.0)),
        ("no 0.5 in front", tanh_form(0.044715, root, 1.0)),
        ("the sigmoid approximation x * sigmoid(1.702 x)", lambda x: x / (1.0 + np.exp(-1.702 * x))),
    ]


def _wrong_axis_init(
    A: np.ndarray, B: np.ndarray, got: np.ndarray, bm: int, bn: int, bk: int, post: Any, tol: float
) -> str | None:
    """The zeroing guarded by another grid axis than K: the blocks at index 0 of that axis are zeroed on every K step
    (only the last K step survives there), the others never."""
    m, n = got.shape
    if m % bm or n % bn:
        return None
    last = post(A[:, -bk:] @ B[-bk:, :])
    gi, gj = m // bm, n // bn
    only_last = np.array(
        [
            [
                np.allclose(
                    got[i * bm : (i + 1) * bm, j * bn : (j + 1) * bn],
                    last[i * bm : (i + 1) * bm, j * bn : (j + 1) * bn],
                    rtol=tol,
                    atol=tol,
                )
                for j in range(gj)
            ]
            for i in range(gi)
        ]
    )
    for axis, name, grid in ((0, "i", gi), (1, "j", gj)):
        if grid < 2:
            continue
        at_zero = np.zeros_like(only_last)
        if axis == 0:
            at_zero[0, :] = True
        else:
            at_zero[:, 0] = True
        if (only_last == at_zero).all():
            return (
                f"the output blocks with {name} = 0 hold the last K step's product alone and the others are further "
                f"off: the accumulator is zeroed when pl.program_id({axis}) == 0 (the {name} axis), so those blocks "
                "are zeroed on every K step and the rest never; zero it on the first K step, "
                "@pl.when(pl.program_id(2) == 0)"
            )
    return None


def matmul_hint(
    a: Any, b: Any, out: Any, bk: int, epilogue: Any = None, tol: float = 1e-3, blocks: tuple[int, int] | None = None
) -> str | None:
    """Why a tiled matmul's values are wrong, when the output is what a named mistake gives (None otherwise): one
    K step's product alone, the zeroing on another grid axis (`blocks`, (bm, bn), given), and for a matmul with a
    GELU epilogue: the GELU on the inputs, or a GELU with a wrong constant."""
    A, B, got = as_f64(a), as_f64(b), as_f64(out)
    k = A.shape[1]
    if got.shape != (A.shape[0], B.shape[1]):
        return None
    post = epilogue or (lambda c: c)
    with np.errstate(all="ignore"):
        if k // bk >= 2 and np.allclose(got, post(A[:, -bk:] @ B[-bk:, :]), rtol=tol, atol=tol):
            return (
                "the output is the last K step's product alone: each K step overwrites it (o_ref[...] = ...) or "
                "zeroes it again; accumulate with += and zero only on the first K step, "
                "@pl.when(pl.program_id(2) == 0)"
            )
        if k // bk >= 2 and np.allclose(got, post(A[:, :bk] @ B[:bk, :]), rtol=tol, atol=tol):
            return (
                "the output is the first K step's product alone: the later K steps add nothing into it (a store "
                "guarded by pl.when(k == 0), or an accumulator stored before the last K step); store on the last "
                "K step, @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)"
            )
        if k // bk >= 2 and blocks is not None:
            wrong_axis = _wrong_axis_init(A, B, got, blocks[0], blocks[1], bk, post, tol)
            if wrong_axis:
                return wrong_axis
        if epilogue is None:
            return None
        for what, product in (("a", gelu(A) @ B), ("b", A @ gelu(B)), ("a and b", gelu(A) @ gelu(B))):
            if _close(got, product, tol):
                return (
                    f"GELU is applied to the input{'s' if ' and ' in what else ''} ({what}) before the product; "
                    "it belongs on the accumulated product, on the last K step: o_ref[...] = jax.nn.gelu("
                    "acc_ref[...]).astype(o_ref.dtype)"
                )
        if k // bk >= 2:
            running = np.zeros_like(got)
            for s in range(0, k, bk):  # the GELU of each partial sum, carried into the next K step
                running = epilogue(running + A[:, s : s + bk] @ B[s : s + bk, :])
            if _close(got, running, tol) or _close(got, epilogue(running), tol):
                return (
                    "the GELU acts on partial sums: it is applied on every K step, so each step adds into a GELU of "
                    "the sum so far; apply it once, on the last K step, @pl.when(k == pl.num_programs(2) - 1), "
                    "just before the store"
                )
        c = A @ B
        if _close(got, c, tol):
            return (
                "the kernel computes no GELU: the output is a @ b itself, the accumulated product stored as it is; "
                "apply jax.nn.gelu to the accumulator on the last K step"
            )
        for what, f in _gelu_variants():
            if _close(got, f(c), tol):
                return (
                    f"the output is a GELU of the right product written with {what}: jax.nn.gelu's default is "
                    "0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))); call jax.nn.gelu"
                )
        order = np.argsort(c, axis=None)
        steps = np.abs(np.diff(got.reshape(-1)[order]))
        if steps.size and np.median(steps) < 1e-2 and steps.max() < 1.0 and not _close(got, c, tol):
            return (
                "the output is a smooth function of the right product, but not jax.nn.gelu's GELU: check its "
                "constants, 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))), or call jax.nn.gelu"
            )
    return None


def add_hint(x: Any, y: Any, out: Any, tol: float = 1e-6) -> str | None:
    """Why an add's values are wrong, when they are another operation's (None otherwise)."""
    X, Y, got = as_f64(x), as_f64(y), as_f64(out)
    tol = max(tol, 2.0**-8 if np.dtype(getattr(out, "dtype", np.float64)).itemsize == 2 else tol)
    for what, other in (
        ("x - y: the kernel subtracts", X - Y),
        ("y - x: the kernel subtracts", Y - X),
        ("x * y: the kernel multiplies", X * Y),
        ("x alone: y is never added", X),
        ("2 x: the kernel adds x to itself", 2 * X),
    ):
        if _close(got, other, tol):
            return f"the output is {what}; add stores the sum of the two blocks it reads"
    return None


def transpose_hint(x: Any, out: Any, bm: int, bn: int) -> str | None:
    """Why a transpose's values are wrong, when they are a reshape's or an untransposed block's (None otherwise)."""
    X, got = as_f64(x), as_f64(out)
    m, n = X.shape
    if got.shape != (n, m):
        return None
    if np.array_equal(got, X.reshape(n, m)):
        return (
            "the output is x.reshape(n, m): a reshape keeps the values in row-major order, a transpose moves "
            "x[i, j] to [j, i]; transpose the block inside the kernel, x_ref[...].T (jnp.transpose)"
        )
    if m % bm or n % bn:
        return None
    reshaped, untransposed = np.empty_like(got), np.empty_like(got)
    for i in range(m // bm):
        for j in range(n // bn):
            blk = X[i * bm : (i + 1) * bm, j * bn : (j + 1) * bn]
            reshaped[j * bn : (j + 1) * bn, i * bm : (i + 1) * bm] = blk.reshape(bn, bm)
            if bm == bn:
                untransposed[j * bn : (j + 1) * bn, i * bm : (i + 1) * bm] = blk
    if np.array_equal(got, reshaped) and bm != bn:
        return (
            "each block lands in its place but reshaped to (bn, bm), not transposed: a reshape keeps the block's "
            "row-major order; store its transpose, o_ref[...] = x_ref[...].T"
        )
    if m == n and bm == bn:
        in_place = np.empty_like(got)
        for i in range(m // bm):
            for j in range(n // bn):
                in_place[i * bm : (i + 1) * bm, j * bn : (j + 1) * bn] = X[
                    i * bm : (i + 1) * bm, j * bn : (j + 1) * bn
                ].T
        if np.array_equal(got, in_place):
            return (
                "each block is transposed but stored in its own place: block (i, j) of x, transposed, lands at "
                "block (i, j) of the output, where only the diagonal blocks are right; it belongs at block (j, i): "
                "the output index map swaps the indices, lambda i, j: (j, i)"
            )
    if bm == bn and np.array_equal(got, untransposed):
        return (
            "each block lands where its transpose belongs, but its values are stored as they were read (as "
            "x_ref[...], or a reshape of it to the block's shape, gives): the blocks move, their values do not; "
            "store the block's transpose, o_ref[...] = x_ref[...].T"
        )
    return None


def _row_blocks(n: int, rows: int | None) -> list[int]:
    """The rows_per_block to try: the one asked for, else every power of two from 8 that divides n."""
    if rows:
        return [rows] if n % rows == 0 else []
    return [r for r in (8, 16, 32, 64, 128, 256) if r <= n and n % r == 0]


def _close(a: np.ndarray, b: np.ndarray, tol: float) -> bool:
    with np.errstate(all="ignore"):
        return a.shape == b.shape and bool(np.isfinite(b).all()) and bool(np.allclose(a, b, rtol=tol, atol=tol))


def softmax_hint(x: Any, out: Any, rows: int | None = None) -> str | None:
    """Why a softmax's values are wrong, from its rows (None: no cause this can name). Each cause is named only
    when the output is what that mistake gives: rows that sum to 1 along the wrong axis of the block (the axis),
    exp(x - max) not divided by the sum, a log-softmax; `rows` is rows_per_block (tried from 8 up when None)."""
    a, xs = as_f64(out), as_f64(x)
    bad = ~np.isfinite(a)
    if bad.any() and np.abs(xs).max() > 80:
        return (
            f"{int(bad.sum())} values are NaN or inf on logits up to {np.abs(xs).max():.3g}: exp overflows "
            "float32 past 88 (and 0/0 below -88); subtract each row's max before jnp.exp, softmax(x) = "
            "softmax(x - max(x))"
        )
    if bad.any() or a.ndim != 2 or a.shape != xs.shape:
        return None
    tol = 2.0**-7 if np.dtype(getattr(out, "dtype", np.float64)).itemsize == 2 else 1e-4
    shifted = xs - xs.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    if _close(a, e, tol):
        return (
            "the output is exp(x - max) itself (each row's largest value is 1): it is divided by the row's max, "
            "or not at all; softmax divides by the row's sum, e / jnp.sum(e, axis=-1, keepdims=True)"
        )
    if _close(a, shifted - np.log(e.sum(axis=-1, keepdims=True)), max(tol, 1e-4)):
        return (
            "the output is the log-softmax, x - max - log(sum(exp(x - max))), every value <= 0; the softmax is "
            "its exp: e / jnp.sum(e, axis=-1, keepdims=True)"
        )
    exact = e / e.sum(axis=-1, keepdims=True)
    factor = a.sum(axis=-1, keepdims=True)  # each row's sum: what an approximate 1 / sum scaled it by
    off = float(np.abs(factor - 1).max())
    if tol < off < 2e-2 and _close(a, exact * factor, tol):
        return (
            f"every row is the softmax times a factor off 1 by up to {off:.2%} (row sums from {factor.min():.6g} "
            f"to {factor.max():.6g}): the division is approximate, as pl.reciprocal(s, approx=True) gives. The "
            "lab grades the float32 softmax to 1e-5, which an approximate reciprocal does not meet: divide "
            "exactly, e / jnp.sum(e, axis=-1, keepdims=True) (or pl.reciprocal(s, approx=False))"
        )
    bf16_in = np.dtype(getattr(x, "dtype", np.float64)).itemsize == 2
    if bf16_in and (np.abs(a - exact) <= 2.0**-3 * np.abs(exact) + 1e-30).all():
        # within 2**-3 relative everywhere (bf16 rounding of x - max, of the exp, of the sum: up to 7% on the visible
        # case's logits), past the one rounding of the store (the lab's Hint 3: cast to f32 first)
        return (
            "every value is near the softmax (within 1/8 of it) yet further off than the one bfloat16 rounding of the "
            "output allows: the arithmetic runs in bfloat16 (x_ref[...] is not cast to float32 first, so the exp, the sum and the "
            "division each round to 8 bits); compute in float32, x = x_ref[...].astype(jnp.float32), and cast once "
            "on the store, .astype(o_ref.dtype)"
        )
    n, d = a.shape
    for r in _row_blocks(n, rows):
        by_block = a.reshape(n // r, r, d).sum(axis=1)
        if r > 1 and np.abs(by_block - 1).max() < 1e-2:
            return (
                f"each column of every {r}-row block sums to 1, not each row: the max and the sum reduce over "
                "the block's rows (axis=0); a softmax reduces over the features, axis=-1 (keepdims=True)"
            )
    for w in range(128, d, 128):
        if d % w == 0 and np.abs(a.reshape(n, d // w, w).sum(axis=-1) - 1).max() < 1e-2:
            return (
                f"every {w}-feature piece of each row sums to 1 (each row sums to {d // w}): the feature axis is "
                f"split into blocks of {w}, and each step normalises its piece by that piece's own max and sum; "
                "a block spans all d features, (rows_per_block, d), on the grid (n // rows_per_block,)"
            )
    sums = a.sum(axis=-1)
    if np.abs(sums - 1).max() > 1e-2:
        return (
            f"rows of the output do not sum to 1 (row sums from {sums.min():.3g} to {sums.max():.3g}), as every "
            "softmax row does: e / jnp.sum(e, axis=-1, keepdims=True) with e = jnp.exp(x - max)"
        )
    return None


def layernorm_rows(x: Any) -> dict[str, np.ndarray]:
    """Which rows of x are of which kind (the edge cases the grade mixes in): constant rows (variance 0), rows
    with variance near eps, rows with a large mean; the rest normal."""
    xs = as_f64(x)
    var, mean = xs.var(axis=-1), xs.mean(axis=-1)
    kinds = {"constant": var == 0, "tiny": (var > 0) & (var < 1e-4), "offset": (np.abs(mean) > 100) & (var >= 1e-4)}
    normal = ~(kinds["constant"] | kinds["tiny"] | kinds["offset"])
    return {"normal": np.flatnonzero(normal), **{k: np.flatnonzero(v) for k, v in kinds.items()}}


def layernorm_hint(x: Any, g: Any, b: Any, out: Any, tol: float, block_rows: int | None = None) -> str | None:
    """Why a LayerNorm's values are wrong, from the row statistics of z = (out - b) / g (which should be
    ~N(0, 1) per row); None when no cause can be named."""
    a, xs = as_f64(out), as_f64(x)
    g64, b64 = as_f64(g).reshape(-1), as_f64(b).reshape(-1)
    y = normalised(xs)
    with np.errstate(all="ignore"):
        if np.allclose(a, y * b64 + g64, rtol=max(tol, 1e-5), atol=max(tol, 1e-5)) and not np.allclose(g64, b64):
            return "g and b are swapped: the output is y * b + g; scale by g and shift by b, y * g + b"
    rows = layernorm_rows(xs)
    nan_rows = np.isnan(a).any(axis=-1)
    const = rows["constant"]
    if (
        nan_rows.any()
        and const.size
        and nan_rows[const].all()
        and not nan_rows[np.setdiff1d(np.arange(len(a)), const)].any()
    ):
        return (
            "the constant rows (variance exactly 0) come out NaN: 0 * rsqrt(0) or 0 / 0; eps belongs inside, "
            "rsqrt(var + 1e-6)"
        )
    if nan_rows.any():
        return None
    with np.errstate(all="ignore"):
        z = (a - b64) / g64
    mean, var = z.mean(axis=-1), z.var(axis=-1)
    xvar = xs.var(axis=-1)
    want = xvar / (xvar + EPS)  # the variance of a normalised row: 1, less where var is near eps
    normal = rows["normal"]
    n, d = a.shape
    loose = max(tol, 1e-5)
    with np.errstate(all="ignore"):
        centred = xs - xs.mean(axis=-1, keepdims=True)
        summed = centred / np.sqrt((centred**2).sum(axis=-1, keepdims=True) + EPS)
        if _close(a, (y + b64) * g64, loose):
            return (
                "the output is (y + b) * g: it shifts before it scales; LayerNorm scales the normalised row "
                "first, then shifts it: y * g + b"
            )
        if _close(a, summed * g64 + b64, loose):
            return (
                f"the variance is the sum of the squared deviations over the {d} features, not their mean, so "
                f"every row comes out about sqrt({d}) times too small: var = jnp.mean((x - mu) ** 2, axis=-1, "
                "keepdims=True)"
            )
    half = np.dtype(getattr(out, "dtype", np.float64)).itemsize == 2
    if half and normal.size:
        steps = np.abs(a - (y * g64 + b64)) / (2.0**-8 * (1 + np.abs(y * g64 + b64)))
        # Statistics in bf16 put all but a few values within 8 roundings; the worst of a 24,576-value draw reaches
        # ~11 for some seeds (fresh each grading), which a bound on the max alone missed: bound the 99.9th
        # percentile, and the max loosely.
        if np.quantile(steps, 0.999) <= 8 and steps.max() <= 16 and np.abs(mean[normal]).max() <= 0.05:
            return (
                f"the values are off by up to {steps.max():.1f} bf16 roundings, as when the mean, the variance "
                "and rsqrt are computed in bfloat16: cast the block to float32 first, x = x_ref[...].astype("
                "jnp.float32), and cast once when storing, .astype(o_ref.dtype)"
            )
    for r in _row_blocks(n, block_rows):
        if r < 2:
            continue
        with np.errstate(all="ignore"):
            zb = z.reshape(n // r, r, d)
            xb = xs.reshape(n // r, r, d)
            mu_rows = xb.mean(axis=1, keepdims=True)  # per block and feature: the axis=0 mean
            mu = xb.mean(axis=2, keepdims=True)
            var_of = lambda c: (c**2).mean(axis=2, keepdims=True)  # noqa: E731 - over the features
            wrong = {
                "the mean": (xb - mu_rows) / np.sqrt(var_of(xb - mu_rows) + EPS),
                "the variance": (xb - mu) / np.sqrt(((xb - mu) ** 2).mean(axis=1, keepdims=True) + EPS),
            }
        if np.abs(zb.mean(axis=1)).max() < 0.05 and np.abs(zb.var(axis=1) - 1).max() < 0.2:
            return (
                f"the mean and the variance reduce over the rows of each {r}-row block (axis=0): every column "
                "of a block comes out with mean 0 and variance 1, not every row; LayerNorm reduces over the "
                "features, axis=-1 (keepdims=True)"
            )
        for what, yb in wrong.items():
            if _close(a, yb.reshape(n, d) * g64 + b64, max(loose, 1e-4)):
                return (
                    f"{what} reduces over the rows of each {r}-row block (axis=0), not over the features: both "
                    "statistics are the row's own, jnp.mean(..., axis=-1, keepdims=True)"
                )
    if normal.size and (np.abs(mean[normal]).max() > 0.05 or np.abs(var[normal] - want[normal]).max() > 0.05):
        return (
            f"output rows do not have mean 0 and variance 1 before g and b are applied (row means up to "
            f"{np.abs(mean[normal]).max():.3g}, variances from {var[normal].min():.3g} to "
            f"{var[normal].max():.3g}), as every normalised row does: y = (x - mu) * rsqrt(var + 1e-6) with mu "
            "and var the row's mean and variance"
        )
    if const.size and np.abs(z[const]).max() > 0.05:
        return (
            "the constant rows (variance exactly 0) should come out as b: (x - mu) is 0 there, and eps keeps "
            "rsqrt(var + 1e-6) finite"
        )
    # eps in the wrong place or of another size: the error is largest where the variance is smallest
    centred = xs - xs.mean(axis=-1, keepdims=True)
    var_x = (centred**2).mean(axis=-1, keepdims=True)
    guesses = (
        ("eps = 1e-5 (another library's default); the lab's eps is 1e-6", centred / np.sqrt(var_x + 1e-5)),
        (
            "eps added to the standard deviation, sqrt(var) + eps; it belongs under the root",
            centred / (np.sqrt(var_x) + EPS),
        ),
        ("eps = 1e-3; the lab's eps is 1e-6", centred / np.sqrt(var_x + 1e-3)),
    )
    for what, y_guess in guesses:
        with np.errstate(all="ignore"):
            guess = y_guess * g64 + b64
        if np.isfinite(guess).all() and np.allclose(a, guess, rtol=max(tol, 1e-6), atol=max(tol, 1e-6)):
            return f"the output is what {what}: rsqrt(var + 1e-6), eps is 1e-6 added to the variance"
    tiny = rows["tiny"]
    if tiny.size and np.abs(var[tiny] - want[tiny]).max() > 0.05:
        return (
            f"rows whose variance is about eps are scaled wrong (variance of the normalised row "
            f"{var[tiny].mean():.3g}, expected {want[tiny].mean():.3g}): eps is 1e-6, added to the variance "
            "inside rsqrt(var + 1e-6), not to the standard deviation"
        )
    offset = rows["offset"]
    if offset.size and np.abs(var[offset] - want[offset]).max() > 0.01:
        return (
            "rows with a large mean (|mean| ~ 1e3) lose precision: subtract the mean first and take "
            "var = mean((x - mu)**2); mean(x**2) - mu**2 cancels catastrophically in float32"
        )
    return None


def bf16_steps(out: np.ndarray, exact: np.ndarray, k: int) -> np.ndarray:
    """|out - exact| in bf16 steps (spacing of bf16 numbers, 8 significant bits) at |exact|.

    Values far below the typical magnitude sqrt(K) of a product of N(0, 1) inputs are measured at sqrt(K)/16
    instead: there even an f32 sum's absolute error (~sqrt(K)·2^-24) would be many tiny steps.
    """
    mag = np.maximum(np.abs(exact), np.sqrt(k) / 16)
    return np.abs(out - exact) / np.exp2(np.floor(np.log2(mag)) - 7)


def bf16_accumulation_problem(label: str, out: Any, exact: np.ndarray, k: int) -> str | None:
    """bf16 in and out: every value within one bf16 step of the exact product. An f32 running sum rounded once is
    at most one step away; a bf16 running sum, or per-step bf16 dots, round on every K step and drift further."""
    steps = bf16_steps(as_f64(out), exact, k)
    worst = float(steps.max())
    if worst > 1.0:
        frac = float((steps > 1.0).mean())
        return (
            f"{label}: {frac:.1%} of values are more than one bf16 step from the exact product (worst {worst:.1f} "
            "steps): the running sum is being rounded to bf16. Keep it in an f32 VMEM scratch, "
            "scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)] (with preferred_element_type=jnp.float32 on "
            "the dot), and cast once on the last K step"
        )
    return None


# ------------------------------------------------------------------------------------------ the ragged edge


def column_sums_schedule_problem(label: str, pc: Any, shape: tuple[int, int], r: int) -> str | None:
    """grid (pl.cdiv(n, r),), its axis not "parallel"; x in (r, d) blocks at (i, 0); out (1, d) float32, one
    block at every step (the carried accumulator)."""
    n, d = shape
    blocks = -(-n // r)
    if pc.grid != (blocks,):
        if pc.grid == (n // r,) and n % r:
            return (
                f"the grid of {label} is {pc.grid}: n // rows_per_block drops the last, partial block "
                f"({n} rows in blocks of {r} leave {n % r} rows over), so those rows are never summed; "
                f"grid=(pl.cdiv(n, rows_per_block),) = ({blocks},) gives them a last block of their own"
            )
        return (
            f"the grid of {label} is {pc.grid}, expected ({blocks},): one step per block of rows_per_block rows, "
            "the last one partial, grid=(pl.cdiv(n, rows_per_block),)"
        )
    semantics = tuple(str(s) for s in pc.dimension_semantics or ())
    if semantics and "parallel" in semantics[0].lower():
        return (
            f"{label} marks its grid axis \"parallel\" (dimension_semantics={semantics}): every step adds into "
            "the same output block, so the steps must run in order on one core; make it \"arbitrary\""
        )
    if len(pc.inputs) != 1 or len(pc.outputs) != 1:
        return (
            f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected x's BlockSpec in "
            "in_specs and one in out_specs"
        )
    x_blk, out = pc.inputs[0], pc.outputs[0]
    wrong = _equal(
        f"the output of {label}",
        (tuple(out.array_shape), np.dtype(out.dtype).name),
        ((1, d), "float32"),
        "out_shape is jax.ShapeDtypeStruct((1, d), jnp.float32): one row of sums, accumulated in float32",
    )
    if wrong:
        return wrong
    wrong = _equal(
        f"the input x block of {label}",
        tuple(x_blk.block_shape),
        (r, d),
        "a block is rows_per_block whole rows: (rows_per_block, d)",
    )
    if wrong:
        return wrong
    if not whole_block(out.block_shape, out.array_shape):
        return f"{label}: the output is carved into {out.block_shape} blocks; it is one (1, d) block, the sums"
    for (i,) in pc.grid_points():
        got = x_blk.block_index(i)
        if got != (i, 0):
            return (
                f"{label}: the input x index map sends grid step {i} to block {got}; step i reads row block i: "
                "lambda i: (i, 0)"
            )
        got = out.block_index(i)
        if any(got):
            return (
                f"{label}: the output index map sends grid step {i} to block {got}; every step adds into the one "
                "block of sums, lambda i: (0, 0), so it stays in VMEM from the first step to the last"
            )
    return mask_product_problem(label, pc)


MASK_SELECT = "jnp.where(row < n, x, 0.0) (a select: multiplying by a 0/1 mask keeps the NaN, NaN × 0 is NaN)"


def mask_product_problem(label: str, pc: Any) -> str | None:
    """A mask is a select (the lab's rule), read off the traced kernel: `x * (row < n)` keeps the padding's NaN or
    garbage, NaN × 0 being NaN, though interpret mode's CPU compile may rewrite the product into a select and hide it."""
    if pc.mask_products:
        return (
            f"the kernel of {label} masks by multiplying by a comparison (x * (row < n), or its .astype): the rows "
            "past n are padding of unspecified value (NaN under TPU interpret mode, garbage on a TPU), and NaN × 0 "
            f"is NaN, so the product keeps them (interpret mode on a CPU may rewrite it into a select and hide "
            f"that; a TPU does not); mask with a select, {MASK_SELECT}"
        )
    return None


def column_sums_hint(x: Any, out: Any, r: int, pc: Any = None) -> str | None:
    """Why column sums are wrong (None: no cause this can name): rows past n summed in (NaN or garbage from the
    partial last block), the partial block dropped, only the last block kept (= instead of +=). `pc`, the traced
    call: a mask compared with <= (or >=) keeps row n, the first row past the end (the lab: "the rows at or past n")."""
    xs, a = as_f64(x), as_f64(out)
    n, d = xs.shape
    if a.shape != (1, d):
        return None
    last = (n - 1) // r * r  # first row of the last block
    pad = -n % r  # rows of the last block past the end
    if np.isnan(a).any() and not np.isnan(xs).any() and not pad:
        return None  # no rows past the end: NaN read from memory never written (compare names it: kernel=)
    if np.isneginf(a).any() and np.isfinite(xs).all():
        return (
            "the sums are -inf though x is finite: the rows past n are replaced with -inf, the identity of a max "
            "(LAB·1.2's rowmax starts there), but a sum's identity is 0: jnp.where(row < n, x, 0.0)"
        )
    if np.isnan(a).any() and not np.isnan(xs).any():
        where = (
            f"its last block (rows {last} to {last + r - 1}) runs past the array's {n} rows, and its {pad} "
            f"row{'s' * (pad != 1)} past the end"
            if pad
            else "rows past the end"
        )
        if pc is not None and {"le", "ge"} & set(getattr(pc, "kernel_ops", {}) or {}) and "select_n" in pc.kernel_ops:
            return (
                f"the sums are NaN though x holds no NaN: {where} are padding of unspecified value (NaN under TPU "
                "interpret mode, garbage on a TPU), and one reaches the sum: the kernel's mask compares with <= (or "
                ">=), so it keeps row n, the first row past the end (x's rows are 0 to n - 1); the rows at or past n "
                "are padding: " + MASK_SELECT
            )
        return (
            f"the sums are NaN though x holds no NaN: {where} are padding of unspecified value (NaN under "
            "TPU interpret mode, garbage on a TPU: Pallas's grid and BlockSpec docs), and the sum adds them in. Mask them before the sum: "
            "row = pl.program_id(0) * rows_per_block + jax.lax.broadcasted_iota(jnp.int32, x.shape, 0), then "
            + MASK_SELECT
        )
    tol = COLUMN_SUMS["tol"]
    if pad and _close(a, xs[: n // r * r].sum(axis=0, keepdims=True), tol):
        return (
            f"the sums leave out the last {n % r} rows: the partial last block is never added (a grid of "
            "n // rows_per_block, or a mask that drops the whole block); grid=(pl.cdiv(n, rows_per_block),) "
            "and mask only the rows past n"
        )
    if _close(a, xs[last:].sum(axis=0, keepdims=True), tol) and last:
        return (
            "the output holds the last block's sums only: each step overwrites it (o_ref[...] = ...); zero it on "
            "the first step under @pl.when(pl.program_id(0) == 0) and add every step's sums, o_ref[...] += ..."
        )
    want = xs.sum(axis=0, keepdims=True)  # last: a dropped block of bf16 rows is within 1/16 too, named above
    if (
        dtype_name(getattr(x, "dtype", "float64")) == "bfloat16"
        and np.isfinite(a).all()
        and (np.abs(a - want) <= 2.0**-4 * np.abs(want)).all()
    ):
        return (
            "the sums are near the exact ones (within 1/16) yet further off than a float32 sum: the block is summed "
            "in bfloat16 (x_ref[...] is not cast to float32 before the mask and the sum, so every partial sum rounds "
            "to 8 bits); cast it first, x = jnp.where(row < n, x_ref[...].astype(jnp.float32), 0.0)"
        )
    return None
