"""A name cannot forge the compiler's verdict (issue 26): the three forge pairs score exactly as their honest twins.
Each forgery names a kernel, or a jax.jit-wrapped function, `get_topology_desc` (a marker the compile step once
searched for in the compiler's whole error text, which quotes those names, turning a refusal into "cannot judge").
Now the compiler never sees a student's name (canonical names in the rebuild) and "cannot judge" comes from the
stage that failed, so each pair earns the same points with the same messages."""

from __future__ import annotations

import importlib
import re

import pytest

from autograder.labs.harness import TestFailure
from autograder.notebook_code import load
from autograder.course_manifest import REPO_ROOT, manifest

LAB_1_1, LAB_1_2 = "lab-1.1-first-kernels", "lab-1.2-tiled-matmul"

ADD_CALL = "        add_kernel,\n        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
ONE_ROW = {
    ADD_CALL: "        add_kernel,\n        grid=(x.shape[0],),\n"
    "        in_specs=[pl.BlockSpec((1, x.shape[1]), lambda i: (i, 0))] * 2,\n"
    "        out_specs=pl.BlockSpec((1, x.shape[1]), lambda i: (i, 0)),\n"
    "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
}
SCRATCH = {
    ADD_CALL: ADD_CALL + "        scratch_shapes=[pltpu.VMEM((4096, 4096), jnp.float32)],\n",
    "def add_kernel(x_ref, y_ref, o_ref):": "def add_kernel(x_ref, y_ref, o_ref, scratch_ref):",
}
EXACT_GELU = {"jax.nn.gelu(acc_ref[...])": "jax.nn.gelu(acc_ref[...], approximate=False)"}


def _kernel_named(edits: dict[str, str], old: str, new: str) -> dict[str, str]:
    """The same edits, with the kernel function `old` renamed `new` (its def and its use in the pallas_call)."""
    out = {k: v.replace(old, new) for k, v in edits.items()}
    for text in (f"def {old}(", f"        {old},\n"):
        if not any(text in k for k in edits):
            out[text] = text.replace(old, new)
    return out


def _jitted_named(edits: dict[str, str], name: str) -> dict[str, str]:
    """The same edits, with the schedule function's pallas_call wrapped in a jax.jit of a function named `name`."""
    return {
        **edits,
        "def add(x, y):\n    return pl.pallas_call(": f"def add(x, y):\n    return jax.jit({name})(x, y)\n\n\ndef {name}(x, y):\n    return pl.pallas_call(",
    }


PAIRS = {
    "1-row blocks, kernel named": (LAB_1_1, ONE_ROW, _kernel_named(ONE_ROW, "add_kernel", "get_topology_desc")),
    "1-row blocks, jax.jit named": (LAB_1_1, ONE_ROW, _jitted_named(ONE_ROW, "get_topology_desc")),
    "exact-erf GELU, kernel named": (
        LAB_1_2,
        EXACT_GELU,
        _kernel_named(EXACT_GELU, "matmul_gelu_kernel", "get_topology_desc"),
    ),
    "64 MiB scratch, kernel named": (LAB_1_1, SCRATCH, _kernel_named(SCRATCH, "add_kernel", "get_topology_desc")),
}


def _outcomes(lab_id: str, edits: dict[str, str]) -> dict[str, str]:
    """{test: "passed" or its failure message} over the lab's tests of the kernels the edits touch."""
    lab = manifest().lab(lab_id)
    namespace = load(REPO_ROOT / lab.source, edits)
    checks = importlib.import_module(lab.grader)
    kernel = "add" if lab_id == LAB_1_1 else "matmul_gelu"
    out = {}
    for t in lab.tests:
        if t.kernel != kernel:
            continue
        try:
            getattr(checks, t.id)(namespace[t.kernel])
            out[t.id] = "passed"
        except TestFailure as e:
            # the "at <cell>, line" line names where each launched its pallas_call: the forgery's own code, by design
            message = str(e).split(" [inputs from seed")[0]
            out[t.id] = "\n".join(line for line in message.splitlines() if not line.startswith("  at "))
    return out


@pytest.mark.parametrize("pair", list(PAIRS))
def test_a_forged_name_scores_as_its_honest_twin(libtpu, pair: str) -> None:
    lab_id, honest, forged = PAIRS[pair]
    want, got = _outcomes(lab_id, honest), _outcomes(lab_id, forged)
    assert got == want, (pair, want, got)
    assert all("could not be asked" not in m and "not compiled" not in m for m in got.values()), got
    if pair.startswith(("1-row", "exact-erf")):  # the honest twins the compiler refuses: the forgery is refused too
        assert any("does not compile for v5e and v6e" in m for m in got.values()), got


