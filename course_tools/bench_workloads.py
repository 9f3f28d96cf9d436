"""The GATE 01 workloads: the kernels, their XLA baselines, and the plan `course bench` times.

The kernels are the reference kernels with the labs' schedules (autograder.labs.reference_kernels: LAB·1.2's matmul
with an f32 scratch accumulator and the dimension semantics its notebook sets and grades, LAB·1.3's softmax with its
rows "parallel", as that notebook sets and grades); the bench adds only what a timed run needs: a check that the
blocks divide the arrays, jit, and `vmem_limit_bytes` where a config's double-buffered blocks pass 12 MiB (the
default scoped VMEM is 16 MiB on v5e: LAB·1.4's lesson). tests/test_gates.py holds the timed matmul to LAB·1.2's
graded `matmul_acc`, and the timed softmax to LAB·1.3's graded `softmax`, traced, at every block config of the gate. `plan()` turns GATE
01's criteria into cases for the backend at hand: full shapes, compiled, on a TPU; reduced shapes in interpret
mode on CPU, recorded `gating: false`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

from autograder.labs.reference_kernels import MATMUL_ACC_SEMANTICS, configurable_matmul, configurable_softmax
from pallas_course.cost_model import blocks_working_set, matmul_working_set
from .gate_spec import Gate, MatmulCriterion, SoftmaxCriterion


# ------------------------------------------------------------------------------------------------ kernels


def _vmem_params(working_set_bytes: int, semantics: tuple[str, ...]) -> pltpu.CompilerParams | None:
    # Big blocks outgrow the compiler's default scoped VMEM (16 MiB on v5e) long before physical VMEM;
    # ask for room only when needed, so small configs compile exactly as the lab's do. TPU parameters
    # mean nothing to Pallas' GPU backend, so a GPU run gets none.
    if jax.default_backend() == "gpu":
        return None
    limit = None
    if working_set_bytes > 12 * 2**20:
        limit = min(2 * working_set_bytes, 100 * 2**20)
    return pltpu.CompilerParams(dimension_semantics=semantics, vmem_limit_bytes=limit)


def _divides(name: str, block: int, dim_name: str, dim: int) -> None:
    if dim % block:
        raise ValueError(f"{name}={block} should divide {dim_name}={dim}")


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk", "interpret"))
def matmul_acc(
    a: jax.Array, b: jax.Array, *, bm: int = 128, bn: int = 128, bk: int = 128, interpret: bool = False
) -> jax.Array:
    m, k = a.shape
    _, n = b.shape
    _divides("bm", bm, "m", m), _divides("bn", bn, "n", n), _divides("bk", bk, "k", k)
    working_set = matmul_working_set(bm, bn, bk, a.dtype, acc_scratch=True)  # double-buffered + f32 scratch
    return configurable_matmul(
        a,
        b,
        bm,
        bn,
        bk,
        acc_scratch=True,
        interpret=interpret,
        compiler_params=_vmem_params(working_set, MATMUL_ACC_SEMANTICS),
    )


@functools.partial(jax.jit, static_argnames=("rows_per_block", "interpret"))
def softmax(x: jax.Array, *, rows_per_block: int = 8, interpret: bool = False) -> jax.Array:
    n, d = x.shape
    _divides("rows_per_block", rows_per_block, "rows", n)
    block_bytes = rows_per_block * d * jnp.dtype(x.dtype).itemsize
    working_set = blocks_working_set((block_bytes, block_bytes))  # in + out, double-buffered
    return configurable_softmax(
        x, rows_per_block, compiler_params=_vmem_params(working_set, ("parallel",)), interpret=interpret
    )


# ---------------------------------------------------------------------------------------------- baselines

# XLA's matmul. bf16 in, bf16 out; on TPU XLA accumulates in f32, as matmul_acc does.
xla_dot = jax.jit(jnp.dot)

# For context only (no gate reads it): the unfused chain, each op its own jit, so XLA cannot fuse them; each reads
# its input from HBM and writes its result back, one round trip per op. What fusing saves.
_row_max = jax.jit(lambda x: jnp.max(x, axis=-1, keepdims=True))
_subtract = jax.jit(jnp.subtract)
_exp = jax.jit(jnp.exp)
_row_sum = jax.jit(lambda x: jnp.sum(x, axis=-1, keepdims=True))
_divide = jax.jit(jnp.divide)


def xla_softmax_unfused(x: jax.Array) -> jax.Array:
    e = _exp(_subtract(x, _row_max(x)))
    return _divide(e, _row_sum(e))


# GATE 01's softmax baseline: XLA's own softmax under one jit, which XLA fuses itself.
xla_softmax = jax.jit(functools.partial(jax.nn.softmax, axis=-1))
BASELINES = {"xla_softmax": xla_softmax, "xla_softmax_unfused": xla_softmax_unfused}


# ---------------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Case:
    """One thing to time: an implementation at one shape and one config."""

    criterion_id: str
    workload: str
    impl: str
    dtype: str
    shape: dict[str, int]
    config: dict[str, Any]
    interpret: bool
    gating: bool
    fn: Callable[..., jax.Array] = field(repr=False, compare=False)
    reference: Callable[..., jax.Array] = field(repr=False, compare=False)
    tolerance: float = 1e-2

    @property
    def label(self) -> str:
        dims = "×".join(str(v) for v in self.shape.values())
        cfg = " ".join(f"{k}={v}" for k, v in self.config.items())
        return f"{self.impl} {dims} {self.dtype}" + (f" [{cfg}]" if cfg else "")

    def inputs(self) -> tuple[jax.Array, ...]:
        key_a, key_b = jax.random.split(jax.random.key(0))
        dtype = jnp.dtype(self.dtype)
        if self.workload == "matmul":
            s = self.shape
            return (
                jax.random.normal(key_a, (s["m"], s["k"]), dtype),
                jax.random.normal(key_b, (s["k"], s["n"]), dtype),
            )
        return (jax.random.normal(key_a, (self.shape["rows"], self.shape["cols"]), dtype),)


# Reduced shapes for interpret mode: interpret cost grows with grid steps x array size, so these stay small.
CPU_MATMUL = {"m": 512, "n": 512, "k": 512}
CPU_MATMUL_QUICK = {"m": 256, "n": 256, "k": 256}
CPU_SOFTMAX_ROWS, CPU_SOFTMAX_ROWS_QUICK = 2048, 512
CPU_SOFTMAX_WIDTHS, CPU_SOFTMAX_WIDTHS_QUICK = (256, 1024), (256,)


def _matmul_reference(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def _dedupe(configs: list[dict[str, int]]) -> list[dict[str, int]]:
    out: list[dict[str, int]] = []
    for c in configs:
        if c not in out:
            out.append(c)
    return out


def _matmul_cases(c: MatmulCriterion, *, full: bool, quick: bool, interpret: bool, gating: bool) -> list[Case]:
    shape = c.shape_dict() if full else dict(CPU_MATMUL_QUICK if quick else CPU_MATMUL)
    # Reduced shapes clip each block to the array, so the sweep keeps its order and loses duplicates.
    configs = _dedupe(
        [{"bm": min(b.bm, shape["m"]), "bn": min(b.bn, shape["n"]), "bk": min(b.bk, shape["k"])} for b in c.configs]
    )
    cases = [Case(c.id, "matmul", c.baseline, c.dtype, shape, {}, False, gating, xla_dot, _matmul_reference)]
    for cfg in configs:
        fn = functools.partial(matmul_acc, interpret=interpret, **cfg)
        cases.append(Case(c.id, "matmul", c.kernel, c.dtype, shape, cfg, interpret, gating, fn, _matmul_reference))
    return cases


def _softmax_cases(c: SoftmaxCriterion, *, full: bool, quick: bool, interpret: bool, gating: bool) -> list[Case]:
    if full:
        shapes = c.shapes()
    else:
        rows = CPU_SOFTMAX_ROWS_QUICK if quick else CPU_SOFTMAX_ROWS
        shapes = [{"rows": rows, "cols": w} for w in (CPU_SOFTMAX_WIDTHS_QUICK if quick else CPU_SOFTMAX_WIDTHS)]
    ref = functools.partial(jax.nn.softmax, axis=-1)
    cases = []
    # the baseline first, then the other XLA softmax for context (course_tools.gates.CONTEXT_IMPL)
    xla = [c.baseline, *(name for name in BASELINES if name != c.baseline)]
    for shape in shapes:
        for name in xla:
            cases.append(Case(c.id, "softmax", name, c.dtype, shape, {}, False, gating, BASELINES[name], ref, 1e-5))
        for b in c.configs:
            rpb = min(b.rows_per_block, shape["rows"])
            fn = functools.partial(softmax, rows_per_block=rpb, interpret=interpret)
            cases.append(
                Case(
                    c.id, "softmax", c.kernel, c.dtype, shape, {"rows_per_block": rpb}, interpret, gating, fn, ref, 1e-5
                )
            )
    return cases


def plan(gate: Gate, *, backend: str, quick: bool = False, only: str | None = None) -> list[Case]:
    """The cases to time for `gate` on `backend`.

    tpu: the criteria's shapes, compiled, gating. gpu: the same shapes through Pallas' GPU backend, never
    gating (GATE 01 is a TPU gate). cpu and anything else: reduced shapes in interpret mode, never gating.
    `quick` shrinks the CPU shapes further; `only` keeps one workload ("matmul" or "softmax").
    """
    full = backend in ("tpu", "gpu")
    interpret = not full
    gating = backend == "tpu"
    cases: list[Case] = []
    for c in gate.criteria:
        if only and c.workload != only:
            continue
        build = _matmul_cases if isinstance(c, MatmulCriterion) else _softmax_cases
        cases += build(c, full=full, quick=quick, interpret=interpret, gating=gating)
    return cases


# ----------------------------------------------------------------------------------------------------- run


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def run_case(
    case: Case, *, warmup: int, n: int, run_id: str, provenance: Any, clock: Callable[[], float] | None = None
) -> Any:
    """Check `case` once against its reference, then time it; a failure becomes a skipped record with the reason."""
    from pallas_course.bench import make_record, time_fn

    def record(timing: Any, reason: str | None = None) -> Any:
        return make_record(
            timing,
            workload=case.workload,
            impl=case.impl,
            dtype=case.dtype,
            shape=case.shape,
            config=case.config,
            interpret=case.interpret,
            gating=case.gating and timing is not None,
            skip_reason=reason,
            run_id=run_id,
            provenance=provenance,
        )

    try:
        args = case.inputs()
        got = jax.block_until_ready(case.fn(*args))
        want = case.reference(*args)
        err = float(jnp.max(jnp.abs(got.astype(jnp.float32) - want.astype(jnp.float32))))
        scale = float(jnp.max(jnp.abs(want.astype(jnp.float32)))) or 1.0
        if not err <= case.tolerance * scale:  # `not <=` also catches NaN
            return record(
                None, f"wrong result: max abs error {err:.3g} vs reference (allowed {case.tolerance * scale:.3g})"
            )
        timing = time_fn(case.fn, *args, warmup=warmup, n=n, **({"clock": clock} if clock else {}))
    except Exception as e:  # noqa: BLE001 -- a config that cannot lower or run is a result to record, not a crash
        return record(None, f"could not run: {_first_line(e)}")
    return record(timing)


def mode_note(backend: str, device_kind: str) -> str:
    """One line saying what kind of numbers this backend gives, printed before a run and kept in its summary."""
    if backend == "tpu":
        return f"TPU ({device_kind}): compiled kernels at the gate's shapes; these records can decide GATE 01."
    if backend == "gpu":
        return (
            f"GPU ({device_kind}): Pallas' GPU backend at the gate's shapes where it lowers (else a skip with the "
            "reason); recorded as GPU numbers, gating: false: they never decide a TPU gate."
        )
    return (
        f"{backend.upper()} ({device_kind}): Pallas in interpret mode at REDUCED shapes; these records are "
        "gating: false and say nothing about a TPU. GATE 01 stays QUEUED until a TPU run."
    )


def run_bench(
    cases: list[Case], *, out_file: Any, warmup: int, n: int, progress: Callable[[list[Case]], Any] = iter
) -> list[Any]:
    """Time every case in one run, appending each record to `out_file` as soon as it exists.

    Appending per case keeps what was measured if a long TPU run is interrupted. `progress` wraps the case
    list (the CLI passes a progress bar). Returns the records.
    """
    from course_tools.bench_records import append_records, provenance
    from pallas_course.bench import new_run_id

    run_id = new_run_id()
    records = []
    for case in progress(cases):
        rec = run_case(case, warmup=warmup, n=n, run_id=run_id, provenance=provenance())
        append_records(out_file, [rec])
        records.append(rec)
    return records
