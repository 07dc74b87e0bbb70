r"""Summaries and statistics of chapter 9's experiments, from their stored results.

Nothing here trains a model or draws a figure (the figures are in
:mod:`rope_lib.figures.experiments`); every number comes from a results blob of
:func:`rope_lib.experiments.runner.load_results` and from :mod:`rope_lib`'s math.  This module is
not on the path of the stored results (not in their key).

Statistics
----------
A *replicate* is one seed: it fixes the initial weights, the training data and the held-out
set of every run (:mod:`rope_lib.experiments.recall_task`), the same for every base.  A
quantity computed per seed (an accuracy, a reach, a paired difference between two bases, a
residual standard deviation of a whole fit) is therefore an independent draw of the whole
experiment, training and evaluation sample included, and its spread over the :math:`n` seeds
measures both sources of noise.  Every interval here is the 95% Student-t interval over seeds,

.. math:: \bar x \pm t_{0.975,\,n-1}\,\frac{s}{\sqrt n}, \qquad
          s^2 = \frac{1}{n-1}\sum_s (x_s - \bar x)^2,

(:func:`t_interval`); with 5 seeds :math:`t_{0.975,4} = 2.776`.  The binomial standard error
of one run's accuracy :math:`p` in a bin of :math:`N` held-out contexts,
:math:`\sqrt{p(1-p)/N}`, is reported beside it (:attr:`Curves.binomial_se`): it is part of the
seed spread, not added to it.

The reach
---------
A run's accuracy by distance is a step curve over logarithmic bins.  Its *reach* at level
:math:`\ell` is where it first falls below :math:`\ell`, interpolated between bin centres on a
logarithmic axis (:func:`reach`); :math:`0` if the first bin is below :math:`\ell`,
:math:`\infty` if no bin is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import _describe, check_integer_array, check_real
from ..base_bound import max_context, min_base
from ..decay import quarter_period
from ..frequencies import theta
from .predictions import EDGES, PAIRS, Pair, WindowEdge
from .recall_model import rotation_terms

__all__ = [
    "t_interval",
    "reach",
    "Curves",
    "recall_curves",
    "recall_cells",
    "reach_table",
    "predictor_comparison",
    "pair_outcomes",
    "edge_outcomes",
    "distractor_effect",
    "learned_form",
    "NEEDLE_COUNTS",
    "NeedleCurves",
    "needle_curves",
    "needle_outcomes",
    "LEARNED_GAIN",
]

PREDICTORS = ("horizon", "quarter_period", "base")


# --------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------
def t_interval(values: Any, level: float = 0.95) -> tuple[float, float, float]:
    r"""Mean and the Student-t interval over seeds: ``(mean, low, high)``.

    :math:`\bar x \pm t_{(1+\text{level})/2,\,n-1}\, s/\sqrt n` with the sample standard
    deviation :math:`s` (``ddof=1``).  With one value the interval is ``(nan, nan)``;
    non-finite values give a ``nan`` interval.
    """
    from scipy.stats import t

    x = np.asarray(values, dtype=np.float64).ravel()
    level = check_real(level, "level", 0.0, 1.0, low_open=True, high_open=True)
    if x.size == 0:
        raise ValueError("values must not be empty")
    mean = float(x.mean())
    if x.size < 2 or not np.all(np.isfinite(x)):
        return mean, math.nan, math.nan
    half = float(t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return mean, mean - half, mean + half


def _verdict(low: float, high: float, above: str, below: str) -> str:
    if low > 0:
        return above
    if high < 0:
        return below
    return "undecided"


def reach(centres: Any, accuracy: Any, level: float = 0.5) -> float:
    r"""Where an accuracy curve first falls below ``level`` (module docstring).

    With bin centres :math:`c_j` and accuracies :math:`a_j`, :math:`j` the first bin with
    :math:`a_j < \ell`:

    .. math:: r = \exp\Bigl(\ln c_{j-1} + \frac{a_{j-1} - \ell}{a_{j-1} - a_j}
              (\ln c_j - \ln c_{j-1})\Bigr).
    """
    c = np.asarray(centres, dtype=np.float64)
    a = np.asarray(accuracy, dtype=np.float64)
    below = np.flatnonzero(a < level)
    if below.size == 0:
        return math.inf
    j = int(below[0])
    if j == 0:
        return 0.0
    a0, a1 = float(a[j - 1]), float(a[j])
    u0, u1 = math.log(c[j - 1]), math.log(c[j])
    return math.exp(u0 + (a0 - level) / (a0 - a1) * (u1 - u0))


def horizon(d: int, base: float) -> float:
    """:func:`rope_lib.max_context`, or ``inf`` beyond its default scan."""
    try:
        return float(max_context(base, d))
    except ValueError:
        return math.inf


# --------------------------------------------------------------------------------------------
# experiment 1: reading the results
# --------------------------------------------------------------------------------------------
_RUN_KEYS = ("span", "tokens", "d", "distances", "base", "seed", "evaluations", "form_blocks")
Cell = tuple[int, int, int, str]  # (span, tokens, d, distances)


def _checked_runs(results: Any, experiment: str, number: int, need: Sequence[str]) -> list:
    """The runs of a results dict of ``experiment``, each checked to carry the keys ``need``."""
    what = (
        f"results must be a results dict of experiment {number} "
        f"(runner.load_results({experiment!r}, ...))"
    )
    if not isinstance(results, Mapping):
        raise TypeError(f"{what}, got {_describe(results)}")
    runs = results.get("runs")
    if results.get("experiment") != experiment or not isinstance(runs, Sequence) or not runs:
        raise ValueError(f"{what}; its 'experiment' is not {experiment!r} or its 'runs' is empty")
    for run in runs:
        if not isinstance(run, Mapping) or any(k not in run for k in need):
            raise ValueError(f"{what}; a run lacks one of {list(need)}")
    return list(runs)


def _runs(results: Any) -> list[Mapping]:
    return _checked_runs(results, "recall", 1, _RUN_KEYS)


def _cell_of(run: Mapping) -> Cell:
    return (int(run["span"]), int(run["tokens"]), int(run["d"]), str(run["distances"]))


def recall_cells(results: Any) -> list[Cell]:
    """The cells ``(span, tokens, d, distances)`` of a results blob, sorted."""
    return sorted({_cell_of(r) for r in _runs(results)})


def _grouped(results: Any, cell: Cell) -> dict[float, list[Mapping]]:
    """Runs of one cell by base (increasing), each list in seed order."""
    by_base: dict[float, list[Mapping]] = {}
    for run in _runs(results):
        if _cell_of(run) == tuple(cell):
            by_base.setdefault(float(run["base"]), []).append(run)
    if not by_base:
        raise ValueError(
            f"cell must be one of the results' cells {recall_cells(results)}, got {cell}"
        )
    seeds = None
    for group in by_base.values():
        group.sort(key=lambda r: int(r["seed"]))
        these = [int(r["seed"]) for r in group]
        if seeds is not None and these != seeds:
            raise ValueError(f"results: the bases of cell {cell} have different seeds")
        seeds = these
    return dict(sorted(by_base.items()))


def _evaluation(run: Mapping, tokens: int | None) -> Mapping:
    """The run's evaluation at ``tokens`` context tokens (default: its training count)."""
    count = int(run["tokens"]) if tokens is None else tokens
    for ev in run["evaluations"]:
        if int(ev["tokens"]) == count:
            return ev
    have = [int(ev["tokens"]) for ev in run["evaluations"]]
    raise ValueError(f"tokens must be one of the run's evaluations {have}, got {count}")


