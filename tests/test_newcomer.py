"""What a newcomer meets first: a README that is a first hour (the two commands near the top, the instructor's and
the student's steps, every docs page it promises), and no trap on the way (issue 30)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ("instructors.md", "platforms.md", "students.md", "grader.md", "maintainers.md", "index.md")


def _commands(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", text, re.S)


def test_readme_is_a_first_hour() -> None:
    """At most 150 lines, the demo and the test command in the first 40, the first hour's steps in the table."""
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "the README grew past 150 lines: move the detail to a page under docs/"
    head = "\n".join(text.splitlines()[:40])
    demo, tests = _commands(head)[:2]
    assert demo.endswith("course grade --demo"), demo
    assert "python -m pytest" in tests, tests
    for step in (
        "nbgrader generate_assignment",
        "course release",
        "nbgrader zip_collect",
        "course grade submitted/",
        "nbgrader generate_feedback",
        "nbgrader export",
        "jupyter lab labs/",
    ):
        assert step in text, f"the README's first hour lost {step!r}"


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs the README's pytest line, word for word (its pip install is quiet)."""
    pytest_line = _commands(README.read_text())[1].split(" && ")[-1]
    assert pytest_line in (ROOT / ".ci" / "run").read_text(), pytest_line


def test_every_docs_page_is_linked_from_the_readme_and_exists() -> None:
    text = README.read_text()
    for page in DOCS:
        assert f"](docs/{page})" in text, f"the README does not link docs/{page}"
        assert (ROOT / "docs" / page).is_file(), f"docs/{page} is linked but missing"


def test_docs_links_point_at_files_that_exist() -> None:
    """Relative links between the pages (and to the README) resolve; anchors are not checked."""
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"


# ------------------------------------------------------------------------------------ traps on the way


def test_release_warns_while_release_github_is_the_courses_default(tmp_path: Path) -> None:
    """One line naming course.yml's release.github and what to set it to; none once it is the instructor's."""
    from autograder.course_manifest import manifest
    from course_tools.release import COURSE_GITHUB, release_warnings

    m = manifest()
    assert m.release is not None and m.release.github == COURSE_GITHUB
    (line,) = release_warnings(m)
    assert line.startswith(
        f"course.yml release.github is still the course's default ({COURSE_GITHUB}): set it to "
        "the GitHub repository (owner/name) you push this release to"
    ), line
    mine = m.model_copy(update={"release": m.release.model_copy(update={"github": "my-school/pallas-2027"})})
    assert release_warnings(mine) == []


