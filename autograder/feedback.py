"""What a student may receive: their executed notebook without the hidden tests, and a feedback page (HTML and
Markdown) with each test's points and message and the status of each written answer.

Hidden tests are the regions between `### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS` of the test cells
(removed as nbgrader's ClearHiddenTests removes them) and the checks those regions call; a test cell keeps its
one-line header and the student's own printed output, and its error shrinks to `Name: message` (the
traceback would quote the checks' source lines). Feedback pages are built from the result records alone,
which never hold test source.
"""
from __future__ import annotations

import copy
import html
import re
from pathlib import Path

from nbformat import NotebookNode

from autograder.results import SubmissionResult

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
_HIDDEN = re.compile(rf"^[ \t]*{re.escape(BEGIN)}.*?^[ \t]*{re.escape(END)}[^\n]*\n?", re.S | re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
REMOVED = "# (hidden test: its code is not shown; the feedback gives its result)"


def _is_test(cell: NotebookNode) -> bool:
    nbg = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return bool(nbg.get("grade")) and not nbg.get("solution") and cell.get("cell_type") == "code"


def strip_hidden(source: str) -> str:
    return _HIDDEN.sub(REMOVED + "\n", source).rstrip("\n")


def _unindented(text: str) -> str:
    """Keep the lines a warning or traceback prints at the margin; drop the indented source lines."""
    return "".join(line for line in text.splitlines(keepends=True) if not line[:1].isspace())


def sanitize(nb: NotebookNode) -> NotebookNode:
    """A copy of an executed notebook that is safe to hand back to its student."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        if BEGIN in cell.source:
            cell.source = strip_hidden(cell.source)
        if not _is_test(cell):
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


def to_markdown(r: SubmissionResult) -> str:
    lines = [f"# Feedback: {_title(r)}", "",
             f"**Autograded score: {r.score:g} / {r.max_score:g}**", ""]
    if r.error:
        lines += [f"> {r.error}", ""]
    if r.tests:
        lines += ["| test | points | result |", "|---|---:|---|"]
        for t in r.tests:
            result = "passed" if t.passed else t.message
            lines.append(f"| {t.name} | {t.points:g} / {t.max_points:g} | {_md_cell(result)} |")
        lines.append("")
    if r.written:
        lines += ["## Written answers (graded by hand)", "", "| question | points | status |", "|---|---:|---|"]
        lines += [f"| {w.name} | – / {w.max_points:g} | {w.status} |" for w in r.written]
        lines.append("")
    if r.notes:
        lines += ["## Notes", ""] + [f"- {_md_cell(n)}" for n in r.notes] + [""]
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_html(r: SubmissionResult) -> str:
    e = html.escape
    rows = "".join(
        f"<tr class=\"{'pass' if t.passed else 'fail'}\"><td>{e(t.name)}</td><td>{t.points:g} / {t.max_points:g}</td>"
        f"<td>{'passed' if t.passed else e(t.message)}</td></tr>" for t in r.tests)
    written = "".join(f"<tr><td>{e(w.name)}</td><td>– / {w.max_points:g}</td><td>{e(w.status)}</td></tr>"
                      for w in r.written)
    parts = [
        "<!doctype html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>Feedback: {e(_title(r))}</title>",
        "<style>body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.35rem .5rem;"
        "text-align:left;vertical-align:top}td:nth-child(2){white-space:nowrap}.pass td:last-child{color:#176f2c}"
        ".fail td:last-child{color:#a3161a}.error{border-left:4px solid #a3161a;padding:.2rem .8rem}</style>",
        "</head><body>",
        f"<h1>Feedback: {e(_title(r))}</h1>",
        f"<p><strong>Autograded score: {r.score:g} / {r.max_score:g}</strong></p>",
    ]
    if r.error:
        parts.append(f"<p class=\"error\">{e(r.error)}</p>")
    if r.tests:
        parts.append(f"<table><thead><tr><th>test</th><th>points</th><th>result</th></tr></thead><tbody>{rows}"
                     "</tbody></table>")
    if r.written:
        parts.append("<h2>Written answers (graded by hand)</h2><table><thead><tr><th>question</th><th>points</th>"
                     f"<th>status</th></tr></thead><tbody>{written}</tbody></table>")
    if r.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in r.notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def feedback_stem(out_dir: Path, r: SubmissionResult) -> Path:
    label = r.submission[:-len(".ipynb")] if r.submission.endswith(".ipynb") else r.submission
    return out_dir / "feedback" / label.lstrip("/")


def write_feedback(r: SubmissionResult, out_dir: Path) -> tuple[Path, Path]:
    stem = feedback_stem(out_dir, r)
    stem.parent.mkdir(parents=True, exist_ok=True)
    md, page = stem.with_name(stem.name + ".md"), stem.with_name(stem.name + ".html")
    md.write_text(to_markdown(r) + "\n")
    page.write_text(to_html(r))
    return md, page