@dataclass(frozen=True)
class Curves:
    r"""Accuracy by distance of one cell, per base and seed, with the predictions.

    Attributes
    ----------
    cell : tuple
        ``(span, tokens, d, distances)``.
    tokens : int
        Context tokens of the evaluation (the training count or one of ``eval_tokens``).
    bases, seeds : numpy.ndarray
        Increasing bases; the seeds (the same for every base).
    bin_edges : numpy.ndarray
        int64, bin :math:`j` is :math:`[e_j, e_{j+1})`.
    bin_centres : numpy.ndarray
        :math:`\sqrt{e_j (e_{j+1} - 1)}`, the geometric centre of a bin's first and last
        distance.
    accuracy : numpy.ndarray
        ``(bases, seeds, bins)``.
    mean, low, high : numpy.ndarray
        ``(bases, bins)``: mean over seeds and its 95% t-interval (:func:`t_interval`).
    binomial_se : numpy.ndarray
        ``(bases, bins)``: the largest :math:`\sqrt{p(1-p)/N}` over the seeds' runs.
    horizon, quarter_period : numpy.ndarray
        Per base: :func:`rope_lib.max_context` (``inf`` beyond its scan) and
        :func:`rope_lib.quarter_period` of ``(d, base)``.
    min_base : float
        :func:`rope_lib.min_base` of ``(span, d)``.
    chance : float
        ``1 / n_values``.
    """

    cell: Cell
    tokens: int
    bases: np.ndarray
    seeds: np.ndarray
    bin_edges: np.ndarray
    bin_centres: np.ndarray
    accuracy: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    binomial_se: np.ndarray
    horizon: np.ndarray
    quarter_period: np.ndarray
    min_base: float
    chance: float


