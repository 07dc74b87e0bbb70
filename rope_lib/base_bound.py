r"""The lower bound on the RoPE base implied by a context length (chapter ``base-bound``).

What the base-bound module computes
-----------------------------------
* :func:`similarity_margin`: :math:`B_m = \sum_{i=0}^{d/2-1}\cos(m\theta_i)`, the expected
  advantage of a key similar to the query over a random key at distance :math:`m`, divided by
  :math:`2\sigma^2` (Men et al. 2024).
* :func:`max_context`: the horizon of a base, the first :math:`m \ge 0` with :math:`B_m < 0`.
* :func:`min_base`: the smallest base with :math:`B_m \ge 0` for every integer
  :math:`0 \le m < L`, found by a *certified* sweep (below); :func:`min_base_search` returns the
  same base with the evidence (steps, scans, uncertified gaps, and the cost of the cold
  computation), and :func:`min_base_table` the table of the chapter, read from a JSON cache
  keyed on the source files the table's code runs (``TABLE_SOURCE_FILES``).
* :func:`similarity_gap_monte_carlo`: a Monte Carlo estimate of
  :math:`\delta_m/(2\sigma^2)` with confidence intervals, for equal or unequal means.
* :func:`base_is_feasible` (is :math:`B_m \ge 0` for every :math:`m < L`?) and
  :func:`feasible_window_top` (walk up from a feasible base to the top of its window).
* :func:`su_min_base`: Su's published coarse-to-fine search; :func:`grid_min_base`: the
  first feasible base of a two-digit grid (the list of the search that the conference
  version of Men et al. prints as its Appendix E, known to the book through a third-party
  quotation, with an exact check in place of its float32 sums);
  :func:`published_summary`: the comparison of the published tables with the exact one.
* :func:`float32_margin`: :math:`B_m` with angles rounded as a float32 implementation would;
  :func:`float32_min_base`: the first base that passes in float32, on a fine grid within a
  relative :math:`10^{-5}` of the exact minimum.
* :func:`html_table`: the chapter's tables as HTML. The figures of the chapter are in
  :mod:`rope_lib.figures.base_bound`.

Why a certified sweep
---------------------
The set of feasible bases :math:`\{b : B_m(b) \ge 0\ \forall m < L\}` is *not* an interval:
it has narrow windows. Bisection assumes monotonicity and can return a wrong base; a grid
can step over a window. Work in :math:`u = \ln b`, so :math:`\theta_i = e^{-t_i u}` with
:math:`t_i = 2i/d`, and write :math:`F_m(u) = B_m(e^u)` for the margin as a function of
:math:`u` (:math:`B_m(b)` keeps the base as its argument). With the angles
:math:`\alpha_i = m\theta_i = m e^{-t_i u}`, so that :math:`\partial\alpha_i/\partial u =
-t_i\alpha_i`,

.. math:: F_m'(u) = \sum_i t_i\alpha_i \sin \alpha_i, \qquad
          |F_m''(u)| = \Bigl|\sum_i t_i^2\bigl(\alpha_i^2\cos \alpha_i
          + \alpha_i\sin \alpha_i\bigr)\Bigr|
          \le \sum_i t_i^2\alpha_i(\alpha_i + 1) =: K_m(u),

and :math:`K_m` decreases in :math:`u` (every :math:`\alpha_i` does). Hence for :math:`h \ge 0`

.. math:: F_m(u + h) \le F_m(u) + F_m'(u)\,h + \tfrac12 K_m(u)\,h^2 .

If :math:`F_m(u) < 0` (and :math:`d \ge 4`, so that :math:`K_m > 0` for :math:`m \ge 1`),
the right side stays negative on :math:`[u, u + h^*)` with :math:`h^*` its positive root: every base in :math:`[e^u, e^{u+h^*})` is *proven* infeasible (distance
:math:`m` fails). The sweep starts at a proven lower bound (:math:`u = 0`, or the answer for a
shorter context, since feasibility for :math:`L` implies feasibility for every shorter
length), and repeatedly steps by the longest certified :math:`h^*` over the failing distances.
Failing distances are found by a full scan of all :math:`m < L` (one complex matrix product,
below) and then *tracked*: a negative region of :math:`F` in the :math:`(m, u)` plane drifts
slowly in :math:`m`, so the failing distances at the next point are looked for in small windows
around the current ones, and a full scan is made only when tracking stops paying.
Where every failing distance is about to turn positive (the certified step shrinks below
``1e-9``), the sweep leaps ``1e-9`` in :math:`u` without a certificate and records the gap.
It stops at the first point where a full scan finds :math:`B_m \ge 0` for every
:math:`m < L`.

What is guaranteed (see :func:`min_base_search`): the returned base :math:`b` satisfies
:math:`B_m(b) \ge 0` for every integer :math:`0 \le m < L` (float64 evaluation with a rounding
margin, borderline values re-checked with 50-digit mpmath); every base below :math:`b`, down to
the starting bound, is proven infeasible, except inside the recorded gaps, each of relative
width at most :math:`10^{-9}`. So no feasible window wider than :math:`10^{-9}` (relative) is
skipped. Not excluded: a narrower feasible window inside a gap; if one existed, the smallest
feasible base would lie there, below the returned base. Outside that proviso the smallest
feasible base lies at the start of the window the sweep ends in, and the returned base
exceeds it by a relative :math:`10^{-9}` at most: far inside the promised :math:`10^{-4}`.

Fast exact evaluation at one base
---------------------------------
For :math:`m = a\Delta + c` with :math:`0 \le c < \Delta` (a block width :math:`\Delta`):
:math:`\sum_i e^{\mathrm i m\theta_i} = \sum_i e^{\mathrm i a\Delta\theta_i}
e^{\mathrm i c\theta_i}`, the :math:`(a, c)` entry of a complex matrix product
:math:`(A \times d/2)(d/2 \times \Delta)`.
Only the rounding of each phase differs from the direct sum (error :math:`\approx 10^{-10}` at
:math:`m = 10^6`), and the weighted product with :math:`t_i\theta_i` gives :math:`F_m'(u)` at
the same cost. The public :func:`similarity_margin` uses :func:`rope_lib.decay.ones_score`, which
implements the same trick.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._validate import (
    check_base,
    check_dim,
    check_elements,
    check_flag,
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
    "min_base_table",
    "PUBLISHED_MIN_BASE",
    "REAL_MODELS",
    "float32_margin",
    "float32_min_base",
    "base_is_feasible",
    "feasible_window_top",
    "grid_min_base",
    "su_min_base",
    "published_summary",
    "html_table",
    "brute_force_feasible",
    "similarity_gap_monte_carlo",
    "similarity_gap_expected",
    "symbolic_similarity_gap",
]

#: Published minimum bases for d = 128 as printed, keyed by log2(L), each a pair
#: (Men et al. 2024, Table 2; Su 2024, archive 10122).
PUBLISHED_MIN_BASE: dict[int, tuple[float, float]] = {
    10: (4.3e3, 4.3e3),
    11: (1.6e4, 1.2e4),
    12: (2.7e4, 2.7e4),
    13: (8.4e4, 8.4e4),
    14: (3.1e5, 2.3e5),
    15: (6.4e5, 6.3e5),
    16: (2.1e6, 2.1e6),
    17: (7.8e6, 4.9e6),
    18: (3.6e7, 2.4e7),
    19: (6.4e7, 5.8e7),
    20: (5.1e8, 6.5e7),
}

#: The settings of Men et al. 2024, Table 1, as (model, base, training context length), d = 128.
REAL_MODELS: tuple[tuple[str, float, int], ...] = (
    ("Llama-7B", 1e4, 2048),
    ("Llama2-7B", 1e4, 4096),
    ("Llama3-8B", 5e5, 8192),
    ("Mistral-7B-v0.2", 1e6, 32768),
    ("Baichuan2-7B", 1e4, 4096),
)

#: Width (in u = ln b) of an uncertified leap; also the relative precision actually achieved.
_LEAP = 1e-9
#: Cost of one 50-digit mpmath term relative to one float64 term, for the budgets.
_MP_COST = 4000
#: Half-width of the windows searched around tracked failing distances.
_WINDOW = 12
#: Number of failing distances tracked between full scans.
_TRACKED = 24
_U_MAX = math.log(1e300)
#: Largest number of angles one block of the direct cosine sums holds (32 MiB of float64).
_BLOCK_TERMS = 1 << 22
_CACHE = Path(__file__).with_name("data") / "min_base_table.json"
#: The files of ``rope_lib`` the cache ``rope_lib/data/min_base_table.json`` is keyed on (a
#: SHA-256 of exactly these): the two whose code computes :func:`min_base_table` (this module
#: and ``_validate.py``; ``tests/test_base_bound.py`` checks that computing the table runs no
#: other file of the package) and ``frequencies.py``, which defines :math:`\theta_i` for the
#: package, so that a change to the frequencies also recomputes the table.
TABLE_SOURCE_FILES: tuple[str, ...] = ("base_bound.py", "frequencies.py", "_validate.py")
#: The lengths of the shipped table (``min_base_table()``): the only call that writes the cache.
_DEFAULT_LOG2_LENGTHS = tuple(range(10, 21))

#: Largest context length L accepted by the searches and feasibility checks of this module
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
#: steps of work (see ``STEP_TERMS``): one per sweep iteration plus the terms it evaluates,
#: so a call within the default budget stays within about 30 s (L up to 2**17 from scratch at
#: d = 128; longer contexts from scratch ask for a larger ``max_steps``).
DEFAULT_MAX_STEPS = 50_000
#: Default budget of :func:`min_base_table`, shared by the rows it computes: the chapter's
#: table (L = 2**10 .. 2**20, d = 128) is computed once (about a minute) and cached.
TABLE_MAX_STEPS = 3_000_000
#: Largest budget any ``max_steps`` keyword of this module accepts.
MAX_STEPS = 10**8
#: One step of a budget pays for this many evaluated (distance, frequency) terms (at least 64
#: frequencies are counted per distance, the fixed cost of a distance at small d), on top of
#: one step per iteration / examined base. Every search of this module charges its budget
#: this way, so ``max_steps`` bounds the time of a call (roughly 0.5 ms per step), not only
#: its number of iterations.
STEP_TERMS = 1 << 16


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


def _check_rows(rows: Any, name: str, keys: Sequence[str]) -> list[dict]:
    """``rows`` as a list of dicts holding ``keys`` (rows of :func:`min_base_table`)."""
    what = f"{name} must be a sequence of rows of min_base_table (dicts with keys {list(keys)})"
    if isinstance(rows, str | bytes | dict) or not isinstance(rows, Sequence | np.ndarray):
        raise TypeError(f"{what}, got {type(rows).__name__}")
    out = list(rows)
    for row in out:
        if not isinstance(row, dict):
            raise TypeError(f"{what}, got an entry of type {type(row).__name__}")
        missing = [k for k in keys if k not in row]
        if missing:
            raise ValueError(f"{what}; a row lacks {missing}")
    return out


def _work(n_distances: int, d: int, factor: int = 1) -> int:
    """Steps charged for evaluating ``n_distances`` distances (all d/2 frequencies each)."""
    return -(-factor * int(n_distances) * max(d // 2, 64) // STEP_TERMS)


def _charge(budget: list[int] | None, cost: int) -> None:
    """Take ``cost`` steps from ``budget[0]``; :class:`_OutOfSteps` when too few are left."""
    if budget is None:
        return
    if budget[0] < cost:
        budget[0] = 0
        raise _OutOfSteps
    budget[0] -= cost


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


def _mp_margin(m: int, d: int, base: float, dps: int = 50) -> float:
    """B_m for the exact binary value of ``base``, in mpmath with ``dps`` digits."""
    import mpmath

    with mpmath.workdps(dps):
        b = mpmath.mpf(base)
        total = mpmath.mpf(0)
        for i in range(d // 2):
            total += mpmath.cos(m * b ** (mpmath.mpf(-2 * i) / d))
        return float(total)


def _eps(m_max: float, n: int) -> float:
    """Rounding margin of a float64 B_m (phases m*theta_i carry ~m*2^-52 absolute error)."""
    return n * (m_max + 2.0) * 2.0**-46


class _Terms:
    """Frequencies and the constants of the Taylor bound at one point u = ln b."""

    def __init__(self, d: int, u: float):
        self.n = d // 2
        self.t = 2.0 * np.arange(self.n) / d
        self.th = np.exp(-self.t * u)
        self.w = self.t * self.th  # weights of the derivative
        # K_m(u) = m^2 S2 + m S1 bounds |F_m''| from u on.
        self.s2 = float(np.sum((self.t * self.th) ** 2)) * (1 + 1e-12)
        self.s1 = float(np.sum(self.t**2 * self.th)) * (1 + 1e-12)
        self.sd = float(np.sum(self.w)) + float(np.sum(self.t * self.th**2))

    def curvature(self, m: np.ndarray) -> np.ndarray:
        return m * m * self.s2 + m * self.s1

    def deriv_error(self, m: np.ndarray) -> np.ndarray:
        return (m * m + m + self.n) * self.sd * 2.0**-46


def _table(terms: _Terms, rows: np.ndarray, cols: np.ndarray, deriv: bool):
    r"""B_m (and F_m'(u)) at m = rows[:, None] + cols[None, :] via one real matrix product.

    With the angles :math:`\alpha_i = r\theta_i` of a row and :math:`\alpha_i' = c\theta_i`
    of a column: :math:`\cos(\alpha_i+\alpha_i') = \cos\alpha_i\cos\alpha_i' -
    \sin\alpha_i\sin\alpha_i'` and :math:`\sin(\alpha_i+\alpha_i') = \sin\alpha_i\cos
    \alpha_i' + \cos\alpha_i\sin\alpha_i'`, summed over i with weights 1 (for B_m) and
    :math:`t_i\theta_i` (for F_m'/m).
    """
    ra = np.multiply.outer(rows.astype(np.float64), terms.th)
    ca = np.multiply.outer(terms.th, cols.astype(np.float64))
    lc, ls = np.cos(ra), np.sin(ra)
    right = np.concatenate([np.cos(ca), np.sin(ca)])
    r = rows.size
    if not deriv:
        return np.concatenate([lc, -ls], axis=1) @ right, None
    left = np.empty((2 * r, 2 * terms.n))
    left[:r, : terms.n] = lc
    left[:r, terms.n :] = -ls
    left[r:, : terms.n] = ls * terms.w
    left[r:, terms.n :] = lc * terms.w
    prod = left @ right
    m = rows[:, None].astype(np.float64) + cols[None, :]
    return prod[:r], m * prod[r:]


def _scan(terms: _Terms, start: int, stop: int, deriv: bool):
    """B_m (and F_m'(u)) for every integer start <= m < stop."""
    span = stop - start
    k = 1 << max(4, math.ceil(math.log2(max(span, 2)) / 2))
    a = -(-span // k)
    rows = start + k * np.arange(a, dtype=np.int64)
    b, db = _table(terms, rows, np.arange(k), deriv)
    b = b.ravel()[:span]
    return b, (db.ravel()[:span] if deriv else None)


def _certified_step(b: np.ndarray, db: np.ndarray, m: np.ndarray, terms: _Terms, eps: float):
    """Length h* of the interval [u, u + h*) on which B_m < 0 is proven (0 where not failing)."""
    bu = b + eps
    du = db + terms.deriv_error(m)
    curv = terms.curvature(m)
    h = np.zeros_like(b)
    fail = bu < 0
    if np.any(fail):
        bf, df, cf = -bu[fail], du[fail], curv[fail]
        root = np.sqrt(df * df + 2.0 * cf * bf)
        # Positive root of -bf + df h + cf h^2 / 2 = 0, in its two stable forms.
        h[fail] = np.where(df > 0, 2.0 * bf / (df + root), (root - df) / cf)
    return h


def _first_negative(
    values: np.ndarray,
    ms: np.ndarray,
    d: int,
    base: float,
    eps: float,
    budget: list[int] | None = None,
) -> int:
    """Index of the first m with B_m < 0 (values within eps re-checked in mpmath), or -1.

    Each 50-digit re-check costs ``budget`` about 4000 float64 terms' worth per frequency.
    """
    suspects = np.flatnonzero(values < eps)
    for idx in suspects:
        if values[idx] < -eps:
            return int(idx)
        _charge(budget, _work(1, d, factor=_MP_COST))
        if _mp_margin(int(ms[idx]), d, base) < 0:
            return int(idx)
    return -1


def max_context(base: float, d: int = 128, *, limit: int | None = None) -> int:
    r"""Horizon of a base: the largest :math:`L` with :math:`B_m \ge 0` for all :math:`0 \le m < L`.

    .. math:: \operatorname{max\_context}(b) = \min\{m \ge 0 : B_m(b) < 0\}.

    :math:`B_m` is evaluated for every integer :math:`m` in blocks of growing size (exact
    matrix-product route of the module docstring); values within the float64 rounding margin
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


def _horizon(base: float, d: int, limit: int, budget: list[int] | None = None) -> int:
    """First m < limit with B_m < 0, or -1; charges ``budget`` for the distances scanned."""
    terms = _Terms(d, math.log(base))
    start, size = 0, 4096
    while start < limit:
        stop = min(limit, start + size)
        _charge(budget, _work(stop - start, d))
        values, _ = _scan(terms, start, stop, deriv=False)
        ms = np.arange(start, stop)
        idx = _first_negative(values, ms, d, base, _eps(stop, d // 2), budget)
        if idx >= 0:
            return int(ms[idx])
        start, size = stop, min(2 * size, 1 << 21)
    return -1


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


def _pick(m: np.ndarray, b: np.ndarray, db: np.ndarray, h: float) -> np.ndarray:
    """Distances most likely to fail at u + h (smallest linear prediction), to be tracked."""
    pred = b + db * h
    keep = np.flatnonzero(pred < 1.0)
    if keep.size > _TRACKED:
        keep = keep[np.argpartition(pred[keep], _TRACKED)[:_TRACKED]]
    return np.unique(m[keep])


class _OutOfSteps(Exception):
    """The sweep used up its budget of iterations (turned into a ValueError by the caller)."""


def _sweep(length: int, d: int, u: float, budget: list[int]) -> tuple[float, list, int, int, float]:
    """Certified sweep upward from u (a proven lower bound) for context length ``length``.

    ``budget[0]`` is the number of iterations left (shared along a chain of sweeps); each
    iteration uses one, and :class:`_OutOfSteps` is raised when none is left.
    """
    n = d // 2
    eps = _eps(length, n)
    window = np.arange(-_WINDOW, _WINDOW + 1)
    tracked = np.empty(0, dtype=np.int64)
    gaps: list[tuple[float, float]] = []
    n_steps = n_scans = 0
    h_ref = 0.0
    while True:
        _charge(budget, 1)
        if u > _U_MAX:
            raise ValueError(f"no base below 1e300 satisfies the bound for L = {length}, d = {d}")
        terms = _Terms(d, u)
        h_best = 0.0
        if tracked.size:
            _charge(budget, _work(tracked.size * window.size, d))
            b, db = _table(terms, tracked, window, deriv=True)
            m = (tracked[:, None] + window[None, :]).astype(np.float64)
            ok = (m >= 1) & (m < length)
            m, b, db = m[ok], b[ok], db[ok]
            h = _certified_step(b, db, m, terms, eps)
            h_best = float(h.max()) if h.size else 0.0
            if h_best > 0 and h_best >= 0.05 * h_ref:
                tracked = _pick(m.astype(np.int64), b, db, h_best)
        if h_best <= 0 or h_best < 0.05 * h_ref or not tracked.size:
            n_scans += 1
            _charge(budget, _work(length, d))
            b, db = _scan(terms, 0, length, deriv=True)
            ms = np.arange(length)
            base = math.exp(u)
            if _first_negative(b, ms, d, base, eps, budget) < 0:
                return u, gaps, n_steps, n_scans, float(b.min())
            h = _certified_step(b, db, ms.astype(np.float64), terms, eps)
            h_best = h_ref = float(h.max())
            tracked = _pick(ms, b, db, h_best)
            if h_best < _LEAP:
                gaps.append((math.exp(u), math.exp(u + _LEAP)))
                u += _LEAP
                continue
        n_steps += 1
        # Shrink by a relative 1e-9 so the float sum never rounds past the certified end.
        u += h_best * (1.0 - 1e-9)


def min_base_search(
    context_length: int, d: int = 128, *, max_steps: int = DEFAULT_MAX_STEPS
) -> BaseSearch:
    r"""The smallest feasible base for a context length, with the evidence of the search.

    Finds the smallest :math:`b` with :math:`B_m(b) \ge 0` for every integer
    :math:`0 \le m < L` by the certified sweep of the module docstring. The sweep for
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
    if length <= 2:
        return BaseSearch(base=1.0, context_length=length, d=d, start=1.0)
    if d == 2:
        raise ValueError(
            "d = 2 has the single frequency theta_0 = 1 for every base, so B_2 = cos 2 < 0: "
            f"no base satisfies the bound for context_length = {length} >= 3"
        )
    try:
        return _search(length, d, [max_steps])
    except _OutOfSteps:
        raise _budget_error(
            f"the certified sweep of min_base for context_length = {length}, d = {d}", max_steps
        ) from None


def _search_checked(
    length: int, d: int, budget: list[int], max_steps: int, memo: dict | None = None
) -> BaseSearch:
    """min_base_search for checked arguments with a shared ``budget`` (for the table)."""
    if length <= 2:
        return BaseSearch(base=1.0, context_length=length, d=d, start=1.0)
    if d == 2:
        raise ValueError(f"d = 2: no base satisfies the bound for context_length = {length}")
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
    the module docstring and :func:`min_base_search` for the certified sweep and exactly what
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


# --------------------------------------------------------------------------------------------
# the table of the chapter, cached on the source
# --------------------------------------------------------------------------------------------
def _source_key() -> str:
    """SHA-256 of the files of ``TABLE_SOURCE_FILES`` (see there which and why)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in TABLE_SOURCE_FILES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def _round2(value: float) -> float:
    """``value`` rounded to two significant digits (to nearest), as a float."""
    return float(f"{value:.1e}")


def _checks(
    k: int, base: float, d: int, budget: list[int], max_steps: int, memo: dict | None = None
) -> dict:
    """The comparison columns of the chapter's table for L = 2^k."""
    length = 1 << k
    out = {
        "base_m_le_L": _search_checked(length + 1, d, budget, max_steps, memo).base,
        "round2": _round2(base),
        "round2_ok": _feasible(_round2(base), length, d),
        "grid2": _grid_min_base(length, d, 2, 100.0, True, budget, max_steps),
    }
    if d == 128 and k in PUBLISHED_MIN_BASE:
        for name, value in zip(("paper", "su"), PUBLISHED_MIN_BASE[k], strict=True):
            out[name] = value
            out[f"{name}_horizon"] = max_context(value, d)
            out[f"{name}_ok"] = out[f"{name}_horizon"] >= length
    return out


def min_base_table(
    log2_lengths: Sequence[int] = _DEFAULT_LOG2_LENGTHS,
    d: int = 128,
    *,
    use_cache: bool = True,
    max_steps: int = TABLE_MAX_STEPS,
) -> list[dict]:
    r"""The chapter's table: :func:`min_base` for :math:`L = 2^k` and the checks beside it.

    Each row holds ``L``, ``base`` (:func:`min_base`), and the evidence of the sweep, all
    cumulative over the chain of sweeps that led to it (from :math:`b = 1` through the shorter
    rows and their ``m <= L`` variants): ``n_steps``, ``n_scans``, ``n_gaps``, ``work``
    (steps of budget) and ``seconds`` (CPU time of those sweeps: the cost of a cold
    computation, see :attr:`BaseSearch.seconds`); then ``base_m_le_L``
    (the minimum under the criterion :math:`m \le L`, i.e. ``min_base(L + 1)``),
    ``round2`` / ``round2_ok`` (``base`` rounded to two digits and whether that is feasible),
    ``grid2`` (the first feasible base of the two-digit grid, :func:`grid_min_base` with
    ``exact=True``) and, for ``d = 128`` and the published lengths, ``paper``, ``su``
    (:data:`rope_lib.base_bound.PUBLISHED_MIN_BASE`) with their horizons and feasibility.

    The rows this call computes are computed on a chain of its own, started afresh at
    :math:`b = 1` whatever :func:`min_base` has memoised in the process, so their evidence and
    seconds describe a cold computation; the results are then shared with the memo of
    :func:`min_base`.

    The sweep for the whole default table (:math:`L = 2^{10} \dots 2^{20}`, ``d = 128``) takes
    tens of seconds, so the rows are stored in ``rope_lib/data/min_base_table.json`` together
    with a SHA-256 of the files of ``TABLE_SOURCE_FILES`` (this module,
    ``frequencies.py`` and ``_validate.py``). The cache is read
    only when that key and ``d`` match and every requested length is present; otherwise the
    rows are recomputed. The file is rewritten only by the default call (``d = 128`` and
    exactly the default lengths, ``use_cache=True``) when it is stale, so no call with other
    arguments can replace the shipped table.

    Parameters
    ----------
    log2_lengths : sequence of int
        Exponents k, for context lengths :math:`L = 2^k` (1 <= k <= 21: the row for k needs
        ``min_base(2**k + 1)``, within ``MAX_CONTEXT_LENGTH`` = 2**22).
    d : int
        Head dimension.
    use_cache : bool
        ``True`` or ``False`` (nothing else): read the JSON cache (and, for the default
        table only, rewrite it when stale).
    max_steps : int
        Budget of the rows computed by this call (sweeps, ``m <= L`` sweeps, grid checks),
        shared, in steps of work as in :func:`min_base_search`; default
        ``TABLE_MAX_STEPS`` = 3,000,000, what the shipped table needs from scratch (about a minute:
        it is computed once and cached). Past it a ``ValueError`` asks for a larger one.
    """
    d = check_dim(d)
    use_cache = check_flag(use_cache, "use_cache")
    max_steps = _check_steps(max_steps)
    if isinstance(log2_lengths, str) or not isinstance(log2_lengths, Sequence | np.ndarray):
        raise TypeError(
            f"log2_lengths must be a sequence of integers k (L = 2**k), got {log2_lengths!r}"
        )
    ks = [
        check_positive_int(
            k, "log2_lengths entries", maximum=21, hint="min_base(2**k + 1) must stay <= 2**22"
        )
        for k in log2_lengths
    ]
    key = _source_key()
    cached: dict[str, dict] = {}
    if use_cache and _CACHE.exists():
        try:
            blob = json.loads(_CACHE.read_text())
        except (OSError, ValueError):
            blob = {}
        if blob.get("key") == key and blob.get("d") == d:
            cached = blob.get("rows", {})
    if all(str(k) in cached for k in ks):
        return [cached[str(k)] for k in ks]
    rows = dict(cached)
    budget = [max_steps]
    chain: dict[int, BaseSearch] = {}  # a fresh chain: rows computed (and timed) cold
    for k in sorted(ks):
        if str(k) in rows:
            continue
        res = _search_checked(1 << k, d, budget, max_steps, chain)
        rows[str(k)] = {
            "L": 1 << k,
            "base": res.base,
            "n_steps": res.n_steps,
            "n_scans": res.n_scans,
            "n_gaps": len(res.gaps),
            "work": res.work,
            "seconds": res.seconds,
        }
        rows[str(k)].update(_checks(k, res.base, d, budget, max_steps, chain))
    memo = _SWEEPS.setdefault(d, {})
    for length, result in chain.items():
        memo.setdefault(length, result)
    if use_cache and d == 128 and sorted(set(ks)) == list(_DEFAULT_LOG2_LENGTHS):
        shipped = {str(k): rows[str(k)] for k in _DEFAULT_LOG2_LENGTHS}
        try:
            _CACHE.parent.mkdir(exist_ok=True)
            _CACHE.write_text(json.dumps({"key": key, "d": d, "rows": shipped}, indent=1) + "\n")
        except OSError:
            pass
    return [rows[str(k)] for k in ks]


# --------------------------------------------------------------------------------------------
# the published method: a grid of bases, each checked by brute force
# --------------------------------------------------------------------------------------------
def brute_force_feasible(base: float, context_length: int, d: int = 128) -> bool:
    r"""Plain check of :math:`B_m \ge 0` for every :math:`0 \le m < L`: direct float64 sums of
    :math:`\cos(m\theta_i)`, in chunks of distances, stopping at the first negative one.

    This is the brute force of the published computations (no matrix trick, no rounding
    margin); it serves as the independent check of :func:`min_base` and inside
    :func:`grid_min_base`."""
    base = check_base(base)
    length = _check_length(context_length)
    d = check_dim(d)
    return _brute_force(base, length, d)


def _brute_force(base: float, length: int, d: int, budget: list[int] | None = None) -> bool:
    """:func:`brute_force_feasible` for checked arguments, charging ``budget`` per chunk."""
    freqs = theta(d, base)
    chunk = max(16, (1 << 18) // freqs.size)
    for start in range(0, length, chunk):
        m = np.arange(start, min(length, start + chunk), dtype=np.float64)
        _charge(budget, _work(m.size, d, factor=4))
        if np.cos(np.multiply.outer(m, freqs)).sum(axis=1).min() < 0:
            return False
    return True


def grid_min_base(
    context_length: int,
    d: int = 128,
    digits: int = 2,
    start: float = 100.0,
    *,
    exact: bool = False,
    max_steps: int = 100_000,
):
    r"""First base of a grid with ``digits`` significant digits that passes the brute force.

    Scan bases upward on the grid :math:`c \cdot 10^e` (``digits``-digit mantissas c, from
    ``start``) and check :math:`B_m \ge 0` for all :math:`m < L` at each by brute force
    (:func:`brute_force_feasible`). With ``digits=2`` this is the list of the search that the
    conference version of Men et al. (NeurIPS 2024) prints as its Appendix E, as quoted by a
    third party (:math:`(i + j/10)\,10^x`, :math:`x = 3 \dots 9`), with a float64 or exact
    check in place of the appendix's float32 sums; for ``d = 128`` and
    :math:`L = 2^{10} \dots 2^{20}`, with ``exact=True`` (the chapter's table), the two give
    the same bases (a test reruns the float32 search). It can only return grid points, and it can step over a feasible window narrower
    than the grid spacing (it finds one only where a grid point falls inside). For
    ``d = 128`` it reproduces the value of Men et al. at :math:`L = 2^{10}, 2^{11}, 2^{13},
    2^{16}` but not at the other seven lengths (chapter ``base-bound``). Su's published search
    is :func:`su_min_base`.

    ``exact=True`` checks each grid base with :func:`base_is_feasible` (exact and much faster
    for long contexts) instead of the plain float64 brute force; the two differ only where
    :math:`\min_m B_m` is within rounding of zero at a grid base.

    ``digits`` is at most 15 (float64 holds 15 significant digits). ``max_steps`` (default
    100,000, at most 10**8) is a budget of work: one step per grid base checked plus one per
    ``STEP_TERMS`` = 2**16 (distance, frequency) terms its check evaluates (four times as many
    for the brute force, which costs more per term), so it bounds the time of the call
    (about 30 s); past it a ``ValueError`` asks for a larger ``max_steps``."""
    length = _check_length(context_length)
    d = check_dim(d)
    digits = check_positive_int(
        digits, "digits", maximum=15, hint="float64 holds 15 significant digits"
    )
    start = check_base(start, "start")
    exact = check_flag(exact, "exact")
    max_steps = _check_steps(max_steps)
    return _grid_min_base(length, d, digits, start, exact, [max_steps], max_steps)


def _grid_min_base(
    length: int, d: int, digits: int, start: float, exact: bool, budget: list[int], max_steps: int
) -> float:
    """:func:`grid_min_base` for checked arguments, charging ``budget``."""
    exponent = math.floor(math.log10(start)) - (digits - 1)
    mantissa = math.ceil(start / 10.0**exponent)
    try:
        while True:
            _charge(budget, 1)
            if mantissa >= 10**digits:
                mantissa, exponent = 10 ** (digits - 1), exponent + 1
            base = mantissa * 10.0**exponent
            if base > 1e300:
                raise ValueError(f"no grid base below 1e300 is feasible for L = {length}")
            if (
                _feasible(base, length, d, budget)
                if exact
                else _brute_force(base, length, d, budget)
            ):
                return float(f"{mantissa}e{exponent}")
            mantissa += 1
    except _OutOfSteps:
        pass
    raise _budget_error(
        f"grid_min_base for context_length = {length}, d = {d} (from start = {start:g}, "
        f"digits = {digits}; a finer grid has more points)",
        max_steps,
    )


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
    unbounded. Raises ``ValueError`` if ``base`` itself is infeasible, and if the walk
    runs out of its budget ``max_steps`` (default 10**5, at most 10**8): one step per base
    visited plus one per ``STEP_TERMS`` = 2**16 (distance, frequency) terms its check evaluates,
    so the budget bounds the time (about 30 s at most), also at large d.
    """
    base = check_base(base)
    length = _check_length(context_length)
    d = check_dim(d)
    rel_step = check_real(rel_step, "rel_step", 0.0, 1.0, low_open=True, high_open=True)
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


def _direct_margins(bases: np.ndarray, ms: np.ndarray, d: int, dtype: type) -> np.ndarray:
    """B_m for each base (rows) and distance (columns), direct cosine sums in ``dtype``."""
    i = np.arange(d // 2, dtype=dtype)
    th = np.asarray(bases, dtype=dtype)[:, None] ** (dtype(-2.0) * i[None, :] / dtype(d))
    ms = np.asarray(ms, dtype=dtype)
    out = np.empty((th.shape[0], ms.size), dtype=dtype)
    # Blocks of at most 2**22 angles, so no temporary exceeds 32 MiB whatever d and the counts.
    cols = max(1, min(ms.size, _BLOCK_TERMS // th.shape[1]))
    rows = max(1, _BLOCK_TERMS // (cols * th.shape[1]))
    for r in range(0, th.shape[0], rows):
        for c in range(0, ms.size, cols):
            angles = ms[None, c : c + cols, None] * th[r : r + rows, None, :]
            out[r : r + rows, c : c + cols] = np.cos(angles).sum(axis=2, dtype=dtype)
    return out


def _first_passing(
    bases: np.ndarray,
    length: int,
    margins,
    d: int,
    batch: int = 512,
    budget: list[int] | None = None,
) -> int:
    """Index of the first base (in the given order) with margins >= 0 for every m < length.

    ``margins(bases, ms)`` returns the (bases x distances) array. A base is declared
    infeasible only on a negative value it was evaluated at: first at a few *witness*
    distances (those that failed for earlier bases; neighbouring bases of a fine grid
    usually fail at the same m), otherwise by a full scan of all m < length. Returns -1 if
    no base passes. ``budget[0]``, if given, is the number of steps of work left: one per
    base examined plus four per ``STEP_TERMS`` = 2**16 (distance, frequency) terms of the direct
    sums (``d`` terms per distance, at least 64); :class:`_OutOfSteps` is raised when it runs
    out.
    """
    witnesses = np.empty(0, dtype=np.int64)

    def charged(chunk: np.ndarray, ms: np.ndarray) -> np.ndarray:
        _charge(budget, _work(chunk.size * ms.size, d, factor=4))
        return margins(chunk, ms)

    for lo in range(0, bases.size, batch):
        chunk = bases[lo : lo + batch]
        _charge(budget, chunk.size)
        alive = np.ones(chunk.size, dtype=bool)
        if witnesses.size:
            alive = charged(chunk, witnesses).min(axis=1) >= 0
        for j in range(chunk.size):
            if not alive[j]:
                continue
            failing = -1
            for start in range(0, length, 2048):
                ms = np.arange(start, min(length, start + 2048))
                values = charged(chunk[j : j + 1], ms)[0]
                if values.min() < 0:
                    failing = int(ms[np.argmin(values)])
                    break
            if failing < 0:
                return lo + j
            alive[j] = False
            near = np.clip(failing + np.arange(-2, 3), 0, length - 1)
            witnesses = np.unique(np.concatenate([witnesses[-60:], near]))
            rest = np.flatnonzero(alive[j + 1 :]) + j + 1
            if rest.size:
                bad = charged(chunk[rest], near).min(axis=1) < 0
                alive[rest[bad]] = False
    return -1


def su_min_base(
    context_length: int,
    d: int = 128,
    levels: int = 5,
    start_factor: float = 1000.0,
    dtype: type = np.float64,
    *,
    max_steps: int = 200_000,
) -> float:
    r"""Su's published coarse-to-fine search for the smallest base (Su 2024, archive 10122).

    Start from the upper end :math:`\bar b = 1000\,L` (feasible for every
    :math:`L \le 10^6`, d = 128; Su calls it B, a name this book keeps for the margin
    :math:`B_m`). For :math:`k = 1, \dots, 5`: divide :math:`[0, \bar b]` into :math:`10^k`
    equal parts, take the *first* division point :math:`b = j\bar b/10^k` (j = 1, 2, ...) at
    which :math:`\min_{0 \le m < L} \sum_i \cos(m\, b^{-2i/d}) \ge 0`, and set
    :math:`\bar b = b`. Return the final :math:`\bar b`.

    Each level searches all of :math:`[0, \bar b]` again, so a window missed by a coarse level
    is found by a finer one if it is wider than the final spacing
    :math:`\bar b/10^5` (:math:`\bar b` the upper end the last level starts from): the result
    is the first feasible point of a grid with that spacing. The check is Su's direct cosine
    sum, in ``dtype`` (his JAX code runs in float32 unless 64-bit mode is enabled; with
    ``np.float32`` this is a NumPy emulation, whose cosine and order of summation may differ
    from JAX's); here the points are
    visited in order and the scan stops at the first point that passes, which gives the same
    answer as checking every point.

    Parameters
    ----------
    context_length : int
        :math:`3 \le L \le` ``MAX_CONTEXT_LENGTH`` = 2**22 (for :math:`L \le 2` every base
        works and the search has no lower end).
    d : int
        Head dimension.
    levels : int
        Number of refinements (5 in Su's code), at most 7 (level k builds a grid of
        :math:`10^k` bases).
    start_factor : float
        :math:`\bar b = ` ``start_factor`` :math:`\cdot L` at the start (1000); > 0, with
        :math:`1 < \bar b \le 10^{300}`.
    dtype : numpy float type
        ``np.float64`` (default) or ``np.float32``.
    max_steps : int
        Budget of work over all levels (default 200,000, at most 10**8): one step per grid
        base examined plus four per ``STEP_TERMS`` = 2**16 (distance, frequency) terms of the
        direct sums, so it bounds the time of the call (about 30 s). Level k examines about
        :math:`10^k` bases; past the budget a ``ValueError`` asks for a larger one.
    """
    length = check_positive_int(
        context_length,
        "context_length",
        minimum=3,
        maximum=MAX_CONTEXT_LENGTH,
        hint="rope_lib.base_bound.MAX_CONTEXT_LENGTH = 2**22 bounds the scans",
    )
    d = check_dim(d)
    levels = check_positive_int(
        levels, "levels", maximum=7, hint="level k builds a grid of 10**k bases"
    )
    start_factor = check_real(start_factor, "start_factor", 0.0, low_open=True)
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"dtype must be numpy.float64 or numpy.float32, got {dtype!r}")
    dtype = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    max_steps = _check_steps(max_steps)
    top = start_factor * length
    if not 1.0 < top <= 1e300:
        raise ValueError(
            f"start_factor * context_length (the upper end the search starts from) must lie "
            f"in (1, 1e300], got start_factor = {start_factor:g}, product {top:g}"
        )

    def margins(bases: np.ndarray, ms: np.ndarray) -> np.ndarray:
        return _direct_margins(bases, ms, d, dtype)

    budget = [max_steps]
    try:
        if _first_passing(np.array([top]), length, margins, d, budget=budget) < 0:
            raise ValueError(
                f"the starting upper end start_factor * L = {top:g} is not feasible for "
                f"context_length = {length}, d = {d}: pass a larger start_factor"
            )
        for k in range(1, levels + 1):
            grid = np.linspace(0.0, 1.0, 10**k + 1)[1:] * top
            # grid[-1] = top passes, so an index is always found
            top = float(grid[_first_passing(grid, length, margins, d, budget=budget)])
    except _OutOfSteps:
        what = f"su_min_base for context_length = {length}, d = {d}"
        raise _budget_error(what, max_steps) from None
    return top


def published_summary(rows: Sequence[dict]) -> dict[str, Any]:
    r"""Compare the published minimum bases with the exact ones, row by row of
    :func:`min_base_table` (``d = 128``).

    Returns a dict of lists of context lengths L:

    * ``su_is_round2``: Su's value equals the exact minimum rounded to two significant digits;
    * ``su_bad``: Su's value fails :math:`B_m \ge 0` for some :math:`m < L`, split into
      ``su_round_down`` (printed value below the exact minimum, hence infeasible) and
      ``su_round_up`` (above it, but outside the feasible window that starts there);
    * ``paper_bad``: the value of Men et al. fails the criterion; ``paper_above``: it is at
      or above the exact minimum rounded to two digits;
    * ``paper_departs``: the paper's value differs from the rounded exact minimum, and
      ``grid_matches``: of those, the rows where the two-digit grid (``grid2``) gives the
      paper's value;
    * ``le_same``: the minimum under :math:`m \le L` equals the one under :math:`m < L`
      (relative difference below :math:`10^{-6}`).
    """
    keys = ("L", "base", "round2", "base_m_le_L", "grid2", "su", "su_ok", "paper", "paper_ok")
    rows = _check_rows(rows, "rows", keys)
    out: dict[str, Any] = {
        "su_is_round2": [r["L"] for r in rows if r["su"] == r["round2"]],
        "su_bad": [r["L"] for r in rows if not r["su_ok"]],
        "su_round_down": [r["L"] for r in rows if not r["su_ok"] and r["su"] < r["base"]],
        "su_round_up": [r["L"] for r in rows if not r["su_ok"] and r["su"] > r["base"]],
        "paper_bad": [r["L"] for r in rows if not r["paper_ok"]],
        "paper_above": [r["L"] for r in rows if r["paper"] >= r["round2"]],
        "paper_departs": [r["L"] for r in rows if r["paper"] != r["round2"]],
        "le_same": [r["L"] for r in rows if abs(r["base_m_le_L"] / r["base"] - 1) < 1e-6],
    }
    out["grid_matches"] = [
        r["L"] for r in rows if r["L"] in out["paper_departs"] and r["grid2"] == r["paper"]
    ]
    return out


def html_table(header: Sequence[Any], body: Sequence[Sequence[Any]]) -> str:
    """A small right-aligned HTML table (header row, then one row per entry of ``body``).

    Cells are inserted as given (they may hold markup such as ``<b>no</b>``); every row
    must have as many cells as the header.
    """
    pad = 'style="padding: 0.15em 0.4em; text-align: right"'
    if isinstance(header, str) or not isinstance(header, Sequence):
        raise TypeError(f"header must be a sequence of cells, got {type(header).__name__}")
    if isinstance(body, str) or not isinstance(body, Sequence):
        raise TypeError(f"body must be a sequence of rows, got {type(body).__name__}")
    width = len(header)
    for row in body:
        if isinstance(row, str) or not isinstance(row, Sequence):
            raise TypeError(f"every row of body must be a sequence of cells, got {row!r}")
        if len(row) != width:
            raise ValueError(
                f"every row of body needs {width} cells (as many as header), got {len(row)}: "
                f"{row!r}"
            )

    def cells(row: Sequence[Any], tag: str) -> str:
        return "".join(f"<{tag} {pad}>{c}</{tag}>" for c in row)

    rows = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in body)
    return f"<table><tr>{cells(header, 'th')}</tr>{rows}</table>"


# --------------------------------------------------------------------------------------------
# float32 angles
# --------------------------------------------------------------------------------------------
def float32_margin(
    m: Any, d: int, base: float = 10000.0, inv_freq: Any = None
) -> np.ndarray | np.float32:
    r""":math:`B_m` as a float32 implementation computes it.

    .. math:: \tilde B_m = \sum_i \cos_{32}\bigl(\mathrm{fl}_{32}(m \cdot
              \tilde\theta_i)\bigr),

    the float32 angle table ``outer(positions, inv_freq)`` of LLaMA / Hugging Face code,
    cosines and sum in float32. :math:`\tilde\theta_i` is ``inv_freq`` if given (a float32
    array of length d/2, e.g. from a framework's own recipe), otherwise the float32
    rounding of the float64 :math:`\theta_i`. Recipes differ by an ulp here and there
    (Hugging Face computes ``1 / base ** (arange(0, d, 2) / d)`` in float32), and at a base
    where :math:`\min_m B_m` is within rounding of zero the verdict depends on the recipe.
    The phase error is about :math:`m\theta_i 2^{-24}`.

    Parameters
    ----------
    m : int or array_like of int
        Distances (whole numbers, at most 2**24 so that float32 holds them exactly).
    d : int
        Head dimension.
    base : float
        Base :math:`b > 1` (ignored when ``inv_freq`` is given).
    inv_freq : array_like of float32, optional
        The frequencies to use, length d/2.
    """
    d = check_dim(d)
    base = check_base(base)
    ms = check_integer_array(m, "m")
    if np.any(np.abs(ms) > 2**24):
        raise ValueError("m must have magnitude <= 2**24 (exact in float32)")
    if inv_freq is None:
        inv = theta(d, base).astype(np.float32)
    else:
        inv = _inv_freq(inv_freq, d)
    flat = ms.ravel().astype(np.float32)
    out = np.empty(flat.shape, dtype=np.float32)
    step = max(1, (1 << 20) // inv.size)
    for s in range(0, flat.size, step):
        ang = np.multiply.outer(flat[s : s + step], inv).astype(np.float32)
        out[s : s + step] = np.cos(ang).sum(axis=1, dtype=np.float32)
    out = out.reshape(ms.shape)
    return out[()] if out.ndim == 0 else out


def _inv_freq(inv_freq: Any, d: int, name: str = "inv_freq") -> np.ndarray:
    """A float32 array of d/2 finite positive frequencies, else a ValueError naming ``name``."""
    torch = __import__("sys").modules.get("torch")
    if torch is not None and isinstance(inv_freq, torch.Tensor):
        inv_freq = inv_freq.detach().cpu().numpy()
    try:
        inv = np.asarray(inv_freq)
    except (ValueError, TypeError) as error:
        raise TypeError(f"{name} must be a float32 array of shape ({d // 2},)") from error
    if inv.shape != (d // 2,) or inv.dtype != np.float32:
        raise ValueError(
            f"{name} must be a float32 array of shape ({d // 2},), got "
            f"{getattr(inv, 'dtype', type(inv).__name__)} of shape {inv.shape}"
        )
    if not (np.all(np.isfinite(inv)) and np.all(inv > 0)):
        raise ValueError(f"{name} must hold finite positive frequencies, got nan, inf or <= 0")
    return inv


def float32_min_base(
    context_length: int,
    d: int = 128,
    inv_freq=None,
    rel_step: float = 1e-8,
    rel_span: float = 1e-5,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> float:
    r"""The smallest base that passes :math:`\tilde B_m \ge 0` (float32, :func:`float32_margin`)
    for every :math:`m < L`, on a fine grid around the exact :func:`min_base` :math:`b^*`.

    Scans :math:`b^*(1 + j s)` for :math:`j = -J, \dots, J` (:math:`s` = ``rel_step``,
    :math:`J s` = ``rel_span``) upward and returns the first base that passes. Raises if the
    first grid point already passes (the float32 boundary may lie further down: widen
    ``rel_span``) or if none passes.

    Parameters
    ----------
    context_length, d : int
        The problem (L at most ``MAX_CONTEXT_LENGTH`` = 2**22).
    inv_freq : callable, optional
        ``inv_freq(base) -> float32 array`` of the d/2 frequencies (a framework's recipe);
        default: float32 rounding of the float64 :math:`\theta_i`.
    rel_step, rel_span : float
        Grid spacing and half-width, relative to :math:`b^*`: ``0 < rel_step <= rel_span
        < 0.5``.
    max_steps : int
        Budget (default 50,000, at most 10**8), in steps of work: of the sweep of
        :func:`min_base`, and separately of the float32 grid scan (one step per grid point
        plus four per ``STEP_TERMS`` = 2**16 terms of the float32 sums); a grid of more than
        ``max_steps`` points, :math:`2J + 1`, is refused before any work.
    """
    length = _check_length(context_length)
    d = check_dim(d)
    if inv_freq is not None and not callable(inv_freq):
        raise TypeError(
            "inv_freq must be None or a callable inv_freq(base) -> float32 array of the d/2 "
            f"frequencies, got {type(inv_freq).__name__}"
        )
    rel_step = check_real(rel_step, "rel_step", 0.0, 0.5, low_open=True, high_open=True)
    rel_span = check_real(rel_span, "rel_span", 0.0, 0.5, low_open=True, high_open=True)
    if rel_step > rel_span:
        raise ValueError(f"rel_step must be <= rel_span, got {rel_step:g} > {rel_span:g}")
    max_steps = _check_steps(max_steps)
    n = int(round(rel_span / rel_step))
    if 2 * n + 1 > max_steps:
        raise ValueError(
            f"the grid of rel_span / rel_step = {n} points each side exceeds max_steps = "
            f"{max_steps}; pass a larger max_steps (at most {MAX_STEPS}) or a larger rel_step"
        )
    exact = min_base(length, d, max_steps=max_steps)
    grid = exact * (1.0 + rel_step * np.arange(-n, n + 1))

    def recipe(b: float):
        if inv_freq is None:
            return None
        return _inv_freq(inv_freq(float(b)), d, "inv_freq(base), the result of inv_freq,")

    def margins(bases: np.ndarray, ms: np.ndarray) -> np.ndarray:
        return np.stack([float32_margin(ms, d, float(b), recipe(b)) for b in bases])

    budget = [max_steps]
    try:
        idx = _first_passing(grid, length, margins, d, batch=64, budget=budget)
    except _OutOfSteps:
        what = f"float32_min_base for context_length = {length}, d = {d}"
        raise _budget_error(what, max_steps) from None
    if idx < 0:
        raise ValueError(f"no base within a relative {rel_span:g} of min_base passes in float32")
    if idx == 0:
        raise ValueError("the lowest grid point already passes in float32: widen rel_span")
    return float(grid[idx])


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
