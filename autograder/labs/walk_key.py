"""A graded walk's key, the grader's: LAB·1.5's marks (autograder/keys/) laid over the walk's current lines and
checked against them as walks.yml's own marks are (pallas_course.walks.marks_on). Students get the walk's
lines and notes from the wheel, never this."""

from __future__ import annotations

import dataclasses
from typing import Any

from pallas_course import walks
from pallas_course.walks import Walk, WalkDataError, marks_on


def with_key(w: Walk, key: dict[str, Any], *, where: str = "the key") -> Walk:
    """The graded walk `w` with the marks and ungraded lines of a grader-side key.

    `key` holds `source_hash` (of the lines the marks were written for), `marks` ({"algorithm": ranges,
    "schedule": ranges}), optionally `ungraded` (ranges) and `written_for` ({package, version}). The result's
    `stale` says why the key may not be used: the lines changed since it was written ("the key is stale for
    tokamax X (source hash ...)"), or its marks don't fit the lines. `where` names the key in messages.
    """
    missing = [k for k in ("source_hash", "marks") if k not in (key or {})]
    if missing:
        raise WalkDataError(f"{where}: lacks {', '.join(missing)}")
    stored = str(key["source_hash"])
    if w.missing:
        return dataclasses.replace(w, key_hash=stored)
    marks, ungraded, problems = marks_on(w.first_line, w.lines, key["marks"], key.get("ungraded"))
    stale = None
    if w.source_hash != stored:
        written = key.get("written_for") or {}
        package, version = written.get("package"), written.get("version")
        if package:
            stale = (
                f"the key is stale for {package} {walks.installed_version(package)} (source hash {w.source_hash}): "
                f"the marks were written for {package}=={version} (source hash {stored}); "
                f"install {package}=={version} or re-key the reading ({where})"
            )
        else:
            stale = (
                f"the key is stale: the code changed since its marks were written (source hash "
                f"{w.source_hash}, written for {stored}); re-key the reading ({where})"
            )
    elif problems:
        stale = f"the key's marks don't fit the code ({where}): " + "; ".join(problems)
    return dataclasses.replace(w, marks=marks, ungraded=ungraded, key_hash=stored, stale=stale)
