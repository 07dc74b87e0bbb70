"""Temporary: the slider figures moved to :mod:`rope_lib.figures.interactive` (issue 21).

Kept until chapters 7 and 9 (and ``bench/bench_site.py``) import
``rope_lib.figures.interactive`` (issue 21, phase B); then this module goes.
"""

from .figures.interactive import MODELS, Param, compute, render_matplotlib, show, static_html  # noqa: F401
