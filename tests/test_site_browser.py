"""The built site in real headless Chromium: no console errors, instruments step, the sandbox explains an
illegal block, the self-test survives a reload, the keyboard works, and the page fits phone and desktop widths.

Screenshots of both widths land in _build/site-screens/ (ignored) for a person to look at.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from site_browser import DESKTOP, PHONE, browser, built_site, open_page  # noqa: F401 - pytest fixtures, used by name

SCREENS = Path(__file__).resolve().parent.parent / "_build" / "site-screens"


def current(page, selector: str) -> dict:
    """The current step of the stepper at `selector`: its number, lines and the lit code lines."""
    return page.evaluate(
        """(sel) => {
      const root = document.querySelector(sel);
      const step = root.querySelector('[data-step].is-current');
      return {
        step: step ? Number(step.dataset.step) : null,
        visible: [...root.querySelectorAll('[data-step]')].filter((s) => s.offsetParent !== null).length,
        lines: step ? step.dataset.lines : null,
        lit: [...root.querySelectorAll('[data-listing] .ln.lit')].map((l) => Number(l.dataset.line)),
        counter: root.querySelector('[data-counter]')?.textContent,
        text: step ? step.innerText : '',
      };
    }""",
        selector,
    )


def test_no_console_errors_at_either_width(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """The page boots with no console error, warning or failed request, on desktop and on a phone."""
    for viewport in (DESKTOP, PHONE):
        ctx, page, problems = open_page(browser, built_site, viewport)
        try:
            page.mouse.wheel(0, 20_000)
            page.wait_for_timeout(100)
            assert problems.messages == [], f"at {viewport['width']} px: {problems.messages}"
        finally:
            ctx.close()


def test_ex02_steps_frames_with_buttons(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """EX·02 shows one frame at a time; next moves to frame 2 (MXU busy), and the counter follows."""
    ctx, page, problems = open_page(browser, built_site)
    try:
        first = current(page, "#ex02")
        assert first["step"] == 1 and first["visible"] == 1 and first["counter"] == "01/06"
        assert "DMA A0, B0 into the first slot pair" in first["text"] and "idle" in first["text"]
        page.click("#ex02 [data-next]")
        second = current(page, "#ex02")
        assert second["step"] == 2 and second["counter"] == "02/06" and second["visible"] == 1
        assert "C = 0; C += A0·B0" in second["text"]
        assert page.is_disabled("#ex02 [data-next]") is False and page.is_enabled("#ex02 [data-prev]")
        assert current(page, "#ex07")["counter"] == "01/09"
        assert problems.messages == []
    finally:
        ctx.close()


def test_ex12_frame_and_lines_move_together(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """EX·12: each step lights exactly the frame's lines; clicking a code line jumps to a frame it drives."""
    ctx, page, problems = open_page(browser, built_site)
    try:
        seen = []
        for _ in range(6):
            s = current(page, "#ex12")
            assert sorted(s["lit"]) == sorted(int(x) for x in s["lines"].split(",") if x), s
            seen.append((s["step"], tuple(s["lit"])))
            if s["step"] < 6:
                page.click("#ex12 [data-next]")
        assert page.is_disabled("#ex12 [data-next]")
        assert [n for n, _ in seen] == [1, 2, 3, 4, 5, 6]
        assert len({lit for _, lit in seen}) >= 3, f"the lit lines should change as the frames do: {seen}"
        # line 5 of the listing (the k == 0 initialisation) runs only in the first compute frame
        init_line = page.locator("#ex12 [data-listing] [data-line]", has_text="zeros_like").first
        init_no = int(init_line.get_attribute("data-line"))
        init_line.click()
        s = current(page, "#ex12")
        assert init_no in s["lit"] and s["step"] == 2, s
        assert problems.messages == []
    finally:
        ctx.close()


