"""Independent routes shared by the tests of chapter 2 (rope_lib.taylor and its figures): the
attention output model written by hand, its series along a ray from sympy, a slope fitted
here."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp


def naive_model(x_m, x_n):
    """The two-token attention output c^T o_m, c = ones, written as a softmax with math.exp."""
    d = len(x_m)
    s_mm = sum(a * a for a in x_m) / math.sqrt(d)
    s_mn = sum(a * b for a, b in zip(x_m, x_n, strict=True)) / math.sqrt(d)
    top = max(s_mm, s_mn)
    w_m, w_n = math.exp(s_mm - top), math.exp(s_mn - top)
    return sum((w_m * a + w_n * b) / (w_m + w_n) for a, b in zip(x_m, x_n, strict=True))


def ray_coefficients(f, x_m, x_n, point_m, point_n, u_m, u_n):
    """Taylor coefficients c0, c1, c2 of g(e) = f(x + e u) from sympy's one-variable series."""
    e = sp.Symbol("e")
    subs = {
        s: sp.nsimplify(v) + e * sp.nsimplify(w) for s, v, w in zip(x_m, point_m, u_m, strict=True)
    }
    subs |= {
        s: sp.nsimplify(v) + e * sp.nsimplify(w) for s, v, w in zip(x_n, point_n, u_n, strict=True)
    }
    series = sp.series(f.subs(subs, simultaneous=True), e, 0, 3).removeO()
    return [float(series.coeff(e, k)) for k in range(3)]


RATIONAL_POINT = {
    "x_m": np.array([0.5, -0.25]),
    "x_n": np.array([-0.75, 1.0]),
    "p_hat_m": np.array([0.6, 0.8]),
    "p_hat_n": np.array([-0.8, 0.6]),
}


def output_model_by_hand():
    """The attention output model for d = 2, written independently of the library: the
    output of slot m attending to slots m and n (weights a quotient of exponentials of the
    scores x^T y / sqrt(2)), summed over its two coordinates. Returns (f, x_m, x_n)."""
    x_m = sp.symbols("x0:2", real=True)
    x_n = sp.symbols("y0:2", real=True)
    s_mm = (x_m[0] ** 2 + x_m[1] ** 2) / sp.sqrt(2)
    s_mn = (x_m[0] * x_n[0] + x_m[1] * x_n[1]) / sp.sqrt(2)
    f = sum(
        (sp.exp(s_mm) * a + sp.exp(s_mn) * b) / (sp.exp(s_mm) + sp.exp(s_mn))
        for a, b in zip(x_m, x_n, strict=True)
    )
    return f, x_m, x_n


def own_slope(x, y):
    lx, ly = np.log(x), np.log(y)
    lx0, ly0 = lx - lx.mean(), ly - ly.mean()
    return float((lx0 * ly0).sum() / (lx0 * lx0).sum())
