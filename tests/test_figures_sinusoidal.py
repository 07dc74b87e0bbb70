"""Tests of rope_lib.figures.sinusoidal: chapter 3's figures hold the encoding and inner products
of the explicit loops of tests/test_sinusoidal.py, and their sizes are bounded by name."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import AxesImage

from rope_lib import (
    plot_encoding,
    plot_inner_products,
)

from .test_sinusoidal import ref_g, ref_sinusoidal

# --------------------------------------------------------------------------- references


def test_figures_refuse_bad_sizes_by_name():
    # the math functions' refusals are tested in tests/test_sinusoidal.py
    with pytest.raises(ValueError, match="length must be an integer >= 2"):
        plot_inner_products(d=8, length=1)
    with pytest.raises(ValueError, match="max_distance must be an integer >= 1"):
        plot_inner_products(d=8, length=4, max_distance=0)
    with pytest.raises(ValueError, match="length must be an integer >= 1"):
        plot_encoding(length=0)
    with pytest.raises(ValueError, match="base must be a finite real number > 1"):
        plot_encoding(base=0.9)


def test_plot_inner_products_data():
    import matplotlib.pyplot as plt

    d, base, length = 16, 100.0, 24
    fig = plot_inner_products(d=d, base=base, length=length, max_distance=60)
    try:
        ax_map, ax_curve = fig.axes[0], fig.axes[1]
        images = [a for a in ax_map.get_children() if isinstance(a, AxesImage)]
        assert len(images) == 1
        data = np.asarray(images[0].get_array())
        expected = np.array([[ref_g(m - n, d, base) for n in range(length)] for m in range(length)])
        np.testing.assert_allclose(data, expected, atol=1e-12)
        assert images[0].get_clim() == pytest.approx((expected.min(), d / 2), abs=1e-12)
        line = ax_curve.get_lines()[0]
        np.testing.assert_array_equal(line.get_xdata(), np.arange(61))
        np.testing.assert_allclose(
            line.get_ydata(), [ref_g(x, d, base) for x in range(61)], atol=1e-12
        )
        assert ax_map.get_xlabel() and ax_map.get_ylabel()
        assert "x" in ax_curve.get_xlabel() and ax_curve.get_ylabel()
        assert ax_curve.get_legend() is not None
    finally:
        plt.close(fig)


def test_plot_encoding_data():
    import matplotlib.pyplot as plt

    fig = plot_encoding(length=30, d=10, base=10000.0)
    try:
        ax = fig.axes[0]
        images = [a for a in ax.get_children() if isinstance(a, AxesImage)]
        data = np.asarray(images[0].get_array())
        np.testing.assert_allclose(data, ref_sinusoidal(range(30), 10, 10000.0), atol=1e-12)
        assert "position" in ax.get_ylabel() and "dimension" in ax.get_xlabel()
        assert ax.get_title()
    finally:
        plt.close(fig)


def test_figure_sizes_are_bounded_by_name():
    with pytest.raises(ValueError, match=r"length must be an integer <= 2048.*length\*\*2 cells"):
        plot_inner_products(d=8, length=2049)
    with pytest.raises(ValueError, match=r"max_distance must be an integer <= 4194303"):
        plot_inner_products(d=8, length=16, max_distance=10**15)
    with pytest.raises(ValueError, match=r"max_distance \+ 1 positions x d.*MAX_ELEMENTS"):
        plot_inner_products(d=1 << 16, length=16, max_distance=1 << 12)
    with pytest.raises(ValueError, match=r"length must be an integer <= 65536.*length \* d cells"):
        plot_encoding(length=65537, d=64)
    with pytest.raises(ValueError, match=r"length must be an integer <= 64\b"):
        plot_encoding(length=65, d=1 << 16)
