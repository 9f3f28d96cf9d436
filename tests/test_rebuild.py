"""describe -> rebuild: the grader's copy of a traced computation computes and looks like the original, and a
description it cannot rebuild is refused with a reason, never a crash (autograder.judge.rebuild).

The structural round trip of every kernel in the corpus is checked on every call the checks make through
LocalFunction (tests/test_mutants.py: solutions, stubs, mutants, alternatives); here: values against the
direct run, the refusals, the caps, and random junk."""

from __future__ import annotations

import copy
import json
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from autograder.labs.harness import TestFailure, call, traced
from autograder.jail.jail_agent import description as fmt
from autograder.jail.jail_agent.calls import invoke
from autograder.notebook_code import load
from autograder.judge.rebuild import Refused, rebuild
from autograder.judge.structure import structure_data
from autograder.judge.server import rebuilt
from autograder.session.testing import LocalFunction
from pallas_course.kernel_trace import trace_jaxpr
from autograder.course_manifest import REPO_ROOT, manifest
from pallas_course.runtime import interpret_params

F32 = jnp.float32


def _describe(fn: Any, *avals: jax.ShapeDtypeStruct, **kwargs: Any) -> tuple[dict[str, Any], list[np.ndarray]]:
    answer = invoke(fn, [np.zeros(a.shape, a.dtype) for a in avals], kwargs)
    return json.loads(json.dumps(answer["description"])), answer["consts"]


def _rebuild(desc: dict[str, Any], consts: list[np.ndarray], *avals: jax.ShapeDtypeStruct) -> Any:
    return rebuilt({"ok": True, "description": desc, "consts": []}, [], avals) if not consts else None


@pytest.fixture(scope="module")
def solutions() -> dict[str, dict[str, Any]]:
    return {lab.id: load(REPO_ROOT / lab.source) for lab in manifest().labs if lab.kernels}


def _direct(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with pltpu.force_tpu_interpret_mode(interpret_params()):
        return jax.block_until_ready(fn(*args, **kwargs))


@pytest.mark.parametrize(
    "lab,kernel,shapes,kwargs",
    [
        ("lab-1.1-first-kernels", "transpose", [(256, 128)], {"bm": 128, "bn": 64}),
        ("lab-1.2-tiled-matmul", "matmul_gelu", [(128, 256), (256, 128)], {"bm": 64, "bn": 128, "bk": 128}),
        ("lab-1.3-fused-softmax-layernorm", "layernorm", [(32, 256), (256,), (256,)], {"rows_per_block": 16}),
    ],
)
def test_rebuild_computes_what_the_kernel_computes(
    solutions: dict, lab: str, kernel: str, shapes: list, kwargs: dict
) -> None:
    """A solution kernel (grids, pl.when, scratch, jax.nn.gelu) rebuilt from its description gives the same
    values, bit for bit, as the kernel run directly, and the same structure."""
    fn = solutions[lab][kernel]
    rng = np.random.default_rng(0)
    args = [jnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in shapes]
    got = call("round trip", kernel, fn, *args, **kwargs)
    np.testing.assert_array_equal(got, np.asarray(_direct(fn, *args, **kwargs)))
    direct = trace_jaxpr(jax.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args))
    assert structure_data(traced("round trip", kernel, fn, *args, **kwargs)) == structure_data(direct)


S = jax.ShapeDtypeStruct
SOLUTION_CALLS = [
    ("lab-1.1-first-kernels", "add", [S((256, 256), F32)] * 2, {}),
    ("lab-1.1-first-kernels", "transpose", [S((256, 512), jnp.bfloat16)], {}),
    ("lab-1.2-tiled-matmul", "rowmax", [S((64, 1024), F32)], {}),
    ("lab-1.2-tiled-matmul", "matmul", [S((256, 512), F32), S((512, 384), F32)], {}),
    ("lab-1.2-tiled-matmul", "matmul_acc", [S((256, 512), jnp.bfloat16), S((512, 384), jnp.bfloat16)], {}),
    ("lab-1.2-tiled-matmul", "matmul_gelu", [S((256, 512), F32), S((512, 384), F32)], {}),
    ("lab-1.3-fused-softmax-layernorm", "softmax", [S((64, 256), F32)], {"rows_per_block": 16}),
    ("lab-1.3-fused-softmax-layernorm", "layernorm", [S((64, 256), F32), S((256,), F32), S((256,), F32)], {}),
    ("lab-1.3-fused-softmax-layernorm", "column_sums", [S((200, 128), F32)], {"rows_per_block": 16}),
    ("lab-1.4-pipelining-profile", "matmul_pipeline_off", [S((256, 512), F32), S((512, 256), F32)], {}),
    ("lab-1.6-copies-online-softmax", "add_copies", [S((64, 256), jnp.bfloat16)] * 2, {"rows_per_block": 16}),
    ("lab-1.6-copies-online-softmax", "row_logsumexp", [S((64, 512), F32)], {"cols_per_block": 256}),
]


