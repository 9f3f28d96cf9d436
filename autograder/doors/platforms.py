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

from autograder.course_manifest import REPO_ROOT, LabSpec, manifest
from autograder.jail.limits import Limits
from autograder.steps.results import SubmissionResult, WrittenResult
from autograder.steps.submission import Submission, read_submission
from autograder.untrusted import name as shown_name, plain

# What the doors pass (autograder.jail.limits.Limits): sized to the platforms' machines from bench/platform-fit.json
# (docs/platforms.md says which settings to choose there).
PLATFORM_LIMITS = Limits(wall_s=540, memory_mb=2048)
PL_TIMEOUT_S = 600  # the PrairieLearn question's externalGradingOptions.timeout (at most 600)
MAX_FILES = 200  # a submission folder is a notebook or two; past this it is not read further


# What grading one lab needs of the container, measured from a cold cache (compat/fresh_root.sh; its record says
# where and when): below it, every result says so (fit()).
NEEDS = REPO_ROOT / "bench" / "platform-needs.json"
MIN_CPUS = 0.5  # Gradescope's default share, at which every lab graded within the wall limit


@dataclass(frozen=True)
class Machine:
    """What the container gives this grader: the smallest memory limit among its cgroups (v2 memory.max, v1
    memory.limit_in_bytes; the process's group and those above it) and the machine's memory; the CPUs it may
    run on (affinity) and its CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us)."""

    memory_mb: int
    cpus: float
    memory_from: str


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _groups(root: Path) -> list[tuple[Path, str, str]]:
    """(folder, memory file, cpu file) of each cgroup this process is in and each above it, v1 and v2."""
    found: list[tuple[Path, str, str]] = []
    for line in (_read(root / "proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, rel = parts[1].split(","), parts[2].lstrip("/")
        if parts[1] == "":
            mounts = [(root / "sys/fs/cgroup", "memory.max", "cpu.max")]
        else:
            mounts = [(root / "sys/fs/cgroup/memory", "memory.limit_in_bytes", "")] if "memory" in controllers else []
            if "cpu" in controllers:  # Docker mounts cpu,cpuacct with a `cpu` link to it
                mounts.append((root / "sys/fs/cgroup/cpu", "", "cpu.cfs_quota_us"))
        for base, mem, cpu in mounts:
            here = base / rel
            # a container sees its own group at the mount's root, or its host path below it: walk up to the mount
            for folder in [here, *here.parents]:
                if folder == base or base in folder.parents:
                    found.append((folder, mem, cpu))
                if folder == base:
                    break
    return found


def machine(root: Path = Path("/")) -> Machine:
    """What this container gives (root: a stand-in tree of /proc and /sys, for tests)."""
    meminfo = _read(root / "proc/meminfo") or ""
    total = next((int(line.split()[1]) // 1024 for line in meminfo.splitlines() if line.startswith("MemTotal:")), 0)
    memory, source = total, "/proc/meminfo MemTotal"
    try:
        cpus = float(len(os.sched_getaffinity(0))) if root == Path("/") else float(os.cpu_count() or 1)
    except OSError:
        cpus = float(os.cpu_count() or 1)
    for folder, mem, cpu in _groups(root):
        value = _read(folder / mem) if mem else None
        if value and value.isdigit() and 0 < int(value) // 2**20 < (memory or 2**62):
            memory, source = int(value) // 2**20, f"cgroup {folder.relative_to(root)}/{mem}"
        if cpu == "cpu.max":
            quota, _, period = (_read(folder / cpu) or "max").partition(" ")
        elif cpu:
            quota, period = _read(folder / cpu) or "-1", _read(folder / "cpu.cfs_period_us") or ""
        else:
            continue
        if quota.lstrip("-").isdigit() and int(quota) > 0 and period.isdigit() and int(period) > 0:
            cpus = min(cpus, int(quota) / int(period))
    return Machine(memory, round(cpus, 2), source)


def needs(lab_id: str) -> dict[str, object] | None:
    """bench/platform-needs.json's entry for `lab_id` ({"memory_mb": ...}), None where it has none."""
    import json

    try:
        return json.loads(NEEDS.read_text())["labs"].get(lab_id)
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def fit(lab: LabSpec, have: Machine) -> str | None:
    """None where the container fits grading `lab`; else the line every result carries: both sizes, and whose it is."""
    need = needs(lab.id)
    short = []
    if need and have.memory_mb < int(need["memory_mb"]):  # type: ignore[call-overload]
        short.append(f"{have.memory_mb} MB of memory, and grading {lab.code} needs {need['memory_mb']} MB")
    if have.cpus < MIN_CPUS:
        short.append(f"{have.cpus:g} CPU, below the {MIN_CPUS:g} grading needs within its time limit")
    if not short:
        return None
    return (
        "The autograder's configuration, not your notebook: its container has "
        + "; ".join(short)
        + ". Tests lost to memory or time may be lost for that reason alone: tell your instructor, who can "
        "raise it (Gradescope: Autograder Settings; PrairieLearn: the grader's memory)."
    )


def _not_the_kernel(result: SubmissionResult, small: str) -> SubmissionResult:
    """Where the container is too small, a test lost to memory or a stop names the container, not the kernel."""
    blame = ("memory", "died", "killed", "SIGKILL", "SIGABRT", "wall-clock", "did not finish")
    suffix = " (this container is smaller than grading needs: see the note above; maybe not your kernel's fault)"

    def note(text: str) -> str:
        return text + suffix if any(b in text for b in blame) else text

    tests = [t if t.passed else t.model_copy(update={"message": note(t.message)}) for t in result.tests]
    return result.model_copy(update={"tests": tests, "error": note(result.error) if result.error else None})


@dataclass(frozen=True)
class Picked:
    submission: Submission | None  # what is graded, named as the lab's notebook
    why: str | None = None  # why nothing is graded
    notes: tuple[str, ...] = ()  # what else was there, renamed, ignored


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
        return Picked(
            None,
            f"no notebook was submitted (expected {want}"
            + (f"; found {others})" if others else "; the submission is empty)"),
            notes,
        )
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
    ungradable: str | None = None  # why nothing was graded: no notebook, not a notebook, not this lab's
    grader_failed: str | None = None  # the grader itself could not grade (never the student's fault)
    small: str | None = None  # the container is below what grading this lab needs (fit())
    machine: Machine | None = None
    answers: dict[str, str] | None = None  # the written answers' text, for the TA (written_answers())


def jail_info() -> dict[str, str]:
    """Which jail student code runs in here, for the platforms' records (extra_data) and our own logs."""
    from autograder.jail.jails import jail_kind
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
    try:
        have: Machine | None = machine()
        small = fit(lab, have) if have else None
    except Exception:  # noqa: BLE001 - an unreadable /proc or /sys: grade without the check
        have, small = None, None
    picked = pick(folder, lab)
    if picked.submission is None:
        why = picked.why or "nothing to grade"
        return Outcome(
            zero(lab, "submission", why),
            time.perf_counter() - start,
            jail,
            picked.notes,
            ungradable=why,
            small=small,
            machine=have,
        )
    try:
        graded = grade_submission(picked.submission, limits)
    except Exception as e:  # noqa: BLE001 - the grader's own failure: no one is scored for it
        why = plain(f"the grader could not run ({type(e).__name__}: {e})")
        return Outcome(
            zero(lab, picked.submission.label, "not graded: the autograder failed"),
            time.perf_counter() - start,
            jail,
            picked.notes,
            grader_failed=why,
            small=small,
            machine=have,
        )
    # identify stopped it (not JSON, not this course's, none of the lab's cells): nothing ran
    ungradable = (graded.result.error or "it could not be graded") if graded.executed is None else None
    result = _not_the_kernel(graded.result, small) if small else graded.result
    return Outcome(
        result,
        time.perf_counter() - start,
        jail,
        picked.notes,
        ungradable=ungradable,
        small=small,
        machine=have,
        answers=written_answers(picked.submission, lab) if ungradable is None else None,
    )


def written_answers(submission: Submission, lab: LabSpec) -> dict[str, str]:
    """{written answer's id: the student's text} from the submitted notebook, for the TA who grades it by hand
    (plain text, capped: autograder.untrusted.plain); {} where it cannot be read."""
    import json

    from autograder.cells import grade_id

    try:
        nb = json.loads(submission.data)
        by_id = {grade_id(c): c for c in nb.get("cells", []) if isinstance(c, dict) and grade_id(c)}
    except Exception:  # noqa: BLE001 - an unreadable notebook has no answers to show
        return {}
    out = {}
    for spec in lab.written:
        source = by_id.get(spec.id, {}).get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        out[spec.id] = plain(text.strip(), 4000)
    return out


def written_lines(written: list[WrittenResult], answers: dict[str, str] | None) -> list[str]:
    """Each written answer as the TA reads it in the results: its status (awaiting manual grading: never shown
    as passed), then the student's text, indented."""
    lines = []
    for w in written:
        lines.append(f"- {w.name} ({w.max_points:g} point{'' if w.max_points == 1 else 's'}): {w.status}")
        text = (answers or {}).get(w.name, "")
        if text and not w.status.startswith("not answered"):
            lines += [f"    | {line}" for line in text.splitlines()]
    return lines


def machine_data(outcome: Outcome) -> dict[str, object]:
    """extra_data's record of the container (both doors): its memory and CPUs, and whether it fits."""
    if outcome.machine is None:
        return {}
    m = outcome.machine
    return {
        "container": {
            "memory_mb": m.memory_mb,
            "cpus": m.cpus,
            "memory_from": m.memory_from,
            "fits": outcome.small is None,
        }
    }


def write_json(path: Path, data: dict[str, object]) -> None:
    """Atomically: a reader sees the old file or the whole new one, never half of one."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def run(
    root: Path,
    folder: str,
    lab_id: str,
    results: Callable[[Outcome, str], dict[str, object]],
    failed: Callable[[str], dict[str, object]],
) -> dict[str, object]:
    """A door's whole run: grade root/`folder` as `lab_id`, map the outcome with `results`, and write
    root/results/results.json whatever happens (`failed(why)` where the door itself failed); return it."""
    import traceback

    from autograder.jail.jails import AUTO, KIND_ENV

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


def main(
    argv: list[str] | None,
    *,
    doc: str,
    root_env: str,
    default_root: str,
    folder: str,
    results: Callable[[Outcome, str], dict[str, object]],
    failed: Callable[[str], dict[str, object]],
    shown: tuple[str, ...],
) -> int:
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
