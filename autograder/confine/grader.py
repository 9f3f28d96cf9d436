"""Who made a confined child: this grader, named by its pid namespace, pid and start time. Everything a child holds
(its cgroups, its folders, its uid's record) carries that name, so the orphan sweep (autograder.confine.orphans)
tells a live grader's from a dead one's even once a pid is reused, and never judges a grader of another pid
namespace (issue 42: two graders in different containers sharing one writable cgroup hierarchy looked each other's
pids up in their own namespace, found them dead, and killed each other's jails)."""

from __future__ import annotations

import os
from pathlib import Path


def started(pid: int) -> str:
    """When `pid` started (clock ticks since boot), so a reused pid is not taken for its grader."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "gone"


def namespace() -> str:
    """This process's pid namespace, as the inode number of /proc/self/ns/pid ("0" where it cannot be read)."""
    try:
        return os.readlink("/proc/self/ns/pid").rsplit("[", 1)[1].rstrip("]")
    except (OSError, IndexError):
        return "0"


def tag() -> str:
    """This grader's name in what it makes: "<pid namespace>-<pid>-<start time>"."""
    return f"{namespace()}-{os.getpid()}-{started(os.getpid())}"


def alive(pid: int, start: str) -> bool:
    """Whether the grader `pid` (of this pid namespace) that started at `start` still runs."""
    return started(pid) == start


def gone(fields: list[str]) -> bool:
    """Whether the grader a name's fields name ([namespace, pid, start], or the older [pid, start]) is a dead grader
    of this pid namespace: never one of another namespace, whose pids mean nothing here."""
    if len(fields) == 3:
        ns, pid, start = fields
        if ns != namespace():
            return False
    elif len(fields) == 2:
        pid, start = fields
    else:
        return False
    return pid.isdigit() and not alive(int(pid), start)
