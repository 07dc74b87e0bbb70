"""Tests of rope_lib.base_bound: B_m, the horizon, the certified minimum base, the Monte Carlo.

The helpers below (independent of rope_lib) serve ``tests/test_base_table.py``,
``tests/test_certified_sweep.py`` and ``tests/test_figures_base_bound.py`` too.

Independent routes: mpmath sums, direct float64 cosine sums (brute force written here, not the
module's), an explicit block-diagonal rotation matrix, finite differences, and an
infeasibility certificate checked here (``certify_infeasible``: a bound on B_m'' derived here,
direct sums with their rounding error) that proves the shipped table's minima without reading
them as facts.
"""

from __future__ import annotations

import math
import time
import warnings

import mpmath
import numpy as np
import pytest
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


# ------------------------------------------------------------------------------------------
# expectation, Monte Carlo
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


@pytest.mark.parametrize("rel_step", [1e-300, 1e-17, 1.1e-16])
def test_window_walk_refuses_a_step_that_cannot_move_a_float(rel_step: float) -> None:
    # 1 + rel_step rounds to 1 for these, so b * (1 + rel_step) == b: a walk that stands still
    # would only run out of budget (found by test_api's random values)
    assert 1.0 + rel_step == 1.0 and 4096.0 * (1.0 + rel_step) == 4096.0
    with pytest.raises(ValueError, match="rel_step"):
        bb.feasible_window_top(4096.0, 1024, 128, rel_step=rel_step)
    # the smallest step that moves every float is accepted: 1 + 2**-52 is the next float
    top = bb.feasible_window_top(2.0**50, 1024, 128, rel_step=2.0**-52, max_steps=10**5)
    assert top == math.inf


def test_window_top_is_finite_where_an_infeasible_base_lies_above() -> None:
    # L = 2048, d = 128: the minimum base opens a narrow window (chapter 7).
    base = bb.min_base(2048)
    top = bb.feasible_window_top(base, 2048)
    assert np.isfinite(top) and top > base
    assert not bb.base_is_feasible(top * (1 + 1e-4), 2048)


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
# issue 22 (mutation testing): limits, defaults and evidence that no earlier test read
# ------------------------------------------------------------------------------------------
def test_size_limits_are_named_with_their_constant_and_value():
    """Each refusal of a too-large argument names the argument, the largest accepted value and
    the module constant that sets it (which a reader can look up and quote)."""
    cases = [
        (lambda: bb.base_is_feasible(1e4, 2**22 + 1), "context_length", 2**22, "2**22"),
        (lambda: bb.min_base(1, max_steps=10**8 + 1), "max_steps", 10**8, "10**8"),
        (lambda: bb.max_context(10.0, 8, limit=2**26 + 1), "limit", 2**26, "2**26"),
    ]
    constants = {"context_length": "MAX_CONTEXT_LENGTH", "max_steps": "MAX_STEPS"}
    for call, name, largest, written in cases:
        constant = constants.get(name, "MAX_HORIZON_LIMIT")
        assert getattr(bb, constant) == largest
        with pytest.raises(ValueError) as err:
            call()
        assert f"{name} must be an integer <= {largest}" in str(err.value)
        assert f"rope_lib.base_bound.{constant} = {written}" in str(err.value)


def test_smallest_accepted_budget_and_limit():
    # max_steps = 1 is a budget (L <= 2 costs nothing: the infimum 1.0 is returned)
    assert bb.min_base(1, 8, max_steps=1) == 1.0
    # limit >= 2: limit = 1 is refused by name; limit = 2 is accepted and, since B_0 = d/2
    # and B_1 > 0 for every base, always ends in "the horizon exceeds limit"; for d = 2
    # (B_m = cos m) limit = 3 finds the horizon 2 (cos 2 < 0)
    with pytest.raises(ValueError, match="limit must be an integer >= 2"):
        bb.max_context(10.0, 2, limit=1)
    with pytest.raises(ValueError, match="every m < limit = 2 "):
        bb.max_context(10.0, 2, limit=2)
    assert math.cos(2) < 0 < math.cos(1)
    assert bb.max_context(10.0, 2, limit=3) == 2


