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
  expectation of the score for random queries and keys (:func:`monte_carlo_score`).

The chapter's figures are in ``rope_lib.figures.decay``.

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

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

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
]

#: Largest integer range (max - min + 1) evaluated on the fast grid; beyond it, direct sums.
_GRID_MAX_SPAN = 1 << 22
#: Elements per block of the direct route (bounds the memory of the N x d/2 table).
_BLOCK = 1 << 20
#: Largest number of windows of :func:`gap_rms`.
MAX_WINDOWS = 1 << 12


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
