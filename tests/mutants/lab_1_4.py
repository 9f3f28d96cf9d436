"""LAB·1.4 mutants: the pipeline switched off, step times, the VMEM budget line, a block choice."""

from tests.mutants import Alternative, Mutant

LAB = "lab-1.4-pipelining-profile"

A_SPEC = "pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk), pipeline_mode=one_buffer),"
B_SPEC = "pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j), pipeline_mode=one_buffer),"
C_SPEC = "out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j), pipeline_mode=one_buffer),"
STEP_RETURN = "return dma_bytes / hbm, flops * passes / peak"
WS_BLOCKS = "blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize * buffers"
WS_SCRATCH = "scratch = bm * bn * np.dtype(np.float32).itemsize if acc_scratch else 0"
BUDGET_FITS = "fits = [b for b in range(128, 8192 + 1, 128) if vmem_working_set(b, b, b, dtype, buffers) <= limit]"
CHOICE_LIMIT = "limit = VMEM_HEADROOM * chip_named(chip).default_scoped_vmem_bytes"
CHOICE_RETURN = "    return best[1]"
STEP_TARGETS_OTHERS = ("working_set", "budget_line", "block_choice")  # choose_blocks graded on reference step times
K_PARALLEL = '\n        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel")),'

MUTANTS = [
    Mutant(
        "pipeline_off_not_compilable",
        "an operation with no TPU lowering (erfc) in the kernel, no effect on values",
        {
            "overlap the compute\n    return pl.pallas_call(\n        matmul_kernel,": "overlap the compute\n"
            "    def erfc_kernel(a_ref, b_ref, o_ref):\n"
            "        matmul_kernel(a_ref, b_ref, o_ref)\n"
            "        o_ref[...] += 0 * jax.lax.erfc(o_ref[...])\n"
            "    return pl.pallas_call(\n        erfc_kernel,"
        },
        {"pipeline_off": r"does not compile for v5e .*\n.*erfc"},
    ),
    # ----------------------------------------------------------------------------------------- pipeline_off
    Mutant(
        "pipeline_off_default_buffers",
        "copies matmul as it is: no pipeline_mode, so the default 2 buffers",
        {
            A_SPEC: "pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),",
            B_SPEC: "pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),",
            C_SPEC: "out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),",
        },
        {"pipeline_off": r"A's BlockSpec .* has no pipeline_mode, so it gets the default 2 buffers"},
    ),
    Mutant(
        "pipeline_off_inputs_only",
        "pl.Buffered(1) on A and B, the output C left double-buffered",
        {C_SPEC: "out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),"},
        {"pipeline_off": r"C's BlockSpec \(out_specs\) .* default 2 buffers.*the output's too"},
    ),
    Mutant(
        "pipeline_off_buffered_two",
        "pl.Buffered(2): spells out the default instead of switching it off",
        {"one_buffer = pl.Buffered(1)": "one_buffer = pl.Buffered(2)"},
        {"pipeline_off": r"pipeline_mode=pl\.Buffered\(2\)"},
    ),
    Mutant(
        "pipeline_off_bypass",
        "returns a @ b: no kernel at all",
        {"    one_buffer = pl.Buffered(1)": "    return a @ b\n    one_buffer = pl.Buffered(1)"},
        {"pipeline_off": "launches no pallas_call"},
    ),
    Mutant(
        "pipeline_off_fixed_blocks",
        "ignores bm, bn and bk: always 128 blocks",
        {"    _, n = b.shape\n    one_buffer": "    _, n = b.shape\n    bm = bn = bk = 128\n    one_buffer"},
        {"pipeline_off": "the grid of matmul_pipeline_off"},
    ),
    Mutant(
        "pipeline_off_k_parallel",
        'marks every grid axis "parallel", K too: on a two-core chip both cores '
        "would add into one C block at once (a race); tests/test_mutants.py::test_race_* shows what catches it",
        {C_SPEC: C_SPEC + K_PARALLEL},
        {"pipeline_off": r'marks K, the grid axis it accumulates over, "parallel"'},
    ),
    Mutant(
        "pipeline_off_b_index_swapped",
        "B's index map reads block (j, kk) instead of (kk, j)",
        {B_SPEC: "pl.BlockSpec((bk, bn), lambda i, j, kk: (j, kk), pipeline_mode=one_buffer),"},
        {"pipeline_off": "Out-of-bounds block index .*b_ref|index map of input b_ref asks for block"},
    ),
    # ---------------------------------------------------------------------------------------------- step times
    Mutant(
        "step_counts_c",
        "counts the C block in every step's DMA (it stays in VMEM across K)",
        {"dma_bytes = (bm * bk + bk * bn) * itemsize": "dma_bytes = (bm * bk + bk * bn + bm * bn) * itemsize"},
        {"step_time_model": "gives DMA .* C stays in VMEM across K"},
        others_pass=STEP_TARGETS_OTHERS,
    ),
    Mutant(
        "step_one_flop_per_term",
        "bm·bn·bk FLOPs: forgets that a multiply-add is two",
        {"flops = 2 * bm * bn * bk": "flops = bm * bn * bk"},
        {"step_time_model": r"gives MXU .* 2·bm·bn·bk"},
        others_pass=STEP_TARGETS_OTHERS + ("fed_block",),
    ),  # fed_block is graded on reference step times
    Mutant(
        "step_per_core",
        "divides the chip's bandwidth and FLOP/s by its TensorCores",
        {
            STEP_RETURN: "return dma_bytes / (hbm / c.tensorcores_per_chip), "
            "flops * passes / (peak / c.tensorcores_per_chip)"
        },
        {"step_time_model": r"one TensorCore's share of v4's bandwidth and FLOP/s \(v4 has 2 TensorCores per chip\)"},
        others_pass=STEP_TARGETS_OTHERS,
    ),
    Mutant(
        "step_swapped",
        "returns (compute, DMA)",
        {STEP_RETURN: "return flops * passes / peak, dma_bytes / hbm"},
        {"step_time_model": r"returned \(compute, DMA\)"},
        others_pass=STEP_TARGETS_OTHERS,
    ),
    Mutant(
        "step_one_pass",
        "the bf16 peak for float32 too: forgets the 6 MXU passes of a HIGHEST dot",
        {STEP_RETURN: "return dma_bytes / hbm, flops / peak"},
        {"step_time_model": r"6 times too short for float32, as with one MXU pass"},
        others_pass=STEP_TARGETS_OTHERS,
    ),
    Mutant(
        "step_four_bytes",
        "4 bytes per element whatever the dtype",
        {"itemsize = np.dtype(dtype).itemsize\n    dma_bytes": "itemsize = 4\n    dma_bytes"},
        {"step_time_model": r"gives DMA .* bfloat16, 65,536 bytes"},
        others_pass=STEP_TARGETS_OTHERS,
    ),
    # ----------------------------------------------------------------------------------------------- fed block
    Mutant(
        "fed_block_last_starved",
        "returns the last block that still starves the MXU",
        {"        if mxu >= dma:\n            return b\n": "        if mxu >= dma:\n            return b - 128\n"},
        {"fed_block": "still waits"},
    ),
    Mutant(
        "fed_block_powers_of_two",
        "searches 128, 256, 512, ... only",
        {
            "    for b in range(128, 8192 + 1, 128):\n        dma, mxu = step_times(b, b, b, dtype, chip)": "    for b in (128, 256, 512, 1024, 2048, 4096, 8192):\n        dma, mxu = step_times(b, b, b, dtype, chip)"
        },
        {"fed_block": "is fed there, but so is"},
    ),
    # -------------------------------------------------------------------------------------------- legal or not
    Mutant(
        "verdict_bf16_needs_16_rows",
        "the old rule that bf16 blocks need 16 rows: an 8-row bf16 block 'does not "
        "compile' (it does: it only fills half a native tile)",
        {'    if not whole_tiles and itemsize == 1:': '    if not whole_tiles and itemsize <= 2:'},
        {
            "legal_or_not": r"\(256, 256\), \(8, 128\), bfloat16\) returned 'compile', but it is 'note': .*fill only "
            r"part of the native \(16, 128\) tile"
        },
    ),
    Mutant(
        "verdict_ignores_native_tile",
        "only the (8, 128) lowering rule: an 8-row bf16 block is 'legal' with no "
        "note, an int8 block of 16 rows 'legal' too",
        {"    whole_tiles = bm == m or bm % tile_rows == 0": "    whole_tiles = True"},
        {"legal_or_not": r"bfloat16\) returned 'legal', but it is 'note': .*native \(16, 128\) tile"},
    ),
    Mutant(
        "verdict_int8_only_a_note",
        "an int8 block of 16 rows is only a note, as for bf16 (Mosaic refuses it)",
        {'    if not whole_tiles and itemsize == 1:': '    if not whole_tiles and itemsize == 0:'},
        {"legal_or_not": r"int8\) returned 'note', but it is 'compile': .*int8 array is tiled \(32, 128\)"},
    ),
    Mutant(
        "verdict_equal_dims_ignored",
        "forgets that a block dim equal to the array's passes: (8, 100) over (8, 100) 'does not lower'",
        {"if not (bn == n or bn % 128 == 0) or not (bm == m or bm % 8 == 0):": "if bn % 128 or bm % 8:"},
        {"legal_or_not": r"\(8, 100\), \(8, 100\), float32\) returned 'lowering', but it is 'legal'"},
    ),
    # --------------------------------------------------------------------------------------------- working set
    Mutant(
        "ws_no_output_block",
        "forgets the output block C",
        {WS_BLOCKS: "blocks = (bm * bk + bk * bn) * np.dtype(dtype).itemsize * buffers"},
        {"working_set": r"bytes, expected .*out\[0\] "},
        others_pass=("step_time_model", "budget_line", "block_choice"),
    ),
    Mutant(
        "ws_ignores_buffers",
        "one copy of each block whatever `buffers` says",
        {WS_BLOCKS: "blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize * 2"},
        {"working_set": r"buffers=1.* bytes, expected"},
        others_pass=("block_choice",),
    ),
    Mutant(
        "ws_scratch_buffered",
        "double-buffers the scratch accumulator (it is not pipelined)",
        {WS_SCRATCH: "scratch = bm * bn * np.dtype(np.float32).itemsize * buffers if acc_scratch else 0"},
        {"working_set": "not pipelined: one copy"},
        others_pass=("budget_line", "block_choice"),
    ),
    Mutant(
        "ws_scratch_in_dtype",
        "the accumulator in the input dtype instead of float32",
        {WS_SCRATCH: "scratch = bm * bn * np.dtype(dtype).itemsize if acc_scratch else 0"},
        {"working_set": r"scratch\[0\] "},
        others_pass=("budget_line", "block_choice"),
    ),
    Mutant(
        "ws_four_bytes",
        "4 bytes per element whatever the dtype",
        {WS_BLOCKS: "blocks = (bm * bk + bk * bn + bm * bn) * 4 * buffers"},
        {"working_set": "bytes, expected"},
        others_pass=("budget_line", "block_choice"),
    ),  # both graded on reference working sets
    # --------------------------------------------------------------------------------------------- budget line
    Mutant(
        "budget_physical_vmem",
        "compares with the physical VMEM instead of the default scoped limit",
        {
            "limit = chip_named(chip).default_scoped_vmem_bytes\n    fits": "limit = chip_named(chip).vmem_bytes\n    fits"
        },
        {"budget_line": "over the scoped limit"},
        others_pass=("working_set",),
    ),
    Mutant(
        "budget_one_step_over",
        "returns the first block over the line",
        {"return max(fits) if fits else None": "return max(fits) + 128 if fits else None"},
        {"budget_line": "exceeds the .* scoped VMEM limit"},
    ),
    Mutant(
        "budget_ignores_buffers",
        "always double-buffered, whatever `buffers` says",
        {BUDGET_FITS: BUDGET_FITS.replace("dtype, buffers)", "dtype)")},
        {"budget_line": "fits .* but so does"},
    ),
    # -------------------------------------------------------------------------------------------- block choice
    Mutant(
        "choice_chapter_blocks",
        "keeps the chapter's 128 blocks",
        {CHOICE_RETURN: "    return (128, 128, 128)"},
        {"block_choice": "starves the MXU"},
    ),
    Mutant(
        "choice_no_headroom",
        "fills the default scoped limit to the brim",
        {CHOICE_LIMIT: "limit = chip_named(chip).default_scoped_vmem_bytes"},
        {"block_choice": "above 75% of it, which leaves the compiler no headroom"},
    ),
    Mutant(
        "choice_not_dividing",
        "block sizes that do not divide the matrix",
        {CHOICE_RETURN: "    return (best[1][0] + 128, best[1][1], best[1][2])"},
        {"block_choice": "does not divide m="},
    ),
    Mutant(
        "choice_illegal_lanes",
        "a minor block dim of 64 lanes",
        {CHOICE_RETURN: "    return (best[1][0], 64, best[1][2])"},
        {"block_choice": "not a legal BlockSpec .* minor \\(lane\\) dim"},
    ),
    Mutant(
        "choice_square_only",
        "takes bm from n's divisors: right whenever m == n, as in every visible case",
        {"    for bm in sizes(m):": "    for bm in sizes(n):"},
        {"block_choice": r"choose_blocks\(2048, 8192, 1024, .* does not divide m=2048"},
    ),
    Mutant(
        "choice_whole_matrix",
        "one block for the whole matrix",
        {CHOICE_RETURN: "    return (m, n, k)"},
        {"block_choice": "does not fit: working set .* physical VMEM"},
    ),
]


