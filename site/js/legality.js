// BlockSpec legality and the VMEM budget, in the page: a line-for-line mirror of pallas_course/legality.py
// (check_block, sandbox_budget, fmt_bytes, fmt_mib). Pure functions, no DOM: the sandbox module calls them,
// and tests/test_site_legality.py runs them (in node and in Chromium) against the Python rules on a shared
// table of cases. Every constant comes in through `data` (course_tools/site/sandbox_data.py).

export class BlockSpecError extends Error {}

function pyTuple(items) {
  const parts = items.map((v) => (v === null ? "None" : String(v)));
  return parts.length === 1 ? `(${parts[0]},)` : `(${parts.join(", ")})`;
}

const floorDiv = (a, b) => Math.floor(a / b);
const prod = (xs) => xs.reduce((a, b) => a * b, 1);

function isPow2(n) {
  let x = n;
  while (x > 1 && x % 2 === 0) x /= 2;
  return x === 1;
}

function dimName(axis, rank) {
  if (axis === rank - 1) return "minor (lane) dim";
  if (axis === rank - 2) return "second-minor (sublane) dim";
  return `dim ${axis}`;
}

// Python's f"{v:.0f}" of a double: round half to even on its exact value.
function roundHalfEven(v) {
  const f = Math.floor(v);
  const diff = v - f;
  if (diff > 0.5) return f + 1;
  if (diff < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

// Decimal units as the chapter prints them: 131,072 B -> "131 KB".
export function fmtBytes(n) {
  for (const [unit, scale] of [["GB", 1e9], ["MB", 1e6], ["KB", 1e3]]) {
    if (n >= scale) return `${roundHalfEven(n / scale)} ${unit}`;
  }
  return `${n} B`;
}

// Python's f"{n / 2**20:.4g}", exactly: four significant digits, half to even, 'g' layout.
function formatG4(n, den) {
  if (n === 0) return "0";
  const N = BigInt(n);
  const D = BigInt(den);
  const pow10 = (k) => 10n ** BigInt(k);
  const below = (e) => (e >= 0 ? N < D * pow10(e) : N * pow10(-e) < D); // value < 10**e ?
  let e = Math.floor(Math.log10(n / den));
  while (below(e)) e -= 1;
  while (!below(e + 1)) e += 1;
  const digits = (exp) => {
    const shift = 3 - exp;
    const num = shift >= 0 ? N * pow10(shift) : N;
    const d = shift >= 0 ? D : D * pow10(-shift);
    let q = num / d;
    const twice = 2n * (num % d);
    if (twice > d || (twice === d && q % 2n === 1n)) q += 1n;
    return q;
  };
  let q = digits(e);
  if (q >= 10000n) {
    e += 1;
    q = digits(e);
  }
  const s = q.toString();
  if (e >= -4 && e < 4) {
    const decimals = 3 - e;
    let text;
    if (decimals <= 0) text = s + "0".repeat(-decimals);
    else {
      const padded = s.padStart(decimals + 1, "0");
      text = `${padded.slice(0, padded.length - decimals)}.${padded.slice(padded.length - decimals)}`;
    }
    return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
  }
  const mant = `${s[0]}.${s.slice(1)}`.replace(/0+$/, "").replace(/\.$/, "");
  const exp = `${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  return `${mant}e${exp}`;
}

// Binary units, as the compiler prints limits: 16,777,216 B -> "16 MiB".
export function fmtMib(n) {
  return `${formatG4(n, 2 ** 20)} MiB`;
}

// The course's one tiling table (pallas_course/tiling.py, through data.tiling): the row for a dtype `bits` wide.
export function tilingRow(data, bits) {
  const rows = data.tiling.rows;
  return rows.find((r) => bits >= r.bits) || rows[rows.length - 1];
}

// Legality of BlockSpec(blockShape) over an array of arrayShape and dtype on chip (names into `data`).
// A null block dim is squeezed (size 1 in the kernel). Mirrors legality.check_block and its to_dict().
export function checkBlock(data, arrayShape, blockShape, dtypeName, chipName) {
  const c = data.chips[chipName];
  const dt = data.dtypes[dtypeName];
  if (!c) throw new BlockSpecError(`unknown chip '${chipName}'; known chips are ${Object.keys(data.chips).join(", ")}`);
  if (!dt) throw new BlockSpecError(`unknown dtype '${dtypeName}'`);
  const shape = arrayShape.map(Number);
  const block = blockShape.map((b) => (b === null ? null : Number(b)));
  if (shape.length !== block.length) {
    throw new BlockSpecError(`block shape ${pyTuple(block)} has rank ${block.length} but the array ${pyTuple(shape)} has rank ${shape.length}`);
  }
  if (!shape.length) throw new BlockSpecError("a BlockSpec needs an array of rank >= 1");
  for (let i = 0; i < shape.length; i++) {
    const s = shape[i];
    const b = block[i];
    if (!Number.isInteger(s) || s <= 0 || (b !== null && (!Number.isInteger(b) || b <= 0))) {
      throw new BlockSpecError(`sizes must be positive: array ${pyTuple(shape)}, block ${pyTuple(block)}`);
    }
  }
  const dims = block.map((b) => (b === null ? 1 : b));
  const rank = shape.length;
  const bits = dt.bits;
  const name = dt.name;
  const checks = [];
  const S = data.sources;

  if (rank >= 2) {
    const bn = dims[rank - 1];
    const n = shape[rank - 1];
    checks.push({
      rule: "lane rule", axis: rank - 1, expression: `bn % ${c.lanes} == 0 or bn == ${n}`,
      ok: bn === n || bn % c.lanes === 0, severity: "lowering",
      message: `minor (lane) dim: block ${bn} must be a multiple of ${c.lanes} or equal the array's ${n}; ` +
        `try ${Math.max(c.lanes, floorDiv(bn, c.lanes) * c.lanes)} or ${n}`,
      source: S.lowering,
    });
    const bm = dims[rank - 2];
    const m = shape[rank - 2];
    checks.push({
      rule: "sublane rule", axis: rank - 2, expression: `bm % ${c.sublanes} == 0 or bm == ${m}`,
      ok: bm === m || bm % c.sublanes === 0, severity: "lowering",
      message: `second-minor (sublane) dim: block ${bm} must be a multiple of ${c.sublanes} or equal the array's ${m}; ` +
        `try ${Math.max(c.sublanes, floorDiv(bm, c.sublanes) * c.sublanes)} or ${m}`,
      source: S.lowering,
    });
    const tileRow = tilingRow(data, bits);
    const tile = tileRow.native_tile[0];
    if (tileRow.misaligned !== null) {
      const compile = tileRow.misaligned === "compile";
      checks.push({
        rule: "native tile", axis: rank - 2, expression: `bm % ${tile} == 0 or bm == ${m}`,
        ok: bm === m || bm % tile === 0, severity: compile ? "compile" : "note",
        message: compile
          ? `second-minor (sublane) dim: a ${name} array is tiled (${tile}, ${c.lanes}) in HBM, so block ${bm} ` +
            `must be a multiple of ${tile} or equal the array's ${m}; Mosaic rejects it at compile time`
          : `second-minor (sublane) dim: ${bm} rows of ${name} fill only part of the native ` +
            `(${tile}, ${c.lanes}) tile; legal, but a multiple of ${tile} uses whole packed vregs`,
        source: tileRow.source,
      });
    }
  } else {
    const b0 = dims[0];
    const n0 = shape[0];
    const packing = floorDiv(32, bits);
    const chunk = c.sublanes * c.lanes;
    const minTiling = c.lanes * packing;
    checks.push({
      rule: "rank-1 rule", axis: 0,
      expression: `b == ${n0} or b % ${chunk} == 0 or (b >= ${minTiling} and b is a power of 2)`,
      ok: b0 === n0 || b0 % chunk === 0 || (b0 >= minTiling && isPow2(b0)), severity: "lowering",
      message: `rank-1 block ${b0} of ${name} must equal the array's ${n0}, be a multiple of ${chunk} ` +
        `(${c.sublanes}x${c.lanes}), or be a power of 2 of at least ${minTiling} (128 x 32/${bits}); ` +
        `or reshape to 2-D`,
      source: S.lowering,
    });
  }

  const grid = shape.map((s, i) => Math.ceil(s / dims[i]));
  shape.forEach((s, axis) => {
    const b = dims[axis];
    if (b > s) {
      checks.push({
        rule: "partial block", axis, expression: `${b} <= ${s}`, ok: false, severity: "note",
        message: `${dimName(axis, rank)}: block ${b} is larger than the array's ${s}, so the single block is padded ` +
          `(out-of-bounds reads are unspecified, writes are dropped)`,
        source: S.lowering,
      });
    } else if (s % b) {
      checks.push({
        rule: "partial block", axis, expression: `${s} % ${b} == 0`, ok: false, severity: "note",
        message: `${dimName(axis, rank)}: ${s} is not a multiple of block ${b}, so the last of ${grid[axis]} blocks is ` +
          `partial (out-of-bounds reads are unspecified, writes are dropped)`,
        source: S.lowering,
      });
    }
  });
  const failed = checks.filter((k) => !k.ok);
  const violations = failed.filter((k) => k.severity !== "note").map((k) => k.message);
  return {
    array_shape: shape, block_shape: block, dtype: name, chip: c.name, checks, grid,
    block_bytes: prod(dims) * dt.itemsize,
    lowers: !failed.some((k) => k.severity === "lowering"),
    legal: violations.length === 0,
    violations,
    notes: failed.filter((k) => k.severity === "note").map((k) => k.message),
    num_blocks: prod(grid),
  };
}

