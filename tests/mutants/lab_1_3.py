"""LAB·1.3 mutants: fused softmax and LayerNorm."""

from tests.mutants import Alternative, Mutant

LAB = "lab-1.3-fused-softmax-layernorm"

# Edit anchors: each occurs exactly once in the solution's code (the two wrappers share most lines).
SM_MAX = "    m = jnp.max(x, axis=-1, keepdims=True)\n"
SM_EXP = "    e = jnp.exp(x - m)\n"
SM_STORE = "    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)"
SM_CALL = "    n, d = x.shape\n    return pl.pallas_call(\n        softmax_kernel,"
SM_OUT = "\n        out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),"  # column_sums' in_specs is the same
SM_IN = "in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))]," + SM_OUT
SM_OUT_SHAPE = "out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x)"
SM_GRID = "        softmax_kernel,\n        grid=(n // rows_per_block,),"
LN_MU = "    mu = jnp.mean(x, axis=-1, keepdims=True)\n"
LN_VAR = "    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)\n"
LN_Y = "    y = (x - mu) * jax.lax.rsqrt(var + 1e-6)\n"
LN_STORE = "    o_ref[...] = (y * g_ref[...] + b_ref[...]).astype(o_ref.dtype)"
LN_CALL = "    n, d = x.shape\n    return pl.pallas_call(\n        layernorm_kernel,"
LN_GRID = "        layernorm_kernel,\n        grid=(n // rows_per_block,),"
LN_SPECS = (
    "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
    "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n"
    "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n"
)
LN_ARGS = "    )(x, g.reshape(1, -1), b.reshape(1, -1))"
CS_GRID = "grid=(pl.cdiv(n, rows_per_block),),"
CS_ROW = "    row = i * x_ref.shape[0] + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)\n"
CS_MASK = "    x = jnp.where(row < n, x_ref[...].astype(jnp.float32), 0.0)"
CS_CALL = "        functools.partial(column_sums_kernel, n=n),\n"
ST_SIZE = "    itemsize = np.dtype(dtype).itemsize\n    moved"
ST_MOVED = "    moved = 2 * n * d * itemsize"
ST_BW = "    bandwidth = chip_named(chip).device_hbm_bytes_per_s(parallel=False)"
ST_RETURN = "    return moved / bandwidth + (n // rows_per_block) * step_overhead()[0]"
RB_LOOP = "    while rows < n and 2 * rows * d * itemsize < 2**20:\n"
RB_RETURN = "    return min(rows, n)"

ROWS_PARALLEL = (
    '        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),   # rows are independent\n'
)
SM_PARALLEL = (
    "        out_specs=pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
    + ROWS_PARALLEL
    + ("        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n    )(x)")
)
LN_PARALLEL = (
    ROWS_PARALLEL + "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n        interpret=INTERP,\n" + LN_ARGS
)
NOT_PARALLEL = r'sets no dimension_semantics.*mark the row axis "parallel"'
CAST = r"astype\(o_ref\.dtype\)"
NO_CALL = "launches no pallas_call"
OUTSIDE = "computes outside its kernel"

