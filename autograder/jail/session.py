"""The grader's handle on a student's code: a jailed agent process, and proxies for the functions in it.

The hidden checks receive `StudentFunction`s instead of functions. Calling one sends the agent the inputs'
shapes and dtypes (the values, drawn here, never leave this process) and gets back a description of what the
function traced to (jail_agent.description). The grader rebuilds that computation with its own primitives
(autograder.judge.rebuild), reads the structure from its rebuild, and runs the rebuild on its inputs for the values:
nothing the jail says is believed. `LocalFunction` does the same work in this process, with the same code and
the same JSON round trip: the tests of the checks use it against mutants; grading never does.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from pallas_course.xla_flags import fast_compile_xla_flags

from autograder import timeline
from autograder.jail.held import Held
from autograder.jail.jail_agent import wire
if TYPE_CHECKING:
    from pallas_course.kernel_trace import Trace

AGENT_DIR = Path(__file__).resolve().parent / "jail_agent"
JAIL_AGENT_ROOT = "/opt/course-grader"   # where the agent's folder appears in the jail (its PYTHONPATH)
STDERR_KEEP = 64 * 1024     # the tail of the jail's stderr kept for diagnosis; the rest is drained and dropped


class StudentGone(RuntimeError):
    """The jailed process ended (exit, crash, limit) or stopped answering: `why` says which, in words."""

    def __init__(self, why: str, *, silent: bool = False) -> None:
        super().__init__(why)
        self.why = why
        self.silent = silent     # True: it stopped answering (a hang), rather than ended


class BadAnswer(RuntimeError):
    """The jail answered with data that does not follow the wire format (a broken or forged agent)."""


class SetupFailed(RuntimeError):
    """The jail could not start the grading agent, or its helpers are not the grader's: a problem of this
    machine's set-up, never of a submission (no student code has run yet), so nobody may be scored for it.
    The message holds the jail's own words (bubblewrap's or Python's stderr)."""


@dataclass(frozen=True)
class Invocation:
    structure: Trace | None
    result: Any
    error: "StudentError | None" = None     # the rebuilt computation failed to run (the structure stands)
    computation: Any = None                 # what was graded: the judge's rebuild (autograder.judge.client
                                            # .JudgedComputation; None for plain calls)
    own: dict[str, list[Any]] | None = None  # what the stand-in helpers answered: {name: [[params, value]]}


@dataclass(frozen=True)
class StudentError(Exception):
    """The student's function raised; fields as the agent described it (data, not an exception object)."""

    phase: str          # "trace", "run", "call", "rebuild" (the grader refused the traced computation) or
                        # "judge" (the grader's rebuild, run or compile of it overran its box: text says which)
    ename: str
    text: str           # the error's one line that matters
    not_implemented: bool
    explanation: str | None = None

    def __str__(self) -> str:
        return self.text


def _encode_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, list[bytes]]:
    blobs: list[bytes] = []
    return wire.encode(list(args), blobs), wire.encode(dict(kwargs), blobs), blobs


def _key(enc_args: Any, enc_kwargs: Any, blobs: list[bytes]) -> str:
    h = hashlib.sha256(json.dumps([enc_args, enc_kwargs]).encode())
    for b in blobs:
        h.update(hashlib.sha256(b).digest())
    return h.hexdigest()


def _error(err: Any) -> StudentError:
    if not isinstance(err, dict):
        raise BadAnswer("a failed call without an error description")
    text = err.get("text")
    explanation = err.get("explanation")
    return StudentError(phase=str(err.get("phase", "run"))[:20], ename=str(err.get("ename", "Error"))[:100],
                        text=str(text)[:2000] if text else "an error without a message",
                        not_implemented=err.get("not_implemented") is True,
                        explanation=str(explanation)[:2000] if explanation else None)


def _is_array(x: Any) -> bool:
    """What the jail treats as an array argument once it crossed the wire (wire.encode: arrays and specs)."""
    if type(x).__name__ == "ShapeDtypeStruct":
        return True
    return (hasattr(x, "__array__") and hasattr(x, "shape") and hasattr(x, "dtype")
            and not isinstance(x, (np.generic, bool, int, float)))


