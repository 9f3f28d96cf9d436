"""Strings a student controls (file and folder names, test messages, outputs, written answers, timestamps) are
data, never markup. One module turns them into text each output can hold safely; every writer uses it.

- `plain(text)`: the text itself, for JSON, records and anything else: control characters and terminal
  escape sequences removed (newline and tab kept), bidirectional overrides removed (they reorder what a
  reader sees), lone surrogates (undecodable bytes of a file name) shown as U+FFFD, and at most `cap`
  characters (`MAX_CHARS`), the cut marked "… [cut: N more characters]".
- `name(path)`: a file or folder name as text: undecodable bytes and control characters each become U+FFFD,
  so a name is always visible as something, never silently shortened.
- `for_rich`, `for_csv`, `for_markdown`, `for_html`: `plain`, then escaped for that output.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import PurePath

from rich.markup import escape as _rich_escape
from rich.text import Text

MAX_CHARS = 2000  # per message, output, note or error: a reason fits, a 20 MB exception does not
MAX_NAME_CHARS = 1000  # per file or folder path shown
CUT = "… [cut: {n} more characters]"

# ANSI escape sequences (CSI, OSC, and the two-character ESC forms): removed whole, not just their ESC.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
# C0 and C1 controls but newline and tab, DEL, and the bidirectional controls (Trojan-source reordering).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAME_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


_CUT_MARK = re.compile(r"… \[cut: (\d+) more characters\]\Z")


def _cut(text: str, cap: int, more: int = 0) -> str:
    """At most `cap` characters and the marker; a text cut before is not cut again (records are cleaned
    each time they are read), its count kept."""
    mark = _CUT_MARK.search(text)
    if mark:
        text, more = text[: mark.start()], more + int(mark.group(1))
    return _cut_fresh(text, cap, more)


def _cut_fresh(text: str, cap: int, more: int = 0) -> str:
    if len(text) <= cap and not more:
        return text
    return text[:cap] + CUT.format(n=max(0, len(text) - cap) + more)


def plain(text: object, cap: int = MAX_CHARS) -> str:
    """`text` as plain text: no control characters or escape sequences, surrogates replaced, at most `cap`
    characters plus the cut marker."""
    text = text if isinstance(text, str) else str(text)
    more = 0
    mark = _CUT_MARK.search(text)
    if mark:
        text, more = text[: mark.start()], int(mark.group(1))
    if len(text) > 4 * cap:  # never clean 20 MB to keep 2 KB of it
        more, text = more + len(text) - 4 * cap, text[: 4 * cap]
    text = _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))
    return _cut_fresh(_SURROGATES.sub(REPLACEMENT, text), cap, more)


def name(path: str | bytes | os.PathLike) -> str:
    """A path as text: each undecodable byte and each control character becomes U+FFFD."""
    text = os.fsdecode(path)
    return _cut(_NAME_CONTROLS.sub(REPLACEMENT, _SURROGATES.sub(REPLACEMENT, text)), MAX_NAME_CHARS)


def relative_name(path: PurePath, root: PurePath | None) -> str:
    """`path` relative to `root` (when under it) as text, each part through `name`."""
    if root is not None:
        try:
            path = path.relative_to(root)
        except ValueError:
            pass
    return name(path)


def for_rich(text: object, cap: int = MAX_CHARS) -> str:
    """For a rich console string (markup on): brackets escaped."""
    return _rich_escape(plain(text, cap))


def as_text(text: object, style: str = "", cap: int = MAX_CHARS) -> Text:
    """A rich `Text` (never parsed as markup or emoji codes)."""
    return Text(plain(text, cap), style=style)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def for_csv(text: object, cap: int = MAX_CHARS) -> str:
    """For a spreadsheet cell: a cell starting with = + - @ tab or CR is prefixed with ' (OWASP's rule
    against formula injection), so a spreadsheet shows it as text."""
    text = plain(text, cap)
    return "'" + text if text.startswith(_FORMULA_START) else text


# CommonMark: any ASCII punctuation may be backslash-escaped; these are the ones that make markup.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")


def for_markdown(text: object, cap: int = MAX_CHARS) -> str:
    """For one line of Markdown (a table cell, a list item): markup characters backslash-escaped, newlines
    as spaces, so the text can neither format nor break the table."""
    return _MD_SPECIAL.sub(r"\\\1", plain(text, cap)).replace("\n", " ").replace("\t", " ")


def for_html(text: object, cap: int = MAX_CHARS) -> str:
    return html.escape(plain(text, cap), quote=True)
