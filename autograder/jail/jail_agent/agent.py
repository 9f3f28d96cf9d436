"""The agent inside the jail: runs the notebook's cells in an IPython shell and answers the grader's requests.

    python -m jail_agent.agent        (stdin/stdout are the grader's pipes; see wire.py)

Requests: {"op": "run_cell", "source", "timeout_s"} -> the cell's outputs as nbformat dicts;
{"op": "lookup", "name"} -> whether the name is a function, a value (sent as data) or missing;
{"op": "call", "name", "args", "kwargs", "stand_in", "bodies", "timeout_s"} -> calls.invoke's answer; {"op": "bye"}.
The agent keeps the protocol on private copies of fds 0 and 1 and points fds 0-2 elsewhere, so what the
notebook prints becomes cell output and never mixes with the protocol (a notebook that writes to the private
fds anyway can only garble its own answers: the grader treats them as untrusted).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

_STARTED = time.time()  # the agent's first line: Python's own start-up is before it

MAX_CELL_OUTPUT_CHARS = 1_000_000  # per cell; the grader caps again on its side
MAX_ERROR_CHARS = 20_000


class CellTimeout(KeyboardInterrupt):
    """The grader's per-cell time ran out (raised by the alarm, like nbgrader's interrupt)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CellTimeout()


class _Recorder:
    """Collects one cell's outputs as nbformat dicts, within a size budget."""

    def __init__(self) -> None:
        self.outputs: list[dict[str, Any]] = []
        self.used = 0
        self.cut = False

    def _room(self, n: int) -> bool:
        self.used += n
        if self.used > MAX_CELL_OUTPUT_CHARS:
            if not self.cut:
                self.cut = True
                self.outputs.append(
                    {
                        "output_type": "stream",
                        "name": "stdout",
                        "text": f"\n... output past {MAX_CELL_OUTPUT_CHARS:,} characters dropped by the grader ...\n",
                    }
                )
            return False
        return True

    def stream(self, name: str, text: str) -> None:
        if not text or not self._room(len(text)):
            return
        last = self.outputs[-1] if self.outputs else None
        if last and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    def rich(self, kind: str, data: dict[str, Any], metadata: dict[str, Any] | None, count: int | None = None) -> None:
        data = {str(k): (v if isinstance(v, str) else str(v)) for k, v in (data or {}).items()}
        if not self._room(sum(len(v) for v in data.values())):
            return
        out: dict[str, Any] = {"output_type": kind, "data": data, "metadata": {}}
        if kind == "execute_result":
            out["execution_count"] = count
        self.outputs.append(out)

    def error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        tb = "\n".join(traceback)[-MAX_ERROR_CHARS:]
        self.outputs.append(
            {
                "output_type": "error",
                "ename": ename[:200],
                "evalue": evalue[:MAX_ERROR_CHARS],
                "traceback": tb.splitlines(),
            }
        )


class _Stream:
    def __init__(self, name: str, agent: "Agent") -> None:
        self.name, self.agent = name, agent

    def write(self, text: str) -> int:
        if self.agent.recorder is not None:
            self.agent.recorder.stream(self.name, str(text))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return 2


def _make_shell(agent: "Agent") -> Any:
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type

    class Hook(DisplayHook):
        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict: dict, md_dict: dict | None = None) -> None:
            if agent.recorder is not None:
                agent.recorder.rich("execute_result", format_dict, md_dict, self.prompt_count)

        def finish_displayhook(self) -> None:
            pass

    class Publisher(DisplayPublisher):
        def publish(
            self,
            data: dict,
            metadata: dict | None = None,
            source: Any = None,
            *,
            transient: Any = None,
            update: bool = False,
            **kwargs: Any,
        ) -> None:
            if agent.recorder is not None:
                agent.recorder.rich("display_data", data, metadata)

        def clear_output(self, wait: bool = False) -> None:
            pass

    class Shell(InteractiveShell):
        displayhook_class = Type(Hook)
        display_pub_class = Type(Publisher)

        def _showtraceback(self, etype: type, evalue: BaseException, stb: list[str]) -> None:
            if agent.recorder is not None:
                agent.recorder.error(etype.__name__, str(evalue), list(stb))

        def enable_gui(self, gui: Any = None) -> None:
            pass

    shell = Shell.instance(colors="NoColor")
    shell.enable_matplotlib = lambda *a, **k: None  # no GUI event loops in the jail
    return shell


