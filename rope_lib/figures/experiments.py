r"""Figures of chapter 9 ("Does the bound bind?"), drawn from the stored results.

Each function takes a results blob (:func:`rope_lib.experiments.runner.load_results`), asks
:mod:`rope_lib.experiments.report` for the numbers and draws them in the book's style
(:mod:`rope_lib.plotting`); it returns the figure.  Intervals are the 95% Student-t intervals
over seeds of the report module (they contain the evaluation's sampling noise, since every seed
has its own held-out set).

* :func:`plot_recall_curves`: accuracy by distance of one cell, one curve per base, with the
  horizon of :math:`B_m` of each base;
* :func:`plot_predictors`: the reach of every (cell, base) against each of the three
  predictors, after removing each cell's mean (the fit with one intercept per cell);
* :func:`plot_window_edges`: the farthest-bin accuracy of the bases on both sides of the
  written window edges, seed by seed;
* :func:`plot_learned_form`: per pair, the learned amplitude and phase, and the learned margin
  by distance split into its cosine and sine parts;
* :func:`plot_needle_controls`: experiment 2, one panel per base: the retrieval by distance
  with its three controls, the horizon and the slowest pair's quarter period.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validate import _describe
from ..experiments import report
from ..experiments.predictions import EDGES, WindowEdge
from . import style as figstyle

__all__ = [
    "plot_recall_curves",
    "plot_predictors",
    "plot_window_edges",
    "plot_learned_form",
    "plot_needle_controls",
]


def _axes(ax: Any, **kwargs: Any) -> tuple[Any, Any]:
    if ax is None:
        return figstyle.new_figure(**kwargs)
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be None or a matplotlib Axes, got {_describe(ax)}")
    return ax.figure, ax


def _cell_label(cell: tuple) -> str:
    span, tokens, d, distances = cell
    kind = "dense" if tokens == span else f"{tokens} tokens"
    extra = "" if distances == "log_uniform" else f", {distances} training"
    return f"L = {span}, {kind}, d = {d}{extra}"


def plot_recall_curves(
    results: Any,
    cell: tuple,
    bases: Sequence[float] | None = None,
    tokens: int | None = None,
    ax: Any = None,
):
    """Accuracy against distance for each base of a cell: mean over seeds, 95% t-interval band,
    the horizon of :math:`B_m` as a dotted line of the base's colour, chance dashed grey."""
    cur = report.recall_curves(results, cell, tokens)
    chosen = cur.bases.tolist() if bases is None else [float(b) for b in bases]
    missing = [b for b in chosen if b not in cur.bases.tolist()]
    if missing:
        raise ValueError(f"bases must be bases of the cell {cur.bases.tolist()}, got {missing}")
    fig, ax = _axes(ax, width=8.0, height=4.2)
    span = cell[0]
    for k, base in enumerate(chosen):
        i = cur.bases.tolist().index(base)
        style = figstyle.line_style(k)
        h = cur.horizon[i]
        ax.plot(
            cur.bin_centres,
            cur.mean[i],
            marker="o",
            ms=3,
            label=f"b = {base:.4g} (horizon {h:.0f})",
            **style,
        )
        if len(cur.seeds) > 1:
            ax.fill_between(
                cur.bin_centres, cur.low[i], cur.high[i], color=style["color"], alpha=0.15
            )
        if h <= span:
            ax.axvline(h, color=style["color"], linestyle=":", lw=1.2)
    ax.axhline(
        cur.chance, color="0.4", linestyle="--", lw=1.0, label=f"chance 1/{round(1 / cur.chance)}"
    )
    ax.set_xscale("log")
    ax.set_xlim(1, span + 1)
    ax.set_ylim(0, 1)
    ax.set(
        xlabel=r"distance $\Delta$ from the query to its target (tokens)",
        ylabel="recall accuracy (mean, 95% interval)",
        title=f"Recall by distance: {_cell_label(cur.cell)}, {cur.tokens} tokens evaluated",
    )
    ax.legend(loc="lower left", fontsize=8)
    return fig


