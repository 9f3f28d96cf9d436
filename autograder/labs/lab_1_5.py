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

import datetime as dt
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.labs.harness import TestFailure, quiet
from autograder.course_manifest import manifest
from autograder.labs.walk_key import with_key
from pallas_course.walks import Walk, WalkDataError, format_ranges

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
        # no path in the message: it reaches the student's feedback
        raise KeyMissing(
            "the key is not here: it lives grader-side only, in the course repository, and no "
            "helpers install carries it; grade from the repository"
        ) from None
    if not isinstance(raw, dict):
        raise WalkDataError(f"{path}: expected a mapping with source_hash and marks")
    return raw


def key(path: Path | None = None, *, where: str | None = None) -> Walk:
    """The reading with the key's marks (`stale` says why it may not grade). Raises TokamaxMissing, KeyMissing.
    `where` names the key in messages (default: its path, for the instructor)."""
    from pallas_course import tokamax_reading

    path = Path(path or KEY_PATH)
    raw = load_key(path)
    if raw.get("walk") != tokamax_reading.WALK_ID:
        raise WalkDataError(f"{where or path}: a key for walk {raw.get('walk')!r}, not {tokamax_reading.WALK_ID!r}")
    return with_key(tokamax_reading.reading(), raw, where=where or _shown(path))


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path(__file__).resolve().parents[2]))
    except ValueError:
        return str(path)


def _points(test_id: str) -> float:
    return manifest().lab(LAB).test(test_id).points


def today() -> dt.date:
    """The grader's notion of today (UTC), for the reveal date; tests replace it."""
    return dt.datetime.now(dt.timezone.utc).date()


def revealed(on: dt.date | None = None) -> bool:
    """Whether the lab's `reveal:` date (course.yml) has come: from then on feedback names the lines."""
    return manifest().lab(LAB).revealed(on or today())


@dataclass(frozen=True)
class Tally:
    """One category of the key as feedback may state it before the reveal date: counts, never lines."""

    mark: str  # "algorithm" | "schedule"
    lines: int  # graded lines of this category
    right: int  # marked as the key marks them
    unmarked: int  # not marked at all (the rest of lines - right are marked the other way)
    not_a_mark: dict[str, int] = field(default_factory=dict)  # of the unmarked: {value that is no mark: lines}

    def sentence(self) -> str:
        wrong = self.lines - self.right - self.unmarked
        invalid = sum(self.not_a_mark.values())
        named = "".join(f", {k} marked {value}, which is not a mark" for value, k in self.not_a_mark.items())
        return (
            f"{self.mark} lines marked {self.mark} {self.right}/{self.lines} "
            f"({wrong} marked the other way, {self.unmarked - invalid} not marked{named})"
        )


@dataclass(frozen=True)
class ReadingFeedback:
    """Everything LAB·1.5's feedback may say, typed: the two tallies, the credit, the student's own entries
    that were not understood, and (after the reveal date only) the lines that disagree with the key."""

    tallies: tuple[Tally, Tally]
    points: float
    earned: float
    problems: tuple[str, ...]  # about the student's own entries, in their own words
    disagree: tuple[int, ...] | None = None  # after the reveal date: graded lines marked the other way
    unmarked: tuple[int, ...] | None = None  # after the reveal date: graded lines not marked

    def lines(self) -> list[str]:
        tallies = "; ".join(t.sentence() for t in self.tallies)
        out = [
            f"margin_marks: {tallies}; credit = {self.points:g} x the smaller share = {self.earned:g} of "
            f"{self.points:g}"
        ]
        if self.disagree is None:
            out.append(f"which lines disagree is shown from {manifest().lab(LAB).reveal} (the lab's reveal date)")
        else:
            if self.disagree:
                out.append(f"marked differently from the key: {format_ranges(list(self.disagree))}")
            if self.unmarked:
                out.append(f"not marked: {format_ranges(list(self.unmarked))}")
        out += [f"not understood (ignored): {p}" for p in self.problems]
        return out


