"""The grader's handle on a running jail, whichever kind started it (bubblewrap's, the jail without namespaces,
or `--no-jail`'s plain process): autograder.confine.child.Child, with the jail's members, end and leftovers."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Callable, Sequence

from autograder.confine import memory, uids
from autograder.confine.cgroups import Cgroups
from autograder.confine.child import Child, kill_group, signal_name
from autograder.confine.limits import ProcessLimits

JailLimits = ProcessLimits  # what one jail may use: autograder.confine.limits (the jail's defaults are its own)
BWRAP, UID = "bubblewrap", "uid"  # the two jails (autograder.jail.jails.jail_kind)


class Jail(Child):
    """A running jail. `process` has binary stdin/stdout/stderr pipes; drain and cap them (autograder.confine.child
    .Tail). Use as a context manager (its exit kills and closes the pipes), or call kill(): it ends everything in
    the jail and frees the cgroups, also after a normal exit; the pipes stay readable."""

    def __init__(
        self,
        process: subprocess.Popen,
        *,
        limits: JailLimits,
        cgroups: Cgroups | None,
        stage: str | None,
        jailed: bool,
        note: str,
        kind: str | None = BWRAP,
        uid_stage: uids.Stage | None = None,
        own_uid: uids.Stage | None = None,
        tmpfs: Sequence[str] = (),
        extra_bytes: Callable[[], int] | None = None,
    ) -> None:
        self.jailed = jailed
        self.kind = kind if jailed else None  # BWRAP, UID, or None (--no-jail)
        self.limits_note = note
        self._stage = stage
        self._uid_stage = uid_stage
        self._own_uid = own_uid  # bubblewrap's jail without cgroups: its host uid (jails.start())
        self._ended: str | None = None
        self._tmpfs = tuple(tmpfs)
        if self._tmpfs and extra_bytes is None:
            extra_bytes = self._tmpfs_bytes
        super().__init__(process, limits=limits, cgroups=cgroups, extra_bytes=extra_bytes)

    def members(self) -> list[int]:
        """The jail's processes: those of its uid (the jail without namespaces, or bubblewrap's with a uid of its
        own), else its main process's tree."""
        stage = self._uid_stage or self._own_uid
        if stage is not None:
            return uids.uid_processes(stage.uid)
        return super().members()

    def _tmpfs_bytes(self) -> int:
        """What the jail keeps in its own tmpfs mounts (`tmpfs`: its /tmp and /dev/shm, memory its cgroup would count),
        read by statvfs in its mount namespace: one call per mount whatever the jail keeps there, unlinked files
        still open included (issue 42: a walk of 600,000 files took seconds, and told the jail when it ran)."""
        outer, size = memory.mount_namespace(self.process.pid), self.limits.tmpfs_mb * 2**20
        for pid in self.members():
            ns = memory.mount_namespace(pid)
            if ns is None or ns == outer:  # bubblewrap's own processes are not inside the jail
                continue
            used = [memory.tmpfs_bytes(f"/proc/{pid}/root{m}", size) for m in self._tmpfs]
            if None not in used:  # the jail's own mounts (not a process that still sees the host's)
                return sum(u for u in used if u is not None)
        return 0

    def _memory_kill(self) -> None:
        """Over the memory limit (the watch's thread): everything in the jail, as the cgroup's OOM killer would."""
        stage = self._uid_stage or self._own_uid
        if stage is None:
            super()._memory_kill()
            return
        kill_group(self.process.pid)
        uids.kill_uid(stage.uid)

    def path(self, inside: str) -> str:
        """Where the jailed process finds the jail path `inside` (a bind's target, or under /tmp): the same
        path in bubblewrap's jail; under the jail without namespaces, its copy in the jail's own folder."""
        return self._uid_stage.path(inside) if self._uid_stage is not None else inside

    # How the jail's main process ended, in words. bwrap exits 128+N when its command died of signal N.
    def _describe(self, code: int) -> str:
        sig = -code if code < 0 else (code - 128 if self.kind == BWRAP and 128 < code < 128 + 65 else 0)
        if code != 0 and self.watch is not None and self.watch.over:
            return f"memory limit ({self.limits.memory_mb} MB)"
        if self.killed:
            return "killed by the grader"
        if code != 0 and self.cgroups is not None and self.cgroups.oom_kills() > 0:
            return f"memory limit ({self.limits.memory_mb} MB)"
        if sig == signal.SIGXCPU:
            return f"CPU time limit ({self.limits.cpu_s} s)"
        if sig:
            return f"signal {signal_name(sig)}"
        return f"exit {code}"

    def wait(self, timeout: float | None = None) -> int | None:
        """The main process's exit code (bwrap passes its command's on; 128+N for signal N), or None if it
        is still running after `timeout` seconds."""
        code = self.wait_code(timeout)
        if code is not None and self._ended is None:
            self._ended = self._describe(code)
        return code

    def ended(self) -> str | None:
        """How the jail ended, once its main process has: "exit 3", "signal SIGSEGV", "memory limit (4096
        MB)", "CPU time limit (1200 s)", "killed by the grader"; None while it runs."""
        if self._ended is None and self.process.poll() is not None:
            self.wait()
        return self._ended

    def kill(self) -> None:
        """Kill everything in the jail and free its cgroups; idempotent."""
        self.kill_processes()
        self.process.wait()
        self.ended()
        self.release()
        for own in (self._uid_stage, self._own_uid):  # everything its uid runs or left in the shared temp folders
            if own is not None:
                own.remove()
        self._uid_stage = self._own_uid = None
        if self._stage is not None:
            try:
                os.rmdir(self._stage)
            except OSError:
                pass
            self._stage = None

    def __enter__(self) -> Jail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.pipes_closed()
