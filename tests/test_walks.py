"""The walk data (pallas_course/walks.py + walks.yml): code from its source, every line marked, notes that fit;
and the graded reading (LAB·1.5) ships with no key: its marks live grader-side only."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.course_manifest import REPO_ROOT
from course_tools import walks as R  # the walks as the repository reads them (notebook walks' code too)
from pallas_course import walks as W  # the wheel's

NOTEBOOK_WALKS = {
    "matmul": ("solutions/stage-1/lab-1.2-tiled-matmul.ipynb", ["matmul_kernel", "matmul"]),
    "softmax": ("solutions/stage-1/lab-1.3-fused-softmax-layernorm.ipynb", ["softmax_kernel", "softmax"]),
}
HAS_TOKAMAX = W.installed_version("tokamax") is not None
ALL = [w for w in R.walks() if not (w.id == "tokamax-lsce-forward" and not HAS_TOKAMAX)]
MARKED = [w for w in ALL if not w.graded]  # walks whose marks are in walks.yml (the chapter's)
READING = "tokamax-lsce-forward"
KEY_PATH = REPO_ROOT / "autograder" / "keys" / "tokamax_reading.yml"


def _cell_code(path: Path, name: str) -> str:
    """The shown cell defining `name`, as the site prints it (pallas_course.notebooks.shown_code)."""
    from pallas_course.notebooks import shown_sources

    for code in shown_sources(nbformat.read(path, as_version=4)):
        if code.startswith(f"def {name}("):
            return code.rstrip("\n")
    raise AssertionError(f"{path.name}: no site:show cell starts with def {name}(")


@pytest.mark.parametrize("w", ALL, ids=lambda w: w.id)
def test_walk_is_current(w: W.Walk) -> None:
    """Every walk reads its code and its notes and marks were written for that code."""
    assert w.missing is None, w.missing
    assert w.stale is None, f"{w.id}: {w.stale}\n(`python -m course_tools.walks {w.id}` shows the lines)"


@pytest.mark.parametrize("walk_id", NOTEBOOK_WALKS)
def test_notebook_walk_is_the_notebooks_own_code(walk_id: str) -> None:
    """The lines are the solution notebook's shown cells, kernel then wrapper, one blank line between."""
    notebook, (kernel, wrapper) = NOTEBOOK_WALKS[walk_id]
    path = REPO_ROOT / notebook
    w = R.walk(walk_id)
    assert w.source_path == notebook and w.first_line == 1
    assert "\n".join(w.lines) == _cell_code(path, kernel) + "\n\n" + _cell_code(path, wrapper)


def test_walks_follow_a_notebook_edit(tmp_path: Path) -> None:
    """Edit the notebook and the walk shows the edit at once, and says its notes and marks need a look."""
    notebook = NOTEBOOK_WALKS["matmul"][0]
    (tmp_path / notebook).parent.mkdir(parents=True)
    shutil.copy(REPO_ROOT / notebook, tmp_path / notebook)
    nb = nbformat.read(tmp_path / notebook, as_version=4)
    cell = next(c for c in nb.cells if "\ndef matmul(a, b" in "\n" + c.source)
    cell.source = cell.source.replace(
        "    m, k = a.shape\n", "    m, k = a.shape  # rows, depth\n    assert m % bm == 0\n"
    )
    nbformat.write(nb, tmp_path / notebook)

    before, after = R.walk("matmul"), R.walk("matmul", root=tmp_path)
    assert after.lines[9] == "    m, k = a.shape  # rows, depth"
    assert after.lines[10] == "    assert m % bm == 0"
    assert len(after.lines) == len(before.lines) + 1
    assert after.source_hash != before.source_hash
    assert after.stale and "the code changed since these notes and marks were written" in after.stale


def test_a_missing_notebook_is_reported_not_raised(tmp_path: Path) -> None:
    w = R.walk("softmax", root=tmp_path)
    assert w.lines == [] and "does not exist here" in (w.missing or "")


@pytest.mark.parametrize("walk_id", NOTEBOOK_WALKS)
def test_the_wheel_reads_no_notebook(walk_id: str) -> None:
    """The wheel's walks module never opens a solution notebook: unbaked, a notebook walk says where its code
    comes from; with the code written in (as the release and course_tools.walks do) it is the same walk."""
    w = W.walk(walk_id)
    assert w.lines == [] and "comes with the course release" in (w.missing or "")
    raw = R.with_code(W.find(walk_id, W.entries()), REPO_ROOT)
    assert "lines" in raw["source"] and W.build(raw) == R.walk(walk_id)


@pytest.mark.parametrize("w", MARKED, ids=lambda w: w.id)
def test_marks_cover_every_line(w: W.Walk) -> None:
    """Every non-blank line is algorithm or schedule; blank lines, comments and docstrings are blank."""
    numbers = [n for n, _ in w.numbered()]
    assert sorted(w.marks) == numbers
    code = set(W.code_line_numbers(w.lines, w.first_line))
    for n, text in w.numbered():
        if n in code:
            assert w.marks[n] in ("algorithm", "schedule"), f"{w.id} line {n} {text!r}: {w.marks[n]}"
        else:
            assert w.marks[n] == "blank", f"{w.id} line {n} {text!r} has no code but is marked {w.marks[n]}"
    assert {"algorithm", "schedule"} <= set(w.marks.values())


