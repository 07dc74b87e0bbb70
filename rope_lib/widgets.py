"""Temporary: the slider figures moved to :mod:`rope_lib.figures.interactive` (issue 21).

Kept while chapter 9 and ``bench/bench_site.py`` import it (chapter 7 imports
``rope_lib.figures`` since issue 21's phase B); it goes when they import
``rope_lib.figures.interactive``.
"""

from .figures.interactive import MODELS, Param, compute, render_matplotlib, show, static_html  # noqa: F401
