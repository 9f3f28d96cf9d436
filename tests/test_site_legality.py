"""EX·09's in-page arithmetic (site/js/legality.js) agrees with pallas_course.legality on a shared table.

Each case in tests/fixtures/blockspec_cases.json goes through check_block + sandbox_budget in Python and
through legality.js, in node (when it is on the machine) and in Chromium (the module exactly as the built
page carries it); verdicts, every rule's expression and message, grid, bytes and the budget's verdict must be
identical, and so must fmt_bytes/fmt_mib on the table's numbers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pallas_course.legality import BlockSpecError, check_block, fmt_bytes, fmt_mib, sandbox_budget
from course_tools.site.sandbox_data import legality_data
from site_browser import browser, built_site, open_page  # noqa: F401 - pytest fixtures, used by name

REPO = Path(__file__).resolve().parent.parent
TABLE = json.loads((Path(__file__).parent / "fixtures" / "blockspec_cases.json").read_text())
CASES, NUMBERS = TABLE["cases"], TABLE["format_numbers"]
DATA = legality_data(sorted({c["dtype"] for c in CASES}))
BUDGET_KEYS = (
    "chip",
    "working_set_bytes",
    "vmem_bytes",
    "default_scoped_vmem_bytes",
    "limit_bytes",
    "fits_limit",
    "fits_capacity",
    "verdict",
    "sources",
)

# The same evaluation in node and in the page: `mod` is legality.js's module object.
JS_EVALUATE = """
(mod, data, cases, numbers) => ({
  cases: cases.map((c) => {
    try {
      const verdict = mod.checkBlock(data, c.shape, c.block, c.dtype, c.chip);
      const budget = mod.sandboxBudget(data, verdict, c.buffers ?? data.buffers, c.vmem_limit_bytes ?? null);
      return { verdict, budget };
    } catch (e) {
      return { error: e.message, kind: e.constructor.name };
    }
  }),
  numbers: numbers.map((n) => [mod.fmtBytes(n), mod.fmtMib(n)]),
})
"""


def python_results() -> dict:
    out = []
    for c in CASES:
        try:
            v = check_block(c["shape"], c["block"], np.dtype(c["dtype"]), c["chip"])
        except BlockSpecError as e:
            out.append({"error": str(e), "kind": "BlockSpecError"})
            continue
        b = sandbox_budget(v, buffers=c.get("buffers", 2), vmem_limit_bytes=c.get("vmem_limit_bytes"))
        budget = b.to_dict()
        out.append(
            {
                "verdict": json.loads(json.dumps(v.to_dict())),
                "budget": json.loads(json.dumps({k: budget[k] for k in BUDGET_KEYS})),
            }
        )
    return {"cases": out, "numbers": [[fmt_bytes(n), fmt_mib(n)] for n in NUMBERS]}


def assert_agree(js: dict, where: str) -> None:
    py = python_results()
    assert js["numbers"] == py["numbers"], f"{where}: fmt_bytes/fmt_mib differ: " + "; ".join(
        f"{n}: py {p} js {j}" for n, p, j in zip(NUMBERS, py["numbers"], js["numbers"]) if p != j
    )
    for case, p, j in zip(CASES, py["cases"], js["cases"]):
        if "error" in p:
            assert j == p, f"{where}: {case} should be refused like Python: {p}, got {j}"
            continue
        assert "error" not in j, f"{where}: {case}: JS raised {j}"
        jb = {k: j["budget"][k] for k in BUDGET_KEYS}
        assert j["verdict"] == p["verdict"], (
            f"{where}: verdicts differ for {case}:\npy {p['verdict']}\njs {j['verdict']}"
        )
        assert jb == p["budget"], f"{where}: budgets differ for {case}:\npy {p['budget']}\njs {jb}"


def test_table_covers_every_outcome():
    """The shared table has legal, illegal-at-lowering, illegal-at-compile, noted, over-limit and refused cases."""
    results = python_results()["cases"]
    verdicts = [r["verdict"] for r in results if "verdict" in r]
    assert any(v["legal"] for v in verdicts) and any(not v["lowers"] for v in verdicts)
    assert any(v["lowers"] and not v["legal"] for v in verdicts)  # compile-time (8-bit tiling)
    assert any(v["notes"] for v in verdicts) and any(len(v["array_shape"]) == 1 for v in verdicts)
    budgets = [r["budget"] for r in results if "budget" in r]
    assert {(b["fits_limit"], b["fits_capacity"]) for b in budgets} == {(True, True), (False, True), (False, False)}
    assert any("error" in r for r in results)


def test_node_agrees_with_python(tmp_path):
    """legality.js under node gives Python's answers on every case."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed; the Chromium test below runs the same comparison")
    script = (
        f"import * as mod from {json.dumps((REPO / 'site' / 'js' / 'legality.js').as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const input = JSON.parse(readFileSync(0, 'utf8'));\n"
        f"const evaluate = {JS_EVALUATE};\n"
        "process.stdout.write(JSON.stringify(evaluate(mod, input.data, input.cases, input.numbers)));\n"
    )
    runner = tmp_path / "run.mjs"
    runner.write_text(script)
    proc = subprocess.run(
        [node, str(runner)],
        input=json.dumps({"data": DATA, "cases": CASES, "numbers": NUMBERS}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert_agree(json.loads(proc.stdout), "node")


def test_chromium_page_module_agrees_with_python(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """The legality module as the built page carries it (import map), run in Chromium, gives Python's answers."""
    ctx, page, problems = open_page(browser, built_site)
    try:
        js = page.evaluate(
            f"async ([data, cases, numbers]) => {{ const mod = await import('pfz/legality'); "
            f"return ({JS_EVALUATE})(mod, data, cases, numbers); }}",
            [DATA, CASES, NUMBERS],
        )
        assert_agree(js, "chromium")
        assert problems.messages == []
    finally:
        ctx.close()