@pytest.mark.parametrize("lab,kernel,avals,kwargs", SOLUTION_CALLS, ids=[c[1] for c in SOLUTION_CALLS])
def test_every_solution_kernel_round_trips(solutions: dict, lab: str, kernel: str, avals: list, kwargs: dict) -> None:
    """Structure only (no run): what the grader reads of its rebuild is what it reads of the direct trace
    (LocalFunction checks it on every new trace; compat/newest_jax.sh runs this file under the newest jax)."""
    fn = LocalFunction(solutions[lab][kernel])
    inv = fn.invoke(tuple(avals), kwargs, run=False)
    assert inv.structure is not None and len(inv.structure.pallas_calls) == 1 and inv.computation is not None


def test_the_rebuild_compiles_for_the_tpu(solutions: dict) -> None:
    """What the grader graded is what the deviceless TPU compile receives (needs libtpu)."""
    pytest.importorskip("libtpu")
    from pallas_course.tpu_compile import compile_for

    x = np.zeros((256, 256), np.float32)
    inv = LocalFunction(solutions["lab-1.1-first-kernels"]["transpose"]).invoke((x,), {}, run=False)
    assert compile_for(inv.computation.fn, *inv.computation.in_avals, chip="v5e") is not None


def test_the_compile_rule_judges_the_rebuild() -> None:
    """The grading compile step (autograder.judge.compile_rule, course.yml's `compile:`) compiles the computation the
    grader rebuilt and ran: a kernel interpret mode accepts but Mosaic cannot lower loses the test."""
    pytest.importorskip("libtpu")

    def erfc_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...] + jax.lax.erfc(x_ref[...]) * 0

    def add(x, y):
        return pl.pallas_call(erfc_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

    x = jnp.ones((8, 128), F32)
    with pytest.raises(TestFailure, match="add_f32: add\\(x, y\\) does not compile for v5e"):
        call("add_f32", "add(x, y)", add, x, x)


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _add(x, y):
    return pl.pallas_call(
        _add_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


AVALS = (jax.ShapeDtypeStruct((16, 128), F32),) * 2


def _refusal(desc: Any, consts: list | None = None, avals: tuple = AVALS) -> str:
    t = rebuilt({"ok": True, "description": desc, "consts": consts or []}, [], avals)
    assert t.error is not None and t.error.phase == "rebuild", t
    return t.error.text


def test_a_primitive_not_allowed_is_named() -> None:
    desc, _ = _describe(_add, *AVALS)
    desc["jaxpr"]["eqns"][0]["p"] = "numpy_add"
    assert _refusal(desc) == (
        "`numpy_add` is no operation the installed JAX can lower for a TPU (in a Pallas kernel "
        "or around one) or run on the CPU"
    )


def test_a_real_name_with_forged_operands_is_refused() -> None:
    """A primitive named "reshape" is the grader's reshape: given three operands, it refuses to bind."""
    desc, _ = _describe(_add, *AVALS)
    desc["jaxpr"]["eqns"].append(
        {
            "p": "reshape",
            "in": [{"v": 2}, {"v": 0}, {"v": 1}],
            "out": [desc["jaxpr"]["eqns"][0]["out"][0]],
            "params": {"new_sizes": {"tuple": [16, 128]}, "dimensions": None, "sharding": None},
        }
    )
    desc["jaxpr"]["out"] = [{"v": 3}]
    assert "reshape" in _refusal(desc)


@pytest.mark.parametrize(
    "edit,reason",
    [
        (lambda d: d["jaxpr"]["eqns"][0]["params"].__setitem__("grid", [100000, 100000]), "over the grader's limit"),
        (
            lambda d: d["jaxpr"]["eqns"][0]["params"].__setitem__(
                "compiler_params", {"flags": None, "has_side_effects": True}
            ),
            "compiler parameter `flags` is not used",
        ),
        (lambda d: d["jaxpr"]["eqns"][0]["params"]["blocks"][0].__setitem__("buffer_count", 10**6), "pl.Buffered"),
        (lambda d: d["jaxpr"]["eqns"][0]["params"]["blocks"][0]["block_shape"].__setitem__(0, {"blocked": 0}), "block"),
        (
            lambda d: d["jaxpr"]["eqns"][0]["params"]["blocks"][0]["index_map"]["eqns"].append(
                {"p": "exec", "in": [], "out": [], "params": {}}
            ),
            "`exec` is no operation the installed JAX can lower",
        ),
        (
            lambda d: d["jaxpr"]["eqns"][0]["params"]["kernel"]["eqns"][0]["out"][0].__setitem__(
                "shape", [2**20, 2**20]
            ),
            "over the grader's limit",
        ),
        (
            lambda d: d["jaxpr"]["eqns"][0]["params"]["kernel"]["eqns"][0]["out"][0].__setitem__("shape", [4, 128]),
            "described as float32\\[4, 128\\]",
        ),
        (lambda d: d["jaxpr"]["in"][0].__setitem__("shape", [8, 128]), "other arrays than the ones the grader passed"),
        (lambda d: d.__setitem__("version", 99), "format 99"),
        (lambda d: d["jaxpr"]["out"].__setitem__(0, {"v": 99}), "used before it is defined"),
    ],
)
def test_forged_descriptions_are_refused_with_a_reason(edit: Any, reason: str) -> None:
    desc, _ = _describe(_add, *AVALS)
    edit(desc)
    import re

    assert re.search(reason, _refusal(desc)), _refusal(desc)


def test_caps_on_size_and_nesting() -> None:
    desc, _ = _describe(_add, *AVALS)
    many = copy.deepcopy(desc)
    many["jaxpr"]["eqns"] = many["jaxpr"]["eqns"] * (fmt.MAX_EQUATIONS + 1)
    assert "operations" in _refusal(many)
    deep: dict[str, Any] = {"in": [], "consts": [], "eqns": [], "out": []}
    for _ in range(fmt.MAX_DEPTH + 2):
        deep = {
            "in": [],
            "consts": [],
            "out": [],
            "eqns": [{"p": "jit", "in": [], "out": [], "params": {"jaxpr": {"closed": deep}}}],
        }
    assert "nests deeper" in _refusal({"version": fmt.FORMAT_VERSION, "jaxpr": deep, "out_tree": None}, avals=())


def test_a_loop_that_would_not_end_fails_instead_of_hanging() -> None:
    """The grader runs the rebuild with its own limit on while loops, and says so; the structure and the
    compile see the loop as written."""

    def kernel(x_ref, o_ref):
        forever = jax.lax.while_loop(lambda c: c >= 0, lambda c: (c + 1) % 7, x_ref[0, 0].astype(jnp.int32) * 0)
        o_ref[...] = x_ref[...] + forever.astype(o_ref.dtype) * 0

    def looping(x):
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with pytest.raises(TestFailure, match="ran past 4,096 iterations"):
        call("loop", "looping", looping, jnp.zeros((8, 128), F32))


def test_the_jail_sends_no_values(monkeypatch) -> None:
    """Only shapes and dtypes reach the jail and the traced function (no array bytes go in); the answer holds
    no result: the values are the grader's run of its rebuild."""
    seen = []
    real = LocalFunction._send

    def no_arrays(self, enc_args, enc_kwargs, blobs, stand_in, bodies=True):
        assert not blobs
        header, out = real(self, enc_args, enc_kwargs, blobs, stand_in, bodies)
        assert set(header) == {"ok", "description", "consts"}
        return header, out

    monkeypatch.setattr(LocalFunction, "_send", no_arrays)

    def spy(x, y):
        seen.append(type(x).__name__)
        return _add(x, y)

    inv = LocalFunction(spy).invoke((jnp.ones((16, 128), F32), jnp.ones((16, 128), F32)), {}, run=True)
    assert seen == ["DynamicJaxprTracer"]
    np.testing.assert_array_equal(inv.result, np.full((16, 128), 2, np.float32))
    assert [a.shape for a in inv.computation.in_avals] == [(16, 128), (16, 128)]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 2**40)
    | st.floats(allow_nan=False)
    | st.sampled_from(["v", "lit", "p", "in", "out", "add", "pallas_call", "float32", "tuple"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "v",
                    "lit",
                    "aval",
                    "p",
                    "in",
                    "out",
                    "params",
                    "eqns",
                    "consts",
                    "jaxpr",
                    "shape",
                    "dtype",
                    "grid",
                    "blocks",
                    "kernel",
                    "tuple",
                    "closed",
                    "version",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk=JSON)
def test_random_junk_is_refused_never_a_crash(junk: Any) -> None:
    t = rebuilt(
        {"ok": True, "description": {"version": fmt.FORMAT_VERSION, "jaxpr": junk, "out_tree": junk}, "consts": []},
        [],
        AVALS,
    )
    assert t.error is not None and t.error.phase == "rebuild" and t.error.text


def _paths(x: Any, here: tuple = ()) -> list[tuple]:
    out = [here]
    if isinstance(x, dict):
        out += [p for k, v in x.items() for p in _paths(v, here + (k,))]
    elif isinstance(x, list):
        out += [p for i, v in enumerate(x) for p in _paths(v, here + (i,))]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_description_damaged_anywhere_is_rebuilt_or_refused(data: Any) -> None:
    """Any one node of a real description replaced by junk: the grader rebuilds something real (then it is
    graded as that) or refuses with a reason; it never raises."""
    desc, _ = _describe(_add, *AVALS)
    path = data.draw(st.sampled_from(_paths(desc)[1:]))
    node = desc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = data.draw(JSON)
    t = rebuilt({"ok": True, "description": desc, "consts": []}, [], AVALS)
    assert (t.error is None) != (t.structure is None)
    assert t.error is None or (t.error.phase == "rebuild" and t.error.text)


def test_rebuild_refuses_constants_that_did_not_travel() -> None:
    scale = np.arange(128, dtype=np.float32)

    def scaled(x):
        return x * scale

    desc, consts = _describe(scaled, AVALS[0])
    assert len(consts) == 1
    with pytest.raises(Refused, match="did not travel"):
        rebuild(desc, [], AVALS[:1])
    comp = rebuild(desc, consts, AVALS[:1])
    np.testing.assert_array_equal(comp.fn(jnp.ones((16, 128), F32)), np.broadcast_to(scale, (16, 128)))
