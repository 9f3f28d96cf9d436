"""For the tests of the checks: a function of this process, traced and described exactly as the jail does, its
description making the same JSON round trip and the same rebuild (autograder.judge.testing.LocalJudge). Grading
never uses it: a graded function lives in the jail (autograder.session.session.RemoteFunction)."""

from __future__ import annotations

import json
from typing import Any, Callable

from autograder.jail.jail_agent import wire
from autograder.judge.client import Traced
from autograder.judge.testing import LocalJudge
from autograder.session.functions import StudentFunction


class LocalFunction(StudentFunction):
    """A function of this process, traced and described exactly as the jail does (tests of the checks only):
    its description makes the same JSON round trip and the same rebuild."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        super().__init__(name or getattr(fn, "__name__", "function"))
        self.fn = fn
        self._direct: Any = None
        self._local: LocalJudge | None = None

    def _judge(self) -> LocalJudge:
        if self._local is None:
            self._local = LocalJudge()
        return self._local

    def _send(
        self, enc_args: Any, enc_kwargs: Any, blobs: list[bytes], stand_in: list[str] | None, bodies: bool = True
    ) -> tuple[dict[str, Any], list[bytes]]:
        from autograder.jail.jail_agent.calls import CallFailed, invoke, reply

        args, kwargs = wire.decode(enc_args, blobs), wire.decode(enc_kwargs, blobs)
        self._direct = None
        try:
            answer = invoke(self.fn, list(args), dict(kwargs), stand_in=stand_in, keep_jaxpr=True, bodies=bodies)
        except CallFailed as e:
            return {"ok": False, "error": e.info}, []
        self._direct = answer.pop("jaxpr", None)
        header, out_blobs = reply(answer)
        return json.loads(json.dumps(header, allow_nan=False)), out_blobs

    def _rebuilt(self, traced: Traced) -> None:
        """The round trip holds: what the grader reads of its judge's rebuild (the structure as data, viewed) is
        what it reads of the direct trace (so the mutant corpus, run through this class, proves describe ->
        rebuild -> structure data -> view on every kernel in it)."""
        from autograder.judge.structure import structure_data
        from pallas_course.kernel_trace import primitive_names, trace_jaxpr

        direct, self._direct = self._direct, None
        if direct is None or traced.structure is None:
            return
        if "platform_index" in primitive_names(direct):  # the rebuild keeps the TPU's branch alone, by design
            return
        want, got = structure_data(trace_jaxpr(direct)), structure_data(traced.structure)
        if want != got:
            raise AssertionError(f"the rebuild of {self.name} differs from its direct trace:\n{want}\n{got}")
