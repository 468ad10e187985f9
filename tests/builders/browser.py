"""Pages opened in Debian's Chromium driven by Playwright (never a downloaded browser): the `browser` fixture
(tests/conftest.py) launches it, :func:`open_page` opens a page and watches it, :func:`wait_view` waits for
the explorer to render a view."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_HINT = ("Chromium is not installed: the browser test drives Debian's system browser. Install it with "
                 "`sudo apt-get install chromium` (or set BERTOLOGY_CHROMIUM=/path/to/chromium); "
                 "`make install` installs Playwright's Python package, which never downloads a browser here.")


def chromium() -> str:
    """The system Chromium (BERTOLOGY_CHROMIUM, or chromium on PATH); skips the test without one."""
    path = os.environ.get("BERTOLOGY_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not Path(path).exists():
        pytest.skip(CHROMIUM_HINT)
    return path


def launch() -> Iterator:
    """A headless Chromium (Playwright's Browser) for the duration of the generator."""
    exe = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright's Python package is missing: pip install -e '.[test]' (it drives the system "
                    "Chromium; never run `playwright install`)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Watch:
    """Console errors, page errors and every request of a page."""

    def __init__(self, pg, url: str):
        self.url, self.errors, self.requests = url, [], []
        pg.on("console", lambda m: self.errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        pg.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        pg.on("request", lambda r: self.requests.append(r.url))

    def check(self):
        assert not self.errors, self.errors
        foreign = [u for u in self.requests if u.split("#")[0] != self.url and not u.startswith("data:")]
        assert not foreign, f"requests left the page: {foreign}"


def open_page(browser, url: str, width: int = 1400):
    """(page, its :class:`Watch`) of `url` in a new page `width` pixels wide."""
    pg = browser.new_page(viewport={"width": width, "height": 1000})
    watch = Watch(pg, url)
    pg.goto(url)
    return pg, watch


def wait_view(pg, view: str, timeout: float = 20.0):
    """Until the page shows `view` and no render is under way (polled: the page's CSP forbids the eval that
    Playwright's wait_for_function would need, and the test keeps that CSP on)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        busy, rendered = pg.evaluate("[document.body.dataset.busy, document.body.dataset.rendered || '']")
        if busy == "0" and rendered.startswith(view + ":"):
            return
        pg.wait_for_timeout(25)
    raise AssertionError(f"the page did not render the {view} view within {timeout} s")
