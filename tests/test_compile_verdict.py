"""The compiler's verdict in words (pallas_course.compile_verdict, one home for the grade and the student's own
checks): every refusing chip named, the reason once where the chips agree and per chip where they do not; a
compile that could not be asked is never silent: each compiled test's result says "not compiled: libtpu missing",
and `course grade` warns once before it grades."""

from __future__ import annotations

import nbformat
import numpy as np
import pytest

from autograder.judge import compile_rule
from pallas_course import compile_verdict, tpu_compile
from pallas_course.compile_verdict import CompileVerdict, not_compiled_note, rejection_message
from pallas_course.tpu_compile import CompileResult

ERFC = "✗ the TPU compiler refuses the kernel: jax.nn.gelu(x, approximate=False) computes erfc\n  fix: ..."


def _refused(chip: str, explanation: str, kind: str = "tpu-unimplemented") -> CompileResult:
    return CompileResult(
        chip, tpu_compile.TOPOLOGIES[chip], False, error_kind=kind, message="raw", explanation=explanation
    )


def test_every_refusing_chip_is_named_and_an_agreed_reason_said_once() -> None:
    verdict = CompileVerdict((_refused("v5e", ERFC), _refused("v6e", ERFC)))
    message = rejection_message("gelu(x)", ["v5e", "v6e"], verdict.rejections)
    assert message == (
        "gelu(x) does not compile for v5e and v6e (the real TPU compiler, v5e:2x2 and v6e:2x2; it "
        f"must compile for v5e and v6e):\n{ERFC}"
    )


def test_chips_that_refuse_for_different_reasons_each_get_theirs() -> None:
    v5e, v6e = "✗ it needs 128.00MiB of VMEM, over 16.00MiB", "✗ it needs 128.00MiB of VMEM, over 127.94MiB"
    message = rejection_message(
        "copy(x)", ["v5e", "v6e"], [_refused("v5e", v5e, "tpu-vmem"), _refused("v6e", v6e, "tpu-vmem")]
    )
    assert message.startswith("copy(x) does not compile for v5e and v6e (")
    assert f"\nv5e:\n{v5e}" in message and f"\nv6e:\n{v6e}" in message


def test_one_refusing_chip_reads_as_before() -> None:
    ok = CompileResult("v6e", "v6e:2x2", True)
    verdict = CompileVerdict((_refused("v5e", ERFC), ok))
    assert verdict.rejection is verdict.rejections[0] and verdict.compiled == ("v6e",)
    assert rejection_message("gelu(x)", ["v5e", "v6e"], verdict.rejection).startswith(
        "gelu(x) does not compile for v5e (the real TPU compiler, v5e:2x2; it must compile for v5e and v6e):\n✗"
    )


def _missing(chip: str) -> CompileResult:
    return CompileResult(
        chip,
        tpu_compile.TOPOLOGIES[chip],
        False,
        skipped=True,
        error_kind="cannot-judge",
        unjudged_because=tpu_compile.LIBTPU_MISSING,
        message=tpu_compile.install_hint(),
    )


def test_a_compile_not_asked_says_why() -> None:
    assert not_compiled_note("add(x, y)", [_missing("v5e"), _missing("v6e")]).startswith(
        "not compiled: libtpu missing — add(x, y) was not compiled for v5e and v6e"
    )
    other = CompileResult(
        "v5e",
        "v5e:2x2",
        False,
        skipped=True,
        error_kind="cannot-judge",
        unjudged_because=tpu_compile.DEVICE_QUERY,
        message="the compiler could not be asked: x",
    )
    assert not_compiled_note("add(x, y)", [other]).startswith("not compiled: the compiler could not be asked")
    assert not_compiled_note("add(x, y)", []) == ""


def test_without_libtpu_a_compiled_test_passes_with_the_note(monkeypatch) -> None:
    """The harness's compile step prints the note into the test's output; the score reads it back as the result's
    message ("passed · not compiled: libtpu missing ..."), so no full marks go out silently."""
    import contextlib
    import io

    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from autograder.labs.harness import call
    from autograder.session.testing import LocalFunction
    from autograder.course_manifest import manifest
    from autograder.steps.score import score_tests
    from pallas_course.runtime import interpret_params

    monkeypatch.setattr(tpu_compile, "available", lambda: False)
    monkeypatch.setattr(compile_rule, "_CACHE", compile_rule._Cache())

    def double(x):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        return pl.pallas_call(
            lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
            grid=(8,),
            in_specs=[spec],
            out_specs=spec,
            out_shape=x,
            interpret=interpret_params(),
        )(x)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        call("add_f32", "double(x)", LocalFunction(double), jnp.asarray(np.ones((64, 128), np.float32)))
    assert printed.getvalue().startswith("not compiled: libtpu missing — double(x) was not compiled for v5e and v6e")

    lab = manifest().lab("lab-1.1-first-kernels")
    cells = []
    for t in lab.tests:
        cell = nbformat.v4.new_code_cell(
            "", metadata={"nbgrader": {"grade": True, "grade_id": t.id, "points": t.points, "solution": False}}
        )
        cell.execution_count = 1
        if t.id == "add_f32":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed.getvalue())]
        cells.append(cell)
    results = {r.name: r for r in score_tests(nbformat.v4.new_notebook(cells=cells), lab)}
    assert results["add_f32"].passed and results["add_f32"].message.startswith("passed · not compiled: libtpu missing")
    assert all(r.message == "passed" for name, r in results.items() if name != "add_f32")


def test_course_grade_warns_once_without_libtpu(monkeypatch, tmp_path) -> None:
    from typer.testing import CliRunner

    from course_tools.cli import app

    monkeypatch.setattr(tpu_compile, "available", lambda: False)
    result = CliRunner().invoke(app, ["grade", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "g")])
    assert result.output.count("warning: libtpu is not installed") == 1, result.output
    assert "not compiled: libtpu missing" in result.output
    monkeypatch.setattr(tpu_compile, "available", lambda: True)
    assert compile_rule.libtpu_warning() is None


@pytest.mark.parametrize("name", ["rejection_message", "not_compiled_note", "CompileVerdict"])
def test_the_grader_says_what_the_wheel_says(name) -> None:
    """One message, two sides: autograder.judge.compile_rule uses the wheel's functions, not copies."""
    assert getattr(compile_rule, name) is getattr(compile_verdict, name)


def test_a_vmem_refusal_that_is_mostly_scratch_says_so() -> None:
    """The legality model's working set beside a VMEM refusal names the scratch when the scratch is most of it (the
    fix is not a smaller bk then)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from pallas_course import kernel_trace

    def big_scratch(x):
        spec = pl.BlockSpec((8, 512), lambda i: (i, 0))
        return pl.pallas_call(
            lambda x_ref, o_ref, s_ref: o_ref.__setitem__(..., x_ref[...]),
            grid=(32,),
            in_specs=[spec],
            out_specs=spec,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            scratch_shapes=[pltpu.VMEM((4096, 4096), jnp.float32)],
        )(x)

    structure = kernel_trace.trace(big_scratch, jax.ShapeDtypeStruct((256, 512), jnp.float32))
    text = rejection_message("copy(x)", ["v5e"], _refused("v5e", "✗ it needs VMEM", "tpu-vmem"), structure)
    assert "of which scratch_shapes hold 67,108,864 bytes: shrink the scratch first" in text, text
