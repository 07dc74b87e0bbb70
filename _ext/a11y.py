"""Sphinx extension: markup that screen readers and WCAG 2.1 AA checkers can use.

Two pieces of HTML that the book's toolchain writes fail axe-core's WCAG 2.1 AA rules on every
page (``tests/test_a11y.py`` runs axe on each page).  Each is replaced here by the same markup
with the accessibility defect removed, and nothing else changed:

* MyST-NB's folded code cells (``hide-input``) write ``<summary aria-label="Toggle hidden
  content">`` around the visible text "Show code cell source": the accessible name then hides
  the visible text (axe: ``label-content-name-mismatch``).  Here the summary has no aria-label,
  so its name is its visible text.  Upstream: myst-nb, ``myst_nb/sphinx_.py``
  (``visit_HideCellInput``).
* Docutils writes each citation of the bibliography as ``<div role="doc-biblioentry">`` inside a
  ``<div role="list">``: ``doc-biblioentry`` is deprecated in DPUB-ARIA 1.1 and an element of
  that role may not be a child of a list (axe: ``aria-deprecated-role``, ``list``).  Here each
  citation is a ``listitem``.  Upstream: docutils, ``writers/_html_base.py``
  (``visit_citation``).

The theme's search and colour-mode buttons are fixed by template overrides in ``_templates/``.
"""

from __future__ import annotations

from html import escape

from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput
from sphinx.writers.html5 import HTML5Translator


def visit_hide_cell_input(self, node) -> None:
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    self.body.append(f'<p class="collapsed admonition-title">{escape(node["prompt_show"])}</p>\n')
    self.body.append(f'<p class="expanded admonition-title">{escape(node["prompt_hide"])}</p>\n')
    self.body.append("</summary>\n")


def visit_citation(self, node) -> None:
    if not isinstance(node.previous_sibling(), type(node)):
        self.body.append('<div role="list" class="citation-list">\n')
    self.body.append(self.starttag(node, "div", classes=[node.tagname], role="listitem"))


def setup(app):
    app.setup_extension("myst_nb")
    app.add_node(
        HideCodeCellNode, override=True, html=(visit_hide_cell_input, depart_HideCellInput)
    )
    app.add_node(
        nodes.citation, override=True, html=(visit_citation, HTML5Translator.depart_citation)
    )
    return {"parallel_read_safe": True, "parallel_write_safe": True}
