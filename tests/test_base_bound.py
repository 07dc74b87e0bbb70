"""Tests of rope_lib.base_bound: B_m, the horizon, the certified minimum base, the Monte Carlo.

Independent routes: mpmath sums, direct float64 cosine sums (brute force written here, not the
module's), an explicit block-diagonal rotation matrix, finite differences, torch float32, and an
infeasibility certificate checked here (``certify_infeasible``: a bound on B_m'' derived here,
direct sums with their rounding error) that proves the shipped table's minima without reading
them as facts.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lib import base_bound as bb


# ------------------------------------------------------------------------------------------
# independent helpers
# ------------------------------------------------------------------------------------------
def mp_margin(m: int, d: int, base: float) -> float:
    with mpmath.workdps(40):
        b = mpmath.mpf(base)
        return float(sum(mpmath.cos(m * b ** (mpmath.mpf(-2 * i) / d)) for i in range(d // 2)))


def direct(m: np.ndarray, d: int, base: float) -> np.ndarray:
    freqs = np.array([base ** (-2.0 * i / d) for i in range(d // 2)])
    return np.cos(np.outer(np.asarray(m, dtype=float), freqs)).sum(axis=1)


def brute_horizon(base: float, d: int, top: int) -> int | None:
    values = direct(np.arange(top), d, base)
    neg = np.flatnonzero(values < 0)
    return int(neg[0]) if neg.size else None


def rotation(m: int, d: int, base: float) -> np.ndarray:
    r = np.zeros((d, d))
    for i in range(d // 2):
        a = m * base ** (-2.0 * i / d)
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return r


def rounding_margin(m, d: int) -> np.ndarray:
    """A bound on the float64 error of a direct sum sum_i cos(m theta_i): each angle carries
    about m 2^-52 of error (theta_i to a few ulps, times m), each cosine and addition half an
    ulp more; n (m + 2) 2^-46 (n = d/2 terms) leaves a factor of about 16 on top."""
    return (d // 2) * (np.asarray(m, dtype=float) + 2.0) * 2.0**-46


def first_negative(base: float, length: int, d: int, start: int = 0) -> int | None:
    """First m in [start, length) with B_m(base) < 0, or None. Direct float64 sums in chunks;
    a value within rounding_margin of 0 is decided by mp_margin (40 digits)."""
    freqs = np.array([base ** (-2.0 * i / d) for i in range(d // 2)])
    chunk = max(1, (1 << 21) // freqs.size)
    for lo in range(start, length, chunk):
        m = np.arange(lo, min(length, lo + chunk), dtype=float)
        values = np.cos(np.outer(m, freqs)).sum(axis=1)
        margin = rounding_margin(m, d)
        for idx in np.flatnonzero(values < margin):
            if values[idx] < -margin[idx] or mp_margin(int(m[idx]), d, base) < 0:
                return int(m[idx])
    return None


def feasible(base: float, length: int, d: int) -> bool:
    """B_m >= 0 for every m < length: first_negative finds no negative value."""
    return first_negative(base, length, d) is None


def mp_bisect_sign_change(m: int, d: int, lo: float, hi: float) -> tuple[float, float]:
    """Adjacent float64 bases lo < hi with B_m(lo) < 0 <= B_m(hi) in 50-digit mpmath, by
    bisection over the floats between the given lo (B_m < 0) and hi (B_m >= 0)."""

    def sign(b: float) -> bool:
        with mpmath.workdps(50):
            x = mpmath.mpf(b)
            return (
                mpmath.fsum(mpmath.cos(m * x ** (mpmath.mpf(-2 * i) / d)) for i in range(d // 2))
                >= 0
            )

    assert not sign(lo) and sign(hi)
    while np.nextafter(lo, math.inf) < hi:
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
            mid = float(np.nextafter(lo, math.inf))
        lo, hi = (lo, mid) if sign(mid) else (mid, hi)
    return lo, hi


# ------------------------------------------------------------------------------------------
# an infeasibility certificate, checked here
# ------------------------------------------------------------------------------------------
def _hint_scan(t: np.ndarray, th: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """B_m and dB_m/du for every m < length by block products (m = a k + c): only a hint of
    where witnesses are, so its round-off does not matter."""
    k = 1 << max(4, math.ceil(math.log2(max(length, 2)) / 2))
    rows = k * np.arange(-(-length // k), dtype=float)
    ra, ca = np.multiply.outer(rows, th), np.multiply.outer(th, np.arange(k, dtype=float))
    cr, sr, cc, sc = np.cos(ra), np.sin(ra), np.cos(ca), np.sin(ca)
    w = t * th
    values = cr @ cc - sr @ sc
    slope = (rows[:, None] + np.arange(k)) * ((sr * w) @ cc + (cr * w) @ sc)
    return values.ravel()[:length], slope.ravel()[:length]


def _witness_steps(ms: np.ndarray, t: np.ndarray, th: np.ndarray) -> tuple[np.ndarray, ...]:
    r"""For each distance m: the certified step h >= 0 over which B_m stays negative from u on
    (0 where B_m(u) is not certainly negative), and B_m, dB_m/du (rounding pushed upward).

    With F(u) = sum_i cos(m e^{-t_i u}), alpha_i = m theta_i, g_i = t_i alpha_i:
    F' = sum_i g_i sin(alpha_i), F'' = -sum_i (g_i^2 cos(alpha_i) + t_i g_i sin(alpha_i)), so
    |F''(v)| <= K = sum_i (g_i^2 + t_i g_i) for every v >= u (each g_i decreases in u), and
    F(u + h) <= F(u) + F'(u) h + K h^2 / 2, which stays negative up to its positive root.
    """
    alpha = np.multiply.outer(ms, th)
    g = t * alpha
    n = th.size
    f = np.cos(alpha).sum(axis=1) + n * (ms + 2.0) * 2.0**-46
    df = (g * np.sin(alpha)).sum(axis=1) + n * (ms + 2.0) ** 2 * 2.0**-46
    curv = (g * g + t * g).sum(axis=1) * (1 + 1e-12)
    h = np.zeros_like(f)
    neg = f < 0
    fn, dn, kn = -f[neg], df[neg], curv[neg]
    root = np.sqrt(dn * dn + 2 * kn * fn)
    h[neg] = np.where(dn > 0, 2 * fn / (dn + root), (root - dn) / kn) * (1 - 1e-9)
    return h, f, df


def certify_infeasible(levels: list[tuple[int, float]], d: int, keep: int = 24) -> list[float]:
    r"""Prove that no base is feasible below given points: ``levels`` lists (L, u_target) with
    L and u_target increasing; returns, per level, a u_reached >= u_target such that every base
    b with 0 <= ln b <= u_reached fails B_m >= 0 at some m < L.

    The u axis is covered from u = 0 (b = 1, where B_2 = (d/2) cos 2 < 0) by intervals
    [u, u + h], each with a witness m < L and h from :func:`_witness_steps` (a bound derived
    here, direct float64 sums with their rounding error added). A witness for L also serves
    every longer context, so the levels form one chain. Where to look for witnesses (the best
    few distances of the last point, else a full :func:`_hint_scan`) is a hint: a wrong hint
    cannot give a false certificate, only an AssertionError saying that none was found.
    """
    t = 2.0 * np.arange(d // 2) / d
    u, cand, h_ref, reached, steps = 0.0, np.array([2.0]), 1.0, [], 0
    window = np.arange(-6, 7)
    for length, u_target in levels:
        while u < u_target:
            steps += 1
            assert steps < 200_000, f"no certificate within 200000 steps (at b = {math.exp(u)!r})"
            th = np.exp(-t * u)
            h, f, df = _witness_steps(cand, t, th)
            if h.max() < 0.02 * h_ref:  # the tracked distances no longer pay: look again
                values, slope = _hint_scan(t, th, length)
                ms = np.arange(length, dtype=float)
                curv = ms * ms * float(np.sum((t * th) ** 2)) + ms * float(np.sum(t * t * th))
                with np.errstate(divide="ignore", invalid="ignore"):
                    guess = np.where(
                        values < 0,
                        (np.sqrt(slope**2 - 2 * curv * values) - slope) / np.maximum(curv, 1e-300),
                        0.0,
                    )
                top = np.argsort(-guess)[:keep]
                cand = np.unique(np.clip(top[:, None] + window, 1, length - 1)).astype(float)
                h, f, df = _witness_steps(cand, t, th)
                h_ref = float(h.max())
                assert h_ref > 0, f"no witness found at b = {math.exp(u)!r}, L = {length}"
            best = float(h.max())
            nxt = u + best
            while nxt - u > best:  # the float sum must not pass the certified end
                nxt = float(np.nextafter(nxt, -math.inf))
            assert nxt > u, (
                f"the certificate cannot pass b = {math.exp(u)!r} for L = {length}: its witness "
                "approaches B_m = 0 there (a feasible base just above?)"
            )
            # track the distances predicted most negative at the next point
            order = np.argsort(f + df * best)[:keep]
            cand = np.unique(np.clip(cand[order, None] + window, 1, length - 1))
            u = nxt
        reached.append(u)
    return reached


# ------------------------------------------------------------------------------------------
# B_m
# ------------------------------------------------------------------------------------------
def test_similarity_margin_matches_mpmath():
    for m, d, base in [
        (0, 128, 1e4),
        (1, 128, 1e4),
        (1707, 128, 1e4),
        (10**6, 128, 6.5e7),
        (12345, 16, 500.0),
    ]:
        assert bb.similarity_margin(m, d, base) == pytest.approx(mp_margin(m, d, base), abs=1e-9)


@given(st.integers(0, 10**6), st.sampled_from([4, 8, 64, 128]), st.floats(2.0, 1e8))
def test_similarity_margin_even_and_bounded(m, d, base):
    value = bb.similarity_margin(m, d, base)
    assert value == pytest.approx(bb.similarity_margin(-m, d, base), abs=1e-12)
    assert -d / 2 - 1e-9 <= value <= d / 2 + 1e-9
    assert value == pytest.approx(direct(np.array([m]), d, base)[0], abs=1e-8)


def test_scan_matches_direct_sums_and_finite_difference():
    d, base, length = 128, 5e7, 1 << 20
    terms = bb._Terms(d, math.log(base))
    values, slope = bb._scan(terms, 0, length, deriv=True)
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
    terms = bb._Terms(d, u0)
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


# ------------------------------------------------------------------------------------------
# the horizon
# ------------------------------------------------------------------------------------------
@given(st.floats(5.0, 2e4), st.sampled_from([8, 16, 32, 64, 128]))
def test_max_context_matches_brute_force(base, d):
    expected = brute_horizon(base, d, 20000)
    if expected is None:
        assert bb.max_context(base, d) >= 20000
    else:
        assert bb.max_context(base, d) == expected


def test_max_context_known_values():
    assert bb.max_context(1e4, 128) == brute_horizon(1e4, 128, 4000) == 1707
    assert bb.max_context(10.0, 2) == 2  # d = 2: B_m = cos m
    with pytest.raises(ValueError, match="limit"):
        bb.max_context(1e9, 128, limit=1000)


def _recording(monkeypatch) -> list[tuple[int, int, float, float]]:
    """Record every call of the module's 50-digit re-check (it still runs unchanged)."""
    calls: list[tuple[int, int, float, float]] = []
    original = bb._mp_margin

    def record(m, d, base, dps=50):
        value = original(m, d, base, dps)
        calls.append((int(m), int(d), float(base), float(value)))
        return value

    monkeypatch.setattr(bb, "_mp_margin", record)
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
    """A sweep that needs the 50-digit re-check: for L = 17, d = 16 (found by a search over
    small L and d), the full scan at the sweep's last step finds a margin within rounding of 0
    that mpmath shows negative, so the sweep must go on. The answer is checked here: feasible
    in 40-digit mpmath, at most a relative 2e-9 above the base where the decisive distance's
    B_m changes sign (bisection in 50-digit mpmath), and every base below that change is
    proven infeasible by a certificate checked here."""
    length, d = 17, 16
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


