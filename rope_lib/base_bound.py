r"""The lower bound on the RoPE base implied by a context length (chapter ``base-bound``).

What the base-bound module computes
-----------------------------------
* :func:`similarity_margin`: :math:`B_m = \sum_{i=0}^{d/2-1}\cos(m\theta_i)`, the expected
  advantage of a key similar to the query over a random key at distance :math:`m`, divided by
  :math:`2\sigma^2` (Men et al. 2024); :func:`similarity_gap_expected` (its closed form for
  unequal means), :func:`symbolic_similarity_gap` (the same in SymPy) and
  :func:`similarity_gap_monte_carlo` (a Monte Carlo estimate with confidence intervals).
* :func:`max_context`: the horizon of a base, the first :math:`m \ge 0` with :math:`B_m < 0`.
* :func:`min_base`: the smallest base with :math:`B_m \ge 0` for every integer
  :math:`0 \le m < L`, found by a *certified* sweep (the algorithm is in
  :mod:`rope_lib._certified_sweep`); :func:`min_base_search` returns the same base with the
  evidence (steps, scans, uncertified gaps, and the cost of the cold computation).
* :func:`base_is_feasible` (is :math:`B_m \ge 0` for every :math:`m < L`?) and
  :func:`feasible_window_top` (walk up from a feasible base to the top of its window).

The chapter's table of minimum bases and the published methods it is compared with (Su's
search, the two-digit grid, float32 angles) are in :mod:`rope_lib.base_table`; the figures of
the chapter in :mod:`rope_lib.figures.base_bound`.

The feasible set :math:`\{b : B_m(b) \ge 0\ \forall m < L\}` is *not* an interval: it has
narrow windows, so bisection can return a wrong base and a grid can step over a window.
What is guaranteed (see :func:`min_base_search`): the returned base :math:`b` satisfies
:math:`B_m(b) \ge 0` for every integer :math:`0 \le m < L` (float64 evaluation with a rounding
margin, borderline values re-checked with 50-digit mpmath); every base below :math:`b`, down to
the starting bound, is proven infeasible, except inside the recorded gaps, each of relative
width at most :math:`10^{-9}`. So no feasible window wider than :math:`10^{-9}` (relative) is
skipped. Not excluded: a narrower feasible window inside a gap; if one existed, the smallest
feasible base would lie there, below the returned base. Outside that proviso the smallest
feasible base lies at the start of the window the sweep ends in, and the returned base
exceeds it by a relative :math:`10^{-9}` at most: far inside the promised :math:`10^{-4}`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._certified_sweep import (
    _charge,
    _horizon,
    _OutOfSteps,
    _sweep,
    _work,
)
from ._validate import (
    check_base,
    check_dim,
    check_elements,
    check_integer_array,
    check_positive_int,
    check_real,
    check_real_array,
    check_seed,
)
from .decay import ones_score
from .frequencies import theta

__all__ = [
    "similarity_margin",
    "max_context",
    "min_base",
    "min_base_search",
    "BaseSearch",
    "base_is_feasible",
    "feasible_window_top",
    "similarity_gap_monte_carlo",
    "similarity_gap_expected",
    "symbolic_similarity_gap",
]


#: Largest context length L accepted by the searches and feasibility checks of chapter 7
#: (``min_base``, ``base_is_feasible``, ``grid_min_base``, ...). One full scan of all m < L
#: holds about 4 L float64 values (128 MiB at this limit) and takes about 0.15 s at d = 128;
#: the chapter's table stops at 2**20.
MAX_CONTEXT_LENGTH = 1 << 22
#: Largest ``limit`` of :func:`max_context` (its default): scanning 2**26 distances takes
#: about a second at d = 128, in blocks of at most 2**21, so memory stays small.
MAX_HORIZON_LIMIT = 1 << 26
#: Most (distance, frequency) terms one :func:`max_context` call evaluates: ``limit * d/2``
#: is at most 2**32 (the default limit 2**26 at d = 128), so a scan stays near a second.
MAX_HORIZON_TERMS = 1 << 32
#: Default budget of the certified sweep of :func:`min_base` / :func:`min_base_search`, in
#: steps of work (see ``rope_lib._certified_sweep.STEP_TERMS``): one per sweep iteration plus the terms it evaluates,
#: so a call within the default budget stays within about 30 s (L up to 2**17 from scratch at
#: d = 128; longer contexts from scratch ask for a larger ``max_steps``).
DEFAULT_MAX_STEPS = 50_000
#: Largest budget any ``max_steps`` keyword of chapter 7's modules accepts.
MAX_STEPS = 10**8


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------
def _check_length(context_length: Any, name: str = "context_length") -> int:
    return check_positive_int(
        context_length,
        name,
        minimum=1,
        maximum=MAX_CONTEXT_LENGTH,
        hint="rope_lib.base_bound.MAX_CONTEXT_LENGTH = 2**22 bounds the memory and time of "
        "one scan of all distances m < L",
    )


def _check_steps(max_steps: Any) -> int:
    return check_positive_int(
        max_steps,
        "max_steps",
        minimum=1,
        maximum=MAX_STEPS,
        hint="rope_lib.base_bound.MAX_STEPS = 10**8 is the largest budget accepted",
    )


def _budget_error(what: str, max_steps: int) -> ValueError:
    return ValueError(
        f"{what} did not finish within max_steps = {max_steps}; pass a larger max_steps "
        f"(at most {MAX_STEPS}) to let it run longer"
    )


# --------------------------------------------------------------------------------------------
# B_m, exactly
# --------------------------------------------------------------------------------------------
def similarity_margin(m: Any, d: int, base: float = 10000.0) -> np.ndarray | np.float64:
    r"""The similarity margin :math:`B_m` of Men et al. (2024).

    .. math:: B_m = \sum_{i=0}^{d/2-1} \cos(m\theta_i), \qquad \theta_i = b^{-2i/d},

    which equals :math:`\delta_m / (2\sigma^2)`, the expected advantage of a key similar to the
    query over a random key at relative distance :math:`m`, when queries have covariance
    :math:`\sigma^2 I` and the means leave no remainder: pair by pair, the query's mean is
    zero or equals the key's (chapter ``base-bound``; :func:`similarity_gap_expected` gives
    the general case).

    Parameters
    ----------
    m : int or array_like of int
        Relative distance(s); whole numbers (integer or float dtype), finite.
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base :math:`b > 1`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Same shape as ``m``; :math:`B_0 = d/2`, :math:`B_{-m} = B_m`.
    """
    d = check_dim(d)
    base = check_base(base)
    ms = check_integer_array(m, "m")
    return 0.5 * ones_score(ms, d, base)


def max_context(base: float, d: int = 128, *, limit: int | None = None) -> int:
    r"""Horizon of a base: the largest :math:`L` with :math:`B_m \ge 0` for all :math:`0 \le m < L`.

    .. math:: \operatorname{max\_context}(b) = \min\{m \ge 0 : B_m(b) < 0\}.

    :math:`B_m` is evaluated for every integer :math:`m` in blocks of growing size (exact
    matrix-product route of :mod:`rope_lib._certified_sweep`); values within the float64 rounding margin
    are decided in 50-digit mpmath, so the answer is exact.

    Parameters
    ----------
    base : float
        RoPE base :math:`b > 1`.
    d : int
        Head dimension, even, >= 2.
    limit : int, optional
        Largest distance examined, at most ``MAX_HORIZON_LIMIT`` = 2**26 and at most
        ``MAX_HORIZON_TERMS`` / (d/2) = 2**32 / (d/2) (the work of one scan); the default is the larger
        value both allow (2**26 for d <= 128). If :math:`B_m \ge 0` for every
        :math:`m <` ``limit``, a ``ValueError`` is raised rather than a wrong number returned.

    Returns
    -------
    int
        The first :math:`m` with :math:`B_m < 0` (for ``d = 2`` this is 2).
    """
    base = check_base(base)
    d = check_dim(d)
    if limit is None:
        limit = min(MAX_HORIZON_LIMIT, MAX_HORIZON_TERMS // (d // 2))
    limit = check_positive_int(
        limit,
        "limit",
        minimum=2,
        maximum=MAX_HORIZON_LIMIT,
        hint="rope_lib.base_bound.MAX_HORIZON_LIMIT = 2**26 bounds the scan",
    )
    if limit * (d // 2) > MAX_HORIZON_TERMS:
        raise ValueError(
            f"limit * d/2 = {limit} * {d // 2} terms exceeds MAX_HORIZON_TERMS = 2**32, the "
            "most one max_context scan evaluates (about a second); pass a smaller limit "
            f"(at most {MAX_HORIZON_TERMS // (d // 2)} for d = {d})"
        )
    horizon = _horizon(base, d, limit)
    if horizon >= 0:
        return horizon
    raise ValueError(
        f"B_m >= 0 for every m < limit = {limit} at base = {base:g}, d = {d}: the horizon "
        f"exceeds limit; pass a larger limit (at most MAX_HORIZON_LIMIT = {MAX_HORIZON_LIMIT})"
    )


# --------------------------------------------------------------------------------------------
# the certified sweep
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BaseSearch:
    """Result and evidence of :func:`min_base_search` (frozen: results are memoised and shared).

    Attributes
    ----------
    base : float
        The returned base (verified feasible).
    context_length, d : int
        The problem.
    start : float
        The proven lower bound the sweep started from (every base in ``[start, base)`` is
        infeasible, except inside ``gaps``).
    gaps : tuple of (float, float)
        Uncertified intervals of bases, each of relative width <= 1e-9.
    n_steps, n_scans : int
        Certified steps taken and full scans of all m < L made, over the whole chain of
        sweeps that led here (shorter lengths first).
    min_margin : float
        :math:`\\min_{m<L} B_m` at the returned base (>= 0; zero up to the last uncertified
        leap, since the sweep stops just past the base where a distance reaches
        :math:`B_m = 0`).
    seconds : float
        CPU time of the process (``time.process_time``) spent in the sweeps of that chain,
        each measured when it ran (from the proven lower bound it started at), summed: the
        cost of a *cold* computation, not inflated by other processes sharing the machine.
        A memoised result keeps the seconds of the computation that made it, so this is
        never the time of a cache look-up.
    work : int
        Steps of the budget (see :func:`min_base_search`) the sweeps of that chain used.
    """

    base: float
    context_length: int
    d: int
    start: float
    gaps: tuple[tuple[float, float], ...] = ()
    n_steps: int = 0
    n_scans: int = 0
    min_margin: float = 0.0
    seconds: float = 0.0
    work: int = 0


_SWEEPS: dict[int, dict[int, BaseSearch]] = {}


def min_base_search(
    context_length: int, d: int = 128, *, max_steps: int = DEFAULT_MAX_STEPS
) -> BaseSearch:
    r"""The smallest feasible base for a context length, with the evidence of the search.

    Finds the smallest :math:`b` with :math:`B_m(b) \ge 0` for every integer
    :math:`0 \le m < L` by the certified sweep of :mod:`rope_lib._certified_sweep`. The sweep for
    :math:`L` starts from the answer for the largest shorter length already computed (a proven
    lower bound), going through the powers of two below :math:`L`; results are memoised (and
    frozen, so the memo cannot be changed through a returned result).

    Guarantee: ``result.base`` is feasible (verified), and every base in
    ``[result.start, result.base)`` is proven infeasible except inside ``result.gaps`` (each
    of relative width <= 1e-9). ``result.start`` is 1 for a fresh chain. When the budget
    ``max_steps`` runs out, a ``ValueError`` is raised instead of returning a base that
    might not be the smallest. ``result.seconds`` and ``result.work`` give the cost of the
    sweeps of the chain as they ran, also when the result comes from the memo.

    Parameters
    ----------
    context_length : int
        :math:`1 \le L \le` ``MAX_CONTEXT_LENGTH`` = 2**22. For :math:`L \le 2` every
        base works (:math:`B_0 = d/2`, :math:`B_1 > 0`) and the infimum 1.0 is returned.
    d : int
        Head dimension, even, >= 2. For ``d = 2`` no base works once :math:`L \ge 3`
        (:math:`B_2 = \cos 2 < 0`), and a ``ValueError`` says so.
    max_steps : int
        Budget of work this call may do, over the whole chain of shorter lengths it computes
        (memoised lengths cost nothing): one step per sweep iteration (certified step, full
        scan, uncertified leap) plus one per ``STEP_TERMS`` = 2**16 (distance, frequency)
        terms evaluated, counting at least 64 frequencies per distance (a full scan of all
        m < L costs about L / 1024 steps for d <= 128). So the budget bounds the time, about
        0.5 ms per step: the default ``DEFAULT_MAX_STEPS`` = 50,000 (at most
        ``MAX_STEPS`` = 10**8) finishes or runs out within about 30 s. It covers L up to
        2**17 from scratch at d = 128; ``min_base(2**22, 16)`` and small d such as
        ``min_base(512, 4)`` run out of it and ask for a larger ``max_steps``.

    Returns
    -------
    BaseSearch
    """
    length = _check_length(context_length)
    d = check_dim(d)
    max_steps = _check_steps(max_steps)
    return _search_checked(length, d, [max_steps], max_steps)


def _search_checked(
    length: int, d: int, budget: list[int], max_steps: int, memo: dict | None = None
) -> BaseSearch:
    """min_base_search for checked arguments, with a ``budget`` the caller may share
    (:func:`rope_lib.base_table.min_base_table` shares one across its rows) and the chain
    ``memo`` of :func:`_search`."""
    if length <= 2:
        return BaseSearch(base=1.0, context_length=length, d=d, start=1.0)
    if d == 2:
        raise ValueError(
            "d = 2 has the single frequency theta_0 = 1 for every base, so B_2 = cos 2 < 0: "
            f"no base satisfies the bound for context_length = {length} >= 3"
        )
    try:
        return _search(length, d, budget, memo)
    except _OutOfSteps:
        raise _budget_error(
            f"the certified sweep of min_base for context_length = {length}, d = {d}", max_steps
        ) from None


def _search(
    length: int, d: int, budget: list[int], memo: dict[int, BaseSearch] | None = None
) -> BaseSearch:
    """min_base_search for checked arguments, L >= 3 and d >= 4, sharing ``budget``.

    ``memo`` holds the chain of results for this ``d`` (default: the module's memo
    ``_SWEEPS[d]``); :func:`min_base_table` passes a fresh one so that its rows are
    computed, and timed, from scratch.
    """
    done = _SWEEPS.setdefault(d, {}) if memo is None else memo
    if length in done:
        return done[length]
    shorter = [k for k in done if k < length]
    if shorter:
        prev = done[max(shorter)]
    else:
        prev = BaseSearch(base=1.0, context_length=2, d=d, start=1.0)
    # Go through the powers of two in between, so that every call shares one chain.
    p = 1 << (prev.context_length.bit_length())
    while p < length:
        prev = _search(p, d, budget, done)
        p <<= 1
    left, t0 = budget[0], time.process_time()
    u, gaps, steps, scans, margin = _sweep(length, d, math.log(prev.base), budget)
    seconds, work = time.process_time() - t0, left - budget[0]
    result = BaseSearch(
        base=math.exp(u),
        context_length=length,
        d=d,
        start=1.0,
        gaps=tuple(prev.gaps) + tuple(gaps),
        n_steps=prev.n_steps + steps,
        n_scans=prev.n_scans + scans,
        min_margin=margin,
        seconds=prev.seconds + seconds,
        work=prev.work + work,
    )
    done[length] = result
    return result


def min_base(context_length: int, d: int = 128, *, max_steps: int = DEFAULT_MAX_STEPS) -> float:
    r"""The smallest RoPE base that keeps :math:`B_m \ge 0` for every distance below L.

    .. math:: b_{\min}(L) = \min\{\, b > 1 : \textstyle\sum_{i=0}^{d/2-1}\cos(m\,b^{-2i/d})
              \ge 0 \ \text{for every integer } 0 \le m < L \,\}.

    The feasible set is not an interval, so this is neither a bisection nor a grid search: see
    the module docstring, :mod:`rope_lib._certified_sweep` and :func:`min_base_search` for the certified sweep and exactly what
    it guarantees (returned base verified feasible; every smaller base proven infeasible except
    in gaps of relative width <= 1e-9; relative precision far better than 1e-4 unless a
    feasible window narrower than 1e-9 hides in a gap).

    The criterion is :math:`B_m \ge 0`, as in Men et al. (2024). Each :math:`B_m(b)` is
    continuous in :math:`b`, so for :math:`L \ge 3` the feasible set is closed; it is not
    empty for :math:`d \ge 4` (every large enough base is feasible; for :math:`d = 2` it is
    empty and a ``ValueError`` says so), so this is a minimum: at it some distance
    :math:`m < L` has :math:`B_m = 0`. Under the strict criterion :math:`B_m > 0` that base
    fails; where the margin of that distance crosses zero (rather than touching it), the
    strict criterion's smallest base is an infimum that is not attained. The sweep ends one
    uncertified leap (a relative 1e-9) past the base where its last failing distance reaches
    :math:`B_m = 0`, so the returned base has :math:`\min_m B_m` close to 0
    (``min_base_search(...).min_margin``).

    Parameters
    ----------
    context_length : int
        :math:`1 \le L \le` ``MAX_CONTEXT_LENGTH`` = 2**22 (distances :math:`0 \dots L-1`).
    d : int
        Head dimension, even, >= 4 for :math:`L \ge 3`.
    max_steps : int
        Budget of the sweep in steps of work, as in :func:`min_base_search` (default 50,000,
        about 30 s at most); when it runs out a ``ValueError`` says so (and how to raise it)
        rather than a possibly wrong base being returned.

    Returns
    -------
    float
        The base (1.0, the infimum, when :math:`L \le 2`).
    """
    return min_base_search(context_length, d, max_steps=max_steps).base


def base_is_feasible(base: float, context_length: int, d: int = 128) -> bool:
    r"""Whether :math:`B_m(b) \ge 0` for every integer :math:`0 \le m < L`.

    Exact, like :func:`max_context` (which it calls with ``limit = L``): float64 matrix-product
    evaluation with a rounding margin, borderline values decided in 50-digit mpmath.
    Equivalent to ``max_context(base, d) >= context_length``, without scanning past L.
    """
    base = check_base(base)
    length = _check_length(context_length)
    d = check_dim(d)
    return _feasible(base, length, d)


def _feasible(base: float, length: int, d: int, budget: list[int] | None = None) -> bool:
    """:func:`base_is_feasible` for checked arguments, charging ``budget`` for the scan."""
    if length <= 2:
        return True  # B_0 = d/2 and B_1 > 0 for every base (theta_i in (0, 1])
    return _horizon(base, d, length, budget) < 0


def _every_larger_base_feasible(base: float, length: int, d: int) -> bool:
    r"""A certificate that every base :math:`b' \ge b` satisfies the criterion.

    :math:`\theta_i(b') \le \theta_i(b)` for every pair. Call pair :math:`i` *slow* when
    :math:`(L-1)\theta_i(b) \le \pi/2`: for :math:`m < L` its angle under :math:`b'` lies in
    :math:`[0, (L-1)\theta_i(b)]`, where cosine decreases, so its term is at least
    :math:`\cos((L-1)\theta_i(b))`; every other pair's term is at least :math:`-1`. Hence
    :math:`B_m(b') \ge \sum_{\text{slow}} \cos((L-1)\theta_i(b)) - \#\text{fast}`, and
    the certificate holds when this is :math:`\ge 0` (with a margin for round-off).
    """
    angles = (length - 1) * theta(d, base)
    slow = angles <= math.pi / 2
    return float(np.cos(angles[slow]).sum()) - float(np.count_nonzero(~slow)) >= 1e-9 * d


def feasible_window_top(
    base: float, context_length: int, d: int = 128, rel_step: float = 1e-4, max_steps: int = 10**5
) -> float:
    r"""Walk upward from a feasible base in relative steps while the next base is feasible.

    Returns the last feasible base :math:`b(1 + s)^k` before the first infeasible one, i.e.
    the top of the feasible window that contains ``base``, to within the relative step
    :math:`s` = ``rel_step`` (a window narrower than s further up may be skipped; the walk
    only looks at its own grid). Returns ``math.inf`` when the walk reaches a base above
    which every base is provably feasible (the pairs with :math:`(L-1)\theta_i \le \pi/2`
    keep cosines whose sum outweighs one negative unit for each other pair): the window is
    unbounded. Raises ``ValueError`` if ``base`` itself is infeasible, if ``rel_step`` is too
    small to move a base in float64, and if the walk runs out of its budget ``max_steps`` (default 10**5, at most 10**8): one step per base
    visited plus one per ``STEP_TERMS`` = 2**16 (distance, frequency) terms its check evaluates,
    so the budget bounds the time (about 30 s at most), also at large d.
    """
    base = check_base(base)
    length = _check_length(context_length)
    d = check_dim(d)
    rel_step = check_real(rel_step, "rel_step", 0.0, 1.0, low_open=True, high_open=True)
    if 1.0 + rel_step == 1.0:  # then top * (1 + rel_step) == top: the walk would stand still
        raise ValueError(
            f"rel_step must move a base in float64 (1 + rel_step > 1, i.e. rel_step above about "
            f"1.1e-16), got {rel_step!r}"
        )
    max_steps = _check_steps(max_steps)
    top, walked = base, 0
    budget = [max_steps]
    try:
        if not _feasible(base, length, d, budget):
            raise ValueError(
                f"base = {base!r} is not feasible for context_length = {length}, d = {d}"
            )
        while True:
            _charge(budget, 1 + _work(1, d))
            if _every_larger_base_feasible(top, length, d):
                return math.inf
            nxt = top * (1.0 + rel_step)
            if nxt > 1e300:
                raise ValueError(f"every base from {base:g} to 1e300 is feasible on this walk")
            if not _feasible(nxt, length, d, budget):
                return top
            top, walked = nxt, walked + 1
    except _OutOfSteps:
        pass
    raise _budget_error(
        f"feasible_window_top (still feasible after {walked} relative steps of {rel_step:g})",
        max_steps,
    )


# --------------------------------------------------------------------------------------------
# the expectation behind B_m: closed form and Monte Carlo
# --------------------------------------------------------------------------------------------
def _pairs(x: np.ndarray) -> np.ndarray:
    """Interleaved layout: pair i of a real vector as the complex number x_{2i} + 1j x_{2i+1}."""
    return x[..., 0::2] + 1j * x[..., 1::2]


def similarity_gap_expected(
    m: Any,
    d: int,
    base: float = 10000.0,
    sigma: float = 1.0,
    mean_q: Any = 0.0,
    mean_k: Any = 0.0,
) -> np.ndarray | np.float64:
    r"""Closed form of :math:`\delta_m/(2\sigma^2)` for independent q, k with any means.

    With :math:`\mathbb E q = \mu_q`, :math:`\mathbb E k = \mu_k`, covariance
    :math:`\sigma^2 I` for both and :math:`k^* = q + \varepsilon`, where
    :math:`\mathbb E[\varepsilon \mid q] = 0` (a zero mean alone is not enough:
    :math:`\varepsilon = \mu_q - q` has mean zero and gives :math:`\delta_m = 0` with equal
    means):

    .. math:: \frac{\delta_m}{2\sigma^2} = B_m
              + \frac{\mu_q^\top R_m (\mu_q - \mu_k)}{2\sigma^2},

    which is :math:`B_m` at every distance :math:`m < L` (:math:`L \ge d`) exactly when, pair
    by pair, :math:`\mu_q` vanishes or equals :math:`\mu_k` (for instance
    :math:`\mu_q = \mu_k`, or :math:`\mu_q = 0` with any :math:`\mu_k`).

    Parameters
    ----------
    m : int or array_like of int
        Distances.
    d, base : int, float
        Head dimension and base.
    sigma : float
        Standard deviation of every coordinate, in [1e-150, 1e150] (``2 sigma**2`` must be a
        float64). Means so large that the result overflows float64 are refused.
    mean_q, mean_k : float or array_like
        Means of q and k: a scalar (same value in every coordinate) or a length-d vector.
    """
    d = check_dim(d)
    base = check_base(base)
    ms = check_integer_array(m, "m")
    sigma = _check_sigma(sigma)
    mu_q, mu_k = _mean(mean_q, d, "mean_q"), _mean(mean_k, d, "mean_k")
    check_elements(ms.size * (d // 2), "the table of rotations, len(m) x d/2")
    freqs = theta(d, base)
    rot = np.exp(1j * np.multiply.outer(ms.astype(np.float64), freqs))
    # mu_q^T R_m v = Re sum_i conj(mu_q_i) v_i e^{i m theta_i} in the interleaved layout.
    with np.errstate(over="ignore", invalid="ignore"):
        extra = (np.conj(_pairs(mu_q)) * _pairs(mu_q - mu_k) * rot).sum(axis=-1).real
        out = similarity_margin(ms, d, base) + extra / (2 * sigma**2)
    _finite_or_refuse(out, "mean_q and mean_k (relative to sigma)")
    return out[()] if np.ndim(out) == 0 else out


def symbolic_similarity_gap(d: int = 4) -> dict[str, Any]:
    r"""The expected advantage :math:`\delta_m` in sympy, from the moments alone.

    With symbolic means :math:`\mu_q, \mu_k`, a symbolic symmetric covariance
    :math:`\Sigma_q` of q and the angles :math:`a_i = m\theta_i` as free symbols, the
    polynomial :math:`q^\top R_m q - q^\top R_m k` is expanded and each monomial replaced by
    its expectation, :math:`\mathbb E[q_a q_b] = \Sigma_{ab} + \mu_{q,a}\mu_{q,b}` and
    (q, k independent) :math:`\mathbb E[q_a k_b] = \mu_{q,a}\mu_{k,b}`. The perturbation of
    :math:`k^* = q + \varepsilon` is left out: :math:`\mathbb E[q^\top R_m \varepsilon] = 0`
    when :math:`\mathbb E[\varepsilon \mid q] = 0`. No trace identity is used, so comparing
    ``delta`` with :math:`\operatorname{tr}(R_m\Sigma_q) + \mu_q^\top R_m(\mu_q - \mu_k)` is
    an independent check of the chapter's theorem.

    Returns
    -------
    dict
        ``delta`` (sympy expression), ``R`` (block-diagonal rotation), ``Sigma``,
        ``mu_q``, ``mu_k`` (sympy matrices) and ``angles`` (the symbols :math:`a_i`).
    """
    import sympy as sp

    d = check_dim(d)
    q, k = sp.symbols(f"q0:{d}"), sp.symbols(f"k0:{d}")
    mu_q, mu_k = sp.symbols(f"muq0:{d}"), sp.symbols(f"muk0:{d}")
    sig = sp.Matrix(d, d, lambda a, b: sp.Symbol(f"S{min(a, b)}{max(a, b)}"))
    angles = sp.symbols(f"a0:{d // 2}", real=True)
    rot = sp.diag(*[sp.Matrix([[sp.cos(x), -sp.sin(x)], [sp.sin(x), sp.cos(x)]]) for x in angles])
    moments = {}
    for a in range(d):
        for b in range(d):
            moments[q[a] * q[b]] = sig[a, b] + mu_q[a] * mu_q[b]
            moments[q[a] * k[b]] = mu_q[a] * mu_k[b]
    qv, kv = sp.Matrix(q), sp.Matrix(k)
    poly = sp.Poly(sp.expand((qv.T * rot * qv - qv.T * rot * kv)[0]), *q, *k)
    delta = 0
    for powers, coeff in poly.terms():
        delta += coeff * moments[sp.Mul(*[v**e for v, e in zip((*q, *k), powers, strict=True)])]
    return {
        "delta": sp.expand(delta),
        "R": rot,
        "Sigma": sig,
        "mu_q": sp.Matrix(mu_q),
        "mu_k": sp.Matrix(mu_k),
        "angles": angles,
    }


#: Range of ``sigma`` in which ``2 sigma**2`` is a normal float64 (no overflow, no underflow).
_SIGMA_RANGE = (1e-150, 1e150)


def _check_sigma(sigma: Any) -> float:
    lo, hi = _SIGMA_RANGE
    return check_real(sigma, "sigma", lo, hi)


def _finite_or_refuse(values: np.ndarray, names: str) -> np.ndarray:
    """``values`` if every entry is finite, else a ValueError naming the arguments ``names``."""
    if not np.all(np.isfinite(values)):
        raise ValueError(
            f"{names} are so large that the result overflows float64 (nan or inf); "
            "pass smaller values"
        )
    return values


def _mean(mean: Any, d: int, name: str) -> np.ndarray:
    """A mean vector: a finite real scalar (every coordinate) or a length-d real vector."""
    arr = check_real_array(mean, name)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.size != d):
        raise ValueError(
            f"{name} must be a scalar or a vector of length d = {d}, got shape {arr.shape}"
        )
    return np.broadcast_to(arr, (d,)).astype(np.float64)


#: Working arrays of one Monte Carlo sample, in units of n_samples x (d + number of distances).
_MC_WORK = 8


def similarity_gap_monte_carlo(
    m: Any,
    d: int,
    base: float = 10000.0,
    *,
    n_samples: int = 20000,
    sigma: float = 1.0,
    mean_q: Any = 0.0,
    mean_k: Any = 0.0,
    eps_scale: float = 0.0,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Monte Carlo estimate of :math:`\delta_m / (2\sigma^2)` with a confidence half-width.

    Draws independent Gaussian :math:`q \sim \mathcal N(\mu_q, \sigma^2 I)`,
    :math:`k \sim \mathcal N(\mu_k, \sigma^2 I)` and :math:`\varepsilon \sim \mathcal N(0,
    s^2 I)` (``s = eps_scale``), sets :math:`k^* = q + \varepsilon`, and averages

    .. math:: \frac{q^\top R_m k^* - q^\top R_m k}{2\sigma^2}

    over ``n_samples`` draws (the same draws for every m; RoPE applied in the interleaved
    layout). The half-width is :math:`z_{(1+c)/2}\,\hat s/\sqrt{N}` (normal approximation).

    ``sigma`` lies in [1e-150, 1e150] (so that :math:`2\sigma^2` is a float64); means and
    ``eps_scale`` so large that the scores or their spread overflow float64 are refused.
    The call's working arrays (draws, pairs, table of scores) hold about
    ``8 x n_samples x (d + len(m))`` numbers, at most ``MAX_ELEMENTS`` (2**27).

    Returns
    -------
    (estimate, half_width) : tuple of numpy.ndarray
        Both shaped like ``np.atleast_1d(m)``.
    """
    from statistics import NormalDist

    d = check_dim(d)
    base = check_base(base)
    ms = np.atleast_1d(check_integer_array(m, "m")).astype(np.float64)
    n_samples = check_positive_int(n_samples, "n_samples", minimum=2)
    sigma = _check_sigma(sigma)
    mu_q, mu_k = _mean(mean_q, d, "mean_q"), _mean(mean_k, d, "mean_k")
    eps_scale = check_real(eps_scale, "eps_scale", 0.0)
    confidence = check_real(confidence, "confidence", 0.0, 1.0, low_open=True, high_open=True)
    seed = check_seed(seed)
    hint = "pass a smaller n_samples (average calls with different seeds for more)"
    check_elements(
        _MC_WORK * n_samples * (d + ms.size),
        f"the working arrays of the call (about {_MC_WORK} x n_samples x (d + len(m)) = "
        f"{_MC_WORK} x {n_samples} x {d + ms.size} numbers: draws, pairs, table of scores)",
        hint,
    )
    check_elements(ms.size * (d // 2), "the table of phases, len(m) x d/2")
    if ms.size == 0:
        return np.zeros(0), np.zeros(0)
    rng = np.random.default_rng(seed)
    q = mu_q + sigma * rng.standard_normal((n_samples, d))
    k = mu_k + sigma * rng.standard_normal((n_samples, d))
    k_star = q + eps_scale * rng.standard_normal((n_samples, d))
    phases = np.exp(1j * np.multiply.outer(theta(d, base), ms))
    names = "mean_q, mean_k and eps_scale (relative to sigma)"
    with np.errstate(over="ignore", invalid="ignore"):
        # q^T R_m v = Re sum_i conj(q_i) v_i e^{i m theta_i} with pairs as complex numbers.
        h = np.conj(_pairs(q)) * (_pairs(k_star) - _pairs(k))
        diff = _finite_or_refuse((h @ phases).real / (2 * sigma**2), names)
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        half = z * diff.std(axis=0, ddof=1) / np.sqrt(n_samples)
        est = diff.mean(axis=0)
    _finite_or_refuse(est, names)
    _finite_or_refuse(half, names)
    return est, half