def test_max_context_term_bound_names_the_largest_limit_for_d():
    # d = 130: limit * d/2 = 2**26 * 65 > 2**32 terms, so this limit is refused before any
    # work, and the message gives the numbers and the largest limit for this d
    d, limit = 130, 2**26
    assert limit * (d // 2) > 2**32
    with pytest.raises(ValueError) as err:
        bb.max_context(10.0, d, limit=limit)
    assert f"limit * d/2 = {limit} * {d // 2} terms" in str(err.value)
    assert f"pass a smaller limit (at most {2**32 // (d // 2)} for d = {d})" in str(err.value)


def test_default_head_dimension_is_128():
    # the documented defaults d = 128 of max_context and min_base_search
    assert bb.max_context(1e4) == brute_horizon(1e4, 128, 4000) == 1707
    assert bb.min_base_search(3).d == 128


def _b2_root(d: int) -> float:
    """The base where B_2 = sum_i cos(2 b^(-2i/d)) crosses zero: bisection in 50-digit
    mpmath (B_2 increases with b, from (d/2) cos 2 < 0 at b = 1)."""
    with mpmath.workdps(50):

        def b2(b):
            return mpmath.fsum(mpmath.cos(2 * b ** (mpmath.mpf(-2 * i) / d)) for i in range(d // 2))

        lo, hi = mpmath.mpf(1), mpmath.mpf(100)
        assert b2(lo) < 0 < b2(hi)
        for _ in range(120):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if b2(mid) >= 0 else (mid, hi)
        return float(hi)


@pytest.mark.parametrize("d", [16, 128])
def test_min_base_for_three_distances_is_the_zero_of_b2(monkeypatch, d):
    """For L = 3 the only condition is B_2 >= 0 (B_0 = d/2, B_1 > 0), and B_2 increases with
    the base, so the minimum base is the zero of B_2: below 2 for these d. A fresh memo, so
    that the sweep runs from b = 1 whatever ran before."""
    monkeypatch.setattr(bb, "_SWEEPS", {})
    root = _b2_root(d)
    assert root < 2.0
    result = bb.min_base_search(3, d) if d != 128 else bb.min_base_search(3)
    assert result.base == pytest.approx(root, rel=1e-8)
    assert result.start == 1.0


@pytest.mark.parametrize(("length", "d"), [(1, 8), (2, 8), (2, 2), (1, 2)])
def test_at_most_two_distances_give_the_infimum(length, d):
    # L <= 2: every base works (B_0 = d/2, B_1 > 0), also for d = 2; the infimum 1.0 is
    # returned with the problem it answers and the start of a fresh chain
    r = bb.min_base_search(length, d)
    assert (r.base, r.context_length, r.d, r.start) == (1.0, length, d, 1.0)
    assert bb.base_is_feasible(1.5, length, d)


def test_feasibility_at_three_distances_is_the_sign_of_b2():
    # closed forms: d = 2, B_2 = cos 2 < 0 at every base; d = 4, B_2 = cos 2 + cos(2/sqrt(b))
    assert not bb.base_is_feasible(10.0, 3, 2)
    assert math.cos(2) + math.cos(2 / math.sqrt(2.0)) < 0 < math.cos(2) + math.cos(1.0)
    assert not bb.base_is_feasible(2.0, 3, 4)
    assert bb.base_is_feasible(4.0, 3, 4)


def test_chain_goes_through_the_powers_of_two_and_its_evidence_adds_up(monkeypatch):
    """min_base_search(200, 8) from an empty memo computes 4, 8, ..., 128 first (the
    documented chain) and each result carries the evidence of the chain so far: steps, gaps
    and budget only grow (the first sweep must step: b = 1 is infeasible, B_2 = (d/2) cos 2
    < 0), every sweep ends with a full scan, min_margin is min_m B_m at the
    base (direct sums here), seconds is CPU time spent inside the call, and work is the
    budget used: the same search succeeds with max_steps = work and not with one step less."""
    monkeypatch.setattr(bb, "_SWEEPS", {})
    t0 = time.process_time()
    last = bb.min_base_search(200, 8)
    elapsed = time.process_time() - t0
    chain = bb._SWEEPS[8]
    assert sorted(chain) == [4, 8, 16, 32, 64, 128, 200]
    assert chain[4].n_steps >= 1
    prev = None
    for length in sorted(chain):
        r = chain[length]
        assert (r.context_length, r.d, r.start) == (length, 8, 1.0)
        assert r.min_margin == pytest.approx(direct(np.arange(length), 8, r.base).min(), abs=1e-13)
        assert all(0 < hi / lo - 1 <= 1.1e-9 for lo, hi in r.gaps)
        if prev is not None:
            assert r.n_steps >= prev.n_steps and r.n_scans > prev.n_scans
            assert r.work > prev.work and r.seconds >= prev.seconds
            assert r.gaps[: len(prev.gaps)] == prev.gaps
        prev = r
    assert 0 < last.seconds <= elapsed
    assert last.n_scans >= len(chain) and last.gaps
    monkeypatch.setattr(bb, "_SWEEPS", {})
    assert bb.min_base_search(200, 8, max_steps=last.work).base == last.base
    monkeypatch.setattr(bb, "_SWEEPS", {})
    with pytest.raises(ValueError, match="max_steps"):
        bb.min_base_search(200, 8, max_steps=last.work - 1)


def test_a_given_memo_is_filled_and_the_module_memo_left_alone(monkeypatch):
    # rope_lib.base_table.min_base_table passes a fresh memo so that its rows are computed
    # (and timed) from scratch: the whole chain goes there, none into the module's memo
    monkeypatch.setattr(bb, "_SWEEPS", {})
    memo: dict = {}
    r = bb._search_checked(100, 8, [10**5], 10**5, memo)
    assert sorted(memo) == [4, 8, 16, 32, 64, 100] and memo[100] is r
    assert bb._SWEEPS.get(8, {}) == {}


def test_sweep_starts_from_the_largest_shorter_length_computed(monkeypatch):
    # after L = 100, the sweep for 101 starts at the base for 100; that base is already
    # feasible for 101 (direct sums here), so a handful of steps of budget suffice
    monkeypatch.setattr(bb, "_SWEEPS", {})
    b100 = bb.min_base(100, 8)
    assert feasible(b100, 101, 8)
    assert bb.min_base(101, 8, max_steps=5) == b100


def test_min_base_budget_error_names_the_search(monkeypatch):
    monkeypatch.setattr(bb, "_SWEEPS", {})  # nothing memoised: the sweep must run
    with pytest.raises(ValueError) as err:
        bb.min_base_search(300, 6, max_steps=1)
    text = str(err.value)
    assert "min_base for context_length = 300, d = 6" in text
    assert "max_steps = 1;" in text and f"(at most {10**8})" in text


# the window walk
def certificate(base: float, length: int, d: int) -> float:
    """The bound of feasible_window_top's docstring, computed here: pairs with
    (L-1) theta_i <= pi/2 count cos((L-1) theta_i), every other pair -1. When it is >= 0,
    every base from ``base`` up is feasible."""
    angles = (length - 1) * base ** (-2.0 * np.arange(d // 2) / d)
    slow = angles <= math.pi / 2
    return float(np.cos(angles[slow]).sum()) - float(np.count_nonzero(~slow))


def brute_walk(base: float, length: int, d: int, rel_step: float) -> tuple[float, int]:
    """The walk written here: the last feasible base b (1 + s)^k before the first infeasible
    one, and k (direct sums, mpmath near zero)."""
    top, k = base, 0
    while feasible(top * (1.0 + rel_step), length, d):
        top, k = top * (1.0 + rel_step), k + 1
        assert k < 10_000
    return top, k


@pytest.mark.parametrize("rel_step", [0.0, -0.1, 1.0, 1.5])
def test_window_walk_rel_step_lies_in_the_open_unit_interval(rel_step):
    with pytest.raises(ValueError) as err:
        bb.feasible_window_top(4096.0, 1024, 128, rel_step=rel_step)
    assert "rel_step must be a finite real number in (0.0, 1.0)" in str(err.value)


def test_walk_answers_inf_at_once_where_the_certificate_holds():
    """L = 1000, d = 8, at the base where pair 1 has (L-1) theta_1 just below pi/2: the
    certificate holds (pair 0 is fast, pairs 2 and 3 are near 1), so the walk answers inf
    without visiting another base. Checking b costs 1 step for the visit, 1 for the 1000 x 4
    terms of its scan and 1 for the certificate's 4 terms, far below a budget of 20."""
    length, d = 1000, 8
    base = ((length - 1) / (math.pi / 2 * (1 - 1e-6))) ** 4
    angle_1 = (length - 1) * base**-0.25
    assert math.pi / 3 < angle_1 < math.pi / 2 < length * base**-0.25
    assert certificate(base, length, d) > 0.5
    m = np.arange(length)
    for b in base * np.logspace(0, 12, 25):  # and indeed feasible from b up
        assert direct(m, d, b).min() >= 0
    assert bb.feasible_window_top(base, length, d, max_steps=20) == math.inf


def test_walk_without_the_certificate_visits_the_next_base():
    """L = 16, d = 8, b = 6315: feasible, but the certificate fails (it would hold for
    L - 1 = 15 distances), so the walk must check b (1 + s): with a budget of 3 steps (the
    visit of b, its scan, the certificate) it runs out and says so, after 0 steps."""
    length, d, base = 16, 8, 6315.0
    assert feasible(base, length, d)
    assert certificate(base, length, d) < 0 <= certificate(base, length - 1, d)
    with pytest.raises(ValueError) as err:
        bb.feasible_window_top(base, length, d, max_steps=3)
    assert "feasible_window_top (still feasible after 0 relative steps of 0.0001)" in str(err.value)
    assert "max_steps = 3;" in str(err.value)


def test_walk_does_not_count_a_wide_angle_as_slow():
    """L = 32, d = 8, b = 4000: pair 1 has (L-1) theta_1 = 3.9 > pi/2, so its term can be -1
    at bases above (cos falls to -1 at pi on the way); the walk must not answer inf, and the
    window indeed ends: it returns the top found by the walk written here."""
    length, d, base = 32, 8, 4000.0
    assert math.pi / 2 < (length - 1) * base**-0.25 < 2 * math.pi
    assert feasible(base, length, d) and certificate(base, length, d) < 0
    top, k = brute_walk(base, length, d, 1e-3)
    assert 0 < k and bb.feasible_window_top(base, length, d, rel_step=1e-3) == top


def test_walk_budget_counts_each_visit_and_each_scan(monkeypatch):
    """The walk from min_base(2048) (d = 128) with s = 1e-4 takes k feasible steps (the walk
    written here). By the documented accounting each step costs one step for the visit plus
    2048 x 64 / 2**16 = 2 for the scan of the new base, so 3k - 1 steps cannot finish it;
    counting the certificate's terms as one more step and the first and last checks, 4k + 12
    suffice. The budget error says how far the walk got: a base still feasible."""
    length, d, s = 2048, 128, 1e-4
    base = bb.min_base(length, d)
    top, k = brute_walk(base, length, d, s)
    assert k >= 20
    assert bb.feasible_window_top(base, length, d, rel_step=s, max_steps=4 * k + 12) == top
    with pytest.raises(ValueError) as err:
        bb.feasible_window_top(base, length, d, rel_step=s, max_steps=3 * k - 1)
    text = str(err.value)
    assert f"max_steps = {3 * k - 1};" in text and f"(at most {10**8})" in text
    walked = int(text.split("still feasible after ")[1].split(" relative steps")[0])
    assert (3 * k - 1 - 8) // 4 <= walked < k
    reached = base
    for _ in range(walked):
        reached *= 1.0 + s
    assert feasible(reached, length, d)


def test_walk_budget_counts_the_scan_of_the_starting_base():
    # L = 2**16, d = 128: checking the starting base evaluates 2**16 x 64 terms, 64 steps,
    # beyond a budget of 10, although the certificate holds there (b = 1e30)
    length, d = 2**16, 128
    assert certificate(1e30, length, d) > 0
    with pytest.raises(ValueError) as err:
        bb.feasible_window_top(1e30, length, d, max_steps=10)
    assert "after 0 relative steps" in str(err.value) and "max_steps = 10;" in str(err.value)


def test_walk_refuses_to_pass_1e300():
    # d = 4: the certificate is cos((L-1) b^(-1/2)) - 1 <= 0 at every base (never above the
    # round-off margin it must clear), and for L = 3 every base above 3.1 is feasible
    # (B_2 = cos 2 + cos(2/sqrt(b))), so the walk goes on until the next base would pass
    # 1e300, and says so
    assert certificate(1e299, 3, 4) <= 0 <= math.cos(2) + math.cos(2 / math.sqrt(3.1))
    with pytest.raises(ValueError, match="to 1e300 is feasible"):
        bb.feasible_window_top(1e299, 3, 4, rel_step=0.5)


# the closed form and the Monte Carlo: sizes, shapes, defaults, the estimator itself
def test_gap_tables_are_refused_by_their_size(monkeypatch):
    """With MAX_ELEMENTS lowered, each table is refused by its own count: len(m) x d/2
    rotations or phases, 8 x n_samples x (d + len(m)) working numbers; the message says
    which table, its size, and (Monte Carlo) what to make smaller."""
    from rope_lib import _validate

    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 1000)
    with pytest.raises(ValueError) as err:
        bb.similarity_gap_expected(np.arange(200), 16)
    assert "the table of rotations, len(m) x d/2 would have 1600 elements" in str(err.value)
    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 20000)
    with pytest.raises(ValueError) as err:
        bb.similarity_gap_monte_carlo(np.arange(3), 8, n_samples=1000)
    text = str(err.value)
    assert "8 x 1000 x 11 numbers: draws, pairs, table of scores) would have 88000" in text
    assert "pass a smaller n_samples" in text
    # 8 x 2 x (64 + 1000) = 17024 working numbers pass; 1000 x 32 = 32000 phases do not
    with pytest.raises(ValueError) as err:
        bb.similarity_gap_monte_carlo(np.arange(1000), 64, n_samples=2)
    assert "the table of phases, len(m) x d/2 would have 32000 elements" in str(err.value)


def test_closed_form_of_one_distance_is_a_float64():
    # documented: numpy.float64 for a single m, an array shaped like m otherwise
    d, base, mu_q, mu_k = 8, 50.0, 0.3, -0.2
    one = bb.similarity_gap_expected(3, d, base, mean_q=mu_q, mean_k=mu_k)
    mu = np.full(d, mu_q)
    expected = mp_margin(3, d, base) + mu @ rotation(3, d, base) @ (mu - mu_k) / 2
    assert isinstance(one, np.float64) and one == pytest.approx(expected, abs=1e-12)
    many = bb.similarity_gap_expected([3], d, base, mean_q=mu_q, mean_k=mu_k)
    assert isinstance(many, np.ndarray) and many.shape == (1,) and many[0] == one


def test_overflow_is_refused_without_a_numpy_warning():
    # the refusal is the ValueError naming the means, not a RuntimeWarning first
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="mean_q and mean_k"):
            bb.similarity_gap_expected([0, 3], 8, mean_q=1e300)
        with pytest.raises(ValueError, match="mean_q, mean_k and eps_scale"):
            bb.similarity_gap_monte_carlo([0, 3], 8, n_samples=16, mean_q=1e300)
        # every score is finite (|q|^2 / 2 ~ 0.64e308 for d = 2) but their mean overflows
        with pytest.raises(ValueError, match="mean_q, mean_k and eps_scale"):
            bb.similarity_gap_monte_carlo([0], 2, n_samples=16, mean_q=0.8e154)


def mc_by_rotation_matrices(m, d, base, n, sigma, mu_q, mu_k, eps, confidence, seed):
    """The estimator of similarity_gap_monte_carlo's docstring, written here with rotation
    matrices: the seed's draws of q, k and epsilon (in that order), the mean of
    (q^T R_m k* - q^T R_m k) / (2 sigma^2) and z_{(1+c)/2} s / sqrt(N), z from mpmath."""
    rng = np.random.default_rng(seed)
    q = mu_q + sigma * rng.standard_normal((n, d))
    k = mu_k + sigma * rng.standard_normal((n, d))
    k_star = q + eps * rng.standard_normal((n, d))
    z = math.sqrt(2) * float(mpmath.erfinv(confidence))
    est, half = [], []
    for x in np.atleast_1d(m):
        r = rotation(int(x), d, base)
        s = (np.einsum("ni,ij,nj->n", q, r, k_star) - np.einsum("ni,ij,nj->n", q, r, k)) / (
            2 * sigma**2
        )
        est.append(s.mean())
        half.append(z * s.std(ddof=1) / math.sqrt(n))
    return np.array(est), np.array(half)


def test_monte_carlo_is_the_documented_estimator_of_its_draws():
    # the defaults (base 1e4, 20000 samples, sigma 1, zero means, eps 0, 95 %, seed 0)
    d, m = 4, [0, 1, 5]
    got = bb.similarity_gap_monte_carlo(m, d)
    want = mc_by_rotation_matrices(m, d, 1e4, 20000, 1.0, 0.0, 0.0, 0.0, 0.95, 0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # every keyword away from its default, and a single distance
    rng = np.random.default_rng(4)
    mu_q, mu_k = rng.normal(size=6), rng.normal(size=6)
    kw = dict(sigma=0.7, mean_q=mu_q, mean_k=mu_k, eps_scale=0.3, confidence=0.8, seed=5)
    for m in ([0, 2, 7], 4):
        got = bb.similarity_gap_monte_carlo(m, 6, 50.0, n_samples=300, **kw)
        assert got[0].shape == got[1].shape == np.atleast_1d(m).shape
        want = mc_by_rotation_matrices(m, 6, 50.0, 300, 0.7, mu_q, mu_k, 0.3, 0.8, 5)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_monte_carlo_needs_two_samples():
    # a half-width needs the sample standard deviation: n_samples >= 2, and 2 is enough
    with pytest.raises(ValueError, match="n_samples must be an integer >= 2"):
        bb.similarity_gap_monte_carlo([0, 3], 8, n_samples=1)
    got = bb.similarity_gap_monte_carlo([0, 3], 8, 10.0, n_samples=2, eps_scale=1.0, seed=9)
    want = mc_by_rotation_matrices([0, 3], 8, 10.0, 2, 1.0, 0.0, 0.0, 1.0, 0.95, 9)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_mean_of_two_dimensions_is_refused_by_name():
    with pytest.raises(ValueError, match=r"mean_q must be a scalar or a vector of length d = 8"):
        bb.similarity_gap_expected(3, 8, mean_q=np.ones((2, 8)))


def test_symbolic_gap_default_is_d_4_with_real_angles_a0_a1():
    # documented default d = 4: two pairs, angle symbols a_0, a_1, real (they are m theta_i)
    import sympy as sp

    g = bb.symbolic_similarity_gap()
    assert [str(a) for a in g["angles"]] == ["a0", "a1"]
    assert all(a.is_real for a in g["angles"])
    assert g["R"].shape == (4, 4)
    assert sp.im(sp.cos(g["angles"][0])) == 0


def test_max_context_default_limit_is_a_whole_number_when_d_2_does_not_divide_2_32():
    # d = 130: the largest limit the term bound allows is 2**32 // 65 (2**32 / 65 is not a
    # whole number); a plain call uses it, and the horizon matches direct cosine sums
    d = 130
    assert 2**32 % (d // 2) != 0
    horizon = bb.max_context(1e4, d)
    sums = direct(np.arange(horizon + 1), d, 1e4)
    assert sums[:horizon].min() >= 0 > sums[horizon]


@pytest.mark.parametrize("length", [1, 2])
def test_walk_for_two_distances_needs_no_scan(length):
    # L <= 2: every base is feasible (B_0 = d/2, B_1 > 0) without a scan, and the
    # certificate holds at once (every (L-1) theta_i <= 1 < pi/2, each cosine > 0), so the
    # walk costs one step for the visit and one for the certificate's d/2 terms
    assert certificate(5.0, length, 8) > 0
    assert bb.feasible_window_top(5.0, length, 8, max_steps=2) == math.inf


def certificate_rounding_bound(d: int) -> float:
    """A worst-case bound, derived here, on the float64 error of certificate() for a base
    up to 1.8e308: theta_i = exp(-(2i/d) ln b) has relative error at most 10 x_i u + 8 u
    (x_i = (2i/d) ln b <= 710; t, log and the product; exp within 4 ulp), so an angle of
    at most pi/2 is off by (pi/2)(7110 u) at most, its cosine by 8 u more; the sum of at most
    n = d/2 terms of size <= 1 errs by gamma_n n, the subtraction by n u."""
    n, u = d // 2, 2.0**-53
    return n * u * (math.pi / 2 * 7110 + 8 + n / (1 - n * u) + 1) * 1.0001


def test_walk_certificate_is_not_issued_within_its_rounding_error():
    """L = 5000, d = 256, b = 20763595.469255913 (found by bisection on the sum): the
    certificate's sum is positive in 40-digit mpmath (about 2.0e-11), but the float64 sum
    could be that large with a true sum below 0 (its worst-case error, derived here, is
    1.6e-10), so the float sum proves nothing and no certificate may be issued. At a base
    larger by a relative 1e-6 the sum is 3.7e-6, far above any rounding, and it is."""
    length, d, base = 5000, 256, 20763595.469255913
    with mpmath.workdps(40):
        b = mpmath.mpf(base)
        angles = [(length - 1) * b ** (-mpmath.mpf(2 * i) / d) for i in range(d // 2)]
        exact = sum(mpmath.cos(a) if a <= mpmath.pi / 2 else -1 for a in angles)
    assert 0 < exact < certificate_rounding_bound(d) / 4
    assert 0 < certificate(base, length, d) < certificate_rounding_bound(d)
    assert bb._every_larger_base_feasible(base, length, d) is False
    above = base * (1 + 1e-6)
    assert certificate(above, length, d) > 1e3 * certificate_rounding_bound(d)
    assert bb._every_larger_base_feasible(above, length, d) is True
