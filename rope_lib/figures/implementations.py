"""The figures of chapter 5 (``chapters/05_rope_implementations.md``): layouts and accuracy.

:func:`plot_layout_mismatch` shows what converting a checkpoint between the interleaved and
the half layout does to the scores (and what forgetting it does); :func:`plot_accuracy` the
error of each recipe's angle tables and of the scores computed with them.  The numbers come
from :mod:`rope_lib.implementations` and :func:`rope_lib.apply_rope`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._validate import (
    MAX_POSITION,
    check_base,
    check_dim,
    check_elements,
    check_positive_int,
    check_seed,
)
from ..implementations import RECIPES, layout_permutation, score_error, table_error
from ..rotation import apply_rope
from .style import line_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_layout_mismatch", "plot_accuracy"]


_RECIPE_LABELS = {
    "rope_lib": "rope_lib (float64 angles)",
    "float32": "usual float32 recipe",
    "bfloat16_tables": "bfloat16 tables",
    "bfloat16_positions": "bfloat16 positions",
}


def plot_layout_mismatch(
    d: int = 64, base: float = 10000.0, max_distance: int = 200, seed: int = 0
) -> Figure:
    r"""Scores of an interleaved-layout model run with the half layout, converted or not.

    A query :math:`q` and a similar key :math:`k = q + \varepsilon` (standard normal
    :math:`q`, :math:`\varepsilon` with standard deviation 0.3) are placed at positions
    :math:`m = 0` and :math:`n`.  Plotted against the distance :math:`n - m`:

    * the original model, interleaved layout: :math:`q^\top R_{n-m} k`;
    * the checkpoint converted with :func:`permute_qk_weight`, half layout: the rows are
      permuted, :math:`(Pq)^\top R^{\text{half}}_{n-m} (Pk)` — the same curve;
    * the permutation forgotten, half layout: :math:`q^\top R^{\text{half}}_{n-m} k` — equal
      at :math:`n - m = 0` only.

    Returns
    -------
    matplotlib.figure.Figure
        Axes 0: the three score curves (lines 0, 1, 2 in this order); axes 1: the absolute
        error of the converted and of the forgotten route.
    """
    d = check_dim(d)
    base = check_base(base)
    max_distance = check_positive_int(
        max_distance,
        "max_distance",
        maximum=MAX_POSITION,
        hint="MAX_POSITION, the largest position rope_lib accepts",
    )
    seed = check_seed(seed)
    check_elements(
        (max_distance + 1) * d,
        f"the rotated keys of shape (max_distance + 1, d) = ({max_distance + 1}, {d})",
        "lower max_distance",
    )
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d)
    k = q + 0.3 * rng.standard_normal(d)
    x = np.arange(max_distance + 1)
    zeros = np.zeros_like(x)
    p = layout_permutation(d)

    def scores(qv: np.ndarray, kv: np.ndarray, layout: str) -> np.ndarray:
        qr = apply_rope(np.broadcast_to(qv, (x.size, d)), zeros, base, layout)
        kr = apply_rope(np.broadcast_to(kv, (x.size, d)), x, base, layout)
        return (qr * kr).sum(-1)

    original = scores(q, k, "interleaved")
    converted = scores(q[p], k[p], "half")
    forgotten = scores(q, k, "half")
    fig, (ax, ax_err) = new_figure(ncols=2, width=9.0, height=3.6)
    ax.plot(x, original, label="original (interleaved)", linewidth=2.2, **line_style(0))
    ax.plot(x, converted, label="converted (half, rows permuted)", **line_style(2))
    ax.plot(x, forgotten, label="permutation forgotten (half)", **line_style(1))
    ax.set(
        xlabel="distance $n - m$ (positions)",
        ylabel=r"score $q^\top R_{n-m} k$",
        title="scores of one query-key pair",
    )
    ax.legend(loc="upper right")
    ax_err.semilogy(x, np.abs(converted - original) + 1e-17, label="converted", **line_style(2))
    ax_err.semilogy(x, np.abs(forgotten - original) + 1e-17, label="forgotten", **line_style(1))
    ax_err.set(
        xlabel="distance $n - m$ (positions)",
        ylabel="|score - original score|",
        title="error (1e-17 added for the log scale)",
    )
    ax_err.legend(loc="center right")
    fig.suptitle(f"Interleaved weights in a half-layout model, $d = {d}$, $b = {base:g}$")
    return fig


def plot_accuracy(
    d: int = 128, base: float = 10000.0, max_position: int = 10**7, num: int = 57, seed: int = 0
) -> Figure:
    r"""Error of the cos/sin tables and of float32 attention scores against position.

    Left: :func:`table_error` for each recipe of :data:`RECIPES`.  Right:
    :func:`score_error` (query at :math:`m`, key at :math:`m - 1`, float32 arithmetic) for
    each recipe.  Positions are ``num`` integers spaced logarithmically from 1 to
    ``max_position``.  A dotted line marks :math:`2^{-24} m \approx 6\cdot 10^{-8}\, m`, the
    unit round-off of float32 times the position: the order of the float32 recipe's angle
    errors, whose largest (over the pairs) has the size of one float32 rounding of an angle
    near :math:`m` (pair 0's angle :math:`m\theta_0 = m` itself is exact).

    Returns
    -------
    matplotlib.figure.Figure
        Axes 0 and 1 each hold one line per recipe, in the order of :data:`RECIPES`, with
        x data the positions and y data the errors; then the dotted guide line.
    """
    d = check_dim(d)
    base = check_base(base)
    max_position = check_positive_int(
        max_position,
        "max_position",
        minimum=10,
        maximum=MAX_POSITION,
        hint="MAX_POSITION, the largest position rope_lib accepts",
    )
    num = check_positive_int(num, "num", minimum=2)
    seed = check_seed(seed)
    check_elements(
        8 * num * d,
        f"the score samples (8 vectors x num = {num} positions x d = {d})",
        "lower num",
    )
    positions = np.unique(np.round(np.logspace(0, np.log10(max_position), num)).astype(np.int64))
    fig, (ax_t, ax_s) = new_figure(ncols=2, width=9.5, height=3.9)
    for j, recipe in enumerate(RECIPES):
        style = line_style(j if j < 3 else j + 1)  # line_style(3) is dotted, as the guide
        lw = 2.2 if recipe == "rope_lib" else 1.5
        t_err = np.maximum(table_error(positions, d, base, recipe), 1e-17)
        s_err = np.maximum(score_error(positions, d, base, recipe, seed=seed), 1e-17)
        ax_t.loglog(positions, t_err, label=_RECIPE_LABELS[recipe], linewidth=lw, **style)
        ax_s.loglog(positions, s_err, label=_RECIPE_LABELS[recipe], linewidth=lw, **style)
    guide = 2.0**-24 * positions
    for ax in (ax_t, ax_s):
        ax.loglog(
            positions,
            guide,
            color="0.4",
            linestyle=":",
            linewidth=1.0,
            label=r"$2^{-24}\,m$",
        )
        ax.set_xlabel("position $m$")
        ax.set_ylim(1e-9, 3.0)
    ax_t.set(ylabel=r"max error of $\cos m\theta_i$, $\sin m\theta_i$", title="cos/sin tables")
    ax_s.set(ylabel="relative score error", title="scores $q_m^\\top k_{m-1}$, float32")
    fig.legend(*ax_t.get_legend_handles_labels(), loc="outside lower center", ncols=5, fontsize=9)
    fig.suptitle(f"Accuracy of RoPE implementations, $d = {d}$, $b = {base:g}$")
    return fig
