"""`course site build` without a browser: what the page is made of, and where each part comes from.

The browser half (stepping, the sandbox, the self-test, widths) is tests/test_site_browser.py.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from course_tools.cli import app
from autograder.course_manifest import manifest
from course_tools.site import content as content_mod
from course_tools.site.build import SiteError, build, gather
from course_tools.site.notebook_cells import shown_cells
from pallas_course.notebooks import strip_markers
from site_browser import built_site  # noqa: F401 - a pytest fixture, used by name

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def blocks(page: str, pattern: str) -> list[str]:
    """The text of every element matched by `pattern` (a regex over the HTML with one group)."""
    return [text_of(m) for m in re.findall(pattern, page, re.S)]


def listing_lines(page: str, figure_id: str) -> list[str]:
    fig = re.search(rf'<figure[^>]*id="{figure_id}".*?</figure>', page, re.S).group(0)
    return [
        text_of(t)
        for t in re.findall(
            r'<span class="ln [a-z]+[^"]*" data-line="\d+">'
            r'<span class="no" aria-hidden="true">\d+</span>(.*?)\n</span>',
            fig,
            re.S,
        )
    ]


def frame_lines(page: str, figure_id: str) -> list[list[int]]:
    fig = re.search(rf'<figure[^>]*id="{figure_id}".*?</figure>', page, re.S).group(0)
    return [[int(x) for x in raw.split(",") if x] for raw in re.findall(r'data-step="\d+" data-lines="([\d,]*)"', fig)]


def test_page_is_self_contained(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """One index.html: styles inline, the modules in an import map of data: URLs equal to site/js, no fetches."""
    page = built_site.read_text()
    assert "<script src" not in page and "@import" not in page
    assert re.findall(r"<link[^>]*>", page) == ['<link rel="icon" href="data:,">']  # no favicon request either
    assert not re.search(r'\bsrc="(https?:)?//', page)
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', page, re.S).group(1))["imports"]
    assert set(imports) == {f"pfz/{n}" for n in ("legality", "stepper", "sandbox", "selftest", "main")}
    for name, url in imports.items():
        source = urllib.parse.unquote(url.removeprefix("data:text/javascript;charset=utf-8,"))
        assert source == (REPO / "site" / "js" / f"{name.split('/')[1]}.js").read_text()
        assert "http" not in re.sub(r"//.*", "", source), f"{name} refers to a URL"


def test_frames_come_from_the_lab_solution():
    """EX·02/07/12 trace LAB·1.2's solution: 6 and 9 frames, the seed's first frame, lines of the notebook's cells."""
    ctx = gather()
    sched = ctx["sched"]
    assert sched.origin == manifest().lab("lab-1.2-tiled-matmul").source and sched.fallback is None
    ins = ctx["instruments"]
    assert len(ins["ex02"]["frames"]) == 6 and len(ins["ex07"]["frames"]) == 9 and len(ins["ex12"]["frames"]) == 6
    assert (
        ins["ex02"]["frames"][0]["caption"] == "DMA A0, B0 into the first slot pair; the MXU has no data yet and waits"
    )
    assert ins["ex07"]["idle"] > ins["ex02"]["idle"]
    cells = shown_cells(REPO / sched.origin)
    kernel = next(c for c in cells if c.defines("matmul_kernel")).lines
    wrapper = next(c for c in cells if c.defines("matmul")).lines
    assert list(sched.listing) == kernel + [""] + wrapper
    # the k == 0 initialisation runs in the first compute frame only
    init = next(i for i, line in enumerate(sched.listing, 1) if "zeros_like" in line)
    assert [init in f["lines"] for f in ins["ex12"]["frames"]] == [False, True, False, False, False, False]


