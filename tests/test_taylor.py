"""Tests of rope_lib.taylor: the six terms against independent routes (polynomial truncation,
series along a ray, finite differences), the cubic order of the remainder and bad input."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lib import taylor as ty

from .taylor_routes import RATIONAL_POINT, naive_model, output_model_by_hand, own_slope

# ---------------------------------------------------------------------------------------------
# independent implementations
# ---------------------------------------------------------------------------------------------


def test_model_equals_softmax_form():
    f, x_m, x_n = ty.attention_output_model(2)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.standard_normal((2, 2))
        value = float(f.subs(dict(zip(x_m + x_n, [*a, *b], strict=True))))
        assert value == pytest.approx(naive_model(a, b), rel=1e-13)


def test_terms_match_series_along_a_ray(output_expansion, ray_coeffs):
    ex = output_expansion
    p = RATIONAL_POINT
    c0, c1, c2 = ray_coeffs
    values = {
        name: float(
            term.subs(
                dict(
                    zip(
                        ex.x_m + ex.x_n + ex.p_m + ex.p_n,
                        [*p["x_m"], *p["x_n"], *p["p_hat_m"], *p["p_hat_n"]],
                        strict=True,
                    )
                )
            )
        )
        for name, term in ex.terms.items()
    }
    assert values["constant"] == pytest.approx(c0, rel=1e-12)
    assert values["linear_m"] + values["linear_n"] == pytest.approx(c1, rel=1e-12)
    second = values["quadratic_m"] + values["quadratic_n"] + values["cross"]
    assert second == pytest.approx(c2, rel=1e-12)


def test_cross_term_matches_finite_difference(output_expansion):
    ex = output_expansion
    p = RATIONAL_POINT
    h = 1e-4

    def g(a, b):
        return naive_model(p["x_m"] + a * p["p_hat_m"], p["x_n"] + b * p["p_hat_n"])

    mixed = (g(h, h) - g(h, -h) - g(-h, h) + g(-h, -h)) / (4 * h * h)
    eps = np.array([0.3])
    cross = ty.term_sizes(ex, p, eps)["cross"][0]
    assert cross == pytest.approx(abs(mixed) * 0.09, rel=1e-6)


def _random_cubic_expansion(seed: int, d: int):
    """The expansion of a random cubic polynomial in x_m, x_n (d coordinates each), with
    integer coefficients in [-3, 3]."""
    rng = np.random.default_rng(seed)
    x_m = tuple(sp.symbols(f"a0:{d}", real=True))
    x_n = tuple(sp.symbols(f"b0:{d}", real=True))
    monomials = [
        sp.Mul(*combo)
        for k in range(4)
        for combo in itertools.combinations_with_replacement(x_m + x_n, k)
    ]
    coeffs = rng.integers(-3, 4, size=len(monomials))
    f = sum(int(c) * mono for c, mono in zip(coeffs, monomials, strict=True))
    return ty.second_order_expansion(f, x_m, x_n)


def _perturbed_terms(ex, keep) -> sp.Expr:
    """The monomials of the expanded f(x + p) whose exponents in (p_m, p_n) satisfy keep."""
    p = ex.p_m + ex.p_n
    poly = sp.Poly(sp.expand(ex.perturbed()), *p)
    return sum(
        coeff * sp.Mul(*(s**k for s, k in zip(p, powers, strict=True)))
        for powers, coeff in poly.terms()
        if keep(powers)
    )


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 2))
def test_expansion_of_cubic_is_its_truncation(seed, d):
    """For a random cubic polynomial the six terms are exactly its part of degree <= 2 in p."""
    ex = _random_cubic_expansion(seed, d)
    # independent route: expand f(x + p) and keep the monomials of degree <= 2 in p
    truncated = _perturbed_terms(ex, lambda powers: sum(powers) <= 2)
    assert sp.expand(ex.total() - truncated) == 0


def test_general_function_only_cross_term_couples_positions():
    x_m = sp.symbols("x_m0 x_m1", real=True)
    x_n = sp.symbols("x_n0 x_n1", real=True)
    f = sp.Function("f")(*x_m, *x_n)
    ex = ty.second_order_expansion(f, x_m, x_n)
    mixed = ex.mixed_dependence()
    for name in ty.TERM_NAMES[:-1]:
        assert mixed[name].is_zero_matrix, name
    expected = sp.Matrix(2, 2, lambda i, j: sp.Derivative(f, x_m[i], x_n[j]))
    assert (mixed["cross"] - expected).applyfunc(sp.simplify).is_zero_matrix


def test_score_model_expansion_is_exact():
    f, x_m, x_n, a = ty.score_model(2)
    ex = ty.second_order_expansion(f, x_m, x_n)
    assert sp.expand(ex.perturbed() - ex.total()) == 0
    assert (ex.hess_mn - a / sp.sqrt(2)).is_zero_matrix
    assert ex.terms["quadratic_m"] == 0 and ex.terms["quadratic_n"] == 0


# ---------------------------------------------------------------------------------------------
# the remainder is of third order
# ---------------------------------------------------------------------------------------------


def test_remainder_is_cubic_by_an_independent_route(output_expansion, ray_coeffs):
    p = RATIONAL_POINT
    ex = output_expansion
    c0, c1, c2 = ray_coeffs
    eps = np.geomspace(1e-2, 1e-1, 8)
    err = np.array(
        [
            abs(
                naive_model(p["x_m"] + e * p["p_hat_m"], p["x_n"] + e * p["p_hat_n"])
                - (c0 + c1 * e + c2 * e * e)
            )
            for e in eps
        ]
    )
    slope = own_slope(eps, err)
    assert 2.9 < slope < 3.1
    # the library's high-precision remainder agrees with this float64 route
    np.testing.assert_allclose(ty.expansion_error(ex, p, eps), err, rtol=1e-6)
    assert ty.loglog_slope(eps, err) == pytest.approx(slope, rel=1e-10)


def test_remainder_of_score_model_vanishes():
    f, x_m, x_n, a = ty.score_model(2)
    f = f.subs({a[0, 0]: 1, a[0, 1]: 2, a[1, 0]: -1, a[1, 1]: sp.Rational(1, 2)})
    ex = ty.second_order_expansion(f, x_m, x_n)
    err = ty.expansion_error(ex, ty.demo_point(2, seed=4), [0.01, 0.1, 1.0, 10.0])
    assert np.all(err < 1e-25)


@given(st.floats(-3, 3), st.floats(0.1, 10), st.integers(1, 5))
def test_loglog_slope_recovers_power(log_c, scale, k):
    eps = np.geomspace(1e-3, 1, 7) * scale
    assert ty.loglog_slope(eps, math.exp(log_c) * eps**k) == pytest.approx(k, abs=1e-9)


def test_term_sizes_match_numerical_derivatives_of_the_model(output_expansion):
    """Independent route: each term from derivatives of the model along the ray taken by
    mpmath's numerical differentiation (not sympy's), at two sizes eps: with
    g(s, t) = f(x_m + s p_hat_m, x_n + t p_hat_n), the terms are g, eps g_s, eps g_t,
    eps^2 g_ss / 2, eps^2 g_tt / 2 and eps^2 g_st at s = t = 0.  The remainder is what the six
    leave of f along the ray, so it shrinks like eps^3 (ratio 8 when eps doubles)."""
    point = ty.demo_point(2)
    f = sp.lambdify(output_expansion.x_m + output_expansion.x_n, output_expansion.f, "mpmath")
    xm, xn = point["x_m"], point["x_n"]
    um, un = point["p_hat_m"], point["p_hat_n"]
    with mpmath.workdps(40):

        def g(s, t):
            return f(*[xm[i] + s * um[i] for i in range(2)], *[xn[i] + t * un[i] for i in range(2)])

        def d(ks, kt):
            return mpmath.diff(g, (0, 0), (ks, kt))

        derivs = {
            "constant": g(0, 0),
            "linear_m": d(1, 0),
            "linear_n": d(0, 1),
            "quadratic_m": d(2, 0) / 2,
            "quadratic_n": d(0, 2) / 2,
            "cross": d(1, 1),
        }
        orders = {"constant": 0, "linear_m": 1, "linear_n": 1}
        eps = np.array([0.01, 0.02])
        sizes = ty.term_sizes(output_expansion, point, eps)
        for name, value in derivs.items():
            expected = [float(abs(value * mpmath.mpf(e) ** orders.get(name, 2))) for e in eps]
            np.testing.assert_allclose(sizes[name], expected, rtol=1e-12, err_msg=name)
    assert sizes["remainder"][1] / sizes["remainder"][0] == pytest.approx(8.0, rel=0.05)


# ---------------------------------------------------------------------------------------------
# the exact interaction I against the cross term
# ---------------------------------------------------------------------------------------------
@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 2))
def test_symbolic_interaction_is_the_mixed_part_of_a_cubic(seed, d):
    """Independent route: expand f(x + p) for a random cubic and keep every monomial that holds
    at least one coordinate of p_m and at least one of p_n."""
    ex = _random_cubic_expansion(seed, d)
    mixed = _perturbed_terms(ex, lambda powers: sum(powers[:d]) > 0 and sum(powers[d:]) > 0)
    assert sp.expand(ex.interaction() - mixed) == 0


def test_interaction_of_a_quadratic_is_the_cross_term():
    """For f = x_m^T M x_n + (single-position terms), I = eps^2 u_m^T M u_n exactly."""
    a = sp.symbols("a0:2", real=True)
    b = sp.symbols("b0:2", real=True)
    m = np.array([[1.5, -2.0], [0.25, 3.0]])
    f = sum(sp.Rational(str(m[i, j])) * a[i] * b[j] for i in range(2) for j in range(2))
    f += 3 * a[0] ** 2 - a[1] + b[0] * b[1] + 7
    ex = ty.second_order_expansion(f, a, b)
    p = RATIONAL_POINT
    eps = np.array([0.01, 0.5, 2.0, 40.0])
    got = ty.interaction_along_ray(ex, p, eps)
    expected = eps**2 * (p["p_hat_m"] @ m @ p["p_hat_n"])
    np.testing.assert_allclose(got["interaction"], expected, rtol=1e-14)
    np.testing.assert_allclose(got["cross"], expected, rtol=1e-14)
    assert np.all(got["beyond_cross"] < 1e-25 * np.maximum(1.0, np.abs(expected)))


def test_interaction_matches_sympy_exact_at_a_rational_point():
    """The attention output model, written independently (quotient of exponentials), at a
    rational point and eps = 1/2: I from 40-digit sympy against the library."""
    f, x_m, x_n = output_model_by_hand()
    p = {k: [sp.Rational(str(v)) for v in vals] for k, vals in RATIONAL_POINT.items()}
    e = sp.Rational(1, 2)
    moved_m = [v + e * w for v, w in zip(p["x_m"], p["p_hat_m"], strict=True)]
    moved_n = [v + e * w for v, w in zip(p["x_n"], p["p_hat_n"], strict=True)]

    def at(xm, xn):
        return f.subs(dict(zip(x_m + x_n, [*xm, *xn], strict=True)), simultaneous=True)

    exact = at(moved_m, moved_n) - at(moved_m, p["x_n"]) - at(p["x_m"], moved_n)
    exact += at(p["x_m"], p["x_n"])
    f_lib, lm, ln = ty.attention_output_model(2)
    got = ty.interaction_along_ray(ty.second_order_expansion(f_lib, lm, ln), RATIONAL_POINT, [0.5])
    assert got["interaction"][0] == pytest.approx(float(sp.N(exact, 40)), rel=1e-13)


def test_coupling_beyond_the_cross_term_is_cubic(output_expansion):
    p = RATIONAL_POINT
    eps = np.geomspace(1e-3, 1e-2, 6)
    got = ty.interaction_along_ray(output_expansion, p, eps)
    assert 2.95 < own_slope(eps, got["beyond_cross"]) < 3.05
    # the cross term from the finite-difference mixed derivative of the naive model
    h = 1e-4

    def g(a, b):
        return naive_model(p["x_m"] + a * p["p_hat_m"], p["x_n"] + b * p["p_hat_n"])

    mixed = (g(h, h) - g(h, -h) - g(-h, h) + g(-h, -h)) / (4 * h * h)
    np.testing.assert_allclose(got["cross"], mixed * eps**2, rtol=1e-6)


def test_interaction_float64_route_at_moderate_eps(output_expansion):
    p = RATIONAL_POINT
    eps = np.array([0.2, 0.5, 1.0, 2.0])
    got = ty.interaction_along_ray(output_expansion, p, eps)
    for e, value in zip(eps, got["interaction"], strict=True):
        xm, xn = p["x_m"] + e * p["p_hat_m"], p["x_n"] + e * p["p_hat_n"]
        direct = (
            naive_model(xm, xn)
            - naive_model(xm, p["x_n"])
            - naive_model(p["x_m"], xn)
            + naive_model(p["x_m"], p["x_n"])
        )
        assert value == pytest.approx(direct, rel=1e-9, abs=1e-14)


def test_diagonal_spread():
    toeplitz = np.array([[1.0, 2.0, 3.0], [4.0, 1.0, 2.0], [5.0, 4.0, 1.0]])
    assert ty.diagonal_spread(toeplitz) == 0.0
    bumped = toeplitz.copy()
    bumped[2, 1] = 4.5  # diagonal m - n = 1 now holds 4 and 4.5
    assert ty.diagonal_spread(bumped) == pytest.approx(0.5)
    assert ty.diagonal_spread([[7.0]]) == 0.0
    # the Gram matrix of unit vectors at angles m * 0.3 depends on m - n only
    angles = 0.3 * np.arange(10)
    p = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    assert ty.diagonal_spread(p @ p.T) < 1e-15


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
def _sym_model():
    f, x_m, x_n, _ = ty.score_model(1)
    return f, x_m, x_n


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: ty.second_order_expansion(1.0, *_sym_model()[1:]), TypeError, "f must"),
        (lambda: ty.second_order_expansion(_sym_model()[0], [], _sym_model()[2]), TypeError, "x_m"),
        (lambda: ty.second_order_expansion(_sym_model()[0], _sym_model()[1], 3), TypeError, "x_n"),
        (
            lambda: ty.second_order_expansion(_sym_model()[0], _sym_model()[1], _sym_model()[1]),
            ValueError,
            "disjoint",
        ),
        (
            lambda: ty.second_order_expansion(*_sym_model(), p_m=sp.symbols("u v")),
            ValueError,
            "p_m and p_n",
        ),
        (
            lambda: ty.second_order_expansion(*_sym_model(), p_m=_sym_model()[1]),
            ValueError,
            "p_m and p_n must be new",
        ),
        (lambda: ty.score_model(5), ValueError, "d must"),
        (lambda: ty.attention_output_model(0), ValueError, "d must"),
        (lambda: ty.attention_output_model(2, readout=[1.0]), ValueError, "readout"),
        (lambda: ty.demo_point(2, seed=-1), ValueError, "seed"),
        (lambda: ty.loglog_slope([1, 2], [1, -1]), ValueError, "positive"),
        (lambda: ty.loglog_slope([1], [1]), ValueError, "eps and err"),
        (lambda: ty.loglog_slope([1, 1], [1, 2]), ValueError, "distinct"),
        (lambda: ty.expansion_error("x", ty.demo_point(), [0.1]), TypeError, "expansion"),
        (lambda: ty.expansion_error(_expansion(), ty.demo_point(), [0.0]), ValueError, "eps"),
        (lambda: ty.expansion_error(_expansion(), {"x_m": [0, 0]}, [0.1]), ValueError, "point"),
        (lambda: ty.expansion_error(_expansion(), ty.demo_point(3), [0.1]), ValueError, "x_m"),
        (
            lambda: ty.expansion_error(_expansion(), ty.demo_point(), [0.1], dps=5),
            ValueError,
            "dps",
        ),
        (
            lambda: ty.expansion_error(
                ty.second_order_expansion(*_score2()), ty.demo_point(), [0.1]
            ),
            ValueError,
            "free symbols",
        ),
        (lambda: ty.diagonal_spread(np.ones((2, 3))), ValueError, "square"),
        (lambda: ty.diagonal_spread(np.ones(3)), ValueError, "square"),
        (lambda: ty.interaction_along_ray("x", ty.demo_point(), [0.1]), TypeError, "expansion"),
        (
            lambda: ty.interaction_along_ray(_expansion(), ty.demo_point(), [-1.0]),
            ValueError,
            "eps",
        ),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def _expansion():
    f, x_m, x_n = ty.attention_output_model(2)
    return ty.second_order_expansion(f, x_m, x_n)


def _score2():
    f, x_m, x_n, _ = ty.score_model(2)
    return f, x_m, x_n


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# argument validation (issue 11): names, limits, unusual but valid forms
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: ty.demo_point(d=10**9), ValueError, "d must be an integer <= 65536"),
        (lambda: ty.demo_point(seed=2.5), TypeError, "seed must"),
        (lambda: ty.demo_point(seed="0"), TypeError, "seed must"),
        (lambda: ty.second_order_expansion(object(), *_sym_model()[1:]), TypeError, "f must"),
        (lambda: ty.second_order_expansion(*_sym_model()[:2], object()), TypeError, "x_n must"),
        (
            lambda: ty.expansion_error(_expansion(), ty.demo_point(), [0.1], dps=1001),
            ValueError,
            "dps must be an integer <= 1000",
        ),
        (
            lambda: ty.term_sizes(_expansion(), ty.demo_point(), [0.1], dps=10**15),
            ValueError,
            "dps must",
        ),
        (
            lambda: ty.interaction_along_ray(_expansion(), ty.demo_point(), [0.1], dps=2.5),
            TypeError,
            "dps must",
        ),
        (
            lambda: ty.expansion_error(_expansion(), ty.demo_point(), np.ones(4097)),
            ValueError,
            "eps must hold at most 4096",
        ),
        (
            lambda: ty.expansion_error(_expansion(), ty.demo_point(), [1e300]),
            ValueError,
            "eps .* overflows",
        ),
        (
            lambda: ty.interaction_along_ray(_expansion(), ty.demo_point(), [1e300]),
            ValueError,
            "eps .* overflows",
        ),
        (lambda: ty.term_sizes(object(), ty.demo_point(), [0.1]), TypeError, "expansion must"),
        (lambda: ty.term_sizes(_expansion(), [1, 2], [0.1]), TypeError, "point must"),
        (lambda: ty.attention_output_model(2, readout=object()), TypeError, "readout"),
    ],
)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("d", [1, 3])
def test_odd_widths_are_valid(d):
    """Nothing rotates coordinate pairs here, so an odd model width is a valid width: the
    remainder of the score model (bilinear) vanishes and the output model's is cubic."""
    point = ty.demo_point(d, seed=1)
    assert all(v.shape == (d,) for v in point.values())
    np.testing.assert_allclose(
        [np.linalg.norm(point["p_hat_m"]), np.linalg.norm(point["p_hat_n"])], 1.0, rtol=1e-15
    )
    f, x_m, x_n, _ = ty.score_model(d)
    m_values = {
        s: sp.Rational(k + 1, 3)
        for k, s in enumerate(sorted(f.free_symbols - set(x_m + x_n), key=str))
    }
    score = ty.second_order_expansion(f.subs(m_values), x_m, x_n)
    assert np.all(ty.expansion_error(score, point, [0.5, 1.0]) < 1e-30)
    f, x_m, x_n = ty.attention_output_model(d)
    eps = np.array([1e-3, 2e-3, 4e-3])
    slope = own_slope(eps, ty.expansion_error(ty.second_order_expansion(f, x_m, x_n), point, eps))
    assert 2.9 < slope < 3.1


