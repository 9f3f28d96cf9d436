"""LAB·1.5 hidden check: the margin marks of the Tokamax reading, against the instructor's key.

The key is the reading walk's marks (pallas_course/walks.yml, `tokamax-lsce-forward`), written for the
pinned tokamax release and fingerprinted by the hash of its source lines. If the installed tokamax shows
other lines, the key is stale: the test fails saying so, rather than grading against the wrong lines.

Partial credit (nbgrader reads the number the test cell ends with). For tokamax 0.0.12 the key has 137
lines that count, 45 algorithm and 92 schedule; closing brackets and lines where either mark can be argued
don't count. The credit is the points times the *smaller* of two shares: algorithm lines marked algorithm,
and schedule lines marked schedule. A margin that marks every line the same way therefore gets 0, not the
two-thirds that plain agreement would give it; a margin with half its lines wrong gets about half.
Unmarked lines count as wrong.
"""
from __future__ import annotations

import math
from typing import Any

from autograder.harness import TestFailure, quiet
from pallas_course.manifest import manifest
from pallas_course.walks import format_ranges

LAB = "lab-1.5-reading-tokamax"


def _points(test_id: str) -> float:
    return manifest().lab(LAB).test(test_id).points


def margin_marks(marks: Any) -> float:
    """Score `marks` ({line or range: "algorithm" | "schedule"}) against the key; returns the points earned."""
    test = "margin_marks"
    points = _points(test)
    with quiet():
        from pallas_course import tokamax_reading

        try:
            key = tokamax_reading.reading()
        except tokamax_reading.TokamaxMissing as e:
            raise TestFailure(f"{test}: cannot grade here: {e}") from None
        if key.stale:
            raise TestFailure(f"{test}: {key.stale}")
        margin = tokamax_reading.read_margin(marks, key)
    graded = key.graded_lines()
    given = {n: margin.marks.get(n) for n in graded}
    if not any(given.values()):
        why = "; ".join(margin.problems) or "the marks dict is empty"
        raise TestFailure(f"{test}: not implemented yet: no line of the reading is marked ({why})")
    shares = {}
    for mark in ("algorithm", "schedule"):
        lines = [n for n in graded if key.marks[n] == mark]
        right = sum(1 for n in lines if given[n] == mark)
        shares[mark] = (right, len(lines))
    wrong = [n for n in graded if given[n] is not None and given[n] != key.marks[n]]
    unmarked = [n for n in graded if given[n] is None]
    fraction = min(r / t for r, t in shares.values())
    earned = points if fraction == 1 else math.floor(points * fraction * 100) / 100
    (ra, ta), (rs, ts) = shares["algorithm"], shares["schedule"]
    print(f"{test}: algorithm lines marked algorithm {ra}/{ta}, schedule lines marked schedule {rs}/{ts}; "
          f"credit = {points:g} x the smaller share = {earned:g} of {points:g}")
    if wrong:
        print(f"marked differently from the key: {format_ranges(wrong)}")
    if unmarked:
        print(f"not marked: {format_ranges(unmarked)}")
    for p in margin.problems:
        print(f"not understood (ignored): {p}")
    return earned
