"""`pallas_course.errors.explain`: real Pallas errors (wrong kernels run under TPU interpret mode, as the
course runs them) become two or three lines naming the mistake, the student's line, the fix and the docs."""

from __future__ import annotations

import re
from typing import Any, Callable

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_course.errors import explain
from pallas_course.runtime import interpret_params

X = jnp.ones((256, 256), jnp.float32)
OUT = jax.ShapeDtypeStruct(X.shape, X.dtype)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _call(kernel: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    return pl.pallas_call(kernel, out_shape=OUT, **kw)(*args)


def _rows(block: tuple[int, ...] = (128, 256), index_map: Callable[..., Any] = lambda i: (i, 0)) -> pl.BlockSpec:
    return pl.BlockSpec(block, index_map)


def _k_outermost_kernel(a_ref, b_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += a_ref[...] @ b_ref[...]


def _kernel(body: str) -> Callable[..., Any]:
    namespace = {"jnp": jnp, "pl": pl}
    source = f"def student_kernel(x_ref, o_ref):\n    {body}\n"
    exec(compile(source, "/tmp/ipykernel_1/cell.py", "exec"), namespace)  # noqa: S102 - a notebook cell's kernel
    return namespace["student_kernel"]


B128 = pl.BlockSpec((128, 128), lambda i, j: (i, j))
CASES: dict[str, tuple[Callable[[], Any], str, str]] = {
    # name: (wrong kernel, kind, regex the summary's first line must match)
    "index map takes 1 index on a 2-D grid": (
        lambda: _call(
            copy_kernel, X, grid=(2, 2), in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))], out_specs=B128
        ),
        "index-map-arity",
        r"index map <lambda> takes 1 argument, but the grid has 2 axes",
    ),
    "index map one block past the edge": (
        lambda: _call(
            copy_kernel, X, grid=(2, 2), in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, j + 1))], out_specs=B128
        ),
        "out-of-bounds-block",
        r"at grid step \(0, 1\) the index map of input x_ref asks for block \(0, 2\)",
    ),
    "K outermost": (
        lambda: pl.pallas_call(
            _k_outermost_kernel,
            grid=(2, 2, 2),
            out_shape=OUT,
            in_specs=[
                pl.BlockSpec((128, 128), lambda k, i, j: (i, k)),
                pl.BlockSpec((128, 128), lambda k, i, j: (k, j)),
            ],
            out_specs=pl.BlockSpec((128, 128), lambda k, i, j: (i, j)),
        )(X, X),
        "revisited-output-block",
        r"visited again at step \(1, 0, 0\) \(a revisited output block\)",
    ),
    "1-D block on a 2-D array": (
        lambda: _call(copy_kernel, X, grid=(2,), in_specs=[_rows((128,), lambda i: (i,))], out_specs=_rows()),
        "block-rank",
        r"different number of dimensions than its array \(256, 256\)",
    ),
    "index map returns one index for a 2-D block": (
        lambda: _call(copy_kernel, X, grid=(2,), in_specs=[_rows(index_map=lambda i: (i,))], out_specs=_rows()),
        "index-map-rank",
        r"returns 1 block indices, but its block shape has 2 dimensions",
    ),
    "store a bf16 value into an f32 ref": (
        lambda: _call(_kernel("o_ref[...] = x_ref[...].astype(jnp.bfloat16)"), X),
        "store-dtype",
        r"stores a bfloat16 value into a float32 ref",
    ),
    "in and out blocks disagree": (
        lambda: _call(
            copy_kernel, X, grid=(2, 2), in_specs=[pl.BlockSpec((128, 256), lambda i, j: (i, 0))], out_specs=B128
        ),
        "store-shape",
        r"stores a \(128, 256\) value into a \(128, 128\) block.*usual bug is a BlockSpec",
    ),
    ".T on a ref": (lambda: _call(_kernel("o_ref[...] = x_ref.T"), X), "ref-as-array", r"a ref is used as an array"),
    "jnp.exp of a ref": (
        lambda: _call(_kernel("o_ref[...] = jnp.exp(x_ref)"), X),
        "ref-as-array",
        r"ref is used as an",
    ),
    "pre-2024 BlockSpec argument order": (
        lambda: _call(
            copy_kernel, X, grid=(2,), in_specs=[pl.BlockSpec(lambda i: (i, 0), (128, 256))], out_specs=_rows()
        ),
        "old-blockspec-order",
        r"pre-2024 argument order BlockSpec\(index_map, block_shape\)",
    ),
    "kernel takes too few refs": (lambda: _call(copy_kernel, X, X), "kernel-arity", r"one ref per input, per output"),
    "one BlockSpec for two inputs": (
        lambda: _call(lambda x_ref, y_ref, o_ref: None, X, X, grid=(2,), in_specs=[_rows()], out_specs=_rows()),
        "in-specs-count",
        r"in_specs has 1 BlockSpec\(s\) but the pallas_call is given 2 inputs",
    ),
    "grid from / instead of //": (
        lambda: _call(copy_kernel, X, grid=(256 / 128,), in_specs=[_rows()], out_specs=_rows()),
        "grid-not-int",
        r"the grid \(2.0,\) holds a non-integer",
    ),
    "program_id of a missing axis": (
        lambda: _call(
            _kernel("o_ref[...] = x_ref[...] * pl.program_id(1)"), X, grid=(2,), in_specs=[_rows()], out_specs=_rows()
        ),
        "program-id-axis",
        r"pl.program_id\(1\)",
    ),
    "a Python if on program_id": (
        lambda: _call(
            _kernel("if pl.program_id(0) == 0: o_ref[...] = x_ref[...]"),
            X,
            grid=(2,),
            in_specs=[_rows()],
            out_specs=_rows(),
        ),
        "python-if-on-traced",
        r"a Python `if`",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_real_pallas_error_is_named(name: str) -> None:
    wrong, kind, first_line = CASES[name]
    with pytest.raises(Exception) as failure:
        with pltpu.force_tpu_interpret_mode(interpret_params()):
            jax.block_until_ready(wrong())
    pltpu.reset_tpu_interpret_mode_state()
    explanation = explain(failure.value)
    lines = explanation.summary.splitlines()
    assert explanation.kind == kind, explanation.summary
    assert 2 <= len(lines) <= 3, explanation.summary
    assert re.search(first_line, lines[0]), lines[0]
    # the student's own line: the kernel body's cell, else the pallas_call in this file
    assert re.search(r"^  at (your cell, line 2 \(in student_kernel\)|test_errors.py, line \d+ \(in )", lines[1]), (
        lines[1]
    )
    assert "https://docs.jax.dev/en/latest/pallas/" in lines[-1]
    assert "Traceback (most recent call last)" in explanation.raw


def test_tpu_tiling_rule_from_the_tpu_lowering() -> None:
    """The (8, 128) rule is checked when lowering for a TPU (which a CPU can do), not by interpret mode."""
    fn = lambda x: _call(copy_kernel, x, grid=(2,), in_specs=[_rows((128, 100))], out_specs=_rows((128, 100)))  # noqa: E731 - one local helper
    with pytest.raises(ValueError) as failure, pltpu.force_tpu_interpret_mode(None):
        jax.jit(fn).trace(X).lower(lowering_platforms=("tpu",))
    explanation = explain(failure.value)
    assert explanation.kind == "tpu-tiling"
    assert "multiples of (8, 128)" in explanation.summary and "tpu/details.html" in explanation.summary


def test_stub() -> None:
    def add(x, y):
        raise NotImplementedError

    with pytest.raises(NotImplementedError) as failure:
        add(X, X)
    explanation = explain(failure.value)
    assert explanation.kind == "not-implemented"
    assert explanation.summary.splitlines()[1].endswith("(in add): raise NotImplementedError")


def test_notebook_cell_frame_wins() -> None:
    """In Jupyter the student's line is in a cell file (/tmp/ipykernel_*/...py), even below library frames."""
    code = compile("def add(x, y):\n    return x.nope\nadd(1, 2)\n", "/tmp/ipykernel_123/456.py", "exec")
    with pytest.raises(AttributeError) as failure:
        exec(code, {})  # noqa: S102 - a notebook cell
    lines = explain(failure.value).summary.splitlines()
    assert lines == ["✗ AttributeError: 'int' object has no attribute 'nope'", "  at your cell, line 2 (in add)"]


def test_unknown_error_is_its_last_meaningful_line_capped() -> None:
    explanation = explain(RuntimeError("x" * 1000 + "\n  File 'a.py', line 3\n"))
    assert explanation.kind == "unknown"
    assert len(explanation.summary.splitlines()[0]) <= 242


@pytest.mark.parametrize(
    "line,fix",
    [
        # an accumulator narrower than its value: an f32 scratch, not a cast (issue 20: a bf16 scratch was told to cast)
        (
            "acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)",
            r"f32 scratch, scratch_shapes=\[pltpu.VMEM\(\(bm, bn\), jnp.float32\)\], not a cast",
        ),
        # a plain store of an f32 value into a bf16 ref: the cast
        ("o_ref[...] = x.astype(jnp.float32)", r"cast when storing: o_ref\[...\] = value.astype\(o_ref.dtype\)"),
    ],
)
def test_store_dtype_fix_reads_the_line(line: str, fix: str) -> None:
    import linecache

    name = "/tmp/ipykernel_1/store_dtype.py"
    src = (
        "def kernel():\n"
        f"    raise ValueError('Invalid dtype for `swap`. Ref dtype: bfloat16. Value dtype: float32.')  # {line}\n"
        "kernel()\n"
    )
    linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
    with pytest.raises(ValueError) as failure:
        exec(compile(src, name, "exec"), {})  # noqa: S102 - a kernel of our own
    summary = explain(failure.value).summary
    assert re.search(fix, summary.splitlines()[-1]), summary


def test_wider_ref_than_value_points_at_out_shape() -> None:
    """A bf16 value into an f32 ref: out_shape typed float32 (issue 20's transpose), not a cast."""
    with pytest.raises(Exception) as failure:
        with pltpu.force_tpu_interpret_mode(interpret_params()):
            jax.block_until_ready(_call(_kernel("o_ref[...] = x_ref[...].astype(jnp.bfloat16)"), X))
    pltpu.reset_tpu_interpret_mode_state()
    assert "give out_shape the input's dtype" in explain(failure.value).summary


def test_an_error_raised_in_a_package_module_points_at_no_file_of_it(tmp_path, monkeypatch) -> None:
    """Issue 27, point 6: a student's error met while the grader runs its rebuild of the computation (frames of
    the grader's own modules, no notebook cell) names no grader file ("jail_session.py, line 179"), only the cause."""
    import importlib
    import sys

    from pallas_course.errors import explain

    pkg = tmp_path / "graderpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "jail_session.py").write_text("def run(f):\n    return f()\n")
    (tmp_path / "student_helpers.py").write_text("def boom():\n    raise ValueError('bad block')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    session = importlib.import_module("graderpkg.jail_session")
    try:
        session.run(lambda: 1 / 0)
    except ZeroDivisionError as e:
        text = explain(e).summary
    assert "jail_session.py" not in text and "ZeroDivisionError" in text
    helpers = importlib.import_module("student_helpers")
    try:
        session.run(helpers.boom)
    except ValueError as e:
        text = explain(e).summary
    assert "at student_helpers.py, line 2 (in boom)" in text and "jail_session.py" not in text
    sys.modules.pop("graderpkg.jail_session", None)


def test_the_judge_run_as_main_is_no_file_of_the_student_s(tmp_path) -> None:
    """Issue 37, point 3: the judge runs as `python -m autograder.judge.server`, a __main__ module; an error met in
    its run of the rebuilt computation named "at server.py, line …" as if it were the student's file."""
    server = tmp_path / "autograder" / "judge" / "server.py"
    server.parent.mkdir(parents=True)
    source = "def run(f):\n    return f()\n\nrun(lambda: [][1])\n"
    server.write_text(source)
    try:
        exec(compile(source, str(server), "exec"), {"__name__": "__main__"})  # noqa: S102 - as `python -m` runs it
    except IndexError as e:
        text = explain(e).summary
    assert "server.py" not in text and "IndexError" in text


# ------------------------------------------------- issue 37.3: the grader's run and compile name the student's line

CELL = "/tmp/ipykernel_7/cell.py"
CELL_SOURCE = '''
def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

def shifted(x):
    return pl.pallas_call(copy_kernel, grid=(2, 2), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, j + 1))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)))(x)

def k_outermost(x):
    def acc_kernel(a_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += a_ref[...]
    return pl.pallas_call(acc_kernel, grid=(2, 2, 2), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec((128, 128), lambda k, i, j: (i, k))],
        out_specs=pl.BlockSpec((128, 128), lambda k, i, j: (i, j)))(x)

def erfc_kernel(x_ref, o_ref):
    o_ref[...] = jax.lax.erfc(x_ref[...])

def exact_gelu(x):
    return pl.pallas_call(erfc_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

def index_map_matmul(x):
    def index(i, j):
        a = jax.lax.broadcasted_iota(jnp.float32, (2048, 2048), 0)
        return (i + (a @ a)[0, 0].astype(jnp.int32) * 0, j)
    spec = pl.BlockSpec((128, 128), index)
    return pl.pallas_call(copy_kernel, grid=(2, 2), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''


@pytest.fixture(scope="module")
def cell() -> dict[str, Any]:
    """The functions of a notebook cell, as IPython runs one: compiled under a cell's file name, its source in
    linecache (what the jail's description reads each pallas_call's line from)."""
    import linecache

    namespace: dict[str, Any] = {"jax": jax, "jnp": jnp, "pl": pl}
    exec(compile(CELL_SOURCE, CELL, "exec"), namespace)  # noqa: S102 - a notebook cell
    linecache.cache[CELL] = (len(CELL_SOURCE), None, CELL_SOURCE.splitlines(True), CELL)
    return namespace


def _line_of(text: str) -> int:
    return next(n for n, line in enumerate(CELL_SOURCE.splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    "fn,launch,first",
    [
        (
            "shifted",
            "return pl.pallas_call(copy_kernel,",
            r"at grid step \(0, 1\) the index map of input x_ref asks for",
        ),
        ("k_outermost", "return pl.pallas_call(acc_kernel,", r"\(a revisited output block\)"),
    ],
)
def test_an_error_of_the_graders_run_points_at_the_students_line(
    cell: dict[str, Any], fn: str, launch: str, first: str
) -> None:
    """Issue 37.3: errors met while the grader runs its rebuild of the computation (interpret mode's checks of
    index maps and output visits) name the cell and line where the student launched that pallas_call, recorded
    by the jail in the description: never a module of the grader, never nothing."""
    import numpy as np

    from autograder.session.testing import LocalFunction
    from autograder.labs.harness import TestFailure, call

    with pytest.raises(TestFailure) as failure:
        call("t", f"{fn}(x)", LocalFunction(cell[fn]), np.ones((256, 256), np.float32))
    lines = str(failure.value).splitlines()
    assert re.search(first, lines[0]), lines
    assert lines[1].startswith(f"  at your cell, line {_line_of(launch)} (in {fn}): {launch}"), lines
    assert not re.search(r"server\.py|rebuild\.py|autograder", str(failure.value)), lines


def test_a_compile_refusal_points_at_the_students_line_in_the_notebook_and_the_grade(libtpu, cell) -> None:
    """The TPU compiler's refusal names the pallas_call's cell and line, in the notebook's own check (the
    student's function compiled) and in the grade (the grader's rebuild compiled, with the place the jail
    recorded): the same line in both."""
    import json

    import numpy as np

    from autograder.jail.jail_agent.calls import invoke, reply
    from autograder.judge import server
    from pallas_course import tpu_compile

    x = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    where = (
        f"  at your cell, line {_line_of('return pl.pallas_call(erfc_kernel')} (in exact_gelu): return pl.pallas_call("
    )
    own = tpu_compile.compile_avals(cell["exact_gelu"], [x], "v5e")
    header, blobs = reply(invoke(cell["exact_gelu"], [np.zeros((8, 128), np.float32)], {}))
    traced = server.rebuilt(json.loads(json.dumps(header)), blobs, (x,))
    graded = server._compile(traced, "v5e")
    assert not own.ok and not graded.ok
    for result in (own, graded):
        lines = result.explanation.splitlines()
        assert "erfc" in lines[0] and lines[1].startswith(where), lines


def test_a_refusal_before_the_run_points_at_the_students_line(cell: dict[str, Any]) -> None:
    """A computation the grader refuses to rebuild (here: over the FLOPs budget, in its index maps) names the
    pallas_call's cell and line too, read off the description before any rebuild."""
    import numpy as np

    from autograder.session.testing import LocalFunction
    from autograder.labs.harness import TestFailure, call

    with pytest.raises(TestFailure) as failure:
        call("t", "index_map_matmul(x)", LocalFunction(cell["index_map_matmul"]), np.ones((256, 256), np.float32))
    lines = str(failure.value).splitlines()
    assert "could not rebuild" in lines[0] and "FLOPs" in lines[0], lines
    launch = "return pl.pallas_call(copy_kernel, grid=(2, 2), in_specs=[spec]"
    assert lines[1].startswith(f"  at your cell, line {_line_of(launch)} (in index_map_matmul): {launch}"), lines


def test_the_place_a_description_carries_is_plain_capped_text_or_nothing() -> None:
    """A description's "at" is the student's to forge: it only ever reaches their own message, as one line of
    at most 200 characters a field; anything not of its shape is dropped, never refused or believed."""
    from autograder.judge.parse import Place
    from pallas_course.errors import place_for

    assert Place.read(["/tmp/ipykernel_1/x.py", 3, "f", "return pl.pallas_call(k,\n<b>x</b>"]) == Place(
        "/tmp/ipykernel_1/x.py", 3, "f", "return pl.pallas_call(k, <b>x</b>"
    )
    assert len(Place.read(["a" * 10_000, 1, "f", ""]).file) == 200
    for junk in (
        None,
        "cell 3",
        ["f", "3", "g", ""],
        ["f", True, "g", ""],
        ["f", -1, "g", ""],
        [1, 2, 3, 4],
        ["f", 1, "g"],
        {"file": "f"},
    ):
        assert Place.read(junk) is None, junk
    a, b = Place("c", 1, "add", ""), Place("c", 9, "matmul", "")
    assert place_for([("add_kernel", a), ("mm_kernel", b)], "in mm_kernel at step 1") == b
    assert place_for([("add_kernel", a), ("mm_kernel", b)], "output 0 revisited") is None  # which one: unknown
    assert place_for([("add_kernel", a), (None, a)], "output 0 revisited") == a
    assert place_for([], "anything") is None
    from autograder.judge.parse import places_in, where_in

    forged = {
        "jaxpr": {
            "eqns": [
                {"p": "pallas_call", "params": {"name": "k"}, "at": ["/tmp/ipykernel_1/c.py", 2, "f", "x = 1"]},
                {"p": "pallas_call", "params": "junk", "at": "junk"},
                [[[{"p": 1}]]],
                None,
            ]
        }
    }
    assert places_in(forged) == [("k", Place("/tmp/ipykernel_1/c.py", 2, "f", "x = 1"))]
    assert where_in(forged, "any error") == "\n  at your cell, line 2 (in f): x = 1"
    assert where_in("not a description", "any error") == "" and where_in([[[]]] * 3, "x") == ""
