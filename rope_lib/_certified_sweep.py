r"""The certified sweep behind :func:`rope_lib.base_bound.min_base` (chapter ``base-bound``).

Private: the public functions are :func:`~rope_lib.base_bound.min_base`,
:func:`~rope_lib.base_bound.min_base_search` and :func:`~rope_lib.base_bound.max_context`;
this module holds the algorithm they run and the step budget every search of chapter 7 is
charged in.

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

Fast exact evaluation at one base
---------------------------------
For :math:`m = a\Delta + c` with :math:`0 \le c < \Delta` (a block width :math:`\Delta`):
:math:`\sum_i e^{\mathrm i m\theta_i} = \sum_i e^{\mathrm i a\Delta\theta_i}
e^{\mathrm i c\theta_i}`, the :math:`(a, c)` entry of a complex matrix product
:math:`(A \times d/2)(d/2 \times \Delta)`.
Only the rounding of each phase differs from the direct sum (error :math:`\approx 10^{-10}` at
:math:`m = 10^6`), and the weighted product with :math:`t_i\theta_i` gives :math:`F_m'(u)` at
the same cost. The public :func:`rope_lib.base_bound.similarity_margin` uses :func:`rope_lib.decay.ones_score`, which
implements the same trick.

Rounding: why the margins make the certificate a proof
-------------------------------------------------------
Let :math:`\mathbf u = 2^{-53}`. Assume ``log`` is within 1 ulp and ``exp``, ``sin`` and
``cos`` within 4 ulp (relative :math:`8\mathbf u` for ``exp``, absolute :math:`8\mathbf u`
for ``sin`` and ``cos`` of values in :math:`[-1, 1]`); measured against mpmath on the
machines that build this book, the worst errors were 0.50 ulp for ``math.log``, 0.71 for
``np.exp`` and 0.52 for ``np.sin`` and ``np.cos``. Below, constants are rounded up so that
they also absorb second-order terms (of relative size below :math:`10^{-6}`).

* **Frequencies.** ``t``, ``log(b)`` and their product carry relative errors of
  :math:`\mathbf u`, :math:`2\mathbf u` and :math:`\mathbf u`, so the computed
  :math:`x_i = t_i\ln b` is off by at most :math:`4.0001\mathbf u\,x_i` (in a sweep, which
  is handed :math:`u` itself, by :math:`2.0001\mathbf u\,x_i`), and :math:`\theta_i =
  \theta_i^*(1 + \epsilon_i)` with :math:`|\epsilon_i| \le (4.0001x_i + 8)\mathbf u`, where
  :math:`\theta_i^* = e^{-x_i}` is exact for the exact binary value of the base.
* **Phases.** A row phase :math:`r\theta_i` (one more rounding) is off by at most
  :math:`r\theta_i^*(4.0001x_i + 9)\mathbf u \le 10.48\,r\,\mathbf u`, because
  :math:`x e^{-x} \le 1/e`; likewise a column phase. Its cosine and sine are then off by
  at most :math:`e_r = (10.48|r| + 8)\mathbf u`, and the pair's term
  :math:`\cos\alpha_r\cos\alpha_c - \sin\alpha_r\sin\alpha_c` by at most
  :math:`\sqrt2(e_r + e_c) \le (14.83(|r| + |c|) + 22.7)\mathbf u`. (Above :math:`b =
  e^{708}` the smallest :math:`\theta_i` are subnormal and carry an absolute error of
  :math:`2^{-1074}` instead, negligible here.)
* **The product.** A dot product of :math:`2n` terms, in any order, errs by at most
  :math:`\gamma_{2n}\sum_j|x_jy_j| \le 2.0001\,n\mathbf u \cdot n` (:math:`\gamma_k =
  k\mathbf u/(1 - k\mathbf u)`, and each pair's two products sum to at most 1 in size).
* **The base returned.** A sweep computes at :math:`e^u` for its float :math:`u`, but its
  50-digit re-checks and its answer use ``exp(u)``, whose logarithm differs from :math:`u`
  by at most :math:`8.0001\mathbf u`; as :math:`|F_m'| \le m n`, the margins move by at most
  :math:`8.0001 M n\mathbf u`.

So a computed :math:`B_m` is within :math:`n\mathbf u\,(14.83(|r| + |c|) + 22.7 + 2.0001n +
8.0001M)` of the exact one at the base that is checked. Every call has :math:`|r| + |c| \le
M + 11` for its bound :math:`M \ge 2` on the distances (a scan has :math:`c \ge 0` and
:math:`r + c = m < M`; a tracked window has :math:`0 \le r < L = M` and :math:`|c| \le 12`),
so the error is at most :math:`n\mathbf u\,(22.84M + 185.9 + 2.0001n)`, and ``_eps``,
:math:`n\max(M + 2, n/32)\,2^{-46}`, exceeds it: when :math:`n \le 32(M + 2)` because
:math:`128(M + 2) \ge 22.84M + 185.9 + 64.004(M + 2)` for :math:`M \ge 1.41`; otherwise
(then :math:`M < n/32 - 2`) because :math:`4n \ge 22.84(n/32 - 2) + 185.9 + 2.0001n` for
:math:`n \ge 110`, and here :math:`n > 32(M + 2) \ge 128`. Without the :math:`n/32` branch the
bound fails at large d and short contexts, e.g. d = 8192 and L = 16.

The slope :math:`F_m'(u) = m\sum_i w_i\sin(m\theta_i)`, :math:`w_i = t_i\theta_i`, is used
only in a sweep (so the :math:`2.0001\mathbf u\,x_i` case above applies), with
:math:`s_w = \sum_i w_i` and :math:`P = \sum_i w_i x_i`: the weights are off by at most
:math:`(2.0001P + 10 s_w)\mathbf u` in all; the phases by at most
:math:`\sqrt2\,((m + 24)(2.0001/e + 9) + 16)\,s_w\mathbf u \le (13.77m + 353.1)s_w\mathbf u`
(:math:`\theta_i x_i \le 1/e`, :math:`\theta_i \le 1`, and :math:`|r| + |c| \le m + 24`
since :math:`r \ge 0` and :math:`c \ge -12`); the product of :math:`2n` terms by
:math:`2.0001n s_w\mathbf u`; and the last multiplication by :math:`m` by :math:`m s_w\mathbf
u`. Hence the error is at most :math:`m(2.0001P + (13.77m + 2.0001n + 364.1)s_w)\mathbf u`,
below the second branch of ``_Terms.deriv_error``, :math:`m(4P + (16m + 3n +
400)s_w)\mathbf u`. Its first branch, :math:`(m^2 + m + n)(s_w + \sum_i
t_i\theta_i^2)\,2^{-46}`, is the simpler allowance this module used before the proof was
written down; it is the larger of the two at d = 128 and moderate bases (the sweeps of
chapter 7), so their steps did not change.

A chain of sweeps starts each from ``log`` of the previous answer, which can lie half an ulp
of :math:`u` above the end of the previous proof: a sliver of relative width about
:math:`10^{-16}`, unexamined like the recorded gaps and far narrower than they are.
"""

