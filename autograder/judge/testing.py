"""For the tests of the checks: the judge's work in this process, through the same data form as the boxed judge's
(autograder.session.testing.LocalFunction uses it). Grading never does: a grading's judge is in its box."""

from __future__ import annotations

import json
from typing import Any, Callable

from autograder.judge.client import JudgeClient


class LocalJudge(JudgeClient):
    """The judge's work in this process, through the same data form (tests of the checks: LocalFunction)."""

    def __init__(self) -> None:
        super().__init__()
        from autograder.judge.server import Judge  # the rebuild's imports: only where a test asks for them

        self.judge = Judge()

    def _request(
        self, header: dict[str, Any], blobs: list[bytes], *, timeout: float | None, what: str
    ) -> tuple[dict[str, Any], list[bytes]]:
        reply, out = self.judge.handle(json.loads(json.dumps(header, allow_nan=False)), list(blobs))
        return json.loads(json.dumps(reply, allow_nan=False)), out

    def _local_fn(self, key: str) -> Callable[..., Any] | None:
        return self.judge.traced[key].computation.fn
