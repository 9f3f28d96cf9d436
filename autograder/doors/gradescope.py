"""Gradescope's door: `run_autograder` runs `python -m autograder.doors.gradescope --lab LAB`, which grades
the notebook in /autograder/submission with `course grade`'s steps and writes /autograder/results/results.json
(gradescope/autograder_samples docs/specs.md). The root is GRADESCOPE_ROOT_ENV's (tests), /autograder by default.

What students see is what `course grade`'s feedback page shows them, and nothing more:
- one row per graded test, `visible` (the feedback shows every test's points and message; its code and inputs
  are never in a message: autograder.labs.disclosure). None is `after_due_date` or `after_published`: the spec says
  that while any row is held back students cannot see their total, and the feedback shows it;
- no row for a written answer: the spec's rows are "passed" or "failed" (a row without a status is styled by
  its score), so any row would look graded before a TA has read the answer. Gradescope grades written answers
  by hand as questions of the assignment's outline (manual grading on), outside the autograder's score, which
  stays the autograded points `course grade` gives (the top-level `score`, equal to the tests' sum);
- the top-level `output`: the score line, what the container lacks for grading (autograder.doors.platforms.fit),
  why the notebook could not be graded, the notes the feedback lists, and each written answer's status ("answered:
  awaiting manual grading" or "not answered"). Everything student-controlled is plain text (`output_format`/`test_output_format`
  "text");
- stdout (the grader's log) `hidden`; `extra_data` (stored, never shown): which jail ran, the lab, timings.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autograder.doors import platforms as door
from autograder.doors.platforms import Outcome

ROOT_ENV = "GRADESCOPE_ROOT"
DEFAULT_ROOT = "/autograder"


def results(outcome: Outcome, lab_code: str) -> dict[str, Any]:
    """Gradescope's results.json for one graded (or ungradable) submission."""
    r = outcome.result
    tests: list[dict[str, Any]] = []
    for t in r.tests:
        tests.append(
            {
                "name": t.name,
                "number": str(len(tests) + 1),
                "score": t.points,
                "max_score": t.max_points,
                "status": "passed" if t.status == "passed" else "failed",
                "output": t.message,
                "visibility": "visible",
            }
        )
    lines = [f"{lab_code} autograded score: {r.score:g} / {r.max_score:g}"]
    if outcome.small:
        lines.append(outcome.small)
    if outcome.grader_failed:
        lines.append(
            f"Not graded: {outcome.grader_failed}. This is a problem of the autograder, not of your "
            "notebook: tell your instructor."
        )
    elif r.error:
        lines.append(f"Not graded normally: {r.error}")
    lines += [f"- {n}" for n in (*outcome.notes, *r.notes)]
    if r.written:
        lines.append("Written answers, graded by hand by the course staff, separately from this score:")
        lines += door.written_lines(r.written, outcome.answers)
    return {
        "score": r.score,
        "execution_time": int(round(outcome.seconds)),
        "output": "\n".join(lines),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {
            **outcome.jail,
            **door.machine_data(outcome),
            "lab": r.lab,
            "seconds": round(outcome.seconds, 3),
            "graded": outcome.ungradable is None and outcome.grader_failed is None,
            **({"container_too_small": outcome.small} if outcome.small else {}),
            **({"grader_failed": outcome.grader_failed} if outcome.grader_failed else {}),
        },
    }


def failed_results(why: str) -> dict[str, Any]:
    """What Gradescope gets when the door itself failed before it had a result (still valid results.json)."""
    return {
        "score": 0,
        "output": f"Not graded: the autograder failed ({why}). This is a problem of the "
        "autograder, not of your notebook: tell your instructor.",
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
        "extra_data": {"grader_failed": why},
    }


def run(root: Path, lab_id: str) -> dict[str, Any]:
    """Grade root/submission as `lab_id`; write root/results/results.json whatever happens; return it."""
    return door.run(root, "submission", lab_id, results, failed_results)


def main(argv: list[str] | None = None) -> int:
    return door.main(
        argv,
        doc=__doc__ or "",
        root_env=ROOT_ENV,
        default_root=DEFAULT_ROOT,
        folder="submission",
        results=results,
        failed=failed_results,
        shown=("score", "extra_data"),
    )


if __name__ == "__main__":
    sys.exit(main())