from __future__ import annotations

import math

import numpy as np

#: Width (in u = ln b) of an uncertified leap; also the relative precision actually achieved.
_LEAP = 1e-9
#: Cost of one 50-digit mpmath term relative to one float64 term, for the budgets.
_MP_COST = 4000
#: Half-width of the windows searched around tracked failing distances.
_WINDOW = 12
#: Number of failing distances tracked between full scans.
_TRACKED = 24
_U_MAX = math.log(1e300)
#: One step of a budget pays for this many evaluated (distance, frequency) terms (at least 64
#: frequencies are counted per distance, the fixed cost of a distance at small d), on top of
#: one step per iteration / examined base. Every search of chapter 7 (here, in
#: :mod:`rope_lib.base_bound` and in :mod:`rope_lib.base_table`) charges its budget
#: this way, so ``max_steps`` bounds the time of a call (roughly 0.5 ms per step), not only
#: its number of iterations.
STEP_TERMS = 1 << 16


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
    r"""Rounding margin of a float64 B_m for distances below ``m_max`` (``n`` = d/2 pairs).

    :math:`n\max(M + 2, n/32)\,2^{-46}` with :math:`M` = ``m_max``: at least the worst-case
    error :math:`n\mathbf u(22.84M + 185.9 + 2.0001n)` of the matrix route (module
    docstring, *Rounding*), for every :math:`M \ge 2`.
    """
    return n * max(m_max + 2.0, n / 32) * 2.0**-46


class _Terms:
    """Frequencies and the constants of the Taylor bound at one point u = ln b."""

    def __init__(self, d: int, u: float):
        self.n = d // 2
        self.u = u
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
        """A bound on the float64 error of F_m'(u) from the matrix route (module docstring,
        *Rounding*): the larger of the earlier allowance and the proven bound
        m (4P + (16m + 3n + 400) s_w) 2^-53, with P = u sum_i t_i^2 theta_i."""
        sw = float(np.sum(self.w))
        p = self.u * float(np.sum(self.t * self.w))
        proven = m * (4.0 * p + (16.0 * m + 3.0 * self.n + 400.0) * sw) * 2.0**-53
        return np.maximum((m * m + m + self.n) * self.sd * 2.0**-46, proven)


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
        # Shrink by a relative 1e-9, and where that is below half an ulp of u, step back one
        # float at a time, so the move never passes the certified end u + h_best (the
        # difference of two floats this close is exact).
        nxt = u + h_best * (1.0 - 1e-9)
        while nxt - u > h_best:
            nxt = math.nextafter(nxt, -math.inf)
        u = nxt
