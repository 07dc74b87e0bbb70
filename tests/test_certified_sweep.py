"""Tests of rope_lib._certified_sweep: the certified step, the curvature bound and the
mpmath re-check behind chapter 7's minimum base.

Independent routes: mpmath derivatives and sums, finite differences, direct float64 cosine
sums, and the quadratic Taylor bound solved in mpmath.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from rope_lib import _certified_sweep as cs
from rope_lib import base_bound as bb

from .test_base_bound import (
    certify_infeasible,
    direct,
    feasible,
    first_negative,
    mp_bisect_sign_change,
    mp_margin,
    rounding_margin,
)


def test_scan_matches_direct_sums_and_finite_difference():
    d, base, length = 128, 5e7, 1 << 20
    terms = cs._Terms(d, math.log(base))
    values, slope = cs._scan(terms, 0, length, deriv=True)
    sample = np.arange(0, length, 4099)
    np.testing.assert_allclose(values[sample], direct(sample, d, base), atol=1e-8)
    # dB/du by a central difference of the direct sum in u = ln b
    h = 1e-7
    for m in (1000, 123457, 1000003):
        up = direct(np.array([m]), d, base * math.exp(h))[0]
        down = direct(np.array([m]), d, base * math.exp(-h))[0]
        assert slope[m] == pytest.approx((up - down) / (2 * h), rel=1e-4, abs=1e-3)


def _second_derivative(m: float, d: int, us: np.ndarray) -> np.ndarray:
    """F_m''(u) = -sum_i (g_i^2 cos alpha_i + t_i g_i sin alpha_i) at each u (float64),
    alpha_i = m e^{-t_i u}, g_i = t_i alpha_i (differentiate F_m(u) = sum_i cos alpha_i twice)."""
    t = 2.0 * np.arange(d // 2) / d
    alpha = m * np.exp(-np.outer(us, t))
    g = t * alpha
    return -(g * g * np.cos(alpha) + t * g * np.sin(alpha)).sum(axis=1)


def _mp_second_derivative(m: float, d: int, u: float) -> float:
    """F_m''(u) by mpmath's numerical differentiation of F_m at 30 digits."""
    with mpmath.workdps(30):
        return float(
            mpmath.diff(
                lambda v: mpmath.fsum(
                    mpmath.cos(m * mpmath.exp(-mpmath.mpf(2 * i) / d * v)) for i in range(d // 2)
                ),
                mpmath.mpf(u),
                2,
            )
        )


@pytest.mark.parametrize(("d", "base"), [(16, 500.0), (64, 1e5), (128, 1e4), (128, 6.5e7)])
def test_curvature_bound_holds_on_both_sides_of_the_crossover(d, base):
    r"""The sweep's bound K_m(u) = m^2 S_2 + m S_1 >= |F_m''(v)| for v >= u, checked on a dense
    grid of v in [u, u + span] (float64 values of F_m'', their formula checked against
    mpmath's numerical derivative at the start and at the largest value), at distances on both
    sides of the crossover m = S_1 / S_2: below it the linear term m S_1 is most of the bound,
    above it m^2 S_2. On each side the scan exceeds the bound with that side's dominant term
    left out, so dropping either term fails here; K_m also equals its closed form
    sum_i g_i^2 + t_i g_i at 30 digits."""
    u0 = math.log(base)
    t = 2.0 * np.arange(d // 2) / d
    th = np.exp(-t * u0)
    s1, s2 = float(np.sum(t * t * th)), float(np.sum((t * th) ** 2))
    crossover = s1 / s2
    small = [m for m in (1, 2, 3) if m < crossover / 2]
    large = [m for m in (100, 10**4, 10**6) if m > 2 * crossover]
    assert len(small) >= 2 and len(large) >= 2, (crossover, small, large)
    terms = cs._Terms(d, u0)
    for m in small + large:
        bound = float(terms.curvature(np.array([float(m)]))[0])
        # dense scan of v in [u0, u0 + span]: each step of the grid moves the fastest phase
        # (rate at most m max_i t_i theta_i per unit of u) by at most 1/8 radian
        rate = m * float(np.max(t * th)) + 1.0
        span = min(3.0, 500.0 / rate)
        us = u0 + np.linspace(0.0, span, 4001)
        second = _second_derivative(m, d, us)
        worst = int(np.argmax(np.abs(second)))
        for j in (0, worst):
            assert second[j] == pytest.approx(
                _mp_second_derivative(m, d, us[j]), rel=1e-7, abs=1e-9
            )
        assert np.abs(second).max() <= bound, (m, np.abs(second).max(), bound)
        dominant_cut = m * m * s2 if m in small else m * s1
        assert np.abs(second).max() > dominant_cut, (m, np.abs(second).max(), dominant_cut)
        # the closed form of the docstring, at 30 digits
        with mpmath.workdps(30):
            tt = [mpmath.mpf(2 * i) / d for i in range(d // 2)]
            gg = [ti * m * mpmath.exp(-ti * mpmath.mpf(u0)) for ti in tt]
            closed = float(mpmath.fsum(g * g + ti * g for g, ti in zip(gg, tt, strict=True)))
        assert bound == pytest.approx(closed, rel=1e-9)


def _recording(monkeypatch) -> list[tuple[int, int, float, float]]:
    """Record every call of the module's 50-digit re-check (it still runs unchanged)."""
    calls: list[tuple[int, int, float, float]] = []
    original = cs._mp_margin

    def record(m, d, base, dps=50):
        value = original(m, d, base, dps)
        calls.append((int(m), int(d), float(base), float(value)))
        return value

    monkeypatch.setattr(cs, "_mp_margin", record)
    return calls


def test_max_context_decides_a_tie_in_mpmath(monkeypatch):
    """Bases built so that float64 cannot decide: at d = 128, B_1707 changes sign between two
    adjacent float64 bases near 1.0024e4 (found here by bisection in 50-digit mpmath). On the
    thirteen floats around the change, the float64 value of B_1707 is below a thousandth of its
    rounding margin, while every B_m with m < 1707 is above 0.5. The horizon is 1707 exactly
    where B_1707 < 0 in mpmath, later where it is >= 0 (direct sums written here, mpmath near
    zero); max_context and base_is_feasible must say so, through their 50-digit re-check."""
    d, m0 = 128, 1707
    assert first_negative(1e4, 4000, d) == m0  # the horizon of 1e4 (chapter 7)
    lo, hi = mp_bisect_sign_change(m0, d, 1e4, 1.003e4)
    below, above = [lo], [hi]
    for _ in range(6):
        below.insert(0, float(np.nextafter(below[0], 0.0)))
        above.append(float(np.nextafter(above[-1], math.inf)))
    assert direct(np.arange(m0), d, lo).min() > 0.5
    margin = float(rounding_margin(m0, d))
    calls = _recording(monkeypatch)
    for base in below + above:
        exact = mp_margin(m0, d, base)
        assert abs(direct(np.array([m0]), d, base)[0]) < 1e-3 * margin  # float64 cannot decide
        assert (exact < 0) == (base in below)
        horizon = m0 if base in below else first_negative(base, 10**5, d, start=m0 + 1)
        assert horizon is not None
        assert bb.base_is_feasible(base, m0 + 1, d) == (base in above), base
        assert bb.max_context(base, d) == horizon, base
    # the verdicts came from the 50-digit re-check at the decisive distance
    checked = {base for m, dd, base, _ in calls if (m, dd) == (m0, d)}
    assert checked == set(below + above)


def test_min_base_decides_its_last_step_in_mpmath(monkeypatch):
    """A sweep that needs the 50-digit re-check: for L = 111, d = 8 (found by a search over
    small L and d), the full scan at the sweep's last step finds a margin within rounding of 0
    that mpmath shows negative, so the sweep must go on. The answer is checked here: feasible
    in 40-digit mpmath, at most a relative 2e-9 above the base where the decisive distance's
    B_m changes sign (bisection in 50-digit mpmath), and every base below that change is
    proven infeasible by a certificate checked here."""
    length, d = 111, 8
    monkeypatch.setattr(bb, "_SWEEPS", {})  # a fresh chain, whatever ran before
    calls = _recording(monkeypatch)
    b = bb.min_base_search(length, d).base
    values = [mp_margin(m, d, b) for m in range(length)]
    assert min(values) >= 0, (b, values)
    decisive = int(np.argmin(values))
    lo, hi = mp_bisect_sign_change(decisive, d, b * (1 - 1e-6), b)
    assert hi <= b <= hi * (1 + 2e-9)
    (reached,) = certify_infeasible([(length, math.log(lo * (1 - 1e-9)))], d)
    assert reached >= math.log(lo * (1 - 1e-9))
    # the sweep went through the 50-digit re-check: a margin within rounding of 0, negative
    assert any(value < 0 and base < b for _m, _d, base, value in calls), calls


class _StubTerms:
    """Stand-in for base_bound._Terms with chosen derivative error and curvature bound."""

    def __init__(self, deriv_error: float, curvature: float):
        self.e, self.c = deriv_error, curvature

    def deriv_error(self, m):
        return np.full(np.shape(m), self.e)

    def curvature(self, m):
        return np.full(np.shape(m), self.c)


def _mp_step(b: float, db: float, err: float, curv: float, eps: float) -> float:
    """The certified step written out: with the margin's upper bound bu = b + eps < 0, the
    derivative's upper bound du = db + err and curvature bound K, F(u + h) <= bu + du h +
    K h^2 / 2, so F < 0 is proven for h below the positive root of that quadratic; 0 when
    bu >= 0 (nothing proven).  Solved in mpmath at 60 digits."""
    mpmath.mp.dps = 60
    bu, du, K = mpmath.mpf(b) + mpmath.mpf(eps), mpmath.mpf(db) + mpmath.mpf(err), mpmath.mpf(curv)
    if bu >= 0:
        return 0.0
    return float((-du + mpmath.sqrt(du * du - 2 * K * bu)) / K)


@pytest.mark.parametrize(
    "b, db, err, curv, eps",
    [
        (-0.3, 0.0, 0.5, 2.0, 0.0),  # the derivative bound is the error term alone
        (-0.3, -0.2, 0.5, 2.0, 0.01),  # du > 0
        (-0.3, -0.9, 0.5, 2.0, 0.01),  # du < 0: the other root form
        (-1e-20, 1e-3, 0.0, 1.0, 0.0),  # 0 < du <= 1, tiny margin: cancellation-prone
        (-1e-8, 1e8, 0.0, 1.0, 0.0),  # du >> 1: (root - du) / K would cancel to 0
        (-1e-3, -5.0, 0.0, 3.0, 0.0),  # du < 0 large
    ],
)
def test_certified_step_is_the_positive_root_of_the_taylor_bound(b, db, err, curv, eps):
    h = cs._certified_step(
        np.array([b]), np.array([db]), np.array([7.0]), _StubTerms(err, curv), eps
    )
    expected = _mp_step(b, db, err, curv, eps)
    assert expected > 0
    assert abs(h[0] - expected) <= 1e-12 * expected


def test_certified_step_proves_nothing_where_the_margin_bound_is_not_negative():
    # bu = b + eps = 0 exactly (and above): no point is proven failing, so the step is 0,
    # whatever the derivative (a negative du would otherwise give the root 2 |du| / K).
    b = np.array([-0.25, -0.25, 0.1])
    db = np.array([-3.0, 2.0, -3.0])
    h = cs._certified_step(b, db, np.ones(3), _StubTerms(0.0, 2.0), 0.25)
    assert h.tolist() == [0.0, 0.0, 0.0]
    assert [_mp_step(bi, di, 0.0, 2.0, 0.25) for bi, di in zip(b, db, strict=True)] == [
        0.0,
        0.0,
        0.0,
    ]


def _mp_derivative(m: int, d: int, base: float) -> float:
    """F_m'(u) = sum_i t_i alpha_i sin(alpha_i), alpha_i = m b^(-t_i), in 40-digit mpmath."""
    with mpmath.workdps(40):
        b, total = mpmath.mpf(base), mpmath.mpf(0)
        for i in range(d // 2):
            t = mpmath.mpf(2 * i) / d
            angle = m * b ** (-t)
            total += t * angle * mpmath.sin(angle)
        return float(total)


@pytest.mark.parametrize(
    ("d", "base", "start"),
    [
        (128, 1.5, 10**5),
        (128, 1e4, 0),
        (128, 6.5e7, 10**6),
        (64, 1e5, 3 * 10**5),
        (16, 500.0, 2 * 10**6),
        # large d near b = 1 (where S_d is about d/2): the error is 5 times an allowance
        # divided by S_d instead of multiplied
        (256, 1.05, 2 * 10**6),
    ],
)
def test_derivative_allowance_covers_the_float64_error(d: int, base: float, start: int) -> None:
    """The certified step widens |F_m'| by deriv_error(m) for the rounding of the matrix
    route: that allowance must exceed the actual error (measured against mpmath) at every
    distance, including large m, where the phases m theta_i lose digits. Measured: the
    error is 1e-3 of the allowance or less; an allowance growing only linearly in m, one
    scaled by 3**-46 instead of 2**-46, or one divided by S_d = sum t_i theta_i (1 + theta_i)
    instead of multiplied, falls below it."""
    terms = cs._Terms(d, math.log(base))
    ms = np.arange(start, start + 50)
    _, db = cs._scan(terms, start, start + 50, True)
    err = np.abs(db - [_mp_derivative(int(m), d, base) for m in ms])
    assert np.all(err <= terms.deriv_error(ms.astype(np.float64)))


def _steps_for(n_terms: int, d: int, factor: int = 1) -> int:
    """The documented charge for evaluating n_terms distances at all d/2 frequencies: one step
    per 2**16 (distance, frequency) terms, at least 64 frequencies counted per distance,
    rounded up; a 50-digit re-check counts 4000 times (min_base_search's docstring)."""
    return math.ceil(factor * n_terms * max(d // 2, 64) / 2**16)


@pytest.mark.parametrize(("length", "d"), [(3, 16), (17, 16), (300, 64), (1000, 128), (512, 8)])
def test_sweep_trajectory_is_certified_and_its_evidence_counted(monkeypatch, length, d):
    """Follow a fresh chain of sweeps point by point (recording the points u = ln b it visits,
    the certified steps it computes, its full scans and 50-digit re-checks) and check the
    evidence min_base_search reports against that record (each sweep of the chain, for
    shorter lengths first, against its own length): each move is either a certified
    step no longer than the certificate computed at its point (so nothing uncertified is
    skipped silently) or a leap of exactly 1e-9 taken where the certificate fell below 1e-9,
    and the leaps are exactly the reported gaps, each (b, b e^1e-9); every point a sweep moves
    on from is infeasible (direct sums written here), the point each sweep stops at is
    feasible; n_steps, n_scans and work are the counts of steps, full scans and the
    documented charges (one per iteration, ceil(terms max(d/2, 64) / 2**16) per evaluation,
    4000 times that per re-check)."""
    monkeypatch.setattr(bb, "_SWEEPS", {})
    points: list[float] = []  # u of each iteration (each builds its _Terms once)
    events: dict[int, list] = {}  # iteration -> its scans (length) and steps (max h), in order
    scans: dict[int, int] = {}  # iteration -> length scanned in full
    tables: dict[int, int] = {}  # iteration -> distances evaluated by tracking
    rechecks: dict[int, int] = {}  # iteration -> number of 50-digit re-checks
    Terms, scan, step, table, mp = (
        cs._Terms,
        cs._scan,
        cs._certified_step,
        cs._table,
        cs._mp_margin,
    )

    class Recorded(Terms):
        def __init__(self, d, u):
            points.append(u)
            super().__init__(d, u)

    in_scan = []

    def rec_scan(terms, start, stop, deriv):
        assert start == 0 and deriv
        scans[len(points) - 1] = stop
        events.setdefault(len(points) - 1, []).append("scan")
        in_scan.append(1)
        try:
            return scan(terms, start, stop, deriv)
        finally:
            in_scan.pop()

    def rec_table(terms, rows, cols, deriv):
        k = len(points) - 1
        if not in_scan:  # the tracked distances' windows
            tables[k] = tables.get(k, 0) + rows.size * cols.size
        return table(terms, rows, cols, deriv)

    def rec_step(b, db, m, terms, eps):
        h = step(b, db, m, terms, eps)
        events.setdefault(len(points) - 1, []).append(float(h.max()) if h.size else 0.0)
        return h

    def rec_mp(m, d, base, dps=50):
        k = len(points) - 1
        rechecks[k] = rechecks.get(k, 0) + 1
        return mp(m, d, base, dps)

    sweeps: list[tuple[int, int]] = []  # (first iteration, context length) of each sweep
    sweep = cs._sweep

    def rec_sweep(length, d, u, budget):
        sweeps.append((len(points), length))
        return sweep(length, d, u, budget)

    monkeypatch.setattr(bb, "_sweep", rec_sweep)
    monkeypatch.setattr(cs, "_Terms", Recorded)
    monkeypatch.setattr(cs, "_scan", rec_scan)
    monkeypatch.setattr(cs, "_table", rec_table)
    monkeypatch.setattr(cs, "_certified_step", rec_step)
    monkeypatch.setattr(cs, "_mp_margin", rec_mp)
    result = bb.min_base_search(length, d)
    assert points[0] == 0.0  # a fresh chain starts at b = 1
    # the chain's sweeps: each stops at a point where it scanned in full and found no
    # failing distance; the next starts there (through exp and log)
    ends = [k for k in range(len(points)) if events[k][-1] == "scan"]
    assert ends and ends[-1] == len(points) - 1
    assert all(k in scans for k in ends)
    n_steps, gaps, work = 0, [], 0
    assert sweeps[-1][1] == length
    for k, u in enumerate(points):
        base = math.exp(u)
        sweep_length = max((first, n) for first, n in sweeps if first <= k)[1]
        work += 1 + _steps_for(scans.get(k, 0), d) + _steps_for(tables.get(k, 0), d)
        work += rechecks.get(k, 0) * _steps_for(1, d, factor=4000)
        if k in ends:
            assert scans[k] == sweep_length and feasible(base, sweep_length, d), (k, base)
            if k + 1 < len(points):
                assert points[k + 1] == pytest.approx(u, abs=1e-12)
            continue
        # moved on from: some distance below this sweep's length fails here
        assert first_negative(base, sweep_length, d) is not None, (k, base)
        move, cert = points[k + 1] - u, events[k][-1]
        if cert < 1e-9:
            assert move == pytest.approx(1e-9, abs=1e-14), (k, move, cert)
            gaps.append(k)
        else:
            n_steps += 1
            # never past the certified end, also where the relative shrink is below an ulp
            assert 0 < move <= cert, (k, move, cert)
            assert move >= cert * (1 - 3e-9) - np.spacing(points[k + 1]), (k, move, cert)
    assert result.base == math.exp(points[-1])
    assert result.n_steps == n_steps and n_steps >= 1
    assert result.n_scans == len(scans) and len(scans) >= len(ends)
    assert len(result.gaps) == len(gaps) >= 1
    for (lo, hi), k in zip(result.gaps, gaps, strict=True):
        assert lo == math.exp(points[k])
        assert 0 < hi / lo - 1 <= 1.1e-9 and hi == pytest.approx(math.exp(points[k] + 1e-9))
    assert result.work == work


@pytest.mark.parametrize(
    ("base", "d", "limit", "horizon"),
    [(1e9, 16, 20_000, None), (1e9, 16, 300_000, 21737), (6.5e7, 128, 1 << 20, 679592)],
)
def test_horizon_charges_the_distances_it_scans(base, d, limit, horizon):
    """_horizon (behind max_context, base_is_feasible and the budgets of feasible_window_top
    and the base table) charges its budget the documented price of the distances it examines:
    at least ceil(N max(d/2, 64) / 2**16) steps for the N distances below the horizon (all of
    them below ``limit`` when none fails) and at most the price of the blocks it scanned plus
    one step per block (blocks double from 4096 distances, so the block holding the horizon
    ends below 2 N + 4096, and a scan of N distances has at most log2(N / 4096) + 2 blocks),
    whatever the blocks. The horizons come from direct float64 sums written here."""
    expected = first_negative(base, limit, d)
    assert expected == horizon
    budget = [10**9]
    found = cs._horizon(base, d, limit, budget)
    assert found == (-1 if horizon is None else horizon)
    examined = limit if horizon is None else horizon + 1
    used = 10**9 - budget[0]
    low = _steps_for(examined, d)
    blocks = math.floor(math.log2(max(examined, 4096) / 4096)) + 2
    high = _steps_for(min(limit, 2 * examined + 4096), d) + blocks
    assert low <= used <= high, (used, low, high)
    # and a budget one step short of the lower bound runs out
    with pytest.raises(cs._OutOfSteps):
        cs._horizon(base, d, limit, [low - 1])


def test_min_base_search_fits_the_default_budget(monkeypatch):
    """min_base_search's docstring promises that the default budget (50,000 steps) covers L up
    to 2**17 from scratch at d = 128. The chain for 2**17 runs through 2**14 first, so a fresh
    chain for 2**14 must finish within it too (and be feasible, checked by direct sums); a
    sweep that tracked every candidate distance instead of the 24 most negative would need
    about 200,000 steps here."""
    monkeypatch.setattr(bb, "_SWEEPS", {})
    result = bb.min_base_search(1 << 14, 128)
    assert result.work <= bb.DEFAULT_MAX_STEPS
    assert feasible(result.base, 1 << 14, 128)


def test_first_negative_says_minus_one_when_no_margin_fails():
    """_first_negative's documented answer when every B_m is >= 0 is -1 (its callers test
    idx >= 0 / < 0, and -1 is the value its docstring names). Here B_0..B_3 at d = 8, b = 1e4
    are all above 1 (direct float64 sums), far outside the rounding margin, so no 50-digit
    re-check is made and the budget is untouched."""
    d, base = 8, 1e4
    ms = np.arange(4)
    values = direct(ms, d, base)
    assert values.min() > 1
    budget = [7]
    assert cs._first_negative(values, ms, d, base, float(rounding_margin(3, d)), budget) == -1
    assert budget == [7]


def test_running_out_of_steps_uses_up_a_shared_budget():
    """A budget is a one-element list shared along a chain of searches (min_base_search's
    chain, the base table's rows): a charge larger than what is left raises _OutOfSteps and
    leaves nothing (budget[0] = 0), so every later charge on the same budget, even of one
    step, runs out too; a charge that fits takes exactly its cost."""
    budget = [5]
    cs._charge(budget, 3)
    assert budget == [2]
    with pytest.raises(cs._OutOfSteps):
        cs._charge(budget, 3)
    assert budget == [0]
    with pytest.raises(cs._OutOfSteps):
        cs._charge(budget, 1)
    assert budget == [0]
    cs._charge(None, 10**9)  # no budget: nothing is charged


@pytest.mark.parametrize("frac", [0.6, -0.6])
def test_horizon_rechecks_a_margin_within_rounding_and_charges_it(monkeypatch, frac):
    """At d = 4, B_2(b) = cos 2 + cos(2 / sqrt b) changes sign at b0 = (2 / (pi - 2))**2.
    The bases used here (the float nearest b0 + frac eps / B_2'(b0), computed in 50-digit
    mpmath) give B_2 = frac times the documented rounding margin eps = n (m_max + 2) 2^-46 of
    the block m < 3 (n = 2, m_max = 3), checked here in mpmath. Such a value is within eps of
    0, so _horizon must re-check it in mpmath (once, at m = 2) and charge that re-check
    (ceil(4000 max(d/2, 64) / 2**16) = 4 steps) on top of the one step for the block; the
    answer is the exact sign: no failing distance below 3 for frac > 0, the horizon 2 for
    frac < 0. A margin half as large, or computed with n (m_max - 2), would leave
    0.6 eps out of the re-check; a re-check not charged would cost 1 step. The float64
    value of B_2 (a direct sum written here) is within eps of the exact one, as the
    margin claims."""
    d, limit = 4, 3
    eps = float(rounding_margin(limit, d))  # 2 * (3 + 2) * 2^-46
    with mpmath.workdps(50):
        b0 = (2 / (mpmath.pi - 2)) ** 2

        def b2(b):
            return mpmath.cos(2) + mpmath.cos(2 / mpmath.sqrt(b))

        base = float(b0 + frac * eps / mpmath.diff(b2, b0))
        exact = float(b2(mpmath.mpf(base)))
    assert exact == pytest.approx(frac * eps, rel=1e-3)
    assert abs(direct(np.array([2]), d, base)[0] - exact) < eps
    assert direct(np.arange(2), d, base).min() > 1  # B_0 = 2, B_1 > 2 cos 1
    calls = _recording(monkeypatch)
    budget = [100]
    assert cs._horizon(base, d, limit, budget) == (-1 if frac > 0 else 2)
    assert [(m, dd) for m, dd, _b, _v in calls] == [(2, d)]
    assert 100 - budget[0] == _steps_for(limit, d) + _steps_for(1, d, factor=4000) == 1 + 4


@pytest.mark.parametrize("d", [256, 512])
def test_horizon_charges_half_d_terms_per_distance_at_large_d(d):
    """Above d = 128 a distance costs d/2 terms (the 64-term floor no longer applies): for
    b = 1e8 no B_m with m < 4096 is negative (direct float64 sums, far from 0), and the scan
    costs ceil(4096 (d/2) / 2**16) steps = 8 at d = 256, 16 at d = 512, counted in whole
    steps (an int budget stays an int)."""
    base, limit = 1e8, 4096
    assert direct(np.arange(limit), d, base).min() > 1
    budget = [100]
    assert cs._horizon(base, d, limit, budget) == -1
    assert 100 - budget[0] == _steps_for(limit, d) == limit * (d // 2) // 2**16
    assert type(budget[0]) is int


def test_sweep_steps_stop_a_relative_1e9_short_of_each_certificate(monkeypatch):
    """The certified end u + h* is computed in float64 (h* from a square root and a division,
    a few ulps off the true root of the Taylor bound), so each certified step stops a
    relative 1e-9 short of it: the move is at most h* (1 - 1e-9), up to the rounding of
    u + h* (1 - 1e-9) (half an ulp of the new point, and 2^-52 h*). Recorded along a fresh
    chain for L = 300, d = 64 (points u from each _Terms, the last certificate of each
    iteration, the full scans at which a sweep stops); at least one step is long enough that
    a move ending at h* itself would break the bound."""
    monkeypatch.setattr(bb, "_SWEEPS", {})
    points: list[float] = []
    last: dict[int, object] = {}
    Terms, scan, step = cs._Terms, cs._scan, cs._certified_step

    class Recorded(Terms):
        def __init__(self, d, u):
            points.append(u)
            super().__init__(d, u)

    def rec_scan(terms, start, stop, deriv):
        last[len(points) - 1] = "scan"
        return scan(terms, start, stop, deriv)

    def rec_step(b, db, m, terms, eps):
        h = step(b, db, m, terms, eps)
        last[len(points) - 1] = float(h.max()) if h.size else 0.0
        return h

    monkeypatch.setattr(cs, "_Terms", Recorded)
    monkeypatch.setattr(cs, "_scan", rec_scan)
    monkeypatch.setattr(cs, "_certified_step", rec_step)
    bb.min_base_search(300, 64)
    decisive = 0
    for k in range(len(points) - 1):
        cert = last[k]
        if cert == "scan" or cert < 1e-9:  # a sweep's end, or an uncertified leap
            continue
        move, nxt = points[k + 1] - points[k], points[k + 1]
        assert 0 < move <= cert * (1 - 1e-9) + cert * 2.0**-52 + np.spacing(nxt), (k, move, cert)
        decisive += cert * 1e-9 > 4 * np.spacing(nxt)
    assert decisive >= 1


# ---------------------------------------------------------------------------------------------
# the rounding margins: each at least the worst-case error derived in the module docstring
# ---------------------------------------------------------------------------------------------
UNIT = 2.0**-53  # unit roundoff of float64


def worst_case_margin_error(m_max: float, n: int) -> float:
    """The error bound of a computed B_m, written here from its pieces (log within 1 ulp;
    exp, sin and cos within 4): theta_i off by (4.0001 x_i + 8) u relative, a phase r theta_i
    by r theta_i (4.0001 x_i + 9) u <= r (4.0001/e + 9) u, its cosine and sine by 8 u more,
    the pair's term by sqrt(2) times the sum of both (|r| + |c| <= m_max + 11); the 2n-term
    product by gamma_2n n; and the checked base exp(u) against e^u by 8.0001 m_max n u."""
    phase = 4.0001 / math.e + 9
    per_pair = math.sqrt(2) * (phase * (m_max + 11) + 16) * (1 + 1e-6)
    gamma = 2 * n * UNIT / (1 - 2 * n * UNIT)
    return n * (per_pair + 8.0001 * m_max) * UNIT + gamma * n


@pytest.mark.parametrize("m_max", [2, 3, 16, 100, 4096, 1 << 20, 1 << 30])
@pytest.mark.parametrize("n", [1, 2, 64, 128, 1000, 4096, 1 << 15])
def test_rounding_margin_covers_the_worst_case_error_and_not_ten_times_more(m_max, n):
    """_eps(M, n) must be at least the worst-case error of the matrix route (derived
    here), for every d up to MAX_DIM = 2**16 and every bound M >= 2 on the distances,
    including large d with short contexts (n = 32768, M = 2), where the error is dominated
    by the 2n-term dot product. It need not be far larger: within a factor 10 the sweep
    gives away no more than one digit of its certified steps."""
    bound = worst_case_margin_error(m_max, n)
    assert bound <= cs._eps(m_max, n) <= 10 * bound


def test_the_margin_of_products_matters_at_large_d_and_short_contexts():
    """The module docstring's example: at d = 8192 and L = 16 a margin n (L + 2) 2^-46 (no
    n/32 branch) is below the worst-case error, and _eps is not."""
    n, length = 4096, 16
    assert n * (length + 2) * 2.0**-46 < worst_case_margin_error(length, n) <= cs._eps(length, n)


def test_scan_at_large_d_and_short_context_is_within_its_margin():
    """d = 8192, m < 16, b = 1e4: the scan's values against 50-digit mpmath sums (the
    measured error is far inside the margin; this checks the route, the bounds above the
    margin)."""
    d, base, length = 8192, 1e4, 16
    values, _ = cs._scan(cs._Terms(d, math.log(base)), 0, length, deriv=False)
    exact = np.array([cs._mp_margin(m, d, base) for m in range(length)])
    assert np.all(np.abs(values - exact) <= cs._eps(length, d // 2))


def worst_case_slope_error(m: float, d: int, base: float) -> float:
    """The error bound of a computed F_m'(u) in a sweep (which is handed u = ln b, so x_i =
    t_i u carries 2.0001 x_i u), written here from its pieces, with w_i = t_i theta_i,
    s_w = sum w_i and P = sum w_i x_i: weights off by (2.0001 x_i + 10) u relative; phases as
    for B_m but weighted, with theta_i x_i <= 1/e and theta_i <= 1 (window offsets up to 12
    on each side); the 2n-term product by gamma_2n s_w; then one more rounding when
    multiplied by m."""
    n = d // 2
    t = 2.0 * np.arange(n) / d
    theta = np.exp(-t * math.log(base))
    w = t * theta
    sw, p = float(w.sum()), float((w * t).sum()) * math.log(base)
    weights = 2.0001 * p + 10 * sw
    phases = math.sqrt(2) * ((m + 24) * (2.0001 / math.e + 9) + 16) * sw
    product = 2.0001 * n * sw
    return m * (weights + phases + product + sw) * UNIT * 1.001


SIMPLER_TOO_SMALL = {(4, 1e200, 1.0), (4, 1e200, 3.0), (8, 1e250, 2.0), (65536, 1e10, 181.0)}


@pytest.mark.parametrize(
    ("d", "base", "m"),
    [
        # where the simpler allowance (m^2 + m + n) S_d 2^-46 is below the bound:
        (4, 1e200, 1.0),  # a huge base: P / s_w is about x_1 = 230
        (4, 1e200, 3.0),
        (8, 1e250, 2.0),
        (65536, 1e10, 181.0),  # large d, m near sqrt(n): the product's error leads
        # and where it is above
        (65536, 1e6, 100.0),
        (16384, 1e4, 100.0),
        (128, 1e4, 5000.0),
        (65536, 10.0, 3.0),
    ],
)
def test_derivative_allowance_covers_the_worst_case_error(d, base, m):
    """deriv_error(m) must be at least the worst-case error of F_m'(u) derived here, also
    where the simpler allowance (m^2 + m + n) S_d 2^-46 is below it (the first four cases,
    checked), and where the proven branch decides it, not more than twice the bound."""
    terms = cs._Terms(d, math.log(base))
    bound = worst_case_slope_error(m, d, base)
    simpler = (m * m + m + d // 2) * terms.sd * 2.0**-46
    allowance = terms.deriv_error(np.array([m]))[0]
    assert allowance >= bound
    if simpler < bound:
        assert allowance <= 2 * bound
    assert (simpler < bound) == ((d, base, m) in SIMPLER_TOO_SMALL)


@pytest.mark.parametrize("base", [1.5, 10.0, 1e4, 5e5, 1e7, 1e10])
def test_derivative_allowance_is_unchanged_for_chapter_7s_sweeps(base):
    """The docstring claims the first branch, (m^2 + m + n)(sum t theta + sum t theta^2)
    2^-46 (computed here), is the larger at d = 128 and moderate bases, so the proof changed
    none of chapter 7's steps: checked for m from 1 to 2**21."""
    d = 128
    terms = cs._Terms(d, math.log(base))
    t = 2.0 * np.arange(d // 2) / d
    theta = base**-t
    s_d = float((t * theta).sum() + (t * theta**2).sum())
    m = np.unique(np.geomspace(1, 1 << 21, 400).round())
    np.testing.assert_allclose(
        terms.deriv_error(m), (m * m + m + d // 2) * s_d * 2.0**-46, rtol=1e-12
    )


# ---------------------------------------------------------------------------------------------
# _horizon's blocks and _scan's memory
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("first", [1, 4095, 4096, 4097, 12287, 12288, 28672, 30000])
def test_horizon_finds_a_first_failure_at_any_place_in_its_blocks(monkeypatch, first):
    """_horizon scans blocks of 4096, 8192, 16384, ... distances (starting at 0, 4096,
    12288, 28672). A failure exactly at a block start is as much a first failure as any
    other: here the margins are replaced by a table written here that is 1 everywhere but
    -1 at ``first``, so the answer is ``first``, whatever block it falls in."""
    fake = np.ones(40000)
    fake[first] = -1.0

    def scan(terms, start, stop, deriv):
        return fake[start:stop].copy(), None

    monkeypatch.setattr(cs, "_scan", scan)
    assert cs._horizon(1e4, 64, 40000) == first
    assert cs._horizon(1e4, 64, first) == -1  # the limit is exclusive


def test_scan_memory_grows_like_the_square_root_of_the_span():
    """_scan splits m = a k + c with k about sqrt(span), so its arrays hold O(sqrt(span) d)
    floats: at d = 4 and 4096 distances, 64 rows and 64 columns of 2 pairs, a few kB. A split
    with far more columns (k of the order of span**2) would need gigabytes at d = 128 and
    2**20 distances; here the peak (tracemalloc, which numpy reports to) must stay below
    1 MiB, against 2**24 columns x 2 pairs x 8 bytes = 256 MiB for such a split."""
    import tracemalloc

    terms = cs._Terms(4, math.log(1e4))
    tracemalloc.start()
    try:
        values, _ = cs._scan(terms, 0, 4096, deriv=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert values.shape == (4096,)
    assert peak < 1 << 20, peak
