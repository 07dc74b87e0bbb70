"""Tests of rope_lib.figures.context_extension: chapter 8's figures hold the wavelengths of
the closed forms (mpmath) and the running minima of the direct cosine sums of
tests/test_context_extension.py, and their arguments are checked by name."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from rope_lib import scaled_theta, theta
from rope_lib.figures import context_extension as fce

from .test_context_extension import direct_margin, mp_ntk


def test_plot_wavelengths_draws_the_wavelengths():
    d, base, s, L = 64, 1e4, 4.0, 2048
    fig = fce.plot_wavelengths(d, base, s, L, methods=("none", "linear", "ntk", "dynamic"))
    ax = fig.axes[0]
    i = np.arange(d // 2)
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == d // 2]
    assert len(lines) == 4
    np.testing.assert_allclose(lines[0].get_ydata(), 2 * np.pi * base ** (2 * i / d), rtol=1e-12)
    np.testing.assert_allclose(
        lines[1].get_ydata(), 2 * np.pi * s * base ** (2 * i / d), rtol=1e-12
    )
    np.testing.assert_allclose(lines[2].get_ydata(), 2 * np.pi / mp_ntk(d, base, s), rtol=1e-12)
    # dynamic at seq_len = s L: NTK with s_eff = s * s - (s - 1)
    np.testing.assert_allclose(
        lines[3].get_ydata(), 2 * np.pi / mp_ntk(d, base, s * s - s + 1), rtol=1e-12
    )
    flat = sorted(ln.get_ydata()[0] for ln in ax.get_lines() if len(ln.get_xdata()) == 2)
    assert flat == [L, s * L]
    assert ax.get_yscale() == "log"
    assert "wavelength" in ax.get_ylabel() and "$i$" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == [
        "none (original)",
        "linear (PI)",
    ]
    plt.close(fig)


def test_plot_margins_draws_running_minima_and_horizons():
    d, base, s, L, top = 32, 1e4, 2.0, 512, 20_000
    fig = fce.plot_margins(d, base, s, L, top, methods=("none", "linear", "yarn"), n_points=300)
    ax = fig.axes[0]
    curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]
    dots = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 1]
    assert len(curves) == 3
    m = np.arange(top + 1)
    for line, frequencies in zip(
        curves,
        [theta(d, base), theta(d, base) / s, scaled_theta(d, base, "yarn", s, L)[0]],
        strict=True,
    ):
        x = np.asarray(line.get_xdata())
        assert x[0] == 1 and x[-1] == top and np.all(np.diff(x) > 0)
        worst = np.array([direct_margin(m[: k + 1], frequencies).min() for k in (x[0], x[-1])])
        np.testing.assert_allclose(np.asarray(line.get_ydata())[[0, -1]], worst, atol=1e-9)
        assert np.all(np.diff(line.get_ydata()) <= 0)  # a running minimum never rises
    # one dot per curve that turns negative, at the brute-force first negative distance
    firsts = []
    for frequencies in (theta(d, base), theta(d, base) / s):
        negative = np.flatnonzero(direct_margin(m, frequencies) < 0)
        firsts.append(int(negative[0]))
    assert [int(dot.get_xdata()[0]) for dot in dots][:2] == firsts
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "distance $m$" and "minimum" in ax.get_ylabel()
    plt.close(fig)


def test_bad_arguments_of_the_plots():
    with pytest.raises(ValueError, match="methods must be a non-empty"):
        fce.plot_wavelengths(methods=())
    with pytest.raises(ValueError, match="methods entries must be one of"):
        fce.plot_margins(methods=("linear", "pi"))
    with pytest.raises(ValueError, match="max_distance"):
        fce.plot_margins(max_distance=0)
    with pytest.raises(ValueError, match="n_points"):
        fce.plot_margins(max_distance=10, n_points=1)
    with pytest.raises(TypeError, match="methods"):
        fce.plot_margins(d=8, max_distance=64, methods=object())
    with pytest.raises(ValueError, match="max_distance"):
        fce.plot_margins(d=8, max_distance=10**15)
    with pytest.raises(ValueError, match="n_points"):
        fce.plot_margins(d=8, max_distance=64, n_points=10**15)
