"""What the rebuild speaks: every primitive the installed JAX can lower for a TPU inside a Pallas kernel (the Mosaic
lowering's rule table for the TensorCore, jax._src.pallas.mosaic.lowering.lowering_rules) or run outside one
(primitives with a platform-independent, CPU or TPU lowering, jax._src.interpreters.mlir), less what cannot be plain
data: each left out in EXCLUDED with the reason a student reads.

Derived, not listed: a JAX upgrade that adds a primitive adds it here, and tests/test_vocabulary.py fails on a
primitive of the derived set that the rebuild neither binds nor excludes with a reason. A legal operation is never
refused as "not allowed": it reaches the values check and the compiler, whose refusal (erfc, sort, cumsum in a
kernel) is translated (pallas_course.errors).
"""

from __future__ import annotations

import functools
from typing import Any

from pallas_course import copy_rules

# ------------------------------------------------------------------------------------------------ the reasons
_CALLBACK = "it calls back into Python on the host (the student's code, which never runs in the grader)"
_DEBUG = "it prints or inspects while running: debug output, not part of what the computation returns"
_EFFECT = (
    "it has an effect outside its arrays (an ordering token, a barrier, a pinned buffer): not plain data; the "
    "course's kernels move data with BlockSpecs, or with pltpu.make_async_copy and DMA semaphores (LAB·1.6)"
)
_DEVICES = "it is a collective or a sharding across devices: the grade runs and compiles one device, with no mesh"
_KEYS = (
    "it works on PRNG key arrays, an extended dtype that does not travel as plain data: draw random numbers "
    "outside the traced function, or pass raw uint32 bits"
)
_OPAQUE = "it carries a compiled or serialized program (a custom call, an exported module) instead of equations"
_AD = "it belongs to autodiff's or vmap's own rules and never appears in a traced forward computation"
_SHAPES = "it is symbolic-shape machinery (shape polymorphism): the grade traces concrete shapes"
_GPU = "it is a GPU (cuDNN) kernel, with no CPU or TPU lowering to run or compile"
_SUB = (
    "it holds a sub-computation of a form the rebuild does not carry (it carries jit, cond, while_loop, "
    "fori_loop, scan, custom_jvp/custom_vjp and checkpoint)"
)
_MOSAIC = (
    "it is one of the Mosaic matmul unit's or the interpreter's own steps, which Pallas emits for itself "
    "and a kernel does not write"
)
_PLATFORM = (
    "its result depends on the platform it runs on (a TPU's own approximation or generator, not the CPU's), so "
    "the grader's run on the CPU would not be what the TPU computes"
)
_MASKED = (
    "pl.load/pl.store with a mask carries its index as a Python tree the description cannot hold: index the "
    "ref (x_ref[...], x_ref[pl.ds(i, n)]) and select with jnp.where"
)

