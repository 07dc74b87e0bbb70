"""The chapters as live notebooks: ``make lab`` and the first-cell install guard.

* ``make lab`` refuses a busy port or a bad ``LAB_PORT`` in one line, before
  JupyterLab starts.
* JupyterLab started the way ``make lab`` starts it (``tools/lab.py``, on a free
  localhost port with a token set here, over a temporary copy of the book's pages so
  nothing is written into the repository) opens on the landing page; a chapter
  opened by its URL opens as a notebook (Jupytext's viewer, the default set by
  ``tools/jupyterlab-overrides.json``); "run all" in headless Chromium executes every
  cell with no error output; moving a live ipywidgets slider makes the kernel redraw
  its figure.  No request leaves localhost; screenshots go to
  ``_build/screenshots/lab-*.png``.
* The first code cell of every chapter starts with one and the same guard that,
  when a package the book needs is missing, stops with a message saying how to
  install, instead of a bare ImportError.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import jupytext
import pytest

from .sitebrowser import chromium, is_local, requested_urls

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("0*.md"))
LAB_SCRIPT = ROOT / "tools" / "lab.py"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHAPTER = "chapters/06_decay.md"  # four live slider figures, about 8 s of kernel time

pytestmark = pytest.mark.xdist_group("lab")


# --------------------------------------------------------------------------- guard


def _first_code_cell(path: Path) -> str:
    notebook = jupytext.read(path)
    return next(cell.source for cell in notebook.cells if cell.cell_type == "code")


def _guard(path: Path) -> str:
    """The guard: the first code cell up to its first blank line."""
    return _first_code_cell(path).split("\n\n", 1)[0]


GUARD = _guard(CHAPTERS[0])


def _needed(guard: str) -> list[str]:
    """The package names the guard checks (its ``_need`` string)."""
    for node in ast.walk(ast.parse(guard)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_need":
            return ast.literal_eval(node.value).split()
    raise AssertionError("the guard defines no _need string")


def _run_guard(python: list[str], prelude: str = "", cwd: Path | None = None):
    return subprocess.run(
        [*python, "-c", prelude + GUARD],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_every_chapter_starts_with_the_same_short_guard() -> None:
    assert len(CHAPTERS) == 9, [p.name for p in CHAPTERS]
    guards = {p.name: _guard(p) for p in CHAPTERS}
    different = [name for name, text in guards.items() if text != GUARD]
    assert not different, f"the first-cell guard differs from {CHAPTERS[0].name} in {different}"
    lines = GUARD.splitlines()
    assert 3 <= len(lines) <= 8, GUARD
    assert max(map(len, lines)) <= 75, GUARD
    assert "raise ModuleNotFoundError" in GUARD


def test_guard_covers_every_package_the_chapters_import() -> None:
    """Every non-standard-library module a chapter imports is one the guard checks."""
    imported = set()
    for path in CHAPTERS:
        for cell in jupytext.read(path).cells:
            if cell.cell_type != "code":
                continue
            source = "\n".join(
                line
                for line in cell.source.splitlines()
                if not line.lstrip().startswith(("%", "!"))
            )
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names)
    assert "rope_lib" in third_party and "numpy" in third_party  # the parse found imports
    missing = third_party - set(_needed(GUARD))
    assert not missing, f"chapters import {sorted(missing)}, which the guard does not check"


def test_guard_without_the_packages_says_how_to_install(tmp_path: Path) -> None:
    """``python -I -S`` from an empty directory: no site-packages, so nothing is found."""
    result = _run_guard([sys.executable, "-I", "-S"], cwd=tmp_path)
    assert result.returncode == 1, result
    last = result.stderr.strip().splitlines()[-1]
    # The names come from requirements.txt's point of view: all of them are missing here.
    expected = ", ".join(_needed(GUARD))
    assert last.startswith(f"ModuleNotFoundError: Not installed: {expected}."), last
    assert "`make lab`" in last and "`pip install -r requirements.txt`" in last, last
    assert "No module named" not in result.stderr


def test_guard_names_only_what_is_missing(tmp_path: Path) -> None:
    """With the book's environment but two packages hidden, the message names those two."""
    hide = "import sys\nsys.modules['torch'] = None\nsys.modules['sympy'] = None\n"
    result = _run_guard([sys.executable], prelude=hide, cwd=tmp_path)
    assert result.returncode == 1, result
    last = result.stderr.strip().splitlines()[-1]
    order = [name for name in _needed(GUARD) if name in ("torch", "sympy")]
    assert last.startswith(f"ModuleNotFoundError: Not installed: {', '.join(order)}."), last


