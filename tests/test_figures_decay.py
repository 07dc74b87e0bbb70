"""Tests of rope_lib.figures.decay: chapter 6's figures hold the curves that mpmath and the
explicit sums of tests/test_decay.py give, and their arguments and sizes are checked by name."""

from __future__ import annotations

import matplotlib.pyplot as plt
import mpmath as mp
import numpy as np
import pytest
from scipy.integrate import quad

from rope_lib import decay
from rope_lib.figures import decay as fdecay

from .test_decay import _lines, direct_window_mean, f64_theta, mp_bound, mp_ones, mp_power_integral


def test_plot_counterexamples():
    fig = fdecay.plot_counterexamples(d=16, max_distance=40)
    ax = fig.axes[0]
    lines = _lines(ax)
    x = np.arange(41)
    np.testing.assert_allclose(lines[0].get_ydata(), 1.0)
    np.testing.assert_allclose(lines[1].get_ydata(), np.cos(x), atol=1e-12)
    np.testing.assert_allclose(lines[2].get_ydata(), [mp_ones(v, 16) / 16 for v in x], atol=1e-12)
    assert ax.get_xlabel() and ax.get_ylabel() and fig.legends
    plt.close(fig)


def test_plot_ones_score_panels_and_quarter_marker():
    fig = fdecay.plot_ones_score(ds=(4, 16), max_distance=500)
    g = _lines(fig.axes[1])[0]
    assert g.get_ydata()[321] == pytest.approx(mp_ones(321, 16), abs=1e-10)
    assert len(fig.axes) == 4  # two panels, then their twin axes
    slow = _lines(fig.axes[2])[0]
    np.testing.assert_allclose(slow.get_ydata(), 2 * np.cos(np.arange(501) * 0.01), atol=1e-12)
    # d = 4: quarter period 50 pi < 500 is marked by a vertical line
    verticals = [ln for ln in fig.axes[0].get_lines() if len(set(ln.get_xdata())) == 1]
    assert verticals and verticals[0].get_xdata()[0] == pytest.approx(50 * np.pi)
    assert fig.axes[0].get_xlabel() == "relative distance $x$"
    plt.close(fig)


def test_plot_windowed_mean_curves_markers_and_arguments():
    d, base, top = 16, 1000.0, 2000
    fig = fdecay.plot_windowed_mean(d=d, base=base, max_distance=top, half_width=40)
    assert len(fig.axes) == 2
    x = np.arange(top + 1)
    g_line, local_line, continuum_line = _lines(fig.axes[0])[:3]
    assert g_line.get_ydata()[321] == pytest.approx(mp_ones(321, d, base), abs=1e-10)
    assert local_line.get_ydata()[700] == pytest.approx(
        direct_window_mean(700, d, 40, base), abs=1e-9
    )
    assert continuum_line.get_ydata()[1500] == pytest.approx(
        float(d * (mp.ci(1500) - mp.ci(1500 / base)) / mp.log(base)), abs=1e-9
    )
    np.testing.assert_array_equal(local_line.get_xdata(), x)
    verticals = sorted(
        ln.get_xdata()[0] for ln in fig.axes[0].get_lines() if len(set(ln.get_xdata())) == 1
    )
    assert verticals == pytest.approx([np.pi / 2 * base ** (14 / 16), np.pi / 2 * base])
    marker = [ln for ln in fig.axes[1].get_lines() if ln.get_marker() == "o"][0]
    local = local_line.get_ydata()
    assert marker.get_xdata()[0] == np.argmin(local)
    assert marker.get_ydata()[0] == pytest.approx(local.min())
    assert fig.axes[1].get_xlabel() == "relative distance $x$" and fig.legends
    plt.close(fig)
    with pytest.raises(ValueError, match="half_width"):
        fdecay.plot_windowed_mean(d=8, max_distance=16, half_width=-1)


def test_plot_quarter_period():
    fig = fdecay.plot_quarter_period(ds=(4, 128, 4096))
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(
        line.get_ydata(), np.pi / 2 * 10 ** (4 - 8 / np.array([4, 128, 4096]))
    )
    assert fig.axes[0].get_yscale() == "log"
    plt.close(fig)


def test_plot_sum_vs_integral():
    fig = fdecay.plot_sum_vs_integral(d=32, max_distance=300)
    top, bottom = fig.axes[:2]
    s, integral = _lines(top)
    assert s.get_ydata()[99] == pytest.approx(mp_ones(100, 32), abs=1e-10)
    expected, _ = quad(lambda t: np.cos(100 * 1e4**-t), 0, 1, limit=500, epsabs=1e-13)
    assert integral.get_ydata()[99] == pytest.approx(32 * expected, abs=1e-9)
    diff, upper, lower = _lines(bottom)[:3]
    np.testing.assert_allclose(diff.get_ydata(), s.get_ydata() - integral.get_ydata())
    x = np.arange(1, 301)
    nu = np.clip(16 / np.log(1e4) * np.log(x * 2 * np.log(1e4) / (32 * np.pi)), 0, 16)
    np.testing.assert_allclose(upper.get_ydata(), np.sqrt(2 * nu), atol=1e-12)
    np.testing.assert_allclose(lower.get_ydata(), -np.sqrt(2 * nu), atol=1e-12)
    assert bottom.get_xscale() == "log"
    plt.close(fig)