def test_dps_limit_is_inclusive_and_unusual_forms_agree(output_expansion):
    point = ty.demo_point(2)
    at_limit = ty.expansion_error(output_expansion, point, [0.1], dps=1000)
    default = ty.expansion_error(output_expansion, point, [0.1])
    np.testing.assert_allclose(at_limit, default, rtol=1e-12)
    same = ty.expansion_error(output_expansion, point, (0.1,), dps=np.int64(40))
    np.testing.assert_array_equal(same, default)
    np.testing.assert_array_equal(
        ty.demo_point(np.int64(3), np.uint8(2))["x_m"], ty.demo_point(3, 2)["x_m"]
    )


# --------------------------------------------------------------------- fuzz regressions


@pytest.mark.parametrize("key", ["x_m", "x_n", "p_hat_m", "p_hat_n"])
@pytest.mark.parametrize("check", [ty.expansion_error, ty.term_sizes, ty.interaction_along_ray])
def test_huge_point_is_refused_by_name(output_expansion, check, key):
    """Fuzz item 19: x_m = [1e300, 1e300] lost every digit of the remainder to round-off
    and returned 0 (term_sizes a constant 2e300); entries beyond 1e6 are refused, naming
    the entry of point."""
    point = dict(ty.demo_point(2))
    point[key] = np.array([1e300, 1e300])
    with pytest.raises(ValueError, match=rf"^point\['{key}'\] must have magnitude <= 1e\+06"):
        check(output_expansion, point, [1e-2, 1e-1])


