"""Sessions (a jail and its judge) started ahead of the submission that will use them.

Starting one takes seconds that depend on nothing a student sent: bubblewrap, the jail's Python and the agent's
imports (IPython, jax, Pallas, the course helpers), the judge's (jax, libtpu). `start_ahead` begins that for the
next submission, so it overlaps what does not need it: the grader's own imports, reading, identifying and
restoring the notebook, and, in a batch, grading the submission before. `take` hands the session started ahead
to exactly one grading (a fresh jail per submission, as before: nothing of one student's reaches another's
session), or starts one there and then. A session waiting to be taken has run no student code.

Jails are started on one thread that lives as long as the process: the parent-death signal that ends a jail
with its grader follows the thread that started it (autograder.jail.jails).
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import threading
import time
from typing import Any

from autograder import timeline
from autograder.failures import SetupFailed
from autograder.jail.handle import JailLimits
from autograder.jail.limits import Limits
from autograder.session.session import Session

_STARTER = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="jail-starter")
_LOCK = threading.Lock()
_waiting: tuple[tuple[Any, ...], cf.Future] | None = None
_ahead: tuple[Limits, bool] | None = None  # keep_ahead's (limits, jailed): one more is started at each take


def _key(limits: Limits, cell_timeout_s: float, jailed: bool) -> tuple[Any, ...]:
    return (limits.memory_mb, limits.file_mb, float(cell_timeout_s), bool(jailed))


def _start(limits: Limits, cell_timeout_s: float, jailed: bool, wall_s: float) -> Session:
    with timeline.span("jail and judge start"):
        return Session(
            limits=JailLimits(memory_mb=limits.memory_mb, file_mb=limits.file_mb),
            cell_timeout_s=cell_timeout_s,
            deadline=time.monotonic() + wall_s,
            jailed=jailed,
        )


def start_ahead(limits: Limits, *, jailed: bool = True) -> None:
    """Start a session for the next grading under `limits` (autograder.jail.limits.Limits), unless one waits."""
    global _waiting
    key = _key(limits, limits.cell_timeout_s, jailed)
    with _LOCK:
        if _waiting is not None:
            return
        _waiting = (key, _STARTER.submit(_start, limits, limits.cell_timeout_s, jailed, limits.wall_s))


def take(limits: Limits, *, cell_timeout_s: float, jailed: bool, deadline: float) -> Session:
    """The session for one grading: the one started ahead (its clock set to this grading's `deadline`) if it
    was started for the same limits, else a new one. Raises what starting it raised (SetupFailed)."""
    global _waiting
    with _LOCK:
        waiting, _waiting = _waiting, None
    if waiting is not None and waiting[0] == _key(limits, cell_timeout_s, jailed):
        try:
            with timeline.span("wait for the jail started ahead"):
                session = waiting[1].result()
        except SetupFailed:
            session = None  # started while the submission before ran (its processes busy): once more, now
        if session is not None:
            session.restart_clock(deadline)
            if _ahead is not None:
                start_ahead(*_ahead[:1], jailed=_ahead[1])  # the next submission's, while this one is graded
            return session
        with timeline.span("jail start"):
            session = _STARTER.submit(
                _start, limits, cell_timeout_s, jailed, max(0.1, deadline - time.monotonic())
            ).result()
        if _ahead is not None:
            start_ahead(*_ahead[:1], jailed=_ahead[1])
        return session
    if waiting is not None:
        _discard(waiting[1])
    with timeline.span("jail start"):
        return _STARTER.submit(_start, limits, cell_timeout_s, jailed, max(0.1, deadline - time.monotonic())).result()


def keep_ahead(limits: Limits, *, jailed: bool = True) -> None:
    """From now on keep one session started ahead (a batch worker, or a batch graded in this process): one now,
    and one more each time one is taken. The one left when the process ends is ended then (also in a
    multiprocessing worker, whose exit runs no atexit handler but its finalizers)."""
    global _ahead
    from multiprocessing import util

    if _ahead is None:
        util.Finalize(None, discard, exitpriority=10)
    _ahead = (limits, jailed)
    start_ahead(limits, jailed=jailed)


def keep_ahead_no_more() -> None:
    """Start no more ahead (the one waiting still serves the next grading)."""
    global _ahead
    _ahead = None


def stop_ahead() -> None:
    """No more sessions started ahead; the one waiting is ended."""
    global _ahead
    _ahead = None
    discard()


def _discard(future: cf.Future) -> None:
    try:
        future.result().close()
    except Exception:  # noqa: BLE001 - it never served anyone: nothing to report
        pass


def discard() -> None:
    """End the session waiting to be taken, if any (the batch is over)."""
    global _waiting
    with _LOCK:
        waiting, _waiting = _waiting, None
    if waiting is not None:
        _discard(waiting[1])


atexit.register(discard)
