"""Fifty-odd typical mistakes across LAB·1.1-1.4, each an edit to the solution notebook's code, written as a student
writes them (issue 20's eight that once passed every visible check and lost points, its wrong diagnoses, and more)."""

from tests.mistakes import Mistake
from tests.mistakes.matmul_styles import REFERENCE, STYLES

ADD = "o_ref[...] = x_ref[...] + y_ref[...]"
T_OUT = "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),"
T_IN = "in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],"
MM_GRID = "grid=(m // bm, n // bn, k // bk),\n        in_specs=[\n            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),\n            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),\n        ],\n        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),\n        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),\n        interpret=INTERP,"
MM_ACC = MM_GRID.replace(
    "interpret=INTERP,", "scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],\n        interpret=INTERP,"
)
SM = "    e = jnp.exp(x - m)\n"
LN_OUT = "o_ref[...] = (y * g_ref[...] + b_ref[...]).astype(o_ref.dtype)"
LN_Y = "    y = (x - mu) * jax.lax.rsqrt(var + 1e-6)\n"
T_GRID = "grid=(m // bm, n // bn),"
T_SHAPE = "out_shape=jax.ShapeDtypeStruct((n, m), x.dtype),"
MM_INIT = "    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] +="
# LAB·1.2's matmul picks the dot's precision from the blocks' dtype (HIGHEST for f32) between the init and the +=
MM_PREC = "    precision = jax.lax.Precision.HIGHEST if a_ref.dtype == jnp.float32 else None\n"
MM12_INIT = MM_INIT.replace("    o_ref[...] +=", MM_PREC + "    o_ref[...] +=")
ACC_SEM = 'compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),\n        '
MM_ACC_SEM = MM_ACC.replace("interpret=INTERP,", ACC_SEM + "interpret=INTERP,")  # matmul_acc's call (not matmul_gelu's)
ACC_INIT = "    @pl.when(k == 0)\n    def _init():\n        acc_ref[...] = jnp.zeros_like(acc_ref)\n    acc_ref[...] +="
GELU_STORE = "        o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)"
ACC_SCRATCH = "scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],"

CS_MASK = (
    "    x = jnp.where(row < n, x_ref[...].astype(jnp.float32), 0.0)      # rows past n: whatever the buffer held\n"
)
CS_INIT = "    @pl.when(i == 0)\n    def _():\n        o_ref[...] = jnp.zeros_like(o_ref)\n"

RM_MAX = "jnp.max(x_ref[...], axis=1, keepdims=True)"
RM_INIT = "        o_ref[...] = jnp.full_like(o_ref, -jnp.inf)\n"
RM_WHEN = "    @pl.when(pl.program_id(1) == 0)\n    def _init():\n"  # rowmax's own start (rowmax_dense's reads j == 0)
RMD_FOLD = "        acc = jnp.maximum(acc, x[:, c * 128:(c + 1) * 128])\n"
RMD_REDUCE = "        o_ref[...] = jnp.broadcast_to(jnp.max(acc, axis=1, keepdims=True), o_ref.shape)"

SS_MOVED = "    moved = 2 * n * d * itemsize          # x read once, the output written once\n"

LAB_1_1 = "lab-1.1-first-kernels"
LAB_1_2 = "lab-1.2-tiled-matmul"
LAB_1_3 = "lab-1.3-fused-softmax-layernorm"
LAB_1_4 = "lab-1.4-pipelining-profile"
LAB_1_6 = "lab-1.6-copies-online-softmax"

CP_STARTS = "    copy_x.start()\n    copy_y.start()  # both copies in flight at once\n    copy_x.wait()\n"
LSE_SUM = "l_ref[...] = l_ref[...] * jnp.exp(m_old - m_new) + jnp.sum(jnp.exp(x - m_new), axis=1, keepdims=True)"
LSE_OUT = "o_ref[...] = m_ref[...] + jnp.log(l_ref[...])"