def test_point_at_the_limit_is_accepted(output_expansion):
    point = dict(ty.demo_point(2))
    point["p_hat_m"] = np.array([1e6, -1e6])
    assert np.all(np.isfinite(ty.expansion_error(output_expansion, point, [1e-3])))


@pytest.mark.parametrize("key", ["x_m", "x_n", "p_hat_m", "p_hat_n"])
def test_bad_point_entries_are_named_as_entries_of_point(output_expansion, key):
    """Fuzz item 26: the messages named the dict key alone ("x_m must have shape (2,)");
    they now name point['x_m'], so the caller knows which argument is meant."""
    wrong_shape = dict(ty.demo_point(2), **{key: np.ones(3)})
    with pytest.raises(ValueError, match=rf"^point\['{key}'\] must have shape \(2,\)"):
        ty.expansion_error(output_expansion, wrong_shape, [0.1])
    not_finite = dict(ty.demo_point(2), **{key: [np.nan, 0.0]})
    with pytest.raises(ValueError, match=rf"^point\['{key}'\] must be finite"):
        ty.term_sizes(output_expansion, not_finite, [0.1])
    text = dict(ty.demo_point(2), **{key: "ab"})
    with pytest.raises(TypeError, match=rf"^point\['{key}'\] must be real numbers"):
        ty.interaction_along_ray(output_expansion, text, [0.1])


