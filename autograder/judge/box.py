"""The judge's box: a child process of the grader's, with limits, killed on overrun, never outliving the grader.

What it holds is the grader's own code on a student-shaped computation (no student code: that is the jail's), so
it needs no namespaces; it needs bounds. Reusing autograder.jail.bwrap's machinery:

- one memory, pids and (where writable) cpu cgroup of its own (jail._Cgroups, named as the jail's are, so
  jail.kill_orphans() removes the groups of a grader that died), rlimits always (CPU seconds, file size, no core),
  where there is no cgroup the jail's watch of resident memory (autograder.jail.memory), the same start-up chain (join the groups -> prlimit -> setpriv with
  the parent-death signal -> the guard that stops if the grader already died);
- a session and process group of its own (killed as a group), a private TMPDIR/HOME removed at the end, or by
  kill_orphans() here when the grader was killed first;
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
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.jail import bwrap as jail, memory
from autograder.judge import zygote

TMP_PREFIX = "course-judge-"
STDERR_KEEP = 16 * 1024
ZYGOTE_ENV = "COURSE_JUDGE_ZYGOTE"    # "0": each judge a Python of its own (the bench's comparison)


@dataclass(frozen=True)
class BoxLimits:
    """What one judge may use (a submission's: it lives as long as the submission's grading)."""

    memory_mb: int = 2048      # everything in the box (cgroup); the judge itself takes ~0.3 GB of it
    cpu_s: int = 900           # CPU seconds (RLIMIT_CPU), a backstop: the wall clock of each request comes first
    pids: int = 256            # threads count: XLA's and libtpu's pools
    file_mb: int = 64
    cpus: float = 2.0          # the compiles started ahead (autograder.judge.server) run beside the runs

    def jail_limits(self, *, cgroups: bool) -> jail.JailLimits:
        del cgroups   # one rule with or without: resident memory (the cgroup, or the watch)
        return jail.JailLimits(memory_mb=self.memory_mb, pids=self.pids, cpu_s=self.cpu_s, file_mb=self.file_mb, cpus=self.cpus)


def _grader_tag() -> str:
    return f"{os.getpid()}-{jail._started(os.getpid())}"


def remove_orphans() -> int:
    """Remove the temporary folders of judges whose grader died (their processes died with it: the parent-death
    signal; their cgroups go with jail.kill_orphans()). Returns how many."""
    found = 0
    root = Path(jail.STAGE_DIR)
    from autograder.jail.uid import ours

    for d in root.glob(f"{TMP_PREFIX}*"):
        if not ours(d):
            continue   # not a folder this grader's user made (a jail without namespaces can write /tmp)
        parts = d.name[len(TMP_PREFIX):].split("-")
        if len(parts) != 3 or not parts[0].isdigit() or jail._started(int(parts[0])) == parts[1]:
            continue
        shutil.rmtree(d, ignore_errors=True)
        found += 1
    return found


def _env(tmp: str) -> dict[str, str]:
    from autograder.course_manifest import REPO_ROOT
    from autograder.jail.session import jail_env

    env = {k: v for k, v in jail_env().items() if k not in ("PYTHONPATH", "HOME", "TMPDIR", "IPYTHONDIR",
                                                            "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
    # libtpu's logs (module names, VMEM breakdowns, the working directory) in the box's private folder, not the
    # world-readable /tmp/tpu_logs it picks by default
    env.update({"HOME": tmp, "TMPDIR": tmp, "PYTHONPATH": str(REPO_ROOT), "TPU_LOG_DIR": f"{tmp}/tpu_logs"})
    for key in ("TPU_WORKER_HOSTNAMES", "TPU_HOST_BOUNDS", "ALLOW_MULTIPLE_LIBTPU_LOAD",   # tpu_compile's own
                "COURSE_GRADE_TIMELINE"):   # profiling: the judge's spans go to the grader's timeline
        if key in os.environ:
            env[key] = os.environ[key]
    return env


_ZYGOTE: zygote.Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()
_ZYGOTE_FAILED: str | None = None     # why a zygote of this process ended before it could fork: none is tried again


def _zygote() -> zygote.Zygote:
    """This grading process's zygote: started on first use (its imports overlap whatever asked), again if it ended.
    Its folder is named as a judge's, so remove_orphans() removes it once its grader is gone."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE_FAILED is not None:
            raise zygote.ZygoteFailed(_ZYGOTE_FAILED)
        if _ZYGOTE is None or not _ZYGOTE.alive():
            tmp = f"{jail.STAGE_DIR}/{TMP_PREFIX}{_grader_tag()}-{secrets.token_hex(4)}"
            os.mkdir(tmp, 0o700)
            _ZYGOTE = zygote.Zygote(_env(tmp), tmp)
        return _ZYGOTE


