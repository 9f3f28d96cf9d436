"""`course.yml` as a student may read it, into typed objects: the course, the stage, the labs (their notebooks,
kernels, tests and points, written prompts), the chips, the gates and where the release is published.

This is the wheel's schema. The instructor's course.yml also holds what only the grader reads (the hidden
checks, the rubrics, the model-answer notebooks); `course release` leaves those out of the wheel's copy, and the grader reads them with its own schema (autograder.course_manifest), which extends this one.
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The wheel carries its course.yml beside this module (the release writes it); in a checkout this is a link to
# the instructor's file, whose grader-only fields this schema reads past (_Public).
MANIFEST_PATH = Path(__file__).with_name("course.yml")


class ManifestError(ValueError):
    """course.yml is missing or does not match the schema."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Public(BaseModel):
    # A lab, a test and a written answer carry grader-only fields in the instructor's course.yml: ignored here;
    # the grader's schema (autograder.course_manifest) forbids unknown ones, so a misspelt field still fails.
    model_config = ConfigDict(extra="ignore", frozen=True)


class CourseInfo(_Strict):
    id: str
    title: str
    track_chapter: int
    helpers_package: str
    colab_pip: str


class StageInfo(_Strict):
    id: str
    number: int
    title: str
    schedule: str
    summary: str
    deliverables: list[str]


class TestSpec(_Public):
    """One autograded test: the kernel it covers and its points (the notebook's hidden-test cell `id`)."""

    id: str
    kernel: str
    points: float = Field(gt=0)


class WrittenSpec(_Public):
    """One written answer, graded by hand: its prompt and points (the notebook's answer cell `id`)."""

    id: str
    points: float = Field(gt=0)
    prompt: str


class CompileRule(_Strict):
    """It must compile: the kernels these tests trace are also compiled for `chips` by the real TPU compiler
    (pallas_course.tpu_compile): in the grade, where a kernel it rejects loses these tests' points, and in the
    notebook's "as graded" checks, where libtpu is installed (so a student sees the refusal first)."""

    chips: list[str] = Field(min_length=1)
    tests: list[str] = Field(min_length=1)
    # Seconds one compile (one kernel, one chip) may take in the grade's judge before it counts as the kernel's
    # failure ("did not finish within N s"): about 100x the median compile of the lab's own kernels.
    timeout_s: float = Field(default=60.0, gt=0)


class LabSpec(_Public):
    id: str
    code: str
    title: str
    week: int
    notebook: str  # the student's notebook, as released
    kernels: list[str]
    tests: list[TestSpec]
    written: list[WrittenSpec]
    # The day this lab's model code (its `site:show` cells) goes public on the student site; None: never.
    reveal: dt.date | None = None
    # Extras of the student wheel this lab's set-up cell installs (LAB·1.5: "reading", tokamax).
    helpers_extras: list[str] = []
    # It must compile for these chips: public, so the notebook's checks compile as the grade does.
    compile: CompileRule | None = None

    def revealed(self, today: dt.date) -> bool:
        return self.reveal is not None and today >= self.reveal

    @property
    def max_score(self) -> float:
        return sum(t.points for t in self.tests) + sum(w.points for w in self.written)

    @property
    def autograded_max(self) -> float:
        return sum(t.points for t in self.tests)

    def test(self, test_id: str) -> TestSpec:
        for t in self.tests:
            if t.id == test_id:
                return t
        raise KeyError(f"{self.id} has no test {test_id!r}; it has {[t.id for t in self.tests]}")


class ReleaseInfo(_Strict):
    """Where `course release` is published: a GitHub repository holding the release folder as its root."""

    github: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")  # owner/name
    branch: str = "main"

    def raw_url(self, path: str) -> str:
        return f"https://raw.githubusercontent.com/{self.github}/{self.branch}/{path}"

    def colab_url(self, path: str) -> str:
        return f"https://colab.research.google.com/github/{self.github}/blob/{self.branch}/{path}"


class Manifest(_Strict):
    course: CourseInfo
    stage: StageInfo
    labs: list[LabSpec]
    # Chips and gates are validated by their own modules (pallas_course.chips, course_tools.gates).
    chips: dict[str, dict[str, Any]]
    gates: list[dict[str, Any]]
    release: ReleaseInfo | None = None

    def lab(self, lab_id: str) -> LabSpec:
        for lab in self.labs:
            if lab.id == lab_id:
                return lab
        raise KeyError(f"no lab {lab_id!r} in course.yml; labs are {[l.id for l in self.labs]}")

    def compile_rule(self, test_id: str) -> CompileRule | None:
        """The compile rule that covers the test `test_id` (test ids are unique across labs), if any."""
        for lab in self.labs:
            if lab.compile is not None and test_id in lab.compile.tests:
                return lab.compile
        return None

    def lab_for_notebook(self, name: str) -> LabSpec | None:
        """The lab whose notebook file name (without folders) is `name`, if any."""
        stem = Path(name).stem
        for lab in self.labs:
            if Path(lab.notebook).stem == stem:
                return lab
        return None


M = TypeVar("M", bound=BaseModel)


def read_yaml_model(path: Path, model: type[M], error: type[Exception], *, lives: str, schema: str) -> M:
    """The YAML file at `path` as `model`; raises `error` saying why not: not found (and where such a file
    `lives`), not YAML, or one line per field that does not match the `schema`."""
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise error(f"{path}: not found; {lives}") from None
    except yaml.YAMLError as e:
        raise error(f"{path}: not valid YAML: {e}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        lines = [f"  {'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
        raise error(f"{path} does not match the {schema} schema:\n" + "\n".join(lines)) from None


def load(path: Path | str = MANIFEST_PATH) -> Manifest:
    return read_yaml_model(
        Path(path),
        Manifest,
        ManifestError,
        lives="the helpers package carries it beside pallas_course/manifest.py",
        schema="manifest",
    )


@functools.cache
def manifest() -> Manifest:
    """The course.yml this package carries, read once per process."""
    return load()
