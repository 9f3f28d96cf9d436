"""One submission's grading: its jailed agent (autograder.jail) and its judge (autograder.judge), started together,
and the notebook's functions as the checks reach them (RemoteFunction). The only place that knows a submission has
both: the jail does not know a judge exists, nor the judge a jail.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from autograder import timeline
from autograder.confine.child import Tail
from autograder.failures import BadAnswer, SetupFailed, StudentGone
from autograder.jail import jails
from autograder.jail.agent_env import AGENT_DIR, JAIL_HELPERS, agent_binds, agent_files, helpers_dir, jail_env
from autograder.jail.handle import JailLimits
from autograder.jail.jail_agent import wire
from autograder.judge.box import BoxLimits
from autograder.judge.client import BoxedJudge
from autograder.session.functions import StudentFunction

STDERR_KEEP = 64 * 1024  # the tail of the jail's stderr kept for diagnosis; the rest is drained and dropped


class RemoteFunction(StudentFunction):
    """A function defined in the jailed notebook."""

    def __init__(self, name: str, session: "Session") -> None:
        super().__init__(name)
        self.session = session

    def _judge(self) -> BoxedJudge:
        return self.session.judge

    def _send(
        self, enc_args: Any, enc_kwargs: Any, blobs: list[bytes], stand_in: list[str] | None, bodies: bool = True
    ) -> tuple[dict[str, Any], list[bytes]]:
        return self.session.request(
            {
                "op": "call",
                "name": self.name,
                "args": enc_args,
                "kwargs": enc_kwargs,
                "stand_in": stand_in,
                **({} if bodies else {"bodies": False}),
                "timeout_s": self.session.call_timeout_s(),
            },
            blobs,
            timeout=self.session.call_timeout_s() + 10,
        )


class Session:
    """One notebook's jailed agent: start it, run cells, look names up, call functions, end it."""

    def __init__(
        self,
        *,
        limits: JailLimits,
        cell_timeout_s: float,
        deadline: float,
        jailed: bool = True,
        judge: BoxLimits | None = None,
    ) -> None:
        self.cell_timeout_s_ = float(cell_timeout_s)
        self.deadline = deadline
        self._stderr: Tail | None = None
        if jailed:  # no jail, no grading: said before anything starts (JailUnavailable, in one line)
            jails.require_jail()
        # The judge first: its imports run while the jail starts and runs the notebook's first cells.
        self.judge = BoxedJudge(
            limits=judge or BoxLimits(),
            deadline=deadline,
            cell_timeout_s=self.cell_timeout_s_,
            wall_s=max(1.0, deadline - time.monotonic()),
        )
        try:
            self._start_jail(limits, jailed)
        except BaseException:
            self.judge.close()
            raise

    def restart_clock(self, deadline: float) -> None:
        """Count the grading's wall-clock limit from now (a session started ahead, autograder.session.warm, waited)."""
        self.deadline = deadline
        self.judge.deadline = deadline
        self.judge.wall_s = max(1.0, deadline - time.monotonic())

    def _start_jail(self, limits: JailLimits, jailed: bool) -> None:
        env = jail_env()
        if timeline.enabled():
            env["COURSE_AGENT_CLOCK"] = "1"  # the agent's hello then tells when it started and was ready
        if not jailed:  # --no-jail: no binds, so the agent and the grader's helpers are imported from where they lie
            env["PYTHONPATH"] = f"{AGENT_DIR.parent}{os.pathsep}{helpers_dir().parent}"
        self.jail = jails.start(
            [sys.executable, "-m", "jail_agent.agent"],
            binds=agent_binds(),
            env=env,
            limits=limits,
            cwd="/tmp",
            jailed=jailed,
            files=agent_files() if jailed else None,
        )
        proc = self.jail.process
        self.reader = wire.Reader(proc.stdout.fileno())
        self._stderr = Tail(proc.stderr, STDERR_KEEP, name="jail-stderr")
        try:
            hello, _ = self._read(timeout=min(120.0, self._left()))
            if timeline.enabled() and isinstance(hello.get("clock"), dict):  # the agent's own, before any cell
                timeline.record(
                    "jail agent",
                    *[float(hello["clock"].get(k, 0)) for k in ("started", "ready")],
                    cpu_s=float(hello["clock"].get("cpu_s", 0)),
                    where="jail",
                )
            if hello.get("ready") is not True:
                raise BadAnswer("the agent did not say it was ready")
        except (StudentGone, BadAnswer) as e:
            self.jail.kill()
            self._stderr.join(timeout=2)
            raise SetupFailed(f"the jail could not start the grading agent ({e}){self._jail_said()}") from None
        # No student code has run yet, so the agent's word on where `import pallas_course` leads is its own.
        want = self.jail.path(f"{JAIL_HELPERS}/__init__.py") if jailed else str(helpers_dir() / "__init__.py")
        if hello.get("helpers") != want:
            self.jail.kill()
            raise SetupFailed(
                f"the jail's Python would import pallas_course from {str(hello.get('helpers'))[:300]}, "
                f"not the grader's own helpers ({want}): is another checkout installed first?"
            )

    def _jail_said(self) -> str:
        """The last lines of the jail's stderr (bubblewrap's or Python's own message), for a set-up error."""
        lines = [line.strip() for line in self.stderr_tail().splitlines() if line.strip()][-3:]
        return ": " + " | ".join(line[:300] for line in lines) if lines else ""

    # ---- plumbing
    def _left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def call_timeout_s(self) -> float:
        return min(self.cell_timeout_s_, self._left())

    def _gone(self, silent: bool) -> StudentGone:
        if silent:
            self.jail.kill()
            why = self.jail.ended() or "killed by the grader"
            return StudentGone(why, silent=True)
        self.jail.wait(timeout=5)
        return StudentGone(self.jail.ended() or "ended", silent=False)

    def _read(self, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        try:
            header, blobs = self.reader.read(timeout=min(timeout, self._left()))
        except wire.PeerSilent:
            raise self._gone(silent=True) from None
        except wire.PeerGone:
            raise self._gone(silent=False) from None
        except wire.WireError as e:
            self.jail.kill()
            raise BadAnswer(str(e)) from None
        if not isinstance(header, dict):
            raise BadAnswer("a reply that is not a mapping")
        return header, blobs

    def request(
        self, header: dict[str, Any], blobs: list[bytes] | None = None, *, timeout: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        with timeline.span(f"jail {header.get('op')}"):
            try:
                self.jail.process.stdin.write(wire.pack(header, blobs))
                self.jail.process.stdin.flush()
            except (BrokenPipeError, OSError):
                raise self._gone(silent=False) from None
            return self._read(timeout)

    def mark_jail_cpu(self, event: str) -> None:
        """The CPU seconds the jail's processes have used so far (profiling only: COURSE_GRADE_TIMELINE)."""
        if timeline.enabled():
            cgroups = self.jail.cgroups
            pids = cgroups.pids() if cgroups is not None else [self.jail.process.pid]
            box = self.judge.box
            judge = [] if box is None else box.cgroups.pids() if box.cgroups is not None else [box.process.pid]
            timeline.mark(event, jail_cpu_s=timeline.cpu_of(pids), judge_cpu_s=timeline.cpu_of(judge))

    # ---- what the engine asks
    def run_cell(self, source: str) -> tuple[list[dict[str, Any]], int | None]:
        header, _ = self.request(
            {"op": "run_cell", "source": source, "timeout_s": self.call_timeout_s()}, timeout=self.call_timeout_s() + 10
        )
        outputs = header.get("outputs")
        if not isinstance(outputs, list):
            raise BadAnswer("a cell reply without outputs")
        count = header.get("execution_count")
        return outputs, count if isinstance(count, int) and not isinstance(count, bool) else None

    def argument(self, name: str) -> Any:
        """What a hidden test receives for `name`: a RemoteFunction, the value as data, or NameError."""
        header, blobs = self.request({"op": "lookup", "name": name}, timeout=30)
        kind = header.get("kind")
        if kind == "callable":
            return RemoteFunction(name, self)
        if kind == "value":
            why = self.judge.held.overrun(sum(len(b) for b in blobs))
            if why is not None:
                raise BadAnswer(f"`{name}` {why}")
            try:
                return self.judge.held.keep(wire.decode_reply(header.get("value"), blobs))
            except wire.WireError as e:
                raise BadAnswer(f"malformed value ({e})") from None
        if kind == "missing":
            raise NameError(f"name '{name}' is not defined")
        raise BadAnswer("a lookup reply of no known kind")

    def stderr_tail(self) -> str:
        return self._stderr.text() if self._stderr is not None else ""

    def close(self) -> None:
        """End the jail now: nothing more is asked of it, and waiting for its Python to exit on its own (jax's
        shutdown) took 2 s a notebook."""
        try:
            if self.jail.process.poll() is None:
                self.jail.process.stdin.close()
        except (OSError, ValueError):
            pass
        finally:
            self.jail.kill()
            self.judge.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
