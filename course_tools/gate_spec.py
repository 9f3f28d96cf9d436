"""course.yml's `gates:` section, read into typed criteria.

The one source of what a gate asks: `course bench` reads the shapes and block sweeps to run from here,
`course gates` reads the thresholds, and the estimate model reads its assumptions. Nothing else types a
gate's shape or threshold.
"""

from __future__ import annotations

import functools
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from autograder.course_manifest import Manifest, ManifestError, manifest


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EstimateAssumptions(_Strict):
    """The numbers the estimate model assumes that are not chip constants."""

    chip: str  # course chip name the `est.` rows are worked for
    step_overhead_s: float = Field(ge=0)  # fixed cost per grid step, beyond DMA and MXU time
    step_overhead_source: str = Field(min_length=1)


class MatmulShape(_Strict):
    m: int = Field(gt=0)
    n: int = Field(gt=0)
    k: int = Field(gt=0)


class MatmulBlocks(_Strict):
    bm: int = Field(gt=0)
    bn: int = Field(gt=0)
    bk: int = Field(gt=0)


class SoftmaxBlocks(_Strict):
    rows_per_block: int = Field(gt=0)


class _CriterionBase(_Strict):
    id: str
    text: str
    kernel: str  # the `impl` of kernel records
    baseline: str  # the `impl` of baseline records
    kernel_source: str  # repo path whose last change makes older records stale
    dtype: str


class MatmulCriterion(_CriterionBase):
    """Best block choice of one run within `time_ratio_at_most` of XLA at exactly `shape`."""

    workload: Literal["matmul"]
    shape: MatmulShape
    configs: list[MatmulBlocks] = Field(min_length=1)
    time_ratio_at_most: float = Field(gt=0)

    def shape_dict(self) -> dict[str, int]:
        return self.shape.model_dump()


class SoftmaxCriterion(_CriterionBase):
    """Best rows_per_block of one run within `time_ratio_at_most` of the baseline (XLA's own fused softmax) at every
    recorded (rows >= min_rows, width)."""

    workload: Literal["softmax"]
    min_rows: int = Field(gt=0)
    rows: list[int] = Field(min_length=1)
    widths: list[int] = Field(min_length=1)
    configs: list[SoftmaxBlocks] = Field(min_length=1)
    time_ratio_at_most: float = Field(gt=0)

    @model_validator(mode="after")
    def _rows_reach_min(self) -> "SoftmaxCriterion":
        if any(r < self.min_rows for r in self.rows):
            raise ValueError(f"rows {self.rows} should all be >= min_rows={self.min_rows}")
        return self

    def shapes(self) -> list[dict[str, int]]:
        return [{"rows": r, "cols": w} for r in self.rows for w in self.widths]


Criterion = Annotated[Union[MatmulCriterion, SoftmaxCriterion], Field(discriminator="workload")]


class Gate(_Strict):
    id: str
    stage: str
    title: str
    chips: list[str] = Field(min_length=1)  # course chip names whose records may decide the gate
    estimate: EstimateAssumptions
    criteria: list[Criterion] = Field(min_length=1)

    def criterion(self, criterion_id: str) -> MatmulCriterion | SoftmaxCriterion:
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(f"{self.id} has no criterion {criterion_id!r}; it has {[c.id for c in self.criteria]}")


def load_gates(m: Manifest | None = None) -> list[Gate]:
    """The gates in course.yml, checked against the schema and against its `chips:` section."""
    m = m or manifest()
    gates = []
    for n, raw in enumerate(m.gates):
        try:
            gate = Gate.model_validate(raw)
        except ValidationError as e:
            lines = [f"  gates.{n}.{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
            raise ManifestError("course.yml gates section does not match the schema:\n" + "\n".join(lines)) from None
        unknown = [c for c in [*gate.chips, gate.estimate.chip] if c not in m.chips]
        if unknown:
            raise ManifestError(
                f"course.yml gates.{n} ({gate.id}) names chips {unknown} that are not in `chips:` "
                f"({', '.join(m.chips)})"
            )
        gates.append(gate)
    return gates


@functools.cache
def gates() -> tuple[Gate, ...]:
    """The repository's gates, read once per process."""
    return tuple(load_gates())


def gate(gate_id: str) -> Gate:
    for g in gates():
        if g.id == gate_id:
            return g
    raise KeyError(f"no gate {gate_id!r} in course.yml; gates are {[g.id for g in gates()]}")