def test_guard_is_silent_in_the_book_environment(tmp_path: Path) -> None:
    result = _run_guard([sys.executable], cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# --------------------------------------------------------------------- make lab


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _make_lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "-s", "lab", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # generous: make may first refresh .venv if requirements.txt changed
    )


def test_make_lab_refuses_a_busy_port() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _make_lab(f"LAB_PORT={port}")
    assert result.returncode != 0
    messages = [line for line in result.stderr.splitlines() if line.startswith("make lab:")]
    assert len(messages) == 1, result.stderr
    assert f"port {port} on 127.0.0.1 is busy" in messages[0]
    assert "make lab LAB_PORT=" in messages[0]
    suggested = int(messages[0].split("LAB_PORT=")[1].split("`")[0])
    with socket.socket() as sock:  # the suggestion is a port that is free
        sock.bind(("127.0.0.1", suggested))
    assert "ServerApp" not in result.stdout + result.stderr  # JupyterLab never started


@pytest.mark.parametrize("value", ["abc", "0", "70000", "88 88"])
def test_make_lab_names_a_bad_lab_port(value: str) -> None:
    result = _make_lab(f"LAB_PORT={value}")
    assert result.returncode != 0
    assert f"make lab: LAB_PORT must be a TCP port, an integer from 1 to 65535; got {value!r}" in (
        result.stderr
    )
    assert "ServerApp" not in result.stdout + result.stderr


# ------------------------------------------------------------ JupyterLab in Chromium

needs_chromium = pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="Debian's chromium and chromedriver are not installed (`make browser`)",
)


