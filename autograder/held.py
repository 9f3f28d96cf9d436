"""What one submission's grading holds of its replies: the arrays the judge's runs and the jail's plain calls
answered, decoded in the grader's process while its tests compare them.

The labs' tests compare a few MB at once (LAB·1.1's largest case is 256 x 512 f32: 0.5 MB); a notebook whose
function returns more (four extra 4000 x 4096 f32 arrays beside its answer: 262 MB per reply) would otherwise grow
the grader by what every reply holds, outside any budget. Each decoded array is counted while it lives (a
finalizer gives its bytes back when the test that held it ends); a reply that would take the submission past
MAX_HELD_BYTES is not decoded, and costs the test that asked for it, with `overrun`'s reason.
"""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import numpy as np

MAX_HELD_BYTES = 64 * 2**20


def arrays(value: Any, depth: int = 0) -> list[np.ndarray]:
    if depth > 64:
        return []
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in arrays(v, depth + 1)]
    if isinstance(value, dict):
        return [a for v in value.values() for a in arrays(v, depth + 1)]
    return []


class Held:
    """Bytes of decoded reply arrays alive now, for one submission, up to `limit`."""

    def __init__(self, limit: int = MAX_HELD_BYTES) -> None:
        self.limit = limit
        self.bytes = 0
        self.peak = 0
        self._lock = threading.Lock()  # finalizers run on whichever thread drops the last reference

    def room(self) -> int:
        """Bytes a new reply may hold now."""
        return max(0, self.limit - self.bytes)

    def overrun(self, nbytes: int) -> str | None:
        """Why a reply of `nbytes` is not kept, or None when it fits."""
        if nbytes > self.room():
            gc.collect()  # an array kept only by a reference cycle (a traceback's frames) is released now
        if nbytes <= self.room():
            return None
        return self.too_much(nbytes)

    def too_much(self, nbytes: int) -> str:
        mb = 2**20
        held = f" beside the {self.bytes / mb:.0f} MB it holds already" if self.bytes >= mb else ""
        return (
            f"returned {nbytes / mb:.0f} MB of arrays{held}, over the {self.limit / mb:.0f} MB the grader keeps "
            "of one notebook's results at once (the lab's tests compare a few MB): return only what the "
            "function is asked for"
        )

    def keep(self, value: Any) -> Any:
        """Count the arrays of `value` (decoded from a reply) while they live; returns `value`."""
        for a in arrays(value):
            n = a.nbytes
            with self._lock:
                self.bytes += n
                self.peak = max(self.peak, self.bytes)
            weakref.finalize(a, self._release, n)
        return value

    def _release(self, n: int) -> None:
        with self._lock:
            self.bytes -= n
