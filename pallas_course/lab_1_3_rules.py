"""LAB·1.3's model of the fused softmax's time (bytes over one JAX device's bandwidth plus a fixed cost per grid
step) and its choice of rows per block: the rules the grade applies to the student's softmax_seconds and
rows_per_block, their cases, and the notebook's visible checks of them (check_softmax_seconds,
check_rows_per_block). One copy, used by the
notebook and by the grader (autograder.labs.lab_1_3), so both say the same thing in the same words. The arithmetic
is pallas_course.cost_model's; every chip constant comes from course.yml (pallas_course.chips).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pallas_course.rules import dtype_name

# (n, d, dtype, chip, rows_per_block): both dtypes, a chip of one TensorCore per JAX device and v7x, whose JAX
# device is one of its two TensorCores. Megacore chips (v4, v5p) are left out: there the bandwidth a pallas_call gets
# depends on its dimension_semantics (both cores only through a "parallel" axis), which this model does not ask. The
# notebook's visible check runs these; the grade runs them and its own (autograder.labs.lab_1_3.SOFTMAX_TIME_CASES).
SOFTMAX_TIME_CASES: tuple[tuple[int, int, str, str, int], ...] = (
    (32768, 1024, "float32", "v5e", 8),
    (65536, 4096, "bfloat16", "v6e", 256),
    (8192, 256, "bfloat16", "v5e", 2048),
    (16384, 512, "float32", "v7x", 64),
)
# (n, d, dtype, chip): rows_per_block's cases, both dtypes, both scoped limits (16 MiB on v5e, 32 MiB on v6e), a
# short wide array and an array smaller than one good step
ROWS_CHOICE_CASES: tuple[tuple[int, int, str, str], ...] = (
    (32768, 1024, "float32", "v5e"),
    (65536, 4096, "bfloat16", "v6e"),
    (8192, 256, "bfloat16", "v5e"),
    (128, 512, "float32", "v6e"),
)
REL = 1e-6  # the answer is arithmetic on course.yml's numbers: only float rounding may differ


def softmax_time_label(n: int, d: int, dtype: Any, chip: str, rows: int) -> str:
    return f"softmax_seconds({n}, {d}, {dtype_name(dtype)}, {chip!r}, rows_per_block={rows})"


def softmax_time_families(n: int, d: int, dtype: Any, chip: str, rows: int) -> frozenset[str]:
    """The dtype (bf16 shows a 4-byte element size), one JAX device per chip or per TensorCore (shows per-chip
    bandwidth), few or many steps (shows a missing steps term)."""
    from pallas_course.chips import chip as chip_named

    c = chip_named(chip)
    return frozenset(
        {
            dtype_name(dtype),
            "one JAX device per chip" if c.tensorcores_per_chip == 1 else "one JAX device per TensorCore",
            "steps-bound" if _steps_share(n, d, dtype, chip, rows) > 0.5 else "bytes-bound",
        }
    )


def rows_choice_label(n: int, d: int, dtype: Any, chip: str) -> str:
    return f"rows_per_block({n}, {d}, {dtype_name(dtype)}, {chip!r})"


def rows_choice_families(n: int, d: int, dtype: Any, chip: str) -> frozenset[str]:
    from pallas_course.chips import chip as chip_named

    limit = chip_named(chip).default_scoped_vmem_bytes
    return frozenset({dtype_name(dtype), f"{limit // 2**20} MiB scoped limit"})


def _steps_share(n: int, d: int, dtype: Any, chip: str, rows: int) -> float:
    from pallas_course.cost_model import fused_softmax_bytes, memory_bound_seconds

    whole = memory_bound_seconds(fused_softmax_bytes(n, d, dtype), chip, n // rows)
    return 1 - memory_bound_seconds(fused_softmax_bytes(n, d, dtype), chip) / whole


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    v = float(value)
    return v if np.isfinite(v) else None


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= REL * abs(want)


def softmax_time_problem(got: Any, n: int, d: int, dtype: Any, chip: str, rows: int) -> str | None:
    """Seconds of the fused softmax of an (n, d) `dtype` array on one JAX device of `chip`, in blocks of `rows`:
    2·n·d·itemsize bytes over the device's HBM bandwidth, plus n // rows steps x the fixed cost of a step. None when
    right; else the likely cause."""
    from pallas_course.chips import chip as chip_named
    from pallas_course.cost_model import fused_softmax_bytes, step_overhead, unfused_softmax_bytes

    value = _number(got)
    if value is None:
        return f"returned {got!r} ({type(got).__name__}); expected a number of seconds"
    c = chip_named(chip)
    name = dtype_name(dtype)
    size = np.dtype(name).itemsize
    moved = fused_softmax_bytes(n, d, dtype)
    bw = c.device_hbm_bytes_per_s(parallel=False)
    overhead = step_overhead()[0]
    steps = n // rows
    fixed = steps * overhead
    want = moved / bw + fixed
    if _close(value, want):
        return None
    expected = (
        f"Expected {want:.4g} s: x read once and the output written once, 2·n·d·itemsize = {moved:,} bytes over "
        f"one {chip} JAX device's {bw:.3g} B/s ({moved / bw:.4g} s), plus n // rows_per_block = {steps:,} steps x "
        f"{overhead:.3g} s ({fixed:.4g} s)"
    )
    if _close(value, moved / bw):
        return (
            f"is {value:.4g} s, the bytes alone: it leaves out the fixed cost of the grid's {steps:,} steps "
            f"({fixed:.4g} s, {fixed / want:.0%} of the time here); each step costs step_overhead_s whatever it "
            f"moves. {expected}"
        )
    if c.tensorcores_per_chip > 1 and _close(value, moved / c.hbm_bytes_per_s + fixed):
        return (
            f"is {value:.4g} s, with {chip}'s bandwidth per chip ({c.hbm_bytes_per_s:.3g} B/s): a pallas_call runs "
            f"on one JAX device, and on {chip} a JAX device is one of the chip's {c.tensorcores_per_chip} "
            f"TensorCores, {bw:.3g} B/s (what pltpu.get_tpu_info().mem_bw_bytes_per_second says there; "
            f"chip_named(chip).device_hbm_bytes_per_s(parallel=False)). {expected}"
        )
    if _close(value, moved / bw + n * overhead):
        return (
            f"is {value:.4g} s: it charges a step per row ({n:,} steps); the grid has n // rows_per_block = "
            f"{steps:,}. {expected}"
        )
    wrong_bytes = {
        moved // 2: f"it counts x read ({n * d * size:,} bytes) but not the output written; the kernel writes "
        "every element once too",
        unfused_softmax_bytes(n, d, dtype): "it counts the unfused chain's traffic (the array read five times and "
        "written three times, one HBM trip per XLA operation); the fused kernel reads x once and writes the output "
        "once",
        moved * 4: "it counts the unfused chain's traffic, about 4 times the fused kernel's",
        moved * 8: "it counts bits, not bytes; hbm_bytes_per_s is bytes per second and np.dtype(dtype).itemsize is "
        f"in bytes ({name}: {size})",
    }
    for wrong_size in (4, 8):
        if wrong_size != size:
            why = (
                f"the kernel computes in float32 inside VMEM, yet HBM holds x and the output in {name}"
                if wrong_size == 4
                else "an element is not a float64"
            )
            wrong_bytes[moved * wrong_size // size] = (
                f"{wrong_size} bytes per element, but {name} has {size} ({why}): take the element size from the "
                "dtype argument, np.dtype(dtype).itemsize"
            )
    for b, why in wrong_bytes.items():
        if _close(value, b / bw + fixed):
            return f"is {value:.4g} s: {why}. {expected}"
    if _close(value - fixed, moved / c.bf16_flops_per_s) or _close(value, moved / c.bf16_flops_per_s):
        return (
            f"is {value:.4g} s, {want / value:.3g} times too short: it divides by {chip}'s FLOP/s "
            f"({c.bf16_flops_per_s:.3g}), as if the arithmetic set the pace. Softmax does a few operations per "
            f"element and no matmul, while {chip}'s peak is {c.bf16_flops_per_s / c.hbm_bytes_per_s:.0f} FLOPs "
            f"per byte of HBM bandwidth: the model takes the kernel as waiting on memory. {expected}"
        )
    for factor, unit in ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds")):
        if _close(value, want * factor):
            return (
                f"is {value:.4g}, {factor:.0e} times the time in seconds: it returns {unit}; return seconds. {expected}"
            )
    return f"is {value:.4g} s; {expected}"


def rows_choice_problem(got: Any, n: int, d: int, dtype: Any, chip: str) -> str | None:
    """rows_per_block for the fused softmax of an (n, d) `dtype` array on `chip`: a multiple of the dtype's native
    sublane tile that divides n, whose step moves at least MIN_STEP_BYTES (or is the whole array) and whose
    double-buffered in and out blocks take at most ROW_VMEM_SHARE of the default scoped VMEM limit. Any such
    choice is right. None when right; else what is wrong."""
    from pallas_course.chips import chip as chip_named
    from pallas_course.cost_model import (
        MIN_STEP_BYTES,
        ROW_VMEM_SHARE,
        row_block_bytes,
        row_block_fits,
        row_block_moves_enough,
    )
    from pallas_course.tiling import native_tile

    def fmt_mib(b: int) -> str:
        return f"{b / 2**20:g} MiB" if b >= 2**20 else f"{b / 2**10:g} KiB"

    name = dtype_name(dtype)
    size = np.dtype(name).itemsize
    tile = native_tile(8 * size)[0]
    c = chip_named(chip)
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
        return f"returned {got!r} ({type(got).__name__}); expected an int number of rows"
    rows = int(got)
    if rows <= 0 or n % rows:
        return f"is {rows}, which does not divide n = {n}: the grid n // rows_per_block would leave rows out"
    if rows % tile and rows != n:
        return (
            f"is {rows}, not a multiple of {name}'s native sublane tile ({tile} rows): the TPU lowering refuses "
            "the block (the tiling table in LAB·1.4)"
        )
    block = row_block_bytes(rows, d, dtype)
    if not row_block_moves_enough(rows, n, d, dtype):
        fewest = -(-MIN_STEP_BYTES // (2 * d * size))
        return (
            f"is {rows}: a step reads and writes 2 x {fmt_mib(block)} = {fmt_mib(2 * block)}, under "
            f"{fmt_mib(MIN_STEP_BYTES)}, so the fixed cost of its {n // rows:,} steps weighs on the time "
            f"(softmax_seconds); take at least {fewest} rows (a multiple of {tile} that divides n)"
        )
    if not row_block_fits(rows, d, dtype, chip):
        return (
            f"is {rows}: its in and out blocks, double-buffered, take 4 x {fmt_mib(block)} = {fmt_mib(4 * block)}, "
            f"over {ROW_VMEM_SHARE:.0%} of {chip}'s {fmt_mib(c.default_scoped_vmem_bytes)} default scoped VMEM "
            "limit; the kernel's float32 values need the rest (the compiler refuses (1024, 1024) float32 blocks on "
            "v5e: 17.84 MiB)"
        )
    return None


def check_softmax_seconds(softmax_seconds: Callable[..., Any]) -> None:
    """The grade's softmax_time_model rule on the visible cases (pallas_course.lab_1_3_rules): a CheckFailure naming
    the first wrong case and its likely cause, or one ✓ line."""
    import ml_dtypes  # noqa: F401 - the cases name bfloat16

    from pallas_course.compare import PASSED, CheckFailure
    from pallas_course.errors import explain

    for n, d, dtype, chip, rows in SOFTMAX_TIME_CASES:
        where = softmax_time_label(n, d, dtype, chip, rows)
        try:
            got = softmax_seconds(n, d, np.dtype(dtype), chip, rows)
        except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"softmax_seconds: {where}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw, failure.kind = explanation.raw, explanation.kind
            raise failure from None
        wrong = softmax_time_problem(got, n, d, dtype, chip, rows)
        if wrong is not None:
            failure = CheckFailure(f"softmax_seconds: {where} {wrong}")
            failure.kind = "values"
            raise failure
    cases = "; ".join(softmax_time_label(*c) for c in SOFTMAX_TIME_CASES)
    print(f"✓ softmax_seconds: right in {len(SOFTMAX_TIME_CASES)} cases ({cases}); {PASSED}")


def check_rows_per_block(rows_per_block: Callable[..., Any]) -> None:
    """The grade's rows_per_block_choice rule on the visible cases: a CheckFailure naming the first wrong case and
    why, or one ✓ line."""
    import ml_dtypes  # noqa: F401 - the cases name bfloat16

    from pallas_course.compare import PASSED, CheckFailure
    from pallas_course.errors import explain

    for n, d, dtype, chip in ROWS_CHOICE_CASES:
        where = rows_choice_label(n, d, dtype, chip)
        try:
            got = rows_per_block(n, d, np.dtype(dtype), chip)
        except Exception as exc:  # noqa: BLE001 - any error in student code is a failed check, explained
            explanation = explain(exc)
            failure = CheckFailure(f"rows_per_block: {where}: {explanation.summary.removeprefix('✗ ')}")
            failure.raw, failure.kind = explanation.raw, explanation.kind
            raise failure from None
        wrong = rows_choice_problem(got, n, d, dtype, chip)
        if wrong is not None:
            failure = CheckFailure(f"rows_per_block: {where} {wrong}")
            failure.kind = "values"
            raise failure
    cases = "; ".join(rows_choice_label(*c) for c in ROWS_CHOICE_CASES)
    print(f"✓ rows_per_block: right in {len(ROWS_CHOICE_CASES)} cases ({cases}); {PASSED}")
