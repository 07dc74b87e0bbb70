"""Temporary: the figure style moved to :mod:`rope_lib.figures.style` (issue 21).

Kept until ``base_bound`` and ``context_extension`` move their figures into
``rope_lib.figures`` (issue 21, phase B); then this module goes.  New code imports
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
