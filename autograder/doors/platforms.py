"""What the Gradescope and PrairieLearn doors share: the one notebook a submission folder holds, graded by
`course grade`'s own steps (autograder.steps.pipeline.COURSE_GRADE, jailed), and which jail ran.

A platform's assignment is one lab: the notebook named as the lab is graded, or the only notebook there is
(renamed: graded as the lab, which identify then recognises or refuses by its cells). Several notebooks none of
which is named as the lab, an empty folder, a link or special file: nothing is graded, and `Picked.why` says
why. Nothing here raises for a submission; a failure of the grader itself (no jail on this machine, the
agent could not start) is `Outcome.grader_failed`, since no student may be scored for it.
"""
from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from autograder.course_manifest import LabSpec, manifest
from autograder.jail.limits import Limits
from autograder.steps.results import SubmissionResult
from autograder.steps.submission import Submission, read_submission
from autograder.untrusted import name as shown_name, plain

# What the doors pass (autograder.jail.limits.Limits): sized to the platforms' machines from bench/platform-fit.json
# (docs/platforms.md says which settings to choose there).
PLATFORM_LIMITS = Limits(wall_s=540, memory_mb=2048)
PL_TIMEOUT_S = 600            # the PrairieLearn question's externalGradingOptions.timeout (at most 600)
MAX_FILES = 200   # a submission folder is a notebook or two; past this it is not read further


@dataclass(frozen=True)
class Picked:
    submission: Submission | None          # what is graded, named as the lab's notebook
    why: str | None = None                 # why nothing is graded
    notes: tuple[str, ...] = ()            # what else was there, renamed, ignored


def _files(folder: Path) -> tuple[list[Path], list[str]]:
    """Regular files under `folder`, and the names of links and special files (never followed or opened)."""
    found: list[Path] = []
    refused: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in sorted(dirnames) + sorted(filenames):
            p = Path(dirpath) / name
            mode = os.lstat(p).st_mode
            if stat.S_ISREG(mode):
                found.append(p)
            elif not stat.S_ISDIR(mode):
                refused.append(str(p.relative_to(folder)))
            if len(found) + len(refused) >= MAX_FILES:
                return found, refused
    return found, refused


def pick(folder: Path, lab: LabSpec) -> Picked:
    """The notebook in `folder` to grade as `lab`, or why there is none."""
    want = Path(lab.notebook).name
    if not folder.is_dir():
        return Picked(None, f"no submission folder ({folder.name} is missing)")
    files, refused = _files(folder)
    notes = tuple(f"not opened (a link or special file): {shown_name(r)}" for r in refused)
    notebooks = [p for p in files if p.suffix == ".ipynb" and ".ipynb_checkpoints" not in p.parts]
    named = [p for p in notebooks if p.name == want]
    if len(named) > 1:
        return Picked(None, f"{len(named)} files named {want}: submit one", notes)
    if named:
        chosen = named[0]
    elif len(notebooks) == 1:
        chosen = notebooks[0]
    elif not notebooks:
        others = ", ".join(shown_name(p.relative_to(folder)) for p in files[:5])
        return Picked(None, f"no notebook was submitted (expected {want}"
                      + (f"; found {others})" if others else "; the submission is empty)"), notes)
    else:
        listed = ", ".join(shown_name(p.relative_to(folder)) for p in notebooks[:5])
        return Picked(None, f"{len(notebooks)} notebooks ({listed}) and none named {want}: submit one", notes)
    label = shown_name(chosen.relative_to(folder))
    if chosen.name != want:
        notes += (f"graded as {want} (submitted as {label})",)
    notes += tuple(f"not graded: {shown_name(p.relative_to(folder))}" for p in notebooks if p != chosen)
    read = read_submission(chosen, label)
    return Picked(Submission(want, label, read.sha256, read.data, read.size, read.problem), None, notes)