# ---------------------------------------------------------------------------------------------
# what the mutation run of rope_lib/taylor.py found unguarded (tools/mutation.py)
# ---------------------------------------------------------------------------------------------
def test_gradient_and_hessian_blocks_match_a_hand_derivation():
    """f = a0^2 b0 + a1 b1 + 3 a1 + b0^3, differentiated by hand: grad_m = (2 a0 b0, b1 + 3),
    grad_n = (a0^2 + 3 b0^2, a1), H_mm = [[2 b0, 0], [0, 0]], H_nn = [[6 b0, 0], [0, 0]],
    H_mn = [[2 a0, 0], [0, 1]] (rows: x_m)."""
    a0, a1, b0, b1 = sp.symbols("a0 a1 b0 b1", real=True)
    ex = ty.second_order_expansion(a0**2 * b0 + a1 * b1 + 3 * a1 + b0**3, (a0, a1), (b0, b1))
    expected = {
        "grad_m": sp.Matrix([2 * a0 * b0, b1 + 3]),
        "grad_n": sp.Matrix([a0**2 + 3 * b0**2, a1]),
        "hess_mm": sp.Matrix([[2 * b0, 0], [0, 0]]),
        "hess_nn": sp.Matrix([[6 * b0, 0], [0, 0]]),
        "hess_mn": sp.Matrix([[2 * a0, 0], [0, 1]]),
    }
    for name, matrix in expected.items():
        got = getattr(ex, name)
        assert isinstance(got, sp.MatrixBase), name
        assert (got - matrix).expand().is_zero_matrix, name


