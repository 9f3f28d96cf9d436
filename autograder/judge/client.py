"""The grader's handle on its judge: what autograder.session calls to rebuild, run and compile.

`BoxedJudge` (grading) talks to a judge child in its box (autograder.judge.box), one per submission, started as
the submission's jail starts so their start-ups overlap; autograder.judge.testing.LocalJudge (the tests of the
checks) does the same work in this process through the same data form. Both return the structure as the grader-side view
(autograder.judge.protocol.view), never a trace of this process.

Bounds, per request: static budgets first (autograder.judge.budgets: refused before the child sees it), then the
request's wall clock (the per-test limit, or the compile rule's `timeout_s`), within the notebook's deadline
(`--timeout`, jail and judge together), the box's memory and CPU time. An overrun kills the child and costs the
request that overran: a fresh child (re-sent what it needs) serves the next one, so the batch goes on.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from autograder import timeline
from autograder.failures import BadAnswer, Overrun, SetupFailed, StudentError, judge_error, student_error_from
from autograder.held import Held
from autograder.jail.jail_agent import wire
from autograder.judge import protocol
from autograder.judge.box import Box, BoxLimits
from autograder.judge.budgets import OverBudget, check as check_budgets
from autograder.judge.parse import where_in

START_S = 120.0  # the judge's start-up (imports) at most, within the deadline


@dataclass(frozen=True)
class JudgedComputation:
    """What was graded: the judge's rebuild of one description, named by its digest (the compile rule's key)."""

    digest: str
    in_avals: tuple[Any, ...]
    judge: JudgeClient = field(repr=False, compare=False)
    fn: Callable[..., Any] | None = field(default=None, repr=False, compare=False)  # the tests' LocalJudge only

    def verdicts(self, chips: list[str], timeout_s: float) -> list[Any]:
        """The compiler's verdict per chip (pallas_course.tpu_compile.CompileResult), from the judge."""
        return self.judge.compile(self.digest, chips, timeout_s)

    def for_compiler(self) -> Callable[..., Any] | None:
        """In-process (tests) only: the rebuild with canonical names, as the box's compile hands it to the compiler
        (autograder.judge.rebuild.Computation.for_compiler); None in the box's parent, where no rebuild lives."""
        traced = self._local()
        return traced.computation.for_compiler() if traced is not None else self.fn

    @property
    def places(self) -> tuple[Any, ...]:
        """In-process (tests) only: where the student launched each pallas_call (the rebuild's), for the compile
        refusal's line; empty in the box's parent (the box's compile names them itself)."""
        traced = self._local()
        return traced.computation.places if traced is not None else ()

    def _local(self) -> Any:
        """The judge's own rebuild, where a LocalJudge holds it in this process; else None."""
        return getattr(getattr(self.judge, "judge", None), "traced", {}).get(self.digest)


@dataclass(frozen=True)
class Traced:
    """One traced computation as the grader holds it: the judge's computation and the structure it read, or why
    there is none (a StudentError)."""

    computation: JudgedComputation | None
    structure: Any
    error: StudentError | None = None


def digest(header: dict[str, Any], blobs: list[bytes], in_avals: tuple[Any, ...]) -> str:
    """What a rebuild is made from, hashed: the description, its constants as sent, the grader's input avals."""
    h = hashlib.sha256(
        json.dumps([header.get("description"), header.get("consts")], sort_keys=True, default=str).encode()
    )
    for b in blobs:
        h.update(hashlib.sha256(b).digest())
    h.update(repr([(tuple(a.shape), str(a.dtype)) for a in in_avals]).encode())
    return h.hexdigest()


def _avals_data(in_avals: tuple[Any, ...]) -> list[Any]:
    return [[list(a.shape), wire.dtype_name(a.dtype)] for a in in_avals]