def _rebuilt(header: dict[str, Any], blobs: list[bytes], in_avals: tuple[Any, ...]) -> Any:
    """The judge's rebuild of a described computation, in this process (autograder.judge.server.rebuilt): the
    tests of the rebuild's refusals call it directly."""
    from autograder.judge.server import rebuilt

    return rebuilt(header, blobs, in_avals)


class StudentFunction:
    """A student's function the checks may trace and run; subclasses say where it is traced."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self._cache: dict[str, Invocation] = {}
        self._traced: dict[str, Any] = {}

    def _judge(self) -> Any:
        """The judge that rebuilds, runs and compiles what this function traced to (autograder.judge.client)."""
        raise NotImplementedError

    def _send(self, enc_args: Any, enc_kwargs: Any, blobs: list[bytes],
              stand_in: list[str] | None) -> tuple[dict[str, Any], list[bytes]]:
        """The jail's reply to one call (a header and its blobs), unchecked."""
        raise NotImplementedError

    def _rebuilt(self, traced: Any) -> None:
        """Called with each new rebuild (LocalFunction checks it against the direct trace)."""

    def invoke(self, args: tuple[Any, ...], kwargs: dict[str, Any], *, run: bool,
               stand_in: list[str] | None = None, ahead: Callable[[Any], None] | None = None) -> Invocation:
        """Trace (and if `run`, execute) the function on these inputs.

        With arrays among the arguments, the jail is sent only their shapes and dtypes; it describes what the
        function traced to, the grader rebuilds that (autograder.judge.rebuild) and reads the structure from its
        rebuild, and runs the rebuild on these inputs for the values. One description per shapes, one run per
        inputs: the structure check and the value check of one case see one computation. Without arrays it is a
        plain call in the jail. `stand_in`: helpers the function calls that answer as the course's model of the
        notebook's own matmul (jail_agent.calls.stand_ins); what they answered comes back in `own`. Only names
        travel in, never a value of the grader's. `ahead(computation)`, called once the computation is rebuilt and
        before it runs, lets the grader start work on it beside the run (the compile rule's compiles)."""
        names = [str(n) for n in stand_in] if stand_in else None
        positions = [i for i, a in enumerate(args) if _is_array(a)]
        if not positions:
            enc_args, enc_kwargs, blobs = _encode_call(args, kwargs)
            key = _key([enc_args, names], enc_kwargs, blobs)
            if key not in self._cache:
                self._cache[key] = _plain_answer(*self._send(enc_args, enc_kwargs, blobs, names),
                                                 held=self._judge().held)
            return self._cache[key]
        import jax

        in_avals = tuple(jax.ShapeDtypeStruct(tuple(args[i].shape), args[i].dtype) for i in positions)
        abstract = list(args)
        for i, a in zip(positions, in_avals):
            abstract[i] = a
        enc_args, enc_kwargs, blobs = _encode_call(tuple(abstract), kwargs)
        trace_key = _key([enc_args, names], enc_kwargs, blobs)
        traced = self._traced.get(trace_key)
        if traced is None:
            traced = self._traced[trace_key] = self._judge().trace(*self._send(enc_args, enc_kwargs, blobs, names),
                                                                   in_avals)
            self._rebuilt(traced)
        if traced.error is not None:      # the student's error, or the grader refused what was traced
            raise traced.error
        if not run or any(type(args[i]).__name__ == "ShapeDtypeStruct" for i in positions):
            return Invocation(traced.structure, None, computation=traced.computation)
        if ahead is not None and traced.computation is not None:
            ahead(traced.computation)
        enc_args, enc_kwargs, blobs = _encode_call(args, kwargs)
        key = _key([enc_args, names], enc_kwargs, blobs)
        if key not in self._cache:
            result, error = self._judge().run(traced, [args[i] for i in positions])
            self._cache[key] = Invocation(traced.structure, result, error, traced.computation)
        return self._cache[key]

    def __repr__(self) -> str:
        return f"<the student's {self.name}>"