@pytest.mark.parametrize("w", ALL, ids=lambda w: w.id)
def test_steps_have_notes_and_lines_of_the_code(w: W.Walk) -> None:
    assert w.steps
    for i, step in enumerate(w.steps, 1):
        assert step.lines and all(w.first_line <= n <= w.last_line for n in step.lines), (w.id, i)
        assert len(step.note) > 80 and "  " not in step.note, (w.id, i)


@pytest.mark.parametrize("walk_id", NOTEBOOK_WALKS)
def test_seed_walks_have_seven_steps(walk_id: str) -> None:
    """The chapter shows WALK·matmul and WALK·softmax as 01/07 ... 07/07."""
    assert len(R.walk(walk_id).steps) == 7


def test_the_seed_marks_the_program_id_line_schedule() -> None:
    """The chapter's step-1 note: `k = pl.program_id(2)` is schedule."""
    w = R.walk("WALK·matmul")
    assert w.text(2).strip() == "k = pl.program_id(2)" and w.marks[2] == "schedule"
    assert w.marks[7] == "algorithm" and w.marks[8] == "blank"


def test_walk_by_id_or_code_and_unknown_names_the_walks() -> None:
    assert R.walk("WALK·softmax").id == "softmax"
    with pytest.raises(KeyError, match=r"no walk 'WALK·attention'; the walks are matmul \(WALK·matmul\)"):
        R.walk("WALK·attention")


@pytest.mark.parametrize("w", ALL, ids=lambda w: w.id)
def test_to_json_is_json(w: W.Walk) -> None:
    data = json.loads(json.dumps(w.to_json()))
    assert data["lines"] == w.lines and data["graded"] == w.graded
    if w.graded:
        assert data["marks"] == {} and data["ungraded"] == []
    else:
        assert len(data["marks"]) == len(w.lines)
        assert {int(k) for k in data["marks"]} == {n for n, _ in w.numbered()}
    assert data["steps"][0]["note"] == w.steps[0].note


def _write(tmp_path: Path, marks: dict, steps: list | None = None, **extra) -> Path:
    raw = {
        "walks": [
            {
                "id": "softmax",
                "code": "WALK·softmax",
                "title": "t",
                "source": {"notebook": NOTEBOOK_WALKS["softmax"][0], "functions": ["softmax_kernel", "softmax"]},
                "source_hash": R.walk("softmax").source_hash,
                "marks": marks,
                "steps": steps or [{"lines": "1", "note": "n"}],
                **extra,
            }
        ]
    }
    import yaml

    path = tmp_path / "walks.yml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return path


def test_marks_that_dont_fit_make_the_walk_stale(tmp_path: Path) -> None:
    """A mark on a line with no code, a line marked twice, unmarked code: each named in `stale`."""
    data = _write(
        tmp_path, {"algorithm": "1-6, 10, 14", "schedule": "5, 8-9, 11-13"}, steps=[{"lines": "1-40", "note": "n"}]
    )
    w = R.walk("softmax", data=data)
    assert "line 6 is marked algorithm but has no code" in w.stale
    assert "line 5 is marked both algorithm and schedule" in w.stale
    assert "code lines without a mark: 7, 15-17" in w.stale
    assert "step 1 names lines outside the code: 18-40" in w.stale


def test_walk_data_without_a_field_says_which(tmp_path: Path) -> None:
    path = tmp_path / "walks.yml"
    path.write_text("walks:\n  - {id: x, code: y, title: z, source: {}, marks: {}}\n")
    with pytest.raises(W.WalkDataError, match=r"walks\.0 \(x\) lacks source_hash, steps"):
        R.walks(data=path)


def test_ranges_round_trip() -> None:
    assert W.parse_ranges("1, 5-6, 12") == [1, 5, 6, 12]
    assert W.format_ranges([12, 1, 5, 6]) == "1, 5-6, 12"
    with pytest.raises(W.WalkDataError, match="expected N or N-M"):
        W.parse_ranges("3..5")


# ------------------------------------------------- the graded reading: the student-facing package has no key
# walks.yml and walks.py ship in the helpers package (pyproject package-data; Colab installs it) and LAB·1.5's
# notebook imports `walk`. So the reading's marks, and which lines are ungraded, live only grader-side
# (autograder/keys/tokamax_reading.yml); these tests need no tokamax.


def _key_needles() -> dict[str, list[str]]:
    """Text that would give the key away: each range list of the key, whole and as its first three ranges."""
    import yaml

    raw = yaml.safe_load(KEY_PATH.read_text())
    lists = {"algorithm": raw["marks"]["algorithm"], "schedule": raw["marks"]["schedule"], "ungraded": raw["ungraded"]}
    needles = {}
    for name, spec in lists.items():
        whole = W.format_ranges(W.parse_ranges(spec))
        needles[name] = [whole, ", ".join(whole.split(", ")[:3])]
    return needles


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_key_lives_grader_side() -> None:
    assert KEY_PATH.exists()
    import yaml

    raw = yaml.safe_load(KEY_PATH.read_text())
    assert raw["walk"] == READING and {"algorithm", "schedule"} <= set(raw["marks"]) and raw["ungraded"]
    assert not (KEY_PATH.parent / "__init__.py").exists(), "autograder/keys/ must not be a package (it would ship)"


