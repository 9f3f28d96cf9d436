"""Where a notebook's kernels run: compiled on a TPU that can, TPU interpret mode everywhere else.

The set-up cell of every lab calls `setup()` and passes the result as `interpret=INTERP` to each
`pallas_call`. TPU interpret mode (`pltpu.InterpretParams`) is used off-TPU, not plain `interpret=True`,
because it catches what plain interpretation hides: revisited output blocks (a K-outermost matmul),
races, and unwritten output memory (read as NaN).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import jax
from jax.experimental.pallas import tpu as pltpu

# Set by the grader (and by anyone who wants CPU semantics on a TPU): "tpu-interpret" forces TPU
# interpret mode even on a TPU; "auto" (the default) compiles where the chip can.
MODE_ENV = "PALLAS_COURSE_MODE"
MODES = ("auto", "tpu-interpret")

# TPU generations whose Mosaic backend cannot compile Pallas kernels (Colab's free v2-8, v3).
NO_PALLAS_TPUS = ("TPU v2", "TPU v3")


@dataclass(frozen=True)
class Runtime:
    backend: str          # jax.default_backend(): "cpu", "gpu" or "tpu"
    device_kind: str      # jax.devices()[0].device_kind, e.g. "TPU v5 lite" or "cpu"
    interpret: Any        # what to pass as pallas_call(..., interpret=...)
    reason: str           # one line saying why, printed by the set-up cell

    @property
    def compiled(self) -> bool:
        return self.interpret is False


def interpret_params() -> pltpu.InterpretParams:
    """The TPU interpret mode the course grades under: unwritten memory reads as NaN."""
    return pltpu.InterpretParams(uninitialized_memory="nan")


def detect(mode: str | None = None) -> Runtime:
    """Decide how kernels run here. $PALLAS_COURSE_MODE (set by the grader) wins over `mode`."""
    mode = (os.environ.get(MODE_ENV) or mode or "auto").strip().lower()
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}={mode!r} is not a mode; expected one of {MODES}")
    backend = jax.default_backend()
    kind = jax.devices()[0].device_kind
    if mode == "tpu-interpret":
        return Runtime(backend, kind, interpret_params(), f"TPU interpret mode on {kind} (mode {mode!r} asked for it)")
    if backend == "tpu":
        if kind.startswith(NO_PALLAS_TPUS):
            return Runtime(backend, kind, interpret_params(),
                           f"{kind} cannot compile Pallas TPU kernels (v4 or newer can): "
                           "falling back to TPU interpret mode, so timings here are not TPU timings")
        return Runtime(backend, kind, False, f"compiling Pallas kernels for {kind}")
    return Runtime(backend, kind, interpret_params(),
                   f"no TPU here ({backend}: {kind}): kernels run in TPU interpret mode on the CPU")


def setup(mode: str | None = None, *, quiet: bool = False) -> Any:
    """The set-up cell's one call: returns the `interpret=` value for every pallas_call."""
    runtime = detect(mode)
    if not quiet:
        print(f"Pallas from Zero · {runtime.reason}")
    return runtime.interpret