EXCLUDED: dict[str, str] = {
    **dict.fromkeys(["pure_callback", "io_callback", "debug_callback", "ffi_call", "custom_partitioning"], _CALLBACK),
    **dict.fromkeys(["debug_print", "inspect_sharding", "trace_value", "name"], _DEBUG),
    **dict.fromkeys(
        [
            "create_token",
            "after_all",
            "get_barrier_semaphore",
            "delay",
            "add_dependency",
            "empty_ref",
            "pin",
            "unpin",
            "run_state",
            "unreachable",
            "dce_sink",
            "tie",
            "empty",
            "empty2",
            "check",
            "shape_assertion",
        ],
        _EFFECT,
    ),
    **dict.fromkeys(
        [
            "all_gather",
            "all_gather_done",
            "all_gather_invariant",
            "all_gather_reduced",
            "all_gather_reduced_start",
            "all_gather_start",
            "all_to_all",
            "all_to_all_done",
            "all_to_all_start",
            "axis_index",
            "device_put",
            "layout_constraint",
            "pbroadcast_done",
            "pmax",
            "pmin",
            "ppermute",
            "ppermute_done",
            "ppermute_start",
            "precv",
            "preduced",
            "psend",
            "psum",
            "psum_done",
            "psum_invariant",
            "psum_invariant_start",
            "psum_start",
            "pvary",
            "ragged_all_to_all",
            "reduce_scatter",
            "reduce_scatter_done",
            "reduce_scatter_start",
            "reduced_vary_cast_p",
            "reshard",
            "shard_map",
            "sharding_constraint",
            "unreduced_psum",
            "unreduced_psum_start",
            "unreduced_reduce_scatter",
            "unreduced_reduce_scatter_start",
            "vary_unreduced_cast_p",
            "with_memory_space_constraint",
            "core_map",
            "mpmd_map",
        ],
        _DEVICES,
    ),
    **dict.fromkeys(
        [
            "random_seed",
            "random_wrap",
            "random_unwrap",
            "random_bits",
            "random_split",
            "random_fold_in",
            "random_clone",
            "random_gamma",
            "prng_seed",
            "prng_random_bits",
            "prng_split",
            "prng_join",
            "from_edtype",
            "to_edtype",
        ],
        _KEYS,
    ),
    **dict.fromkeys(["tpu_custom_call", "call_exported"], _OPAQUE),
    **dict.fromkeys(
        [
            "custom_lin",
            "linear_call",
            "custom_vmap_call",
            "remat_opt",
            "create_linear",
            "custom_linear_solve",
            "symmetric_product",
        ],
        _AD,
    ),
    **dict.fromkeys(["dim_as_value", "dimension_size"], _SHAPES),
    **dict.fromkeys(
        [
            "dot_product_attention_fwd_wrapper",
            "dot_product_attention_bwd_wrapper",
            "dot_product_attention_fp8_fwd_wrapper",
            "dot_product_attention_fp8_bwd_wrapper",
            "scaled_matmul_wrapper",
        ],
        _GPU,
    ),
    **dict.fromkeys(
        ["call", "composite", "reduce", "reduce_window", "select_and_scatter", "select_and_gather_add"],
        _SUB,
    ),
    **dict.fromkeys(["matmul_push_rhs", "matmul_acc_lhs", "matmul_pop", "stage"], _MOSAIC),
    **dict.fromkeys(["masked_load", "masked_swap"], _MASKED),
    # the copies (pltpu.make_async_copy's .start() and .wait()) are rebuilt (SPECIAL); what around them is not
    **dict.fromkeys(["semaphore_read", "semaphore_signal", "semaphore_wait"], copy_rules.REGULAR_SEMAPHORES),
    "run_scoped": copy_rules.SYNC_COPY,
    "approx_top_k": _PLATFORM + ": use lax.top_k",
    "rng_uniform": _PLATFORM + " (and it is stateful): draw random numbers outside the traced function",
}

# Every rebuilt primitive whose lowering differs between the CPU (where the grader runs a computation for its values,
# in TPU interpret mode) and the TPU (whose compiler judges it), and how the grade keeps the two the same
# computation. tests/test_vocabulary.py derives the primitives lowered per platform from the installed JAX and fails on
# one missing here. (approx_top_k and rng_uniform, whose results are the platform's, are EXCLUDED above.)
_SAME_MATH = (
    "the same operation, implemented per platform (LAPACK or XLA's own expansion on the CPU, the TPU's "
    "algorithm there): equal up to rounding, which the lab's tolerances allow; what has no TPU lowering "
    "is the compiler's refusal"
)
PLATFORM_DEPENDENT: dict[str, str] = {
    "platform_index": (
        "resolved: `lax.platform_dependent`'s branch index is the TPU's (inside a kernel Mosaic's "
        "`mosaic=` or default branch, outside the `tpu=` or default branch), for the run and the "
        "compile alike (autograder.judge.rebuild.tpu_branch)"
    ),
    "cond": (
        "resolved: a `cond` of `lax.platform_dependent` (its `branches_platforms`) is rebuilt as the TPU's "
        "branch alone, so the run and the compile take the same branch; any other `cond` means the same "
        "everywhere"
    ),
    "pallas_call": (
        "the course's premise: TPU interpret mode runs on the CPU what Mosaic compiles for the TPU, "
        "both from the same kernel jaxpr"
    ),
    "rng_bit_generator": (
        "`lax.rng_bit_generator` with the default algorithm draws different bits on a CPU and a "
        "TPU (XLA picks the algorithm per platform), so the grader's run would not be what a TPU "
        "computes: pass algorithm=lax.RandomAlgorithm.RNG_THREE_FRY or RNG_PHILOX, the same "
        "bits everywhere"
    ),
    "dot_general": (
        "the same product; the precision of f32 operands at Precision.DEFAULT is the platform's "
        "(bf16 passes on a TPU's MXU outside a kernel): rounding, not a branch"
    ),
    "ragged_dot_general": "the same product, TPU's own lowering: rounding, not a branch",
    "conv_general_dilated": "the same convolution, a CPU-specific lowering of its layout: rounding, not a branch",
    "threefry2x32": "the same counter-based hash on every platform (a CPU-specific lowering of the same bits)",
    "select_and_scatter_add": "the same operation, a CPU-specific expansion",
    **dict.fromkeys(
        [
            "cholesky",
            "eig",
            "eigh",
            "geqp3",
            "geqrf",
            "hessenberg",
            "householder_product",
            "lu",
            "ormqr",
            "schur",
            "svd",
            "triangular_solve",
            "tridiagonal",
            "tridiagonal_solve",
        ],
        _SAME_MATH,
    ),
}

