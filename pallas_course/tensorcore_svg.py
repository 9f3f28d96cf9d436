"""One TensorCore, drawn by the course: HBM -> VMEM -> vregs -> MXU / VPU, with SMEM and the scalar unit, and why
a block's last two dims tile by (8, 128). Every number is the chip's, from course.yml (pallas_course.chips), or
the tiling table's (pallas_course.tiling); nothing is copied from a picture elsewhere.

`tensorcore_svg(chip)` is one self-contained inline SVG (no script, no external file): LAB·1.4 shows it with
`IPython.display.SVG`, the chapter site embeds the same string.
"""

from __future__ import annotations

from html import escape

from pallas_course import tiling
from pallas_course.chips import chip as chip_named

W, H = 760, 330
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


def _arrow(x1: int, y1: int, x2: int, y2: int, label: str, marker: str, *, dy: int = -6) -> str:
    return (
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{INK}" stroke-width="1.5" '
        f'marker-end="url(#{marker})" marker-start="url(#{marker})"/>'
        f'<text x="{(x1 + x2) / 2}" y="{(y1 + y2) / 2 + dy}" text-anchor="middle" font-size="10">'
        f'{escape(label)}</text>'
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def tensorcore_svg(chip: str = "v5e") -> str:
    """The picture for `chip` (a course.yml chip name)."""
    c = chip_named(chip)
    sub, lanes = tiling.SUBLANES, tiling.LANES
    t16, t8 = tiling.native_tile(16), tiling.native_tile(8)
    tid = f"tc-{c.name}"  # ids unique per chip: a page may show several
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'font-family="sans-serif" role="img" aria-labelledby="{tid}-title {tid}-desc">',
        f'<title id="{tid}-title">One TensorCore of a TPU {escape(c.name)}: where a Pallas block lives</title>',
        f'<desc id="{tid}-desc">HBM holds the arrays; the pipeline copies blocks into VMEM by DMA; the kernel loads '
        'them into vector registers (vregs) of 8 sublanes by 128 lanes; the MXU multiplies matrices, the VPU works '
        'element by element; SMEM and the scalar unit hold scalars such as grid indices.</desc>',
        f'<defs><marker id="{tid}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{INK}"/></marker></defs>',
        _box(10, 40, 150, 110, MEM, "HBM", ["the arrays, whole", f"{c.hbm_bytes_per_s / 1e9:,.0f} GB/s per chip"]),
        _box(
            230,
            40,
            170,
            110,
            MEM,
            "VMEM",
            [
                f"{_mib(c.vmem_bytes)} per core",
                f"{_mib(c.default_scoped_vmem_bytes)} default scoped",
                "the blocks: x_ref, o_ref",
                "(× buffers)",
            ],
        ),
        _box(
            470,
            40,
            130,
            110,
            MEM,
            "vregs",
            [f"each {sub} sublanes", f"× {lanes} lanes × 32 bit", f"= {sub * lanes * 4 // 1024} KiB"],
        ),
        _box(640, 10, 110, 80, COMPUTE, "MXU", [f"{c.mxu} × {c.mxu} systolic", "jnp.dot"]),
        _box(640, 110, 110, 80, COMPUTE, "VPU", [f"{sub} × {lanes} lanes", "+, exp, max, where"]),
        _box(
            230, 190, 370, 60, SCALAR, "SMEM + scalar unit", ["grid indices (pl.program_id), index maps, loop control"]
        ),
        _arrow(160, 95, 230, 95, "DMA", f"{tid}-arrow", dy=-8),
        _arrow(400, 95, 470, 95, "load / store", f"{tid}-arrow"),
        _arrow(600, 80, 640, 55, "", f"{tid}-arrow"),
        _arrow(600, 110, 640, 145, "", f"{tid}-arrow"),
        f'<text x="10" y="280" font-size="12">Why blocks tile by ({sub}, {lanes}): a block moves between VMEM and '
        f'vregs in whole vregs, {sub} rows × {lanes} lanes of 32 bits.</text>',
        f'<text x="10" y="298" font-size="12">Narrower dtypes pack rows into each 32-bit sublane: 16-bit tiles are '
        f'{t16}, 8-bit {t8} (the tiling table, LAB·1.4).</text>',
        f'<text x="10" y="318" font-size="10" fill="#666">TPU {escape(c.name)}: constants from course.yml '
        f'(pallas_course.chips; MXU: {escape(c.source("mxu")[:80])}).</text>',
        "</svg>",
    ]
    return "".join(parts)
