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
    for step in ("nbgrader generate_assignment", "course release", "nbgrader zip_collect", "course grade submitted/",
                 "nbgrader generate_feedback", "nbgrader export", "jupyter lab labs/"):
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