// Bytes one buffer of a block takes in VMEM, as the compiler allocates it. Mirrors legality.vmem_block_bytes:
// lanes rounded up to 128; rows to a multiple of 8, or below 8 to a power of two of at least one 32-bit sublane.
export function vmemBlockBytes(data, blockShape, dtypeName) {
  const dt = data.dtypes[dtypeName];
  const { sublanes, lanes } = data.tiling;
  const dims = blockShape.map((b) => (b === null ? 1 : b));
  const cols = Math.ceil(dims[dims.length - 1] / lanes) * lanes;
  let rows = dims.length >= 2 ? dims[dims.length - 2] : 1;
  if (rows < sublanes) {
    let p = 1;
    while (p < rows) p *= 2;
    rows = Math.max(Math.max(1, floorDiv(4, dt.itemsize)), p);
  } else {
    rows = Math.ceil(rows / sublanes) * sublanes;
  }
  return prod(dims.slice(0, -2)) * rows * cols * dt.itemsize;
}

// The EX·09 working set: a copy kernel, the BlockSpec in and out (data.operands), each held `buffers` times,
// against the chip's scoped limit and VMEM. Mirrors legality.sandbox_budget(...).to_dict().
export function sandboxBudget(data, verdict, buffers = data.buffers, vmemLimitBytes = null) {
  const c = data.chips[verdict.chip];
  const ws = data.operands * buffers * vmemBlockBytes(data, verdict.block_shape, verdict.dtype);
  const limit = vmemLimitBytes || c.default_scoped_vmem_bytes;
  const fitsLimit = ws <= limit;
  const fitsCapacity = ws <= c.vmem_bytes;
  const wsText = fmtMib(ws); // binary units throughout, as the compiler prints its limits
  let text;
  if (fitsLimit) {
    text = `fits: working set ${wsText} is within the ${fmtMib(limit)} scoped VMEM limit on ${c.name}`;
  } else if (fitsCapacity) {
    text = `over the scoped limit: working set ${wsText} exceeds the ${fmtMib(limit)} scoped VMEM ` +
      `limit on ${c.name} (expect CompileTimeScopedVmemOom); it fits the ${fmtMib(c.vmem_bytes)} ` +
      `physical VMEM, so raise pltpu.CompilerParams(vmem_limit_bytes=...) or shrink the blocks`;
  } else {
    text = `does not fit: working set ${wsText} exceeds the ${fmtMib(c.vmem_bytes)} physical VMEM of one ` +
      `${c.name} TensorCore; shrink the blocks or the buffer count`;
  }
  return {
    chip: c.name, working_set_bytes: ws, vmem_bytes: c.vmem_bytes,
    default_scoped_vmem_bytes: c.default_scoped_vmem_bytes, limit_bytes: limit,
    fits_limit: fitsLimit, fits_capacity: fitsCapacity, verdict: text,
    sources: { vmem_bytes: c.sources.vmem_bytes, default_scoped_vmem_bytes: c.sources.default_scoped_vmem_bytes },
  };
}
