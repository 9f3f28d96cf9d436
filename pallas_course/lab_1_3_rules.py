"""LAB·1.3's bytes-over-bandwidth model of the fused softmax: the rule the grade applies to the student's
softmax_seconds, its cases, and the notebook's visible check of it (check_softmax_seconds). One copy, used by the
notebook and by the grader (autograder.labs.lab_1_3), so both say the same thing in the same words. The arithmetic
is pallas_course.cost_model's; every chip constant comes from course.yml (pallas_course.chips).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pallas_course.rules import dtype_name

# (n, d, dtype, chip): both dtypes, chips of one TensorCore and of two. The notebook's visible check runs these;
# the grade runs them and its own (autograder.labs.lab_1_3.SOFTMAX_TIME_CASES), of the same families.
SOFTMAX_TIME_CASES: tuple[tuple[int, int, str, str], ...] = (
    (32768, 1024, "float32", "v5e"),
    (65536, 4096, "bfloat16", "v6e"),
    (8192, 256, "bfloat16", "v4"),
    (16384, 512, "float32", "v7x"),
)
REL = 1e-6  # the answer is arithmetic on course.yml's numbers: only float rounding may differ


def softmax_time_label(n: int, d: int, dtype: Any, chip: str) -> str:
    return f"softmax_seconds({n}, {d}, {dtype_name(dtype)}, {chip!r})"


def softmax_time_families(n: int, d: int, dtype: Any, chip: str) -> frozenset[str]:
    """The dtype (bf16 shows a 4-byte element size), the chip's core count (shows a per-core share)."""
    from pallas_course.chips import chip as chip_named

    cores = chip_named(chip).tensorcores_per_chip
    return frozenset({dtype_name(dtype), "one TensorCore per chip" if cores == 1 else "several TensorCores per chip"})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    v = float(value)
    return v if np.isfinite(v) else None


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= REL * abs(want)


def softmax_time_problem(got: Any, n: int, d: int, dtype: Any, chip: str) -> str | None:
    """Seconds of the fused softmax of an (n, d) `dtype` array on `chip`: x read once and the output written once,
    2·n·d·itemsize bytes, over course.yml's hbm_bytes_per_s. None when right; else the likely cause."""
    from pallas_course.chips import chip as chip_named
    from pallas_course.cost_model import fused_softmax_bytes, memory_bound_seconds, unfused_softmax_bytes

    value = _number(got)
    if value is None:
        return f"returned {got!r} ({type(got).__name__}); expected a number of seconds"
    c = chip_named(chip)
    name = dtype_name(dtype)
    size = np.dtype(name).itemsize
    moved = fused_softmax_bytes(n, d, dtype)
    want = memory_bound_seconds(moved, c)
    if _close(value, want):
        return None
    expected = (
        f"Expected {want:.4g} s: x read once and the output written once, 2·n·d·itemsize = {moved:,} bytes, "
        f"over {chip}'s {c.hbm_bytes_per_s:.3g} B/s"
    )
    if _close(value, want / 2):
        return (
            f"is {value:.4g} s, half the expected time: it counts x read ({n * d * size:,} bytes) but not the "
            f"output written; the kernel writes every element once too. {expected}"
        )
    cores = c.tensorcores_per_chip
    if _close(value, want * 4) or _close(value, memory_bound_seconds(unfused_softmax_bytes(n, d, dtype), c)):
        return (
            f"is {value:.4g} s, about 4 times the expected time: it counts the unfused chain's traffic (the array "
            "read five times and written three times, one HBM trip per XLA operation); the fused kernel reads x "
            f"once and writes the output once. {expected}"
        )
    if _close(value, want * 8):
        return (
            f"is {value:.4g} s, 8 times the expected time: it counts bits, not bytes; hbm_bytes_per_s is bytes per "
            f"second and np.dtype(dtype).itemsize is in bytes ({name}: {size}). {expected}"
        )
    for wrong_size in (4, 8):
        if wrong_size != size and _close(value, want * wrong_size / size) and cores == wrong_size // size:
            return (
                f"is {value:.4g} s, {cores} times the expected time; two mistakes give this: {wrong_size} bytes per "
                f"element where {name} has {size} (take np.dtype(dtype).itemsize), or one TensorCore's share of "
                f"{chip}'s bandwidth ({chip} has {cores} TensorCores per chip; the lab uses course.yml's per-chip "
                f"hbm_bytes_per_s as it stands). {expected}"
            )
        if wrong_size != size and _close(value, want * wrong_size / size):
            why = (
                f"the kernel computes in float32 inside VMEM, yet HBM holds x and the output in {name}"
                if wrong_size == 4
                else "an element is not a float64"
            )
            return (
                f"is {value:.4g} s, {wrong_size // size} times the expected time: {wrong_size} bytes per "
                f"element, but {name} has {size} ({why}): take the element size from the dtype argument, "
                f"np.dtype(dtype).itemsize. {expected}"
            )
    per_flops = value * c.bf16_flops_per_s
    if _close(per_flops, moved) or (value < want / 10 and 0.5 <= per_flops / (n * d) <= 64):
        return (
            f"is {value:.4g} s, {want / value:.3g} times too short: it divides by {chip}'s FLOP/s "
            f"({c.bf16_flops_per_s:.3g}), as if the arithmetic set the pace. Softmax does a few operations per "
            f"element and no matmul, while {chip}'s peak is {c.bf16_flops_per_s / c.hbm_bytes_per_s:.0f} FLOPs "
            f"per byte of HBM bandwidth: the model takes the kernel as waiting on memory, so its time is its "
            f"bytes over hbm_bytes_per_s. {expected}"
        )
    for factor, unit in ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds")):
        if _close(value, want * factor):
            return (
                f"is {value:.4g}, {factor:.0e} times the time in seconds: it returns {unit}; return seconds. {expected}"
            )
    if cores > 1 and _close(value, want * cores):
        return (
            f"is {value:.4g} s, {cores} times the expected time, as with one TensorCore's share of {chip}'s "
            f"bandwidth ({chip} has {cores} TensorCores per chip); the lab uses course.yml's per-chip "
            f"hbm_bytes_per_s as it stands. {expected}"
        )
    return f"is {value:.4g} s (= {value * c.hbm_bytes_per_s:,.0f} bytes at {chip}'s {c.hbm_bytes_per_s:.3g} B/s); {expected}"


def check_softmax_seconds(softmax_seconds: Callable[..., Any]) -> None:
    """The grade's softmax_time_model rule on the visible cases (pallas_course.lab_1_3_rules): a CheckFailure naming
    the first wrong case and its likely cause, or one ✓ line."""
    import ml_dtypes  # noqa: F401 - the cases name bfloat16

    from pallas_course.compare import PASSED, CheckFailure
    from pallas_course.errors import explain

    for n, d, dtype, chip in SOFTMAX_TIME_CASES:
        where = softmax_time_label(n, d, dtype, chip)
        try:
            got = softmax_seconds(n, d, np.dtype(dtype), chip)
        except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"softmax_seconds: {where}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw, failure.kind = explanation.raw, explanation.kind
            raise failure from None
        wrong = softmax_time_problem(got, n, d, dtype, chip)
        if wrong is not None:
            failure = CheckFailure(f"softmax_seconds: {where} {wrong}")
            failure.kind = "values"
            raise failure
    cases = "; ".join(softmax_time_label(*c) for c in SOFTMAX_TIME_CASES)
    print(f"✓ softmax_seconds: right in {len(SOFTMAX_TIME_CASES)} cases ({cases}); {PASSED}")
