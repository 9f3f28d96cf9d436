"""It must compile: the grader's compile step and the rule that scores it.

A kernel counts only if the real TPU compiler accepts it. The values a student's kernel returns come from TPU
interpret mode, which accepts kernels no TPU would (gelu's erfc, a 1-row f32 block, a block over the VMEM limit);
so each test that course.yml's `compile:` rule of its lab lists also compiles the computation it graded, for
the rule's chips, with libtpu, deviceless. It runs here in the grader, on the computation rebuilt from plain data
(`Invocation.computation`), never in the jail. A rejection fails the test with the compiler's reason in the
course's words (pallas_course.errors, the notebooks' translator); what cannot be judged (no libtpu, a compiler
that cannot be asked) costs nothing and says so.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pallas_course import tpu_compile
from pallas_course.tpu_compile import CompileResult

CACHE_SIZE = 256     # verdicts kept per grader process: one per distinct computation a notebook's tests trace


@dataclass(frozen=True)
class CompileVerdict:
    """The compiler's verdicts on one computation, one per chip."""

    results: tuple[CompileResult, ...]

    @property
    def rejection(self) -> CompileResult | None:
        """The first chip whose compiler refused the kernel, if any."""
        return next((r for r in self.results if r.rejected), None)

    @property
    def compiled(self) -> tuple[str, ...]:
        return tuple(r.chip for r in self.results if r.ok)

    @property
    def unjudged(self) -> tuple[CompileResult, ...]:
        return tuple(r for r in self.results if r.skipped)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)


def compile_verdict(fn: Callable[..., Any], in_avals: Sequence[Any], chips: Sequence[str]) -> CompileVerdict:
    """Compile `fn` over `in_avals` for each chip: the grading compile step, usable on any traced computation."""
    return CompileVerdict(tuple(tpu_compile.compile_chips(fn, in_avals, chips)))


def _predicted_vmem(structure: Any, chip: str) -> str:
    """The legality model's working set beside the compiler's VMEM verdict (one pallas_call traced)."""
    calls = getattr(structure, "pallas_calls", None)
    if not calls or len(calls) != 1:
        return ""
    from pallas_course.legality import check_pallas_call

    try:
        budget = check_pallas_call(calls[0], chip).budget
    except Exception:  # noqa: BLE001 - the model's opinion is an aside; the compiler's verdict stands alone
        return ""
    return (f"\n  predicted working set {budget.working_set_bytes:,} bytes (blocks x buffers x bytes) vs the "
            f"default scoped limit {budget.limit_bytes:,} bytes on {chip}")


def rejection_message(label: str, chips: Sequence[str], rejected: CompileResult, structure: Any = None) -> str:
    """What the student reads: the kernel, the chip, the rule, then the compiler's reason in the course's words."""
    must = " and ".join(chips)
    text = (f"{label} does not compile for {rejected.chip} (the real TPU compiler, {rejected.topology}; "
            f"it must compile for {must}):\n{rejected.explanation or rejected.message}")
    if rejected.error_kind == "tpu-vmem":
        text += _predicted_vmem(structure, rejected.chip)
    return text


class _Cache:
    """Verdicts by computation: by the digest of what it was rebuilt from where it has one (the same kernel at the
    same shapes, graded again by another test or notebook of this process), else by the object (the same inputs
    give the same Invocation, hence the same computation object)."""

    def __init__(self) -> None:
        self._items: OrderedDict[Any, tuple[Any, tuple[str, ...], CompileVerdict]] = OrderedDict()

    def verdict(self, computation: Any, chips: Sequence[str]) -> CompileVerdict:
        digest = getattr(computation, "digest", None)
        key = ("digest", digest) if digest else ("object", id(computation))
        hit = self._items.get(key)
        if hit is not None and (digest or hit[0] is computation) and hit[1] == tuple(chips):
            self._items.move_to_end(key)
            return hit[2]
        verdict = compile_verdict(computation.fn, computation.in_avals, chips)
        self._items[key] = (computation, tuple(chips), verdict)   # holds the object: its id is not reused
        while len(self._items) > CACHE_SIZE:
            self._items.popitem(last=False)
        return verdict


_CACHE = _Cache()


def check(test: str, label: str, invocation: Any) -> str | None:
    """The compile rule of `test` on one graded invocation: None when it passes (or does not apply, or cannot be
    judged), else the failure message. Applies where course.yml's lab lists `test` under `compile.tests` and the
    invocation carries the rebuilt computation."""
    from autograder.course_manifest import manifest

    rule = manifest().compile_rule(test)
    computation = getattr(invocation, "computation", None)
    if rule is None or computation is None:
        return None
    verdict = _CACHE.verdict(computation, rule.chips)
    rejected = verdict.rejection
    if rejected is None:
        return None
    return rejection_message(label, rule.chips, rejected, getattr(invocation, "structure", None))
