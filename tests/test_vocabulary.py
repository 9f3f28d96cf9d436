"""The rebuild speaks Pallas TPU (autograder.judge.vocabulary): its vocabulary is what the installed JAX lowers inside a
Pallas TPU kernel and around one, less what cannot be plain data, each left out with a written reason; and a set of
kernels of our own, each correct in TPU interpret mode and written with varied legal Pallas, is rebuilt from its
description, runs to the same values as the kernel itself, and reaches the compiler, whose verdict (where it
refuses) is translated. pltpu.repeat does not exist in jax 0.10.2; pltpu.roll does."""

from __future__ import annotations

import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.judge import compile_rule, rebuild, vocabulary
from autograder.failures import StudentError
from autograder.session.testing import LocalFunction
from pallas_course.runtime import interpret_params

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16
IP = interpret_params()


# ------------------------------------------------------------------------------------------ the vocabulary itself


def test_every_lowerable_primitive_is_rebuilt_or_left_out_with_a_reason() -> None:
    lowerable = set(vocabulary.lowerable())
    assert {"reciprocal", "roll", "slice", "sort", "cumsum", "erfc", "gather", "dot_general", "program_id"} <= lowerable
    unexplained = sorted(n for n in lowerable if n not in rebuild.ALLOWED and not vocabulary.EXCLUDED.get(n))
    assert unexplained == [], f"left out of the rebuild without a written reason: {unexplained}"
    assert not rebuild.ALLOWED & set(vocabulary.EXCLUDED)
    assert all(len(why) > 30 for why in vocabulary.EXCLUDED.values())


def test_what_is_left_out_is_what_cannot_be_plain_data() -> None:
    """Callbacks, effects, I/O and debug prints, each with its reason; nothing a lab's kernel computes with."""
    for name in (
        "pure_callback",
        "io_callback",
        "debug_callback",
        "debug_print",
        "semaphore_wait",
        "run_scoped",
        "psum",
        "random_bits",
    ):
        assert name in vocabulary.EXCLUDED, name
    for name in (
        "add",
        "exp",
        "tanh",
        "logistic",
        "erf",
        "rsqrt",
        "reciprocal",
        "roll",
        "iota",
        "dot_general",
        "reduce_max",
        "reduce_sum",
        "select_n",
        "broadcast_in_dim",
        "slice",
        "dynamic_slice",
        "sort",
        "cumsum",
        "erfc",
        "gather",
        "scatter",
        "concatenate",
        "transpose",
        "convert_element_type",
        "dma_start",  # LAB·1.6's copies (tests/test_copies.py)
        "dma_wait",
    ):
        assert name in rebuild.ALLOWED, name


def test_a_debug_print_is_refused_with_its_reason() -> None:
    def printing(x):
        def kernel(x_ref, o_ref):
            jax.debug.print("{}", x_ref[0, 0])
            o_ref[...] = x_ref[...]

        return pl.pallas_call(kernel, out_shape=S(x.shape, x.dtype), interpret=IP)(x)

    with pytest.raises(StudentError) as refused:
        LocalFunction(printing).invoke((np.ones((8, 128), np.float32),), {}, run=True)
    assert refused.value.phase == "rebuild"
    assert "`debug_print` is not rebuilt by the grader: it prints or inspects while running" in refused.value.text
    assert "not a JAX operation this lab allows" not in refused.value.text


