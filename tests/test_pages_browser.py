"""The explorer in real headless Chromium (Debian's, driven by playwright; no download).

Each page renders at desktop and phone widths (screenshots go to tests/screenshots/),
search works through the form, hostile entries show their HTML as text and run
nothing, and pages read fine with JavaScript off.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from test_pages_helpers import (
    NAME,
    XSS,
    Populated,
    close_app,
    digest_of,
    make_app,
    populate,
    reproduction_body,
    signed,
)
from werkzeug.serving import make_server

CHROMIUM = os.environ.get("KTL_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]
SHOTS = Path(__file__).parent / "screenshots"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"Chromium not found at {CHROMIUM} (run `make browser-deps` as root)"),
]


class _Served:
    def __init__(self, app: Flask, log: Populated) -> None:
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.log = log
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(5)


@pytest.fixture(scope="module")
def served() -> Iterator[_Served]:
    app = make_app()
    log = populate(app.test_client())
    s = _Served(app, log)
    yield s
    s.close()
    close_app(app)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS, timeout=30_000)
        yield _Browser(b)
        b.close()


class _Browser:
    """The browser, with short timeouts so a broken page fails fast."""

    def __init__(self, browser: Any) -> None:
        self._browser = browser

    def new_context(self, **kw: Any) -> Any:
        ctx = self._browser.new_context(**kw)
        ctx.set_default_timeout(5_000)
        return ctx

    def new_page(self) -> Any:
        return self.new_context().new_page()

    def close(self) -> None:
        self._browser.close()


class _Watch:
    """Records every dialog, console message and page error: an XSS would show up here."""

    def __init__(self, page: Any) -> None:
        self.dialogs: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.console.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def _pages(log: Populated) -> dict[str, str]:
    return {
        "home": "/",
        "entry": f"/entries/{log.benchmark}",
        "kernel": f"/kernels/{log.subject}",
        "search": f"/search?q={NAME}&limit=5",
        "hostile-entry": f"/entries/{log.hostile_benchmark}",
        "not-found": "/entries/999999",
    }


@pytest.mark.parametrize("width", list(WIDTHS))
def test_each_page_renders_and_is_screenshotted(browser: Any, served: _Served, width: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    w, h = WIDTHS[width]
    ctx = browser.new_context(viewport={"width": w, "height": h})
    page = ctx.new_page()
    watch = _Watch(page)
    try:
        for name, path in _pages(served.log).items():
            resp = page.goto(served.url + path)
            assert resp is not None
            assert resp.status == (404 if name == "not-found" else 200), name
            assert page.locator("h1").first.is_visible(), name
            assert "Kernel Transparency Log" in page.title(), name
            # Nothing wider than the viewport except inside scroll boxes.
            overflow = page.evaluate("document.documentElement.scrollWidth")
            assert overflow <= w + 1, f"{name} is {overflow}px wide at {w}px"
            page.screenshot(path=str(SHOTS / f"{name}-{w}.png"), full_page=True)
    finally:
        ctx.close()
    assert not watch.dialogs and not watch.errors
    # CSP blocks nothing we ship (no inline styles or scripts to report).
    assert not [c for c in watch.console if "Content Security Policy" in c], watch.console


def test_kernel_page_draws_the_chart(browser: Any, served: _Served) -> None:
    page = browser.new_page()
    try:
        page.goto(f"{served.url}/kernels/{served.log.subject}")
        svg = page.locator("figure.chart-box svg")
        assert svg.is_visible()
        box = svg.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        assert page.locator("figure.chart-box svg text", has_text="refuted").count() >= 1
        assert page.locator("tr.refuted").count() >= 1
    finally:
        page.close()


def test_search_form_finds_and_pages(browser: Any, served: _Served) -> None:
    page = browser.new_page()
    try:
        page.goto(served.url + "/search")
        page.fill("#q", NAME)
        page.fill("#limit", "3")
        page.click("form.search-form button[type=submit]")
        page.wait_for_url("**/search?*")
        rows = page.locator("table.list tbody tr")
        assert rows.count() == 3
        first = page.locator("table.list tbody tr td:first-child a").all_inner_texts()
        page.click("a[rel=next]")
        page.wait_for_load_state()
        second = page.locator("table.list tbody tr td:first-child a").all_inner_texts()
        assert second and set(first).isdisjoint(second)
        # The header search box jumps to an entry by number.
        page.fill("#top-q", str(served.log.kernel))
        page.press("#top-q", "Enter")
        page.wait_for_url(f"**/entries/{served.log.kernel}")
        assert f"Entry #{served.log.kernel}" in page.inner_text("h1")
    finally:
        page.close()


def test_hostile_entry_is_text_and_runs_nothing(browser: Any, served: _Served) -> None:
    page = browser.new_page()
    watch = _Watch(page)
    try:
        for path in (f"/entries/{served.log.hostile_kernel}",
                     f"/entries/{served.log.hostile_benchmark}",
                     f"/kernels/{served.log.hostile_subject}"):
            resp = page.goto(served.url + path)
            assert resp is not None and resp.status == 200
            csp = resp.headers["content-security-policy"]
            assert "default-src 'none'" in csp
            # The DOM holds no script and no injected image: the markup stayed text.
            assert page.evaluate("document.scripts.length") == 0
            assert page.locator("img").count() == 0
            assert XSS in page.locator("main").inner_text(), path  # shown, as text
        assert watch.dialogs == [] and watch.errors == []
    finally:
        page.close()


def test_pages_read_without_javascript(browser: Any, served: _Served) -> None:
    ctx = browser.new_context(java_script_enabled=False)
    page = ctx.new_page()
    try:
        page.goto(f"{served.url}/entries/{served.log.benchmark}")
        page.click("details:has(pre.raw) > summary")
        assert page.locator("pre.raw").is_visible()
        assert '"envelope"' in page.inner_text("pre.raw")
    finally:
        ctx.close()


def test_a_refuted_claim_shows_its_verdict_first_in_red(browser: Any, served: _Served) -> None:
    log = served.log
    page = browser.new_page()
    try:
        page.goto(f"{served.url}/entries/{log.claim_refuted}")
        line = page.locator(".verdicts .verdict-line.verdict-refuted").first
        assert line.is_visible()
        assert f"refuted by reproducer 'test-lab' in #{log.second}" in line.inner_text()
        assert "measured 1.11\u00d7" in line.inner_text()
        assert line.evaluate("e => getComputedStyle(e).color") == "rgb(179, 38, 30)"  # --bad
        statement = page.locator("h2", has_text="Statement").bounding_box()
        box = line.bounding_box()
        assert box is not None and statement is not None and box["y"] < statement["y"]
        page.goto(f"{served.url}/")  # the home list carries the verdict beside the entry
        row = page.locator("tr", has=page.locator(f'a[href="/entries/{log.claim_refuted}"]'))
        assert row.locator(".verdict-refuted").first.is_visible()
        page.goto(f"{served.url}/kernels/{log.issue_subject}")
        assert page.locator("p.bad-card", has_text="1 claim refuted").is_visible()
    finally:
        page.close()


def test_a_strangers_refutation_is_shown_as_its_word_not_in_red(browser: Any,
                                                                 served: _Served) -> None:
    """Issue 25 row 1: a reproduction by a key the operator does not name shows its verdict
    muted, as a stranger's word named by its key, never in the page's red."""
    import json
    import urllib.request

    from attest import REPRODUCTION_V1

    subject = digest_of("a-strangers-target")
    data = signed(NAME, subject, REPRODUCTION_V1,
                  reproduction_body(served.log.benchmark, "00" * 32, subject, [2.0], [0.5]))
    req = urllib.request.Request(f"{served.url}/api/v1/entries", data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        index = json.loads(resp.read())["index"]
    page = browser.new_page()
    try:
        page.goto(f"{served.url}/entries/{index}")
        word = page.locator(".stranger-word .unknown-signer").first
        assert word.is_visible()
        assert word.inner_text().startswith("refuted by an unknown key")
        assert word.evaluate("e => getComputedStyle(e).color") != "rgb(179, 38, 30)"  # --bad
        assert page.locator(".stranger-word", has_text="a stranger's word").is_visible()
        assert page.locator("tr.refuted").count() == 0
        assert page.locator(".verdict-refuted").count() == 0
    finally:
        page.close()
