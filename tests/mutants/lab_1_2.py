"""LAB·1.2 mutants: rowmax, rowmax_dense, matmul, matmul_acc, matmul_gelu."""

from tests.mutants import Alternative, Mutant

LAB = "lab-1.2-tiled-matmul"

MATMUL_INIT = (
    "    k = pl.program_id(2)\n    @pl.when(k == 0)\n    def _init():\n        o_ref[...] = jnp.zeros_like(o_ref)\n"
)
MATMUL_SPECS = (
    "        matmul_kernel,\n"
    "        grid=(m // bm, n // bn, k // bk),\n"
    "        in_specs=[\n"
    "            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),\n"
    "            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),\n"
    "        ],\n"
    "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),\n"
)
ACC_CALL = (
    "        matmul_acc_kernel,\n"
    "        grid=(m // bm, n // bn, k // bk),\n"
    "        in_specs=[\n"
    "            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),\n"
    "            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),\n"
    "        ],\n"
    "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),\n"
    "        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),\n"
    "        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],\n"
    "        compiler_params=pltpu.CompilerParams(dimension_semantics=(\"parallel\", \"parallel\", \"arbitrary\")),\n"
    "        interpret=INTERP,\n"
    "    )(a, b)"
)
ACC_SEMANTICS = '("parallel", "parallel", "arbitrary")'
MATMUL_DOT = (
    "    precision = jax.lax.Precision.HIGHEST if a_ref.dtype == jnp.float32 else None\n"
    "    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=precision)"
    ".astype(o_ref.dtype)"
)
ROWMAX_INIT = (
    "    @pl.when(pl.program_id(1) == 0)\n    def _init():\n        o_ref[...] = jnp.full_like(o_ref, -jnp.inf)\n"
)
ROWMAX_STEP = "    o_ref[...] = jnp.maximum(o_ref[...], jnp.max(x_ref[...], axis=1, keepdims=True))"
ROWMAX_SPECS = (
    "        grid=(m // bm, n // bn),\n"
    "        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],\n"
    "        out_specs=pl.BlockSpec((bm, 1), lambda i, j: (i, 0)),\n"
)
DENSE_FOLD = (
    "    for c in range(x.shape[1] // 128):      # each 128-lane slice, elementwise: the VPU, no cross-lane work\n"
    "        acc = jnp.maximum(acc, x[:, c * 128:(c + 1) * 128])\n"
)
DENSE_REDUCE = (
    "    @pl.when(j == pl.num_programs(1) - 1)\n"
    "    def _reduce_once():                      # across the lanes once per row block, broadcast back to all 128\n"
    "        o_ref[...] = jnp.broadcast_to(jnp.max(acc, axis=1, keepdims=True), o_ref.shape)"
)
GELU_DEF = "def matmul_gelu_kernel(a_ref, b_ref, o_ref, acc_ref):"
GELU_CALL = ACC_CALL.replace("matmul_acc_kernel", "matmul_gelu_kernel").replace(
    f"        compiler_params=pltpu.CompilerParams(dimension_semantics={ACC_SEMANTICS}),\n", ""
)
ACC_DOT = "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, precision=matmul_precision(a_ref.dtype))\n"
ACC_STORE = "    @pl.when(k == pl.num_programs(2) - 1)\n    def _store():\n"
GELU_EPILOGUE = (
    "    @pl.when(k == pl.num_programs(2) - 1)\n    def _epilogue():\n"
    "        o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)"
)

# dimension_semantics spelled with pltpu's enums keeps its mark: tests/test_mutants.py, test_semantics_enums_keep_the_mark
# (not an Alternative, which would rerun every matmul test: "matmul" is in any edit of matmul_acc's call)
SEMANTICS_ENUMS = {ACC_CALL: ACC_CALL.replace(ACC_SEMANTICS, "(pltpu.PARALLEL, pltpu.PARALLEL, pltpu.ARBITRARY)")}