def test_explicit_perturbation_symbols_and_bare_symbols_are_used():
    """p_m, p_n given by the caller are the symbols of the terms, and a single symbol is
    accepted where a sequence is expected. For f = a^2 b, by hand: linear_m = 2 a b u,
    linear_n = a^2 v, quadratic_m = b u^2, quadratic_n = 0, cross = 2 a u v, and the
    interaction I = ((a + u)^2 - a^2) v."""
    a, b, u, v = sp.symbols("a b u v", real=True)
    ex = ty.second_order_expansion(a**2 * b, a, b, p_m=u, p_n=[v])
    assert (ex.x_m, ex.x_n, ex.p_m, ex.p_n) == ((a,), (b,), (u,), (v,))
    by_hand = {
        "constant": a**2 * b,
        "linear_m": 2 * a * b * u,
        "linear_n": a**2 * v,
        "quadratic_m": b * u**2,
        "quadratic_n": 0,
        "cross": 2 * a * u * v,
    }
    for name, term in by_hand.items():
        assert sp.expand(ex.terms[name] - term) == 0, name
    # I = ((a + u)^2 - a^2) v, by hand
    assert sp.expand(ex.interaction() - (2 * a * u + u**2) * v) == 0


@pytest.mark.parametrize(
    ("p_m", "p_n"),
    [
        # the same symbol for both perturbations
        (sp.symbols("u", real=True), sp.symbols("u", real=True)),
        # a symbol of f that is not a coordinate (the matrix entry M_00 of the score model)
        ([ty.score_model(1)[3][0, 0]], sp.symbols("v", real=True)),
    ],
)
def test_perturbation_symbols_must_be_new_and_distinct(p_m, p_n):
    f, x_m, x_n = _sym_model()
    with pytest.raises(
        ValueError, match=r"^p_m and p_n must be new, distinct symbols that do not occur in f$"
    ):
        ty.second_order_expansion(f, x_m, x_n, p_m=p_m, p_n=p_n)


