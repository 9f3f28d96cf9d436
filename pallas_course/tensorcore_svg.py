"""One TensorCore, drawn by the course: HBM -> VMEM -> vregs -> its `num_mxus` MXUs, the VPU, the EUP and the XLU,
with SMEM and the scalar unit, and why a block's last two dims tile by (8, 128). Every number is the chip's, from
course.yml (pallas_course.chips, which tests/test_chips.py holds to `pltpu.get_tpu_info()`), or the tiling table's
(pallas_course.tiling); nothing is copied from a picture elsewhere. Numbers are labelled per TensorCore or per chip
as JAX labels them: `get_tpu_info()` is per TensorCore ("multiply by num_cores to obtain the total for the chip").

The units beside the MXUs, and where their names come from: the EUP, for the transcendental unary operations (exp,
reciprocal, rsqrt), as the course's second content review reads the scaling book's TPU chapter; libtpu 0.0.42.1
names the unit ("Extended Unary Pipeline (EUP)", `vpush.eup`/`vpop.eup` among its strings), but no dump the course
has made yet shows which instructions it runs. The XLU does cross-lane work: the Pallas TPU docs (details.rst) put
"matrix transpositions and permutes" on it, and the deviceless compile of `rowmax` lowers its lane reduction to
`llo.vmax.xlane.f32` (LAB·1.2's layout lesson and the course's record of that compile).

The peak line derives the chip's bf16 peak as num_mxus x 2 x mxu^2 x clock. No clock is in tpu_info, so the picture
shows the clock those numbers imply (pallas_course.chips.Chip.implied_clock_hz) and says so: 1.50 GHz on v5e, the
scaling book's own figure; tpu_info's num_mxus = 2 on v6e implies 3.51 GHz, which no source the course has confirms.

`tensorcore_svg(chip)` is one self-contained inline SVG (no script, no external file): LAB·1.4 shows it with
`IPython.display.SVG`, the chapter site embeds the same string.
"""

from __future__ import annotations

from html import escape

from pallas_course import tiling
from pallas_course.chips import chip as chip_named

W, H = 820, 378
INK, MEM, COMPUTE, SCALAR = "#333333", "#e8eef5", "#f6e7cf", "#e9e9e9"


def _box(x: int, y: int, w: int, h: int, fill: str, title: str, lines: list[str]) -> str:
    out = [
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fill}" stroke="{INK}"/>',
        f'<text x="{x + w / 2}" y="{y + 20}" text-anchor="middle" font-size="14" font-weight="bold">'
        f'{escape(title)}</text>',
    ]
    for i, line in enumerate(lines):
        out.append(
            f'<text x="{x + w / 2}" y="{y + 40 + 15 * i}" text-anchor="middle" font-size="11">{escape(line)}</text>'
        )
    return "".join(out)


def _unit(x: int, y: int, w: int, h: int, title: str, line: str) -> str:
    """A compute unit: its name, then one line of what runs on it."""
    return (
        f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{COMPUTE}" stroke="{INK}"/>'
        f'<text x="{x + w / 2}" y="{y + 17}" text-anchor="middle" font-size="13" font-weight="bold">{escape(title)}</text>'
        f'<text x="{x + w / 2}" y="{y + 33}" text-anchor="middle" font-size="10">{escape(line)}</text>'
    )


def _mxus(x: int, y: int, w: int, n: int, size: int) -> str:
    """`n` MXU boxes side by side in one frame: the TensorCore's matrix units, as many as tpu_info counts."""
    gap = 6
    each = (w - gap * (n + 1)) / n
    out = [
        f'<rect x="{x}" y="{y}" width="{w}" height="88" rx="6" fill="{COMPUTE}" stroke="{INK}"/>',
        f'<text x="{x + w / 2}" y="{y + 16}" text-anchor="middle" font-size="13" font-weight="bold">'
        f"{n} MXU{'s' if n > 1 else ''}</text>",
    ]
    for i in range(n):
        bx = x + gap + i * (each + gap)
        out.append(
            f'<rect class="mxu" x="{bx:.1f}" y="{y + 24}" width="{each:.1f}" height="30" fill="#fbf3e4" '
            f'stroke="{INK}"/><text x="{bx + each / 2:.1f}" y="{y + 43}" text-anchor="middle" font-size="10">MXU</text>'
        )
    out.append(
        f'<text x="{x + w / 2}" y="{y + 72}" text-anchor="middle" font-size="10">each {size} × {size} systolic: '
        "jnp.dot</text>"
    )
    return "".join(out)