def test_plot_schedules_continuum_and_discrete():
    fig = fdecay.plot_schedules(schedules=("t", "t^2"), short_max=20, long_max=1000, n_points=12)
    lin = _lines(fig.axes[0])[0]
    xs = lin.get_xdata()
    np.testing.assert_allclose(lin.get_ydata()[1:], np.sin(xs[1:]) / xs[1:], atol=1e-14)
    sq = _lines(fig.axes[1])[1]
    assert sq.get_ydata()[5] == pytest.approx(mp_power_integral(sq.get_xdata()[5], 2), abs=1e-8)
    plt.close(fig)
    fig = fdecay.plot_schedules(
        d=16, schedules=("10000^-t",), short_max=30, long_max=300, n_points=10
    )
    line = _lines(fig.axes[0])[0]
    assert line.get_ydata()[17] == pytest.approx(mp_ones(17, 16) / 16, abs=1e-12)
    assert "d = 16" in fig.axes[1].get_title()
    plt.close(fig)


def test_plot_roformer_bound():
    fig = fdecay.plot_roformer_bound(d=16, max_distance=40)
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), np.arange(41))
    assert line.get_ydata()[0] == pytest.approx(4.5)
    assert line.get_ydata()[33] == pytest.approx(mp_bound(33, 16), abs=1e-12)
    assert fig.axes[0].get_ylabel() == "relative upper bound"
    plt.close(fig)


def test_plot_monte_carlo():
    fig = fdecay.plot_monte_carlo(d=16, max_distance=64, step=16, n_samples=200)
    ax = fig.axes[0]
    exact_lines = [ln for ln in _lines(ax) if ln.get_linestyle() != "None"]
    markers = [c.lines[0] for c in ax.containers]  # each error-bar series' data line
    assert len(exact_lines) == 3 and len(markers) == 3
    mean, _ = decay.monte_carlo_score(np.arange(0, 65, 16), 16, n_samples=200, seed=0)
    np.testing.assert_allclose(markers[0].get_ydata(), mean)
    np.testing.assert_allclose(exact_lines[0].get_ydata(), 0.0)
    np.testing.assert_allclose(
        exact_lines[2].get_ydata(), [mp_ones(v, 16) for v in range(0, 65, 16)], atol=1e-10
    )
    assert len(ax.containers) == 3  # three error-bar series
    plt.close(fig)


def test_plot_diagonal_h():
    fig = fdecay.plot_diagonal_h(d=16, max_distance=50)
    rel, bound = _lines(fig.axes[0])[:2]
    assert "beta" in rel.get_label()  # chapter 3's h is the diagonal of H, not the weight
    h = 1 - np.arange(8) / 8
    x = np.arange(51)
    # p_x^T H p_0 with explicit (cos, sin) encodings and H = diag(h_0, h_0, h_1, h_1, ...):
    t = f64_theta(16)
    p = np.stack([np.cos(np.multiply.outer(x, t)), np.sin(np.multiply.outer(x, t))], -1)
    full = (
        p.reshape(51, 16)
        @ np.diag(np.repeat(h, 2))
        @ np.ravel(np.column_stack([np.ones(8), np.zeros(8)]))
    )
    np.testing.assert_allclose(rel.get_ydata(), full, atol=1e-12)
    np.testing.assert_allclose(
        rel.get_ydata(), np.cos(np.multiply.outer(x, f64_theta(16))) @ h, atol=1e-12
    )
    # smooth ramp: every step, including the final drop to h_8 = 0, is 1/8
    np.testing.assert_allclose(bound.get_ydata()[7], mp_bound(7, 16), atol=1e-12)
    assert np.all(np.abs(rel.get_ydata()) <= bound.get_ydata() + 1e-12)
    slow, slow_bound = _lines(fig.axes[1])[:2]
    # h_i = 1 for i >= 6 (the slowest quarter of 8 pairs): explicit cosine sum
    np.testing.assert_allclose(
        slow.get_ydata(), np.cos(np.multiply.outer(x, f64_theta(16)[6:])).sum(axis=1), atol=1e-12
    )
    # last step |h_7 - h_8| = 1: the bound is the full sum of |S_j|
    np.testing.assert_allclose(slow_bound.get_ydata()[7], 8 * mp_bound(7, 16), atol=1e-10)
    assert np.all(np.abs(slow.get_ydata()) <= slow_bound.get_ydata() + 1e-12)
    plt.close(fig)