def _tagged(signature: str, why: str) -> dict[str, str]:
    """A comment on the def line: names the function in the edits, so its graded test runs on the alternative."""
    return {signature: f"{signature}  # alternative: {why}"}


ALTERNATIVES = [
    Alternative(
        "pipeline_off_named",
        "pl.Buffered(buffer_count=1) and named index maps",
        {
            **_tagged("def matmul_pipeline_off(a, b, bm=128, bn=128, bk=128):", "named index maps"),
            "one_buffer = pl.Buffered(1)": "one_buffer = pl.Buffered(buffer_count=1)\n"
            "    def a_index_map(row_block, col_block, k_block):\n        return row_block, k_block\n"
            "    def b_index_map(row_block, col_block, k_block):\n        return k_block, col_block",
            A_SPEC: "pl.BlockSpec((bm, bk), a_index_map, pipeline_mode=one_buffer),",
            B_SPEC: "pl.BlockSpec((bk, bn), b_index_map, pipeline_mode=one_buffer),",
        },
    ),
    Alternative(
        "step_times_via_intensity",
        "FLOPs and bytes first, returned as a list",
        {
            **_tagged("def step_times(bm, bn, bk, dtype, chip):", "a list"),
            STEP_RETURN: "work = flops * passes\n    return [dma_bytes / hbm, work / peak]",
        },
    ),
    Alternative(
        "fed_block_while",
        "a while loop over b",
        {
            **_tagged("def smallest_fed_block(dtype, chip):", "a while loop"),
            "    for b in range(128, 8192 + 1, 128):\n        dma, mxu = step_times(b, b, b, dtype, chip)\n"
            "        if mxu >= dma:\n            return b\n": "    b = 128\n    while b <= 8192:\n        dma, mxu = step_times(b, b, b, dtype, chip)\n"
            "        if not mxu < dma:\n            return b\n        b += 128\n",
        },
    ),
    Alternative(
        "vmem_working_set_per_operand",
        "a sum over the three operands",
        {
            **_tagged("def vmem_working_set(bm, bn, bk, dtype, buffers=2, acc_scratch=False):", "a sum"),
            WS_BLOCKS: "itemsize = np.dtype(dtype).itemsize\n"
            "    blocks = sum(r * c * itemsize * buffers for r, c in ((bm, bk), (bk, bn), (bm, bn)))",
        },
    ),
    Alternative(
        "largest_square_block_downward",
        "searches down from 8192",
        {
            **_tagged("def largest_square_block(dtype, chip, buffers=2):", "downward"),
            BUDGET_FITS + "\n    return max(fits) if fits else None": "for b in range(8192, 0, -128):\n"
            "        if vmem_working_set(b, b, b, dtype, buffers) <= limit:\n            return b\n"
            "    return None",
        },
    ),
    Alternative(
        "choose_blocks_first_found",
        "largest blocks first, the first that works",
        {
            **_tagged("def choose_blocks(m, n, k, dtype, chip):", "first found"),
            "    sizes = lambda dim: [s for s in range(128, dim + 1, 128) if dim % s == 0]": "    sizes = lambda dim: [s for s in range(dim, 127, -128) if dim % s == 0]",
            "                if best is None or steps < best[0]:": "                if best is None:",
        },
    ),
]
