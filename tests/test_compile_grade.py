"""The compile rule end to end: `course grade` (the jail, the grader's rebuild of the traced computation, the real
TPU compiler) takes a LAB·1.2 kernel written with jax.nn.gelu(approximate=False), whose values interpret mode
accepts, and its matmul_gelu_values points go, with the compiler's reason in the course's words."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from typer.testing import CliRunner

from course_tools.cli import app
from course_tools.demo import filled_in
from autograder.course_manifest import manifest

LAB = "lab-1.2-tiled-matmul"


def test_gelu_exact_loses_the_compile_rules_points(libtpu, tmp_path: Path) -> None:
    nb = filled_in(
        LAB, {"matmul_gelu_kernel": ("jax.nn.gelu(acc_ref[...])", "jax.nn.gelu(acc_ref[...], approximate=False)")}
    )
    folder = tmp_path / "submitted" / "gelu-exact" / manifest().stage.id
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / Path(manifest().lab(LAB).notebook).name)
    result = CliRunner().invoke(
        app,
        ["grade", str(folder / Path(manifest().lab(LAB).notebook).name), "--out", str(tmp_path / "grades"), "--json"],
    )
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)
    tests = {t["name"]: t for t in record["tests"]}
    lost = tests["matmul_gelu_values"]
    assert not lost["passed"] and lost["points"] == 0, lost
    assert (
        "does not compile for v5e and v6e (the real TPU compiler, v5e:2x2 and v6e:2x2; it must compile for v5e and v6e)"
    ) in lost["message"]
    assert "jax.nn.gelu(x, approximate=False) computes erfc" in lost["message"]
    assert "use jax.nn.gelu(x, approximate=True)" in lost["message"]
    # the other tests keep their points: the rule costs the values test the lab names, nothing else
    assert all(t["passed"] for name, t in tests.items() if name != "matmul_gelu_values"), tests
    assert record["score"] == record["max_score"] - lost["max_points"]
