"""pallas_course.bench and course_tools.bench_records: median of N on a fake clock, and records refused without
full provenance."""

from __future__ import annotations

import datetime as dt
import json
import pickle

import pytest

from course_tools.bench_records import append_records, provenance, read_records, record_file_name
from pallas_course.bench import (
    BenchRecord,
    BenchRecordError,
    Provenance,
    Timing,
    collect_provenance,
    make_record,
    time_fn,
)

PROV = Provenance(
    backend="cpu",
    device_kind="cpu",
    device_count=1,
    platform_version="cpu",
    jax_version="0.10.2",
    jaxlib_version="0.10.2",
    libtpu_version=None,
    python_version="3.11.7",
    course_version="0.1.0",
    course_commit="0" * 40,
    timestamp=dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc),
)


class FakeClock:
    """Returns the given instants in order, in seconds."""

    def __init__(self, instants: list[float]) -> None:
        self.instants = list(instants)

    def __call__(self) -> float:
        return self.instants.pop(0)


def _record(**over) -> BenchRecord:
    t = Timing(samples_ms=(1.0, 2.0, 3.0), warmup=1)
    return make_record(
        t,
        workload="matmul",
        impl="matmul_acc",
        dtype="bfloat16",
        shape={"m": 8, "n": 8, "k": 8},
        config={"bm": 8, "bn": 8, "bk": 8},
        interpret=True,
        run_id="r1",
        provenance=PROV,
        **over,
    )


def test_time_fn_median_and_spread_on_fake_clock():
    """Each sample is one call's start/stop pair; the statistic is the median, the spread the IQR."""
    durations_ms = [5.0, 1.0, 4.0, 2.0, 100.0]  # one outlier the median ignores
    instants, t = [], 10.0
    for d in durations_ms:
        instants += [t, t + d / 1e3]
        t += 1.0
    calls = []
    timing = time_fn(lambda x: calls.append(x) or x, 7, warmup=2, n=5, clock=FakeClock(instants))
    assert len(calls) == 7  # 2 warmup + 5 timed
    assert timing.samples_ms == pytest.approx(durations_ms)
    assert timing.median_ms == pytest.approx(4.0)
    assert timing.iqr_ms == pytest.approx(5.0 - 2.0)  # inclusive quartiles of [1, 2, 4, 5, 100]
    assert (timing.min_ms, timing.max_ms) == pytest.approx((1.0, 100.0))
    assert timing.warmup == 2 and timing.n == 5


def test_time_fn_rejects_bad_counts():
    with pytest.raises(ValueError, match="n=0 should be >= 1"):
        time_fn(lambda: 0, n=0)


def test_record_round_trips(tmp_path):
    path = tmp_path / "run.jsonl"
    append_records(path, [_record(), _record()])
    back = read_records(tmp_path)
    assert back == [_record(), _record()]
    assert back[0].median_ms == 2.0 and back[0].method.statistic == "median"


def test_write_refuses_missing_provenance_field(tmp_path):
    """The error names the file, the line the record would have had, and the missing field."""
    path = tmp_path / "run.jsonl"
    append_records(path, [_record()])
    bad = _record().model_dump(mode="json")
    del bad["provenance"]["device_kind"]
    with pytest.raises(BenchRecordError) as info:
        append_records(path, [_record(), bad])
    msg = str(info.value)
    assert f"{path}:3:" in msg and "refused to write" in msg and "missing field provenance.device_kind" in msg
    assert len(path.read_text().splitlines()) == 1  # nothing of the failed batch was written


def test_write_refuses_a_record_built_without_validation(tmp_path):
    sneaky = BenchRecord.model_construct(**{**_record().__dict__, "dtype": ""})
    with pytest.raises(BenchRecordError, match="dtype"):
        append_records(tmp_path / "x.jsonl", [sneaky])


def test_read_refuses_hand_edited_record(tmp_path):
    path = tmp_path / "run.jsonl"
    append_records(path, [_record(), _record()])
    lines = path.read_text().splitlines()
    edited = json.loads(lines[1])
    del edited["method"]["n"]
    del edited["provenance"]["jax_version"]
    path.write_text(lines[0] + "\n" + json.dumps(edited) + "\n")
    with pytest.raises(BenchRecordError) as info:
        read_records(tmp_path)
    msg = str(info.value)
    assert f"{path}:2:" in msg
    assert "missing field method.n" in msg and "missing field provenance.jax_version" in msg


