"""The one sweep of what a grader that died without cleaning up left behind: its children's cgroups (and whatever
still runs in them), the staging folders of its jails' mounts, the uids it reserved (their processes killed, their
folders removed) and its judges' temporary folders. Every child's start runs it.

Everything is named after its grader (autograder.confine.grader: pid and start time), so a live grader's is
never touched. Only what this grader's user made counts: a folder a jail could have made (another uid, a link,
writable by others) is left alone, and a uid is taken from the grader's own record, never from a name in /tmp.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from autograder.confine import grader, uids
from autograder.confine.cgroups import CGROUP_PREFIX, Cgroups, cgroup_dir
from autograder.confine.paths import ours

STAGE_DIR = "/tmp"  # mount points of re-bound folders (covered by a tmpfs in the jail's own namespace),
# and the judges' temporary folders
TEMP_PREFIX = "course-judge-"  # a judge's (or the judges' zygote's) folder: course-judge-<grader>-<start>-<hex>


def _dead_grader(name: str, prefix: str) -> bool:
    """Whether `name` (prefix + "<pid namespace>-<pid>-<start>-<hex>", or an older grader's "<pid>-<start>-<hex>")
    was made by a grader of this pid namespace that is gone."""
    parts = name[len(prefix) :].split("-")
    return name.startswith(prefix) and len(parts) in (3, 4) and grader.gone(parts[:-1])


def _sweep_cgroups() -> int:
    found = 0
    for controller in ("pids", "memory", "cpu"):
        try:
            entries = list(os.scandir(cgroup_dir(controller)))
        except OSError:
            continue
        for entry in entries:
            if not _dead_grader(entry.name, CGROUP_PREFIX):
                continue
            group = Cgroups.adopt(controller, Path(entry.path))
            found += controller == "pids" and bool(group.pids())
            group.kill_all()
            group.remove()
            for stage in Path(STAGE_DIR).glob(f"{entry.name}-*"):  # empty once its mount namespace is gone
                try:
                    stage.rmdir()
                except OSError:
                    pass
    return found


def _sweep_uids() -> int:
    found = 0
    for root in Path(uids.STAGE_ROOT).glob(f"{uids.STAGE_PREFIX}*"):
        record = uids.record(root)
        if record is None:
            continue
        fields, uid = record
        if uid not in uids.UID_RANGE or not grader.gone(fields):
            continue  # not a jail's uid; or its grader is alive, or of another pid namespace
        found += bool(uids.uid_processes(uid))
        uids.Stage(uid, root).remove()
    return found


def _sweep_temp_folders() -> None:
    for d in Path(STAGE_DIR).glob(f"{TEMP_PREFIX}*"):
        if ours(d) and _dead_grader(d.name, TEMP_PREFIX):  # not one a jail without namespaces made in /tmp
            shutil.rmtree(d, ignore_errors=True)


def kill_orphans() -> int:
    """Kill the children of graders that died without cleaning up and remove what they held; returns how many
    jails still had processes. (The parent-death signal covers a grader's death except in a child's first
    milliseconds, and nothing removes a dead grader's cgroups or folders.) Order: cgroups, then the staging
    folders under them, then uids, then temporary folders."""
    found = _sweep_cgroups() + _sweep_uids()
    _sweep_temp_folders()
    return found
