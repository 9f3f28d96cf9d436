"""Pallas errors in a student's terms: `explain(exc)` turns an exception into two or three lines (what went
wrong, the line of *their* code, the likely fix and a docs link) and keeps the full traceback as `raw`.

Every pattern below was produced for real (wrong kernels run under TPU interpret mode with jax 0.10.2, or
lowered for a TPU) and matches what jax says there. This module imports nothing from `autograder`: it runs
inside the jail that executes student code, and the grader reads its text.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

DOCS = "https://docs.jax.dev/en/latest/pallas/"
GRID_DOCS = DOCS + "grid_blockspec.html"
QUICKSTART = DOCS + "quickstart.html"
TPU_DOCS = DOCS + "tpu/details.html"
MATMUL_DOCS = DOCS + "tpu/matmul.html"
PIPELINING_DOCS = DOCS + "tpu/pipelining.html"

MAX_LINE = 240  # a student's message or source line is data: capped, never the whole of it

P = TypeVar("P")


@dataclass(frozen=True)
class Explanation:
    kind: str  # a short stable id, e.g. "revisited-output-block"
    summary: str  # two or three lines: what went wrong, where in the student's code, the fix and a link
    raw: str  # the full traceback text


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern[str]  # searched in "ExceptionType: message" (the innermost error's text)
    what: Callable[[re.Match[str]], str]
    fix: str | Callable[..., str]  # a callable reads the match (and, if it takes it, the student's line)
    docs: str


def _p(
    kind: str,
    regex: str,
    what: str | Callable[[re.Match[str]], str],
    fix: str | Callable[[re.Match[str], str], str],
    docs: str,
) -> Pattern:
    return Pattern(
        kind,
        re.compile(regex, re.S),
        what if callable(what) else (lambda m, w=what: w.format(**m.groupdict())),
        fix,
        docs,
    )


def _short(fn: str) -> str:
    return fn.rsplit(".", 1)[-1]


def _arity(m: re.Match[str]) -> str:
    fn = _short(m["fn"])
    if m["takes"] is None:
        return (
            f"the index map {fn} takes more arguments than the grid has axes: an index map receives one "
            "index per grid axis"
        )
    takes, given = m["takes"], m["given"]
    return (
        f"the index map {fn} takes {takes} argument{'s' * (takes != '1')}, but the grid has {given} "
        f"{'axis' if given == '1' else 'axes'}: an index map receives one index per grid axis"
    )


# What the TPU lowering has no rule for, in the course's words: (what it is, what compiles instead). Seen with
# jax 0.10.2 + libtpu 0.0.42.1 (FACTS.md, "The real TPU compiler on this CPU").
UNLOWERED = {
    "erfc": (
        "jax.nn.gelu(x, approximate=False) computes erfc, which has no TPU kernel lowering",
        "use jax.nn.gelu(x, approximate=True) (the tanh form), or write the exact form out with lax.erf: "
        "0.5 * x * (1 + jax.lax.erf(x / jnp.sqrt(2.0))), which compiles",
    ),
    "sort": (
        "sorting (jnp.sort, jnp.median, jnp.argsort) is not supported inside a TPU kernel",
        "compute order statistics outside the kernel, or with max/min reductions inside it",
    ),
    "cumsum": (
        "a cumulative sum (jnp.cumsum) is not supported inside a TPU kernel",
        "carry a running total across grid steps in a VMEM scratch, or prefix-sum outside the kernel",
    ),
}


def unlowered_in(primitives: set[str] | frozenset[str]) -> str | None:
    """The first primitive of a kernel body that the Pallas TPU lowering cannot compile (of those seen), if any."""
    found = sorted(set(primitives) & set(UNLOWERED))
    return found[0] if found else None


def _unlowered(m: re.Match[str]) -> str:
    prim = m["prim"]
    what = UNLOWERED.get(prim, (f"the primitive {prim} has no lowering in Pallas TPU kernels", ""))[0]
    return f"the TPU compiler refuses the kernel: {what}"


def _unlowered_fix(m: re.Match[str]) -> str:
    return UNLOWERED.get(
        m["prim"],
        (
            "",
            "compute it with operations the TPU kernel lowering supports "
            "(elementwise math, reductions, jnp.dot), or outside the kernel",
        ),
    )[1]


def _mib(text: str) -> str:
    """XLA's "128.00M" (MiB) as bytes too."""
    value, unit = float(text[:-1]), text[-1]
    factor = {"K": 2**10, "M": 2**20, "G": 2**30}.get(unit)
    return f"{text}iB ({int(round(value * factor)):,} bytes)" if factor else text