def recall_curves(results: Any, cell: Cell, tokens: int | None = None) -> Curves:
    """Accuracy by distance of every base and seed of a cell (see :class:`Curves`).

    Parameters
    ----------
    results : dict
        Results of experiment 1.
    cell : tuple
        ``(span, tokens, d, distances)``, one of :func:`recall_cells`.
    tokens : int, optional
        The evaluation's token count (default: the cell's training count).
    """
    span, count, d, _ = cell
    by_base = _grouped(results, cell)
    evs = [[_evaluation(r, tokens) for r in group] for group in by_base.values()]
    edges = np.asarray(evs[0][0]["bin_edges"], dtype=np.int64)
    for row in evs:
        for ev in row:
            if not np.array_equal(np.asarray(ev["bin_edges"]), edges):
                raise ValueError(f"results: the runs of cell {cell} have different distance bins")
    acc = np.array([[ev["accuracy"] for ev in row] for row in evs], dtype=np.float64)
    n = np.array([[ev["n"] for ev in row] for row in evs], dtype=np.float64)
    mean, low, high = _seed_stats(acc)
    bases = np.array(list(by_base), dtype=np.float64)
    config = results.get("config", {})
    return Curves(
        cell=tuple(cell),
        tokens=int(evs[0][0]["tokens"]),
        bases=bases,
        seeds=np.array([int(r["seed"]) for r in next(iter(by_base.values()))]),
        bin_edges=edges,
        bin_centres=np.sqrt(edges[:-1] * (edges[1:] - 1.0)),
        accuracy=acc,
        mean=mean,
        low=low,
        high=high,
        binomial_se=np.sqrt(acc * (1 - acc) / n).max(axis=1),
        horizon=np.array([horizon(d, b) for b in bases]),
        quarter_period=np.array([quarter_period(d, b) for b in bases]),
        min_base=float(min_base(span, d)),
        chance=1.0 / float(config.get("n_values", 16)),
    )


def reach_table(results: Any, level: float = 0.5, tokens: int | None = None) -> list[dict]:
    """One row per cell and base: per-seed reaches next to the predictions.

    Keys: ``cell``, ``base``, ``horizon``, ``quarter_period``, ``feasible`` (horizon >= span),
    ``reach`` (per seed, seed order), ``log_reach`` (mean of :math:`\\ln r` over seeds, with
    ``log_reach_low``, ``log_reach_high``, its t-interval; ``nan`` unless every seed's reach is
    finite and positive), ``far`` (per-seed accuracy in the farthest bin) with ``far_mean``,
    ``far_low``, ``far_high``.
    """
    level = check_real(level, "level", 0.0, 1.0, low_open=True, high_open=True)
    rows = []
    for cell in recall_cells(results):
        curves = recall_curves(results, cell, tokens)
        for k, base in enumerate(curves.bases):
            r = [reach(curves.bin_centres, a, level) for a in curves.accuracy[k]]
            finite = all(0 < x < math.inf for x in r)
            log = t_interval(np.log(r)) if finite else (math.nan,) * 3
            far = curves.accuracy[k, :, -1]
            rows.append(
                {
                    "cell": cell,
                    "base": float(base),
                    "horizon": float(curves.horizon[k]),
                    "quarter_period": float(curves.quarter_period[k]),
                    "feasible": bool(curves.horizon[k] >= cell[0]),
                    "reach": r,
                    "log_reach": log[0],
                    "log_reach_low": log[1],
                    "log_reach_high": log[2],
                    "far": far.tolist(),
                    **dict(zip(("far_mean", "far_low", "far_high"), t_interval(far), strict=True)),
                }
            )
    return rows


# --------------------------------------------------------------------------------------------
# which predictor
# --------------------------------------------------------------------------------------------
def _predictor(row: Mapping, name: str) -> float:
    return {
        "horizon": row["horizon"],
        "quarter_period": row["quarter_period"],
        "base": row["base"],
    }[name]


def _residual_sd(
    y: np.ndarray, x: np.ndarray, groups: np.ndarray, slope_groups: np.ndarray | None = None
) -> tuple[float, list[float]]:
    """Least squares ``y ~ intercept per group + slope per slope group * x``: (residual SD,
    slopes in the order of the sorted slope groups).

    The residual SD is :math:`\\sqrt{\\text{RSS}/(n - g - k)}` with :math:`g` intercepts and
    :math:`k` slopes.
    """
    slope_groups = np.zeros(len(y)) if slope_groups is None else np.asarray(slope_groups)
    labels, slope_labels = np.unique(groups), np.unique(slope_groups)
    design = np.column_stack(
        [(groups == g).astype(float) for g in labels]
        + [np.where(slope_groups == k, x, 0.0) for k in slope_labels]
    )
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    dof = len(y) - len(labels) - len(slope_labels)
    if dof < 1:
        raise ValueError("too few rows for the slopes and intercepts of this fit")
    return float(math.sqrt(resid @ resid / dof)), [float(c) for c in coef[len(labels) :]]


