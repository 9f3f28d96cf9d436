"""course.yml as students may read it: what their wheel carries (course_tools.release) and what the helpers in
the grading jail read (autograder.jail_session). The rubrics and hidden-test descriptions are the grader's; the
student helpers only read the result."""
from __future__ import annotations

import json
from typing import Any


def public_manifest(raw: dict[str, Any], colab_pip: str) -> dict[str, Any]:
    """course.yml as students may read it (their wheel, the grading jail): rubrics and hidden-test descriptions
    emptied."""
    out = json.loads(json.dumps(raw, default=str))      # a deep copy; dates as ISO strings
    out["course"]["colab_pip"] = colab_pip
    for lab in out["labs"]:
        for t in lab["tests"]:
            t["checks"] = ""
        for w in lab["written"]:
            w["rubric"] = []
    return out
