"""Tests of rope_lib.figures.taylor: chapter 2's figures plot the remainder, the terms and the
interaction that independent routes give, and their arguments are checked by name."""

from __future__ import annotations

import numpy as np
import pytest

from rope_lib import taylor as ty
from rope_lib.figures import taylor as fty

from .taylor_routes import RATIONAL_POINT, naive_model, own_slope

# ---------------------------------------------------------------------------------------------
# independent implementations
# ---------------------------------------------------------------------------------------------


def test_plot_error_order(output_expansion, ray_coeffs):
    p = RATIONAL_POINT
    eps = np.geomspace(1e-2, 2.0, 12)
    fig = fty.plot_error_order(output_expansion, p, eps, fit_max=0.1)
    ax = fig.axes[0]
    points, fit_line, guide = ax.get_lines()[:3]
    c0, c1, c2 = ray_coeffs
    expected = [
        abs(
            naive_model(p["x_m"] + e * p["p_hat_m"], p["x_n"] + e * p["p_hat_n"])
            - (c0 + c1 * e + c2 * e * e)
        )
        for e in eps
    ]
    np.testing.assert_allclose(points.get_ydata(), expected, rtol=1e-6)
    fit_x, fit_y = np.asarray(fit_line.get_xdata()), np.asarray(fit_line.get_ydata())
    assert fit_x.max() <= 0.1
    assert own_slope(fit_x, fit_y) == pytest.approx(
        own_slope(eps[eps <= 0.1], np.array(expected)[eps <= 0.1])
    )
    assert 2.9 < own_slope(fit_x, fit_y) < 3.1
    assert own_slope(guide.get_xdata(), guide.get_ydata()) == pytest.approx(3.0)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() and ax.get_ylabel() and "slope" in ax.get_title()
    assert ax.get_legend() is not None


def test_plot_term_sizes(output_expansion):
    p = RATIONAL_POINT
    eps = np.geomspace(1e-2, 1.0, 6)
    fig = fty.plot_term_sizes(output_expansion, p, eps)
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 8
    constant = naive_model(p["x_m"], p["x_n"])
    np.testing.assert_allclose(lines[0].get_ydata(), abs(constant), rtol=1e-12)
    h = 1e-4

    def g(a, b):
        return naive_model(p["x_m"] + a * p["p_hat_m"], p["x_n"] + b * p["p_hat_n"])

    mixed = (g(h, h) - g(h, -h) - g(-h, h) + g(-h, -h)) / (4 * h * h)
    np.testing.assert_allclose(lines[5].get_ydata(), abs(mixed) * eps**2, rtol=1e-6)
    # the eighth line: |I - cross|, with I from four float64 evaluations of the naive model
    big = eps >= 0.1
    interaction = np.array([g(e, e) - g(e, 0.0) - g(0.0, e) + g(0.0, 0.0) for e in eps[big]])
    np.testing.assert_allclose(
        lines[7].get_ydata()[big], np.abs(interaction - mixed * eps[big] ** 2), rtol=1e-4
    )
    assert ax.get_ylabel() and ax.get_legend() is not None
    # the lower panel: I / cross term, with I and the cross term from the naive model
    ratio_axes = fig.axes[1]
    np.testing.assert_allclose(
        ratio_axes.get_lines()[0].get_ydata()[big], interaction / (mixed * eps[big] ** 2), rtol=1e-4
    )
    assert ratio_axes.get_xscale() == "log" and ratio_axes.get_xlabel()
    assert ratio_axes.get_ylabel() and ratio_axes.get_legend() is not None
    plain = fty.plot_term_sizes(output_expansion, p, eps, interaction=False)
    assert len(plain.axes) == 1 and len(plain.axes[0].lines) == 7
    assert plain.axes[0].get_xlabel()


def test_term_sizes_figure_ratio_tends_to_one_and_changes_sign(output_expansion):
    """Chapter 2's reading of the lower panel at the demo point: the ratio I / cross term is
    within 10% of 1 at eps = 0.01 and negative at eps = 1 (the interaction changes sign while
    the cross term keeps its sign); where |I - cross| > |cross| is where I / cross < 0 or > 2."""
    p = ty.demo_point(2, seed=0)
    eps = np.geomspace(1e-2, 3.0, 40)
    fig = fty.plot_term_sizes(output_expansion, p, eps)
    ratio = np.asarray(fig.axes[1].get_lines()[0].get_ydata())
    assert abs(ratio[0] - 1) < 0.1
    assert ratio[np.argmin(np.abs(eps - 1.0))] < 0
    beyond = np.asarray(fig.axes[0].get_lines()[7].get_ydata())
    cross = np.asarray(fig.axes[0].get_lines()[5].get_ydata())
    assert np.array_equal(beyond > cross, (ratio < 0) | (ratio > 2))


def test_plot_error_order_names_point_not_err(output_expansion):
    """Fuzz item 26: plot_error_order(point=huge) said "eps and err must be positive"
    (err is no argument of it).  A huge point is refused by name; a point whose remainder
    underflows to 0 (a saturated softmax at x = 1000 x_m) says so and names point."""
    huge = dict(ty.demo_point(2), x_m=np.array([1e300, 1e300]))
    with pytest.raises(ValueError, match=r"^point\['x_m'\]"):
        fty.plot_error_order(output_expansion, huge)
    saturated = dict(ty.demo_point(2))
    saturated["x_m"] = saturated["x_m"] * 1e3
    assert np.all(ty.expansion_error(output_expansion, saturated, [1e-3, 1e-2]) == 0.0)
    with pytest.raises(ValueError, match=r"the remainder is 0 in float64.*point"):
        fty.plot_error_order(output_expansion, saturated, eps=[1e-3, 1e-2], fit_max=0.1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fty.plot_error_order(fit_max=1e-9), ValueError, "fit_max"),
        (lambda: fty.plot_term_sizes(interaction=1), TypeError, "interaction"),
        (lambda: fty.plot_term_sizes(expansion=3), TypeError, "expansion"),
    ],
)
def test_figure_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# argument validation (issue 11): names, limits, unusual but valid forms
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fty.plot_error_order(fit_max=[1.0]), TypeError, "fit_max must"),
        (lambda: fty.plot_error_order(fit_max=float("nan")), ValueError, "fit_max must"),
        (lambda: fty.plot_error_order(fit_max=0.0), ValueError, "fit_max must"),
        (lambda: fty.plot_term_sizes(interaction="no"), TypeError, "interaction must be True"),
    ],
)
def test_figure_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
