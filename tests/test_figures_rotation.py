"""Tests of rope_lib.figures.rotation: chapter 4's figure draws what it says, and its arguments
are checked by name."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.text import Annotation

import rope_lib


def test_plot_rotation_2d():
    fig = rope_lib.plot_rotation_2d(
        q=(1.0, 0.3), k=(0.8, 0.6), theta_2d=0.4, positions=((2, 5), (7, 10))
    )
    try:
        assert len(fig.axes) == 2
        scores = []
        for ax, (m, n) in zip(fig.axes, ((2, 5), (7, 10)), strict=True):
            tips = [a.xy for a in ax.texts if isinstance(a, Annotation)]
            qm = (
                math.cos(0.4 * m) - 0.3 * math.sin(0.4 * m),
                math.sin(0.4 * m) + 0.3 * math.cos(0.4 * m),
            )
            kn = (
                0.8 * math.cos(0.4 * n) - 0.6 * math.sin(0.4 * n),
                0.8 * math.sin(0.4 * n) + 0.6 * math.cos(0.4 * n),
            )
            np.testing.assert_allclose(tips, [(1.0, 0.3), (0.8, 0.6), qm, kn], atol=1e-12)
            score = qm[0] * kn[0] + qm[1] * kn[1]
            assert f"{score:.4f}" in ax.get_title()
            assert ax.get_xlabel() and ax.get_ylabel()
            scores.append(score)
        assert scores[0] == pytest.approx(scores[1])  # same n - m
    finally:
        plt.close(fig)


@pytest.mark.parametrize("arg", ["q", "k"])
def test_plot_rotation_2d_bounds_the_arrows(arg):
    """Fuzz item 24: q = (1e300, 3e299) reached matplotlib ("Axis limits cannot be NaN or
    Inf"); entries beyond 1e100 are refused by name, 1e100 itself is drawn."""
    with pytest.raises(ValueError, match=rf"^{arg} must have magnitude <= 1e\+100"):
        rope_lib.plot_rotation_2d(**{arg: (1e300, 3e299)})
    fig = rope_lib.plot_rotation_2d(**{arg: (1e100, -1e100)})
    lo, hi = fig.axes[0].get_xlim()
    assert np.isfinite([lo, hi]).all() and hi >= 1e100
    plt.close(fig)


def test_plot_rotation_2d_arguments_are_checked_by_name():
    with pytest.raises(ValueError, match="positions"):
        rope_lib.plot_rotation_2d(positions=(1, 2))
    with pytest.raises(TypeError, match="theta_2d"):
        rope_lib.plot_rotation_2d(theta_2d=True)
    with pytest.raises(ValueError, match="positions"):
        rope_lib.plot_rotation_2d(positions=[(0, 1)] * 13)
