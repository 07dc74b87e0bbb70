r"""Summaries and the figure of experiment 1 (issue 13), for chapter 9, "Does the bound bind?".

The coming chapter 9 compares what the recall layer of :mod:`rope_lib.experiment` learned
with what chapter 7 (``chapters/07_base_bound.md``, label ``base-bound``) predicts.  This
module reads a results blob (:func:`rope_lib.experiment_results`) and computes, for one
context length :math:`L` and head dimension :math:`d`:

* :func:`recall_curves`: per base :math:`b`, the recall accuracy per logarithmic distance bin,
  averaged over seeds, with its standard error, next to chapter 7's predictions for that
  :math:`(d, b)`: the horizon of :math:`B_m = \sum_i\cos(m\theta_i)`
  (:func:`rope_lib.max_context`, the first distance with :math:`B_m < 0`), the quarter period
  of the slowest pair :math:`T_{d/2-1}/4 = \tfrac{\pi}{2} b^{(d-2)/d}`
  (:func:`rope_lib.quarter_period`, chapter ``decay``), and :math:`\operatorname{min\_base}(L,
  d)` (:func:`rope_lib.min_base`);
* :func:`plot_recall_by_distance`: the figure of those curves;
* :func:`pair_energy_summary`: per base, the share of the learned form's weight that sits on
  the slower half of the rotation pairs.

Nothing here trains or evaluates a model; every number comes from the stored results and from
the public functions of :mod:`rope_lib.base_bound` and :mod:`rope_lib.decay`.  This module is
not among :data:`rope_lib.experiment.CODE_FILES`, so changing it does not make the stored
results stale.

Seed statistics
---------------
Runs that differ only in their seed are repeated measurements of one cell
:math:`(L, d, b)`.  With :math:`n` seeds and per-seed values :math:`x_1, \dots, x_n`, the mean is
:math:`\bar x = \frac1n\sum_s x_s` and the standard error
:math:`\mathrm{SE} = s/\sqrt n` with the sample standard deviation
:math:`s^2 = \frac{1}{n-1}\sum_s (x_s - \bar x)^2` (``ddof=1``); with one seed the SE is
``nan``.  The SE describes the spread across seeds only: each accuracy is itself an estimate
from ``eval_per_bin`` held-out examples, and the held-out set is the same for every seed and
base, so seeds and bases are compared on the same examples.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import (
    _describe,
    check_base,
    check_dim,
    check_integer_array,
    check_positive_int,
    check_real,
)
from .base_bound import max_context, min_base
from .decay import quarter_period
from .figures.style import MAX_FIGURE_POINTS, line_style, new_figure

__all__ = [
    "RecallCurves",
    "PairEnergySummary",
    "RecallReach",
    "MarginHorizons",
    "margin_horizons",
    "learned_margin",
    "experiment_summary",
    "recall_curves",
    "recall_reach",
    "plot_recall_by_distance",
    "pair_energy_summary",
]

#: Keys every run of a results blob must carry for the summaries of this module.
_RUN_KEYS = ("context_length", "d", "base", "seed", "bin_edges", "accuracy", "pair_energy")


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecallCurves:
    r"""Recall accuracy by distance for one :math:`(L, d)`, with chapter 7's predictions.

    Arrays over bases have the bases in increasing order; arrays over bins follow
    ``bin_edges``.

    Attributes
    ----------
    context_length, d : int
        The cell of the sweep: context length :math:`L` and head dimension :math:`d`.
    bases : numpy.ndarray
        float64, shape ``(n_bases,)``, increasing.
    n_seeds : numpy.ndarray
        int64, shape ``(n_bases,)``: runs averaged for each base.
    bin_edges : numpy.ndarray
        int64, shape ``(n_bins + 1,)``: bin :math:`j` holds the distances
        :math:`\Delta \in [e_j, e_{j+1})` (whole numbers; :math:`e_0 = 1`, :math:`e_{n} = L + 1`).
    bin_centres : numpy.ndarray
        float64, shape ``(n_bins,)``: the geometric centre :math:`\sqrt{e_j (e_{j+1} - 1)}` of
        the first and last distance of each bin (the centre on a logarithmic axis).
    accuracy_mean, accuracy_se : numpy.ndarray
        float64, shape ``(n_bases, n_bins)``: mean accuracy over seeds and its standard error
        :math:`s/\sqrt n` (``ddof=1``; ``nan`` with one seed).
    horizon : numpy.ndarray
        float64, shape ``(n_bases,)``: :func:`rope_lib.max_context` of ``(base, d)``, the first
        distance :math:`m` with :math:`B_m < 0` (whole numbers; ``inf`` when
        :math:`B_m \ge 0` for every distance the default scan of :func:`rope_lib.max_context`
        covers, :math:`2^{26}` for :math:`d \le 128`).
    quarter_period : numpy.ndarray
        float64, shape ``(n_bases,)``: :func:`rope_lib.quarter_period` of ``(d, base)``,
        :math:`T_{d/2-1}/4 = \tfrac{\pi}{2} b^{(d-2)/d}`, where the slowest pair's
        :math:`\cos(m\theta_{d/2-1})` first crosses zero.
    min_base : float
        :func:`rope_lib.min_base` of ``(L, d)``: the smallest base with :math:`B_m \ge 0` for
        every :math:`0 \le m < L`.
    chance : float
        Chance accuracy ``1 / n_values`` of the results' configuration.
    """

    context_length: int
    d: int
    bases: np.ndarray
    n_seeds: np.ndarray
    bin_edges: np.ndarray
    bin_centres: np.ndarray
    accuracy_mean: np.ndarray
    accuracy_se: np.ndarray
    horizon: np.ndarray
    quarter_period: np.ndarray
    min_base: float
    chance: float


@dataclass(frozen=True)
class RecallReach:
    r"""How far recall reaches for one :math:`(L, d)`: where accuracy first falls below a level.

    See :func:`recall_reach` for the definition.

    Attributes
    ----------
    context_length, d : int
        The cell of the sweep.
    level : float
        The accuracy level that defines the reach.
    bases : numpy.ndarray
        float64, shape ``(n_bases,)``, increasing.
    reach : numpy.ndarray
        float64, shape ``(n_bases,)``: the reach of the seed-mean curve (distance, tokens);
        ``0`` when the curve starts below ``level``, ``inf`` when it never falls below it.
    reach_per_seed : numpy.ndarray
        float64, shape ``(n_bases, n_seeds)``: the reach of each seed's curve (seed order).
    horizon, quarter_period : numpy.ndarray
        float64, shape ``(n_bases,)``: the predictions, as in :class:`RecallCurves`.
    min_base : float
        :func:`rope_lib.min_base` of ``(L, d)``.
    """

    context_length: int
    d: int
    level: float
    bases: np.ndarray
    reach: np.ndarray
    reach_per_seed: np.ndarray
    horizon: np.ndarray
    quarter_period: np.ndarray
    min_base: float


@dataclass(frozen=True)
class MarginHorizons:
    r"""Where the expected margin first turns negative: equal weights against learned weights.

    See :func:`margin_horizons` for the definitions.

    Attributes
    ----------
    context_length, d : int
        The cell of the sweep.
    bases : numpy.ndarray
        float64, shape ``(n_bases,)``, increasing.
    equal_weight : numpy.ndarray
        float64, shape ``(n_bases,)``: the horizon of :math:`B_m` (chapter 7), as in
        :class:`RecallCurves`.
    learned : numpy.ndarray
        float64, shape ``(n_bases, n_seeds)``: the first distance :math:`\Delta \ge 1` at which
        the learned margin is negative, per seed; ``inf`` when it stays :math:`\ge 0` up to
        ``limit``.
    limit : int
        The largest distance scanned.
    """

    context_length: int
    d: int
    bases: np.ndarray
    equal_weight: np.ndarray
    learned: np.ndarray
    limit: int


@dataclass(frozen=True)
class PairEnergySummary:
    r"""Where the learned form puts its weight, pair by pair, for one :math:`(L, d)`.

    See :func:`pair_energy_summary` for the definitions and for what the numbers can and
    cannot show.

    Attributes
    ----------
    context_length, d : int
        The cell of the sweep.
    bases : numpy.ndarray
        float64, shape ``(n_bases,)``, increasing.
    n_seeds : numpy.ndarray
        int64, shape ``(n_bases,)``.
    slow_weights : numpy.ndarray
        float64, shape ``(d/2,)``: :math:`w_i`, how much of pair :math:`i` counts as "slow"
        (1 for the slower half, 0 for the faster half, 1/2 for the middle pair when
        :math:`d/2` is odd).
    energy_share_mean : numpy.ndarray
        float64, shape ``(n_bases, d/2)``: mean over seeds of each pair's share
        :math:`e_i^2 / \sum_j e_j^2` of the block-diagonal energy of :math:`W_q W_k^\top`.
    slow_energy_mean, slow_energy_se : numpy.ndarray
        float64, shape ``(n_bases,)``: the slow energy fraction
        :math:`F_E = \sum_i w_i e_i^2 / \sum_i e_i^2`, mean and SE over seeds.
    slow_amplitude_mean, slow_amplitude_se : numpy.ndarray
        float64, shape ``(n_bases,)``: the slow amplitude fraction
        :math:`F_A = \sum_i w_i A_i / \sum_i A_i` of the measured target moment, mean and SE
        over seeds (``nan`` when the results carry no ``target_moment_blocks``).
    """

    context_length: int
    d: int
    bases: np.ndarray
    n_seeds: np.ndarray
    slow_weights: np.ndarray
    energy_share_mean: np.ndarray
    slow_energy_mean: np.ndarray
    slow_energy_se: np.ndarray
    slow_amplitude_mean: np.ndarray
    slow_amplitude_se: np.ndarray


# --------------------------------------------------------------------------------------------
# argument checks and grouping
# --------------------------------------------------------------------------------------------
def _runs(results: Any) -> tuple[list[Mapping], Mapping]:
    """The runs and the configuration of a results blob, checked for the keys used here."""
    what = (
        "results must be a results dict of rope_lib.experiment_results (with 'config' and 'runs')"
    )
    if not isinstance(results, Mapping):
        raise TypeError(f"{what}, got {_describe(results)}")
    runs, config = results.get("runs"), results.get("config")
    if not isinstance(config, Mapping) or "n_values" not in config:
        raise ValueError(f"{what}; its 'config' is missing or lacks 'n_values'")
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence) or not runs:
        raise ValueError(f"{what}; its 'runs' is missing or empty")
    for run in runs:
        if not isinstance(run, Mapping):
            raise TypeError(f"{what}; a run is {_describe(run)}")
        missing = [k for k in _RUN_KEYS if k not in run]
        if missing:
            raise ValueError(f"{what}; a run lacks {missing}")
    return list(runs), config


def _cell(
    results: Any, context_length: Any, d: Any
) -> tuple[int, int, dict[float, list[Mapping]], Mapping]:
    """Checked ``(L, d)``, the runs of that cell grouped by base (seed order), the config."""
    runs, config = _runs(results)
    length = check_positive_int(context_length, "context_length", minimum=2)
    d = check_dim(d)
    lengths = sorted({int(r["context_length"]) for r in runs})
    if length not in lengths:
        raise ValueError(
            f"context_length must be one of the results' context lengths {lengths}, got {length}"
        )
    dims = sorted({int(r["d"]) for r in runs if int(r["context_length"]) == length})
    if d not in dims:
        raise ValueError(
            f"d must be one of the results' head dimensions {dims} for context_length = "
            f"{length}, got {d}"
        )
    by_base: dict[float, list[Mapping]] = {}
    for run in runs:
        if int(run["context_length"]) == length and int(run["d"]) == d:
            by_base.setdefault(float(run["base"]), []).append(run)
    for group in by_base.values():
        group.sort(key=lambda r: int(r["seed"]))
    return length, d, dict(sorted(by_base.items())), config


def _select_bases(bases: Any, available: Sequence[float]) -> list[float]:
    """``bases`` (None: all available) checked against the bases of the results."""
    if bases is None:
        return list(available)
    if isinstance(bases, numbers.Real) and not isinstance(bases, bool):
        bases = [bases]
    if isinstance(bases, (str, bytes)) or not isinstance(bases, (Sequence, np.ndarray)):
        raise TypeError(
            f"bases must be None or a sequence of bases of the results, got {_describe(bases)}"
        )
    if len(bases) == 0:
        raise ValueError("bases must not be empty (pass None for every base of the results)")
    chosen = []
    for b in bases:
        value = check_base(b, "bases entries")
        if value not in available:
            raise ValueError(
                f"bases entries must be bases of the results {[f'{a:g}' for a in available]}, "
                f"got {value:g}"
            )
        if value not in chosen:
            chosen.append(value)
    return sorted(chosen)


def _mean_se(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error over axis 0 (``ddof=1``; ``nan`` for one value)."""
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.full(mean.shape, np.nan)
    return mean, values.std(axis=0, ddof=1) / math.sqrt(n)


