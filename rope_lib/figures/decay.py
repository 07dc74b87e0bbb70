"""The figures of chapter 6 (``chapters/06_decay.md``): in what sense RoPE scores decay.

One function per figure of the chapter, drawing what :mod:`rope_lib.decay` computes (the
diagonal-:math:`H` figure uses :func:`rope_lib.sinusoidal.diagonal_h_parts`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validate import (
    MAX_POSITION,
    check_base,
    check_dim,
    check_elements,
    check_positive_int,
    check_real,
    check_seed,
)
from ..decay import (
    _check_n_samples,
    _default_half_width,
    _parse_schedule,
    exp_sum,
    integral_score,
    monte_carlo_score,
    ones_score,
    quarter_period,
    roformer_bound,
    schedule_integral,
    schedule_score,
    undersampled_terms,
    windowed_mean_score,
)
from ..frequencies import theta
from .style import MAX_FIGURE_POINTS, line_style, new_figure

__all__ = [
    "plot_counterexamples",
    "plot_ones_score",
    "plot_windowed_mean",
    "plot_quarter_period",
    "plot_sum_vs_integral",
    "plot_schedules",
    "plot_roformer_bound",
    "plot_monte_carlo",
    "plot_diagonal_h",
]


#: The schedules of the comparison figure, as strings understood by :func:`schedule_theta`.
DEFAULT_SCHEDULES = ("10000^-t", "1000^-t", "t^2", "t^4", "t")


#: Largest number of panels or curves of one figure (``ds``, ``schedules``).
MAX_FIGURE_CURVES = 16


#: Largest ``n_points`` of :func:`plot_schedules` (one quadrature per point and power schedule).
MAX_SCHEDULE_POINTS = 20_000


def _grid_distances(
    max_distance: Any, d: int | None = None, name: str = "max_distance"
) -> np.ndarray:
    r"""Integer distances ``0 .. max_distance``, bounded before anything is allocated.

    At most ``MAX_FIGURE_POINTS`` distances, and with ``d`` given, at most ``MAX_ELEMENTS``
    phases :math:`x\theta_i` (``(max_distance + 1) * d/2``).
    """
    max_distance = check_positive_int(
        max_distance,
        name,
        maximum=MAX_FIGURE_POINTS - 1,
        hint=f"a curve of a figure has at most MAX_FIGURE_POINTS = {MAX_FIGURE_POINTS} points",
    )
    if d is not None:
        check_elements(
            (max_distance + 1) * (d // 2),
            f"the phases of the figure ({name} + 1 distances x d/2)",
            hint=f"lower {name} or d",
        )
    return np.arange(max_distance + 1)


def _figure_ds(ds: Any, name: str = "ds", maximum: int = MAX_FIGURE_CURVES) -> list[int]:
    """``ds`` as a list of 1 to ``maximum`` head dimensions, each checked by name."""
    if isinstance(ds, (str, bytes)) or not hasattr(ds, "__iter__"):
        raise TypeError(f"{name} must be a sequence of even head dimensions, got {ds!r:.60}")
    if hasattr(ds, "__len__") and len(ds) > maximum:
        raise ValueError(f"{name} must hold at most {maximum} head dimensions, got {len(ds)}")
    ds = list(itertools.islice(iter(ds), maximum + 1))  # an endless iterator cannot hang
    if not ds:
        raise ValueError(f"{name} must hold at least one head dimension")
    if len(ds) > maximum:
        raise ValueError(f"{name} must hold at most {maximum} head dimensions, got {len(ds)}")
    return [check_dim(d, f"{name}[{i}]") for i, d in enumerate(ds)]


def plot_counterexamples(d: int = 128, base: float = 10000.0, max_distance: int = 60):
    r"""Figure: :math:`g(x)/d` for :math:`\theta_i = 0`, :math:`\theta_i = 1` and RoPE's
    :math:`\theta_i = b^{-2i/d}`, for integer distances 0..max_distance."""
    d = check_dim(d)
    base = check_base(base)
    x = _grid_distances(max_distance, d)
    curves = [
        (r"$\theta_i = 0$: $g = d$", 2.0 * np.real(exp_sum(x, np.zeros(d // 2))) / d),
        (r"$\theta_i = 1$: $g = d\cos x$", 2.0 * np.real(exp_sum(x, np.ones(d // 2))) / d),
        (rf"$\theta_i = {base:g}^{{-2i/d}}$", ones_score(x, d, base) / d),
    ]
    fig, ax = new_figure()
    for k, (label, y) in enumerate(curves):
        ax.plot(x, y, label=label, **line_style(k))
    ax.set(
        xlabel="relative distance $x$",
        ylabel="$g(x)/d$",
        title=f"All-ones score, d = {d}: three choices of the frequencies",
    )
    fig.legend(loc="outside lower center", ncols=3)
    return fig


def plot_ones_score(
    ds: Sequence[int] = (4, 256), base: float = 10000.0, max_distance: int | None = None
):
    r"""Figure: one panel per d, :math:`g(x)` against x (left axis), the slowest term
    :math:`2\cos(x\theta_{d/2-1})` on a twin right axis, and the quarter period
    :math:`T_{d/2-1}/4` marked by a dotted vertical line.

    ``max_distance=None`` shows each panel up to its quarter period (at least 2000).
    ``fig.axes`` holds the main panels first, then their twins in the same order.
    ``ds`` holds 1 to ``MAX_FIGURE_CURVES`` (16) head dimensions; each panel shows at most
    ``MAX_FIGURE_POINTS`` (2**22) distances and ``MAX_ELEMENTS`` phases (distances x d/2)."""
    ds = _figure_ds(ds)
    base = check_base(base)
    tops = []
    for d in ds:
        if max_distance is not None:
            top = max_distance
        else:
            quarter = quarter_period(d, base)
            if quarter > MAX_FIGURE_POINTS - 1:
                raise ValueError(
                    f"max_distance=None shows each panel up to its quarter period, "
                    f"{quarter:.3g} for d = {d} and base = {base:g}: more than "
                    f"MAX_FIGURE_POINTS = {MAX_FIGURE_POINTS}; pass max_distance"
                )
            top = max(2000, int(np.ceil(quarter)))
        _grid_distances(top, d)  # bounds checked for every panel before any is drawn
        tops.append(top)
    fig, axes = new_figure(ncols=len(ds), width=4.6 * len(ds), height=3.8)
    axes = np.atleast_1d(axes)
    slow_style = line_style(1)
    for ax, d, top in zip(axes, ds, tops, strict=True):
        quarter = quarter_period(d, base)
        x = _grid_distances(top, d)
        ax.plot(x, ones_score(x, d, base), label="$g(x)$", lw=0.6, **line_style(0))
        twin = ax.twinx()
        slow = 2.0 * np.cos(x * theta(d, base)[-1])
        twin.plot(x, slow, label=r"$2\cos(x\theta_{d/2-1})$ (right axis)", lw=2.0, **slow_style)
        twin.set_ylim(-2.2, 2.2)
        twin.set_ylabel(r"slowest term $2\cos(x\theta_{d/2-1})$", color=slow_style["color"])
        twin.tick_params(axis="y", colors=slow_style["color"])
        twin.spines["right"].set_visible(True)
        if quarter <= top:
            ax.axvline(quarter, color="0.3", lw=1, linestyle=":")
            left = quarter < 0.6 * top
            ax.annotate(
                f" $T_{{d/2-1}}/4 \\approx {quarter:.0f}$ ",
                (quarter, 0.02),
                xycoords=("data", "axes fraction"),
                ha="left" if left else "right",
                va="bottom",
                fontsize=9,
                backgroundcolor="white",
            )
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # keep 5-digit tick labels apart
        ax.set(xlabel="relative distance $x$", ylabel="$g(x)$", title=f"d = {d}, base = {base:g}")
    handles = [*axes[0].get_legend_handles_labels()[0], *fig.axes[len(ds)].get_lines()]
    fig.legend(handles=handles, loc="outside lower center", ncols=2)
    return fig


def plot_windowed_mean(
    d: int = 256,
    base: float = 10000.0,
    max_distance: int = 40_000,
    half_width: int | None = None,
):
    r"""Figure: the all-ones score, its local mean and the continuum score, two panels.

    For integer distances 0..max_distance: :func:`ones_score` :math:`g(x)` (thin), the
    windowed mean :math:`\bar g_w(x)` of :func:`windowed_mean_score` (thick, ``half_width``
    as there) and the continuum score :math:`d\,(\mathrm{Ci}(x) - \mathrm{Ci}(x/b))/\ln b` of
    :func:`integral_score` (dashed), with dotted vertical lines at the quarter period
    :math:`T_{d/2-1}/4` and at its limit :math:`\pi b/2`, and a marker at the smallest
    windowed mean. Top panel: the whole range of the score; bottom panel: the same curves
    with the vertical axis zoomed on the trough of the local mean.

    ``max_distance`` is at most ``MAX_FIGURE_POINTS - 1`` and ``(max_distance + 1) * d/2`` at
    most ``MAX_ELEMENTS``; ``half_width`` is ``None`` or an integer in [0, ``MAX_POSITION``].
    """
    d = check_dim(d)
    base = check_base(base)
    if half_width is None:
        h = _default_half_width(d, base)
    else:
        h = check_positive_int(half_width, "half_width", minimum=0, maximum=MAX_POSITION)
    x = _grid_distances(max_distance, d)
    g = ones_score(x, d, base)
    local = windowed_mean_score(x, d, base, h)
    continuum = integral_score(x, d, base)
    i_min = int(np.argmin(local))
    marks = [
        (quarter_period(d, base), r"$T_{d/2-1}/4$"),
        (0.5 * np.pi * base, r"$\pi b/2$"),
    ]
    fig, axes = new_figure(nrows=2, width=7.0, height=5.8, sharex=True)
    for ax in axes:
        ax.plot(x, g, label="$g(x)$", lw=0.4, alpha=0.6, **line_style(0))
        ax.plot(
            x,
            local,
            label=f"local mean $\\bar g_w(x)$, window {2 * h + 1}",
            lw=2.6,
            **line_style(1),
        )
        ax.plot(  # drawn last: it runs under the local mean from x ~ 2000 on
            x,
            continuum,
            label=r"continuum $d\,\mathrm{Re}\int_0^1 e^{ixb^{-t}}dt$",
            lw=1.1,
            color="black",
            linestyle=(0, (2, 1)),  # short dashes: the local mean has line_style(1)'s "--"
        )
        ax.axhline(0.0, color="0.5", lw=0.8)
        for k, (pos, label) in enumerate(marks):
            if pos <= x[-1]:
                ax.axvline(pos, color="0.3", lw=1, linestyle=":")
                if ax is axes[0]:
                    ax.annotate(
                        label,
                        (pos, 0.97 - 0.12 * k),
                        xycoords=("data", "axes fraction"),
                        ha="left" if k == 1 else "right",
                        va="top",
                        fontsize=9,
                        backgroundcolor="white",
                    )
        ax.set_ylabel("score")
    axes[1].plot(x[i_min], local[i_min], "o", color="black", ms=5, zorder=5)
    axes[1].annotate(
        f"smallest local mean {local[i_min]:.1f} at $x = {x[i_min]}$",
        (x[i_min], local[i_min]),
        xytext=(0, -18),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=9,
        backgroundcolor="white",
    )
    depth = max(4.0 * abs(float(local.min())), 1.0)
    axes[1].set_ylim(-depth, depth)
    axes[0].set_title(f"All-ones score and its local mean, d = {d}, base = {base:g}")
    axes[1].set_title("the same, vertical axis zoomed on the trough", fontsize=10)
    axes[1].set_xlabel("relative distance $x$")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig


def plot_quarter_period(
    ds: Sequence[int] = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), base: float = 10000.0
):
    r"""Figure: :math:`T_{d/2-1}/4 = \frac\pi2 b^{(d-2)/d}` against d (log axes), with
    its limit :math:`\frac\pi2 b` and LLaMA's head dimension 128 marked. ``ds`` holds 1 to
    ``MAX_FIGURE_POINTS`` even head dimensions."""
    ds = np.array(_figure_ds(ds, maximum=MAX_FIGURE_POINTS))
    base = check_base(base)
    y = np.array([quarter_period(int(d), base) for d in ds])
    fig, ax = new_figure(width=6.0, height=3.4)
    ax.plot(ds, y, marker="o", label=r"$T_{d/2-1}/4$", **line_style(0))
    ax.axhline(0.5 * np.pi * base, label=r"limit $\frac{\pi}{2} b$", **line_style(1))
    ax.axvline(128, color="0.4", lw=1, linestyle=":")
    ax.annotate(
        "head dim 128",
        (128, 0.05),
        xycoords=("data", "axes fraction"),
        fontsize=9,
        ha="right",
        rotation=90,
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(
        xlabel="head dimension $d$",
        ylabel="quarter of the slowest period",
        title=f"Decay horizon against d, base = {base:g}",
    )
    ax.legend(loc="lower right")
    return fig


def plot_sum_vs_integral(d: int = 128, base: float = 10000.0, max_distance: int = 100_000):
    r"""Figure: the discrete :math:`g(x)` against :math:`d\,\mathrm{Re}\int_0^1
    e^{\mathrm i x b^{-t}}dt` for integer x in [1, max_distance] (log x axis), and their
    difference in a second panel with the random-phase envelope
    :math:`\pm\sqrt{2\nu(x)}` of :func:`undersampled_terms` and the Nyquist distance
    :math:`x_* = \pi d/(2\ln b)`."""
    d = check_dim(d)
    base = check_base(base)
    x = _grid_distances(max_distance, d)[1:]
    g = ones_score(x, d, base)
    integral = integral_score(x, d, base)
    fig, (ax, ax2) = new_figure(nrows=2, width=7.0, height=5.2, sharex=True)
    ax.plot(x, g, label="sum $g(x)$", lw=0.6, **line_style(0))
    ax.plot(
        x,
        integral,
        label=r"integral $d\,\mathrm{Re}\int_0^1 e^{ixb^{-t}}dt$",
        lw=1.8,
        **line_style(1),
    )
    ax.set(ylabel="score", title=f"Sum against integral, d = {d}, base = {base:g}")
    ax.legend(loc="upper right")
    ax2.plot(x, g - integral, lw=0.6, label="sum - integral", **line_style(2))
    envelope = np.sqrt(2.0 * undersampled_terms(x, d, base))
    ax2.plot(x, envelope, lw=1.4, label=r"$\pm\sqrt{2\nu(x)}$", **line_style(3))
    ax2.plot(x, -envelope, lw=1.4, **line_style(3))
    ax2.axvline(
        np.pi * d / (2 * np.log(base)),
        color="0.3",
        lw=1,
        linestyle="--",  # the envelope is dotted (line_style(3))
        label=r"$x = \pi d / (2\ln b)$",
    )
    ax2.set_xscale("log")
    ax2.set(xlabel="relative distance $x$", ylabel="difference")
    ax2.legend(loc="upper left")
    return fig


def _figure_schedules(schedules: Any) -> list[str]:
    """``schedules`` as a list of 1 to ``MAX_FIGURE_CURVES`` valid schedule strings."""
    if isinstance(schedules, (str, bytes)) or not hasattr(schedules, "__iter__"):
        raise TypeError(
            f"schedules must be a sequence of schedule strings such as ('10000^-t', 't^2'), "
            f"got {schedules!r:.60}"
        )
    items = list(itertools.islice(iter(schedules), MAX_FIGURE_CURVES + 1))
    if not items:
        raise ValueError("schedules must hold at least one schedule string")
    if len(items) > MAX_FIGURE_CURVES:
        raise ValueError(f"schedules must hold at most {MAX_FIGURE_CURVES} schedule strings")
    for i, schedule in enumerate(items):
        _parse_schedule(schedule, f"schedules[{i}]")
    return items


def plot_schedules(
    d: int | None = None,
    schedules: Sequence[str] = DEFAULT_SCHEDULES,
    short_max: float = 60.0,
    long_max: float = 20000.0,
    n_points: int = 400,
):
    r"""Figure: score per dimension for several schedules :math:`\theta_t`, short range
    (linear x) and long range (log x).

    ``d=None`` plots the continuum :math:`\mathrm{Re}\int_0^1 e^{\mathrm i x\theta_t}dt`
    (:func:`schedule_integral`); an even ``d`` plots the discrete
    :math:`g(x)/d = \frac2d\sum_i\cos(x\theta_{2i/d})` (:func:`schedule_score`) at integer x.

    ``schedules`` holds 1 to ``MAX_FIGURE_CURVES`` (16) schedule strings (see
    :func:`schedule_theta`); ``1 < short_max < long_max``, ``short_max`` below
    ``MAX_FIGURE_POINTS`` (the discrete short range has one point per integer) and ``long_max``
    at most ``MAX_POSITION``; ``n_points`` from 10 to ``MAX_SCHEDULE_POINTS`` (20000)."""
    if d is not None:
        d = check_dim(d)
    parsed = _figure_schedules(schedules)
    short_max = check_real(
        short_max, "short_max", low=1.0, high=MAX_FIGURE_POINTS - 1, low_open=True
    )
    long_max = check_real(long_max, "long_max", low=1.0, high=MAX_POSITION, low_open=True)
    if not short_max < long_max:
        raise ValueError(
            f"short_max and long_max must satisfy 1 < short_max < long_max, got "
            f"short_max = {short_max:g} and long_max = {long_max:g}"
        )
    n_points = check_positive_int(
        n_points,
        "n_points",
        minimum=10,
        maximum=MAX_SCHEDULE_POINTS,
        hint="the continuum curves of power schedules need one quadrature per point",
    )
    if d is not None:
        for what, count in (
            ("short_max + 1", int(short_max) + 1),
            ("20 * n_points", 20 * n_points),
        ):
            check_elements(
                count * (d // 2) * len(parsed),
                f"the phases of the figure ({what} distances x d/2 x len(schedules))",
                hint="lower short_max, n_points or d",
            )
    if d is None:
        xs = np.linspace(0.0, short_max, n_points)
        xl = np.geomspace(1.0, long_max, n_points)
    else:
        xs = np.arange(int(short_max) + 1)
        xl = np.unique(np.round(np.geomspace(1.0, long_max, 20 * n_points)).astype(np.int64))
    fig, (ax1, ax2) = new_figure(ncols=2, width=10.0, height=3.8)
    for k, schedule in enumerate(parsed):
        if d is None:
            ys, yl = schedule_integral(xs, schedule), schedule_integral(xl, schedule)
        else:
            ys, yl = schedule_score(xs, d, schedule) / d, schedule_score(xl, d, schedule) / d
        label = r"$\theta_t = " + schedule.replace("^-t", "^{-t}") + "$"
        ax1.plot(xs, ys, label=label, **line_style(k))
        ax2.plot(xl, yl, label=label, lw=1.0 if d is None else 0.6, **line_style(k))
    what = "continuum" if d is None else f"d = {d}"
    for ax, rng in ((ax1, "short range"), (ax2, "long range")):
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set(xlabel="relative distance $x$", title=f"{rng} ({what})")
    ax1.set_ylabel("score per dimension")
    ax2.set_xscale("log")
    ax1.legend(loc="upper right")
    return fig


def plot_roformer_bound(d: int = 128, base: float = 10000.0, max_distance: int = 256):
    r"""Figure 2 of RoFormer: :func:`roformer_bound` at integer distances 0..max_distance.

    ``max_distance`` is at most ``MAX_FIGURE_POINTS - 1`` and ``(max_distance + 1) * d/2`` at
    most ``MAX_ELEMENTS``."""
    d = check_dim(d)
    base = check_base(base)
    x = _grid_distances(max_distance, d)
    fig, ax = new_figure(width=6.0, height=3.6)
    ax.plot(
        x,
        roformer_bound(x, d, base),
        label=r"$\frac{1}{d/2}\sum_{j=1}^{d/2}|S_j|$",
        **line_style(0),
    )
    ax.set(
        xlabel="relative distance $x$",
        ylabel="relative upper bound",
        title=f"Long-term decay of RoPE (RoFormer Fig. 2): d = {d}, base = {base:g}",
    )
    ax.legend(loc="upper right")
    return fig


def plot_monte_carlo(
    d: int = 128,
    base: float = 10000.0,
    max_distance: int = 256,
    step: int = 8,
    n_samples: int = 2000,
    rho: float = 0.5,
    seed: int = 0,
):
    r"""Figure: Monte Carlo mean of :math:`q^\top R_x k` with error bars of two standard
    errors, for independent, correlated (:math:`\rho`) and all-ones-mean queries and keys,
    against their exact expectations :math:`0`, :math:`\rho g(x)` and :math:`g(x)`.

    Distances ``0, step, 2 step, ...`` up to ``max_distance`` (at most
    ``MAX_FIGURE_POINTS - 1``), with ``1 <= step <= max_distance``; ``n_samples``, ``rho`` and
    ``seed`` as in :func:`monte_carlo_score` (the three cases use seeds ``seed``,
    ``seed + 1`` and ``seed + 2``)."""
    d = check_dim(d)
    base = check_base(base)
    max_distance = check_positive_int(
        max_distance,
        "max_distance",
        maximum=MAX_FIGURE_POINTS - 1,
        hint=f"a curve of a figure has at most MAX_FIGURE_POINTS = {MAX_FIGURE_POINTS} points",
    )
    step = check_positive_int(
        step, "step", maximum=max_distance, hint="a step beyond max_distance leaves one point"
    )
    rho = check_real(rho, "rho", low=-1.0, high=1.0)
    seed = check_seed(seed)
    x = np.arange(0, max_distance + 1, step)
    n_samples = _check_n_samples(n_samples, d, x.size)  # checked before anything is computed
    check_elements(
        n_samples * x.size,
        "the table of scores (n_samples x number of distances)",
        hint="lower n_samples or raise step",
    )
    g = ones_score(x, d, base)
    cases = [
        ("independent", "independent, zero mean", np.zeros_like(g)),
        ("correlated", rf"correlated, $\rho = {rho:g}$", rho * g),
        ("ones", r"mean $\mathbf{1}$", g),
    ]
    fig, ax = new_figure(width=7.0, height=4.0)
    for k, (kind, label, exact) in enumerate(cases):
        mean, err = monte_carlo_score(x, d, base, kind, n_samples, rho, seed + k)
        style = line_style(k)
        ax.errorbar(
            x,
            mean,
            yerr=2 * err,
            fmt="os^"[k],  # a marker shape per case: readable without colour
            ms=3,
            capsize=2,
            color=style["color"],
            label=f"{label}: MC mean $\\pm 2$ s.e.",
        )
        ax.plot(x, exact, lw=1.2, color=style["color"], linestyle=style["linestyle"])
    ax.plot([], [], color="0.3", label="exact expectation (lines)")
    ax.set(
        xlabel="relative distance $x$",
        ylabel=r"$\mathbb{E}\,[q^\top R_x k]$",
        title=f"Expected RoPE score, d = {d}, {n_samples} samples",
    )
    ax.legend(loc="upper right", fontsize=9)
    return fig


def plot_diagonal_h(d: int = 128, base: float = 10000.0, max_distance: int = 256):
    r"""Figure: relative part of the diagonal-:math:`\mathcal H` score :math:`p_x^\top\mathcal H p_0`.

    Two diagonals :math:`\mathcal H = \mathrm{diag}(h_0, \dots, h_{d-1})` are compared, in the
    notation of chapter 3 (``eq-sin-diag-h-split``).

    The relative part :math:`\sum_i \beta_i\cos(x\theta_i)` with
    :math:`\beta_i = (h_{2i} + h_{2i+1})/2` comes from
    :func:`rope_lib.sinusoidal.diagonal_h_parts` at ``m = x``, ``n = 0``. Left, the smooth
    diagonal :math:`h_{2i} = h_{2i+1} = 1 - 2i/d`, whose every step, the last included, is
    2/d; right, :math:`h_{2i} = h_{2i+1} = 1` on the slowest quarter of the pairs
    (:math:`i \ge 3d/8`) and 0 elsewhere, whose last step is 1. Each panel shows the Abel
    bound :math:`\pm\max_i|\beta_{i+1}-\beta_i|\sum_{j=1}^{d/2}|S_j(x)|` with
    :math:`\beta_{d/2} = 0`.
    """
    from ..sinusoidal import diagonal_h_parts

    d = check_dim(d)
    base = check_base(base)
    n = d // 2
    x = _grid_distances(max_distance, d)
    ramp = 1.0 - np.arange(n) / n
    slow_only = (np.arange(n) >= (3 * n) // 4).astype(float)
    diagonals = [
        ("smooth: $h_{2i} = h_{2i+1} = 1 - 2i/d$", np.repeat(ramp, 2)),
        ("slow pairs only: $h_{2i} = h_{2i+1} = [i \\geq 3d/8]$", np.repeat(slow_only, 2)),
    ]
    sum_abs = n * roformer_bound(x, d, base)
    fig, axes = new_figure(ncols=2, width=10.0, height=3.8)
    for k, (ax, (label, diag)) in enumerate(zip(axes, diagonals, strict=True)):
        rel, _ = diagonal_h_parts(x, 0, diag, base)
        beta = 0.5 * (diag[0::2] + diag[1::2])
        step = np.abs(np.diff(np.append(beta, 0.0))).max()
        ax.plot(x, rel, label=r"$\sum_i \beta_i\cos(x\theta_i)$", **line_style(2 * k))
        ax.plot(x, step * sum_abs, label="Abel bound", **line_style(2 * k + 1))
        ax.plot(x, -step * sum_abs, **line_style(2 * k + 1))
        top = 1.5 * np.abs(rel).max()
        if (step * sum_abs).min() > top:  # vacuous bound: keep the sum readable
            ax.set_ylim(-top, top)
            ax.annotate(
                f"Abel bound $\\geq {(step * sum_abs).min():.0f}$: off the scale",
                (0.5, 0.1),
                xycoords="axes fraction",
                ha="center",
                fontsize=9,
            )
        ax.set(xlabel="relative distance $x$", title=label)
        ax.legend(loc="best")
    for ax in axes:
        ax.set_ylabel("relative part of $p_m^\\top \\mathcal{H} p_n$")
    return fig
