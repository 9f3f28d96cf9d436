"""LAB·1.4 (pipelining): the course's models of one matmul step and its VMEM budget read off a matmul
(YourMatmul; the arithmetic is pallas_course.cost_model's), and the rules the grade applies to
smallest_fed_block, largest_square_block and choose_blocks. One copy, used by the notebook's visible checks
(pallas_course.lab_1_4_checks: check_fed_block, check_budget_line, check_block_choice) and by the grader
(autograder.labs.lab_1_4), so a visible check and the hidden test say the same thing in the same words. No number
is typed in: a traced model matmul answers (schedule, its dot, the legality model) and every chip constant comes
from course.yml.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pallas_course.rules import dtype_name

BLOCK_STEP = 128  # block sizes the lab searches: multiples of the 128-lane width
SEARCH_LIMIT = 8192  # ... up to this size (the notebook's docstrings say the same)
# choose_blocks keeps its working set within this fraction of the default scoped VMEM limit: the compiler needs
# VMEM of its own beyond the pipeline buffers (for bf16 matmuls, seen with libtpu 0.0.42.1: up to about one
# float32 (bm, bn) block), so a choice that fills the limit fails to compile.
VMEM_HEADROOM = 0.75

# The cases: the grade runs exactly these (autograder.labs.lab_1_4 imports them) and the notebook's visible checks
# run every one of them, so a helper that loses points fails its check cell first, on the same case, in the same
# words. The grade's only extra is pipeline_off's fresh random inputs.
FED_BLOCK_CASES: tuple[tuple[str, str], ...] = (
    ("bfloat16", "v4"),
    ("bfloat16", "v5e"),
    ("bfloat16", "v5p"),
    ("bfloat16", "v6e"),
    ("bfloat16", "v7x"),
    ("float32", "v5e"),
)
BUDGET_LINE_CASES: tuple[tuple[str, str, int], ...] = (
    ("float32", "v5e", 2),
    ("bfloat16", "v5e", 2),
    ("float32", "v6e", 2),
    ("bfloat16", "v6e", 2),
    ("float32", "v5e", 1),
)
# (m, k, n, bm, bn, bk): the matmul switched off at a square grid of square blocks and a non-square one of
# rectangular blocks
PIPELINE_OFF_CASES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (256, 512, 256, 128, 128, 128),
    (128, 512, 384, 64, 128, 256),
)
# (bm, bn, bk, dtype, chip): both dtypes, square and rectangular blocks, chips of one TensorCore and of two
STEP_CASES: tuple[tuple[int, int, int, str, str], ...] = (
    (128, 128, 128, "bfloat16", "v5e"),
    (512, 1024, 1024, "bfloat16", "v5e"),
    (256, 512, 128, "float32", "v6e"),
    (128, 256, 512, "bfloat16", "v4"),
    (1024, 128, 256, "bfloat16", "v5p"),
)
# (bm, bn, bk, dtype, buffers, acc_scratch): both dtypes, one and two buffers, each with and without the f32
# accumulator (the scratch with 2 buffers: one copy of it, whatever the buffer count)
WORKING_SET_CASES: tuple[tuple[int, int, int, str, int, bool], ...] = (
    (128, 128, 128, "float32", 2, False),
    (512, 256, 1024, "bfloat16", 2, False),
    (256, 512, 128, "bfloat16", 1, False),
    (1024, 1024, 1024, "float32", 2, True),
    (128, 256, 512, "bfloat16", 1, True),
)
# (m, n, k, dtype, chip): the large sizes on each Colab chip, f32, and a non-square product on a two-core chip
BLOCK_CHOICE_CASES: tuple[tuple[int, int, int, str, str], ...] = (
    (4096, 4096, 4096, "bfloat16", "v5e"),
    (4096, 4096, 4096, "bfloat16", "v6e"),
    (4096, 4096, 4096, "float32", "v5e"),
    (2048, 8192, 1024, "bfloat16", "v4"),
)

# (array shape, block shape, dtype): every row and every outcome of the tiling table (pallas_course.tiling), each
# verdict held to the real compiler by the course's tests (the tiling record)
LEGAL_OR_NOT_CASES: tuple[tuple[tuple[int, int], tuple[int, int], str], ...] = (
    ((256, 256), (8, 128), "float32"),
    ((256, 256), (4, 128), "float32"),
    ((256, 256), (8, 64), "float32"),
    ((8, 100), (8, 100), "float32"),
    ((384, 256), (24, 128), "float32"),
    ((300, 256), (128, 128), "float32"),
    ((256, 256), (8, 128), "bfloat16"),
    ((256, 256), (16, 128), "bfloat16"),
    ((256, 256), (16, 128), "int8"),
    ((256, 256), (32, 128), "int8"),
    ((24, 256), (24, 128), "int8"),
    ((256, 256), (4, 256), "int8"),
)
VERDICTS = ("legal", "note", "compile", "lowering")


def visible_cases(test: str) -> tuple[tuple[Any, ...], ...]:
    """The cases the notebook's visible check of LAB·1.4's graded test `test` runs (each check_* of
    pallas_course.lab_1_4_checks)."""
    return {
        "pipeline_off": PIPELINE_OFF_CASES,
        "step_time_model": STEP_CASES,
        "working_set": WORKING_SET_CASES,
        "fed_block": FED_BLOCK_CASES,
        "budget_line": BUDGET_LINE_CASES,
        "block_choice": BLOCK_CHOICE_CASES,
        "legal_or_not": LEGAL_OR_NOT_CASES,
    }.get(test, ())


def fed_block_label(dtype: Any, chip: str) -> str:
    return f"smallest_fed_block({dtype_name(dtype)}, {chip!r})"


def budget_line_label(dtype: Any, chip: str, buffers: int) -> str:
    return f"largest_square_block({dtype_name(dtype)}, {chip!r}, buffers={buffers})"


def pipeline_off_label(m: int, k: int, n: int, bm: int, bn: int, bk: int) -> str:
    return f"matmul_pipeline_off(a, b, bm={bm}, bn={bn}, bk={bk}) on ({m}, {k}) @ ({k}, {n})"


def pipeline_off_families(m: int, k: int, n: int, bm: int, bn: int, bk: int) -> frozenset[str]:
    from pallas_course.rules import grid_families

    return grid_families((m // bm, n // bn, k // bk), (bm, bn, bk))


def pipeline_off_problem(label: str, pc: Any, m: int, k: int, n: int, bm: int, bn: int, bk: int) -> str | None:
    """The matmul's grid (K innermost, not "parallel") and blocks, every BlockSpec single-buffered."""
    grid = (m // bm, n // bn, k // bk)
    if pc.grid != grid:
        return f"the grid of {label} is {pc.grid}, expected {grid}; keep the matmul's grid (m // bm, n // bn, k // bk), K innermost"
    semantics = tuple(str(s) for s in pc.dimension_semantics or ())
    if len(semantics) == 3 and "parallel" in semantics[2].lower():
        # Steps along K add into one C block: "parallel" lets a two-core chip run them on both cores at once
        # (a race), and TPU interpret mode runs a "parallel" axis in shuffled order (the init lands mid-run).
        return (
            f"{label} marks K, the grid axis it accumulates over, \"parallel\" (dimension_semantics={semantics}): "
            "its steps all add into the same C block, so they must run in order on one core; make K \"arbitrary\""
        )
    if len(pc.inputs) != 2 or len(pc.outputs) != 1:
        return (
            f"{label} has {len(pc.inputs)} inputs and {len(pc.outputs)} outputs; expected the matmul's two "
            "in_specs (A, B) and one out_specs (C)"
        )
    names = {
        "in[0]": "A's BlockSpec (in_specs[0])",
        "in[1]": "B's BlockSpec (in_specs[1])",
        "out[0]": "C's BlockSpec (out_specs)",
    }
    want_blocks = {"in[0]": (bm, bk), "in[1]": (bk, bn), "out[0]": (bm, bn)}
    for blk in pc.blocks:
        key = f"{blk.role}[{blk.position}]"
        if tuple(blk.block_shape) != want_blocks[key]:
            return (
                f"the block of {names[key]} in {label} is {tuple(blk.block_shape)}, expected {want_blocks[key]}; "
                "switching the pipeline off changes the buffering, not the blocks"
            )
        if blk.buffer_count != 1:
            has = (
                "no pipeline_mode, so it gets the default 2 buffers"
                if blk.buffer_count is None
                else f"pipeline_mode=pl.Buffered({blk.buffer_count})"
            )
            return (
                f"{names[key]} in {label} has {has}; with the pipeline off every BlockSpec, the output's too, "
                "takes pipeline_mode=pl.Buffered(1)"
            )
    return None


def step_label(bm: int, bn: int, bk: int, dtype: Any, chip: str) -> str:
    return f"step_times({bm}, {bn}, {bk}, {dtype_name(dtype)}, {chip!r})"


def working_set_label(bm: int, bn: int, bk: int, dtype: Any, buffers: int, acc_scratch: bool) -> str:
    return f"vmem_working_set({bm}, {bn}, {bk}, {dtype_name(dtype)}, buffers={buffers}, acc_scratch={acc_scratch})"


def step_families(bm: int, bn: int, bk: int, dtype: Any, chip: str) -> frozenset[str]:
    from pallas_course.chips import chip as chip_named

    cores = chip_named(chip).tensorcores_per_chip
    return frozenset(
        {
            dtype_name(dtype),
            "square blocks" if bm == bn == bk else "rectangular blocks",
            "one TensorCore per chip" if cores == 1 else "several TensorCores per chip",
        }
    )


def working_set_families(bm: int, bn: int, bk: int, dtype: Any, buffers: int, acc_scratch: bool) -> frozenset[str]:
    return frozenset(
        {
            dtype_name(dtype),
            f"{buffers} buffer{'s' * (buffers != 1)}",
            "an f32 scratch accumulator" if acc_scratch else "no scratch",
        }
    )


def legal_or_not_label(shape: tuple[int, ...], block: tuple[int, ...], dtype: Any) -> str:
    return f"blockspec_verdict({tuple(shape)}, {tuple(block)}, {dtype_name(dtype)})"


def legal_or_not_answer(shape: tuple[int, ...], block: tuple[int, ...], dtype: Any) -> tuple[str, str]:
    """(verdict, the rule that decides it) by the course's legality model (pallas_course.legality, the tiling
    table): "lowering" if the Pallas lowering refuses the block, "compile" if only Mosaic does, "note" if it is
    legal with half-filled tiles or a partial last block, else "legal"."""
    from pallas_course.legality import check_block

    v = check_block(shape, block, np.dtype(dtype), "v5e")
    failed = [c for c in v.checks if not c.ok]
    for verdict, severity in (("lowering", "lowering"), ("compile", "compile"), ("note", "note")):
        hit = [c for c in failed if c.severity == severity]
        if hit:
            return verdict, hit[0].message
    return (
        "legal",
        "every block dim passes the lowering rule and fills whole native tiles, and the blocks tile the array",
    )


def legal_or_not_problem(got: Any, shape: tuple[int, ...], block: tuple[int, ...], dtype: Any) -> str | None:
    want, why = legal_or_not_answer(shape, block, dtype)
    if not isinstance(got, str) or got not in VERDICTS:
        return f"returned {got!r}: answer one of {', '.join(map(repr, VERDICTS))}"
    if got != want:
        tile = (8, 128)  # the lowering rule's (sublane, lane) multiples, for the last two dims
        whole = [f"{b} equals the array's {a}" for a, b, t in zip(shape[-2:], block[-2:], tile) if a == b and a % t]
        if got == "lowering" and whole:
            # the table: "a block dim equal to the array's passes whatever its size"
            why += f" (a block dim equal to the array's passes the lowering rule whatever its size: {', '.join(whole)})"
        return f"returned {got!r}, but it is {want!r}: {why}"
    return None


def block_choice_label(m: int, n: int, k: int, dtype: Any, chip: str) -> str:
    return f"choose_blocks({m}, {n}, {k}, {dtype_name(dtype)}, {chip!r})"


class YourMatmul:
    """The course's models read off the notebook's own `matmul` (the pasted LAB·1.2 one), as the step-time and
    working-set checks do: the schedule says what a steady step copies, its dot its FLOPs, the legality model
    its VMEM. It stands in for the student's step_times and vmem_working_set while another function is checked.

    Tracing per call would make a block search take seconds, so `matmul` is traced once per dtype, with bm, bn
    and bk set to sizes no other dimension has, and every other block size is that trace with its dimensions
    renamed (a traced block dimension that is none of them: traced at the asked sizes instead)."""

    BASE = (256, 384, 640)  # bm, bn, bk of the one trace: distinct, and none is 3 x another

    def __init__(self, matmul: Callable[..., Any]) -> None:
        self.matmul = matmul
        self._base: dict[str, Any] = {}
        self._exact: dict[tuple[Any, ...], Any] = {}

    def _trace(self, m: int, k: int, n: int, bm: int, bn: int, bk: int, dtype: str) -> Any:
        import jax

        from pallas_course.kernel_trace import trace

        key = (m, k, n, bm, bn, bk, dtype)
        if key not in self._exact:
            a, b = jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((k, n), dtype)
            self._exact[key] = trace(self.matmul, a, b, bm=bm, bn=bn, bk=bk).pallas_calls[0]
        return self._exact[key]

    def info(self, bm: int, bn: int, bk: int, dtype: Any) -> Any:
        """The pallas_call of `matmul` on (bm, 3 bk) @ (3 bk, bn) with blocks (bm, bn, bk): grid (1, 1, 3)."""
        import dataclasses

        name = dtype_name(dtype)
        b_m, b_n, b_k = self.BASE
        if name not in self._base:
            self._base[name] = self._trace(b_m, 3 * b_k, b_n, b_m, b_n, b_k, name)
        base = self._base[name]
        sizes = {b_m: bm, b_n: bn, b_k: bk, 3 * b_k: 3 * bk}

        def renamed(shape: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(d if d is None else sizes[d] for d in shape)

        try:
            return dataclasses.replace(
                base,
                inputs=tuple(
                    dataclasses.replace(x, array_shape=renamed(x.array_shape), block_shape=renamed(x.block_shape))
                    for x in base.inputs
                ),
                outputs=tuple(
                    dataclasses.replace(x, array_shape=renamed(x.array_shape), block_shape=renamed(x.block_shape))
                    for x in base.outputs
                ),
                scratch=tuple((renamed(shape), dt, space) for shape, dt, space in base.scratch),
            )
        except KeyError:
            return self._trace(bm, 3 * bk, bn, bm, bn, bk, name)

    def step_times(self, bm: int, bn: int, bk: int, dtype: Any, chip: str) -> tuple[float, float]:
        from pallas_course.cost_model import matmul_passes, step_seconds

        moved, flops, _ = self.step_detail(bm, bn, bk, dtype)
        return step_seconds(moved, flops, chip, matmul_passes(dtype, chip))

    def step_detail(self, bm: int, bn: int, bk: int, dtype: Any) -> tuple[int, int, str]:
        """(bytes, FLOPs, what moves) of one steady step, read off the schedule and the dot of `matmul`."""
        from pallas_course.cost_model import steady_flops, steady_step

        info = self.info(bm, bn, bk, dtype)
        moved, what = steady_step(info)
        b_m, b_n, b_k = self.BASE  # the dots of the traced steady step, (bm, bk) x (bk, bn) renamed like the blocks
        flops, _ = steady_flops(self._base[dtype_name(dtype)])
        return moved, flops * (bm * bn * bk) // (b_m * b_n * b_k), what

    def budget(
        self, bm: int, bn: int, bk: int, dtype: Any, chip: str, buffers: int = 2, acc_scratch: bool = False
    ) -> Any:
        """The legality model's budget of `matmul` with these blocks; with `acc_scratch`, plus the f32 (bm, bn)
        scratch accumulator LAB·1.2's matmul_acc adds (one copy: scratch is not pipelined)."""
        import dataclasses

        from pallas_course.legality import check_pallas_call

        # the lab's matmul holds A, B and C blocks, and one f32 (bm, bn) accumulator when asked: a scratch the
        # student's own matmul already has (matmul_acc pasted as matmul) is that accumulator, not a second one
        scratch = (((bm, bn), np.dtype(np.float32), "vmem"),) if acc_scratch else ()
        info = dataclasses.replace(self.info(bm, bn, bk, dtype), scratch=scratch)
        return check_pallas_call(info, chip, buffers=buffers).budget

    def working_set(self, bm: int, bn: int, bk: int, dtype: Any, buffers: int = 2, acc_scratch: bool = False) -> int:
        return self.budget(bm, bn, bk, dtype, "v5e", buffers, acc_scratch).working_set_bytes

    def report(self, m: int, n: int, k: int, bm: int, bn: int, bk: int, dtype: Any, chip: str) -> Any:
        """The legality model of `matmul` at these sizes, its working set the lab's double-buffered matmul's (no
        scratch: what choose_blocks budgets, as the grade's model matmul has none)."""
        import dataclasses

        from pallas_course.legality import check_pallas_call

        return check_pallas_call(
            dataclasses.replace(self._trace(m, k, n, bm, bn, bk, dtype_name(dtype)), scratch=()), chip
        )


def _ns(seconds: float) -> str:
    return f"{seconds * 1e9:.4g} ns"


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def budget_entries(budget: Any) -> str:
    return ", ".join(f"{e.name} {e.bytes_per_buffer:,} B x {e.buffers}" for e in budget.entries)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return float(value)


def _close(got: float, want: float, rel: float = 1e-6) -> bool:
    return abs(got - want) <= rel * abs(want)


StepDetail = Callable[[int, int, int, Any], "tuple[int, int, str]"]  # -> (bytes, FLOPs, what moves)


def step_time_problem(got: Any, bm: int, bn: int, bk: int, dtype: Any, chip: str, detail: StepDetail) -> str | None:
    """(DMA s, MXU s) of one steady step on one JAX device: the bytes the schedule streams over its HBM B/s, the
    dot's FLOPs x the MXU passes of the dtype at the course's precision over its bf16 FLOP/s (pallas_course.cost_model)."""
    from pallas_course.chips import chip as chip_named
    from pallas_course.cost_model import matmul_passes, step_seconds

    if not isinstance(got, (tuple, list)) or len(got) != 2 or any(_number(v) is None for v in got):
        return f"returned {got!r}; expected a pair of numbers (dma_s, compute_s)"
    dma, mxu = (float(v) for v in got)
    c = chip_named(chip)
    moved, flops, what = detail(bm, bn, bk, dtype)
    passes = matmul_passes(dtype, c)
    want_dma, want_mxu = step_seconds(moved, flops, c, passes)
    if _close(dma, want_dma) and _close(mxu, want_mxu):
        return None
    if _close(dma, want_mxu) and _close(mxu, want_dma):
        return "returned (compute, DMA); the order is (dma_s, compute_s)"
    cores = c.tensorcores_per_chip
    units = {1e3: "milliseconds", 1e6: "microseconds", 1e9: "nanoseconds"}
    for factor, unit in units.items():
        if (_close(dma, want_dma * factor) or _close(mxu, want_mxu * factor)) and not (
            _close(dma, want_dma) and _close(mxu, want_mxu)
        ):
            return (
                f"gives ({dma:.4g}, {mxu:.4g}), {factor:.0e} times the step's times in seconds: it returns "
                f"{unit}; return seconds, bytes / (B/s) and FLOPs / (FLOP/s) as they stand "
                f"(expected ({want_dma:.4g}, {want_mxu:.4g}) s)"
            )
    if cores > 1 and (_close(dma, cores * want_dma) or _close(mxu, cores * want_mxu)):
        return (
            f"gives DMA {_ns(dma)} and MXU {_ns(mxu)}, expected {_ns(want_dma)} and {_ns(want_mxu)}: {cores} times "
            f"too long, as with one TensorCore's share of {chip}'s bandwidth and FLOP/s ({chip} has {cores} "
            f"TensorCores per chip): the matmul's i and j axes are \"parallel\", so on a {chip} JAX device both "
            "TensorCores work, chip_named(chip).device_hbm_bytes_per_s(parallel=True) and "
            "device_bf16_flops_per_s(parallel=True)"
        )
    if not _close(dma, want_dma):
        bw = c.device_hbm_bytes_per_s(parallel=True)
        got_bytes = dma * bw
        size = np.dtype(dtype_name(dtype)).itemsize
        other = next((s for s in (1, 2, 4, 8) if s != size and _close(got_bytes, moved // size * s)), None)
        hint = (
            (
                f"; that is {other} bytes per element, but {dtype_name(dtype)} has {size}: take the element size "
                "from the dtype argument, np.dtype(dtype).itemsize"
            )
            if other is not None
            else ""
        )
        return (
            f"gives DMA {_ns(dma)} (= {got_bytes:,.0f} bytes at {chip}'s {bw:.3g} B/s), expected "
            f"{_ns(want_dma)}: a steady step streams {what} of {dtype_name(dtype)}, {moved:,} bytes; C stays in "
            f"VMEM across K{hint}"
        )
    flops_per_s = c.device_bf16_flops_per_s(parallel=True)
    if passes != 1 and _close(mxu, want_mxu / passes):
        return (
            f"gives MXU {_ns(mxu)}, expected {_ns(want_mxu)}: {passes:g} times too short for {dtype_name(dtype)}, as "
            f"with one MXU pass; the course's {dtype_name(dtype)} dot asks precision=HIGHEST "
            f"(pallas_course.precision.matmul_precision), which the compiler issues as {passes:g} bf16 passes "
            f"(course.yml's mxu_passes, counted from Mosaic's output: matmul_passes(dtype, chip))"
        )
    return (
        f"gives MXU {_ns(mxu)} (= {mxu * flops_per_s:,.0f} FLOPs at {chip}'s {flops_per_s:.3g} bf16 "
        f"FLOP/s), expected {_ns(want_mxu)}: a steady-state step (one in the middle of K, where a pl.when that runs "
        f"only on the first or last K step does not run) computes one dot, 2·bm·bn·bk = {flops:,} FLOPs (a "
        f"multiply and an add each), times {passes:g} MXU pass{'es' * (passes != 1)} for {dtype_name(dtype)}"
    )


def working_set_problem(
    got: Any, bm: int, bn: int, bk: int, dtype: Any, buffers: int, acc_scratch: bool, budget: Any
) -> str | None:
    """Blocks x buffers x bytes for A, B and C, plus one f32 (bm, bn) accumulator when asked: the legality model."""
    value = _number(got)
    if value is None:
        return f"returned {got!r} ({type(got).__name__}); expected a number of bytes"
    want = budget.working_set_bytes
    if value == want:
        return None
    hint = " (the scratch accumulator is not pipelined: one copy)"
    size = np.dtype(dtype_name(dtype)).itemsize
    if acc_scratch and size != 4 and value == want - bm * bn * 4 + bm * bn * size:
        hint = (
            f": the accumulator is counted in {dtype_name(dtype)}, but it is float32 whatever the inputs "
            f"(bm·bn·4 bytes, one copy: np.dtype(np.float32).itemsize, not np.dtype(dtype).itemsize)"
        )
    return f"is {value:,.0f} bytes, expected {want:,}: {budget_entries(budget)}{hint}"


# The rules. Each takes the answer and the case, and the models it judges by (the grade passes its own traced
# model matmul; the notebook's checks pass YourMatmul), and returns None or what is wrong, after the call's label.
StepModel = Callable[[int, int, int, Any, str], "tuple[float, float]"]
BudgetModel = Callable[[int, int, int, Any, str, int], Any]  # -> legality.VmemBudget
ReportModel = Callable[[int, int, int, int, int, int, Any, str], Any]  # -> legality.PallasCallReport


def fed_block_problem(got: Any, dtype: Any, chip: str, step_times: StepModel) -> str | None:
    """The smallest fed square block: fed at `got` (compute >= DMA) and starved one step below; None if no
    square block up to SEARCH_LIMIT is fed."""

    def fed(b: int) -> bool:
        dma, mxu = step_times(b, b, b, dtype, chip)
        return mxu >= dma

    if got is None:
        first = next((b for b in range(BLOCK_STEP, SEARCH_LIMIT + 1, BLOCK_STEP) if fed(b)), None)
        return None if first is None else f"returned None, but a ({first}, {first}, {first}) step is fed"
    if not _is_int(got) or got % BLOCK_STEP or not BLOCK_STEP <= got <= SEARCH_LIMIT:
        return (
            f"returned {got!r}; expected the block size b (an int among {BLOCK_STEP}, {2 * BLOCK_STEP}, ..., "
            f"{SEARCH_LIMIT}), or None"
        )
    b = int(got)
    dma, mxu = step_times(b, b, b, dtype, chip)
    if dma > mxu:
        return f"is {b}; at {b} a step copies for {_ns(dma)} and computes for {_ns(mxu)}, so the MXU still waits"
    if b > BLOCK_STEP and fed(b - BLOCK_STEP):
        dma, mxu = step_times(b - BLOCK_STEP, b - BLOCK_STEP, b - BLOCK_STEP, dtype, chip)
        return (
            f"is {b}; the MXU is fed there, but so is {b - BLOCK_STEP}, which is smaller (a step copies for "
            f"{_ns(dma)} and computes for {_ns(mxu)})"
        )
    return None


def budget_line_problem(got: Any, dtype: Any, chip: str, buffers: int, budget: BudgetModel) -> str | None:
    """The largest square block within the default scoped limit: fits at `got` and not one step above (or `got`
    is SEARCH_LIMIT); None if not even BLOCK_STEP fits."""
    if got is None:
        at = budget(BLOCK_STEP, BLOCK_STEP, BLOCK_STEP, dtype, chip, buffers)
        return None if not at.fits_limit else f"returned None, but {BLOCK_STEP} fits ({at.verdict()})"
    if not _is_int(got) or got % BLOCK_STEP or not BLOCK_STEP <= got <= SEARCH_LIMIT:
        return (
            f"returned {got!r}; expected the block size b (an int among {BLOCK_STEP}, {2 * BLOCK_STEP}, ..., "
            f"{SEARCH_LIMIT}), or None"
        )
    b = int(got)
    at = budget(b, b, b, dtype, chip, buffers)
    if not at.fits_limit:
        below = budget(b - BLOCK_STEP, b - BLOCK_STEP, b - BLOCK_STEP, dtype, chip, buffers) if b > BLOCK_STEP else None
        past = (
            f": the first size over the line, one step past the largest that fits ({b - BLOCK_STEP})"
            if below is not None and below.fits_limit
            else ""
        )
        return f"is {b}{past}; at {b}: {at.verdict()}"
    if b < SEARCH_LIMIT:
        above = budget(b + BLOCK_STEP, b + BLOCK_STEP, b + BLOCK_STEP, dtype, chip, buffers)
        if above.fits_limit:
            return f"is {b}; {b} fits ({at.verdict()}), but so does {b + BLOCK_STEP} ({above.verdict()})"
    return None


def block_choice_problem(
    got: Any, m: int, n: int, k: int, dtype: Any, chip: str, step_times: StepModel, report: ReportModel
) -> str | None:
    """(bm, bn, bk) divide the shapes, are legal BlockSpecs, feed the MXU and use at most VMEM_HEADROOM of the
    default scoped limit."""
    from pallas_course.legality import fmt_mib

    if not isinstance(got, (tuple, list)) or len(got) != 3 or not all(_is_int(v) for v in got):
        return f"returned {got!r}; expected three ints (bm, bn, bk)"
    bm, bn, bk = (int(v) for v in got)
    for name, block, dim_name, dim in (("bm", bm, "m", m), ("bn", bn, "n", n), ("bk", bk, "k", k)):
        if block <= 0 or dim % block:
            return (
                f"chose {name}={block}, which does not divide {dim_name}={dim}; the grid {dim_name} // {name} "
                "would leave part of the matrix out"
            )
    legality = report(m, n, k, bm, bn, bk, dtype, chip)
    if not legality.legal:
        return f"chose ({bm}, {bn}, {bk}), which is not a legal BlockSpec on {chip}: {legality.violations[0]}"
    dma, mxu = step_times(bm, bn, bk, dtype, chip)
    if mxu < dma:
        return (
            f"chose ({bm}, {bn}, {bk}), which starves the MXU: a step copies for {_ns(dma)} and computes for "
            f"{_ns(mxu)}; grow bm and bn (bk does not change the ratio)"
        )
    budget = legality.budget
    chosen = (
        f"chose ({bm}, {bn}, {bk}), whose working set is {fmt_mib(budget.working_set_bytes)} ({budget_entries(budget)})"
    )
    if not budget.fits_limit:
        return f"{chosen}: {budget.verdict()}"
    if budget.working_set_bytes > VMEM_HEADROOM * budget.default_scoped_vmem_bytes:
        return (
            f"{chosen}: inside {chip}'s {fmt_mib(budget.default_scoped_vmem_bytes)} default scoped limit but "
            f"above {VMEM_HEADROOM:.0%} of it, which leaves the compiler no headroom for its own temporaries; "
            "it would likely fail to compile"
        )
    return None
