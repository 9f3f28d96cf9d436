"""The notebooks' visible checks of LAB·1.1-1.3's and LAB·1.6's kernels: the grade's own rules (pallas_course.rules) on one case
of every family the grade covers, with fixed inputs.

`check_kernel("transpose", transpose)` runs each visible case of that kernel: first what the grade reads off the
trace (one pallas_call, nothing computed around it, the grid, the BlockSpecs, the index maps, the output dtype),
then the values, under the grade's TPU interpret mode, against a float64 reference at the grade's tolerance, with
the grade's diagnosis of a wrong answer. The first failure raises a CheckFailure that says what is wrong; a pass
prints one line per case. The grade adds fresh inputs and sizes, never a rule (tests/test_families.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from pallas_course import graded_compile, lab_1_6_rules, rules, tpu_compile
from pallas_course.compare import PASSED, CheckFailure, compare, explained, form_mismatch, max_error, tolerance_phrase
from pallas_course.errors import explain, unlowered_in
from pallas_course.runtime import compiled_on_a_tpu, run_under_course_mode


@dataclass(frozen=True)
class Case:
    """One visible case of a kernel: the graded tests it stands for, its inputs' shape and dtype, its keyword
    arguments (block sizes), and the kind of inputs (rows) when that is a family of its own."""

    tests: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    kwargs: Mapping[str, int] = field(default_factory=dict)
    kind: str = ""
    run: bool = True  # False: structure only (traced, nothing runs), as the grade's schedule tests

    def families(self, kernel: str) -> frozenset[str]:
        return FAMILIES[kernel](self)


FAMILIES: dict[str, Callable[[Case], frozenset[str]]] = {
    "add": lambda c: rules.array_families(c.shape, c.dtype),
    "transpose": lambda c: rules.transpose_families(c.shape, c.kwargs["bm"], c.kwargs["bn"], c.dtype),
    "rowmax": lambda c: rules.rowmax_families(c.shape, c.kwargs["bm"], c.kwargs["bn"], c.dtype),
    "rowmax_dense": lambda c: rules.rowmax_families(c.shape, c.kwargs["bm"], c.kwargs["bn"], c.dtype),
    "matmul": lambda c: rules.matmul_families(c.shape, c.kwargs["bm"], c.kwargs["bn"], c.kwargs["bk"], c.dtype),
    "softmax": lambda c: rules.rows_families(c.shape, c.dtype, c.kwargs.get("rows_per_block"), c.kind),
    "layernorm": lambda c: rules.rows_families(c.shape, c.dtype, c.kwargs.get("rows_per_block"), c.kind),
    "column_sums": lambda c: rules.column_sums_families(c.shape, c.kwargs.get("rows_per_block"), c.dtype),
    "add_copies": lambda c: lab_1_6_rules.copies_families(c.shape, c.dtype, c.kwargs.get("rows_per_block")),
    "row_logsumexp": lambda c: lab_1_6_rules.logsumexp_families(
        c.shape, c.dtype, c.kwargs.get("rows_per_block"), c.kwargs.get("cols_per_block"), c.kind
    ),
}
FAMILIES["matmul_acc"] = FAMILIES["matmul_gelu"] = FAMILIES["matmul"]

F32, BF16 = "float32", "bfloat16"
ROWMAX = ("rowmax_schedule", "rowmax_values")
ROWMAX_DENSE = ("rowmax_dense_schedule", "rowmax_dense_values")
MM = ("matmul_schedule", "matmul_f32", "matmul_precision")
ACC = ("matmul_acc_schedule", "matmul_acc_semantics", "matmul_acc_f32_accumulator")
GELU = ("matmul_gelu_values", "matmul_gelu_fused")
SOFTMAX = ("softmax_values", "softmax_fused")
LAYERNORM = ("layernorm_values", "layernorm_fused")
RAGGED = ("column_sums_ragged",)
COPIES = ("add_copies_schedule", "add_copies_values")
LSE = ("logsumexp_schedule", "logsumexp_values")

# The visible cases, kernel by kernel. Each family of the grade's cases (rules.*_families) has one here at least.
CASES: dict[str, tuple[Case, ...]] = {
    "add": (
        Case(("add_f32",), (256, 256), F32),
        Case(("add_f32",), (384, 128), F32),
        Case(("add_bf16",), (256, 256), BF16),
        Case(("add_bf16",), (128, 512), BF16),
    ),
    "transpose": (
        Case(("transpose_schedule", "transpose_values"), (256, 256), F32, {"bm": 128, "bn": 128}),
        Case(("transpose_schedule", "transpose_values"), (384, 256), F32, {"bm": 128, "bn": 128}),  # 3 × 2 grid
        Case(("transpose_schedule", "transpose_values"), (256, 512), BF16, {"bm": 128, "bn": 256}),
    ),  # (128, 256) blocks
    "rowmax": (
        Case(ROWMAX, (64, 1024), F32, {"bm": 8, "bn": 256}),  # 8 × 4 grid, bm the default 8
        Case(ROWMAX, (128, 2048), F32, {"bm": 32, "bn": 512}),
    ),  # 4 × 4 grid
    "rowmax_dense": (
        Case(ROWMAX_DENSE, (64, 1024), F32, {"bm": 8, "bn": 256}),
        Case(ROWMAX_DENSE, (128, 2048), F32, {"bm": 32, "bn": 512}),
    ),
    "matmul": (
        Case(MM, (256, 512, 384), F32, {"bm": 128, "bn": 128, "bk": 128}),  # 2 × 3 × 4 grid
        Case(MM, (256, 512, 384), F32, {"bm": 128, "bn": 128, "bk": 256}),  # bk != bn
        Case(MM, (512, 256, 256), F32, {"bm": 256, "bn": 128, "bk": 128}),  # bm != bn, a 2 × 2 × 2 grid
        # the lab runs matmul on bf16 too: traced and compiled there, its precision rule the bf16 one
        Case(("matmul_precision",), (256, 512, 384), BF16, {"bm": 128, "bn": 128, "bk": 128}, run=False),
    ),
    "matmul_acc": (
        Case(ACC, (256, 2048, 256), BF16, {"bm": 128, "bn": 128, "bk": 128}),  # 16 K steps
        Case(ACC[:2], (256, 512, 384), BF16, {"bm": 128, "bn": 128, "bk": 256}, run=False),
        Case(ACC[:2], (512, 256, 256), BF16, {"bm": 256, "bn": 128, "bk": 128}, run=False),
    ),
    # first, the GELU judged by what the epilogue computes: b the identity (rules.GELU_PROBE)
    "matmul_gelu": (
        Case(
            ("matmul_gelu_fused",),
            rules.GELU_PROBE[0],
            F32,
            dict(zip(("bm", "bn", "bk"), rules.GELU_PROBE[1:])),
            kind="b the identity",
        ),
        Case(GELU, (256, 512, 384), F32, {"bm": 128, "bn": 128, "bk": 128}),
        Case(GELU, (256, 512, 384), F32, {"bm": 128, "bn": 128, "bk": 256}),
        Case(GELU, (512, 256, 256), F32, {"bm": 256, "bn": 128, "bk": 128}),
    ),
    "softmax": (
        Case(SOFTMAX, (64, 512), F32),
        Case(SOFTMAX, (96, 384), F32, {"rows_per_block": 32}),
        Case(SOFTMAX, (64, 512), BF16, {"rows_per_block": 16}),
        Case(("softmax_stability", "softmax_fused"), (64, 512), F32, {"rows_per_block": 16}, kind="large logits"),
    ),
    "layernorm": (
        Case(LAYERNORM, (64, 256), F32),
        Case(LAYERNORM, (96, 512), F32, {"rows_per_block": 32}),
        Case(LAYERNORM, (64, 384), BF16, {"rows_per_block": 16}),
        Case(("layernorm_edge", "layernorm_fused"), (64, 512), F32, {"rows_per_block": 16}, kind="edge rows"),
    ),
    # rows a multiple of the block first: a missing zeroing shows there, so NaN at a ragged case is the edge's
    "column_sums": (
        Case(RAGGED, (64, 256), F32),
        Case(RAGGED, (100, 256), F32, {"rows_per_block": 8}),  # 13 blocks, the last 4 rows of 8
        Case(RAGGED, (20, 384), F32, {"rows_per_block": 32}),  # one block, 20 rows of 32
        # the lab grades its functions in float32 and bfloat16: bf16 x (16-row blocks, its native tile), f32 sums
        Case(RAGGED, (120, 256), BF16, {"rows_per_block": 16}),
    ),
    "add_copies": (
        Case(COPIES, (64, 256), F32),  # 8 steps of the default 8 rows
        Case(COPIES, (256, 256), F32, {"rows_per_block": 64}),
        Case(COPIES, (64, 512), BF16, {"rows_per_block": 16}),
    ),
    # rising and falling rows (lab_1_6_rules.logsumexp_inputs): the max grows across feature steps in half of them
    "row_logsumexp": (
        Case(LSE, (64, 512), F32),  # the default (8, 128) blocks: an 8 × 4 grid
        Case(LSE, (96, 1024), F32, {"rows_per_block": 32, "cols_per_block": 256}),
        Case(LSE, (64, 512), BF16, {"rows_per_block": 16, "cols_per_block": 128}),
        Case(
            ("logsumexp_stability", "logsumexp_schedule"),
            (64, 512),
            F32,
            {"rows_per_block": 16, "cols_per_block": 128},
            kind="large logits",
        ),
    ),
}
SEED = 20  # the visible inputs are fixed; the grade draws fresh ones


def _label(kernel: str, case: Case) -> str:
    args = {
        "add": "x, y",
        "layernorm": "x, g, b",
        "softmax": "x",
        "transpose": "x",
        "column_sums": "x",
        "rowmax": "x",
        "add_copies": "x, y",
        "row_logsumexp": "x",
        "rowmax_dense": "x",
    }.get(kernel, "a, b")
    kw = "".join(f", {k}={v}" for k, v in case.kwargs.items())
    if kernel.startswith("matmul"):
        m, k, n = case.shape
        where = f"{m}×{k} @ {k}×{n} {case.dtype}"
    else:
        where = f"{case.shape} {case.dtype}"
    return f"{kernel}({args}{kw}) on {where}" + (f" ({case.kind})" if case.kind else "")


def _inputs(kernel: str, case: Case, rng: np.random.Generator) -> tuple[Any, ...]:
    if kernel in ("add", "add_copies"):
        return rules.random_array(rng, case.shape, case.dtype), rules.random_array(rng, case.shape, case.dtype)
    if kernel == "row_logsumexp":
        if case.kind == "large logits":
            return (rules.large_logits(rng, case.shape),)
        return (lab_1_6_rules.logsumexp_inputs(rng, case.shape, case.dtype),)
    if kernel == "transpose":
        return (rules.random_array(rng, case.shape, case.dtype),)
    if kernel in ("rowmax", "rowmax_dense"):
        return (rules.rowmax_inputs(rng, case.shape),)
    if kernel == "matmul_gelu" and case.kind == "b the identity":
        return rules.gelu_probe_inputs(rng)
    if kernel.startswith("matmul"):
        m, k, n = case.shape
        return rules.random_array(rng, (m, k), case.dtype), rules.random_array(rng, (k, n), case.dtype)
    if kernel == "softmax":
        if case.kind == "large logits":
            return (rules.large_logits(rng, case.shape),)
        return (rules.softmax_inputs(rng, case.shape, case.dtype),)
    if kernel == "layernorm":
        if case.kind == "edge rows":
            return rules.layernorm_edge_inputs(rng, case.shape)
        return rules.layernorm_inputs(rng, case.shape, case.dtype)
    if kernel == "column_sums":
        return (rules.column_sums_inputs(rng, case.shape, case.dtype),)
    raise KeyError(kernel)


def _structure_args(kernel: str, case: Case) -> tuple[Any, ...]:
    import jax

    if kernel.startswith("matmul"):
        m, k, n = case.shape
        return jax.ShapeDtypeStruct((m, k), case.dtype), jax.ShapeDtypeStruct((k, n), case.dtype)
    x = jax.ShapeDtypeStruct(case.shape, case.dtype)
    if kernel == "layernorm":
        p = jax.ShapeDtypeStruct((case.shape[1],), case.dtype)
        return x, p, p
    return (x, x) if kernel in ("add", "add_copies") else (x,)


def _structure(kernel: str, case: Case, label: str, t: Any) -> str | None:
    """The grade's structural rules for this kernel, on the trace; the one pallas_call comes first."""
    min_size = int(np.prod(case.shape)) if kernel in ("softmax", "layernorm", "column_sums") else 0
    problem = rules.one_kernel_problem(label, t, min_size)
    if problem:
        return problem
    pc = t.pallas_calls[0]
    # the grade compiles the kernel for a TPU (graded_compile, where libtpu is here, asks the compiler itself);
    # without libtpu, what the TPU lowering has no rule for is still read off the trace, in the same words
    prim = None if tpu_compile.available() else unlowered_in(pc.kernel_primitives())
    if prim is not None:
        e = explain(NotImplementedError(f"Unimplemented primitive in Pallas TPU lowering for tc: {prim}"), locate=False)
        return f"{label}: {e.summary.removeprefix('✗ ')}"
    kw = case.kwargs
    if kernel == "transpose":
        return rules.transpose_schedule_problem(label, pc, case.shape, kw["bm"], kw["bn"])
    if kernel == "rowmax":
        return rules.rowmax_schedule_problem(label, pc, case.shape, kw["bm"], kw["bn"])
    if kernel == "rowmax_dense":
        return rules.rowmax_dense_schedule_problem(label, pc, case.shape, kw["bm"], kw["bn"])
    if kernel.startswith("matmul"):
        problem = rules.matmul_schedule_problem(label, pc, case.shape, kw["bm"], kw["bn"], kw["bk"])
        if problem is None and kernel == "matmul":
            problem = rules.matmul_precision_problem(label, pc, case.dtype)
        if problem is None and kernel == "matmul_acc":
            problem = (
                rules.out_dtype_problem(label, pc, case.dtype)
                or rules.matmul_semantics_problem(label, pc)
                or rules.f32_accumulator_problem(label, pc)
                or rules.f32_dot_problem(label, pc)
            )
        return problem
    if kernel in ("softmax", "layernorm"):
        return rules.row_blocks_problem(
            label, pc, case.shape, case.dtype, kw.get("rows_per_block", 8), n_params=2 if kernel == "layernorm" else 0
        )
    if kernel == "column_sums":
        return rules.column_sums_schedule_problem(label, pc, case.shape, kw.get("rows_per_block", 8))
    if kernel == "add_copies":
        return lab_1_6_rules.copies_schedule_problem(label, pc, case.shape, case.dtype, kw.get("rows_per_block"))
    if kernel == "row_logsumexp":
        return lab_1_6_rules.logsumexp_schedule_problem(
            label, pc, case.shape, kw.get("rows_per_block"), kw.get("cols_per_block")
        )
    return None


