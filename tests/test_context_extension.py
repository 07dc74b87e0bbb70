"""Tests of rope_lib.context_extension against independent routes.

Expected values come from the peer implementation that models run (Hugging Face
``transformers`` 5.x, ``ROPE_INIT_FUNCTIONS`` and ``LlamaRotaryEmbedding``), from the closed
forms evaluated with mpmath at 30 digits, from the definitions written out here (turn counts
``L theta_i / 2 pi``, wavelengths ``2 pi / theta_i``), and from direct float64 sums of cosines.

Hugging Face builds its frequency tables in float32 (``base ** (arange / dim)`` on a float32
tensor), so the comparison is at float32 round-off, with a budget derived here rather than a
loose constant. With ``u = 2**-24`` (float32 unit round-off), the float32 power
``b**x = exp(x ln b)`` inherits three roundings of size about ``x ln b * u`` (the exponent
``2i/d``, the logarithm of ``b``, their product), and the reciprocal, the product with the
factor add a few ``u`` each: relative error <= ``(3 ln b + 8) u`` (``hf_rtol``; 3.3e-6 at
b = 1e7). The blends are different: YaRN mixes ``theta_i / s`` and ``theta_i`` with the float32
weight ``1 - ramp``, whose rounding (a few ``u``, absolute) multiplies the *unscaled*
``theta_i``, up to ``s`` times larger than ``theta_i'``; the budget adds ``4 u theta_i``.
Llama 3.1's weight is computed from the float32 ``theta_i`` itself, so its error is
``(1 + r_high / (r_high - r_low))`` times ``hf_rtol`` times the unscaled ``theta_i``. Sweeps of
1500-2000 random cases stayed below 0.5 of these budgets.
"""

from __future__ import annotations

import math
import re

import mpmath as mp
import numpy as np
import pytest
import transformers  # pinned in requirements.txt: a missing peer fails here, never skips
from hypothesis import assume, given
from hypothesis import strategies as st

import rope_lib
from rope_lib import context_extension as ce
from rope_lib import scaled_theta, theta

mp.mp.dps = 30


def hf_rtol(base):
    """Float32 round-off budget of the peer's tables (module docstring)."""
    return (3 * math.log(base) + 8) * 2.0**-24


dims = st.integers(2, 128).map(lambda k: 2 * k)
bases = st.floats(1.0, 7.0).map(lambda e: 10.0**e)
factors = st.floats(1.0, 64.0)
contexts = st.sampled_from([512, 2048, 4096, 8192, 32768])