MUTANTS = [
    Mutant(
        "softmax_rows_not_parallel",
        "softmax leaves its row axis \"arbitrary\" (no dimension_semantics): one core of a megacore chip",
        {SM_PARALLEL: SM_PARALLEL.replace(ROWS_PARALLEL, "")},
        {"softmax_fused": NOT_PARALLEL},
        others_pass=("softmax_values",),
    ),
    Mutant(
        "layernorm_rows_not_parallel",
        "layernorm leaves its row axis \"arbitrary\"",
        {LN_PARALLEL: LN_PARALLEL.replace(ROWS_PARALLEL, "")},
        {"layernorm_fused": NOT_PARALLEL},
        others_pass=("layernorm_values",),
    ),
    Mutant(
        "softmax_max_by_sort",
        "the row max read off a sorted row: right values, but sort has no TPU lowering",
        {SM_MAX: "    m = jnp.max(jnp.sort(x, axis=-1), axis=-1, keepdims=True)\n"},
        {"softmax_values": r"does not compile for v5e .*\n.*sorting \(jnp\.sort"},
        others_pass=("softmax_fused", "softmax_stability"),
    ),
    # ---- softmax
    Mutant(
        "softmax_no_max",
        "no max subtraction: exp(x) overflows for large logits",
        {SM_EXP: "    e = jnp.exp(x)\n"},
        {"softmax_stability": "exp overflows float32.*subtract each row's max"},
        others_pass=("softmax_values", "softmax_fused"),
    ),
    Mutant(
        "softmax_wrong_axis",
        "max and sum over axis 0 (the rows of the block) instead of the features",
        {
            SM_MAX: "    m = jnp.max(x, axis=0, keepdims=True)\n",
            SM_STORE: "    o_ref[...] = (e / jnp.sum(e, axis=0, keepdims=True)).astype(o_ref.dtype)",
        },
        {
            "softmax_values": "sums to 1, not each row.*axis=0.*axis=-1",
            "softmax_stability": "sums to 1, not each row.*axis=0.*axis=-1",
        },
        others_pass=("softmax_fused",),
    ),
    Mutant(
        "softmax_sum_wrong_axis",
        "the max is right, the sum runs over axis 0",
        {SM_STORE: "    o_ref[...] = (e / jnp.sum(e, axis=0, keepdims=True)).astype(o_ref.dtype)"},
        {"softmax_values": "sums to 1, not each row.*axis=-1"},
        others_pass=("softmax_fused",),
    ),
    Mutant(
        "softmax_bypass",
        "pure-jnp bypass: jax.nn.softmax in XLA",
        {SM_CALL: "    return jax.nn.softmax(x, axis=-1)\n" + SM_CALL},
        {"softmax_values": NO_CALL, "softmax_stability": NO_CALL, "softmax_fused": NO_CALL},
    ),
    Mutant(
        "softmax_exp_outside",
        "the max and exp happen in XLA before the call; the kernel only normalises",
        {
            SM_MAX + SM_EXP: "    e = x\n",
            SM_CALL: "    n, d = x.shape\n    x = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))\n"
            "    return pl.pallas_call(\n        softmax_kernel,",
        },
        {"softmax_values": OUTSIDE + r" \(.*exp", "softmax_fused": OUTSIDE + r" \(.*exp"},
    ),
    Mutant(
        "softmax_two_calls",
        "max in one pallas_call, the rest in another: two HBM round trips",
        {
            SM_CALL: "    n, d = x.shape\n"
            "    x = pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),\n"
            "                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x)\n"
            "    return pl.pallas_call(\n        softmax_kernel,"
        },
        {"softmax_fused": "launches 2 pallas_calls"},
    ),
    Mutant(
        "softmax_input_index_map",
        "every step reads row block 0",
        {SM_IN: "in_specs=[pl.BlockSpec((rows_per_block, d), lambda i: (0, 0))]," + SM_OUT},
        {
            "softmax_fused": r"input x index map sends grid step 1 to block \(0, 0\)",
            "softmax_values": r"differ by more than.*the first is block \(1, 0\)",
        },
    ),
    Mutant(
        "softmax_no_cast",
        "the f32 result is stored into a bf16 output without .astype(o_ref.dtype)",
        {SM_STORE: "    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)"},
        {"softmax_values": CAST},
        # the call's data is right (out_shape in x's dtype): the store fails to trace, which costs the values alone
        others_pass=("softmax_stability", "softmax_fused"),
    ),
    Mutant(
        "softmax_f32_out",
        "out_shape hard-coded to float32",
        {SM_OUT_SHAPE: "out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),\n        interpret=INTERP,\n    )(x)"},
        {"softmax_values": "dtype float32, expected bfloat16", "softmax_fused": "output of softmax.*float32"},
        others_pass=("softmax_stability",),
    ),
    Mutant(
        "softmax_fixed_rows",
        "ignores rows_per_block, always 8 rows a block",
        {SM_CALL: "    n, d = x.shape\n    rows_per_block = 8\n    return pl.pallas_call(\n        softmax_kernel,"},
        {"softmax_fused": "the grid of softmax"},
        others_pass=("softmax_values", "softmax_stability"),
    ),
    Mutant(
        "softmax_half_grid",
        "a grid that covers half the rows",
        {SM_GRID: "        softmax_kernel,\n        grid=(max(1, n // rows_per_block // 2),),"},
        {
            "softmax_fused": "the grid of softmax",
            "softmax_values": "NaN.*never written",
            # logits near 1e4, but the NaNs are unwritten memory: no blame on exp
            "softmax_stability": r"(?s)^(?!.*exp overflow).*never written.*one short",
        },
    ),
    Mutant(
        "softmax_rebinds_o_ref",
        "o_ref = value rebinds the name: nothing is stored",
        {SM_STORE: "    o_ref = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)"},
        {
            "softmax_values": r"(?s)^(?!.*(exp overflow|grid cover)).*`o_ref = value` only rebinds",
            "softmax_stability": r"(?s)^(?!.*exp overflow).*`o_ref = value` only rebinds",
        },
    ),
    # ---- LayerNorm
    Mutant(
        "layernorm_no_eps",
        "no eps: a constant row is 0 * rsqrt(0)",
        {LN_Y: "    y = (x - mu) * jax.lax.rsqrt(var)\n"},
        {"layernorm_edge": "constant rows .* NaN.*rsqrt\\(var \\+ 1e-6\\)"},
        others_pass=("layernorm_values", "layernorm_fused"),
    ),
    Mutant(
        "layernorm_eps_1e5",
        "eps 1e-5 (another library's default) instead of 1e-6",
        {LN_Y: "    y = (x - mu) * jax.lax.rsqrt(var + 1e-5)\n"},
        {"layernorm_edge": "(eps = 1e-5 |variance is about eps).*eps is 1e-6"},
        others_pass=("layernorm_fused",),
    ),
    Mutant(
        "layernorm_eps_on_std",
        "eps added to the standard deviation, not the variance",
        {LN_Y: "    y = (x - mu) / (jnp.sqrt(var) + 1e-6)\n"},
        {"layernorm_edge": "variance is about eps|constant rows|eps added to the standard deviation"},
        others_pass=("layernorm_fused",),
    ),
    Mutant(
        "layernorm_mean_wrong_axis",
        "mean over axis 0 (the rows of the block)",
        {LN_MU: "    mu = jnp.mean(x, axis=0, keepdims=True)\n"},
        {
            "layernorm_values": r"the mean reduces over the rows of each \d+-row block \(axis=0\).*axis=-1",
            "layernorm_edge": r"the mean reduces over the rows of each \d+-row block \(axis=0\).*axis=-1",
        },
        others_pass=("layernorm_fused",),
    ),
    Mutant(
        "layernorm_var_wrong_axis",
        "variance over axis 0 (the rows of the block)",
        {LN_VAR: "    var = jnp.mean((x - mu) ** 2, axis=0, keepdims=True)\n"},
        {
            "layernorm_values": r"the variance reduces over the rows of each \d+-row block \(axis=0\).*axis=-1",
            "layernorm_edge": r"the variance reduces over the rows of each \d+-row block \(axis=0\).*axis=-1",
        },
        others_pass=("layernorm_fused",),
    ),
    Mutant(
        "layernorm_one_pass_var",
        "one-pass variance mean(x**2) - mu**2: cancels at a large mean",
        {LN_VAR: "    var = jnp.mean(x * x, axis=-1, keepdims=True) - mu * mu\n"},
        {"layernorm_edge": "cancels catastrophically"},
        others_pass=("layernorm_fused",),
    ),
    Mutant(
        "layernorm_bypass",
        "pure-jnp bypass: the formula in XLA",
        {
            LN_CALL: "    mu = x.mean(-1, keepdims=True)\n"
            "    return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-6) * g + b\n" + LN_CALL
        },
        {"layernorm_values": NO_CALL, "layernorm_edge": NO_CALL, "layernorm_fused": NO_CALL},
    ),
    Mutant(
        "layernorm_mean_outside",
        "the mean is subtracted in XLA before the call",
        {
            LN_CALL: "    n, d = x.shape\n    x = x - jnp.mean(x, axis=-1, keepdims=True)\n"
            "    return pl.pallas_call(\n        layernorm_kernel,"
        },
        {
            "layernorm_values": OUTSIDE + r" \(.*reduce_sum",
            "layernorm_edge": OUTSIDE,
            "layernorm_fused": OUTSIDE + r" \(.*sub",
        },
    ),
    Mutant(
        "layernorm_affine_outside",
        "the kernel normalises; g and b are applied in XLA afterwards",
        {
            LN_STORE: "    o_ref[...] = y.astype(o_ref.dtype)",
            LN_ARGS: "    )(x, g.reshape(1, -1), b.reshape(1, -1)) * g + b",
        },
        {"layernorm_values": OUTSIDE + r" \(mul, add\)", "layernorm_fused": OUTSIDE},
    ),
    Mutant(
        "layernorm_g_index_map",
        "g fetched per row block: index map (i, 0) for a (1, d) array",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec((1, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n"
        },
        {"layernorm_fused": r"the g index map sends grid step 1 to block \(1, 0\)"},
    ),
    Mutant(
        "layernorm_x_index_map",
        "every step reads row block 0 of x",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (0, 0)),\n"
            "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n"
            "            pl.BlockSpec((1, d), lambda i: (0, 0)),\n"
        },
        {
            "layernorm_fused": r"input x index map sends grid step 1 to block \(0, 0\)",
            "layernorm_values": r"differ by more than.*the first is block \(1, 0\)",
        },
    ),
    Mutant(
        "layernorm_no_cast",
        "the f32 result is stored into a bf16 output without .astype(o_ref.dtype)",
        {LN_STORE: "    o_ref[...] = y * g_ref[...] + b_ref[...]"},
        {"layernorm_values": CAST},
        # the call's data is right (out_shape in x's dtype): the store fails to trace, which costs the values alone
        others_pass=("layernorm_edge", "layernorm_fused"),
    ),
    # ---- the ragged edge: column sums over a pl.cdiv grid
    Mutant(
        "column_sums_floor_grid",
        "grid n // rows_per_block: the partial last block is never visited",
        {CS_GRID: "grid=(n // rows_per_block,),"},
        {"column_sums_ragged": r"n // rows_per_block drops the last, partial block.*pl\.cdiv\(n, rows_per_block\)"},
        others_pass=("softmax_time_model",),
    ),
    Mutant(
        "column_sums_no_mask",
        "no mask: the rows past n in the partial last block join the sum",
        {CS_MASK: "    x = x_ref[...].astype(jnp.float32)"},
        {
            "column_sums_ragged": r"NaN though x holds no NaN: its last block .* runs past the array's .* rows.*"
            r"jnp\.where\(row < n, x, 0\.0\)"
        },
        others_pass=("softmax_time_model",),
    ),
    # ---- the bytes-over-bandwidth model
    Mutant(
        "softmax_seconds_no_write",
        "counts x read, forgets the output written",
        {ST_MOVED: "    moved = n * d * itemsize"},
        {"softmax_time_model": r"it counts x read .* but not the output written"},
        others_pass=("rows_per_block_choice",),
    ),
    Mutant(
        "softmax_seconds_f32_bytes",
        "4 bytes an element whatever the dtype (the kernel computes in f32)",
        {ST_SIZE: "    itemsize = 4\n    moved"},
        {"softmax_time_model": r"bfloat16.*: 4 bytes per element, but bfloat16 has 2 \(the kernel computes in float32"},
        others_pass=("rows_per_block_choice",),
    ),
    Mutant(
        "softmax_seconds_flops",
        "divides by the chip's FLOP/s instead of its HBM bandwidth",
        {
            ST_RETURN: "    return moved / chip_named(chip).bf16_flops_per_s + (n // rows_per_block) * step_overhead()[0]"
        },
        {
            "softmax_time_model": r"too short: it divides by v5e's FLOP/s .* the model takes the kernel as waiting on memory"
        },
        others_pass=("rows_per_block_choice",),
    ),
    Mutant(
        "softmax_seconds_no_steps",
        "bytes over bandwidth alone: the fixed cost of each grid step left out",
        {ST_RETURN: "    return moved / bandwidth"},
        {"softmax_time_model": r"the bytes alone: it leaves out the fixed cost of the grid's 4,096 steps"},
        others_pass=("rows_per_block_choice",),
    ),
    Mutant(
        "softmax_seconds_chip_bandwidth",
        "the chip's bandwidth where a JAX device is one TensorCore (v7x)",
        {ST_BW: "    bandwidth = chip_named(chip).hbm_bytes_per_s"},
        {"softmax_time_model": r"with v7x's bandwidth per chip .* a JAX device is one of the chip's 2 TensorCores"},
        others_pass=("rows_per_block_choice",),
    ),
    # ---- rows_per_block
    Mutant(
        "rows_per_block_default",
        "keeps the 8-row default: a step too small to pay for its fixed cost",
        {RB_LOOP: "    while False:\n"},
        {"rows_per_block_choice": r"is 8: a step reads and writes 2 x 32 KiB = 64 KiB, under 1 MiB"},
        others_pass=("softmax_time_model",),
    ),
    Mutant(
        "rows_per_block_whole_array",
        "one block for the whole array: no pipelining, and VMEM overflows",
        {RB_RETURN: "    return n"},
        {"rows_per_block_choice": r"is 32768: its in and out blocks, double-buffered, take 4 x 128 MiB"},
        others_pass=("softmax_time_model",),
    ),
    Mutant(
        "rows_per_block_too_large",
        "aims at 8 MiB a step: the double-buffered blocks crowd out the body's float32 values",
        {RB_LOOP: "    while rows < n and 2 * rows * d * itemsize < 2**23:\n"},
        {"rows_per_block_choice": r"is 1024: .* over 50% of v5e's 16 MiB default scoped VMEM limit"},
        others_pass=("softmax_time_model",),
    ),
    Mutant(
        "layernorm_fixed_rows",
        "ignores rows_per_block, always 8 rows a block",
        {LN_CALL: "    n, d = x.shape\n    rows_per_block = 8\n    return pl.pallas_call(\n        layernorm_kernel,"},
        {"layernorm_fused": "the grid of layernorm"},
        others_pass=("layernorm_values", "layernorm_edge"),
    ),
]