def _vmem(m: re.Match[str]) -> str:
    need, limit = _mib(m["need"] or m["need2"]), _mib(m["limit"] or m["limit2"])
    return (
        f"the TPU compiler refuses the kernel: it needs {need} of VMEM, over the limit of {limit} "
        "the compiler gives one kernel (the working set: every block x its buffers x bytes, plus scratch)"
    )


_BLOCK_DIM = re.compile(
    r"Squeezed\(\)|None|Blocked\(block_size=(?P<blocked>\d+)\)"
    r"|Element\(block_size=(?P<element>\d+)[^()]*(?:\([^()]*\))?[^()]*\)|(?P<int>\d+)"
)


def block_as_written(text: str) -> str:
    """A block shape as the student wrote it in the BlockSpec, from the lowering's rendering of it:
    `(Squeezed(), Blocked(block_size=512))` -> `(None, 512)`, an Element dimension as pl.Element(n)."""
    dims = []
    for d in _BLOCK_DIM.finditer(text):
        if d["blocked"] or d["int"]:
            dims.append(d["blocked"] or d["int"])
        elif d["element"]:
            dims.append(f"pl.Element({d['element']})")
        else:
            dims.append("None")
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def _tiling(m: re.Match[str]) -> str:
    if not m["block"]:
        return (
            "on a TPU the last two dimensions of a block must be multiples of (8, 128) (or the whole array "
            "dimension), whatever the dtype, and this BlockSpec's are not"
        )
    written = block_as_written(m["block"])
    squeezed = (
        f"; a None (squeezed) dimension is a block size of 1, so {written} reads as {written.replace('None', '1')}"
        if "None" in written
        else ""
    )
    return (
        f"block {written} of {m['arg']} (array {m['shape']}) breaks the TPU tiling rule: its "
        "last two sizes must be multiples of (8, 128), or equal the whole array dimension, whatever the "
        f"dtype{squeezed}"
    )


def _native_tile(m: re.Match[str]) -> str:
    return (
        f"block {m['block']} of an array {m['shape']} is not a whole number of the array's native "
        f"{m['tiling']} tiles: it passes the (8, 128) lowering rule, "
        "but Mosaic refuses it at compile time (E2002)"
    )


def _native_tile_fix(m: re.Match[str]) -> str:
    rows = m["tiling"].strip("()").split(",")[0]
    return f"make the block's rows a multiple of {rows} (or the whole dimension): the tiling table in LAB·1.4"


_MOSAIC_TYPES = {
    "i32": "int32",
    "i16": "int16",
    "i8": "int8",
    "f32": "float32",
    "bf16": "bfloat16",
    "f16": "float16",
    "f64": "float64",
    "i64": "int64",
    "i1": "bool",
}


# What the MXU takes (deviceless compiles, jax 0.10.2 + libtpu 0.0.42.1: course_tools.bench.mxu_passes' record and
# the course's compile-message tests): bfloat16 and float32 everywhere; int8 x int8 with an int32 result on v5e, v5p and
# v6e (v4: "Unsupported matmul RHS type"); int32 operands ("Bad lhs/rhs type") and int8 x int32 ("Mix int/int -
# NYI") nowhere; bfloat16 at precision=HIGHEST nowhere ("Bad lhs type").
MXU_TYPES = (
    "the TPU's matrix unit (MXU) multiplies bfloat16 and float32 blocks, and int8 blocks with an int32 result on "
    "v5e, v5p and v6e (not v4; float8 on newer chips: pltpu.get_tpu_info().fp8_ops_per_second)"
)


def _dot_type_what(m: re.Match[str]) -> str:
    if m["lt"]:
        return (
            f"{MXU_TYPES}, and this jnp.dot/lax.dot_general multiplies {_MOSAIC_TYPES.get(m['lt'], m['lt'])} "
            f"({m['lhs'].replace('x', ' x ')}) by {_MOSAIC_TYPES.get(m['rt'], m['rt'])} "
            f"({m['rhs'].replace('x', ' x ')})"
        )
    if m["mixed"]:
        return f"{MXU_TYPES}, and this product mixes two integer types (int8 by int32, say)"
    if m["target"]:
        return f"{MXU_TYPES}, and this chip has no {_MOSAIC_TYPES.get(m['target'], m['target'])} matrix product"
    return (
        f"{MXU_TYPES}, and refuses this product's operand type: int32 blocks, or bfloat16 blocks with "
        "precision=HIGHEST, which asks for f32 passes (jax 0.10.2 with libtpu 0.0.42.1)"
    )


def _dot_type_fix(m: re.Match[str]) -> str:
    if m["target"]:
        return (
            "on this chip multiply in bfloat16 (cast the int8 blocks to bfloat16, exact for int8's values) or "
            "float32, or run on a chip with an int8 MXU (v5e, v5p, v6e)"
        )
    return (
        "keep int8 data int8 on both sides and pass preferred_element_type=jnp.int32 (the native integer "
        "product), or cast int32 operands to float32 (or bfloat16) before the dot; on bfloat16 blocks leave "
        "precision at its default (one MXU pass multiplies bfloat16 exactly, accumulating in f32); to move "
        "values rather than multiply them (a transpose by an identity matrix), write x_ref[...].T instead"
    )


