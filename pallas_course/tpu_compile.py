"""Compile a kernel for a TPU chip on this CPU machine with the real TPU compiler (libtpu, deviceless AOT).

Interpret mode runs a kernel on the CPU; this module asks the compiler a TPU would use whether it accepts the
kernel at all: the Pallas TPU lowering (unimplemented primitives such as erfc, sort, cumsum; the (8, 128) tiling
rule), Mosaic (layouts, its verifier) and XLA:TPU (the scoped VMEM limit). It does not run the kernel: values,
speed and races are not proven here.

Three things make a verdict trustworthy:
* interpret mode is off while the kernel is traced and compiled, whatever a notebook's `setup()` switched on
  for the process (under interpret mode the "kernel" compiled is its interpreter, which compiles for anything),
  and any pallas_call that still carries interpret parameters in its jaxpr is compiled without them;
* the topology's device is the default device while lowering: some lowerings (int32 `//`, 1-D blocks) ask the
  default device's kind and otherwise fail with "Unsupported TPU device kind: cpu";
* what is not the kernel's fault (no libtpu, a topology that will not build, a lowering that failed while
  asking JAX which device it targets) is "cannot judge", never a rejection. That is decided by the stage
  that failed (and, inside the lowering, by the JAX function the error was raised in: `asked_for_a_device`),
  never by searching the error's text, which quotes names a student chose.

Rejections are explained in the course's words by `pallas_course.errors.explain`, the translator the notebooks
use. Used by the grader (autograder.judge.compile_rule) and by LAB·1.4 to confirm the VMEM budget line.
"""

from __future__ import annotations

import functools
import os
import re
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

# Topologies that compiled with jax 0.10.2 + libtpu 0.0.42.1 (not v5e:1x1, not v7x).
TOPOLOGIES = {"v4": "v4:2x2x1", "v5e": "v5e:2x2", "v5p": "v5p:2x2x1", "v6e": "v6e:2x2"}
# Why the compiler could not be asked (CompileResult.unjudged_because): never the kernel's fault.
LIBTPU_MISSING = "libtpu missing"
NO_TOPOLOGY = "no deviceless topology"
TOPOLOGY_FAILED = "the topology could not be built"
DEVICE_QUERY = "the lowering asked for a device it could not see"


@dataclass(frozen=True)
class CompileResult:
    chip: str
    topology: str
    ok: bool
    skipped: bool = False  # the compiler could not be asked: cannot judge (see `message`)
    unjudged_because: str = ""  # for a skipped result: LIBTPU_MISSING, NO_TOPOLOGY, ... (by stage, not text)
    error_kind: str | None = None  # pallas_course.errors kind: "tpu-unimplemented", "tpu-tiling", "tpu-vmem", ...
    message: str = ""  # the compiler's own words, first relevant line (capped)
    explanation: str = ""  # the course's words: what was refused and what to change
    seconds: float = 0.0

    @property
    def rejected(self) -> bool:
        """The compiler said no (a verdict on the kernel), as opposed to ok or cannot judge."""
        return not self.ok and not self.skipped


def install_hint() -> str:
    """How to get libtpu: the one that matches the installed jax (instructors and CI have it from
    requirements.txt; a student from the course wheel's extra, pallas-from-zero[tpu])."""
    import jax

    return (
        f'libtpu is not installed: pip install "jax[tpu]=={jax.__version__}" (or the course helpers with their '
        '"[tpu]" extra), Linux x86_64/aarch64 only, ~700 MB; then restart the kernel'
    )


def available() -> bool:
    """True when libtpu is importable, so deviceless TPU compiles can run."""
    try:
        import libtpu  # noqa: F401 - imported only to see whether it is installed
    except ImportError:
        return False
    return True