def predictor_comparison(
    results: Any,
    cells: Iterable[Cell] | None = None,
    level: float = 0.5,
    bases: Iterable[float] | None = None,
    slopes: str = "common",
    intercepts: str = "cell",
) -> dict[str, Any]:
    r"""How well each predictor explains the reach: per seed, one fit per predictor.

    The rows are the (cell, base) whose reach is finite and positive in *every* seed, so each
    seed fits the same rows.  For each seed separately, least squares of :math:`\ln r` on
    :math:`\ln P` (:math:`P` the horizon, the quarter period or the base) with one intercept
    per group of rows and one slope per slope group; the residual standard deviation
    :math:`\sqrt{\text{RSS}/(n - g - k)}` (:math:`g` intercepts, :math:`k` slopes).  Each
    seed is a replicate of the whole sweep, so the per-seed values give a t-interval, and so
    do the paired differences between predictors (same seed, same rows).

    With one intercept per cell the fit asks only how the reach varies with the base *within*
    cells; there :math:`\ln` of the quarter period is a linear function of :math:`\ln b`, so
    the quarter period and the base differ only through a shared slope.  ``slopes="per_d"``
    gives each head dimension its own slope; ``intercepts="context"`` (one intercept per span,
    token count and training distances, shared by the head dimensions) makes the fit compare
    head dimensions too.

    Parameters
    ----------
    results : dict
        Results of experiment 1.
    cells : iterable of tuple, optional
        The cells to fit (default: every cell trained on log-uniform distances).
    level : float
        The reach level.
    bases : iterable of float, optional
        Only these bases (default: all of the cells' bases).
    slopes : {"common", "per_d"}
        One slope for all rows, or one per head dimension.
    intercepts : {"cell", "context"}
        One intercept per cell, or per (span, tokens, distances).

    Returns
    -------
    dict
        ``cells``, ``rows`` (how many rows entered each seed's fit), and per predictor ``sd``
        (per seed), ``sd_mean``, ``sd_low``, ``sd_high``, ``slope`` (per seed, the list of
        slopes); and ``difference``: per other predictor, the paired difference of its
        residual SD minus the horizon's, ``(mean, low, high)``.
    """
    from .._validate import check_choice

    slopes = check_choice(slopes, "slopes", ("common", "per_d"))
    intercepts = check_choice(intercepts, "intercepts", ("cell", "context"))
    chosen = (
        [c for c in recall_cells(results) if c[3] == "log_uniform"]
        if cells is None
        else [tuple(c) for c in cells]
    )
    keep = None if bases is None else {float(b) for b in bases}
    used = [
        r
        for r in reach_table(results, level)
        if r["cell"] in chosen
        and (keep is None or r["base"] in keep)
        and all(0 < x < math.inf for x in r["reach"])
        and math.isfinite(r["horizon"])
    ]
    if not used:
        raise ValueError("no row has a finite reach in every seed")
    n_seeds = len(used[0]["reach"])

    def group(cell: Cell) -> tuple:
        return cell if intercepts == "cell" else (cell[0], cell[1], cell[3])

    labels = sorted({group(r["cell"]) for r in used})
    groups = np.array([labels.index(group(r["cell"])) for r in used])
    slope_groups = np.array([r["cell"][2] if slopes == "per_d" else 0 for r in used])
    out: dict[str, Any] = {"cells": chosen, "rows": [len(used)] * n_seeds, "difference": {}}
    sds: dict[str, list[float]] = {p: [] for p in PREDICTORS}
    fitted: dict[str, list[list[float]]] = {p: [] for p in PREDICTORS}
    for s in range(n_seeds):
        y = np.log([r["reach"][s] for r in used])
        for p in PREDICTORS:
            x = np.log([_predictor(r, p) for r in used])
            sd, slope = _residual_sd(y, x, groups, slope_groups)
            sds[p].append(sd)
            fitted[p].append(slope)
    for p in PREDICTORS:
        mean, low, high = t_interval(sds[p])
        out[p] = {"sd": sds[p], "sd_mean": mean, "sd_low": low, "sd_high": high, "slope": fitted[p]}
    for p in PREDICTORS[1:]:
        out["difference"][p] = t_interval(np.subtract(sds[p], sds["horizon"]))
    return out


# --------------------------------------------------------------------------------------------
# the written predictions, read
# --------------------------------------------------------------------------------------------
def _member(results: Any, span: int, tokens: int, d: int, base: float) -> list[Mapping]:
    return _grouped(results, (span, tokens, d, "log_uniform"))[float(base)]


def _run_reach(run: Mapping, level: float) -> float:
    ev = _evaluation(run, None)
    edges = np.asarray(ev["bin_edges"], dtype=np.float64)
    return reach(np.sqrt(edges[:-1] * (edges[1:] - 1.0)), ev["accuracy"], level)


def pair_outcomes(
    results: Any, pairs: Sequence[Pair] = PAIRS, level: float = 0.5
) -> list[dict[str, Any]]:
    r"""Each written pair (:data:`rope_lib.experiments.predictions.PAIRS`), read.

    Per seed, the reaches :math:`r_a, r_b` and :math:`\ln(r_a/r_b)`; the mean with its
    t-interval and the verdict ``"a"``, ``"b"`` or ``"undecided"``
    (:mod:`rope_lib.experiments.predictions`).  When a member's reach is infinite (it never
    falls below the level) in some seed, the log ratio is not averaged: the verdict is that
    member's if it holds in every seed, else ``"undecided"``.  Also the farthest-bin
    accuracies and their paired difference.

    Raises
    ------
    ValueError
        The two members of a pair were not run with the same seeds (they may lie in different
        cells, so the seeds are compared here): a paired comparison needs seed for seed.
    """
    out = []
    for pair in pairs:
        runs_a = _member(results, pair.span, pair.tokens, *pair.a)
        runs_b = _member(results, pair.span, pair.tokens, *pair.b)
        seeds_a, seeds_b = ([int(r["seed"]) for r in g] for g in (runs_a, runs_b))
        if seeds_a != seeds_b:
            raise ValueError(
                f"results: the members of pair {pair.label} were run with different seeds "
                f"({seeds_a} and {seeds_b}); a paired comparison needs the same seeds"
            )
        ra = [_run_reach(r, level) for r in runs_a]
        rb = [_run_reach(r, level) for r in runs_b]
        finite = all(0 < x < math.inf for x in ra + rb)
        if finite:
            mean, low, high = t_interval(np.log(ra) - np.log(rb))
            verdict = _verdict(low, high, "a", "b")
        else:
            mean = low = high = math.nan
            wins = {"a" if x > y else "b" if y > x else "tie" for x, y in zip(ra, rb, strict=True)}
            verdict = wins.pop() if len(wins) == 1 and "tie" not in wins else "undecided"
        far_a = [_evaluation(r, None)["accuracy"][-1] for r in runs_a]
        far_b = [_evaluation(r, None)["accuracy"][-1] for r in runs_b]
        out.append(
            {
                "pair": pair,
                "reach_a": ra,
                "reach_b": rb,
                "log_ratio": (mean, low, high),
                "verdict": verdict,
                "far_difference": t_interval(np.subtract(far_a, far_b)),
            }
        )
    return out


