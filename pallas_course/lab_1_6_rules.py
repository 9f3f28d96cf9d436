"""LAB·1.6's rules, read by the notebook's visible checks (pallas_course.lab_checks) and the grade
(autograder.labs.lab_1_6) alike: the two foundations stage 3 builds on.

* `add_copies(x, y, rows_per_block)`: LAB·1.1's add over row blocks with x, y and the output left in HBM
  (`pl.BlockSpec(memory_space=pl.ANY)`), every block copied by the kernel itself (pltpu.make_async_copy into VMEM
  scratch, DMA semaphores): what a BlockSpec does for a kernel, written out.
* `row_logsumexp(x, rows_per_block, cols_per_block)`: log Σ exp over each row, the features split over the last grid
  axis, a running max and a rescaled running sum carried in f32 scratch: online softmax, flash attention's inner loop.

Each rule returns a sentence naming the mistake, or None.
"""

from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from pallas_course import copy_rules, rules

COPIES_F32 = rules.ADD_F32  # a copy and one f32 add: exact
COPIES_BF16 = rules.ADD_BF16
# f32 running statistics against float64: a few f32 roundings of values up to 1e4 (the large logits)
LOGSUMEXP = dict(tol=1e-5)
DEFAULT_ROWS, DEFAULT_COLS = 8, 128

HBM_FIX = "leave it in HBM: pl.BlockSpec(memory_space=pl.ANY), no block shape, no index map"


# ------------------------------------------------------------------------------------------------ families


def copies_families(shape: tuple[int, int], dtype: Any, rows_per_block: int | None) -> frozenset[str]:
    rows = "default rows_per_block" if rows_per_block is None else "chosen rows_per_block"
    return rules.array_families(shape, dtype) | {rows}


def logsumexp_families(
    shape: tuple[int, int], dtype: Any, rows_per_block: int | None, cols_per_block: int | None, kind: str = ""
) -> frozenset[str]:
    n, d = shape
    cols = cols_per_block or DEFAULT_COLS
    tags = {
        rules.dtype_name(dtype),
        "default blocks" if rows_per_block is None and cols_per_block is None else "chosen blocks",
        "several feature steps" if d // cols > 1 else "one feature step",
    }
    return frozenset(tags | ({kind} if kind else set()))


# ------------------------------------------------------------------------------------------------ inputs, references


def logsumexp_inputs(rng: np.random.Generator, shape: tuple[int, int], dtype: Any) -> np.ndarray:
    """N(0, 2) plus a ramp of 0..8 across the features, rising in even rows and falling in odd ones: in the rising
    rows the max grows at every feature step (a running sum never rescaled shows), in the falling ones it is found
    in the first step."""
    n, d = shape
    ramp = np.linspace(0.0, 8.0, d)[None, :]
    slope = np.where(np.arange(n)[:, None] % 2 == 0, ramp, ramp[:, ::-1])
    return (rng.standard_normal(shape) * 2.0 + slope).astype(np.float32).astype(np.dtype(dtype))


def logsumexp_ref(x: Any) -> np.ndarray:
    """(n, 1) float64 log Σ exp of each row, stable (max subtracted)."""
    X = rules.as_f64(x)
    m = X.max(axis=1, keepdims=True)
    return m + np.log(np.exp(X - m).sum(axis=1, keepdims=True))


# ------------------------------------------------------------------------------------------------ copies


def copy_block(jaxpr: Any) -> copy_rules.Block:
    """A traced kernel's copies as copy_rules reads them: each .start() / .wait() and the semaphore it names (the
    ref and its literal indices, or the variable that computes one), pl.when branches and loop bodies nested."""
    from pallas_course.kernel_trace import nested_jaxprs

    items: list[Any] = []
    for e in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        name = e.primitive.name
        if name in ("dma_start", "dma_wait"):
            parts = e.params["tree"].unflatten(list(e.invars))
            items.append(copy_rules.Copy("start" if name == "dma_start" else "wait", _semaphore(parts[2])))
            continue
        for sub in nested_jaxprs(e):
            items.append(copy_block(sub))
    return copy_rules.Block(tuple(items))


def _semaphore(sem: Any) -> Hashable:
    def atom(x: Any) -> Hashable:
        value = getattr(x, "val", None)
        return ("=", int(value)) if value is not None else ("v", id(x))

    ref = getattr(sem, "ref", sem)
    index: list[Hashable] = []
    for t in getattr(sem, "transforms", ()):
        for ix in getattr(t, "indices", ()):
            start = getattr(ix, "start", None)
            index.append(("slice", atom(start), getattr(ix, "size", None)) if start is not None else atom(ix))
    return (id(ref), tuple(index))


