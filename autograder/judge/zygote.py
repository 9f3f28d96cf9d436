"""The judges' warm parent (a zygote): one process per grading process that has done the judge's imports and holds
nothing of any submission. Each judge (autograder.judge.box) is a child forked from it, so a fresh judge per
submission no longer pays Python's start and the imports (~0.7 CPU s of a judge's ~1.5 on this course's
machine); what each judge then does, it does alone (its warm-up, its requests, its end).

What the zygote holds, and why that is safe to share:
- the imported modules (jax, the rebuild, the course helpers), and nothing started: no thread (a fork copies only
  the thread that forks, so a lock another held would stay held in the child; `main` checks there is none), no
  JAX backend or libtpu client (both start threads: each judge makes its own after the fork);
- no data of a submission: it only ever receives fork requests (the new judge's folder, environment, cgroups and
  rlimits: the grader's own settings) with the three pipes the judge will speak on, and it answers with pids and
  exit statuses. A judge cannot reach it (the control socket is closed in the child, and nothing else joins them).

The child does what the box's start-up chain (autograder.confine.chain: the wrapper -> prlimit -> setpriv -> the
guard) does for a process of its own: a session of its own, then `chain.enter` (its cgroups joined, the same
rlimits table applied by setrlimit, the parent-death signal armed, then it stops if the zygote is already gone),
its folder, environment and pipes, then autograder.judge.server.main. The zygote ends when its grader does (the control socket closes,
whatever thread started it), killing its judges first; the parent-death signal covers a zygote killed outright.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from typing import Any, Sequence

from autograder.confine import chain
from autograder.confine.child import Tail

START_S = 120.0  # the zygote's imports at most
MESSAGE_MAX = 1 << 20  # one control message (a fork request: an environment, a few paths)
GONE = -signal.SIGKILL  # the exit status of a judge whose zygote ended before telling it


class ZygoteFailed(RuntimeError):
    """The zygote could not start or fork (the box then starts its judge as a process of its own)."""


# ------------------------------------------------------------------------------------------ the grader's side


class Forked:
    """A judge forked by the zygote, with Popen's surface as the box uses it (pid, pipes, poll, wait)."""

    def __init__(self, zygote: Zygote, request: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.zygote, self.request = zygote, request
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.args = ["autograder.judge.server (forked)"]

    @property
    def pid(self) -> int:
        return self.zygote.pid_of(self.request)

    @property
    def returncode(self) -> int | None:
        return self.zygote.code_of(self.request)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self.zygote.wait_code(self.request, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code


class Zygote:
    """The grader's handle on its zygote: started once per grading process, asked for one fork per judge."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self._lock = threading.Lock()  # one request at a time on the socket
        self._changed = threading.Condition()
        self._pids: dict[int, int] = {}  # request -> pid
        self._codes: dict[int, int] = {}  # request -> exit status (Popen's convention)
        self._by_pid: dict[int, int] = {}  # pid -> request
        self._next = 0
        self.gone: str | None = None  # why the zygote ended, once it has
        self.ready = False  # it imported, checked it has one thread, and forks
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "autograder.judge.zygote", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._tail = Tail(self.process.stderr, 16 * 1024, name="judge-zygote-stderr")
        threading.Thread(target=self._listen, name="judge-zygote", daemon=True).start()

    def _listen(self) -> None:
        while True:
            try:
                data = self.sock.recv(MESSAGE_MAX)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            with self._changed:
                if msg.get("ready") is True:
                    self.ready = True
                elif "forked" in msg:
                    self._pids[msg["request"]] = msg["forked"]
                    self._by_pid[msg["forked"]] = msg["request"]
                elif "failed" in msg:
                    self._pids[msg["request"]] = -1
                    self._codes[msg["request"]] = 1
                elif "exit" in msg and msg["exit"] in self._by_pid:
                    self._codes[self._by_pid.pop(msg["exit"])] = int(msg["code"])
                self._changed.notify_all()
        code = self.process.wait()
        self._tail.join(timeout=5)  # its last words (why it ended) may still be in the pipe: read them first
        with self._changed:
            self.gone = f"the judges' zygote ended (exit {code}): {self._tail.text()[-600:]}"
            for request in range(self._next):  # its judges died with it (the parent-death signal)
                self._pids.setdefault(request, -1)
                self._codes.setdefault(request, GONE)
            self._changed.notify_all()

    def alive(self) -> bool:
        return self.gone is None and self.process.poll() is None

    def failed_to_start(self) -> bool:
        """It ended before it could fork (its imports failed, or left a thread): a judge of its own will do."""
        with self._changed:
            self._changed.wait_for(lambda: self.ready or self.gone is not None, timeout=10)
            return self.gone is not None and not self.ready

    def fork(
        self, *, cwd: str, env: dict[str, str], cgroups: Sequence[str], rlimits: Sequence[tuple[str, int, int]]
    ) -> Forked:
        """A new judge with these settings, speaking on fresh pipes; it starts once the zygote has imported."""
        fds = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr
        theirs = [fds[0][0], fds[1][1], fds[2][1]]
        try:
            with self._lock:
                request = self._next
                self._next += 1
                msg = json.dumps(
                    {
                        "request": request,
                        "cwd": cwd,
                        "env": env,
                        "cgroups": list(cgroups),
                        "rlimits": [list(r) for r in rlimits],
                    }
                ).encode()
                try:
                    socket.send_fds(self.sock, [msg], theirs)
                except OSError as e:
                    with self._changed:
                        self._pids[request], self._codes[request] = -1, GONE
                    raise ZygoteFailed(f"the judges' zygote cannot be asked ({e})") from None
        except BaseException:
            for fd in (fd for pair in fds for fd in pair):
                os.close(fd)
            raise
        for fd in theirs:
            os.close(fd)
        return Forked(self, request, os.fdopen(fds[0][1], "wb"), os.fdopen(fds[1][0], "rb"), os.fdopen(fds[2][0], "rb"))

    def pid_of(self, request: int) -> int:
        with self._changed:
            self._changed.wait_for(lambda: request in self._pids, timeout=START_S)
            return self._pids.get(request, -1)

    def code_of(self, request: int) -> int | None:
        with self._changed:
            return self._codes.get(request)

    def wait_code(self, request: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: request in self._codes, timeout=timeout)
            return self._codes.get(request)

    def close(self) -> None:
        try:
            self.sock.close()  # the zygote reads the end, kills its judges and exits
        except OSError:
            pass


# -------------------------------------------------------------------------------------------- the zygote's side


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _become_judge(req: dict[str, Any], fds: list[int], parent: int, close: list[int], imported: dict[str, str]) -> None:
    """In the forked child: the box's start-up chain, then the judge's own main. Never returns."""
    import tempfile

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        os.setsid()
        chain.enter(req["cgroups"], req["rlimits"], parent)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        # the box's environment, and what the imports set in it, as they would have in a judge of its own
        # (libtpu's TPU_LIBRARY_PATH, jax's TPU_SKIP_MDS_QUERY: without it libtpu asks a cloud metadata server)
        os.environ.update({**req["env"], **imported})
        tempfile.tempdir = None
        sys.argv = ["autograder.judge.server"]
        from autograder.judge import server

        code = server.main() or 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - said on the judge's stderr, which the box keeps
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a flush on the way out must not stop the exit
                pass
        os._exit(code)


def preload() -> None:
    """What every judge imports before it is ready (autograder.judge.server.main and its warm-up), imported once."""
    import jax
    import jax.numpy  # noqa: F401 - preloaded for every judge this zygote forks
    from jax.experimental import pallas  # noqa: F401 - preloaded for every judge this zygote forks
    from jax.experimental.pallas import tpu  # noqa: F401 - preloaded for every judge this zygote forks

    import autograder.judge.rebuild
    import autograder.judge.server
    import autograder.judge.protocol
    import autograder.judge.structure
    import autograder.course_manifest  # noqa: F401 - preloaded for every judge this zygote forks
    import pallas_course.graded_compile
    import pallas_course.kernel_trace
    import pallas_course.runtime
    import pallas_course.tpu_compile  # noqa: F401 - preloaded for every judge this zygote forks
    from autograder.course_manifest import manifest

    manifest()  # the course's own course.yml, read once (the warm-up asks it for the compile chips)


def main(control_fd: int) -> None:
    """Import, check that nothing was started, then fork one judge per request until the grader goes."""
    import select

    sock = socket.socket(fileno=control_fd)
    before = dict(os.environ)
    preload()
    imported = {k: v for k, v in os.environ.items() if before.get(k) != v}
    if _threads() != 1:
        sys.stderr.write(f"the zygote has {_threads()} threads after its imports: a fork would copy one\n")
        sys.exit(3)
    sock.send(json.dumps({"ready": True}).encode())
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: set[int] = set()
    me = os.getpid()
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            while True:  # every ended child, whether or not its SIGCHLD came before it was listed
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                children.discard(pid)
                sock.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
        if sock in readable:
            try:
                data, fds, _, _ = socket.recv_fds(sock, MESSAGE_MAX, 3)
            except OSError:
                data, fds = b"", []
            if not data:
                break
            req = json.loads(data)
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"request": req.get("request"), "failed": "not three pipes"}).encode())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _become_judge(req, fds, me, [sock.fileno(), wake_r, wake_w], imported)
            for fd in fds:
                os.close(fd)
            children.add(pid)
            sock.send(json.dumps({"request": req["request"], "forked": pid}).encode())
    for pid in children:  # the grader is gone: so are its judges
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    cwd = os.getcwd()
    os.chdir("/")
    import shutil

    shutil.rmtree(cwd, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]))
