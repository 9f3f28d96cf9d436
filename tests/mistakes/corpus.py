"""Thirty-odd typical mistakes across LAB·1.1-1.4, each an edit to the solution notebook's code."""
from tests.mistakes import Mistake

ADD = "o_ref[...] = x_ref[...] + y_ref[...]"
T_OUT = "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),"
T_IN = "in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],"
MM_GRID = "grid=(m // bm, n // bn, k // bk),\n        in_specs=[\n            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),\n            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),\n        ],\n        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),\n        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),\n        interpret=INTERP,"
MM_ACC = MM_GRID.replace("interpret=INTERP,", "scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],\n        interpret=INTERP,")
SM = "    e = jnp.exp(x - m)\n"
LN_OUT = "o_ref[...] = (y * g_ref[...] + b_ref[...]).astype(o_ref.dtype)"

LAB_1_1 = "lab-1.1-first-kernels"
LAB_1_2 = "lab-1.2-tiled-matmul"
LAB_1_3 = "lab-1.3-fused-softmax-layernorm"
LAB_1_4 = "lab-1.4-pipelining-profile"

MISTAKES: dict[str, list[Mistake]] = {
    LAB_1_1: [
        Mistake("add_rebinds_o_ref", "o_ref = x + y rebinds the name, stores nothing",
                {ADD: "o_ref = x_ref[...] + y_ref[...]"}, r"never stores.*`o_ref = value` only rebinds",
                ("add_f32", "add_bf16")),
        Mistake("add_ref_plus_ref", "adds the refs, not their values", {ADD: "o_ref[...] = x_ref + y_ref"},
                r"a ref is used as an array", ("add_f32", "add_bf16")),
        Mistake("add_subtracts", "the wrong algebra", {ADD: "o_ref[...] = x_ref[...] - y_ref[...]"},
                r"differ by more than", ("add_f32", "add_bf16")),
        Mistake("add_f32_store_into_bf16", "computes in f32 and stores f32 into a bf16 output",
                {ADD: "o_ref[...] = x_ref[...].astype(jnp.float32) + y_ref[...].astype(jnp.float32)"},
                r"stores a float32 value into a bfloat16 ref", ("add_bf16",), ("add_f32",)),
        Mistake("add_out_f32", "out_shape hard-coded to float32",
                {"out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x, y)":
                 "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),\n        interpret=INTERP,\n    )(x, y)"},
                r"stores a bfloat16 value into a float32 ref", ("add_bf16",), ("add_f32",)),
        Mistake("add_stub", "the kernel left as the stub",
                {ADD: "raise NotImplementedError"}, r"still the stub", ("add_f32", "add_bf16")),
        Mistake("add_no_interpret", "forgets interpret=INTERP (graded the same way: both pass)",
                {"        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x, y)":
                 "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n    )(x, y)"},
                r"", (), ("add_f32", "add_bf16")),
        Mistake("transpose_ref_T", ".T on the ref", {"o_ref[...] = x_ref[...].T": "o_ref[...] = x_ref.T"},
                r"a ref is used as an array", ("transpose_values",)),
        Mistake("transpose_identity_out_map", "out index map (i, j)",
                {T_OUT: "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (i, j)),"},
                r"differ by more than|block", ("transpose_schedule", "transpose_values")),
        Mistake("transpose_out_block_not_swapped", "out block (bm, bn) instead of (bn, bm)",
                {T_OUT: "out_specs=pl.BlockSpec((bm, bn), lambda i, j: (j, i)),"},
                r"Out-of-bounds|outside the array|stores a \(256, 128\) value into a \(128, 256\) block|BlockSpec",
                ("transpose_schedule", "transpose_values")),
        Mistake("transpose_index_map_arity", "index map with one parameter on a 2-D grid",
                {T_IN: "in_specs=[pl.BlockSpec((bm, bn), lambda i: (i, 0))],"},
                r"index map <lambda> takes 1 argument, but the grid has 2 axes",
                ("transpose_schedule", "transpose_values")),
        Mistake("transpose_old_blockspec_order", "BlockSpec(index_map, block_shape) from an old tutorial",
                {T_IN: "in_specs=[pl.BlockSpec(lambda i, j: (i, j), (bm, bn))],"},
                r"pre-2024 argument order", ("transpose_schedule", "transpose_values")),
        Mistake("transpose_half_grid", "a grid that covers half the columns",
                {"grid=(m // bm, n // bn),": "grid=(m // bm, max(1, n // bn // 2)),"},
                r"NaN.*never written", ("transpose_schedule", "transpose_values")),
        Mistake("transpose_grid_true_division", "grid with / instead of //",
                {"grid=(m // bm, n // bn),": "grid=(m / bm, n / bn),"},
                r"holds a non-integer.*\n.*\n.*//", ("transpose_schedule", "transpose_values")),
        Mistake("transpose_out_of_bounds", "index map one block past the edge",
                {T_IN: "in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j + 1))],"},
                r"lies outside the array", ("transpose_schedule", "transpose_values")),
    ],
    LAB_1_2: [
        Mistake("matmul_k_outermost", "K outermost: the output block is revisited",
                {MM_GRID: MM_GRID.replace("grid=(m // bm, n // bn, k // bk)", "grid=(k // bk, m // bm, n // bn)")
                 .replace("lambda i, j, kk:", "lambda kk, i, j:")},
                r"revisited output block", ("matmul_schedule", "matmul_f32")),
        Mistake("matmul_no_init", "never zeroes the output block before accumulating",
                {"    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] +=":
                 "    o_ref[...] +="},
                r"NaN", ("matmul_f32",), ("matmul_schedule",)),
        Mistake("matmul_no_accumulate", "= instead of += keeps only the last K step",
                {"    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)":
                 "    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)"},
                r"differ by more than", ("matmul_f32",), ("matmul_schedule",)),
        Mistake("matmul_b_block_wrong", "B's block (bn, bk) instead of (bk, bn)",
                {MM_GRID: MM_GRID.replace("pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))",
                                          "pl.BlockSpec((bn, bk), lambda i, j, kk: (kk, j))")},
                r"inner sizes differ|BlockSpec|outside the array", ("matmul_schedule", "matmul_f32")),
        Mistake("matmul_program_id_3", "pl.program_id(3) on a 3-D grid",
                {"    k = pl.program_id(2)\n    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] +=":
                 "    k = pl.program_id(3)\n    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] +="},
                r"pl.program_id\(3\)", ("matmul_f32",)),
        Mistake("matmul_python_if", "a Python if on program_id",
                {"    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] +=":
                 "    if k == 0:\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] +="},
                r"Python `if`", ("matmul_f32",)),
        Mistake("matmul_acc_cast_outside", "matmul_acc computes in f32 and casts to bf16 outside the kernel",
                {"def matmul_acc(a, b, bm=128, bn=128, bk=128):\n":
                 "def matmul_acc(a, b, bm=128, bn=128, bk=128):\n"
                 "    return _acc_f32(a.astype(jnp.float32), b.astype(jnp.float32), bm, bn, bk).astype(a.dtype)\n\n"
                 "def _acc_f32(a, b, bm=128, bn=128, bk=128):\n"},
                r"computes outside its kernel \(convert_element_type\)", ("matmul_acc_schedule",)),
        Mistake("matmul_acc_no_scratch", "forgets scratch_shapes: the kernel has 4 refs, 3 are passed",
                {"matmul_acc_kernel,\n        " + MM_ACC: "matmul_acc_kernel,\n        " + MM_GRID},
                r"one ref per input, per output and per scratch", ("matmul_acc_schedule", "matmul_acc_f32_accumulator")),
        Mistake("matmul_gelu_every_step", "GELU on every K step, on partial sums",
                {"    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():\n        o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)":
                 "    o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)"},
                r"", (), ("matmul_gelu_values", "matmul_gelu_fused")),
    ],
    LAB_1_3: [
        Mistake("softmax_no_max", "no max subtraction: exp overflows",
                {SM: "    e = jnp.exp(x)\n"}, r"the kernel computed these NaNs", ("softmax_stability",),
                ("softmax_fused",)),
        Mistake("softmax_sum_axis0", "the sum over the rows (axis 0), not the features",
                {"o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True))": "o_ref[...] = (e / jnp.sum(e, axis=0, keepdims=True))"},
                r"differ by more than", ("softmax_values",), ("softmax_fused",)),
        Mistake("softmax_short_grid", "a grid one block short",
                {"grid=(n // rows_per_block,),\n        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],":
                 "grid=(n // rows_per_block - 1,),\n        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],"},
                r"NaN.*never written", ("softmax_values", "softmax_fused")),
        Mistake("softmax_no_cast_back", "stores f32 into a bf16 output",
                {"o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)":
                 "o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)"},
                r"stores a float32 value into a bfloat16 ref", ("softmax_values",)),
        Mistake("layernorm_g_b_swapped", "scale by b and shift by g",
                {LN_OUT: "o_ref[...] = (y * b_ref[...] + g_ref[...]).astype(o_ref.dtype)"},
                r"this is what g and b swapped gives", ("layernorm_values",)),
        Mistake("layernorm_axis0", "statistics over the rows of the block, not the features",
                {"    mu = jnp.mean(x, axis=-1, keepdims=True)\n    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)":
                 "    mu = jnp.mean(x, axis=0, keepdims=True)\n    var = jnp.mean((x - mu) ** 2, axis=0, keepdims=True)"},
                r"differ by more than", ("layernorm_values",)),
        Mistake("layernorm_in_specs_short", "one BlockSpec for three inputs",
                {"            pl.BlockSpec((1, d), lambda i: (0, 0)),\n            pl.BlockSpec((1, d), lambda i: (0, 0)),\n        ],":
                 "        ],"},
                r"in_specs has 1 BlockSpec\(s\) but the pallas_call is given 3 inputs", ("layernorm_values",)),
    ],
    LAB_1_4: [
        Mistake("step_times_counts_c", "counts the C block among a steady step's copies (it stays in VMEM)",
                {"    dma_bytes = (bm * bk + bk * bn) * itemsize": "    dma_bytes = (bm * bk + bk * bn + bm * bn) * itemsize"},
                r"bytes per steady step.*differ by more than", ("step_time_model",),
                ("fed_block", "block_choice")),   # graded on reference step times: one bug, one test
        Mistake("step_times_no_factor_2", "one FLOP per term, not a multiply and an add",
                {"    flops = 2 * bm * bn * bk": "    flops = bm * bn * bk"},
                r"FLOPs per step.*differ by more than", ("step_time_model",)),
        Mistake("working_set_no_buffers", "forgets that each block is held `buffers` times",
                {"    blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize * buffers":
                 "    blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize"},
                r"working set matmul .*differ by more than", ("working_set",)),
        Mistake("working_set_forgets_c", "counts A and B but not the output block C",
                {"    blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize * buffers":
                 "    blocks = (bm * bk + bk * bn) * np.dtype(dtype).itemsize * buffers"},
                r"working set matmul .*differ by more than", ("working_set",),
                ("budget_line", "block_choice")),   # both graded on reference working sets
        Mistake("fed_block_last_starved", "returns the last block that still starves the MXU",
                {"        if mxu >= dma:\n            return b\n": "        if mxu >= dma:\n            return b - 128\n"},
                r"smallest_fed_block\(bfloat16, 'v5e'\) is \d+; at \d+ a step copies .* the MXU still waits", ("fed_block",)),
        Mistake("budget_line_physical_vmem", "compares with the physical VMEM, not the default scoped limit",
                {"    limit = chip_named(chip).default_scoped_vmem_bytes\n    fits":
                 "    limit = chip_named(chip).vmem_bytes\n    fits"},
                r"largest_square_block\(float32, 'v5e', buffers=2\) is \d+; at \d+: over the scoped limit",
                ("budget_line",)),
        Mistake("choose_blocks_no_headroom", "fills the default scoped VMEM limit to the brim",
                {"    limit = VMEM_HEADROOM * chip_named(chip).default_scoped_vmem_bytes":
                 "    limit = chip_named(chip).default_scoped_vmem_bytes"},
                r"choose_blocks\(.*above 75% of it, which leaves the compiler no headroom", ("block_choice",)),
        Mistake("pipeline_off_out_double_buffered", "pl.Buffered(1) on A and B but not on C",
                {"        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j), pipeline_mode=one_buffer),":
                 "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),"},
                r"buffers per BlockSpec.*differ by more than", ("pipeline_off",)),
    ],
}
