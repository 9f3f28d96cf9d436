"""Grade a class: many submissions, in parallel, resumably.

Each submission's notebook runs in its own jail, its hidden tests outside it (`autograder.engine`); the grading around it
(restore, papermill, scoring) runs in a worker process: one of `jobs` local processes, or a task on a Dask
cluster. Each result is stored as soon as it arrives (`autograder.store`), so a killed run loses nothing
already graded and a re-run grades only what is new or changed.

A task gets the notebook's bytes and returns the result and the executed notebooks, so Dask workers need
the course installed at the same version (checked: a result from a different grader is refused), not a
shared file system.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from autograder.results import SubmissionResult
from autograder.sandbox import Limits
from autograder.store import (Store, changed_files, files_snapshot, grader_files, grader_fingerprint,
                              new_record, sha256_file, write_atomic)

# What a worker imports before its first submission: the engine, jax (the checks draw inputs with it) and
# every lab's checks (see start_workers).
PRELOAD = ["autograder.batch", "autograder.grade", "autograder.engine", "jax.numpy", "jax.experimental.pallas",
           "nbgrader.utils"]


def start_workers(jobs: int) -> None:
    """Start the forkserver now, so its imports (the slow part of a worker's start) overlap with ours."""
    if jobs > 1:
        from pallas_course.manifest import manifest

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD + [lab.grader for lab in manifest().labs if lab.grader])
        from multiprocessing import forkserver

        forkserver.ensure_running()


class GraderModified(RuntimeError):
    """A grader file changed during the batch: a submission may have written outside its folder."""


@dataclass(frozen=True)
class Job:
    path: Path
    label: str
    sha256: str


@dataclass(frozen=True)
class Outcome:
    label: str
    result: SubmissionResult
    reused: bool            # taken from a stored record, not graded in this run
    seconds: float


def grade_payload(name: str, data: bytes, label: str, limits: Limits) -> dict[str, Any]:
    """The task a worker runs: grade the notebook `data` (file name `name`); never raises for a bad one."""
    from autograder.grade import grade_one

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="course-submission-") as tmp:
        folder = Path(tmp)
        path = folder / "in" / Path(name).name
        path.parent.mkdir()
        path.write_bytes(data)
        keep, full = folder / "keep.ipynb", folder / "full.ipynb"
        result = grade_one(path, label=label, keep=keep, keep_full=full, limits=limits)
        return {"result": result.model_dump(mode="json"), "seconds": time.perf_counter() - start,
                "grader": grader_fingerprint(result.lab),
                "executed": keep.read_text() if keep.exists() else None,
                "full": full.read_text() if full.exists() else None}


def _grader_failure(job: Job, why: str) -> SubmissionResult:
    from autograder.grade import zero_result

    return zero_result(job.path, job.label, f"the grader failed on this submission, not the notebook ({why}); "
                                            "a re-run grades it again")


def plan(paths: Iterable[Path], root: Path | None, store: Store, *, force: bool) -> tuple[list[Job], list[Outcome]]:
    """Split into what to grade and what a stored record already answers."""
    from autograder.grade import submission_label

    todo, reused = [], []
    for path in paths:
        label = submission_label(path, root)
        job = Job(path, label, sha256_file(path))
        record = None if force else store.fresh(label, job.sha256)
        if record is None:
            todo.append(job)
        else:
            reused.append(Outcome(label, record.result, True, record.seconds))
    return todo, reused


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

    def __init__(self, jobs: int) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        self.jobs, self.ctx = jobs, ctx
        self.pool = self._new()

    def _new(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(max_workers=self.jobs, mp_context=self.ctx, initializer=_watch_grader,
                                      initargs=(os.getpid(),))

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
                    os.kill(proc.pid, signal.SIGINT)   # the worker stops its kernel and exits
                except OSError:
                    pass
        self.pool.shutdown(wait=not abort, cancel_futures=True)


class _DaskPool:
    """The same tasks on Dask distributed: an existing scheduler, or a LocalCluster of `jobs` workers."""

    def __init__(self, scheduler: str, jobs: int) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise RuntimeError("--scheduler needs dask's distributed scheduler: pip install -r requirements.txt "
                               "(dask and distributed)") from None
        self.cluster = None
        if scheduler == "local":
            self.cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True,
                                        dashboard_address=None)
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


def _save(job: Job, payload: dict[str, Any], store: Store, out_dir: Path | None) -> Outcome:
    """Store one graded payload; a failure while saving is that submission's, recorded, and the batch goes on."""
    try:
        return _store(job, payload, store, out_dir)
    except Exception as e:  # noqa: BLE001 - a disk or record problem with one submission
        return _failed(job, f"saving its results failed ({type(e).__name__}: {e})", store)


def _store(job: Job, payload: dict[str, Any], store: Store, out_dir: Path | None) -> Outcome:
    result = SubmissionResult.model_validate(payload["result"])
    retry = False
    if payload.get("grader") != grader_fingerprint(result.lab):
        result = _grader_failure(job, "graded by a different version of the course on the worker")
        retry = True
    if out_dir is not None and not retry:
        from autograder.grade import safe_relpath

        rel = safe_relpath(job.label)
        for sub, key in (("executed", "executed"), ("instructor", "full")):
            if payload.get(key):
                write_atomic(out_dir / sub / rel, payload[key])
    store.put(new_record(job.label, job.sha256, result, payload.get("seconds", 0.0), retry=retry))
    return Outcome(job.label, result, False, payload.get("seconds", 0.0))


