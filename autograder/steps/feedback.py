"""What a student may receive: their executed notebook without the hidden tests (nor the outputs of the cells run
after the first of them), and a feedback page (HTML and Markdown) with each test's points and message and the status
of each written answer.

Hidden tests are the regions between `### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS` of the test cells
(removed as nbgrader's ClearHiddenTests removes them) and the checks those regions call; a test cell keeps its
one-line header and the student's own printed output, and its error shrinks to `Name: message` (the
traceback would quote the checks' source lines). Feedback pages are built from the result records alone,
which never hold test source.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

from nbformat import NotebookNode
from nbformat.v4 import new_output

from autograder import cells, untrusted
from autograder.steps.results import SubmissionResult, TestResult

BEGIN, END = cells.HIDDEN_TEST_MARKERS
_HIDDEN = re.compile(rf"^[ \t]*{re.escape(BEGIN)}.*?^[ \t]*{re.escape(END)}[^\n]*\n?", re.S | re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
REMOVED = "# (hidden test: its code is not shown; the feedback gives its result)"
AFTER_TESTS = (
    "[the outputs of this cell and the cells after it are not handed back: they ran after a hidden test, "
    "and what they printed could show how the hidden tests called your functions; run the notebook "
    "yourself to see them]"
)
GRADER_OUTPUTS = ("KernelStopped",)  # error outputs the grader writes into a cell (autograder.steps.execute)


def strip_hidden(source: str) -> str:
    return _HIDDEN.sub(REMOVED + "\n", source).rstrip("\n")


def _unindented(text: str) -> str:
    """Keep the lines a warning or traceback prints at the margin; drop the indented source lines."""
    return "".join(line for line in text.splitlines(keepends=True) if not line[:1].isspace())


def drop_outputs_after_tests(nb: NotebookNode) -> NotebookNode:
    """`nb` (in place) without the outputs of the code cells after its first hidden test; the first of them says
    why, whatever they held (so nothing tells which printed). The hidden tests call the student's functions in the
    notebook's own process (on shapes the grader keeps to itself: every case of every test); a later cell could
    print what those calls saw. What the grader itself wrote there (why the run stopped) stays: the feedback says
    it anyway."""
    after, noted = False, False
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        if cells.is_test(cell):
            after = True
            continue
        if after:
            kept = [
                o
                for o in cell.get("outputs", [])
                if o.get("output_type") == "error" and o.get("ename") in GRADER_OUTPUTS
            ]
            note = [] if noted else [new_output("stream", name="stdout", text=AFTER_TESTS + "\n")]
            cell.outputs, noted = [*note, *kept], True
            cell.execution_count = None  # a cell can set the next one's count
    return nb


def sanitize(nb: NotebookNode) -> NotebookNode:
    """A copy of an executed notebook that is safe to hand back to its student."""
    nb = drop_outputs_after_tests(copy.deepcopy(nb))
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        if BEGIN in cell.source:
            cell.source = strip_hidden(cell.source)
        if not cells.is_test(cell):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                value = _ANSI.sub("", str(out.get("evalue", "")))
                out["traceback"] = [f"{out.get('ename', 'Error')}: {value}".rstrip(": ")]
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                out["text"] = _unindented(_ANSI.sub("", "".join(out.get("text", ""))))
    return nb


def _title(r: SubmissionResult) -> str:
    return f"{r.lab or 'unknown lab'} · {r.submission}"


def _verdict(t: TestResult) -> str:
    """ "passed", "PARTIAL 2.7/3 · why" or "FAIL · why" (the message still to be escaped by the caller)."""
    if t.status == "passed":
        return t.message if t.message.startswith("passed · ") else "passed"  # with its note (not compiled)
    if t.status == "partial":
        return f"PARTIAL {t.points:g}/{t.max_points:g} · {t.message}"
    return f"FAIL · {t.message}"


def to_markdown(r: SubmissionResult) -> str:
    """Test and question names are course.yml's ids; everything else here is escaped as student text."""
    md = untrusted.for_markdown
    lines = [f"# Feedback: {md(_title(r))}", "", f"**Autograded score: {r.score:g} / {r.max_score:g}**", ""]
    if r.error:
        lines += [f"> {md(r.error)}", ""]
    if r.failed:
        lines += [f"> Not handled: {md(r.failed)}", ""]
    if r.timestamp:
        lines += [f"Submitted: {md(r.timestamp)}", ""]
    if r.tests:
        lines += ["| test | points | result |", "|---|---:|---|"]
        for t in r.tests:
            lines.append(f"| {t.name} | {t.points:g} / {t.max_points:g} | {md(_verdict(t))} |")
        lines.append("")
    if r.written:
        lines += ["## Written answers (graded by hand)", "", "| question | points | status |", "|---|---:|---|"]
        lines += [f"| {w.name} | – / {w.max_points:g} | {md(w.status)} |" for w in r.written]
        lines.append("")
    if r.ignored:
        lines += ["## Not graded", ""] + [f"- {md(i.name)}: {md(i.reason)}" for i in r.ignored] + [""]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {md(n)}" for n in r.notes] + [""]
    return "\n".join(lines)