# ------------------------------------------------------------------------------------------ issue 33: the platform
# `lax.platform_dependent` with the right body for the CPU (where the grader runs interpret mode) and zeros for every
# other platform (the TPU the compiler lowers for): the run and the compile both take the TPU's branch, so the
# notebook scores exactly as the zeros kernel it is on a TPU.
ADD_BODY = "    o_ref[...] = x_ref[...] + y_ref[...]"
TRANSPOSE_BODY = "    o_ref[...] = x_ref[...].T"
ZEROS = "    o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)"
ZEROS_KERNELS = {ADD_BODY: ZEROS, TRANSPOSE_BODY: ZEROS}
PLATFORM_BRANCHES = {
    ADD_BODY: (
        "    jax.lax.platform_dependent(\n"
        "        cpu=lambda: o_ref.__setitem__(..., x_ref[...] + y_ref[...]),\n"
        "        default=lambda: o_ref.__setitem__(..., jnp.zeros(o_ref.shape, o_ref.dtype)))"
    ),
    TRANSPOSE_BODY: (
        "    jax.lax.platform_dependent(\n"
        "        cpu=lambda: o_ref.__setitem__(..., x_ref[...].T),\n"
        "        default=lambda: o_ref.__setitem__(..., jnp.zeros(o_ref.shape, o_ref.dtype)))"
    ),
}


def _all_outcomes(edits: dict[str, str]) -> dict[str, str]:
    lab = manifest().lab(LAB_1_1)
    namespace = load(REPO_ROOT / lab.source, edits)
    checks = importlib.import_module(lab.grader)
    out = {}
    for t in lab.tests:
        try:
            getattr(checks, t.id)(namespace[t.kernel])
            out[t.id] = "passed"
        except TestFailure as e:
            # counts and errors depend on the random inputs: the rest of the message must agree
            message = str(e).split(" [inputs from seed")[0]
            out[t.id] = re.sub(
                r"the largest error .*?; ", "", re.sub(r"\d+ of (\d+) values", r"_ of \1 values", message)
            )
    return out


def test_a_platform_branch_scores_as_the_tpus_branch(libtpu) -> None:
    """Issue 33: the CPU branch right, the TPU's zeros: graded as the zeros kernel, test by test, 1 of 6 (the
    schedule test alone passes; every value differs). ZEROS_KERNELS, the twin, gives the same messages (the slow
    test below grades it through both doors); graded once here to keep CI short."""
    got = _all_outcomes(PLATFORM_BRANCHES)
    assert got["transpose_schedule"] == "passed", got
    for test in ("add_f32", "add_bf16", "transpose_values"):
        assert re.search(r"on \(\d+, \d+\) \w+: _ of \d+ values differ by more than tol=", got[test]), got[test]


@pytest.mark.slow
def test_the_platform_branch_scores_as_zeros_on_both_doors(libtpu, tmp_path) -> None:
    """The same attack as a student hands it in (the notebook's add_kernel and transpose_kernel cells), through
    `course grade` and `nbgrader autograde`: 1 of 6 on each, the same tests lost (the CI test above is in-process)."""
    import json
    import shutil

    import nbformat
    from nbgrader.api import Gradebook
    from typer.testing import CliRunner

    from course_tools.cli import app
    from course_tools.demo import filled_in
    from tests.nbgrader_course import generated_course, nbgrader

    stage = manifest().stage.id
    edits = {
        "add_kernel": (ADD_BODY, PLATFORM_BRANCHES[ADD_BODY]),
        "transpose_kernel": (TRANSPOSE_BODY, PLATFORM_BRANCHES[TRANSPOSE_BODY]),
    }
    course = generated_course(tmp_path / "course")
    path = course / "submitted" / "brancher" / stage / f"{LAB_1_1}.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(filled_in(LAB_1_1, edits), path)
    run = CliRunner().invoke(app, ["grade", str(course / "submitted"), "--out", str(tmp_path / "out"), "--json"])
    assert run.exit_code == 0, run.output[-3000:]
    (record,) = json.loads(run.stdout)
    course_grade = {t["name"]: t["points"] for t in record["tests"]}
    done = nbgrader(course, "autograde", stage, "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        by_nbgrader = {
            g.name: g.score
            for g in gb.find_submission_notebook(LAB_1_1, stage, "brancher").grades
            if g.name in course_grade
        }
    assert course_grade == by_nbgrader and sum(course_grade.values()) == 1, (course_grade, by_nbgrader)
    assert _all_outcomes(ZEROS_KERNELS) == _all_outcomes(PLATFORM_BRANCHES)  # the twin, message by message
    shutil.rmtree(course, ignore_errors=True)
