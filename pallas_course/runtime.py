"""Where a notebook's kernels run: compiled on a TPU that can, TPU interpret mode everywhere else.

The set-up cell of every lab calls `setup()` and passes the result as `interpret=INTERP` to each
`pallas_call`. TPU interpret mode (`pltpu.InterpretParams`) is used off-TPU, not plain `interpret=True`,
because it catches what plain interpretation hides: revisited output blocks (a K-outermost matmul)
and unwritten output memory (read as NaN). Race detection (`detect_races`) is off: with one simulated core
(the default) it flags nothing even for a kernel accumulating over a "parallel" grid axis (jax 0.10.2; it does only
with `num_cores_or_threads=2`), and it costs up to 1.6x on the lab kernels. Such a kernel is caught anyway:
interpret mode runs a "parallel" axis in a shuffled order, so the accumulator's zeroing lands mid-run and the values
come out wrong (tests/test_mutants.py, the racing mutant).
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import jax
from jax.experimental.pallas import tpu as pltpu

from pallas_course.xla_flags import fast_compile_xla_flags

# Set by the grader (and by anyone who wants CPU semantics on a TPU): "tpu-interpret" forces TPU
# interpret mode even on a TPU; "auto" (the default) compiles where the chip can.
MODE_ENV = "PALLAS_COURSE_MODE"
MODES = ("auto", "tpu-interpret")

# TPU generations whose Mosaic backend cannot compile Pallas kernels (Colab's free v2-8, v3).
NO_PALLAS_TPUS = ("TPU v2", "TPU v3")


@dataclass(frozen=True)
class Runtime:
    backend: str  # jax.default_backend(): "cpu", "gpu" or "tpu"
    device_kind: str  # jax.devices()[0].device_kind, e.g. "TPU v5 lite" or "cpu"
    interpret: Any  # what to pass as pallas_call(..., interpret=...)
    reason: str  # one line saying why, printed by the set-up cell

    @property
    def compiled(self) -> bool:
        return self.interpret is False


def interpret_params() -> pltpu.InterpretParams:
    """The TPU interpret mode the course grades under: unwritten memory reads as NaN."""
    return pltpu.InterpretParams(uninitialized_memory="nan")


def _fast_interpreter_compiles() -> None:
    """Where kernels will be interpreted on the CPU, compile them as the grade does (fast_compile_xla_flags), set
    before JAX starts its backends (a flag set later is ignored). An XLA_FLAGS of the student's own wins, and a
    machine that may have a TPU keeps XLA's defaults, "tpu-interpret" asked for or not: the flags would reach the
    TPU compiler too."""
    from jax._src import xla_bridge

    flags = fast_compile_xla_flags()
    if not flags or "XLA_FLAGS" in os.environ or xla_bridge.backends_are_initialized():
        return
    if _cpu_only():
        os.environ["XLA_FLAGS"] = flags


def _cpu_only() -> bool:
    """No accelerator JAX could start: JAX_PLATFORMS names the CPU alone (set by _cpu_where_libtpu_has_no_tpu where
    libtpu finds no chip), or there is neither libtpu nor any JAX plugin (CUDA, ROCm, ...) installed."""
    import importlib.metadata
    import importlib.util

    platforms = jax.config.jax_platforms or os.environ.get("JAX_PLATFORMS", "")
    if platforms:
        return platforms == "cpu"
    if importlib.util.find_spec("libtpu") is not None or importlib.util.find_spec("jax_plugins") is not None:
        return False
    return not importlib.metadata.entry_points(group="jax_plugins")


def _cpu_where_libtpu_has_no_tpu() -> None:
    """libtpu installed (an instructor's requirements.txt, the [tpu] extra) on a machine with no TPU chip: JAX would
    first try to start a TPU runtime and print its failure. Ask for the CPU instead; a chosen platform stays."""
    import importlib.util

    if os.environ.get("JAX_PLATFORMS") or jax.config.jax_platforms or importlib.util.find_spec("libtpu") is None:
        return
    try:
        from jax._src import hardware_utils  # what jax itself asks before starting libtpu (cloud_tpu_init)

        chips, _ = hardware_utils.num_available_tpu_chips_and_device_id()
    except Exception:  # noqa: BLE001 - a private helper that moved: leave JAX to decide
        return
    if chips == 0:
        jax.config.update("jax_platforms", "cpu")


def detect(mode: str | None = None) -> Runtime:
    """Decide how kernels run here. $PALLAS_COURSE_MODE (set by the grader) wins over `mode`."""
    mode = (os.environ.get(MODE_ENV) or mode or "auto").strip().lower()
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r} is not a mode; expected one of {MODES}")
    _cpu_where_libtpu_has_no_tpu()
    _fast_interpreter_compiles()
    backend = jax.default_backend()
    kind = jax.devices()[0].device_kind
    if mode == "tpu-interpret":
        return Runtime(backend, kind, interpret_params(), f"TPU interpret mode on {kind} (mode {mode!r} asked for it)")
    if backend == "tpu":
        if kind.startswith(NO_PALLAS_TPUS):
            return Runtime(
                backend,
                kind,
                interpret_params(),
                f"{kind} cannot compile Pallas TPU kernels (v4 or newer can): "
                "falling back to TPU interpret mode, so timings here are not TPU timings",
            )
        return Runtime(backend, kind, False, f"compiling Pallas kernels for {kind}")
    return Runtime(
        backend,
        kind,
        interpret_params(),
        f"no TPU here ({backend}: {kind}): kernels run in TPU interpret mode on the CPU",
    )


_COURSE_INTERPRET: Any = None  # what setup() decided: TPU interpret params, or None where kernels compile


def compiled_on_a_tpu() -> bool:
    """Kernels compile and run on a TPU here: setup() chose no interpret mode, and JAX's backend is a TPU."""
    return _COURSE_INTERPRET is None and jax.default_backend() == "tpu"


@contextlib.contextmanager
def course_mode() -> Iterator[None]:
    """Run under the course's TPU interpret mode where it interprets (what the grade always forces)."""
    if _COURSE_INTERPRET is None:
        yield
        return
    with pltpu.force_tpu_interpret_mode(_COURSE_INTERPRET):
        try:
            yield
        except Exception:
            pltpu.reset_tpu_interpret_mode_state()
            raise


def run_under_course_mode(thunk: Callable[[], Any]) -> Any:
    """Call the student's code the way the grade does: under TPU interpret mode wherever the course interprets
    (so a pallas_call that forgot interpret=INTERP is checked like the grade checks it)."""
    with course_mode():
        return jax.block_until_ready(thunk())


@contextlib.contextmanager
def plain_interpret() -> Iterator[None]:
    """Step out of the TPU interpret mode `setup()` made the default, so `interpret=True` means plain interpret
    mode (the HLO interpreter) again: for LAB·1.2's demo of what plain interpret mode hides."""
    from jax._src import config  # jax 0.10.2 has no public switch back; force_tpu_interpret_mode swaps the same

    previous = config.pallas_tpu_interpret_mode_context_manager.swap_local(None)
    try:
        yield
    finally:
        config.pallas_tpu_interpret_mode_context_manager.set_local(previous)


def being_graded() -> bool:
    """True in the grader's kernel (and the course's tests): demo cells that grade nothing skip there."""
    return bool(os.environ.get(MODE_ENV))


class _DropCallbackTraceback(logging.Filter):
    """Interpret mode logs a 14-line traceback to stderr for every error raised inside a kernel, before the
    error itself arrives; the error is explained where it is raised, so that log line is noise here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "io_callback failed" not in record.getMessage()


def _install_notebook_display() -> None:
    """In IPython, show any failing cell as the short explanation with the traceback folded."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or os.environ.get(MODE_ENV):  # a grading kernel keeps IPython's own error display
        return
    from pallas_course.compare import CheckFailure, failure_text, show_traceback_folded

    def handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> None:
        # The message once, as the cell's error output (so the cell counts as failed for Jupyter, papermill and
        # nbgrader), then the raw traceback folded under it.
        summary = failure_text(value)
        lines = summary.splitlines() or [""]
        try:  # ipykernel's own error output, its traceback exactly these lines (no "use %tb" preamble)
            shell._showtraceback(CheckFailure, summary, [f"CheckFailure: {lines[0]}", *lines[1:]])
        except AttributeError:
            shell.showtraceback((CheckFailure, CheckFailure(summary), None), exception_only=True)
        show_traceback_folded(value)

    shell.set_custom_exc((Exception,), handler)


def _warm_interpreter() -> None:
    """Run the course's one-block kernel once under TPU interpret mode: the interpreter's first use in a process
    (jax imports its GPU interpreter too on every interpreted lowering, ~0.5 s; XLA's first CPU compile) is paid by
    the set-up cell, not by the lab's first check cell. Never when graded (the set-up cell skips it there)."""
    import jax.numpy as jnp

    from pallas_course.graded_compile import warm_kernel

    try:
        with course_mode():
            jax.block_until_ready(warm_kernel()(jnp.zeros((8, 128), jnp.float32)))
    except Exception:  # noqa: BLE001 - a warm-up that fails costs nothing; the checks report real errors
        pass


def setup(mode: str | None = None, *, quiet: bool = False) -> Any:
    """The set-up cell's one call: returns the `interpret=` value for every pallas_call.

    Where kernels are interpreted, TPU interpret mode is also switched on for every pallas_call, as the
    grade does: a call that forgets `interpret=INTERP` runs (and is checked) exactly as it will be graded.
    """
    global _COURSE_INTERPRET
    runtime = detect(mode)
    _COURSE_INTERPRET = None if runtime.compiled else runtime.interpret
    if _COURSE_INTERPRET is not None:
        pltpu.set_tpu_interpret_mode(_COURSE_INTERPRET)
    if _COURSE_INTERPRET is not None and not os.environ.get(MODE_ENV):
        from pallas_course import graded_compile

        graded_compile.warm()  # the "as graded" checks compile for the course's chips: start libtpu here
        _warm_interpreter()
    logging.getLogger("jax._src.callback").addFilter(_DropCallbackTraceback())
    _install_notebook_display()
    if not quiet:
        print(f"Pallas from Zero · {runtime.reason}")
    return runtime.interpret
