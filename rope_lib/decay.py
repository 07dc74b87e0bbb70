r"""Long-range decay of RoPE scores: derived, measured and questioned (chapter ``decay``).

What this module computes
-------------------------
* :func:`ones_score`: the score of :math:`q = k = \mathbf 1` at relative distance :math:`x`,
  :math:`g(x) = 2\sum_i \cos(x\theta_i)`, and :func:`exp_sum`, the complex sum
  :math:`\sum_i e^{\mathrm i x\theta_i}` behind it, for any frequencies.
* :func:`roformer_bound`: the "relative upper bound" of RoFormer, section 3.4.3,
  :math:`\mathcal S(x) = \frac{1}{d/2}\sum_{j=1}^{d/2}|S_j(x)|` with
  :math:`S_j = \sum_{i<j} e^{\mathrm i x\theta_i}`, and :func:`abel_bound`, the bound it
  gives for a particular query and key.
* :func:`integral_score`: the continuum view, :math:`d\,\mathrm{Re}\int_0^1 e^{\mathrm i x b^{-t}}dt
  = d\,(\mathrm{Ci}(x) - \mathrm{Ci}(x/b))/\ln b`.
* Other frequency schedules :math:`\theta_t` (:func:`schedule_theta`, :func:`schedule_score`,
  :func:`schedule_integral`, :func:`schedule_envelope`, :func:`envelope_crossover`), the
  slowest period (:func:`quarter_period`), the local mean of the all-ones score
  (:func:`windowed_mean_score`), the gap between the sum and the integral
  (:func:`undersampled_terms`, :func:`gap_rms`), the Monte Carlo
  expectation of the score for random queries and keys (:func:`monte_carlo_score`), and one
  plotting function per figure of the chapter (the diagonal-:math:`H` figure uses
  :func:`rope_lib.sinusoidal.diagonal_h_parts`).

Distances
---------
The formulas of this module are continuous functions of the distance, so every function here
accepts any finite real distance, scalar or array (the integral view needs non-integer
distances). A model only ever evaluates them at integers. Distances are limited to
``MAX_POSITION`` = 2**32 in magnitude (``rope_lib._validate``): a phase :math:`x\theta_i` is
one float64 product, accurate to :math:`|x|\,2^{-53}` rad, below 5e-7 rad up to that limit and
meaningless far beyond it (at :math:`x = 10^{300}` it is noise). The one exception is
:func:`schedule_envelope`, a smooth phase-free bound that stays accurate at any magnitude.
For integer distances (integer dtype, or floats holding whole numbers) :func:`exp_sum`,
:func:`ones_score` and :func:`roformer_bound` take an exact fast route (below); other inputs
are summed directly.

The fast route
--------------
Write an integer distance as :math:`x = x_0 + aK + r` with :math:`0 \le r < K`. Then

.. math:: \sum_i e^{\mathrm i x\theta_i}
          = \sum_i \underbrace{e^{\mathrm i (x_0 + aK)\theta_i}}_{E_{ai}}\,
                   \underbrace{e^{\mathrm i r\theta_i}}_{F_{ir}} = (EF)_{ar},

one complex matrix product that gives the sum at every integer of a range of length
:math:`AK` from :math:`(A + K)\,d/2` complex exponentials instead of :math:`AK\,d/2`. It is not
an approximation: only the rounding of each phase differs from the direct sum, and both
routes carry the same phase error :math:`\approx |x|\theta_i 2^{-53}`. The partial sums
:math:`S_j` of the bound are accumulated term by term, :math:`S_{j+1} = S_j + E_{aj}F_{jr}`,
on the same grid, so no exponential is evaluated on the full :math:`N \times d/2` table.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import plotting
from ._validate import (
    MAX_ELEMENTS,
    MAX_POSITION,
    check_base,
    check_choice,
    check_dim,
    check_distance_array,
    check_elements,
    check_positive_int,
    check_real,
    check_real_array,
    check_seed,
)
from .frequencies import theta

__all__ = [
    "exp_sum",
    "ones_score",
    "roformer_bound",
    "abel_bound",
    "periods",
    "quarter_period",
    "windowed_mean_score",
    "integral_score",
    "undersampled_terms",
    "gap_rms",
    "schedule_theta",
    "schedule_frequencies",
    "schedule_score",
    "schedule_integral",
    "schedule_envelope",
    "envelope_crossover",
    "monte_carlo_score",
    "plot_counterexamples",
    "plot_ones_score",
    "plot_windowed_mean",
    "plot_quarter_period",
    "plot_sum_vs_integral",
    "plot_schedules",
    "plot_roformer_bound",
    "plot_monte_carlo",
    "plot_diagonal_h",
]

#: Largest integer range (max - min + 1) evaluated on the fast grid; beyond it, direct sums.
_GRID_MAX_SPAN = 1 << 22
#: Elements per block of the direct route (bounds the memory of the N x d/2 table).
_BLOCK = 1 << 20
#: The schedules of the comparison figure, as strings understood by :func:`schedule_theta`.
DEFAULT_SCHEDULES = ("10000^-t", "1000^-t", "t^2", "t^4", "t")
#: Largest number of distances on one curve of a figure (``max_distance`` and the like).
MAX_FIGURE_POINTS = plotting.MAX_FIGURE_POINTS
#: Largest number of panels or curves of one figure (``ds``, ``schedules``).
MAX_FIGURE_CURVES = 16
#: Largest number of windows of :func:`gap_rms`.
MAX_WINDOWS = 1 << 12
#: Largest ``n_points`` of :func:`plot_schedules` (one quadrature per point and power schedule).
MAX_SCHEDULE_POINTS = 20_000


# --------------------------------------------------------------------------------------------
# input handling
# --------------------------------------------------------------------------------------------
def _distances(distance: Any, name: str = "distance") -> tuple[np.ndarray, np.ndarray | None]:
    """Return ``(x, ix)``: ``x`` as float64, ``ix`` as int64 if every entry is a whole number.

    ``x`` is finite with ``|x| <= MAX_POSITION`` (2**32), so integers are exact in float64.
    """
    x = check_distance_array(distance, name)
    if np.all(x == np.round(x)):
        return x, x.astype(np.int64)
    return x, None


def _scalar_or_array(out: np.ndarray) -> np.ndarray | np.float64:
    return out[()] if out.ndim == 0 else out


def _frequencies(frequencies: Any) -> np.ndarray:
    freqs = check_real_array(frequencies, "frequencies")
    if freqs.ndim != 1 or freqs.size == 0:
        raise ValueError(
            f"frequencies must be a non-empty 1-D array of real numbers, got shape {freqs.shape}"
        )
    return freqs


def _use_grid(ix: np.ndarray | None, n_freqs: int) -> bool:
    if ix is None or ix.size == 0:
        return False
    u = np.abs(ix)
    span = int(u.max() - u.min()) + 1
    # The grid pays when the table is large and the integers fill their range densely enough.
    return ix.size * n_freqs >= 1 << 14 and span <= min(_GRID_MAX_SPAN, 8 * ix.size + 4096)


def _grid(u: np.ndarray, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Row phases ``E`` (n x A), column phases ``F`` (n x K), offset and K for integers ``u``."""
    lo = int(u.min())
    span = int(u.max()) - lo + 1
    k = max(1, int(np.ceil(np.sqrt(span))))
    a = -(-span // k)
    rows = (lo + k * np.arange(a, dtype=np.int64)).astype(np.float64)
    e = np.exp(1j * np.multiply.outer(freqs, rows))
    f = np.exp(1j * np.multiply.outer(freqs, np.arange(k, dtype=np.float64)))
    return e, f, lo, k


def _blocks(n_rows: int, n_cols: int):
    step = max(1, _BLOCK // max(1, n_cols))
    for start in range(0, n_rows, step):
        yield slice(start, min(n_rows, start + step))


# --------------------------------------------------------------------------------------------
# the sums
# --------------------------------------------------------------------------------------------
def exp_sum(distance: Any, frequencies: Any) -> np.ndarray | np.complex128:
    r"""Complex sum :math:`\sum_i e^{\mathrm i x\theta_i}` over the given frequencies.

    .. math:: E(x) = \sum_{i=0}^{n-1} e^{\mathrm i x \theta_i}

    Parameters
    ----------
    distance : float or array_like
        Relative distance(s) :math:`x`; any finite real numbers. Integers take the exact
        fast route of the module docstring.
    frequencies : array_like
        1-D array of real frequencies :math:`\theta_i` (for RoPE, ``theta(d, base)``).

    Returns
    -------
    numpy.complex128 or numpy.ndarray
        Same shape as ``distance``; :math:`E(-x) = \overline{E(x)}`.
    """
    freqs = _frequencies(frequencies)
    x, ix = _distances(distance)
    flat = x.ravel()
    out = np.empty(flat.shape, dtype=np.complex128)
    if _use_grid(ix, freqs.size):
        iflat = ix.ravel()
        u = np.abs(iflat)
        e, f, lo, _ = _grid(u, freqs)
        table = (e.T @ f).ravel()
        out[:] = table[u - lo]
        out[iflat < 0] = np.conj(out[iflat < 0])
    else:
        for blk in _blocks(flat.size, freqs.size):
            out[blk] = np.exp(1j * np.multiply.outer(flat[blk], freqs)).sum(axis=1)
    return _scalar_or_array(out.reshape(x.shape))


def ones_score(distance: Any, d: int, base: float = 10000.0) -> np.ndarray | np.float64:
    r"""Score of :math:`q = k = \mathbf 1` at relative distance :math:`x` under RoPE.

    .. math:: g(x) = \mathbf 1^\top R_x \mathbf 1 = 2\sum_{i=0}^{d/2-1}\cos(x\theta_i),
              \qquad \theta_i = b^{-2i/d}.

    Parameters
    ----------
    distance : float or array_like
        Relative distance(s) :math:`x`; any finite real numbers (the formula is continuous;
        positions in a model are integers). The function is even in :math:`x`.
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base :math:`b > 1`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Same shape as ``distance``; ``g(0) = d``.
    """
    freqs = theta(d, base)
    x, ix = _distances(distance)
    if _use_grid(ix, freqs.size):
        return _scalar_or_array(np.asarray(2.0 * exp_sum(ix, freqs).real))
    flat = x.ravel()
    out = np.empty(flat.shape)
    for blk in _blocks(flat.size, freqs.size):
        out[blk] = 2.0 * np.cos(np.multiply.outer(flat[blk], freqs)).sum(axis=1)
    return _scalar_or_array(out.reshape(x.shape))


def _mean_abs_partial_sums(x: np.ndarray, ix: np.ndarray | None, freqs: np.ndarray) -> np.ndarray:
    """:math:`\\frac1n\\sum_{j=1}^{n}|S_j(x)|` for frequencies ``freqs`` (length n)."""
    n = freqs.size
    flat = x.ravel()
    if _use_grid(ix, n):
        u = np.abs(ix.ravel())  # |S_j(-x)| = |S_j(x)|
        e, f, lo, k = _grid(u, freqs)
        a = e.shape[1]
        partial = np.zeros((a, k), dtype=np.complex128)
        term = np.empty_like(partial)
        mag = np.empty((a, k))
        total = np.zeros((a, k))
        for j in range(n):  # S_{j+1} = S_j + e^{i x theta_j}
            np.multiply(e[j][:, None], f[j][None, :], out=term)
            partial += term
            np.abs(partial, out=mag)
            total += mag
        out = total.ravel()[u - lo]
    else:
        out = np.empty(flat.shape)
        for blk in _blocks(flat.size, n):
            s = np.exp(1j * np.multiply.outer(flat[blk], freqs))
            np.cumsum(s, axis=1, out=s)
            out[blk] = np.abs(s).sum(axis=1)
    return (out / n).reshape(x.shape)


def roformer_bound(distance: Any, d: int, base: float = 10000.0) -> np.ndarray | np.float64:
    r"""RoFormer's relative upper bound on the RoPE score (Su et al., section 3.4.3).

    .. math:: \mathcal S(x) = \frac{1}{d/2}\sum_{j=1}^{d/2}\lvert S_j(x)\rvert, \qquad
              S_j(x) = \sum_{i=0}^{j-1} e^{\mathrm i x\theta_i}, \qquad \theta_i = b^{-2i/d}.

    By Abel summation, :math:`\lvert\sum_i h_i e^{\mathrm i x\theta_i}\rvert \le
    \max_i\lvert h_{i+1}-h_i\rvert\,\tfrac d2\,\mathcal S(x)` with :math:`h_{d/2} = 0`, where
    :math:`h_i = \tilde q_i \overline{\tilde k_i}` pairs the coordinates of q and k
    (:func:`abel_bound`). :math:`\mathcal S(0) = (d/2 + 1)/2`. Since
    :math:`|S_j| + |S_{j+1}| \ge |S_{j+1} - S_j| = 1`, :math:`\mathcal S(x) \ge 1/2` for every
    real x.

    Parameters
    ----------
    distance : float or array_like
        Relative distance(s) :math:`x`; any finite real numbers; even in :math:`x`.
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base :math:`b > 1`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Same shape as ``distance``.
    """
    freqs = theta(d, base)
    x, ix = _distances(distance)
    return _scalar_or_array(_mean_abs_partial_sums(x, ix, freqs))


def abel_bound(q: Any, k: Any, distance: Any, base: float = 10000.0) -> np.ndarray | np.float64:
    r"""RoFormer's Abel-summation bound on :math:`|q^\top R_x k|` for a given query and key.

    .. math:: \big|q^\top R_x k\big| \le \Big(\max_{0 \le i < d/2}|h_{i+1} - h_i|\Big)
              \sum_{j=1}^{d/2}|S_j(x)|, \qquad h_i = \tilde q_i\overline{\tilde k_i},
              \quad h_{d/2} = 0,

    with :math:`\tilde q_i = q_{2i} + \mathrm i q_{2i+1}` (interleaved pairs) and
    :math:`\sum_j |S_j| = \frac d2\,\mathcal S(x)` from :func:`roformer_bound`.

    Parameters
    ----------
    q, k : array_like
        Real vectors of the same even length d.
    distance : float or array_like
        Relative distance(s) :math:`x`.
    base : float
        RoPE base :math:`b > 1`.
    """
    q = check_real_array(q, "q")
    k = check_real_array(k, "k")
    if q.ndim != 1 or q.shape != k.shape:
        raise ValueError(f"q and k must be 1-D of the same length, got {q.shape} and {k.shape}")
    d = check_dim(q.size, "len(q)")
    h = (q[0::2] + 1j * q[1::2]) * np.conj(k[0::2] + 1j * k[1::2])
    step = float(np.abs(np.diff(np.append(h, 0.0))).max())
    return _scalar_or_array(np.asarray(step * (d // 2) * roformer_bound(distance, d, base)))


def periods(d: int, base: float = 10000.0) -> np.ndarray:
    r"""Periods :math:`T_i = 2\pi/\theta_i = 2\pi b^{2i/d}` of the d/2 terms of the score.

    For :math:`b = 10^4`, :math:`T_i = 2\pi\,10^{8i/d}`.
    """
    return 2.0 * np.pi / theta(d, base)


def quarter_period(d: int, base: float = 10000.0) -> float:
    r"""A quarter of the slowest period, :math:`T_{d/2-1}/4 = \tfrac{\pi}{2} b^{(d-2)/d}`.

    The slowest term :math:`\cos(x\theta_{d/2-1})` is positive on :math:`[0, T_{d/2-1}/4)` and
    crosses zero at :math:`T_{d/2-1}/4`; it keeps decreasing until :math:`T_{d/2-1}/2`, where it
    reaches -1. For :math:`b = 10^4` this is :math:`\tfrac{\pi}{2}10^{4-8/d}`.
    """
    d = check_dim(d)
    base = check_base(base)
    return float(0.5 * np.pi * np.exp((d - 2) / d * np.log(base)))


def _default_half_width(d: int, base: float) -> int:
    r""":math:`w = \lceil \pi b \ln b / d\rceil`: the window of :func:`windowed_mean_score`."""
    return int(np.ceil(np.pi * base * np.log(base) / d))


def windowed_mean_score(
    distance: Any, d: int, base: float = 10000.0, half_width: int | None = None
) -> np.ndarray | np.float64:
    r"""Local mean of the all-ones score: :func:`ones_score` averaged over a centred window.

    The window is a boxcar over the :math:`2w + 1` consecutive distances
    :math:`x - w, \dots, x + w`. Since the mean of :math:`\cos((x + j)\theta)` over
    :math:`j = -w, \dots, w` is :math:`D_w(\theta)\cos(x\theta)`,

    .. math:: \bar g_w(x) = \frac{1}{2w+1}\sum_{j=-w}^{w} g(x + j)
              = 2\sum_{i=0}^{d/2-1} D_w(\theta_i)\cos(x\theta_i), \qquad
              D_w(\theta) = \frac{\sin\big((2w+1)\theta/2\big)}{(2w+1)\sin(\theta/2)},

    which is how it is computed (one weighted sum of d/2 cosines per distance).

    Width. The default is :math:`w = \lceil \pi b\ln b / d\rceil`, so that the window spans
    :math:`2w + 1 \ge 2\pi b\ln b / d` distances. That is the longest period of a pair past
    the Nyquist limit at distance :math:`\pi b/2` (:func:`undersampled_terms`: pair i is
    undersampled at x when :math:`T_i < 4x\ln b/d`), the distance near which the local mean
    turns (the limit of :func:`quarter_period` as :math:`d \to \infty`). Why: the
    undersampled pairs are the aliasing noise of the sum; a pair whose period is at most the
    window (and :math:`\theta \le 1`, as for every RoPE pair) is damped to at most 0.2266 of its
    size: with :math:`u = (2w+1)\theta/2 \ge \pi` and :math:`\sin(\theta/2) \ge \theta\sin(1/2)`,
    :math:`|D_w(\theta)| \le (|\sin u|/u)/(2\sin(1/2))`, and :math:`|\sin u|/u \le 0.21723` on
    :math:`u \ge \pi` (its first side lobe). A pair whose period is many windows long, such
    as the slowest ones that set the trend, passes almost unchanged (:math:`D_w(\theta) \ge 1 - ((2w+1)\theta)^2/24`). The trend
    itself varies on the scale of b, much longer than the window. ``half_width=0`` gives
    :func:`ones_score`.

    Parameters
    ----------
    distance : float or array_like
        Centre(s) :math:`x` of the window; any finite real numbers of magnitude at most
        ``MAX_POSITION`` (the window moves by whole steps from x). Even in x.
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base :math:`b > 1`.
    half_width : int or None
        :math:`w \ge 0`, at most ``MAX_POSITION``; ``None`` for the default above.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        Same shape as ``distance``.
    """
    freqs = theta(d, base)
    d = 2 * freqs.size
    base = check_base(base)
    if half_width is None:
        h = _default_half_width(d, base)
    else:
        h = check_positive_int(half_width, "half_width", minimum=0, maximum=MAX_POSITION)
    width = 2.0 * h + 1.0
    weights = np.sin(0.5 * width * freqs) / (width * np.sin(0.5 * freqs))
    x = check_distance_array(distance, "distance")
    flat = x.ravel()
    out = np.empty(flat.shape)
    for blk in _blocks(flat.size, freqs.size):
        out[blk] = 2.0 * (np.cos(np.multiply.outer(flat[blk], freqs)) @ weights)
    return _scalar_or_array(out.reshape(x.shape))


# --------------------------------------------------------------------------------------------
# the continuum view
# --------------------------------------------------------------------------------------------
def _ci_difference(x: np.ndarray, base: float) -> np.ndarray:
    r"""Closed form of :math:`\mathrm{Re}\int_0^1 e^{\mathrm i x b^{-t}}dt`.

    Equal to :math:`(\mathrm{Ci}(|x|)-\mathrm{Ci}(|x|/b))/\ln b`, and 1 at x = 0.
    """
    from scipy.special import sici

    ax = np.abs(x)
    log_b = np.log(base)
    out = np.empty(ax.shape)
    small = ax < 1e-4
    # Series at x -> 0: 1 - x^2 (1 - b^{-2}) / (4 ln b) + O(x^4); avoids Ci(0) = -inf.
    out[small] = 1.0 - ax[small] ** 2 * (1.0 - base**-2.0) / (4.0 * log_b)
    big = ~small
    out[big] = (sici(ax[big])[1] - sici(ax[big] / base)[1]) / log_b
    return out


def integral_score(distance: Any, d: int, base: float = 10000.0) -> np.ndarray | np.float64:
    r"""Continuum approximation of :func:`ones_score`, in closed form.

    Replacing the sum over :math:`t_i = 2i/d` by an integral over :math:`t \in [0, 1]` and
    substituting :math:`u = x b^{-t}`:

    .. math:: g(x) \approx d\,\mathrm{Re}\int_0^1 e^{\mathrm i x b^{-t}}\,dt
              = d\,\frac{\mathrm{Ci}(|x|) - \mathrm{Ci}(|x|/b)}{\ln b},
              \qquad \lim_{x\to 0} = d,

    with the cosine integral :math:`\mathrm{Ci}(z) = -\int_z^\infty \cos u/u\,du`.

    Parameters
    ----------
    distance : float or array_like
        Relative distance(s); any finite real numbers.
    d : int
        Head dimension, even, >= 2 (only a prefactor here).
    base : float
        RoPE base :math:`b > 1`.
    """
    d = check_dim(d)
    base = check_base(base)
    x = check_distance_array(distance, "distance")
    return _scalar_or_array(d * _ci_difference(x, base))


def undersampled_terms(distance: Any, d: int, base: float = 10000.0) -> np.ndarray | np.float64:
    r"""Number of terms of :math:`g(x)` that the sum over :math:`t_i = 2i/d` undersamples.

    The phase :math:`x b^{-t}` advances by about :math:`x\theta_i \cdot 2\ln b/d` from term i
    to term i+1. Term i is undersampled (step > :math:`\pi`, past the Nyquist limit) when
    :math:`\theta_i > x_*/x` with :math:`x_* = \pi d/(2\ln b)`; their number is

    .. math:: \nu(x) = \operatorname{clip}\Big(\frac{d}{2\ln b}\ln\frac{x}{x_*},\ 0,\ \frac d2\Big).

    Treating those terms as random phases, the sum departs from the integral by a noise of
    root mean square :math:`\sqrt{2\nu(x)}` (each :math:`2\cos` of a uniform phase has variance 2).
    A heuristic estimate, checked numerically in the chapter; not a bound.
    """
    d = check_dim(d)
    base = check_base(base)
    x = np.abs(check_distance_array(distance, "distance"))
    x_star = np.pi * d / (2.0 * np.log(base))
    with np.errstate(divide="ignore"):
        nu = d / (2.0 * np.log(base)) * np.log(x / x_star)
    return _scalar_or_array(np.clip(nu, 0.0, d / 2))


def gap_rms(
    windows: Sequence[tuple[int, int]], d: int, base: float = 10000.0
) -> tuple[np.ndarray, np.ndarray]:
    r"""Root mean square of the gap between the sum and the integral, and its random-phase model.

    For each window :math:`[lo, hi)` of integer distances, returns

    .. math:: \Big(\operatorname{mean}_{lo \le x < hi}\big(g(x) - I(x)\big)^2\Big)^{1/2}
              \quad\text{and}\quad
              \Big(\operatorname{mean}_{lo \le x < hi}\ 2\nu(x)\Big)^{1/2},

    where :math:`g` is :func:`ones_score`, :math:`I` is :func:`integral_score` and
    :math:`\nu` is :func:`undersampled_terms`.

    Parameters
    ----------
    windows : sequence of (int, int)
        At most ``MAX_WINDOWS`` (4096) pairs ``(lo, hi)`` of integers with
        ``0 <= lo < hi <= MAX_POSITION`` (2**32), holding at most ``MAX_ELEMENTS`` (2**27)
        distances in all.
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base :math:`b > 1`.

    Returns
    -------
    (rms, model) : tuple of numpy.ndarray
        One entry per window.
    """
    d = check_dim(d)
    base = check_base(base)
    pairs = _windows(windows)
    rms, model = [], []
    for lo, hi in pairs:
        x = np.arange(lo, hi)
        gap = ones_score(x, d, base) - integral_score(x, d, base)
        rms.append(np.sqrt(np.mean(gap**2)))
        model.append(np.sqrt(np.mean(2.0 * undersampled_terms(x, d, base))))
    return np.array(rms), np.array(model)


def _windows(windows: Any) -> list[tuple[int, int]]:
    """``windows`` as a list of ``(lo, hi)`` integer pairs, each checked by name."""
    what = "windows must be a sequence of (lo, hi) pairs of integers, 0 <= lo < hi"
    if isinstance(windows, (str, bytes)) or not hasattr(windows, "__iter__"):
        raise TypeError(f"{what}, got {windows!r:.60}")
    pairs, total = [], 0
    for i, window in enumerate(windows):
        if i >= MAX_WINDOWS:
            raise ValueError(f"windows must hold at most {MAX_WINDOWS} pairs")
        try:
            lo, hi = window
        except (TypeError, ValueError) as error:
            raise TypeError(f"{what}; windows[{i}] is {window!r:.60}") from error
        lo = check_positive_int(lo, f"windows[{i}] start", minimum=0, maximum=MAX_POSITION - 1)
        hi = check_positive_int(hi, f"windows[{i}] end", minimum=lo + 1, maximum=MAX_POSITION)
        total += hi - lo
        check_elements(total, "the distances of windows", hint="use shorter windows")
        pairs.append((lo, hi))
    return pairs


# --------------------------------------------------------------------------------------------
# other schedules theta_t
# --------------------------------------------------------------------------------------------
_NUM = r"([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"
_EXP_RE = re.compile(rf"^\s*{_NUM}\s*\^\s*-\s*t\s*$")
_POW_RE = re.compile(rf"^\s*t\s*\^\s*{_NUM}\s*$")


def _parse_schedule(schedule: Any, name: str = "schedule") -> tuple[str, float]:
    if not isinstance(schedule, str):
        raise TypeError(
            f"{name} must be a string such as '10000^-t', 't^2' or 't', got {schedule!r:.60}"
        )
    if schedule.strip() == "t":
        return "power", 1.0
    match = _EXP_RE.match(schedule)
    if match:
        b = float(match.group(1))
        if not np.isfinite(b) or b <= 1.0:
            raise ValueError(f"{name} '{schedule}': the base b in 'b^-t' must be > 1")
        return "exponential", b
    match = _POW_RE.match(schedule)
    if match:
        alpha = float(match.group(1))
        if not np.isfinite(alpha) or alpha <= 0.0:
            raise ValueError(f"{name} '{schedule}': the exponent in 't^alpha' must be > 0")
        return "power", alpha
    raise ValueError(
        f"{name} must look like 'b^-t' (b > 1), 't^alpha' (alpha > 0) or 't', got {schedule!r:.60}"
    )


def schedule_theta(t: Any, schedule: str) -> np.ndarray | np.float64:
    r"""Frequency schedule :math:`\theta_t` on :math:`t \in [0, 1]`.

    ``"b^-t"`` gives :math:`\theta_t = b^{-t}` (RoPE: ``"10000^-t"``), ``"t^alpha"`` gives
    :math:`\theta_t = t^\alpha` and ``"t"`` gives :math:`\theta_t = t`.

    Parameters
    ----------
    t : float or array_like
        Points of :math:`[0, 1]`.
    schedule : str
        ``"b^-t"`` with a number b > 1, ``"t^alpha"`` with a number alpha > 0, or ``"t"``.
    """
    kind, p = _parse_schedule(schedule)
    t = check_real_array(t, "t")
    if np.any((t < 0) | (t > 1)):
        raise ValueError("t must lie in [0, 1]")
    out = np.exp(-t * np.log(p)) if kind == "exponential" else t**p
    return _scalar_or_array(out)


def schedule_frequencies(d: int, schedule: str) -> np.ndarray:
    r"""The d/2 frequencies :math:`\theta_{t_i}` at :math:`t_i = 2i/d`, :math:`i = 0..d/2-1`.

    ``schedule_frequencies(d, "10000^-t")`` equals ``theta(d, 10000)``.
    """
    d = check_dim(d)
    return np.asarray(schedule_theta(2.0 * np.arange(d // 2) / d, schedule), dtype=np.float64)


def schedule_score(distance: Any, d: int, schedule: str) -> np.ndarray | np.float64:
    r"""All-ones score with the schedule's frequencies: :math:`2\sum_i\cos(x\,\theta_{t_i})`.

    .. math:: g(x) = 2\sum_{i=0}^{d/2-1}\cos\!\big(x\,\theta_{2i/d}\big)
    """
    freqs = schedule_frequencies(d, schedule)
    return _scalar_or_array(np.asarray(2.0 * np.real(exp_sum(distance, freqs))))


#: Above this x the tail of :func:`_power_integral` is summed as an asymptotic series:
#: QUADPACK's QAWF loses accuracy (1e-10 absolute at x ~ 1e9) and near x ~ 1.3e9 evaluates
#: the integrand at negative u, which ends in a TypeError.
_TAIL_SERIES_FROM = 64.0


def _power_tail_series(x: float, s: float) -> float:
    r""":math:`\int_1^\infty u^{s-1}\cos(xu)\,du` for :math:`0 < s < 1`, :math:`x > 64`.

    With :math:`v = xu` and :math:`a = s - 1` the integral is :math:`x^{-s}\,\mathrm{Re}\,I`,
    :math:`I = \int_x^\infty v^a e^{\mathrm i v}dv`. Integrating by parts,
    :math:`I(a) = \mathrm i x^a e^{\mathrm i x} + \mathrm i a\,I(a - 1)`, so
    :math:`I = \mathrm i e^{\mathrm i x} x^a \sum_k \mathrm i^k a(a-1)\cdots(a-k+1)\,x^{-k}`,
    an asymptotic series whose terms fall below 1e-17 of the sum within about 20 terms for
    x > 64 (the smallest term is near k = x, of order e^{-x}).
    """
    a = s - 1.0
    total, term = 0j, 1.0 + 0j
    for k in range(1, 64):
        total += term
        term = term * 1j * (a - k + 1) / x
        if abs(term) < 1e-17 * abs(total):
            break
    return float((1j * np.exp(1j * x) * x**a * total).real * x**-s)


def _power_integral(x: float, alpha: float) -> float:
    r""":math:`\int_0^1\cos(x t^\alpha)\,dt` for x >= 0, by quadrature (QUADPACK).

    For alpha > 1 and x > 64 the tail :math:`\int_1^\infty` is the asymptotic series of
    :func:`_power_tail_series` instead of QUADPACK's QAWF.
    """
    from scipy.integrate import quad
    from scipy.special import gamma

    if x <= 16.0:  # few oscillations: plain adaptive quadrature in t
        return quad(lambda t: np.cos(x * t**alpha), 0.0, 1.0, limit=200, epsabs=1e-13)[0]
    s = 1.0 / alpha
    if alpha > 1.0:
        # u = t^alpha: (1/alpha) int_0^1 u^{s-1} cos(xu) du
        #            = (1/alpha) [Gamma(s) cos(pi s/2) x^{-s} - int_1^inf u^{s-1} cos(xu) du]
        if x > _TAIL_SERIES_FROM:
            tail = _power_tail_series(x, s)
        else:
            tail = quad(lambda u: u ** (s - 1.0), 1.0, np.inf, weight="cos", wvar=x, limlst=100)[0]
        return (gamma(s) * np.cos(0.5 * np.pi * s) * x**-s - tail) / alpha
    # alpha <= 1: u^{s-1} is bounded on [0, 1]; QAWO handles the oscillation.
    return quad(lambda u: u ** (s - 1.0) / alpha, 0.0, 1.0, weight="cos", wvar=x, limit=400)[0]


def schedule_integral(distance: Any, schedule: str) -> np.ndarray | np.float64:
    r"""Continuum score per dimension, :math:`\mathrm{Re}\int_0^1 e^{\mathrm i x\theta_t}\,dt`.

    Closed forms: :math:`(\mathrm{Ci}(x) - \mathrm{Ci}(x/b))/\ln b` for ``"b^-t"`` and
    :math:`\sin x / x` for ``"t"``; for ``"t^alpha"`` QUADPACK quadrature (for large x,
    :math:`\frac1\alpha[\Gamma(\tfrac1\alpha)\cos\tfrac{\pi}{2\alpha}x^{-1/\alpha}
    - \int_1^\infty u^{1/\alpha-1}\cos(xu)\,du]` when :math:`\alpha > 1`, the tail by
    quadrature up to x = 64 and by its asymptotic series beyond).
    Multiply by d to compare with :func:`schedule_score`. ``distance`` is finite with
    magnitude <= ``MAX_POSITION`` (2**32); each point of a ``"t^alpha"`` schedule costs one
    quadrature or series, so pass arrays of moderate size for those.
    """
    kind, p = _parse_schedule(schedule)
    x = check_distance_array(distance, "distance")
    if kind == "exponential":
        return _scalar_or_array(_ci_difference(x, p))
    if p == 1.0:
        return _scalar_or_array(np.sinc(np.abs(x) / np.pi))
    flat = np.abs(x.ravel())
    out = np.array([_power_integral(float(v), p) for v in flat])
    return _scalar_or_array(out.reshape(x.shape))


def _power_level(alpha: float) -> float:
    from scipy.special import gamma

    return float(gamma(1.0 + 1.0 / alpha) * np.cos(0.5 * np.pi / alpha))


def schedule_envelope(distance: Any, schedule: str) -> np.ndarray | np.float64:
    r"""Long-range envelope of :func:`schedule_integral`, for distances x > 0.

    * ``"b^-t"``: :math:`\mathcal E_b(x) = (|E_1(\mathrm i x)| + |E_1(\mathrm i x/b)|)/\ln b`. Since
      :math:`E_1(\mathrm i z) = -\mathrm{Ci}(z) + \mathrm i(\mathrm{Si}(z) - \pi/2)`, it is
      an upper bound on :math:`|\mathrm{Ci}(x) - \mathrm{Ci}(x/b)|/\ln b` at every x > 0,
      and it tends to :math:`b/(x\ln b)` for :math:`x \gg b`.
    * ``"t^alpha"``, alpha > 1: the level
      :math:`P_\alpha(x) = \Gamma(1 + \tfrac1\alpha)\cos(\tfrac{\pi}{2\alpha})\,x^{-1/\alpha}`,
      from which the integral differs by at most :math:`2/(\alpha x)` (integrate the tail
      :math:`\int_1^\infty u^{1/\alpha - 1}\cos(xu)\,du` by parts). Not a bound: the
      integral stays near this positive level and does not oscillate around zero.
    * ``"t"``: :math:`1/x`, the envelope of :math:`\sin x / x`.

    These formulas carry no phase, so ``distance`` may be any finite nonzero real number,
    beyond ``MAX_POSITION`` too (:func:`envelope_crossover` searches up to :math:`10^{15}`).
    """
    from scipy.special import exp1

    kind, p = _parse_schedule(schedule)
    x = np.abs(check_distance_array(distance, "distance", max_abs=None))  # phase-free: any x
    if np.any(x == 0):
        raise ValueError("distance must be nonzero: the envelopes are for x > 0")
    if kind == "exponential":
        out = (np.abs(exp1(1j * x)) + np.abs(exp1(1j * x / p))) / np.log(p)
    elif p == 1.0:
        out = 1.0 / x
    elif p > 1.0:
        out = _power_level(p) * x ** (-1.0 / p)
    else:
        raise ValueError(f"schedule '{schedule}': envelopes are given for 't^alpha' with alpha > 1")
    return _scalar_or_array(np.asarray(out, dtype=np.float64))


def envelope_crossover(base: float, alpha: float) -> float:
    r"""Distance at which the envelope of :math:`\theta_t = b^{-t}` falls below the level of
    :math:`\theta_t = t^\alpha` (:func:`schedule_envelope`), for alpha > 1.

    Solves :math:`\mathcal E_b(x) = P_\alpha(x)` for x by Brent's method on :math:`\ln x` in
    :math:`[b/10, 10^{15}]`; :math:`\mathcal E_b > P_\alpha` at the left end is required. For
    :math:`x \gg b` the equation reads :math:`b/(x\ln b) = P_\alpha(x)`, whose root is
    :math:`x_c = \big(b/(\Gamma(1+\frac1\alpha)\cos\frac{\pi}{2\alpha}\ln b)\big)^{\alpha/(\alpha-1)}`.
    """
    from scipy.optimize import brentq

    base = check_base(base)
    alpha = check_real(alpha, "alpha", low=1.0, low_open=True, high_open=True)
    exp_s, pow_s = f"{base!r}^-t", f"t^{alpha!r}"

    def diff(log_x: float) -> float:
        x = np.exp(log_x)
        return float(np.log(schedule_envelope(x, exp_s)) - np.log(schedule_envelope(x, pow_s)))

    lo, hi = np.log(base / 10.0), np.log(1e15)
    if not (diff(lo) > 0 > diff(hi)):
        raise ValueError(f"no crossover in [b/10, 1e15] for base {base} and alpha {alpha}")
    return float(np.exp(brentq(diff, lo, hi, xtol=1e-12)))


# --------------------------------------------------------------------------------------------
# random queries and keys
# --------------------------------------------------------------------------------------------
_KINDS = ("independent", "correlated", "ones")


#: Working arrays of one Monte Carlo sample (q, k, the pairs, temporaries, the scores), in
#: units of ``d + len(distance)`` numbers: the call holds about
#: ``_MC_WORK * n_samples * (d + len(distance))`` numbers at its peak.
_MC_WORK = 8


def _check_n_samples(n_samples: Any, d: int, n_distances: int = 1) -> int:
    """``n_samples >= 2`` with the call's whole working memory within ``MAX_ELEMENTS``."""
    per_sample = _MC_WORK * (d + n_distances)
    return check_positive_int(
        n_samples,
        "n_samples",
        minimum=2,
        maximum=max(2, MAX_ELEMENTS // per_sample),
        hint=f"the call's working arrays hold about {_MC_WORK} x n_samples x (d + "
        f"len(distance)) = {_MC_WORK} x n_samples x {d + n_distances} numbers, at most "
        f"rope_lib's MAX_ELEMENTS = {MAX_ELEMENTS}; average several calls with different "
        "seeds for more",
    )


def monte_carlo_score(
    distance: Any,
    d: int,
    base: float = 10000.0,
    kind: str = "independent",
    n_samples: int = 2000,
    rho: float = 0.5,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Monte Carlo mean and standard error of the RoPE score :math:`s(x) = q^\top R_x k`.

    Pairs :math:`(q, k)` are drawn ``n_samples`` times; the same pairs serve every distance.

    * ``"independent"``: :math:`q, k \sim \mathcal N(0, I_d)` independent;
      :math:`\mathbb E\,s(x) = 0` for every x.
    * ``"correlated"``: :math:`q \sim \mathcal N(0, I_d)`,
      :math:`k = \rho q + \sqrt{1-\rho^2}\,\varepsilon`; :math:`\mathbb E\,s(x) = \rho\,g(x)`.
    * ``"ones"``: :math:`q, k = \mathbf 1 + \mathcal N(0, I_d)` independent;
      :math:`\mathbb E\,s(x) = g(x)`,

    where :math:`g` is :func:`ones_score`.

    Parameters
    ----------
    distance : float or array_like
        Relative distance(s) :math:`x`, finite, of magnitude <= ``MAX_POSITION`` (2**32).
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base :math:`b > 1`.
    kind : {"independent", "correlated", "ones"}
        How the pairs are drawn.
    n_samples : int
        Number of pairs, >= 2. The whole call (samples, pairs, temporaries and the table of
        scores) holds about ``8 x n_samples x (d + len(distance))`` numbers, at most
        ``MAX_ELEMENTS`` (2**27, 1 GiB), so ``n_samples <= 2**24 / (d + len(distance))``;
        average several calls with different seeds for more.
    rho : float
        Correlation of ``"correlated"`` pairs, in [-1, 1].
    seed : int
        Seed of ``numpy.random.default_rng``, an integer >= 0.

    Returns
    -------
    (mean, stderr) : tuple of numpy.ndarray
        Sample mean and its standard error (sample std / sqrt(n_samples)), shaped like
        ``distance`` (at least 1-D).
    """
    x = np.atleast_1d(check_distance_array(distance, "distance"))
    freqs = theta(d, base)
    d = freqs.size * 2
    kind = check_choice(kind, "kind", _KINDS)
    n_samples = _check_n_samples(n_samples, d, x.size)
    rho = check_real(rho, "rho", low=-1.0, high=1.0)
    seed = check_seed(seed)
    check_elements(
        n_samples * x.size,
        "the table of scores (n_samples x len(distance))",
        hint="lower n_samples or pass fewer distances per call",
    )
    check_elements(
        (d // 2) * x.size, "the phases (d/2 x len(distance))", hint="pass fewer distances"
    )
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d))
    k = rng.standard_normal((n_samples, d))
    if kind == "correlated":
        k = rho * q + np.sqrt(1.0 - rho**2) * k
    elif kind == "ones":
        q += 1.0
        k += 1.0
    # Pair i as a complex number: q^T R_x k = Re sum_i conj(q_i) k_i e^{i x theta_i}.
    h = (q[:, 0::2] - 1j * q[:, 1::2]) * (k[:, 0::2] + 1j * k[:, 1::2])
    phases = np.exp(1j * np.multiply.outer(freqs, x.ravel()))
    scores = (h @ phases).real
    mean = scores.mean(axis=0).reshape(x.shape)
    stderr = (scores.std(axis=0, ddof=1) / np.sqrt(n_samples)).reshape(x.shape)
    return mean, stderr


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
def _grid_distances(
    max_distance: Any, d: int | None = None, name: str = "max_distance"
) -> np.ndarray:
    r"""Integer distances ``0 .. max_distance``, bounded before anything is allocated.

    At most ``MAX_FIGURE_POINTS`` distances, and with ``d`` given, at most ``MAX_ELEMENTS``
    phases :math:`x\theta_i` (``(max_distance + 1) * d/2``).
    """
    max_distance = check_positive_int(
        max_distance,
        name,
        maximum=MAX_FIGURE_POINTS - 1,
        hint=f"a curve of a figure has at most MAX_FIGURE_POINTS = {MAX_FIGURE_POINTS} points",
    )
    if d is not None:
        check_elements(
            (max_distance + 1) * (d // 2),
            f"the phases of the figure ({name} + 1 distances x d/2)",
            hint=f"lower {name} or d",
        )
    return np.arange(max_distance + 1)


def _figure_ds(ds: Any, name: str = "ds", maximum: int = MAX_FIGURE_CURVES) -> list[int]:
    """``ds`` as a list of 1 to ``maximum`` head dimensions, each checked by name."""
    if isinstance(ds, (str, bytes)) or not hasattr(ds, "__iter__"):
        raise TypeError(f"{name} must be a sequence of even head dimensions, got {ds!r:.60}")
    if hasattr(ds, "__len__") and len(ds) > maximum:
        raise ValueError(f"{name} must hold at most {maximum} head dimensions, got {len(ds)}")
    ds = list(itertools.islice(iter(ds), maximum + 1))  # an endless iterator cannot hang
    if not ds:
        raise ValueError(f"{name} must hold at least one head dimension")
    if len(ds) > maximum:
        raise ValueError(f"{name} must hold at most {maximum} head dimensions, got {len(ds)}")
    return [check_dim(d, f"{name}[{i}]") for i, d in enumerate(ds)]


def plot_counterexamples(d: int = 128, base: float = 10000.0, max_distance: int = 60):
    r"""Figure: :math:`g(x)/d` for :math:`\theta_i = 0`, :math:`\theta_i = 1` and RoPE's
    :math:`\theta_i = b^{-2i/d}`, for integer distances 0..max_distance."""
    d = check_dim(d)
    base = check_base(base)
    x = _grid_distances(max_distance, d)
    curves = [
        (r"$\theta_i = 0$: $g = d$", 2.0 * np.real(exp_sum(x, np.zeros(d // 2))) / d),
        (r"$\theta_i = 1$: $g = d\cos x$", 2.0 * np.real(exp_sum(x, np.ones(d // 2))) / d),
        (rf"$\theta_i = {base:g}^{{-2i/d}}$", ones_score(x, d, base) / d),
    ]
    fig, ax = plotting.new_figure()
    for k, (label, y) in enumerate(curves):
        ax.plot(x, y, label=label, **plotting.line_style(k))
    ax.set_xlabel("relative distance $x$")
    ax.set_ylabel("$g(x)/d$")
    ax.set_title(f"All-ones score, d = {d}: three choices of the frequencies")
    fig.legend(loc="outside lower center", ncols=3)
    return fig


def plot_ones_score(
    ds: Sequence[int] = (4, 256), base: float = 10000.0, max_distance: int | None = None
):
    r"""Figure: one panel per d, :math:`g(x)` against x (left axis), the slowest term
    :math:`2\cos(x\theta_{d/2-1})` on a twin right axis, and the quarter period
    :math:`T_{d/2-1}/4` marked by a dotted vertical line.

    ``max_distance=None`` shows each panel up to its quarter period (at least 2000).
    ``fig.axes`` holds the main panels first, then their twins in the same order.
    ``ds`` holds 1 to ``MAX_FIGURE_CURVES`` (16) head dimensions; each panel shows at most
    ``MAX_FIGURE_POINTS`` (2**22) distances and ``MAX_ELEMENTS`` phases (distances x d/2)."""
    ds = _figure_ds(ds)
    base = check_base(base)
    tops = []
    for d in ds:
        if max_distance is not None:
            top = max_distance
        else:
            quarter = quarter_period(d, base)
            if quarter > MAX_FIGURE_POINTS - 1:
                raise ValueError(
                    f"max_distance=None shows each panel up to its quarter period, "
                    f"{quarter:.3g} for d = {d} and base = {base:g}: more than "
                    f"MAX_FIGURE_POINTS = {MAX_FIGURE_POINTS}; pass max_distance"
                )
            top = max(2000, int(np.ceil(quarter)))
        _grid_distances(top, d)  # bounds checked for every panel before any is drawn
        tops.append(top)
    fig, axes = plotting.new_figure(ncols=len(ds), width=4.6 * len(ds), height=3.8)
    axes = np.atleast_1d(axes)
    slow_style = plotting.line_style(1)
    for ax, d, top in zip(axes, ds, tops, strict=True):
        quarter = quarter_period(d, base)
        x = _grid_distances(top, d)
        ax.plot(x, ones_score(x, d, base), label="$g(x)$", lw=0.6, **plotting.line_style(0))
        twin = ax.twinx()
        slow = 2.0 * np.cos(x * theta(d, base)[-1])
        twin.plot(x, slow, label=r"$2\cos(x\theta_{d/2-1})$ (right axis)", lw=2.0, **slow_style)
        twin.set_ylim(-2.2, 2.2)
        twin.set_ylabel(r"slowest term $2\cos(x\theta_{d/2-1})$", color=slow_style["color"])
        twin.tick_params(axis="y", colors=slow_style["color"])
        twin.spines["right"].set_visible(True)
        if quarter <= top:
            ax.axvline(quarter, color="0.3", lw=1, linestyle=":")
            left = quarter < 0.6 * top
            ax.annotate(
                f" $T_{{d/2-1}}/4 \\approx {quarter:.0f}$ ",
                (quarter, 0.02),
                xycoords=("data", "axes fraction"),
                ha="left" if left else "right",
                va="bottom",
                fontsize=9,
                backgroundcolor="white",
            )
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # keep 5-digit tick labels apart
        ax.set_xlabel("relative distance $x$")
        ax.set_ylabel("$g(x)$")
        ax.set_title(f"d = {d}, base = {base:g}")
    handles = [*axes[0].get_legend_handles_labels()[0], *fig.axes[len(ds)].get_lines()]
    fig.legend(handles=handles, loc="outside lower center", ncols=2)
    return fig


def plot_windowed_mean(
    d: int = 256,
    base: float = 10000.0,
    max_distance: int = 40_000,
    half_width: int | None = None,
):
    r"""Figure: the all-ones score, its local mean and the continuum score, two panels.

    For integer distances 0..max_distance: :func:`ones_score` :math:`g(x)` (thin), the
    windowed mean :math:`\bar g_w(x)` of :func:`windowed_mean_score` (thick, ``half_width``
    as there) and the continuum score :math:`d\,(\mathrm{Ci}(x) - \mathrm{Ci}(x/b))/\ln b` of
    :func:`integral_score` (dashed), with dotted vertical lines at the quarter period
    :math:`T_{d/2-1}/4` and at its limit :math:`\pi b/2`, and a marker at the smallest
    windowed mean. Top panel: the whole range of the score; bottom panel: the same curves
    with the vertical axis zoomed on the trough of the local mean.

    ``max_distance`` is at most ``MAX_FIGURE_POINTS - 1`` and ``(max_distance + 1) * d/2`` at
    most ``MAX_ELEMENTS``; ``half_width`` is ``None`` or an integer in [0, ``MAX_POSITION``].
    """
    d = check_dim(d)
    base = check_base(base)
    if half_width is None:
        h = _default_half_width(d, base)
    else:
        h = check_positive_int(half_width, "half_width", minimum=0, maximum=MAX_POSITION)
    x = _grid_distances(max_distance, d)
    g = ones_score(x, d, base)
    local = windowed_mean_score(x, d, base, h)
    continuum = integral_score(x, d, base)
    i_min = int(np.argmin(local))
    marks = [
        (quarter_period(d, base), r"$T_{d/2-1}/4$"),
        (0.5 * np.pi * base, r"$\pi b/2$"),
    ]
    fig, axes = plotting.new_figure(nrows=2, width=7.0, height=5.8, sharex=True)
    for ax in axes:
        ax.plot(x, g, label="$g(x)$", lw=0.4, alpha=0.6, **plotting.line_style(0))
        ax.plot(
            x,
            local,
            label=f"local mean $\\bar g_w(x)$, window {2 * h + 1}",
            lw=2.6,
            **plotting.line_style(1),
        )
        ax.plot(  # drawn last: it runs under the local mean from x ~ 2000 on
            x,
            continuum,
            label=r"continuum $d\,\mathrm{Re}\int_0^1 e^{ixb^{-t}}dt$",
            lw=1.1,
            color="black",
            linestyle=(0, (2, 1)),  # short dashes: the local mean has line_style(1)'s "--"
        )
        ax.axhline(0.0, color="0.5", lw=0.8)
        for k, (pos, label) in enumerate(marks):
            if pos <= x[-1]:
                ax.axvline(pos, color="0.3", lw=1, linestyle=":")
                if ax is axes[0]:
                    ax.annotate(
                        label,
                        (pos, 0.97 - 0.12 * k),
                        xycoords=("data", "axes fraction"),
                        ha="left" if k == 1 else "right",
                        va="top",
                        fontsize=9,
                        backgroundcolor="white",
                    )
        ax.set_ylabel("score")
    axes[1].plot(x[i_min], local[i_min], "o", color="black", ms=5, zorder=5)
    axes[1].annotate(
        f"smallest local mean {local[i_min]:.1f} at $x = {x[i_min]}$",
        (x[i_min], local[i_min]),
        xytext=(0, -18),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=9,
        backgroundcolor="white",
    )
    depth = max(4.0 * abs(float(local.min())), 1.0)
    axes[1].set_ylim(-depth, depth)
    axes[0].set_title(f"All-ones score and its local mean, d = {d}, base = {base:g}")
    axes[1].set_title("the same, vertical axis zoomed on the trough", fontsize=10)
    axes[1].set_xlabel("relative distance $x$")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    return fig


def plot_quarter_period(
    ds: Sequence[int] = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), base: float = 10000.0
):
    r"""Figure: :math:`T_{d/2-1}/4 = \frac\pi2 b^{(d-2)/d}` against d (log axes), with
    its limit :math:`\frac\pi2 b` and LLaMA's head dimension 128 marked. ``ds`` holds 1 to
    ``MAX_FIGURE_POINTS`` even head dimensions."""
    ds = np.array(_figure_ds(ds, maximum=MAX_FIGURE_POINTS))
    base = check_base(base)
    y = np.array([quarter_period(int(d), base) for d in ds])
    fig, ax = plotting.new_figure(width=6.0, height=3.4)
    ax.plot(ds, y, marker="o", label=r"$T_{d/2-1}/4$", **plotting.line_style(0))
    ax.axhline(0.5 * np.pi * base, label=r"limit $\frac{\pi}{2} b$", **plotting.line_style(1))
    ax.axvline(128, color="0.4", lw=1, linestyle=":")
    ax.annotate(
        "head dim 128",
        (128, 0.05),
        xycoords=("data", "axes fraction"),
        fontsize=9,
        ha="right",
        rotation=90,
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("head dimension $d$")
    ax.set_ylabel("quarter of the slowest period")
    ax.set_title(f"Decay horizon against d, base = {base:g}")
    ax.legend(loc="lower right")
    return fig


def plot_sum_vs_integral(d: int = 128, base: float = 10000.0, max_distance: int = 100_000):
    r"""Figure: the discrete :math:`g(x)` against :math:`d\,\mathrm{Re}\int_0^1
    e^{\mathrm i x b^{-t}}dt` for integer x in [1, max_distance] (log x axis), and their
    difference in a second panel with the random-phase envelope
    :math:`\pm\sqrt{2\nu(x)}` of :func:`undersampled_terms` and the Nyquist distance
    :math:`x_* = \pi d/(2\ln b)`."""
    d = check_dim(d)
    base = check_base(base)
    x = _grid_distances(max_distance, d)[1:]
    g = ones_score(x, d, base)
    integral = integral_score(x, d, base)
    fig, (ax, ax2) = plotting.new_figure(nrows=2, width=7.0, height=5.2, sharex=True)
    ax.plot(x, g, label="sum $g(x)$", lw=0.6, **plotting.line_style(0))
    ax.plot(
        x,
        integral,
        label=r"integral $d\,\mathrm{Re}\int_0^1 e^{ixb^{-t}}dt$",
        lw=1.8,
        **plotting.line_style(1),
    )
    ax.set_ylabel("score")
    ax.set_title(f"Sum against integral, d = {d}, base = {base:g}")
    ax.legend(loc="upper right")
    ax2.plot(x, g - integral, lw=0.6, label="sum - integral", **plotting.line_style(2))
    envelope = np.sqrt(2.0 * undersampled_terms(x, d, base))
    ax2.plot(x, envelope, lw=1.4, label=r"$\pm\sqrt{2\nu(x)}$", **plotting.line_style(3))
    ax2.plot(x, -envelope, lw=1.4, **plotting.line_style(3))
    ax2.axvline(
        np.pi * d / (2 * np.log(base)),
        color="0.3",
        lw=1,
        linestyle="--",  # the envelope is dotted (line_style(3))
        label=r"$x = \pi d / (2\ln b)$",
    )
    ax2.set_xscale("log")
    ax2.set_xlabel("relative distance $x$")
    ax2.set_ylabel("difference")
    ax2.legend(loc="upper left")
    return fig


def _figure_schedules(schedules: Any) -> list[str]:
    """``schedules`` as a list of 1 to ``MAX_FIGURE_CURVES`` valid schedule strings."""
    if isinstance(schedules, (str, bytes)) or not hasattr(schedules, "__iter__"):
        raise TypeError(
            f"schedules must be a sequence of schedule strings such as ('10000^-t', 't^2'), "
            f"got {schedules!r:.60}"
        )
    items = list(itertools.islice(iter(schedules), MAX_FIGURE_CURVES + 1))
    if not items:
        raise ValueError("schedules must hold at least one schedule string")
    if len(items) > MAX_FIGURE_CURVES:
        raise ValueError(f"schedules must hold at most {MAX_FIGURE_CURVES} schedule strings")
    for i, schedule in enumerate(items):
        _parse_schedule(schedule, f"schedules[{i}]")
    return items


def plot_schedules(
    d: int | None = None,
    schedules: Sequence[str] = DEFAULT_SCHEDULES,
    short_max: float = 60.0,
    long_max: float = 20000.0,
    n_points: int = 400,
):
    r"""Figure: score per dimension for several schedules :math:`\theta_t`, short range
    (linear x) and long range (log x).

    ``d=None`` plots the continuum :math:`\mathrm{Re}\int_0^1 e^{\mathrm i x\theta_t}dt`
    (:func:`schedule_integral`); an even ``d`` plots the discrete
    :math:`g(x)/d = \frac2d\sum_i\cos(x\theta_{2i/d})` (:func:`schedule_score`) at integer x.

    ``schedules`` holds 1 to ``MAX_FIGURE_CURVES`` (16) schedule strings (see
    :func:`schedule_theta`); ``1 < short_max < long_max``, ``short_max`` below
    ``MAX_FIGURE_POINTS`` (the discrete short range has one point per integer) and ``long_max``
    at most ``MAX_POSITION``; ``n_points`` from 10 to ``MAX_SCHEDULE_POINTS`` (20000)."""
    if d is not None:
        d = check_dim(d)
    parsed = _figure_schedules(schedules)
    short_max = check_real(
        short_max, "short_max", low=1.0, high=MAX_FIGURE_POINTS - 1, low_open=True
    )
    long_max = check_real(long_max, "long_max", low=1.0, high=MAX_POSITION, low_open=True)
    if not short_max < long_max:
        raise ValueError(
            f"short_max and long_max must satisfy 1 < short_max < long_max, got "
            f"short_max = {short_max:g} and long_max = {long_max:g}"
        )
    n_points = check_positive_int(
        n_points,
        "n_points",
        minimum=10,
        maximum=MAX_SCHEDULE_POINTS,
        hint="the continuum curves of power schedules need one quadrature per point",
    )
    if d is not None:
        for what, count in (
            ("short_max + 1", int(short_max) + 1),
            ("20 * n_points", 20 * n_points),
        ):
            check_elements(
                count * (d // 2) * len(parsed),
                f"the phases of the figure ({what} distances x d/2 x len(schedules))",
                hint="lower short_max, n_points or d",
            )
    if d is None:
        xs = np.linspace(0.0, short_max, n_points)
        xl = np.geomspace(1.0, long_max, n_points)
    else:
        xs = np.arange(int(short_max) + 1)
        xl = np.unique(np.round(np.geomspace(1.0, long_max, 20 * n_points)).astype(np.int64))
    fig, (ax1, ax2) = plotting.new_figure(ncols=2, width=10.0, height=3.8)
    for k, schedule in enumerate(parsed):
        if d is None:
            ys, yl = schedule_integral(xs, schedule), schedule_integral(xl, schedule)
        else:
            ys, yl = schedule_score(xs, d, schedule) / d, schedule_score(xl, d, schedule) / d
        label = r"$\theta_t = " + schedule.replace("^-t", "^{-t}") + "$"
        ax1.plot(xs, ys, label=label, **plotting.line_style(k))
        ax2.plot(xl, yl, label=label, lw=1.0 if d is None else 0.6, **plotting.line_style(k))
    what = "continuum" if d is None else f"d = {d}"
    for ax, rng in ((ax1, "short range"), (ax2, "long range")):
        ax.axhline(0.0, color="0.5", lw=0.8)
        ax.set_xlabel("relative distance $x$")
        ax.set_title(f"{rng} ({what})")
    ax1.set_ylabel("score per dimension")
    ax2.set_xscale("log")
    ax1.legend(loc="upper right")
    return fig


def plot_roformer_bound(d: int = 128, base: float = 10000.0, max_distance: int = 256):
    r"""Figure 2 of RoFormer: :func:`roformer_bound` at integer distances 0..max_distance.

    ``max_distance`` is at most ``MAX_FIGURE_POINTS - 1`` and ``(max_distance + 1) * d/2`` at
    most ``MAX_ELEMENTS``."""
    d = check_dim(d)
    base = check_base(base)
    x = _grid_distances(max_distance, d)
    fig, ax = plotting.new_figure(width=6.0, height=3.6)
    ax.plot(
        x,
        roformer_bound(x, d, base),
        label=r"$\frac{1}{d/2}\sum_{j=1}^{d/2}|S_j|$",
        **plotting.line_style(0),
    )
    ax.set_xlabel("relative distance $x$")
    ax.set_ylabel("relative upper bound")
    ax.set_title(f"Long-term decay of RoPE (RoFormer Fig. 2): d = {d}, base = {base:g}")
    ax.legend(loc="upper right")
    return fig


def plot_monte_carlo(
    d: int = 128,
    base: float = 10000.0,
    max_distance: int = 256,
    step: int = 8,
    n_samples: int = 2000,
    rho: float = 0.5,
    seed: int = 0,
):
    r"""Figure: Monte Carlo mean of :math:`q^\top R_x k` with error bars of two standard
    errors, for independent, correlated (:math:`\rho`) and all-ones-mean queries and keys,
    against their exact expectations :math:`0`, :math:`\rho g(x)` and :math:`g(x)`.

    Distances ``0, step, 2 step, ...`` up to ``max_distance`` (at most
    ``MAX_FIGURE_POINTS - 1``), with ``1 <= step <= max_distance``; ``n_samples``, ``rho`` and
    ``seed`` as in :func:`monte_carlo_score` (the three cases use seeds ``seed``,
    ``seed + 1`` and ``seed + 2``)."""
    d = check_dim(d)
    base = check_base(base)
    max_distance = check_positive_int(
        max_distance,
        "max_distance",
        maximum=MAX_FIGURE_POINTS - 1,
        hint=f"a curve of a figure has at most MAX_FIGURE_POINTS = {MAX_FIGURE_POINTS} points",
    )
    step = check_positive_int(
        step, "step", maximum=max_distance, hint="a step beyond max_distance leaves one point"
    )
    rho = check_real(rho, "rho", low=-1.0, high=1.0)
    seed = check_seed(seed)
    x = np.arange(0, max_distance + 1, step)
    n_samples = _check_n_samples(n_samples, d, x.size)  # checked before anything is computed
    check_elements(
        n_samples * x.size,
        "the table of scores (n_samples x number of distances)",
        hint="lower n_samples or raise step",
    )
    g = ones_score(x, d, base)
    cases = [
        ("independent", "independent, zero mean", np.zeros_like(g)),
        ("correlated", rf"correlated, $\rho = {rho:g}$", rho * g),
        ("ones", r"mean $\mathbf{1}$", g),
    ]
    fig, ax = plotting.new_figure(width=7.0, height=4.0)
    for k, (kind, label, exact) in enumerate(cases):
        mean, err = monte_carlo_score(x, d, base, kind, n_samples, rho, seed + k)
        style = plotting.line_style(k)
        ax.errorbar(
            x,
            mean,
            yerr=2 * err,
            fmt="os^"[k],  # a marker shape per case: readable without colour
            ms=3,
            capsize=2,
            color=style["color"],
            label=f"{label}: MC mean $\\pm 2$ s.e.",
        )
        ax.plot(x, exact, lw=1.2, color=style["color"], linestyle=style["linestyle"])
    ax.plot([], [], color="0.3", label="exact expectation (lines)")
    ax.set_xlabel("relative distance $x$")
    ax.set_ylabel(r"$\mathbb{E}\,[q^\top R_x k]$")
    ax.set_title(f"Expected RoPE score, d = {d}, {n_samples} samples")
    ax.legend(loc="upper right", fontsize=9)
    return fig


def plot_diagonal_h(d: int = 128, base: float = 10000.0, max_distance: int = 256):
    r"""Figure: relative part of the diagonal-:math:`\mathcal H` score :math:`p_x^\top\mathcal H p_0`.

    Two diagonals :math:`\mathcal H = \mathrm{diag}(h_0, \dots, h_{d-1})` are compared, in the
    notation of chapter 3 (``eq-sin-diag-h-split``).

    The relative part :math:`\sum_i \beta_i\cos(x\theta_i)` with
    :math:`\beta_i = (h_{2i} + h_{2i+1})/2` comes from
    :func:`rope_lib.sinusoidal.diagonal_h_parts` at ``m = x``, ``n = 0``. Left, the smooth
    diagonal :math:`h_{2i} = h_{2i+1} = 1 - 2i/d`, whose every step, the last included, is
    2/d; right, :math:`h_{2i} = h_{2i+1} = 1` on the slowest quarter of the pairs
    (:math:`i \ge 3d/8`) and 0 elsewhere, whose last step is 1. Each panel shows the Abel
    bound :math:`\pm\max_i|\beta_{i+1}-\beta_i|\sum_{j=1}^{d/2}|S_j(x)|` with
    :math:`\beta_{d/2} = 0`.
    """
    from .sinusoidal import diagonal_h_parts

    d = check_dim(d)
    base = check_base(base)
    n = d // 2
    x = _grid_distances(max_distance, d)
    ramp = 1.0 - np.arange(n) / n
    slow_only = (np.arange(n) >= (3 * n) // 4).astype(float)
    diagonals = [
        ("smooth: $h_{2i} = h_{2i+1} = 1 - 2i/d$", np.repeat(ramp, 2)),
        ("slow pairs only: $h_{2i} = h_{2i+1} = [i \\geq 3d/8]$", np.repeat(slow_only, 2)),
    ]
    sum_abs = n * roformer_bound(x, d, base)
    fig, axes = plotting.new_figure(ncols=2, width=10.0, height=3.8)
    for k, (ax, (label, diag)) in enumerate(zip(axes, diagonals, strict=True)):
        rel, _ = diagonal_h_parts(x, 0, diag, base)
        beta = 0.5 * (diag[0::2] + diag[1::2])
        step = np.abs(np.diff(np.append(beta, 0.0))).max()
        ax.plot(x, rel, label=r"$\sum_i \beta_i\cos(x\theta_i)$", **plotting.line_style(2 * k))
        ax.plot(x, step * sum_abs, label="Abel bound", **plotting.line_style(2 * k + 1))
        ax.plot(x, -step * sum_abs, **plotting.line_style(2 * k + 1))
        top = 1.5 * np.abs(rel).max()
        if (step * sum_abs).min() > top:  # vacuous bound: keep the sum readable
            ax.set_ylim(-top, top)
            ax.annotate(
                f"Abel bound $\\geq {(step * sum_abs).min():.0f}$: off the scale",
                (0.5, 0.1),
                xycoords="axes fraction",
                ha="center",
                fontsize=9,
            )
        ax.set_xlabel("relative distance $x$")
        ax.set_title(label)
        ax.legend(loc="best")
    for ax in axes:
        ax.set_ylabel("relative part of $p_m^\\top \\mathcal{H} p_n$")
    return fig