def _lowered_per_platform() -> set[str]:
    """Every primitive of the installed JAX whose lowering differs by platform: a CPU and a TPU rule that differ, or a
    rule that picks per platform (mlir.lower_per_platform, platform_index, platform_dependent) in its own source."""
    import functools
    import inspect

    from jax._src.interpreters import mlir

    def sources(rule: Any) -> str:
        text, todo, seen = "", [rule], set()
        while todo:
            r = todo.pop()
            r = getattr(r, "rule", r)  # mlir's LoweringRuleEntry
            if id(r) in seen:
                continue
            seen.add(id(r))
            if isinstance(r, functools.partial):
                todo += [r.func, *[a for a in (*r.args, *r.keywords.values()) if callable(a)]]
                continue
            try:
                text += inspect.getsource(r)
            except (TypeError, OSError):
                pass
            for cell in getattr(r, "__closure__", None) or ():
                try:
                    if callable(cell.cell_contents):
                        todo.append(cell.cell_contents)
                except ValueError:
                    pass
        return text

    specific = getattr(mlir, "_platform_specific_lowerings", {})
    found = set()
    for name, prim in vocabulary.lowerable().items():
        cpu, tpu = specific.get("cpu", {}).get(prim), specific.get("tpu", {}).get(prim)
        rules = [r for r in (mlir._lowerings.get(prim), cpu, tpu) if r is not None]
        if cpu is not tpu or any(
            re.search(r"lower_per_platform|platform_index|platform_dependent", sources(r)) for r in rules
        ):
            found.add(name)
    return found


def test_every_primitive_whose_meaning_depends_on_the_platform_is_decided() -> None:
    """Issue 33: the grader runs a computation on the CPU for its values and compiles it for a TPU, so a primitive the
    two lower differently (lax.platform_dependent's platform_index and cond, approx_top_k, a default-algorithm
    rng_bit_generator) could make the run and the compile different computations. Each one the rebuild takes is
    decided in vocabulary.PLATFORM_DEPENDENT (resolved to the TPU's meaning, or the same operation) or left out with
    the reason."""
    found = _lowered_per_platform()
    assert {"platform_index", "cond", "pallas_call", "approx_top_k", "dot_general", "lu"} <= found, found
    undecided = sorted(n for n in found & rebuild.ALLOWED if n not in vocabulary.PLATFORM_DEPENDENT)
    assert undecided == [], f"rebuilt, lowered per platform, and not decided: {undecided}"
    assert set(vocabulary.PLATFORM_DEPENDENT) <= rebuild.ALLOWED
    assert {"platform_index", "rng_bit_generator"} <= set(vocabulary.PLATFORM_DEPENDENT)  # not found by the walk
    for name in ("approx_top_k", "rng_uniform"):
        assert "depends on the platform" in vocabulary.refusal(name)


def _tpu_branch_of(fn: Callable[..., Any], *args: Any) -> np.ndarray:
    import json

    from autograder.jail.jail_agent.calls import invoke

    answer = invoke(fn, list(args), {})
    computation = rebuild.rebuild(
        json.loads(json.dumps(answer["description"])), answer["consts"], [S(a.shape, a.dtype) for a in args]
    )
    with pltpu.force_tpu_interpret_mode(IP):
        return np.asarray(computation.fn(*args))


def test_platform_dependent_code_runs_the_tpus_branch_inside_and_outside_a_kernel() -> None:
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    ones, twos = (lambda v: v * 0 + 1), (lambda v: v * 0 + 2)

    def outside(v):
        return lax.platform_dependent(v, cpu=ones, tpu=twos, default=lambda v: v * 0)

    def outside_default(v):
        return lax.platform_dependent(v, cpu=ones, default=twos)

    def inside(v):  # Mosaic takes the `mosaic=` branch, else the default, never `tpu=`
        def kernel(x_ref, o_ref):
            o_ref[...] = lax.platform_dependent(x_ref[...], cpu=ones, tpu=ones, default=twos)

        return pl.pallas_call(kernel, out_shape=S(v.shape, v.dtype), interpret=IP)(v)

    for fn in (outside, outside_default, inside):
        assert (_tpu_branch_of(fn, x) == 2).all(), fn.__name__

    def no_tpu_branch(v):
        return lax.platform_dependent(v, cpu=ones)

    with pytest.raises(rebuild.Refused, match=r"no branch a TPU takes outside a kernel \(`tpu=` or `default=`\)"):
        _tpu_branch_of(no_tpu_branch, x)

    def default_bits(v):
        bits = lax.rng_bit_generator(jnp.zeros((4,), jnp.uint32), v.shape, dtype=jnp.uint32)[1]
        return v + (bits & 0).astype(v.dtype)

    with pytest.raises(rebuild.Refused, match="RNG_THREE_FRY"):
        _tpu_branch_of(default_bits, x)