class JudgeClient:
    """The requests, over some transport (`_request`)."""

    def __init__(self) -> None:
        self._sent: dict[str, tuple[dict[str, Any], list[bytes]]] = {}  # key -> its trace request, to re-send
        self._here: set[str] = set()  # keys the current child holds
        self._ahead: set[str] = set()  # keys whose compiles were started
        self.held = Held()  # the run results this submission's grading holds (its replies)

    def _request(
        self, header: dict[str, Any], blobs: list[bytes], *, timeout: float | None, what: str
    ) -> tuple[dict[str, Any], list[bytes]]:
        raise NotImplementedError

    def _call_timeout(self) -> float | None:
        return None

    def _asked(
        self, key: str, header: dict[str, Any], blobs: list[bytes], *, timeout: float | None, what: str
    ) -> tuple[dict[str, Any], list[bytes]]:
        """`header` about the computation `key`, sent to a child that holds it (after a restart it is rebuilt)."""
        for attempt in range(2):
            self._held(key, what)
            answer, out = self._request(header, blobs, timeout=timeout, what=what)
            if "unknown" not in answer:
                return answer, out
            self._here.discard(key)
        return answer, out

    def _held(self, key: str, what: str) -> None:
        """Make sure the current child holds `key` (after a restart it is traced again)."""
        if key not in self._here:
            header, blobs = self._sent[key]
            reply, _ = self._request(header, blobs, timeout=self._call_timeout(), what=what)
            if reply.get("ok") is not True:
                raise Overrun("could not be rebuilt again after the grader restarted it")
            self._here.add(key)

    def trace(self, reply: dict[str, Any], blobs: list[bytes], in_avals: tuple[Any, ...]) -> Traced:
        """The jail's reply to a traced call -> the judge's rebuild and its structure (or why not)."""
        if reply.get("ok") is not True:
            return Traced(None, None, student_error_from(reply.get("error")))
        const_bytes = sum(len(b) for b in blobs)
        in_bytes = sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in in_avals)
        try:
            check_budgets(reply.get("description"), const_bytes, in_bytes)
        except OverBudget as e:
            text = str(e) + where_in(reply.get("description"), str(e))
            return Traced(
                None, None, StudentError(phase="rebuild", ename="OverBudget", text=text, not_implemented=False)
            )
        key = digest(reply, blobs, in_avals)
        header = {
            "op": "trace",
            "key": key,
            "description": reply.get("description"),
            "consts": reply.get("consts"),
            "in_avals": _avals_data(in_avals),
        }
        try:
            answer, _ = self._request(header, blobs, timeout=self._call_timeout(), what="rebuild")
        except Overrun as e:
            return Traced(None, None, judge_error(f"the grader's rebuild of it {e.why}"))
        if answer.get("bad"):
            raise BadAnswer(str(answer["bad"])[:2000])
        if answer.get("ok") is not True:
            return Traced(None, None, student_error_from(answer.get("error")))
        try:
            structure = protocol.view(answer.get("structure"))
        except (protocol.BadStructure, TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise BadAnswer(f"the judge's structure data is malformed ({e})") from None
        self._sent[key] = (header, blobs)
        self._here.add(key)
        return Traced(JudgedComputation(key, tuple(in_avals), self, self._local_fn(key)), structure)

    def _local_fn(self, key: str) -> Callable[..., Any] | None:
        return None

    def run(self, traced: Traced, arrays: list[Any]) -> tuple[Any, Any]:
        """(the values of the judge's rebuild on the grader's `arrays`, None) or (None, the StudentError)."""
        key = traced.computation.digest
        blobs: list[bytes] = []
        inputs = wire.encode([np.asarray(a) for a in arrays], blobs)
        for attempt in range(2):
            # the judge sends no more than this submission may still hold (autograder.held)
            room = self.held.room()
            header = {"op": "run", "key": key, "inputs": inputs, "max_bytes": room}
            try:
                answer, out = self._asked(key, header, blobs, timeout=self._call_timeout(), what="run")
            except Overrun as e:
                return None, judge_error(f"the grader's run of your kernel {e.why}")
            if answer.get("bad"):
                raise BadAnswer(str(answer["bad"])[:2000])
            size = answer.get("too_big") if answer.get("ok") is not True else sum(len(b) for b in out)
            why = self.held.overrun(size) if isinstance(size, int) else None
            if why is None and "too_big" in answer and attempt:
                why = self.held.too_much(size)
            if why is not None:
                return None, judge_error(f"the grader's run of your kernel {why}")
            if "too_big" not in answer:
                break  # else: it fits once what earlier tests dropped is collected: asked again, once
        if answer.get("ok") is not True:
            return None, student_error_from(answer.get("error"))
        try:
            return self.held.keep(wire.decode_reply(answer.get("result"), out)), None
        except wire.WireError as e:
            raise BadAnswer(f"the judge's values are malformed ({e})") from None

    def compile_ahead(self, key: str, chips: list[str]) -> None:
        """Have the judge start compiling `key` for `chips` now, beside the run asked for next (its verdicts are
        collected by `compile`). Once per computation; a refusal or a stopped judge is met again by `compile`."""
        if key in self._ahead or not chips:
            return
        self._ahead.add(key)
        try:
            self._asked(
                key,
                {"op": "compile_ahead", "key": key, "chips": list(chips)},
                [],
                timeout=self._call_timeout(),
                what="compile",
            )
        except Overrun:
            if self._past_deadline():
                raise

    def compile(self, key: str, chips: list[str], timeout_s: float) -> list[Any]:
        """One verdict per chip; a compile past `timeout_s` is the kernel's (see docs/grader.md: the limit is
        ~100x what the labs' own kernels take), and the chips after it are not tried."""
        from pallas_course.tpu_compile import TOPOLOGIES, CompileResult

        results: list[Any] = []
        for i, chip in enumerate(chips):
            t0 = time.perf_counter()
            try:
                answer, _ = self._asked(
                    key,
                    {"op": "compile", "key": key, "chip": chip},
                    [],
                    timeout=self._compile_timeout(timeout_s),
                    what="compile",
                )
            except Overrun as e:
                if self._past_deadline():
                    raise
                topology = TOPOLOGIES.get(chip, "")
                why = (
                    f"the TPU compiler did not finish within {timeout_s:g} s for {chip}"
                    if "took more" in e.why
                    else f"the TPU compiler {e.why.replace('took more', 'needed more')} for {chip}"
                )
                results.append(
                    CompileResult(
                        chip,
                        topology,
                        False,
                        error_kind="tpu-timeout",
                        message=why,
                        seconds=time.perf_counter() - t0,
                        explanation=(
                            f"{why} (course.yml's compile rule gives each kernel {timeout_s:g} s per chip, about "
                            "100 times what the lab's own kernels take on this kind of machine): the kernel is "
                            "too much for the compiler as written (a huge block or scratch, a very large "
                            "unrolled loop, a branch with big VMEM traffic); make it smaller"
                        ),
                    )
                )
                results += [
                    CompileResult(
                        c,
                        TOPOLOGIES.get(c, ""),
                        False,
                        skipped=True,
                        error_kind="cannot-judge",
                        message=f"not tried: the compile for {chip} did not finish",
                    )
                    for c in chips[i + 1 :]
                ]
                return results
            results.append(protocol.compile_result_from(answer.get("result")))
        return results

    def _compile_timeout(self, timeout_s: float) -> float | None:
        return None

    def _past_deadline(self) -> bool:
        return False

    def close(self) -> None:
        pass


class BoxedJudge(JudgeClient):
    """The judge in its box, for one submission: started at once (its imports overlap the jail's start-up),
    restarted after an overrun."""

    def __init__(self, *, limits: BoxLimits, deadline: float, cell_timeout_s: float, wall_s: float) -> None:
        super().__init__()
        self.limits = limits
        self.deadline = deadline
        self.cell_timeout_s = cell_timeout_s
        self.wall_s = wall_s
        self.started_once = False
        self._restarted = False  # a judge that ended before its hello is started once more
        self.box: Box | None = None
        self.reader: wire.Reader | None = None
        self._start()

    def _start(self, *, own_process: bool = False) -> None:
        self.box = Box(self.limits, own_process=own_process)
        self.reader = wire.Reader(self.box.process.stdout.fileno())
        self._ready = False
        self._here = set()
        self._ahead = set()

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _past_deadline(self) -> bool:
        return self._left() <= 0.5

    def _call_timeout(self) -> float | None:
        return self.cell_timeout_s

    def _compile_timeout(self, timeout_s: float) -> float | None:
        return timeout_s

    def _stop(self, why: str) -> Overrun:
        self._here = set()
        if self.box is not None:
            self.box.kill()
            ended = self.box.ended()
            self.box = None
            if ended.startswith(("needed", "used")):
                why = ended
        return Overrun(why)

    def _read(self, timeout: float, limit_why: str) -> tuple[dict[str, Any], list[bytes]]:
        deadline_first = self._left() <= timeout
        try:
            header, blobs = self.reader.read(timeout=max(0.05, min(timeout, self._left())))
        except wire.PeerSilent:
            raise self._stop(
                f"ran past the notebook's {self.wall_s:g} s wall-clock limit (--timeout)"
                if deadline_first
                else limit_why
            ) from None
        except wire.PeerGone:
            box, self.box, self._here = self.box, None, set()
            if box is not None and box.zygote_failed():  # the warm parent could not start, not this judge
                box.kill()
                self._start(own_process=True)
                return self._read(timeout, limit_why)
            why = box.ended() if box is not None else "ended"
            if not self.started_once:
                if not self._restarted:  # ended before its hello (a starved machine): once more, a Python of its own
                    self._restarted = True
                    self._start(own_process=True)
                    return self._read(timeout, limit_why)
                said = box.stderr_tail()[-600:].strip() if box is not None else ""
                raise SetupFailed(
                    f"the grader's judge could not start, twice ({why}): {said or 'it wrote nothing on its stderr'}"
                ) from None
            raise Overrun(why) from None
        except wire.WireError as e:
            self._stop("sent a malformed frame")
            raise BadAnswer(f"the judge sent a malformed frame ({e})") from None
        if not isinstance(header, dict):
            self._stop("sent a malformed frame")
            raise BadAnswer("the judge sent a reply that is not a mapping")
        return header, blobs

    def _request(
        self, header: dict[str, Any], blobs: list[bytes], *, timeout: float | None, what: str
    ) -> tuple[dict[str, Any], list[bytes]]:
        if self._past_deadline():
            raise Overrun(f"ran past the notebook's {self.wall_s:g} s wall-clock limit (--timeout)")
        if self.box is None:
            self._start()
        if not self._ready:
            with timeline.span("judge wait until ready"):
                hello, _ = self._read(START_S, "did not start in time")
            if hello.get("ready") is not True:
                raise self._stop("did not say it was ready")
            self._ready = self.started_once = True
        with timeline.span(f"judge {header.get('op')}", **({"chip": header["chip"]} if "chip" in header else {})):
            return self._asked_now(header, blobs, timeout=timeout, what=what)

    def _asked_now(
        self, header: dict[str, Any], blobs: list[bytes], *, timeout: float | None, what: str
    ) -> tuple[dict[str, Any], list[bytes]]:
        try:
            self.box.process.stdin.write(wire.pack(header, blobs))
            self.box.process.stdin.flush()
        except (BrokenPipeError, OSError):
            box, self.box, self._here = self.box, None, set()
            raise Overrun(box.ended()) from None
        limit = float(timeout if timeout is not None else self.cell_timeout_s)
        reply, out = self._read(limit, f"took more than {limit:g} s (the grader's limit for its {what})")
        if reply.get("memory"):
            raise self._stop(f"needed more than {self.limits.memory_mb} MB (the grader's memory limit for it)")
        return reply, out

    def close(self) -> None:
        if self.box is not None:
            self.box.close()
            self.box = None