MUTANTS = [
    Mutant(
        "rowmax_missing_init",
        "no reset on the first column step",
        {ROWMAX_INIT: ""},
        {"rowmax_values": "NaN"},
        others_pass=("rowmax_schedule",),
    ),
    Mutant(
        "rowmax_zero_init",
        "the running max starts at 0 (zeros_like, the sum's habit), not -inf",
        {ROWMAX_INIT: ROWMAX_INIT.replace("jnp.full_like(o_ref, -jnp.inf)", "jnp.zeros_like(o_ref)")},
        {"rowmax_values": "all negative come out 0.*-inf"},
        others_pass=("rowmax_schedule",),
    ),
    Mutant(
        "rowmax_overwrites",
        "each step stores its block's max, forgetting what o_ref held",
        {ROWMAX_STEP: "    o_ref[...] = jnp.max(x_ref[...], axis=1, keepdims=True)"},
        {"rowmax_values": "last column block's max alone"},
    ),
    Mutant(
        "rowmax_reduced_axis_first",
        "the reduced (column) axis as the first grid axis",
        {
            ROWMAX_SPECS: ROWMAX_SPECS.replace("grid=(m // bm, n // bn)", "grid=(n // bn, m // bm)").replace(
                "lambda i, j:", "lambda j, i:"
            ),
            ROWMAX_INIT: ROWMAX_INIT.replace("program_id(1)", "program_id(0)"),
        },
        {"rowmax_schedule": "must be the last \\(innermost\\) grid axis", "rowmax_values": "[Rr]evisit|raised"},
    ),
    Mutant(
        "rowmax_reduced_axis_parallel",
        "the reduced axis marked \"parallel\"",
        {
            ROWMAX_SPECS: ROWMAX_SPECS + "        compiler_params=pltpu.CompilerParams("
            "dimension_semantics=(\"parallel\", \"parallel\")),\n"
        },
        {"rowmax_schedule": "marks its last grid axis \"parallel\""},
    ),
    Mutant(
        "rowmax_dense_reduces_every_step",
        "rowmax_dense reduces across lanes on every column step (right values, the slow pattern)",
        {
            DENSE_FOLD: "    acc = jnp.maximum(acc, jnp.max(x, axis=1, keepdims=True))\n",
            DENSE_REDUCE: DENSE_REDUCE.replace("jnp.max(acc, axis=1, keepdims=True)", "acc[:, :1]"),
        },
        {"rowmax_dense_schedule": "reduces across lanes \\(reduce_max over the last axis\\) on every column step"},
        others_pass=("rowmax_dense_values",),
    ),
    Mutant(
        "rowmax_dense_never_reduced",
        "rowmax_dense stores the (bm, 128) running max without reducing across lanes",
        {DENSE_REDUCE: ""},
        {"rowmax_dense_values": "never reduced across lanes"},
        others_pass=("rowmax_dense_schedule",),
    ),
    Mutant(
        "rowmax_dense_lane_zero_only",
        "rowmax_dense reduces once but leaves the max in lane 0 (the rest keep their own lane's max)",
        {
            DENSE_REDUCE: DENSE_REDUCE.replace(
                "o_ref[...] = jnp.broadcast_to(jnp.max(acc, axis=1, keepdims=True), o_ref.shape)",
                "o_ref[:, :1] = jnp.max(acc, axis=1, keepdims=True)",
            )
        },
        {"rowmax_dense_values": "lane 0 of each row holds the row's max"},
        others_pass=("rowmax_dense_schedule",),
    ),
    Mutant(
        "matmul_default_precision",
        "the f32 dot at the default precision (bf16 passes on a TPU)",
        {MATMUL_DOT: MATMUL_DOT.replace(", precision=precision", "")},
        {"matmul_precision": "asks for the default precision.*precision=jax.lax.Precision.HIGHEST"},
        # (matmul_f32 passes too, interpret mode multiplying f32 exactly: not run here, for CI time)
        others_pass=("matmul_schedule",),
    ),
    Mutant(
        "matmul_precision_high",
        "Precision.HIGH, which the TPU lowering refuses inside a kernel",
        {MATMUL_DOT: MATMUL_DOT.replace("Precision.HIGHEST", "Precision.HIGH")},
        {"matmul_precision": "asks for precision HIGH", "matmul_f32": "Unsupported dot precision: HIGH"},
    ),
    Mutant(
        "matmul_acc_highest",
        "precision=HIGHEST on bf16 blocks: the TPU compiler refuses it",
        {
            ACC_DOT + ACC_STORE: ACC_DOT.replace(
                "precision=matmul_precision(a_ref.dtype)", "precision=jax.lax.Precision.HIGHEST"
            )
            + ACC_STORE
        },
        {"matmul_acc_f32_accumulator": "does not compile for v5e[\\s\\S]*bfloat16 blocks with precision=HIGHEST"},
        others_pass=("matmul_acc_schedule", "matmul_acc_semantics"),
    ),
    Mutant(
        "matmul_acc_no_semantics",
        "no dimension_semantics: one TensorCore of a megacore chip idles",
        {
            ACC_CALL: ACC_CALL.replace(
                f"        compiler_params=pltpu.CompilerParams(dimension_semantics={ACC_SEMANTICS}),\n", ""
            )
        },
        {"matmul_acc_semantics": "sets no dimension_semantics"},
        others_pass=("matmul_acc_schedule",),
    ),
    Mutant(
        "matmul_acc_k_parallel",
        "K marked \"parallel\": two cores would add into one accumulator (a race)",
        {ACC_CALL: ACC_CALL.replace(ACC_SEMANTICS, '("parallel", "parallel", "parallel")')},
        {"matmul_acc_semantics": "marks its last grid axis \"parallel\""},
    ),
    Mutant(
        "matmul_acc_all_arbitrary",
        "every axis \"arbitrary\": right values, one core of a megacore chip",
        {ACC_CALL: ACC_CALL.replace(ACC_SEMANTICS, '("arbitrary", "arbitrary", "arbitrary")')},
        {"matmul_acc_semantics": "the M and N axes compute independent output blocks"},
        others_pass=("matmul_acc_f32_accumulator",),
    ),
    Mutant(
        "matmul_gelu_exact",
        "jax.nn.gelu(approximate=False): erfc, which the TPU compiler cannot lower; interpret "
        "mode runs it and the values are within tolerance",
        {"jax.nn.gelu(acc_ref[...])": "jax.nn.gelu(acc_ref[...], approximate=False)"},
        {
            "matmul_gelu_values": r"does not compile for v5e .*it must compile for v5e and v6e\):\n.*"
            r"gelu\(x, approximate=False\) computes erfc.*\n  at .*line \d+ \(in matmul_gelu\).*\n.*approximate=True"
        },
        others_pass=("matmul_gelu_fused",),
    ),
    Mutant(
        "matmul_gelu_approx_reciprocal",
        "the tanh form through pl.reciprocal(approx=True): a GELU, fused, but off by "
        "up to 4e-3 relative (a bf16 division off a TPU)",
        {
            "jax.nn.gelu(acc_ref[...])": "(lambda x: x * pl.reciprocal(1 + jnp.exp(-2 * jnp.sqrt(2 / jnp.pi) * "
            "(x + 0.044715 * x ** 3)), approx=True))(acc_ref[...])"
        },
        {"matmul_gelu_values": "differ by more than"},
        others_pass=("matmul_gelu_fused",),
    ),
    Mutant(
        "matmul_k_outermost",
        "K as the first grid axis, init on program_id(0) == 0",
        {
            MATMUL_INIT: MATMUL_INIT.replace("program_id(2)", "program_id(0)"),
            MATMUL_SPECS: MATMUL_SPECS.replace(
                "grid=(m // bm, n // bn, k // bk)", "grid=(k // bk, m // bm, n // bn)"
            ).replace("lambda i, j, kk:", "lambda kk, i, j:"),
        },
        {"matmul_schedule": "K must be the last \\(innermost\\) grid axis", "matmul_f32": "[Rr]evisit|raised"},
    ),
    Mutant(
        "matmul_missing_init",
        "no zeroing on the first K step",
        {MATMUL_INIT: "    k = pl.program_id(2)\n"},
        {"matmul_f32": "NaN"},
        others_pass=("matmul_schedule",),
    ),
    Mutant(
        "matmul_init_on_last_step",
        "the accumulator is zeroed on the last K step instead of the first",
        {MATMUL_INIT: MATMUL_INIT.replace("k == 0", "k == pl.num_programs(2) - 1")},
        {"matmul_f32": "NaN|differ by more than"},
        others_pass=("matmul_schedule",),
    ),
    Mutant(
        "matmul_swapped_index_map",
        "b's index map returns (j, k) instead of (k, j)",
        {MATMUL_SPECS: MATMUL_SPECS.replace("lambda i, j, kk: (kk, j)", "lambda i, j, kk: (j, kk)")},
        {"matmul_schedule": "index map of b", "matmul_f32": "raised|differ by more than|NaN"},
    ),
    Mutant(
        "matmul_bypass",
        "pure-jnp bypass: a @ b",
        {
            "    _, n = b.shape\n    return pl.pallas_call(\n        matmul_kernel,": "    _, n = b.shape\n    return a @ b\n    return pl.pallas_call(\n        matmul_kernel,"
        },
        {"matmul_schedule": "launches no pallas_call", "matmul_f32": "launches no pallas_call"},
    ),
    Mutant(
        "matmul_acc_bf16_accumulation",
        "the seed's matmul reused: a bf16 running sum in o_ref, no scratch",
        {
            ACC_CALL: ACC_CALL.replace("matmul_acc_kernel", "matmul_kernel").replace(
                "        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],\n", ""
            )
        },
        {"matmul_acc_f32_accumulator": "rounded to bf16"},
        others_pass=("matmul_acc_schedule",),
    ),
    Mutant(
        "matmul_acc_no_preferred_element_type",
        "the dot returns bf16 partial products",
        {ACC_DOT + ACC_STORE: ACC_DOT.replace(", preferred_element_type=jnp.float32", "") + ACC_STORE},
        {"matmul_acc_f32_accumulator": "preferred_element_type"},
        others_pass=("matmul_acc_schedule",),
    ),
    Mutant(
        "matmul_acc_cast_outside",
        "f32 output from the kernel, cast to bf16 by XLA afterwards",
        {
            ACC_CALL: ACC_CALL.replace(
                "out_shape=jax.ShapeDtypeStruct((m, n), a.dtype)", "out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32)"
            ).replace("    )(a, b)", "    )(a, b).astype(a.dtype)")
        },
        {
            "matmul_acc_schedule": "computes outside its kernel \\(convert_element_type\\)",
            "matmul_acc_f32_accumulator": "computes outside its kernel",
        },
    ),
    Mutant(
        "matmul_acc_k_outermost",
        "K as the first grid axis in matmul_acc",
        {
            ACC_CALL: ACC_CALL.replace("grid=(m // bm, n // bn, k // bk)", "grid=(k // bk, m // bm, n // bn)").replace(
                "lambda i, j, kk:", "lambda kk, i, j:"
            )
        },
        {"matmul_acc_schedule": "K must be the last", "matmul_acc_f32_accumulator": "[Rr]evisit|raised|NaN"},
    ),
    Mutant(
        "matmul_gelu_every_step",
        "GELU applied to the running sum on every K step",
        {
            ACC_DOT + GELU_EPILOGUE: "    acc_ref[...] = jax.nn.gelu(acc_ref[...] + jnp.dot(a_ref[...], b_ref[...], "
            "preferred_element_type=jnp.float32))\n"
            + GELU_EPILOGUE.replace("jax.nn.gelu(acc_ref[...])", "acc_ref[...]")
        },
        {"matmul_gelu_values": "differ by more than"},
        others_pass=("matmul_gelu_fused",),
    ),
    Mutant(
        "matmul_gelu_outside",
        "the kernel stores a @ b; XLA applies the GELU afterwards",
        {
            GELU_EPILOGUE: GELU_EPILOGUE.replace("jax.nn.gelu(acc_ref[...])", "acc_ref[...]"),
            "    _, n = b.shape\n    return pl.pallas_call(\n        matmul_gelu_kernel,": "    _, n = b.shape\n    return jax.nn.gelu(pl.pallas_call(\n        matmul_gelu_kernel,",
            GELU_CALL: GELU_CALL + ")",
        },
        {"matmul_gelu_fused": "computes outside its kernel", "matmul_gelu_values": "computes outside its kernel"},
    ),
    Mutant(
        "matmul_gelu_forgets_gelu",
        "the epilogue stores the accumulator without the GELU",
        {GELU_EPILOGUE: GELU_EPILOGUE.replace("jax.nn.gelu(acc_ref[...])", "acc_ref[...]")},
        {"matmul_gelu_fused": "computes no GELU", "matmul_gelu_values": "differ by more than"},
    ),
    Mutant(
        "matmul_gelu_bypass",
        "pure-jnp bypass: jax.nn.gelu(a @ b)",
        {
            "    _, n = b.shape\n    return pl.pallas_call(\n        matmul_gelu_kernel,": "    _, n = b.shape\n    return jax.nn.gelu(a @ b)\n    return pl.pallas_call(\n        matmul_gelu_kernel,"
        },
        {"matmul_gelu_fused": "launches no pallas_call", "matmul_gelu_values": "launches no pallas_call"},
    ),
]

