"""The grade step of `course grade` (autograder.doors.course_grade.COURSE_GRADE): each submission through
pipeline.COURSE_GRADE, scheduled here, on local worker processes or on Dask, and recorded as it arrives.

    plan      autograder.steps.record.plan                 what a stored record still answers (reused, not graded)
    grade     autograder.steps.pipeline.grade_payload      in this process, a local worker, or a Dask task:
              identify -> restore -> execute (cells in the jail, checks outside) -> score
    record    autograder.steps.record.record               the record and executed notebooks, kept at once

Each result is recorded as soon as it arrives, so a killed run loses nothing already graded and a re-run
grades only what is new or changed. A task gets the Submission (its bytes) and returns plain data, so Dask
workers need the course installed at the same version (checked: a result from a different grader is
refused), not a shared file system. A worker that dies is replaced and its submission tried once more; a
task that fails, or a result that cannot be saved, is that submission's grader failure (retried by the next
run); where no jail can be made at all the batch is refused before it starts (require_jail), and a jail that
fails to start for one submission (autograder.failures.SetupFailed: bubblewrap's or Python's own message, a
hello that never came while the machine was busy) is that submission's grader failure, retried by the next run,
never the batch's end; Ctrl-C and SIGTERM stop the workers and
their jails without waiting.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from autograder.fingerprint import GraderFilesGuard, GraderModified
from autograder import timeline
from autograder.steps import engines
from autograder.steps.pipeline import grade_payload
from autograder.steps.record import Outcome, plan, record, record_failure
from autograder.jail.limits import Limits
from autograder.steps.store import Store
from autograder.failures import SetupFailed
from autograder.steps.submission import Submission

__all__ = ["GraderModified", "Outcome", "PRELOAD", "grade_each", "grade_payload", "start_workers"]

# What a worker imports before its first submission: the engine, jax (the checks draw inputs with it) and
# every lab's checks (see start_workers).
PRELOAD = [
    "autograder.doors.batch",
    "autograder.steps.pipeline",
    "autograder.steps.execute",
    "jax.numpy",
    "jax.experimental.pallas",
    "nbgrader.utils",
]


def start_workers(jobs: int) -> None:
    """Start the forkserver now, so its imports (the slow part of a worker's start) overlap with ours."""
    if jobs > 1:
        from autograder.course_manifest import manifest

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD + [lab.grader for lab in manifest().labs if lab.grader])
        from multiprocessing import forkserver

        forkserver.ensure_running()


@dataclass(frozen=True)
class Finished:
    """One submission back from its task: what the task returned, or why there is nothing."""

    submission: Submission
    payload: dict[str, Any] | None = None
    failure: str | None = None  # the task raised, or its worker died twice


def _worker_start(pid: int, limits: Limits | None = None, jailed: bool = False) -> None:
    """Each local worker, as it starts: watch the grader, and keep the next submission's jail started ahead
    (autograder.session.warm: it starts while this worker grades the one before)."""
    _watch_grader(pid)
    if jailed and limits is not None:
        from autograder.session import warm

        warm.keep_ahead(limits, jailed=True)