@dataclass(frozen=True)
class Outcome:
    """One submission through a door: its result (course grade's record), the jail that ran, how long."""

    result: SubmissionResult
    seconds: float
    jail: dict[str, str]
    notes: tuple[str, ...] = ()
    ungradable: str | None = None          # why nothing was graded: no notebook, not a notebook, not this lab's
    grader_failed: str | None = None       # the grader itself could not grade (never the student's fault)


def jail_info() -> dict[str, str]:
    """Which jail student code runs in here, for the platforms' records (extra_data) and our own logs."""
    from autograder.jail.bwrap import jail_kind
    from autograder.jail.limits import sandbox_status

    return {"jail": jail_kind() or "none", "sandbox": sandbox_status()}


def grade_folder(folder: Path, lab_id: str, limits: Limits) -> Outcome:
    """`course grade`'s steps on the notebook `folder` holds, as `lab_id`; never raises."""
    from autograder.steps.pipeline import grade_submission, zero

    start = time.perf_counter()
    lab = manifest().lab(lab_id)
    try:
        jail = jail_info()
    except Exception as e:  # noqa: BLE001 - recorded, never a crash of the door
        jail = {"jail": "unknown", "sandbox": plain(f"{type(e).__name__}: {e}")}
    picked = pick(folder, lab)
    if picked.submission is None:
        why = picked.why or "nothing to grade"
        return Outcome(zero(lab, "submission", why), time.perf_counter() - start, jail, picked.notes, ungradable=why)
    try:
        graded = grade_submission(picked.submission, limits)
    except Exception as e:  # noqa: BLE001 - the grader's own failure: no one is scored for it
        why = plain(f"the grader could not run ({type(e).__name__}: {e})")
        return Outcome(zero(lab, picked.submission.label, "not graded: the autograder failed"),
                       time.perf_counter() - start, jail, picked.notes, grader_failed=why)
    # identify stopped it (not JSON, not this course's, none of the lab's cells): nothing ran
    ungradable = (graded.result.error or "it could not be graded") if graded.executed is None else None
    return Outcome(graded.result, time.perf_counter() - start, jail, picked.notes, ungradable=ungradable)


def write_json(path: Path, data: dict[str, object]) -> None:
    """Atomically: a reader sees the old file or the whole new one, never half of one."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def run(root: Path, folder: str, lab_id: str, results: Callable[[Outcome, str], dict[str, object]],
        failed: Callable[[str], dict[str, object]]) -> dict[str, object]:
    """A door's whole run: grade root/`folder` as `lab_id`, map the outcome with `results`, and write
    root/results/results.json whatever happens (`failed(why)` where the door itself failed); return it."""
    import traceback

    from autograder.jail.bwrap import AUTO, KIND_ENV

    # A platform's container holds this one submission: the jail without namespaces may serve where bubblewrap
    # cannot start (docs/grader.md, "Configurations"); an explicit COURSE_JAIL stands.
    os.environ.setdefault(KIND_ENV, AUTO)
    try:
        lab = manifest().lab(lab_id)
        data = results(grade_folder(root / folder, lab_id, PLATFORM_LIMITS), lab.code)
    except BaseException as e:  # noqa: BLE001 - results.json must exist whatever failed
        traceback.print_exc()
        data = failed(plain(f"{type(e).__name__}: {e}", 500))
    write_json(root / "results" / "results.json", data)
    return data


def main(argv: list[str] | None, *, doc: str, root_env: str, default_root: str, folder: str,
         results: Callable[[Outcome, str], dict[str, object]], failed: Callable[[str], dict[str, object]],
         shown: tuple[str, ...]) -> int:
    """`python -m autograder.doors.<door> --lab LAB`: run() in the root `root_env` names (default
    `default_root`); prints the fields `shown` for the platform's log."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--lab", required=True, help="the course.yml lab id this assignment or question grades")
    args = parser.parse_args(argv)
    data = run(Path(os.environ.get(root_env) or default_root), folder, args.lab, results, failed)
    print(json.dumps({k: data.get(k) for k in shown}))
    return 0
