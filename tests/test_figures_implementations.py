"""Tests of rope_lib.figures.implementations: chapter 5's figures draw what they say (checked
against mpmath tables and the independent 2x2 route), and their sizes are bounded by name."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

import rope_lib
from rope_lib import (
    cos_sin_tables,
)

from .peers import mp_tables, rotation_2x2


def test_plot_layout_mismatch():
    d, base = 16, 10000.0
    fig = rope_lib.plot_layout_mismatch(d=d, base=base, max_distance=50, seed=3)
    try:
        ax = fig.axes[0]
        original, converted, forgotten = (line.get_ydata() for line in ax.get_lines()[:3])
        x = ax.get_lines()[0].get_xdata()
        np.testing.assert_array_equal(x, np.arange(51))
        rng = np.random.default_rng(3)
        q = rng.standard_normal(d)
        k = q + 0.3 * rng.standard_normal(d)
        expected = np.array([q @ rotation_2x2(int(xi), d, base) @ k for xi in x])
        np.testing.assert_allclose(original, expected, atol=1e-10)
        np.testing.assert_allclose(converted, expected, atol=1e-10)
        assert forgotten[0] == pytest.approx(expected[0])
        assert np.abs(forgotten[1:] - expected[1:]).max() > 1.0
        assert "distance" in ax.get_xlabel() and ax.get_ylabel()
        assert "n - m" in ax.get_xlabel() and "$x" not in ax.get_xlabel()  # x: a vector
        assert ax.get_legend() is not None
    finally:
        plt.close(fig)


def test_plot_accuracy():
    fig = rope_lib.plot_accuracy(d=64, base=10000.0, max_position=10**7, num=5)
    try:
        ax_t, ax_s = fig.axes[:2]
        lines = dict(zip(rope_lib.RECIPES, ax_t.get_lines(), strict=False))
        pos = lines["rope_lib"].get_xdata()
        np.testing.assert_array_equal(pos, np.unique(np.round(np.logspace(0, 7, 5)).astype(int)))
        assert np.all(lines["rope_lib"].get_ydata() <= 2.0**-25)
        f32 = lines["float32"].get_ydata()
        c_mp, s_mp = mp_tables(int(pos[-1]), 64, 1e4)
        c, s = cos_sin_tables(pos[-1:], 64, recipe="float32")
        assert f32[-1] == pytest.approx(
            max(np.abs(c[0] - c_mp).max(), np.abs(s[0] - s_mp).max()), rel=1e-6
        )
        score_lines = dict(zip(rope_lib.RECIPES, ax_s.get_lines(), strict=False))
        assert np.all(score_lines["rope_lib"].get_ydata() < 1e-6)
        assert score_lines["float32"].get_ydata()[-1] > 1e-3
        for ax in (ax_t, ax_s):
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
            assert ax.get_xlabel() == "position $m$" and ax.get_ylabel()
    finally:
        plt.close(fig)


def test_figure_sizes_are_bounded_by_name():
    with pytest.raises(ValueError, match="max_distance"):
        rope_lib.plot_layout_mismatch(d=8, max_distance=10**12)
    with pytest.raises(ValueError, match="num"):
        rope_lib.plot_accuracy(d=8, max_position=100, num=10**12)
    with pytest.raises(ValueError, match="max_position"):
        rope_lib.plot_accuracy(d=8, max_position=2**40)