def edge_outcomes(
    results: Any, edges: Sequence[WindowEdge] = EDGES, level: float = 0.5
) -> list[dict[str, Any]]:
    """Each written window edge (:data:`rope_lib.experiments.predictions.EDGES`), read.

    Per seed: the mean farthest-bin accuracy of the three inside bases minus that of the three
    outside bases, and the same for the mean log reach; each with its t-interval over seeds and
    the verdict ``"inside"``, ``"outside"`` or ``"undecided"``.  ``far_inside_runs`` and
    ``far_outside_runs`` hold each base's farthest-bin accuracy per seed (bases x seeds).

    ``reference`` gives a scale for the step: among the cell's other bases (not at any edge),
    the one whose horizon is nearest (in log) to the inside bases' and the one nearest to the
    outside bases', and the paired difference of their farthest-bin accuracies
    (``bases``, ``horizons``, ``far_difference``; ``None`` when the cell has no two such
    bases).  A layer whose far accuracy followed the horizon alone would step at the edge by
    about that much; the reference bases differ in base as well, so it is a scale, not a
    prediction.
    """
    out = []
    for edge in edges:
        sides = {}
        for side in ("inside", "outside"):
            groups = [
                _member(results, edge.span, edge.tokens, edge.d, b) for b in getattr(edge, side)
            ]
            far = np.array([[_evaluation(r, None)["accuracy"][-1] for r in g] for g in groups])
            rch = np.array([[_run_reach(r, level) for r in g] for g in groups])
            sides[side] = (far.mean(axis=0), rch, far)
        far_diff = t_interval(sides["inside"][0] - sides["outside"][0])
        rin, rout = sides["inside"][1], sides["outside"][1]
        if np.all((rin > 0) & np.isfinite(rin)) and np.all((rout > 0) & np.isfinite(rout)):
            log_diff = t_interval(np.log(rin).mean(axis=0) - np.log(rout).mean(axis=0))
        else:
            log_diff = (math.nan,) * 3
        out.append(
            {
                "edge": edge,
                "reference": _edge_reference(results, edge, edges),
                "far_inside": sides["inside"][0].tolist(),
                "far_outside": sides["outside"][0].tolist(),
                "far_inside_runs": sides["inside"][2].tolist(),
                "far_outside_runs": sides["outside"][2].tolist(),
                "far_difference": far_diff,
                "far_verdict": _verdict(far_diff[1], far_diff[2], "inside", "outside"),
                "reach_inside": rin.tolist(),
                "reach_outside": rout.tolist(),
                "log_reach_difference": log_diff,
                "reach_verdict": _verdict(log_diff[1], log_diff[2], "inside", "outside"),
            }
        )
    return out


def _edge_reference(results: Any, edge: WindowEdge, edges: Sequence[WindowEdge]) -> Any:
    cell = (edge.span, edge.tokens, edge.d, "log_uniform")
    at_edges = {b for e in edges for b in e.inside + e.outside}
    by_base = _grouped(results, cell)
    others = [b for b in by_base if b not in at_edges]
    if len(others) < 2:
        return None
    logs = {b: math.log(horizon(edge.d, b)) for b in others}

    def nearest(hs: Sequence[int]) -> float:
        target = float(np.mean(np.log(hs)))
        return min(others, key=lambda b: abs(logs[b] - target))

    b_in, b_out = nearest(edge.horizons_inside), nearest(edge.horizons_outside)
    if b_in == b_out:
        return None
    far = {b: [_evaluation(r, None)["accuracy"][-1] for r in by_base[b]] for b in (b_in, b_out)}
    return {
        "bases": (b_in, b_out),
        "horizons": (horizon(edge.d, b_in), horizon(edge.d, b_out)),
        "far_difference": t_interval(np.subtract(far[b_in], far[b_out])),
    }


