"""bench/mxu-passes.json (course_tools.bench.mxu_passes): the record's shape and provenance, and course.yml's
mxu_passes equal to what it counted. CI never runs libtpu's dump: `make mxu-passes` re-records it."""

from __future__ import annotations

import json

import pytest

from autograder.course_manifest import REPO_ROOT
from pallas_course.chips import chips
from pallas_course.cost_model import matmul_passes, step_seconds

RECORD = json.loads((REPO_ROOT / "bench" / "mxu-passes.json").read_text())
ROW_KEYS = {"chip", "dtype", "precision", "m", "k", "n", "compiles"}
COUNTED = {"vmatmul", "formats", "modes", "rows_pushed", "passes"}


def test_the_record_says_how_it_was_made() -> None:
    prov = RECORD["provenance"]
    assert {"commit", "jax", "jaxlib", "libtpu", "machine", "device"} <= set(prov)
    assert prov["jax"] == "0.10.2" and prov["libtpu"] == "0.0.42.1"
    assert RECORD["date"] and "course_tools.bench.mxu_passes" in RECORD["command"]
    assert "--xla_mosaic_dump_to" in RECORD["method"] and "an inference" in RECORD["method"]


def test_every_row_is_a_compile_with_its_count_or_the_compilers_refusal() -> None:
    assert RECORD["rows"]
    for row in RECORD["rows"]:
        assert ROW_KEYS <= set(row), row
        if row["compiles"]:
            assert COUNTED <= set(row) and row["vmatmul"] > 0 and row["rows_pushed"] > 0, row
        else:
            assert row["compiler"], row


def _rows(**match: object) -> list[dict]:
    return [r for r in RECORD["rows"] if all(r[k] == v for k, v in match.items())]


def test_the_counts_the_course_teaches() -> None:
    """128³ on v5e: 8 bfloat16 pushes, 16 float32 at DEFAULT (one pass, 8 rows a push), 96 at HIGHEST (6 passes);
    HIGH does not compile; int8 compiles on v5e/v5p/v6e and not on v4 (errors.py says the same)."""
    v5e = {(r["dtype"], r["precision"]): r for r in _rows(chip="v5e", m=128)}
    assert v5e["bfloat16", "DEFAULT"]["vmatmul"] == 8
    assert v5e["float32", "DEFAULT"]["vmatmul"] == 16 and v5e["float32", "DEFAULT"]["passes"] == 1
    assert v5e["float32", "HIGHEST"]["vmatmul"] == 96 and v5e["float32", "HIGHEST"]["passes"] == 6
    assert not v5e["float32", "HIGH"]["compiles"]
    assert all(r["compiles"] for c in ("v5e", "v5p", "v6e") for r in _rows(chip=c, dtype="int8"))
    assert not any(r["compiles"] for r in _rows(chip="v4", dtype="int8"))


@pytest.mark.parametrize("name", list(chips()))
def test_course_yml_passes_are_the_records(name: str) -> None:
    """Each measured chip's mxu_passes equal the record's at every size; v7x (no deviceless topology) is said to
    be assumed in its source."""
    c = chips()[name]
    measured = [r for r in _rows(chip=name) if r["compiles"]]
    if not measured:
        assert "assumed" in c.source("mxu_passes")
        return
    assert "course_tools.bench.mxu_passes" in c.source("mxu_passes")
    for r in measured:
        key = r["dtype"] if r["precision"] == "DEFAULT" else f"{r['dtype']}/{r['precision']}"
        assert c.mxu_passes[key] == r["passes"], (name, key, r)


def test_smallest_fed_f32_block_on_v5e_is_256() -> None:
    """The second review's F3: with 6 passes a float32 step at HIGHEST is fed at 256 on v5e (1024 with one)."""

    def fed(b: int, passes: float) -> bool:
        dma, mxu = step_seconds((2 * b * b) * 4, 2 * b**3, "v5e", passes)
        return mxu >= dma

    assert matmul_passes("float32", "v5e") == 6
    assert next(b for b in range(128, 8193, 128) if fed(b, 6)) == 256
    assert next(b for b in range(128, 8193, 128) if fed(b, 1)) == 1024