def test_read_refuses_invalid_json(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"record_version": 1,\n')
    with pytest.raises(BenchRecordError, match=r"a.jsonl:1: refused .*not valid JSON"):
        read_records(tmp_path)


def test_nullable_fields_are_still_required(tmp_path):
    """libtpu_version and course_commit may be null, but the key must be there."""
    data = _record().model_dump(mode="json")
    del data["provenance"]["libtpu_version"]
    with pytest.raises(BenchRecordError, match="missing field provenance.libtpu_version"):
        append_records(tmp_path / "x.jsonl", [data])


def test_cpu_record_cannot_claim_to_gate():
    with pytest.raises(BenchRecordError, match="only a compiled run on a real TPU may decide a gate"):
        _record(gating=True)


def test_skip_needs_a_reason():
    with pytest.raises(BenchRecordError, match="skip_reason"):
        make_record(
            None,
            workload="softmax",
            impl="softmax",
            dtype="float32",
            shape={"rows": 8, "cols": 128},
            config={},
            interpret=False,
            provenance=PROV,
        )


def test_error_survives_pickling():
    err = BenchRecordError("bench/x.jsonl", 3, ["missing field dtype"])
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_collect_provenance_here():
    prov = collect_provenance()
    assert prov.backend == "cpu" and prov.device_kind and prov.jax_version
    assert record_file_name(prov).startswith("cpu-2") and record_file_name(prov).endswith("Z.jsonl")


def test_the_checkout_s_commit_comes_from_the_tools():
    """The wheel knows no git: the commit of a checkout is course_tools' to add (`course bench` records it)."""
    import subprocess

    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert provenance().course_commit == head
    assert collect_provenance(commit="c" * 40).course_commit == "c" * 40


def test_the_grading_benchmarks_write_their_provenance() -> None:
    """What bench/grading-time.json and grading-batch.json carry beside their times: the checkout's commit,
    the versions and the machine (a name clash once made this recurse until the stack ran out)."""
    from course_tools.bench.common import grading_provenance

    prov = grading_provenance()
    assert prov["course_commit"] and prov["nbgrader_version"] and prov["cpu_count"] >= 1
    assert len(prov["load_average_1_5_15"]) == 3
    assert prov["python_bytecode"].startswith(("cached", "not cached"))


def test_lab_1_3_timing_cell_times_xla_beside_the_chain_and_says_cpu_numbers_are_cpu_numbers(monkeypatch, capsys):
    """LAB·1.3's timing cell (skipped when graded, so no notebook run reaches it): outside grading it times the
    student's softmax, XLA's own jax.jit(jax.nn.softmax) and the unfused chain, states where the numbers come from,
    says off a TPU that they are CPU numbers, and prints the model's prediction for a TPU beside them."""
    import re

    import nbformat

    from autograder.course_manifest import REPO_ROOT
    from autograder.notebook_code import load

    path = REPO_ROOT / "solutions/stage-1/lab-1.3-fused-softmax-layernorm.ipynb"
    namespace = load(path)
    (cell,) = [c.source for c in nbformat.read(path, as_version=4).cells if "unfused_softmax_bytes" in c.source]
    monkeypatch.delenv("PALLAS_COURSE_MODE")
    exec(cell, namespace)  # noqa: S102 - the course's own notebook
    out = capsys.readouterr().out
    assert re.search(
        r"^cpu \(cpu\) · jax \S+ · float32 \(512, 256\), rows_per_block=512 · warm-up 2, block_until_ready, median of 3 · "
        r"CPU NUMBERS",
        out,
        re.M,
    ), out
    for name in ("your softmax (one pallas_call)", "XLA: jax.jit(jax.nn.softmax)", "unfused chain (five jits)"):
        assert re.search(rf"^  {re.escape(name)} +\d+\.\d{{3}} ms$", out, re.M), out
    # the model's numbers: 2 and 8 trips of 32768 x 1024 x 4 bytes (plus the row statistics) at one v5e device's
    # 8.2e11 B/s, the fused kernel at the notebook's rows_per_block (128: 256 steps of 223 ns more)
    assert (
        "predicted on one v5e JAX device for float32 (32768, 1024), 8.2e+11 B/s: fused at rows_per_block=128 "
        "0.384 ms, unfused chain (bytes only) 1.310 ms" in out
    ), out