def test_hand_built_expansion_with_too_few_perturbations_is_refused():
    """SecondOrderExpansion is public and can be built by hand; it refuses p_m, p_n whose
    lengths differ from x_m, x_n instead of shifting some coordinates and not others.  With
    p_m one symbol short and p_n one long the total length is right, so a zip over the
    concatenations would pair x_m's last coordinate with p_n's first."""
    ex = ty.second_order_expansion(*ty.attention_output_model(2))
    a, b, c = sp.symbols("a b c", real=True)
    lengths = r"p_m and p_n must have the lengths of x_m \(2\) and x_n \(2\), got "
    with pytest.raises(ValueError, match=lengths + "2 and 1"):
        dataclasses.replace(ex, p_n=ex.p_n[:1])
    with pytest.raises(ValueError, match=lengths + "1 and 3"):
        dataclasses.replace(ex, p_m=(a,), p_n=(b, c, ex.p_n[0]))
    with pytest.raises(ValueError, match=lengths + "2 and 3"):
        dataclasses.replace(ex, p_n=(b, c, ex.p_n[0]))


def test_symbols_of_the_models_are_real():
    """The chapter's vectors x_m, x_n, p_m, p_n and the matrix M are real: the symbols say so,
    so sympy treats the score as real (its conjugate is itself)."""
    f, x_m, x_n, m = ty.score_model(2)
    g, y_m, y_n = ty.attention_output_model(2)
    ex = ty.second_order_expansion(f, x_m, x_n)
    out = ty.second_order_expansion(g, y_m, y_n)
    for s in (*x_m, *x_n, *m, *y_m, *y_n, *ex.p_m, *ex.p_n, *out.p_m, *out.p_n):
        assert s.is_real is True, s
    assert sp.conjugate(f) == f
    assert sp.conjugate(ex.terms["cross"]) == ex.terms["cross"]