# ---------------------------------------------------------------------------------- helpers
def mp_ntk(d, base, s):
    """theta_i' = (b s^{d/(d-2)})^{-2i/d}, at 30 digits."""
    b = mp.mpf(base) * mp.power(mp.mpf(s), mp.mpf(d) / (d - 2))
    return np.array([float(mp.power(b, -mp.mpf(2 * i) / d)) for i in range(d // 2)])


def direct_margin(m, frequencies):
    """sum_i cos(m theta_i), one float64 cosine per term."""
    return np.cos(np.multiply.outer(np.asarray(m, dtype=np.float64), frequencies)).sum(axis=-1)


@pytest.fixture(scope="module")
def hf():
    """The Hugging Face peer: a config builder and the init functions."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    # The peer warns when factor differs from max_position_embeddings / original context
    # by float rounding; the warning is irrelevant to the frequencies.
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()

    def run(d, base, rope_type, max_positions, seq_len=None, **rope):
        config = LlamaConfig(
            head_dim=d,
            hidden_size=4 * d,
            num_attention_heads=4,
            max_position_embeddings=max_positions,
            rope_parameters={"rope_theta": base, "rope_type": rope_type, **rope},
        )
        if rope_type == "default":
            inv, factor = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
        else:
            inv, factor = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)
        return inv.double().numpy(), float(factor)

    yield run
    transformers.logging.set_verbosity(verbosity)


def hf_extended(hf, d, base, rope_type, s, L, **rope):
    """The peer's frequencies and attention factor for a context of L tokens extended s times
    (max_position_embeddings = int(s L), factor = s, original_max_position_embeddings = L);
    the arguments in the order of ``scaled_theta``."""
    return hf(d, base, rope_type, int(s * L), factor=s, original_max_position_embeddings=L, **rope)


# ------------------------------------------------------------------ the Hugging Face peer
def test_peer_has_no_separate_ntk_type(hf):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    # "ntk" is tested against its closed form below because the peer has no static NTK type.
    assert "ntk" not in ROPE_INIT_FUNCTIONS
    assert {"linear", "dynamic", "yarn", "llama3"} <= set(ROPE_INIT_FUNCTIONS)


@given(d=dims, base=bases)
def test_none_matches_hf_default(hf, d, base):
    inv, factor = hf(d, base, "default", 4096)
    th, a = scaled_theta(d, base, "none", 1.0)
    np.testing.assert_allclose(th, inv, rtol=hf_rtol(base))
    assert a == factor == 1.0


@given(d=dims, base=bases, s=factors)
def test_linear_matches_hf(hf, d, base, s):
    inv, factor = hf(d, base, "linear", 4096, factor=s)
    th, a = scaled_theta(d, base, "linear", s)
    np.testing.assert_allclose(th, inv, rtol=hf_rtol(base))
    assert a == factor == 1.0


@given(d=dims, base=bases, s=factors, L=contexts, ratio=st.floats(0.1, 40.0))
def test_dynamic_matches_hf(hf, d, base, s, L, ratio):
    seq_len = max(1, int(ratio * L))
    inv, factor = hf(d, base, "dynamic", L, seq_len=seq_len, factor=s)
    th, a = scaled_theta(d, base, "dynamic", s, L, seq_len=seq_len)
    np.testing.assert_allclose(th, inv, rtol=hf_rtol(base))
    assert a == factor == 1.0


@given(
    d=dims,
    base=bases,
    s=factors,
    L=contexts,
    fast=st.sampled_from([32.0, 16.0, 64.0]),
    slow=st.sampled_from([1.0, 2.0]),
    truncate=st.booleans(),
)
def test_yarn_matches_hf(hf, d, base, s, L, fast, slow, truncate):
    # Outside the degenerate corner where the reference ramp runs backwards (next test).
    lo = d * math.log(L / (2 * math.pi * fast)) / (2 * math.log(base))
    assume((math.floor(lo) if truncate else lo) <= d - 1)
    inv, factor = hf_extended(
        hf, d, base, "yarn", s, L, beta_fast=fast, beta_slow=slow, truncate=truncate
    )
    th, a = scaled_theta(d, base, "yarn", s, L, beta_fast=fast, beta_slow=slow, truncate=truncate)
    budget = hf_rtol(base) * th + 4 * 2.0**-24 * theta(d, base)  # module docstring
    assert np.all(np.abs(th - inv) <= budget)
    assert a == pytest.approx(factor, rel=1e-15)


def test_yarn_degenerate_corner_differs_from_hf_on_purpose(hf):
    # d = 4, b = 10, L = 32768: both pairs turn > 32 times over L (5215 and 522 turns), so YaRN
    # keeps both. The reference clamps i_hi = ceil(7.4) to d - 1 = 3 < i_lo = 4, and its
    # reversed ramp interpolates both pairs instead.
    turns = 32768 * theta(4, 10.0) / (2 * math.pi)
    assert np.all(turns > 32)
    th, _ = scaled_theta(4, 10.0, "yarn", 2.0, 32768)
    np.testing.assert_array_equal(th, theta(4, 10.0))
    inv, _ = hf_extended(hf, 4, 10.0, "yarn", 2.0, 32768)
    np.testing.assert_allclose(inv, theta(4, 10.0) / 2, rtol=1e-6)


@pytest.mark.parametrize("L", [5, 6])
def test_yarn_keeps_only_pair_0_when_ceil_of_i_slow_is_zero_as_the_reference_does(hf, L):
    """d = 64, b = 1e4, L = 5 or 6: i(beta_slow = 1) = 32 ln(L / 2 pi) / ln(1e4) lies in (-1, 0],
    so i_hi = ceil(i(1)) = 0, and i_lo = max(floor(i(32)), 0) = 0. The reference code widens
    i_hi to 0.001: gamma_0 = 1 - clip(0 / 0.001) = 1 keeps pair 0, and gamma_i = 1 - clip(i /
    0.001) = 0 interpolates every other pair, although pair 0 turns only L / (2 pi) < 1 times
    (the clamp at index 0 of the docstring). Expected values from 30-digit theta_i and the
    peer."""
    d, base, s = 64, 1e4, 4.0
    i_slow = d * math.log(L / (2 * math.pi)) / (2 * math.log(base))
    assert -1 < i_slow <= 0 and L / (2 * math.pi) < 1
    th0 = mp_ntk(d, base, 1.0)  # theta_i = b^{-2i/d} at 30 digits
    expected = np.concatenate([th0[:1], th0[1:] / s])
    got, a = scaled_theta(d, base, "yarn", s, L)
    np.testing.assert_allclose(got, expected, rtol=1e-13)
    inv, factor = hf_extended(hf, d, base, "yarn", s, L)
    budget = hf_rtol(base) * expected + 4 * 2.0**-24 * th0  # module docstring
    assert np.all(np.abs(inv - expected) <= budget)
    assert a == pytest.approx(factor, rel=1e-15)


def test_yarn_interpolates_every_pair_when_ceil_of_i_slow_is_negative():
    """d = 64, b = 1e4, L = 4: i(1) = 32 ln(4 / 2 pi) / ln(1e4) = -1.57, so i_hi = ceil(i(1)) = -1
    < 0: every pair turns fewer than beta_slow = 1 times (pair 0: 4 / (2 pi) = 0.64) and, unlike
    the reference code (whose reversed ramp keeps them all), every pair is interpolated:
    theta_i' = theta_i / s, from 30-digit theta_i."""
    d, base, s, L = 64, 1e4, 4.0, 4
    assert math.ceil(d * math.log(L / (2 * math.pi)) / (2 * math.log(base))) == -1
    got, _ = scaled_theta(d, base, "yarn", s, L)
    np.testing.assert_allclose(got, mp_ntk(d, base, 1.0) / s, rtol=1e-13)


@given(
    d=dims,
    base=bases,
    s=factors,
    L=contexts,
    low=st.sampled_from([1.0, 0.5, 2.0]),
    high=st.sampled_from([4.0, 8.0]),
)
def test_llama3_matches_hf(hf, d, base, s, L, low, high):
    inv, factor = hf_extended(
        hf, d, base, "llama3", s, L, low_freq_factor=low, high_freq_factor=high
    )
    th, a = scaled_theta(d, base, "llama3", s, L, low_freq_factor=low, high_freq_factor=high)
    # The piecewise rule is continuous, so a float32 wavelength that lands on the other side
    # of a boundary changes the value by round-off only. Absolute budget: module docstring.
    budget = (1 + high / (high - low)) * hf_rtol(base) * theta(d, base)
    assert np.all(np.abs(th - inv) <= budget)
    assert a == factor == 1.0


def test_llama31_defaults_match_hf(hf):
    # Llama 3.1 8B: d = 128, b = 500000, s = 8, L = 8192, low/high = 1/4.
    inv, _ = hf(
        128,
        500000.0,
        "llama3",
        131072,
        factor=8.0,
        original_max_position_embeddings=8192,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
    )
    th, _ = scaled_theta(128, 500000.0, "llama3", 8.0)
    assert np.all(np.abs(th - inv) <= (1 + 4 / 3) * hf_rtol(500000.0) * theta(128, 500000.0))


@given(d=dims, base=bases, s=factors, L=contexts)
def test_llama3_is_yarn_paper_ramp_with_one_and_four(d, base, s, L):
    # YaRN as its paper writes it: weight of the original frequency linear in the number of
    # turns r = L theta / (2 pi), clipped to [0, 1] between beta_slow = 1 and beta_fast = 4;
    # no attention factor. Written here from the formula, not from rope_lib.
    th0 = mp_ntk(d, base, 1.0)  # theta_i = b^{-2i/d} at 30 digits
    r = L * th0 / (2 * math.pi)
    gamma = np.clip((r - 1.0) / (4.0 - 1.0), 0.0, 1.0)
    expected = (1 - gamma) * th0 / s + gamma * th0
    got, a = scaled_theta(d, base, "llama3", s, L)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert a == 1.0


def test_llama31_horizon_falls_short_of_its_shipped_context():
    # Llama 3.1: s = 8, L = 8192, b = 5e5, shipped context 131072. Horizon by direct cosine
    # sums over the frequencies written from the YaRN-paper form above.
    d, base, s, L = 128, 5e5, 8.0, 8192
    th0 = mp_ntk(d, base, 1.0)  # theta_i = b^{-2i/d} at 30 digits
    gamma = np.clip((L * th0 / (2 * math.pi) - 1.0) / 3.0, 0.0, 1.0)
    th = (1 - gamma) * th0 / s + gamma * th0
    values = np.concatenate(
        [direct_margin(np.arange(a, a + 8192), th) for a in range(0, 131072, 8192)]
    )
    negative = np.flatnonzero(values < 0)
    assert negative.size  # the horizon lies inside the scanned range
    horizon = int(negative[0])
    assert s * L < horizon < 131072
    assert horizon == ce.scaled_horizon(d, base, "llama3", s, L) == 85133


# ------------------------------------------------------------------ closed forms and laws
@given(d=dims, base=bases, s=factors)
def test_linear_is_theta_over_factor(d, base, s):
    th, _ = scaled_theta(d, base, "linear", s)
    np.testing.assert_allclose(th * s, theta(d, base), rtol=1e-15)


@pytest.mark.parametrize("d, base, s", [(128, 1e4, 4.0), (64, 5e5, 8.0), (6, 100.0, 2.5)])
def test_ntk_closed_form_mpmath(d, base, s):
    th, a = scaled_theta(d, base, "ntk", s)
    np.testing.assert_allclose(th, mp_ntk(d, base, s), rtol=1e-13)
    assert a == 1.0


@given(d=dims, base=bases, s=factors)
def test_ntk_keeps_fastest_and_interpolates_slowest(d, base, s):
    th, _ = scaled_theta(d, base, "ntk", s)
    slowest = base ** (-(d - 2) / d)
    assert th[0] == 1.0
    assert th[-1] == pytest.approx(slowest / s, rel=1e-12)


@given(d=dims, base=bases, s=factors, L=contexts, ratio=st.floats(0.01, 1.0))
def test_dynamic_is_unscaled_within_training_context(d, base, s, L, ratio):
    seq_len = max(1, int(ratio * L))
    th, _ = scaled_theta(d, base, "dynamic", s, L, seq_len=seq_len)
    np.testing.assert_allclose(th, theta(d, base), rtol=1e-13)


@given(d=dims, base=bases, L=contexts, extra=st.integers(0, 100_000))
def test_dynamic_with_factor_one_is_ntk_with_length_ratio(d, base, L, extra):
    # Peng et al.: dynamic NTK uses s = max(1, l / L) at sequence length l.
    seq_len = L + extra
    th, _ = scaled_theta(d, base, "dynamic", 1.0, L, seq_len=seq_len)
    np.testing.assert_allclose(th, mp_ntk(d, base, seq_len / L), rtol=1e-12)


@given(d=dims, base=bases, s=factors, L=contexts)
def test_factor_one_changes_nothing(d, base, s, L):
    for method in ("none", "linear", "ntk", "yarn", "llama3"):
        th, a = scaled_theta(d, base, method, 1.0, L)
        np.testing.assert_allclose(th, theta(d, base), rtol=1e-13, err_msg=method)
        assert a == 1.0
    th, _ = scaled_theta(d, base, "dynamic", s, L, seq_len=L)
    np.testing.assert_allclose(th, theta(d, base), rtol=1e-13)


@pytest.mark.parametrize("s, expected", [(1.0, 1.0), (math.e, 1.1), (math.exp(10.0), 2.0)])
def test_yarn_attention_factor_values(s, expected):
    assert ce.yarn_attention_factor(s) == pytest.approx(expected, rel=1e-14)
    _, a = scaled_theta(64, 1e4, "yarn", s, 2048)
    assert a == pytest.approx(expected, rel=1e-14)


@given(s=factors)
def test_yarn_attention_factor_formula(s):
    _, a = scaled_theta(128, 1e4, "yarn", s, 4096)
    assert a == pytest.approx(float(mp.mpf("0.1") * mp.log(mp.mpf(s)) + 1), rel=1e-14)


@given(d=dims, base=bases, s=st.floats(1.001, 64.0), L=contexts)
def test_yarn_keeps_fast_interpolates_slow_and_blends_between(d, base, s, L):
    th0 = theta(d, base)
    th, _ = scaled_theta(d, base, "yarn", s, L)
    turns = L * th0 / (2 * math.pi)  # full turns of pair i over the training context
    fast = turns > 32.0 * (1 + 1e-9)
    slow = turns < 1.0 * (1 - 1e-9)
    np.testing.assert_array_equal(th[fast], th0[fast])
    np.testing.assert_allclose(th[slow], th0[slow] / s, rtol=1e-15)
    assert np.all(th <= th0 * (1 + 1e-15)) and np.all(th >= th0 / s * (1 - 1e-15))
    assert np.all(np.diff(th) < 0)  # still a strictly decreasing schedule


@given(d=dims, base=bases, s=st.floats(1.001, 64.0), L=contexts)
def test_llama3_keeps_high_and_divides_low_frequencies(d, base, s, L):
    th0 = theta(d, base)
    th, _ = scaled_theta(d, base, "llama3", s, L)
    wavelength = 2 * math.pi / th0
    high = wavelength < L / 4.0
    low = wavelength > L / 1.0
    np.testing.assert_array_equal(th[high], th0[high])
    np.testing.assert_allclose(th[low], th0[low] / s, rtol=1e-15)
    assert np.all(th <= th0 * (1 + 1e-15)) and np.all(th >= th0 / s * (1 - 1e-15))
    assert np.all(np.diff(th) < 0)


@given(d=dims, base=bases, s=st.floats(1.001, 64.0), L=contexts, fast=st.floats(2.0, 64.0))
def test_yarn_code_keeps_and_interpolates_the_same_pairs_as_the_paper_ramp(d, base, s, L, fast):
    """Chapter 8: the released code ramps linearly in the pair index between end points
    rounded outward (floor, ceiling), the paper linearly in the turn count r between
    beta_slow = 1 and beta_fast; the pairs kept (r >= beta_fast) and the pairs fully
    interpolated (r <= 1) are the same, as long as some pair turns beta_fast times (else the
    code's clamp at index 0 keeps pair 0)."""
    th0 = theta(d, base)
    r = L * mp_ntk(d, base, 1.0) / (2 * math.pi)  # turns over L, from 30-digit frequencies
    assume(r[0] >= fast * (1 + 1e-9))
    assume(np.all(np.abs(r / fast - 1) > 1e-9) and np.all(np.abs(r - 1) > 1e-9))
    got, _ = scaled_theta(d, base, "yarn", s, L, beta_fast=fast, beta_slow=1.0)
    np.testing.assert_array_equal(got == th0, r > fast)
    np.testing.assert_array_equal(got == th0 / s, r < 1.0)


@given(d=dims, base=bases, s=st.integers(2, 16), L=st.sampled_from([512, 2048, 8192]))
def test_interpolated_angles_lie_on_the_training_arc_and_are_met_only_at_multiples_of_s(
    d, base, s, L
):
    """Position interpolation: at every distance m < sL the angle m theta_i / s lies on the
    training arc [0, L theta_i), but it is an angle met in training (an integer distance
    below L) only when s divides m; pair 0 (theta_0 = 1) shows it."""
    th0 = theta(d, base)
    th, _ = scaled_theta(d, base, "linear", float(s))
    assert np.all((s * L - 1) * th < L * th0)
    m = np.arange(s * L)
    distance = m * th[0] / th0[0]  # the distance m / s whose angle pair 0 shows
    met = np.abs(distance - np.round(distance)) < 1e-9
    np.testing.assert_array_equal(met, m % s == 0)


def test_llama3_middle_band_by_hand():
    # d = 4, b chosen so that the slow pair's wavelength is exactly L/2 = 4096 (L = 8192):
    # eta = (L / lambda - 1) / (4 - 1) = 1/3, theta' = (2/3) theta / s + (1/3) theta.
    theta1 = 2 * math.pi / 4096
    base = theta1 ** (-2.0)
    th, _ = scaled_theta(4, base, "llama3", 8.0)
    assert th[0] == 1.0
    assert th[1] == pytest.approx(theta1 * (2 / 3 / 8 + 1 / 3), rel=1e-13)


def test_none_ignores_factor_and_context():
    th, a = scaled_theta(16, 1e4, "none", 7.0, 1024)
    np.testing.assert_allclose(th, theta(16, 1e4), rtol=0)
    assert a == 1.0


# ------------------------------------------------------------------ the base bound
@pytest.mark.parametrize("method", ["none", "linear", "ntk", "yarn", "llama3"])
def test_scaled_margin_equals_direct_cosine_sum(method):
    m = np.array([0, 1, 5, 100, 1707, 4096, 65_536, 1_000_003])
    th, _ = scaled_theta(64, 1e4, method, 4.0, 2048)
    np.testing.assert_allclose(
        ce.scaled_margin(m, 64, 1e4, method, 4.0, 2048), direct_margin(m, th), atol=1e-9
    )
    assert ce.scaled_margin(0, 64, 1e4, method, 4.0, 2048) == pytest.approx(32.0)


@pytest.mark.parametrize(
    "d, base, method, s",
    [
        (32, 100.0, "none", 1.0),
        (32, 100.0, "linear", 3.0),
        (32, 100.0, "ntk", 3.0),
        (16, 1000.0, "yarn", 2.0),
    ],
)
def test_scaled_horizon_equals_brute_force(d, base, method, s):
    th, _ = scaled_theta(d, base, method, s, 256)
    m = np.arange(200_000)
    negative = np.flatnonzero(direct_margin(m, th) < 0)
    expected = int(negative[0]) if negative.size else None
    assert ce.scaled_horizon(d, base, method, s, 256, limit=200_000) == expected


@pytest.mark.parametrize("d, base, s", [(128, 1e4, 4.0), (64, 5e5, 8.0)])
def test_horizons_agree_with_the_base_bound_module(d, base, s):
    # rope_lib.base_bound is a separate implementation (certified scan of B_m): without
    # extension the horizon is max_context(b), and NTK's is max_context(b s^(d/(d-2))).
    assert ce.scaled_horizon(d, base, "none", 1.0) == rope_lib.max_context(base, d)
    assert ce.scaled_horizon(d, base, "ntk", s) == rope_lib.max_context(
        base * s ** (d / (d - 2)), d
    )
    # without extension the margin is B_m of the 30-digit frequencies b^{-2i/d}
    m = np.arange(0, 20_000, 13)
    np.testing.assert_allclose(
        ce.scaled_margin(m, d, base, "none", 3.0),
        direct_margin(m, mp_ntk(d, base, 1.0)),
        atol=1e-9,
    )


def _quarter_turn_s(h):
    """Scale factor s = 2 (h - 1/2) / pi: for d = 2 under interpolation B'_m = cos(m / s), first
    negative at the first integer m > s pi / 2 = h - 1/2, that is at m = h."""
    s = 2 * (h - 0.5) / math.pi
    t = mp.mpf(1.0 / s)  # the float64 frequency theta_0 / s = 1 / s, exactly
    assert int(mp.floor(mp.pi / 2 / t)) + 1 == h  # first m with m t > pi / 2, at 30 digits
    return s


def test_scaled_horizon_scans_each_distance_once_in_increasing_order(monkeypatch):
    """The scan evaluates B'_m at m = 0, 1, 2, ... in blocks that follow each other without gap
    or overlap, so it costs one margin per distance up to the horizon (what bounds the time of
    a limit of 2**26); here the horizon, 300,000 by the closed form, lies beyond the first
    blocks."""
    h = 300_000
    s = _quarter_turn_s(h)
    blocks = []
    exp_sum = ce.exp_sum

    def spy(m, frequencies):
        m = np.asarray(m)
        start = blocks[-1][-1] + 1 if blocks else 0
        assert m.ndim == 1 and m.size > 0 and m[0] == start
        assert np.all(np.diff(m) == 1)
        blocks.append(m.copy())
        return exp_sum(m, frequencies)

    monkeypatch.setattr(ce, "exp_sum", spy)
    assert ce.scaled_horizon(2, 10.0, "linear", s, limit=10**6) == h
    assert blocks[-1][-1] >= h


def test_scaled_horizon_default_limit_searches_below_ten_million():
    """The default limit is 10**7 (docstring): a horizon at exactly m = 10**7 lies outside the
    default search (None) and inside a search one longer."""
    n = 10**7
    s = _quarter_turn_s(n)
    assert ce.scaled_horizon(2, 10.0, "linear", s) is None
    assert ce.scaled_horizon(2, 10.0, "linear", s, limit=n + 1) == n


def test_scaled_horizon_none_below_limit():
    # B_m = cos(m) for d = 2, b irrelevant: B_0 = B_1 = 1, cos 1 > 0; cos 2 < 0.
    assert ce.scaled_horizon(2, 10.0, "none", 1.0, limit=2) is None
    assert ce.scaled_horizon(2, 10.0, "none", 1.0, limit=3) == 2


# ------------------------------------------------------------------ argument checks
@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"method": "rope"}, ValueError, r"method must be one of \('none', 'linear', 'ntk'"),
        ({"method": None}, ValueError, "method must be one of"),
        ({"factor": 0.5}, ValueError, r"factor must be a finite real number in \[1.0, inf\]"),
        ({"factor": float("nan")}, ValueError, "factor"),
        ({"factor": float("inf")}, ValueError, "factor"),
        ({"factor": True}, TypeError, "factor"),
        ({"factor": "2"}, TypeError, "factor"),
        ({"d": 7}, ValueError, "d must be an even integer"),
        ({"d": 8.0}, TypeError, "d must be an even integer"),
        ({"base": 1.0}, ValueError, "base must be"),
        ({"base": -5.0}, ValueError, "base must be"),
        ({"original_context": 0}, ValueError, "original_context"),
        ({"original_context": 10.5}, TypeError, "original_context"),
        ({"method": "yarn", "original_context": None}, ValueError, "original_context .* required"),
        (
            {"method": "dynamic", "original_context": None, "seq_len": 10},
            ValueError,
            "original_context .* required",
        ),
        (
            {"method": "dynamic"},
            ValueError,
            r"^seq_len \(the current sequence length, an integer >= 1\) is required by method "
            r"'dynamic'$",
        ),
        ({"method": "dynamic", "seq_len": 0}, ValueError, "^seq_len must be an integer >= 1"),
        ({"method": "dynamic", "seq_len": 2.5}, TypeError, "^seq_len must be an integer"),
        ({"method": "ntk", "d": 2}, ValueError, "d must be an even integer >= 4"),
        (
            {"method": "linear", "beta_fast": 3},
            TypeError,
            r"unexpected parameter\(s\) \['beta_fast'\]; it accepts: none$",
        ),
        ({"method": "yarn", "seq_len": 3}, TypeError, "accepts: beta_fast, beta_slow, truncate"),
        (
            {"method": "yarn", "beta_fast": 1.0, "beta_slow": 2.0},
            ValueError,
            "^beta_fast must be larger than beta_slow",
        ),
        (
            {"method": "yarn", "beta_fast": 2.0, "beta_slow": 2.0},
            ValueError,
            "^beta_fast must be larger than beta_slow",
        ),
        ({"method": "yarn", "beta_fast": 0.0}, ValueError, "^beta_fast must be"),
        ({"method": "yarn", "beta_fast": "32"}, TypeError, "^beta_fast must be"),
        ({"method": "yarn", "beta_slow": 0.0}, ValueError, "^beta_slow must be"),
        ({"method": "yarn", "truncate": 1}, TypeError, "^truncate must be True or False"),
        (
            {"method": "llama3", "low_freq_factor": 4.0, "high_freq_factor": 4.0},
            ValueError,
            "^high_freq_factor must be larger than low_freq_factor",
        ),
        ({"method": "llama3", "low_freq_factor": -1.0}, ValueError, "^low_freq_factor must be"),
        ({"method": "llama3", "high_freq_factor": None}, TypeError, "^high_freq_factor must be"),
    ],
)
def test_bad_arguments_raise(kwargs, error, match):
    args = {"d": 64, "base": 1e4, "method": "linear", "factor": 2.0, "original_context": 1024}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        scaled_theta(**args)


