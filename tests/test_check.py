"""The visible `check(...)`: what a student reads when a kernel is wrong."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest

from pallas_course.check import CheckFailure, check
from pallas_course.compare import _SIGNED_DEFAULT_NAN


def test_pass_prints_one_line(capsys) -> None:
    x = jnp.ones((256, 256))
    check("add", x, x)
    out = capsys.readouterr().out
    assert out.startswith("✓ add: matches (max error 0, exact)")
    assert out.rstrip().endswith("shape (256, 256) float32, on this input")  # a ✓ for one input, not the grade's


def test_pass_says_whether_the_tolerance_is_relative(capsys) -> None:
    x = jnp.ones((8, 128))
    check("softmax bf16", x, x, tol=2**-7, atol=1e-30)
    assert "tol 0.0078125 relative (absolute floor 1e-30)" in capsys.readouterr().out
    check("matmul", x, x, tol=1e-3)
    assert "tol 0.001, absolute and relative" in capsys.readouterr().out


def test_shape_mismatch() -> None:
    with pytest.raises(CheckFailure, match=r"add: shape \(256, 128\), expected \(256, 256\); look at out_shape"):
        check("add", jnp.ones((256, 128)), jnp.ones((256, 256)))


def test_dtype_mismatch() -> None:
    with pytest.raises(CheckFailure, match="dtype bfloat16, expected float32"):
        check("add", jnp.ones((8, 128), jnp.bfloat16), jnp.ones((8, 128)))


def test_nan_means_blocks_never_written() -> None:
    """NaN reads as "never written" under TPU interpret mode; the message names the first such block."""
    x = jnp.ones((256, 256))
    with pytest.raises(CheckFailure) as e:
        check("transpose", x.at[128:, :128].set(jnp.nan), x)
    msg = str(e.value)
    assert "16384 of 65536 values are NaN" in msg
    assert "1 of 4 blocks of 128×128 wrong, the first is block (1, 0)" in msg
    assert "memory that nobody wrote reads as NaN" in msg


def test_values_name_the_worst_error_and_first_wrong_block() -> None:
    x = jnp.zeros((256, 512))
    with pytest.raises(CheckFailure) as e:
        check("matmul", x.at[200, 300].set(5.0).at[10, 400].set(1.0), x, tol=1e-3, block=(128, 256))
    msg = str(e.value)
    assert "2 of 131072 values differ by more than tol=0.001" in msg
    assert "the largest error is 5 at [200, 300] (got 5, expected 0)" in msg
    assert "2 of 4 blocks of 128×256 wrong, the first is block (0, 1)" in msg


def test_tolerance_is_absolute_and_relative() -> None:
    check("softmax", jnp.array([1000.0, 1e-6]) * (1 + 1e-6), jnp.array([1000.0, 1e-6]), tol=1e-5)


def test_not_an_array() -> None:
    with pytest.raises(CheckFailure, match="got a NoneType, expected an array"):
        check("add", None, jnp.ones(3))


def test_every_value_unwritten_names_rebinding_the_ref() -> None:
    """`o_ref = x + y` writes nothing: every value is interpret mode's NaN fill."""
    with pytest.raises(CheckFailure, match=r"all 32768 values are NaN: .*never stores.*`o_ref = value` only rebinds"):
        check("add", jnp.full((128, 256), jnp.nan), jnp.ones((128, 256)))


@pytest.mark.skipif(not _SIGNED_DEFAULT_NAN, reason="only x86 computes NaNs with the sign bit set")
def test_computed_nan_is_not_called_unwritten() -> None:
    """exp overflow then inf / inf: a computed NaN (x86's default NaN, sign bit set), not the fill."""
    big = jnp.full((8, 128), 1e4)
    e = jnp.exp(big)
    with pytest.raises(CheckFailure) as failure:
        check("softmax", e / e.sum(-1, keepdims=True), jnp.full((8, 128), 1 / 128), tol=1e-5)
    assert "the kernel computed these NaNs" in str(failure.value)
    assert "nobody wrote" not in str(failure.value)


def test_suspect_named_first() -> None:
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    with pytest.raises(CheckFailure, match=r"^layernorm: this is what g and b swapped gives"):
        check(
            "layernorm", x + 1, x, tol=1e-5, suspects={"reduced over the wrong axis": x * 2, "g and b swapped": x + 1}
        )


