"""`course schedule` and `course blockspec`: the seed's numbers on the command line, JSON, one-line errors."""

from __future__ import annotations

import json
import re
import xml.dom.minidom

from typer.testing import CliRunner

from course_tools.cli import app

runner = CliRunner()
SEED = ["--m", "128", "--n", "128", "--k", "512", "--bm", "128", "--bn", "128", "--bk", "128"]


def test_schedule_double_buffered_six_frames():
    """EX·02 on the command line: 6 frames, frame 1 is the seed's sentence."""
    result = runner.invoke(app, ["schedule", "matmul", *SEED, "--buffers", "2"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert "6 frames" in lines[0]
    assert lines[1] == (
        "1/6 prologue grid step 0 · DMA A0, B0 into the first slot pair; the MXU has no data yet and waits"
    )
    assert len(lines) == 1 + 6


def test_schedule_pipeline_off_nine_frames():
    """EX·07: --buffers 1 gives 9 frames."""
    result = runner.invoke(app, ["schedule", "matmul", *SEED, "--buffers", "1"])
    assert result.exit_code == 0, result.output
    assert "9 frames" in result.output
    assert "1/9 prologue load 1 · DMA A0, B0 into VMEM; the MXU sits idle the whole transfer" in result.output


def test_schedule_json():
    """--json carries the frames with their structure."""
    result = runner.invoke(app, ["schedule", "matmul", *SEED, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["num_frames"] == 6 and data["grid"] == [1, 1, 4]
    assert data["frames"][1]["compute"] == "C = 0; C += A0·B0"
    assert data["frames"][1]["lines"] == [2, 3, 4, 5, 6, 15, 16]


def test_schedule_html_is_self_contained(tmp_path):
    """--html writes a picture with one valid SVG per frame and no scripts or remote files."""
    out = tmp_path / "s.html"
    result = runner.invoke(app, ["schedule", "matmul", *SEED, "--html", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    svgs = re.findall(r"<svg.*?</svg>", html)
    assert len(svgs) == 6
    for svg in svgs:
        xml.dom.minidom.parseString(svg)
    assert "<script" not in html and "https://" not in html


def test_schedule_errors_are_one_line():
    """Unknown kernels, foreign flags and uncovered grids exit 1 with one line, no traceback."""
    cases = [
        (["schedule", "conv"], "no lab kernel 'conv'; choose one of matmul, transpose, softmax, layernorm"),
        (
            ["schedule", "softmax", "--bk", "3"],
            "softmax does not take --bk; its sizes are --rows, --d, --rows-per-block",
        ),
        (["schedule", "matmul", "--k", "500"], "the grid does not cover the arrays"),
        (["schedule", "matmul", "--buffers", "3"], "--buffers=3: draw 1 (pipeline off) or 2 (double-buffered)"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert message in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_blockspec_seed_ex09():
    """EX·09: legal, 8 x 8 = 64 blocks, 131 KB per block, a copy kernel's 2 operands x 2 buffers = 524 KB,
    134,217,728 B on v5e."""
    result = runner.invoke(
        app, ["blockspec", "--shape", "2048,2048", "--block", "256,256", "--dtype", "bfloat16", "--chip", "v5e"]
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("legal: BlockSpec(256, 256) on the (2048, 2048) bfloat16 array, chip v5e")
    assert "grid 8 x 8 = 64 blocks" in out
    assert "bytes/block 131 KB (131,072 B)" in out
    assert "VMEM working set (copy kernel: 2 operands x 2 buffers) 524 KB (524,288 B) / 134 MB" in out
    assert "VMEM budget 134,217,728 B for v5e, source: " in out
    assert "default scoped limit 16 MiB" in out


def test_blockspec_json():
    """--json gives the verdict and the budget."""
    result = runner.invoke(
        app,
        ["blockspec", "--shape", "2048,2048", "--block", "256,256", "--dtype", "bfloat16", "--chip", "v5e", "--json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["verdict"]["legal"] is True and data["verdict"]["num_blocks"] == 64
    assert data["verdict"]["block_bytes"] == 131_072
    assert data["budget"]["working_set_bytes"] == 524_288 and data["budget"]["vmem_bytes"] == 134_217_728


def test_blockspec_illegal_names_violation():
    """An illegal block is a verdict (exit 0) that names the rule and a fix."""
    result = runner.invoke(app, ["blockspec", "--shape", "256,256", "--block", "100,128"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("illegal:")
    assert "block 100 must be a multiple of 8 or equal the array's 256; try 96 or 256" in result.output


def test_blockspec_user_errors_are_one_line():
    """Malformed shapes, ranks, chips and dtypes exit 1 with one line."""
    cases = [
        (["blockspec", "--shape", "2,a", "--block", "1"], "--shape='2,a': give comma-separated integers"),
        (["blockspec", "--shape", "256,256", "--block", "128"], "block shape (128,) has rank 1 but the array"),
        (["blockspec", "--shape", "256,256", "--block", "8,128", "--chip", "v9"], "unknown chip 'v9'"),
        (
            ["blockspec", "--shape", "256,256", "--block", "8,128", "--dtype", "floaty"],
            "--dtype='floaty' is not a dtype",
        ),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
