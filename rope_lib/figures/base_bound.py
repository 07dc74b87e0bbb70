r"""The figures of chapter 7 (``chapters/07_base_bound.md``): the base bounds the context length.

One function per figure of the chapter, drawing what :mod:`rope_lib.base_bound` computes: the
similarity margin :math:`B_m` and its horizon, the Monte Carlo check of the expected similarity
gap, the horizon against the base, and the table of minimum bases against the published ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validate import check_base, check_dim, check_elements, check_positive_int, check_seed
from ..base_bound import (
    _MC_WORK,
    DEFAULT_MAX_STEPS,
    MAX_CONTEXT_LENGTH,
    _check_length,
    _mean,
    max_context,
    min_base,
    similarity_gap_expected,
    similarity_gap_monte_carlo,
    similarity_margin,
)
from ..base_table import PUBLISHED_MIN_BASE, TABLE_MAX_STEPS, _check_rows, min_base_table
from .style import line_style, new_figure

__all__ = [
    "plot_similarity_margin",
    "plot_monte_carlo_gap",
    "plot_horizon_vs_base",
    "plot_min_base_table",
]


def plot_similarity_margin(d: int = 128, base: float = 10000.0, max_distance: int | None = None):
    r"""Figure: :math:`B_m` against the distance m, with the horizon
    :func:`max_context` marked (the first m with :math:`B_m < 0`).

    ``max_distance=None`` shows :math:`0 \le m \le 1.5\times` the horizon (at most
    ``rope_lib.base_bound.MAX_CONTEXT_LENGTH`` = 2**22, also the largest ``max_distance`` accepted)."""
    d = check_dim(d)
    base = check_base(base)
    if max_distance is not None:
        max_distance = check_positive_int(
            max_distance, "max_distance", maximum=MAX_CONTEXT_LENGTH, hint="a figure needs fewer"
        )
    horizon = max_context(base, d)
    top = min(int(1.5 * horizon) + 1, MAX_CONTEXT_LENGTH) if max_distance is None else max_distance
    m = np.arange(top + 1)
    fig, ax = new_figure()
    ax.plot(m, similarity_margin(m, d, base), lw=0.8, label="$B_m$", **line_style(0))
    ax.axhline(0.0, color="0.3", lw=0.8)
    if horizon <= top:
        ax.axvline(
            horizon,
            lw=1.2,
            label=f"horizon: first $B_m<0$ at m = {horizon}",
            **line_style(1),
        )
    ax.set(
        xlabel="relative distance $m$",
        ylabel=r"$B_m = \sum_i \cos(m\theta_i)$",
        title=f"Similarity margin, d = {d}, base = {base:g}",
    )
    ax.legend(loc="upper right")
    return fig


def plot_monte_carlo_gap(
    d: int = 16,
    base: float = 100.0,
    max_distance: int = 60,
    n_samples: int = 20000,
    mean_q: Any = None,
    mean_k: Any = None,
    seed: int = 0,
):
    r"""Figure, two panels of :math:`\delta_m/(2\sigma^2)` against m, with 95% intervals.

    Left: equal (zero) means, Monte Carlo with :math:`\varepsilon = 0` and with
    :math:`\varepsilon \sim \mathcal N(0, 2^2 I)`, on top of :math:`B_m`. Right: unequal
    means ``mean_q``, ``mean_k`` (``None``: fixed standard normal vectors drawn from
    ``default_rng(seed + 10)``); Monte Carlo against the closed form of
    :func:`similarity_gap_expected`, and :math:`B_m` for comparison. ``max_distance`` is at
    most 2**16 and ``n_samples x (max_distance + 1)`` at most ``MAX_ELEMENTS``."""
    d = check_dim(d)
    base = check_base(base)
    max_distance = check_positive_int(
        max_distance, "max_distance", maximum=1 << 16, hint="a figure of error bars needs fewer"
    )
    m = np.arange(max_distance + 1)
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    check_elements(
        _MC_WORK * n_samples * (d + m.size),
        f"the working arrays of the Monte Carlo estimates (about {_MC_WORK} x n_samples x "
        f"(d + max_distance + 1) = {_MC_WORK} x {n_samples} x {d + m.size} numbers)",
        "pass a smaller n_samples",
    )
    seed = check_seed(seed)
    if mean_q is not None:
        mean_q = _mean(mean_q, d, "mean_q")
    if mean_k is not None:
        mean_k = _mean(mean_k, d, "mean_k")
    rng = np.random.default_rng(seed + 10)
    mu_q = rng.standard_normal(d) if mean_q is None else _mean(mean_q, d, "mean_q")
    mu_k = rng.standard_normal(d) if mean_k is None else _mean(mean_k, d, "mean_k")
    fig, axes = new_figure(ncols=2, width=10.0, height=3.8, sharey=True)
    exact = similarity_margin(m, d, base)
    left, right = axes
    left.plot(m, exact, label="$B_m$", **line_style(0))
    for j, (scale, offset) in enumerate(((0.0, -0.15), (2.0, 0.15))):
        est, half = similarity_gap_monte_carlo(
            m, d, base, n_samples=n_samples, eps_scale=scale, seed=seed + j
        )
        style = line_style(j + 1)
        left.errorbar(
            m + offset,
            est,
            yerr=half,
            fmt="os"[j],  # a marker shape per perturbation: readable without colour
            ms=3,
            color=style["color"],
            lw=0.8,
            label=rf"Monte Carlo, $\varepsilon$ std {scale:g}",
        )
    left.set_title(r"equal means $\mu_q = \mu_k$")
    shifted = similarity_gap_expected(m, d, base, mean_q=mu_q, mean_k=mu_k)
    est, half = similarity_gap_monte_carlo(
        m, d, base, n_samples=n_samples, mean_q=mu_q, mean_k=mu_k, seed=seed + 2
    )
    right.plot(m, exact, label="$B_m$", **line_style(0))
    right.plot(m, shifted, label="closed form, unequal means", **line_style(3))
    right.errorbar(
        m,
        est,
        yerr=half,
        fmt="o",
        ms=3,
        lw=0.8,
        color=line_style(2)["color"],
        label="Monte Carlo",
    )
    right.set_title(r"unequal means $\mu_q \neq \mu_k$")
    for ax in axes:
        ax.axhline(0.0, color="0.3", lw=0.8)
        ax.set_xlabel("relative distance $m$")
        ax.legend(loc="upper right", fontsize=8)
    left.set_ylabel(r"$\delta_m / (2\sigma^2)$")
    fig.suptitle(f"d = {d}, base = {base:g}, {n_samples} draws, 95% intervals")
    return fig


def plot_horizon_vs_base(
    d: int = 128,
    base_range: tuple[float, float] = (3000.0, 30000.0),
    n_bases: int = 1500,
    lengths: Sequence[int] = (2048, 4096),
):
    r"""Figure: the horizon :func:`max_context` against the base on a fine log grid, with
    horizontal lines at the context lengths ``lengths`` and :func:`min_base` of each marked.

    A base is feasible for L when the curve is at or above the line at L; the curve is not
    monotone, so the feasible set is a union of windows. ``n_bases`` is at most 10**5 (one
    :func:`max_context` scan per base)."""
    d = check_dim(d)
    if isinstance(base_range, str) or not isinstance(base_range, Sequence | np.ndarray):
        raise TypeError(f"base_range must be a pair (low, high) of bases, got {base_range!r}")
    if len(base_range) != 2:
        raise ValueError(f"base_range must be a pair (low, high) of bases, got {base_range!r}")
    lo, hi = (check_base(b, "base_range") for b in base_range)
    if not lo < hi:
        raise ValueError(f"base_range must be increasing, got {base_range!r}")
    n_bases = check_positive_int(
        n_bases, "n_bases", minimum=2, maximum=10**5, hint="one max_context scan per base"
    )
    if isinstance(lengths, str) or not isinstance(lengths, Sequence | np.ndarray):
        raise TypeError(f"lengths must be a sequence of context lengths, got {lengths!r}")
    lengths = [_check_length(length, "lengths") for length in lengths]
    bases = np.geomspace(lo, hi, n_bases)
    horizons = np.array([max_context(float(b), d) for b in bases])
    fig, ax = new_figure(width=7.5, height=4.0)
    ax.plot(bases, horizons, lw=0.8, label="max_context(base)", **line_style(0))
    for j, length in enumerate(lengths):
        style = line_style(j + 1)
        ax.axhline(
            length, lw=1.0, color=style["color"], ls=(0, (2 + 4 * j, 2)), label=f"L = {length}"
        )
        b_min = min_base(length, d)
        if lo <= b_min <= hi:
            ax.plot(
                [b_min],
                [length],
                marker="v^<>"[j % 4],  # a triangle per length: readable without colour
                ms=8,
                color=style["color"],
                linestyle="none",
                label=f"min_base({length}) = {b_min:.5g}",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set(
        xlabel="base $b$",
        ylabel="horizon: first $m$ with $B_m < 0$",
        title=f"The horizon is not monotone in the base (d = {d})",
    )
    ax.legend(loc="upper left", fontsize=9)
    return fig


def plot_min_base_table(rows: Sequence[dict] | None = None, d: int = 128):
    r"""Figure: :func:`min_base` against L (log axes) with the published values of
    :data:`rope_lib.base_table.PUBLISHED_MIN_BASE` (for ``d = 128``, the only head dimension they are for);
    published values that fail :math:`B_m \ge 0` for some :math:`m < L` are drawn as
    crosses. ``rows=None`` reads :func:`min_base_table` (cached for ``d = 128``; for another
    d it is computed with the default budget of :func:`min_base_search` (50,000 steps) per row, so the call
    finishes or refuses within about 30 s per row)."""
    d = check_dim(d)
    if rows is None:
        # The shipped table (d = 128) is cached; other d are computed within the default
        # budget of min_base_search, so the figure finishes (or refuses) within about 30 s.
        budget = TABLE_MAX_STEPS if d == 128 else DEFAULT_MAX_STEPS
        try:
            rows = min_base_table(d=d, max_steps=budget)
        except ValueError as error:
            if "max_steps" not in str(error):
                raise
            raise ValueError(
                f"the table for d = {d} does not fit the figure's budget ({error}); compute "
                f"it first with min_base_table(d={d}, max_steps=...) and pass it as rows"
            ) from error
    rows = _check_rows(rows, "rows", ("L", "base"))
    lengths = np.array([r["L"] for r in rows])
    ours = np.array([r["base"] for r in rows])
    fig, ax = new_figure(width=7.0, height=4.2)
    ax.plot(lengths, ours, marker="o", label="min_base (this book)", **line_style(0))
    published = ("Men et al., Table 2", "Su, archive 10122") if d == 128 else ()
    for j, name in enumerate(published):
        style = line_style(j + 1)
        ok_x, ok_y, bad_x, bad_y = [], [], [], []
        for length in lengths:
            k = int(length).bit_length() - 1
            if k not in PUBLISHED_MIN_BASE:
                continue
            value = PUBLISHED_MIN_BASE[k][j]
            feasible = max_context(value, d) >= length
            (ok_x if feasible else bad_x).append(length * (1.06 if j else 0.94))
            (ok_y if feasible else bad_y).append(value)
        ax.plot(
            ok_x,
            ok_y,
            marker="s" if j == 0 else "^",
            linestyle="none",
            mfc="none",
            color=style["color"],
            label=f"{name} (feasible)",
        )
        if bad_x:
            ax.plot(
                bad_x,
                bad_y,
                marker="x" if j == 0 else "+",
                ms=9,
                mew=2,
                linestyle="none",
                color=style["color"],
                label=f"{name} (infeasible)",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(
        xlabel="context length $L$",
        ylabel="smallest base $b$",
        title=f"Smallest base with $B_m \\geq 0$ for all $m < L$ (d = {d})",
    )
    ax.legend(loc="upper left", fontsize=9)
    return fig