def test_bad_arguments_of_margin_and_horizon():
    with pytest.raises(ValueError, match="m must be whole numbers"):
        ce.scaled_margin(1.5, 64, 1e4, "linear", 2.0)
    with pytest.raises(ValueError, match="limit must be an integer >= 1"):
        ce.scaled_horizon(64, 1e4, "linear", 2.0, limit=0)
    with pytest.raises(ValueError, match="factor"):
        ce.yarn_attention_factor(0.9)


def test_limits_and_names_of_the_extension_arguments():
    with pytest.raises(ValueError, match=r"limit must be an integer <= 67108864"):
        ce.scaled_horizon(8, 1e4, "linear", 2.0, limit=10**15)
    with pytest.raises(ValueError, match="original_context"):
        ce.scaled_theta(8, 1e4, "yarn", 2.0, original_context=10**15)
    with pytest.raises(TypeError, match="bogus_keyword"):
        ce.scaled_theta(8, 1e4, "linear", 2.0, bogus_keyword=1)
    with pytest.raises(TypeError, match="truncate"):
        ce.scaled_theta(8, 1e4, "yarn", 2.0, 1024, truncate="no")
    # The horizon below a limit agrees with a direct scan written here.
    th, _ = ce.scaled_theta(8, 1e4, "linear", 2.0)
    direct = np.cos(np.outer(np.arange(5000.0), th)).sum(axis=1)
    neg = np.flatnonzero(direct < 0)
    expected = int(neg[0]) if neg.size else None
    assert ce.scaled_horizon(8, 1e4, "linear", 2.0, limit=5000) == expected


def test_limit_errors_say_which_limit():
    # Beyond a maximum the message names the argument, the maximum and where the limit lives.
    hint = re.escape("; a training context is a number of positions, at most MAX_POSITION = 2**32")
    with pytest.raises(ValueError, match=r"^original_context must be an integer <= 4294967296, "):
        ce.scaled_theta(8, 1e4, "yarn", 2.0, original_context=2**32 + 1)
    with pytest.raises(ValueError, match=hint + "$"):
        ce.scaled_theta(8, 1e4, "yarn", 2.0, original_context=2**32 + 1)
    hint = re.escape("; rope_lib.context_extension.MAX_HORIZON_LIMIT = 2**26 bounds the scan")
    with pytest.raises(ValueError, match=r"^limit must be an integer <= 67108864, "):
        ce.scaled_horizon(8, 1e4, "linear", 2.0, limit=2**26 + 1)
    with pytest.raises(ValueError, match=hint + "$"):
        ce.scaled_horizon(8, 1e4, "linear", 2.0, limit=2**26 + 1)


# ------------------------------------------------------------------ chapter 8, review fixes
def _first_negative(frequencies, limit):
    """First m < limit with sum_i cos(m theta_i) < 0, by direct float64 sums (None if none)."""
    for start in range(0, limit, 1 << 14):
        m = np.arange(start, min(limit, start + (1 << 14)), dtype=np.float64)
        neg = np.flatnonzero(direct_margin(m, frequencies) < 0)
        if neg.size:
            return start + int(neg[0])
    return None


