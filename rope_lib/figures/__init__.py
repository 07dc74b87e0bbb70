"""Every figure of the book: the static figures, one module per chapter, and the sliders.

* :mod:`rope_lib.figures.style`: the shared look (palette, fonts, :func:`~rope_lib.figures.style.new_figure`);
* one module per chapter, named after the chapter's math module (``attention``, ``taylor``,
  ``sinusoidal``, ``rotation``, ``implementations``, ``decay``, ``base_bound``,
  ``context_extension``, and ``experiments`` for chapter 9): its ``plot_*`` functions, which
  call the math modules (chapter 9's: :mod:`rope_lib.experiments.report`) and return a
  matplotlib figure;
* :mod:`rope_lib.figures.interactive`: the slider figures (their models, the live ipywidgets
  view, the self-contained HTML of the built book and its script ``static/ropefig.js``) and
  :func:`show`, the one call a chapter makes for one of them.

The figures import the math modules, never the reverse: importing a math module loads no
plotting library.  Nothing is imported here but :func:`show` on first use, so that
``import rope_lib.figures.style`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["show"]


def __getattr__(name: str) -> Any:
    if name == "show":
        from .interactive import show

        return show
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