def _failed(job: Job, why: str, store: Store) -> Outcome:
    result = _grader_failure(job, why)
    store.put(new_record(job.label, job.sha256, result, 0.0, retry=True))
    return Outcome(job.label, result, False, 0.0)


def run_batch(paths: list[Path], *, out_dir: Path, root: Path | None = None, jobs: int = 1, force: bool = False,
              limits: Limits | None = None, scheduler: str | None = None,
              on_outcome: Callable[[Outcome], None] | None = None,
              on_plan: Callable[[int, int], None] | None = None) -> list[Outcome]:
    """Grade `paths` (reusing stored results unless `force`); outcomes come back in the order of `paths`.

    `scheduler`: a Dask scheduler address, or "local" for a LocalCluster of `jobs` workers; None for
    local worker processes (`jobs` > 1) or this process (`jobs` == 1).
    """
    limits = limits or Limits()
    if limits.jailed and scheduler is None:
        from autograder.jail import require_jail

        require_jail()   # refuse the whole batch in one line, not each submission (Dask workers check their own)
    store = Store(out_dir)
    todo, reused = plan(paths, root, store, force=force)
    if on_plan:
        on_plan(len(todo), len(reused))
    outcomes: dict[str, Outcome] = {}
    for o in reused:
        outcomes[o.label] = o
        if on_outcome:
            on_outcome(o)
    # Without a jail (--no-jail) a notebook can write the grader's files: stop the batch if one changes.
    guard_files = None if limits.jailed else files_snapshot(grader_files())

    def done(o: Outcome) -> None:
        outcomes[o.label] = o
        if on_outcome:
            on_outcome(o)
        if guard_files is not None:
            changed = changed_files(guard_files)
            if changed:
                raise GraderModified(
                    f"grader files changed during the batch ({', '.join(changed[:5])}): a submission may have "
                    "written outside its folder (graded with --no-jail). Restore them (git "
                    "checkout -- <files>), then re-run with --force; results so far are in "
                    f"{store.dir}")

    if todo and scheduler is None and jobs <= 1:
        for job in todo:
            done(_run_here(job, limits, store, out_dir))
    elif todo:
        pool: Any = _DaskPool(scheduler, jobs) if scheduler else _LocalPool(jobs)
        with _sigterm_as_interrupt():
            try:
                _run_pool(pool, todo, limits, store, out_dir, done)
            except BaseException:
                pool.close(abort=True)   # Ctrl-C or a stop: don't wait for the running submissions
                raise
            pool.close()
    return [outcomes[l] for l in dict.fromkeys(_labels(paths, root)) if l in outcomes]


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


def _labels(paths: list[Path], root: Path | None) -> list[str]:
    from autograder.grade import submission_label

    return [submission_label(p, root) for p in paths]


def _run_here(job: Job, limits: Limits, store: Store, out_dir: Path) -> Outcome:
    try:
        payload = grade_payload(job.path.name, job.path.read_bytes(), job.label, limits)
    except Exception as e:  # noqa: BLE001 - a grader bug must not stop the batch
        return _failed(job, f"{type(e).__name__}: {e}", store)
    return _save(job, payload, store, out_dir)


def _read(job: Job) -> bytes:
    try:
        return job.path.read_bytes()
    except OSError:
        return b""   # graded as an unreadable notebook


def _run_pool(pool: Any, todo: list[Job], limits: Limits, store: Store, out_dir: Path,
              done: Callable[[Outcome], None]) -> None:
    attempts = {job.label: 0 for job in todo}
    pending = list(todo)
    while pending:
        futures = {}
        for job in pending:
            attempts[job.label] += 1
            futures[pool.submit(grade_payload, job.path.name, _read(job), job.label, limits)] = job
        pending = []
        broken = False
        for future in pool.as_completed(futures):
            job = futures[future]
            try:
                payload = future.result()
            except cf.process.BrokenProcessPool:
                broken = True
                if attempts[job.label] < 2:
                    pending.append(job)      # its worker died (or another's did): once more, in a new pool
                else:
                    done(_failed(job, "its worker process died twice", store))
                continue
            except Exception as e:  # noqa: BLE001 - a task error (or a lost Dask worker) is a grader failure
                done(_failed(job, f"{type(e).__name__}: {e}", store))
                continue
            done(_save(job, payload, store, out_dir))
        if broken:
            pool.renew()


def summary_rows(outcomes: list[Outcome]) -> list[dict[str, Any]]:
    """Per lab: submissions, mean score, full marks, zero, errors, reused."""
    rows: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        r = o.result
        row = rows.setdefault(r.lab or "(not a lab)", {"lab": r.lab or "(not a lab)", "submissions": 0,
                                                       "max": r.max_score, "total": 0.0, "full": 0, "zero": 0,
                                                       "errors": 0, "reused": 0})
        row["submissions"] += 1
        row["total"] += r.score
        row["full"] += int(r.max_score > 0 and r.score >= r.max_score)
        row["zero"] += int(r.score == 0)
        row["errors"] += int(r.error is not None)
        row["reused"] += int(o.reused)
    for row in rows.values():
        row["mean"] = row["total"] / row["submissions"] if row["submissions"] else 0.0
    return list(rows.values())

