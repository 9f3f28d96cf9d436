"""The judge's box: a child process of the grader's, with limits, killed on overrun, never outliving the grader.

What it holds is the grader's own code on a student-shaped computation (no student code: that is the jail's), so
it needs no namespaces; it needs bounds, which it takes from autograder.confine as the jail does:

- one memory, pids and (where writable) cpu cgroup of its own (named as the jail's are, so the orphan sweep
  removes the groups of a grader that died), rlimits always (CPU seconds, file size, no core), where there is no
  cgroup the watch of resident memory, the same start-up chain (join the groups -> prlimit -> setpriv with the
  parent-death signal -> the guard that stops if the grader already died);
- a session and process group of its own (killed as a group), a private TMPDIR/HOME removed at the end, or by
  the orphan sweep when the grader was killed first;
- a minimal environment: nothing of the grader's (no tokens, no paths to its files but the code's);
- a fresh process per box, forked from the grading process's zygote (autograder.judge.zygote: a warm parent that
  imported the judge's modules and holds nothing of any submission), which applies this same chain in the child;
  where the zygote cannot start (or COURSE_JUDGE_ZYGOTE=0), a Python of its own started through the chain.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from autograder.confine import chain, grader
from autograder.confine.cgroups import CGROUP_PREFIX, Cgroups, writable
from autograder.confine.child import Child, Tail, kill_group, signal_name
from autograder.confine.env import child_env
from autograder.confine.limits import ProcessLimits
from autograder.confine.orphans import STAGE_DIR, TEMP_PREFIX, kill_orphans
from autograder.course_manifest import REPO_ROOT
from autograder.judge import zygote

STDERR_KEEP = 16 * 1024
ZYGOTE_ENV = "COURSE_JUDGE_ZYGOTE"  # "0": each judge a Python of its own (the bench's comparison)


@dataclass(frozen=True)
class BoxLimits(ProcessLimits):
    """What one judge may use (a submission's: it lives as long as the submission's grading)."""

    memory_mb: int = 2048  # everything in the box (cgroup); the judge itself takes ~0.3 GB of it
    cpu_s: int = 900  # CPU seconds (RLIMIT_CPU), a backstop: the wall clock of each request comes first
    pids: int = 256  # threads count: XLA's and libtpu's pools
    file_mb: int = 64
    cpus: float = 2.0  # the compiles started ahead (autograder.judge.server) run beside the runs


def _env(tmp: str) -> dict[str, str]:
    env = {
        **child_env(),
        "HOME": tmp,
        "TMPDIR": tmp,
        "PYTHONPATH": str(REPO_ROOT),
        # libtpu's logs (module names, VMEM breakdowns, the working directory) in the box's private folder, not
        # the world-readable /tmp/tpu_logs it picks by default
        "TPU_LOG_DIR": f"{tmp}/tpu_logs",
    }
    for key in (
        "TPU_WORKER_HOSTNAMES",
        "TPU_HOST_BOUNDS",
        "ALLOW_MULTIPLE_LIBTPU_LOAD",  # tpu_compile's own
        "COURSE_GRADE_TIMELINE",
    ):  # profiling: the judge's spans go to the grader's timeline
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _new_folder() -> str:
    """A private folder named as a judge's (TEMP_PREFIX + this grader), so the orphan sweep removes it once its
    grader is gone."""
    path = f"{STAGE_DIR}/{TEMP_PREFIX}{grader.tag()}-{secrets.token_hex(4)}"
    os.mkdir(path, 0o700)
    return path


_ZYGOTE: zygote.Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()
_ZYGOTE_FAILED: str | None = None  # why a zygote of this process ended before it could fork: none is tried again


def _zygote() -> zygote.Zygote:
    """This grading process's zygote: started on first use (its imports overlap whatever asked), again if it ended."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE_FAILED is not None:
            raise zygote.ZygoteFailed(_ZYGOTE_FAILED)
        if _ZYGOTE is None or not _ZYGOTE.alive():
            tmp = _new_folder()
            _ZYGOTE = zygote.Zygote(_env(tmp), tmp)
        return _ZYGOTE