_BITS = {"float64": 64, "float32": 32, "int32": 32, "bfloat16": 16, "float16": 16, "int8": 8}


def _dims(text: str) -> tuple[str, ...]:
    return tuple(d.strip() for d in text.strip("()").split(",") if d.strip())


def _untransposed(m: re.Match[str]) -> bool:
    """A 2-D value stored into a block of its shape reversed (not square): the block as read, its transpose never
    taken (LAB·1.1's transpose without its .T)."""
    val, ref = _dims(m["val"]), _dims(m["ref"])
    return len(val) == 2 and val[::-1] == ref and val != ref


def _reduced_the_other_way(m: re.Match[str]) -> bool:
    """A value wider than its block only where the block is 1 (a (bm, 1) block given (bm, bn)): a reduction meant to
    leave that axis at 1 reduced another (axis=0 for a row's max), and broadcasting widened it back."""
    val, ref = _dims(m["val"]), _dims(m["ref"])
    return (
        len(val) == len(ref)
        and any(r == "1" and v != "1" for v, r in zip(val, ref))
        and all(v == r for v, r in zip(val, ref) if r != "1")
    )


def _store_shape(m: re.Match[str]) -> str:
    if _reduced_the_other_way(m):
        return (
            f"the kernel stores a {m['val']} value into a {m['ref']} block: the block keeps one value per row, the "
            "value has more; either the reduction runs over the wrong axis (axis=0 reduces a block's rows, and "
            "broadcasting against the block widens the result back), or the out BlockSpec's block is not the "
            "shape the kernel computes"
        )
    if _untransposed(m):
        return (
            f"the kernel stores a {m['val']} value into a {m['ref']} block: the block as it was read, its "
            "transpose never taken; the blocks move, their values do not"
        )
    return (
        f"the kernel stores a {m['val']} value into a {m['ref']} block; the kernel line is where it shows, but the "
        "usual bug is a BlockSpec: the in and out block shapes disagree"
    )


def _keepdims_fix(m: re.Match[str]) -> str:
    return (
        f"keep the reduced axis, so the result is ({m['r']}, 1) and broadcasts back over each row: jnp.max(x, "
        "axis=-1, keepdims=True), and the same for jnp.sum and jnp.mean"
    )


def _store_shape_fix(m: re.Match[str], line: str) -> str:
    if _reduced_the_other_way(m):
        return (
            "reduce over the axis the block keeps as 1 (a row's max: axis=1, keepdims=True); if the axis is "
            "right, compare the block shapes of in_specs and out_specs"
        )
    if _untransposed(m):
        return "store the block's transpose, o_ref[...] = x_ref[...].T"
    return "compare the block shapes of in_specs and out_specs (and the transpose of a block, if you take one)"


def _store_dtype_fix(m: re.Match[str], line: str) -> str:
    """A narrower ref than the value: an accumulator (+=) needs an f32 scratch, a plain store a cast. A wider ref
    than the value: usually an out_shape whose dtype was typed in instead of taken from the input."""
    ref, val = _BITS.get(m["ref"], 0), _BITS.get(m["val"], 0)
    if ref and val and ref < val and "+=" in line:
        return (
            "an accumulator needs float32: keep the running sum in an f32 scratch, scratch_shapes=[pltpu.VMEM("
            "(bm, bn), jnp.float32)], not a cast to bf16 (which rounds on every K step); cast once, on the last "
            "K step, when storing into o_ref: o_ref[...] = acc_ref[...].astype(o_ref.dtype)"
        )
    if ref and val and ref > val:
        return (
            f"out_shape (or the scratch) declares {m['ref']} while the value is {m['val']}: give out_shape the "
            "input's dtype, jax.ShapeDtypeStruct(shape, x.dtype), rather than a dtype typed in"
        )
    return "cast when storing: o_ref[...] = value.astype(o_ref.dtype)"


def _fix(pattern: Pattern, m: re.Match[str], line: str) -> str:
    if not callable(pattern.fix):
        return pattern.fix
    try:
        return pattern.fix(m, line)
    except TypeError:  # a fix that reads the match only
        return pattern.fix(m)


