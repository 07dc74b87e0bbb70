"""theta(d, base) against mpmath, and the argument checks every function shares."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rope_lib import theta
from rope_lib._validate import (
    check_base,
    check_dim,
    check_integer_array,
    check_positive_int,
    check_real_array,
)

dims = st.integers(min_value=1, max_value=512).map(lambda h: 2 * h)
bases = st.floats(min_value=1.0001, max_value=1e12)


@given(d=dims, base=bases)
def test_theta_matches_mpmath_power(d: int, base: float) -> None:
    mpmath.mp.dps = 30
    expected = [
        float(mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * i) / d)) for i in range(d // 2)
    ]
    got = theta(d, base)
    # The exponent 2i/d is rounded to float64, so theta_i carries a relative error of
    # order |ln theta_i| * 2^-53: the problem's condition number, allowed here.
    tolerance = 2.0**-52 * (4.0 + 2.0 * np.abs(np.log(expected)))
    assert np.all(np.abs(got - expected) <= tolerance * np.asarray(expected))


@given(d=dims, base=bases)
def test_theta_is_decreasing_from_one(d: int, base: float) -> None:
    t = theta(d, base)
    assert t.dtype == np.float64 and t.shape == (d // 2,)
    assert t[0] == 1.0
    assert np.all(np.diff(t) < 0)


def test_theta_attention_is_all_you_need_values() -> None:
    # d = 4, b = 10^4: theta = (1, 10^-2) by hand.
    np.testing.assert_allclose(theta(4, 1e4), [1.0, 1e-2], rtol=1e-15)


def test_theta_default_base_is_ten_thousand() -> None:
    # The book's and the papers' default b = 10^4 (Vaswani et al., RoFormer): with d = 4
    # the second frequency is 10^4 ** (-1/2) = 10^-2, by hand.
    np.testing.assert_allclose(theta(4), [1.0, 1e-2], rtol=1e-15)


@pytest.mark.parametrize("d", [3, 0, -2, 1])
def test_odd_or_small_d_rejected(d: int) -> None:
    with pytest.raises(ValueError, match="d must be an even integer >= 2"):
        theta(d)


@pytest.mark.parametrize("d", [4.0, "8", True, None])
def test_non_integer_d_rejected(d) -> None:
    with pytest.raises(TypeError, match="d must be an even integer"):
        theta(d)


@pytest.mark.parametrize("base", [1.0, 0.5, -3.0, float("inf"), float("nan")])
def test_bad_base_rejected(base: float) -> None:
    with pytest.raises(ValueError, match="base must be a finite real number > 1"):
        theta(8, base)


@pytest.mark.parametrize("base", ["10000", None, 1e4 + 0j])
def test_non_real_base_rejected(base) -> None:
    with pytest.raises(TypeError, match="base must be a real number"):
        theta(8, base)


def test_numpy_integer_and_float_types_accepted() -> None:
    assert check_dim(np.int32(8)) == 8
    assert check_base(np.float32(500.0)) == 500.0
    assert check_base(10000) == 10000.0


def test_integer_array_accepts_whole_floats_and_rejects_fractions() -> None:
    np.testing.assert_array_equal(check_integer_array([0.0, 3.0, -2.0]), [0, 3, -2])
    with pytest.raises(ValueError, match="positions must be whole numbers"):
        check_integer_array([0.0, 2.5])
    with pytest.raises(ValueError, match="positions must be finite"):
        check_integer_array([0.0, np.nan])
    with pytest.raises(TypeError, match="positions must be integers"):
        check_integer_array(["a"])
    with pytest.raises(TypeError, match="positions must be integers, not booleans"):
        check_integer_array([True, False])
    with pytest.raises(ValueError, match="positions must be a 1-D array"):
        check_integer_array([[1, 2]], ndim=1)


def test_positive_int_and_real_array() -> None:
    assert check_positive_int(4096, "context_length") == 4096
    assert check_positive_int(1024.0, "context_length") == 1024
    with pytest.raises(ValueError, match="context_length must be an integer >= 1"):
        check_positive_int(0, "context_length")
    with pytest.raises(TypeError, match="context_length must be an integer >= 1"):
        check_positive_int(10.5, "context_length")
    with pytest.raises(ValueError, match="distance must be finite"):
        check_real_array([1.0, np.inf], "distance")
    with pytest.raises(TypeError, match="distance must be real numbers"):
        check_real_array([1j], "distance")


def test_numbers_beyond_float64_are_refused_by_name():
    # fuzz item 1: a Python int too large for a float is a ValueError naming the argument,
    # not an OverflowError from float().
    from rope_lib._validate import check_positive_int, check_real, check_seed

    with pytest.raises(ValueError, match="base"):
        check_base(10**400)
    with pytest.raises(ValueError, match="atol"):
        check_real(10**400, "atol", 0.0)
    with pytest.raises(ValueError, match="rho"):
        check_real(-(10**400), "rho", -1.0, 1.0)
    with pytest.raises(ValueError, match="steps"):
        check_positive_int(__import__("fractions").Fraction(10**400, 3), "steps")
    with pytest.raises(ValueError, match="seed"):
        check_seed(2**64 + 5, maximum=2**64 - 1)
    assert check_seed(2**64 + 5) == 2**64 + 5  # numpy's default_rng takes any int >= 0
    with pytest.raises(ValueError, match="base"):
        theta(8, base=10**400)


def test_angles_are_position_times_theta_by_mpmath() -> None:
    # angles(m, d, b)[k, i] = m_k * b^(-2i/d), each computed here in 30-digit mpmath: the
    # table every RoPE route and the sinusoidal encoding start from.  Integer and real
    # positions, a negative one, a large one, and a base other than the default.
    from rope_lib.frequencies import angles

    mpmath.mp.dps = 30
    positions = np.array([0.0, 1.0, -3.0, 2.5, 4096.0, 1e7])
    for d, base in [(8, 10000.0), (6, 500.0)]:
        expected = [
            [
                float(mpmath.mpf(m) * mpmath.power(base, -mpmath.mpf(2 * i) / d))
                for i in range(d // 2)
            ]
            for m in positions
        ]
        got = angles(positions, d, base)
        assert got.dtype == np.float64 and got.shape == (len(positions), d // 2)
        # theta_i to about |ln theta_i| 2^-53 relative (test above), then one rounding.
        np.testing.assert_allclose(got, expected, rtol=2.0**-52 * 32, atol=0.0)
