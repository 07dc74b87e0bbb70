"""The figure of chapter 4 (``chapters/04_rope.md``): RoPE in two dimensions.

:func:`plot_rotation_2d` draws a query and a key before and after their rotations; the
score in each title is the one :mod:`rope_lib.rotation` proves depends on :math:`n - m` only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import (
    check_integer_array,
    check_real,
    check_real_array,
)
from .style import line_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_rotation_2d"]


#: Largest number of panels of :func:`plot_rotation_2d`.
_MAX_PANELS = 12


#: Largest magnitude of an entry of q or k in :func:`plot_rotation_2d`: lengths (and the axis
#: limits, 1.25 times the longer arrow) and the score q^T k stay far from float64 overflow.
_MAX_ARROW = 1e100


def plot_rotation_2d(
    q: Any = (1.0, 0.3),
    k: Any = (0.8, 0.6),
    theta_2d: float = 0.4,
    positions: Any = ((2, 5), (7, 10)),
) -> Figure:
    r"""Arrows of :math:`q, k, R_m q, R_n k` in the plane, one panel per pair :math:`(m, n)`.

    :math:`R_m` turns by :math:`m\theta` (``theta_2d``).  The title of each panel gives the
    score :math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k`; pairs with the same :math:`n - m`
    show the same angle between the rotated arrows and the same score.

    Parameters
    ----------
    q, k : pair of float
        The query and the key (2-D), finite, entries of magnitude at most 1e100 (so that
        the lengths, the axis limits and the score stay finite).
    theta_2d : float
        The frequency :math:`\theta` (radians per position).
    positions : sequence of (m, n)
        One panel per pair of integer positions.

    Returns
    -------
    matplotlib.figure.Figure
        Panel ``j`` holds four annotations (arrows) ending at ``q``, ``k``, ``R_m q``,
        ``R_n k``, in this order.
    """
    q = check_real_array(q, "q", ndim=1, max_abs=_MAX_ARROW)
    k = check_real_array(k, "k", ndim=1, max_abs=_MAX_ARROW)
    for name, vec in (("q", q), ("k", k)):
        if vec.shape != (2,):
            raise ValueError(f"{name} must be a finite 2-vector, got shape {vec.shape}")
    if not (np.any(q) or np.any(k)):
        raise ValueError("q and k must not both be zero (nothing to draw)")
    theta_2d = check_real(theta_2d, "theta_2d")
    pairs = check_integer_array(positions, "positions", ndim=2)
    if pairs.shape[1] != 2 or not 1 <= pairs.shape[0] <= _MAX_PANELS:
        raise ValueError(
            f"positions must be a sequence of 1 to {_MAX_PANELS} (m, n) pairs (one panel "
            f"each), got shape {pairs.shape}"
        )

    def rot(a: float) -> np.ndarray:
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])

    fig, axes = new_figure(ncols=len(pairs), width=3.6 * len(pairs), height=3.8)
    axes = np.atleast_1d(axes)
    r = 1.25 * max(np.linalg.norm(q), np.linalg.norm(k))
    for ax, (m, n) in zip(axes, pairs, strict=True):
        qm, kn = rot(m * theta_2d) @ q, rot(n * theta_2d) @ k
        arrows = (
            ("$q$", q, 0, 0.45),
            ("$k$", k, 1, 0.45),
            (f"$R_{{{m}}}q$", qm, 0, 1.0),
            (f"$R_{{{n}}}k$", kn, 1, 1.0),
        )
        for label, vec, colour, alpha in arrows:
            style = line_style(colour)
            ax.annotate(
                "",
                xy=(vec[0], vec[1]),
                xytext=(0.0, 0.0),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": style["color"],
                    "alpha": alpha,
                    "linewidth": 1.6,
                    "linestyle": "-" if alpha == 1.0 else "--",
                },
            )
            ax.text(
                1.06 * vec[0], 1.06 * vec[1], label, color=style["color"], alpha=max(alpha, 0.7)
            )
        ax.set_xlim(-r, r)
        ax.set_ylim(-r, r)
        ax.set_aspect("equal")
        ax.set(
            xlabel="coordinate 0",
            ylabel="coordinate 1",
            title=f"$m = {m}$, $n = {n}$: score {float(qm @ kn):.4f}",
        )
    fig.suptitle(rf"RoPE in 2-D, $\theta = {theta_2d:g}$: the score depends on $n - m$")
    return fig
