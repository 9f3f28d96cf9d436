"""The repository's course.yml as the grader and the instructor tools read it: the student schema
(pallas_course.manifest) plus what only the grader may know: each lab's model-answer notebook (`source`), its
checks module (`grader`), what each hidden test checks and the written answers' rubrics (the compile rule is
public: pallas_course.manifest.CompileRule, the notebooks' checks compile as the grade does).
Strict: an unknown or misspelt field is an error. `course release` writes the students' copy without these
fields (autograder.public_manifest).

REPO_ROOT, the repository's root, lives here: the student wheel knows nothing of the repository's layout.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import ConfigDict, model_validator

from pallas_course import manifest as public
from pallas_course.manifest import ManifestError, read_yaml_model

REPO_ROOT = Path(__file__).resolve().parent.parent
COURSE_YML = REPO_ROOT / "course.yml"

_STRICT = ConfigDict(extra="forbid", frozen=True)


class TestSpec(public.TestSpec):
    """One autograded hidden-test cell: its nbgrader grade_id is `id`; `checks` says what it checks."""

    model_config = _STRICT
    checks: str


class WrittenSpec(public.WrittenSpec):
    """One manually graded written answer: its nbgrader grade_id is `id`; `rubric`, the grader's."""

    model_config = _STRICT
    rubric: list[str]


CompileRule = public.CompileRule


class LabSpec(public.LabSpec):
    model_config = _STRICT
    source: str  # the nbgrader source: model answers and hidden tests (solutions/)
    grader: str  # the module holding a check per test (autograder.labs.*)
    tests: list[TestSpec]
    written: list[WrittenSpec]

    @model_validator(mode="after")
    def _compile_rule_names_tests(self) -> "LabSpec":
        if self.compile is not None:
            unknown = sorted(set(self.compile.tests) - {t.id for t in self.tests})
            if unknown:
                raise ValueError(f"compile.tests names tests the lab does not have: {unknown}")
        return self


class Manifest(public.Manifest):
    labs: list[LabSpec]


def load(path: Path | str = COURSE_YML) -> Manifest:
    return read_yaml_model(
        Path(path), Manifest, ManifestError, lives="the course manifest lives at the repository root", schema="manifest"
    )


@functools.cache
def manifest() -> Manifest:
    """The repository's course.yml, read once per process."""
    return load()


__all__ = [
    "REPO_ROOT",
    "COURSE_YML",
    "ManifestError",
    "TestSpec",
    "WrittenSpec",
    "CompileRule",
    "LabSpec",
    "Manifest",
    "load",
    "manifest",
]
