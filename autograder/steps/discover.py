"""Which files of a submissions folder are graded, and why the others are not.

`find_submissions(paths)` walks the folders given (nbgrader's `submitted/<student>/<assignment>/` or any
other layout) without following a link and returns a `Discovery`:
- `notebooks`: what to grade. Where a folder holds a notebook named as a lab (`lab-1.1-first-kernels.ipynb`),
  that file is the student's submission for the lab, and every other notebook in that folder and below it is
  ignored, with a reason: one result per (student, lab), as nbgrader grades only the notebook it released.
  A folder with no such file keeps its notebooks (a renamed lab is recognised by its cells).
  In nbgrader's layout (the folder given holds `<student>/<assignment>/<notebook>.ipynb`), that place is the
  only one a submission can have (`nbgrader_place`): a notebook deeper in a student's folder, whatever its
  folders are called (`aaron/stage-1/bob/stage-1/lab-1.1-first-kernels.ipynb`), is that student's extra
  file, ignored with a reason, never graded or exported as anyone else's.
- `skipped`: what is not graded and why: `refused` for symbolic links (never followed: one could point at
  solutions/ or another student's work), fifos, sockets and devices (reading one could block the batch),
  folders that cannot be listed, names that show the same as another's; not refused for ignored notebooks.
- `timestamps`: `timestamp.txt` beside each graded notebook, validated as nbgrader reads it
  (`nbgrader.utils.parse_utc`); one that is not a date is a problem of that submission, not of the batch.

Paths the instructor names on the command line are followed (a `submitted/` that is a link to another disk is
fine); only what is inside is held to these rules. Names are shown through `autograder.untrusted.name`: a byte
that is not UTF-8 shows as U+FFFD, and such a notebook is still found and graded.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from autograder import untrusted

SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", ".git"}
TIMESTAMP_FILE = "timestamp.txt"
MAX_TIMESTAMP_BYTES = 100  # "2026-11-29 10:00:00.000000 UTC" is 30


class SubmissionNotFound(FileNotFoundError):
    """A path given to the grader does not exist or holds no notebooks."""


@dataclass(frozen=True)
class Skipped:
    path: Path
    label: str  # as shown: relative to the folder given
    reason: str
    refused: bool  # True: a link, a special file, an unreadable folder; False: an extra notebook


@dataclass(frozen=True)
class Stamp:
    value: str | None  # as nbgrader stores it ("2026-11-29 10:00:00.000000 UTC"), None if absent or invalid
    problem: str | None = None


@dataclass
class Discovery:
    root: Path | None  # the one folder given, labels are relative to it
    notebooks: list[Path] = field(default_factory=list)
    labels: dict[Path, str] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    timestamps: dict[Path, Stamp] = field(default_factory=dict)

    def label(self, path: Path) -> str:
        return self.labels.get(path) or untrusted.relative_name(path, self.root)


def lab_file_names() -> dict[str, str]:
    from autograder.course_manifest import manifest

    return {Path(lab.notebook).name: lab.id for lab in manifest().labs}


def nbgrader_place(label: str) -> tuple[str, str] | None:
    """(student, notebook file name) when `label`, relative to the folder given, is nbgrader's
    `<student>/<assignment>/<notebook>.ipynb`; None otherwise. The one mapping from files to students: counted
    from the top, so folders inside a student's folder never name a student."""
    from autograder.course_manifest import manifest

    parts = Path(label).parts
    if (
        len(parts) == 3
        and parts[1] == manifest().stage.id
        and parts[2].endswith(".ipynb")
        and parts[0] not in ("/", ".", "..")
    ):
        return parts[0], parts[2]
    return None


def find_submissions(paths: Iterable[Path | str]) -> Discovery:
    """The notebooks under `paths` to grade, and the files not graded with why; raises SubmissionNotFound
    for a path that does not exist or a folder with nothing in it to grade or report."""
    given = [Path(p) for p in paths]
    root = given[0] if len(given) == 1 and given[0].is_dir() else None
    found = Discovery(root)
    notebooks: list[Path] = []
    for path in given:
        if path.is_dir():
            before = len(notebooks), len(found.skipped)
            _walk(path, root, notebooks, found)
            if (len(notebooks), len(found.skipped)) == before:
                raise SubmissionNotFound(f"{untrusted.name(path)}: no .ipynb files in this folder")
        elif path.is_file():
            notebooks.append(path)
        elif os.path.lexists(path):
            found.skipped.append(Skipped(path, untrusted.name(path), SPECIAL, refused=True))
        else:
            raise SubmissionNotFound(f"{untrusted.name(path)}: no such file or folder")
    _one_per_lab(notebooks, found)
    for path in found.notebooks:
        found.timestamps[path] = read_timestamp(path.parent)
    return found


SPECIAL = "not a regular file (a fifo, socket or device): not read"
LINK = "a symbolic link: never followed (it could point at solutions/ or at another student's work)"


