"""The site's own words (site/content/stage-1.yml), read into typed objects, and their inline markup.

Only prose, the plan by week, readings, the self-test and mastery items live there; numbers, code, labs and
the gate come from the course's sources. Inline markup is small on purpose: `code`, **strong**, *emphasis*,
[text](url), {alg:...} and {sch:...} (copper and steel), and {lab:CODE} (a link to that lab's block).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from markupsafe import Markup, escape
from pydantic import BaseModel, ConfigDict

from pallas_course.manifest import read_yaml_model


class ContentError(ValueError):
    """site/content/*.yml is missing, malformed, or names a lab or anchor that does not exist."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Section(_Strict):
    id: str
    kicker: str
    title: str
    paragraphs: list[str]
    figure: Literal["tensorcore", "tiling-table"] | None = None  # a picture the build computes (build.figures)


class Instrument(_Strict):
    code: str
    title: str
    note: str
    defaults: dict[str, int | str] | None = None
    dtypes: list[str] | None = None


class WalkSpec(_Strict):
    id: str
    code: str
    title: str
    lab: str  # lab code in course.yml, e.g. "LAB·1.2"
    kernel: str  # names of the kernel and wrapper functions in that lab's notebook
    wrapper: str


class Reading(_Strict):
    title: str
    url: str
    why: str


class Week(_Strict):
    week: int
    title: str
    items: list[str]


class CanYou(_Strict):
    id: str
    group: str
    text: str


class MasteryItem(_Strict):
    id: str
    kind: Literal["manual", "auto"]
    text: str
    href: str | None = None
    auto: str | None = None  # "all" or "group:<name>" (auto items only)


class Content(_Strict):
    breadcrumb: str
    sections: list[Section]
    instruments: dict[str, Instrument]
    walks: list[WalkSpec]
    readings: list[Reading]
    plan: list[Week]
    can_you: list[CanYou]
    mastery: list[MasteryItem]
    artifact: str


INSTRUMENTS = ("ex02", "ex07", "ex09", "ex12")


def load(path: Path, lab_codes: set[str]) -> Content:
    """Read and check the content file: every instrument present, every lab code and auto rule resolvable."""
    content = read_yaml_model(
        path, Content, ContentError, lives="the site's words live in site/content/", schema="content"
    )
    problems = [f"instruments.{k}: missing" for k in INSTRUMENTS if k not in content.instruments]
    named = [w.lab for w in content.walks]
    named += [m for week in content.plan for item in week.items for m in re.findall(r"\{lab:([^}]+)\}", item)]
    problems += [
        f"lab {code!r} is not in course.yml (labs are {', '.join(sorted(lab_codes))})"
        for code in named
        if code not in lab_codes
    ]
    groups = {c.group for c in content.can_you}
    for m in content.mastery:
        if m.kind == "auto" and not (m.auto == "all" or (m.auto or "").removeprefix("group:") in groups):
            problems.append(
                f"mastery.{m.id}: auto rule {m.auto!r} names no self-test group ({', '.join(sorted(groups))})"
            )
    for ids, where in (([c.id for c in content.can_you], "can_you"), ([m.id for m in content.mastery], "mastery")):
        if len(set(ids)) != len(ids):
            problems.append(f"{where}: ids must be unique, got {ids}")
    if problems:
        raise ContentError(f"{path}:\n" + "\n".join(f"  {p}" for p in problems))
    return content


_INLINE = re.compile(
    r"`(?P<code>[^`]+)`"
    r"|\*\*(?P<strong>[^*]+)\*\*"
    r"|\*(?P<em>[^*]+)\*"
    r"|\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\)"
    r"|\{(?P<kind>alg|sch|lab):(?P<body>[^}]+)\}"
)


def lab_anchor(code: str) -> str:
    """The id of a lab's block on the page: "LAB·1.2" -> "lab-1-2"."""
    return "lab-" + re.sub(r"[^0-9]+", "-", code.split("·")[-1]).strip("-")


def inline(text: str) -> Markup:
    """Our inline markup to HTML; everything else is escaped."""
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(escape(text[pos : m.start()]))
        pos = m.end()
        if m["code"] is not None:
            out.append(Markup("<code>{}</code>").format(m["code"]))
        elif m["strong"] is not None:
            out.append(Markup("<strong>{}</strong>").format(inline(m["strong"])))
        elif m["em"] is not None:
            out.append(Markup("<em>{}</em>").format(inline(m["em"])))
        elif m["href"] is not None:
            out.append(Markup('<a href="{}">{}</a>').format(m["href"], inline(m["text"])))
        elif m["kind"] == "lab":
            out.append(Markup('<a class="lab-ref" href="#{}">{}</a>').format(lab_anchor(m["body"]), m["body"]))
        else:
            cls = "alg" if m["kind"] == "alg" else "sch"
            out.append(Markup('<span class="{}">{}</span>').format(cls, inline(m["body"])))
    out.append(escape(text[pos:]))
    return Markup("").join(out)
