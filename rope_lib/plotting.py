"""Temporary: the figure style moved to :mod:`rope_lib.figures.style` (issue 21).

No math module uses it any more (issue 21, phase B); it stays while chapter 9's report
modules (``experiment_report``, ``experiment_lm_report``) and ``tests/test_experiment_report.py``
import it, and goes when they import ``rope_lib.figures.style``.  New code imports
``rope_lib.figures.style``.
"""

from .figures.style import (  # noqa: F401
    CMAP,
    DIVERGING_CMAP,
    LINESTYLES,
    MAX_FIGURE_POINTS,
    PALETTE,
    STYLE,
    line_style,
    new_figure,
    plt,
)