# ------------------------------------------------------------------------------------------
# the minimum base
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("length", "d"), [(3, 128), (100, 16), (300, 64), (1000, 128), (2048, 128), (4096, 128)]
)
def test_min_base_feasible_and_matches_exhaustive_search(length, d):
    result = bb.min_base_search(length, d)
    b = result.base
    assert feasible(b, length, d)
    assert result.min_margin >= 0
    assert all(hi / lo - 1 <= 1.1e-9 for lo, hi in result.gaps)
    # exhaustive search on a relative grid of 1e-4 below b: no grid base is feasible
    grid = b * np.exp(-1e-4 * np.arange(1, 401))
    freqs = 2.0 * np.arange(d // 2) / d
    m = np.arange(length, dtype=float)
    for chunk in np.array_split(grid, 10):
        angles = m[None, :, None] * np.exp(-np.outer(np.log(chunk), freqs))[:, None, :]
        assert np.all(np.cos(angles).sum(axis=2).min(axis=1) < 0)
    # and b is the start of its window: 1e-8 lower is infeasible
    assert not feasible(b * (1 - 1e-8), length, d)


@pytest.mark.parametrize(("length", "d"), [(1000, 128), (2048, 128), (300, 64)])
def test_min_base_is_a_minimum_at_a_zero_crossing(length, d):
    """With B_m >= 0 the smallest base is attained: at it the worst distance sits at B_m = 0
    (it is negative a relative 1e-8 lower), so under the strict B_m > 0 the same number is an
    infimum that is not attained. Checked in 40-digit mpmath at the worst distance."""
    result = bb.min_base_search(length, d)
    b = result.base
    values = direct(np.arange(length), d, b)
    worst = int(np.argmin(values))
    assert 0 <= mp_margin(worst, d, b) < 1e-5
    assert mp_margin(worst, d, b * (1 - 1e-8)) < 0
    assert 0 <= result.min_margin < 1e-5


def test_bisection_would_be_wrong():
    # L = 2048, d = 128: 1e4 is infeasible and 2e4 feasible, but bisection between them
    # converges to the edge of a later window, not to the smallest feasible base.
    length, d = 2048, 128
    lo, hi = 1e4, 2e4
    assert not feasible(lo, length, d) and feasible(hi, length, d)
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if feasible(mid, length, d) else (mid, hi)
    exact = bb.min_base(length, d)
    assert feasible(exact, length, d)
    assert hi > exact * 1.01  # bisection misses the first window by more than 1 %
    # and a base between them is infeasible: the feasible set is not an interval
    assert not feasible(1.2e4, length, d)


def test_small_lengths_and_d_2():
    assert bb.min_base(1) == 1.0 and bb.min_base(2, 64) == 1.0
    with pytest.raises(ValueError, match="d = 2"):
        bb.min_base(3, 2)


def test_grid_search_and_published_values():
    assert bb.grid_min_base(1024) == 4300.0
    assert bb.brute_force_feasible(4300.0, 1024) == feasible(4300.0, 1024, 128)
    # Su's 1.2e4 for L = 2048 fails: the horizon of 1.2e4 is 1554
    assert brute_horizon(1.2e4, 128, 2048) == 1554 == bb.max_context(1.2e4)


# ------------------------------------------------------------------------------------------
# expectation, Monte Carlo, float32
# ------------------------------------------------------------------------------------------
def test_closed_form_with_unequal_means_matches_rotation_matrix():
    d, base, sigma = 8, 50.0, 0.7
    rng = np.random.default_rng(1)
    mu_q, mu_k = rng.normal(size=d), rng.normal(size=d)
    for m in (0, 3, 17):
        expected = mp_margin(m, d, base) + mu_q @ rotation(m, d, base) @ (mu_q - mu_k) / (
            2 * sigma**2
        )
        got = bb.similarity_gap_expected(m, d, base, sigma=sigma, mean_q=mu_q, mean_k=mu_k)
        assert got == pytest.approx(expected, abs=1e-12)


def test_monte_carlo_within_confidence_interval():
    d, base = 16, 100.0
    m = np.arange(0, 40, 3)
    est, half = bb.similarity_gap_monte_carlo(m, d, base, n_samples=40000, eps_scale=1.0)
    exact = direct(m, d, base)
    assert np.mean(np.abs(est - exact) <= half) >= 0.75
    assert np.all(np.abs(est - exact) <= 2.5 * half)
    # unequal means: the estimate follows the closed form, not B_m
    est, half = bb.similarity_gap_monte_carlo(m, d, base, n_samples=40000, mean_q=1.0)
    closed = bb.similarity_gap_expected(m, d, base, mean_q=1.0)
    assert np.all(np.abs(est - closed) <= 2.5 * half)
    assert np.max(np.abs(closed - exact)) > 1.0


def test_float32_margin_matches_torch():
    d, base = 128, 5e5
    m = np.arange(0, 1 << 20, 997)
    inv = (1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)).float()
    ref = torch.cos(torch.outer(torch.tensor(m, dtype=torch.float32), inv)).sum(-1).numpy()
    np.testing.assert_allclose(bb.float32_margin(m, d, base), ref, atol=2e-4)


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [0, -5])
def test_min_base_rejects_non_positive(length):
    with pytest.raises(ValueError, match="context_length"):
        bb.min_base(length)