def libtpu_version() -> str | None:
    import importlib.metadata

    for name in ("libtpu", "libtpu-nightly"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@functools.lru_cache(maxsize=None)
def topology_device(chip: str) -> Any:
    """The first device of `chip`'s deviceless topology (built once per process: ~0.05 s)."""
    # Quiet libtpu's start-up complaints on a machine without a TPU; setdefault: a real TPU host keeps its own.
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("TPU_HOST_BOUNDS", "1,1,1")
    # libtpu takes /tmp/libtpu_lockfile for the whole process: a second process compiling at the same time (the
    # two test workers of `-n 2`, two `--jobs` graders) gets "ABORTED: Internal error when accessing libtpu
    # multi-process lockfile". A deviceless compile touches no chip, so nothing needs that lock.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from jax.experimental import topologies

    return topologies.get_topology_desc(TOPOLOGIES[chip], "tpu").devices[0]


def _interpret_off(closed: Any) -> tuple[Any, int]:
    """`closed` (a ClosedJaxpr) with every pallas_call's interpret parameter off, and how many had it on."""
    from jax.extend import core as jex_core

    count = 0

    def fix_jaxpr(jaxpr: Any) -> Any:
        nonlocal count
        eqns = []
        for eqn in jaxpr.eqns:
            params = dict(eqn.params)
            if eqn.primitive.name == "pallas_call" and params.get("interpret"):
                params["interpret"] = False
                count += 1
            params = {k: fix_param(v) for k, v in params.items()}
            eqns.append(eqn.replace(params=params))
        return jaxpr.replace(eqns=eqns)

    def fix_param(v: Any) -> Any:
        if isinstance(v, jex_core.ClosedJaxpr):
            return jex_core.ClosedJaxpr(fix_jaxpr(v.jaxpr), v.consts)
        if isinstance(v, jex_core.Jaxpr):
            return fix_jaxpr(v)
        if isinstance(v, tuple) and v and all(isinstance(x, (jex_core.ClosedJaxpr, jex_core.Jaxpr)) for x in v):
            return tuple(fix_param(x) for x in v)
        return v

    return jex_core.ClosedJaxpr(fix_jaxpr(closed.jaxpr), closed.consts), count


# The compiler's own words worth quoting, where its first line is only a status ("RESOURCE_EXHAUSTED: E1001: ...").
_QUOTE = re.compile(r"Scoped allocation with size [\d.]+\w? and limit [\d.]+\w?|Used [\d.]+\w? of [\d.]+\w? vmem")


def _first_line(text: str, limit: int = 400) -> str:
    if m := _QUOTE.search(text):
        return m.group(0)
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _cannot_judge(chip: str, topology: str, because: str, why: str, t0: float) -> CompileResult:
    return CompileResult(
        chip,
        topology,
        False,
        skipped=True,
        unjudged_because=because,
        error_kind="cannot-judge",
        message=why,
        seconds=time.perf_counter() - t0,
    )


def compile_avals(
    fn: Callable[..., Any],
    in_avals: Sequence[Any],
    chip: str = "v5e",
    places: Sequence[tuple[str | None, Any]] | None = None,
) -> CompileResult:
    """Compile `fn` over `in_avals` (anything with .shape and .dtype) for `chip`'s topology: the verdict.
    `places`: (kernel name, traceback.FrameSummary) where the student launched each pallas_call, for the
    refusal's "at your cell" line (the grader's, from the jail's description); else read off `fn`'s trace."""
    from pallas_course.errors import explain, launched_at, place_for

    t0 = time.perf_counter()
    topology = TOPOLOGIES.get(chip)
    if topology is None:
        return _cannot_judge(
            chip, "", NO_TOPOLOGY, f"no deviceless topology for {chip}; known: {', '.join(TOPOLOGIES)}", t0
        )
    if not available():
        return _cannot_judge(chip, topology, LIBTPU_MISSING, install_hint(), t0)
    import jax
    from jax.experimental.pallas import tpu as pltpu
    from jax.extend import core as jex_core
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    try:
        device = topology_device(chip)
    except Exception as e:  # noqa: BLE001 - libtpu that cannot build the topology is not the kernel's fault
        return _cannot_judge(
            chip, topology, TOPOLOGY_FAILED, f"the topology {topology} could not be built: {_first_line(str(e))}", t0
        )
    try:
        with jax.default_device(device):
            pltpu.get_tpu_info()  # what the lowering will ask of the default device, asked first
    except Exception as e:  # noqa: BLE001 - the device cannot say what it is: nothing to judge against
        return _cannot_judge(
            chip, topology, DEVICE_QUERY, f"the compiler could not be asked: {_first_line(str(e))}", t0
        )
    sharding = NamedSharding(Mesh([device], ("x",)), PartitionSpec())
    args = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype, sharding=sharding) for a in in_avals]
    closed = None
    try:
        with pltpu.force_tpu_interpret_mode(None), jax.default_device(device):
            closed = jax.make_jaxpr(fn)(*args)
            closed, _ = _interpret_off(closed)
            jax.jit(jex_core.jaxpr_as_fun(closed)).trace(*args).lower().compile()
    except Exception as e:  # noqa: BLE001 - the compiler's error is the verdict, unless it failed asking for a device
        if asked_for_a_device(e):
            return _cannot_judge(
                chip, topology, DEVICE_QUERY, f"the compiler could not be asked: {_first_line(str(e))}", t0
            )
        if places is None:
            try:
                places = launched_at(closed) if closed is not None else []
            except Exception:  # noqa: BLE001 - a place is a courtesy; the verdict stands without it
                places = []
        explained = explain(e, locate=False, at=place_for(places, str(e)))
        return CompileResult(
            chip,
            topology,
            False,
            error_kind=explained.kind,
            message=_first_line(str(e)),
            explanation=explained.summary,
            seconds=time.perf_counter() - t0,
        )
    return CompileResult(chip, topology, True, seconds=time.perf_counter() - t0)


def _device_queries() -> dict[str, frozenset[str]]:
    """JAX's own functions that ask which device the lowering targets ({source file: function names}): a
    failure raised inside one of them means the compiler could not be asked, whatever its text says."""
    from jax._src import xla_bridge
    from jax._src.pallas.mosaic import tpu_info

    return {
        os.path.realpath(tpu_info.__file__): frozenset(
            {"get_tpu_info", "get_device_kind", "get_num_device_cores", "is_tpu_device"}
        ),
        os.path.realpath(xla_bridge.__file__): frozenset(
            {"backends", "_init_backend", "get_backend", "local_devices", "devices"}
        ),
    }


def asked_for_a_device(exc: BaseException) -> bool:
    """Did `exc` arise where JAX asks for the target device (its stage), rather than in the lowering or the
    compiler proper? Read off the frames of the error and of its causes: code locations in JAX's own files,
    never the error's text (which quotes names a student chose)."""
    queries = _device_queries()
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for frame, _ in traceback.walk_tb(e.__traceback__):
            code = frame.f_code
            names = queries.get(os.path.realpath(code.co_filename))
            if names is not None and code.co_name in names:
                return True
        e = e.__cause__ or e.__context__
    return False


def compile_for(fn: Callable[..., Any], *shapes: Any, chip: str = "v5e") -> CompileResult:
    """Compile `fn(*shapes)` (ShapeDtypeStructs) for `chip`'s topology with the real TPU compiler."""
    return compile_avals(fn, shapes, chip)


def compile_chips(
    fn: Callable[..., Any],
    in_avals: Sequence[Any],
    chips: Iterable[str],
    places: Sequence[tuple[str | None, Any]] | None = None,
) -> list[CompileResult]:
    """One verdict per chip (`places`: compile_avals's)."""
    return [compile_avals(fn, in_avals, c, places) for c in chips]