@pytest.mark.parametrize(
    "base, s, h0, h",
    [(1.1e5, 2, 7951, 13265), (10**5.35, 8, 12775, 84308), (1e4, 8, 1707, 13649)],
)
def test_interpolation_horizon_is_at_most_s_h0_and_can_be_far_below(base, s, h0, h):
    """Chapter 8: B_m' = B_{m/s}, so for an integer s the horizon of interpolation is at most
    s h0 (B'_{s h0} = B_{h0} < 0), but it falls far below s h0 when B dips below zero between
    integers: for b = 1.1e5, s = 2 at 13,265 = 1.67 h0. Horizons by direct cosine scans
    written here; the expected values were found by these scans and the signs confirmed at 40
    digits; the scaled_horizon of the module must agree."""
    th = 1.0 / base ** (np.arange(0, 128, 2) / 128.0)
    assert _first_negative(th, 10**6) == h0
    assert _first_negative(th / s, 10**6) == h
    assert h <= s * h0
    assert ce.scaled_horizon(128, base, "linear", float(s)) == h
    with mp.workdps(40):
        b = mp.mpf(base)  # the float64 base the module uses
        half = mp.mpf(h) / s  # the real distance that B' reads at m = h
        value = mp.fsum(mp.cos(half * b ** (-mp.mpf(2 * i) / 128)) for i in range(64))
    assert value < 0
    if base == 1.1e5:
        assert h < 1.7 * h0  # not s h0 "up to rounding"
        assert direct_margin(np.arange(h0, dtype=np.float64), th).min() > 0.19