def _start(limits: BoxLimits, tmp: str, cgroups: Cgroups | None, own_process: bool) -> subprocess.Popen | zygote.Forked:
    """The judge's process: forked by the zygote, or (where it cannot) a Python of its own through the chain."""
    procs = cgroups.procs_files() if cgroups else []
    try:
        if own_process or os.environ.get(ZYGOTE_ENV, "1") == "0":
            raise zygote.ZygoteFailed(f"{ZYGOTE_ENV}=0")
        return _zygote().fork(
            cwd=tmp, env=_env(tmp), cgroups=procs, rlimits=chain.rlimits(limits, cgroups=cgroups is not None)
        )
    except (zygote.ZygoteFailed, OSError):
        cmd = [
            *chain.wrapper("course-judge"),
            *chain.prlimit(limits, cgroups=cgroups is not None),
            *chain.guarded(None),
            sys.executable,
            "-m",
            "autograder.judge.server",
        ]
        return subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp,
            start_new_session=True,
            env={**_env(tmp), **chain.wrapper_env(procs)},
        )


class Box(Child):
    """A running judge: `process` has binary stdin/stdout pipes (frames); stderr is drained, its tail kept."""

    def __init__(self, limits: BoxLimits, *, own_process: bool = False) -> None:
        kill_orphans()
        self.tmp = _new_folder()
        cgroups: Cgroups | None = None
        if writable():
            try:
                cgroups = Cgroups(f"{CGROUP_PREFIX}{grader.tag()}-{secrets.token_hex(4)}", limits)
            except OSError:
                cgroups = None
        self._why: str | None = None
        try:
            process = _start(limits, self.tmp, cgroups, own_process)
        except BaseException:
            if cgroups is not None:
                cgroups.remove()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self._tail = Tail(process.stderr, STDERR_KEEP, name="judge-stderr")
        super().__init__(process, limits=limits, cgroups=cgroups)

    def zygote_failed(self) -> bool:
        """This box's judge was never forked because the zygote could not start (then no box of this process
        asks it again); the judge itself is not at fault, and a judge of its own can be started."""
        global _ZYGOTE_FAILED
        if not isinstance(self.process, zygote.Forked) or not self.process.zygote.failed_to_start():
            return False
        _ZYGOTE_FAILED = self.process.zygote.gone
        return True

    def _memory_kill(self) -> None:
        kill_group(self.process.pid)

    def stderr_tail(self) -> str:
        return self._tail.text()

    def _describe(self, code: int) -> str:
        if self.over_memory():
            return f"needed more than {self.limits.memory_mb} MB (the grader's memory limit for it)"
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return f"used more than {self.limits.cpu_s} s of CPU time (the grader's limit for it)"
        if self.killed:
            return "was stopped by the grader"
        if code < 0:
            return f"crashed ({signal_name(-code)})"
        return f"ended (exit {code})"

    def ended(self) -> str:
        """Why the box ended, in words (its limit, a signal, an exit code); waits for it, and frees what it held."""
        if self._why is None:
            code = self.wait_code(10)
            if code is None:
                self.kill()
                return self._why or "was stopped by the grader"
            self._why = self._describe(code)
            self._cleanup()
        return self._why

    def kill(self) -> None:
        """Kill the box's processes (the group, then anything left in its cgroups) and free what it held."""
        self.kill_processes()
        code = self.wait_code(10)
        if self._why is None and code is not None:
            self._why = self._describe(code)
        self._cleanup()

    def _cleanup(self) -> None:
        self.release()
        if self.cgroups is not None and not self.cgroups.dirs:
            self.cgroups = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def close(self) -> None:
        """End it now: nothing more is asked of it (waiting for its Python to exit, jax's shutdown, took seconds)."""
        try:
            if self.process.poll() is None:
                self.process.stdin.close()
        except (OSError, ValueError):
            pass
        self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass
