"""LAB·1.1 mutants: add and transpose."""

from tests.mutants import Alternative, Mutant

LAB = "lab-1.1-first-kernels"

ADD_CALL = "    return pl.pallas_call(\n        add_kernel,"
TRANSPOSE_OUT = "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),"

# An operation the TPU lowering has no rule for, added with no effect on the values (0 * erfc(x) is 0): interpret
# mode runs it, the real TPU compiler refuses it (the compile rule of course.yml).
NOT_COMPILED = (
    r"does not compile for v5e and v6e \(the real TPU compiler, v5e:2x2 and v6e:2x2; it must compile for "
    r"v5e and v6e\):\n.*erfc"
)

MUTANTS = [
    Mutant(
        "add_not_compilable",
        "uses an operation with no TPU lowering (erfc): runs in interpret mode, refused by the TPU compiler",
        {"o_ref[...] = x_ref[...] + y_ref[...]": "o_ref[...] = x_ref[...] + y_ref[...] + 0 * jax.lax.erfc(x_ref[...])"},
        {"add_f32": NOT_COMPILED, "add_bf16": NOT_COMPILED},
    ),
    Mutant(
        "add_bypass",
        "pure-jnp bypass: add returns x + y",
        {ADD_CALL: "    return x + y\n" + ADD_CALL},
        {"add_f32": "launches no pallas_call", "add_bf16": "launches no pallas_call"},
    ),
    Mutant(
        "add_one_block",
        "a grid that writes only the first (128, 128) block",
        {
            "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),": "        grid=(1,),\n"
            "        in_specs=[pl.BlockSpec((128, 128), lambda i: (0, 0))] * 2,\n"
            "        out_specs=pl.BlockSpec((128, 128), lambda i: (0, 0)),\n"
            "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),"
        },
        {"add_f32": "NaN.*never|NaN.*nobody wrote", "add_bf16": "NaN"},
    ),
    Mutant(
        "add_f32_out",
        "out_shape hard-coded to float32",
        {
            "out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x, y)": "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),\n        interpret=INTERP,\n    )(x, y)"
        },
        {"add_bf16": "dtype"},
        others_pass=("add_f32",),
    ),
    Mutant(
        "add_subtracts",
        "the wrong algebra in the kernel body",
        {"o_ref[...] = x_ref[...] + y_ref[...]": "o_ref[...] = x_ref[...] - y_ref[...]"},
        {"add_f32": "differ by more than", "add_bf16": "differ by more than"},
    ),
    Mutant(
        "add_outside_work",
        "the kernel copies, the add happens in XLA around it",
        {"o_ref[...] = x_ref[...] + y_ref[...]": "o_ref[...] = x_ref[...]", "    )(x, y)": "    )(x + y, y)"},
        {"add_f32": "computes outside its kernel", "add_bf16": "computes outside its kernel"},
    ),
    Mutant(
        "transpose_bypass",
        "pure-jnp bypass: transpose returns x.T",
        {
            "    return pl.pallas_call(\n        transpose_kernel,": "    return x.T\n    return pl.pallas_call(\n        transpose_kernel,"
        },
        {"transpose_schedule": "launches no pallas_call", "transpose_values": "launches no pallas_call"},
    ),
    Mutant(
        "transpose_identity_index_map",
        "out index map (i, j): blocks transposed in place",
        {TRANSPOSE_OUT: "out_specs=pl.BlockSpec((bn, bm), lambda i, j: (i, j)),"},
        {"transpose_schedule": "must swap its indices", "transpose_values": "differ by more than|raised"},
    ),
    Mutant(
        "transpose_fixed_blocks",
        "ignores bm and bn, always 128 × 128",
        {"    m, n = x.shape\n": "    m, n = x.shape\n    bm = bn = 128\n"},
        {"transpose_schedule": "grid of transpose|block of transpose"},
        others_pass=("transpose_values",),
    ),
    Mutant(
        "transpose_kernel_copies",
        "the kernel forgets to transpose its block",
        {"o_ref[...] = x_ref[...].T": "o_ref[...] = x_ref[...].reshape(o_ref.shape)"},
        {"transpose_values": "differ by more than"},
        others_pass=("transpose_schedule",),
    ),
    Mutant(
        "transpose_half_grid",
        "a grid that covers half the columns",
        {"grid=(m // bm, n // bn),": "grid=(m // bm, max(1, n // bn // 2)),"},
        {"transpose_schedule": "the grid of", "transpose_values": "NaN"},
    ),
]

ALTERNATIVES = [
    Alternative(
        "add_with_jnp_add",
        "jnp.add in the kernel",
        {"o_ref[...] = x_ref[...] + y_ref[...]": "o_ref[...] = jnp.add(x_ref[...], y_ref[...])"},
    ),
    Alternative(
        "add_row_blocks",
        "a grid over row blocks instead of one whole-array block",
        {
            "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),": "        grid=(x.shape[0] // 128,),\n"
            "        in_specs=[pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0))] * 2,\n"
            "        out_specs=pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0)),\n"
            "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),"
        },
    ),
    Alternative(
        "transpose_named_index_maps",
        "jnp.transpose and named index-map functions",
        {
            "o_ref[...] = x_ref[...].T": "o_ref[...] = jnp.transpose(x_ref[...], (1, 0))",
            TRANSPOSE_OUT: "out_specs=pl.BlockSpec((bn, bm), lambda row_block, col_block: (col_block, row_block)),",
        },
    ),
]