# One table: the first pattern that matches wins, so the specific ones come before the general ones.
PATTERNS: tuple[Pattern, ...] = (
    # ---- the TPU compiler (lowering and Mosaic), seen when a kernel is compiled for a chip
    Pattern(
        "tpu-unimplemented",
        re.compile(r"Unimplemented primitive in Pallas TPU lowering for \w+: (?P<prim>\w+)"),
        _unlowered,
        _unlowered_fix,
        TPU_DOCS,
    ),
    Pattern(
        "tpu-vmem",
        re.compile(
            r"Scoped allocation with size (?P<need>[\d.]+[KMG]) and limit (?P<limit>[\d.]+[KMG])"
            r"|Used (?P<need2>[\d.]+[KMG]) of (?P<limit2>[\d.]+[KMG]) vmem"
        ),
        _vmem,
        "use smaller blocks (in a matmul shrink bk first: it keeps the arithmetic intensity) or smaller "
        "scratch_shapes, or raise the limit with compiler_params=pltpu.CompilerParams(vmem_limit_bytes=...) below "
        "the chip's physical VMEM",
        MATMUL_DOCS,
    ),
    Pattern(
        "tpu-vmem-scratch",
        re.compile(
            r"Allocation \(size=(?P<need>\d+)\) would exceed memory \(size=(?P<limit>\d+)\)"
            r"[^\n]*?tag = 'scratch operand'"
        ),
        lambda m: (
            f"the TPU compiler refuses the kernel: its scratch buffers (scratch_shapes) need "
            f"{int(m['need']):,} bytes of VMEM, more than the chip's {int(m['limit']):,} bytes"
        ),
        "make the scratch_shapes smaller (a scratch holds what one grid step needs, e.g. an accumulator of one "
        "(bm, bn) output block, not a whole array) and drop the scratch buffers the kernel does not use",
        MATMUL_DOCS,
    ),
    Pattern(
        "tpu-vmem",
        re.compile(r"Allocation \(size=(?P<need3>\d+)\) would exceed memory \(size=(?P<limit3>\d+)\)"),
        lambda m: (
            f"the TPU compiler refuses the kernel: it needs {int(m['need3']):,} bytes of VMEM, more than the "
            f"chip's {int(m['limit3']):,} bytes (every block x its buffers x bytes, plus scratch)"
        ),
        "use smaller blocks or scratch buffers",
        MATMUL_DOCS,
    ),
    Pattern(
        "tpu-dot-type",
        re.compile(
            r"Bad lhs/rhs type: '?vector<(?P<lhs>[\dx]+)x(?P<lt>\w+)>'? '?vector<"
            r"(?P<rhs>[\dx]+)x(?P<rt>\w+)>|Bad lhs type|Bad rhs type|(?P<mixed>Mix int/int - NYI)"
            r"|Unsupported matmul RHS type on target: vector<[\dx]+x(?P<target>\w+)>"
        ),
        lambda m: "the TPU compiler refuses a matrix product in the kernel: " + _dot_type_what(m),
        _dot_type_fix,
        TPU_DOCS,
    ),
    Pattern(
        "tpu-alignment",
        re.compile(
            r"cannot statically prove that index in dimension (?P<dim>\d+) is a multiple "
            r"of (?P<n>\d+)|[Uu]naligned (?:load|store|slice|access)|not aligned to tile"
        ),
        lambda m: (
            "the TPU compiler refuses a slice of a ref: "
            + (
                f"the start of a pl.ds in dimension {m['dim']} must be a multiple of {m['n']} (the "
                f"{'lanes' if m['n'] == '128' else 'sublanes'} of a (8, 128) tile), and the compiler cannot prove "
                "it is"
                if m["dim"]
                else "it does not start on a (8, 128) tile"
            )
        ),
        lambda m: (
            f"start each pl.ds on that dimension at a multiple of {m['n'] or 128}, say so with "
            f"pl.multiple_of(start, {m['n'] or 128}), and take whole tiles (a lane slice of 128 or more); "
            "or give the BlockSpec the block each step needs, and no slice at all"
        ),
        TPU_DOCS,
    ),
    Pattern(
        "tpu-vector-type",
        re.compile(r"Invalid vector type for (?P<op>load|store)"),
        lambda m: (
            f"the TPU compiler refuses a {m['op']} in the kernel: its block's type has no TPU vector "
            "layout (float16 and 64-bit types; the TPU's vector unit holds float32, int32 and bfloat16)"
        ),
        "keep blocks in float32 or bfloat16: cast float16 data to bfloat16 (or float32) before the pallas_call",
        TPU_DOCS,
    ),
    Pattern(
        "tpu-64bit",
        re.compile(r"64-bit types are not supported|^NotImplementedError: (?P<dt>float64|int64|uint64)$", re.M),
        lambda m: (
            "the TPU compiler refuses the kernel: it computes in 64-bit types (float64, int64), which a TPU "
            "kernel does not have"
        ),
        "compute in float32 (or int32) inside the kernel: drop the .astype(jnp.float64) and the jax_enable_x64 "
        "setting from the kernel's path",
        TPU_DOCS,
    ),
    Pattern(
        "tpu-dtype",
        re.compile(r"^NotImplementedError: (?P<dt>float16|bfloat16|int8|int16|uint8|uint16|bool)$", re.M),
        lambda m: f"the TPU lowering has no {m['dt']} version of an operation in this kernel (a dot or a reduction)",
        "cast to float32 (or bfloat16) before that operation",
        TPU_DOCS,
    ),
    Pattern(
        "tpu-element",
        re.compile(r"All block dimensions must be Elements or none of them can be Elements"),
        lambda m: (
            "a BlockSpec mixes pl.Element dimensions with plain block sizes; the TPU lowering takes a block "
            "shape whose dimensions are all pl.Element or none"
        ),
        "give every dimension of that block shape as pl.Element(n), or none (plain sizes, with an index map in "
        "block units)",
        GRID_DOCS,
    ),
    Pattern(
        "tpu-verification",
        re.compile(r"internal verification error|Verification failed|failed to verify"),
        lambda m: (
            "the TPU compiler (Mosaic) refuses the kernel's body: an operation it cannot lay out on the "
            "TPU, often a dot without preferred_element_type accumulated into an f32 scratch, or a "
            "reshape of the last two dimensions"
        ),
        "accumulate with jnp.dot(a, b, preferred_element_type=jnp.float32), and keep reshapes off the last "
        "two dimensions of a block",
        TPU_DOCS,
    ),
    _p(
        "jax-not-implemented",
        r"^NotImplementedError: (?P<msg>.+)",
        lambda m: f"JAX does not implement this for a TPU kernel: {_cap(m['msg'], 200)}",
        "write it with the operations TPU kernels support (elementwise math, reductions, jnp.dot on float blocks), "
        "or outside the kernel",
        TPU_DOCS,
    ),
    _p(
        "index-map-arity",
        r"^TypeError: (?P<fn>\S*(?:<lambda>|map)\S*)\(\) (?:takes (?P<takes>\d+) positional "
        r"arguments? but (?P<given>\d+) were given|missing (?P<missing>\d+) required positional)",
        _arity,
        "write each index map with one parameter per grid axis, e.g. lambda i, j, k: (i, k) for a 3-D grid",
        GRID_DOCS,
    ),
    _p(
        "kernel-arity",
        r"^TypeError: (?P<fn>\S+)\(\) (?:takes (?P<takes>\d+) positional arguments? but "
        r"(?P<given>\d+) were given|missing (?P<missing>\d+) required positional argument)",
        lambda m: (
            f"the kernel {_short(m['fn'])}() is called with one ref per input, per output and per scratch "
            "buffer, and its parameters do not match that list"
        ),
        "give the kernel one parameter per input, then per output, then per scratch_shapes entry, in that order",
        GRID_DOCS,
    ),
    _p(
        "index-map-rank",
        r"^ValueError: Index map function (?P<fn>\S+) .*?must return (?P<want>\d+) values to match "
        r"block_shape=.*?Currently returning (?P<got>\d+) values",
        "the index map {fn} returns {got} block indices, but its block shape has {want} dimensions",
        "return one block index per dimension of the block shape, e.g. lambda i: (i, 0) for a (rows, d) block",
        GRID_DOCS,
    ),
    _p(
        "out-of-bounds-block",
        r"Out-of-bounds block index (?P<index>\(.*?\)) for (?P<what>input|output) "
        r"\"?(?P<ref>[\w\[\]]+)\"? in iteration (?P<it>\(.*?\)).*?has shape (?P<shape>\(.*?\))",
        "at grid step {it} the index map of {what} {ref} asks for block {index}, which lies outside the array "
        "of shape {shape}",
        "block index times block shape must stay inside the array: check the grid (m // bm, not m) and "
        "which grid index each index map returns where",
        GRID_DOCS,
    ),
    _p(
        "revisited-output-block",
        r"Revisited block .*? of output (?P<out>\d+) in iteration (?P<it>\(.*?\))\. The "
        r"block was previously visited in iterations (?P<first>\(.*?\))",
        "a block of output {out} is written from grid step {first}, left, and visited again at step {it} "
        "(a revisited output block): its index map ignores a grid axis that is not the last one (K outermost?)",
        "put the reduction axis (K) last in the grid, so each output block's visits are consecutive",
        MATMUL_DOCS,
    ),
    _p(
        "block-rank",
        r"Block shape for (?P<arg>\S+) \(= (?P<block>.*?)\) must have the same number of "
        r"dimensions as the array shape (?P<shape>\(.*?\))",
        "the BlockSpec of {arg} has a block shape with a different number of dimensions than its array {shape}",
        "give the block shape one entry per array dimension, e.g. (bm, bn) for a 2-D array",
        GRID_DOCS,
    ),
    _p(
        "tpu-tiling",
        r"requires that the last two dimensions of your block shape are divisible by 8 and 128"
        r"(?:.*?Block spec for (?P<arg>\S+) in pallas_call .*? has block shape (?P<block>\((?:[^()]|\([^()]*\))*\)), "
        r"array shape (?P<shape>\(.*?\)))?",
        _tiling,
        "choose blocks whose last two sizes are multiples of 8 and 128, or the full dimension (for an 8-bit "
        "dtype, rows a multiple of 32: its native tile is (32, 128))",
        TPU_DOCS,
    ),
    _p(
        "tpu-tiling",
        r"E2002: CompileTimeMosaicMisalignedBlockAndTiling:.*?Operand of shape (?P<shape>\(.*?\)) has "
        r"tiling (?P<tiling>\(\d+, \d+\)), but its block shape (?P<block>\(.*?\)) is not divisible",
        _native_tile,
        _native_tile_fix,
        TPU_DOCS,
    ),
    _p(
        "store-dtype",
        r"Invalid dtype for `swap`\. Ref dtype: (?P<ref>\w+)\. Value dtype: (?P<val>\w+)",
        "the kernel stores a {val} value into a {ref} ref",
        _store_dtype_fix,
        QUICKSTART,
    ),
    _p(
        "store-shape",
        r"Invalid shape for `swap`\. Ref shape: (?P<ref>\(.*?\))\..*?Value shape: (?P<val>\(.*?\))",
        _store_shape,
        _store_shape_fix,
        GRID_DOCS,
    ),
    # LAB·1.3's Hint 2: "keepdims=True so it broadcasts back over the row"; (r,) against (r, d) lines up with d
    _p(
        "reduced-without-keepdims",
        r"Incompatible shapes for broadcasting: shapes=\[\((?P<r>\d+), (?P<d>\d+)\), \((?P=r),\)\]",
        "a ({r},) value meets a ({r}, {d}) block: a reduction over the last axis without keepdims=True leaves each "
        "row's value in a 1-D array, and broadcasting lines a 1-D array up with the last axis (the features), not "
        "the rows",
        _keepdims_fix,
        QUICKSTART,
    ),
    _p(
        "reduced-without-keepdims",
        r"Incompatible shapes for broadcasting: shapes=\[\((?P<r>\d+),\), \((?P=r), (?P<d>\d+)\)\]",
        "a ({r},) value meets a ({r}, {d}) block: a reduction over the last axis without keepdims=True leaves each "
        "row's value in a 1-D array, and broadcasting lines a 1-D array up with the last axis (the features), not "
        "the rows",
        _keepdims_fix,
        QUICKSTART,
    ),
    _p(
        "ref-as-array",
        r"TransformedRefs cannot be abstractified|'AbstractRef' object has no attribute|"
        r"requires ndarray or scalar arguments, got <class '[\w.]*Tracer'>|"
        r"a Ref can't be passed where an array is expected",
        "a ref is used as an array (x_ref.T, x_ref + y_ref, jnp.exp(x_ref)): a ref is a window onto memory, "
        "not its values",
        "read the block first: x_ref[...].T, x_ref[...] + y_ref[...]",
        QUICKSTART,
    ),
    _p(
        "old-blockspec-order",
        r"^TypeError: 'function' object is not iterable",
        "a BlockSpec got its index map where its block shape belongs: the pre-2024 argument order "
        "BlockSpec(index_map, block_shape) from old tutorials",
        "write pl.BlockSpec(block_shape, index_map), e.g. pl.BlockSpec((bm, bn), lambda i, j: (i, j))",
        GRID_DOCS,
    ),
    _p(
        "in-specs-count",
        r"Pytree for `in_specs` and `inputs` do not match.*?`in_specs` is a \w+ of length "
        r"(?P<specs>\d+) but `inputs` is a \w+ of length (?P<inputs>\d+)",
        "in_specs has {specs} BlockSpec(s) but the pallas_call is given {inputs} inputs",
        "one BlockSpec per input, in the order of the arguments",
        GRID_DOCS,
    ),
    _p(
        "grid-not-int",
        r"Grid must be a tuple of integers or jax.Array, got (?P<grid>\(.*?\))",
        "the grid {grid} holds a non-integer",
        "divide with // (m // bm), not /",
        GRID_DOCS,
    ),
    _p(
        "program-id-axis",
        r"Axis (?P<axis>\d+) is out of bounds for grid (?P<grid>\(.*?\))",
        "pl.program_id({axis}) or pl.num_programs({axis}) asks for a grid axis the grid {grid} does not have",
        "grid axes count from 0: a 3-D grid has axes 0, 1 and 2",
        GRID_DOCS,
    ),
    _p(
        "python-if-on-traced",
        r"TracerBoolConversionError|Attempted boolean conversion of traced array",
        "a Python `if` (or `and`/`or`) on a value only known while the kernel runs, such as pl.program_id",
        "use @pl.when(condition) on a nested function, or jnp.where",
        GRID_DOCS,
    ),
    _p(
        "dot-shape",
        r"dot_general requires contracting dimensions to have the same shape, got (?P<a>\(.*?\)) and "
        r"(?P<b>\(.*?\))",
        "a jnp.dot inside the kernel multiplies blocks whose inner sizes differ ({a} vs {b})",
        "the A block is (bm, bk) and the B block (bk, bn): check both BlockSpecs' block shapes",
        GRID_DOCS,
    ),
    _p(
        "out-shape",
        r"Invalid out_shape type",
        "out_shape is not a jax.ShapeDtypeStruct",
        "write out_shape=jax.ShapeDtypeStruct(shape, dtype)",
        QUICKSTART,
    ),
    # TPU interpret mode (jax 0.10.2, interpret_pallas_call.get) on a copy or index past the end of a ref (LAB·1.6)
    _p(
        "out-of-bounds",
        r"Out-of-bounds read of [^:]*: reading \[(?P<window>.*?)\] but buffer has shape (?P<shape>\(.*?\))",
        "a copy (or an index) reads past the end of its ref: the window {window} of an array of shape {shape}",
        "a window pl.ds(start, size) must end inside its array: start at i * rows_per_block, take "
        "rows_per_block rows, with rows_per_block dividing the array's length; check the offset and the grid",
        PIPELINING_DOCS,
    ),
)

