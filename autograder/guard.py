"""The in-kernel tamper guard: a hidden test scores 0 if the notebook replaced what the tests stand on.

Hidden tests run in the student's own kernel (that is how nbgrader grades), after the student's cells. A cell
could reassign `numpy.allclose`, `jax.numpy.asarray`, `autograder.harness.expect_close`, a lab's check
function or `sys.modules[...]`, and a test would then pass on nothing. So both grading paths start every
kernel with `install()` (IPython's `exec_lines`: `course grade` passes it to papermill, `nbgrader_config.py`
to nbgrader's `Execute`), which runs before the first cell:

1. imports what the hidden tests use (numpy, ml_dtypes, jax, the course helpers, every `autograder.labs`
   module) and records every public attribute of those modules (the object, and the code of each Python
   function), the classes of the course's own modules, a list of builtins and the `sys.modules` entries;
2. registers an IPython `post_run_cell` hook: after each hidden-test cell, if anything recorded was
   replaced, the cell gets an error (`TamperedEnvironment`, naming what changed), so nbgrader's rule scores
   it 0, on both paths alike;
3. `verify()` is also called by the harness before each check runs (`autograder.harness`), and checks
   that the hook is still registered.

This stops monkeypatching of the libraries and of the grader. It does not stop a notebook written against
this file (one that finds and edits the guard's own records, or unregisters the hook and patches only what
`verify` does not watch): code running in the grading kernel can always change that kernel. The README's
"What the grader defends" lists what is and is not covered.
"""
from __future__ import annotations

import builtins
import importlib
import pkgutil
import sys
import types
from typing import Any, Callable

KERNEL_ARGUMENTS = [
    "--HistoryManager.hist_file=:memory:",   # nbgrader's default for Python kernels, kept
    "--IPKernelApp.exec_lines=__import__('autograder.guard').guard.install()",
]
HIDDEN_TEST_MARKERS = ("### BEGIN HIDDEN TESTS", "from autograder.labs import")

THIRD_PARTY = ("numpy", "numpy.testing", "numpy.random", "numpy.linalg", "ml_dtypes", "math",
               "jax", "jax.numpy", "jax.nn", "jax.lax", "jax.random", "jax.experimental.pallas",
               "jax.experimental.pallas.tpu")
OWN_PREFIXES = ("pallas_course", "autograder")
BUILTINS = ("__import__", "isinstance", "issubclass", "len", "abs", "max", "min", "sum", "any", "all",
            "getattr", "setattr", "hasattr", "type", "float", "int", "bool", "str", "tuple", "list",
            "dict", "set", "range", "zip", "enumerate", "round", "repr", "iter", "next", "sorted", "map",
            "filter", "super", "object", "print", "Exception", "AssertionError", "NotImplementedError")
SHELL_METHODS = ("showtraceback", "_showtraceback", "run_cell", "run_cell_async", "run_ast_nodes",
                 "run_code", "events")


class TamperedEnvironment(Exception):
    """The notebook replaced something the hidden tests rely on; the test cell that sees it scores 0."""


def _fingerprint(obj: Any) -> tuple:
    code = getattr(obj, "__code__", None) if isinstance(obj, types.FunctionType) else None
    if code is None:
        return (id(obj),)
    return (id(obj), id(code), id(obj.__defaults__), id(obj.__kwdefaults__))


def _public(namespace: dict) -> dict[str, Any]:
    return {k: v for k, v in namespace.items() if not (k.startswith("__") and k.endswith("__"))}


class _Snapshot:
    """What the hidden tests stand on, recorded before any cell ran."""

    def __init__(self, module_names: list[str]) -> None:
        self.modules: dict[str, types.ModuleType] = {}
        self.attrs: dict[str, dict[str, tuple]] = {}
        self.keep: list[Any] = []          # holds every recorded object, so no id is reused
        self.classes: dict[str, tuple[type, dict[str, tuple]]] = {}
        for name in module_names:
            module = sys.modules.get(name)
            if module is None:
                continue
            self.modules[name] = module
            public = _public(vars(module))
            self.keep.append(public)
            self.keep.extend(getattr(v, "__code__", None) for v in public.values())
            self.attrs[name] = {k: _fingerprint(v) for k, v in public.items()}
            if name.startswith(OWN_PREFIXES):
                for k, v in public.items():
                    if isinstance(v, type) and getattr(v, "__module__", "") == name:
                        members = dict(vars(v))
                        self.keep.append(members)
                        self.classes[f"{name}.{k}"] = (v, {m: _fingerprint(o) for m, o in members.items()
                                                          if not m.startswith("__")})
        self.builtins = {k: getattr(builtins, k) for k in BUILTINS if hasattr(builtins, k)}

    def changes(self) -> list[str]:
        found: list[str] = []
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}] was replaced")
                continue
            now = vars(module)
            for attr, before in self.attrs[name].items():
                if attr not in now:
                    found.append(f"{name}.{attr} was deleted")
                elif _fingerprint(now[attr]) != before:
                    what = "the code of " if _fingerprint(now[attr])[0] == before[0] else ""
                    found.append(f"{what}{name}.{attr} was replaced")
        for qualname, (cls, members) in self.classes.items():
            now = vars(cls)
            for m, before in members.items():
                if m not in now or _fingerprint(now[m]) != before:
                    found.append(f"{qualname}.{m} was replaced")
        for k, v in self.builtins.items():
            if getattr(builtins, k, None) is not v:
                found.append(f"builtins.{k} was replaced")
        return found