@pytest.mark.parametrize("bad", [-1, 2.5, "0", True, None, float("nan"), [0]], ids=repr)
def test_monte_carlo_seed_is_checked_by_name(bad):
    with pytest.raises((ValueError, TypeError), match="seed must be an integer >= 0"):
        decay.monte_carlo_score([1], 4, n_samples=4, seed=bad)
    with pytest.raises((ValueError, TypeError), match="seed must be an integer >= 0"):
        fdecay.plot_monte_carlo(d=4, max_distance=8, n_samples=4, seed=bad)


@pytest.mark.parametrize("bad", [1.5, -1.5, float("nan"), "0.5", True, None, [0.5]], ids=repr)
def test_monte_carlo_rho_is_checked_by_name(bad):
    with pytest.raises((ValueError, TypeError), match=r"rho must be a .*\[-1.0, 1.0\]"):
        decay.monte_carlo_score([1], 4, kind="correlated", n_samples=4, rho=bad)
    with pytest.raises((ValueError, TypeError), match=r"rho must be a .*\[-1.0, 1.0\]"):
        fdecay.plot_monte_carlo(d=4, max_distance=8, n_samples=4, rho=bad)


@pytest.mark.parametrize(
    "plot",
    [
        fdecay.plot_counterexamples,
        fdecay.plot_ones_score,
        fdecay.plot_windowed_mean,
        fdecay.plot_sum_vs_integral,
        fdecay.plot_roformer_bound,
        fdecay.plot_monte_carlo,
        fdecay.plot_diagonal_h,
    ],
)
def test_figure_max_distance_is_bounded_by_name(plot):
    with pytest.raises(ValueError, match=r"max_distance must be an integer <= 4194303"):
        plot(max_distance=10**15)
    if plot is not fdecay.plot_ones_score and plot is not fdecay.plot_monte_carlo:
        with pytest.raises(ValueError, match=r"max_distance \+ 1 distances x d/2.*MAX_ELEMENTS"):
            plot(d=1 << 16, max_distance=1 << 12)


def test_figure_arguments_are_checked_by_name():
    cases = [
        (lambda: fdecay.plot_counterexamples(base="1e4"), TypeError, "base must be a real"),
        (
            lambda: fdecay.plot_monte_carlo(d=8, max_distance=16, step=17),
            ValueError,
            "step must be an integer <= 16",
        ),
        (lambda: fdecay.plot_ones_score(ds=object()), TypeError, "ds must be a sequence"),
        (lambda: fdecay.plot_ones_score(ds="48"), TypeError, "ds must be a sequence"),
        (lambda: fdecay.plot_ones_score(ds=[4, 7]), ValueError, r"ds\[1\] must be an even"),
        (lambda: fdecay.plot_ones_score(ds=[4] * 17), ValueError, "ds must hold at most 16"),
        (lambda: fdecay.plot_ones_score(ds=iter(int, 1)), ValueError, "ds must hold at most 16"),
        (lambda: fdecay.plot_ones_score(ds=(8,), base=1e12), ValueError, "pass max_distance"),
        (lambda: fdecay.plot_quarter_period(ds=object()), TypeError, "ds must be a sequence"),
        (
            lambda: fdecay.plot_schedules(schedules=object()),
            TypeError,
            "schedules must be a sequence",
        ),
        (lambda: fdecay.plot_schedules(schedules="t^2"), TypeError, "schedules must be a sequence"),
        (lambda: fdecay.plot_schedules(schedules=()), ValueError, "schedules must hold at least"),
        (
            lambda: fdecay.plot_schedules(schedules=["t^2", "bogus"]),
            ValueError,
            r"schedules\[1\] must look like",
        ),
        (
            lambda: fdecay.plot_schedules(n_points=10**15),
            ValueError,
            "n_points must be an integer <= 20000",
        ),
        (lambda: fdecay.plot_schedules(short_max=[1.0]), TypeError, "short_max must be a real"),
        (
            lambda: fdecay.plot_schedules(short_max=1e7),
            ValueError,
            "short_max must be a finite real",
        ),
        (
            lambda: fdecay.plot_schedules(long_max=1e300),
            ValueError,
            "long_max must be a finite real",
        ),
        (
            lambda: fdecay.plot_schedules(d=1 << 16, n_points=20_000),
            ValueError,
            r"20 \* n_points distances .*MAX_ELEMENTS",
        ),
        (lambda: decay.envelope_crossover(1e4, [2.0]), TypeError, "alpha must be a real"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda: fdecay.plot_diagonal_h(d=9), ValueError, "d must be an even"),
        (lambda: fdecay.plot_roformer_bound(max_distance=0), ValueError, "max_distance"),
        (lambda: fdecay.plot_schedules(short_max=100, long_max=50), ValueError, "short_max"),
        (lambda: fdecay.plot_ones_score(ds=()), ValueError, "ds"),
    ],
)
def test_figure_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