def test_readout_weights_the_output_coordinates():
    """The model with readout c against the softmax form written here with math.exp:
    c^T (e^{s_mm} x_m + e^{s_mn} x_n) / (e^{s_mm} + e^{s_mn}), s = x^T y / sqrt(d)."""
    c = [2.0, -0.5, 0.25]
    f, x_m, x_n = ty.attention_output_model(3, readout=c)
    rng = np.random.default_rng(5)
    for _ in range(3):
        a, b = rng.standard_normal((2, 3))
        s_mm, s_mn = a @ a / math.sqrt(3), a @ b / math.sqrt(3)
        w_m, w_n = math.exp(s_mm), math.exp(s_mn)
        expected = float(np.dot(c, (w_m * a + w_n * b) / (w_m + w_n)))
        value = float(f.subs(dict(zip(x_m + x_n, [*a, *b], strict=True))))
        assert value == pytest.approx(expected, rel=1e-13)


def test_width_four_is_the_largest_accepted():
    """The symbolic models accept d from 1 to 4 (their docstrings); 4 is accepted."""
    f, x_m, x_n, m = ty.score_model(4)
    assert len(x_m) == len(x_n) == 4 and m.shape == (4, 4)
    g, y_m, y_n = ty.attention_output_model(4)
    assert len(y_m) == len(y_n) == 4 and g.free_symbols == set(y_m + y_n)


def test_limits_of_dps_and_eps_are_inclusive():
    """dps = 16 (the documented minimum) and 4096 perturbation sizes (the documented maximum)
    are accepted. For f = a b the expansion is exact, so every remainder is round-off."""
    a, b = sp.symbols("a b", real=True)
    ex = ty.second_order_expansion(a * b, [a], [b])
    point = {"x_m": [0.5], "x_n": [-0.25], "p_hat_m": [1.0], "p_hat_n": [1.0]}
    assert ty.expansion_error(ex, point, [0.1], dps=16)[0] < 1e-15
    assert np.all(ty.expansion_error(ex, point, np.linspace(0.001, 1.0, 4096)) < 1e-30)


def test_documented_defaults():
    """The defaults the rendered signatures show: d = 2 for the models; seed 0 for demo_point
    (the figures' default point); dps = 40, the '40-digit arithmetic' chapter 2 states for
    expansion_error and interaction_along_ray, for all three numerical checks."""

    def default(func, name):
        return inspect.signature(func).parameters[name].default

    assert default(ty.score_model, "d") == 2
    assert default(ty.attention_output_model, "d") == 2
    assert default(ty.attention_output_model, "readout") is None
    assert default(ty.demo_point, "d") == 2
    assert default(ty.demo_point, "seed") == 0
    for check in (ty.expansion_error, ty.term_sizes, ty.interaction_along_ray):
        assert default(check, "dps") == 40, check.__name__


def test_defaults_as_calls_see_them():
    """The same defaults, through calls (a signature can show one default while the code
    uses another): the models are two-dimensional and demo_point() is the seed-0 point."""
    f, x_m, x_n, m = ty.score_model()
    assert len(x_m) == len(x_n) == 2 and m.shape == (2, 2)
    g, y_m, y_n = ty.attention_output_model()
    assert len(y_m) == len(y_n) == 2
    plain, seeded, other = ty.demo_point(), ty.demo_point(2, 0), ty.demo_point(2, 1)
    assert all(np.array_equal(plain[k], seeded[k]) for k in seeded)
    assert not all(np.array_equal(plain[k], other[k]) for k in other)


def _line_point(x: float = 0.0, u: float = 1.0) -> dict[str, list[float]]:
    return {"x_m": [x], "x_n": [x], "p_hat_m": [u], "p_hat_n": [u]}


def _one_dim(f_of):
    a, b = sp.symbols("a b", real=True)
    return ty.second_order_expansion(f_of(a, b), [a], [b])


_OVERFLOW = "float64; use smaller eps or a smaller point$"