def test_an_error_in_the_checked_function_is_explained_first() -> None:
    from jax.experimental import pallas as pl

    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref + y_ref

    x = jnp.ones((8, 128))

    def add():
        return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, x)

    with pytest.raises(CheckFailure) as failure:
        check("add", add, x + x)
    lines = str(failure.value).splitlines()
    assert lines[0].startswith("add: a ref is used as an array")
    assert lines[1].startswith("  at test_check.py, line ") and "x_ref + y_ref" in lines[1]
    assert failure.value.kind == "ref-as-array" and "Traceback" in failure.value.raw


# ------------------------------------------------------------------ LAB·1.4: checks of one function on its own

MATMUL = '''
def matmul_kernel(a_ref, b_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)

def matmul(a, b, bm=128, bn=128, bk=128):
    (m, k), (_, n) = a.shape, b.shape
    return pl.pallas_call(matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), a.dtype), grid=(m // bm, n // bn, k // bk),
                          in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                                    pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
                          out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)))(a, b)
'''
WRONG_HELPERS = '''
def step_times(bm, bn, bk, dtype, chip):           # counts C among the copies and one FLOP per term
    c = chip_named(chip)
    return (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize / c.hbm_bytes_per_s, bm * bn * bk / c.bf16_flops_per_s

def vmem_working_set(bm, bn, bk, dtype, buffers=2, acc_scratch=False):   # forgets C
    return (bm * bk + bk * bn) * np.dtype(dtype).itemsize * buffers
'''
FED = '''
def smallest_fed_block(dtype, chip):
    for b in range(128, 8192 + 1, 128):
        dma, mxu = step_times(b, b, b, dtype, chip)
        if mxu >= dma:
            return b{off}
    return None
'''
CHOOSE = '''
def choose_blocks(m, n, k, dtype, chip):
    limit = VMEM_HEADROOM * chip_named(chip).default_scoped_vmem_bytes
    sizes = lambda dim: [s for s in range(128, dim + 1, 128) if dim % s == 0]
    best = None
    for bm in sizes(m):
        for bn in sizes(n):
            for bk in sizes(k):
                dma, mxu = step_times(bm, bn, bk, dtype, chip)
                if mxu < dma or vmem_working_set(bm, bn, bk, dtype) > limit:
                    continue
                steps = (m // bm) * (n // bn) * (k // bk)
                if best is None or steps < best[0]:
                    best = (steps, (bm, bn, bk))
    return best[1]
'''


def _notebook(source: str) -> dict:
    """Functions defined as a notebook defines them: their globals are this namespace (where helpers live)."""
    import numpy as np
    from jax.experimental import pallas as pl

    from pallas_course.chips import chip as chip_named

    namespace = {"np": np, "jax": jax, "jnp": jnp, "pl": pl, "chip_named": chip_named, "VMEM_HEADROOM": 0.75}
    exec(MATMUL + source, namespace)  # noqa: S102 - test code
    return namespace


def test_models_of_your_matmul_are_the_grades_models() -> None:
    """YourMatmul (a trace renamed to other block sizes) answers as the grade's model matmul and
    pallas_course.cost_model's closed forms do, float for float: the visible checks and the grade judge by the
    same numbers."""
    from autograder.labs import lab_1_4
    from pallas_course import cost_model
    from pallas_course.check import YourMatmul

    yours = YourMatmul(_notebook("")["matmul"])
    for bm, bn, bk in ((128, 128, 128), (384, 256, 1024), (2048, 1024, 512)):
        for dtype in ("float32", "bfloat16"):
            model = lab_1_4.model_step_times(bm, bn, bk, dtype, "v6e")
            closed_form = cost_model.step_seconds(
                *cost_model.matmul_step(bm, bn, bk, dtype), "v6e", cost_model.matmul_passes(dtype, "v6e")
            )
            assert yours.step_times(bm, bn, bk, dtype, "v6e") == model == closed_form
            for buffers in (1, 2):
                want = lab_1_4.model_budget(bm, bn, bk, dtype, "v5e", buffers).working_set_bytes
                assert yours.working_set(bm, bn, bk, dtype, buffers) == want
                assert cost_model.matmul_working_set(bm, bn, bk, dtype, buffers) == want
            want = lab_1_4.model_budget(bm, bn, bk, dtype, "v5e", 2, acc_scratch=True).working_set_bytes
            assert cost_model.matmul_working_set(bm, bn, bk, dtype, 2, acc_scratch=True) == want