def to_html(r: SubmissionResult) -> str:
    e = untrusted.for_html
    rows = "".join(
        f"<tr class=\"{t.status}\"><td>{e(t.name)}</td><td>{t.points:g} / {t.max_points:g}</td>"
        f"<td>{e(_verdict(t))}</td></tr>"
        for t in r.tests
    )
    written = "".join(
        f"<tr><td>{e(w.name)}</td><td>– / {w.max_points:g}</td><td>{e(w.status)}</td></tr>" for w in r.written
    )
    parts = [
        "<!doctype html>",
        "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>Feedback: {e(_title(r))}</title>",
        "<style>body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.35rem .5rem;"
        "text-align:left;vertical-align:top}td:nth-child(2){white-space:nowrap}.passed td:last-child{color:#176f2c}"
        ".partial td:last-child{color:#8a5a00}.failed td:last-child{color:#a3161a}"
        ".error{border-left:4px solid #a3161a;padding:.2rem .8rem;white-space:pre-wrap}</style>",
        "</head><body>",
        f"<h1>Feedback: {e(_title(r))}</h1>",
        f"<p><strong>Autograded score: {r.score:g} / {r.max_score:g}</strong></p>",
    ]
    if r.error:
        parts.append(f"<p class=\"error\">{e(r.error)}</p>")
    if r.failed:
        parts.append(f"<p class=\"error\">Not handled: {e(r.failed)}</p>")
    if r.timestamp:
        parts.append(f"<p>Submitted: {e(r.timestamp)}</p>")
    if r.tests:
        parts.append(
            f"<table><thead><tr><th>test</th><th>points</th><th>result</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    if r.written:
        parts.append(
            "<h2>Written answers (graded by hand)</h2><table><thead><tr><th>question</th><th>points</th>"
            f"<th>status</th></tr></thead><tbody>{written}</tbody></table>"
        )
    if r.ignored:
        parts.append(
            "<h2>Not graded</h2><ul>" + "".join(f"<li>{e(i.name)}: {e(i.reason)}</li>" for i in r.ignored) + "</ul>"
        )
    if r.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in r.notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


MAX_NAME_BYTES = 200  # a path component (255 bytes on most file systems) with room for ".html"


def _safe_part(part: str) -> str:
    """One path component that the file system takes: a name whose replacement characters made it too
    long is cut and given a short hash, so two long names stay apart."""
    data = part.encode("utf-8")
    if len(data) <= MAX_NAME_BYTES:
        return part
    import hashlib

    return data[: MAX_NAME_BYTES - 13].decode("utf-8", "ignore") + "-" + hashlib.sha256(data).hexdigest()[:12]


def feedback_stem(out_dir: Path, r: SubmissionResult) -> Path:
    """feedback/<submission without .ipynb>, inside feedback/ whatever the label holds (no .., no /)."""
    label = r.submission[: -len(".ipynb")] if r.submission.endswith(".ipynb") else r.submission
    parts = [_safe_part(p) for p in Path(label).parts if p not in ("/", "..", ".", "")]
    return out_dir / "feedback" / Path(*(parts or ["submission"]))


def feedback_paths(out_dir: Path, r: SubmissionResult) -> tuple[Path, Path]:
    """The Markdown and the HTML feedback page of `r` under `out_dir`."""
    stem = feedback_stem(out_dir, r)
    return stem.with_name(stem.name + ".md"), stem.with_name(stem.name + ".html")


def write_feedback(r: SubmissionResult, out_dir: Path) -> tuple[Path, Path]:
    md, page = feedback_paths(out_dir, r)
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(to_markdown(r) + "\n", encoding="utf-8")
    page.write_text(to_html(r), encoding="utf-8")
    return md, page