# Rebuilt by hand (autograder.judge.rebuild): their parameters hold sub-computations, refs or grid queries.
SPECIAL = frozenset(
    {
        "pallas_call",
        "get",
        "swap",
        "addupdate",
        "program_id",
        "num_programs",
        "multiple_of",
        "cond",
        "while",
        "scan",
        "platform_index",
        "dma_start",
        "dma_wait",
    }
)
# Calls whose body is evaluated in place (the structure checks look through them: kernel_trace.LAYOUT_PRIMITIVES),
# but jit, which is rebuilt as a jit: {name: the parameter holding the body}
INLINED = {
    "jit": "jaxpr",
    "pjit": "jaxpr",
    "closed_call": "call_jaxpr",
    "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr",
    "remat2": "jaxpr",
    "checkpoint": "jaxpr",
}


@functools.lru_cache(maxsize=1)
def lowerable() -> dict[str, Any]:
    """{name: primitive} of every primitive the installed JAX lowers inside a Pallas TPU kernel (TensorCore) or
    outside one (platform-independent, CPU or TPU lowerings)."""
    from jax.experimental import pallas  # noqa: F401 - registers the Pallas primitives and their lowerings
    from jax.experimental.pallas import tpu  # noqa: F401 - registers the TPU lowerings
    from jax._src.interpreters import mlir
    from jax._src.pallas.mosaic import lowering as mosaic

    # private tables: read defensively, so a JAX that moved one still imports (tests/test_vocabulary.py then fails
    # on the primitives it no longer finds)
    mosaic_rules = getattr(mosaic, "lowering_rules", {})
    tables: list[Any] = [rules for kind, rules in mosaic_rules.items() if getattr(kind, "name", "") == "TC"]
    platforms = getattr(mlir, "_platform_specific_lowerings", {})
    tables += [getattr(mlir, "_lowerings", {})] + [platforms.get(p, {}) for p in ("cpu", "tpu")]
    found: dict[str, Any] = {}
    for table in tables:
        for prim in table:
            found.setdefault(prim.name, prim)
    found.setdefault("addupdate", _addupdate())  # `ref[...] += x`: discharged before lowering, hence in no table
    return found


def _addupdate() -> Any:
    from jax._src.state import primitives as state

    return state.addupdate_p


@functools.lru_cache(maxsize=1)
def bound() -> dict[str, Any]:
    """{name: primitive} the rebuild binds as it is (parameters parsed, then `primitive.bind`): the lowerable set
    less EXCLUDED, less the ones rebuilt by hand."""
    return {n: p for n, p in lowerable().items() if n not in EXCLUDED and n not in SPECIAL and n not in INLINED}


def rebuilt() -> frozenset[str]:
    """Every primitive name the rebuild takes."""
    return frozenset(bound()) | SPECIAL | frozenset(INLINED)


def refusal(name: str) -> str:
    """Why `name` is not rebuilt, in a student's words."""
    shown = f"`{str(name)[:80]}`"
    if name in EXCLUDED:
        return f"{shown} is not rebuilt by the grader: {EXCLUDED[name]}"
    return (
        f"{shown} is no operation the installed JAX can lower for a TPU (in a Pallas kernel or around one) or run "
        "on the CPU"
    )
