"""What the grade's compile step adds to one notebook: the lab's compile-rule tests run on its solution in this
process, with every compile timed (autograder.judge.compile_rule.compile_verdict: one per distinct computation, for
each chip of the rule). Prints JSON; course_tools.bench.grading_time runs it in fresh processes.

  python -m course_tools.bench.compile_step "LAB·1.1"
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import time
from typing import Any


def measure(code: str) -> dict[str, Any]:
    from autograder.judge import compile_rule
    from autograder.notebook_code import load
    from pallas_course import tpu_compile
    from autograder.course_manifest import REPO_ROOT, manifest

    lab = next(lab for lab in manifest().labs if lab.code == code)
    if lab.compile is None:
        raise SystemExit(f"{code} has no compile rule in course.yml")
    with contextlib.redirect_stdout(io.StringIO()):
        ns = load(REPO_ROOT / lab.source)
    checks = importlib.import_module(lab.grader)
    spent: list[float] = []
    verdict = compile_rule.compile_verdict

    def timed(fn: Any, in_avals: Any, chips: Any) -> Any:
        v = verdict(fn, in_avals, chips)
        spent.extend(r.seconds for r in v.results)
        return v

    compile_rule.compile_verdict = timed  # _Cache.verdict looks it up at call time
    t0 = time.perf_counter()
    for test in lab.compile.tests:
        getattr(checks, test)(ns[lab.test(test).kernel])
    wall = time.perf_counter() - t0
    return {
        "lab": code,
        "tests": lab.compile.tests,
        "chips": lab.compile.chips,
        "libtpu": tpu_compile.libtpu_version(),
        "compiles": len(spent),
        "compile_s": round(sum(spent), 3),
        "first_compile_s": round(spent[0], 3) if spent else None,
        "tests_wall_s": round(wall, 3),
    }


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1] if len(sys.argv) > 1 else "LAB·1.1")))