def test_sandbox_flags_an_illegal_block_and_says_why(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """EX·09: bm = 100 on f32 is illegal, with the sublane rule in plain words; fixing it makes it legal again."""
    ctx, page, problems = open_page(browser, built_site)
    try:
        root = "#ex09"
        assert page.get_attribute(root, "data-legal") == "true"
        assert "8 × 8 = 64 blocks launched" in page.inner_text(f"{root} [data-out=launch]")
        assert page.inner_text(f"{root} [data-out=bytes]") == "131 KB"
        assert page.inner_text(f"{root} [data-out=working-set]") == "524 KB / 134 MB"
        page.select_option(f"{root} select[name=dtype]", "float32")
        page.fill(f"{root} input[name=bm]", "100")
        assert page.get_attribute(root, "data-legal") == "false"
        head = page.inner_text(f"{root} [data-out=headline]")
        assert head.startswith("illegal"), head
        why = page.inner_text(f"{root} [data-out=diagnostics]")
        assert (
            "second-minor (sublane) dim: block 100 must be a multiple of 8 or equal the array's 2048; try 96 or 2048"
        ) in why
        page.fill(f"{root} input[name=bm]", "96")
        assert page.get_attribute(root, "data-legal") == "true"
        # over the scoped limit on v5e, within its physical VMEM
        page.fill(f"{root} input[name=m]", "4096")
        page.fill(f"{root} input[name=n]", "4096")
        page.fill(f"{root} input[name=bm]", "2048")
        page.fill(f"{root} input[name=bn]", "2048")
        assert "over the scoped limit" in page.inner_text(f"{root} [data-out=budget]")
        page.fill(f"{root} input[name=bn]", "")
        assert page.get_attribute(root, "data-legal") == "error"
        assert "sizes must be positive" in page.inner_text(f"{root} [data-out=headline]")
        assert problems.messages == []
    finally:
        ctx.close()


def test_sandbox_script_matches_the_built_page(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """The opening case as the script computes it reads the same as the page built by Python (scripts off)."""
    outs = ["headline", "launch", "grid", "bytes", "working-set", "limit", "budget", "sources"]
    texts = {}
    for js in (True, False):
        ctx, page, _ = open_page(browser, built_site, java_script_enabled=js)
        try:
            texts[js] = {o: " ".join(page.inner_text(f"#ex09 [data-out={o}]").split()) for o in outs}
        finally:
            ctx.close()
    assert texts[True] == texts[False]


def test_self_test_and_mastery_survive_a_reload(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """Ticks are kept in localStorage; ticking every pipeline item completes that auto mastery item."""
    ctx, page, problems = open_page(browser, built_site)
    try:
        boxes = page.locator("#can-you input[type=checkbox]")
        n = boxes.count()
        pipeline = page.locator("#can-you input[data-group=pipeline]")
        for i in range(pipeline.count()):
            pipeline.nth(i).check()
        page.locator("#mastery input[data-id=written]").check()
        page.reload()
        page.wait_for_selector("html[data-ready=true]")
        assert all(pipeline.nth(i).is_checked() for i in range(pipeline.count()))
        assert page.locator("#mastery input[data-id=written]").is_checked()
        assert page.locator("#mastery input[data-auto='group:pipeline']").is_checked()
        assert not page.locator("#mastery input[data-auto=all]").is_checked()
        assert page.inner_text("#can-you [data-count]") == f"{pipeline.count()}/{n}"
        assert page.inner_text("#mastery [data-count]") == "2/5"
        pipeline.nth(0).uncheck()
        page.reload()
        page.wait_for_selector("html[data-ready=true]")
        assert not page.locator("#mastery input[data-auto='group:pipeline']").is_checked()
        assert problems.messages == []
    finally:
        ctx.close()


def test_keyboard_steps_the_walk_and_leaves_inputs_alone(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """j and k step the walk in use (and its lit lines); typing j in the sandbox does not step anything."""
    ctx, page, problems = open_page(browser, built_site)
    try:
        walk = "#walk-matmul"
        page.locator(walk).scroll_into_view_if_needed()
        page.focus(walk)
        before = current(page, walk)
        page.keyboard.press("j")
        page.keyboard.press("j")
        after = current(page, walk)
        assert after["step"] == before["step"] + 2 and after["lit"] != before["lit"]
        page.keyboard.press("k")
        assert current(page, walk)["step"] == before["step"] + 1
        page.keyboard.press("ArrowRight")
        assert current(page, walk)["step"] == before["step"] + 2
        page.focus("#ex09 input[name=m]")
        page.keyboard.press("j")
        assert current(page, walk)["step"] == before["step"] + 2
        # the softmax walk steps too
        page.focus("#walk-softmax")
        page.keyboard.press("j")
        assert current(page, "#walk-softmax")["step"] == 2
        assert problems.messages == []
    finally:
        ctx.close()


def test_reads_with_scripts_off(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """With JavaScript off every frame and step is listed in order and the controls stay hidden."""
    ctx, page, _ = open_page(browser, built_site, java_script_enabled=False)
    try:
        assert current(page, "#ex02")["visible"] == 6 and current(page, "#ex07")["visible"] == 9
        assert page.locator("#ex02 [data-controls]").is_hidden()
        assert "legal: BlockSpec(256, 256)" in page.inner_text("#ex09 [data-out=headline]")
    finally:
        ctx.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_fits_the_width_and_screenshots(browser, built_site, viewport):  # noqa: F811 - a pytest fixture imported from site_browser
    """Nothing but code blocks and the tables (gate, budget line) scrolls sideways; screenshots saved for a person to look at."""
    ctx, page, problems = open_page(browser, built_site, viewport)
    try:
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
        wide = page.evaluate(
            """(w) => [...document.querySelectorAll('main *')]
            .filter((el) => el.getBoundingClientRect().right > w + 1)
            .filter((el) => !el.closest('pre, .table-wrap, .steps > .step:not(.is-current), [hidden]'))
            .map((el) => el.tagName + '.' + el.className).slice(0, 10)""",
            viewport["width"],
        )
        assert wide == [], f"wider than {viewport['width']} px: {wide}"
        name = "desktop" if viewport is DESKTOP else "phone"
        SCREENS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENS / f"{name}-page.png"), full_page=True)
        for sel in ("#ex02", "#ex09", "#ex12", "#walk-matmul", "#labs", "#gate"):
            page.locator(sel).screenshot(path=str(SCREENS / f"{name}-{re.sub(r'[^a-z0-9-]', '', sel)}.png"))
        assert problems.messages == []
    finally:
        ctx.close()


def test_works_from_a_static_host(browser, built_site):  # noqa: F811 - a pytest fixture imported from site_browser
    """Served over HTTP (a static server on the loopback address) the page boots the same, with no errors."""
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built_site.parent))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ctx = browser.new_context(viewport=DESKTOP)
    try:
        page = ctx.new_page()
        problems = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
        page.wait_for_selector("html[data-ready=true]", timeout=10_000)
        page.click("#ex02 [data-next]")
        assert current(page, "#ex02")["step"] == 2 and problems == []
    finally:
        ctx.close()
        server.shutdown()
        server.server_close()