def _horizon(base: float, d: int) -> float:
    """max_context(base, d), or inf when B_m >= 0 at every distance its default scan covers."""
    try:
        return float(max_context(base, d))
    except ValueError:  # base and d are valid: the horizon is beyond the scan limit
        return math.inf


# --------------------------------------------------------------------------------------------
# recall by distance
# --------------------------------------------------------------------------------------------
def recall_curves(results: Any, context_length: int, d: int) -> RecallCurves:
    r"""Mean recall accuracy by distance per base, with chapter 7's predictions.

    For every base :math:`b` of the results at context length :math:`L` and head dimension
    :math:`d`, with seeds :math:`s = 1..n` and accuracy :math:`a_{s,j}` in distance bin
    :math:`j`:

    .. math:: \bar a_j = \frac1n\sum_s a_{s,j}, \qquad
              \mathrm{SE}_j = \frac{1}{\sqrt n}
              \Bigl(\frac{1}{n-1}\sum_s (a_{s,j} - \bar a_j)^2\Bigr)^{1/2},

    and the predictions for :math:`(d, b)`: the horizon
    :math:`\min\{m \ge 0 : B_m < 0\}` with :math:`B_m = \sum_{i<d/2}\cos(m b^{-2i/d})`, the
    quarter period :math:`\tfrac{\pi}{2} b^{(d-2)/d}`, and :math:`\operatorname{min\_base}(L,
    d)`.  The query's score with the target at distance :math:`\Delta` has :math:`m = -\Delta`,
    and :math:`B_{-m} = B_m`, so the horizon is read on the distance axis directly.

    Parameters
    ----------
    results : dict
        A results blob of :func:`rope_lib.experiment_results` (``config`` and ``runs``).
    context_length : int
        :math:`L`, one of the results' context lengths.
    d : int
        Head dimension, even, one of the results' head dimensions at that :math:`L`.

    Returns
    -------
    RecallCurves

    Raises
    ------
    ValueError
        ``context_length`` or ``d`` not in the results (the message lists those that are), an
        odd ``d``, a results blob without the needed keys, or runs of one cell whose
        distance bins differ.
    TypeError
        ``results`` is not a dict, or ``context_length`` / ``d`` are not integers.
    """
    length, d, by_base, config = _cell(results, context_length, d)
    bases = list(by_base)
    edges = np.asarray(by_base[bases[0]][0]["bin_edges"], dtype=np.int64)
    means, ses, n_seeds = [], [], []
    for base in bases:
        group = by_base[base]
        for run in group:
            if not np.array_equal(np.asarray(run["bin_edges"], dtype=np.int64), edges):
                raise ValueError(
                    f"results: the runs of context_length = {length}, d = {d} have different "
                    "distance bins (bin_edges); they are not one sweep"
                )
        acc = np.array([run["accuracy"] for run in group], dtype=np.float64)
        if acc.shape != (len(group), edges.size - 1):
            raise ValueError(
                f"results: a run of context_length = {length}, d = {d} has "
                f"{acc.shape[-1]} accuracies for {edges.size - 1} bins"
            )
        mean, se = _mean_se(acc)
        means.append(mean)
        ses.append(se)
        n_seeds.append(len(group))
    return RecallCurves(
        context_length=length,
        d=d,
        bases=np.array(bases, dtype=np.float64),
        n_seeds=np.array(n_seeds, dtype=np.int64),
        bin_edges=edges,
        bin_centres=np.sqrt(edges[:-1] * (edges[1:] - 1.0)),
        accuracy_mean=np.array(means),
        accuracy_se=np.array(ses),
        horizon=np.array([_horizon(b, d) for b in bases]),
        quarter_period=np.array([quarter_period(d, b) for b in bases]),
        min_base=float(min_base(length, d)),
        chance=1.0 / float(config["n_values"]),
    )