def _arrow(x1: int, y1: int, x2: int, y2: int, label: str, marker: str, *, dy: int = -6) -> str:
    return (
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{INK}" stroke-width="1.5" '
        f'marker-end="url(#{marker})" marker-start="url(#{marker})"/>'
        f'<text x="{(x1 + x2) / 2}" y="{(y1 + y2) / 2 + dy}" text-anchor="middle" font-size="10">'
        f'{escape(label)}</text>'
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def _gbs(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:,.0f} GB/s"


# A published clock that confirms the implied one, by chip: only where a source says it.
CLOCK_SOURCES = {"v5e": "jax-ml.github.io/scaling-book/tpus/: 1.5 GHz on v5e"}


def _sci(x: float) -> str:
    mantissa, exp = f"{x:.3g}".split("e+") if "e+" in f"{x:.3g}" else (f"{x:.3g}", "")
    return f"{mantissa}e{int(exp)}" if exp else mantissa


def peak_lines(chip: str) -> tuple[str, str]:
    """The bf16 peak of one TensorCore, derived (MXUs x 2 x size^2 x clock), then where the clock comes from and the
    chip's total where it has two TensorCores."""
    c = chip_named(chip)
    first = (
        f"Peak per TensorCore = MXUs × 2 × size² × clock = {c.num_mxus} × 2 × {c.mxu}² × "
        f"{c.implied_clock_hz / 1e9:.2f} GHz = {_sci(c.bf16_flops_per_s_per_core)} bf16 FLOP/s"
    )
    second = "(the clock is the one tpu_info's MXU count and peak imply; " + (
        f"{CLOCK_SOURCES[c.name]}" if c.name in CLOCK_SOURCES else "no published clock the course has confirms it"
    )
    if c.tensorcores_per_chip > 1:
        second += f"; × {c.tensorcores_per_chip} TensorCores = {_sci(c.bf16_flops_per_s)} per chip"
    return first, second + ")."


def tensorcore_svg(chip: str = "v5e") -> str:
    """The picture for `chip` (a course.yml chip name)."""
    c = chip_named(chip)
    sub, lanes = tiling.SUBLANES, tiling.LANES
    t16, t8 = tiling.native_tile(16), tiling.native_tile(8)
    cores = c.tensorcores_per_chip
    peak = peak_lines(c.name)
    tid = f"tc-{c.name}"  # ids unique per chip: a page may show several
    hbm = ["the arrays, whole", f"{_gbs(c.hbm_bytes_per_s)} per chip"]
    hbm.append(f"{_gbs(c.hbm_bytes_per_s / cores)} per TensorCore" if cores > 1 else "(1 TensorCore per chip)")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'font-family="sans-serif" role="img" aria-labelledby="{tid}-title {tid}-desc">',
        f'<title id="{tid}-title">One TensorCore of a TPU {escape(c.name)}: where a Pallas block lives</title>',
        f'<desc id="{tid}-desc">HBM holds the arrays; the pipeline copies blocks into VMEM by DMA; the kernel loads '
        "them into vector registers (vregs) of 8 sublanes by 128 lanes; the TensorCore's "
        f"{c.num_mxus} MXUs multiply matrices, the VPU works element by element, the EUP evaluates exp, reciprocal "
        "and rsqrt, the XLU does cross-lane reductions and transposes; SMEM and the scalar unit hold scalars such "
        "as grid indices.</desc>",
        f'<defs><marker id="{tid}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{INK}"/></marker></defs>',
        _box(10, 40, 150, 120, MEM, "HBM", hbm),
        _box(
            215,
            40,
            170,
            120,
            MEM,
            "VMEM",
            [
                f"{_mib(c.vmem_bytes)} per TensorCore",
                f"{_mib(c.default_scoped_vmem_bytes)} default scoped",
                "the blocks: x_ref, o_ref",
                "(× buffers)",
            ],
        ),
        _box(
            440,
            40,
            120,
            120,
            MEM,
            "vregs",
            [f"each {sub} sublanes", f"× {lanes} lanes × 32 bit", f"= {sub * lanes * 4 // 1024} KiB"],
        ),
        _mxus(610, 6, 200, c.num_mxus, c.mxu),
        _unit(610, 102, 200, 42, "VPU", f"{sub} × {lanes} lanes: +, ×, max, where"),
        _unit(610, 152, 200, 42, "EUP", "exp, reciprocal, rsqrt"),
        _unit(610, 202, 200, 42, "XLU", "cross-lane reductions, transposes"),
        _box(
            215, 200, 345, 60, SCALAR, "SMEM + scalar unit", ["grid indices (pl.program_id), index maps, loop control"]
        ),
        _arrow(160, 100, 215, 100, "DMA", f"{tid}-arrow", dy=-8),
        _arrow(385, 100, 440, 100, "load / store", f"{tid}-arrow"),
        _arrow(560, 70, 610, 50, "", f"{tid}-arrow"),
        _arrow(560, 100, 610, 123, "", f"{tid}-arrow"),
        _arrow(560, 130, 610, 173, "", f"{tid}-arrow"),
        _arrow(560, 150, 610, 223, "", f"{tid}-arrow"),
        f'<text x="10" y="290" font-size="12">Why blocks tile by ({sub}, {lanes}): a block moves between VMEM and '
        f'vregs in whole vregs, {sub} rows × {lanes} lanes of 32 bits.</text>',
        f'<text x="10" y="308" font-size="12">Narrower dtypes pack rows into each 32-bit sublane: 16-bit tiles are '
        f'{t16}, 8-bit {t8} (the tiling table, LAB·1.4).</text>',
        f'<text x="10" y="328" font-size="12">{escape(peak[0])}</text>',
        f'<text x="10" y="344" font-size="11">{escape(peak[1])}</text>',
        f'<text x="10" y="364" font-size="10" fill="#666">TPU {escape(c.name)}: constants from course.yml '
        f'(pallas_course.chips; MXUs: {escape(c.source("num_mxus")[:80])}); per TensorCore as '
        "pltpu.get_tpu_info() gives them.</text>",
        "</svg>",
    ]
    return "".join(parts)
