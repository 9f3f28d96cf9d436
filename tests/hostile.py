"""Hostile and broken LAB·1.1 submissions, built from the student notebook (autograder.demo.filled_in), each
with the score and the reason the grader should give it. Used by tests/test_grader_isolation.py."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.demo import filled_in
from pallas_course.manifest import manifest

LAB = "lab-1.1-first-kernels"
LAB_1_2 = "lab-1.2-tiled-matmul"
NAME = f"{LAB}.ipynb"
ADD_CALL = "    return pl.pallas_call(\n        add_kernel,"

# Cells a student might add, right after the set-up cell.
HANG_IN_KERNEL = '''
def add_kernel(x_ref, y_ref, o_ref):   # a kernel that never finishes: no interrupt reaches it
    forever = jax.lax.while_loop(lambda c: c >= 0, lambda c: (c + 1) % 7, x_ref[0, 0].astype(jnp.int32) * 0)
    o_ref[...] = x_ref[...] + y_ref[...] + forever.astype(o_ref.dtype) * 0
'''
READ_AND_WRITE = '''
import autograder, os, pathlib
repo = pathlib.Path(autograder.__file__).resolve().parents[1]
for what, act in [
        ("read solutions", lambda: (repo / "solutions" / "stage-1" / "lab-1.1-first-kernels.ipynb").read_text()),
        ("read gradebook", lambda: (repo / "gradebook.db").read_bytes()),
        ("list repo", lambda: os.listdir(repo)),
        ("write grader", lambda: (repo / "autograder" / "pwned.py").write_text("x")),
        ("write tmp", lambda: pathlib.Path("/tmp/course-grade-pwned.txt").write_text("x")),
        ("signal grader", lambda: os.kill(os.getppid(), 0))]:
    try:
        act()
        print("ALLOWED", what)
    except OSError as e:
        print("denied", what, type(e).__name__)
'''
TAMPER_LIBRARIES = '''
import numpy as np, jax.numpy as jnp, pallas_course.check
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
_transpose = jnp.transpose
jnp.transpose = lambda *a, **k: _transpose(*a, **k)
pallas_course.check.compare = lambda *a, **k: None
check = lambda *a, **k: print("✓ (forged)")   # the notebook's own check: not what grades
'''
TAMPER_GRADER = '''
import sys, types
import autograder.harness as harness
import autograder.labs.lab_1_1 as lab
harness.expect_close = lambda *a, **k: None
for name in ("add_f32", "add_bf16", "transpose_schedule", "transpose_values"):
    setattr(lab, name, lambda fn: None)
fake = types.ModuleType("autograder.labs.lab_1_1")
fake.__dict__.update({n: (lambda fn: None) for n in ("add_f32", "add_bf16", "transpose_schedule", "transpose_values")})
sys.modules["autograder.labs.lab_1_1"] = fake
'''
TAMPER_GUARD = '''
import autograder.labs.lab_1_1 as lab
get_ipython().events.callbacks["post_run_cell"].clear()   # written against autograder/guard.py
for name in ("add_f32", "add_bf16", "transpose_schedule", "transpose_values"):
    setattr(lab, name, lambda fn: None)
'''


@dataclass(frozen=True)
class Hostile:
    student: str
    score: float
    reason: str                 # a regex the submission's error, or one of its test messages, must match
    what: str


def _with_cell(nb: NotebookNode, source: str, *, after: str = "setup") -> NotebookNode:
    nb = copy.deepcopy(nb)
    index = next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == after)
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    return nb


def _without(nb: NotebookNode, *grade_ids: str) -> NotebookNode:
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") not in grade_ids]
    return nb


def build(root: Path | None) -> list[Hostile]:
    """Write every hostile submission under `root/<student>/<stage>/` (None: write nothing); return what each
    should get."""
    stage = manifest().stage.id
    solution = filled_in(LAB)
    wrong_add = filled_in(LAB, {"add_kernel": ("x_ref[...] + y_ref[...]", "x_ref[...] - y_ref[...]")})
    cases: list[tuple[Hostile, NotebookNode | bytes]] = [
        (Hostile("ok-solution", 6, "^passed$", "the solution, graded beside the hostile ones"), solution),
        (Hostile("hang-in-kernel", 0, "did not stop when interrupted", "an infinite loop inside the Pallas kernel"),
         _with_cell(solution, HANG_IN_KERNEL, after="add_kernel")),
        (Hostile("hang-in-cell", 6, "^passed$", "`while True: pass` in a cell: interrupted, the rest runs"),
         _with_cell(solution, "while True:\n    pass")),
        (Hostile("crash-exit", 3, r"kernel exited \(exit 3\)", "os._exit(3) when transpose runs"),
         filled_in(LAB, {"transpose": ("    m, n = x.shape\n", "    m, n = x.shape\n    import os; os._exit(3)\n")})),
        (Hostile("crash-segfault", 0, "SIGSEGV", "a segfault (ctypes.string_at(0)) in a cell"),
         _with_cell(solution, "import ctypes\nctypes.string_at(0)")),
        (Hostile("memory-blowup", 3, "MemoryError", "add allocates 6 GB on every call"),
         filled_in(LAB, {"add_kernel": ("o_ref[...] = x_ref[...] + y_ref[...]",
                                        "o_ref[...] = x_ref[...] + y_ref[...]\n    _ = bytearray(6 << 30)")})),
        (Hostile("corrupt-truncated", 0, "could not read the notebook", "the .ipynb cut in half"),
         nbformat.writes(solution).encode()[:4000]),
        (Hostile("corrupt-binary", 0, "could not read the notebook", "not JSON at all"), bytes(range(256)) * 8),
        (Hostile("other-lab", 0, r"holds the cells of LAB·1\.2", "LAB·1.2's notebook under LAB·1.1's name"),
         filled_in(LAB_1_2)),
        (Hostile("deleted-cells", 1, "name 'transpose' is not defined",
                 "transpose and a hidden test deleted (add_f32 comes back where nbgrader puts it: before add)"),
         _without(solution, "transpose", "add_f32")),
        (Hostile("renamed", 3, "name 'add' is not defined", "add renamed my_add"),
         filled_in(LAB, {"add_kernel": ("def add_kernel", "def add_kernel_renamed")})),
        (Hostile("xla-bypass", 3, "launches no pallas_call", "add computes x + y with XLA"),
         filled_in(LAB, {})),
        (Hostile("tamper-libraries", 0, r"grading environment was changed.*numpy\.allclose",
                 "reassigns numpy.allclose, numpy.testing, jax.numpy.transpose, pallas_course.check.compare"),
         _with_cell(wrong_add, TAMPER_LIBRARIES)),
        (Hostile("tamper-grader", 0, r"grading environment was changed.*autograder",
                 "replaces the harness, the lab's check functions and sys.modules' entry"),
         _with_cell(wrong_add, TAMPER_GRADER)),
        (Hostile("read-write-outside", 6, "^passed$", "reads solutions/ and the gradebook, writes the grader"),
         _with_cell(solution, READ_AND_WRITE)),
    ]
    out = []
    for hostile, nb in cases:
        out.append(hostile)
        if root is None:
            continue
        path = root / hostile.student / stage / NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(nb, bytes):
            path.write_bytes(nb)
        else:
            nb = _fix(hostile.student, nb)
            nbformat.write(nb, path)
    return out


def _fix(student: str, nb: NotebookNode) -> NotebookNode:
    """Edits `filled_in` cannot express (they span cells)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if student == "renamed" and "def add(x, y):" in cell.source:
            cell.source = cell.source.replace("def add(x, y):", "def my_add(x, y):").replace(
                "add_kernel,", "add_kernel_renamed,")
        if student == "xla-bypass" and ADD_CALL in cell.source:
            cell.source = cell.source.replace(ADD_CALL, "    return x + y\n" + ADD_CALL)
    return nb


def guard_target(root: Path) -> Path:
    """A notebook written against the guard itself (what the in-kernel defence does not stop)."""
    path = root / "tamper-guard" / manifest().stage.id / NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    wrong = filled_in(LAB, {"add_kernel": ("x_ref[...] + y_ref[...]", "x_ref[...] - y_ref[...]")})
    nbformat.write(_with_cell(wrong, TAMPER_GUARD), path)
    return path