@pytest.mark.parametrize(
    ("call", "what"),
    [
        # the attention output at eps = 1e300: the quadratic terms ~ eps^2 overflow first
        (lambda: ty.expansion_error(_expansion(), ty.demo_point(), [1e300]), r"the term '\w+'"),
        # exp(a b) at a = b = 0, u = 1, eps = 30: the terms are 1 and eps^2 = 900 (the only
        # nonzero derivatives at 0 are f and the mixed one), the model is e^900 > 1.8e308
        (
            lambda: ty.expansion_error(_one_dim(lambda a, b: sp.exp(a * b)), _line_point(), [30.0]),
            "the model",
        ),
        # exp(a) + exp(b) at 0, u = -1, eps = 1.8e154: terms 2, -eps, -eps, eps^2/2, eps^2/2
        # (each < 1.8e308), the model 2 e^-eps ~ 0, the remainder ~ eps^2 = 3.2e308
        (
            lambda: ty.expansion_error(
                _one_dim(lambda a, b: sp.exp(a) + sp.exp(b)), _line_point(u=-1.0), [1.8e154]
            ),
            "the remainder",
        ),
        # exp(a b) at eps = 30: I = e^900 - 1 - 1 + 1 overflows (checked before the cross term)
        (
            lambda: ty.interaction_along_ray(
                _one_dim(lambda a, b: sp.exp(a * b)), _line_point(), [30.0]
            ),
            "the interaction",
        ),
        # sin(a b) at eps = 1e160: |I| <= 4, the cross term eps^2 (H = cos 0 = 1) overflows
        (
            lambda: ty.interaction_along_ray(
                _one_dim(lambda a, b: sp.sin(a * b)), _line_point(), [1e160]
            ),
            "the cross term",
        ),
        # a b - K a^2 b^2, K = 2e-308, at 0, eps = 1e154: cross eps^2 = 1e308, I = eps^2 - K eps^4
        # = -1e308, both finite; |I - cross| = K eps^4 = 2e308 overflows
        (
            lambda: ty.interaction_along_ray(
                _one_dim(lambda a, b: a * b - sp.Rational(2, 10**308) * a**2 * b**2),
                _line_point(),
                [1e154],
            ),
            "the interaction beyond the cross term",
        ),
    ],
)
def test_overflow_is_refused_naming_the_quantity(call, what):
    with pytest.raises(
        ValueError,
        match=rf"^eps \(with point\) holds perturbation sizes so large that {what} overflows "
        + _OVERFLOW,
    ):
        call()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: ty.second_order_expansion(1.0, *_sym_model()[1:]),
            TypeError,
            "f must be a sympy expression, got float",
        ),
        (
            lambda: ty.second_order_expansion(_sym_model()[0], _sym_model()[1], _sym_model()[1]),
            ValueError,
            "x_m and x_n must be disjoint sets of symbols",
        ),
        (
            lambda: ty.expansion_error("x", ty.demo_point(), [0.1]),
            TypeError,
            "expansion must be a SecondOrderExpansion, got str",
        ),
        *[
            (
                lambda eps=eps: ty.expansion_error(_expansion(), ty.demo_point(), eps),
                ValueError,
                "eps must be a non-empty 1-D array of positive perturbation sizes",
            )
            for eps in ([0.1, 0.0], [], [[0.1, 0.2]])
        ],
        (
            lambda: ty.expansion_error(_expansion(), ty.demo_point(), [0.1], dps=1001),
            ValueError,
            "dps must be an integer <= 1000, got 1001; decimal digits of the mpmath evaluation; "
            "40 resolve remainders down to 1e-30",
        ),
        (
            lambda: ty.expansion_error(
                ty.second_order_expansion(*_score2()), ty.demo_point(), [0.1]
            ),
            ValueError,
            "the model has free symbols besides x_m and x_n: "
            "['M_{00}', 'M_{01}', 'M_{10}', 'M_{11}']; substitute numbers for them first",
        ),
        *[
            (
                lambda key=key: ty.expansion_error(
                    _expansion(), dict(ty.demo_point(), **{key: np.ones(3)}), [0.1]
                ),
                ValueError,
                f"point[{key!r}] must have shape (2,) (one entry per coordinate of the model's "
                f"x_{key[-1]}), got (3,)",
            )
            for key in ("x_m", "p_hat_n")
        ],
        (
            lambda: ty.demo_point(d=10**9),
            ValueError,
            "d must be an integer <= 65536, got 1000000000; d is the model width, at most "
            "rope_lib's MAX_DIM",
        ),
        *[
            (
                lambda e=e, r=r: ty.loglog_slope(e, r),
                ValueError,
                "eps and err must be positive (their logarithms are fitted)",
            )
            for e, r in (
                ([1.0, 2.0], [1.0, -1.0]),
                ([0.0, 1.0], [1.0, 2.0]),
                ([-1.0, 2.0], [1.0, 2.0]),
                ([1.0, 2.0], [0.0, 1.0]),
            )
        ],
        (
            lambda: ty.loglog_slope([1.0, 2.0, 3.0], [1.0, 2.0]),
            ValueError,
            "eps and err must be 1-D arrays of the same length >= 2, got (3,), (2,)",
        ),
        (
            lambda: ty.loglog_slope([1.0, 1.0], [1.0, 2.0]),
            ValueError,
            "eps must hold at least two distinct values",
        ),
    ],
)
def test_refusal_messages_in_full(call, error, message):
    """The whole message of each refusal: it names the argument, what it accepts and what it
    got (the tests above match only a word of most of them)."""
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message
