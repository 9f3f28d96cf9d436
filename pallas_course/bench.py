"""Timing with provenance: what the notebooks and `course bench` use to measure a kernel.

"Numbers carry provenance": every number states its chip, versions, dtype, shapes, block sizes and
method. `time_fn` measures (warmup, `jax.block_until_ready`, median of N with the spread); `make_record`
wraps a measurement in a `BenchRecord` that cannot exist without its provenance, and `validate_record`
refuses any record, made or hand-edited, that lacks a field. (Where records are kept and which commit of the
course measured them is the instructor tools' business: course_tools.bench_records.)

    t = time_fn(matmul_acc, a, b, warmup=3, n=20)
    rec = make_record(t, workload="matmul", impl="matmul_acc", dtype="bfloat16",
                      shape={"m": 4096, "n": 4096, "k": 4096}, config={"bm": 512, "bn": 1024, "bk": 1024},
                      interpret=False)
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.metadata
import json
import platform
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

Clock = Callable[[], float]
RECORD_VERSION = 1


# ----------------------------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """N wall-clock samples of one call each, in milliseconds, and how they were taken."""

    samples_ms: tuple[float, ...]
    warmup: int
    timer: str = "time.perf_counter"

    @property
    def n(self) -> int:
        return len(self.samples_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def iqr_ms(self) -> float:
        """The spread: interquartile range (0 for a single sample)."""
        if self.n < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples_ms, n=4, method="inclusive")
        return q3 - q1

    @property
    def min_ms(self) -> float:
        return min(self.samples_ms)

    @property
    def max_ms(self) -> float:
        return max(self.samples_ms)

    def __str__(self) -> str:
        return f"{self.median_ms:.3f} ms median of {self.n} (IQR {self.iqr_ms:.3f} ms, warmup {self.warmup})"


def time_fn(
    fn: Callable[..., Any], *args: Any, warmup: int = 3, n: int = 20, clock: Clock = time.perf_counter
) -> Timing:
    """Time `fn(*args)`: `warmup` untimed calls, then `n` timed calls, each waited on with block_until_ready.

    Warmup absorbs compilation and first-touch costs; `block_until_ready` makes each sample the device's
    time rather than JAX's asynchronous dispatch; the median of N resists the odd slow call, and the
    samples are kept so the spread can be reported. `clock` (seconds) is injectable for tests.
    """
    import jax

    if warmup < 0:
        raise ValueError(f"warmup={warmup} should be >= 0")
    if n < 1:
        raise ValueError(f"n={n} should be >= 1")
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(n):
        start = clock()
        jax.block_until_ready(fn(*args))
        samples.append((clock() - start) * 1e3)
    timer = getattr(clock, "__qualname__", type(clock).__name__)
    module = getattr(clock, "__module__", None)
    return Timing(samples_ms=tuple(samples), warmup=warmup, timer=f"{module}.{timer}" if module else timer)


# ---------------------------------------------------------------------------------------------- records


class _Frozen(BaseModel):
    # extra="forbid": a misspelt field in a hand-edited record is an error, not a silently ignored key.
    model_config = ConfigDict(extra="forbid", frozen=True)


class Provenance(_Frozen):
    """Where and with what a number was measured. Fields typed `X | None` are required keys that may be null."""

    backend: str = Field(min_length=1)  # jax.default_backend(): tpu, gpu, cpu
    device_kind: str = Field(min_length=1)  # the chip: "TPU v5 lite", "NVIDIA H100", "cpu"
    device_count: int = Field(ge=1)
    platform_version: str
    jax_version: str = Field(min_length=1)
    jaxlib_version: str = Field(min_length=1)
    libtpu_version: str | None  # null when libtpu is not installed
    python_version: str = Field(min_length=1)
    course_version: str = Field(min_length=1)
    course_commit: str | None  # null when not known (not a checkout, not a VCS install)
    timestamp: dt.datetime  # UTC, when the record was made


class Method(_Frozen):
    """How the number was taken."""

    warmup: int = Field(ge=0)
    n: int = Field(ge=1)
    statistic: Literal["median"]
    spread: Literal["iqr"]
    sync: Literal["jax.block_until_ready"]
    timer: str = Field(min_length=1)


class BenchRecord(_Frozen):
    """One timed configuration of one implementation. Units are in the field names."""

    record_version: Literal[1]
    run_id: str = Field(min_length=1)  # one `course bench` (or notebook) session: pairs kernel and baseline
    workload: str = Field(min_length=1)  # "matmul", "softmax"
    impl: str = Field(min_length=1)  # "matmul_acc", "xla_dot", "softmax", "xla_softmax_unfused"
    dtype: str = Field(min_length=1)
    shape: dict[str, int]  # named dims: {m, n, k} or {rows, cols}
    config: dict[str, int | str | bool]  # block sizes and the like; {} for an XLA baseline
    interpret: bool  # Pallas interpret mode: a CPU emulation, never a chip's time
    gating: bool  # may this record decide a gate? (real TPU, full shapes only)
    status: Literal["ok", "skipped"]
    skip_reason: str | None
    median_ms: float | None
    iqr_ms: float | None
    min_ms: float | None
    max_ms: float | None
    samples_ms: list[float]
    method: Method
    provenance: Provenance

    @model_validator(mode="after")
    def _consistent(self) -> "BenchRecord":
        if self.status == "ok":
            if self.median_ms is None or self.iqr_ms is None or self.min_ms is None or self.max_ms is None:
                raise ValueError("status 'ok' needs median_ms, iqr_ms, min_ms and max_ms")
            if len(self.samples_ms) != self.method.n:
                raise ValueError(f"samples_ms has {len(self.samples_ms)} samples, method.n says {self.method.n}")
        elif not self.skip_reason:
            raise ValueError("status 'skipped' needs a skip_reason")
        if self.gating and (self.provenance.backend != "tpu" or self.interpret):
            raise ValueError(
                f"gating is true but backend={self.provenance.backend!r}, interpret={self.interpret}: "
                "only a compiled run on a real TPU may decide a gate"
            )
        return self


class BenchRecordError(ValueError):
    """A record refused for missing or invalid provenance. Names the file, the line and the fields."""

    def __init__(self, path: str, line: int, problems: list[str], action: str = "read") -> None:
        super().__init__(path, line, problems, action)  # plain args: the error pickles across processes
        self.path, self.line, self.problems, self.action = path, line, problems, action

    def __str__(self) -> str:
        verb = "refused to write" if self.action == "write" else "refused"
        return (
            f"{self.path}:{self.line}: {verb} a bench record: {'; '.join(self.problems)}. "
            "A number needs its chip, versions, dtype, shapes, blocks and method: re-run `course bench` "
            "(or make_record) rather than editing records by hand"
        )


def _problems(err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"]) or "record"
        out.append(f"missing field {where}" if e["type"] == "missing" else f"{where}: {e['msg']}")
    return out


def validate_record(
    data: Mapping[str, Any] | BenchRecord, *, path: str = "<record>", line: int = 0, action: str = "read"
) -> BenchRecord:
    """`data` as a BenchRecord, or BenchRecordError naming `path`, `line` and every missing field."""
    if isinstance(data, BenchRecord):
        # Re-validate: model_construct() can build a record that skipped validation.
        data = data.model_dump(mode="json")
    try:
        return BenchRecord.model_validate(data)
    except ValidationError as err:
        raise BenchRecordError(path, line, _problems(err), action) from None


# ------------------------------------------------------------------------------------------- provenance


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@functools.cache
def installed_commit() -> str | None:
    """The course commit pip recorded when it installed this package from a repository, if any."""
    try:  # `pip install git+https://...` records the commit in direct_url.json
        text = importlib.metadata.distribution("pallas-from-zero").read_text("direct_url.json")
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id")
        return str(commit) if commit else None
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def collect_provenance(*, now: dt.datetime | None = None, commit: str | None = None) -> Provenance:
    """The provenance of a number measured now, in this process, on JAX's default device. `commit`: the course
    commit it was measured at (the instructor tools pass their checkout's); else the one pip recorded."""
    import jax
    import jaxlib

    from pallas_course import __version__

    device = jax.devices()[0]
    return Provenance(
        backend=jax.default_backend(),
        device_kind=str(device.device_kind),
        device_count=jax.device_count(),
        platform_version=str(getattr(device.client, "platform_version", "") or ""),
        jax_version=jax.__version__,
        jaxlib_version=jaxlib.__version__,
        libtpu_version=_dist_version("libtpu", "libtpu-nightly"),
        python_version=platform.python_version(),
        course_version=__version__,
        course_commit=commit or installed_commit(),
        timestamp=now or dt.datetime.now(dt.timezone.utc),
    )


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def make_record(
    timing: Timing | None,
    *,
    workload: str,
    impl: str,
    dtype: str,
    shape: Mapping[str, int],
    config: Mapping[str, int | str | bool],
    interpret: bool,
    gating: bool = False,
    skip_reason: str | None = None,
    run_id: str | None = None,
    provenance: Provenance | None = None,
) -> BenchRecord:
    """A validated record of `timing` (or of a skip, when `timing` is None and `skip_reason` says why)."""
    prov = provenance or collect_provenance()
    ok = timing is not None
    data: dict[str, Any] = {
        "record_version": RECORD_VERSION,
        "run_id": run_id or new_run_id(),
        "workload": workload,
        "impl": impl,
        "dtype": dtype,
        "shape": dict(shape),
        "config": dict(config),
        "interpret": interpret,
        "gating": gating,
        "status": "ok" if ok else "skipped",
        "skip_reason": None if ok else skip_reason,
        "median_ms": timing.median_ms if ok else None,
        "iqr_ms": timing.iqr_ms if ok else None,
        "min_ms": timing.min_ms if ok else None,
        "max_ms": timing.max_ms if ok else None,
        "samples_ms": list(timing.samples_ms) if ok else [],
        "method": {
            "warmup": timing.warmup if ok else 0,
            "n": timing.n if ok else 1,
            "statistic": "median",
            "spread": "iqr",
            "sync": "jax.block_until_ready",
            "timer": timing.timer if ok else "none",
        },
        "provenance": prov.model_dump(mode="json"),
    }
    return validate_record(data, path="<make_record>", action="write")