def _watch_grader(pid: int) -> None:
    """In each local worker: if the grader process (`pid`) dies, even by SIGKILL, stop too (SIGINT makes the
    running papermill stop its kernel) instead of waiting forever for work that will never come."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(15)
                os._exit(1)
            except OSError:
                pass

    threading.Thread(target=watch, name="watch-grader", daemon=True).start()


class _LocalPool:
    """`jobs` worker processes (forkserver: the grading modules are imported once, not per submission)."""

    def __init__(self, jobs: int, limits: Limits | None = None, engine: str = engines.JAIL) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        self.jobs, self.ctx = jobs, ctx
        self.limits, self.jailed = limits, engine == engines.JAIL
        self.pool = self._new()

    def _new(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(
            max_workers=self.jobs,
            mp_context=self.ctx,
            initializer=_worker_start,
            initargs=(os.getpid(), self.limits, self.jailed),
        )

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        return self.pool.submit(fn, *args)

    def renew(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.pool = self._new()

    def as_completed(self, futures: Iterable[cf.Future]) -> Iterable[cf.Future]:
        return cf.as_completed(futures)

    def close(self, abort: bool = False) -> None:
        if abort:
            for proc in list(getattr(self.pool, "_processes", {}).values()):
                try:
                    os.kill(proc.pid, signal.SIGINT)  # the worker stops its kernel and exits
                except OSError:
                    pass
        self.pool.shutdown(wait=not abort, cancel_futures=True)


class _DaskPool:
    """The same tasks on Dask distributed: an existing scheduler, or a LocalCluster of `jobs` workers."""

    def __init__(self, scheduler: str, jobs: int) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise RuntimeError(
                "--scheduler needs dask's distributed scheduler: pip install -r requirements.txt (dask and distributed)"
            ) from None
        self.cluster = None
        if scheduler == "local":
            self.cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
            self.client = Client(self.cluster)
        else:
            self.client = Client(scheduler)

    def submit(self, fn: Callable, *args: Any) -> Any:
        return self.client.submit(fn, *args, pure=False)

    def renew(self) -> None:
        pass

    def as_completed(self, futures: Iterable[Any]) -> Iterable[Any]:
        from distributed import as_completed

        return as_completed(list(futures))

    def close(self, abort: bool = False) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def grade_each(
    submissions: Sequence[Submission],
    *,
    out_dir: Path,
    jobs: int = 1,
    force: bool = False,
    limits: Limits | None = None,
    scheduler: str | None = None,
    engine: str = engines.JAIL,
    on_outcome: Callable[[Outcome], None] | None = None,
    on_plan: Callable[[int, int], None] | None = None,
) -> list[Outcome]:
    """Grade `submissions` (reusing stored records unless `force`); outcomes come back in their order.

    `scheduler`: a Dask scheduler address, or "local" for a LocalCluster of `jobs` workers; None for
    local worker processes (`jobs` > 1) or this process (`jobs` == 1). `engine`: autograder.steps.engines' name.
    """
    limits = limits or Limits()
    engines.get(engine)
    if engine == engines.JAIL and scheduler is None:
        from autograder.jail.jails import require_jail

        require_jail()  # refuse the whole batch in one line, not each submission (Dask workers check their own)
    store = Store(out_dir)
    labels = [sub.label for sub in submissions]
    planned = plan(submissions, store, force=force)
    if on_plan:
        on_plan(len(planned.todo), len(planned.reused))
    outcomes: dict[str, Outcome] = {}
    for o in planned.reused:
        outcomes[o.label] = o
        if on_outcome:
            on_outcome(o)
    # --no-jail: a notebook can write the grader's files
    guard = None if engines.is_jailed(engine) else GraderFilesGuard()
    with _scheduled(planned.todo, limits, engine, jobs=jobs, scheduler=scheduler) as finished:
        for f in finished:
            with timeline.span("record a submission"):
                o = (
                    record(store, f.submission, f.payload)
                    if f.payload is not None
                    else record_failure(store, f.submission, f.failure or "the task returned nothing")
                )
            outcomes[o.label] = o
            if on_outcome:
                on_outcome(o)
            if guard is not None:
                guard.check(store.dir)
    return [outcomes[label] for label in dict.fromkeys(labels) if label in outcomes]


@contextlib.contextmanager
def _scheduled(
    todo: list[Submission], limits: Limits, engine: str, *, jobs: int, scheduler: str | None
) -> Iterator[Iterator[Finished]]:
    """The graded submissions as they finish: here, one after another (`jobs` 1, no scheduler), or from a
    pool; leaving early (Ctrl-C, SIGTERM, an error) stops the pool without waiting for its running tasks."""
    if not todo or (scheduler is None and jobs <= 1):
        yield _grade_here(todo, limits, engine)
        return
    pool: Any = _DaskPool(scheduler, jobs) if scheduler else _LocalPool(jobs, limits, engine)
    with _sigterm_as_interrupt():
        try:
            yield _grade_on(pool, todo, limits, engine)
        except BaseException:
            pool.close(abort=True)  # don't wait for the running submissions
            raise
        pool.close()


def _grade_here(todo: list[Submission], limits: Limits, engine: str) -> Iterator[Finished]:
    from autograder.session import warm

    if len(todo) > 1 and engine == engines.JAIL:
        warm.keep_ahead(limits)  # each next submission's jail starts while this one is graded
    try:
        for i, sub in enumerate(todo):
            if i == len(todo) - 1:
                warm.keep_ahead_no_more()  # none after the last (its own was started ahead)
            try:
                yield Finished(sub, payload=grade_payload(sub, limits, engine))
            except SetupFailed as e:  # this submission's (require_jail refused the batch where none can run)
                yield Finished(sub, failure=str(e))
            except Exception as e:  # noqa: BLE001 - a grader bug must not stop the batch
                yield Finished(sub, failure=f"{type(e).__name__}: {e}")
    finally:
        warm.stop_ahead()


def _grade_on(pool: Any, todo: list[Submission], limits: Limits, engine: str) -> Iterator[Finished]:
    """Each submission's task on `pool`; a worker that dies takes its pool with it: the pool is renewed and
    its unfinished submissions tried once more."""
    attempts = {sub.label: 0 for sub in todo}
    pending = list(todo)
    while pending:
        futures = {}
        for sub in pending:
            attempts[sub.label] += 1
            futures[pool.submit(grade_payload, sub, limits, engine)] = sub
        pending = []
        broken = False
        for future in pool.as_completed(futures):
            sub = futures[future]
            try:
                payload = future.result()
            except SetupFailed as e:  # this submission's (require_jail refused the batch where none can run)
                yield Finished(sub, failure=str(e))
                continue
            except cf.process.BrokenProcessPool:
                broken = True
                if attempts[sub.label] < 2:
                    pending.append(sub)  # its worker died (or another's did): once more, in a new pool
                else:
                    yield Finished(sub, failure="its worker process died twice")
                continue
            except Exception as e:  # noqa: BLE001 - a task error (or a lost Dask worker) is a grader failure
                yield Finished(sub, failure=f"{type(e).__name__}: {e}")
                continue
            yield Finished(sub, payload=payload)
        if broken:
            pool.renew()


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """`kill <grader>` stops the workers and their kernels as Ctrl-C does (what was graded is kept)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
