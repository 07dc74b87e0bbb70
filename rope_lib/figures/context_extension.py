r"""The figures of chapter 8 (``chapters/08_context_extension.md``): running a model past its
training length.

Two figures, drawing what :mod:`rope_lib.context_extension` computes: the wavelengths of the
pairs under each extension method, and the running minimum of the scaled margin with each
method's horizon.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import check_base, check_dim, check_elements, check_positive_int
from ..context_extension import (
    EXTENSION_METHODS,
    _check_context,
    _check_factor,
    _check_method,
    scaled_margin,
    scaled_theta,
)
from .style import line_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_wavelengths", "plot_margins"]

#: Largest ``max_distance`` of :func:`plot_margins` (a table of d/2 x 2**22 phases at most).
MAX_PLOT_DISTANCE = 1 << 22


_LABELS = {
    "none": "none (original)",
    "linear": "linear (PI)",
    "ntk": "NTK-aware",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "Llama 3.1",
}


def _check_methods(methods: Any) -> list[str]:
    what = f"methods must be a non-empty sequence of names from {list(EXTENSION_METHODS)}"
    if isinstance(methods, str) or not isinstance(methods, Sequence | np.ndarray):
        raise TypeError(f"{what}, got {methods!r}")
    if len(methods) == 0:
        raise ValueError(f"{what}, got an empty sequence")
    return [_check_method(m, "methods entries") for m in methods]


def _check_figure(d: Any, base: Any, factor: Any, original_context: Any) -> tuple:
    """The arguments shared by the figures, checked before anything is computed."""
    return check_dim(d), check_base(base), _check_factor(factor), _check_context(original_context)


def plot_wavelengths(
    d: int = 128,
    base: float = 500000.0,
    factor: float = 8.0,
    original_context: int = 8192,
    methods: Sequence[str] = ("none", "linear", "ntk", "yarn", "llama3"),
) -> Figure:
    r"""Figure: period (wavelength) :math:`T_i' = 2\pi/\theta_i'` against the pair index
    :math:`i` for each method (log scale), with the training context :math:`L` and the
    target :math:`sL` drawn as horizontal lines.

    ``"dynamic"`` is drawn at ``seq_len = factor * original_context``.
    """
    d, base, factor, original_context = _check_figure(d, base, factor, original_context)
    methods = _check_methods(methods)
    if "dynamic" in methods:
        _check_context(int(round(factor * original_context)), "factor * original_context")
    fig, ax = new_figure(width=7.2, height=4.2)
    i = np.arange(d // 2)
    for k, method in enumerate(methods):
        extra = {"seq_len": int(round(factor * original_context))} if method == "dynamic" else {}
        th, _ = scaled_theta(d, base, method, factor, original_context, **extra)
        ax.plot(i, 2.0 * np.pi / th, label=_LABELS[method], lw=1.8, **line_style(k))
    for value, text in ((original_context, "$L$"), (factor * original_context, "$sL$")):
        ax.axhline(value, color="0.4", lw=0.8, linestyle=":")
        ax.annotate(
            text,
            (0.01, value),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize=10,
            color="0.3",
        )
    ax.set_yscale("log")
    ax.set(
        xlabel="pair index $i$",
        ylabel=r"wavelength $2\pi/\theta_i'$ (positions)",
        title=f"d = {d}, b = {base:g}, L = {original_context}, s = {factor:g}",
    )
    ax.legend(loc="upper left", bbox_to_anchor=(0.04, 1.0))
    return fig


def plot_margins(
    d: int = 128,
    base: float = 500000.0,
    factor: float = 8.0,
    original_context: int = 8192,
    max_distance: int = 300_000,
    methods: Sequence[str] = ("none", "linear", "ntk", "yarn", "llama3"),
    n_points: int = 1500,
) -> Figure:
    r"""Figure: the worst margin so far, :math:`\min_{0 \le m' \le m} B_{m'}'`, against
    :math:`m` (log axis) for each method, with each method's horizon (the first :math:`m`
    with :math:`B_m' < 0`, :func:`scaled_horizon`) marked by a dot and the target context
    :math:`sL` by a dotted line.

    :math:`B_m'` itself oscillates too fast to read; its running minimum crosses zero
    exactly at the horizon. The curve is drawn at ``n_points`` distances spaced evenly on
    the log axis (exact running minima at those distances). ``"dynamic"`` uses
    ``seq_len = s L``. ``max_distance`` is at most ``MAX_PLOT_DISTANCE`` = 2**22 (and
    ``max_distance * d / 2`` at most ``MAX_ELEMENTS``), ``n_points`` at most 10**5.
    """
    d, base, factor, original_context = _check_figure(d, base, factor, original_context)
    methods = _check_methods(methods)
    if "dynamic" in methods:
        _check_context(int(round(factor * original_context)), "factor * original_context")
    max_distance = check_positive_int(
        max_distance, "max_distance", maximum=MAX_PLOT_DISTANCE, hint="a figure needs fewer"
    )
    check_elements(
        (max_distance + 1) * (d // 2),
        f"the phases of max_distance = {max_distance} distances x d/2 frequencies",
        "pass a smaller max_distance",
    )
    n_points = check_positive_int(
        n_points, "n_points", minimum=2, maximum=10**5, hint="a figure needs fewer"
    )
    m = np.arange(max_distance + 1)
    shown = np.unique(np.geomspace(1, max_distance, n_points).astype(np.int64))
    fig, ax = new_figure(width=7.2, height=4.0)
    for k, method in enumerate(methods):
        extra = {"seq_len": int(round(factor * original_context))} if method == "dynamic" else {}
        worst = np.minimum.accumulate(
            scaled_margin(m, d, base, method, factor, original_context, **extra)
        )
        style = line_style(k)
        ax.plot(shown, worst[shown], label=_LABELS[method], lw=1.6, **style)
        negative = np.flatnonzero(worst < 0)
        if negative.size:
            ax.plot([negative[0]], [0.0], "o", color=style["color"], ms=6, zorder=3)
    ax.axhline(0.0, color="0.2", lw=0.8)
    ax.axvline(factor * original_context, color="0.4", lw=0.8, linestyle=":")
    ax.annotate(
        "$sL$",
        (factor * original_context, 0.97),
        xycoords=("data", "axes fraction"),
        ha="right",
        va="top",
        fontsize=10,
        color="0.3",
    )
    ax.set_xscale("log")
    ax.set(
        xlabel="distance $m$",
        ylabel=r"running minimum of $B_m'$",
        title=f"d = {d}, b = {base:g}, L = {original_context}, s = {factor:g}",
    )
    ax.legend(loc="upper right")
    return fig