_CELL = re.compile(r"^<ipython-input-|/ipykernel_\d+/|\.ipynb$")
# Frames that are never the student's: the libraries, the course's helpers, and the grader (its judge runs as
# `python -m autograder.judge.server`, a __main__ module whose frames would otherwise read as the student's file).
_LIBRARY = re.compile(
    r"[\\/](site-packages|dist-packages|pallas_course|lib[\\/]python\d[\d.]*)[\\/]|^<frozen |"
    r"[\\/]autograder[\\/](judge|jail|labs|steps)[\\/]"
)


def _cap(text: str, limit: int = MAX_LINE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _innermost(exc: BaseException) -> tuple[str, str]:
    """(type name, message) of the error that matters: interpret mode runs the kernel in a host callback
    whose JaxRuntimeError carries the real error (an IndexError, a RuntimeError) as its traceback's last line."""
    text = str(exc).strip()
    lines = [l for l in text.splitlines() if l.strip()]
    if lines and "CpuCallback error" in lines[0]:
        for line in reversed(lines):
            m = re.match(r"^(\w+(?:\.\w+)*): (.*)$", line.strip())
            if m and not line.startswith(" "):
                return m[1].rsplit(".", 1)[-1], m[2]
    return type(exc).__name__, text


def _student_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the student's own code: a notebook cell, else any frame outside the libraries."""
    frames: list[tuple[traceback.FrameSummary, str]] = []  # with the module each frame runs in
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:  # the cause chain too: JAX re-raises with a filtered traceback
        seen.add(id(e))
        tb, modules = e.__traceback__, []
        while tb is not None:
            modules.append(str(tb.tb_frame.f_globals.get("__name__", "")))
            tb = tb.tb_next
        frames = list(zip(traceback.extract_tb(e.__traceback__), modules)) + frames
        e = e.__cause__ or e.__context__
    cells = [f for f, _ in frames if _CELL.search(f.filename or "")]
    if cells:
        return cells[-1]
    # No notebook cell: a file of the student's own (a top-level module), never a frame of a package's module
    # (the grader's rebuild of the computation, the course's helpers, a library): such a place is not theirs.
    own = [f for f, module in frames if not _LIBRARY.search(f.filename or "") and "." not in module]
    return own[-1] if own else None


def located(frames: Iterable[tuple[str, int, str]]) -> traceback.FrameSummary | None:
    """The student's frame among `frames` ((file, line, function), innermost first, as JAX keeps an equation's
    traceback): a notebook cell, else a file outside the libraries; with its source line where Python has it
    (IPython registers each cell's source with linecache). Where the jail describes a computation it records
    this for each pallas_call, so that an error met later, in the grader's run of its rebuild, points at the
    student's line too."""
    import linecache

    frames = list(frames)
    cells = [f for f in frames if _CELL.search(f[0] or "")]
    own = cells or [f for f in frames if f[0] and not _LIBRARY.search(f[0])]
    if not own:
        return None
    file, line, name = own[0]
    # a notebook's own file holds JSON, not the cell's text (the tests run cells under the notebook's name)
    source = "" if file.endswith(".ipynb") else linecache.getline(file, line).strip()
    return traceback.FrameSummary(file, line, name, line=source or None)


def place_for(places: Sequence[tuple[str | None, P]], error_text: str) -> P | None:
    """Of the places where a computation's pallas_calls were launched ((kernel name, place) in order), the one an
    error came from: the one whose kernel the error names, else the only one; None where it cannot say which."""

    def one(candidates: list[P]) -> P | None:  # by equality: a FrameSummary does not hash
        return candidates[0] if candidates and all(c == candidates[0] for c in candidates) else None

    return one([place for name, place in places if name and name in error_text]) or one([p for _, p in places])


def launched_from(eqn: Any) -> traceback.FrameSummary | None:
    """The student's frame that made a jaxpr equation (a pallas_call), read off JAX's traceback of it."""
    from jax._src import source_info_util

    return located(
        (f.file_name, f.start_line, f.function_name) for f in source_info_util.user_frames(eqn.source_info.traceback)
    )


def launched_at(closed: Any) -> list[tuple[str | None, traceback.FrameSummary]]:
    """(kernel name, the student's frame) of each pallas_call in a traced computation (a ClosedJaxpr), nested
    jaxprs included, in order; only those whose traceback reaches the student's code."""
    from jax.extend import core as jex_core

    out: list[tuple[str | None, traceback.FrameSummary]] = []

    def walk(j: Any) -> None:
        for e in j.eqns:
            if e.primitive.name == "pallas_call":
                frame = launched_from(e)
                if frame is not None:
                    info = getattr(e.params.get("jaxpr"), "debug_info", None)
                    name = e.params.get("name") or (getattr(info, "func_src_info", None) or "").split(" ")[0]
                    out.append((name or None, frame))
            for sub in jex_core.jaxprs_in_params(e.params):
                walk(sub)

    walk(getattr(closed, "jaxpr", closed))
    return out


def where(frame: traceback.FrameSummary | None) -> str:
    """'  at your cell, line 4 (in transpose): <its source>', or "" for no frame."""
    if frame is None:
        return ""
    name = frame.filename or ""
    place = "your cell" if _CELL.search(name) and not name.endswith(".ipynb") else name.rsplit("/", 1)[-1]
    src = f": {_cap(frame.line, 120)}" if frame.line else ""
    return f"  at {place}, line {frame.lineno} (in {frame.name}){src}"


def _last_meaningful_line(type_name: str, message: str) -> str:
    lines = [l.strip() for l in message.splitlines() if l.strip() and not l.startswith("  File ")]
    skip = ("For simplicity, JAX has removed", "-----", "The above exception", "Traceback (most recent")
    lines = [l for l in lines if not l.startswith(skip)]
    return _cap(f"{type_name}: {lines[0]}" if lines else type_name)


STUB = "this function is still the stub: it raises NotImplementedError"
STUB_FIX = "replace `raise NotImplementedError` with your code"


def is_stub(exc: BaseException) -> bool:
    """The lab's stub, raised by the student's own code: a NotImplementedError whose raising frame is not in a
    library (JAX's lowering raises NotImplementedError for what it does not support: that is no stub)."""
    if not isinstance(exc, NotImplementedError):
        return False
    tb = exc.__traceback__
    if tb is None:
        return not str(exc).strip()
    while tb.tb_next is not None:
        tb = tb.tb_next
    return not _LIBRARY.search(tb.tb_frame.f_code.co_filename or "")


def explain(exc: BaseException, *, locate: bool = True, at: traceback.FrameSummary | None = None) -> Explanation:
    """Two or three lines a student can act on; the full traceback stays in `raw`. locate=False: no "at your
    cell" line (a compile in the grader, of a computation rebuilt from data, has no student frame). `at`: the
    student's frame where the traceback has none (the grader's run of a rebuilt computation: the place the jail
    recorded for its pallas_call)."""
    raw = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    type_name, message = _innermost(exc)
    subject = f"{type_name}: {message}" if message else type_name
    frame = (_student_frame(exc) if locate else None) or at
    at_line = where(frame)
    if is_stub(exc):
        lines = [f"✗ {STUB}"] + ([at_line] if at_line else []) + [f"  fix: {STUB_FIX} · docs: {QUICKSTART}"]
        return Explanation("not-implemented", "\n".join(lines), raw)
    for pattern in PATTERNS:
        m = pattern.regex.search(subject)
        if m:
            lines = [_cap(f"✗ {pattern.what(m)}", 400)]
            if at_line:
                lines.append(at_line)
            fix = _fix(pattern, m, (frame.line or "") if frame else "")
            lines.append(f"  fix: {fix} · docs: {pattern.docs}")
            return Explanation(pattern.kind, "\n".join(lines), raw)
    lines = [f"✗ {_last_meaningful_line(type_name, message)}"]
    if at_line:
        lines.append(at_line)
    return Explanation("unknown", "\n".join(lines), raw)
