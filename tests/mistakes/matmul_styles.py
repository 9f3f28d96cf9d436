"""Correct LAB·1.2 matmul kernels written in the styles students write them, as source (the body of matmul_kernel,
pasted into LAB·1.4 as its text asks). Every one computes the same product; the course's models of a student's
matmul (pallas_course.lab_1_4_rules.YourMatmul) must read the same step from each (tests/test_step_work.py), and
one of them goes through LAB·1.4 end to end (tests/mistakes/corpus.py)."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from autograder.labs import reference_kernels

# The solution's body (zero on the first K step, then +=), as LAB·1.4's notebook has it.
REFERENCE = """\
    k = pl.program_id(2)
    @pl.when(k == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype)).astype(o_ref.dtype)
"""

STYLES: dict[str, str] = {
    "reference": REFERENCE,
    # assign the product on the first K step, add it after: a step runs one of the two dots
    "assign_then_add": """\
    k = pl.program_id(2)
    prod = lambda: jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)
    @pl.when(k == 0)
    def _first():
        o_ref[...] = prod()
    @pl.when(k != 0)
    def _rest():
        o_ref[...] += prod()
""",
    # the K block in 128-wide sub-tiles, a fori_loop over them (bk // 128 trips)
    "fori_subtiles": """\
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)
    t = 128
    def body(s, acc):
        return acc + jnp.dot(a_ref[:, pl.ds(s * t, t)], b_ref[pl.ds(s * t, t), :], preferred_element_type=jnp.float32)
    acc = jax.lax.fori_loop(0, a_ref.shape[1] // t, body, jnp.zeros(o_ref.shape, jnp.float32))
    o_ref[...] += acc.astype(o_ref.dtype)
""",
    # the same sub-tiles in a Python loop, unrolled while tracing
    "python_loop": """\
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)
    t = 128
    acc = jnp.zeros(o_ref.shape, jnp.float32)
    for s in range(a_ref.shape[1] // t):
        acc += jnp.dot(a_ref[:, s * t:(s + 1) * t], b_ref[s * t:(s + 1) * t, :], preferred_element_type=jnp.float32)
    o_ref[...] += acc.astype(o_ref.dtype)
""",
    # a while_loop with its own counter
    "while_subtiles": """\
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)
    t = 128
    def body(carry):
        s, acc = carry
        return s + 1, acc + jnp.dot(a_ref[:, pl.ds(s * t, t)], b_ref[pl.ds(s * t, t), :],
                                    preferred_element_type=jnp.float32)
    _, acc = jax.lax.while_loop(lambda c: c[0] < a_ref.shape[1] // t, body, (0, jnp.zeros(o_ref.shape, jnp.float32)))
    o_ref[...] += acc.astype(o_ref.dtype)
""",
    # @ and an f32 sum read and written in one store, the zeroing as jnp.where on the step
    "matmul_operator_where": """\
    first = pl.program_id(2) == 0
    prev = jnp.where(first, jnp.zeros(o_ref.shape, jnp.float32), o_ref[...].astype(jnp.float32))
    o_ref[...] = (prev + a_ref[...].astype(jnp.float32) @ b_ref[...].astype(jnp.float32)).astype(o_ref.dtype)
""",
    # einsum
    "einsum": """\
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += jnp.einsum("mk,kn->mn", a_ref[...], b_ref[...],
                             preferred_element_type=jnp.float32).astype(o_ref.dtype)
""",
}


# LAB·1.2's matmul_acc pasted as the matmul: an f32 VMEM scratch accumulator, stored on the last K step (a fourth
# ref, and scratch_shapes in the pallas_call). The lab's VMEM models count the lab's matmul, A, B and C blocks (plus
# one f32 accumulator when asked), so this scratch is not counted twice.
SCRATCH_STYLE = "f32_scratch"
STYLES[SCRATCH_STYLE] = """\
    k = pl.program_id(2)
    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    @pl.when(k == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)
"""


def kernel_source(style: str) -> str:
    refs = "a_ref, b_ref, o_ref, acc_ref" if style == SCRATCH_STYLE else "a_ref, b_ref, o_ref"
    return f"def matmul_kernel({refs}):\n" + STYLES[style]


# the chapter's matmul wrapper, from the reference kernels' one home (the styles change only its kernel)
MATMUL = inspect.getsource(reference_kernels.matmul)


def matmul(style: str) -> Callable[..., Any]:
    """The LAB·1.2 matmul with `style`'s kernel, as a function (interpret mode: it runs on a CPU)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from jax.experimental.pallas import tpu as pltpu

    wrapper = (
        MATMUL
        if style != SCRATCH_STYLE
        else MATMUL.replace(
            "        interpret=INTERP,",
            "        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],\n        interpret=INTERP,",
        )
    )
    from pallas_course.precision import matmul_precision

    namespace: dict[str, Any] = {
        "jax": jax,
        "jnp": jnp,
        "pl": pl,
        "pltpu": pltpu,
        "INTERP": True,
        "matmul_precision": matmul_precision,
    }
    exec(compile(kernel_source(style) + "\n" + wrapper, f"<matmul style {style}>", "exec"), namespace)  # noqa: S102 - the corpus's own kernels
    return namespace["matmul"]