@pytest.mark.parametrize("length", [2.5, "1024", None])
def test_min_base_rejects_non_integer(length):
    with pytest.raises((TypeError, ValueError), match="context_length"):
        bb.min_base(length)


def test_bad_d_and_base():
    with pytest.raises(ValueError, match="d must be"):
        bb.min_base(1024, 127)
    with pytest.raises(ValueError, match="d must be"):
        bb.max_context(1e4, 0)
    for bad in (1.0, 0.5, -3.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="base"):
            bb.max_context(bad)
    with pytest.raises(TypeError, match="base"):
        bb.max_context("1e4")
    with pytest.raises(ValueError, match="m must"):
        bb.similarity_margin(1.5, 128)
    with pytest.raises(ValueError, match="sigma"):
        bb.similarity_gap_expected(3, 8, sigma=0.0)
    with pytest.raises(ValueError, match="mean_q"):
        bb.similarity_gap_monte_carlo(3, 8, mean_q=np.ones(5))


# ------------------------------------------------------------------------------------------
# figures
# ------------------------------------------------------------------------------------------
# ------------------------------------------------------------------------------------------
# Su's published search, the grid hypothesis, the published tables
# ------------------------------------------------------------------------------------------
def naive_su(length: int, d: int) -> float:
    """Su's code (archive 10122) transcribed: every grid point checked, no shortcut."""
    top = 1000.0 * length
    m = np.arange(length, dtype=float)
    i = np.arange(d // 2)
    for k in range(1, 6):
        bs = np.linspace(0, 1, 10**k + 1)[1:] * top
        ys = np.array([np.cos(m[:, None] * b ** (-2 * i[None] / d)).sum(axis=1).min() for b in bs])
        top = float(bs[np.argmax(ys >= 0)])
        assert ys.max() >= 0  # argmax above is meaningful: some point passed
    return top


def test_su_min_base_equals_naive_transcription():
    for length, d in [(100, 8), (150, 32)]:
        assert bb.su_min_base(length, d) == naive_su(length, d)


def test_su_min_base_reproduces_the_rerun_and_the_printed_table():
    # Reviewer's independent rerun of Su's search: 4293.45 (L = 1024), 11587.4 (L = 2048).
    got = {L: bb.su_min_base(L) for L in (1024, 2048)}
    assert round(got[1024], 2) == 4293.45
    assert round(got[2048], 1) == 11587.4
    for L, b in got.items():
        assert feasible(b, L, 128)
        assert 0 <= b / bb.min_base(L) - 1 < 2e-5
    # printed to two digits, they are Su's table entries
    assert [float(f"{got[L]:.1e}") for L in (1024, 2048)] == [4.3e3, 1.2e4]
    assert not feasible(1.2e4, 2048, 128)  # ... and 1.2e4 fails: no grid search returns it


def test_grid_exact_check_agrees_with_brute_force():
    for L in (1024, 2048, 4096):
        assert bb.grid_min_base(L, exact=True) == bb.grid_min_base(L)
    assert bb.grid_min_base(2048) == 1.6e4 == bb.PUBLISHED_MIN_BASE[11][0]


def test_published_summary_classifies_rows():
    def row(L, base, paper, su, grid2):
        r2 = float(f"{base:.1e}")
        return {
            "L": L, "base": base, "base_m_le_L": base, "round2": r2, "grid2": grid2,
            "paper": paper, "paper_ok": paper >= base, "su": su, "su_ok": su == base,
        }  # fmt: skip

    rows = [row(1, 1234.0, 1300.0, 1200.0, 1300.0), row(2, 5678.0, 5700.0, 5700.0, 6000.0)]
    out = bb.published_summary(rows)
    assert out["su_round_down"] == [1] and out["su_round_up"] == [2]
    assert out["su_bad"] == [1, 2] and out["su_is_round2"] == [1, 2]
    assert out["paper_departs"] == [1] and out["grid_matches"] == [1]


def _independent_summary(top: int) -> None:
    """published_summary of the shipped table for L = 2^10 .. 2^top, against lists derived
    here from evidence that does not use the table's numbers as facts:

    * every base below b_T (1 - 1e-7) is infeasible (certify_infeasible, one chain over the
      rows; the table's b_T only says where to stop), and b_T itself is feasible
      (first_negative), so the minimum lies in [b_T (1 - 1e-7), b_T];
    * a published value is feasible or not by first_negative; an infeasible one is rounded
      down if it lies below b_T (1 - 1e-7), up if above b_T (then b_T, feasible, is below it);
    * the two-digit grid can return the paper's value only if that value is feasible and
      every grid point from the proven bound up to it fails.
    """
    ks = list(range(10, top + 1))
    rows = bb.min_base_table(ks)
    levels = [(r["L"], math.log(r["base"] * (1 - 1e-7))) for r in rows]
    reached = certify_infeasible(levels, 128)
    expected: dict[str, list[int]] = {
        key: []
        for key in (
            "su_is_round2",
            "su_bad",
            "su_round_down",
            "su_round_up",
            "paper_bad",
            "paper_departs",
            "grid_matches",
        )
    }
    for row, u_low in zip(rows, reached, strict=True):
        L, b_top = row["L"], row["base"]
        b_low = math.exp(u_low) * (1 - 1e-14)  # every base <= b_low is infeasible
        assert feasible(b_top, L, 128), L
        round2 = float(f"{b_low:.1e}")
        assert round2 == float(f"{b_top:.1e}")  # the minimum's two-digit rounding is known
        paper, su = bb.PUBLISHED_MIN_BASE[L.bit_length() - 1]
        if su == round2:
            expected["su_is_round2"].append(L)
        if not feasible(su, L, 128):
            expected["su_bad"].append(L)
            assert su < b_low or su > b_top, (L, su)
            expected["su_round_down" if su < b_low else "su_round_up"].append(L)
        paper_ok = feasible(paper, L, 128)
        if not paper_ok:
            expected["paper_bad"].append(L)
        if paper != round2:
            expected["paper_departs"].append(L)
            if paper_ok:
                grid = [c * 10.0**e for e in range(1, 12) for c in range(10, 100)]  # from 100 up
                between = [g for g in grid if b_low < g < paper]
                if not any(feasible(g, L, 128) for g in between):
                    expected["grid_matches"].append(L)
    summary = bb.published_summary(rows)
    for key, value in expected.items():
        assert summary[key] == value, (key, summary[key], value)


def test_published_values_classified_by_independent_evidence():
    """Rows L = 2^10 .. 2^17 (about 3 s of CPU): published_summary against lists derived here."""
    _independent_summary(17)


@pytest.mark.slow
def test_published_values_classified_by_independent_evidence_long_rows():
    """All rows, L = 2^10 .. 2^20: about 30 s of CPU (the certificate chain, then full scans)."""
    _independent_summary(20)


def test_base_is_feasible_and_window_walk():
    for base in (4000.0, 4293.44, 4293.44 * 1.001, 11587.3, 12000.0, 16000.0):
        for L in (1024, 2048):
            assert bb.base_is_feasible(base, L) == feasible(base, L, 128)
    b0 = bb.min_base(2048)
    top = bb.feasible_window_top(b0, 2048, rel_step=1e-4)
    assert feasible(top, 2048, 128) and not feasible(top * (1 + 1e-4), 2048, 128)
    assert top < 1.2e4
    with pytest.raises(ValueError, match="not feasible"):
        bb.feasible_window_top(1.2e4, 2048)


# ------------------------------------------------------------------------------------------
# float32: the minimum moves by ~1e-6 and the verdict at the exact minimum is a knife edge
# ------------------------------------------------------------------------------------------
def numpy_f32_min(inv: np.ndarray, length: int) -> float:
    m = np.arange(length, dtype=np.float32)
    return float(np.cos(np.multiply.outer(m, inv).astype(np.float32)).sum(axis=1).min())


def test_float32_min_base_passes_and_the_point_below_fails():
    for L in (1024, 2048, 4096):
        b = bb.float32_min_base(L)
        below = b - bb.min_base(L) * 1e-8
        rounded = lambda x: np.array(  # noqa: E731
            [x ** (-2.0 * i / 128) for i in range(64)], dtype=np.float32
        )
        assert numpy_f32_min(rounded(b), L) >= 0 > numpy_f32_min(rounded(below), L)
        assert abs(b / bb.min_base(L) - 1) < 2e-6


def test_float32_verdict_depends_on_the_theta_recipe():
    L, d = 2048, 128
    b0 = bb.min_base(L)
    m = torch.arange(L, dtype=torch.float32)
    hf = 1.0 / (b0 ** (torch.arange(0, d, 2).float() / d))  # Hugging Face's float32 recipe
    rounded = torch.tensor([b0 ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)
    score = lambda inv: float(torch.cos(torch.outer(m, inv)).sum(-1).min())  # noqa: E731
    assert score(hf) >= 0 > score(rounded.float())
    assert bb.float32_margin(np.arange(L), d, b0, inv_freq=hf.numpy()).min() >= 0
    assert bb.float32_margin(np.arange(L), d, b0).min() < 0


# ------------------------------------------------------------------------------------------
# the general form of the expected advantage
# ------------------------------------------------------------------------------------------
def test_symbolic_gap_is_the_trace_formula():
    import sympy as sp

    g = bb.symbolic_similarity_gap(4)
    R, S, mq, mk = g["R"], g["Sigma"], g["mu_q"], g["mu_k"]
    assert sp.simplify(g["delta"] - (R * S).trace() - (mq.T * R * (mq - mk))[0]) == 0
    wrong = (R * S).trace() + (mq.T * R * mq)[0]  # forgetting the key's mean must fail
    assert sp.simplify(g["delta"] - wrong) != 0


def test_symbolic_gap_matches_a_monte_carlo_of_the_definition():
    """rope_lib's symbolic delta_m (symbolic_similarity_gap, d = 4) evaluated at a full,
    correlated covariance, unequal means and the angles m theta_i, against the Monte Carlo mean
    of q^T R_m q - q^T R_m k (rotation matrix written here; k has a covariance of its own,
    which must not matter), within five standard errors; with zero means, delta_m is the
    weighted margin sum_i (Sigma_{2i,2i} + Sigma_{2i+1,2i+1}) cos(m theta_i) of chapter 7."""

    d, base, n = 4, 30.0, 400_000
    g = bb.symbolic_similarity_gap(d)
    rng = np.random.default_rng(3)
    a = rng.normal(size=(d, d))
    cov = a @ a.T / d  # a full, correlated covariance
    mu_q, mu_k = rng.normal(size=d), rng.normal(size=d)
    q = mu_q + rng.multivariate_normal(np.zeros(d), cov, size=n)
    k = mu_k + rng.normal(size=(n, d)) * 1.7
    moments = {g["Sigma"][i, j]: cov[i, j] for i in range(d) for j in range(d)}
    for m in (0, 5, 23):
        angles = {x: m * base ** (-2 * i / d) for i, x in enumerate(g["angles"])}

        def library(mean_q, mean_k, angles=angles):
            means = {g["mu_q"][i]: mean_q[i] for i in range(d)}
            means.update({g["mu_k"][i]: mean_k[i] for i in range(d)})
            return float(g["delta"].subs({**moments, **means, **angles}))

        r = rotation(m, d, base)
        samples = np.einsum("ni,ij,nj->n", q, r, q - k)
        # five standard errors of the mean, from the sample itself
        assert abs(samples.mean() - library(mu_q, mu_k)) <= 5 * samples.std(ddof=1) / np.sqrt(n)
        weighted = sum(
            (cov[2 * i, 2 * i] + cov[2 * i + 1, 2 * i + 1]) * np.cos(m * base ** (-2 * i / d))
            for i in range(d // 2)
        )
        assert library(np.zeros(d), np.zeros(d)) == pytest.approx(weighted, abs=1e-12)


def test_all_ones_mean_rescales_by_a_factor_that_can_be_negative():
    m = np.arange(300)
    exact = direct(m, 32, 500.0)
    for c, c2, sigma in [(0.8, 0.0, 1.3), (1.0, 3.0, 1.0), (0.5, 0.2, 0.4)]:
        got = bb.similarity_gap_expected(m, 32, 500.0, sigma=sigma, mean_q=c, mean_k=c2)
        np.testing.assert_allclose(got, (1 + c * (c - c2) / sigma**2) * exact, atol=1e-9)
    got = bb.similarity_gap_expected(m, 32, 500.0, mean_q=1.0, mean_k=3.0)
    assert np.all(np.sign(got[exact != 0]) == -np.sign(exact[exact != 0]))


def _pair_remainder(m: int, d: int, base: float, mu_q: np.ndarray, mu_k: np.ndarray) -> float:
    """mu_q^T R_m (mu_q - mu_k) with the rotation matrix written out here."""
    return float(mu_q @ rotation(m, d, base) @ (mu_q - mu_k))


@given(
    st.sampled_from([4, 8, 16]),
    st.floats(5.0, 1e4),
    st.integers(0, 2**32 - 1),
    st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_means_leave_no_remainder_exactly_when_each_pair_has_a_zero_query_mean_or_equal_means(
    d, base, seed, zero_query
):
    """Chapter 7: delta_m / (2 sigma^2) = B_m at every m < L (L >= d) if and only if, pair by
    pair, the query's mean vanishes or the key's mean equals it. Equal means are sufficient,
    not necessary (mu_q = 0 with any mu_k also works)."""
    rng = np.random.default_rng(seed)
    n = d // 2
    mu_q, mu_k = rng.normal(size=d), rng.normal(size=d)
    for i in range(n):  # make every pair satisfy the condition, one way or the other
        sl = slice(2 * i, 2 * i + 2)
        if zero_query[i]:
            mu_q[sl] = 0.0
        else:
            mu_k[sl] = mu_q[sl]
    m = np.arange(2 * d)
    exact = direct(m, d, base)
    got = bb.similarity_gap_expected(m, d, base, mean_q=mu_q, mean_k=mu_k)
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-9)
    assert max(abs(_pair_remainder(int(x), d, base, mu_q, mu_k)) for x in m) < 1e-9
    # break the condition in one pair: the remainder is non-zero at some m < d
    j = int(rng.integers(n))
    sl = slice(2 * j, 2 * j + 2)
    a_j, c_j = (rng.uniform(1, 2) * np.array([np.cos(t), np.sin(t)]) for t in rng.uniform(0, 7, 2))
    mu_q[sl], mu_k[sl] = a_j, a_j - c_j  # both non-zero in pair j
    assert max(abs(_pair_remainder(int(x), d, base, mu_q, mu_k)) for x in range(d)) > 1e-6


def test_unequal_means_can_leave_the_margin_exact_and_orthogonality_is_not_enough():
    d, base = 16, 100.0
    m = np.arange(61)
    exact = direct(m, d, base)
    mu_k = np.random.default_rng(7).normal(size=d)
    # mu_q = 0 and mu_k != 0: the means differ, and delta/(2 sigma^2) is still B_m
    zero_q = bb.similarity_gap_expected(m, d, base, mean_q=0.0, mean_k=mu_k)
    np.testing.assert_allclose(zero_q, exact, rtol=0, atol=1e-12)
    # mu_q perpendicular to mu_q - mu_k (the seed's remark): only m = 0 is spared
    mu_q, mu_k = np.eye(d)[0], np.eye(d)[0] - np.eye(d)[1]
    assert mu_q @ (mu_q - mu_k) == 0
    perp = bb.similarity_gap_expected(m, d, base, mean_q=mu_q, mean_k=mu_k) - exact
    assert abs(perp[0]) < 1e-12 and np.abs(perp).max() > 0.4
    np.testing.assert_allclose(perp, -np.sin(m) / 2, atol=1e-12)


def test_cos_and_sin_of_the_pairs_are_independent_on_d_distances():
    """The Vandermonde step of chapter 7: on m = 0 .. d-1 the d functions cos(m theta_i),
    sin(m theta_i) are linearly independent. The determinant is tiny (the slow pairs are
    nearly polynomial on so few distances), so it is computed at 150 and 200 digits and must
    agree, far from zero."""

    def det(d: int, base: float, dps: int):
        with mpmath.workdps(dps):
            th = [mpmath.mpf(base) ** (mpmath.mpf(-2 * i) / d) for i in range(d // 2)]
            rows = [
                [mpmath.cos(k * t) for t in th] + [mpmath.sin(k * t) for t in th] for k in range(d)
            ]
            return mpmath.det(mpmath.matrix(rows))

    for d, base in [(4, 10.0), (8, 1e4), (16, 100.0)]:
        low, high = det(d, base, 150), det(d, base, 200)
        with mpmath.workdps(200):
            assert abs(high) > mpmath.mpf(10) ** -120
            assert abs(low / high - 1) < mpmath.mpf(10) ** -20


def test_html_table():
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows: list[list[str]] = []

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])

        def handle_data(self, data):
            if self.rows:
                self.rows[-1].append(data)

    parser = Cells()
    parser.feed(bb.html_table(["a", "b"], [[1, "<b>no</b>"], ["x", 2.5]]))
    assert parser.rows == [["a", "b"], ["1", "no"], ["x", "2.5"]]
    with pytest.raises(ValueError, match="cells"):
        bb.html_table(["a", "b"], [[1]])


# ------------------------------------------------------------------------------------------
# frozen results, the cache file, budgets and size limits
# ------------------------------------------------------------------------------------------
def test_memoised_result_cannot_be_changed():
    import dataclasses

    r = bb.min_base_search(64, 8)
    base, gaps = r.base, r.gaps
    assert brute_horizon(base, 8, 64) is None  # feasible, by the direct sums written here
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.base = 12345.0
    with pytest.raises(AttributeError):
        r.gaps.append((1.0, 2.0))
    assert isinstance(r.gaps, tuple)
    assert bb.min_base(64, 8) == base
    assert bb.min_base_search(64, 8).gaps == gaps


#: A floor on the wall time of one sweep iteration or full scan: CPython with NumPy cannot do
#: one in under a microsecond (each makes several NumPy calls), so a recorded time below
#: 1e-6 * (n_steps + n_scans) was not measured on the computation it describes.
_SECONDS_FLOOR = 1e-6


def test_table_seconds_are_a_cold_measurement_even_when_the_memo_is_warm():
    """min_base_table times a fresh chain of sweeps: warming min_base's memo first must not
    turn the recorded seconds into the time of a memo look-up."""
    d = 16
    bb.min_base(512, d)  # memoises 4, 8, ..., 512 for d = 16
    rows = bb.min_base_table((8, 9), d, use_cache=False)
    again = bb.min_base_table((8, 9), d, use_cache=False)
    for row, other in zip(rows, again, strict=True):
        assert row["seconds"] >= _SECONDS_FLOOR * (row["n_steps"] + row["n_scans"])
        # a cold chain does the same work every time, whatever the memo held
        assert row["work"] == other["work"] > 0
        assert (row["n_steps"], row["n_scans"]) == (other["n_steps"], other["n_scans"])
    # and min_base_search keeps the cost of the computation that made a memoised result
    first = bb.min_base_search(512, d)
    assert bb.min_base_search(512, d).seconds == first.seconds
    assert first.seconds >= _SECONDS_FLOOR * (first.n_steps + first.n_scans)


def test_stored_table_seconds_are_real_measurements():
    """The seconds the chapter glues (the last row, cumulative over the chain) were measured on
    a cold computation: at least a microsecond per iteration, and the stored work is what a
    cold recomputation of the first rows does."""
    import json

    rows = json.loads(bb._CACHE.read_text())["rows"]
    assert sorted(map(int, rows)) == list(range(10, 21))
    for row in rows.values():
        assert row["work"] > 0
        assert row["seconds"] >= _SECONDS_FLOOR * (row["n_steps"] + row["n_scans"])
    ordered = [rows[str(k)] for k in range(10, 21)]
    assert all(a["seconds"] < b["seconds"] for a, b in zip(ordered[:-1], ordered[1:], strict=True))
    fresh = bb.min_base_table((10, 11), use_cache=False)
    for row in fresh:
        stored = rows[str(row["L"].bit_length() - 1)]
        assert (row["n_steps"], row["n_scans"], row["work"]) == (
            stored["n_steps"],
            stored["n_scans"],
            stored["work"],
        )
        assert row["base"] == pytest.approx(stored["base"], rel=1e-12)


def test_table_source_files_are_all_the_code_the_table_runs():
    """The cache key covers TABLE_SOURCE_FILES; computing a table (sweeps, m <= L sweeps, grid
    checks, horizons of published values) runs no other file of rope_lib. (It runs
    base_bound.py and _validate.py; frequencies.py, which defines theta_i for the package, is
    in the key as well, so that a change to the frequencies recomputes the table.)"""
    import sys
    from pathlib import Path

    package = Path(bb.__file__).parent
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.parent == package:
                seen.add(path.name)

    sys.setprofile(profile)
    try:
        bb.min_base_table((4, 5), 8, use_cache=False)
        bb.min_base_table((10,), 128, use_cache=False)
    finally:
        sys.setprofile(None)
    assert "base_bound.py" in seen and seen <= set(bb.TABLE_SOURCE_FILES)
    assert set(bb.TABLE_SOURCE_FILES) == {"base_bound.py", "frequencies.py", "_validate.py"}


@pytest.mark.parametrize("flag", ["no", "", 0, 1, None, 2.0])
def test_use_cache_must_be_a_bool_and_the_shipped_table_is_not_rewritten(flag):
    before = bb._CACHE.read_bytes()
    with pytest.raises(TypeError, match="use_cache"):
        bb.min_base_table((4,), 8, use_cache=flag)
    # Non-default calls read the cache at most; they never write it.
    bb.min_base_table((4, 5), 8, use_cache=True)
    bb.min_base_table((10,), 128, use_cache=True)
    bb.min_base_table((10, 11), 128, use_cache=False)
    assert bb._CACHE.read_bytes() == before


def test_limits_are_refused_quickly_by_name():
    import time

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"context_length must be an integer <= 4194304"):
        bb.min_base(10**12)
    with pytest.raises(ValueError, match="context_length"):
        bb.min_base_search(bb.MAX_CONTEXT_LENGTH + 1)
    with pytest.raises(ValueError, match=r"limit must be an integer <= 67108864"):
        bb.max_context(1e300, limit=10**12)
    with pytest.raises(ValueError, match=r"\bm\b must be integers of magnitude"):
        bb.similarity_margin([2**60], 8)
    with pytest.raises(ValueError, match="log2_lengths"):
        bb.min_base_table((22,), 8, use_cache=False)
    with pytest.raises(ValueError, match="levels"):
        bb.su_min_base(64, 8, levels=8)
    with pytest.raises(ValueError, match="digits"):
        bb.grid_min_base(64, 8, digits=16)
    with pytest.raises(ValueError, match="n_samples"):
        bb.similarity_gap_monte_carlo([1, 2], 8, n_samples=10**9)
    assert time.perf_counter() - t0 < 5


def test_max_context_limit_message_says_how_to_raise_it():
    with pytest.raises(ValueError, match="pass a larger limit"):
        bb.max_context(1e300, 8, limit=1000)


def test_min_base_budget_raises_instead_of_answering(monkeypatch):
    # d = 4 at L = 512 needs more than a thousand iterations (it exhausts the default budget).
    # Memoised lengths cost nothing, so start from an empty memo: otherwise the answer depends
    # on which tests ran before in the same process (mutmut runs them in another order).
    monkeypatch.setattr(bb, "_SWEEPS", {})
    with pytest.raises(ValueError, match=r"max_steps = 1000; pass a larger max_steps"):
        bb.min_base(512, 4, max_steps=1000)
    with pytest.raises(ValueError, match="max_steps"):
        bb.min_base_search(300, 6, max_steps=1)
    # A large enough budget gives the answer, checked by the direct sums written here.
    b = bb.min_base(300, 6, max_steps=10**5)
    assert brute_horizon(b, 6, 300) is None


def test_other_searches_have_budgets():
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.grid_min_base(1024, 8, max_steps=3)
    assert bb.grid_min_base(16, 8, max_steps=10**4) == bb.grid_min_base(16, 8)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.su_min_base(64, 8, levels=3, max_steps=50)
    with pytest.raises(ValueError, match="max_steps"):
        bb.float32_min_base(64, 8, rel_step=1e-9, max_steps=1000)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.feasible_window_top(200.0, 16, 8, max_steps=2)
    with pytest.raises(TypeError, match="max_steps"):
        bb.min_base(16, 8, max_steps=True)


def test_argument_checks_name_the_argument():
    with pytest.raises(ValueError, match="confidence"):
        bb.similarity_gap_monte_carlo([1], 8, confidence=1.0)
    with pytest.raises(TypeError, match="confidence"):
        bb.similarity_gap_monte_carlo([1], 8, confidence="0.9")
    with pytest.raises(TypeError, match="eps_scale"):
        bb.similarity_gap_monte_carlo([1], 8, eps_scale="a")
    with pytest.raises(ValueError, match="seed"):
        bb.similarity_gap_monte_carlo([1], 8, seed=-1)
    with pytest.raises(TypeError, match="mean_q"):
        bb.similarity_gap_expected([1], 8, mean_q=object())
    with pytest.raises(ValueError, match="mean_k"):
        bb.similarity_gap_expected([1], 8, mean_k=[1.0, 2.0])
    with pytest.raises(TypeError, match="exact"):
        bb.grid_min_base(16, 8, exact="no")
    with pytest.raises(TypeError, match="inv_freq"):
        bb.float32_min_base(16, 8, inv_freq=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="rows"):
        bb.published_summary(object())
    with pytest.raises(TypeError, match="header"):
        bb.html_table(object(), [])


def test_empty_distances_give_empty_results():
    est, half = bb.similarity_gap_monte_carlo([], 8)
    assert est.shape == half.shape == (0,)
    assert bb.similarity_gap_expected([], 8).shape == (0,)
    assert bb.similarity_margin([], 8).shape == (0,)


@pytest.mark.parametrize(("L", "d"), [(16, 8), (1024, 128), (4096, 64)])
def test_window_above_the_certificate_is_unbounded(L: int, d: int) -> None:
    # Far above min_base every base is feasible: the walk says so instead of walking on.
    # Independent check: direct cosine sums at bases spread over many decades above.
    base = 10.0 ** (np.log10(bb.min_base(L, d)) + 3)
    assert bb.feasible_window_top(base, L, d) == math.inf
    m = np.arange(L)
    for b in base * np.logspace(0, 12, 25):
        th = b ** (-2.0 * np.arange(d // 2) / d)
        assert np.cos(np.outer(m, th)).sum(axis=1).min() >= 0


def test_window_top_is_finite_where_an_infeasible_base_lies_above() -> None:
    # L = 2048, d = 128: the minimum base opens a narrow window (chapter 7).
    base = bb.min_base(2048)
    top = bb.feasible_window_top(base, 2048)
    assert np.isfinite(top) and top > base
    assert not bb.base_is_feasible(top * (1 + 1e-4), 2048)


# ----------------------------------------------------------------- fuzz report regressions
def test_huge_python_ints_are_refused_by_name():
    # item 1
    with pytest.raises(ValueError, match="rel_step"):
        bb.feasible_window_top(2000.0, 64, 16, rel_step=10**400)
    with pytest.raises(ValueError, match="start"):
        bb.grid_min_base(64, 8, start=10**400)
    with pytest.raises(ValueError, match="base"):
        bb.similarity_margin([1], 8, base=10**400)


@pytest.mark.parametrize("sigma", [1e300, 1e-300, 10**400])
def test_sigma_beyond_float64_squares_is_refused(sigma):
    # item 3: 2 sigma**2 must be a float64, else ValueError naming sigma (not OverflowError)
    with pytest.raises(ValueError, match="sigma"):
        bb.similarity_gap_expected([0, 3, 100], 8, sigma=sigma)
    with pytest.raises(ValueError, match="sigma"):
        bb.similarity_gap_monte_carlo([0, 3, 100], 8, sigma=sigma, n_samples=16)


def test_sigma_at_the_edges_of_its_range_gives_finite_results():
    # independent route: with equal means the closed form is B_m whatever sigma
    for sigma in (1e-150, 1e150):
        got = bb.similarity_gap_expected([0, 3], 8, sigma=sigma)
        np.testing.assert_allclose(got, bb.similarity_margin([0, 3], 8), rtol=1e-12)


@pytest.mark.parametrize("name", ["mean_q", "mean_k"])
def test_overflowing_means_are_refused(name):
    # items 15, 16: no nan or inf result, no infinite half-width
    if name == "mean_q":
        with pytest.raises(ValueError, match=name):
            bb.similarity_gap_expected([0, 3], 8, **{name: 1e300})
    else:  # mu_q = 0: the closed form is B_m exactly, a finite correct result
        got = bb.similarity_gap_expected([0, 3], 8, **{name: 1e300})
        np.testing.assert_allclose(got, bb.similarity_margin([0, 3], 8), rtol=1e-12)
    with pytest.raises(ValueError, match=name):
        bb.similarity_gap_monte_carlo([0, 3], 8, n_samples=16, **{name: 1e300})


def test_overflowing_eps_scale_is_refused():
    # item 16
    with pytest.raises(ValueError, match="eps_scale"):
        bb.similarity_gap_monte_carlo([0, 3], 8, n_samples=16, eps_scale=1e300)


def test_monte_carlo_gap_cap_bounds_the_whole_call():
    # item 9: the documented max of n_samples bounds all the call's arrays together
    with pytest.raises(ValueError, match="n_samples"):
        bb.similarity_gap_monte_carlo([0, 3, 100], 8, n_samples=2**27 // 8)
    ok = 2**27 // (8 * (8 + 3))
    with pytest.raises(ValueError, match="n_samples"):
        bb.similarity_gap_monte_carlo([0, 3, 100], 8, n_samples=ok + 1)


@pytest.mark.parametrize("length", [1, 2])
def test_su_min_base_needs_three_distances(length):
    # item 10: for L <= 2 every base works, and the grid search would return a "base" < 1
    with pytest.raises(ValueError, match="context_length"):
        bb.su_min_base(length, 16, levels=3)


def test_su_min_base_large_d_does_not_allocate_a_huge_table():
    # item 8: (bases x witnesses x d/2) in blocks; the result passes the direct sums here.
    import tracemalloc

    tracemalloc.start()
    got = bb.su_min_base(8, d=4096, levels=2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**28
    assert brute_horizon(got, 4096, 8) is None


@pytest.mark.parametrize(
    "bad", [np.full(4, np.nan, np.float32), np.full(4, np.inf, np.float32), -np.ones(4, np.float32)]
)
def test_float32_margin_refuses_bad_inv_freq(bad):
    # item 13
    with pytest.raises(ValueError, match="inv_freq"):
        bb.float32_margin([0, 3], 8, inv_freq=bad)
    with pytest.raises(ValueError, match="inv_freq"):
        bb.float32_margin([0, 3], 8, inv_freq=np.ones(3, np.float32))


def test_float32_min_base_refuses_a_nan_recipe():
    # item 14: not the misleading "widen rel_span"
    with pytest.raises(ValueError, match="inv_freq"):
        bb.float32_min_base(64, 16, inv_freq=lambda b: np.full(8, np.nan, np.float32))


def test_budgets_count_work_not_only_iterations():
    # item 6: one full scan of all m < L costs about L / 1024 steps, so a budget that would
    # allow many iterations stops a search whose scans are long, quickly.
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"max_steps = 3000; pass a larger max_steps"):
        bb.min_base(2**21 + 1, 16, max_steps=3000)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.grid_min_base(2**21, 16, max_steps=3000)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.feasible_window_top(1706.12, 64, d=65536, rel_step=1e-3, max_steps=10**3)
    assert time.perf_counter() - start < 20.0
    assert bb._work(2**22, 16) == 4096 and bb._work(1, 16) == 1


def test_max_context_bounds_limit_times_d():
    # item 7: a scan of limit x d/2 terms is bounded (2**32) before any work
    with pytest.raises(ValueError, match="limit"):
        bb.max_context(4.3e3, 65536, limit=2**26)
    # the default limit is the largest the bound allows, so a plain call is not refused
    assert bb.max_context(4.3e3, 65536) >= 2
    assert bb.max_context(1e4, 128) == bb.max_context(1e4, 128, limit=2**20)


def test_feasible_window_top_inf_docstring_and_value():
    # item 12: inf is documented and returned when the certificate holds
    assert "math.inf" in bb.feasible_window_top.__doc__
    base = 10.0 ** (np.log10(bb.min_base(64, 16)) + 3)
    assert bb.feasible_window_top(base, 64, 16) == math.inf


@pytest.mark.parametrize("d", [256, 512, 4096])
def test_max_context_default_limit_works_for_large_d(d: int) -> None:
    # The default limit adapts to the work bound, so a plain call never refuses for d > 128;
    # the horizon is checked against direct cosine sums up to one past it.
    horizon = bb.max_context(1e4, d)
    th = 1e4 ** (-2.0 * np.arange(d // 2) / d)
    sums = np.cos(np.outer(np.arange(horizon + 1), th)).sum(axis=1)
    assert sums[:horizon].min() >= 0 > sums[horizon]


# ------------------------------------------------------------------------------------------
# chapter 7 after the independent review: Men et al.'s Appendix E, the grid and its windows
# ------------------------------------------------------------------------------------------
def _appendix_e_horizon(base: float, limit: int) -> int:
    """First m < limit with a negative sum in the check that the conference version of Men
    et al. prints as Appendix E (as quoted by ri.k117.org): float32 PyTorch,
    ``torch.outer(torch.arange(0, L), base ** (-2 * d / dim)).cos().sum(dim=1)`` with
    ``d = torch.arange(0, dim / 2, 1)``; here in chunks of distances (``limit`` if none)."""
    torch = pytest.importorskip("torch")
    theta = base ** (-2 * torch.arange(0, 128 / 2, 1) / 128)
    assert theta.dtype == torch.float32
    for start in range(0, limit, 1 << 15):
        pos = torch.arange(start, min(limit, start + (1 << 15)))
        neg = torch.nonzero(torch.outer(pos, theta).cos().sum(dim=1) < 0)
        if len(neg):
            return start + int(neg[0, 0])
    return limit


_APPENDIX_E_LIST = [
    (i + j / 10) * 10**x for x in range(3, 10) for i in range(1, 10) for j in range(10)
]


def test_appendix_e_check_in_chunks_equals_the_quoted_single_table():
    """The chunks change no sum: the quoted code builds one (L x 64) table; for L = 2^13 the
    verdict of every listed base up to the answer is the same."""
    torch = pytest.importorskip("torch")
    L = 1 << 13
    for base in [b for b in _APPENDIX_E_LIST if b <= 8.4e4]:
        realdim = 128 / 2
        d = torch.arange(0, realdim, 1)
        theta = base ** (-2 * d / 128)
        ans = torch.outer(torch.arange(0, L), theta).cos().sum(dim=1) / realdim
        quoted = True not in (ans < 0)
        assert quoted == (_appendix_e_horizon(base, L) >= L)


@pytest.mark.slow
def test_appendix_e_search_gives_the_grid_column_and_four_printed_values():
    """Chapter 7, Men et al.: rerun for L = 2^10 .. 2^20, the search of Appendix E (first listed
    base whose float32 sums are >= 0 for every m < L) returns the two-digit grid column of the
    table (rope_lib's exact check) at every row, and the printed value of the paper only at
    L = 2^10, 2^11, 2^13, 2^16; its float32 check gives every printed value its exact horizon,
    so it rejects the same seven. About 40 s (float32 horizons up to 2^20)."""
    rows = bb.min_base_table()
    top = rows[-1]["L"] + 1
    horizon: dict[float, int] = {}
    found = {}
    for base in _APPENDIX_E_LIST:
        horizon[base] = _appendix_e_horizon(base, top)
        for r in rows:
            if r["L"] not in found and horizon[base] >= r["L"]:
                found[r["L"]] = base
        if len(found) == len(rows):
            break
    assert [found[r["L"]] for r in rows] == [r["grid2"] for r in rows]
    paper = {1 << k: v[0] for k, v in bb.PUBLISHED_MIN_BASE.items()}
    assert [L for L in found if found[L] == paper[L]] == [1024, 2048, 8192, 65536]
    for value in paper.values():
        exact = bb.max_context(value, limit=1 << 23)
        assert _appendix_e_horizon(value, exact + 1) == exact
    assert sum(bb.max_context(v, limit=1 << 23) < L for L, v in paper.items()) == 7


def test_grid_finds_a_window_narrower_than_its_spacing():
    """Chapter 7: a two-digit grid *can* miss a window narrower than its spacing, but it finds
    one when a grid point falls inside. At L = 1024 the window around 4300 lies inside
    (4290, 4340), narrower than the spacing 100; at L = 8192 the one around 84000 lies inside
    (83700, 84500), narrower than 1000. Direct float64 sums (``feasible``), not the module."""
    for L, lo, point, hi, spacing in [
        (1024, 4290.0, 4300.0, 4340.0, 100.0),
        (8192, 83700.0, 84000.0, 84500.0, 1000.0),
    ]:
        assert feasible(point, L, 128)
        assert not feasible(lo, L, 128) and not feasible(hi, L, 128)
        assert hi - lo < spacing
        assert bb.grid_min_base(L) == point


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
    h = bb._certified_step(
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
    h = bb._certified_step(b, db, np.ones(3), _StubTerms(0.0, 2.0), 0.25)
    assert h.tolist() == [0.0, 0.0, 0.0]
    assert [_mp_step(bi, di, 0.0, 2.0, 0.25) for bi, di in zip(b, db, strict=True)] == [
        0.0,
        0.0,
        0.0,
    ]