def _default_precision_product(a: Any, b: Any) -> np.ndarray:
    """a @ b at jnp.dot's default precision, on the device: on a TPU the MXU rounds f32 inputs to bf16 there, as
    it does for the kernel's own default-precision jnp.dot (Pallas TPU docs, "Precision control"), so a kernel
    checked against float64 would fail by its hardware's rounding, not its own mistake. The grade runs in TPU
    interpret mode, where both are exact, and keeps float64. (Not yet run on a TPU by the course.)"""
    import jax.numpy as jnp

    return rules.as_f64(jnp.dot(a, b))


def _expected(
    kernel: str, case: Case, inputs: tuple[Any, ...], dot_precisions: tuple[str, ...] = ()
) -> tuple[np.ndarray, dict[str, Any]]:
    """(float64 reference, tolerances) of this case, as the grade compares it. `dot_precisions`: what the traced
    kernel's dots ask (PallasCallInfo.dot_precisions)."""
    f64 = [rules.as_f64(v) for v in inputs]
    bf16 = case.dtype == BF16
    if kernel == "add":
        return (f64[0] + f64[1]).astype(np.dtype(case.dtype)), rules.ADD_BF16 if bf16 else rules.ADD_F32
    if kernel == "transpose":
        return f64[0].T.astype(np.dtype(case.dtype)), rules.TRANSPOSE
    if kernel == "rowmax":
        return f64[0].max(axis=1, keepdims=True).astype(np.dtype(case.dtype)), rules.ROWMAX
    if kernel == "rowmax_dense":
        return rules.rowmax_dense_ref(inputs[0]).astype(np.dtype(case.dtype)), rules.ROWMAX_DENSE
    if kernel in ("matmul", "matmul_gelu"):
        # matmul asks its f32 dot for precision=HIGHEST (graded: matmul_precision), so it is checked against float64
        # everywhere; matmul_gelu's dot follows the same rule (pallas_course.precision.matmul_precision), ungraded:
        # on a TPU a dot that asks for no HIGHEST is checked against the default-precision product (bf16 passes)
        asks_highest = any("HIGHEST" in p for p in dot_precisions)
        tpu_default = kernel == "matmul_gelu" and compiled_on_a_tpu() and not asks_highest
        c = _default_precision_product(*inputs) if tpu_default else f64[0] @ f64[1]
        return (rules.gelu(c) if kernel == "matmul_gelu" else c).astype(np.float32), rules.MATMUL_F32
    if kernel == "matmul_acc":
        # gross errors first (NaN, wrong blocks: off by ~sqrt(K)); then the bf16-steps rule (_values)
        return f64[0] @ f64[1], dict(tol=0.0, atol=float(np.sqrt(case.shape[1])) / 8)
    if kernel == "softmax":
        return rules.softmax_ref(inputs[0]), rules.SOFTMAX_BF16 if bf16 else rules.SOFTMAX_F32
    if kernel == "layernorm":
        tols = (
            rules.LAYERNORM_EDGE if case.kind == "edge rows" else rules.LAYERNORM_BF16 if bf16 else rules.LAYERNORM_F32
        )
        return rules.layernorm_ref(*inputs), tols
    if kernel == "column_sums":
        return rules.column_sums_ref(inputs[0]), rules.COLUMN_SUMS
    if kernel == "add_copies":
        return (f64[0] + f64[1]).astype(np.dtype(case.dtype)), (
            lab_1_6_rules.COPIES_BF16 if bf16 else lab_1_6_rules.COPIES_F32
        )
    if kernel == "row_logsumexp":
        return lab_1_6_rules.logsumexp_ref(inputs[0]), lab_1_6_rules.LOGSUMEXP
    raise KeyError(kernel)


