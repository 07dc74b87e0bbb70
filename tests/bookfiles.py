"""What the build tests share: the header of a throwaway book's MyST notebook, and the
links of a built page.

Used by tests/test_build.py and tests/test_launch.py (throwaway builds) and
tests/test_binder.py (the book's own download links).
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

#: The Jupytext header that makes a ``.md`` file a MyST Markdown notebook.
MYST_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
    format_version: 0.13
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""


class _Links(HTMLParser):
    """Every ``href`` of a page (entities already decoded by the parser)."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [value for name, value in attrs if name == "href" and value]


def hrefs(page: Path) -> list[str]:
    """Every non-empty ``href`` of the HTML page ``page``, in document order."""
    parser = _Links()
    parser.feed(page.read_text())
    return parser.hrefs
