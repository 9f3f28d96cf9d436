"""What one submission may use, and what its code runs under: the grading policy in one place.

Student code runs in a jail (autograder.jail.jails: bubblewrap namespaces, uid 65534, cgroup limits) started by
autograder.session.session.Session; the checks that score it run outside (autograder.steps.execute). `Limits` is what the
instructor sets (`course grade --timeout/--cell-timeout/--memory`; whether there is a jail at all is the
engine's name, autograder.steps.engines); `sandbox_status()` is the line reports print about it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_WALL_S = 600
DEFAULT_MEMORY_MB = 4096
DEFAULT_FILE_MB = 256
CELL_TIMEOUT_S = 120  # nbgrader's c.Execute.timeout for this course
GRADING_MODE = "tpu-interpret"
MODE_ENV = "PALLAS_COURSE_MODE"  # pallas_course.runtime.MODE_ENV, without importing jax here


@dataclass(frozen=True)
class Limits:
    """What one submission may use. `cell_s` is nbgrader's per-cell timeout (the cell is interrupted and
    the run goes on, as in nbgrader); `wall_s` bounds the whole run (the jail is killed)."""

    wall_s: float = DEFAULT_WALL_S
    memory_mb: int = DEFAULT_MEMORY_MB
    file_mb: int = DEFAULT_FILE_MB
    cell_s: int | None = None  # None: CELL_TIMEOUT_S

    def __post_init__(self) -> None:
        for name in ("wall_s", "memory_mb", "file_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name}={getattr(self, name)} should be > 0")

    @property
    def cell_timeout_s(self) -> int:
        return self.cell_s or CELL_TIMEOUT_S


def sandbox_status(jailed: bool = True) -> str:
    """One line for reports: what every submission's code runs under."""
    from autograder.jail.bwrap import bwrap_problem
    from autograder.jail.jails import NO_JAIL_LOSES, UID, jail_kind, jail_problem, limits_note

    if not jailed:
        return f"no jail (--no-jail): {NO_JAIL_LOSES}"
    problem = jail_problem()
    if problem:
        return f"no jail here: {problem}"
    if jail_kind() == UID:
        why = bwrap_problem() or "COURSE_JAIL=uid"
        return (
            f"jailed without namespaces ({why}): a uid of its own, the grader's files unreadable to it, "
            "a seccomp filter (no sockets, ptrace, namespaces or keyring); it sees the host's processes and "
            f"world-readable files; {limits_note()}; "
            "hidden checks run outside the jail"
        )
    return (
        "jailed: bubblewrap (own user, pid, net, ipc, uts namespaces; uid 65534; only Python and the course "
        f"helpers visible, read-only); {limits_note()}; hidden checks run outside the jail"
    )
