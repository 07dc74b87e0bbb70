"""The chapters' code fits the page.

Where the chapters are executed: `make book` executes every chapter (and fails on a cell
that raises), and tests/test_binder.py executes every chapter again from scratch, as the
executed `.ipynb` each page offers, in a fresh kernel of a fresh Binder environment; the
student edition's chapters run in tests/test_student.py.  This file used to execute them
a third time, which only cost CI time.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"


def _notebooks() -> list[Path]:
    return sorted(p for p in CHAPTERS.glob("*.md") if p.read_text().startswith("---\njupytext:"))


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
