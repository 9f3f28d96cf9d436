"""`course bench` and `course gates` through the CLI (CliRunner), on this CPU machine."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from course_tools.bench_records import read_records
from course_tools.cli import app

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"


def test_bench_quick_on_cpu_writes_non_gating_records(tmp_path):
    result = runner.invoke(
        app, ["bench", "--quick", "--only", "matmul", "--n", "2", "--warmup", "1", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "interpret mode at REDUCED shapes" in result.output and "gating: false" in result.output
    (written,) = tmp_path.glob("cpu-*.jsonl")
    records = read_records(written)
    assert {r.impl for r in records} == {"xla_dot", "matmul_acc"}
    assert all(r.status == "ok" and not r.gating and r.method.n == 2 and r.method.warmup == 1 for r in records)
    assert all(r.interpret for r in records if r.impl == "matmul_acc")
    assert len({r.run_id for r in records}) == 1 and records[0].shape == {"m": 256, "n": 256, "k": 256}

    gates = runner.invoke(app, ["gates", "--records", str(tmp_path)])
    assert gates.exit_code == 0, gates.output
    assert "GATE 01  QUEUED" in gates.output and "ignored 3 records: cpu record, not a TPU" in gates.output


def test_gates_json_on_fixture_not_in_history_stays_queued():
    """The fixture's commit is not in this repository, so its TPU numbers cannot be checked as current."""
    result = runner.invoke(app, ["gates", "--json", "--records", str(FIXTURES / "gate01-pass")])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["id"] == "GATE-01" and data["status"] == "QUEUED" and data["records_read"] == 12
    matmul = data["criteria"][0]
    assert matmul["status"] == "QUEUED" and matmul["estimate"].startswith("est. ")
    assert "not in this repository's history" in matmul["ignored"][0]["reason"]


def test_gates_refuses_a_hand_edited_record(tmp_path):
    good = (FIXTURES / "gate01-pass" / "tpu-v5e-pass.jsonl").read_text().splitlines()
    edited = json.loads(good[1])
    del edited["provenance"]["device_kind"]
    (tmp_path / "x.jsonl").write_text(good[0] + "\n" + json.dumps(edited) + "\n")
    result = runner.invoke(app, ["gates", "--records", str(tmp_path)])
    assert result.exit_code == 1
    assert "x.jsonl:2: refused a bench record: missing field provenance.device_kind" in result.output
    assert "Traceback" not in result.output


def test_gates_missing_records_dir_is_one_line_error(tmp_path):
    result = runner.invoke(app, ["gates", "--records", str(tmp_path / "nope")])
    assert result.exit_code == 1 and "not a directory" in result.output
