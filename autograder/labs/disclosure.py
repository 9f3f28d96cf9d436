"""What feedback that may reach a student may say, and what it never may.

Every hidden check builds its messages (the TestFailure text, what it prints into the test cell, and so the
executed notebooks under grades/executed/, feedback/*.md|html and nbgrader's feedback) from one vocabulary:

- the case's public description: the call as the notebook writes it (`choose_blocks(4096, 4096, 4096, bfloat16,
  'v5e')`), shapes, dtypes, block sizes, the chip and course.yml's public numbers for it, the seed of the inputs;
- the student's own values: what their function returned, raised or launched (grid, BlockSpecs, dtypes), and
  what their own helpers answered;
- counts: how many values, blocks, cases or lines are wrong;
- the rule, in the check's own fixed words, and the fix.

Never grader-side data: LAB·1.5's key (before the lab's `reveal:` date not even which lines disagree: counts
per category only; autograder.labs.lab_1_5.ReadingFeedback), reference tables (none exist: LAB·1.4's helpers
stand in from the notebook's own matmul, in the jail; autograder.jail.jail_agent.calls.stand_ins), or the paths of
instructor-only files. `instructor_only` is the test of the last; tests/test_mutants.py applies it to every
failure of every lab's stub and mutants, tests/test_reading.py keeps LAB·1.5's key out before the reveal date.
"""

from __future__ import annotations

import re

# Paths and names that exist only on the grader's side (the course repository, never the release).
INSTRUCTOR_ONLY = re.compile(
    r"solutions/|autograder[/.]|/keys/|tokamax_reading\.yml|grades/instructor|"
    r"gradebook\.db|BEGIN HIDDEN TESTS|BEGIN SOLUTION"
)


def instructor_only(text: str) -> list[str]:
    """The instructor-only paths or markers named in `text` (empty: none)."""
    return sorted(set(INSTRUCTOR_ONLY.findall(text)))