def test_site_show_cells_verbatim_with_their_source(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """Every lab's site:show cells appear verbatim, in order, under the source-of-truth path."""
    page = built_site.read_text()
    shown = blocks(page, r'<pre class="cell [a-z]+"><code>(.*?)</code></pre>')
    expected = []
    for lab in manifest().labs:
        path = REPO / lab.source
        if path.exists():
            expected += [c.source + "\n" for c in shown_cells(path)]
            assert f"<code data-source>{lab.source}</code>" in page
    assert shown == expected
    nb = nbformat.read(REPO / "solutions/stage-1/lab-1.2-tiled-matmul.ipynb", as_version=4)
    assert "### BEGIN SOLUTION" in nb.cells[4].source and "BEGIN SOLUTION" not in page


def test_copper_and_steel_follow_the_notebook_tags(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """Kernel cells are copper, pallas_call cells steel, and a program_id line inside a kernel is steel."""
    page = built_site.read_text()
    assert re.search(r'<span class="ln sch">    k = pl\.program_id\(2\)\n</span>', page)
    assert re.search(r'<span class="ln alg">    o_ref\[\.\.\.\] = x_ref\[\.\.\.\] \+ y_ref\[\.\.\.\]\n</span>', page)
    assert re.search(r'<span class="ln sch">        grid=\(m // bm, n // bn\),\n</span>', page)


def test_gate_is_course_gates_json(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """The gate table shows what `course gates --json` says, criterion by criterion."""
    result = runner.invoke(app, ["gates", "--json"])
    assert result.exit_code == 0, result.output
    gate = json.loads(result.output)
    page = built_site.read_text()
    assert f'{gate["title"]} <span class="status {gate["status"].lower()}">{gate["status"]}</span>' in page
    for c in gate["criteria"]:
        assert html.escape(c["text"], quote=False) in page and html.escape(c["row"], quote=False) in page


def test_budget_line_confirmation_shows_the_record_with_its_provenance(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """LAB·1.4's budget line as the compiler judged it: bench/budget-line.json, row by row, with libtpu and date."""
    record = json.loads((REPO / "bench" / "budget-line.json").read_text())
    fig = re.search(r'<figure[^>]*id="budget-line".*?</figure>', built_site.read_text(), re.S).group(0)
    rows = blocks(fig, r"<tr class=\"(?:agrees|differs)\">(.*?)</tr>")
    assert len(rows) == len(record["lines"]) >= 4
    for row, line in zip(rows, record["lines"]):
        assert row.startswith(f"{line['chip']} ({line['topology']}){line['dtype']}{line['predicted_line']}"), row
    assert f"libtpu {record['provenance']['libtpu']}, jax {record['provenance']['jax']}" in text_of(fig)
    assert record["date"] in fig


def test_plan_weeks_and_deliverables_from_course_yml(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """Deliverables are course.yml's; every lab is named in the week course.yml gives it."""
    page = built_site.read_text()
    m = manifest()
    for d in m.stage.deliverables:
        assert f"<li>{html.escape(d, quote=False)}</li>" in page
    weeks = dict(re.findall(r'<h3>week (\d+) · [^<]*</h3>\s*<ul>(.*?)</ul>', page, re.S))
    for lab in m.labs:
        assert lab.code in text_of(weeks[str(lab.week)]), f"{lab.code} missing from week {lab.week}"


def copy_course(tmp: Path) -> Path:
    root = tmp / "course"
    root.mkdir()
    shutil.copy(REPO / "course.yml", root / "course.yml")
    shutil.copytree(REPO / "solutions", root / "solutions")
    return root


def test_edit_a_notebook_rebuild_the_page_updates(tmp_path):
    """A line added to the matmul kernel's cell shows in the lab block, EX·12's listing and the walk; every
    frame still lights the same code (its line numbers moved with the edit)."""
    root = copy_course(tmp_path)
    before = build(tmp_path / "before", root=root).index.read_text()
    path = root / "solutions/stage-1/lab-1.2-tiled-matmul.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "site:show" in c.metadata.get("tags", []) and "def matmul_kernel" in c.source)
    added = "    # the output block stays in VMEM across K: a carried accumulator"
    cell.source = cell.source.replace(
        "def matmul_kernel(a_ref, b_ref, o_ref):\n", f"def matmul_kernel(a_ref, b_ref, o_ref):\n{added}\n", 1
    )
    nbformat.write(nb, path)
    after = build(tmp_path / "after", root=root).index.read_text()
    assert added not in before and added.strip() in after
    lab_text = "".join(blocks(after, r'<article class="lab" id="lab-1-2">(.*?)</article>'))
    assert added in lab_text
    old_listing, new_listing = listing_lines(before, "ex12"), listing_lines(after, "ex12")
    assert new_listing == old_listing[:1] + [added] + old_listing[1:]
    lit = lambda listing, frames: [[listing[n - 1] for n in f] for f in frames]  # noqa: E731 - one local helper
    assert lit(new_listing, frame_lines(after, "ex12")) == lit(old_listing, frame_lines(before, "ex12"))
    assert added in listing_lines(after, "walk-matmul")


def test_frames_fall_back_to_reference_kernels_when_the_lab_is_missing(tmp_path):
    """Without LAB·1.2's notebook the frames come from reference_kernels.py, and the page and the CLI say so."""
    root = copy_course(tmp_path)
    (root / "solutions/stage-1/lab-1.2-tiled-matmul.ipynb").unlink()
    result = build(tmp_path / "out", root=root)
    page = result.index.read_text()
    assert (
        "autograder/labs/reference_kernels.py (reference copy: solutions/stage-1/lab-1.2-tiled-matmul.ipynb does not "
        "exist yet)" in page
    )
    assert result.frames == {"ex02": 6, "ex07": 9, "ex12": 6}
    assert any("reference_kernels.py" in n for n in result.notes)
    assert "Not written yet: solutions/stage-1/lab-1.2-tiled-matmul.ipynb does not exist." in page


def test_graded_reading_key_is_not_published(built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """The walk data's Tokamax reading (LAB·1.5's answer key) is not on the page; the two chapter walks are."""
    page = built_site.read_text()
    assert 'id="walk-matmul"' in page and 'id="walk-softmax"' in page
    assert "tokamax-lsce" not in page and "calculate_xw_tiled" not in page


def test_cli_site_build(tmp_path):
    """`course site build --out DIR` writes DIR/index.html and reports frames, labs, walks and the gate."""
    result = runner.invoke(app, ["site", "build", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "index.html").exists() and str(tmp_path / "index.html") in result.output
    assert "frames: EX·02 6, EX·07 9, EX·12 6" in result.output and "GATE 01" in result.output


def test_cli_site_build_holds_model_code_back_until_its_reveal_date(tmp_path):
    """`course site build` is the page students may see today, as the release's: a lab's model code from its
    reveal date on; `--preview` is the instructor's page with all of it, and says so."""
    import datetime as dt

    from autograder.course_manifest import manifest

    first = min(lab.reveal for lab in manifest().labs if lab.reveal)
    before = (first - dt.timedelta(days=1)).isoformat()
    result = runner.invoke(app, ["site", "build", "--out", str(tmp_path / "before"), "--today", before])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "before" / "index.html").read_text()
    assert "grid=(m // bm, n // bn, k // bk)" not in page and "appears here on" in page
    assert f"as of {before}: each lab's model code from its reveal date on" in result.output
    assert all("(stubs: reveal" in line for line in result.output.splitlines() if line.strip().startswith("LAB·"))
    result = runner.invoke(app, ["site", "build", "--out", str(tmp_path / "preview"), "--preview"])
    assert result.exit_code == 0, result.output
    assert "grid=(m // bm, n // bn, k // bk)" in (tmp_path / "preview" / "index.html").read_text()
    assert "PREVIEW: every lab's model code is on this page; do not publish it" in result.output


def test_cli_site_build_prints_nothing_alarming_without_a_tpu(tmp_path):
    """No libtpu start-up errors (TPU_WORKER_HOSTNAMES, host bounds) on a machine without a TPU chip."""
    import subprocess
    import sys

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("TPU_")}
    from pathlib import Path

    course = str(Path(sys.executable).with_name("course"))
    run = subprocess.run(
        [course, "site", "build", "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    assert "TPU_WORKER_HOSTNAMES" not in run.stderr and "host bounds" not in run.stderr, run.stderr


def test_content_names_unknown_labs_in_one_message(tmp_path):
    """A content file naming a lab course.yml lacks is refused with the lab and the labs there are."""
    text = (REPO / "site/content/stage-1.yml").read_text().replace('lab: "LAB·1.3"', 'lab: "LAB·9.9"')
    path = tmp_path / "stage-1.yml"
    path.write_text(text)
    with pytest.raises(content_mod.ContentError, match=r"lab 'LAB·9\.9' is not in course\.yml \(labs are LAB·1\.1"):
        content_mod.load(path, {lab.code for lab in manifest().labs})


def test_inline_markup_escapes_everything_else():
    """Prose markup turns into code/strong/colour spans; any HTML in the words is escaped."""
    out = str(content_mod.inline("a `x_ref[...]` <b>b</b> {alg:what} {sch:when} {lab:LAB·1.2} [docs](https://x.y/z)"))
    assert out == (
        'a <code>x_ref[...]</code> &lt;b&gt;b&lt;/b&gt; <span class="alg">what</span> '
        '<span class="sch">when</span> <a class="lab-ref" href="#lab-1-2">LAB·1.2</a> '
        '<a href="https://x.y/z">docs</a>'
    )


def test_strip_markers_keeps_everything_else():
    src = "def f(x_ref):\n    ### BEGIN SOLUTION\n    x_ref[...] = 1\n    ### END SOLUTION"
    assert strip_markers(src) == "def f(x_ref):\n    x_ref[...] = 1"


def test_a_broken_solution_is_reported_not_hidden(tmp_path):
    """A written LAB·1.2 whose matmul no longer traces stops the build with one line naming the notebook."""
    root = copy_course(tmp_path)
    path = root / "solutions/stage-1/lab-1.2-tiled-matmul.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "site:show" in c.metadata.get("tags", []) and "def matmul(" in c.source)
    cell.source = cell.source.replace("grid=(m // bm, n // bn, k // bk),", "grid=(m // bm, n // bn, k // bk, 0.5),")
    nbformat.write(nb, path)
    with pytest.raises(
        SiteError,
        match=r"solutions/stage-1/lab-1\.2-tiled-matmul\.ipynb: its definitions do not "
        r"load and trace matmul",
    ):
        build(tmp_path / "out", root=root)


def test_where_a_block_lives_draws_tpu_info_s_units(built_site):  # noqa: F811 - a pytest fixture
    """F9: the TensorCore figure on the page has tpu_info's MXU count per chip (4 on v5e, 2 on v6e), the EUP and
    the XLU, and the peak derived from them; the paragraph under it says the same."""
    from pallas_course.chips import chip
    from pallas_course.tensorcore_svg import peak_lines

    page = built_site.read_text()
    section = re.search(r'<section[^>]*id="where-a-block-lives".*?</section>', page, re.S).group(0)
    v5e, v6e = section.split('<title id="tc-v6e-title">')
    assert v5e.count('class="mxu"') == chip("v5e").num_mxus == 4
    assert v6e.count('class="mxu"') == chip("v6e").num_mxus == 2
    for unit in (">EUP<", ">XLU<", ">VPU<"):
        assert unit in v5e and unit in v6e
    assert html.escape(peak_lines("v5e")[0], quote=False) in v5e
    words = text_of(section)
    assert "counts 4 of 128 × 128 per TensorCore on v5e and 2 of 256 × 256 on v6e" in words
    assert "MXUs × 2 × size² × clock" in words