_state: dict[str, Any] = {}


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _watched_modules() -> list[str]:
    for name in THIRD_PARTY:
        try:
            importlib.import_module(name)
        except Exception:   # noqa: BLE001 - a missing optional module is not watched
            pass
    for name in ("pallas_course.check", "pallas_course.runtime", "pallas_course.kernel_trace",
                 "autograder.harness", "autograder.labs"):
        try:
            importlib.import_module(name)
        except Exception:   # noqa: BLE001
            pass
    labs = sys.modules.get("autograder.labs")
    for info in pkgutil.iter_modules(getattr(labs, "__path__", [])):
        try:
            importlib.import_module(f"autograder.labs.{info.name}")
        except Exception:   # noqa: BLE001 - a lab whose checks do not import is graded as such later
            pass
    own = [n for n in sys.modules if n.split(".")[0] in OWN_PREFIXES]
    return [n for n in THIRD_PARTY if n in sys.modules] + sorted(own)


def _message(found: list[str]) -> str:
    shown = "; ".join(found[:3]) + (f" (and {len(found) - 3} more)" if len(found) > 3 else "")
    return (f"the grading environment was changed before this test ran: {shown}. Hidden tests run against "
            "the course's own numpy, jax and checks, so this test scores 0; don't reassign library or "
            "grader functions in the notebook")


def install() -> None:
    """Record the pristine environment and hook every hidden-test cell. Called once, at kernel start."""
    if _state:
        return
    snapshot = _Snapshot(_watched_modules())
    shell = _shell()
    stderr = sys.stderr
    def shell_member(name: str) -> Any:
        member = getattr(shell, name, None)
        return getattr(member, "__func__", member)   # a bound method is a new object at every access

    shell_methods = {m: shell_member(m) for m in SHELL_METHODS} if shell is not None else {}

    def changes() -> list[str]:
        found = snapshot.changes()
        if shell is not None:
            found += [f"IPython's shell.{m} was replaced" for m in SHELL_METHODS
                      if shell_member(m) is not shell_methods[m]]
            if hook not in shell.events.callbacks.get("post_run_cell", []):
                found.append("the grader's post-run hook was removed")
        return found

    def hook(result: Any) -> None:
        raw = getattr(getattr(result, "info", None), "raw_cell", "") or ""
        if not any(marker in raw for marker in HIDDEN_TEST_MARKERS):
            return
        found = changes()
        if not found:
            return
        error = TamperedEnvironment(_message(found))
        if getattr(result, "error_in_exec", None) is None and getattr(result, "error_before_exec", None) is None:
            result.error_in_exec = error        # the execute reply says error: nbgrader records it
        try:
            stderr.write(f"TamperedEnvironment: {error}\n")   # and stderr alone scores a test cell 0
            stderr.flush()
        except Exception:   # noqa: BLE001
            pass
        raise error                              # IPython shows it as the cell's error output

    _state.update(snapshot=snapshot, changes=changes, hook=hook)
    if shell is not None:
        shell.events.register("post_run_cell", hook)
        if hasattr(shell.events, "print_on_error"):
            shell.events.print_on_error = False   # the error output says it all


def installed() -> bool:
    return bool(_state)


def verify(fail: Callable[[str], BaseException] = TamperedEnvironment) -> None:
    """Raise `fail(message)` if the environment changed since `install()`; a no-op where it never ran
    (a student's own Jupyter, the test suite's in-process checks)."""
    changes = _state.get("changes")
    if changes is None:
        return
    found = changes()
    if found:
        raise fail(_message(found))