def _wait_for_server(process: subprocess.Popen, url: str, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"JupyterLab exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        time.sleep(0.3)
    pytest.fail(f"JupyterLab did not answer within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[dict]:
    """JupyterLab via tools/lab.py over a temporary copy of the book's pages."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "book"
    (root / "chapters").mkdir(parents=True)
    shutil.copy2(ROOT / "index.md", root / "index.md")
    for page in (ROOT / "chapters").glob("*.md"):
        shutil.copy2(page, root / "chapters" / page.name)
    # Jupyter's per-user state goes to the temporary directory, not ~/.jupyter; there,
    # autosave is off so that nothing is ever saved, which the test checks at the end.
    config = tmp / "config"
    settings = config / "lab" / "user-settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_DATA_DIR=str(tmp / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        IPYTHONDIR=str(tmp / "ipython"),
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    env.pop("ROPE_LIB_STATIC", None)  # live widgets, as a reader gets them
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp / "jupyterlab.log"
    command = [
        sys.executable,
        str(LAB_SCRIPT),
        "--port",
        str(port),
        "--root",
        str(root),
        "--workspaces",
        str(tmp / "workspaces"),
        "--",
        f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp, to run all cells
    ]
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(process, f"{base}/api/status?token={token}", log, timeout=90)
        yield {"base": base, "token": token, "root": root, "log": log}
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - a hung server
            process.kill()
            process.wait(timeout=10)


WAIT_FOR_APP_JS = """
const done = arguments[arguments.length - 1];
const start = Date.now();
(function poll() {
  const app = window.jupyterapp;
  if (app) { app.restored.then(() => done(true), (e) => done(String(e))); return; }
  if (Date.now() - start > 60000) { done('window.jupyterapp never appeared'); return; }
  setTimeout(poll, 100);
})();
"""

# The main-area document open on `path` once its file is loaded: its kind and CSS classes.
WAIT_FOR_DOCUMENT_JS = """
const path = arguments[0], done = arguments[arguments.length - 1];
const app = window.jupyterapp, start = Date.now();
(function poll() {
  const w = Array.from(app.shell.widgets('main')).find(
      (w) => w.context && w.context.path === path);
  if (w) {
    w.context.ready.then(() => done({
      notebook: w.node.classList.contains('jp-NotebookPanel'),
      classes: w.node.className,
      cells: w.content && w.content.model && w.content.model.cells
          ? w.content.model.cells.length : 0,
    }), (e) => done({error: String(e)}));
    return;
  }
  if (Date.now() - start > 60000) { done({error: 'no document open on ' + path}); return; }
  setTimeout(poll, 100);
})();
"""

RUN_ALL_JS = """
const path = arguments[0], done = arguments[arguments.length - 1];
const app = window.jupyterapp;
const w = Array.from(app.shell.widgets('main')).find((w) => w.context && w.context.path === path);
(async () => {
  await w.sessionContext.ready;
  app.shell.activateById(w.id);
  const ok = await app.commands.execute('notebook:run-all-cells');
  const kernel = w.sessionContext.session.kernel;
  const start = Date.now();
  while (kernel.status !== 'idle' && Date.now() - start < 30000) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return {ok: ok, status: kernel.status, kernel: kernel.name};
})().then(done, (e) => done({error: String(e)}));
"""

OUTPUTS_JS = """
const path = arguments[0], app = window.jupyterapp;
const w = Array.from(app.shell.widgets('main')).find((w) => w.context && w.context.path === path);
const cells = w.content.model.cells, result = [];
for (let i = 0; i < cells.length; i++) {
  const cell = cells.get(i);
  if (cell.type !== 'code') continue;
  result.push({
    index: i,
    count: cell.executionCount,
    outputs: cell.outputs.toJSON().map((o) => ({
      type: o.output_type, name: o.name || '', ename: o.ename || '', evalue: o.evalue || '',
      text: Array.isArray(o.text) ? o.text.join('') : (o.text || ''),
      mimes: o.data ? Object.keys(o.data) : [],
    })),
  });
}
return {cells: result};
"""

ERROR_NODES_JS = """
const root = arguments[0];
const stderr = [...root.querySelectorAll(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .map((e) => e.textContent).filter((t) => t.includes('Traceback'));
const errors = [...root.querySelectorAll('.jp-RenderedText[data-mime-type*=error]')]
    .map((e) => e.textContent.slice(0, 300));
return stderr.concat(errors);
"""

# The first live slider of the notebook and the figure of the same widget box.
SLIDER_JS = """
const panel = arguments[0];
const slider = panel.querySelector('.jupyter-widgets.widget-slider');
if (!slider) return null;
slider.scrollIntoView({block: 'center'});
const box = slider.closest('.widget-vbox');
const img = box && box.querySelector('.widget-output img');
return {
  handle: slider.querySelector('.noUi-handle'),
  label: (slider.querySelector('.widget-label') || {}).textContent || '',
  readout: (slider.querySelector('.widget-readout') || {}).textContent || '',
  src: img ? img.getAttribute('src') : null,
  box: box,
};
"""


def _shot(driver, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"lab-{name}.png"))


def _wait(driver, condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    _shot(driver, "timeout")
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


@needs_chromium
@pytest.mark.browser
@pytest.mark.slow
def test_chapter_runs_as_a_live_notebook_in_jupyterlab(lab) -> None:
    from selenium.webdriver.common.keys import Keys

    base, token = lab["base"], lab["token"]
    with chromium() as driver:
        driver.set_script_timeout(150)
        outside: list[str] = []

        # The landing page: `/` opens the book's workspace, index.md rendered as Markdown
        # (not as a notebook) and the file browser in chapters/.
        driver.get(f"{base}/?token={token}")
        assert driver.execute_async_script(WAIT_FOR_APP_JS) is True
        assert driver.current_url.split("?")[0] == f"{base}/lab/workspaces/rope-book"
        landing = driver.execute_async_script(WAIT_FOR_DOCUMENT_JS, "index.md")
        assert "error" not in landing and not landing["notebook"], landing
        title = next(
            line[2:] for line in (ROOT / "index.md").read_text().splitlines() if line[:2] == "# "
        )
        headings = _wait(
            driver,
            lambda: driver.execute_script(
                "return [...document.querySelectorAll('.jp-MarkdownViewer h1')]"
                ".map((e) => e.textContent)"
            ),
            30,
            "the rendered landing page",
        )
        assert any(h.startswith(title) for h in headings), headings
        _wait(
            driver,
            lambda: (
                "chapters" in driver.find_element("css selector", ".jp-FileBrowser-crumbs").text
            ),
            30,
            "the file browser to show chapters/",
        )
        assert not driver.find_elements("css selector", ".jp-Dialog")  # e.g. no kernel prompt
        _shot(driver, "landing")
        outside += [u for u in requested_urls(driver) if not is_local(u)]

        # A chapter opened by its URL opens as a notebook: Jupytext is the default viewer.
        driver.get(f"{base}/lab/tree/{CHAPTER}")
        assert driver.execute_async_script(WAIT_FOR_APP_JS) is True
        opened = driver.execute_async_script(WAIT_FOR_DOCUMENT_JS, CHAPTER)
        assert "error" not in opened, opened
        assert opened["notebook"], f"{CHAPTER} did not open as a notebook: {opened['classes']}"
        expected_cells = len(jupytext.read(ROOT / CHAPTER).cells)
        assert opened["cells"] == expected_cells

        # Run all cells; every code cell runs, and none has error output.
        run = driver.execute_async_script(RUN_ALL_JS, CHAPTER)
        assert run.get("ok") is True and run.get("status") == "idle", run
        state = driver.execute_script(OUTPUTS_JS, CHAPTER)
        cells = state["cells"]
        not_run = [c["index"] for c in cells if c["count"] is None]
        assert not not_run, f"cells that did not run: {not_run}"
        errors = [
            (c["index"], o["ename"] or o["text"][:300])
            for c in cells
            for o in c["outputs"]
            if o["type"] == "error" or (o["name"] == "stderr" and "Traceback" in o["text"])
        ]
        assert not errors, f"error outputs in {CHAPTER}: {errors}"
        widget_mime = "application/vnd.jupyter.widget-view+json"
        live = [c["index"] for c in cells if any(widget_mime in o["mimes"] for o in c["outputs"])]
        assert len(live) >= 1, "no live widget output"
        panel = driver.find_element("css selector", ".jp-NotebookPanel:not(.lm-mod-hidden)")
        assert not driver.execute_script(ERROR_NODES_JS, panel)

        # Move the first live slider with the keyboard; the kernel redraws its figure.
        before = _wait(
            driver,
            lambda: (s := driver.execute_script(SLIDER_JS, panel)) and s["src"] and s,
            60,
            "the first slider figure",
        )
        assert before["src"].startswith("data:image/png;base64,"), before["src"][:40]
        _shot(driver, "06_decay-before")
        driver.execute_script("arguments[0].focus()", before["handle"])
        before["handle"].send_keys(Keys.ARROW_RIGHT)
        after = _wait(
            driver,
            lambda: (
                (s := driver.execute_script(SLIDER_JS, panel))
                and s["src"]
                and s["src"] != before["src"]
                and s
            ),
            60,
            "the figure to change after the slider moved",
        )
        assert after["readout"] != before["readout"], (before["readout"], after["readout"])
        assert not driver.execute_script(ERROR_NODES_JS, after["box"])
        _shot(driver, "06_decay-after")
        outside += [u for u in requested_urls(driver) if not is_local(u)]

    assert not outside, f"requests left localhost: {outside}"
    # Nothing was saved: the served copy of the chapter is byte for byte the original.
    assert (lab["root"] / CHAPTER).read_bytes() == (ROOT / CHAPTER).read_bytes()
