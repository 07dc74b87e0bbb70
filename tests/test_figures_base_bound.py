"""Tests of rope_lib.figures.base_bound: chapter 7's figures hold the curves that mpmath, the
direct cosine sums and the explicit rotation matrices of tests/test_base_bound.py give, and
their arguments are checked by name."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from rope_lib import base_table as bt
from rope_lib.figures import base_bound as fbb

from .test_base_bound import brute_horizon, direct, mp_margin, rotation


def test_plot_similarity_margin():
    fig = fbb.plot_similarity_margin(d=128, base=1e4)
    ax = fig.axes[0]
    curve, zero, horizon = ax.get_lines()[:3]
    x = curve.get_xdata()
    np.testing.assert_allclose(curve.get_ydata(), direct(x, 128, 1e4), atol=1e-9)
    assert horizon.get_xdata()[0] == 1707
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_legend() is not None
    plt.close(fig)


def test_plot_monte_carlo_gap():
    mu_q, mu_k = np.linspace(-1, 1, 8), np.full(8, 0.3)
    fig = fbb.plot_monte_carlo_gap(
        d=8, base=50.0, max_distance=10, n_samples=500, mean_q=mu_q, mean_k=mu_k
    )
    left, right = fig.axes[:2]
    np.testing.assert_allclose(left.get_lines()[0].get_ydata(), direct(np.arange(11), 8, 50.0))
    shifted = right.get_lines()[1].get_ydata()
    expected = [
        mp_margin(m, 8, 50.0) + mu_q @ rotation(m, 8, 50.0) @ (mu_q - mu_k) / 2 for m in range(11)
    ]
    np.testing.assert_allclose(shifted, expected, atol=1e-12)
    assert left.get_ylabel() and right.get_xlabel()
    plt.close(fig)


def test_plot_horizon_vs_base():
    fig = fbb.plot_horizon_vs_base(d=32, base_range=(50.0, 200.0), n_bases=30, lengths=(100,))
    ax = fig.axes[0]
    line = ax.get_lines()[0]
    for b, h in zip(line.get_xdata()[::7], line.get_ydata()[::7], strict=True):
        assert h == brute_horizon(b, 32, 5000)
    assert ax.get_xscale() == "log" and ax.get_ylabel()
    plt.close(fig)


def test_plot_min_base_table():
    rows = [{"L": 1024, "base": 5000.0}, {"L": 2048, "base": 20000.0}]
    fig = fbb.plot_min_base_table(rows)
    ax = fig.axes[0]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [r["base"] for r in rows])
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert "Su, archive 10122 (infeasible)" in labels  # 1.2e4 fails for L = 2048
    assert ax.get_xlabel() == "context length $L$"
    plt.close(fig)


def test_plot_min_base_table_for_another_d_draws_no_published_values():
    # item 7: published values are for d = 128 only; the table for d = 8 is small
    fig = fbb.plot_min_base_table(bt.min_base_table((4, 5), d=8, use_cache=False), d=8)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert not any("Men" in label or "Su" in label for label in labels)
    plt.close(fig)


@pytest.mark.parametrize("name", ["mean_q", "mean_k"])
def test_plot_monte_carlo_gap_refuses_overflowing_means(name):
    # no nan or inf in the figure: the means are refused by name (as by the estimates)
    with pytest.raises(ValueError, match=name):
        fbb.plot_monte_carlo_gap(8, 100.0, 4, n_samples=16, **{name: 1e300})
    plt.close("all")
