"""The figures of chapter 2 (``chapters/02_taylor.md``): the remainder of the second-order
expansion and the size of each term along a ray.

:func:`plot_error_order` and :func:`plot_term_sizes` draw what :mod:`rope_lib.taylor`
computes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import (
    check_flag,
    check_real,
)
from ..taylor import (
    TERM_NAMES,
    SecondOrderExpansion,
    _eps,
    attention_output_model,
    demo_point,
    expansion_error,
    interaction_along_ray,
    loglog_slope,
    second_order_expansion,
    term_sizes,
)
from .style import PALETTE, line_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_error_order", "plot_term_sizes"]


#: How the figures label each term.
_TERM_LABELS = {
    "constant": r"$f$",
    "linear_m": r"$\boldsymbol{p}_m^\top \nabla_m f$",
    "linear_n": r"$\boldsymbol{p}_n^\top \nabla_n f$",
    "quadratic_m": r"$\frac{1}{2}\boldsymbol{p}_m^\top \mathcal{H}_{mm} \boldsymbol{p}_m$",
    "quadratic_n": r"$\frac{1}{2}\boldsymbol{p}_n^\top \mathcal{H}_{nn} \boldsymbol{p}_n$",
    "cross": r"$\boldsymbol{p}_m^\top \mathcal{H} \boldsymbol{p}_n$",
}


def _default_expansion(expansion: SecondOrderExpansion | None) -> SecondOrderExpansion:
    if expansion is None:
        f, x_m, x_n = attention_output_model(2)
        return second_order_expansion(f, x_m, x_n)
    if not isinstance(expansion, SecondOrderExpansion):
        raise TypeError(f"expansion must be a SecondOrderExpansion, got {type(expansion).__name__}")
    return expansion


def plot_error_order(
    expansion: SecondOrderExpansion | None = None,
    point: dict[str, Any] | None = None,
    eps: Any = None,
    fit_max: float = 0.1,
) -> Figure:
    r"""Figure: the remainder :math:`r(\varepsilon)` of the second-order expansion on log-log
    axes, its fitted slope over :math:`\varepsilon \le` ``fit_max``, and a slope-3 guide line.

    Parameters
    ----------
    expansion : SecondOrderExpansion, optional
        Default: :func:`attention_output_model` with ``d = 2``.
    point : dict, optional
        Base point and directions; default :func:`demo_point` ``(d)``.
    eps : array_like, optional
        Perturbation sizes; default 25 values from :math:`10^{-3}` to 3.
    fit_max : float
        Largest :math:`\varepsilon` used in the fit (at least two ``eps`` must qualify).

    Returns
    -------
    matplotlib.figure.Figure
        One axes; its title states the fitted slope.
    """
    expansion = _default_expansion(expansion)
    if point is None:
        point = demo_point(len(expansion.x_m))
    eps = _eps(np.geomspace(1e-3, 3.0, 25) if eps is None else eps)
    fit_max = check_real(fit_max, "fit_max", low=0.0, low_open=True)
    fit = eps <= fit_max
    if fit.sum() < 2:
        raise ValueError(f"fit_max must leave at least two eps values to fit, got {fit_max}")
    err = expansion_error(expansion, point, eps)
    if np.any(err[fit] <= 0):
        raise ValueError(
            f"the remainder is 0 in float64 at some eps <= fit_max = {fit_max!r} for this "
            "point (the model is exactly quadratic along the ray, or its remainder "
            "underflows); there is no slope to fit: choose another point or larger eps"
        )
    slope = loglog_slope(eps[fit], err[fit])
    intercept = np.mean(np.log(err[fit]) - slope * np.log(eps[fit]))
    fig, ax = new_figure(width=6.4, height=4.2)
    ax.loglog(eps, err, "o", color=PALETTE[0], ms=5, label=r"remainder $r(\varepsilon)$")
    ax.loglog(
        eps[fit],
        np.exp(intercept) * eps[fit] ** slope,
        lw=2,
        color=PALETTE[1],
        label=f"least-squares fit, slope {slope:.3f}",
    )
    guide = err[0] * (eps / eps[0]) ** 3
    ax.loglog(eps, guide, color="0.3", linestyle=":", lw=1.5, label=r"guide $\propto\varepsilon^3$")
    ax.axvspan(eps[fit].min(), eps[fit].max(), color=PALETTE[5], alpha=0.12, lw=0)
    ax.set(
        xlabel=r"perturbation size $\varepsilon = \|\boldsymbol{p}_m\| = \|\boldsymbol{p}_n\|$",
        ylabel=r"$|\tilde f - \mathrm{(second\ order)}|$",
        title=f"Remainder of the second-order expansion: fitted slope {slope:.3f}",
    )
    ax.legend(loc="upper left")
    return fig


def plot_term_sizes(
    expansion: SecondOrderExpansion | None = None,
    point: dict[str, Any] | None = None,
    eps: Any = None,
    interaction: bool = True,
) -> Figure:
    r"""Figure: the size of each of the six terms, of the remainder and of the coupling beyond
    the cross term against :math:`\varepsilon`, log-log; below it, the exact interaction
    divided by the cross term.

    Arguments as in :func:`plot_error_order` (default :math:`\varepsilon` from
    :math:`10^{-2}` to 3). In the upper panel the constant is flat, the linear terms rise with
    slope 1, the quadratic and cross terms with slope 2, and the remainder with slope 3 for
    small :math:`\varepsilon` (it bends away where higher orders take over). With
    ``interaction`` (default) an eighth, dashed curve shows :math:`|\mathcal I - \mathcal
    I_2|`, the part of the exact interaction :math:`\mathcal I` (:func:`interaction_along_ray`)
    that the cross term :math:`\mathcal I_2 = \boldsymbol p_m^\top \mathcal H \boldsymbol p_n`
    misses, and a lower panel shows the ratio :math:`\mathcal I/\mathcal I_2` on a logarithmic
    :math:`\varepsilon` axis, with the band :math:`0.9 \le \mathcal I/\mathcal I_2 \le 1.1`
    shaded and the lines :math:`\mathcal I/\mathcal I_2 = 1` and :math:`0` drawn. The ratio
    tends to 1 as :math:`\varepsilon \to 0`; the dashed curve exceeds the cross term exactly
    where :math:`\mathcal I/\mathcal I_2 < 0` or :math:`\mathcal I/\mathcal I_2 > 2`.

    Returns
    -------
    matplotlib.figure.Figure
        The upper axes (``fig.axes[0]``) holds lines in the order of :data:`TERM_NAMES`, then
        the remainder, then (with ``interaction``) the coupling beyond the cross term; with
        ``interaction`` the lower axes (``fig.axes[1]``) holds the ratio as its first line.
    """
    expansion = _default_expansion(expansion)
    if point is None:
        point = demo_point(len(expansion.x_m))
    interaction = check_flag(interaction, "interaction")
    eps = _eps(np.geomspace(1e-2, 3.0, 30) if eps is None else eps)
    sizes = term_sizes(expansion, point, eps)
    if interaction:
        fig, (ax, ax_ratio) = new_figure(
            nrows=2,
            width=7.0,
            height=7.0,
            sharex=True,
            gridspec_kw={"height_ratios": [1.6, 1.0]},
        )
    else:
        fig, ax = new_figure(width=7.0, height=4.4)
    for k, name in enumerate((*TERM_NAMES, "remainder")):
        label = _TERM_LABELS.get(name, r"remainder $r(\varepsilon)$")
        y = np.where(sizes[name] > 0, sizes[name], np.nan)
        ax.loglog(
            eps,
            y,
            lw=2.2 if name in ("cross", "remainder") else 1.4,
            label=label,
            marker="o" if name == "remainder" else None,  # line_style(6) repeats (0)'s "-"
            markevery=0.08,
            **line_style(k),
        )
    ax.set(
        ylabel="absolute value of the term", title="Size of each term of the expansion along a ray"
    )
    if not interaction:
        ax.set_xlabel(r"perturbation size $\varepsilon$")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
        return fig
    pair = interaction_along_ray(expansion, point, eps)
    beyond = pair["beyond_cross"]
    ax.loglog(
        eps,
        np.where(beyond > 0, beyond, np.nan),
        lw=2.2,
        color="black",
        linestyle="--",
        marker="x",  # line_style(1) is dashed too
        markevery=0.08,
        label=r"$|\mathcal{I} - \boldsymbol{p}_m^\top \mathcal{H} \boldsymbol{p}_n|$",
    )
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pair["cross"] != 0, pair["interaction"] / pair["cross"], np.nan)
    ax_ratio.semilogx(
        eps,
        ratio,
        lw=2.2,
        color="black",
        label=r"$\mathcal{I} / \mathcal{I}_2$",
    )
    ax_ratio.axhspan(0.9, 1.1, color=PALETTE[5], alpha=0.25, lw=0, label="within 10%")
    ax_ratio.axhline(1.0, color="0.3", lw=1.0, linestyle=":")
    ax_ratio.axhline(0.0, color="0.3", lw=1.0)
    ax_ratio.set(
        xlabel=r"perturbation size $\varepsilon$",
        ylabel="interaction / cross term",
        title="How well the cross term describes the interaction",
    )
    ax_ratio.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
