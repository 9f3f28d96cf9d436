"""BlockSpec legality and VMEM budget: the seed's EX·09 numbers, agreement with JAX's TPU lowering, messages."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from autograder.labs import reference_kernels
from course_tools.reference_schedules import trace_reference
from pallas_course import kernel_trace
from pallas_course.legality import (
    BlockSpecError,
    check_block,
    check_pallas_call,
    fmt_bytes,
    lowering_accepts,
    sandbox_budget,
)


def test_seed_ex09_bf16_256_blocks_on_v5e():
    """EX·09: BlockSpec(256, 256) on (2048, 2048) bf16 is legal, 8 x 8 = 64 blocks, 131 KB each; a copy kernel
    with it in and out holds 2 operands x 2 buffers = 524 KB (the seed's "3 blocks in flight", 393 KB, is not
    what Pallas allocates)."""
    v = check_block((2048, 2048), (256, 256), "bfloat16", "v5e")
    assert v.legal and v.lowers and v.violations == [] and v.notes == []
    assert v.grid == (8, 8) and v.num_blocks == 64
    assert v.block_bytes == 131_072 and fmt_bytes(v.block_bytes) == "131 KB"
    rules = {c.rule: c for c in v.checks}
    assert rules["native tile"].expression.startswith("bm % 16 == 0")  # the seed's "sublane rule bm % 16"
    assert rules["lane rule"].expression.startswith("bn % 128 == 0")
    budget = sandbox_budget(v)
    assert budget.working_set_bytes == 524_288 and fmt_bytes(budget.working_set_bytes) == "524 KB"
    assert budget.vmem_bytes == 134_217_728 and fmt_bytes(budget.vmem_bytes) == "134 MB"
    assert "scaling-book" in budget.sources["vmem_bytes"]
    assert budget.fits_limit and budget.fits_capacity


# (array shape, block shape, dtype): the model's `lowers` must equal JAX's TPU lowering, both ways.
AGREEMENT = [
    ((2048, 2048), (256, 256), jnp.bfloat16),
    ((256, 256), (8, 128), jnp.float32),
    ((256, 256), (8, 128), jnp.bfloat16),  # legal; half a native bf16 tile (a note, not an error)
    ((256, 256), (8, 128), jnp.int8),  # lowers; Mosaic rejects at compile time
    ((256, 256), (100, 128), jnp.float32),
    ((256, 256), (128, 100), jnp.float32),
    ((256, 100), (128, 100), jnp.float32),  # minor dim equal to the array's: legal
    ((100, 256), (100, 128), jnp.float32),  # second-minor equal to the array's: legal
    ((256, 256), (4, 128), jnp.int8),
    ((256, 256), (8, None), jnp.float32),  # squeezed minor dim is size 1
    ((4, 256, 256), (None, 8, 128), jnp.float32),
    ((4, 256, 256), (3, 8, 128), jnp.float32),  # leading dims are unrestricted
    ((250, 256), (8, 128), jnp.float32),  # partial last block: legal
    ((1024,), (128,), jnp.float32),  # rank 1: power of 2 >= 128
    ((1024,), (128,), jnp.bfloat16),  # rank 1: bf16 needs >= 256
    ((4096,), (256,), jnp.bfloat16),
    ((3072,), (1536,), jnp.float32),  # rank 1: not a power of 2, not a multiple of 1024
    ((3072,), (2048,), jnp.float32),
    ((1000,), (1000,), jnp.float32),  # rank 1: full array
    ((1000,), (200,), jnp.float32),
]


@pytest.mark.parametrize("shape,block,dtype", AGREEMENT, ids=lambda x: str(x))
def test_model_agrees_with_tpu_lowering(shape, block, dtype):
    """Illegal for the model iff `lower(lowering_platforms=('tpu',))` rejects it on this CPU machine."""
    v = check_block(shape, block, dtype, "v5e")
    ok, err = lowering_accepts(shape, block, dtype, "v5e")
    assert v.lowers == ok, f"model says lowers={v.lowers} ({v.violations}); JAX says {ok}: {err}"


def test_agreement_table_has_both_verdicts():
    """The table exercises both directions: some cases lower, some do not."""
    verdicts = {check_block(s, b, d, "v5e").lowers for s, b, d in AGREEMENT}
    assert verdicts == {True, False}


def test_violation_message_names_value_rule_and_fix():
    """A sublane violation names the dim, the value, the rule and a fix."""
    v = check_block((256, 256), (100, 128), "float32", "v5e")
    assert not v.legal
    assert v.violations == [
        "second-minor (sublane) dim: block 100 must be a multiple of 8 or equal the array's 256; try 96 or 256"
    ]


def test_int8_native_tile_is_a_compile_error():
    """int8 with 16 rows lowers but does not compile (Mosaic E2002, seen with libtpu)."""
    v = check_block((256, 256), (16, 128), "int8", "v6e")
    assert v.lowers and not v.legal
    assert "tiled (32, 128)" in v.violations[0]
    assert check_block((256, 256), (32, 128), "int8", "v6e").legal


def test_bf16_eight_rows_is_a_note():
    """bf16 with 8 rows is legal (compiles on every chip) but noted as half a native tile."""
    v = check_block((256, 256), (8, 128), "bfloat16", "v5e")
    assert v.legal and "(16, 128)" in v.notes[0]


def test_rank_mismatch_is_a_question_error():
    """A block of the wrong rank is a malformed question, not an illegal block."""
    with pytest.raises(BlockSpecError, match="rank 1 but the array"):
        check_block((256, 256), (128,), "float32", "v5e")


def test_budget_scoped_limit_vs_capacity():
    """The f32 1024-block matmul (24 MiB double-buffered) is over v5e's 16 MiB limit, under v6e's 32 MiB."""
    a = jax.ShapeDtypeStruct((2048, 2048), jnp.float32)
    info = kernel_trace.trace(reference_kernels.matmul, a, a, bm=1024, bn=1024, bk=1024).pallas_calls[0]
    v5e = check_pallas_call(info, "v5e")
    assert v5e.legal and v5e.budget.working_set_bytes == 24 * 2**20
    assert not v5e.budget.fits_limit and v5e.budget.fits_capacity
    assert "CompileTimeScopedVmemOom" in v5e.budget.verdict()
    assert check_pallas_call(info, "v6e").budget.fits_limit
    assert check_pallas_call(info, "v5e", vmem_limit_bytes=100 * 2**20).budget.fits_limit
    assert not check_pallas_call(info, "v4").budget.fits_capacity


def test_pallas_call_single_buffered():
    """pl.Buffered(1) / buffers=1 halves the working set of blocked operands."""
    a = jax.ShapeDtypeStruct((512, 512), jnp.bfloat16)
    info = kernel_trace.trace(reference_kernels.matmul, a, a).pallas_calls[0]
    two = check_pallas_call(info, "v5e").budget.working_set_bytes
    one = check_pallas_call(info, "v5e", buffers=1).budget.working_set_bytes
    assert two == 2 * one == 2 * 3 * 128 * 128 * 2


def test_layernorm_reference_kernel_is_legal():
    """The (1, d) gamma/beta blocks are legal because they equal the full (1, d) array."""
    x = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    g = jax.ShapeDtypeStruct((512,), jnp.float32)
    info = kernel_trace.trace(reference_kernels.layernorm, x, g, g).pallas_calls[0]
    report = check_pallas_call(info, "v5e")
    assert report.legal, report.violations
    assert [n for n, _ in report.operands] == ["in[0]", "in[1]", "in[2]", "out[0]"]


def test_deviceless_compile_without_libtpu_cannot_judge_and_says_how_to_get_it(monkeypatch):
    """Without libtpu, compile_for reports "cannot judge" with the install hint instead of raising."""
    from pallas_course import tpu_compile

    monkeypatch.setattr(tpu_compile, "available", lambda: False)
    r = tpu_compile.compile_for(lambda x: x, jax.ShapeDtypeStruct((8, 128), jnp.float32), chip="v5e")
    assert r.skipped and not r.ok and not r.rejected
    assert f'pip install "jax[tpu]=={jax.__version__}"' in r.message and "[tpu]" in r.message


@pytest.mark.parametrize("chip", ["v5e", "v6e"])
def test_budget_agrees_with_deviceless_compile(chip, monkeypatch, libtpu):
    """With libtpu: the 1024-block f32 matmul fails v5e's scoped limit and compiles on v6e, as the model says."""
    from pallas_course import tpu_compile

    monkeypatch.setattr(reference_kernels, "INTERP", False)
    a = jax.ShapeDtypeStruct((2048, 2048), jnp.float32)
    result = tpu_compile.compile_for(
        lambda x, y: reference_kernels.matmul(x, y, bm=1024, bn=1024, bk=1024), a, a, chip=chip
    )
    info = trace_reference("matmul", m=2048, n=2048, k=2048, bm=1024, bn=1024, bk=1024)
    assert not result.skipped, result.message
    assert result.ok == check_pallas_call(info, chip).budget.fits_limit, result.message


def test_lowering_verdict_ignores_the_notebooks_interpret_mode():
    """After a notebook's set-up switched TPU interpret mode on, asking the TPU lowering still gets its verdict
    (interpret mode would lower for the CPU and refuse every block: "different from the lowering platform tpu")."""
    from jax.experimental.pallas import tpu as pltpu

    from pallas_course.runtime import interpret_params

    with pltpu.force_tpu_interpret_mode(interpret_params()):
        assert lowering_accepts((256, 256), (8, 128), jnp.float32, "v5e") == (True, "")
        ok, err = lowering_accepts((250, 256), (8, 100), jnp.float32, "v5e")
    assert not ok and "divisible by 8 and 128" in err
