"""The grade's compile rule in the notebook's "as graded" checks: the kernel a visible case traces is compiled for
course.yml's `compile:` chips by the real TPU compiler (pallas_course.tpu_compile: libtpu, deviceless, interpret
mode off), and a refusal fails the check in the grade's own words, before the grade takes the points.

Where libtpu is not installed (macOS and Windows have no build of it; a Linux install without it) nothing is
compiled: the check says so once, plainly, and never prints a ✓ for a compile it did not do. What the compiler
cannot be asked (a lowering that asks for a device it cannot see) is "not compiled here" too, as in the grade,
where it costs nothing.

Fast enough for a check cell: each distinct computation (its jaxpr, shapes and dtypes) is compiled once per chip
and process; re-running an unchanged cell costs a trace.
"""

from __future__ import annotations

import hashlib
import os
import platform
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from pallas_course import tpu_compile
from pallas_course.compile_verdict import CompileVerdict, rejection_message
from pallas_course.tpu_compile import CompileResult


@dataclass(frozen=True)
class Compiled:
    """What the compile step of one visible case found: the grade's verdict (one result per chip compiled or
    refused) and what could not be compiled here, and why."""

    chips: tuple[str, ...]
    verdict: CompileVerdict = CompileVerdict(())
    not_here: str = ""  # why nothing (or not every chip) was compiled here; "" when all were

    @property
    def compiled(self) -> tuple[str, ...]:
        return self.verdict.compiled

    @property
    def rejected(self) -> bool:
        return bool(self.verdict.rejections)


# "0" switches the checks' compiles off: the grading jail sets it (the grade compiles outside the jail, in the
# grader, so compiling there too would only cost time).
SWITCH_ENV = "PALLAS_COURSE_CHECK_COMPILE"

_CACHE: dict[tuple[str, str], CompileResult] = {}
# Compiles started ahead (prefetch) by a check about to run its cases: one worker thread compiles while the check
# runs the cases in interpret mode (the compiler releases the GIL; the interpret mode switch is thread-local).
_PENDING: dict[tuple[str, str], Future[CompileResult]] = {}
_POOL: ThreadPoolExecutor | None = None
_SAID: set[str] = set()  # what has been said once in this process


def rule_chips(tests: Iterable[str]) -> tuple[str, ...]:
    """The chips course.yml's compile rule names for any of `tests` (empty: the rule does not cover them)."""
    from pallas_course.manifest import manifest

    for test in tests:
        rule = manifest().compile_rule(test)
        if rule is not None:
            return tuple(rule.chips)
    return ()


def not_installed_reason() -> str:
    system = platform.system()
    where = (
        f"{system} has no build of libtpu (the TPU compiler: Linux x86_64/aarch64 only)"
        if system in ("Darwin", "Windows")
        else "libtpu (the TPU compiler) is not installed here; `pip install -r requirements.txt` in the course "
        "release installs it on Linux, then restart the kernel"
    )
    return where