def test_a_name_jax_does_not_have_says_so() -> None:
    assert "no operation the installed JAX can lower" in vocabulary.refusal("frobnicate")


# ------------------------------------------------------------------------------------------ kernels of our own


def _rows(
    body: Callable[[Any], Any], block: tuple[int, int] = (8, 512), out_dtype: Any = None, **call: Any
) -> Callable[..., Any]:
    """A row-blocked kernel applying `body` to each block of x."""

    def kernel(x_ref, o_ref):
        o_ref[...] = body(x_ref[...]).astype(o_ref.dtype)

    def fn(x):
        spec = pl.BlockSpec(block, lambda i: (i, 0))
        return pl.pallas_call(
            kernel,
            grid=(x.shape[0] // block[0],),
            in_specs=[spec],
            out_specs=spec,
            out_shape=S(x.shape, out_dtype or x.dtype),
            interpret=IP,
            **call,
        )(x)

    return fn


def softmax_approx(x):
    def kernel(x_ref, o_ref):
        v = x_ref[...]
        e = jnp.exp(v - jnp.max(v, axis=-1, keepdims=True))
        o_ref[...] = e * pl.reciprocal(jnp.sum(e, axis=-1, keepdims=True), approx=True)

    spec = pl.BlockSpec((8, 512), lambda i: (i, 0))
    return pl.pallas_call(
        kernel, grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec, out_shape=S(x.shape, x.dtype), interpret=IP
    )(x)


def corner_outside(x):
    """A static slice outside the kernel (x[0, 0]) feeding it."""
    return _rows(lambda v: v * 2)(x) + x[0, 0]


def sliced_outside(b):
    """b[:256, :256] outside, then the kernel on it."""
    return _rows(lambda v: v + 1, block=(8, 256))(b[:256, :256])


def fori_rows(x):
    """In-kernel lax.fori_loop over 8-row chunks, pl.ds with pl.multiple_of."""

    def kernel(x_ref, o_ref):
        def body(r, carry):
            start = pl.multiple_of(r * 8, 8)
            o_ref[pl.ds(start, 8), :] = x_ref[pl.ds(start, 8), :] * 3
            return carry

        lax.fori_loop(0, 4, body, 0)

    spec = pl.BlockSpec((32, 512), lambda i: (i, 0))
    return pl.pallas_call(
        kernel, grid=(x.shape[0] // 32,), in_specs=[spec], out_specs=spec, out_shape=S(x.shape, x.dtype), interpret=IP
    )(x)


def matmul_fori_k(a, b):
    """A matmul splitting its K block in 128-wide, 128-aligned chunks with a fori_loop."""

    def kernel(a_ref, b_ref, o_ref):
        def body(t, acc):
            off = pl.multiple_of(t * 128, 128)
            return acc + jnp.dot(
                a_ref[:, pl.ds(off, 128)], b_ref[pl.ds(off, 128), :], preferred_element_type=jnp.float32
            )

        o_ref[...] = lax.fori_loop(0, 2, body, jnp.zeros((128, 128), jnp.float32))

    return pl.pallas_call(
        kernel,
        grid=(2, 2),
        in_specs=[pl.BlockSpec((128, 256), lambda i, j: (i, 0)), pl.BlockSpec((256, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=S((256, 256), F32),
        interpret=IP,
    )(a, b)


def matmul_scratch_when(a, b):
    """K innermost, an f32 VMEM scratch accumulator, pl.when on the first and last K step."""

    def kernel(a_ref, b_ref, o_ref, acc_ref):
        k = pl.program_id(2)

        @pl.when(k == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

        @pl.when(k == pl.num_programs(2) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    return pl.pallas_call(
        kernel,
        grid=(2, 2, 2),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)), pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        out_shape=S((256, 256), a.dtype),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
        interpret=IP,
    )(a, b)


def masked_iota(x):
    """jnp.where over a broadcasted_iota mask: the upper triangle of each block."""

    def body(v):
        rows = lax.broadcasted_iota(jnp.int32, v.shape, 0)
        cols = lax.broadcasted_iota(jnp.int32, v.shape, 1)
        return jnp.where(cols >= rows, v, 0.0)

    return _rows(body)(x)


def row_max_broadcast(x):
    """A max reduction broadcast back (broadcast_in_dim), then jnp.maximum."""
    return _rows(lambda v: jnp.maximum(v, jnp.broadcast_to(jnp.max(v, axis=-1, keepdims=True) * 0.5, v.shape)))(x)


def integer_ops(x):
    """int32 arithmetic, shifts and bit ops in the kernel."""
    return _rows(lambda v: ((v * 3 + 7) >> 1) ^ (v & 0xFF))(x)


def bf16_add(x, y):
    spec = pl.BlockSpec((16, 512), lambda i: (i, 0))
    return pl.pallas_call(
        lambda x_ref, y_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + y_ref[...]),
        grid=(x.shape[0] // 16,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x, y)


def buffered_once(x):
    """pl.Buffered(1): a single buffer for the input (the pipeline off)."""
    spec = pl.BlockSpec((8, 512), lambda i: (i, 0), pipeline_mode=pl.Buffered(1))
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1),
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)),
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x)


def rolled(x):
    return _rows(lambda v: pltpu.roll(v, 128, 1))(x)


def layernorm_rsqrt(x, g):
    """lax.rsqrt, a 1-D (d,) parameter block."""

    def kernel(x_ref, g_ref, o_ref):
        v = x_ref[...]
        mu = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean((v - mu) ** 2, axis=-1, keepdims=True)
        o_ref[...] = (v - mu) * lax.rsqrt(var + 1e-6) * g_ref[...][None, :]

    return pl.pallas_call(
        kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 512), lambda i: (i, 0)), pl.BlockSpec((512,), lambda i: (0,))],
        out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)),
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x, g)


