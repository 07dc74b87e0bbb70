"""Tests of rope_lib.decay against independent routes.

Expected values come from mpmath sums at 40 digits, float64 complex sums written out here,
QUADPACK quadrature (scipy.integrate.quad), mpmath's hypergeometric and cosine-integral
functions, Fresnel integrals, explicit rotation and diagonal matrices, and exact
expectations of Gaussian vectors.
"""

from __future__ import annotations

import re

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import quad
from scipy.special import fresnel

from rope_lib import decay

mp.mp.dps = 40


# ---------------------------------------------------------------------------------- helpers
def mp_theta(d, base):
    return [mp.power(mp.mpf(base), -mp.mpf(2 * i) / d) for i in range(d // 2)]


def mp_ones(x, d, base=10000.0):
    x = float(x) if not float(x).is_integer() else int(x)
    return float(2 * mp.fsum(mp.cos(mp.mpf(x) * t) for t in mp_theta(d, base)))


def mp_bound(x, d, base=10000.0):
    x = float(x) if not float(x).is_integer() else int(x)
    partial, total = mp.mpc(0), mp.mpf(0)
    for t in mp_theta(d, base):
        partial += mp.expj(mp.mpf(x) * t)
        total += abs(partial)
    return float(total / (d // 2))


def f64_theta(d, base=10000.0):
    return base ** (-2.0 * np.arange(d // 2) / d)


def rotation(x, d, base=10000.0):
    r = np.zeros((d, d))
    for i, t in enumerate(f64_theta(d, base)):
        c, s = np.cos(x * t), np.sin(x * t)
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, -s], [s, c]]
    return r


# ---------------------------------------------------------------------------------- ones_score
@pytest.mark.parametrize("d", [2, 4, 64, 128, 512])
@pytest.mark.parametrize("x", [0, 1, 7, 100, 2.5, -33.25, 14617, 99_999])
def test_ones_score_matches_mpmath(d, x):
    assert decay.ones_score(x, d) == pytest.approx(mp_ones(x, d), abs=1e-9)


def test_ones_score_other_base_and_scalar_type():
    value = decay.ones_score(37, 16, base=500.0)
    assert np.ndim(value) == 0
    assert value == pytest.approx(mp_ones(37, 16, 500.0), abs=1e-11)


def test_ones_score_fast_route_matches_direct_complex_sum():
    d = 256
    x = np.arange(-3000, 20_000)  # integer, dense: takes the matrix-product route
    assert decay._use_grid(x, d // 2)
    direct = 2.0 * np.exp(1j * np.multiply.outer(x.astype(float), f64_theta(d))).real.sum(axis=1)
    np.testing.assert_allclose(decay.ones_score(x, d), direct, rtol=0, atol=5e-10)


def test_fast_route_at_large_distances_matches_mpmath():
    d = 256
    x = np.arange(10**6 - 30_000, 10**6 + 1)
    values = decay.ones_score(x, d)
    for i in (0, 12_345, 30_000):
        assert values[i] == pytest.approx(mp_ones(int(x[i]), d), abs=5e-8)


def test_ones_score_whole_floats_and_shapes():
    x = np.arange(20_000, dtype=float).reshape(100, 200)
    out = decay.ones_score(x, 128)
    assert out.shape == (100, 200)
    np.testing.assert_allclose(out, decay.ones_score(x.astype(int), 128), atol=1e-12)
    assert out[3, 7] == pytest.approx(mp_ones(607, 128), abs=1e-10)


@given(x=st.floats(-1e5, 1e5, allow_nan=False), d=st.sampled_from([2, 8, 64, 128]))
def test_ones_score_even_and_bounded(x, d):
    g = decay.ones_score(x, d)
    assert g == pytest.approx(decay.ones_score(-x, d), abs=1e-9)
    assert abs(g) <= d + 1e-9


def test_counterexamples_theta_zero_and_one():
    x = np.arange(0, 50_000, 7)
    np.testing.assert_allclose(2 * decay.exp_sum(x, np.zeros(64)).real, 128.0, atol=1e-9)
    np.testing.assert_allclose(2 * decay.exp_sum(x, np.ones(64)).real, 128 * np.cos(x), atol=1e-9)


# ---------------------------------------------------------------------------------- exp_sum
def test_exp_sum_negative_distances_conjugate_and_direct():
    freqs = np.array([1.0, 0.3, 1e-3, 2.0])
    x = np.arange(-5000, 5000)
    out = decay.exp_sum(x, freqs)
    direct = np.exp(1j * np.multiply.outer(x.astype(float), freqs)).sum(axis=1)
    np.testing.assert_allclose(out, direct, atol=1e-10)
    assert decay.exp_sum(-7.5, freqs) == pytest.approx(np.conj(decay.exp_sum(7.5, freqs)))


def test_exp_sum_sparse_integers_take_direct_route():
    x = np.array([0, 10**7, 3 * 10**7])
    assert not decay._use_grid(x, 64)
    freqs = f64_theta(128)
    expected = [
        complex(mp.fsum(mp.expj(mp.mpf(int(v)) * t) for t in mp_theta(128, 1e4))) for v in x
    ]
    np.testing.assert_allclose(decay.exp_sum(x, freqs), expected, atol=1e-6)


# ---------------------------------------------------------------------------------- bound
@pytest.mark.parametrize("d", [2, 16, 128])
@pytest.mark.parametrize("x", [0, 1, 3.7, 64, 256, 5000])
def test_roformer_bound_matches_mpmath(d, x):
    assert decay.roformer_bound(x, d) == pytest.approx(mp_bound(x, d), abs=1e-10)


def test_roformer_bound_at_zero_is_mean_of_j():
    for d in (2, 10, 128, 512):
        assert decay.roformer_bound(0, d) == pytest.approx((d // 2 + 1) / 2, abs=1e-12)


def test_roformer_bound_fast_route_matches_float64_cumsum():
    d = 256
    x = np.arange(-200, 6000)
    assert decay._use_grid(x, d // 2)
    direct = np.abs(
        np.cumsum(np.exp(1j * np.multiply.outer(x.astype(float), f64_theta(d))), axis=1)
    ).mean(axis=1)
    np.testing.assert_allclose(decay.roformer_bound(x, d), direct, rtol=0, atol=1e-10)


@given(
    x=st.integers(-5000, 5000),
    seed=st.integers(0, 10_000),
    d=st.sampled_from([4, 16, 128]),
)
def test_abel_bound_holds_for_random_q_k(x, seed, d):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(d), rng.standard_normal(d)
    score = q @ rotation(x, d) @ k  # q^T R_x k with explicit rotation blocks
    h = (q[0::2] - 1j * q[1::2]) * (k[0::2] + 1j * k[1::2])
    step = np.abs(np.diff(np.append(h, 0.0))).max()  # h_{d/2} = 0
    assert abs(score) <= step * (d // 2) * decay.roformer_bound(x, d) + 1e-9


def test_abel_bound_matches_explicit_formula_and_holds():
    rng = np.random.default_rng(3)
    for d, x in [(4, 17), (16, -250), (128, 3.5)]:
        q, k = rng.standard_normal(d), rng.standard_normal(d)
        h = (q[0::2] - 1j * q[1::2]) * (k[0::2] + 1j * k[1::2])  # conj(q~) k~: same steps
        step = np.abs(np.diff(np.append(h, 0.0))).max()
        expected = step * (d // 2) * mp_bound(x, d)
        assert decay.abel_bound(q, k, x) == pytest.approx(expected, rel=1e-12)
        assert abs(q @ rotation(x, d) @ k) <= expected + 1e-9


def test_abel_bound_for_ones_is_vacuous_up_to_a_million_but_not_forever():
    # q = k = 1: h_i = 2, only the last step (2) survives, so the bound is 2 sum_j |S_j|.
    ones = np.ones(128)
    for x, above in [(940_249, True), (49_703_806, False)]:
        expected = 2 * 64 * mp_bound(x, 128)
        assert decay.abel_bound(ones, ones, x) == pytest.approx(expected, rel=1e-7)  # x theta error
        assert (expected > 128) == above
    # independent route over every integer 0..1e6: direct float64 partial sums, in blocks
    t, lowest, where = f64_theta(128), np.inf, -1
    for start in range(0, 1_000_001, 100_000):
        x = np.arange(start, min(start + 100_000, 1_000_001), dtype=float)
        total = 2 * np.abs(np.cumsum(np.exp(1j * np.multiply.outer(x, t)), axis=1)).sum(axis=1)
        if total.min() < lowest:
            lowest, where = total.min(), start + int(np.argmin(total))
    assert lowest > 128 and where == 940_249
    assert lowest == pytest.approx(136.9269, abs=1e-3)


def test_abel_bound_for_ones_beats_d_up_to_a_million_only_for_some_d_below_128():
    # q = k = 1: the bound beats the trivial bound d exactly where the mean of |S_j| is < 1.
    # Independent route: direct float64 partial sums over every integer 0..1e6, in blocks.
    def smallest_mean_partial_sum(d):
        t, lowest = f64_theta(d), np.inf
        for start in range(0, 1_000_001, 50_000):
            x = np.arange(start, min(start + 50_000, 1_000_001), dtype=float)
            s = np.abs(np.cumsum(np.exp(1j * np.multiply.outer(x, t)), axis=1)).mean(axis=1)
            lowest = min(lowest, s.min())
        return lowest

    for d in (104, 124):  # never below d on 0..1e6, like d = 128 ...
        assert smallest_mean_partial_sum(d) > 1.01
    for d in (16, 64, 126):  # ... while these dip below d
        assert smallest_mean_partial_sum(d) < 0.999


@given(x=st.floats(-1e6, 1e6, allow_nan=False), d=st.sampled_from([2, 4, 16, 64, 128]))
def test_mean_partial_sum_is_at_least_one_half(x, d):
    # |S_1| = 1 and |S_j| + |S_{j+1}| >= 1, so the mean of |S_j| is >= 1/2 for every real x
    partial = np.cumsum(np.exp(1j * x * f64_theta(d)))
    assert np.abs(partial).mean() >= 0.5 - 1e-12
    assert decay.roformer_bound(x, d) >= 0.5 - 1e-12


# ---------------------------------------------------------------------------------- periods
def test_quarter_period_is_where_the_slowest_term_crosses_zero_not_where_it_turns():
    for d, base in [(4, 1e4), (128, 1e4), (256, 5e5)]:
        t_slow = mp.power(mp.mpf(base), -mp.mpf(d - 2) / d)
        q = mp.mpf(decay.quarter_period(d, base))
        assert abs(mp.cos(q * t_slow)) < 1e-12  # zero crossing at T/4 ...
        assert mp.cos(0.99 * q * t_slow) > 0 > mp.cos(1.01 * q * t_slow)
        # ... and still decreasing past it, up to T/2 = 2q, increasing after
        between = [mp.cos(q * (1 + mp.mpf(j) / 10) * t_slow) for j in range(11)]
        assert all(a > b for a, b in zip(between[:-1], between[1:], strict=True))
        assert mp.cos(2.1 * q * t_slow) > mp.cos(2 * q * t_slow)


def test_periods_and_quarter_period():
    d = 256
    np.testing.assert_allclose(decay.periods(d), 2 * np.pi * 10 ** (8 * np.arange(128) / d))
    q = decay.quarter_period(d)
    assert q == pytest.approx(float(mp.pi / 2 * mp.power(10, 4 - mp.mpf(8) / d)), rel=1e-14)
    assert int(q) == 14617  # the value quoted by source 000
    assert decay.quarter_period(4) == pytest.approx(np.pi / 2 * 100)


# ---------------------------------------------------------------------------------- local mean
def direct_window_mean(x, d, h, base=10000.0):
    """Mean of g over the 2h + 1 distances x - h .. x + h, each g a float64 cosine sum."""
    ys = x + np.arange(-h, h + 1, dtype=float)
    return float(np.mean(2.0 * np.cos(np.multiply.outer(ys, f64_theta(d, base))).sum(axis=1)))


@pytest.mark.parametrize("d", [2, 16, 128, 256])
@pytest.mark.parametrize("h", [0, 1, 7, 400])
@pytest.mark.parametrize("x", [0, 3, 250.5, -1234, 14617, 99_999])
def test_windowed_mean_score_matches_a_direct_window_sum(d, h, x):
    got = decay.windowed_mean_score(x, d, half_width=h)
    assert got == pytest.approx(direct_window_mean(x, d, h), abs=1e-9)


def test_windowed_mean_score_matches_mpmath():
    for d, h, x, base in [(8, 5, 123.25, 1e4), (16, 20, 3000, 500.0)]:
        expected = mp.fsum(mp_ones(x + j, d, base) for j in range(-h, h + 1)) / (2 * h + 1)
        got = decay.windowed_mean_score(x, d, base, half_width=h)
        assert got == pytest.approx(float(expected), abs=1e-10)


def test_windowed_mean_score_default_window_and_special_cases():
    x = np.array([0.0, 500.0, 14617.0, 20_000.0])
    for d, base in [(256, 1e4), (128, 1e4), (64, 5e5)]:
        h = int(np.ceil(np.pi * base * np.log(base) / d))
        # the window spans the longest undersampled period at pi b / 2, 4 (pi b / 2) ln b / d
        assert 2 * h - 2 < 2 * np.pi * base * np.log(base) / d <= 2 * h
        np.testing.assert_array_equal(
            decay.windowed_mean_score(x, d, base), decay.windowed_mean_score(x, d, base, h)
        )
    np.testing.assert_allclose(
        decay.windowed_mean_score(x, 128, half_width=0), decay.ones_score(x, 128), atol=1e-10
    )
    assert np.ndim(decay.windowed_mean_score(7, 16)) == 0
    assert decay.windowed_mean_score(x.reshape(2, 2), 16).shape == (2, 2)
    np.testing.assert_allclose(
        decay.windowed_mean_score(-x, 64, half_width=33),
        decay.windowed_mean_score(x, 64, half_width=33),
        atol=1e-12,
    )
    for bad, exc in [(-1, ValueError), (2.5, TypeError), (True, TypeError), (2**40, ValueError)]:
        with pytest.raises(exc, match="half_width"):
            decay.windowed_mean_score(1.0, 8, half_width=bad)


# |sin u|/u on u >= pi peaks at the root of tan u = u in (pi, 3 pi/2), by mpmath; theta <= 1
# adds the factor (1/2)/sin(1/2). Chapter 6 glues this cap, rounded up, as "at most 0.227".
_LOBE = mp.findroot(lambda u: mp.tan(u) - u, 4.49)
DIRICHLET_CAP = float(abs(mp.sin(_LOBE)) / _LOBE / (2 * mp.sin(mp.mpf(1) / 2)))


@given(
    width=st.integers(1, 20_001).filter(lambda w: w % 2 == 1),
    theta=st.floats(1e-6, 1.0),
)
def test_window_weight_bounds_of_the_docstring(width, theta):
    # the mean of cos(j theta) over j = -h..h, summed directly
    h = (width - 1) // 2
    weight = np.mean(np.cos(theta * np.arange(-h, h + 1)))
    assert weight >= 1 - (width * theta) ** 2 / 24 - 1e-12
    if theta >= 2 * np.pi / width:  # period at most the window: damped
        assert abs(weight) <= DIRICHLET_CAP + 1e-12


def test_window_weight_cap_is_reached_at_a_window_of_nine():
    # the cap is tight: with 2w + 1 = 9 the first side lobe lies inside theta <= 1
    assert 0.2265 < DIRICHLET_CAP < 0.2266
    theta = np.linspace(2 * np.pi / 9, 1.0, 200_001)
    weights = np.mean(np.cos(np.multiply.outer(theta, np.arange(-4, 5))), axis=1)
    assert DIRICHLET_CAP - 1e-3 < np.abs(weights).max() <= DIRICHLET_CAP + 1e-12


def test_local_mean_of_ones_score_bottoms_out_near_the_quarter_period():
    # d = 256, base 1e4: the score itself crosses zero early and dips to about -48 before the
    # quarter period; its local mean falls to about -13 there and is smallest near it, close
    # to the continuum score, whose trend -d Ci(x/b)/ln b is smallest at pi b/2.
    # Independent route: g summed directly in float64, windows by cumulative sums.
    d, b = 256, 1e4
    x = np.arange(0, 40_001, dtype=float)
    g = np.concatenate(
        [
            2 * np.cos(np.multiply.outer(x[s : s + 5000], f64_theta(d))).sum(axis=1)
            for s in range(0, x.size, 5000)
        ]
    )
    q = decay.quarter_period(d)
    assert np.argmax(g < 0) < q / 4 and g[: int(q) + 1].min() < -45
    h = int(np.ceil(np.pi * b * np.log(b) / d))
    sums = np.concatenate([[0.0], np.cumsum(g)])
    centres = np.arange(h, x.size - h)
    local = (sums[centres + h + 1] - sums[centres - h]) / (2 * h + 1)
    np.testing.assert_allclose(decay.windowed_mean_score(centres[::97], d), local[::97], atol=1e-7)
    at_q = local[int(round(q)) - h]
    assert -15 < at_q < -10
    smallest = centres[np.argmin(local)]
    # with the default window: a little before the quarter period, not between q and pi b/2
    assert 0.9 * q < smallest < q
    # the local mean follows the continuum score away from the start
    far = (centres >= 3000) & (centres <= 36_000)
    continuum = [float(d * (mp.ci(v) - mp.ci(v / b)) / mp.log(b)) for v in centres[far][::500]]
    np.testing.assert_allclose(local[far][::500], continuum, atol=3.0)
    # the continuum trend -d Ci(x/b)/ln b is smallest at x = pi b / 2 (Ci'(u) = cos(u)/u)
    trend = lambda v: -d * mp.ci(v / b) / mp.log(b)  # noqa: E731
    at = mp.pi * b / 2
    assert trend(at) < trend(at * 0.99) and trend(at) < trend(at * 1.01)
    assert float(trend(at)) == pytest.approx(-13.119, abs=1e-3)


# ---------------------------------------------------------------------------------- integral
@pytest.mark.parametrize("x", [0.0, 1e-6, 0.3, 1.0, 17.0, 250.0, 1234.5])
@pytest.mark.parametrize("base", [10.0, 1000.0, 10000.0])
def test_integral_score_matches_quadrature(x, base):
    expected, _ = quad(lambda t: np.cos(x * base**-t), 0.0, 1.0, limit=2000, epsabs=1e-13)
    assert decay.integral_score(x, 64, base) == pytest.approx(64 * expected, abs=1e-9)


@pytest.mark.parametrize("x", [3e4, 1e6, -2e5])
def test_integral_score_matches_mpmath_ci(x):
    b = mp.mpf(10000)
    expected = 128 * (mp.ci(abs(x)) - mp.ci(abs(x) / b)) / mp.log(b)
    assert decay.integral_score(x, 128) == pytest.approx(float(expected), abs=1e-12)


def test_integral_score_tends_to_d_and_is_even():
    x = np.array([0.0, 1e-9, 1e-5, 1e-4, 2e-4])
    np.testing.assert_allclose(decay.integral_score(x, 128), 128.0, atol=1e-5)
    assert decay.integral_score(0.0, 128) == 128.0
    np.testing.assert_allclose(decay.integral_score(-x, 128), decay.integral_score(x, 128))


def test_first_zero_of_integral_score_is_near_c0_b_not_b_exp_minus_gamma():
    c0 = mp.findroot(mp.ci, 0.6)  # first zero of Ci
    assert float(c0) == pytest.approx(0.6165054856, abs=1e-10)
    for base in (1e3, 1e4, 1e6):
        b = mp.mpf(base)
        root = mp.findroot(lambda x, b=b: mp.ci(x) - mp.ci(x / b), c0 * b)
        assert abs(root - c0 * b) < 3
        assert decay.integral_score(float(root) - 0.5, 2, base) > 0
        assert decay.integral_score(float(root) + 0.5, 2, base) < 0
        # the zero of the log law, b e^{-gamma}, is still well before the root
        assert decay.integral_score(base * np.exp(-np.euler_gamma), 2, base) > 0
        assert float(root) / (base * np.exp(-np.euler_gamma)) > 1.08


def test_gap_rms_against_direct_sums_and_mpmath_ci():
    d, base = 32, 1e4
    for lo, hi in [(50, 400), (2000, 2600)]:
        x = np.arange(lo, hi)
        g = 2 * np.cos(np.multiply.outer(x.astype(float), f64_theta(d, base))).sum(axis=1)
        b = mp.mpf(base)
        integral = np.array([float(d * (mp.ci(v) - mp.ci(v / b)) / mp.log(b)) for v in x])
        nu = np.clip(d / (2 * np.log(base)) * np.log(x / (np.pi * d / (2 * np.log(base)))), 0, 16)
        rms, model = decay.gap_rms([(lo, hi)], d, base)
        assert rms[0] == pytest.approx(np.sqrt(np.mean((g - integral) ** 2)), rel=1e-9)
        assert model[0] == pytest.approx(np.sqrt(np.mean(2 * nu)), rel=1e-12)


def test_undersampled_terms_counts_terms_past_nyquist():
    d, base = 128, 1e4
    t = f64_theta(d, base)
    for x in (5.0, 30.0, 1e3, 1e5, 1e9):
        # count of terms whose phase step x * (theta_i - theta_{i+1}) exceeds pi, in the
        # continuous approximation theta_i - theta_{i+1} ~ theta_i * 2 ln b / d
        count = np.sum(x * t * 2 * np.log(base) / d > np.pi)
        assert decay.undersampled_terms(x, d, base) == pytest.approx(count, abs=1.0)
    assert decay.undersampled_terms(0.0, d) == 0.0


# ---------------------------------------------------------------------------------- schedules
def mp_power_integral(x, alpha):
    a, x = mp.mpf(float(alpha)), float(x)
    return float(mp.hyp1f2(1 / (2 * a), mp.mpf(1) / 2, 1 + 1 / (2 * a), -(mp.mpf(x) ** 2) / 4))


@pytest.mark.parametrize(
    "schedule,alpha", [("t^2", 2.0), ("t^4", 4.0), ("t^0.5", 0.5), ("t^1.5", 1.5)]
)
@pytest.mark.parametrize("x", [0.0, 0.7, 10.0, 40.0, 300.0])
def test_power_schedule_integral_matches_hypergeometric(schedule, alpha, x):
    assert decay.schedule_integral(x, schedule) == pytest.approx(
        mp_power_integral(x, alpha), abs=1e-8
    )


def test_square_schedule_matches_fresnel():
    x = np.array([20.0, 500.0, 4000.0])
    s_c = fresnel(np.sqrt(2 * x / np.pi))[1]  # scipy returns (S, C)
    np.testing.assert_allclose(
        decay.schedule_integral(x, "t^2"), np.sqrt(np.pi / (2 * x)) * s_c, atol=1e-8
    )


def test_linear_and_exponential_schedule_integrals():
    x = np.array([0.0, 0.5, 3.0, 1e3])
    np.testing.assert_allclose(
        decay.schedule_integral(x, "t"), [1.0] + [np.sin(v) / v for v in x[1:]], atol=1e-15
    )
    for v in (0.5, 3.0, 80.0):
        expected, _ = quad(lambda t, v=v: np.cos(v * 1000.0**-t), 0, 1, epsabs=1e-13)
        assert decay.schedule_integral(v, "1000^-t") == pytest.approx(expected, abs=1e-10)


def test_schedule_frequencies_and_score():
    np.testing.assert_allclose(
        decay.schedule_frequencies(64, "10000^-t"), f64_theta(64), rtol=1e-14
    )
    np.testing.assert_allclose(decay.schedule_frequencies(8, "t^2"), (np.arange(4) / 4) ** 2)
    x = np.arange(0, 3000)
    freqs = (2 * np.arange(32) / 64) ** 3
    expected = 2 * np.cos(np.multiply.outer(x, freqs)).sum(axis=1)
    np.testing.assert_allclose(decay.schedule_score(x, 64, "t^3"), expected, atol=1e-10)
    np.testing.assert_allclose(
        decay.schedule_score(x, 64, "1e4^-t"), decay.ones_score(x, 64), atol=1e-10
    )
    assert decay.schedule_theta(0.5, "t") == 0.5


def test_schedule_envelopes_against_mpmath():
    x = np.array([0.3, 5.0, 700.0, 3e4, 2e6])
    b = mp.mpf(1000)
    expected = [float((abs(mp.e1(1j * v)) + abs(mp.e1(1j * v / b))) / mp.log(b)) for v in x]
    np.testing.assert_allclose(decay.schedule_envelope(x, "1000^-t"), expected, rtol=1e-12)
    assert decay.schedule_envelope(1e7, "1000^-t") == pytest.approx(
        1000 / (1e7 * np.log(1e3)), rel=1e-3
    )
    level4 = float(mp.gamma(1 + mp.mpf(1) / 4) * mp.cos(mp.pi / 8))
    np.testing.assert_allclose(decay.schedule_envelope(x, "t^4"), level4 * x**-0.25, rtol=1e-13)
    np.testing.assert_allclose(decay.schedule_envelope(x, "t"), 1 / x, rtol=1e-15)


@pytest.mark.parametrize("alpha", [2.0, 4.0])
@pytest.mark.parametrize("x", [30.0, 300.0, 4000.0])
def test_power_integral_stays_within_two_over_alpha_x_of_its_level(alpha, x):
    level = float(decay.schedule_envelope(x, f"t^{alpha}"))
    assert abs(mp_power_integral(x, alpha) - level) <= 2 / (alpha * x)


def test_exponential_envelope_bounds_the_score():
    x = np.geomspace(0.5, 1e6, 300)
    for s in ("10000^-t", "1000^-t"):
        assert np.all(np.abs(decay.schedule_integral(x, s)) <= decay.schedule_envelope(x, s))


def test_envelope_crossover_against_closed_form_and_mpmath():
    def mp_crossover(base, alpha):
        b, a = mp.mpf(base), mp.mpf(alpha)
        level = mp.gamma(1 + 1 / a) * mp.cos(mp.pi / (2 * a))

        def f(lx):
            x = mp.e**lx
            return mp.log((abs(mp.e1(1j * x)) + abs(mp.e1(1j * x / b))) / mp.log(b)) - mp.log(
                level * x ** (-1 / a)
            )

        return float(mp.e ** mp.findroot(f, mp.log(b)))

    for base, alpha in [(1e4, 2.0), (1e4, 4.0), (1e3, 4.0)]:
        xc = decay.envelope_crossover(base, alpha)
        assert xc == pytest.approx(mp_crossover(base, alpha), rel=1e-8)
    # far beyond the base the asymptotic envelope b / (x ln b) gives the closed form
    level2 = float(mp.gamma(1.5) * mp.cos(mp.pi / 4))
    closed = (1e4 / (level2 * np.log(1e4))) ** 2
    assert decay.envelope_crossover(1e4, 2.0) == pytest.approx(closed, rel=1e-3)


# ---------------------------------------------------------------------------------- Monte Carlo
def test_monte_carlo_samples_are_q_rotated_k():
    # With two samples, mean +- stderr are exactly the two sample scores.
    d, x, seed = 8, 13, 5
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, d)), rng.standard_normal((2, d))
    scores = sorted(q[s] @ rotation(x, d) @ k[s] for s in range(2))
    mean, err = decay.monte_carlo_score([x], d, kind="independent", n_samples=2, seed=seed)
    np.testing.assert_allclose(sorted([mean[0] - err[0], mean[0] + err[0]]), scores, atol=1e-12)


@pytest.mark.parametrize("kind,factor", [("independent", 0.0), ("correlated", 0.5), ("ones", 1.0)])
def test_monte_carlo_agrees_with_exact_expectation(kind, factor):
    x = np.arange(0, 257, 32)
    mean, err = decay.monte_carlo_score(x, 64, kind=kind, n_samples=4000, rho=0.5, seed=1)
    exact = factor * 2 * np.cos(np.multiply.outer(x, f64_theta(64))).sum(axis=1)
    assert np.all(np.abs(mean - exact) <= 5 * err)
    # the spread of a single score does not decay: Var = d (+ mean terms) at every distance
    if kind == "independent":
        np.testing.assert_allclose(err * np.sqrt(4000), np.sqrt(64), rtol=0.1)


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: decay.ones_score(1, 7), ValueError, "d must be an even"),
        (lambda: decay.ones_score(1, 0), ValueError, "d must be an even"),
        (lambda: decay.ones_score(1, 4.0), TypeError, "d must be an even"),
        (lambda: decay.ones_score(1, 4, base=1.0), ValueError, "base"),
        (lambda: decay.ones_score(1, 4, base=float("nan")), ValueError, "base"),
        (lambda: decay.ones_score(float("nan"), 4), ValueError, "distance"),
        (lambda: decay.ones_score([1, np.inf], 4), ValueError, "distance"),
        (lambda: decay.ones_score("3", 4), TypeError, "distance"),
        (lambda: decay.ones_score(True, 4), TypeError, "distance"),
        (lambda: decay.ones_score(1 + 2j, 4), TypeError, "distance"),
        (lambda: decay.ones_score(np.array([2**60]), 4), ValueError, "distance"),
        (lambda: decay.roformer_bound(1, 3), ValueError, "d must be an even"),
        (lambda: decay.roformer_bound(1, 4, base=0.5), ValueError, "base"),
        (lambda: decay.roformer_bound(np.nan, 4), ValueError, "distance"),
        (lambda: decay.integral_score(1, 5), ValueError, "d must be an even"),
        (lambda: decay.integral_score(1, 4, base=-3), ValueError, "base"),
        (lambda: decay.integral_score(np.inf, 4), ValueError, "distance"),
        (lambda: decay.exp_sum(1, [[1.0, 2.0]]), ValueError, "frequencies"),
        (lambda: decay.exp_sum(1, []), ValueError, "frequencies"),
        (lambda: decay.exp_sum(1, [np.nan]), ValueError, "frequencies"),
        (lambda: decay.quarter_period(3), ValueError, "d must be an even"),
        (lambda: decay.schedule_theta(0.5, "exp"), ValueError, "schedule"),
        (lambda: decay.schedule_theta(0.5, 3), TypeError, "schedule"),
        (lambda: decay.schedule_theta(0.5, "1^-t"), ValueError, "schedule"),
        (lambda: decay.schedule_theta(0.5, "t^0"), ValueError, "schedule"),
        (lambda: decay.schedule_theta(1.5, "t"), ValueError, "t must lie"),
        (lambda: decay.schedule_integral(np.nan, "t"), ValueError, "distance"),
        (lambda: decay.monte_carlo_score(1, 4, kind="iid"), ValueError, "kind"),
        (lambda: decay.monte_carlo_score(1, 4, n_samples=1), ValueError, "n_samples"),
        (lambda: decay.monte_carlo_score(1, 4, kind="correlated", rho=2), ValueError, "rho"),
        (lambda: decay.undersampled_terms(np.nan, 4), ValueError, "distance"),
        (lambda: decay.undersampled_terms(1, 5), ValueError, "d must be an even"),
        (lambda: decay.abel_bound([1.0, 2.0], [1.0], 3), ValueError, "same length"),
        (
            lambda: decay.abel_bound([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], 3),
            ValueError,
            r"len\(q\) must be an even",
        ),
        (lambda: decay.schedule_envelope(0.0, "t^2"), ValueError, "nonzero"),
        (lambda: decay.schedule_envelope(1.0, "t^0.5"), ValueError, "alpha > 1"),
        (
            lambda: decay.envelope_crossover(1e4, 1.0),
            ValueError,
            r"alpha must be a finite real number in \(1.0, inf\)",
        ),
        (
            lambda: decay.gap_rms([(10, 5)], 8),
            ValueError,
            r"windows\[0\] end must be an integer >= 11",
        ),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------------------------- figures
def _lines(ax):
    return [line for line in ax.get_lines() if len(line.get_xdata()) > 2]


# ---------------------------------------------------------------------------------- review fixes
def test_abel_bound_for_ones_certifies_decay_at_d16_without_tapering():
    # constant h_i = 2 do not taper (last step 2), yet for d = 16 the bound falls below d = g(0);
    # independent route: float64 partial sums written out here
    x = np.arange(1, 100_001, dtype=float)
    partial = np.cumsum(np.exp(1j * np.multiply.outer(x, f64_theta(16))), axis=1)
    bound = 2 * np.abs(partial).sum(axis=1)
    np.testing.assert_allclose(decay.abel_bound(np.ones(16), np.ones(16), x), bound, rtol=1e-9)
    assert (bound < 16).sum() > 1000 and bound.min() / 16 < 0.6
    assert np.all(np.abs(2 * np.cos(np.multiply.outer(x, f64_theta(16))).sum(axis=1)) <= bound)


def test_far_range_amplitude_of_continuum_score_is_d_b_over_x_ln_b():
    # for x >> b, (Ci(x) - Ci(x/b)) / ln b peaks at about b / (x ln b) per dimension (mpmath Ci)
    b, d = 1e4, 128
    x = np.linspace(1e6, 1e7, 20_001)
    mp_score = np.array([float(d * (mp.ci(v) - mp.ci(v / b)) / mp.log(b)) for v in x[::500]])
    np.testing.assert_allclose(decay.integral_score(x[::500], d), mp_score, rtol=1e-9, atol=1e-12)
    ratio = np.abs(decay.integral_score(x, d)) * x * np.log(b) / (d * b)
    assert 0.9 < ratio.max() < 1.1  # would be ~d if the amplitude were b / (x ln b)


@pytest.mark.parametrize("base, alpha", [(1e4, 2.0), (1e4, 4.0), (1e3, 2.0), (1e3, 4.0)])
def test_exponential_score_below_power_score_far_beyond_crossover(base, alpha):
    # sufficient condition E_b + 2/(alpha x) < P_alpha, E_b and P_alpha from mpmath
    xc = decay.envelope_crossover(base, alpha)
    b, a = mp.mpf(base), mp.mpf(alpha)
    level = mp.gamma(1 + 1 / a) * mp.cos(mp.pi / (2 * a))
    for x in np.geomspace(1.05 * xc, 1e12, 60):
        env = (abs(mp.e1(1j * x)) + abs(mp.e1(1j * x / b))) / mp.log(b)
        assert env + 2 / (a * x) < level * mp.mpf(x) ** (-1 / a)
    for x in np.geomspace(1.0, xc, 60)[:-1]:  # below x_c the exponential envelope is larger
        env = (abs(mp.e1(1j * x)) + abs(mp.e1(1j * x / b))) / mp.log(b)
        assert env > level * mp.mpf(x) ** (-1 / a)


# ---------------------------------------------------------------------------------- limits
LIMIT = 2**32  # rope_lib._validate.MAX_POSITION
BEYOND = [LIMIT + 1, 2**60 + 1, 2**70, 1e300, -1e300, np.array([0, 2**64 - 1], dtype=np.uint64)]
DISTANCE_CALLS = {
    "exp_sum": lambda x: decay.exp_sum(x, [1.0, 0.5]),
    "ones_score": lambda x: decay.ones_score(x, 8),
    "roformer_bound": lambda x: decay.roformer_bound(x, 8),
    "abel_bound": lambda x: decay.abel_bound(np.ones(8), np.ones(8), x),
    "integral_score": lambda x: decay.integral_score(x, 8),
    "windowed_mean_score": lambda x: decay.windowed_mean_score(x, 8),
    "undersampled_terms": lambda x: decay.undersampled_terms(x, 8),
    "schedule_score": lambda x: decay.schedule_score(x, 8, "t^2"),
    "schedule_integral": lambda x: decay.schedule_integral(x, "t^2"),
    "monte_carlo_score": lambda x: decay.monte_carlo_score(x, 8, n_samples=4),
}


@pytest.mark.parametrize("name", sorted(DISTANCE_CALLS))
@pytest.mark.parametrize("bad", BEYOND, ids=repr)
def test_distances_beyond_max_position_are_refused_by_name(name, bad):
    with pytest.raises(
        ValueError, match=r"distance must be finite real numbers of magnitude <= 4294967296"
    ):
        DISTANCE_CALLS[name](bad)


def test_distances_at_max_position_are_accurate():
    # the float64 phase x theta_i is within |x| 2**-53 ~ 5e-7 rad of the exact one
    for x in (LIMIT, -LIMIT, LIMIT - 1):
        assert decay.ones_score(x, 16) == pytest.approx(mp_ones(x, 16), abs=1e-5)
        assert decay.roformer_bound(x, 16) == pytest.approx(mp_bound(x, 16), abs=1e-5)


def test_unusual_forms_of_distances_give_the_same_result():
    import torch

    x = [0, 5, 17, 4096]
    for func in (decay.ones_score, decay.roformer_bound):
        expected = func(x, 16)
        for form in (
            np.array(x, dtype=np.uint16),
            np.array(x, dtype=np.uint64),
            np.array(x, dtype=float),
            tuple(x),
            torch.tensor(x),
        ):
            np.testing.assert_array_equal(func(form, 16), expected)


def test_schedule_envelope_is_phase_free_and_accepts_any_magnitude():
    x = np.array([1e12, 1e15, float(2**70)])
    np.testing.assert_allclose(decay.schedule_envelope(x, "t"), 1 / x, rtol=1e-15)
    np.testing.assert_allclose(decay.schedule_envelope([2**70], "t"), [2.0**-70], rtol=1e-15)
    # |E_1(iz)| -> 1/z, so (|E_1(ix)| + |E_1(ix/b)|) / ln b -> (1 + b) / (x ln b)
    far = decay.schedule_envelope(1e15, "10000^-t")
    assert far == pytest.approx((1e4 + 1) / (1e15 * np.log(1e4)), rel=1e-9)
    for bad in (float("nan"), float("inf"), "1e12", True, None):
        with pytest.raises((ValueError, TypeError), match="distance"):
            decay.schedule_envelope(bad, "t")


def mp_power_integral_large(x, alpha):
    """int_0^1 cos(x t^alpha) dt = (1/alpha) x^(-s) Re[e^(i pi s/2) gamma(s, 0, -ix)], s = 1/alpha."""
    s, xm = 1 / mp.mpf(alpha), mp.mpf(float(x))
    lower = mp.gammainc(s, 0, -1j * xm)
    return float(mp.re(mp.expj(mp.pi * s / 2) * lower) * xm ** (-s) / mp.mpf(alpha))


@pytest.mark.parametrize("alpha", [1.5, 2.0, 4.0])
@pytest.mark.parametrize("x", [65.0, 300.0, 1e5, 1e8, 1.2996e9, 4e9, float(LIMIT)])
def test_power_schedule_integral_at_large_distances(alpha, x):
    # QUADPACK's QAWF failed near 1.3e9 (TypeError) and lost 1e-10 at 1e9; the asymptotic
    # series of the tail is checked against mpmath's incomplete gamma function
    got = decay.schedule_integral(x, f"t^{alpha}")
    assert got == pytest.approx(mp_power_integral_large(x, alpha), abs=1e-15, rel=1e-9)


def test_square_schedule_at_large_distances_matches_mpmath_fresnel():
    for x in (1e6, 1.2996e9, 4e9):
        xm = mp.mpf(x)
        ref = mp.sqrt(mp.pi / (2 * xm)) * mp.fresnelc(mp.sqrt(2 * xm / mp.pi))
        assert decay.schedule_integral(x, "t^2") == pytest.approx(float(ref), rel=1e-9)


# ---------------------------------------------------------------------------------- Monte Carlo args
def test_monte_carlo_n_samples_is_bounded_before_sampling():
    import time

    start = time.perf_counter()
    with pytest.raises(
        ValueError, match=r"n_samples must be an integer <= 1677721, got 10+; .*MAX_ELEMENTS"
    ):
        decay.monte_carlo_score([0, 1], 8, n_samples=10**9)
    assert time.perf_counter() - start < 1.0
    with pytest.raises(ValueError, match=r"n_samples x \(d \+ len\(distance\)\).*MAX_ELEMENTS"):
        decay.monte_carlo_score(np.arange(1 << 20), 2, n_samples=1 << 8)


@pytest.mark.parametrize("bad", [-1, 2.5, "0", True, None, float("nan"), [0]], ids=repr)
def test_monte_carlo_seed_is_checked_by_name(bad):
    with pytest.raises((ValueError, TypeError), match="seed must be an integer >= 0"):
        decay.monte_carlo_score([1], 4, n_samples=4, seed=bad)


@pytest.mark.parametrize("bad", [1.5, -1.5, float("nan"), "0.5", True, None, [0.5]], ids=repr)
def test_monte_carlo_rho_is_checked_by_name(bad):
    with pytest.raises((ValueError, TypeError), match=r"rho must be a .*\[-1.0, 1.0\]"):
        decay.monte_carlo_score([1], 4, kind="correlated", n_samples=4, rho=bad)


def test_monte_carlo_equivalent_seed_and_rho_forms():
    a = decay.monte_carlo_score([0, 3], 8, kind="correlated", n_samples=8, rho=1, seed=3)
    b = decay.monte_carlo_score(
        [0, 3], 8, kind="correlated", n_samples=np.int64(8), rho=np.float32(1.0), seed=np.int64(3)
    )
    np.testing.assert_array_equal(a[0], b[0])
    # rho = 1: k = q, so every sample score is q^T R_x q and at x = 0 the mean is |q|^2 / n
    rng = np.random.default_rng(3)
    q = rng.standard_normal((8, 8))
    assert a[0][0] == pytest.approx(np.mean(np.sum(q * q, axis=1)), rel=1e-12)
    with pytest.raises(ValueError, match="kind must be one of"):
        decay.monte_carlo_score([1], 4, kind=None)


# ---------------------------------------------------------------------------------- windows
@pytest.mark.parametrize(
    "windows,match",
    [
        (object(), "windows must be a sequence"),
        ("ab", "windows must be a sequence"),
        ([(1, 2, 3)], r"windows\[0\] is"),
        ([5], r"windows\[0\] is"),
        ([(0, 10), (-1, 3)], r"windows\[1\] start must be an integer >= 0"),
        ([(0, 2.5)], r"windows\[0\] end must be an integer"),
        ([(0, 2**33)], r"windows\[0\] end must be an integer <= 4294967296"),
        ([(0, 1 << 26), (0, 1 << 26), (0, 1)], r"distances of windows would have .*MAX_ELEMENTS"),
        ([(0, 1)] * 4097, "windows must hold at most 4096 pairs"),
    ],
)
def test_gap_rms_windows_are_checked_by_name(windows, match):
    with pytest.raises((ValueError, TypeError), match=match):
        decay.gap_rms(windows, 8)


def test_gap_rms_accepts_numpy_integer_windows():
    a = decay.gap_rms([(100, 200)], 8)
    b = decay.gap_rms(np.array([[100, 200]], dtype=np.uint32), 8)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# ---------------------------------------------------------------------------------- figure args


def test_monte_carlo_n_samples_cap_bounds_the_whole_call():
    # fuzz item 9: the documented cap bounds all working arrays of the call, not one array.
    from rope_lib._validate import MAX_ELEMENTS
    from rope_lib.decay import monte_carlo_score

    with pytest.raises(ValueError, match="n_samples"):
        monte_carlo_score([0, 3, 100], 8, n_samples=MAX_ELEMENTS // 8)
    cap = MAX_ELEMENTS // (8 * (8 + 3))
    with pytest.raises(ValueError, match="n_samples"):
        monte_carlo_score([0, 3, 100], 8, n_samples=cap + 1)


# ---------------------------------------------------------------------------------- mutation testing
# Issue 22: tests that pin what tools/mutation.py found unpinned. Expected values are written
# out here (float64 rotation matrices, documented defaults, the exact refusal texts).
def mc_scores(q, k, x, d, base=10000.0):
    """Sample scores q_s^T R_x k_s from explicit rotation matrices, shape (n_samples, len(x))."""
    rot = np.array([rotation(v, d, base) for v in np.ravel(x)])
    return np.einsum("si,xij,sj->sx", q, rot, k)


def test_monte_carlo_correlated_samples_are_rho_q_plus_noise():
    # two samples: mean -+ stderr are the two scores, with k = rho q + sqrt(1 - rho^2) e
    d, x, seed, rho = 8, 13, 5, 0.6
    rng = np.random.default_rng(seed)
    q, e = rng.standard_normal((2, d)), rng.standard_normal((2, d))
    k = rho * q + 0.8 * e  # sqrt(1 - 0.36) = 0.8
    scores = np.sort(mc_scores(q, k, [x], d)[:, 0])
    mean, err = decay.monte_carlo_score([x], d, kind="correlated", n_samples=2, rho=rho, seed=seed)
    np.testing.assert_allclose([mean[0] - err[0], mean[0] + err[0]], scores, atol=1e-12)


def test_monte_carlo_defaults_are_2000_independent_samples_of_seed_0():
    d, x = 4, np.array([0.0, 3.0, 250.0])
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2000, d)), rng.standard_normal((2000, d))
    scores = mc_scores(q, k, x, d)
    mean, err = decay.monte_carlo_score(x, d)
    np.testing.assert_allclose(mean, scores.mean(axis=0), rtol=0, atol=1e-12)
    np.testing.assert_allclose(err, scores.std(axis=0, ddof=1) / np.sqrt(2000), rtol=1e-12)


def test_monte_carlo_keeps_the_shape_of_a_2d_distance_array():
    d, x, seed = 4, np.array([[0.0, 1.0, 2.0], [5.0, 8.0, 13.5]]), 2
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((3, d)), rng.standard_normal((3, d))
    scores = mc_scores(q, k, x, d)
    mean, err = decay.monte_carlo_score(x, d, n_samples=3, seed=seed)
    assert mean.shape == err.shape == (2, 3)
    np.testing.assert_allclose(mean, scores.mean(axis=0).reshape(2, 3), atol=1e-12)
    np.testing.assert_allclose(
        err, (scores.std(axis=0, ddof=1) / np.sqrt(3)).reshape(2, 3), rtol=1e-12
    )


def test_monte_carlo_n_samples_refusal_text():
    # d + len(distance) = 8 + 2 = 10; cap 2**27 // (8 * 10) = 1677721
    message = (
        "n_samples must be an integer <= 1677721, got 1000000000; the call's working arrays "
        "hold about 8 x n_samples x (d + len(distance)) = 8 x n_samples x 10 numbers, at most "
        "rope_lib's MAX_ELEMENTS = 134217728; average several calls with different seeds for more"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        decay.monte_carlo_score([0, 1], 8, n_samples=10**9)


def test_monte_carlo_n_samples_cap_is_at_least_two(monkeypatch):
    # with a limit of 1000 numbers and 8 x (2 + 60) = 496 per sample, 1000 // 496 = 2 samples fit
    monkeypatch.setattr(decay, "MAX_ELEMENTS", 1000)
    with pytest.raises(ValueError, match=r"^n_samples must be an integer <= 2, got 3; "):
        decay.monte_carlo_score(np.arange(60), 2, n_samples=3)
    assert decay.monte_carlo_score(np.arange(60), 2, n_samples=2)[0].shape == (60,)


def test_monte_carlo_table_and_phase_limits_name_what_is_too_large(monkeypatch):
    # a limit of 1000 elements (rope_lib._validate reads its own MAX_ELEMENTS at call time)
    from rope_lib import _validate

    monkeypatch.setattr(_validate, "MAX_ELEMENTS", 1000)
    table = (
        "the table of scores (n_samples x len(distance)) would have 1200 elements, more than "
        "rope_lib's MAX_ELEMENTS = 1000"
    )
    with pytest.raises(
        ValueError,
        match=f"^{re.escape(table)} .*; lower n_samples or pass fewer distances per call$",
    ):
        decay.monte_carlo_score(np.arange(40), 2, n_samples=30)  # 30 x 40
    phases = "the phases (d/2 x len(distance)) would have 1280 elements, more than rope_lib's"
    with pytest.raises(ValueError, match=f"^{re.escape(phases)}.*; pass fewer distances$"):
        decay.monte_carlo_score(np.arange(40), 64, n_samples=2)  # 32 x 40
    assert decay.monte_carlo_score(np.arange(40), 50, n_samples=2)[0].shape == (40,)  # 25 x 40


@pytest.mark.parametrize(
    "alpha, x", [(0.8, 12.78), (0.8, 16.0), (1.5, 16.0), (4.0, 16.0), (2.0, 10.0), (0.3, 7.5)]
)
def test_power_schedule_integral_up_to_x16_reaches_its_1e13_tolerance(alpha, x):
    # up to x = 16 the plain quadrature in t runs with epsabs = 1e-13 (mpmath's 1F2 reference)
    got = decay.schedule_integral(x, f"t^{alpha}")
    assert got == pytest.approx(mp_power_integral(x, alpha), rel=0, abs=1e-13)


@pytest.mark.parametrize("x", [40.0, 300.0, 5000.0])
def test_power_schedule_integral_below_one_with_a_non_integer_exponent(x):
    # alpha = 0.8: u^(1/alpha - 1) = u^0.25 (alpha = 0.5 gives u^1, where u ** 1 = u * 1)
    got = decay.schedule_integral(x, "t^0.8")
    assert got == pytest.approx(mp_power_integral(x, 0.8), rel=0, abs=1e-10)


def test_fast_route_rule_at_its_boundaries():
    # the rule of _use_grid: the grid when the table len(x) * n_freqs has at least 2**14
    # entries and the span of |x| is at most min(2**22, 8 len(x) + 4096)
    n = 1 << 14
    limit = 8 * n + 4096
    at = np.arange(n, dtype=np.int64)
    at[-1] = limit - 1  # span = limit
    over = at.copy()
    over[-1] = limit  # span = limit + 1
    assert decay._use_grid(at, 1)
    assert not decay._use_grid(over, 1)
    assert decay._use_grid(at + 10**6, 1)  # the span runs from the smallest |x|, not from 0
    assert decay._use_grid(-at, 1)
    assert decay._use_grid(np.arange(1024), 16)  # a table of exactly 2**14 entries
    assert not decay._use_grid(np.arange(1023), 16)
    assert not decay._use_grid(np.arange(10), 1)
    assert not decay._use_grid(np.array([], dtype=np.int64), 64)
    assert not decay._use_grid(None, 64)
    big = np.arange(1 << 20, dtype=np.int64)  # 8 len(x) + 4096 > 2**22: the cap decides
    big[-1] = (1 << 22) - 1
    assert decay._use_grid(big, 1)
    big[-1] = 1 << 22
    assert not decay._use_grid(big, 1)


def test_empty_distance_arrays_give_empty_results():
    empty = np.array([], dtype=np.int64)
    assert decay.ones_score(empty, 8).shape == (0,)
    assert decay.roformer_bound(empty, 8).shape == (0,)
    assert decay.exp_sum(empty, [1.0, 0.5]).shape == (0,)


@pytest.mark.parametrize("lo", [0, 1000])
@pytest.mark.parametrize("span", [1, 11, 100, 101, 4097])
def test_grid_covers_the_span_at_the_cost_of_the_docstring(lo, span):
    # E (n x A) and F (n x K) with A K >= span, A + K <= 2 ceil(sqrt(span)) exponentials per
    # frequency, and (E^T F)[a, r] = sum_i exp(i (lo + a K + r) theta_i) (float64 sum here)
    u = np.arange(lo, lo + span, dtype=np.int64)
    freqs = np.array([1.0, 0.3, 1e-3])
    e, f, offset, k = decay._grid(u, freqs)
    a = e.shape[1]
    assert offset == lo and f.shape == (3, k) and e.shape[0] == 3
    assert a * k >= span and a + k <= 2 * int(np.ceil(np.sqrt(span)))
    table = (e.T @ f).ravel()[u - lo]
    direct = np.exp(1j * np.multiply.outer(u.astype(float), freqs)).sum(axis=1)
    np.testing.assert_allclose(table, direct, rtol=0, atol=1e-12)


def test_exp_sum_on_the_grid_with_a_span_of_eleven():
    # 11 distances x 1500 frequencies = 16500 >= 2**14: the grid route, span 11 = 3 x 4 - 1
    x = np.arange(11)
    freqs = np.linspace(0.0, 2.0, 1500)
    assert decay._use_grid(x, freqs.size)
    direct = np.exp(1j * np.multiply.outer(x.astype(float), freqs)).sum(axis=1)
    np.testing.assert_allclose(decay.exp_sum(x, freqs), direct, rtol=0, atol=1e-9)


def test_direct_route_holds_one_block_of_the_table_at_a_time():
    # 2**16 non-integer distances x 64 frequencies = 2**22 phases; the direct route works on
    # blocks of 2**20 of them (8 MiB of float64); the whole table would be 32 MiB per array
    import tracemalloc

    x = np.arange(1 << 16) + 0.5
    tracemalloc.start()
    decay.ones_score(x, 128)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 24 * 2**20


def test_gap_rms_windows_at_their_limits():
    # the total may reach MAX_ELEMENTS = 2**27 distances exactly; a start may be 2**32 - 1
    assert decay._windows([(0, 1 << 26), (1 << 26, 1 << 27)]) == [(0, 1 << 26), (1 << 26, 1 << 27)]
    assert decay._windows([(2**32 - 1, 2**32)]) == [(2**32 - 1, 2**32)]
    with pytest.raises(
        ValueError, match=r"^windows\[0\] start must be an integer <= 4294967295, got 4294967296$"
    ):
        decay._windows([(2**32, 2**32 + 1)])
    message = (
        "the distances of windows would have 134217729 elements, more than rope_lib's "
        "MAX_ELEMENTS = 134217728 (1 GiB of float64); use shorter windows"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        decay._windows([(0, 1 << 26), (0, (1 << 26) + 1)])


@pytest.mark.parametrize("base", [10.0, 1e4])
@pytest.mark.parametrize("x", [9e-5, -5e-5, 1e-6])
def test_integral_score_near_zero_matches_mpmath_ci(x, base):
    # below |x| = 1e-4 the code uses a series; mpmath's Ci at 40 digits is the reference
    xm, b = mp.mpf(abs(x)), mp.mpf(base)
    expected = float((mp.ci(xm) - mp.ci(xm / b)) / mp.log(b))
    assert decay.integral_score(x, 2, base) == pytest.approx(2 * expected, rel=0, abs=2e-15)


def test_envelope_crossover_refusal_names_the_interval_and_the_inputs():
    # alpha -> 1: x_c = (b / (P ln b))^(alpha / (alpha - 1)) is far beyond 1e15
    message = "no crossover in [b/10, 1e15] for base 1.0001 and alpha 1.0001"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        decay.envelope_crossover(1.0001, 1.0001)


@pytest.mark.parametrize("base", [1.5, 2.0, 10.0])
def test_exponential_schedules_with_a_base_below_ten(base):
    # any b > 1 is accepted: theta_t = b^-t
    assert decay.schedule_theta(0.5, f"{base}^-t") == pytest.approx(base**-0.5, rel=1e-15)


def test_integer_distances_take_the_grid_and_others_the_direct_route(monkeypatch):
    # the docstring's fast route for dense integers (integer dtype or whole floats): count the
    # grids built; non-integer distances must be summed directly and correctly
    calls = []
    real_grid = decay._grid

    def counting_grid(u, freqs):
        calls.append(u.size)
        return real_grid(u, freqs)

    monkeypatch.setattr(decay, "_grid", counting_grid)
    x = np.arange(2000)
    decay.exp_sum(x, f64_theta(64))
    decay.ones_score(x, 64)
    decay.roformer_bound(x.astype(float), 64)
    assert calls == [2000, 2000, 2000]
    half = x + 0.5
    got = decay.ones_score(half, 64)
    assert len(calls) == 3
    direct = 2.0 * np.cos(np.multiply.outer(half, f64_theta(64))).sum(axis=1)
    np.testing.assert_allclose(got, direct, rtol=0, atol=1e-10)


def test_roformer_bound_direct_route_for_arrays_and_2d_shapes():
    x = np.array([[3.7, 250.5], [-1234.25, 0.5]])
    got = decay.roformer_bound(x, 16)
    assert got.shape == (2, 2)
    for i, j in np.ndindex(2, 2):
        assert got[i, j] == pytest.approx(mp_bound(x[i, j], 16), abs=1e-12)


def test_schedule_integral_keeps_a_2d_shape():
    x = np.array([[0.7, 10.0], [40.0, 300.0]])
    got = decay.schedule_integral(x, "t^2")
    assert got.shape == (2, 2)
    for i, j in np.ndindex(2, 2):
        assert got[i, j] == pytest.approx(mp_power_integral(x[i, j], 2.0), abs=1e-10)


def test_scalar_inputs_give_numpy_scalars_and_arrays_stay_arrays():
    assert type(decay.ones_score(3, 8)) is np.float64
    assert type(decay.ones_score(3.5, 8)) is np.float64
    assert type(decay.exp_sum(3, [1.0])) is np.complex128
    assert type(decay.ones_score([3], 8)) is np.ndarray


def test_gap_rms_default_base_and_another_base_against_float64_and_mpmath():
    from scipy.special import sici

    x = np.arange(100, 200)
    for base, kwargs in ((1e4, {}), (500.0, {"base": 500.0})):
        g = 2 * np.cos(np.multiply.outer(x.astype(float), f64_theta(8, base))).sum(axis=1)
        integral = 8 * (sici(x)[1] - sici(x / base)[1]) / np.log(base)
        nu = np.clip(8 / (2 * np.log(base)) * np.log(x / (np.pi * 8 / (2 * np.log(base)))), 0, 4)
        rms, model = decay.gap_rms([(100, 200)], 8, **kwargs)
        assert rms[0] == pytest.approx(np.sqrt(np.mean((g - integral) ** 2)), rel=1e-10)
        assert model[0] == pytest.approx(np.sqrt(np.mean(2 * nu)), rel=1e-12)


def test_undersampled_terms_default_base_and_zero_distance():
    import warnings

    # nu(x) = clip(d / (2 ln b) ln(x / x_*), 0, d/2), x_* = pi d / (2 ln b); b = 1e4 by default
    x, d, lb = 5000.0, 64, np.log(1e4)
    expected = d / (2 * lb) * np.log(x / (np.pi * d / (2 * lb)))
    assert decay.undersampled_terms(x, d) == pytest.approx(expected, rel=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # log(0) = -inf is clipped to 0 without a warning
        assert decay.undersampled_terms(0, d) == 0.0


def test_schedule_theta_accepts_t_equal_to_one_and_refuses_beyond_with_this_text():
    assert decay.schedule_theta(1.0, "t^2") == 1.0
    assert decay.schedule_theta(1.0, "100^-t") == pytest.approx(0.01, rel=1e-15)
    with pytest.raises(ValueError, match=r"^t must lie in \[0, 1\]$"):
        decay.schedule_theta(1.0 + 1e-12, "t^2")


def test_envelope_crossover_refuses_a_crossing_left_of_its_interval():
    """The search interval starts at b/10 (E_b > P_alpha is required there). For b = 1e4 and
    alpha = 5.44 the envelopes cross between b/11 and b/10 (mpmath: P_alpha is above E_b at
    b/10 and below it at b/11, by about 2e-3 both), so the crossing is not in [b/10, 1e15] and
    the call refuses; a search started further left would return that crossing instead."""
    base, alpha = 1e4, 5.44
    b, a = mp.mpf(base), mp.mpf(alpha)
    level = mp.gamma(1 + 1 / a) * mp.cos(mp.pi / (2 * a))

    def exp_minus_power(x):
        return (abs(mp.e1(1j * x)) + abs(mp.e1(1j * x / b))) / mp.log(b) - level * x ** (-1 / a)

    assert exp_minus_power(b / 10) < -1e-3
    assert exp_minus_power(b / 11) > 1e-3
    message = f"no crossover in [b/10, 1e15] for base {base} and alpha {alpha}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        decay.envelope_crossover(base, alpha)
