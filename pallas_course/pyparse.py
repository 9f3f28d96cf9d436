"""Python source to an `ast.Module`, one thread at a time.

CPython 3.11's AST converter keeps its recursion counter per interpreter, not per thread (gh-106905): two threads
converting at once can leave it off and fail with "SystemError: AST constructor recursion depth mismatch". The
grader parses on two threads (autograder.steps.pipeline computes its fingerprint meanwhile, while the main thread
reads the hidden tests): under load the first submissions of a worker failed that way ("the grader failed on this
submission"). Every parse of the grader's and the helpers' goes through `parse`.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """ast.parse, serialized with every other `parse` of this process."""
    with _LOCK:
        return ast.parse(source, filename)