def _plain_answer(header: dict[str, Any], blobs: list[bytes], held: Held | None = None) -> Invocation:
    """The jail's reply to a plain call (no arrays): the value it returned, as data, counted in `held` (what the
    submission's grading holds: a reply past it costs this call, autograder.jail.held)."""
    if header.get("ok") is not True:
        raise _error(header.get("error"))
    why = held.overrun(sum(len(b) for b in blobs)) if held is not None else None
    if why is not None:
        raise StudentError(phase="call", ename="Overrun", text=f"it {why}", not_implemented=False)
    try:
        result = wire.decode_reply(header.get("result"), blobs)
        own = wire.decode_reply(header.get("own"), blobs)
        if held is not None:
            held.keep([result, own])
    except wire.WireError as e:
        raise BadAnswer(f"malformed answer ({e})") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as e:
        raise BadAnswer(f"malformed answer ({type(e).__name__}: {str(e)[:200]})") from None
    if own is not None and not (isinstance(own, dict) and all(isinstance(v, list) for v in own.values())):
        raise BadAnswer("malformed answer (own: not a mapping of lists)")
    return Invocation(None, result, own=own)


class LocalFunction(StudentFunction):
    """A function of this process, traced and described exactly as the jail does (tests of the checks only):
    its description makes the same JSON round trip and the same rebuild."""

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        super().__init__(name or getattr(fn, "__name__", "function"))
        self.fn = fn
        self._direct: Any = None
        self._local: Any = None

    def _judge(self) -> Any:
        from autograder.judge.client import LocalJudge

        if self._local is None:
            self._local = LocalJudge()
        return self._local

    def _send(self, enc_args: Any, enc_kwargs: Any, blobs: list[bytes],
              stand_in: list[str] | None) -> tuple[dict[str, Any], list[bytes]]:
        from autograder.jail.jail_agent.calls import CallFailed, invoke, reply

        args, kwargs = wire.decode(enc_args, blobs), wire.decode(enc_kwargs, blobs)
        self._direct = None
        try:
            answer = invoke(self.fn, list(args), dict(kwargs), stand_in=stand_in, keep_jaxpr=True)
        except CallFailed as e:
            return {"ok": False, "error": e.info}, []
        self._direct = answer.pop("jaxpr", None)
        header, out_blobs = reply(answer)
        return json.loads(json.dumps(header, allow_nan=False)), out_blobs

    def _rebuilt(self, traced: Any) -> None:
        """The round trip holds: what the grader reads of its judge's rebuild (the structure as data, viewed) is
        what it reads of the direct trace (so the mutant corpus, run through this class, proves describe ->
        rebuild -> structure data -> view on every kernel in it)."""
        from autograder.judge.structure import structure_data
        from pallas_course.kernel_trace import primitive_names, trace_jaxpr

        direct, self._direct = self._direct, None
        if direct is None or traced.structure is None:
            return
        if "platform_index" in primitive_names(direct):   # the rebuild keeps the TPU's branch alone, by design
            return
        want, got = structure_data(trace_jaxpr(direct)), structure_data(traced.structure)
        if want != got:
            raise AssertionError(f"the rebuild of {self.name} differs from its direct trace:\n{want}\n{got}")


class RemoteFunction(StudentFunction):
    """A function defined in the jailed notebook."""

    def __init__(self, name: str, session: "Session") -> None:
        super().__init__(name)
        self.session = session

    def _judge(self) -> Any:
        return self.session.judge

    def _send(self, enc_args: Any, enc_kwargs: Any, blobs: list[bytes],
              stand_in: list[str] | None) -> tuple[dict[str, Any], list[bytes]]:
        return self.session.request(
            {"op": "call", "name": self.name, "args": enc_args, "kwargs": enc_kwargs,
             "stand_in": stand_in, "timeout_s": self.session.call_timeout_s()}, blobs,
            timeout=self.session.call_timeout_s() + 10)


