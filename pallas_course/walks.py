"""Guided walks: code read line by line, a note per step, and every line marked algorithm or schedule.

One store, two readers: the chapter site (WALK·matmul, WALK·softmax) and the notebooks (LAB·1.5 shows its
Tokamax reading from here: the lines and the notes, not the marks).

A *graded* walk (`graded: true`; LAB·1.5's reading) is one whose marks students write. This module and
walks.yml ship in the helpers package every student installs, so a graded walk carries no marks and no
ungraded lines here (`entries` refuses them), and its notes say what the code does, never which mark a line
takes. Its key is the grader's alone; the grader lays it over the walk (`autograder.labs.walk_key.with_key`) and
checks it against the current lines just as walks.yml's own marks are checked.

Where each part lives:

- the code: a notebook walk shows the `site:show` cells of a lab's model answers that define the named
  functions (kernel, one blank line, wrapper, numbered from 1, as the chapter prints them). This package never
  reads them: the course release writes them into its walks.yml once the lab is revealed (`lines`), or says
  when they go public (`withheld`); in the course repository, `course_tools.walks` reads them from the
  notebooks. The Tokamax walk takes the named functions' lines from the installed package with `inspect`,
  numbered as in the package's file;
- the notes, marks and steps are ours, in `pallas_course/walks.yml`, with `source_hash`: the hash of the
  code they were written for. When the code changes (someone edits the notebook, a new tokamax release),
  the lines follow at once and `Walk.stale` says that the notes and marks need a look; tests fail on it.
  A graded walk's marks are in its grader-side key, with the key's own `source_hash`.

The API (the site and the tests read it through course_tools.walks, which adds `root=`, the checkout)::

    from pallas_course.walks import walks, walk
    for w in walks():              # every walk, in the order of walks.yml
        w.id                       # "matmul", "softmax", "tokamax-lsce-forward"
        w.code, w.title            # "WALK·matmul", "tiled matmul: the reduction kernel and its pallas_call"
        w.source_path              # where the lines come from (the lab's notebook, or the path in the package)
        w.origin                   # one line: "LAB·1.2's model code (...)" / "tokamax 0.0.12, ..."
        w.first_line               # the number of lines[0]: 1 for notebooks, the file's line for tokamax
        w.lines                    # list[str], the code, verbatim
        w.numbered()               # [(line number, text), ...]
        w.steps                    # [Step(lines=[2, 3], note="..."), ...]; line numbers as printed
        w.graded                   # True for a reading students mark (LAB·1.5): then marks is {}
        w.marks                    # {line number: "algorithm" | "schedule" | "blank"}, every line; {} if graded
        w.ungraded                 # lines a grader does not count (closing brackets, lines either mark fits)
        w.stale                    # None, or why notes/marks may not fit the current code
        w.missing                  # None, or why there are no lines (tokamax not installed, no notebook)
        w.to_json()                # all of the above as a JSON-ready dict
    walk("WALK·matmul")            # one walk, by id or code; KeyError names the walks there are
    walks_json()                   # [w.to_json() for w in walks()]
    (autograder.labs.walk_key.with_key: the grader's, a graded walk with the marks of its key)

"blank" marks a line with no code: empty, a comment, or a docstring. Every other line is marked
"algorithm" (what is computed: the arithmetic, including how partial results combine and their starting
values) or "schedule" (which block a step sees, when a line runs, where data lives).

Maintainers: `python -m course_tools.walks [ID]` prints each walk numbered, with its marks, its steps and
the current source hash (paste it into walks.yml once the notes and marks fit the code again). A graded
walk prints without marks; `python -m autograder.labs.lab_1_5` prints LAB·1.5's reading with its key.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from pallas_course import pyparse


DATA_PATH = Path(__file__).with_name("walks.yml")
Mark = Literal["algorithm", "schedule", "blank"]
MARKS: tuple[str, ...] = ("algorithm", "schedule")

# A line that only closes brackets (and may carry a comment) says nothing of its own.
_CLOSING_ONLY = re.compile(r"[)\]}\s,:]*(#.*)?")


class WalkDataError(ValueError):
    """walks.yml is missing a field, or its marks and steps don't fit the lines they name."""


@dataclass(frozen=True)
class Step:
    lines: list[int]
    note: str