ALTERNATIVES = [
    Alternative(
        "matmul_precision_always_highest",
        "precision='highest' as a string, on every call (graded on f32)",
        {
            MATMUL_DOT: "    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, "
            "precision='highest').astype(o_ref.dtype)"
        },
    ),
    Alternative(
        "matmul_with_f32_scratch",
        "matmul accumulating in an f32 scratch, stored on the last K step",
        {
            MATMUL_INIT
            + MATMUL_DOT: "    k = pl.program_id(2)\n    acc_ref = scratch[0]\n    @pl.when(k == 0)\n    def _init():\n"
            "        acc_ref[...] = jnp.zeros_like(acc_ref)\n"
            "    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32, "
            "precision=jax.lax.Precision.HIGHEST if a_ref.dtype == jnp.float32 else None)\n"
            "    @pl.when(k == pl.num_programs(2) - 1)\n    def _done():\n"
            "        o_ref[...] = acc_ref[...].astype(o_ref.dtype)",
            "def matmul_kernel(a_ref, b_ref, o_ref):": "def matmul_kernel(a_ref, b_ref, o_ref, *scratch):",
            "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),\n"
            "        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),\n        interpret=INTERP,": "        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),\n"
            "        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),\n"
            "        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],\n        interpret=INTERP,",
        },
    ),
    Alternative(
        "matmul_named_index_maps",
        "index maps as named functions of (i, j, k)",
        {
            MATMUL_SPECS: MATMUL_SPECS.replace("lambda i, j, kk: (i, kk)", "lambda row, col, red: (row, red)").replace(
                "lambda i, j, kk: (kk, j)", "lambda row, col, red: (red, col)"
            )
        },
    ),
    Alternative(
        "matmul_acc_last_step_spelled_differently",
        "pl.when(program_id + 1 == num_programs)",
        {ACC_STORE: ACC_STORE.replace("k == pl.num_programs(2) - 1", "pl.program_id(2) + 1 == pl.num_programs(2)")},
    ),
    Alternative(
        "matmul_acc_dot_general",
        "lax.dot_general with an f32 result",
        {
            ACC_DOT + ACC_STORE: "    acc_ref[...] += jax.lax.dot_general(a_ref[...], b_ref[...], "
            "(((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)\n" + ACC_STORE
        },
    ),
    # (each edit names the kernel's def line too: the corpus runs an alternative against the tests of the kernels
    # its edits name)
    Alternative(
        "matmul_gelu_in_o_ref",
        "GELU applied to o_ref after storing the sum, still on the last step",
        {
            GELU_DEF: GELU_DEF,
            GELU_EPILOGUE: GELU_EPILOGUE.replace(
                "o_ref[...] = jax.nn.gelu(acc_ref[...]).astype(o_ref.dtype)",
                "o_ref[...] = acc_ref[...].astype(o_ref.dtype)\n        o_ref[...] = jax.nn.gelu(o_ref[...])",
            ),
        },
    ),
    # issue 26: "computes a GELU" is judged by the epilogue's values, so any rewrite of either form keeps its marks
    Alternative(
        "matmul_gelu_tanh_via_sigmoid",
        "the tanh form written with tanh(z) = 2·sigmoid(2z) - 1 (no tanh)",
        {
            GELU_DEF: GELU_DEF,
            "jax.nn.gelu(acc_ref[...])": "(lambda x: 0.5 * x * (2 * jax.nn.sigmoid(2 * jnp.sqrt(2 / jnp.pi) * (x + 0.044715 * x ** 3))))"
            "(acc_ref[...])",
        },
    ),
    Alternative(
        "matmul_gelu_erf_written_out",
        "the exact form written out with lax.erf (which compiles)",
        {
            GELU_DEF: GELU_DEF,
            "jax.nn.gelu(acc_ref[...])": "(lambda x: 0.5 * x * (1 + jax.lax.erf(x / jnp.sqrt(2.0))))(acc_ref[...])",
        },
    ),
    Alternative(
        "matmul_gelu_reciprocal",
        "the tanh form through exp and pl.reciprocal (the TPU idiom)",
        {
            GELU_DEF: GELU_DEF,
            "jax.nn.gelu(acc_ref[...])": "(lambda x: x * pl.reciprocal(1 + jnp.exp(-2 * jnp.sqrt(2 / jnp.pi) * (x + 0.044715 * x ** 3)), "
            "approx=False))(acc_ref[...])",
        },
    ),
]
