"""The mutant corpus: known-wrong versions of each lab's kernels, as edits to the solution notebook.

Every graded test must lose its points on at least one mutant here (a test that cannot fail is a
defect), with a message naming the likely cause; every alternative must keep full marks.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Mutant:
    name: str
    why: str  # the mistake, in a student's terms
    edits: dict[str, str]  # old text in the solution's code -> new text
    targets: dict[str, str]  # test id -> regex the failure message must match
    others_pass: tuple[str, ...] = field(default=())  # tests that must still pass (shows targeting)


@dataclass(frozen=True)
class Alternative:
    name: str
    why: str
    edits: dict[str, str]