@dataclass(frozen=True)
class Walk:
    id: str
    code: str
    title: str
    source_path: str
    origin: str
    first_line: int
    lines: list[str]
    steps: list[Step]
    marks: dict[int, Mark]
    ungraded: frozenset[int] = frozenset()
    source_hash: str | None = None  # of the current lines; None when they could not be read
    key_hash: str = ""  # of the lines the notes and marks were written for
    stale: str | None = None
    missing: str | None = None
    graded: bool = False  # students write the marks: none here (see the module docstring)

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1

    def numbered(self) -> list[tuple[int, str]]:
        return [(self.first_line + i, text) for i, text in enumerate(self.lines)]

    def text(self, line: int) -> str:
        return self.lines[line - self.first_line]

    def code_lines(self) -> list[int]:
        """Lines that carry code (each is marked algorithm or schedule, where the walk has marks)."""
        return code_line_numbers(self.lines, self.first_line) if self.lines else []

    def graded_lines(self) -> list[int]:
        """Code lines a grader counts: every code line but the ungraded ones."""
        return [n for n in self.code_lines() if n not in self.ungraded]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "code": self.code,
            "title": self.title,
            "source_path": self.source_path,
            "origin": self.origin,
            "first_line": self.first_line,
            "lines": list(self.lines),
            "steps": [{"lines": list(s.lines), "note": s.note} for s in self.steps],
            "marks": {str(n): m for n, m in sorted(self.marks.items())},
            "ungraded": sorted(self.ungraded),
            "source_hash": self.source_hash,
            "key_hash": self.key_hash,
            "stale": self.stale,
            "missing": self.missing,
            "graded": self.graded,
        }


# ---------------------------------------------------------------------------------------------- line ranges


def parse_ranges(spec: str | int | list | None) -> list[int]:
    """ "1, 5-6, 12" -> [1, 5, 6, 12]. Also takes one int or a list of ints / such strings."""
    if spec is None:
        return []
    if isinstance(spec, int):
        return [spec]
    if isinstance(spec, list):
        return [n for part in spec for n in parse_ranges(part)]
    out: list[int] = []
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)|(\d+)", part)
        if not m:
            raise WalkDataError(f"line range {part!r} in {spec!r}: expected N or N-M")
        lo, hi = (int(m[1]), int(m[2])) if m[1] else (int(m[3]), int(m[3]))
        if hi < lo:
            raise WalkDataError(f"line range {part!r}: the end comes before the start")
        out += range(lo, hi + 1)
    return out


def format_ranges(lines: list[int] | set[int] | frozenset[int]) -> str:
    """[1, 5, 6, 12] -> "1, 5-6, 12"."""
    nums = sorted(set(lines))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


# -------------------------------------------------------------------------------------- reading the code


def source_hash(first_line: int, lines: list[str]) -> str:
    """What the notes and marks are keyed to: the text and where it starts (16 hex digits of sha256)."""
    return hashlib.sha256(f"{first_line}\n{chr(10).join(lines)}".encode()).hexdigest()[:16]


def code_line_numbers(lines: list[str], first_line: int = 1) -> list[int]:
    """Numbers of the lines that carry code: not empty, not only a comment, not part of a docstring."""
    docstring: set[int] = set()
    try:
        tree = pyparse.parse("\n".join(lines))
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module))
                and body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                docstring |= set(range(body[0].lineno, body[0].end_lineno + 1))
    return [
        first_line + i
        for i, text in enumerate(lines)
        if text.strip() and not text.strip().startswith("#") and (i + 1) not in docstring
    ]


def closing_only(text: str) -> bool:
    return _CLOSING_ONLY.fullmatch(text.strip()) is not None


