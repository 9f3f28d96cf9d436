"""LAB·1.5 hidden check: the margin marks of the Tokamax reading, against the instructor's key.

The key is grader-side only: autograder/keys/tokamax_reading.yml (marks, ungraded lines, the tokamax
release it was written for and the hash of its source lines). The reading students see (pallas_course/walks.yml,
`tokamax-lsce-forward`, shipped in the helpers package) has the lines and notes but no marks; `key()` lays
the key over it. If the installed tokamax shows other lines, the key is stale: the test fails saying so,
rather than grading against the wrong lines. The keys folder is not package data, so a wheel install of the
helpers has no key and the test says it cannot grade there.

Partial credit (nbgrader reads the number the test cell ends with). For tokamax 0.0.12 the key has 137
lines that count, 45 algorithm and 92 schedule; closing brackets and lines where either mark can be argued
don't count. The credit is the points times the *smaller* of two shares: algorithm lines marked algorithm,
and schedule lines marked schedule. A margin that marks every line the same way therefore gets 0, not the
two-thirds that plain agreement would give it; a margin with half its lines wrong gets about half.
Unmarked lines count as wrong.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from autograder.harness import TestFailure, quiet
from pallas_course.manifest import manifest
from pallas_course.walks import Walk, WalkDataError, format_ranges, with_key

LAB = "lab-1.5-reading-tokamax"
KEY_PATH = Path(__file__).resolve().parent.parent / "keys" / "tokamax_reading.yml"


class KeyMissing(FileNotFoundError):
    """The grader-side key is not here (an install of the helpers package, not the course repository)."""


def load_key(path: Path | None = None) -> dict[str, Any]:
    """The key as stored (KEY_PATH unless `path`): {walk, written_for, source_hash, marks, ungraded, rationale}."""
    import yaml

    path = Path(path or KEY_PATH)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise KeyMissing(f"the key is not here ({path}): it lives grader-side only, in the course repository's "
                         "autograder/keys/, and no helpers install carries it; grade from the repository") from None
    if not isinstance(raw, dict):
        raise WalkDataError(f"{path}: expected a mapping with source_hash and marks")
    return raw


def key(path: Path | None = None) -> Walk:
    """The reading with the key's marks (`stale` says why it may not grade). Raises TokamaxMissing, KeyMissing."""
    from pallas_course import tokamax_reading

    path = Path(path or KEY_PATH)
    raw = load_key(path)
    if raw.get("walk") != tokamax_reading.WALK_ID:
        raise WalkDataError(f"{path}: a key for walk {raw.get('walk')!r}, not {tokamax_reading.WALK_ID!r}")
    return with_key(tokamax_reading.reading(), raw, where=_shown(path))


def key_margin(path: Path | None = None) -> dict[int, str]:
    """The key as a student's margin, {line: "algorithm" | "schedule"} (the solution notebook's answer)."""
    return {n: m for n, m in key(path).marks.items() if m != "blank"}


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path(__file__).resolve().parents[2]))
    except ValueError:
        return str(path)


def _points(test_id: str) -> float:
    return manifest().lab(LAB).test(test_id).points


def margin_marks(marks: Any) -> float:
    """Score `marks` ({line or range: "algorithm" | "schedule"}) against the key; returns the points earned."""
    test = "margin_marks"
    points = _points(test)
    with quiet():
        from pallas_course import tokamax_reading

        try:
            answer = key()
        except (tokamax_reading.TokamaxMissing, KeyMissing, WalkDataError) as e:
            raise TestFailure(f"{test}: cannot grade here: {e}") from None
        if answer.missing:
            raise TestFailure(f"{test}: cannot grade here: {answer.missing}")
        if answer.stale:
            raise TestFailure(f"{test}: {answer.stale}")
        margin = tokamax_reading.read_margin(marks, answer)
    graded = answer.graded_lines()
    given = {n: margin.marks.get(n) for n in graded}
    if not any(given.values()):
        why = "; ".join(margin.problems) or "the marks dict is empty"
        raise TestFailure(f"{test}: not implemented yet: no line of the reading is marked ({why})")
    shares = {}
    for mark in ("algorithm", "schedule"):
        lines = [n for n in graded if answer.marks[n] == mark]
        right = sum(1 for n in lines if given[n] == mark)
        shares[mark] = (right, len(lines))
    wrong = [n for n in graded if given[n] is not None and given[n] != answer.marks[n]]
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


def main() -> int:
    """`python -m autograder.labs.lab_1_5`: the reading numbered with the key's marks and the current hash."""
    from pallas_course.walks import render

    print(render(key()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