def copy_discipline_problem(label: str, pc: Any) -> str | None:
    """copy_rules' rule on the traced kernel (the grade's judge refuses the same before it runs anything)."""
    if pc.kernel_jaxpr is None:
        return None
    found = copy_rules.problem(copy_block(pc.kernel_jaxpr))
    return None if found is None else f"{label}: {found}"


def copies_schedule_problem(
    label: str, pc: Any, shape: tuple[int, int], dtype: Any, rows_per_block: int | None
) -> str | None:
    """One grid step per row block; x, y and the output left in HBM; (rows, d) VMEM buffers and DMA semaphores in
    scratch; at least three copies started and waited per step (x and y in, the sum out), waits after starts."""
    n, d = shape
    rows = rows_per_block or DEFAULT_ROWS
    # first, as the grade's judge refuses these before it rebuilds anything
    hang = copy_discipline_problem(label, pc)
    if hang:
        return hang
    if len(pc.inputs) != 2 or len(pc.outputs) != 1:
        return f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected x, y and one output"
    for b, what in zip(pc.blocks, ("x", "y", "the output")):
        if b.memory_space not in ("any", "hbm"):
            return (
                f"{label}: {what} has a BlockSpec that stages blocks into VMEM (block {b.block_shape}), so Pallas "
                f"copies it for you; this kernel copies its own blocks: {HBM_FIX}"
            )
    if tuple(pc.grid) != (n // rows,):
        return (
            f"the grid of {label} is {pc.grid}, expected {(n // rows,)}: one step per block of rows_per_block rows, "
            "grid=(n // rows_per_block,)"
        )
    buffers = [s for s in pc.scratch if "vmem" in s[2].lower() and tuple(s[0]) == (rows, d)]
    if not any(np.dtype(s[1]) == np.dtype(dtype) for s in buffers):
        return (
            f"{label}: no ({rows}, {d}) {rules.dtype_name(dtype)} VMEM buffer in scratch_shapes: the copies need "
            f"somewhere in VMEM to land, pltpu.VMEM((rows_per_block, d), x.dtype) for x, y and the sum"
        )
    if not any("semaphore" in s[2].lower() for s in pc.scratch):
        return (
            f"{label}: no DMA semaphores in scratch_shapes: each copy signals one when it lands, "
            "pltpu.SemaphoreType.DMA((3,)) (one per copy in flight)"
        )
    starts, waits = len(pc.kernel_ops.get("dma_start", ())), len(pc.kernel_ops.get("dma_wait", ()))
    if starts < 3 or waits < 3:
        return (
            f"{label}'s kernel starts {starts} and waits {waits} copies; each step copies x's and y's rows in and "
            "the sum out: three pltpu.make_async_copy(...), each .start() then .wait()"
        )
    return None


def copies_hint(x: Any, y: Any, out: Any, rows: int) -> str | None:
    """Why add_copies' values are wrong, when they are a named mistake's (None otherwise)."""
    X, Y, got = rules.as_f64(x), rules.as_f64(y), rules.as_f64(out)
    if got.shape != X.shape:
        return None
    want = X + Y
    first = want[:rows]
    blocks = got.reshape(-1, rows, got.shape[1])
    if len(blocks) > 1 and np.allclose(blocks, first[None], rtol=1e-2, atol=1e-2, equal_nan=False):
        return (
            "every row block of the output holds the sum of the first block: the copies ignore the grid step; "
            "offset them by i * rows_per_block, x_hbm.at[pl.ds(i * rows, rows)] with i = pl.program_id(0)"
        )
    return rules.add_hint(x, y, out)


# ------------------------------------------------------------------------------------------------ online logsumexp


def logsumexp_schedule_problem(
    label: str, pc: Any, shape: tuple[int, int], rows_per_block: int | None, cols_per_block: int | None
) -> str | None:
    """Grid (n/rows, d/cols), features last; x block (rows, cols) at (i, j) -> out block (rows, 1) at (i, 0), f32;
    dimension_semantics ("parallel", "arbitrary"); the running statistics in f32 VMEM scratch."""
    n, d = shape
    rows, cols = rows_per_block or DEFAULT_ROWS, cols_per_block or DEFAULT_COLS
    grid = (n // rows, d // cols)
    if tuple(pc.grid) == grid[::-1] != grid:
        return (
            f"the grid of {label} is {pc.grid}, expected {grid}: the feature axis, the one the running max and sum "
            "are carried over, must be the last (innermost) axis, so each row block's feature steps run back to back"
        )
    if tuple(pc.grid) != grid:
        return (
            f"the grid of {label} is {pc.grid}, expected {grid}: one step per (rows_per_block, cols_per_block) "
            "block of x, grid=(n // rows_per_block, d // cols_per_block), the features last"
        )
    if len(pc.inputs) != 1 or len(pc.outputs) != 1:
        return f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected x in, one (n, 1) out"
    src, dst = pc.inputs[0], pc.outputs[0]
    if tuple(src.block_shape) != (rows, cols):
        return (
            f"the block of x in {label} is {src.block_shape}, expected {(rows, cols)}: (rows_per_block, cols_per_block)"
        )
    if tuple(dst.block_shape) != (rows, 1) or tuple(dst.array_shape) != (n, 1) or dst.dtype != np.float32:
        return (
            f"the output of {label} is {dst.array_shape} {dst.dtype.name} in blocks of {dst.block_shape}, "
            f"expected ({n}, 1) float32 in blocks of ({rows}, 1): one f32 logsumexp per row"
        )
    for point in pc.grid_points():
        i, j = point
        if src.block_index(*point) != (i, j):
            return f"{label}: the index map of x sends grid step {point} to block {src.block_index(*point)}, expected ({i}, {j})"
        if dst.block_index(*point) != (i, 0):
            return (
                f"{label}: the output index map sends grid step {point} to block {dst.block_index(*point)}; every "
                f"feature step of row block i ends in the same output block ({i}, 0): lambda i, j: (i, 0)"
            )
    sem = tuple(str(s).lower() for s in pc.dimension_semantics or ())
    fix = 'compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))'
    problem = rules.accumulated_axis_parallel_problem(label, pc, "the running max and sum")
    if problem:
        return problem
    if sem != ("parallel", "arbitrary"):
        return (
            f"{label} marks its grid axes {sem or 'not at all'}: the row blocks are independent, \"parallel\" (a "
            f"megacore chip splits them between its TensorCores), the feature steps carry the running statistics, "
            f"\"arbitrary\": {fix}"
        )
    if not any("vmem" in s[2].lower() and np.dtype(s[1]) == np.float32 for s in pc.scratch):
        return (
            f"{label}: no f32 VMEM scratch for the running max and sum, which live across the feature steps: "
            "scratch_shapes=[pltpu.VMEM((rows_per_block, 1), jnp.float32)] * 2"
        )
    return None


def _no_rescale(X: np.ndarray, cols: int) -> np.ndarray:
    """The online logsumexp with the running sum never rescaled when the max grows (float64)."""
    m = np.full((X.shape[0], 1), -np.inf)
    s = np.zeros((X.shape[0], 1))
    for j in range(0, X.shape[1], cols):
        block = X[:, j : j + cols]
        m = np.maximum(m, block.max(axis=1, keepdims=True))
        s = s + np.exp(block - m).sum(axis=1, keepdims=True)
    return m + np.log(s)


def logsumexp_hint(x: Any, out: Any, rows: int, cols: int) -> str | None:
    """Why row_logsumexp's values are wrong, when they are a named mistake's (None otherwise)."""
    X, got = rules.as_f64(x), rules.as_f64(out)
    if got.shape != (X.shape[0], 1):
        return None
    want = logsumexp_ref(X)

    def close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.isclose(a, b, rtol=1e-4, atol=1e-4)

    big = X.max(axis=1, keepdims=True) > 88.0
    if (np.isposinf(got) & big).any():
        return (
            "rows of large logits give inf: exp of a logit above 88.7 overflows float32; subtract the running max "
            "before exp, exp(x - m_new), and add it back at the end, m + log(l)"
        )
    negative = X.max(axis=1, keepdims=True) < -88.0
    if (np.isneginf(got) & negative).any():
        return (
            "rows whose logits are all below -88 give -inf: the running max starts at 0, not -inf, so exp(x - 0) "
            "underflows to 0 and the sum stays 0; start it at -inf (jnp.full(m_ref.shape, -jnp.inf))"
        )
    if close(got, _no_rescale(X, cols)).all() and not close(got, want).all():
        return (
            "the running sum is not rescaled when the max grows: before adding a block's sum, multiply the sum so "
            "far by exp(m_old - m_new), l = l * exp(m_old - m_new) + sum(exp(x - m_new))"
        )
    if close(got, want - X.max(axis=1, keepdims=True)).all():
        return "the result leaves out the max: logsumexp = m + log(l), not log(l)"
    n = X.shape[0]
    if n > rows and close(got[:rows], want[:rows]).all() and not close(got[rows:], want[rows:]).all():
        return (
            "the first row block is right and the later ones are not: the running max and sum are reset only at "
            "the first grid step; reset them on the first feature step of every row block, pl.when(j == 0) with "
            "j = pl.program_id(1)"
        )
    return None
