"""The handle every confined child shares (a jail, autograder.jail.handle.Jail; a judge, autograder.judge.box.Box):
its main process, its cgroups or, where there are none, the watch of its resident memory, the kill of everything
in it, the facts its end is told from; and the capped tail of a stream the grader drains (`Tail`).

Each kind words its end for its own reader (a jail's for the student's feedback, a judge's for the grader's);
both read the same facts here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import IO, Any, Callable

from autograder.confine import memory
from autograder.confine.cgroups import Cgroups
from autograder.confine.limits import ProcessLimits


class Tail:
    """The last `keep` bytes of a child's stream, drained on a thread of its own until EOF: a child that writes to a
    full pipe blocks, and it can write without end, so the grader reads it all and keeps a capped tail."""

    def __init__(self, stream: IO[bytes], keep: int, *, name: str = "child-stderr") -> None:
        self.keep = keep
        self._buf = bytearray()
        self._thread = threading.Thread(target=self._drain, args=(stream,), name=name, daemon=True)
        self._thread.start()

    def _drain(self, stream: IO[bytes]) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            self._buf += chunk
            del self._buf[: -self.keep]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout=timeout)

    def text(self) -> str:
        return bytes(self._buf).decode("utf-8", "replace")


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a child's own session); nothing for a pid a fork never got (-1)."""
    try:
        if pid > 1:
            os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Child:
    """A running confined child. `process` has Popen's surface (a Popen, or a judge the zygote forked). Where
    `cgroups` is None the same memory rule (resident memory of the whole child) is kept by a watch, which kills
    it the first time it passes `limits.memory_mb`."""

    def __init__(
        self,
        process: Any,
        *,
        limits: ProcessLimits,
        cgroups: Cgroups | None,
        extra_bytes: Callable[[], int] | None = None,
    ) -> None:
        self.process = process
        self.limits = limits
        self.cgroups = cgroups
        self.killed = False  # the grader killed it (a timeout, the end), not a limit
        self.watch = (
            None
            if cgroups is not None
            else memory.ResidentWatch(self.members, limits.memory_mb, self._memory_kill, extra_bytes=extra_bytes)
        )

    def members(self) -> list[int]:
        """The child's processes: its main process's tree (a kind that knows better says so)."""
        return memory.descendants(self.process.pid) if self.process.poll() is None else []

    def _kill_members(self, members: list[int]) -> None:
        import psutil

        for pid in members:
            try:
                psutil.Process(pid).kill()  # psutil checks it is still the process listed
            except psutil.Error:
                pass

    def _memory_kill(self) -> None:
        """Over the memory limit (the watch's thread): everything in it, as the cgroup's OOM killer would."""
        members = self.members()
        kill_group(self.process.pid)
        self._kill_members(members)

    def over_memory(self) -> bool:
        """Whether its memory limit stopped it: the cgroup's OOM killer, or the watch."""
        return (self.watch is not None and self.watch.over) or (
            self.cgroups is not None and self.cgroups.oom_kills() > 0
        )

    def kill_processes(self) -> None:
        """Kill everything in it, once, if its main process still runs (the watch stopped first: what the grader
        kills is over no limit)."""
        if self.watch is not None and self.process.poll() is None and not self.watch.over:
            self.watch.stop()
        if self.process.poll() is None:
            self.killed = True
            kill_group(self.process.pid)
            if self.cgroups is not None:
                self.cgroups.kill_all()

    def wait_code(self, timeout: float | None) -> int | None:
        """The main process's exit status once it has ended, None after `timeout` seconds."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def release(self) -> None:
        """Free what it held: the watch, and its cgroups (anything an unjailed process left in them is killed
        first). Idempotent."""
        if self.watch is not None:
            self.watch.stop()
        if self.cgroups is not None:
            self.cgroups.kill_all()
            self.cgroups.remove()

    def pipes_closed(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
