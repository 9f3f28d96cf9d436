"""A gate's pass or fail, computed from course.yml's criteria and the bench records.

PASS or FAIL comes only from records of a compiled run on one of the gate's TPU chips, at the criterion's
dtype and shape, taken at or after the kernel's last change. Kernel and baseline must come from the same
run (same chip, same commit, same session). Anything else is listed as ignored, with the reason, and the
criterion stays QUEUED with an `est.` row from the kernel model (course_tools.estimate).
"""

from __future__ import annotations

import collections
import functools
import subprocess
from pathlib import Path
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict

from pallas_course.bench import BenchRecord
from .bench_records import read_records
from pallas_course.chips import chip_for_device_kind
from .estimate import estimate_criterion, shape_label
from .gate_spec import Gate, MatmulCriterion, SoftmaxCriterion, gate as gate_named
from autograder.course_manifest import REPO_ROOT

Status = Literal["PASS", "FAIL", "QUEUED"]

# (record, kernel_source path) -> why the record is stale, or None when it is current.
Freshness = Callable[[BenchRecord, str], "str | None"]


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class Ignored(_Out):
    reason: str
    count: int


class Measurement(_Out):
    """What a run measured for a criterion: the ratio per shape and where it came from."""

    run_id: str
    device_kind: str
    course_commit: str | None
    timestamp: str
    ratios: dict[str, float]  # shape label -> best kernel median / baseline median
    kernel_ms: dict[str, float]
    baseline_ms: dict[str, float]
    configs: dict[str, dict[str, int | str | bool]]  # shape label -> the kernel config that was best
    # shape label -> median of the unfused chain in the same run (course_tools.bench_workloads.xla_softmax_unfused):
    # shown beside the verdict, never gated: what fusing saves, while the gate holds the kernel to XLA's own fusion
    context_ms: dict[str, float] = {}


class CriterionResult(_Out):
    id: str
    text: str
    status: Status
    row: str  # the table's "measured" cell: a measurement, or the `est.` row
    measurement: Measurement | None
    estimate: str
    estimate_ratios: dict[str, float]
    assumptions: list[str]
    ignored: list[Ignored]


class GateResult(_Out):
    id: str
    title: str
    stage: str
    status: Status
    criteria: list[CriterionResult]
    records_dir: str
    records_read: int
    footer: str


# ----------------------------------------------------------------------------------------------- freshness


