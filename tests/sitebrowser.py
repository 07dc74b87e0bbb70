"""Serve the built site on localhost and drive Debian's headless Chromium over it.

Shared by the browser tests (``tests/test_site.py``) and the benchmark of slider
redraw times (``bench``).  Nothing here downloads a browser: it uses
``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` (``make browser`` installs them).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
# ROPE_SITE points the tests at another build of the book (default: the one `make book` makes).
SITE = Path(os.environ.get("ROPE_SITE", ROOT / "_build" / "html"))
SCREENSHOTS = SITE.parent / "screenshots"

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)


def pages() -> list[Path]:
    """Every HTML page of the built site, relative to its root."""
    return sorted(
        p.relative_to(SITE)
        for p in SITE.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output clean
        pass


@contextlib.contextmanager
def serve(directory: Path = SITE) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 on a free port; yield the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium() -> Iterator:
    """A Selenium driver for Debian's headless Chromium with console and network logs."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="rope-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def requested_urls(driver) -> list[str]:
    """URLs the page asked for since the last call (from Chromium's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def is_local(url: str) -> bool:
    """True for URLs that do not leave the machine."""
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost", "::1")


def wait_for_math(driver, timeout: float = 30.0) -> None:
    """Wait until MathJax has typeset the page (if the page loads MathJax)."""
    driver.set_script_timeout(timeout)
    driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const start = Date.now();
        (function poll() {
          if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
            MathJax.startup.promise.then(() => done(true), () => done(false));
          } else if (!document.querySelector('script[src*="mathjax"]') || Date.now() - start > 20000) {
            done(false);
          } else { setTimeout(poll, 50); }
        })();
        """
    )


def screenshot_full_page(driver, path: Path, width: int = 1280, max_height: int = 16000) -> None:
    """Save a screenshot of the whole page (up to ``max_height`` pixels tall)."""
    height = driver.execute_script(
        "return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)"
    )
    driver.set_window_size(width, min(int(height) + 100, max_height))
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    driver.set_window_size(width, 1000)


FIGURE_STATE_JS = """
const root = arguments[0];
const f = root.ropefig;
const arr = (a) => Array.from(a);
return {
  model: f.model, values: f.values, ms: f.ms,
  svg: root.querySelector('svg').outerHTML.length + ':' + root.querySelector('svg').innerHTML.slice(-400),
  panels: f.data.panels.map((p) => p.kind === 'lines'
      ? {kind: p.kind, series: p.series.map((s) => Object.assign({x: arr(s.x), y: arr(s.y)},
            s.lo ? {lo: arr(s.lo), hi: arr(s.hi)} : {})), vlines: p.vlines.map((v) => v.x)}
      : p.kind === 'heatmap' ? {kind: p.kind, z: arr(p.z), nx: p.nx, ny: p.ny}
      : {kind: p.kind, arrows: p.arrows.map((a) => [a.x, a.y])}),
};
"""

SET_SLIDER_JS = """
const input = arguments[0], value = arguments[1];
input.value = value;
input.dispatchEvent(new Event('input', {bubbles: true}));
return input.value;
"""
