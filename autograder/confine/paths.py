"""What a uid with only "other" bits on a file (uid 65534, or a jail's own uid) may reach, read or change.

One walk for both jails: bubblewrap's asks which bind sources it must re-bind where uid 65534 can reach them; the
jail without namespaces asks which of the grader's files its uid could read. A path is reached through every
folder above it as written and, where a symbolic link leads elsewhere, every folder above where it leads.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def _searchable_above(path: Path) -> bool:
    for parent in reversed(path.parents):
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def other_can_reach(path: str | Path) -> bool:
    """Whether a uid with no group on the files (only "other" bits) can walk down to `path`: each folder above it
    searchable, both on the path as written and on the one its links lead to."""
    written = Path(os.path.abspath(path))
    resolved = Path(os.path.realpath(path))
    return _searchable_above(written) and (resolved == written or _searchable_above(resolved))


def other_can_read(path: str | Path) -> bool:
    """Whether such a uid can read `path` (a file), or list or enter it (a folder, where a known name below it
    could then be opened). Symbolic links are judged where they lead."""
    if not other_can_reach(path):
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISDIR(mode):
        return bool(mode & (stat.S_IROTH | stat.S_IXOTH))
    return bool(mode & stat.S_IROTH)


def ours(path: Path | int) -> bool:
    """Whether `path` (or an open fd) was made by this grader's user and no one else can change it: owned by us,
    not a link, writable by neither group nor other. Anything a jail made fails this (it is another uid)."""
    try:
        st = os.fstat(path) if isinstance(path, int) else os.lstat(path)
    except OSError:
        return False
    return st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