def _key(fn: Callable[..., Any], avals: Sequence[Any]) -> str:
    """The computation as the compiler would get it: its jaxpr (interpret mode off), shapes and dtypes."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode(None):
        closed = jax.make_jaxpr(fn)(*avals)
    text = f"{closed}|{[(tuple(a.shape), str(a.dtype)) for a in avals]}"
    return hashlib.sha256(text.encode()).hexdigest()


def compile_case(fn: Callable[..., Any], avals: Sequence[Any], chips: Sequence[str]) -> Compiled:
    """Compile `fn` over `avals` for each chip (cached per computation and chip), as the grade does."""
    chips = tuple(chips)
    if not chips:
        return Compiled(chips)
    if os.environ.get(SWITCH_ENV) == "0":
        return Compiled(chips, not_here=f"{SWITCH_ENV}=0 switched the checks' compiles off")
    if not tpu_compile.available():
        return Compiled(chips, not_here=not_installed_reason())
    try:
        key = _key(fn, avals)
    except Exception:  # noqa: BLE001 - a trace that fails here is judged by the check's own trace and run
        key = ""
    results = []
    for chip in chips:
        result = _CACHE.get((key, chip)) if key else None
        if result is None and key and (key, chip) in _PENDING:
            result = _PENDING.pop((key, chip)).result()
        if result is None:
            result = tpu_compile.compile_avals(fn, avals, chip)
        if key:
            _CACHE[(key, chip)] = result
        results.append(result)
    verdict = CompileVerdict(tuple(results))
    why = "; ".join(f"{r.chip}: {r.message}" for r in verdict.unjudged)
    return Compiled(chips, verdict, not_here=why)


def prefetch(jobs: Sequence[tuple[Callable[..., Any], Sequence[Any], Sequence[str]]]) -> None:
    """Start compiling these (fn, avals, chips) in the background, so that compile_case finds them done."""
    if os.environ.get(SWITCH_ENV) == "0" or not tpu_compile.available():
        return
    for fn, avals, chips in jobs:
        try:
            key = _key(fn, avals)
        except Exception:  # noqa: BLE001 - the case's own trace will say what is wrong
            continue
        for chip in chips:
            if (key, chip) in _CACHE or (key, chip) in _PENDING:
                continue
            _PENDING[(key, chip)] = _pool().submit(tpu_compile.compile_avals, fn, list(avals), chip)


def refusal(label: str, compiled: Compiled, structure: Any = None) -> str:
    """What the student reads for a refused kernel: the grade's own message (pallas_course.compile_verdict)."""
    return rejection_message(label, compiled.chips, compiled.verdict.rejections, structure)


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pallas-course-compile")
    return _POOL


def warm_kernel() -> Callable[[Any], Any]:
    """The course's own one-block kernel (x + 1) that warm-ups run and compile, never a student's: the checks'
    compile thread here, and the grader's judge (autograder.judge.server.warm_up)."""
    import jax
    from jax.experimental import pallas as pl

    def kernel(x_ref: Any, o_ref: Any) -> None:
        o_ref[...] = x_ref[...] + 1

    def fn(x: Any) -> Any:
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    return fn


def _warm_compiles(chips: Sequence[str]) -> None:
    """warm_kernel compiled once per chip: the compiler's first compile in a process (~0.4 s of Mosaic's and XLA's
    first-time set-up) is paid here, not by the first check cell."""
    import jax
    import jax.numpy as jnp

    for chip in chips:
        tpu_compile.compile_avals(warm_kernel(), [jax.ShapeDtypeStruct((8, 128), jnp.float32)], chip)


def warm() -> None:
    """Build the compile rules' chip topologies now (libtpu's start), and compile once per chip in the background
    (the compile thread, ahead of any prefetch), so that the first check cell does not pay the compiler's start;
    the set-up cell calls this where kernels are interpreted and libtpu is here."""
    from pallas_course.manifest import manifest

    if os.environ.get(SWITCH_ENV) == "0" or not tpu_compile.available():
        return
    chips = list(dict.fromkeys(c for lab in manifest().labs if lab.compile for c in lab.compile.chips))
    for chip in chips:
        try:
            tpu_compile.topology_device(chip)
        except Exception:  # noqa: BLE001 - a topology that will not build is reported by the compile that needs it
            return
    _pool().submit(_warm_compiles, chips)


def say_once(chips: Sequence[str], why: str) -> None:
    """Print, once per process and reason, that kernels were not compiled here and the grade will compile them."""
    if why in _SAID:
        return
    _SAID.add(why)
    print(
        f"· not compiled here: {why}. The grade compiles each kernel for {' and '.join(chips)} with the real TPU "
        "compiler, and a kernel it refuses loses these tests' points; the checks below judge the values only"
    )


def phrase(result: Compiled) -> str:
    """A pass line's words about the compile: only what was really compiled."""
    if result.compiled:
        return f"compiled for {' and '.join(result.compiled)} (the real TPU compiler, as graded)"
    return "not compiled here" if result.chips else ""