def _first_fall(centres: np.ndarray, accuracy: np.ndarray, level: float) -> float:
    """Distance where a curve first falls below ``level``, interpolated in log distance."""
    below = np.flatnonzero(accuracy < level)
    if below.size == 0:
        return math.inf
    j = int(below[0])
    if j == 0:
        return 0.0
    a0, a1 = float(accuracy[j - 1]), float(accuracy[j])
    u0, u1 = math.log(centres[j - 1]), math.log(centres[j])
    return math.exp(u0 + (a0 - level) / (a0 - a1) * (u1 - u0))


def recall_reach(results: Any, context_length: int, d: int, level: float = 0.5) -> RecallReach:
    r"""The distance at which recall accuracy first falls below ``level``, per base.

    With bin centres :math:`c_j` (:attr:`RecallCurves.bin_centres`) and accuracies
    :math:`a_j`, let :math:`j` be the first bin with :math:`a_j < \ell`.  The reach is

    .. math:: r = \exp\Bigl(\ln c_{j-1} + \frac{a_{j-1} - \ell}{a_{j-1} - a_j}
              (\ln c_j - \ln c_{j-1})\Bigr),

    the crossing of the straight line between the two bins on a logarithmic distance axis;
    :math:`r = 0` when :math:`a_0 < \ell` (below the level already at the shortest distances)
    and :math:`r = \infty` when no bin falls below it.  It is computed for the seed-mean curve
    and for each seed's curve.  Only the *first* fall counts: a curve that dips below the level
    and recovers has its reach at the dip.  The level is a choice (the default 1/2 lies
    between chance, 1/16, and the 0.9 or more that trained layers reach at short
    distances); an exercise of chapter 9 shows what changes with it.

    Parameters
    ----------
    results : dict
        A results blob of :func:`rope_lib.experiment_results`.
    context_length : int
        :math:`L`, one of the results' context lengths.
    d : int
        Head dimension, one of the results' head dimensions at that :math:`L`.
    level : float
        The accuracy level :math:`\ell`, strictly between chance and 1.

    Returns
    -------
    RecallReach
    """
    curves = recall_curves(results, context_length, d)
    _, _, by_base, _ = _cell(results, context_length, d)
    return _reach(curves, by_base, level)


