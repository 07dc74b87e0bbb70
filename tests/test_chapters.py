"""Execute every chapter notebook and fail, naming the chapter, if any cell raises.

The book build executes the chapters too, but through a cache; these tests run
each chapter from scratch in a fresh kernel, exactly as a reader on Binder would.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


def _notebooks() -> list[Path]:
    return sorted(p for p in CHAPTERS.glob("*.md") if p.read_text().startswith("---\njupytext:"))


@pytest.mark.chapter
@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_chapter_executes(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # static slider figures, as in `make book`: nbclient can stall after a cell that opens
    # live ipywidgets (jupyter/nbclient#312); the live path is tested in test_lab.py
    monkeypatch.setenv("ROPE_LIB_STATIC", "1")
    notebook = jupytext.read(path)
    client = NotebookClient(
        notebook,
        timeout=300,  # per cell
        startup_timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(CHAPTERS)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:
        pytest.fail(f"chapter {path.name} failed:\n{error}", pytrace=False)


#: Characters of code that fit in every code cell of the built site at a 1280-pixel-wide
#: window (measured in headless Chromium: 650 pixels inside a solution, 8.0 pixels a
#: character at the 13.3-pixel code font of _assets/book.css).
CODE_LINE_LIMIT = 75


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.stem)
def test_code_fits_the_page(path: Path) -> None:
    """No code line is wider than a code cell of the site, so nothing scrolls sideways."""
    notebook = jupytext.read(path)
    long_lines = [
        line
        for cell in notebook.cells
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if len(line) > CODE_LINE_LIMIT
    ]
    assert not long_lines, (
        f"{path.name}: {len(long_lines)} code lines over {CODE_LINE_LIMIT} characters, "
        f"e.g. {long_lines[:3]}"
    )