def test_a_right_function_passes_with_wrong_helpers(capsys) -> None:
    """Checked on its own, as graded: the notebook's wrong step_times and vmem_working_set are not used, and
    are back in place afterwards."""
    from pallas_course.check import check_block_choice, check_fed_block

    nb = _notebook(WRONG_HELPERS + FED.format(off="") + CHOOSE)
    wrong = nb["step_times"]
    check_fed_block(nb["smallest_fed_block"], nb["matmul"])
    check_block_choice(nb["choose_blocks"], nb["matmul"])
    out = capsys.readouterr().out
    assert "✓ smallest_fed_block: right in 6 cases (smallest_fed_block(bfloat16, 'v4');" in out
    assert "the course's step_times (read off your matmul) stands in for yours here, as in the grade" in out
    assert "the course's step_times and vmem_working_set (read off your matmul) stand in for yours" in out
    assert nb["step_times"] is wrong


def test_a_wrong_function_names_its_case_the_rule_and_that_it_ran_alone() -> None:
    from pallas_course.check import check_budget_line, check_fed_block

    nb = _notebook(WRONG_HELPERS + FED.format(off=" - 128"))
    with pytest.raises(CheckFailure) as e:
        check_fed_block(nb["smallest_fed_block"], nb["matmul"])
    first, second = str(e.value).splitlines()
    assert first.startswith(
        "smallest_fed_block: smallest_fed_block(bfloat16, 'v4') is 384; at 384 a step copies for"
    ), first
    assert first.endswith("so the MXU still waits")
    assert second == (
        "(checked on its own: the course's step_times (read off your matmul) stands in for yours here, as in the grade)"
    )
    nb = _notebook("def largest_square_block(dtype, chip, buffers=2):\n    return 640\n")
    with pytest.raises(
        CheckFailure,
        match=r"largest_square_block\(float32, 'v5e', buffers=2\) is 640; 640 fits "
        r"\(fits: .*\), but so does 768 \(fits: ",
    ):
        check_budget_line(nb["largest_square_block"], nb["matmul"])


def test_an_error_in_the_function_is_explained_with_its_case() -> None:
    from pallas_course.check import check_fed_block

    nb = _notebook('def smallest_fed_block(dtype, chip):\n    raise NotImplementedError("not written yet")\n')
    with pytest.raises(
        CheckFailure,
        match=r"^smallest_fed_block: smallest_fed_block\(bfloat16, 'v4'\): this function is still the stub",
    ):
        check_fed_block(nb["smallest_fed_block"], nb["matmul"])


def test_scalar_and_list_checks_read_as_such() -> None:
    """A scalar check says the value it got; a short list names its entries (never "blocks of  wrong")."""
    import numpy as np

    with pytest.raises(CheckFailure) as e:
        check("FLOPs per step", np.float64(2.0), np.float64(4.0), tol=1e-9)
    assert str(e.value) == "FLOPs per step: got 2, expected 4 (off by 2, more than tol=1e-09)"
    with pytest.raises(CheckFailure) as e:
        check("buffers per BlockSpec (A, B, C)", np.array([1, 1, 2]), np.array([1, 1, 1]))
    assert str(e.value).endswith("got [1, 1, 2], expected [1, 1, 1]; entry 2 differs by more than tol=0")
    assert "blocks of" not in str(e.value)


def _matmul(kernel, scratch=False):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def f(a, b):
        return pl.pallas_call(
            kernel,
            grid=(1, 1, 2),
            in_specs=[
                pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                pl.BlockSpec((128, 128), lambda i, j, k: (k, j)),
            ],
            out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((128, 128), a.dtype),
            scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)] if scratch else [],
        )(a, b)

    return f


def _no_init(a_ref, b_ref, o_ref):
    o_ref[...] += jnp.dot(a_ref[...], b_ref[...])


def _rebinds(a_ref, b_ref, o_ref):
    o_ref = jnp.dot(a_ref[...], b_ref[...])  # noqa: F841 - the mistake: rebinding, no store