def test_graded_reading_in_walks_yml_has_no_marks() -> None:
    """The reading is `graded: true` and has no marks or ungraded lines in the shipped walk data."""
    import yaml

    raw = yaml.safe_load(W.DATA_PATH.read_text())["walks"]
    reading = next(r for r in raw if r["id"] == READING)
    assert reading["graded"] is True
    assert "marks" not in reading and "ungraded" not in reading
    assert [r["id"] for r in raw if r.get("graded")] == [READING]


def test_graded_reading_walk_exposes_no_marks() -> None:
    """What `walk("WALK·tokamax")` gives a student: lines and notes, no marks, no ungraded lines
    (with or without tokamax installed)."""
    for key in ("WALK·tokamax", READING):
        w = W.walk(key)
        assert w.graded and w.marks == {} and w.ungraded == frozenset()
        assert w.to_json()["marks"] == {} and w.to_json()["ungraded"] == []
    assert all(not d["marks"] for d in W.walks_json() if d["graded"])


def test_graded_reading_notes_name_no_mark() -> None:
    """The step notes say what the code does, never which mark a line takes (the key's `rationale` does)."""
    w = W.walk(READING)
    for i, step in enumerate(w.steps, 1):
        assert not re.search(r"\b(algorithm|schedule)s?\b", step.note, re.I), (i, step.note)


def test_a_graded_walk_with_marks_is_refused(tmp_path: Path) -> None:
    """Putting a key back into walks.yml fails loudly: it would ship to every student."""
    path = _write(tmp_path, {"algorithm": "1-3", "schedule": "4-5"}, graded=True)
    with pytest.raises(W.WalkDataError, match=r"is graded \(students write its marks\) but has marks.*grader-side"):
        R.walks(data=path)
    path.write_text(path.read_text().replace("marks:", "ungraded: '1'\n  old_marks:"))
    with pytest.raises(W.WalkDataError, match=r"but has ungraded"):
        R.walks(data=path)


def test_a_graded_walk_needs_no_marks(tmp_path: Path) -> None:
    """Without marks, a graded walk reads its lines and fits its steps; a key laid over it checks as walks.yml would."""
    import yaml

    path = tmp_path / "walks.yml"
    raw = yaml.safe_load(_write(tmp_path, {}, graded=True).read_text())
    del raw["walks"][0]["marks"]
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    w = R.walk("softmax", data=path)
    assert w.graded and w.stale is None and w.marks == {} and w.lines == R.walk("softmax").lines
    assert "marks written" not in W.render(w).split("\n")[2]
    plain = R.walk("softmax")
    key = {
        "source_hash": plain.source_hash,
        "ungraded": "1",
        "marks": {m: W.format_ranges([n for n, v in plain.marks.items() if v == m]) for m in W.MARKS},
    }
    from autograder.labs.walk_key import with_key

    keyed = with_key(w, key)
    assert keyed.stale is None and keyed.marks == plain.marks and 1 in keyed.ungraded
    assert "the key is stale" in with_key(w, key | {"source_hash": "0" * 16}).stale


def test_no_student_facing_file_holds_the_key() -> None:
    """Nothing under pallas_course/ (the helpers package), labs/ (the student notebooks) or site/ (the chapter
    page's sources) holds any of the key's range lists, even re-wrapped; the key file itself does."""
    needles = _key_needles()
    key_text = _flat(KEY_PATH.read_text())
    assert all(n in key_text for ns in needles.values() for n in ns), "the needles no longer match the key file"
    leaks = []
    for top in ("pallas_course", "labs", "site"):
        for f in sorted((REPO_ROOT / top).rglob("*")):
            if not f.is_file() or "__pycache__" in f.parts or "_build" in f.parts:
                continue
            try:
                text = _flat(f.read_text())
            except UnicodeDecodeError:
                continue
            leaks += [
                f"{f.relative_to(REPO_ROOT)}: {name}" for name, ns in needles.items() if any(n in text for n in ns)
            ]
    assert not leaks, f"the LAB·1.5 key is in student-facing files: {leaks}"


def test_the_helpers_package_build_carries_no_key(tmp_path: Path) -> None:
    """What a wheel of this project holds (setuptools' build_py, the step bdist_wheel packs): walks.yml, but no
    autograder/keys/ and no file with the key's ranges."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", src)
    for package in ("pallas_course", "autograder"):
        shutil.copytree(REPO_ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "lib"
    run = subprocess.run(
        [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "--build-lib", str(out)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    built = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert "pallas_course/walks.yml" in built and "autograder/labs/lab_1_5.py" in built
    assert not [p for p in built if p.startswith("autograder/keys")], built
    needles = _key_needles()
    for p in built:
        text = _flat((out / p).read_text())
        assert not any(n in text for ns in needles.values() for n in ns), f"{p} holds the key"
