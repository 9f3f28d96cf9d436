"""The compiler's verdict on one kernel, in the course's words: one home for what the grade and a student's own
checks say when the real TPU compiler refuses a kernel (or could not be asked).

`CompileVerdict` holds one `tpu_compile.CompileResult` per chip; `rejection_message` is the sentence a student
reads: the kernel, every chip that refused it, the rule, then the compiler's reason translated by
`pallas_course.errors` (and, for a VMEM refusal, the legality model's working set beside it). The grader
(autograder.judge.compile_rule) and the notebooks' checks both build their message here, so both say the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from pallas_course.tpu_compile import LIBTPU_MISSING, CompileResult

NOT_COMPILED = "not compiled"  # how a result the compiler could not judge begins (score notes read it)


@dataclass(frozen=True)
class CompileVerdict:
    """The compiler's verdicts on one computation, one per chip."""

    results: tuple[CompileResult, ...]

    @property
    def rejections(self) -> tuple[CompileResult, ...]:
        """Every chip whose compiler refused the kernel."""
        return tuple(r for r in self.results if r.rejected)

    @property
    def rejection(self) -> CompileResult | None:
        """The first chip whose compiler refused the kernel, if any."""
        return next(iter(self.rejections), None)

    @property
    def compiled(self) -> tuple[str, ...]:
        return tuple(r.chip for r in self.results if r.ok)

    @property
    def unjudged(self) -> tuple[CompileResult, ...]:
        return tuple(r for r in self.results if r.skipped)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)


def _and(items: Iterable[str]) -> str:
    items = list(dict.fromkeys(items))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def predicted_vmem(structure: Any, chip: str) -> str:
    """The legality model's working set beside the compiler's VMEM verdict (one pallas_call traced)."""
    calls = getattr(structure, "pallas_calls", None)
    if not calls or len(calls) != 1:
        return ""
    from pallas_course.legality import check_pallas_call

    try:
        budget = check_pallas_call(calls[0], chip).budget
    except Exception:  # noqa: BLE001 - the model's opinion is an aside; the compiler's verdict stands alone
        return ""
    scratch = sum(e.bytes for e in budget.entries if e.name.startswith("scratch"))
    # where the scratch is most of it, say so: shrinking blocks (bk) would not help
    of_it = (
        f", of which scratch_shapes hold {scratch:,} bytes: shrink the scratch first"
        if scratch * 2 > budget.working_set_bytes
        else ""
    )
    return (
        f"\n  predicted working set {budget.working_set_bytes:,} bytes (blocks x buffers x bytes, plus scratch) vs "
        f"the default scoped limit {budget.limit_bytes:,} bytes on {chip}{of_it}"
    )


def rejection_message(
    label: str, chips: Sequence[str], rejected: CompileResult | Sequence[CompileResult], structure: Any = None
) -> str:
    """What the student reads: the kernel, every chip that refused it, the rule, then the compiler's reason in
    the course's words (said once where the chips agree, per chip where they do not)."""
    refused = [rejected] if isinstance(rejected, CompileResult) else [r for r in rejected if r.rejected]
    if not refused:
        raise ValueError("no chip refused the kernel")
    must = _and(chips)
    text = (
        f"{label} does not compile for {_and(r.chip for r in refused)} (the real TPU compiler, "
        f"{_and(r.topology for r in refused)}; it must compile for {must}):"
    )
    reasons: dict[str, list[CompileResult]] = {}
    for r in refused:
        reasons.setdefault(r.explanation or r.message, []).append(r)
    for reason, group in reasons.items():
        if len(reasons) > 1:
            text += f"\n{_and(r.chip for r in group)}:"
        text += f"\n{reason}"
        for r in group:
            if r.error_kind == "tpu-vmem":
                text += predicted_vmem(structure, r.chip)
    return text


def not_compiled_note(label: str, unjudged: Sequence[CompileResult]) -> str:
    """What a result says when the compiler could not be asked: never silent, never the student's fault."""
    if not unjudged:
        return ""
    libtpu = all(r.unjudged_because == LIBTPU_MISSING for r in unjudged)
    why = "libtpu missing" if libtpu else "the compiler could not be asked"
    detail = "" if libtpu else f" ({unjudged[0].message[:200]})"
    return (
        f"{NOT_COMPILED}: {why} — {label} was not compiled for {_and(r.chip for r in unjudged)}; the compile "
        f"rule was not applied{detail}"
    )