MISTAKES: dict[str, list[Mistake]] = {
    LAB_1_1: [
        Mistake(
            "add_rebinds_o_ref",
            "o_ref = x + y rebinds the name, stores nothing",
            {ADD: "o_ref = x_ref[...] + y_ref[...]"},
            r"never stores.*`o_ref = value` only rebinds",
            ("add_f32", "add_bf16"),
        ),
        Mistake(
            "add_ref_plus_ref",
            "adds the refs, not their values",
            {ADD: "o_ref[...] = x_ref + y_ref"},
            r"a ref is used as an array",
            ("add_f32", "add_bf16"),
        ),
        Mistake(
            "add_subtracts",
            "the wrong algebra",
            {ADD: "o_ref[...] = x_ref[...] - y_ref[...]"},
            r"the output is x - y: the kernel subtracts",
            ("add_f32", "add_bf16"),
            graded=r"the output is x - y: the kernel subtracts",
        ),
        Mistake(
            "add_f32_store_into_bf16",
            "computes in f32 and stores f32 into a bf16 output",
            {ADD: "o_ref[...] = x_ref[...].astype(jnp.float32) + y_ref[...].astype(jnp.float32)"},
            r"stores a float32 value into a bfloat16 ref",
            ("add_bf16",),
            ("add_f32",),
        ),
        Mistake(
            "add_out_f32",
            "out_shape hard-coded to float32",
            {
                "out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x, y)": "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),\n        interpret=INTERP,\n    )(x, y)"
            },
            r"stores a bfloat16 value into a float32 ref",
            ("add_bf16",),
            ("add_f32",),
        ),
        Mistake(
            "add_stub",
            "the kernel left as the stub",
            {ADD: "raise NotImplementedError"},
            r"still the stub",
            ("add_f32", "add_bf16"),
        ),
        Mistake(
            "add_no_interpret",
            "forgets interpret=INTERP (graded the same way: both pass)",
            {
                "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x, y)": "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n    )(x, y)"
            },
            r"",
            (),
            ("add_f32", "add_bf16"),
        ),
        Mistake(
            "transpose_ref_T",
            ".T on the ref",
            {"o_ref[...] = x_ref[...].T": "o_ref[...] = x_ref.T"},
            r"a ref is used as an array",
            ("transpose_values",),
            ("transpose_schedule",),
        ),
        Mistake(
            "transpose_identity_out_map",
            "out index map (i, j)",
            {T_OUT: "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (i, j)),"},
            r"differ by more than|block",
            ("transpose_schedule", "transpose_values"),
            graded=r"(?s)^(?!.*no usual mistake).*(out index map must swap|belongs at block \(j, i\))",
        ),
        Mistake(
            "transpose_out_block_not_swapped",
            "out block (bm, bn) instead of (bn, bm)",
            {T_OUT: "out_specs=pl.BlockSpec((bm, bn), lambda i, j: (j, i)),"},
            r"Out-of-bounds|outside the array|stores a \(256, 128\) value into a \(128, 256\) block|BlockSpec",
            ("transpose_schedule", "transpose_values"),
        ),
        Mistake(
            "transpose_index_map_arity",
            "index map with one parameter on a 2-D grid",
            {T_IN: "in_specs=[pl.BlockSpec((bm, bn), lambda i: (i, 0))],"},
            r"index map <lambda> takes 1 argument, but the grid has 2 axes",
            ("transpose_schedule", "transpose_values"),
        ),
        Mistake(
            "transpose_old_blockspec_order",
            "BlockSpec(index_map, block_shape) from an old tutorial",
            {T_IN: "in_specs=[pl.BlockSpec(lambda i, j: (i, j), (bm, bn))],"},
            r"pre-2024 argument order",
            ("transpose_schedule", "transpose_values"),
        ),
        Mistake(
            "transpose_half_grid",
            "a grid that covers half the columns",
            {"grid=(m // bm, n // bn),": "grid=(m // bm, max(1, n // bn // 2)),"},
            r"NaN.*never written|grid of transpose.*is \(2, 1\), expected \(2, 2\)",
            ("transpose_schedule", "transpose_values"),
        ),
        Mistake(
            "transpose_grid_true_division",
            "grid with / instead of //",
            {"grid=(m // bm, n // bn),": "grid=(m / bm, n / bn),"},
            r"holds a non-integer.*\n.*\n.*//",
            ("transpose_schedule", "transpose_values"),
        ),
        Mistake(
            "transpose_out_of_bounds",
            "index map one block past the edge",
            {T_IN: "in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j + 1))],"},
            r"lies outside the array|input index map sends grid point \(0, 0\) to block \(0, 1\)",
            ("transpose_schedule", "transpose_values"),
        ),
        # issue 20: these passed every visible check (2 × 2 grids, f32 only) and lost points in the grade
        Mistake(
            "transpose_grid_axes_swapped",
            "grid=(n // bn, m // bm): the grid's axes swapped",
            {T_GRID: "grid=(n // bn, m // bm),"},
            r"grid of transpose.*axes are swapped",
            ("transpose_schedule", "transpose_values"),
            graded=r"axes are swapped|outside the array|NaN",
        ),
        Mistake(
            "transpose_both_index_maps_swapped",
            "reads block (j, i) and writes block (i, j)",
            {
                T_IN: "in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (j, i))],",
                T_OUT: "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (i, j)),",
            },
            r"both index maps are swapped",
            ("transpose_schedule", "transpose_values"),
            graded=r"both index maps are swapped|outside the array|NaN",
        ),
        Mistake(
            "transpose_out_f32",
            "out_shape hard-coded to float32",
            {T_SHAPE: "out_shape=jax.ShapeDtypeStruct((n, m), jnp.float32),"},
            r"stores a bfloat16 value into a float32 ref.*\n.*\n.*out_shape",
            ("transpose_values",),
            ("transpose_schedule",),
            graded=r"bfloat16 value into a float32 ref|dtype float32, expected bfloat16",
        ),
        Mistake(
            "transpose_swapped_shape_only",
            "out_shape (m, n): fine for square arrays only",
            {T_SHAPE: "out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),"},
            r"transpose.*(outside the array|shape)",
            ("transpose_values",),
        ),
        # issue 27: named in the course's words, not "no usual mistake gives these values"
        Mistake(
            "transpose_reshape",
            "reshapes the block to the transposed shape instead of transposing it",
            {"o_ref[...] = x_ref[...].T": "o_ref[...] = x_ref[...].reshape(o_ref.shape)"},
            r"(?s)^(?!.*no usual mistake).*reshape.*x_ref\[\.\.\.\]\.T",
            ("transpose_values",),
            ("transpose_schedule",),
            graded=r"reshape.*x_ref\[\.\.\.\]\.T",
        ),
        # issue 37: each named in the lab's words, in the notebook and in the grade
        Mistake(
            "add_accumulates",
            "o_ref[...] += in add: nothing to accumulate over, not matmul's K-step fix",
            {ADD: "o_ref[...] += x_ref[...] + y_ref[...]"},
            r"(?s)^(?!.*program_id).*reads o_ref \(\+=\) before anything is stored.*nothing to accumulate over",
            ("add_f32", "add_bf16"),
            graded=r"(?s)^(?!.*program_id).*nothing to accumulate over.*=, not \+=",
        ),
        Mistake(
            "transpose_missing_T",
            "stores the block as read: no .T (the grade's non-square blocks fail to trace)",
            {"o_ref[...] = x_ref[...].T": "o_ref[...] = x_ref[...]"},
            r"stored as they were read.*o_ref\[\.\.\.\] = x_ref\[\.\.\.\]\.T",
            ("transpose_values",),
            ("transpose_schedule",),  # issue 44: the schedule is right; the body's failure costs the values alone
            graded=r"(?s)^(?!.*usual bug is a BlockSpec).*(transpose never taken|stored as they were read).*"
            r"x_ref\[\.\.\.\]\.T",
        ),
        Mistake(
            "transpose_grid_other_order",
            "grid (n // bn, m // bm), steps (j, i): right values, the other schedule",
            {
                T_GRID: "grid=(n // bn, m // bm),",
                T_IN: "in_specs=[pl.BlockSpec((bm, bn), lambda j, i: (i, j))],",
                T_OUT: "out_specs=pl.BlockSpec((bn, bm), lambda j, i: (j, i)),",
            },
            r"axes are in the other order",
            ("transpose_schedule",),
            ("transpose_values",),
            graded=r"axes are in the other order",
        ),
        Mistake(
            "add_bf16_out_f32_everywhere",
            "add computes and returns float32 whatever the inputs",
            {
                "out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x, y)": "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),\n        interpret=INTERP,\n    )(x.astype(jnp.float32), y.astype(jnp.float32))"
            },
            r"dtype float32, expected bfloat16|computes outside its kernel",
            ("add_bf16",),
            ("add_f32",),
        ),
    ],
    LAB_1_2: [
        Mistake(
            "matmul_gelu_exact",
            "jax.nn.gelu(approximate=False): interpret mode runs it, the TPU compiler cannot lower its erfc",
            {"jax.nn.gelu(acc_ref[...])": "jax.nn.gelu(acc_ref[...], approximate=False)"},
            r"TPU compiler refuses the kernel: jax\.nn\.gelu\(x, approximate=False\) computes erfc.*\n"
            r"  at your cell, line \d+ \(in matmul_gelu\): return pl\.pallas_call\(\n.*approximate=True",
            ("matmul_gelu_values",),
            ("matmul_gelu_fused",),
            graded=r"computes erfc.*\n  at your cell, line \d+ \(in matmul_gelu\): return pl\.pallas_call\(",
        ),
        Mistake(
            "matmul_k_outermost",
            "K outermost: the output block is revisited",
            {
                MM_GRID: MM_GRID.replace(
                    "grid=(m // bm, n // bn, k // bk)", "grid=(k // bk, m // bm, n // bn)"
                ).replace("lambda i, j, kk:", "lambda kk, i, j:")
            },
            r"revisited output block|K must be the last \(innermost\) grid axis",
            ("matmul_schedule", "matmul_f32"),
        ),
        Mistake(
            "matmul_no_init",
            "never zeroes the output block before accumulating",
            {MM12_INIT: MM_PREC + "    o_ref[...] +="},
            r"NaN",
            ("matmul_f32",),
            ("matmul_schedule",),
        ),
        Mistake(
            "matmul_no_accumulate",
            "= instead of += keeps only the last K step",
            {
                "    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision).astype(o_ref.dtype)": "    o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision).astype(o_ref.dtype)"
            },
            r"last K step's product alone.*accumulate with \+=",
            ("matmul_f32",),
            ("matmul_schedule",),
            graded=r"last K step's product alone.*accumulate with \+=",
        ),
        Mistake(
            "matmul_b_block_wrong",
            "B's block (bn, bk) instead of (bk, bn)",
            {
                MM_GRID: MM_GRID.replace(
                    "pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))",
                    "pl.BlockSpec((bn, bk), lambda i, j, kk: (kk, j))",
                )
            },
            r"inner sizes differ|BlockSpec|outside the array",
            ("matmul_schedule", "matmul_f32"),
        ),
        Mistake(
            "matmul_program_id_3",
            "pl.program_id(3) on a 3-D grid",
            {"    k = pl.program_id(2)\n" + MM12_INIT: "    k = pl.program_id(3)\n" + MM12_INIT},
            r"pl.program_id\(3\)",
            ("matmul_f32",),
        ),
        Mistake(
            "matmul_python_if",
            "a Python if on program_id",
            {MM12_INIT: "    if k == 0:\n        o_ref[...] = jnp.zeros_like(o_ref)\n" + MM_PREC + "    o_ref[...] +="},
            r"Python `if`",
            ("matmul_f32",),
        ),
        Mistake(
            "matmul_acc_cast_outside",
            "matmul_acc computes in f32 and casts to bf16 outside the kernel",
            {
                "def matmul_acc(a, b, bm=128, bn=128, bk=128):\n": "def matmul_acc(a, b, bm=128, bn=128, bk=128):\n"
                "    return _acc_f32(a.astype(jnp.float32), b.astype(jnp.float32), bm, bn, bk).astype(a.dtype)\n\n"
                "def _acc_f32(a, b, bm=128, bn=128, bk=128):\n"
            },
            r"computes outside its kernel \(convert_element_type\)",
            ("matmul_acc_schedule",),
        ),
        Mistake(
            "matmul_acc_no_scratch",
            "forgets scratch_shapes: the kernel has 4 refs, 3 are passed",
            {
                "matmul_acc_kernel,\n        " + MM_ACC_SEM: "matmul_acc_kernel,\n        "
                + MM_GRID.replace("interpret=INTERP,", ACC_SEM + "interpret=INTERP,")
            },
            r"one ref per input, per output and per scratch",
            ("matmul_acc_schedule", "matmul_acc_f32_accumulator"),
        ),
        Mistake(
            "matmul_gelu_every_step",
            "GELU on every K step, on partial sums",
            {
                "    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():\n        o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)": "    o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)"
            },
            r"",
            (),
            ("matmul_gelu_values", "matmul_gelu_fused"),
        ),
        # issue 20: the accumulator never zeroed is not "never stored"
        Mistake(
            "matmul_no_init_said_right",
            "no zeroing at k == 0: read as NaN, named as such, not as a missing store",
            {MM12_INIT: MM_PREC + "    o_ref[...] +="},
            r"reads o_ref \(\+=\) before anything is stored there.*never zeroed",
            ("matmul_f32",),
            ("matmul_schedule",),
            graded=r"reads o_ref \(\+=\) before anything is stored.*never zeroed",
        ),
        Mistake(
            "matmul_acc_scratch_never_zeroed",
            "matmul_acc's scratch accumulated into without zeroing",
            {
                ACC_INIT.replace(
                    "acc_ref[...] +=",
                    "acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():",
                ): "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():"
            },
            r"reads the scratch accumulator .* never zeroed",
            ("matmul_acc_f32_accumulator",),
            ("matmul_acc_schedule",),
            graded=r"scratch accumulator .* never zeroed",
        ),
        Mistake(
            "matmul_acc_bf16_scratch",
            "a bf16 scratch accumulator: scratch_shapes in the inputs' dtype",
            {
                "matmul_acc_kernel,\n        " + MM_ACC_SEM: "matmul_acc_kernel,\n        "
                + MM_ACC_SEM.replace(ACC_SCRATCH, "scratch_shapes=[pltpu.VMEM((bm, bn), a.dtype)],")
            },
            r"an accumulator needs float32.*f32 scratch, scratch_shapes=\[pltpu.VMEM\(\(bm, bn\), jnp.float32\)\]",
            ("matmul_acc_f32_accumulator", "matmul_acc_schedule"),
            graded=r"f32 scratch, scratch_shapes=\[pltpu.VMEM\(\(bm, bn\), jnp.float32\)\]",
        ),
        Mistake(
            "matmul_acc_bf16_scratch_cast",
            "a bf16 scratch, each step's f32 dot cast to it before adding",
            {
                "matmul_acc_kernel,\n        " + MM_ACC_SEM: "matmul_acc_kernel,\n        "
                + MM_ACC_SEM.replace(ACC_SCRATCH, "scratch_shapes=[pltpu.VMEM((bm, bn), jnp.bfloat16)],"),
                "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():": "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype)).astype(acc_ref.dtype)\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():",
            },
            r"bfloat16 scratch .*use an f32 scratch, scratch_shapes=\[pltpu.VMEM\(\(bm, bn\), jnp.float32\)\]",
            ("matmul_acc_f32_accumulator",),
            ("matmul_acc_schedule",),
            graded=r"bfloat16 scratch .*use an f32 scratch",
        ),
        Mistake(
            "matmul_acc_into_o_ref_bf16",
            "matmul_acc accumulates into the bf16 o_ref, no scratch, f32 dot",
            {
                ACC_INIT.replace(
                    "acc_ref[...] +=",
                    "acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():\n        o_ref[...] = acc_ref[...].astype(o_ref.dtype)",
                ): "    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)"
            },
            r"stores a float32 value into a bfloat16 ref.*\n.*\n.*f32 scratch",
            ("matmul_acc_f32_accumulator",),
            graded=r"float32 value into a bfloat16 ref",
        ),
        Mistake(
            "matmul_acc_bf16_dot",
            "the dot without preferred_element_type: bf16 partial products",
            {
                "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():": "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...])\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():"
            },
            r"preferred_element_type=jnp.float32",
            ("matmul_acc_f32_accumulator",),
            ("matmul_acc_schedule",),
        ),
        # issue 20: GELU applied outside the kernel passed every visible check
        Mistake(
            "matmul_gelu_outside_kernel",
            "the kernel stores a @ b; jax.nn.gelu on the pallas_call's result",
            {
                GELU_STORE: "        o_ref[...] = acc_ref[...].astype(o_ref.dtype)",
                "    return pl.pallas_call(\n        matmul_gelu_kernel,\n        "
                + MM_ACC
                + "\n    )(a, b)": "    out = pl.pallas_call(\n        matmul_gelu_kernel,\n        "
                + MM_ACC
                + "\n    )(a, b)\n"
                "    return jax.nn.gelu(out)",
            },
            r"computes outside its kernel \(.*tanh.*\).*inside the kernel",
            ("matmul_gelu_fused", "matmul_gelu_values"),
            graded=r"computes outside its kernel",
        ),
        Mistake(
            "matmul_gelu_no_gelu",
            "stores the accumulator, forgets the GELU",
            {GELU_STORE: "        o_ref[...] = acc_ref[...].astype(o_ref.dtype)"},
            r"computes no GELU",
            ("matmul_gelu_fused", "matmul_gelu_values"),
            graded=r"(?s)^(?!.*no usual mistake).*computes no GELU",
        ),
        # issue 27: these got "no usual mistake gives these values"; each now names its cause
        Mistake(
            "matmul_init_on_j_axis",
            "zeroes the accumulator when pl.program_id(1) == 0 (j), not the K axis",
            {MM12_INIT: MM12_INIT.replace("    @pl.when(k == 0)", "    @pl.when(pl.program_id(1) == 0)")},
            r"blocks with j = 0 hold the last K step's product alone.*pl.program_id\(1\) == 0 \(the j axis\)",
            ("matmul_f32",),
            ("matmul_schedule",),
            graded=r"zeroed when pl.program_id\(1\) == 0 \(the j axis\)",
        ),
        Mistake(
            "matmul_init_on_i_axis",
            "zeroes the accumulator when pl.program_id(0) == 0 (i), not the K axis",
            {MM12_INIT: MM12_INIT.replace("    @pl.when(k == 0)", "    @pl.when(pl.program_id(0) == 0)")},
            r"blocks with i = 0 hold the last K step's product alone.*pl.program_id\(0\) == 0 \(the i axis\)",
            ("matmul_f32",),
            ("matmul_schedule",),
            graded=r"zeroed when pl.program_id\(0\) == 0 \(the i axis\)",
        ),
        Mistake(
            "matmul_acc_stored_on_first_step",
            "matmul_acc stores its accumulator on the first K step, not the last",
            {"    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():": "    @pl.when(k == 0)\n    def _store():"},
            r"first K step's product alone.*store on the last K step",
            ("matmul_acc_f32_accumulator",),
            ("matmul_acc_schedule",),
            graded=r"first K step's product alone",
        ),
        Mistake(
            "matmul_gelu_on_inputs",
            "GELU applied to a before the dot, not to the product",
            {
                """    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():\n        o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)""": """    acc_ref[...] += jnp.dot(jax.nn.gelu(a_ref[...]), b_ref[...], preferred_element_type=jnp.float32)\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():\n        o_ref[...] = acc_ref[...].astype(o_ref.dtype)"""
            },
            r"GELU is applied to the input \(a\) before the product",
            ("matmul_gelu_values",),
            ("matmul_gelu_fused",),
            graded=r"GELU is applied to the input \(a\)",
        ),
        Mistake(
            "matmul_gelu_wrong_constant",
            "the tanh GELU written out with 0.44715 for 0.044715",
            {
                "jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)": "(0.5 * acc_ref[...] * (1 + jnp.tanh(jnp.sqrt(2 / jnp.pi) * (acc_ref[...] + 0.44715 * acc_ref[...] ** 3)))).astype(o_ref.dtype)"
            },
            r"GELU of the right product written with 0.44715 in place of 0.044715",
            ("matmul_gelu_values",),
            ("matmul_gelu_fused",),
            graded=r"written with 0.44715 in place of 0.044715",
        ),
        # only the TPU compiler refuses it (needs libtpu, as CI has): a K block split with pl.ds into half-lane slices
        Mistake(
            "matmul_k_split_half_lanes",
            "splits the K block in two 64-wide lane slices with a fori_loop",
            {
                "    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision).astype(o_ref.dtype)": "    half = a_ref.shape[1] // 2\n"
                "    def body(h, acc):\n"
                "        return acc + jnp.dot(a_ref[:, pl.ds(h * half, half)], b_ref[pl.ds(h * half, half), :], preferred_element_type=jnp.float32, precision=precision)\n"
                "    o_ref[...] += jax.lax.fori_loop(0, 2, body, jnp.zeros(o_ref.shape, jnp.float32)).astype(o_ref.dtype)"
            },
            r"does not compile for v5e( and v6e)? \(the real TPU compiler",
            ("matmul_f32",),
            ("matmul_schedule",),
            graded=r"does not compile for v5e",
        ),
        Mistake(
            "matmul_grid_m_n_swapped",
            "grid=(n // bn, m // bm, k // bk)",
            {MM_GRID: MM_GRID.replace("grid=(m // bm, n // bn, k // bk)", "grid=(n // bn, m // bm, k // bk)")},
            r"grid of matmul.*expected",
            ("matmul_schedule", "matmul_f32"),
        ),
        # issue 44: the lab runs matmul on bf16 too, where the TPU compiler refuses HIGHEST ("Bad lhs type"): the
        # check and the grade trace (and compile) the bf16 call as well as the f32 one
        Mistake(
            "matmul_highest_on_every_dot",
            "precision=HIGHEST on every dot, bf16 blocks too",
            {MM_PREC: "    precision = jax.lax.Precision.HIGHEST\n"},
            r"precision HIGHEST on bfloat16 blocks.*compiler refuses",
            ("matmul_precision",),
            ("matmul_schedule", "matmul_f32"),
            graded=r"precision HIGHEST on bfloat16 blocks.*compiler refuses",
        ),
        # issue 44: rowmax's mistakes the lab names, each with its cause, check and grade alike
        # (the kernel body fails to trace: rowmax_schedule reads the schedule off the call with a no-op body)
        Mistake(
            "rowmax_max_axis0",
            "the block's max over axis 0 (its columns), not axis 1",
            {RM_MAX: "jnp.max(x_ref[...], axis=0, keepdims=True)"},
            r"(?s)^(?!.*usual bug is a BlockSpec).*reduction runs over the wrong axis",
            ("rowmax_values",),
            ("rowmax_schedule",),
            graded=r"(?s)^(?!.*usual bug is a BlockSpec).*reduction runs over the wrong axis",
        ),
        Mistake(
            "rowmax_init_on_row_axis",
            "the -inf start keyed on program_id(0), the row axis",
            {
                "    @pl.when(pl.program_id(1) == 0)\n    def _init():\n        o_ref[...] = jnp.full_like(o_ref, -jnp.inf)": "    @pl.when(pl.program_id(0) == 0)\n    def _init():\n        o_ref[...] = jnp.full_like(o_ref, -jnp.inf)"
            },
            r"keyed on the row axis, pl\.program_id\(0\)",
            ("rowmax_values",),
            ("rowmax_schedule",),
            graded=r"keyed on the row axis, pl\.program_id\(0\)",
        ),
        Mistake(
            "rowmax_fold_never_stored",
            "the fold computed and never stored",
            {"    o_ref[...] = jnp.maximum(o_ref[...], " + RM_MAX: "    m = jnp.maximum(o_ref[...], " + RM_MAX},
            r"fold is computed but never stored",
            ("rowmax_values",),
            ("rowmax_schedule",),
            graded=r"fold is computed but never stored",
        ),
        Mistake(
            "rowmax_max_no_axis",
            "jnp.max with no axis: the whole block's max",
            {RM_MAX: "jnp.max(x_ref[...])"},
            r"jnp\.max with no axis",
            ("rowmax_values",),
            ("rowmax_schedule",),
            graded=r"jnp\.max with no axis",
        ),
        # issue 43: rowmax_dense, the layout lesson: the slow pattern kept (right values), and the lanes never reduced
        Mistake(
            "rowmax_dense_max_every_step",
            "the row max taken across lanes on every step, folded into all lanes, as rowmax did",
            {RMD_FOLD: "        acc = jnp.maximum(acc, jnp.max(x[:, c * 128:(c + 1) * 128], axis=1, keepdims=True))\n"},
            r"reduces across lanes \(reduce_max over the last axis\) on every column step",
            ("rowmax_dense_schedule",),
            ("rowmax_dense_values",),
            graded=r"reduces across lanes \(reduce_max over the last axis\) on every column step",
        ),
        Mistake(
            "rowmax_dense_stores_the_lanes",
            "the last step stores the (bm, 128) running max as it is, never reduced across lanes",
            {RMD_REDUCE: "        o_ref[...] = acc"},
            r"never reduced across lanes",
            ("rowmax_dense_values",),
            ("rowmax_dense_schedule",),
            graded=r"never reduced across lanes",
        ),
        Mistake(
            "matmul_acc_semantics_two_entries",
            "two dimension_semantics entries for the 3-axis grid",
            {
                'dimension_semantics=("parallel", "parallel", "arbitrary")),\n        interpret=INTERP,\n    )(a, b)': 'dimension_semantics=("parallel", "parallel")),\n        interpret=INTERP,\n    )(a, b)'
            },
            r"matmul_acc\(a, b, .*bfloat16: dimension_semantics has 2 entries \('parallel', 'parallel'\) for a 3-axis grid "
            r"\(\d+, \d+, \d+\): one entry per grid axis",
            ("matmul_acc_semantics",),
            graded=r"^matmul_acc_semantics: matmul_acc\(a, b, .*bfloat16: dimension_semantics has 2 entries \('parallel', "
            r"'parallel'\) for a 3-axis grid \(\d+, \d+, \d+\): one entry per grid axis",
        ),  # one message, one home (rules.semantics_length_problem): the check's, and the judge's refusal
        Mistake(
            "matmul_k_axis_parallel",
            "matmul's K axis marked \"parallel\"",
            {
                MM_GRID: MM_GRID.replace(
                    "interpret=INTERP,",
                    'compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel")),\n        interpret=INTERP,',
                )
            },
            r"marks its last grid axis .parallel.",
            ("matmul_schedule", "matmul_f32"),
            ("matmul_precision",),
            graded=r"marks its last grid axis .parallel.",
        ),
        Mistake(
            "matmul_gelu_on_every_k_step",
            "the GELU applied to the accumulator on every K step (partial sums)",
            {
                "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():": "    acc_ref[...] = jax.nn.gelu(acc_ref[...] + jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32))\n    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():"
            },
            r"the GELU acts on partial sums",
            ("matmul_gelu_values",),
            graded=r"the GELU acts on partial sums",
        ),
        # issue 44: every mistake LAB·1.2's hints and warnings name, each with its cause, check and grade alike
        Mistake(
            "rowmax_out_map_keeps_j",
            "rowmax's output index map (i, j): it does not ignore the reduced axis (the lab's point 1)",
            {
                "out_specs=pl.BlockSpec((bm, 1), lambda i, j: (i, 0)),": "out_specs=pl.BlockSpec((bm, 1), lambda i, j: (i, j)),"
            },
            r"the output index map sends grid step .* so the map ignores j",
            ("rowmax_schedule", "rowmax_values"),
            graded=r"(output index map sends grid step|index map of output o_ref asks for block)",
        ),
        Mistake(
            "rowmax_init_zero",
            "the running max starts at 0 (the lab: wrong for every row whose values are all negative)",
            {RM_WHEN + RM_INIT: RM_WHEN + "        o_ref[...] = jnp.zeros_like(o_ref)\n"},
            r"the running max starts at 0",
            ("rowmax_values",),
            ("rowmax_schedule",),
            graded=r"the running max starts at 0",
        ),
        Mistake(
            "rowmax_no_init",
            "no start at all (the lab: a missing start shows at once, NaN under TPU interpret mode)",
            {RM_WHEN + RM_INIT: ""},
            r"before anything is stored there.*-inf for a max",
            ("rowmax_values",),
            ("rowmax_schedule",),
            graded=r"before anything is stored there.*-inf for a max",
        ),
        Mistake(
            "rowmax_grid_axes_swapped",
            "the reduced axis first: grid (n // bn, m // bm) (the lab's point 2: it is the last grid axis)",
            {
                "grid=(m // bm, n // bn),\n        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],\n        out_specs=pl.BlockSpec((bm, 1), lambda i, j: (i, 0)),": "grid=(n // bn, m // bm),\n        in_specs=[pl.BlockSpec((bm, bn), lambda j, i: (i, j))],\n        out_specs=pl.BlockSpec((bm, 1), lambda j, i: (i, 0)),"
            },
            r"must be the last \(innermost\) grid axis",
            ("rowmax_schedule", "rowmax_values"),
            graded=r"(must be the last \(innermost\) grid axis|ignores a grid axis that is not the last one)",
        ),
        Mistake(
            "matmul_f32_default_precision",
            "no precision=HIGHEST on the f32 dot (Hint 4): right under interpret mode, bf16-accurate on a TPU",
            {MM_PREC: "    precision = None\n"},
            r"asks for the default precision.*precision=jax\.lax\.Precision\.HIGHEST",
            ("matmul_precision",),
            ("matmul_schedule", "matmul_f32"),
            graded=r"asks for the default precision.*precision=jax\.lax\.Precision\.HIGHEST",
        ),
        Mistake(
            "matmul_acc_no_semantics",
            "matmul_acc without compiler_params (Hint 4; the lab: a kernel that marks none uses one core)",
            {ACC_SCRATCH + "\n        " + ACC_SEM: ACC_SCRATCH + "\n        "},
            r"sets no dimension_semantics",
            ("matmul_acc_semantics",),
            ("matmul_acc_schedule", "matmul_acc_f32_accumulator"),
            graded=r"sets no dimension_semantics",
        ),
        Mistake(
            "matmul_acc_k_parallel",
            "matmul_acc's K axis marked \"parallel\" (the lab: every K step adds into the same accumulator)",
            {ACC_SEM: ACC_SEM.replace('"arbitrary"', '"parallel"')},
            r"marks its last grid axis .parallel.",
            ("matmul_acc_schedule", "matmul_acc_semantics", "matmul_acc_f32_accumulator"),
            graded=r"marks its last grid axis .parallel.",
        ),
    ],
    LAB_1_3: [
        Mistake(
            "softmax_no_max",
            "no max subtraction: exp overflows",
            {SM: "    e = jnp.exp(x)\n"},
            r"exp overflows float32.*subtract each row's max",
            ("softmax_stability",),
            ("softmax_fused",),
        ),
        Mistake(
            "softmax_sum_axis0",
            "the sum over the rows (axis 0), not the features",
            {
                "o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True))": "o_ref[...] = (e / jnp.sum(e, axis=0, keepdims=True))"
            },
            r"differ by more than",
            ("softmax_values",),
            ("softmax_fused",),
        ),
        # issue 43 (F7): the rows left "arbitrary", right values: what GATE 01 times would run on one core of a megacore
        Mistake(
            "softmax_rows_not_parallel",
            "no dimension_semantics: the row axis stays \"arbitrary\"",
            {
                '        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),   # rows are independent\n'
                "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x)": "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x)"
            },
            r'sets no dimension_semantics.*mark the row axis "parallel"',
            ("softmax_fused",),
            ("softmax_values",),
            graded=r'sets no dimension_semantics.*mark the row axis "parallel"',
        ),
        Mistake(
            "softmax_short_grid",
            "a grid one block short",
            {
                "grid=(n // rows_per_block,),\n        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],": "grid=(n // rows_per_block - 1,),\n        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],"
            },
            r"NaN.*never written|grid of softmax.*expected \(8,\)",
            ("softmax_values", "softmax_fused"),
        ),
        Mistake(
            "softmax_no_cast_back",
            "stores f32 into a bf16 output",
            {
                "o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)": "o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)"
            },
            r"stores a float32 value into a bfloat16 ref",
            ("softmax_values",),
        ),
        Mistake(
            "layernorm_g_b_swapped",
            "scale by b and shift by g",
            {LN_OUT: "o_ref[...] = (y * b_ref[...] + g_ref[...]).astype(o_ref.dtype)"},
            r"g and b are swapped: the output is y \* b \+ g",
            ("layernorm_values",),
        ),
        Mistake(
            "layernorm_axis0",
            "statistics over the rows of the block, not the features",
            {
                "    mu = jnp.mean(x, axis=-1, keepdims=True)\n    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)": "    mu = jnp.mean(x, axis=0, keepdims=True)\n    var = jnp.mean((x - mu) ** 2, axis=0, keepdims=True)"
            },
            r"differ by more than",
            ("layernorm_values",),
        ),
        Mistake(
            "layernorm_in_specs_short",
            "one BlockSpec for three inputs",
            {
                "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n            pl.BlockSpec((1, d), lambda i: (0, 0)),\n        ],": "        ],"
            },
            r"in_specs has 1 BlockSpec\(s\) but the pallas_call is given 3 inputs",
            ("layernorm_values",),
        ),
        # issue 20: eps, and where it goes
        Mistake(
            "layernorm_eps_1e5",
            "eps 1e-5 (another library's default): passed the visible tol 1e-4",
            {LN_Y: "    y = (x - mu) * jax.lax.rsqrt(var + 1e-5)\n"},
            r"eps = 1e-5.*eps is 1e-6",
            ("layernorm_values", "layernorm_edge"),
            ("layernorm_fused",),
            graded=r"eps is 1e-6",
        ),
        Mistake(
            "layernorm_eps_outside_sqrt",
            "(x - mu) / (jnp.sqrt(var) + 1e-6)",
            {LN_Y: "    y = (x - mu) / (jnp.sqrt(var) + 1e-6)\n"},
            r"eps added to the standard deviation|variance is about eps",
            ("layernorm_edge",),
            ("layernorm_values", "layernorm_fused"),
            graded=r"standard deviation|variance is about eps",
        ),
        Mistake(
            "layernorm_no_eps",
            "rsqrt(var): no eps at all (told softmax's max advice before)",
            {LN_Y: "    y = (x - mu) * jax.lax.rsqrt(var)\n"},
            r"(?s)^(?!.*row's max).*constant rows .*NaN.*eps",
            ("layernorm_edge",),
            ("layernorm_values", "layernorm_fused"),
            graded=r"(?s)^(?!.*row's max).*constant rows .*NaN.*eps",
        ),
        Mistake(
            "layernorm_g_b_swapped_said_by_the_grade",
            "y * b + g: the grade names it too, not an axis",
            {LN_OUT: "o_ref[...] = (y * b_ref[...] + g_ref[...]).astype(o_ref.dtype)"},
            r"g and b are swapped",
            ("layernorm_values",),
            graded=r"g and b are swapped",
        ),
        Mistake(
            "layernorm_one_pass_variance",
            "var = mean(x**2) - mean(x)**2: cancels at mean 1e3",
            {
                "    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)\n": "    var = jnp.mean(x * x, axis=-1, keepdims=True) - mu * mu\n"
            },
            r"cancels catastrophically",
            ("layernorm_edge",),
            graded=r"cancels catastrophically",
        ),
        Mistake(
            "layernorm_params_sliced",
            "g and b in (1, 128) blocks walked along the grid",
            {
                "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n            pl.BlockSpec((1, d), lambda i: (0, 0)),\n": "            pl.BlockSpec((1, 128), lambda i: (0, 0)),\n            pl.BlockSpec((1, 128), lambda i: (0, 0)),\n"
            },
            r"g is carved into \(1, 128\) blocks|incompatible shapes for broadcasting: \(8, \d+\), \(1, 128\)",
            ("layernorm_fused", "layernorm_values"),
        ),
        Mistake(
            "softmax_no_max_said_right",
            "exp(x) without the max: named as overflow, no eps advice",
            {SM: "    e = jnp.exp(x)\n"},
            r"(?s)^(?!.*eps).*subtract each row's max",
            ("softmax_stability",),
            ("softmax_values", "softmax_fused"),
            graded=r"subtract each row's max",
        ),
        # issue 27: the axis hint only where the axis is wrong; the other causes named
        Mistake(
            "softmax_divides_by_max",
            "e / max(e) instead of e / sum(e)",
            {
                "o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True))": "o_ref[...] = (e / jnp.max(e, axis=-1, keepdims=True))"
            },
            r"(?s)^(?!.*axis=0).*divided by the row's max",
            ("softmax_values", "softmax_stability"),
            ("softmax_fused",),
            graded=r"(?s)^(?!.*axis=0).*divided by the row's max",
        ),
        Mistake(
            "softmax_log_softmax",
            "returns the log-softmax",
            {
                "o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True))": "o_ref[...] = (x - m - jnp.log(jnp.sum(e, axis=-1, keepdims=True)))"
            },
            r"(?s)^(?!.*axis=0).*the output is the log-softmax",
            ("softmax_values", "softmax_stability"),
            ("softmax_fused",),
            graded=r"(?s)^(?!.*axis=0).*log-softmax",
        ),
        Mistake(
            "softmax_sum_axis0_named",
            "the max and the sum over the block's rows: the axis, named",
            {
                """    m = jnp.max(x, axis=-1, keepdims=True)\n    e = jnp.exp(x - m)\n    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)""": """    m = jnp.max(x, axis=0, keepdims=True)\n    e = jnp.exp(x - m)\n    o_ref[...] = (e / jnp.sum(e, axis=0, keepdims=True)).astype(o_ref.dtype)"""
            },
            r"each column of every \d+-row block sums to 1.*axis=-1",
            ("softmax_values",),
            ("softmax_fused",),
            graded=r"each column of every \d+-row block sums to 1",
        ),
        Mistake(
            "layernorm_variance_summed",
            "the variance summed over the features, not averaged",
            {
                "    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)\n": "    var = jnp.sum((x - mu) ** 2, axis=-1, keepdims=True)\n"
            },
            r"(?s)^(?!.*axis=0).*variance is the sum of the squared deviations",
            ("layernorm_values", "layernorm_edge"),
            ("layernorm_fused",),
            graded=r"(?s)^(?!.*axis=0).*variance is the sum",
        ),
        Mistake(
            "layernorm_shift_before_scale",
            "(y + b) * g instead of y * g + b",
            {LN_OUT: "o_ref[...] = ((y + b_ref[...]) * g_ref[...]).astype(o_ref.dtype)"},
            r"(?s)^(?!.*axis=0).*shifts before it scales",
            ("layernorm_values",),
            ("layernorm_fused",),
            graded=r"(?s)^(?!.*axis=0).*shifts before it scales",
        ),
        Mistake(
            "layernorm_stats_bf16",
            "mean, variance and rsqrt in the input's dtype (bf16), no cast to f32",
            {"    x = x_ref[...].astype(jnp.float32)\n    mu = jnp.mean": "    x = x_ref[...]\n    mu = jnp.mean"},
            r"bf16 roundings.*computed in bfloat16.*astype\(jnp.float32\)",
            ("layernorm_values",),
            ("layernorm_fused",),
            graded=r"computed in bfloat16",
        ),
        Mistake(
            "layernorm_axis0_named",
            "mean and variance over the block's rows: the axis, named",
            {
                "    mu = jnp.mean(x, axis=-1, keepdims=True)\n    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)": "    mu = jnp.mean(x, axis=0, keepdims=True)\n    var = jnp.mean((x - mu) ** 2, axis=0, keepdims=True)"
            },
            r"reduce over the rows of each \d+-row block \(axis=0\)",
            ("layernorm_values",),
            ("layernorm_fused",),
            graded=r"reduce over the rows of each \d+-row block",
        ),
        # issue 37: the TPU idiom the f32 tolerance does not admit, named (the lab says so)
        Mistake(
            "softmax_approx_reciprocal",
            "e * pl.reciprocal(sum, approx=True)",
            {
                "o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True))": "o_ref[...] = (e * pl.reciprocal(jnp.sum(e, axis=-1, keepdims=True), approx=True))"
            },
            r"(?s)^(?!.*no usual mistake).*pl\.reciprocal\(s, approx=True\)",
            ("softmax_values", "softmax_stability"),
            ("softmax_fused",),
            graded=r"(?s)^(?!.*no usual mistake).*pl\.reciprocal\(s, approx=True\)",
        ),
        Mistake(
            "softmax_feature_axis_split",
            "(rows_per_block, 128) blocks on a 2-D grid: each piece normalised alone",
            {
                "grid=(n // rows_per_block,),\n        in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))],\n"
                "        out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
                '        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),': "grid=(n // rows_per_block, d // 128),\n        in_specs=[pl.BlockSpec((rows_per_block, 128), lambda i, j: (i, j))],\n"
                "        out_specs=pl.BlockSpec((rows_per_block, 128), lambda i, j: (i, j)),\n"
                '        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),'
            },
            r"feature axis is split into blocks of 128",
            ("softmax_values", "softmax_fused", "softmax_stability"),
            graded=r"feature axis is split into blocks of 128",
        ),
        # only the TPU compiler refuses it (needs libtpu): bf16 rows one at a time, pl.ds(r, 1), 16 to a tile
        Mistake(
            "softmax_one_row_at_a_time",
            "a fori_loop over the block's rows, one pl.ds(r, 1) row each",
            {
                """    x = x_ref[...].astype(jnp.float32)\n    m = jnp.max(x, axis=-1, keepdims=True)\n    e = jnp.exp(x - m)\n    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)""": "    def row(r, carry):\n"
                "        x = x_ref[pl.ds(r, 1), :].astype(jnp.float32)\n"
                "        e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))\n"
                "        o_ref[pl.ds(r, 1), :] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)\n"
                "        return carry\n"
                "    jax.lax.fori_loop(0, x_ref.shape[0], row, 0)"
            },
            r"bfloat16 does not compile for v5e( and v6e)? \(the real TPU compiler",
            ("softmax_values",),
            ("softmax_fused", "softmax_stability"),
            graded=r"does not compile for v5e",
        ),
        # issue 44: the ragged mask is a select (the lab's rule), read off the traced kernel: under interpret mode XLA's
        # CPU simplifier turns x * (row < n) into a select, so the values alone passed it
        Mistake(
            "column_sums_mask_by_multiply",
            "x * (row < n): a product, not a select",
            {CS_MASK: "    x = x_ref[...].astype(jnp.float32) * (row < n)\n"},
            r"masks by multiplying by a comparison.*NaN × 0 is NaN",
            ("column_sums_ragged",),
            graded=r"masks by multiplying by a comparison.*NaN × 0 is NaN",
        ),
        Mistake(
            "column_sums_mask_by_multiply_astype",
            "x * (row < n).astype(jnp.float32)",
            {CS_MASK: "    x = x_ref[...].astype(jnp.float32) * (row < n).astype(jnp.float32)\n"},
            r"masks by multiplying by a comparison",
            ("column_sums_ragged",),
            graded=r"masks by multiplying by a comparison",
        ),
        Mistake(
            "column_sums_mask_neg_inf",
            "rows past n set to -inf (a max's identity), not 0",
            {CS_MASK: "    x = jnp.where(row < n, x_ref[...].astype(jnp.float32), -jnp.inf)\n"},
            r"-inf.*identity of a max.*0\.0",
            ("column_sums_ragged",),
            graded=r"-inf.*identity of a max.*0\.0",
        ),
        Mistake(
            "column_sums_no_init",
            "the running sum never zeroed (every block whole in the first case)",
            {CS_INIT: ""},
            r"(?s)^(?!.*past the end).*before anything is stored",
            ("column_sums_ragged",),
            graded=r"(?s)^(?!.*past the end).*before anything is stored",
        ),
        Mistake(
            "softmax_rows_per_block_ignored",
            "always 8-row blocks whatever rows_per_block says",
            {
                "    n, d = x.shape\n    return pl.pallas_call(\n        softmax_kernel,": "    n, d = x.shape\n    rows_per_block = 8\n    return pl.pallas_call(\n        softmax_kernel,"
            },
            r"the grid of softmax",
            ("softmax_fused",),
            ("softmax_values", "softmax_stability"),
        ),
        # issue 44: softmax_seconds' named mistakes
        Mistake(
            "softmax_seconds_unfused_traffic",
            "the unfused chain's traffic counted (five reads, three writes)",
            {SS_MOVED: "    moved = 8 * n * d * itemsize\n"},
            r"unfused chain's traffic",
            ("softmax_time_model",),
            graded=r"unfused chain's traffic",
        ),
        Mistake(
            "softmax_seconds_bits",
            "bits for bytes: itemsize * 8",
            {
                "    itemsize = np.dtype(dtype).itemsize\n    moved": "    itemsize = np.dtype(dtype).itemsize * 8\n    moved"
            },
            r"it counts bits, not bytes",
            ("softmax_time_model",),
            graded=r"it counts bits, not bytes",
        ),
        # issue 43 (F1, F2): one JAX device's bandwidth, the steps term, and the rows a block should hold
        Mistake(
            "softmax_seconds_chip_bandwidth",
            "the chip's bandwidth, where a v7x JAX device is one TensorCore",
            {
                "    bandwidth = chip_named(chip).device_hbm_bytes_per_s(parallel=False)": "    bandwidth = chip_named(chip).hbm_bytes_per_s"
            },
            r"with v7x's bandwidth per chip",
            ("softmax_time_model",),
            ("rows_per_block_choice",),
            graded=r"with v7x's bandwidth per chip .* pltpu.get_tpu_info\(\)",
        ),
        Mistake(
            "softmax_seconds_no_steps",
            "bytes over bandwidth, the steps' fixed cost left out",
            {
                "    return moved / bandwidth + (n // rows_per_block) * step_overhead()[0]": "    return moved / bandwidth"
            },
            r"the bytes alone: it leaves out the fixed cost",
            ("softmax_time_model",),
            ("rows_per_block_choice",),
            graded=r"the bytes alone: it leaves out the fixed cost",
        ),
        Mistake(
            "rows_per_block_keeps_8",
            "keeps the default 8 rows",
            {
                "    rows = 32 // itemsize                 # the sublane tile: 8 rows of float32, 16 of bfloat16\n    while rows < n and 2 * rows * d * itemsize < 2**20:\n        rows *= 2\n": "    rows = 8\n"
            },
            r"is 8: a step reads and writes .* under 1 MiB",
            ("rows_per_block_choice",),
            ("softmax_time_model",),
            graded=r"is 8: a step reads and writes .* under 1 MiB",
        ),
        Mistake(
            "rows_per_block_input_only",
            "counts the block read but not the block written, and aims at 4 MiB",
            {
                "    while rows < n and 2 * rows * d * itemsize < 2**20:\n": "    while rows < n and rows * d * itemsize < 2**22:\n"
            },
            r"over 50% of v5e's 16 MiB default scoped VMEM limit",
            ("rows_per_block_choice",),
            ("softmax_time_model",),
            graded=r"over 50% of .* default scoped VMEM limit",
        ),
        # issue 44: every mistake LAB·1.3's hints and warnings name, each with its cause, check and grade alike
        Mistake(
            "softmax_no_keepdims",
            "the row max without keepdims=True (Hint 2: so it broadcasts back over the row)",
            {"    m = jnp.max(x, axis=-1, keepdims=True)\n": "    m = jnp.max(x, axis=-1)\n"},
            r"without keepdims=True",
            ("softmax_values", "softmax_stability"),
            ("softmax_fused",),
            graded=r"without keepdims=True",
        ),
        Mistake(
            "softmax_bf16_arithmetic",
            "no cast to float32 first (Hint 3): exp, sum and division in bfloat16",
            {
                "    x = x_ref[...].astype(jnp.float32)\n    m = jnp.max(x, axis=-1, keepdims=True)": "    x = x_ref[...]\n    m = jnp.max(x, axis=-1, keepdims=True)"
            },
            r"the arithmetic runs in bfloat16",
            ("softmax_values",),
            ("softmax_fused", "softmax_stability"),
            graded=r"the arithmetic runs in bfloat16",
        ),
        Mistake(
            "softmax_seconds_itemsize_4",
            "4 bytes per element whatever the dtype (Hint 1: itemsize is 2 for bfloat16)",
            {"    itemsize = np.dtype(dtype).itemsize\n    moved": "    itemsize = 4\n    moved"},
            r"4 bytes per element, but bfloat16 has 2",
            ("softmax_time_model",),
            graded=r"4 bytes per element.*bfloat16 has 2",
        ),
        Mistake(
            "softmax_seconds_read_only",
            "x read counted, the output written not (Hint 2: read plus written)",
            {SS_MOVED: "    moved = n * d * itemsize\n"},
            r"counts x read .* but not the output written",
            ("softmax_time_model",),
            graded=r"counts x read .* but not the output written",
        ),
        Mistake(
            "softmax_seconds_flops",
            "bytes over FLOP/s (Hint 2: not the FLOP/s)",
            {
                "    bandwidth = chip_named(chip).device_hbm_bytes_per_s(parallel=False)": "    bandwidth = chip_named(chip).bf16_flops_per_s"
            },
            r"it divides by .*FLOP/s",
            ("softmax_time_model",),
            graded=r"it divides by .*FLOP/s",
        ),
        Mistake(
            "column_sums_grid_floor",
            "grid (n // rows_per_block,) (Hint 1: pl.cdiv): the partial block dropped",
            {"grid=(pl.cdiv(n, rows_per_block),),": "grid=(n // rows_per_block,),"},
            r"drops the last, partial block",
            ("column_sums_ragged",),
            graded=r"drops the last, partial block",
        ),
        Mistake(
            "column_sums_no_mask",
            "no mask: the padding rows of the partial block summed in (the lab: the kernel must mask it)",
            {CS_MASK: "    x = x_ref[...].astype(jnp.float32)\n"},
            r"the sum adds them in\. Mask them before the sum",
            ("column_sums_ragged",),
            graded=r"the sum adds them in\. Mask them before the sum",
        ),
        Mistake(
            "column_sums_summed_in_bf16",
            "no cast to float32 before the sum (the lab: compute in float32 even when x arrives as bfloat16)",
            {CS_MASK: "    x = jnp.where(row < n, x_ref[...], 0.0)\n"},
            r"the block is summed in bfloat16",
            ("column_sums_ragged",),
            graded=r"the block is summed in bfloat16",
        ),
        Mistake(
            "column_sums_mask_le",
            "row <= n: the mask keeps row n (the lab: the rows at or past n)",
            {CS_MASK: CS_MASK.replace("row < n", "row <= n")},
            r"compares with <= \(or >=\), so it keeps row n",
            ("column_sums_ragged",),
            graded=r"compares with <= \(or >=\), so it keeps row n",
        ),
    ],
    LAB_1_4: [
        Mistake(
            "step_times_counts_c",
            "counts the C block among a steady step's copies (it stays in VMEM)",
            {
                "    dma_bytes = (bm * bk + bk * bn) * itemsize": "    dma_bytes = (bm * bk + bk * bn + bm * bn) * itemsize"
            },
            r"step_times\(128, 128, 128, bfloat16, 'v5e'\) gives DMA .* C stays in VMEM",
            ("step_time_model",),
            ("fed_block", "block_choice"),
        ),  # graded on reference step times: one bug, one test
        Mistake(
            "step_times_no_factor_2",
            "one FLOP per term, not a multiply and an add",
            {"    flops = 2 * bm * bn * bk": "    flops = bm * bn * bk"},
            r"gives MXU .* one dot, 2·bm·bn·bk = 4,194,304 FLOPs",
            ("step_time_model",),
        ),
        Mistake(
            "working_set_no_buffers",
            "forgets that each block is held `buffers` times",
            {
                "    blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize * buffers": "    blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize"
            },
            r"vmem_working_set\(128, 128, 128, float32, buffers=2, acc_scratch=False\) is 196,608 bytes, expected 393,216",
            ("working_set",),
        ),
        Mistake(
            "working_set_forgets_c",
            "counts A and B but not the output block C",
            {
                "    blocks = (bm * bk + bk * bn + bm * bn) * np.dtype(dtype).itemsize * buffers": "    blocks = (bm * bk + bk * bn) * np.dtype(dtype).itemsize * buffers"
            },
            r"vmem_working_set\(128, 128, 128, float32, buffers=2, acc_scratch=False\) is 262,144 bytes, expected 393,216",
            ("working_set",),
            ("budget_line", "block_choice"),
        ),  # both graded on reference working sets
        Mistake(
            "fed_block_last_starved",
            "returns the last block that still starves the MXU",
            {"        if mxu >= dma:\n            return b\n": "        if mxu >= dma:\n            return b - 128\n"},
            r"smallest_fed_block\(bfloat16, 'v4'\) is \d+; at \d+ a step copies .* the MXU still waits",
            ("fed_block",),
        ),
        Mistake(
            "budget_line_physical_vmem",
            "compares with the physical VMEM, not the default scoped limit",
            {
                "    limit = chip_named(chip).default_scoped_vmem_bytes\n    fits": "    limit = chip_named(chip).vmem_bytes\n    fits"
            },
            r"largest_square_block\(float32, 'v5e', buffers=2\) is \d+; at \d+: over the scoped limit",
            ("budget_line",),
        ),
        Mistake(
            "choose_blocks_no_headroom",
            "fills the default scoped VMEM limit to the brim",
            {
                "    limit = VMEM_HEADROOM * chip_named(chip).default_scoped_vmem_bytes": "    limit = chip_named(chip).default_scoped_vmem_bytes"
            },
            r"choose_blocks\(.*above 75% of it, which leaves the compiler no headroom",
            ("block_choice",),
        ),
        Mistake(
            "pipeline_off_out_double_buffered",
            "pl.Buffered(1) on A and B but not on C",
            {
                "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j), pipeline_mode=one_buffer),": "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),"
            },
            r"C's BlockSpec \(out_specs\) in .* has no pipeline_mode, so it gets the default 2 buffers",
            ("pipeline_off",),
        ),
        # issue 20: these passed every visible check (f32 only, no scratch) and lost points in the grade
        Mistake(
            "step_times_ignores_dtype",
            "itemsize = 4 whatever the dtype",
            {"    itemsize = np.dtype(dtype).itemsize\n    dma_bytes": "    itemsize = 4\n    dma_bytes"},
            r"that is 4 bytes per element, but bfloat16 has 2",
            ("step_time_model",),
            ("fed_block", "block_choice"),
            graded=r"4 bytes per element, but bfloat16 has 2",
        ),
        Mistake(
            "working_set_acc_in_input_dtype",
            "the f32 accumulator counted in the inputs' dtype",
            {
                "    scratch = bm * bn * np.dtype(np.float32).itemsize if acc_scratch else 0": "    scratch = bm * bn * np.dtype(dtype).itemsize if acc_scratch else 0"
            },
            r"accumulator is counted in bfloat16, but it is float32",
            ("working_set",),
            ("budget_line", "block_choice"),
            graded=r"accumulator is counted in bfloat16, but it is float32",
        ),
        Mistake(
            "matmul_pasted_without_init",
            "LAB·1.2's matmul pasted without its k == 0 zeroing",
            {MM_INIT: "    o_ref[...] +="},
            r"reads o_ref \(\+=\) before anything is stored there",
            ("pipeline_off",),
            graded=r"reads o_ref \(\+=\) before anything is stored",
        ),
        Mistake(
            "pipeline_off_b_block_transposed",
            "B's block (bn, bk): right only while bn == bk",
            {
                "pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j), pipeline_mode=one_buffer),": "pl.BlockSpec((bn, bk), lambda i, j, kk: (kk, j), pipeline_mode=one_buffer),"
            },
            r"inner sizes differ|block of B's BlockSpec",
            ("pipeline_off",),
        ),
        # issue 37: correct LAB·1.2 matmuls in other styles pasted: the models read the same step (every check ✓,
        # full marks); before, both pl.when branches counted (2x the FLOPs) and a fori_loop body once
        Mistake(
            "matmul_assign_then_add_is_right",
            "a correct matmul that assigns on the first K step, adds after",
            {REFERENCE.rstrip("\n"): STYLES["assign_then_add"].rstrip("\n")},
            r"",
            (),
            ("step_time_model", "fed_block", "block_choice"),
        ),
        Mistake(
            "matmul_fori_subtiles_is_right",
            "a correct matmul looping over 128-wide K sub-tiles with fori_loop",
            {REFERENCE.rstrip("\n"): STYLES["fori_subtiles"].rstrip("\n")},
            r"",
            (),
            ("step_time_model", "fed_block", "block_choice"),
        ),
        # issue 27: the lab's conventions named
        Mistake(
            "step_times_one_pass_f32",
            "the bf16 peak for float32 too: one MXU pass where HIGHEST takes 6",
            {"    return dma_bytes / hbm, flops * passes / peak": "    return dma_bytes / hbm, flops / peak"},
            r"6 times too short for float32, as with one MXU pass",
            ("step_time_model",),
            ("fed_block", "block_choice"),
            graded=r"6 times too short for float32, as with one MXU pass",
        ),
        Mistake(
            "step_times_milliseconds",
            "returns milliseconds",
            {
                "    return dma_bytes / hbm, flops * passes / peak": "    return 1e3 * dma_bytes / hbm, 1e3 * flops * passes / peak"
            },
            r"(?s)^(?!.*bytes per element).*it returns milliseconds; return seconds",
            ("step_time_model",),
            ("fed_block", "block_choice"),
            graded=r"it returns milliseconds",
        ),
        Mistake(
            "working_set_scratch_times_buffers",
            "the f32 scratch counted once per buffer (it is one copy)",
            {"    return blocks + scratch": "    return blocks + scratch * buffers"},
            r"vmem_working_set\(1024, 1024, 1024, float32, buffers=2, acc_scratch=True\) is .*one copy",
            ("working_set",),
            ("budget_line", "block_choice"),
        ),
        Mistake(
            "choose_blocks_not_dividing",
            "every third multiple of 128, dividing or not (896 on v5e at 4096³)",
            {
                "    sizes = lambda dim: [s for s in range(128, dim + 1, 128) if dim % s == 0]": "    sizes = lambda dim: list(range(128, dim + 1, 384))"
            },  # every third multiple: a quicker search
            r"choose_blocks\(4096, 4096, 4096, bfloat16, '\w+'\) chose .*which does not divide",
            ("block_choice",),
        ),
        # issue 44: the step-time check judges step_times alone, as the grade does: a matmul that runs two dots a step
        # (pasted with a broken K loop) fails no right step_times
        Mistake(
            "step_times_right_with_two_dot_matmul",
            "a right step_times beside a matmul whose step runs two dots",
            {
                "    o_ref[...] +=": "    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)\n    o_ref[...] +="
            },
            r"",
            (),
            ("step_time_model",),
        ),
        Mistake(
            "step_times_per_core",
            "halves the chip's numbers for two-TensorCore chips",
            {
                "    return dma_bytes / hbm, flops * passes / peak": "    cores = c.tensorcores_per_chip\n    return dma_bytes / (hbm / cores), flops * passes / (peak / cores)",
            },
            r"(?s)^(?!.*bytes per element).*one TensorCore's share .*v4 has 2 TensorCores per chip",
            ("step_time_model",),
            ("fed_block", "block_choice"),
            graded=r"(?s)^(?!.*bytes per element).*one TensorCore's share",
        ),
        # issue 44: the tiling table's rows and the budget line, as LAB·1.4's text states them, each named
        Mistake(
            "verdict_full_dim_lowering",
            "a block dim equal to the array's held to (8, 128) (the table: it passes whatever its size)",
            {"    if not (bn == n or bn % 128 == 0) or not (bm == m or bm % 8 == 0):": "    if bn % 128 or bm % 8:"},
            r"passes the lowering rule whatever its size: 100 equals the array's 100",
            ("legal_or_not",),
            graded=r"passes the lowering rule whatever its size",
        ),
        Mistake(
            "verdict_8bit_lowering",
            "an 8-bit block of whole (8, 128) tiles but not (32, 128) called a lowering failure (the table: E2002)",
            {'        return "compile"': '        return "lowering"'},
            r"returned 'lowering', but it is 'compile': .*Mosaic rejects it at compile time",
            ("legal_or_not",),
            graded=r"returned 'lowering', but it is 'compile': .*Mosaic rejects it at compile time",
        ),
        Mistake(
            "verdict_16bit_compile",
            "a bf16 block of 8 rows called a compile failure (the table: legal, a padding note)",
            {"    if not whole_tiles and itemsize == 1:": "    if not whole_tiles and itemsize <= 2:"},
            r"returned 'compile', but it is 'note': .*fill only part of the native \(16, 128\) tile",
            ("legal_or_not",),
            graded=r"returned 'compile', but it is 'note': .*fill only part of the native \(16, 128\) tile",
        ),
        Mistake(
            "verdict_partial_block_legal",
            "a partial last block called legal (the lab: legal, worth a note)",
            {"    if not whole_tiles or m % bm or n % bn:": "    if not whole_tiles:"},
            r"returned 'legal', but it is 'note': .*the last of \d+ blocks is partial",
            ("legal_or_not",),
            graded=r"returned 'legal', but it is 'note': .*the last of \d+ blocks is partial",
        ),
        Mistake(
            "budget_line_first_over",
            "the first size over the line, not the largest that fits",
            {"    return max(fits) if fits else None": "    return max(fits) + 128 if fits else None"},
            r"the first size over the line, one step past the largest that fits",
            ("budget_line",),
            graded=r"the first size over the line, one step past the largest that fits",
        ),
    ],
    LAB_1_6: [
        Mistake(
            "copies_wait_before_start",
            "waits on x's copy before starting it (a wait that never returns)",
            {CP_STARTS: "    copy_x.wait()\n    copy_y.start()\n    copy_x.start()\n"},
            r"add_copies.*\.wait\(\) comes before its \.start\(\).*hangs",
            ("add_copies_schedule", "add_copies_values"),
            graded=r"\.wait\(\) comes before its \.start\(\).*hangs",
        ),
        Mistake(
            "copies_missing_wait",
            "starts x's copy and adds before waiting on it",
            {CP_STARTS: CP_STARTS.replace("    copy_x.wait()\n", "")},
            r"add_copies.*a copy is started and never waited",
            ("add_copies_schedule", "add_copies_values"),
            graded=r"a copy is started and never waited",
        ),
        Mistake(
            "copies_inputs_not_offset",
            "copies x's and y's first rows at every step",
            {"x_hbm.at[window]": "x_hbm.at[pl.ds(0, rows)]", "y_hbm.at[window]": "y_hbm.at[pl.ds(0, rows)]"},
            r"holds the sum of the first block: the copies ignore the grid step",
            ("add_copies_values",),
            ("add_copies_schedule",),
            graded=r"holds the sum of the first block: the copies ignore the grid step",
        ),
        Mistake(
            "lse_no_rescale",
            "adds each block's sum without rescaling the running sum to the new max",
            {"l_ref[...] * jnp.exp(m_old - m_new) + ": "l_ref[...] + "},
            r"running sum is not rescaled when the max grows",
            ("logsumexp_values",),
            ("logsumexp_schedule",),
            graded=r"running sum is not rescaled when the max grows",
        ),
        Mistake(
            "lse_max_not_subtracted",
            "sums exp(x) and returns log of it: no max anywhere",
            {
                LSE_SUM: "l_ref[...] = l_ref[...] + jnp.sum(jnp.exp(x), axis=1, keepdims=True)",
                LSE_OUT: "o_ref[...] = jnp.log(l_ref[...])",
            },
            r"exp of a logit above 88.7 overflows float32",
            ("logsumexp_stability",),
            ("logsumexp_values", "logsumexp_schedule"),
            graded=r"exp of a logit above 88.7 overflows float32",
        ),
        Mistake(
            "lse_max_starts_at_zero",
            "starts the running max at 0",
            {"jnp.full(m_ref.shape, -jnp.inf, jnp.float32)": "jnp.full(m_ref.shape, 0.0, jnp.float32)"},
            r"the running max starts at 0, not -inf",
            ("logsumexp_stability",),
            ("logsumexp_values", "logsumexp_schedule"),
            graded=r"the running max starts at 0, not -inf",
        ),
        Mistake(
            "lse_features_parallel",
            "marks the feature axis \"parallel\"",
            {'dimension_semantics=("parallel", "arbitrary")': 'dimension_semantics=("parallel", "parallel")'},
            r'marks its last grid axis "parallel".*running max and sum',
            ("logsumexp_schedule", "logsumexp_values"),
            graded=r'marks its last grid axis "parallel".*running max and sum',
        ),
        Mistake(
            "lse_reset_once",
            "resets the statistics only on the very first grid step",
            {"    @pl.when(j == 0)\n    def _reset():": "    @pl.when(pl.program_id(0) + j == 0)\n    def _reset():"},
            r"reset them on the first feature step of every row block",
            ("logsumexp_values",),
            ("logsumexp_schedule",),
            graded=r"reset them on the first feature step of every row block",
        ),
    ],
}
