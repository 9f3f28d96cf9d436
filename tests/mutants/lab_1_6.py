"""LAB·1.6 mutants: add_copies (explicit copies) and row_logsumexp (online softmax's statistics)."""

from tests.mutants import Alternative, Mutant

LAB = "lab-1.6-copies-online-softmax"

STARTS = "    copy_x.start()\n    copy_y.start()  # both copies in flight at once\n    copy_x.wait()\n"
COPY_OUT = (
    "\n    copy_o = pltpu.make_async_copy(o_buf, o_hbm.at[window], sem.at[2])\n    copy_o.start()\n    copy_o.wait()"
)
HBM = "    hbm = pl.BlockSpec(memory_space=pl.ANY)\n"
RESCALE = "l_ref[...] * jnp.exp(m_old - m_new) + "
SUM = "l_ref[...] = l_ref[...] * jnp.exp(m_old - m_new) + jnp.sum(jnp.exp(x - m_new), axis=1, keepdims=True)"
OUT = "o_ref[...] = m_ref[...] + jnp.log(l_ref[...])"
SEMANTICS = 'dimension_semantics=("parallel", "arbitrary")'

WAIT_FIRST = r"\.wait\(\) comes before its \.start\(\)"
NEVER_WAITED = r"a copy is started and never waited"

MUTANTS = [
    Mutant(
        "copies_wait_before_start",
        "waits on x's copy before starting it: the wait never returns (refused before it runs)",
        {STARTS: "    copy_x.wait()\n    copy_y.start()\n    copy_x.start()\n"},
        {"add_copies_schedule": WAIT_FIRST, "add_copies_values": WAIT_FIRST},
    ),
    Mutant(
        "copies_missing_wait",
        "starts x's copy and never waits on it: reads the buffer before it lands",
        {STARTS: STARTS.replace("    copy_x.wait()\n", "")},
        {"add_copies_schedule": NEVER_WAITED, "add_copies_values": NEVER_WAITED},
    ),
    Mutant(
        "copies_no_offset",
        "every step copies x's and y's first rows in: the input windows ignore the grid step",
        {"x_hbm.at[window]": "x_hbm.at[pl.ds(0, rows)]", "y_hbm.at[window]": "y_hbm.at[pl.ds(0, rows)]"},
        {"add_copies_values": "holds the sum of the first block: the copies ignore the grid step"},
        others_pass=("add_copies_schedule",),
    ),
    Mutant(
        "copies_no_copy_out",
        "adds into the VMEM buffer and never copies the sum out",
        {COPY_OUT: ""},
        {
            "add_copies_schedule": "starts 2 and waits 2 copies",
            "add_copies_values": "left in HBM .*nothing reached it: copy each result block out",
        },
    ),
    Mutant(
        "copies_blockspecs",
        "keeps BlockSpecs that stage blocks in VMEM: Pallas copies them, not the kernel",
        {HBM: "    hbm = pl.BlockSpec((rows_per_block, d), lambda i: (i, 0))\n"},
        {"add_copies_schedule": "stages blocks into VMEM.*memory_space=pl.ANY"},
    ),
    Mutant(
        "lse_no_rescale",
        "adds each block's sum to the running sum without rescaling it to the new max",
        {RESCALE: "l_ref[...] + "},
        {"logsumexp_values": "running sum is not rescaled"},
        others_pass=("logsumexp_schedule",),
    ),
    Mutant(
        "lse_max_not_subtracted",
        "sums exp(x) with no max: overflows at large logits",
        {
            SUM: "l_ref[...] = l_ref[...] + jnp.sum(jnp.exp(x), axis=1, keepdims=True)",
            OUT: "o_ref[...] = jnp.log(l_ref[...])",
        },
        {"logsumexp_stability": "exp of a logit above 88.7 overflows"},
        others_pass=("logsumexp_values", "logsumexp_schedule"),
    ),
    Mutant(
        "lse_max_starts_at_zero",
        "starts the running max at 0 instead of -inf",
        {"jnp.full(m_ref.shape, -jnp.inf, jnp.float32)": "jnp.full(m_ref.shape, 0.0, jnp.float32)"},
        {"logsumexp_stability": "the running max starts at 0, not -inf"},
        others_pass=("logsumexp_values", "logsumexp_schedule"),
    ),
    Mutant(
        "lse_max_left_out",
        "returns log(l) without adding the max back",
        {OUT: "o_ref[...] = jnp.log(l_ref[...])"},
        {"logsumexp_values": "leaves out the max", "logsumexp_stability": "leaves out the max"},
        others_pass=("logsumexp_schedule",),
    ),
    Mutant(
        "lse_reset_once",
        "resets the statistics on the first grid step only, not on every row block's first feature step",
        {"    @pl.when(j == 0)\n    def _reset():": "    @pl.when(pl.program_id(0) + j == 0)\n    def _reset():"},
        {"logsumexp_values": "reset them on the first feature step of every row block"},
        others_pass=("logsumexp_schedule",),
    ),
    Mutant(
        "lse_features_parallel",
        "marks the feature axis, which carries the running statistics, \"parallel\"",
        {SEMANTICS: 'dimension_semantics=("parallel", "parallel")'},
        {
            "logsumexp_schedule": 'marks its last grid axis "parallel"',
            "logsumexp_values": 'marks its last grid axis "parallel"',
        },
    ),
    Mutant(
        "lse_no_semantics",
        "sets no dimension_semantics: the rows are not split across a megacore chip's cores",
        {f"        compiler_params=pltpu.CompilerParams({SEMANTICS}),\n": ""},
        {"logsumexp_schedule": "marks its grid axes not at all"},
        others_pass=("logsumexp_values",),
    ),
]

ALTERNATIVES = [
    Alternative(
        "copies_pltpu_hbm",
        "pltpu.HBM instead of pl.ANY for the operands left in HBM",
        {HBM: "    hbm = pl.BlockSpec(memory_space=pltpu.HBM)\n"},
    ),
    Alternative(
        "copies_one_at_a_time",
        "each input copy started and waited before the next starts",
        {STARTS: "    copy_x.start()\n    copy_x.wait()\n    copy_y.start()  # both copies in flight at once\n"},
    ),
    Alternative(
        "lse_output_every_step",
        "writes m + log(l) to the output on every feature step, the last one standing",
        {"    @pl.when(j == pl.num_programs(1) - 1)\n    def _finish():\n        ": "    if True:\n        "},
    ),
]
