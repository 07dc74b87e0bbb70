"""The figures of chapter 3 (``chapters/03_sinusoidal.md``): the sinusoidal encoding and its
inner products.

:func:`plot_inner_products` and :func:`plot_encoding` draw what :mod:`rope_lib.sinusoidal`
computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._validate import (
    check_base,
    check_dim,
    check_positive_int,
)
from ..sinusoidal import _check_table, gram_matrix, sinusoidal
from .style import CMAP, DIVERGING_CMAP, MAX_FIGURE_POINTS, line_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_inner_products", "plot_encoding"]


_HEATMAP_SIDE = 1 << 11  # sqrt(MAX_FIGURE_POINTS)


def plot_inner_products(
    d: int = 128, base: float = 10000.0, length: int = 256, max_distance: int | None = None
) -> Figure:
    r"""Heatmap of :math:`\langle p_m, p_n\rangle` over :math:`(m, n)` and the curve of
    :math:`\langle p_0, p_x\rangle` against :math:`x`.

    Left panel: :func:`gram_matrix` for positions ``0 .. length-1`` (a Toeplitz matrix: it is
    constant along every diagonal :math:`m - n = \text{const}`), coloured from its smallest
    entry to its largest, :math:`d/2`.  Right panel:
    :math:`\langle p_0, p_x\rangle` for integer :math:`x` from ``0`` to ``max_distance``
    (default ``length - 1``), with the maximum :math:`d/2` marked.

    Parameters
    ----------
    d : int
        Dimension of the encoding; an even integer >= 2.
    base : float
        The base :math:`b > 1`.
    length : int
        Number of positions in the heatmap, from 2 to 2048 (the heatmap has ``length**2``
        cells, at most ``MAX_FIGURE_POINTS`` = 2**22).
    max_distance : int, optional
        Largest distance of the curve, from 1 to ``MAX_FIGURE_POINTS - 1``; defaults to
        ``length - 1``.

    Returns
    -------
    matplotlib.figure.Figure
        Axes 0 holds the heatmap (an ``AxesImage``), axes 1 the curve (first line).
    """
    d = check_dim(d)
    base = check_base(base)
    length = check_positive_int(
        length,
        "length",
        minimum=2,
        maximum=_HEATMAP_SIDE,
        hint=f"the heatmap has length**2 cells, at most {MAX_FIGURE_POINTS}",
    )
    if max_distance is None:
        max_distance = length - 1
    else:
        max_distance = check_positive_int(
            max_distance,
            "max_distance",
            maximum=MAX_FIGURE_POINTS - 1,
            hint=f"a curve has at most {MAX_FIGURE_POINTS} points",
        )
    _check_table(max_distance + 1, d, "the curve's encodings (max_distance + 1 positions x d)")
    positions = np.arange(length)
    gram = gram_matrix(positions, d, base)
    distances = np.arange(max_distance + 1)
    curve = gram_matrix([0], d, base, n_positions=distances)[0]

    fig, (ax_map, ax_curve) = new_figure(ncols=2, width=8.0, height=3.8)
    half = d / 2
    image = ax_map.imshow(
        gram,
        cmap=CMAP,
        vmin=float(gram.min()),
        vmax=half,
        origin="upper",
        extent=(-0.5, length - 0.5, length - 0.5, -0.5),
        interpolation="nearest",
    )
    ax_map.grid(False)
    ax_map.set(xlabel="position $n$", ylabel="position $m$", title=r"$\langle p_m, p_n\rangle$")
    fig.colorbar(image, ax=ax_map, shrink=0.9)

    ax_curve.plot(distances, curve, label=r"$\langle p_0, p_x\rangle$", **line_style(0))
    ax_curve.axhline(half, label=r"maximum $d_\mathrm{model}/2$", linewidth=1.0, **line_style(1))
    ax_curve.axhline(0.0, color="0.5", linewidth=0.8)
    ax_curve.set(
        xlabel="relative distance $x$ (positions)",
        ylabel=r"$\langle p_0, p_x\rangle$",
        title=r"row $m = 0$: $g(x)$",
    )
    ax_curve.set_ylim(min(-0.1 * half, curve.min() - 0.05 * half), 1.25 * half)
    ax_curve.legend(loc="upper right", ncols=2)
    fig.suptitle(rf"Sinusoidal encoding, $d_\mathrm{{model}} = {d}$, base $b = {base:g}$")
    return fig


def plot_encoding(length: int = 128, d: int = 64, base: float = 10000.0) -> Figure:
    r"""Heatmap of the encoding matrix :func:`sinusoidal` (positions x dimensions).

    Row :math:`m` is :math:`p_m`; column :math:`2i` is :math:`\sin m\theta_i` and column
    :math:`2i+1` is :math:`\cos m\theta_i`.  The left columns (pair 0, :math:`\theta_0 = 1`)
    change fastest along the positions.

    Parameters
    ----------
    length : int
        Number of positions ``0 .. length-1`` (>= 1); the heatmap has ``length * d`` cells,
        at most ``MAX_FIGURE_POINTS`` = 2**22.
    d : int
        Dimension of the encoding; an even integer >= 2.
    base : float
        The base :math:`b > 1`.

    Returns
    -------
    matplotlib.figure.Figure
        One axes holding the heatmap (an ``AxesImage`` whose data is the encoding).
    """
    d = check_dim(d)
    length = check_positive_int(
        length,
        "length",
        maximum=MAX_FIGURE_POINTS // d,
        hint=f"the heatmap has length * d cells, at most {MAX_FIGURE_POINTS}",
    )
    base = check_base(base)
    enc = sinusoidal(np.arange(length), d, base)
    fig, ax = new_figure(width=7.0, height=4.0)
    image = ax.imshow(
        enc,
        cmap=DIVERGING_CMAP,
        vmin=-1.0,
        vmax=1.0,
        aspect="auto",
        origin="upper",
        extent=(-0.5, d - 0.5, length - 0.5, -0.5),
        interpolation="nearest",
    )
    ax.grid(False)
    ax.set(
        xlabel="dimension (column $2i$: sin, $2i+1$: cos)",
        ylabel="position $m$",
        title=rf"Sinusoidal encoding $p_m$, $d_\mathrm{{model}} = {d}$, base $b = {base:g}$",
    )
    fig.colorbar(image, ax=ax, label="value")
    return fig