def installed_version(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        from pallas_course import vendored

        return vendored.version(package)  # the release ships the files a reading needs (vendored)


def package_lines(module_name: str, functions: list[str]) -> tuple[int, list[str], str]:
    """(first line, lines, file path in the package) spanning `functions` in the installed module.

    Read with `inspect` from what is installed: the span runs from the first function's first decorator to
    the last function's last line, numbered as in the module's file.
    """
    from pallas_course import vendored

    module = vendored.import_module(module_name)
    file_lines = inspect.getsource(module).split("\n")
    spans = []
    for name in functions:
        fn = inspect.unwrap(getattr(module, name))
        lines, start = inspect.getsourcelines(fn)
        spans.append((start, start + len(lines) - 1))
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    top = module_name.split(".")[0]
    path = inspect.getsourcefile(module) or module_name
    rel = path[path.rfind(f"/{top}/") + 1 :] if f"/{top}/" in path else path
    return first, file_lines[first - 1 : last], rel


# ------------------------------------------------------------------------------------------ the walk data


@functools.cache
def entries(path: Path = DATA_PATH) -> list[dict[str, Any]]:
    """walks.yml's entries, checked: every field there, and no marks on a graded walk."""
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise WalkDataError(
            f"{path}: not found; the walk data lives next to pallas_course/walks.py (an install "
            "from a wheel needs walks.yml in pyproject's package-data)"
        ) from None
    walks_raw = (raw or {}).get("walks")
    if not isinstance(walks_raw, list):
        raise WalkDataError(f"{path}: expected a top-level `walks:` list")
    for i, w in enumerate(walks_raw):
        graded = w.get("graded", False) is True
        needed = ("id", "code", "title", "source", "source_hash", "steps") + (() if graded else ("marks",))
        missing = [k for k in needed if k not in w]
        if missing:
            raise WalkDataError(f"{path}: walks.{i} ({w.get('id', '?')}) lacks {', '.join(missing)}")
        leaked = [k for k in ("marks", "ungraded") if k in w] if graded else []
        if leaked:
            raise WalkDataError(
                f"{path}: walks.{i} ({w['id']}) is graded (students write its marks) but has "
                f"{' and '.join(leaked)}: this file ships to students, so a graded walk's key "
                "lives grader-side only"
            )
    return walks_raw


def _read_code(source: dict[str, Any]) -> tuple[int, list[str], str, str]:
    """(first line, lines, source path, origin) of a walk's code; raises LookupError when it can't be read."""
    # A notebook walk's code is written in (`lines`), or when it goes public is (`withheld`): by the course
    # release for students, by course_tools.walks in the course repository.
    if "withheld" in source:
        raise LookupError(str(source["withheld"]))
    if "lines" in source:
        return 1, [str(line) for line in source["lines"]], source["notebook"], str(source["origin"])
    if "notebook" in source:
        raise LookupError(
            f"{source['notebook']}: this walk's code comes with the course release "
            "(in the course repository: course_tools.walks)"
        )
    package = source["package"]
    version = installed_version(package)
    if version is None:
        raise LookupError(
            f"{package} is not installed; this walk reads {package}=={source['pin']} "
            f"(pip install {package}=={source['pin']}, pinned in requirements.txt)"
        )
    first, lines, rel = package_lines(source["module"], list(source["functions"]))
    return first, lines, rel, f"{package} {version}, {rel} lines {first}-{first + len(lines) - 1}"


def marks_on(
    first: int, lines: list[str], marks_raw: dict[str, Any], ungraded_raw: Any
) -> tuple[dict[int, Mark], frozenset[int], list[str]]:
    """(marks for every line, ungraded lines, problems) of `marks_raw` ({"algorithm": "1-3, 7", ...}) on `lines`."""
    code = set(code_line_numbers(lines, first))
    marks: dict[int, Mark] = {first + i: "blank" for i in range(len(lines))}
    problems: list[str] = []
    for mark in MARKS:
        for n in parse_ranges((marks_raw or {}).get(mark)):
            if n not in marks:
                problems.append(f"line {n} is marked {mark} but the code has lines {first}-{first + len(lines) - 1}")
            elif marks[n] != "blank":
                problems.append(f"line {n} is marked both {marks[n]} and {mark}")
            elif n not in code:
                problems.append(f"line {n} is marked {mark} but has no code: {lines[n - first].strip()!r}")
            else:
                marks[n] = mark  # type: ignore[assignment]
    unmarked = sorted(n for n in code if marks[n] == "blank")
    if unmarked:
        problems.append(f"code lines without a mark: {format_ranges(unmarked)}")
    ungraded = frozenset(parse_ranges(ungraded_raw)) | {n for n in code if closing_only(lines[n - first])}
    return marks, ungraded, problems


def build(raw: dict[str, Any]) -> Walk:
    """The walk of one walks.yml entry, with its code read now."""
    source = raw["source"]
    steps = [Step(parse_ranges(s["lines"]), " ".join(str(s["note"]).split())) for s in raw["steps"]]
    stored = str(raw["source_hash"])
    graded = raw.get("graded", False) is True
    common = dict(id=raw["id"], code=raw["code"], title=raw["title"], steps=steps, key_hash=stored, graded=graded)
    try:
        first, lines, rel, origin = _read_code(source)
    except LookupError as e:
        where = source.get("notebook") or f"{source['package']}: {source['module']}"
        return Walk(
            source_path=where,
            origin=where,
            first_line=int(raw.get("first_line", 1)),
            lines=[],
            marks={},
            missing=str(e),
            **common,
        )
    current = source_hash(first, lines)
    if graded:  # students write the marks; the key is the grader's (autograder.labs.walk_key)
        marks: dict[int, Mark] = {}
        ungraded: frozenset[int] = frozenset()
        problems: list[str] = []
    else:
        marks, ungraded, problems = marks_on(first, lines, raw["marks"], raw.get("ungraded"))
    numbered = set(range(first, first + len(lines)))
    for i, s in enumerate(steps, 1):
        outside = [n for n in s.lines if n not in numbered]
        if outside or not s.lines:
            problems.append(f"step {i} names lines outside the code: {format_ranges(outside) or 'none at all'}")
    what = "these notes" if graded else "these notes and marks"
    stale = None
    if current != stored:
        stale = (
            f"the code changed since {what} were written (source hash {current}, "
            f"written for {stored}); check them against the new lines, then update {DATA_PATH.name}"
        )
        if "package" in source:
            stale = (
                f"the notes are stale for {source['package']} {installed_version(source['package'])} "
                f"(source hash {current}): they were written for {source['package']}=={source['pin']} "
                f"(source hash {stored}); install {source['package']}=={source['pin']} or update "
                f"{DATA_PATH.name}"
            )
    elif problems:
        stale = (
            "the steps don't fit the code: " if graded else "the marks and steps don't fit the code: "
        ) + "; ".join(problems)
    return Walk(
        source_path=rel,
        origin=origin,
        first_line=first,
        lines=lines,
        marks=marks,
        ungraded=ungraded,
        source_hash=current,
        stale=stale,
        **common,
    )


def walks(*, data: Path | str = DATA_PATH) -> list[Walk]:
    """Every walk in walks.yml, with its code read now (packages as installed)."""
    return [build(raw) for raw in entries(Path(data))]


def find(key: str, raws: list[dict[str, Any]]) -> dict[str, Any]:
    """The entry of `raws` whose id ("matmul") or code ("WALK·matmul") is `key`; KeyError names the walks."""
    for raw in raws:
        if key in (raw["id"], raw["code"]):
            return raw
    names = ", ".join(f"{r['id']} ({r['code']})" for r in raws)
    raise KeyError(f"no walk {key!r}; the walks are {names}")


def walk(key: str, *, data: Path | str = DATA_PATH) -> Walk:
    """One walk by id ("matmul") or code ("WALK·matmul")."""
    return build(find(key, entries(Path(data))))


def walks_json(**kwargs: Any) -> list[dict[str, Any]]:
    return [w.to_json() for w in walks(**kwargs)]


def render(w: Walk, *, steps: bool = True) -> str:
    """A walk as text: numbered lines with a margin mark (A, S; '-' when ungraded), then its steps."""
    written = "notes written for" if w.graded and not w.marks else "notes and marks written for"
    head = f"{w.code} · {w.title}\n{w.origin}\nsource hash {w.source_hash} ({written} {w.key_hash})"
    if w.missing:
        return f"{head}\nmissing: {w.missing}"
    width = len(str(w.last_line))
    body = []
    for n, text in w.numbered():
        m = {"algorithm": "A", "schedule": "S"}.get(w.marks.get(n, "blank"), " ")
        body.append(f"{n:>{width}} {m}{'-' if n in w.ungraded and m != ' ' else ' '}│ {text}")
    notes = (
        [f"{i:02d}/{len(w.steps):02d} lines {format_ranges(s.lines)}: {s.note}" for i, s in enumerate(w.steps, 1)]
        if steps
        else []
    )
    tail = [f"STALE: {w.stale}"] if w.stale else []
    return "\n".join([head, *body, *([""] if notes else []), *notes, *tail])
