"""course.yml as students may read it: what their wheel carries (course_tools.release) and what the helpers in
the grading jail read (autograder.jail.agent_env). The grader's own fields (autograder.course_manifest: the
model-answer notebooks, the checks modules, the hidden-test descriptions, the rubrics) are
left out; what remains is what the wheel's schema (pallas_course.manifest) reads."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from autograder import course_manifest as grader
from pallas_course import manifest as student


def _grader_only(full: type[BaseModel], public: type[BaseModel]) -> tuple[str, ...]:
    """The fields the grader's schema has and the student's does not: one list, read off the two schemas."""
    return tuple(name for name in full.model_fields if name not in public.model_fields)


LAB_FIELDS = _grader_only(grader.LabSpec, student.LabSpec)  # source, grader
TEST_FIELDS = _grader_only(grader.TestSpec, student.TestSpec)  # checks
WRITTEN_FIELDS = _grader_only(grader.WrittenSpec, student.WrittenSpec)  # rubric


def public_manifest(raw: dict[str, Any], colab_pip: str) -> dict[str, Any]:
    """course.yml as students may read it (their wheel, the grading jail): the grader's fields left out."""
    out = json.loads(json.dumps(raw, default=str))  # a deep copy; dates as ISO strings
    out["course"]["colab_pip"] = colab_pip
    for lab in out["labs"]:
        for name in LAB_FIELDS:
            lab.pop(name, None)
        for t in lab["tests"]:
            for name in TEST_FIELDS:
                t.pop(name, None)
        for w in lab["written"]:
            for name in WRITTEN_FIELDS:
                w.pop(name, None)
    return out
