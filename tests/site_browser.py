"""Shared fixtures for the site tests: the site built once per session, and Debian's Chromium under Playwright.

Import the fixtures into a test module (`from site_browser import browser, built_site  # noqa: F401`).
Without Playwright or Chromium the browser tests skip and say what to install; under CI (CI=true, as
.ci/run is run) they fail instead, because CI installs both and must really run them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str | None:
    return shutil.which("chromium") or next((p for p in ("/usr/bin/chromium",) if Path(p).exists()), None)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the browser tests: .ci/run installs chromium, requirements.txt playwright)")
    pytest.skip(reason)


_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site, built from this checkout into a temporary folder: its index.html (built once per run, even
    though each test module that imports this fixture registers its own copy of it)."""
    from course_tools.site.build import build

    if "index" not in _BUILT:
        _BUILT["index"] = build(tmp_path_factory.mktemp("site")).index
    return _BUILT["index"]


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module (module scope: Playwright's sync API runs one instance at a time)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install -r requirements.txt")
    path = chromium_path()
    if path is None:
        _unavailable("Debian's chromium is not installed: apt-get install -y chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageProblems:
    """Console errors and uncaught exceptions seen by a page."""

    def __init__(self, page) -> None:
        self.messages: list[str] = []
        page.on(
            "console",
            lambda m: self.messages.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: self.messages.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: self.messages.append(f"request failed: {r.url}"))


def open_page(browser, index: Path, viewport=DESKTOP, **context_args):
    """A fresh context and page on the built site, scripts booted; returns (context, page, problems)."""
    ctx = browser.new_context(viewport=viewport, **context_args)
    page = ctx.new_page()
    problems = PageProblems(page)
    page.goto(index.as_uri())
    if context_args.get("java_script_enabled", True):
        page.wait_for_selector("html[data-ready=true]", timeout=10_000)
    return ctx, page, problems