def plot_predictors(results: Any, level: float = 0.5, cells: Sequence[tuple] | None = None):
    r"""Log reach against the log of each predictor, both centred within each cell.

    One panel per predictor (horizon of :math:`B_m`, quarter period, base); each point is one
    (cell, base), the mean over seeds of :math:`\ln r` with every seed's reach finite; the
    within-cell centring is the fit with one intercept per cell, and the residual SD per seed
    (:func:`rope_lib.experiments.report.predictor_comparison`) is in each title.
    """
    comparison = report.predictor_comparison(results, cells, level)
    rows = [
        r
        for r in report.reach_table(results, level)
        if r["cell"] in comparison["cells"] and math.isfinite(r["log_reach"])
    ]
    fig, axes = figstyle.new_figure(ncols=3, width=11.0, height=3.8, sharey=True)
    names = {"horizon": "horizon of $B_m$", "quarter_period": "quarter period", "base": "base"}
    for ax, key in zip(axes, report.PREDICTORS, strict=True):
        for k, cell in enumerate(comparison["cells"]):
            part = [r for r in rows if r["cell"] == cell]
            if len(part) < 2:
                continue
            x = np.log([r[key] for r in part])
            y = np.array([r["log_reach"] for r in part])
            style = figstyle.line_style(k)
            ax.plot(
                x - x.mean(),
                y - y.mean(),
                marker="o",
                linestyle="none",
                color=style["color"],
                label=_cell_label(cell),
            )
        stats = comparison[key]
        ax.set_title(
            f"{names[key]}: residual SD {stats['sd_mean']:.2f}\n"
            f"(95% interval {stats['sd_low']:.2f} to {stats['sd_high']:.2f})",
            fontsize=9,
        )
        ax.set_xlabel(f"ln({names[key]}), centred per cell")
    axes[0].set_ylabel("ln(reach), centred per cell")
    axes[0].legend(fontsize=7, loc="upper left")
    return fig


def plot_window_edges(results: Any, edges: Sequence[WindowEdge] = EDGES):
    """Farthest-bin accuracy of the bases on both sides of each window edge: one thin line per
    seed, the mean in black; the feasible side shaded."""
    outcomes = report.edge_outcomes(results, edges)
    fig, axes = figstyle.new_figure(ncols=len(outcomes), width=5.0 * len(outcomes), height=3.8)
    axes = np.atleast_1d(axes)
    for ax, out in zip(axes, outcomes, strict=True):
        edge = out["edge"]
        bases = np.array(edge.inside + edge.outside)
        far = np.array(out["far_inside_runs"] + out["far_outside_runs"])  # (bases, seeds)
        for s in range(far.shape[1]):
            ax.plot(bases, far[:, s], color="0.6", lw=0.8, marker=".")
        ax.plot(bases, far.mean(axis=1), color="black", lw=2, marker="o", label="mean over seeds")
        ax.axvspan(bases.min() * 0.995, edge.edge, color="tab:green", alpha=0.1, label="feasible")
        ax.axvline(edge.edge, color="tab:green", linestyle=":")
        diff = out["far_difference"]
        ax.set_title(
            f"{edge.label}: L = {edge.span}, d = {edge.d}, edge {edge.edge:.0f}\n"
            f"inside - outside {diff[0]:+.3f} ({diff[1]:+.3f} to {diff[2]:+.3f})",
            fontsize=9,
        )
        ax.set(xlabel="base", ylabel="accuracy, farthest bin")
        ax.legend(fontsize=8)
    return fig


def plot_learned_form(results: Any, cell: tuple, bases: Sequence[float] | None = None):
    """Left: per pair, the learned amplitude (mean over seeds, normalised to sum 1); right: the
    learned margin by distance (mean over seeds), its cosine part and its sine part."""
    form = report.learned_form(results, cell)
    chosen = form["bases"] if bases is None else [float(b) for b in bases]
    fig, (left, right) = figstyle.new_figure(ncols=2, width=11.0, height=3.8)
    dist = form["distances"]
    for k, base in enumerate(chosen):
        i = form["bases"].index(base)
        style = figstyle.line_style(k)
        amp = form["amplitude"][i] / form["amplitude"][i].sum(axis=1, keepdims=True)
        left.plot(
            np.arange(amp.shape[1]),
            amp.mean(axis=0),
            marker="o",
            ms=3,
            label=f"b = {base:.4g}",
            **style,
        )
        for part, lw, dash, label in (
            ("margin", 1.8, "-", f"b = {base:.4g}: margin"),
            ("sine_part", 1.0, ":", "its sine part"),
        ):
            right.plot(dist, form[part][i].mean(axis=0), color=style["color"], lw=lw,
                       linestyle=dash, label=label)  # fmt: skip
    left.set(xlabel="pair i (0 fastest)", ylabel="share of the amplitude $A_i$")
    left.set_title(f"Learned amplitudes: {_cell_label(tuple(cell))}", fontsize=9)
    right.axhline(0, color="0.4", lw=0.8)
    right.set_xscale("log")
    right.set(xlabel=r"distance $\Delta$ (tokens)", ylabel=r"learned margin $\delta(\Delta)$")
    right.set_title("Learned margin and its sine part", fontsize=9)
    left.legend(fontsize=8)
    right.legend(fontsize=7)
    return fig


