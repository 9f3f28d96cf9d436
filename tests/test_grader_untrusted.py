"""Property-based: random names, messages, outputs and timestamps through every writer and the gradebook
merge. Nothing crashes, nothing is lost, the exports agree with results.json, and no output holds a
student's string unescaped (no markup in the terminal, Markdown or HTML, no formula in a CSV cell, no
control character anywhere). No kernels: records are built directly."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from autograder import untrusted
from autograder.steps.discover import parse_timestamp
from autograder.steps.export import merge_into_gradebook, one_per_student_lab, student_of, write_nbgrader_csv
from autograder.steps.feedback import feedback_stem, to_html, to_markdown, write_feedback
from autograder.steps.report import Failures, csv_rows, to_json, write_csv
from course_tools.grading_report import BatchProgress, print_table
from autograder.steps.results import IgnoredFile, SubmissionResult, TestResult, WrittenResult
from autograder.course_manifest import manifest
from tests.small_gradebook import small_gradebook

LAB = "lab-1.1-first-kernels"
STAGE = manifest().stage.id
SPEC = manifest().lab(LAB)
SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

HOSTILE = [
    "[/]",
    "[bold red]x[/bold red]",
    "[link=file:///etc/passwd]a[/link]",
    ":smile:",
    "=1+1",
    "+SUM(A1)",
    "-2",
    "@cmd",
    "\tx",
    "\rx",
    "\x1b[2J\x1b[31mred",
    "\x1b]8;;http://evil\x07link\x1b]8;;\x07",
    "\x9b31m",
    "<script>alert(1)</script>",
    "**bold** _it_ `code` [a](http://x) ![i](x.png)",
    "| a | b |",
    "# h",
    "&amp; &lt;",
    "\u202eevil\u202c",
    "\udcff\udcfe",
    "a\x00b",
    "line\nbreak",
    "\\",
    "x" * 5000,
    "",
]
text = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=80),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
    st.lists(st.sampled_from(HOSTILE), max_size=4).map("".join),
)
name_part = st.one_of(
    st.sampled_from(["alice", "bob", "[/]", "=x", "\x1b[1m", "-rf", "\udcff", "a b"]),
    st.text(st.characters(blacklist_characters="/\x00"), min_size=1, max_size=12),
).filter(lambda s: s not in (".", ".."))
submission = st.builds(
    lambda student, file: f"{student}/{STAGE}/{file}",
    name_part,
    st.one_of(st.just(f"{LAB}.ipynb"), name_part.map(lambda s: s + ".ipynb")),
)


@st.composite
def results(draw: st.DrawFn) -> SubmissionResult:
    tests = [
        TestResult(
            name=t.id,
            points=(p := draw(st.sampled_from([0.0, t.points / 2, t.points]))),
            max_points=t.points,
            passed=p >= t.points,
            message=draw(text),
        )
        for t in SPEC.tests
    ]
    labbed = draw(st.booleans())
    return SubmissionResult(
        submission=draw(submission),
        lab=LAB if labbed else None,
        score=sum(t.points for t in tests) if labbed else 0,
        max_score=SPEC.autograded_max if labbed else 0,
        tests=tests if labbed else [],
        written=[WrittenResult(name=w.id, max_points=w.points, status=draw(text)) for w in SPEC.written],
        notes=draw(st.lists(text, max_size=2)),
        error=draw(st.none() | text),
        failed=draw(st.none() | text),
        timestamp=draw(st.none() | text),
        ignored=[IgnoredFile(name=draw(submission), reason=draw(text)) for _ in range(draw(st.integers(0, 2)))],
    )


batches = st.lists(results(), max_size=6)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def strings_of(r: SubmissionResult) -> list[str]:
    """Every student-controlled string of a record."""
    return (
        [r.submission, r.error or "", r.failed or "", r.timestamp or "", *r.notes]
        + [t.message for t in r.tests]
        + [w.status for w in r.written]
        + [s for i in r.ignored for s in (i.name, i.reason)]
    )


@SETTINGS
@given(text, st.integers(1, 3000))
def test_plain_is_plain_capped_and_stable(s: str, cap: int) -> None:
    p = untrusted.plain(s, cap)
    assert not CONTROL.search(p.replace("\n", "").replace("\t", ""))
    assert len(p) <= cap + len(untrusted.CUT.format(n=len(s)))
    assert untrusted.plain(p, cap) == p
    assert not untrusted.for_csv(s).startswith(("=", "+", "-", "@", "\t", "\r"))
    assert "\n" not in untrusted.for_markdown(s) and not re.search(
        r"(?<!\\)[\[\]<>`*_|]", untrusted.for_markdown(s).replace("\\\\", "")
    )
    assert not re.search(r"[<>\"]", untrusted.for_html(s))


@SETTINGS
@given(rs=batches)
def test_records_are_plain(rs: list[SubmissionResult]) -> None:
    for r in rs:
        for s in strings_of(r):
            assert not CONTROL.search(s.replace("\n", "").replace("\t", "")), s
            assert len(s) <= untrusted.MAX_CHARS + 40


@SETTINGS
@given(rs=batches)
def test_json_and_csv_hold_everything_and_agree(rs: list[SubmissionResult], tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("r")
    assert [SubmissionResult.model_validate(d) for d in json.loads(to_json(rs))] == rs
    failures = Failures()
    write_csv(rs, out / "results.csv", failures)
    assert not failures.by_submission
    rows = list(csv.reader((out / "results.csv").open(encoding="utf-8", newline="")))[1:]
    expected = [[str(c) for c in row] for r in rs for row in csv_rows(r)]
    assert rows == expected
    assert len(rows) == sum(max(1, len(r.tests)) for r in rs)
    for row in rows:
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row)
    for r, row in zip((r for r in rs for _ in range(max(1, len(r.tests)))), rows):
        assert row[0] == untrusted.for_csv(r.submission)


@SETTINGS
@given(rs=batches)
def test_nbgrader_csv_counts_one_result_per_student_and_lab(rs: list[SubmissionResult], tmp_path_factory) -> None:
    path = write_nbgrader_csv(rs, tmp_path_factory.mktemp("n") / "nbgrader-grades.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
    kept, _ = one_per_student_lab(rs)
    raw: dict[str, float] = defaultdict(float)
    for r in kept:
        raw[untrusted.for_csv(student_of(r.submission) or Path(r.submission).stem)] += r.score
    assert {row["student_id"]: float(row["raw_score"]) for row in rows} == pytest.approx(dict(raw))
    assert all(float(row["raw_score"]) <= SPEC.autograded_max for row in rows)


ALLOWED_HTML = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "h1",
    "h2",
    "p",
    "strong",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "ul",
    "li",
    "blockquote",
}


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)


def tags(page: str) -> list[str]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


@SETTINGS
@given(r=results())
def test_feedback_pages_hold_no_student_markup(r: SubmissionResult, tmp_path_factory) -> None:
    page = to_html(r)
    assert set(tags(page)) <= ALLOWED_HTML
    assert tags(page).count("tr") == (len(r.tests) + 1 if r.tests else 0) + len(r.written) + 1
    assert tags(page).count("li") == len(r.notes) + len(r.ignored)
    md = to_markdown(r)
    rendered = MarkdownIt("commonmark").enable("table").render(md)
    assert set(tags(rendered)) <= ALLOWED_HTML, rendered
    assert tags(rendered).count("tr") == tags(page).count("tr")
    assert not CONTROL.search(md.replace("\n", "")) and not CONTROL.search(page.replace("\n", ""))
    out = tmp_path_factory.mktemp("f")
    md_path, html_path = write_feedback(r, out)
    assert md_path.resolve().is_relative_to((out / "feedback").resolve())
    assert feedback_stem(out, r).parent.resolve().is_relative_to((out / "feedback").resolve())


@SETTINGS
@given(rs=batches)
def test_terminal_shows_text_never_markup(rs: list[SubmissionResult]) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=300, force_terminal=False, color_system=None)
    failures = Failures()
    print_table(rs, console, failures)
    progress = BatchProgress(Console(file=io.StringIO(), force_terminal=False), failures)
    with progress:
        progress.planned(len(rs), 0)
        for r in rs:
            progress.advance(SimpleNamespace(result=r, reused=False))
    assert not failures.by_submission
    shown = buffer.getvalue()
    assert "\x1b" not in shown
    for r in rs:  # a markup-like message is printed as its own characters
        for t in r.tests:
            if t.status != "passed" and "[bold red]" in t.message and len(t.message) < 40:
                assert "[bold red]" in shown


@SETTINGS
@given(text)
def test_timestamps_never_raise(s: str) -> None:
    stamp = parse_timestamp(s)
    assert stamp.value is None or parse_timestamp(stamp.value).value == stamp.value
    if stamp.problem:
        assert "timestamp.txt is not a date" in stamp.problem and not CONTROL.search(stamp.problem)


def test_timestamp_in_nbgraders_format() -> None:
    assert parse_timestamp("2026-11-29 10:00:00.000000 UTC").value == "2026-11-29 10:00:00.000000 UTC"
    assert parse_timestamp("2026-11-29T11:00:00+01:00").value == "2026-11-29 10:00:00.000000 UTC"
    assert parse_timestamp("yesterday").problem == (
        "timestamp.txt is not a date nbgrader reads ('yesterday'); the submission has no time and is not marked late"
    )
    assert parse_timestamp("").value is None and parse_timestamp("").problem is None


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_gradebook(tmp_path_factory.mktemp("course") / "gradebook.db")


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(rs=batches)
def test_gradebook_merge_agrees_with_the_csv(rs: list[SubmissionResult], gradebook: Path, tmp_path_factory) -> None:
    """Random students, messages and timestamps: the merge never stops, and each merged student's autograded
    total is the nbgrader CSV's raw score."""
    from nbgrader.api import Gradebook, MissingEntry

    out = tmp_path_factory.mktemp("m")
    failures = Failures()
    merge_into_gradebook(rs, gradebook, instructor_dir=out / "instructor", failures=failures)
    assert not failures.by_submission, failures.by_submission
    rows = {
        r["student_id"]: float(r["raw_score"])
        for r in csv.DictReader(write_nbgrader_csv(rs, out / "n.csv").open(encoding="utf-8", newline=""))
    }
    with Gradebook(f"sqlite:///{gradebook}") as gb:
        for r in one_per_student_lab(rs)[0]:
            student = student_of(r.submission)
            if student is None:
                continue
            try:
                nb = gb.find_submission_notebook(LAB, STAGE, student)
            except MissingEntry:
                pytest.fail(f"{student!r} not merged")
            total = sum(g.auto_score or 0 for g in nb.grades if g.name in {t.id for t in SPEC.tests})
            assert total == pytest.approx(rows[untrusted.for_csv(student)])