# ------------------------------------------------------------------------------------------- the session

# The jail and the judge compile interpret-mode kernels with pallas_course.xla_flags' fast_compile_xla_flags (one
# home for them: the student's own kernel runs under them too where it interprets on a CPU).
def _jail_xla_flags() -> str:
    # One thread per jail: interpret-mode kernels gain nothing from XLA's thread pools, and jails graded side by
    # side (--jobs) would only fight over the cores with them.
    return f"--xla_cpu_multi_thread_eigen=false {fast_compile_xla_flags()}".strip()


def compile_like_the_jail() -> None:
    """The grader runs the rebuilt kernels in interpret mode itself (autograder.judge.rebuild): it compiles their
    interpreters with the jail's flags, set before this process first uses XLA (a flag set later is ignored;
    an XLA_FLAGS of the caller's own wins)."""
    if "XLA_FLAGS" not in os.environ:
        os.environ["XLA_FLAGS"] = _jail_xla_flags()


def jail_env() -> dict[str, str]:
    """The jail's whole environment: nothing of the grader's (no tokens, no paths to its files)."""
    env = {"HOME": "/tmp/home", "TMPDIR": "/tmp", "IPYTHONDIR": "/tmp/home/.ipython", "MPLCONFIGDIR": "/tmp/home/.mpl",
           "XDG_CACHE_HOME": "/tmp/home/.cache", "XDG_CONFIG_HOME": "/tmp/home/.config", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": JAIL_AGENT_ROOT, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "JAX_PLATFORMS": "cpu", "PALLAS_COURSE_MODE": "tpu-interpret", "PYTHONUNBUFFERED": "1",
           "PALLAS_COURSE_CHECK_COMPILE": "0",   # the grader compiles outside the jail (compile_rule)
           "TF_CPP_MIN_LOG_LEVEL": "3", "MPLBACKEND": "agg", "TPU_LOG_DIR": "/tmp/home/tpu_logs",   # libtpu's, private
           # One thread per jail for BLAS and OpenMP too (see _jail_xla_flags).
           "XLA_FLAGS": _jail_xla_flags(),
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return env


class Session:
    """One notebook's jailed agent: start it, run cells, look names up, call functions, end it."""

    def __init__(self, *, limits: Any, cell_timeout_s: float, deadline: float, jailed: bool = True,
                 judge: Any = None) -> None:
        from autograder.jail import bwrap as jail
        from autograder.judge.box import BoxLimits
        from autograder.judge.client import BoxedJudge

        self.cell_timeout_s_ = float(cell_timeout_s)
        self.deadline = deadline
        self._stderr_tail = bytearray()
        if jailed:   # no jail, no grading: said before anything starts (JailUnavailable, in one line)
            jail.require_jail()
        # The judge first: its imports run while the jail starts and runs the notebook's first cells.
        self.judge = BoxedJudge(limits=judge or BoxLimits(), deadline=deadline, cell_timeout_s=self.cell_timeout_s_,
                                wall_s=max(1.0, deadline - time.monotonic()))
        try:
            self._start_jail(jail, limits, jailed)
        except BaseException:
            self.judge.close()
            raise

    def restart_clock(self, deadline: float) -> None:
        """Count the grading's wall-clock limit from now (a session started ahead, autograder.jail.warm, waited)."""
        self.deadline = deadline
        self.judge.deadline = deadline
        self.judge.wall_s = max(1.0, deadline - time.monotonic())

    def _start_jail(self, jail: Any, limits: Any, jailed: bool) -> None:
        env = jail_env()
        if timeline.enabled():
            env["COURSE_AGENT_CLOCK"] = "1"   # the agent's hello then tells when it started and was ready
        if not jailed:   # --no-jail: no binds, so the agent and the grader's helpers are imported from where they lie
            env["PYTHONPATH"] = f"{AGENT_DIR.parent}{os.pathsep}{helpers_dir().parent}"
        self.jail = jail.start([sys.executable, "-m", "jail_agent.agent"], binds=agent_binds(), env=env,
                               limits=limits, cwd="/tmp", jailed=jailed, files=agent_files() if jailed else None)
        proc = self.jail.process
        self.reader = wire.Reader(proc.stdout.fileno())
        self._drain = threading.Thread(target=self._drain_stderr, args=(proc.stderr,), daemon=True)
        self._drain.start()
        try:
            hello, _ = self._read(timeout=min(120.0, self._left()))
            if timeline.enabled() and isinstance(hello.get("clock"), dict):   # the agent's own, before any cell
                timeline.record("jail agent", *[float(hello["clock"].get(k, 0)) for k in ("started", "ready")],
                                cpu_s=float(hello["clock"].get("cpu_s", 0)), where="jail")
            if hello.get("ready") is not True:
                raise BadAnswer("the agent did not say it was ready")
        except (StudentGone, BadAnswer) as e:
            self.jail.kill()
            self._drain.join(timeout=2)
            raise SetupFailed(f"the jail could not start the grading agent ({e}){self._jail_said()}") from None
        # No student code has run yet, so the agent's word on where `import pallas_course` leads is its own.
        want = self.jail.path(f"{JAIL_HELPERS}/__init__.py") if jailed else str(helpers_dir() / "__init__.py")
        if hello.get("helpers") != want:
            self.jail.kill()
            raise SetupFailed(f"the jail's Python would import pallas_course from {str(hello.get('helpers'))[:300]}, "
                              f"not the grader's own helpers ({want}): is another checkout installed first?")

    def _jail_said(self) -> str:
        """The last lines of the jail's stderr (bubblewrap's or Python's own message), for a set-up error."""
        lines = [line.strip() for line in self.stderr_tail().splitlines() if line.strip()][-3:]
        return ": " + " | ".join(line[:300] for line in lines) if lines else ""

    # ---- plumbing
    def _drain_stderr(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read(65536), b""):
            self._stderr_tail += chunk
            del self._stderr_tail[:-STDERR_KEEP]

    def _left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def call_timeout_s(self) -> float:
        return min(self.cell_timeout_s_, self._left())

    def _gone(self, silent: bool) -> StudentGone:
        if silent:
            self.jail.kill()
            why = self.jail.ended() or "killed by the grader"
            return StudentGone(why, silent=True)
        self.jail.wait(timeout=5)
        return StudentGone(self.jail.ended() or "ended", silent=False)

    def _read(self, timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        try:
            header, blobs = self.reader.read(timeout=min(timeout, self._left()))
        except wire.PeerSilent:
            raise self._gone(silent=True) from None
        except wire.PeerGone:
            raise self._gone(silent=False) from None
        except wire.WireError as e:
            self.jail.kill()
            raise BadAnswer(str(e)) from None
        if not isinstance(header, dict):
            raise BadAnswer("a reply that is not a mapping")
        return header, blobs

    def request(self, header: dict[str, Any], blobs: list[bytes] | None = None, *,
                timeout: float) -> tuple[dict[str, Any], list[bytes]]:
        with timeline.span(f"jail {header.get('op')}"):
            try:
                self.jail.process.stdin.write(wire.pack(header, blobs))
                self.jail.process.stdin.flush()
            except (BrokenPipeError, OSError):
                raise self._gone(silent=False) from None
            return self._read(timeout)

    def mark_jail_cpu(self, event: str) -> None:
        """The CPU seconds the jail's processes have used so far (profiling only: COURSE_GRADE_TIMELINE)."""
        if timeline.enabled():
            cgroups = getattr(self.jail, "_cgroups", None)
            pids = cgroups.pids() if cgroups is not None else [self.jail.process.pid]
            box = getattr(self.judge, "box", None)
            judge = [] if box is None else box.cgroups.pids() if box.cgroups is not None else [box.process.pid]
            timeline.mark(event, jail_cpu_s=timeline.cpu_of(pids), judge_cpu_s=timeline.cpu_of(judge))

    # ---- what the engine asks
    def run_cell(self, source: str) -> tuple[list[dict[str, Any]], int | None]:
        header, _ = self.request({"op": "run_cell", "source": source, "timeout_s": self.call_timeout_s()},
                                 timeout=self.call_timeout_s() + 10)
        outputs = header.get("outputs")
        if not isinstance(outputs, list):
            raise BadAnswer("a cell reply without outputs")
        count = header.get("execution_count")
        return outputs, count if isinstance(count, int) and not isinstance(count, bool) else None

    def argument(self, name: str) -> Any:
        """What a hidden test receives for `name`: a RemoteFunction, the value as data, or NameError."""
        header, blobs = self.request({"op": "lookup", "name": name}, timeout=30)
        kind = header.get("kind")
        if kind == "callable":
            return RemoteFunction(name, self)
        if kind == "value":
            why = self.judge.held.overrun(sum(len(b) for b in blobs))
            if why is not None:
                raise BadAnswer(f"`{name}` {why}")
            try:
                return self.judge.held.keep(wire.decode_reply(header.get("value"), blobs))
            except wire.WireError as e:
                raise BadAnswer(f"malformed value ({e})") from None
        if kind == "missing":
            raise NameError(f"name '{name}' is not defined")
        raise BadAnswer("a lookup reply of no known kind")

    def stderr_tail(self) -> str:
        return bytes(self._stderr_tail).decode("utf-8", "replace")

    def close(self) -> None:
        """End the jail now: nothing more is asked of it, and waiting for its Python to exit on its own (jax's
        shutdown) took 2 s a notebook."""
        try:
            if self.jail.process.poll() is None:
                self.jail.process.stdin.close()
        except (OSError, ValueError):
            pass
        finally:
            self.jail.kill()
            self.judge.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.lru_cache(maxsize=1)
def _public_manifest() -> bytes:
    """course.yml as students may read it (no rubrics, no hidden-test descriptions): the helpers in the jail
    read chips and labs from it; the instructor's file never enters. Made once per process, in memory."""
    import yaml

    from autograder.course_manifest import COURSE_YML
    from autograder.public_manifest import public_manifest

    raw = yaml.safe_load(COURSE_YML.read_text())
    return yaml.safe_dump(public_manifest(raw, raw.get("course", {}).get("colab_pip", "")), sort_keys=False,
                          allow_unicode=True).encode()


def helpers_dir() -> Path:
    """The pallas_course/ folder this grader imported: the very files bound into the jail."""
    import pallas_course

    return Path(pallas_course.__file__).resolve().parent


JAIL_HELPERS = f"{JAIL_AGENT_ROOT}/pallas_course"   # on the jail's PYTHONPATH, ahead of site-packages and any
                                                    # editable install's finder (which may name another checkout)


def agent_binds() -> list[str | tuple[str, str]]:
    """What the jail sees, read-only: Python and its packages, the grader's own student helpers (bound where
    the jail's PYTHONPATH finds them first), the agent, and (agent_files) course.yml as students may read it.
    Nothing else of the repository: not solutions/, autograder/ (but the agent), the keys, the rubrics,
    grades/, the gradebook."""
    from autograder.jail import bwrap as jail

    return [*jail.python_binds(), (str(helpers_dir()), JAIL_HELPERS), (str(AGENT_DIR), f"{JAIL_AGENT_ROOT}/jail_agent")]


def agent_files() -> dict[str, bytes]:
    """Files the jail gets as data (no temporary file on the host): the public course.yml over the helpers'."""
    from pallas_course.manifest import MANIFEST_PATH

    # pallas_course/course.yml is a link to the repository's course.yml: the file goes where the link leads
    name = os.readlink(MANIFEST_PATH) if MANIFEST_PATH.is_symlink() else MANIFEST_PATH.name
    return {os.path.normpath(os.path.join(JAIL_HELPERS, name)): _public_manifest()}


compile_like_the_jail()