ALTERNATIVES = [
    Alternative(
        "column_sums_column_mask_arbitrary",
        "a (rows, 1) row index that jnp.where broadcasts, the cast "
        "after the select, and dimension_semantics=('arbitrary',) said out loud",
        {
            CS_ROW
            + CS_MASK: "    row = i * x_ref.shape[0] + jax.lax.broadcasted_iota(jnp.int32, (x_ref.shape[0], 1), 0)\n"
            "    x = jnp.where(row < n, x_ref[...], 0).astype(jnp.float32)",
            CS_CALL: CS_CALL + "        compiler_params=pltpu.CompilerParams(dimension_semantics=(\"arbitrary\",)),\n",
        },
    ),
    Alternative(
        "softmax_multiply_by_inverse",
        "e * (1 / sum) and the method spelling of max",
        {
            SM_MAX: "    m = x.max(axis=-1, keepdims=True)\n",
            SM_STORE: "    o_ref[...] = (e * (1.0 / e.sum(axis=-1, keepdims=True))).astype(o_ref.dtype)",
        },
    ),
    Alternative(
        "softmax_logsumexp",
        "exp(x - m - log(sum)): the log-sum-exp form",
        {SM_STORE: "    o_ref[...] = jnp.exp(x - m - jnp.log(jnp.sum(e, axis=-1, keepdims=True))).astype(o_ref.dtype)"},
    ),
    Alternative(
        "softmax_jax_nn_inside",
        "jax.nn.softmax on the block, inside the kernel (still one fused call)",
        {SM_MAX + SM_EXP + SM_STORE: "    o_ref[...] = jax.nn.softmax(x, axis=-1).astype(o_ref.dtype)"},
    ),
    Alternative(
        "softmax_cdiv_keywords",
        "pl.cdiv grid, keyword BlockSpecs, one spec reused",
        {
            SM_GRID: "        softmax_kernel,\n        grid=(pl.cdiv(n, rows_per_block),),",
            SM_IN: "in_specs=[pl.BlockSpec(block_shape=(rows_per_block, x.shape[-1]), index_map=lambda r: (r, 0))],"
            + SM_OUT,
        },
    ),
    Alternative(
        "layernorm_jnp_var",
        "jnp.var and 1 / sqrt",
        {LN_VAR: "    var = jnp.var(x, axis=-1, keepdims=True)\n", LN_Y: "    y = (x - mu) / jnp.sqrt(var + 1e-6)\n"},
    ),
    Alternative(
        "layernorm_sum_over_d",
        "centred once, sum of squares divided by d",
        {
            LN_VAR + LN_Y: "    xc = x - mu\n"
            "    var = jnp.sum(jnp.square(xc), axis=-1, keepdims=True) / x.shape[-1]\n"
            "    y = xc * jax.lax.rsqrt(var + 1e-6)\n"
        },
    ),
    Alternative(
        "layernorm_params_1d_f32",
        "g and b cast to f32 outside (d values only) and passed 1-D",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec((d,), lambda i: (0,)),\n"
            "            pl.BlockSpec((d,), lambda i: (0,)),\n",
            LN_ARGS: "    )(x, g.astype(jnp.float32), b.astype(jnp.float32))",
        },
    ),
    Alternative(
        "layernorm_params_whole_vmem",
        "g and b as whole-array VMEM operands, expanded with [None, :]",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec(memory_space=pltpu.VMEM),\n"
            "            pl.BlockSpec(memory_space=pltpu.VMEM),\n",
            LN_ARGS: "    )(x, g[None, :], b[None, :])",
            LN_GRID: "        layernorm_kernel,\n        grid=(pl.cdiv(n, rows_per_block),),",
        },
    ),
    # issue 20: a squeezed leading dimension over the (1, d) parameter is the whole of it (it lost layernorm_fused)
    Alternative(
        "layernorm_params_squeezed_none",
        "(None, d) blocks over g.reshape(1, -1): the kernel sees (d,)",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec((None, d), lambda i: (0, 0)),\n"
            "            pl.BlockSpec((None, d), lambda i: (0, 0)),\n"
        },
    ),
    Alternative(
        "layernorm_params_pl_squeezed",
        "pl.Squeezed() for the leading dimension of g and b",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec((pl.Squeezed(), d), lambda i: (0, 0)),\n"
            "            pl.BlockSpec((pl.Squeezed(), d), lambda i: (0, 0)),\n"
        },
    ),
    Alternative(
        "layernorm_params_1d_as_given",
        "g and b passed as they come, (d,), in (d,) blocks",
        {
            LN_SPECS: "            pl.BlockSpec((rows_per_block, d), lambda i: (i, 0)),\n"
            "            pl.BlockSpec((d,), lambda i: (0,)),\n"
            "            pl.BlockSpec((d,), lambda i: (0,)),\n",
            LN_ARGS: "    )(x, g, b)",
        },
    ),
    Alternative(
        "layernorm_params_expand_dims",
        "g[None] and jnp.expand_dims(b, 0) outside, whole (1, d) blocks",
        {LN_ARGS: "    )(x, g[None], jnp.expand_dims(b, 0))"},
    ),
]
