"""The real TPU compiler (libtpu, deviceless) as the grade uses it: every solution kernel compiles for the chips of
course.yml's compile rules; the known rejects are rejected, with the reason in the course's words; the verdict
holds after a notebook's set-up switched interpret mode on; what is not the kernel's fault is "cannot judge".

These need libtpu (requirements.txt pins it): on Linux, CI included, they fail without it, never skip.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.judge.compile_rule import compile_verdict, rejection_message
from autograder.notebook_code import load
from course_tools import compile_cases
from course_tools.compile_cases import row_kernel, structs
from pallas_course import tpu_compile
from autograder.course_manifest import REPO_ROOT, manifest
from pallas_course.runtime import interpret_params

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _rule_chips() -> list[str]:
    chips = sorted({c for lab in manifest().labs if lab.compile for c in lab.compile.chips})
    assert {"v5e", "v6e"} <= set(chips), chips
    return chips


# (lab, kernel, args, kwargs): one case per solution kernel the compile rules grade, at a graded shape.
SOLUTION_CASES = [
    (lab_id, kernel, structs(args), kwargs)
    for lab_id, cases in compile_cases.CASES.items()
    for kernel, args, kwargs in cases
]


@pytest.fixture(scope="module")
def solutions() -> dict[str, dict[str, Any]]:
    """The solution notebooks' definitions; loading them runs their set-up, which switches interpret mode on for
    the process: every compile below happens after that (the negative control's condition)."""
    labs = {lab.id: lab for lab in manifest().labs}
    return {lab_id: load(REPO_ROOT / labs[lab_id].source) for lab_id in dict.fromkeys(c[0] for c in SOLUTION_CASES)}


def test_compile_rules_cover_the_solution_cases() -> None:
    """Every lab with a compile rule has its kernels in SOLUTION_CASES, and every rule's chip has a topology."""
    for lab in manifest().labs:
        if lab.compile is None:
            continue
        assert set(lab.compile.chips) <= set(tpu_compile.TOPOLOGIES), lab.compile.chips
        graded = {lab.test(t).kernel for t in lab.compile.tests}
        assert graded <= {c[1] for c in SOLUTION_CASES if c[0] == lab.id}, (lab.id, graded)


@pytest.mark.parametrize(
    "lab_id,kernel,args,kwargs", SOLUTION_CASES, ids=[f"{c[1]}-{c[2][0].dtype}" for c in SOLUTION_CASES]
)
def test_every_solution_kernel_compiles_for_the_rule_chips(libtpu, solutions, lab_id, kernel, args, kwargs) -> None:
    fn = solutions[lab_id][kernel]
    verdict = compile_verdict(lambda *a: fn(*a, **kwargs), args, _rule_chips())
    assert [r.chip for r in verdict.results if not r.ok] == [], [r.message for r in verdict.results]


def _rows(
    body: Callable[[Any], Any],
    shape: tuple[int, int] = (256, 512),
    block: tuple[int, int] = (8, 512),
    dtype: Any = F32,
    interpret: Any = False,
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """A row-blocked elementwise kernel applying `body` to each block."""

    def kernel(x_ref, o_ref):
        o_ref[...] = body(x_ref[...]).astype(o_ref.dtype)

    def fn(x):
        spec = pl.BlockSpec(block, lambda i: (i, 0))
        return pl.pallas_call(
            kernel,
            grid=(shape[0] // block[0],),
            in_specs=[spec],
            out_specs=spec,
            out_shape=S(shape, dtype),
            interpret=interpret,
        )(x)

    return fn, (S(shape, dtype),)


# name: regex the course's explanation must match (the kernels: course_tools.compile_cases.REJECTS)
WORDS = {
    "gelu exact (erfc)": r"gelu\(x, approximate=False\) computes erfc.*fix: use jax\.nn\.gelu\(x, approximate=True\)"
    r".*lax\.erf",
    "jnp.sort": r"sorting \(jnp\.sort, jnp\.median",
    "jnp.cumsum": r"cumulative sum \(jnp\.cumsum\)",
    "1-row f32 block": r"block \(1, 512\) of args\[0\] \(array \(256, 512\)\) breaks the TPU tiling rule.*\(8, 128\)",
    "4-row f32 block": r"block \(4, 512\)",
}
REJECTS = {
    name: (row_kernel(*compile_cases.REJECTS[name][:3]), compile_cases.REJECTS[name][3], words)
    for name, words in WORDS.items()
}


@pytest.mark.parametrize("name", list(REJECTS))
def test_known_reject_is_rejected_with_the_course_words(libtpu, name) -> None:
    (fn, args), kind, words = REJECTS[name]
    verdict = compile_verdict(fn, args, ["v5e", "v6e"])
    assert [r.rejected for r in verdict.results] == [True, True], verdict
    for r in verdict.results:
        assert r.error_kind == kind and re.search(words, r.explanation, re.S), r.explanation
        assert "https://docs.jax.dev/en/latest/pallas/" in r.explanation


def test_vmem_reject_gives_bytes_and_the_limit_knob(libtpu) -> None:
    """A whole (2048, 2048) f32 block, in and out, double-buffered: 64 MiB, over v5e's 16 MiB scoped limit. The
    grade's message puts the legality model's working set beside it."""
    from pallas_course import kernel_trace

    fn, args = row_kernel(*compile_cases.REJECTS["whole 2048x2048 f32 block"][:3])
    (r,) = compile_verdict(fn, args, ["v5e"]).results
    assert r.rejected and r.error_kind == "tpu-vmem", r
    assert "16.00MiB (16,777,216 bytes)" in r.explanation and "vmem_limit_bytes" in r.explanation
    structure = kernel_trace.trace(fn, *args)
    message = rejection_message("copy(x)", ["v5e", "v6e"], r, structure)
    assert message.startswith(
        "copy(x) does not compile for v5e (the real TPU compiler, v5e:2x2; it must compile "
        "for v5e and v6e):\n✗ the TPU compiler refuses the kernel: it needs "
    )
    assert "predicted working set 67,108,864 bytes" in message and "16,777,216 bytes on v5e" in message


def test_interpret_mode_switched_on_does_not_turn_a_reject_into_a_pass(libtpu) -> None:
    """Negative control: under a notebook's interpret mode the compiler would compile the interpreter ("it
    compiles"); the compile step turns interpret mode off, also for a pallas_call that passed interpret= itself."""
    (fn, args), _, _ = REJECTS["gelu exact (erfc)"]
    explicit, _ = _rows(lambda x: jax.nn.gelu(x, approximate=False), interpret=interpret_params())
    pltpu.set_tpu_interpret_mode(interpret_params())
    try:
        # the pitfall this guards against: with interpret mode on, the plain compile "succeeds"
        device = tpu_compile.topology_device("v5e")
        sharding = jax.sharding.NamedSharding(jax.sharding.Mesh([device], ("x",)), jax.sharding.PartitionSpec())
        jax.jit(fn).trace(S(args[0].shape, args[0].dtype, sharding=sharding)).lower().compile()
        assert tpu_compile.compile_for(fn, *args, chip="v5e").rejected
        assert tpu_compile.compile_for(explicit, *args, chip="v5e").rejected
    finally:
        pltpu.set_tpu_interpret_mode(None)


def test_lowerings_that_ask_the_default_device_are_judged(libtpu) -> None:
    """An int32 `//` and a 1-D block ask the default device's kind while lowering; the compile makes the
    topology's device the default, so they are judged (they compile), not failed as "device kind: cpu"."""
    floor_div, args = _rows(lambda x: (x.astype(jnp.int32) // 3).astype(F32))

    def one_d(x, g):
        def kernel(x_ref, g_ref, o_ref):
            o_ref[...] = x_ref[...] * g_ref[...][None, :]

        return pl.pallas_call(
            kernel,
            grid=(32,),
            in_specs=[pl.BlockSpec((8, 512), lambda i: (i, 0)), pl.BlockSpec((512,), lambda i: (0,))],
            out_specs=pl.BlockSpec((8, 512), lambda i: (i, 0)),
            out_shape=S((256, 512), F32),
        )(x, g)

    assert tpu_compile.compile_for(floor_div, *args, chip="v5e").ok
    assert tpu_compile.compile_for(one_d, S((256, 512), F32), S((512,), F32), chip="v6e").ok


def test_what_is_not_the_kernels_fault_cannot_be_judged(libtpu, monkeypatch) -> None:
    """The known case (FACTS.md): a lowering that asks the default device's kind and finds the CPU ("Unsupported
    TPU device kind: cpu") could not ask the compiler: cannot judge, decided by where it failed (JAX's device
    query), not by the words. A chip with no topology cannot be judged either."""
    import contextlib

    floor_div, args = _rows(lambda x: (x.astype(jnp.int32) // 3).astype(F32))
    monkeypatch.setattr(jax, "default_device", lambda device: contextlib.nullcontext())  # the CPU stays default
    r = tpu_compile.compile_for(floor_div, *args, chip="v5e")
    assert r.skipped and not r.rejected and r.error_kind == "cannot-judge" and "could not be asked" in r.message
    assert r.unjudged_because == tpu_compile.DEVICE_QUERY and "Unsupported TPU device kind: cpu" in r.message
    assert tpu_compile.compile_for(floor_div, *args, chip="v7x").unjudged_because == tpu_compile.NO_TOPOLOGY


def test_the_device_query_is_found_by_its_frames_not_its_words(libtpu) -> None:
    """The lowering's own failure inside tpu_info is recognised from its traceback; the same words raised anywhere
    else (a kernel, a function, a name a student chose) are a verdict like any other."""
    floor_div, args = _rows(lambda x: (x.astype(jnp.int32) // 3).astype(F32))
    with pytest.raises(ValueError, match="Unsupported TPU device kind") as lowered:
        jax.jit(floor_div).trace(*args).lower(lowering_platforms=("tpu",))
    assert tpu_compile.asked_for_a_device(lowered.value)

    def forged(x):
        raise ValueError("Unsupported TPU device kind: cpu (get_topology_desc)")

    with pytest.raises(ValueError) as raised:
        forged(None)
    assert not tpu_compile.asked_for_a_device(raised.value)
    r = tpu_compile.compile_for(forged, *args, chip="v5e")
    assert r.rejected and not r.skipped, r


def test_two_processes_compile_at_once(libtpu) -> None:
    """libtpu's process lock must not refuse a second compiling process (the `-n 2` tests, `--jobs 2` graders)."""
    import subprocess
    import sys

    tpu_compile.topology_device("v5e")  # this process holds libtpu now
    code = "from pallas_course import tpu_compile; tpu_compile.topology_device('v5e'); print('built')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "built" in done.stdout, done.stderr[-2000:]


def test_visible_check_refuses_what_the_compiler_cannot_lower() -> None:
    """The notebook's check(...) says what the grade's compile will say for erfc/sort/cumsum, with no libtpu: read off
    the traced kernel, in the translator's words; a kernel that lowers still passes."""
    import numpy as np

    from pallas_course.check import CheckFailure, check

    x = jnp.asarray(np.linspace(-3, 3, 256 * 512, dtype=np.float32).reshape(256, 512))
    exact, _ = row_kernel(*compile_cases.REJECTS["gelu exact (erfc)"][:3], interpret=interpret_params())
    with pytest.raises(CheckFailure) as failure:
        check("gelu", lambda: exact(x), jax.nn.gelu(x, approximate=False), tol=1e-5)
    assert str(failure.value).startswith(
        "gelu: the TPU compiler refuses the kernel: jax.nn.gelu(x, approximate=False) computes erfc"
    ), failure.value
    assert "fix: use jax.nn.gelu(x, approximate=True)" in str(failure.value)
    tanh, _ = row_kernel("jax.nn.gelu(x)", (8, 512), (256, 512), interpret=interpret_params())
    check("gelu", lambda: tanh(x), jax.nn.gelu(x), tol=1e-5)


def test_setup_on_a_cpu_machine_with_libtpu_stays_quiet(libtpu, tmp_path) -> None:
    """An instructor's (or a [tpu] student's) notebook without JAX_PLATFORMS: setup() asks for the CPU where libtpu
    finds no TPU chip, instead of JAX starting a TPU runtime and printing its failure to stderr."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "PALLAS_COURSE_MODE")}
    code = "from pallas_course.runtime import setup; setup(); import jax; print(jax.devices())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert "[CpuDevice(id=0)]" in done.stdout, done.stderr[-2000:]
    assert "TPU" not in done.stderr and "libtpu" not in done.stderr, done.stderr[-2000:]


def test_one_compile_per_rebuilt_computation(libtpu, monkeypatch) -> None:
    """The grade compiles a kernel once per process for the same rebuild (same description, constants and shapes),
    whichever test or function object asks; a different kernel or shape is compiled again."""
    import numpy as np

    from autograder.judge import compile_rule
    from autograder.labs.harness import call
    from autograder.session.testing import LocalFunction

    calls: list[tuple[Any, ...]] = []
    real = compile_rule.compile_verdict
    monkeypatch.setattr(compile_rule, "compile_verdict", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(compile_rule, "_CACHE", compile_rule._Cache())
    double, _ = row_kernel("x * 2", (8, 128), (64, 128), interpret=interpret_params())
    x = jnp.asarray(np.ones((64, 128), np.float32))
    for _ in range(2):
        call("add_f32", "double(x)", LocalFunction(double), x)  # add_f32: a test LAB·1.1's rule lists
    assert len(calls) == 1
    call("add_f32", "double(x)", LocalFunction(double), jnp.asarray(np.ones((128, 128), np.float32)))
    assert len(calls) == 2