def test_slow_pairs_wrap_back_into_their_arc():
    """Chapter 8, running example (d = 128, b = 5e5, L = 8192, s = 8): a pair with fewer than one
    turn over L lies outside its training arc [0, L theta_i) at distances m with
    (m mod T_i) >= L, not at every m >= L. Pair 35 (T = 8218.7) is outside at only 188 of the
    57,344 distances in [L, 8L) and back inside from m = 8219; 11 of the 29 slow pairs have
    T_i < 8L. Float64 angles reduced mod 2 pi here."""
    d, base, L, s = 128, 5e5, 8192, 8
    th = base ** (-np.arange(0, d, 2) / d)
    slow = np.flatnonzero(L * th / (2 * np.pi) < 1)
    m = np.arange(L, s * L, dtype=np.float64)
    outside = {i: np.mod(m * th[i], 2 * np.pi) >= L * th[i] for i in slow}
    assert slow[0] == 35 and slow.size == 29
    assert outside[35].sum() == 188 and not outside[35][8219 - L]
    assert outside[35][: 8218 - L + 1].all()
    period = 2 * np.pi / th
    assert sum(period[i] < s * L for i in slow) == 11
    for i in slow:
        assert outside[i].all() == (period[i] >= s * L)


@pytest.mark.parametrize("s, step", [(1.5, 3), (2.5, 5), (4.0, 4)])
def test_interpolated_angle_is_met_in_training_only_when_m_over_s_is_an_integer(s, step):
    """Chapter 8: under interpolation pair 0 (theta_0 = 1) shows at distance m the angle m/s,
    an angle met in training only when m/s is an integer; for a real s = p/q in lowest terms
    that is when p divides m (s = 2.5: m = 0, 5, 10, ...)."""
    m = np.arange(0, 200)
    th, _ = scaled_theta(16, 1e4, "linear", s)
    angle = m * th[0]
    met = np.abs(angle - np.round(angle)) < 1e-9
    np.testing.assert_array_equal(met, m % step == 0)