# --------------------------------------------------------------------------------------------
# search difficulty
# --------------------------------------------------------------------------------------------
def distractor_effect(results: Any, cell: Cell, level: float = 0.5) -> dict[str, Any]:
    """Reach of the same models evaluated with different numbers of context tokens.

    Returns
    -------
    dict
        ``tokens`` (the evaluation token counts, training count first), ``bases``, and
        ``reach``: array ``(tokens, bases, seeds)``.
    """
    by_base = _grouped(results, cell)
    first = next(iter(by_base.values()))[0]
    counts = [int(ev["tokens"]) for ev in first["evaluations"]]
    table = np.array(
        [
            [[_evaluation_reach(r, n, level) for r in group] for group in by_base.values()]
            for n in counts
        ]
    )
    return {"tokens": counts, "bases": list(by_base), "reach": table}


def _evaluation_reach(run: Mapping, tokens: int, level: float) -> float:
    ev = _evaluation(run, tokens)
    edges = np.asarray(ev["bin_edges"], dtype=np.float64)
    return reach(np.sqrt(edges[:-1] * (edges[1:] - 1.0)), ev["accuracy"], level)


# --------------------------------------------------------------------------------------------
# the learned form: amplitudes, phases, slow-pair energy
# --------------------------------------------------------------------------------------------
def learned_form(results: Any, cell: Cell, distances: Any = None) -> dict[str, Any]:
    r"""Pair by pair, what the trained layers put on each frequency, and what it does by distance.

    From each run's measured target moment :math:`M = E[k^*q^\top]` (``target_moment_blocks``)
    and means: pair :math:`i` has cosine and sine weights :math:`(c_i, s_i)`
    (:func:`rope_lib.experiments.recall_model.rotation_terms`), amplitude
    :math:`A_i = \sqrt{c_i^2 + s_i^2}` and phase :math:`\varphi_i = \operatorname{atan2}(s_i,
    c_i)`.  The learned margin at distance :math:`\Delta` is

    .. math:: \delta(\Delta) = \underbrace{\sum_i c_i\cos\Delta\theta_i}_{\text{cosine part}}
              \;\underbrace{-\sum_i s_i\sin\Delta\theta_i}_{\text{sine part}}
              \;-\; \mu_q^\top R_{-\Delta}\mu_k ,

    chapter 7's general form at :math:`m = -\Delta` with the measured statistics; with every
    :math:`s_i = 0` and equal :math:`c_i` it is a multiple of :math:`B_\Delta`.  The *slow
    energy share* is the share of :math:`\sum_i \|F_i\|_F^2` (the learned form
    :math:`F = W_kW_q^\top`, ``form_blocks``) on the slower half of the pairs
    (:math:`i \ge d/4`; 1/2 on a middle pair).

    Parameters
    ----------
    results : dict
        Results of experiment 1.
    cell : tuple
        ``(span, tokens, d, distances)``.
    distances : array_like of int, optional
        Distances at which to evaluate the margin (default :math:`1..L`).

    Returns
    -------
    dict
        ``bases``, ``distances``; arrays over ``(bases, seeds, ...)``: ``amplitude`` and
        ``phase`` (per pair), ``cosine_part``, ``sine_part``, ``mean_part`` and ``margin``
        (per distance); per ``(bases, seeds)``: ``slow_energy``, ``learned_horizon`` (first
        distance with :math:`\delta < 0`, ``inf`` if none), ``cosine_horizon`` (the same
        without the sine part), ``peak`` (distance of the largest margin).
    """
    span, _, d, _ = cell
    by_base = _grouped(results, cell)
    if distances is None:
        dist = np.arange(1, span + 1)
    else:  # whole numbers only: 2.5 is refused, never read as 2
        dist = check_integer_array(distances, "distances", ndim=1)
    if dist.size == 0 or np.any(dist < 1):
        raise ValueError("distances must be a non-empty 1-d array of integers >= 1")
    n = d // 2
    slow_w = np.where(
        np.arange(n) > (n - 1) / 2, 1.0, np.where(np.arange(n) == (n - 1) / 2, 0.5, 0.0)
    )
    keys = ("amplitude", "phase", "cosine_part", "sine_part", "mean_part", "margin")
    acc: dict[str, list] = {
        k: [] for k in (*keys, "slow_energy", "learned_horizon", "cosine_horizon", "peak")
    }
    layout = str(results.get("config", {}).get("layout", "half"))
    for base, group in by_base.items():
        th = theta(d, base)
        ang = dist[:, None] * th[None, :]
        rows: dict[str, list] = {k: [] for k in acc}
        for run in group:
            ev = _evaluation(run, None)
            c, s = rotation_terms(ev["target_moment_blocks"])
            mu_q, mu_k = np.asarray(ev["mu_q"]), np.asarray(ev["mu_k"])
            mc, ms = rotation_terms(_pair_blocks_of(np.outer(mu_k, mu_q), layout))
            cos_part = np.cos(ang) @ c
            sin_part = -(np.sin(ang) @ s)
            mean_part = -(np.cos(ang) @ mc - np.sin(ang) @ ms)
            margin = cos_part + sin_part + mean_part
            energy = (np.asarray(run["form_blocks"], dtype=np.float64) ** 2).sum(axis=(1, 2))
            for key, value in zip(
                keys,
                (np.hypot(c, s), np.arctan2(s, c), cos_part, sin_part, mean_part, margin),
                strict=True,
            ):
                rows[key].append(value)
            rows["slow_energy"].append(float(energy @ slow_w / energy.sum()))
            rows["learned_horizon"].append(_first_negative(dist, margin))
            rows["cosine_horizon"].append(_first_negative(dist, cos_part + mean_part))
            rows["peak"].append(float(dist[int(np.argmax(margin))]))
        for key in acc:
            acc[key].append(rows[key])
    out: dict[str, Any] = {"bases": list(by_base), "distances": dist}
    out.update({k: np.array(v, dtype=np.float64) for k, v in acc.items()})
    return out


