r"""Summaries and the figure of experiment 2 (issue 13), for chapter 9, "Does the bound bind?".

Chapter 9 compares what the tiny Llama of :mod:`rope_lib.experiment_lm` retrieves with what
chapter 7 (``chapters/07_base_bound.md``) predicts.  This module reads a results blob
(:func:`rope_lib.lm_results`) and computes, per RoPE base :math:`b`:

* :func:`lm_summary`: the retrieval accuracy per logarithmic distance bin and the filler loss,
  averaged over seeds with their standard errors, next to chapter 7's predictions for
  :math:`(d, b)`: the horizon of :math:`B_m = \sum_i\cos(m\theta_i)`
  (:func:`rope_lib.max_context`), the slowest pair's quarter period
  (:func:`rope_lib.quarter_period`) and :math:`\operatorname{min\_base}(L, d)`
  (:func:`rope_lib.min_base`);
* :func:`plot_lm_recall`: the figure of those curves.

Nothing here trains or evaluates a model.  This module is not among
:data:`rope_lib.experiment_lm.LM_CODE_FILES`, so changing it does not make the stored results
stale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import _describe
from .base_bound import min_base
from .decay import quarter_period
from .experiment_report import _horizon, _mean_se

__all__ = ["LMSummary", "lm_summary", "plot_lm_recall"]


@dataclass(frozen=True)
class LMSummary:
    r"""Retrieval by distance and filler loss per base, with chapter 7's predictions.

    Arrays over bases have the bases in increasing order; arrays over bins follow
    ``bin_edges``.  Means and standard errors are over seeds (see :func:`lm_summary`).

    Attributes
    ----------
    context_length, head_dim : int
        :math:`L` and the Llama's head dimension :math:`d`.
    bases : numpy.ndarray
        float64, shape ``(n_bases,)``, increasing.
    n_seeds : numpy.ndarray
        int64, shape ``(n_bases,)``.
    bin_edges : numpy.ndarray
        int64, shape ``(n_bins + 1,)``: bin :math:`j` holds the distances
        :math:`\Delta \in [e_j, e_{j+1})`.
    bin_centres : numpy.ndarray
        float64, shape ``(n_bins,)``: :math:`\sqrt{e_j (e_{j+1} - 1)}`.
    accuracy_mean, accuracy_se : numpy.ndarray
        float64, shape ``(n_bases, n_bins)``: retrieval accuracy.
    filler_loss_mean, filler_loss_se : numpy.ndarray
        float64, shape ``(n_bases,)``: filler loss in nats.
    filler_entropy : float
        The chain's entropy rate :math:`H` in nats, the lowest possible filler loss.
    horizon : numpy.ndarray
        float64, shape ``(n_bases,)``: :func:`rope_lib.max_context` of ``(base, d)``, the
        first distance with :math:`B_m < 0` (``inf`` beyond its default scan).
    quarter_period : numpy.ndarray
        float64, shape ``(n_bases,)``: :func:`rope_lib.quarter_period` of ``(d, base)``.
    min_base : float
        :func:`rope_lib.min_base` of ``(L, d)``.
    chance : float
        ``1 / n_values``.
    last_query_from : int
        :math:`3 n_q`: distances from here on are measured at the last query of a sequence,
        shorter ones at the first (see :mod:`rope_lib.experiment_lm`).
    """

    context_length: int
    head_dim: int
    bases: np.ndarray
    n_seeds: np.ndarray
    bin_edges: np.ndarray
    bin_centres: np.ndarray
    accuracy_mean: np.ndarray
    accuracy_se: np.ndarray
    filler_loss_mean: np.ndarray
    filler_loss_se: np.ndarray
    filler_entropy: float
    horizon: np.ndarray
    quarter_period: np.ndarray
    min_base: float
    chance: float
    last_query_from: int


_RUN_KEYS = ("base", "seed", "bin_edges", "accuracy", "filler_loss")


def lm_summary(results: Any) -> LMSummary:
    r"""Per base: accuracy by distance bin and filler loss, mean and SE over seeds.

    With seeds :math:`s = 1..n` and a per-seed value :math:`x_s` (the accuracy in one bin, or
    the filler loss), the mean is :math:`\bar x = \frac1n \sum_s x_s` and the standard error
    :math:`\mathrm{SE} = \frac{1}{\sqrt n}\bigl(\frac{1}{n-1}\sum_s (x_s - \bar x)^2\bigr)^{1/2}`
    (``nan`` with one seed).  The SE is the spread across seeds only: every run is evaluated on
    the same held-out sequences.  Next to them, chapter 7's predictions for :math:`(d, b)`: the
    horizon :math:`\min\{m \ge 0 : B_m < 0\}` of :math:`B_m = \sum_{i<d/2}\cos(m b^{-2i/d})`,
    the quarter period :math:`\tfrac{\pi}{2} b^{(d-2)/d}` and :math:`\operatorname{min\_base}(L,
    d)`.

    Parameters
    ----------
    results : dict
        A results blob of :func:`lm_results` or :func:`run_lm_experiment`.

    Returns
    -------
    LMSummary

    Raises
    ------
    TypeError, ValueError
        ``results`` is not such a blob (missing keys, or runs whose distance bins differ).
    """
    what = "results must be a results dict of rope_lib.lm_results (with 'config' and 'runs')"
    if not isinstance(results, Mapping):
        raise TypeError(f"{what}, got {_describe(results)}")
    config, runs = results.get("config"), results.get("runs")
    needed = ("context_length", "head_dim", "n_values", "n_queries")
    if not isinstance(config, Mapping) or any(k not in config for k in needed):
        raise ValueError(f"{what}; its 'config' is missing or lacks one of {needed}")
    if "filler_entropy" not in results:
        raise ValueError(f"{what}; it lacks 'filler_entropy'")
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) or not runs:
        raise ValueError(f"{what}; its 'runs' is missing or empty")
    by_base: dict[float, list[Mapping]] = {}
    for run in runs:
        if not isinstance(run, Mapping) or any(k not in run for k in _RUN_KEYS):
            raise ValueError(f"{what}; a run is not a dict with {_RUN_KEYS}")
        by_base.setdefault(float(run["base"]), []).append(run)
    length = int(config["context_length"])
    d = int(config["head_dim"])
    edges = np.asarray(runs[0]["bin_edges"], dtype=np.int64)
    bases = sorted(by_base)
    acc_mean, acc_se, fil_mean, fil_se, n_seeds = [], [], [], [], []
    for base in bases:
        group = sorted(by_base[base], key=lambda r: int(r["seed"]))
        if any(not np.array_equal(np.asarray(r["bin_edges"]), edges) for r in group):
            raise ValueError(f"{what}; its runs have different distance bins (bin_edges)")
        acc = np.array([r["accuracy"] for r in group], dtype=np.float64)
        if acc.shape != (len(group), edges.size - 1):
            raise ValueError(
                f"{what}; a run has {acc.shape[-1]} accuracies for {edges.size - 1} bins"
            )
        m, s = _mean_se(acc)
        acc_mean.append(m)
        acc_se.append(s)
        m, s = _mean_se(np.array([float(r["filler_loss"]) for r in group]))
        fil_mean.append(float(m))
        fil_se.append(float(s))
        n_seeds.append(len(group))
    return LMSummary(
        context_length=length,
        head_dim=d,
        bases=np.array(bases, dtype=np.float64),
        n_seeds=np.array(n_seeds, dtype=np.int64),
        bin_edges=edges,
        bin_centres=np.sqrt(edges[:-1] * (edges[1:] - 1.0)),
        accuracy_mean=np.array(acc_mean),
        accuracy_se=np.array(acc_se),
        filler_loss_mean=np.array(fil_mean),
        filler_loss_se=np.array(fil_se),
        filler_entropy=float(results["filler_entropy"]),
        horizon=np.array([_horizon(b, d) for b in bases]),
        quarter_period=np.array([quarter_period(d, b) for b in bases]),
        min_base=float(min_base(length, d)),
        chance=1.0 / float(config["n_values"]),
        last_query_from=3 * int(config["n_queries"]),
    )


def _fmt(x: float) -> str:
    return f"{x:.0f}" if math.isfinite(x) else "beyond max_context's scan"


def plot_lm_recall(summary: LMSummary, ax: Any = None) -> Any:
    r"""Figure: retrieval accuracy against distance, one curve per base, with the predictions.

    Each base's curve is the seed mean at the bin centres (log-scaled distance axis) with
    error bars of one standard error; the dashed grey line is chance, ``1 / n_values``; a
    dotted vertical line in the base's colour marks its horizon of :math:`B_m` when it falls
    inside the plotted distances; a wide grey line separates the distances measured at the
    first query of a sequence from those measured at the last.  The legend gives each base's horizon and its filler loss
    (mean over seeds) next to the chain's entropy rate.

    Parameters
    ----------
    summary : LMSummary
        From :func:`lm_summary`.
    ax : matplotlib.axes.Axes, optional
        Draw into this panel; default a new figure in the book's style.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.axes import Axes
    from matplotlib.ticker import NullFormatter

    from .figures.style import line_style, new_figure

    if not isinstance(summary, LMSummary):
        raise TypeError(f"summary must be an LMSummary from lm_summary, got {_describe(summary)}")
    if ax is None:
        fig, ax = new_figure(width=8.5, height=4.2)
    elif not isinstance(ax, Axes):
        raise TypeError(f"ax must be None or a matplotlib Axes, got {_describe(ax)}")
    else:
        fig = ax.figure
    lo, hi = float(summary.bin_edges[0]), float(summary.bin_edges[-1])
    handles = []
    for k, base in enumerate(summary.bases):
        style = line_style(k)
        se = summary.accuracy_se[k]
        horizon = float(summary.horizon[k])
        handles.append(
            ax.errorbar(
                summary.bin_centres,
                summary.accuracy_mean[k],
                yerr=None if np.all(np.isnan(se)) else se,
                marker="o",
                ms=4,
                capsize=2,
                color=style["color"],
                linestyle=style["linestyle"],
                label=(
                    f"b = {base:g}: horizon {_fmt(horizon)}, "
                    f"filler loss {summary.filler_loss_mean[k]:.3f}"
                ),
            )
        )
        if lo <= horizon <= hi:
            ax.axvline(horizon, color=style["color"], linestyle=":", lw=1.5)
    handles.append(
        ax.axhline(
            summary.chance,
            color="0.4",
            linestyle="--",
            lw=1.0,
            label=f"chance 1/{round(1 / summary.chance)}",
        )
    )
    handles += ax.plot([], [], color="0.3", linestyle=":", label="horizon of $B_m$")
    split = summary.last_query_from - 0.5
    if lo < split < hi:
        handles.append(
            ax.axvline(
                split,
                color="0.6",
                lw=4,
                alpha=0.35,
                label=f"left: first query; right: last query (from {summary.last_query_from})",
            )
        )
    handles += ax.plot(
        [], [], linestyle="none", label=f"filler entropy rate {summary.filler_entropy:.3f} nats"
    )
    ax.set_xscale("log")
    ax.set_xlim(lo * 0.9, hi)
    ticks = [t for t in (3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000) if lo <= t <= hi]
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel(r"distance $\Delta$ from the needle's key to the query's key (tokens)")
    ax.set_ylabel("retrieval accuracy (mean $\\pm$ 1 s.e.)")
    ax.set_title(
        f"Tiny Llama, needle recall: L = {summary.context_length}, d = {summary.head_dim} "
        f"(min_base(L, d) = {summary.min_base:.0f})",
        pad=10,
    )
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    return fig