@given(
    d=st.integers(2, 64).map(lambda k: 2 * k),
    base=st.floats(1.5, 7.0).map(lambda e: 10.0**e),
    s=st.floats(1.5, 16.0),
    L=st.sampled_from([256, 2048, 8192, 32768, 131072]),
    fast=st.sampled_from([4.0, 16.0, 32.0]),
)
def test_released_yarn_code_keeps_and_interpolates_the_paper_pairs_inside_its_conditions(
    hf, d, base, s, L, fast
):
    """Chapter 8: Hugging Face's yarn (the released code: floor, ceiling, clamps) keeps the pairs
    that turn more than beta_fast times and interpolates those that turn fewer than beta_slow = 1
    times, as the paper's ramp in the turn count does, when some pair turns at least beta_fast
    times and L < 2 pi beta_fast b^2 (floor(i(beta_fast)) <= d - 1). Turn counts from 30-digit
    frequencies; the peer's float32 tables are compared at a relative 1e-6."""
    r = L * mp_ntk(d, base, 1.0) / (2 * math.pi)
    assume(r[0] >= fast * (1 + 1e-9) and L < 2 * math.pi * fast * base**2 * (1 - 1e-9))
    assume(np.all(np.abs(r / fast - 1) > 1e-9) and np.all(np.abs(r - 1) > 1e-9))
    inv, _ = hf_extended(hf, d, base, "yarn", s, L, beta_fast=fast, beta_slow=1.0)
    th = theta(d, base)
    kept = np.isclose(inv, th, rtol=1e-6, atol=0)
    interpolated = np.isclose(inv, th / s, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(kept, r > fast)
    np.testing.assert_array_equal(interpolated, r < 1.0)


@pytest.mark.parametrize(
    "d, base, L, s",
    [(4, 10.0, 32768, 8.0), (8, 10.0, 1 << 20, 8.0), (16, 2.0, 4096, 8.0), (4, 10.0, 20107, 2.0)],
)
def test_released_yarn_code_interpolates_every_pair_when_L_reaches_2_pi_beta_fast_b_squared(
    hf, d, base, L, s
):
    """The corner of the released YaRN code: for L >= 2 pi * 32 * b^2, floor(i(32)) > d - 1,
    i_hi is clamped below i_lo and the reversed ramp interpolates every pair, although every
    pair turns more than 32 times (the paper keeps them all, and so does rope_lib). Just below
    the threshold (d = 4, b = 10: L = 20106 < 20106.19...) the released code keeps them all."""
    turns = L * theta(d, base) / (2 * math.pi)
    assert np.all(turns > 32) and L >= 2 * math.pi * 32 * base**2
    inv, _ = hf_extended(hf, d, base, "yarn", s, L)
    np.testing.assert_allclose(inv, theta(d, base) / s, rtol=1e-6, atol=0)
    th, _ = scaled_theta(d, base, "yarn", s, L)
    np.testing.assert_array_equal(th, theta(d, base))
    if (d, base) == (4, 10.0):
        below = 20106
        assert below < 2 * math.pi * 32 * base**2 < below + 1
        inv, _ = hf_extended(hf, d, base, "yarn", s, below)
        np.testing.assert_allclose(inv, theta(d, base), rtol=1e-6, atol=0)