def _kill_group(pid: int) -> None:
    try:
        if pid > 1:     # a fork the zygote never made has no pid (-1): no signal to a group it would name
            os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


class Box:
    """A running judge: `process` has binary stdin/stdout pipes (frames); stderr is drained, its tail kept."""

    def __init__(self, limits: BoxLimits, *, own_process: bool = False) -> None:
        jail.kill_orphans()
        remove_orphans()
        self.limits = limits
        name = f"{jail.CGROUP_PREFIX}{_grader_tag()}-{secrets.token_hex(4)}"
        self.tmp = f"{jail.STAGE_DIR}/{TMP_PREFIX}{_grader_tag()}-{secrets.token_hex(4)}"
        os.mkdir(self.tmp, 0o700)
        self.cgroups: jail._Cgroups | None = None
        if jail._cgroups_writable():
            try:
                self.cgroups = jail._Cgroups(name, limits.jail_limits(cgroups=True))
            except OSError:
                self.cgroups = None
        rlimits = jail._rlimits(limits.jail_limits(cgroups=self.cgroups is not None), cgroups=self.cgroups is not None)
        procs = self.cgroups.procs_files() if self.cgroups else []
        self._killed = False
        self._why: str | None = None
        self._tail = bytearray()
        self.process: subprocess.Popen[bytes] | zygote.Forked
        try:
            try:
                if own_process or os.environ.get(ZYGOTE_ENV, "1") == "0":
                    raise zygote.ZygoteFailed(f"{ZYGOTE_ENV}=0")
                self.process = _zygote().fork(cwd=self.tmp, env=_env(self.tmp), cgroups=procs,
                                              rlimits=zygote.rlimits_of(rlimits))
            except (zygote.ZygoteFailed, OSError):
                cmd = ["/bin/sh", "-c", jail._WRAPPER, "course-judge", "--", *rlimits, *jail._guarded(drop_root=False),
                       sys.executable, "-m", "autograder.judge.server"]
                self.process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, cwd=self.tmp, start_new_session=True,
                                                env={**_env(self.tmp), "COURSE_JAIL_CGROUPS": " ".join(procs)})
        except BaseException:
            self._cleanup()
            raise
        threading.Thread(target=self._drain, daemon=True).start()
        self.watch = None if self.cgroups is not None else memory.ResidentWatch(
            lambda: memory.descendants(self.process.pid), limits.memory_mb, self._memory_kill)

    def _memory_kill(self) -> None:
        _kill_group(self.process.pid)

    def zygote_failed(self) -> bool:
        """This box's judge was never forked because the zygote could not start (then no box of this process
        asks it again); the judge itself is not at fault, and a judge of its own can be started."""
        global _ZYGOTE_FAILED
        if not isinstance(self.process, zygote.Forked) or not self.process.zygote.failed_to_start():
            return False
        _ZYGOTE_FAILED = self.process.zygote.gone
        return True

    def _drain(self) -> None:
        for chunk in iter(lambda: self.process.stderr.read(65536), b""):
            self._tail += chunk
            del self._tail[:-STDERR_KEEP]

    def stderr_tail(self) -> str:
        return bytes(self._tail).decode("utf-8", "replace")

    def _describe(self, code: int) -> str:
        if (self.cgroups is not None and self.cgroups.oom_kills() > 0) or (self.watch is not None and self.watch.over):
            return f"needed more than {self.limits.memory_mb} MB (the grader's memory limit for it)"
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return f"used more than {self.limits.cpu_s} s of CPU time (the grader's limit for it)"
        if self._killed:
            return "was stopped by the grader"
        if code < 0:
            try:
                return f"crashed ({signal.Signals(-code).name})"
            except ValueError:
                return f"crashed (signal {-code})"
        return f"ended (exit {code})"

    def ended(self) -> str:
        """Why the box ended, in words (its limit, a signal, an exit code); waits for it, and frees what it held."""
        if self._why is None:
            try:
                code = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
                return self._why or "was stopped by the grader"
            self._why = self._describe(code)
            self._cleanup()
        return self._why

    def kill(self) -> None:
        """Kill the box's processes (the group, then anything left in its cgroups) and free what it held."""
        if self.process.poll() is None:
            self._killed = True
            _kill_group(self.process.pid)
            if self.cgroups is not None:
                self.cgroups.kill_all()
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        if self._why is None and code is not None:
            self._why = self._describe(code)
        if self.cgroups is not None:
            self.cgroups.kill_all()
        self._cleanup()

    def _cleanup(self) -> None:
        if getattr(self, "watch", None) is not None:
            self.watch.stop()
        if self.cgroups is not None:
            self.cgroups.remove()
            if not self.cgroups.dirs:
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


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    """True once `pid` no longer exists (tests: a killed grader's judge dies with it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False