def _block(kernel: str, case: Case) -> tuple[int, ...] | None:
    kw = case.kwargs
    if kernel == "transpose":
        return kw["bn"], kw["bm"]
    if kernel == "rowmax":
        return kw["bm"], 1
    if kernel == "rowmax_dense":
        return kw["bm"], rules.LANES
    if kernel.startswith("matmul"):
        return kw["bm"], kw["bn"]
    if kernel in ("softmax", "layernorm"):
        return kw.get("rows_per_block", 8), case.shape[1]
    if kernel == "column_sums":
        return 1, case.shape[1]
    if kernel == "add_copies":
        return kw.get("rows_per_block", lab_1_6_rules.DEFAULT_ROWS), case.shape[1]
    if kernel == "row_logsumexp":
        return kw.get("rows_per_block", lab_1_6_rules.DEFAULT_ROWS), 1
    return None


def _hint(
    kernel: str, case: Case, inputs: tuple[Any, ...], out: Any, tols: Mapping[str, Any], pc: Any = None
) -> str | None:
    """The grade's diagnosis of wrong values (the same call, the same words as autograder.labs)."""
    kw = case.kwargs
    rows = kw.get("rows_per_block", 8)
    if kernel == "add":
        return rules.add_hint(*inputs, out)
    if kernel == "transpose":
        return rules.transpose_hint(inputs[0], out, kw["bm"], kw["bn"])
    if kernel == "rowmax":
        return rules.rowmax_hint(inputs[0], out, kw["bn"], kw["bm"])
    if kernel == "rowmax_dense":
        return rules.rowmax_dense_hint(inputs[0], out, kw["bn"])
    if kernel == "softmax":
        return rules.softmax_hint(inputs[0], out, rows)
    if kernel == "layernorm":
        return rules.layernorm_hint(*inputs, out, tols["tol"], rows)
    if kernel == "column_sums":
        return rules.column_sums_hint(inputs[0], out, rows, pc)
    if kernel == "add_copies":
        return lab_1_6_rules.copies_hint(*inputs, out, rows)
    if kernel == "row_logsumexp":
        return lab_1_6_rules.logsumexp_hint(inputs[0], out, rows, kw.get("cols_per_block", lab_1_6_rules.DEFAULT_COLS))
    if kernel in ("matmul", "matmul_gelu"):
        return rules.matmul_hint(
            *inputs, out, kw["bk"], rules.gelu if kernel == "matmul_gelu" else None, blocks=(kw["bm"], kw["bn"])
        )
    if kernel == "matmul_acc":
        return rules.matmul_hint(*inputs, out, kw["bk"], tol=rules.MATMUL_ACC_HINT_TOL, blocks=(kw["bm"], kw["bn"]))
    return None


