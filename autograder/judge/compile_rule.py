"""It must compile: the grader's compile step and the rule that scores it.

A kernel counts only if the real TPU compiler accepts it. The values a student's kernel returns come from TPU
interpret mode, which accepts kernels no TPU would (gelu's erfc, a 1-row f32 block, a block over the VMEM limit);
so each test that course.yml's `compile:` rule of its lab lists also compiles the computation it graded, for
the rule's chips, with libtpu, deviceless. It runs in the grader's judge (autograder.judge: a bounded child of
the grader, each compile within the rule's `timeout_s`), on the computation rebuilt from plain data
(`Invocation.computation`), never in the jail. A rejection fails the test with the compiler's reason in the
course's words (pallas_course.compile_verdict, the message the student's own checks print too); what cannot be
judged (no libtpu, a compiler that cannot be asked) costs nothing and says so: the test's result carries a
"not compiled: ..." note.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Sequence

from pallas_course import tpu_compile

# One message for the grade and the student's own checks (issue 26/27): built in the student wheel.
from pallas_course.compile_verdict import NOT_COMPILED, CompileVerdict, not_compiled_note, rejection_message
from pallas_course.tpu_compile import CompileResult  # noqa: F401 - the results' type, for callers

CACHE_SIZE = 256  # verdicts kept per grader process: one per distinct computation a notebook's tests trace


def compile_verdict(
    fn: Callable[..., Any],
    in_avals: Sequence[Any],
    chips: Sequence[str],
    places: Sequence[tuple[str | None, Any]] | None = None,
) -> CompileVerdict:
    """Compile `fn` over `in_avals` for each chip: the grading compile step, usable on any traced computation.
    `places`: where the student launched each pallas_call (a rebuild's, autograder.judge.rebuild.Computation)."""
    return CompileVerdict(tuple(tpu_compile.compile_chips(fn, in_avals, chips, places)))


def for_compiler(computation: Any) -> Callable[..., Any]:
    """What the compiler is handed: the rebuild with canonical names (autograder.judge.rebuild), so nothing a student
    named reaches it."""
    canonical = getattr(computation, "for_compiler", None)
    return canonical() if canonical is not None else computation.fn


def of_the_computation(verdict: CompileVerdict) -> bool:
    """True when `verdict` is a function of the computation alone: every chip compiled, or was refused in the
    compiler's own words. A compile stopped at its limit, a judge that crashed or ran out of memory (error_kind
    "tpu-timeout": autograder.judge.client) or a compiler that could not be asked depend on what else ran
    then (another submission's compile started ahead, the machine's load): they are never kept for another."""
    return all(r.ok or (r.rejected and r.error_kind != "tpu-timeout") for r in verdict.results)


class _Cache:
    """Verdicts by computation: by the digest of what it was rebuilt from where it has one (the same kernel at the
    same shapes, graded again by another test or notebook of this process), else by the object (the same inputs
    give the same Invocation, hence the same computation object). Only verdicts `of_the_computation` are kept:
    a timeout met in one submission is met again, or not, by the next on its own."""

    def __init__(self) -> None:
        self._items: OrderedDict[Any, tuple[Any, tuple[str, ...], CompileVerdict]] = OrderedDict()

    def known(self, digest: str, chips: Sequence[str]) -> bool:
        hit = self._items.get(("digest", digest))
        return hit is not None and hit[1] == tuple(chips)

    def verdict(self, computation: Any, chips: Sequence[str], timeout_s: float = 60.0) -> CompileVerdict:
        digest = getattr(computation, "digest", None)
        key = ("digest", digest) if digest else ("object", id(computation))
        hit = self._items.get(key)
        if hit is not None and (digest or hit[0] is computation) and hit[1] == tuple(chips):
            self._items.move_to_end(key)
            return hit[2]
        if getattr(computation, "fn", None) is None:  # the judge's, in its box: the compile runs there
            verdict = CompileVerdict(tuple(computation.verdicts(list(chips), timeout_s)))
        else:
            places = list(getattr(computation, "places", ())) or None
            verdict = compile_verdict(for_compiler(computation), computation.in_avals, chips, places)
        if of_the_computation(verdict):
            self._items[key] = (computation, tuple(chips), verdict)  # holds the object: its id is not reused
            while len(self._items) > CACHE_SIZE:
                self._items.popitem(last=False)
        return verdict


_CACHE = _Cache()


def ahead(test: str) -> Callable[[Any], None] | None:
    """For `test`'s invocations: start the compile rule's compiles of a rebuilt computation in the judge, beside
    its run (`check` then collects them), unless the rule does not list `test`, there is no compiler, or this
    process already has the verdict."""
    from autograder.course_manifest import manifest

    rule = manifest().compile_rule(test)
    if rule is None or not tpu_compile.available():
        return None

    def start(computation: Any) -> None:
        digest, judge = getattr(computation, "digest", None), getattr(computation, "judge", None)
        # a computation with its fn here (the tests' LocalJudge) is compiled in this process by `check`
        if (
            digest
            and judge is not None
            and getattr(computation, "fn", None) is None
            and not _CACHE.known(digest, rule.chips)
        ):
            judge.compile_ahead(digest, list(rule.chips))

    return start


def check(test: str, label: str, invocation: Any) -> str | None:
    """The compile rule of `test` on one graded invocation: None when it passes (or does not apply, or cannot be
    judged), else the failure message. Applies where course.yml's lab lists `test` under `compile.tests` and the
    invocation carries the rebuilt computation."""
    from autograder.course_manifest import manifest

    rule = manifest().compile_rule(test)
    computation = getattr(invocation, "computation", None)
    if rule is None or computation is None:
        return None
    verdict = _CACHE.verdict(computation, rule.chips, rule.timeout_s)
    if not verdict.rejections:
        if verdict.unjudged:
            # never silent: the test's result carries it (autograder.steps.score reads the line back as its note)
            print(not_compiled_note(label, verdict.unjudged))
        return None
    return rejection_message(label, rule.chips, verdict.rejections, getattr(invocation, "structure", None))


def libtpu_warning() -> str | None:
    """The one line a grading run starts with where the compile rule cannot be applied (no libtpu), else None."""
    if tpu_compile.available():
        return None
    return (
        "warning: libtpu is not installed, so no kernel is compiled for a TPU: each test the compile rules list "
        f"passes its compile with the note \"{NOT_COMPILED}: libtpu missing\" ({tpu_compile.install_hint()})"
    )
