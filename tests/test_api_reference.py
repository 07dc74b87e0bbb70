"""The book's API reference (``chapters/api/``) and the chapters' links into it (issue 21).

* Every public name of the modules of chapters 1 to 8 (and of the shared modules) is
  documented on exactly one API page, listed in that page's summary table, and every API
  page is in the table of contents.
* In chapters 1 to 8, every public rope_lib name that a code cell uses is linked with a
  ``{py:...}`` role in the chapter's prose, and its first mention in the prose is that link.
* In the built site (after ``make book``), every API entry has a ``[source]`` link to the
  highlighted module that defines it, and every chapter link lands on an entry.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

import rope_lib

from .conftest import CHAPTERS, ROOT

API = CHAPTERS / "api"
SITE = ROOT / "_build" / "html"
#: The chapters whose links issue 21 adds (phase A: 1 to 6; phase B: 7 and 8; 9 to come).
LINKED_CHAPTERS = (
    "01_symmetry",
    "02_taylor",
    "03_sinusoidal",
    "04_rope",
    "05_rope_implementations",
    "06_decay",
    "07_base_bound",
    "08_context_extension",
)
#: The modules documented by the API pages: every public module.  Chapter 9's package
#: (rope_lib.experiments, rope_lib.figures.experiments) is not among them: its page comes
#: with its second edition (issue 20).
DOCUMENTED = rope_lib.PUBLIC_MODULES
#: The public names those pages document: a linked chapter links the ones it uses.
DOCUMENTED_NAMES = frozenset(name for module in DOCUMENTED for name in rope_lib.EXPORTS[module])
#: Names a chapter uses before its link is written, each with its reason; nothing else may be
#: added, and an entry goes when the chapter links the name.
NOT_YET_LINKED: dict[tuple[str, str], str] = {}
#: The short names chapters give their module (``from rope_lib import base_bound as bb``).
_ALIASES = "decay|bb|bt|ce"
#: An entry, by its public name.  A constant is documented through the module that defines it
#: (``.. autodata:: rope_lib.base_table::REAL_MODELS``): autodoc finds a constant's ``#:``
#: comment only there, and through ``rope_lib`` it would show the docstring of ``tuple``.
_AUTO = re.compile(r"^\.\. auto(?:function|class|data):: (?:rope_lib\.[\w.]+::)?(\w+)$", re.M)
_SUMMARY = re.compile(r"^\.\. autosummary::\n\n((?:   [\w.]+\n)+)", re.M)
#: A role's target, by the public name it ends with (``rope_lib.base_table.REAL_MODELS``).
_ROLE = re.compile(r"\{py:(?:func|class|data)\}`(?:[^`<]*<)?rope_lib\.(?:\w+\.)*?(\w+)>?`")
#: Any role's target, dotted names included (``rope_lib.figures.interactive.show``).
_ROLE_ANY = re.compile(r"\{py:(?:func|class|data)\}`(?:[^`<]*<)?(rope_lib[\w.]+)>?`")


def _pages() -> dict[str, str]:
    return {p.stem: p.read_text() for p in sorted(API.glob("*.md")) if p.stem != "index"}


def test_every_public_name_is_documented_once_and_summarised() -> None:
    documented: dict[str, list[str]] = {}
    for page, text in _pages().items():
        entries = _AUTO.findall(text)
        summary = _SUMMARY.search(text)
        assert summary, f"chapters/api/{page}.md has no summary table"
        listed = [n.rsplit(".", 1)[-1] for n in summary.group(1).split()]
        assert listed == entries, page  # the table lists the entries, in order
        for name in entries:
            documented.setdefault(name, []).append(page)
    expected = {name for module in DOCUMENTED for name in rope_lib.EXPORTS[module]}
    assert expected <= set(documented), sorted(expected - set(documented))
    assert not {n: p for n, p in documented.items() if len(p) > 1}


def test_every_api_page_is_in_the_table_of_contents() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    part = next(p for p in toc["parts"] if p["caption"] == "API reference")
    assert part["chapters"][0]["file"] == "chapters/api/index"
    listed = [c["file"].removeprefix("chapters/api/") for c in part["chapters"][1:]]
    assert sorted(listed) == sorted(_pages())
    # flat: a page with sections gets a nameless <summary> toggle in the navigation (axe)
    assert not any("sections" in c for c in part["chapters"])


def _prose(text: str) -> str:
    """The chapter without its YAML header and code cells (so only prose remains)."""
    body = text[text.index("\n---\n", 4) + 5 :]
    return re.sub(r"^```\{code-cell\}.*?^```[ \t]*$", "", body, flags=re.M | re.S)


def _code(text: str) -> str:
    return "\n".join(re.findall(r"^```\{code-cell\}.*?^```[ \t]*$", text, flags=re.M | re.S))


@pytest.mark.parametrize("chapter", LINKED_CHAPTERS)
def test_every_rope_lib_name_a_chapter_uses_is_linked_at_its_first_mention(chapter: str) -> None:
    text = (CHAPTERS / f"{chapter}.md").read_text()
    prose = _prose(text)
    code = _code(text)
    named = set(re.findall(rf"\b(?:rope_lib|{_ALIASES})\.(\w+)", code))
    for group in re.findall(r"^from rope_lib import ([\w, ]+)", code, flags=re.M):
        named.update(n.strip() for n in group.split(","))
    used = {n for n in named & DOCUMENTED_NAMES if (chapter, n) not in NOT_YET_LINKED}
    linked = set(_ROLE.findall(prose))
    assert used <= linked, f"{chapter}: used but never linked: {sorted(used - linked)}"
    for name in sorted(linked):
        plain = re.search(rf"(?<![}}\w])`(?:rope_lib|{_ALIASES})\.{name}\b", prose)
        role = re.search(rf"\{{py:\w+\}}`[^`]*\b(?:rope_lib\.)?{name}\b", prose)
        assert plain is None or role.start() < plain.start(), (
            f"{chapter}: `rope_lib.{name}` is mentioned before its link"
        )


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(found["id"])
        if tag == "a" and found.get("href"):
            self.hrefs.append(found["href"])


def _parse(page: Path) -> _Anchors:
    parser = _Anchors()
    parser.feed(page.read_text())
    return parser


needs_build = pytest.mark.skipif(
    not (SITE / "chapters" / "api" / "index.html").is_file(), reason="run `make book` first"
)


@needs_build
@pytest.mark.parametrize("page", sorted(_pages()))
def test_every_entry_links_to_its_highlighted_source(page: str) -> None:
    html = SITE / "chapters" / "api" / f"{page}.html"
    parsed = _parse(html)
    for name in _AUTO.findall(_pages()[page]):
        where = next(m for m, names in rope_lib.EXPORTS.items() if name in names)
        ids = {f"rope_lib.{name}", f"rope_lib.{where}.{name}"}  # the second: a constant
        assert ids & parsed.ids, f"{page}: no entry for rope_lib.{name}"
        module = getattr(rope_lib, name).__module__ if callable(getattr(rope_lib, name)) else None
        if module is None:
            continue
        source = f"../../_modules/{module.replace('.', '/')}.html#{name}"
        assert source in parsed.hrefs, f"{page}: rope_lib.{name} has no [source] link {source}"
        target = html.parent / source.split("#")[0]
        assert target.is_file() and f'id="{name}"' in target.read_text(), source


@needs_build
@pytest.mark.parametrize("chapter", LINKED_CHAPTERS)
def test_every_chapter_link_lands_on_an_api_entry(chapter: str) -> None:
    parsed = _parse(SITE / "chapters" / f"{chapter}.html")
    links = [h for h in parsed.hrefs if h.startswith("api/") and "#rope_lib." in h]
    assert links, f"{chapter} links no API entry"
    for href in links:
        page, anchor = href.split("#")
        assert anchor in _parse(SITE / "chapters" / page).ids, href


@pytest.mark.parametrize("chapter", LINKED_CHAPTERS)
def test_a_chapter_with_sliders_links_show(chapter: str) -> None:
    """``show`` (imported from ``rope_lib.figures``) is linked to its entry where it is used."""
    text = (CHAPTERS / f"{chapter}.md").read_text()
    if "from rope_lib.figures import show" not in _code(text):
        pytest.skip("no slider figure")
    assert "rope_lib.figures.interactive.show" in "".join(_ROLE_ANY.findall(_prose(text)))