def explained_for(kernel: str, mismatch: Any, hint: str | None) -> str:
    """`explained`, except that column_sums' NaNs lead with its hint: NaN from rows past the end of a partial block
    looks like memory never written (interpret mode's NaN), but the cause is the missing mask, which the hint names."""
    if kernel == "column_sums" and mismatch.kind == "nan" and hint:
        return f"{mismatch.message.split(': ', 1)[0]}: {hint}"
    return explained(mismatch, hint)


def _fail(name: str, message: str, kind: str, raw: str = "") -> CheckFailure:
    failure = CheckFailure(f"{name}: {message}")
    failure.kind, failure.raw = kind, raw
    return failure


def run_case(kernel: str, fn: Callable[..., Any], case: Case, *, name: str | None = None) -> str:
    """One visible case through the grade's rules; raises CheckFailure, or returns the line of its pass."""
    import jax
    import jax.numpy as jnp

    from pallas_course.kernel_trace import trace

    name = name or kernel
    label = _label(kernel, case)
    rng = np.random.default_rng([SEED, *case.shape])
    inputs = _inputs(kernel, case, rng) if case.run else _structure_args(kernel, case)
    args = tuple(jnp.asarray(v) for v in inputs) if case.run else inputs
    try:
        t = trace(fn, *args, **case.kwargs)
    except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
        e = explain(exc)
        raise _fail(name, f"{label}: {e.summary.removeprefix('✗ ')}", e.kind, e.raw) from None
    problem = _structure(kernel, case, label, t)
    if problem:
        raise _fail(name, problem, "structure")
    if not case.run:
        chips = graded_compile.rule_chips(case.tests)
        if not chips:
            return f"{label}: structure as graded"
        compiled = graded_compile.compile_case(functools.partial(fn, **case.kwargs), list(args), chips)
        if compiled.rejected:
            raise _fail(name, graded_compile.refusal(label, compiled, t), "compile")
        if compiled.not_here:
            graded_compile.say_once(chips, compiled.not_here)
        done = graded_compile.phrase(compiled)
        return f"{label}: structure as graded" + (f"; {done}" if done else "")
    try:
        out = run_under_course_mode(lambda: fn(*args, **case.kwargs))
    except CheckFailure:
        raise
    except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
        e = explain(exc)
        raise _fail(name, f"{label}: {e.summary.removeprefix('✗ ')}", e.kind, e.raw) from None
    # It must compile (course.yml's compile rule), as the grade checks it: after the run, before the values.
    chips = graded_compile.rule_chips(case.tests)
    compiled = graded_compile.compile_case(
        functools.partial(fn, **case.kwargs), [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args], chips
    )
    if compiled.rejected:
        raise _fail(name, graded_compile.refusal(label, compiled, t), "compile")
    if compiled.not_here:
        graded_compile.say_once(chips, compiled.not_here)
    done = graded_compile.phrase(compiled)
    done = f"; {done}" if done else ""
    if kernel == "matmul_gelu" and case.kind == "b the identity":
        problem = rules.gelu_epilogue_problem(label, inputs[0], out)
        if problem:
            raise _fail(name, problem, "values")
        return f"{label}: its epilogue computes a GELU{done}"
    pc = t.pallas_calls[0]
    expected, tols = _expected(kernel, case, inputs, pc.dot_precisions)
    if kernel == "matmul_acc":
        mismatch = compare(
            out, expected.astype(np.dtype(case.dtype)), name=label, block=_block(kernel, case), kernel=pc, **tols
        )
        if mismatch is None:
            problem = rules.bf16_accumulation_problem(label, out, expected, case.shape[1])
            if problem:
                raise _fail(name, problem, "values")
            return f"{label}: within one bf16 step of the exact product{done}"
    else:
        # shape and dtype in the input's dtype first, then the values in float64: column_sums returns float32 sums
        # whatever x's dtype (the lab's spec), row_logsumexp float32 too; the others x's dtype
        form = np.float32 if kernel in ("column_sums", "row_logsumexp") else np.dtype(case.dtype)
        mismatch = form_mismatch(out, expected.astype(form), name=label)
        if mismatch is None:
            mismatch = compare(
                rules.as_f64(out),
                expected.astype(np.float64),
                name=label,
                block=_block(kernel, case),
                kernel=pc,
                **tols,
            )
    if mismatch is not None:
        raise _fail(name, explained_for(kernel, mismatch, _hint(kernel, case, inputs, out, tols, pc)), mismatch.kind)
    return (
        f"{label}: matches (max error {max_error(out, expected):.3g}, "
        f"{tolerance_phrase(tols.get('tol', 0.0), tols.get('atol'))}){done}"
    )


def check_kernel(kernel: str, fn: Callable[..., Any], *, name: str | None = None) -> None:
    """Every visible case of `kernel` through the grade's rules: one ✓ line per case, or the first failure."""
    # the compiles start now, beside the interpret-mode runs of the cases (graded_compile.prefetch)
    graded_compile.prefetch(
        [
            (functools.partial(fn, **case.kwargs), _structure_args(kernel, case), graded_compile.rule_chips(case.tests))
            for case in CASES[kernel]
            if case.run
        ]
    )
    lines = [run_case(kernel, fn, case, name=name) for case in CASES[kernel]]
    print(f"✓ {name or kernel}: {len(lines)} cases as graded, one of each kind the grade runs; {PASSED}")
    for line in lines:
        print(f"  · {line}")


def visible_families(test: str) -> frozenset[str]:
    """Every family the visible cases of graded test `test` cover."""
    found: set[str] = set()
    for kernel, cases in CASES.items():
        for case in cases:
            if test in case.tests:
                found |= case.families(kernel)
    return frozenset(found)