def refusal(path: Path) -> str | None:
    """Why the file at `path` is refused without being read (LINK, SPECIAL, unreadable), or None: the rule
    `find_submissions` applies, for a door that is handed one path (nbgrader's)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as e:
        return f"could not be read ({e.strerror or e})"
    if stat.S_ISLNK(mode):
        return LINK
    return None if stat.S_ISREG(mode) else SPECIAL


def _walk(top: Path, root: Path | None, notebooks: list[Path], found: Discovery) -> None:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: os.fsencode(e.name))
        except OSError as e:
            found.skipped.append(
                Skipped(
                    folder,
                    untrusted.relative_name(folder, root),
                    f"could not list this folder ({e.strerror or e})",
                    refused=True,
                )
            )
            continue
        subfolders = []
        for entry in entries:
            path = Path(entry.path)
            try:
                if entry.is_symlink():
                    found.skipped.append(Skipped(path, untrusted.relative_name(path, root), LINK, refused=True))
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS:
                        subfolders.append(path)
                elif entry.is_file(follow_symlinks=False):
                    if entry.name.endswith(".ipynb"):
                        notebooks.append(path)
                else:
                    found.skipped.append(Skipped(path, untrusted.relative_name(path, root), SPECIAL, refused=True))
            except OSError as e:
                found.skipped.append(
                    Skipped(
                        path,
                        untrusted.relative_name(path, root),
                        f"could not be read ({e.strerror or e})",
                        refused=True,
                    )
                )
        stack.extend(reversed(subfolders))


def _one_per_lab(notebooks: list[Path], found: Discovery) -> None:
    """Grade the file named as the lab where a folder has one; ignore the other notebooks in and below it.
    Refuse a second notebook whose name shows the same as one already taken."""
    labs = lab_file_names()
    in_layout = found.root is not None and any(
        nbgrader_place(untrusted.relative_name(nb, found.root)) for nb in notebooks
    )
    lab_files: dict[Path, dict[str, Path]] = {}  # folder -> {lab file name: path}
    for nb in notebooks:
        if nb.name in labs and (not in_layout or nbgrader_place(untrusted.relative_name(nb, found.root))):
            lab_files.setdefault(nb.parent, {})[nb.name] = nb
    taken: dict[str, Path] = {}
    for nb in sorted(notebooks, key=lambda p: (len(p.parts), os.fsencode(p))):
        label = untrusted.relative_name(nb, found.root)
        why = _ignored_because(nb, labs, lab_files, found.root) or (_off_layout(label) if in_layout else None)
        if why:
            found.skipped.append(Skipped(nb, label, why, refused=False))
        elif label in taken:
            found.skipped.append(
                Skipped(
                    nb,
                    label,
                    f"its name shows the same as {label} (bytes that are not "
                    "UTF-8 or control characters in it): rename it to grade it",
                    refused=True,
                )
            )
        else:
            taken[label] = nb
            found.labels[nb] = label
    found.notebooks = sorted(taken.values(), key=os.fsencode)


def _ignored_because(
    nb: Path, labs: dict[str, str], lab_files: dict[Path, dict[str, Path]], root: Path | None
) -> str | None:
    folders = [nb.parent, *nb.parent.parents]
    for depth, folder in enumerate(folders):
        held = lab_files.get(folder)
        if not held:
            continue
        if nb.name not in labs or (depth > 0 and nb.name in held):
            lab_file = held.get(nb.name) or sorted(held.values())[0]
            return (
                f"not graded: {untrusted.relative_name(lab_file, root)} is the file named as the lab, and "
                "only that file of the student's folder is graded"
            )
    return None


def _off_layout(label: str) -> str | None:
    """Why a notebook outside nbgrader's `<student>/<assignment>/<notebook>.ipynb` is not graded, in a folder
    laid out that way (the student is the top folder, once: a folder named like a student deeper down is not)."""
    from autograder.course_manifest import manifest

    if nbgrader_place(label) is not None:
        return None
    parts, stage = Path(label).parts, manifest().stage.id
    if len(parts) == 1:
        return f"not graded: not in a student's folder (<student>/{stage}/<notebook>.ipynb)"
    return (
        f"not graded: an extra file in {untrusted.plain(parts[0], 100)}'s folder; a submission is "
        f"<student>/{stage}/<notebook>.ipynb and nothing deeper, so it is never graded as anyone's"
    )


def read_timestamp(folder: Path) -> Stamp:
    """`folder/timestamp.txt` as nbgrader stores it, or why it cannot be used (then the submission has no
    time: never late). Not a link, not a special file, at most MAX_TIMESTAMP_BYTES."""
    path = folder / TIMESTAMP_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return Stamp(None)
    except OSError as e:
        why = "a symbolic link" if e.errno == errno.ELOOP else (e.strerror or str(e))
        return Stamp(None, f"{TIMESTAMP_FILE} could not be read ({why}); the submission has no time")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return Stamp(None, f"{TIMESTAMP_FILE} is not a regular file; the submission has no time")
        data = os.read(fd, MAX_TIMESTAMP_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TIMESTAMP_BYTES:
        return Stamp(
            None, f"{TIMESTAMP_FILE} is longer than {MAX_TIMESTAMP_BYTES} bytes, not a date; the submission has no time"
        )
    return parse_timestamp(data)


def parse_timestamp(data: bytes | str) -> Stamp:
    """nbgrader's reading of a timestamp (`parse_utc`), normalised; anything it cannot read is a problem."""
    from nbgrader.utils import parse_utc

    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.strip()
    if not text:
        return Stamp(None)  # nbgrader: "Empty timestamp file", no time
    try:
        when = parse_utc(text)
        value = f"{when:%Y-%m-%d %H:%M:%S.%f} UTC"
        parse_utc(value)
    except Exception:  # noqa: BLE001 - dateutil raises ValueError, OverflowError, TypeError, ...
        shown = untrusted.plain(text, 60)
        return Stamp(
            None,
            f"{TIMESTAMP_FILE} is not a date nbgrader reads ({shown!r}); the submission has no "
            "time and is not marked late",
        )
    return Stamp(value)