def _reach(curves: RecallCurves, by_base: Mapping, level: Any) -> RecallReach:
    """:func:`recall_reach` of one cell from its curves and its runs grouped by base."""
    level = check_real(level, "level", curves.chance, 1.0, low_open=True, high_open=True)
    length = curves.context_length
    centres = curves.bin_centres
    per_seed = []
    for base in curves.bases:
        per_seed.append(
            [
                _first_fall(centres, np.asarray(run["accuracy"], float), level)
                for run in by_base[base]
            ]
        )
    if len({len(row) for row in per_seed}) != 1:
        raise ValueError(
            f"results: the bases of context_length = {length}, d = {curves.d} have different "
            "numbers of seeds"
        )
    return RecallReach(
        context_length=length,
        d=curves.d,
        level=level,
        bases=curves.bases,
        reach=np.array([_first_fall(centres, a, level) for a in curves.accuracy_mean]),
        reach_per_seed=np.array(per_seed, dtype=np.float64),
        horizon=curves.horizon,
        quarter_period=curves.quarter_period,
        min_base=curves.min_base,
    )


def _block_matrix(blocks: np.ndarray, d: int, layout: str) -> np.ndarray:
    """The d x d matrix with the pair blocks on their pairs' coordinates, zero elsewhere."""
    idx = np.arange(d)
    a, b = (idx[0::2], idx[1::2]) if layout == "interleaved" else (idx[: d // 2], idx[d // 2 :])
    pairs = np.stack([a, b], axis=1)
    full = np.zeros((d, d))
    full[pairs[:, :, None], pairs[:, None, :]] = blocks
    return full


def learned_margin(run: Mapping, distances: Any, layout: str = "half") -> np.ndarray:
    r"""The expected margin of a trained run at the given distances, from its statistics.

    A query :math:`q = W_q x` at position :math:`L` and its target :math:`k^* = W_k x` at
    :math:`L - \Delta` score :math:`q^\top R_{-\Delta} k^*`; a random key :math:`k`, independent
    of :math:`q`, scores :math:`q^\top R_{-\Delta} k` on average
    :math:`\mu_q^\top R_{-\Delta}\mu_k`.  The expected advantage of the target is

    .. math:: \delta(\Delta) = \operatorname{tr}(R_{-\Delta} M) - \mu_q^\top R_{-\Delta}\mu_k,
              \qquad M = E[k^* q^\top],

    chapter 7's general form :math:`\operatorname{tr}(R_m\Sigma) + \mu_q^\top R_m(\mu_q -
    \mu_k)` (:func:`rope_lib.general_form`) at :math:`m = -\Delta` with
    :math:`\Sigma = M - \mu_q\mu_q^\top` (for :math:`k^* = q` this is the covariance of
    :math:`q`).  :math:`M` enters only through its diagonal 2 x 2 pair blocks (the stored
    ``target_moment_blocks``); with :math:`\mu_q = \mu_k` and
    :math:`M - \mu_q\mu_q^\top = \sigma^2 I` (on the pair blocks) it is
    :math:`2\sigma^2 B_\Delta`.

    Parameters
    ----------
    run : mapping
        One run of a results blob (``d``, ``base``, ``mu_q``, ``mu_k``,
        ``target_moment_blocks``).
    distances : array_like of int
        Distances :math:`\Delta`.
    layout : {"half", "interleaved"}
        The pair layout of the results (their configuration's ``layout``).

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``distances``.
    """
    from .experiment import general_form

    needed = ("d", "base", "mu_q", "mu_k", "target_moment_blocks")
    if not isinstance(run, Mapping) or any(k not in run for k in needed):
        raise TypeError(
            f"run must be one run of a results dict, a mapping with {list(needed)}, got "
            f"{_describe(run)}"
        )
    dist = check_integer_array(distances, "distances")
    d, base = int(run["d"]), float(run["base"])
    mu_q = np.asarray(run["mu_q"], dtype=np.float64)
    mu_k = np.asarray(run["mu_k"], dtype=np.float64)
    moment = _block_matrix(np.asarray(run["target_moment_blocks"], dtype=np.float64), d, layout)
    sigma = moment - np.outer(mu_q, mu_q)
    return general_form(-dist, d, base, mu_q, sigma, mu_k, layout)


def margin_horizons(
    results: Any, context_length: int, d: int, limit: int = 1 << 20
) -> MarginHorizons:
    r"""First negative expected margin: chapter 7's :math:`B_m` against the learned weights.

    For each base, the horizon of :math:`B_m = \sum_i\cos(m\theta_i)` (equal weight on every
    pair, :func:`rope_lib.max_context`) and, for each seed, the first distance
    :math:`\Delta \in [1, \text{limit}]` at which the learned margin :math:`\delta(\Delta)`
    (:func:`learned_margin`: the same criterion, with the trained run's own pair weights and
    means) is negative.  A learned horizon beyond the equal-weight one says that training gave
    the slow pairs, which keep the margin positive longest, more weight than
    :math:`B_m` does.

    Parameters
    ----------
    results : dict
        A results blob of :func:`rope_lib.experiment_results`.
    context_length : int
        :math:`L`, one of the results' context lengths.
    d : int
        Head dimension, one of the results' head dimensions at that :math:`L`.
    limit : int
        Largest distance scanned (at most :math:`2^{24}`).

    Returns
    -------
    MarginHorizons
    """
    length, d, by_base, config = _cell(results, context_length, d)
    limit = check_positive_int(limit, "limit", minimum=1, maximum=1 << 24)
    layout = str(config.get("layout", "half"))
    learned = []
    for group in by_base.values():
        row = []
        for run in group:
            first = math.inf
            for start in range(1, limit + 1, 1 << 16):
                dist = np.arange(start, min(start + (1 << 16), limit + 1))
                negative = np.flatnonzero(learned_margin(run, dist, layout) < 0)
                if negative.size:
                    first = float(dist[negative[0]])
                    break
            row.append(first)
        learned.append(row)
    if len({len(row) for row in learned}) != 1:
        raise ValueError(
            f"results: the bases of context_length = {length}, d = {d} have different "
            "numbers of seeds"
        )
    bases = list(by_base)
    return MarginHorizons(
        context_length=length,
        d=d,
        bases=np.array(bases, dtype=np.float64),
        equal_weight=np.array([_horizon(b, d) for b in bases]),
        learned=np.array(learned, dtype=np.float64),
        limit=limit,
    )


def experiment_summary(
    results: Any, level: float = 0.5, limit: int = 1 << 20
) -> list[dict[str, Any]]:
    r"""One row per cell and base of the results: the measurements next to the predictions.

    Every :math:`(L, d)` of the results, bases increasing.  Keys of each row:

    * ``context_length``, ``d``, ``base``, ``min_base`` (:func:`rope_lib.min_base` of
      :math:`(L, d)`), ``above_min_base`` (``base >= min_base``);
    * ``horizon`` (of :math:`B_m`) and ``quarter_period``, as in :func:`recall_curves`;
    * ``reach`` of the seed-mean curve and ``reach_lo``, ``reach_hi``, the smallest and the
      largest reach of a single seed (:func:`recall_reach` at ``level``);
    * ``learned_horizon``: the median over seeds of :attr:`MarginHorizons.learned`
      (:func:`margin_horizons` with ``limit``);
    * ``near_accuracy``, ``far_accuracy`` and their ``_se``: the seed-mean accuracy of the
      first and of the last distance bin, with its standard error;
    * ``slow_energy`` and ``slow_energy_se``: :attr:`PairEnergySummary.slow_energy_mean` and
      its SE.

    Parameters
    ----------
    results : dict
        A results blob of :func:`rope_lib.experiment_results`.
    level : float
        The level of :func:`recall_reach`.
    limit : int
        The scan limit of :func:`margin_horizons`.

    Returns
    -------
    list of dict
    """
    runs, _ = _runs(results)
    cells = sorted({(int(r["context_length"]), int(r["d"])) for r in runs})
    rows = []
    for length, d in cells:
        curves = recall_curves(results, length, d)
        reach = _reach(curves, _cell(results, length, d)[2], level)
        horizons = margin_horizons(results, length, d, limit)
        energy = pair_energy_summary(results, length, d)
        for k, base in enumerate(curves.bases):
            rows.append(
                {
                    "context_length": length,
                    "d": d,
                    "base": float(base),
                    "min_base": curves.min_base,
                    "above_min_base": bool(base >= curves.min_base),
                    "horizon": float(curves.horizon[k]),
                    "quarter_period": float(curves.quarter_period[k]),
                    "reach": float(reach.reach[k]),
                    "reach_lo": float(reach.reach_per_seed[k].min()),
                    "reach_hi": float(reach.reach_per_seed[k].max()),
                    "learned_horizon": float(np.median(horizons.learned[k])),
                    "near_accuracy": float(curves.accuracy_mean[k, 0]),
                    "near_accuracy_se": float(curves.accuracy_se[k, 0]),
                    "far_accuracy": float(curves.accuracy_mean[k, -1]),
                    "far_accuracy_se": float(curves.accuracy_se[k, -1]),
                    "slow_energy": float(energy.slow_energy_mean[k]),
                    "slow_energy_se": float(energy.slow_energy_se[k]),
                }
            )
    return rows


def _check_ax(ax: Any) -> Any:
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be None or a matplotlib Axes, got {_describe(ax)}")
    return ax


def _fmt(x: float) -> str:
    """A distance for a legend: whole tokens, or a note for a horizon beyond the scan."""
    return f"{x:.0f}" if math.isfinite(x) else "beyond max_context's scan"


def plot_recall_by_distance(
    results: Any, context_length: int, d: int, bases: Sequence[float] | None = None, ax: Any = None
):
    r"""Figure: recall accuracy against distance, one curve per base, with the predictions.

    Each base's curve is :attr:`RecallCurves.accuracy_mean` at the bin centres (log-scaled
    distance axis) with error bars of one standard error across seeds; the dashed grey line is
    chance, ``1 / n_values``.  In the base's colour, a dotted vertical line marks its horizon
    (first distance with :math:`B_m < 0`) and a downward triangle at the top of the panel its
    quarter period :math:`\tfrac{\pi}{2} b^{(d-2)/d}`; marks beyond the plotted distances
    (:math:`[1, L]`) are not drawn, but every base's legend entry states both numbers.

    Parameters
    ----------
    results : dict
        A results blob of :func:`rope_lib.experiment_results`.
    context_length : int
        :math:`L`, one of the results' context lengths.
    d : int
        Head dimension, one of the results' head dimensions at that :math:`L`.
    bases : sequence of float, optional
        Bases to draw (each one of the results' bases); default all of them.
    ax : matplotlib.axes.Axes, optional
        Draw into this panel; default a new figure in the book's style.

    Returns
    -------
    matplotlib.figure.Figure
    """
    curves = recall_curves(results, context_length, d)
    chosen = _select_bases(bases, curves.bases.tolist())
    n_points = len(chosen) * curves.bin_centres.size
    if n_points > MAX_FIGURE_POINTS:
        raise ValueError(
            f"bases: the figure would have {n_points} points, more than MAX_FIGURE_POINTS = "
            f"{MAX_FIGURE_POINTS}"
        )
    if ax is None:
        fig, ax = new_figure(width=8.5, height=4.2)
    else:
        ax = _check_ax(ax)
        fig = ax.figure
    length = curves.context_length
    lo, hi = 1.0, float(length + 1)
    top = ax.get_xaxis_transform()  # x in data, y in axes coordinates
    handles = []  # legend order: the bases, then chance and the two kinds of marks
    for base in chosen:
        k = int(np.flatnonzero(curves.bases == base)[0])
        style = line_style(k)
        horizon, quarter = float(curves.horizon[k]), float(curves.quarter_period[k])
        se = curves.accuracy_se[k]
        bars = ax.errorbar(
            curves.bin_centres,
            curves.accuracy_mean[k],
            yerr=None if np.all(np.isnan(se)) else se,
            marker="o",
            ms=4,
            capsize=2,
            color=style["color"],
            linestyle=style["linestyle"],
            label=f"b = {base:g}: horizon {_fmt(horizon)}, T/4 = {_fmt(quarter)}",
        )
        handles.append(bars)
        if lo <= horizon <= hi:
            ax.axvline(horizon, color=style["color"], linestyle=":", lw=1.5)
        if lo <= quarter <= hi:
            ax.plot(
                [quarter],
                [1.0],
                marker="v",
                ms=9,
                linestyle="none",
                color=style["color"],
                transform=top,
                clip_on=False,
            )
    chance = ax.axhline(
        curves.chance,
        color="0.4",
        linestyle="--",
        lw=1.0,
        label=f"chance 1/{round(1 / curves.chance)}",
    )
    handles.append(chance)
    handles += ax.plot([], [], color="0.3", linestyle=":", label="horizon of $B_m$ (dotted line)")
    handles += ax.plot(
        [], [], color="0.3", marker="v", linestyle="none", label="quarter period $T/4$"
    )
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel(r"distance $\Delta$ from query to target (tokens)")
    ax.set_ylabel("recall accuracy (mean $\\pm$ 1 s.e. over seeds)")
    ax.set_title(
        f"Recall by distance: L = {length}, d = {curves.d} (min_base(L, d) = {curves.min_base:.0f})",
        pad=10,
    )
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9)
    return fig


# --------------------------------------------------------------------------------------------
# where the learned weight sits
# --------------------------------------------------------------------------------------------
def _slow_weights(d: int) -> np.ndarray:
    """1 on the slower half of the d/2 pairs, 0 on the faster half, 1/2 on a middle pair."""
    n = d // 2
    i = np.arange(n, dtype=np.float64)
    middle = (n - 1) / 2.0
    return np.where(i > middle, 1.0, np.where(i == middle, 0.5, 0.0))


def pair_energy_summary(results: Any, context_length: int, d: int) -> PairEnergySummary:
    r"""Share of the learned form's weight on the slower half of the rotation pairs, per base.

    Pair :math:`i` rotates at :math:`\theta_i = b^{-2i/d}` (pair 0 fastest); the slower half
    is :math:`i \ge d/4` (weights :math:`w_i` of :attr:`PairEnergySummary.slow_weights`).  Two
    fractions per run, then their mean and standard error over seeds (``ddof=1``):

    * the **energy fraction** :math:`F_E = \sum_i w_i e_i^2 / \sum_i e_i^2`, with :math:`e_i`
      the Frobenius norm of pair :math:`i`'s 2 x 2 block of :math:`W_q W_k^\top` (the stored
      ``pair_energy``, :func:`rope_lib.pair_energy`), so :math:`e_i^2` is the block's
      energy;
    * the **amplitude fraction** :math:`F_A = \sum_i w_i A_i / \sum_i A_i` with
      :math:`A_i = \sqrt{(M_{aa} + M_{bb})^2 + (M_{ab} - M_{ba})^2}` from pair :math:`i`'s
      block :math:`M` of the measured target moment :math:`E[k^* q^\top]` (stored
      ``target_moment_blocks``).  The expected score of the query with its target at
      relative position :math:`m` is :math:`\operatorname{tr}(R_m E[k^* q^\top]) = \sum_i A_i
      \cos(m\theta_i + \varphi_i)`, so :math:`A_i` is the weight pair :math:`i` actually has in
      the target's score (for some phases :math:`\varphi_i`).  The part of a 2 x 2 block that
      is not a scaled rotation (a reflection such as ``[[1, 0], [0, -1]]``) adds to a
      Frobenius norm but not to :math:`A_i`, and the moment also carries the held-out inputs'
      empirical covariance, so the two fractions need not agree.

    What the numbers can support.  Chapter 7's margin assumes :math:`\Sigma_q = \sigma^2 I`,
    which gives every pair the same weight, :math:`\delta_m = 2\sigma^2\sum_i\cos(m\theta_i)`:
    with equal weights both fractions are exactly 1/2.  At initialisation
    :math:`W_q, W_k` have i.i.d. entries, so the pairs are exchangeable and the *expected*
    energy fraction is 1/2; a single initial draw scatters around it (the initial weights are
    not stored, so that scatter is not in the results).  A trained fraction above 1/2 by many
    seed SEs says that training put more of this block-diagonal weight on the slower pairs than
    the equal-weight assumption does.  It does not say by itself that the horizon of
    :math:`B_m` is the wrong prediction: that needs the weighted margin
    (:func:`rope_lib.general_form` with the measured blocks).  The energy fraction counts only
    the diagonal 2 x 2 blocks (off-block entries of :math:`W_q W_k^\top` never enter
    :math:`\operatorname{tr}(R_m\,\cdot)`), and the SE is over seeds only.

    Parameters
    ----------
    results : dict
        A results blob of :func:`rope_lib.experiment_results`.
    context_length : int
        :math:`L`, one of the results' context lengths.
    d : int
        Head dimension, one of the results' head dimensions at that :math:`L`.

    Returns
    -------
    PairEnergySummary
    """
    length, d, by_base, _ = _cell(results, context_length, d)
    w = _slow_weights(d)
    shares, e_mean, e_se, a_mean, a_se, n_seeds = [], [], [], [], [], []
    for base, group in by_base.items():
        energy = np.array([run["pair_energy"] for run in group], dtype=np.float64) ** 2
        if energy.shape != (len(group), d // 2):
            raise ValueError(
                f"results: a run of context_length = {length}, d = {d}, base = {base:g} has "
                f"{energy.shape[-1]} pair energies, not d/2 = {d // 2}"
            )
        share = energy / energy.sum(axis=1, keepdims=True)
        shares.append(share.mean(axis=0))
        mean, se = _mean_se(share @ w)
        e_mean.append(mean)
        e_se.append(se)
        if all("target_moment_blocks" in run for run in group):
            blocks = np.array([run["target_moment_blocks"] for run in group], dtype=np.float64)
            amp = np.hypot(
                blocks[..., 0, 0] + blocks[..., 1, 1], blocks[..., 0, 1] - blocks[..., 1, 0]
            )
            mean, se = _mean_se((amp @ w) / amp.sum(axis=1))
        else:
            mean, se = np.float64(np.nan), np.float64(np.nan)
        a_mean.append(mean)
        a_se.append(se)
        n_seeds.append(len(group))
    return PairEnergySummary(
        context_length=length,
        d=d,
        bases=np.array(list(by_base), dtype=np.float64),
        n_seeds=np.array(n_seeds, dtype=np.int64),
        slow_weights=w,
        energy_share_mean=np.array(shares),
        slow_energy_mean=np.array(e_mean, dtype=np.float64),
        slow_energy_se=np.array(e_se, dtype=np.float64),
        slow_amplitude_mean=np.array(a_mean, dtype=np.float64),
        slow_amplitude_se=np.array(a_se, dtype=np.float64),
    )