def _helpers() -> str | None:
    """Where `import pallas_course` leads here (found, not imported), for the grader to check it binds its own."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pallas_course")
    except (ImportError, ValueError):
        return None
    return os.path.realpath(spec.origin) if spec and spec.origin else None


# What every lab's set-up cell imports, imported before the agent says it is ready, while the grader is still
# reading and restoring the notebook (autograder.session.warm): the cell then finds them in sys.modules, as it would after
# a re-run. Nothing is initialised (no XLA backend, no interpret mode): the notebook's own cells do that.
IMPORT_AHEAD = (
    "numpy",
    "jax",
    "jax.numpy",
    "jax.experimental.pallas",
    "jax.experimental.pallas.tpu",
    "pallas_course.check",
    "pallas_course.runtime",
)


def _import_ahead() -> None:
    import importlib

    for name in IMPORT_AHEAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the notebook's own import raises it again, as its error
            pass


class Agent:
    def __init__(self, proto_in: int, proto_out: Any) -> None:
        from .wire import Reader

        self.reader = Reader(proto_in)
        self.out = proto_out
        self.recorder: _Recorder | None = None
        self.shell = _make_shell(self)
        self.count = 0

    def reply(self, header: dict[str, Any], blobs: list[bytes] | None = None) -> None:
        from .wire import send

        send(self.out, header, blobs)

    def _alarm(self, seconds: Any) -> None:
        if isinstance(seconds, (int, float)) and seconds > 0:
            signal.setitimer(signal.ITIMER_REAL, float(seconds))

    def run_cell(self, req: dict[str, Any]) -> None:
        self.recorder = _Recorder()
        self.count += 1
        timed_out = False
        try:
            self._alarm(req.get("timeout_s"))
            try:
                self.shell.run_cell(str(req.get("source", "")), store_history=True)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            timed_out = True
        outputs = self.recorder.outputs
        if timed_out or any(o["output_type"] == "error" and o["ename"] == "CellTimeout" for o in outputs):
            # nbgrader's Execute.error_on_timeout, so a timed-out cell reads the same on both paths
            outputs = [o for o in outputs if o["output_type"] != "error"]
            outputs.append(
                {
                    "output_type": "error",
                    "ename": "CellTimeoutError",
                    "evalue": "",
                    "traceback": ["CellTimeoutError: No reply from kernel before timeout"],
                }
            )
        self.recorder = None
        self.reply({"ok": True, "outputs": outputs, "execution_count": self.count})

    def lookup(self, req: dict[str, Any]) -> None:
        from .wire import encode

        name = str(req.get("name", ""))
        ns = self.shell.user_ns
        if name not in ns:
            self.reply({"ok": True, "kind": "missing"})
        elif callable(ns[name]):
            self.reply({"ok": True, "kind": "callable"})
        else:
            blobs: list[bytes] = []
            self.reply({"ok": True, "kind": "value", "value": encode(ns[name], blobs)}, blobs)

    def call(self, req: dict[str, Any], blobs: list[bytes]) -> None:
        from .calls import CallFailed, invoke, reply
        from .wire import decode

        fn = self.shell.user_ns.get(str(req.get("name", "")))
        args = decode(req.get("args", []), blobs)
        kwargs = decode(req.get("kwargs", {}), blobs)
        try:
            self._alarm(req.get("timeout_s"))
            try:
                stand_in = req.get("stand_in") if isinstance(req.get("stand_in"), list) else None
                answer = invoke(fn, list(args), dict(kwargs), stand_in=stand_in, bodies=req.get("bodies") is not False)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CallFailed as e:
            self.reply({"ok": False, "error": e.info})
            return
        except CellTimeout:
            self.reply(
                {
                    "ok": False,
                    "error": {
                        "phase": "run",
                        "ename": "CellTimeoutError",
                        "not_implemented": False,
                        "text": "CellTimeoutError: ran past the per-test time limit",
                    },
                }
            )
            return
        self.reply(*reply(answer))

    def serve(self) -> None:
        from .wire import PeerGone

        _import_ahead()
        signal.signal(signal.SIGALRM, _on_alarm)
        hello: dict[str, Any] = {"ok": True, "ready": True, "python": sys.version.split()[0], "helpers": _helpers()}
        if os.environ.get("COURSE_AGENT_CLOCK"):  # profiling (autograder.timeline): before any cell ran
            hello["clock"] = {"started": _STARTED, "ready": time.time(), "cpu_s": time.process_time()}
        self.reply(hello)
        while True:
            try:
                req, blobs = self.reader.read()
            except PeerGone:
                return
            op = req.get("op")
            try:
                if op == "run_cell":
                    self.run_cell(req)
                elif op == "lookup":
                    self.lookup(req)
                elif op == "call":
                    self.call(req, blobs)
                elif op == "bye":
                    self.reply({"ok": True})
                    return
                else:
                    self.reply({"ok": False, "error": {"text": f"unknown op {op!r}"}})
            except Exception as e:  # noqa: BLE001 - e.g. a notebook that patched the agent: say so, go on
                self.recorder = None
                self.reply(
                    {
                        "ok": False,
                        "error": {
                            "phase": "call",
                            "ename": type(e).__name__,
                            "not_implemented": False,
                            "text": f"the grading agent failed ({type(e).__name__}: "
                            f"{str(e)[:300]}); did a cell change it?",
                        },
                    }
                )


def main() -> None:
    proto_in, proto_out = os.dup(0), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # C-level writes (XLA's logs) go to stderr, which the grader drains and caps
    agent = Agent(proto_in, proto_out)
    sys.stdout, sys.stderr = _Stream("stdout", agent), _Stream("stderr", agent)
    agent.serve()


if __name__ == "__main__":
    main()