#: The controls of :func:`plot_needle_controls`: (key of NeedleCurves.rates, label, style index);
#: ``{shift}`` in a label is the configuration's ``shift``.
NEEDLE_LINES = (
    ("shifted_correct", "retrieval, moved {shift} tokens later", 5),
    ("repeat_correct", "repeat control", 1),
    ("absent_target", "absent key: target's value", 2),
    ("absent_chance", "absent key: one needle's share", 3),
    ("recency_correct", "recency baseline (no model)", 4),
    ("primacy_correct", "primacy baseline (no model)", 6),
)


def plot_needle_controls(results: Any, bases: Sequence[float] | None = None):
    """Experiment 2: per base, the retrieval accuracy by distance bin of every seed (one thin
    line each; dotted grey for the seeds that did not learn, :data:`report.LEARNED_GAIN`),
    and the controls averaged over the seeds that learned: the retrieval with the sequence moved
    (when the runs carry ``shifted_correct``), the repeat query, the absent-key rates, and the
    recency and primacy baselines (the latter when the runs carry it); the horizon of :math:`B_m` (dotted) and the slowest
    pair's quarter period (dash-dot) as vertical lines where they fall inside the measured
    distances."""
    cur = report.needle_curves(results)
    shift = results.get("config", {}).get("shift", "?")
    learned = {o["base"]: np.array(o["learned"]) for o in report.needle_outcomes(results)}
    chosen = cur.bases.tolist() if bases is None else [float(b) for b in bases]
    missing = [b for b in chosen if b not in cur.bases.tolist()]
    if missing:
        raise ValueError(f"bases must be bases of the results {cur.bases.tolist()}, got {missing}")
    e = cur.bin_edges
    centres = (e[:-1] + e[1:] - 1) / 2.0
    ncols = min(3, len(chosen))  # at most three panels a row, so each stays legible
    nrows = -(-len(chosen) // ncols)
    fig, axes = figstyle.new_figure(
        ncols=ncols,
        nrows=nrows,
        width=3.4 * ncols + 0.6,
        height=3.3 * nrows,
        sharey=True,
        squeeze=False,
    )
    panels, spare = list(axes.ravel()[: len(chosen)]), list(axes.ravel()[len(chosen) :])
    main_style = figstyle.line_style(0)
    for ax, base in zip(panels, chosen, strict=True):
        i = cur.bases.tolist().index(base)
        ok = learned[base]
        for s, row in enumerate(cur.rates["main_correct"][i]):
            first = s == int(np.argmax(ok)) if ok[s] else s == int(np.argmin(ok))
            ax.plot(
                centres,
                row,
                color=main_style["color"] if ok[s] else "0.55",
                linestyle="-" if ok[s] else ":",
                lw=1.4,
                label=(
                    (
                        "retrieval, one line per seed"
                        if ok[s]
                        else "retrieval, seeds that did not learn"
                    )
                    if first
                    else None
                ),
            )
        for key, label, k in [line for line in NEEDLE_LINES if line[0] in cur.rates]:
            rates = cur.rates[key][i][ok] if ok.any() else cur.rates[key][i]
            ax.plot(
                centres,
                rates.mean(axis=0),
                marker="o",
                ms=3,
                label=label.format(shift=shift),
                **figstyle.line_style(k),
            )
        for x, ls in ((cur.horizon[i], ":"), (cur.quarter_period[i], "-.")):
            if e[0] <= x <= e[-1]:
                ax.axvline(x, color="0.3", linestyle=ls, lw=1.2)
        ax.set_title(
            f"b = {base:.4g}: horizon {cur.horizon[i]:.0f},\nquarter period "
            f"{cur.quarter_period[i]:.0f}; {int(ok.sum())} of {len(ok)} learned",
            fontsize=9,
        )
        ax.set_xlim(0, e[-1])
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(r"distance $\Delta$ (tokens)")
    for row in axes:
        row[0].set_ylabel("rate")
    if spare:  # the legend in the first empty cell of the grid
        for ax in spare:
            ax.set_axis_off()
        spare[0].legend(*panels[0].get_legend_handles_labels(), loc="center", fontsize=8)
    else:
        panels[-1].legend(loc="center right", fontsize=7)
    return fig