def _first_negative(dist: np.ndarray, values: np.ndarray) -> float:
    neg = np.flatnonzero(values < 0)
    return float(dist[neg[0]]) if neg.size else math.inf


def _pair_blocks_of(matrix: np.ndarray, layout: str) -> np.ndarray:
    from .recall_model import pair_blocks

    return pair_blocks(matrix, layout)


# --------------------------------------------------------------------------------------------
# experiment 2: the needle task, its controls and the predictions
# --------------------------------------------------------------------------------------------
#: Per-bin counts of a run of experiment 2 (rope_lib.experiments.needle_model.evaluate_needle).
NEEDLE_COUNTS = (
    "main_correct",
    "main_latest",
    "recency_correct",
    "repeat_correct",
    "repeat_other",
    "absent_target",
    "absent_latest",
    "absent_needle",
)


#: Counts that runs of experiment 2 may carry (the primacy baseline and the translation
#: control, added after the first sweep): read when every run has them.
NEEDLE_OPTIONAL_COUNTS = ("primacy_correct", "shifted_correct")


def _needle_runs(results: Any) -> list[Mapping]:
    return _checked_runs(
        results, "needle", 2, ("base", "seed", "bin_edges", "total", *NEEDLE_COUNTS)
    )


@dataclass(frozen=True)
class NeedleCurves:
    r"""Experiment 2 by base, seed and distance bin: the retrieval and its controls as rates.

    Attributes
    ----------
    bases, seeds : numpy.ndarray
        Increasing bases; the seeds (the same for every base).
    bin_edges : numpy.ndarray
        int64, bin :math:`j` is :math:`[e_j, e_{j+1})`.
    total : numpy.ndarray
        ``(bases, seeds, bins)`` held-out bodies per bin.
    rates : dict of numpy.ndarray
        ``(bases, seeds, bins)`` per count of :data:`NEEDLE_COUNTS` (and of
        :data:`NEEDLE_OPTIONAL_COUNTS` that every run has) divided by ``total``, and
        ``"absent_chance"`` = ``absent_needle / n_needles`` (the rate of one needle's value
        when the absent query picks a needle without regard to which) and ``"key_gain"`` =
        ``main_correct - absent_target`` (what the query's key adds).
    mean, low, high : dict of numpy.ndarray
        ``(bases, bins)`` per rate: the mean over seeds and its 95% t-interval.
    binomial_se : numpy.ndarray
        ``(bases, bins)``: the largest :math:`\sqrt{p(1-p)/N}` of the main accuracy over seeds.
    horizon, quarter_period : numpy.ndarray
        Per base, at the configuration's head dimension.
    """

    bases: np.ndarray
    seeds: np.ndarray
    bin_edges: np.ndarray
    total: np.ndarray
    rates: dict[str, np.ndarray]
    mean: dict[str, np.ndarray]
    low: dict[str, np.ndarray]
    high: dict[str, np.ndarray]
    binomial_se: np.ndarray
    horizon: np.ndarray
    quarter_period: np.ndarray


