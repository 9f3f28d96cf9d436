"""Run a command the way Gradescope's and PrairieLearn's containers run it: under a seccomp filter that denies
new namespaces as Docker's default profile does (unshare, setns, clone with CLONE_NEW* flags: EPERM; clone3:
ENOSYS), so bubblewrap cannot start and the grader must fall back to the jail without namespaces.

    python -m tests.no_namespaces CMD [ARG...]
"""

from __future__ import annotations

import os
import sys

from autograder.jail.syscall_filter import loader_argv, no_namespaces_filter


def argv(cmd: list[str]) -> list[str]:
    """`cmd` under the stand-in of Docker's profile (the filter installed by the running interpreter)."""
    program = no_namespaces_filter()
    if program is None:
        raise SystemExit("no seccomp filter for this machine's ABI")
    return loader_argv(sys.executable, program, cmd)


if __name__ == "__main__":
    cmd = argv(sys.argv[1:])
    os.execv(cmd[0], cmd)