def margin_marks(marks: Any, *, on: dt.date | None = None) -> float:
    """Score `marks` ({line or range: "algorithm" | "schedule"}) against the key; returns the points earned.

    What it prints goes back to the student (ReadingFeedback): before the lab's reveal date (`on`, default
    today) only counts per category, never which lines; from that date the lines that disagree."""
    test = "margin_marks"
    points = _points(test)
    with quiet():
        from pallas_course import tokamax_reading

        try:
            answer = key(where="the grader's key")  # no grader-side path in what the student reads
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
    tallies = []
    for mark in ("algorithm", "schedule"):
        lines = [n for n in graded if answer.marks[n] == mark]
        invalid = tokamax_reading.not_a_mark_lines(margin, set(lines))
        tallies.append(
            Tally(
                mark,
                len(lines),
                sum(1 for n in lines if given[n] == mark),
                sum(1 for n in lines if given[n] is None),
                {value: len(ns) for value, ns in invalid.items()},
            )
        )
    fraction = min(t.right / t.lines for t in tallies)
    earned = points if fraction == 1 else math.floor(points * fraction * 100) / 100
    show = revealed(on)
    feedback = ReadingFeedback(
        tuple(tallies),
        points,
        earned,
        tuple(margin.problems),  # type: ignore[arg-type]
        disagree=tuple(n for n in graded if given[n] is not None and given[n] != answer.marks[n]) if show else None,
        unmarked=tuple(n for n in graded if given[n] is None) if show else None,
    )
    print("\n".join(feedback.lines()))
    return earned


SOLUTION_CELL = "marks"  # the grade_id of the answer cell in solutions/ (and labs/)
_BEGIN, _END = "### BEGIN SOLUTION\n", "### END SOLUTION"


def model_answer(path: Path | None = None) -> str:
    """The key as the code a student would write: one `range(first, last + 1)` per run of code lines with the
    same mark (a run may span blank lines, which are ignored), three to a line."""
    w = key(path)
    runs: list[tuple[int, int, str]] = []
    for n in w.code_lines():
        mark = w.marks[n]
        if runs and runs[-1][2] == mark:
            runs[-1] = (runs[-1][0], n, mark)
        else:
            runs.append((n, n, mark))
    entries = [f'range({lo}, {hi + 1}): "{mark}",' if hi > lo else f'{lo}: "{mark}",' for lo, hi, mark in runs]
    rows = [" ".join(entries[i : i + 3]) for i in range(0, len(entries), 3)]
    return (
        "# The model answer, written out from the grader's key (autograder/keys/tokamax_reading.yml) by\n"
        "# `python -m autograder.labs.lab_1_5 --write-solution`; tests/test_reading.py checks they agree.\n"
        "marks = {\n" + "".join(f"    {row}\n" for row in rows) + "}\n"
    )


def solution_region(source: str) -> str:
    """The text between the BEGIN/END SOLUTION markers of a cell."""
    head, _, rest = source.partition(_BEGIN)
    body, found, _ = rest.partition(_END)
    if not found:
        raise ValueError("the answer cell has no BEGIN/END SOLUTION region")
    return body


def write_solution(notebook: Path | None = None) -> bool:
    """Write model_answer() into the solution notebook's answer cell; True if it changed."""
    from autograder.course_manifest import REPO_ROOT
    from autograder.cells import grade_id

    import nbformat

    path = Path(notebook or REPO_ROOT / manifest().lab(LAB).source)
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if grade_id(c) == SOLUTION_CELL]
    old = solution_region(cell.source)
    new = model_answer()
    if old == new:
        return False
    cell.source = cell.source.replace(_BEGIN + old + _END, _BEGIN + new + _END)
    nbformat.write(nb, path)
    return True


def main(argv: list[str] | None = None) -> int:
    """`python -m autograder.labs.lab_1_5`: the reading numbered with the key's marks and the current hash;
    `--write-solution`: the solution notebook's model answer regenerated from the key (then regenerate labs/)."""
    import argparse

    from pallas_course.walks import render

    parser = argparse.ArgumentParser(prog="python -m autograder.labs.lab_1_5", description=main.__doc__)
    parser.add_argument(
        "--write-solution",
        action="store_true",
        help="rewrite the model answer in solutions/ from the key (re-run after re-keying)",
    )
    args = parser.parse_args(argv)
    if args.write_solution:
        changed = write_solution()
        print(
            "the solution's model answer "
            + (
                "was rewritten from the key; now run `nbgrader generate_assignment stage-1 --force`"
                if changed
                else "already agrees with the key"
            )
        )
        return 0
    print(render(key()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