def _seed_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and 95% t-interval over axis 1 of a ``(bases, seeds, bins)`` array."""
    stats = np.array(
        [[t_interval(x[i, :, j]) for j in range(x.shape[2])] for i in range(x.shape[0])]
    )
    return stats[..., 0], stats[..., 1], stats[..., 2]


def needle_curves(results: Any) -> NeedleCurves:
    """The rates of every base, seed and bin of experiment 2 (see :class:`NeedleCurves`)."""
    runs = _needle_runs(results)
    by_base: dict[float, list[Mapping]] = {}
    for run in runs:
        by_base.setdefault(float(run["base"]), []).append(run)
    groups = [sorted(g, key=lambda r: int(r["seed"])) for _, g in sorted(by_base.items())]
    seeds = [int(r["seed"]) for r in groups[0]]
    edges = np.asarray(groups[0][0]["bin_edges"], dtype=np.int64)
    for g in groups:
        if [int(r["seed"]) for r in g] != seeds:
            raise ValueError("results: the bases of experiment 2 have different seeds")
        if any(not np.array_equal(np.asarray(r["bin_edges"]), edges) for r in g):
            raise ValueError("results: the runs of experiment 2 have different distance bins")
    total = np.array([[r["total"] for r in g] for g in groups], dtype=np.float64)
    optional = [k for k in NEEDLE_OPTIONAL_COUNTS if all(k in r for r in runs)]
    rates = {
        k: np.array([[r[k] for r in g] for g in groups], dtype=np.float64) / total
        for k in (*NEEDLE_COUNTS, *optional)
    }
    config = results.get("config", {})
    n_needles = int(config.get("n_needles", 4))
    d = int(config.get("head_dim", 16))
    rates["absent_chance"] = rates["absent_needle"] / n_needles
    rates["key_gain"] = rates["main_correct"] - rates["absent_target"]
    stats = {k: _seed_stats(v) for k, v in rates.items()}
    main = rates["main_correct"]
    bases = np.array(sorted(by_base), dtype=np.float64)
    return NeedleCurves(
        bases=bases,
        seeds=np.array(seeds),
        bin_edges=edges,
        total=total,
        rates=rates,
        mean={k: v[0] for k, v in stats.items()},
        low={k: v[1] for k, v in stats.items()},
        high={k: v[2] for k, v in stats.items()},
        binomial_se=np.sqrt(main * (1 - main) / total).max(axis=1),
        horizon=np.array([horizon(d, b) for b in bases]),
        quarter_period=np.array([quarter_period(d, b) for b in bases]),
    )


#: A run of experiment 2 *learned* key retrieval when its mean key gain over the distance
#: bins (retrieval accuracy minus the absent-key target rate) exceeds this.  Fixed after the
#: first runs were seen: their mean gains fell near 0 or above 0.6, nothing in between.
LEARNED_GAIN = 0.5


def needle_outcomes(results: Any, level: float = 0.5) -> list[dict[str, Any]]:
    r"""Each base of experiment 2 read against :data:`~.predictions.NEEDLE_PREDICTIONS`.

    Per base and seed, the *reach bin* is the first distance bin whose retrieval accuracy is
    below ``level`` (the number of bins if none is).  Per base: the reach bins of the seeds;
    the farthest bin's accuracy (mean and interval over seeds); whether the farthest bin is
    retrieved (``"yes"`` when the interval lies above ``level``, ``"no"`` when below,
    ``"undecided"`` otherwise); the predictions; and the least accuracy over the bins up to
    :math:`L/2` (the issue's check that a feasible base retrieves at long distance).

    Returns
    -------
    list of dict
        One per base, increasing: ``base``, ``horizon``, ``quarter_period``,
        ``reach_bins`` (per seed), ``far`` ``(mean, low, high)``, ``far_retrieved``,
        ``far_by_horizon``, ``far_by_quarter_period``, ``horizon_bin``,
        ``quarter_period_bin``, ``min_to_half`` (per seed: the least accuracy in the bins that
        end at or before half the context), ``key_gain`` (per seed, the mean over bins of the
        retrieval accuracy minus the absent-key target rate), ``learned`` (per seed, whether
        that gain exceeds :data:`LEARNED_GAIN`), ``far_learned`` (the farthest bin's
        accuracy of the seeds that learned), ``main_min`` (per seed, the least retrieval
        accuracy over all bins) and ``shifted_beyond`` (per seed, the least accuracy of the
        translation control, ``shifted_correct``, over the bins that start at or beyond the
        horizon; ``None`` for every seed when the runs do not carry that count, ``nan`` when no
        bin starts there).
    """
    from .predictions import NEEDLE_PREDICTIONS

    level = check_real(level, "level", 0.0, 1.0, low_open=True, high_open=True)
    c = needle_curves(results)
    main = c.rates["main_correct"]
    predicted = {p.base: p for p in NEEDLE_PREDICTIONS}
    half = int(results.get("config", {}).get("context_length", 2 * c.bin_edges[-1])) // 2
    upto = int(np.sum(c.bin_edges[1:] <= half + 1))
    out = []
    for i, base in enumerate(c.bases):
        below = main[i] < level
        reach_bins = [int(np.argmax(row)) if row.any() else len(row) for row in below]
        far = t_interval(main[i, :, -1])
        gain = c.rates["key_gain"][i].mean(axis=1)
        learned = gain > LEARNED_GAIN
        p = predicted.get(float(base))
        beyond = c.bin_edges[:-1] >= c.horizon[i]
        if "shifted_correct" not in c.rates:
            shifted: list = [None] * len(c.seeds)
        elif not beyond.any():
            shifted = [math.nan] * len(c.seeds)
        else:
            shifted = c.rates["shifted_correct"][i][:, beyond].min(axis=1).tolist()
        out.append(
            {
                "base": float(base),
                "horizon": float(c.horizon[i]),
                "quarter_period": float(c.quarter_period[i]),
                "reach_bins": reach_bins,
                "far": far,
                "far_retrieved": _verdict(far[1] - level, far[2] - level, "yes", "no"),
                "far_by_horizon": None if p is None else p.far_by_horizon,
                "far_by_quarter_period": None if p is None else p.far_by_quarter_period,
                "horizon_bin": None if p is None else p.horizon_bin,
                "quarter_period_bin": None if p is None else p.quarter_period_bin,
                "min_to_half": [float(row[:upto].min()) for row in main[i]],
                "key_gain": gain.tolist(),
                "learned": learned.tolist(),
                "far_learned": main[i, learned, -1].tolist(),
                "main_min": main[i].min(axis=1).tolist(),
                "shifted_beyond": shifted,
            }
        )
    return out
