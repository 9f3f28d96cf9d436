"""PrairieLearn's door: the question's entrypoint (run.sh, from `course autograder prairielearn`) runs
`python -m autograder.doors.prairielearn --lab LAB`, which grades the notebook in /grade/student with
`course grade`'s steps and writes /grade/results/results.json (PrairieLearn docs/externalGrading.md). The root is
PL_ROOT_ENV's (tests), /grade by default.

- `score`: the autograded points over the lab's autograded maximum, in [0, 1] (written answers are graded
  by hand in PrairieLearn: the question's manual points);
- `tests[]`: one per graded test, `points`/`max_points` as `course grade` gives them and its message (built
  from the case, the student's own values and the rule: autograder.labs.disclosure; no hidden input, no check's
  source). PrairieLearn shows whatever is written: there is nothing like Gradescope's visibility, and
  nothing here needs it;
- `gradable: false` and `format_errors` when nothing could be graded (no notebook, not JSON, another lab's
  notebook, several notebooks), the grader itself failed, or the container is smaller than grading the lab
  needs (autograder.doors.platforms.fit: both sizes, the autograder's configuration): no attempt is used up;
- written answers: not in `score` (the question's manual points, graded by hand); `message` lists them as
  awaiting manual grading, and the notebook's answers are in the submission the TA opens (question.html's
  `pl-file-preview`; submission.html renders the answers' cells);
- at most MAX_BYTES (PrairieLearn's 1 MB cap): messages are cut further if the whole would pass it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from autograder.doors import platforms as door
from autograder.doors.platforms import Outcome

ROOT_ENV = "PL_GRADE_ROOT"
DEFAULT_ROOT = "/grade"
MAX_BYTES = 1_000_000
MAX_TIMEOUT_S = 600  # externalGradingOptions.timeout: at most 10 minutes (default 30 s)


def results(outcome: Outcome, lab_code: str) -> dict[str, Any]:
    """PrairieLearn's results.json for one submission."""
    r = outcome.result
    why = outcome.grader_failed or outcome.ungradable or outcome.small
    notes = [*outcome.notes, *r.notes]
    extra = {**outcome.jail, **door.machine_data(outcome), "lab": r.lab, "seconds": round(outcome.seconds, 3)}
    if why is not None:
        if outcome.small and why != outcome.small:
            notes.insert(0, outcome.small)
        elif outcome.small:
            notes.append(f"(as graded in this container: {r.score:g} / {r.max_score:g})")
        return {
            "gradable": False,
            "format_errors": [why, *notes],
            "message": f"{lab_code}: not graded ({why}); no attempt was used.",
            "extra_data": extra,
        }
    lines = [f"{lab_code} autograded score: {r.score:g} / {r.max_score:g}"]
    if r.error:
        lines.append(f"Not graded normally: {r.error}")
    lines += [f"- {n}" for n in notes]
    if r.written:
        lines.append("Written answers, graded by hand by the course staff (the question's manual points):")
        lines += door.written_lines(r.written, outcome.answers)
    data = {
        "gradable": True,
        "score": min(1.0, max(0.0, r.score / r.max_score)) if r.max_score > 0 else 0.0,
        "message": "\n".join(lines),
        "tests": [
            {
                "name": t.name,
                "description": f"{lab_code} · {t.name}",
                "points": t.points,
                "max_points": t.max_points,
                "message": t.message,
            }
            for t in r.tests
        ],
        "extra_data": extra,
    }
    return within_cap(data)


def within_cap(data: dict[str, Any]) -> dict[str, Any]:
    """`data` cut (test messages, then the message) until its JSON is under MAX_BYTES."""

    def size() -> int:
        return len(json.dumps(data, ensure_ascii=False).encode())

    cap = 2000
    while size() > MAX_BYTES and cap > 20:
        cap //= 2
        for t in data.get("tests", []):
            t["message"] = t["message"][:cap]
        data["message"] = data.get("message", "")[: cap * 4]
    return data


def failed_results(why: str) -> dict[str, Any]:
    return {
        "gradable": False,
        "format_errors": [f"the autograder failed ({why})"],
        "message": "Not graded: the autograder failed; no attempt was used. Tell your instructor.",
    }


def run(root: Path, lab_id: str) -> dict[str, Any]:
    """Grade root/student as `lab_id`; write root/results/results.json whatever happens; return it."""
    return door.run(root, "student", lab_id, results, failed_results)


def main(argv: list[str] | None = None) -> int:
    return door.main(
        argv,
        doc=__doc__ or "",
        root_env=ROOT_ENV,
        default_root=DEFAULT_ROOT,
        folder="student",
        results=results,
        failed=failed_results,
        shown=("score", "gradable", "extra_data"),
    )


if __name__ == "__main__":
    sys.exit(main())
