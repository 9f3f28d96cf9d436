"""The reference kernels' one home (autograder/labs/reference_kernels.py): the configurable wrappers that LAB·1.4's
grade and the bench use keep the chapter's printed schedule, and compute what the chapter's kernels compute."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder.labs import reference_kernels as rk
from pallas_course.kernel_trace import trace
from pallas_course.runtime import interpret_params

S = jax.ShapeDtypeStruct


def _schedule(info) -> tuple:
    """What a pallas_call's pipeline is: grid, each operand's blocks and where they sit at every step, scratch."""
    return (
        info.grid,
        info.scratch,
        [
            (
                b.role,
                b.array_shape,
                b.dtype,
                b.block_shape,
                b.buffer_count,
                [b.block_index(*p) for p in info.grid_points()],
            )
            for b in info.blocks
        ],
    )


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_configurable_matmul_is_the_chapters_schedule(dtype) -> None:
    a, b = S((256, 512), dtype), S((512, 384), dtype)
    (chapter,) = trace(rk.matmul, a, b, bm=128, bn=128, bk=256).pallas_calls
    (same,) = trace(lambda x, y: rk.configurable_matmul(x, y, 128, 128, 256), a, b).pallas_calls
    assert _schedule(same) == _schedule(chapter) and same.kernel_primitives() == chapter.kernel_primitives()
    (acc,) = trace(
        lambda x, y: rk.configurable_matmul(x, y, 128, 128, 256, acc_scratch=True, buffers=1), a, b
    ).pallas_calls
    assert acc.grid == chapter.grid and acc.scratch == (((128, 128), np.dtype("float32"), "vmem"),)
    assert {blk.buffer_count for blk in acc.blocks} == {1}


def test_configurable_softmax_is_the_chapters_schedule() -> None:
    x = S((256, 512), jnp.float32)
    (chapter,) = trace(rk.softmax, x, rows_per_block=16).pallas_calls
    (same,) = trace(lambda v: rk.configurable_softmax(v, 16), x).pallas_calls
    assert _schedule(same) == _schedule(chapter) and same.kernel_primitives() == chapter.kernel_primitives()


def test_the_configurable_wrappers_compute_the_chapters_results() -> None:
    """In TPU interpret mode on CPU, as the bench runs them there."""
    ka, kb = jax.random.split(jax.random.key(0))
    a, b = jax.random.normal(ka, (256, 256), jnp.float32), jax.random.normal(kb, (256, 256), jnp.float32)
    want = np.asarray(jnp.dot(a, b, preferred_element_type=jnp.float32))
    for acc in (False, True):
        got = rk.configurable_matmul(a, b, acc_scratch=acc, interpret=interpret_params())
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-3)
    got = rk.configurable_softmax(a[:64], interpret=interpret_params())
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.nn.softmax(a[:64], axis=-1)), rtol=1e-5, atol=1e-6)


def test_the_lab_kernels_are_written_once_outside_the_notebooks() -> None:
    """No grader or tool module keeps its own copy of a lab kernel's body: they import autograder.labs.reference_kernels
    (the notebooks stay the students' source; tests/mutants and tests/mistakes are deliberately wrong copies)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    body = re.compile(r"^\s*def \w*(matmul|transpose|softmax|layernorm)\w*_kernel\(", re.M)
    copies = [
        str(p.relative_to(root))
        for part in ("autograder", "course_tools", "pallas_course")
        for p in sorted((root / part).rglob("*.py"))
        if body.search(p.read_text())
    ]
    assert copies == ["autograder/labs/reference_kernels.py"]