def squeezed_param(x, g):
    """A (None, d) BlockSpec for a (1, d) parameter (a squeezed dimension)."""

    def kernel(x_ref, g_ref, o_ref):
        o_ref[...] = x_ref[...] * g_ref[...]

    return pl.pallas_call(
        kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 512), lambda i: (i, 0)), pl.BlockSpec((None, 512), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)),
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x, g)


def cond_in_kernel(x):
    """lax.cond on the grid position (not pl.when): values from both branches."""

    def kernel(x_ref, o_ref):
        o_ref[...] = lax.cond(pl.program_id(0) % 2 == 0, lambda v: v * 2, lambda v: v - 1, x_ref[...])

    spec = pl.BlockSpec((8, 512), lambda i: (i, 0))
    return pl.pallas_call(
        kernel, grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec, out_shape=S(x.shape, x.dtype), interpret=IP
    )(x)


def transcendental(x):
    return _rows(lambda v: jnp.exp2(-jnp.abs(v)) + jnp.log1p(jnp.abs(v)) + jnp.tanh(v) + jax.nn.sigmoid(v))(x)


def gelu_erf(x):
    return _rows(lambda v: 0.5 * v * (1 + lax.erf(v / jnp.sqrt(2.0))))(x)


def floor_div(x):
    return _rows(lambda v: (v.astype(jnp.int32) // 3).astype(F32))(x)


def scatter_outside(x):
    """x.at[0].set(0) outside the kernel (a scatter), then the kernel."""
    return _rows(lambda v: v + 1)(x.at[0].set(0.0))


def median_outside(x):
    """jnp.median outside the kernel (sort and gather, which run there and compile for a TPU outside kernels)."""
    return _rows(lambda v: v * 2)(x) - jnp.median(x)


def smem_scale(x, s):
    """A scalar operand in SMEM read by every step."""

    def kernel(x_ref, s_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[0]

    spec = pl.BlockSpec((8, 512), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=spec,
        out_shape=S(x.shape, x.dtype),
        interpret=IP,
    )(x, s)


def sort_in_kernel(x):
    return _rows(lambda v: jnp.sort(v, axis=-1))(x)


def cumsum_in_kernel(x):
    return _rows(lambda v: jnp.cumsum(v, axis=-1))(x)


def f16_add(x, y):
    return bf16_add(x, y)


def jitted_topology_named(x):
    """A jax.jit-wrapped function whose name is a marker the old compile step searched for, with 1-row blocks."""

    def get_topology_desc(v):
        return _rows(lambda r: r * 2, block=(1, 512))(v)

    return jax.jit(get_topology_desc)(x)


_rng = np.random.default_rng(26)
X = _rng.normal(size=(256, 512)).astype(np.float32)
A, B = _rng.normal(size=(256, 256)).astype(np.float32), _rng.normal(size=(256, 256)).astype(np.float32)
G = _rng.normal(size=(512,)).astype(np.float32)
XI = _rng.integers(-1000, 1000, size=(256, 512)).astype(np.int32)

# name: (function, inputs, what the compiler says for v5e: "ok" or the kind of its refusal)
KERNELS: dict[str, tuple[Callable[..., Any], tuple[Any, ...], str]] = {
    "softmax with pl.reciprocal(approx=True)": (softmax_approx, (X,), "ok"),
    "static slice x[0, 0] outside": (corner_outside, (X,), "ok"),
    "static slice b[:256, :256] outside": (sliced_outside, (X,), "ok"),
    "fori_loop over pl.ds rows with pl.multiple_of": (fori_rows, (X,), "ok"),
    "matmul K split by fori_loop, 128-aligned pl.ds": (matmul_fori_k, (X[:, :256], X[:256, :256].T.copy()), "ok"),
    "matmul f32 scratch, pl.when": (matmul_scratch_when, (A, B), "ok"),
    "matmul bf16 in, f32 scratch": (matmul_scratch_when, (A.astype(jnp.bfloat16), B.astype(jnp.bfloat16)), "ok"),
    "jnp.where over broadcasted_iota": (masked_iota, (X,), "ok"),
    "max reduction, broadcast, jnp.maximum": (row_max_broadcast, (X,), "ok"),
    "int32 arithmetic, shifts, bit ops": (integer_ops, (XI,), "ok"),
    "bf16 add": (bf16_add, (X.astype(jnp.bfloat16), X.astype(jnp.bfloat16)), "ok"),
    "pl.Buffered(1)": (buffered_once, (X,), "ok"),
    "pltpu.roll": (rolled, (X,), "ok"),
    "lax.rsqrt LayerNorm, 1-D block": (layernorm_rsqrt, (X, G), "ok"),
    "(None, d) squeezed block": (squeezed_param, (X, G[None, :]), "ok"),
    "lax.cond in the kernel": (cond_in_kernel, (X,), "ok"),
    "exp2, log1p, tanh, sigmoid": (transcendental, (X,), "ok"),
    "exact GELU with lax.erf": (gelu_erf, (X,), "ok"),
    "int32 // in the kernel": (floor_div, (X,), "ok"),
    "scatter outside the kernel": (scatter_outside, (X,), "ok"),
    "jnp.median outside the kernel": (median_outside, (X[:16],), "ok"),  # a small sort: its TPU compile is the cost
    "SMEM scalar operand": (smem_scale, (X, np.array([1.5], np.float32)), "ok"),
    "jnp.sort in the kernel": (sort_in_kernel, (X,), "tpu-unimplemented"),
    "jnp.cumsum in the kernel": (cumsum_in_kernel, (X,), "tpu-unimplemented"),
    "float16 add": (f16_add, (X.astype(jnp.float16), X.astype(jnp.float16)), "tpu-vector-type"),
    "jax.jit named get_topology_desc, 1-row blocks": (jitted_topology_named, (X,), "tpu-tiling"),
}


def _direct(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[np.ndarray]:
    with pltpu.force_tpu_interpret_mode(IP):
        out = fn(*[jnp.asarray(a) for a in args])
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("name", list(KERNELS))
def test_our_kernel_is_rebuilt_runs_and_reaches_the_compiler(libtpu, name) -> None:
    fn, args, verdict = KERNELS[name]
    want = _direct(fn, args)
    # rebuilt from its description (LocalFunction also checks the rebuild's structure is the direct trace's)
    answer = LocalFunction(fn, name="kernel").invoke(tuple(jnp.asarray(a) for a in args), {}, run=True)
    assert answer.error is None, answer.error
    got = [np.asarray(o) for o in jax.tree_util.tree_leaves(answer.result)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-6, atol=1e-6)
    (result,) = compile_rule.compile_verdict(
        compile_rule.for_compiler(answer.computation), answer.computation.in_avals, ["v5e"]
    ).results
    assert not result.skipped, result.message  # it reached the compiler, which judged it
    if verdict == "ok":
        assert result.ok, result.message
    else:
        assert result.rejected and result.error_kind == verdict, result
        assert result.explanation.startswith("✗ ") and "fix: " in result.explanation, result.explanation


def test_sort_and_cumsum_are_named_for_what_they_are(libtpu) -> None:
    """Refused by the compiler for sort or cumsum, told sort or cumsum (not "slice", not "not allowed")."""
    for name, words in (
        ("jnp.sort in the kernel", r"sorting \(jnp\.sort"),
        ("jnp.cumsum in the kernel", r"cumulative sum \(jnp\.cumsum\)"),
    ):
        fn, args, _ = KERNELS[name]
        answer = LocalFunction(fn).invoke(tuple(jnp.asarray(a) for a in args), {}, run=True)
        (r,) = compile_rule.compile_verdict(
            compile_rule.for_compiler(answer.computation), answer.computation.in_avals, ["v5e"]
        ).results
        assert re.search(words, r.explanation), r.explanation


def test_the_compiler_sees_canonical_names_only(libtpu) -> None:
    """The kernel and the jitted function are renamed kernel_0 and fn_0 for the compiler; the run keeps the student's
    names (interpret mode's errors quote them)."""
    fn, args, _ = KERNELS["jax.jit named get_topology_desc, 1-row blocks"]
    answer = LocalFunction(fn).invoke(tuple(jnp.asarray(a) for a in args), {}, run=True)
    canonical = jax.make_jaxpr(answer.computation.for_compiler())(*answer.computation.in_avals)
    student = jax.make_jaxpr(answer.computation.fn)(*answer.computation.in_avals)
    assert "get_topology_desc" in str(student) and "get_topology_desc" not in str(canonical)
    from pallas_course.kernel_trace import trace_jaxpr

    assert "name=fn_0" in str(canonical) and [pc.name for pc in trace_jaxpr(canonical).pallas_calls] == ["kernel_0"]
    assert [pc.name for pc in trace_jaxpr(student).pallas_calls] == ["kernel"]
    (r,) = compile_rule.compile_verdict(
        compile_rule.for_compiler(answer.computation), answer.computation.in_avals, ["v5e"]
    ).results
    assert "get_topology_desc" not in r.message + r.explanation


def test_a_static_slice_outside_counts_what_it_reads() -> None:
    """x[0, 0] outside the kernel reads one value: no pass over x (rules.one_kernel_problem with LAB·1.3's allowance
    for small operands); b[:256, :256] of a larger b still copies an array the kernel's size, which is work outside."""
    from pallas_course import kernel_trace, rules

    def scaled(x):
        spec = pl.BlockSpec((8, 512), lambda i: (i, 0))
        return pl.pallas_call(
            lambda x_ref, s_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * s_ref[0]),
            grid=(32,),
            in_specs=[spec, pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs=spec,
            out_shape=S(x.shape, x.dtype),
        )(x, x[0, 0].reshape(1))

    x = S((256, 512), F32)
    assert rules.one_kernel_problem("scaled(x)", kernel_trace.trace(scaled, x), 256 * 512) is None
    t = kernel_trace.trace(sliced_outside, S((512, 512), F32))
    assert "computes outside its kernel (slice)" in rules.one_kernel_problem("f(b)", t, 256 * 256)
