"""Who made a confined child: this grader, named by its pid and start time. Everything a child holds (its cgroups,
its folders, its uid's record) carries that name, so the orphan sweep (autograder.confine.orphans) tells a live
grader's from a dead one's even once a pid is reused."""

from __future__ import annotations

import os
from pathlib import Path


def started(pid: int) -> str:
    """When `pid` started (clock ticks since boot), so a reused pid is not taken for its grader."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "gone"


def tag() -> str:
    """This grader's name in what it makes: "<pid>-<start time>"."""
    return f"{os.getpid()}-{started(os.getpid())}"


def alive(pid: int, start: str) -> bool:
    """Whether the grader named "<pid>-<start>" still runs."""
    return started(pid) == start