def test_course_release_prints_the_warning_last_on_stderr(tmp_path: Path, monkeypatch) -> None:
    """The CLI says it after the build's summary, on stderr, prefixed `warning:`; the release is still written."""
    from typer.testing import CliRunner

    import course_tools.release as release
    from course_tools.cli import app

    built: list[Path] = []

    def fake_build(stage: str, out: Path, *, today=None):  # the real build: tests/test_student_release.py
        built.append(out)
        return release.Release(
            out,
            release.dt.date(2026, 12, 2),
            out / "wheels" / "w.whl",
            "https://example/w.whl",
            [],
            [],
            warnings=["course.yml release.github is still the course's default (...)"],
        )

    monkeypatch.setattr(release, "build_release", fake_build)
    result = CliRunner().invoke(app, ["release", "stage-1", "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert built == [tmp_path / "r"]
    assert result.stderr.splitlines() == ["warning: course.yml release.github is still the course's default (...)"]
    assert result.output.rstrip().endswith(result.stderr.strip())


def test_what_grading_leaves_in_the_repository_is_ignored_by_git() -> None:
    """nbgrader's working folders, the export's grades/grades.csv and `course grade`'s grades/."""
    import subprocess

    paths = [
        "grades/grades.csv",
        "grades/results.json",
        "gradebook.db",
        "submitted/a/stage-1/x.ipynb",
        "autograded/a/stage-1/x.ipynb",
        "feedback/a/stage-1/x.html",
        "downloaded/stage-1/archive/class.zip",
        "grades.csv",
    ]
    run = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    assert sorted(run.stdout.split()) == sorted(paths), f"not ignored: {sorted(set(paths) - set(run.stdout.split()))}"


def test_remove_all_but_keeps_what_it_is_told_and_follows_no_link(tmp_path: Path) -> None:
    from autograder.steps.store import remove_all_but

    folder, outside = tmp_path / "executed", tmp_path / "outside"
    (folder / "alice" / "stage-1").mkdir(parents=True)
    (folder / "demo" / "stage-1").mkdir(parents=True)
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    keep = folder / "alice" / "stage-1" / "lab.ipynb"
    keep.write_text("{}")
    (folder / "demo" / "stage-1" / "lab.ipynb").write_text("{}")
    (folder / "link").symlink_to(outside, target_is_directory=True)
    removed = remove_all_but(folder, {keep})
    assert sorted(p.relative_to(folder).as_posix() for p in removed) == ["demo/stage-1/lab.ipynb", "link"]
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == [
        "alice",
        "alice/stage-1",
        "alice/stage-1/lab.ipynb",
    ]
    assert (outside / "precious.txt").read_text() == "keep"
    assert remove_all_but(tmp_path / "missing", set()) == []


# Paths of the machine a file was written on: a checkout or shared folder (/work/), a home (/root/, /home/<user>/,
# /Users/<user>/), a temporary folder made for one run (mkdtemp's 8 random characters after a prefix, tmp...,
# pytest's). Paths every Linux has (/tmp, /tmp/home inside the jail, /etc/passwd) are not flagged.
MACHINE_PATH = re.compile(
    r"(?<![\w.~/-])(/work/\S*|/root/[^\s'\"`),]*|/home/[a-z_][\w.-]*/\S*|/Users/[A-Za-z_]\S*"
    r"|/tmp/(?:pytest-of-[^/\s]+|tmp[a-z0-9_]{6,}|[\w.-]+-[a-z0-9_]{8})/\S*)"
)
# Named on purpose: what the jail's tests probe and the jail's docstring explains (root's home, where pyenv lives).
ALLOWED = {
    "tests/test_jail.py": {"/root/.bashrc", "/root/.pyenv", "/root/x"},
    "autograder/jail/bwrap.py": {"/root/.pyenv"},
}


def _committed_text_files() -> list[Path]:
    import subprocess

    run = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    return [ROOT / name for name in run.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def test_no_committed_file_names_a_path_of_the_authors_machine() -> None:
    found = []
    for path in _committed_text_files():
        data = path.read_bytes()
        if b"\0" in data or path == Path(__file__).resolve():
            continue  # binary, or this file's own examples
        rel = path.relative_to(ROOT).as_posix()
        for m in MACHINE_PATH.finditer(data.decode("utf-8", "replace")):
            if m.group(0).rstrip(".:;") not in ALLOWED.get(rel, ()):
                found.append(f"{rel}: {m.group(0)}")
    assert not found, (
        "paths of one machine in committed files (write them relative, or as a placeholder):\n" + "\n".join(found)
    )


def test_the_path_pattern_flags_machine_paths_and_not_the_jails() -> None:
    flagged = [
        "/work/shared/FACTS.md",
        "/root/.cache/pip",
        "/home/ada/pallas/README.md",
        "/Users/ada/x",
        "/tmp/bench-grading-i93a2urv/g1",
        "/tmp/tmpk2j_x9ab/out",
        "/tmp/pytest-of-root/pytest-3/x",
    ]
    fine = [
        "/tmp",
        "/tmp/",
        "/tmp/home/.ipython",
        "/tmp/ipykernel_123/456.py",
        "/tmp/nowhere/bin/python",
        "/etc/passwd",
        "/opt/course-grader/pallas_course",
        "https://github.com/x/work/y",
        "~/work/x",
        "a/work/b",
    ]
    assert [p for p in flagged if not MACHINE_PATH.search(p)] == []
    assert [p for p in fine if MACHINE_PATH.search(p)] == []