@pytest.mark.parametrize(
    "kernel,says,not_says",
    [
        (
            _no_init,
            r"reads o_ref \(\+=\) before anything is stored there: it accumulates into memory it never zeroed",
            "never stores",
        ),
        (_rebinds, r"never stores into its output ref.*`o_ref = value` only rebinds", "never zeroed"),
    ],
)
def test_all_nan_tells_never_zeroed_from_never_stored(kernel, says: str, not_says: str) -> None:
    """Issue 20: an accumulator never zeroed reads NaN everywhere, as an output never stored does; the trace of the
    kernel tells them apart (a read of o_ref before any store), for the visible check and the grade alike."""
    from pallas_course.runtime import setup

    setup("tpu-interpret", quiet=True)
    a = jnp.ones((128, 256))
    with pytest.raises(CheckFailure) as e:
        check("matmul", lambda: _matmul(kernel)(a, a.T), a @ a.T, tol=1e-3)
    assert re.search(says, str(e.value)) and not_says not in str(e.value), str(e.value)


def test_all_nan_without_a_trace_names_both_causes() -> None:
    with pytest.raises(CheckFailure) as e:
        check("matmul", jnp.full((8, 128), jnp.nan), jnp.ones((8, 128)))
    assert "Either the kernel never stores" in str(e.value) and "never zeroed" in str(e.value)


def test_the_grade_s_trace_carries_what_is_read_before_written() -> None:
    """The grade traces its own rebuild of the jail's plain-data description (autograder.judge.rebuild): the diagnosis
    is read off that trace as off the notebook's."""
    from autograder.labs.harness import traced
    from pallas_course.kernel_trace import read_before_written

    s = jax.ShapeDtypeStruct((128, 256), jnp.float32)
    t = traced("diagnosis", "matmul", _matmul(_no_init), s, jax.ShapeDtypeStruct((256, 128), jnp.float32))
    assert read_before_written(t.pallas_calls[0]) == ["o_ref"]


@pytest.mark.parametrize(
    "block,array,whole",
    [
        ((None, 512), (1, 512), True),
        ((1, 512), (1, 512), True),
        ((512,), (512,), True),
        ((None, 128), (1, 512), False),
        ((1, 128), (1, 512), False),
        ((None, 512), (2, 512), False),
    ],
)
def test_a_squeezed_dimension_over_size_one_is_the_whole_block(block, array, whole: bool) -> None:
    from pallas_course.rules import whole_block

    assert whole_block(block, array) is whole


def test_a_failing_check_shows_its_message_once_in_jupyter() -> None:
    """Issue 20: every failure printed its message twice (an HTML summary, then the error's first line). Now the
    cell's error output is the message, its first line first, and the raw traceback is folded under it."""
    import os

    import nbclient
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            'from pallas_course.runtime import setup\nINTERP = setup("tpu-interpret", quiet=True)'
        ),
        nbformat.v4.new_code_cell(
            'from pallas_course.check import check\nimport numpy as np\n'
            'check("FLOPs per step", np.float64(2.0), np.float64(4.0), tol=1e-9)'
        ),
    ]
    env = {k: v for k, v in os.environ.items() if k != "PALLAS_COURSE_MODE"}  # a student's kernel, not a grading one
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update(env)
    try:
        nbclient.NotebookClient(nb, allow_errors=True, timeout=300, kernel_name="python3").execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    outputs = nb.cells[1].outputs
    message = "FLOPs per step: got 2, expected 4 (off by 2, more than tol=1e-09)"
    (error,) = [o for o in outputs if o.output_type == "error"]
    assert error.traceback == [f"CheckFailure: {message}"]
    # everything else is folded: the raw traceback, under <details>, shown only when asked for
    others = [str(o.get("data", {}).get("text/html", "")) + str(o.get("text", "")) for o in outputs if o is not error]
    assert others and all(o.startswith("<details><summary>full traceback") for o in others), others


# ------------------------------------------------------------------- the compiler in the "as graded" checks

CUMSUM_ADD = '''
from pallas_course.runtime import interpret_params
INTERP = interpret_params()

def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.cumsum(x_ref[...], axis=1) * 0 + x_ref[...] + y_ref[...]   # right values, no TPU lowering


def add(x, y):
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
'''
ROW_SLICES = '''
from jax.experimental.pallas import tpu as pltpu
from pallas_course.runtime import interpret_params
INTERP = interpret_params()

def softmax_kernel(x_ref, o_ref):
    def row(r, carry):       # one row at a time: right values; bf16 rows are packed 16 to a tile
        x = x_ref[pl.ds(r, 1), :].astype(jnp.float32)
        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
        o_ref[pl.ds(r, 1), :] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)
        return carry
    jax.lax.fori_loop(0, x_ref.shape[0], row, 0)


def softmax(x, rows_per_block=8):
    n, d = x.shape
    return pl.pallas_call(softmax_kernel, grid=(n // rows_per_block,),
                          in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),
                          compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x)
'''