class GitFreshness:
    """A record is stale when its kernel's source changed after the record's course commit (per git)."""

    def __init__(self, repo_root: Path = REPO_ROOT) -> None:
        self.repo_root = repo_root

    def _git(self, *args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(self.repo_root), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None

    @functools.cache
    def _last_change(self, path: str) -> str | None:
        out = self._git("log", "-1", "--format=%H", "--", path)
        return out.stdout.strip() or None if out and out.returncode == 0 else None

    @functools.cache
    def _reason(self, commit: str | None, path: str) -> str | None:
        if not (self.repo_root / ".git").exists():
            return None  # no history to judge by (a pip-installed package): accept
        if commit is None:
            return "course commit unknown, so it can't be checked against the kernel's last change"
        known = self._git("cat-file", "-e", f"{commit}^{{commit}}")
        if known is None or known.returncode != 0:
            return f"commit {commit[:7]} is not in this repository's history"
        last = self._last_change(path)
        if last is None:
            return None
        ancestor = self._git("merge-base", "--is-ancestor", last, commit)
        if ancestor is not None and ancestor.returncode == 1:
            return f"stale: {path} changed in {last[:7]}, after this record's commit {commit[:7]}"
        return None

    def __call__(self, record: BenchRecord, path: str) -> str | None:
        return self._reason(record.provenance.course_commit, path)


# ---------------------------------------------------------------------------------------------- admission


def _why_not(rec: BenchRecord, gate: Gate, c: MatmulCriterion | SoftmaxCriterion, fresh: Freshness) -> str | None:
    """Why `rec` cannot decide `c`, or None when it can. Checked in order; the first reason is reported."""
    if rec.status != "ok":
        return f"skipped on {rec.provenance.device_kind}: {rec.skip_reason}"
    if rec.provenance.backend != "tpu":
        return f"{rec.provenance.backend} record, not a TPU ({rec.provenance.device_kind})"
    if rec.interpret:
        return "interpret mode, not a compiled kernel"
    chip = chip_for_device_kind(rec.provenance.device_kind)
    if chip is None or chip.name not in gate.chips:
        return f"chip {rec.provenance.device_kind!r} is not one of {gate.id}'s chips ({', '.join(gate.chips)})"
    if rec.dtype != c.dtype:
        return f"dtype {rec.dtype}, the criterion needs {c.dtype}"
    if isinstance(c, MatmulCriterion):
        if rec.shape != c.shape_dict():
            return f"shape {shape_label(rec.shape)}, the criterion needs {shape_label(c.shape_dict())}"
    elif set(rec.shape) != {"rows", "cols"} or rec.shape["rows"] < c.min_rows:
        return f"shape {shape_label(rec.shape)}, the criterion needs rows >= {c.min_rows}"
    return fresh(rec, c.kernel_source)


# The impl `course bench` times beside a criterion's baseline for context only (no gate reads it): per workload.
CONTEXT_IMPL = {"softmax": "xla_softmax_unfused"}


def _measure(run: list[BenchRecord], c: MatmulCriterion | SoftmaxCriterion) -> Measurement | None:
    """Best kernel config against the baseline at each shape of one run; None if no shape has both."""
    by_shape: dict[str, dict[str, list[BenchRecord]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for rec in run:
        by_shape[shape_label(rec.shape)][rec.impl].append(rec)
    ratios, kernel_ms, baseline_ms, configs, context_ms = {}, {}, {}, {}, {}
    context = CONTEXT_IMPL.get(c.workload)
    for label, impls in by_shape.items():
        if not impls[c.kernel] or not impls[c.baseline]:
            continue
        if context and impls[context]:
            latest = max(impls[context], key=lambda r: r.provenance.timestamp)
            if latest.median_ms is not None:
                context_ms[label] = latest.median_ms
        best = min(impls[c.kernel], key=lambda r: r.median_ms or float("inf"))
        base = max(impls[c.baseline], key=lambda r: r.provenance.timestamp)  # the run's latest baseline
        assert best.median_ms is not None and base.median_ms is not None  # status "ok" guarantees both
        ratios[label] = best.median_ms / base.median_ms
        kernel_ms[label], baseline_ms[label], configs[label] = best.median_ms, base.median_ms, dict(best.config)
    if not ratios:
        return None
    last = max(run, key=lambda r: r.provenance.timestamp)
    return Measurement(
        run_id=last.run_id,
        device_kind=last.provenance.device_kind,
        course_commit=last.provenance.course_commit,
        timestamp=last.provenance.timestamp.isoformat(),
        ratios=ratios,
        kernel_ms=kernel_ms,
        baseline_ms=baseline_ms,
        configs=configs,
        context_ms=context_ms,
    )


def _verdict(c: MatmulCriterion | SoftmaxCriterion, m: Measurement) -> tuple[Status, str]:
    where = f"on {m.device_kind}, run {m.run_id}, commit {(m.course_commit or '?')[:7]}, {m.timestamp[:10]}"
    if isinstance(c, MatmulCriterion):
        ((label, r),) = m.ratios.items()
        cfg = m.configs[label]
        ok = r <= c.time_ratio_at_most
        text = (
            f"{r:.2f}x XLA at {label} {c.dtype} ({m.kernel_ms[label]:.3f} vs {m.baseline_ms[label]:.3f} ms, "
            f"blocks {cfg.get('bm')}×{cfg.get('bn')}×{cfg.get('bk')}; needs <= {c.time_ratio_at_most}x) {where}"
        )
        return ("PASS" if ok else "FAIL"), text
    worst = max(m.ratios, key=m.ratios.__getitem__)
    ok = all(r <= c.time_ratio_at_most for r in m.ratios.values())
    widths = sorted({int(k.split("×")[1]) for k in m.ratios})
    text = (
        f"{min(m.ratios.values()):.2f}x-{m.ratios[worst]:.2f}x the time of the fused XLA softmax "
        f"(jax.jit(jax.nn.softmax)) at {len(m.ratios)} shapes (widths {', '.join(map(str, widths))}; worst {worst}; "
        f"needs <= {c.time_ratio_at_most}x) {where}"
    )
    beside = {k: m.kernel_ms[k] / v for k, v in m.context_ms.items() if v > 0}
    if beside:
        text += (
            f"; beside the unfused chain (five jits: what fusion saves, not gated): "
            f"{min(beside.values()):.2f}x-{max(beside.values()):.2f}x its time at {len(beside)} shapes"
        )
    return ("PASS" if ok else "FAIL"), text


def evaluate_criterion(
    gate: Gate, c: MatmulCriterion | SoftmaxCriterion, records: list[BenchRecord], freshness: Freshness
) -> CriterionResult:
    est = estimate_criterion(gate, c)
    impls = {c.kernel, c.baseline} | ({CONTEXT_IMPL[c.workload]} if c.workload in CONTEXT_IMPL else set())
    relevant = [r for r in records if r.workload == c.workload and r.impl in impls]
    ignored: collections.Counter[str] = collections.Counter()
    runs: dict[str, list[BenchRecord]] = collections.defaultdict(list)
    for rec in relevant:
        reason = _why_not(rec, gate, c, freshness)
        if reason:
            ignored[reason] += 1
        else:
            runs[rec.run_id].append(rec)
    measured = [m for m in (_measure(run, c) for run in runs.values()) if m is not None]
    unpaired = sum(len(run) for run in runs.values()) if runs and not measured else 0
    if unpaired:
        ignored[f"no {c.kernel}/{c.baseline} pair from the same run"] += unpaired
    status: Status = "QUEUED"
    measurement = None
    row = est.summary
    if measured:
        measurement = max(measured, key=lambda m: m.timestamp)  # the newest run decides
        status, row = _verdict(c, measurement)
    return CriterionResult(
        id=c.id,
        text=c.text,
        status=status,
        row=row,
        measurement=measurement,
        estimate=est.summary,
        estimate_ratios=est.ratios,
        assumptions=list(est.assumptions),
        ignored=[Ignored(reason=k, count=v) for k, v in sorted(ignored.items(), key=lambda kv: -kv[1])],
    )


def evaluate(
    gate: Gate | str = "GATE-01",
    records_dir: Path | str | None = None,
    *,
    records: list[BenchRecord] | None = None,
    freshness: Freshness | None = None,
) -> GateResult:
    """The gate's result from the records in `records_dir` (default: the checkout's bench/), or `records`."""
    from .bench_records import default_out_dir

    gate = gate_named(gate) if isinstance(gate, str) else gate
    directory = Path(records_dir) if records_dir is not None else default_out_dir()
    if records is None:
        records = read_records(directory) if directory.exists() else []
    freshness = freshness or GitFreshness()
    results = [evaluate_criterion(gate, c, records, freshness) for c in gate.criteria]
    statuses = {r.status for r in results}
    status: Status = "FAIL" if "FAIL" in statuses else "PASS" if statuses == {"PASS"} else "QUEUED"
    try:
        shown = directory.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = directory
    footer = (
        "gates pass only on real hardware, published pass or fail · est. rows are predictions holding the "
        f"slot until a run replaces them · records in {shown}/"
    )
    return GateResult(
        id=gate.id,
        title=gate.title,
        stage=gate.stage,
        status=status,
        criteria=results,
        records_dir=str(directory),
        records_read=len(records),
        footer=footer,
    )


def render_text(result: GateResult, *, assumptions: bool = True) -> str:
    """The gate as the chapter prints it: one row per criterion, then what was ignored and what the model assumes."""
    lines = [f"{result.title}  {result.status}", ""]
    for c in result.criteria:
        lines.append(f"{c.status:<6}  {c.text}")
        lines.append(f"        {c.row}")
        for ig in c.ignored:
            lines.append(f"        ignored {ig.count} record{'s' if ig.count != 1 else ''}: {ig.reason}")
    if assumptions:
        seen: list[str] = []
        for c in result.criteria:
            if c.status == "QUEUED":
                seen += [a for a in c.assumptions if a not in seen]
        if seen:
            lines += ["", "est. model assumes:"] + [f"  - {a}" for a in seen]
    lines += ["", f"{result.records_read} records read · {result.footer}"]
    return "\n".join(lines)
