r"""Chapter 9's predictions, written down before the sweeps that test them were trained.

Chapter 7's criterion says a context of :math:`L` tokens needs :math:`B_m = \sum_i
\cos(m\theta_i) \ge 0` for every :math:`m < L`; its *horizon* :math:`h(d, b)` is the first
:math:`m` with :math:`B_m < 0` (:func:`rope_lib.max_context`).  Two other quantities grow with
the base and could as well be what sets the reach of a trained layer: the base :math:`b` itself
and the quarter period of the slowest pair, :math:`\tfrac{\pi}{2} b^{(d-2)/d}`
(:func:`rope_lib.quarter_period`).  Reach growing with the base is expected under any of the
three, so the sweep contains comparisons where they disagree, each stated here with what each
predictor says, computed from :mod:`rope_lib` alone (:func:`pair_predictions`,
:func:`edge_predictions`; ``tests/test_predictions.py`` checks that the literals below are what
those functions compute).  The chapter reads the trained results against these literals.

Pairs (:data:`PAIRS`)
---------------------
Two (d, base) settings at the same span and token count.  *Discriminating* pairs: the horizon
orders the two opposite to the base and to the quarter period, so the predictors disagree on
which reaches farther.  One (``"P1"``) has both members at the same head dimension (the
horizon is not monotone in the base); the others compare head dimensions, and there a larger
head could reach farther for a reason of its own (more dimensions to tell the target from
the distractors), which favours the member the horizon favours.  The *capacity* pairs measure
that confound: all three predictors favour the member with the *smaller* head dimension, so a
win of the larger one shows the size of the confound.

Window edges (:data:`EDGES`)
----------------------------
The feasible set :math:`\{b : h(d, b) \ge L\}` is not an interval (chapter 7).  At the top edge
of a feasible window the horizon drops by a factor of about 2.7 while the base and the quarter
period grow by a percent: the bound predicts that the bases just inside the window (smaller,
feasible) retrieve the farthest tokens better than those just outside it (larger, infeasible);
the base and the quarter period predict no step, or a small one the other way.  Three bases
on each side of two top edges, found with :func:`rope_lib.base_is_feasible` (:func:`window_top`).

How a prediction is read (:mod:`rope_lib.experiments.report`)
-------------------------------------------------------------
*Reach*: where a run's accuracy by distance first falls below 1/2.  For a pair, per seed the
log ratio :math:`\ln(r_a / r_b)` of the two reaches; the mean over the seeds with its 95%
Student-t interval.  The pair is read as ``"a"`` (a reaches farther) when the interval lies
above 0, ``"b"`` when it lies below, ``"undecided"`` otherwise.  For an edge, per seed the mean
accuracy in the farthest distance bin over the three inside bases minus that over the three
outside bases (and the same difference of log reaches); read as ``"inside"``, ``"outside"`` or
``"undecided"`` by the same rule.  Every seed has its own held-out set, so the spread over seeds
includes the sampling noise of the evaluation.

Experiment 2 (:data:`NEEDLE_PREDICTIONS`)
-----------------------------------------
A two-layer Llama (head dimension 16) retrieves needles by key in a context of 64 tokens
(:mod:`rope_lib.experiments.needle_model`, configuration ``"full"``), at distances 3 to 53.
Read pointwise, the bound says a base retrieves at distance :math:`\Delta` only if
:math:`\Delta < h(16, b)`; the slowest pair says only if :math:`\Delta` is below its quarter
period.  Per base: the distance bin each predictor puts the reach in, and whether it says the
farthest bin, 49 to 53 tokens, is retrieved (accuracy at least 1/2).  Only base 100 is
discriminating for the farthest bin (horizon 16, quarter period 88); bases 20 and 30 place the
reach in different bins under the two predictors.  Bases 10, 100 and 10^4 were seen in pilots
before these lines were written (base 100 retrieved out to 53 tokens in two seeds, base 10
learned nothing), with another sampler of the needle positions; bases 20 and 30 were not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import check_base, check_dim, check_positive_int
from .recall_task import half_decade

__all__ = [
    "Pair",
    "WindowEdge",
    "PAIRS",
    "EDGES",
    "pair_predictions",
    "edge_predictions",
    "window_top",
    "NeedlePrediction",
    "NEEDLE_PREDICTIONS",
    "needle_prediction",
]


@dataclass(frozen=True)
class Pair:
    r"""Two settings ``a = (d, base)`` and ``b`` at one span and token count, with the member
    each predictor says reaches farther (``"a"`` or ``"b"``) and the horizons and quarter
    periods behind it (rounded to whole tokens)."""

    label: str
    #: "discriminating" or "capacity"
    kind: str
    #: the cell's span and token count, and the members (d, base)
    span: int
    tokens: int
    a: tuple[int, float]
    b: tuple[int, float]
    #: the predictions, written down
    horizons: tuple[int, int]
    quarter_periods: tuple[int, int]
    by_horizon: str
    by_quarter_period: str
    by_base: str


@dataclass(frozen=True)
class WindowEdge:
    r"""The top edge of a feasible window: bases just inside (feasible) and just outside
    (infeasible), their horizons, and what each predictor says (``"inside"``: the bases inside
    retrieve the farthest bin better; ``"outside"``: the others)."""

    label: str
    span: int
    tokens: int
    d: int
    edge: float
    inside: tuple[float, ...]
    outside: tuple[float, ...]
    horizons_inside: tuple[int, ...]
    horizons_outside: tuple[int, ...]
    by_horizon: str
    by_quarter_period: str
    by_base: str


PAIRS: tuple[Pair, ...] = (
    Pair("P1", "discriminating", 1024, 128, (16, half_decade(9)), (16, half_decade(10)), (379, 279), (13603, 37249), "a", "b", "b"),
    Pair("P2", "discriminating", 1024, 128, (32, half_decade(8)), (16, half_decade(10)), (474, 279), (8833, 37249), "a", "b", "b"),
    Pair("P3", "discriminating", 1024, 128, (32, half_decade(7)), (16, half_decade(8)), (266, 91), (3002, 4967), "a", "b", "b"),
    Pair("P4", "discriminating", 1024, 128, (64, half_decade(7)), (16, half_decade(8)), (449, 91), (3861, 4967), "a", "b", "b"),
    Pair("P5", "discriminating", 1024, 128, (64, half_decade(8)), (16, half_decade(10)), (725, 279), (11779, 37249), "a", "b", "b"),
    Pair("P6", "discriminating", 1024, 128, (64, half_decade(6)), (16, half_decade(7)), (197, 78), (1266, 1814), "a", "b", "b"),
    Pair("P7", "discriminating", 1024, 128, (128, half_decade(7)), (32, half_decade(8)), (939, 474), (4380, 8833), "a", "b", "b"),
    Pair("P8", "discriminating", 1024, 128, (128, half_decade(6)), (32, half_decade(7)), (361, 266), (1410, 3002), "a", "b", "b"),
    Pair("C1", "capacity", 1024, 128, (16, half_decade(12)), (32, half_decade(8)), (1467, 474), (279331, 8833), "a", "a", "a"),
    Pair("C2", "capacity", 1024, 128, (16, half_decade(10)), (64, half_decade(6)), (279, 197), (37249, 1266), "a", "a", "a"),
    Pair("C3", "capacity", 1024, 128, (32, half_decade(8)), (128, half_decade(6)), (474, 361), (8833, 1410), "a", "a", "a"),
    Pair("C4", "capacity", 1024, 128, (32, half_decade(9)), (64, half_decade(7)), (724, 449), (25994, 3861), "a", "a", "a"),
)  # fmt: skip

EDGES: tuple[WindowEdge, ...] = (
    WindowEdge(
        "E1", 1024, 128, 16, 480_585.0,
        (470_000.0, 474_000.0, 478_000.0), (484_000.0, 488_000.0, 492_000.0),
        (1077, 1078, 1078), (405, 405, 405), "inside", "outside", "outside",
    ),
    WindowEdge(
        "E2", 1024, 128, 16, 545_784.0,
        (530_000.0, 536_000.0, 542_000.0), (548_000.0, 553_000.0, 560_000.0),
        (1253, 1253, 1259), (443, 443, 443), "inside", "outside", "outside",
    ),
)  # fmt: skip


def _larger(x: float, y: float, names: tuple[str, str]) -> str:
    if x == y:
        raise ValueError("the two members tie under this predictor")
    return names[0] if x > y else names[1]


def pair_predictions(pair: Pair) -> dict[str, object]:
    """What each predictor says about a pair, computed from rope_lib.

    Returns
    -------
    dict
        ``horizons``, ``quarter_periods`` (rounded), ``by_horizon``, ``by_quarter_period``,
        ``by_base`` (``"a"`` or ``"b"``, the member with the larger value).
    """
    from ..base_bound import max_context
    from ..decay import quarter_period

    (da, ba), (db, bb) = pair.a, pair.b
    h = (max_context(ba, da), max_context(bb, db))
    q = (quarter_period(da, ba), quarter_period(db, bb))
    return {
        "horizons": h,
        "quarter_periods": (round(q[0]), round(q[1])),
        "by_horizon": _larger(*h, ("a", "b")),
        "by_quarter_period": _larger(*q, ("a", "b")),
        "by_base": _larger(ba, bb, ("a", "b")),
    }


def edge_predictions(edge: WindowEdge) -> dict[str, object]:
    """Feasibility and horizons of an edge's bases, and what each predictor says.

    Returns
    -------
    dict
        ``feasible_inside``, ``feasible_outside`` (:func:`rope_lib.base_is_feasible` of each
        base), ``horizons_inside``, ``horizons_outside``, and ``by_horizon`` (the side whose
        smallest horizon is larger), ``by_quarter_period`` and ``by_base`` (the side whose
        largest value is smaller loses).
    """
    from ..base_bound import base_is_feasible, max_context
    from ..decay import quarter_period

    hi = tuple(max_context(b, edge.d) for b in edge.inside)
    ho = tuple(max_context(b, edge.d) for b in edge.outside)

    def side(values_in: list[float], values_out: list[float]) -> str:
        if min(values_in) > max(values_out):
            return "inside"
        if max(values_in) < min(values_out):
            return "outside"
        raise ValueError("the two sides overlap under this predictor")

    qi = [quarter_period(edge.d, b) for b in edge.inside]
    qo = [quarter_period(edge.d, b) for b in edge.outside]
    return {
        "feasible_inside": tuple(base_is_feasible(b, edge.span, edge.d) for b in edge.inside),
        "feasible_outside": tuple(base_is_feasible(b, edge.span, edge.d) for b in edge.outside),
        "horizons_inside": hi,
        "horizons_outside": ho,
        "by_horizon": side(list(hi), list(ho)),
        "by_quarter_period": side(qi, qo),
        "by_base": side(list(edge.inside), list(edge.outside)),
    }


def window_top(context_length: int, d: int, base: float, rel: float = 1e-4) -> float:
    """The top edge of the feasible window that contains ``base``, to a relative ``rel``.

    Bisection on :func:`rope_lib.base_is_feasible` between ``base`` (feasible) and the first
    infeasible base of :func:`rope_lib.feasible_window_top`'s walk in steps of 1%.
    """
    from ..base_bound import base_is_feasible, feasible_window_top

    length = check_positive_int(context_length, "context_length", minimum=2)
    d = check_dim(d)
    lo = feasible_window_top(check_base(base), length, d, rel_step=0.01)
    hi = lo * 1.01
    while hi / lo - 1 > rel:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if base_is_feasible(mid, length, d) else (lo, mid)
    return math.sqrt(lo * hi)


@dataclass(frozen=True)
class NeedlePrediction:
    r"""What the horizon and the slowest pair's quarter period say about one base of
    experiment 2: the bin ``[e_j, e_{j+1})`` of the configuration's ``bin_edges`` holding each
    one (``-1`` before the first bin, the number of bins past the last), and whether each says
    the farthest bin is retrieved (its value at or beyond the last edge)."""

    base: float
    horizon: int
    quarter_period: int
    horizon_bin: int
    quarter_period_bin: int
    far_by_horizon: bool
    far_by_quarter_period: bool


#: Experiment 2, configuration "full": d = 16, 64 tokens, bins (3, 5, 9, 13, 17, 25, 33, 49, 54).
NEEDLE_PREDICTIONS: tuple[NeedlePrediction, ...] = (
    NeedlePrediction(10.0, 5, 12, 1, 2, False, False),
    NeedlePrediction(20.0, 9, 22, 2, 4, False, False),
    NeedlePrediction(30.0, 14, 31, 3, 5, False, False),
    NeedlePrediction(100.0, 16, 88, 3, 8, False, True),
    NeedlePrediction(10_000.0, 91, 4967, 8, 8, True, True),
)  # fmt: skip


def needle_prediction(base: float, d: int, edges: tuple[int, ...]) -> NeedlePrediction:
    """The prediction for one base, computed from rope_lib (see :class:`NeedlePrediction`).

    Parameters
    ----------
    base : float
    d : int
        Head dimension.
    edges : tuple of int
        The distance bins' edges, increasing.
    """
    import numpy as np

    from ..base_bound import max_context
    from ..decay import quarter_period

    h, q = max_context(check_base(base), check_dim(d)), quarter_period(d, base)
    e = np.asarray(edges)

    def where(x: float) -> int:
        return int(np.searchsorted(e, x, side="right")) - 1

    return NeedlePrediction(
        float(base), h, round(q), where(h), where(q), bool(h >= e[-1]), bool(q >= e[-1])
    )
