"""Shared figure style for every static figure of the book.

Chapters never style figures themselves: each plotting function in
``rope_lib.figures`` starts from :func:`new_figure` so that all figures share one
colour-blind-safe palette (Okabe and Ito), readable font sizes, labelled axes
and a transparent-free white background that stays readable in the theme's
dark mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._lazy import lazy_import

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

plt = lazy_import("matplotlib.pyplot")

__all__: list[str] = []

#: Largest number of points in one figure (cells of a heatmap, or distances on a curve),
#: shared by every plotting function so that a figure stays cheap to draw and to save.
MAX_FIGURE_POINTS = 1 << 22

#: Okabe-Ito palette: distinguishable under the common forms of colour blindness.
PALETTE: tuple[str, ...] = (
    "#0072B2",  # blue
    "#D55E00",  # vermillion
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#E69F00",  # orange
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#F0E442",  # yellow (use last: weak contrast on white)
)

#: Line styles that pair with the palette so curves differ without colour too (the first six:
#: solid, dashed, dash-dot, dotted, dash-dot-dot, long-short dashes; 6 and 7 repeat 0 and 1).
LINESTYLES: tuple[str, ...] = (
    "-",
    "--",
    "-.",
    ":",
    (0, (5, 1, 1, 1, 1, 1)),
    (0, (8, 2, 3, 2)),
    "-",
    "--",
)

#: Sequential colour map for heatmaps (perceptually uniform, colour-blind safe).
CMAP = "cividis"
#: Diverging colour map for signed heatmaps.
DIVERGING_CMAP = "PuOr_r"

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 120,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
    "legend.frameon": False,
}


def new_figure(
    ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 3.6, **kwargs
) -> tuple[Figure, Axes | Sequence[Axes]]:
    """Return ``(fig, axes)`` in the book's style.

    The figure is already closed in pyplot's registry: return it from a cell (or
    ``display`` it) to show it exactly once.

    Parameters
    ----------
    ncols, nrows : int
        Grid of panels, as in :func:`matplotlib.pyplot.subplots`.
    width, height : float
        Figure size in inches.
    **kwargs
        Passed on to :func:`matplotlib.pyplot.subplots`.
    """
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(width, height), layout="constrained", **kwargs
        )
    # Closed at once: the figure still draws when a cell returns it, but the inline
    # backend no longer shows it a second time at the end of the cell.
    plt.close(fig)
    fig.set_facecolor("white")
    axes_list = axes.ravel() if hasattr(axes, "ravel") else [axes]
    for ax in axes_list:
        _style_axes(ax)
    return fig, axes


def _style_axes(ax: Axes) -> None:
    ax.set_facecolor("white")
    ax.grid(True, alpha=0.3)
    ax.spines["top"].set_visible(False)
    ax.spines["right"].set_visible(False)


def line_style(k: int) -> dict:
    """Colour and dash pattern of the ``k``-th curve of a figure."""
    return {"color": PALETTE[k % len(PALETTE)], "linestyle": LINESTYLES[k % len(LINESTYLES)]}