def test_as_graded_checks_compile_and_fail_in_the_grade_s_words(libtpu) -> None:
    """A kernel interpret mode runs but the TPU compiler refuses fails its "as graded" check, with the grade's
    message (the chip, the rule, the compiler's reason in the course's words), never a ✓."""
    from pallas_course.lab_checks import check_kernel

    nb = _notebook(CUMSUM_ADD)
    with pytest.raises(CheckFailure) as e:
        check_kernel("add", nb["add"])
    assert e.value.kind == "compile"
    assert re.match(
        r"add: add\(x, y\) on \(256, 256\) float32 does not compile for v5e and v6e \(the real TPU "
        r"compiler, v5e:2x2 and v6e:2x2; it must compile for v5e and v6e\):\n✗ the TPU compiler refuses the kernel: a cumulative "
        r"sum \(jnp.cumsum\)",
        str(e.value),
    ), str(e.value)
    nb = _notebook(ROW_SLICES)
    with pytest.raises(
        CheckFailure,
        match=r"softmax\(x, rows_per_block=16\) on \(64, 512\) bfloat16 does not compile "
        r"for v5e",
    ):
        check_kernel("softmax", nb["softmax"])


def test_as_graded_checks_say_what_they_compiled(libtpu, capsys) -> None:
    from pallas_course.lab_checks import check_kernel

    check_kernel("add", _notebook(CUMSUM_ADD.replace("jnp.cumsum(x_ref[...], axis=1) * 0 + ", ""))["add"])
    out = capsys.readouterr().out
    assert out.count("compiled for v5e and v6e (the real TPU compiler, as graded)") == 4, out
    assert "not compiled here" not in out


def test_without_libtpu_the_checks_say_once_that_nothing_was_compiled(monkeypatch, capsys) -> None:
    """No ✓ for a compile that did not happen: one plain line, once per process, then the values' checks."""
    from pallas_course import graded_compile, tpu_compile
    from pallas_course.lab_checks import check_kernel

    monkeypatch.setattr(tpu_compile, "available", lambda: False)
    monkeypatch.setattr(graded_compile, "_SAID", set())
    nb = _notebook(CUMSUM_ADD.replace("jnp.cumsum(x_ref[...], axis=1) * 0 + ", ""))
    check_kernel("add", nb["add"])
    check_kernel("add", nb["add"])
    out = capsys.readouterr().out
    assert out.count("· not compiled here: ") == 1, out
    assert "The grade compiles each kernel for v5e and v6e with the real TPU compiler" in out
    assert "compiled for" not in out.replace("not compiled here", "")
    monkeypatch.setattr(graded_compile.platform, "system", lambda: "Darwin")
    assert graded_compile.not_installed_reason().startswith("Darwin has no build of libtpu")


SET_UP_AND_SAY = """
import os, sys
if sys.argv[1] == "backend first":
    import jax; jax.devices()
from pallas_course.runtime import setup
setup(sys.argv[2], quiet=True)
print(os.environ.get("XLA_FLAGS", "<none>"))
"""


@pytest.mark.parametrize(
    "first,mode,env,expected",
    [
        ("", "tpu-interpret", {}, "fast"),
        ("", "auto", {"JAX_PLATFORMS": "cpu"}, "fast"),
        ("", "tpu-interpret", {"XLA_FLAGS": "--xla_dump_to=/tmp/mine"}, "--xla_dump_to=/tmp/mine"),
        ("backend first", "tpu-interpret", {}, "<none>"),
    ],
    ids=["interpret", "auto on a CPU", "the student's own flags", "after the backend started"],
)
def test_the_set_up_cell_compiles_interpreted_kernels_as_the_grade_does(
    first: str, mode: str, env: dict, expected: str
) -> None:
    """Issue 29.4: where kernels are interpreted on a CPU, setup() gives XLA the grade's fast-compile flags before
    JAX starts its backend (the check cells' interpret-mode runs compile about 3x faster); never over a student's
    own XLA_FLAGS, and never once the backend is up (too late: XLA would ignore them)."""
    import os
    import subprocess
    import sys

    from pallas_course.xla_flags import fast_compile_xla_flags

    clean = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS", "PALLAS_COURSE_MODE")}
    done = subprocess.run(
        [sys.executable, "-c", SET_UP_AND_SAY, first, mode],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == (fast_compile_xla_flags() if expected == "fast" else expected)
