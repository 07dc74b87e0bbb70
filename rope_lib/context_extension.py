r"""Frequency schedules that run a RoPE model past its training length (``context-extension``).

A model trained only on contexts of length :math:`L` has seen only the rotation angles
:math:`m\theta_i` with :math:`0 \le m < L`.  Every method of running it on a longer
context :math:`L' = sL` (:math:`s \ge 1` is the *scale factor*) replaces the
frequencies :math:`\theta_i = b^{-2i/d}` of :func:`rope_lib.theta` by new ones
:math:`\theta_i'` and sometimes rescales the attention logits as well.

What the context-extension module computes
------------------------------------------
* :func:`scaled_theta`: the new frequencies and the attention factor of the methods
  ``"none"``, ``"linear"`` (position interpolation), ``"ntk"`` (NTK-aware base change),
  ``"dynamic"`` (dynamic NTK), ``"yarn"`` and ``"llama3"``.
* :func:`scaled_margin` and :func:`scaled_horizon`: the similarity margin of the base-bound
  chapter evaluated with the new frequencies, :math:`B_m' = \sum_i \cos(m\theta_i')`, and
  the first distance at which it turns negative.
* The two figures of the chapter are in :mod:`rope_lib.figures.context_extension`.

The conventions follow the reference implementations that models actually run
(Hugging Face ``transformers.modeling_rope_utils``, which reproduces the released code of
YaRN and Meta's reference code of Llama 3.1, ``apply_scaling`` in ``meta-llama/llama-models``);
where a paper writes a formula differently the docstring says so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validate import (
    MAX_POSITION,
    check_base,
    check_choice,
    check_dim,
    check_flag,
    check_integer_array,
    check_positive_int,
    check_real,
)
from .decay import exp_sum
from .frequencies import theta

__all__ = [
    "EXTENSION_METHODS",
    "scaled_theta",
    "yarn_attention_factor",
    "scaled_margin",
    "scaled_horizon",
]

#: The accepted values of ``method`` in ``scaled_theta``.
EXTENSION_METHODS: tuple[str, ...] = ("none", "linear", "ntk", "dynamic", "yarn", "llama3")

# The keyword parameters each method accepts, with their defaults (None: required).
_PARAMS: dict[str, dict[str, Any]] = {
    "none": {},
    "linear": {},
    "ntk": {},
    "dynamic": {"seq_len": None},
    "yarn": {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": True},
    "llama3": {"low_freq_factor": 1.0, "high_freq_factor": 4.0},
}

#: ``original_context`` used by ``"llama3"`` when none is given (Llama 3's 8192).
LLAMA3_ORIGINAL_CONTEXT = 8192

#: Largest ``limit`` of :func:`scaled_horizon`: 2**26 distances, about ten seconds at d = 128.
MAX_HORIZON_LIMIT = 1 << 26


# --------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------
def _check_method(method: Any, name: str = "method") -> str:
    return check_choice(method, name, EXTENSION_METHODS)


def _check_factor(factor: Any) -> float:
    """The scale factor s = target context / training context: every method needs s >= 1
    (s < 1 would shorten the context; YaRN's attention factor 0.1 ln s + 1 assumes s >= 1)."""
    return check_real(factor, "factor", 1.0)


def _check_context(original_context: Any, name: str = "original_context") -> int:
    return check_positive_int(
        original_context,
        name,
        maximum=MAX_POSITION,
        hint="a training context is a number of positions, at most MAX_POSITION = 2**32",
    )


def _positive(value: Any, name: str) -> float:
    return check_real(value, name, 0.0, low_open=True)


def _check_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    accepted = _PARAMS[method]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        names = ", ".join(accepted) if accepted else "none"
        raise TypeError(
            f"method {method!r} got unexpected parameter(s) {unknown}; it accepts: {names}"
        )
    return {**accepted, **params}


# --------------------------------------------------------------------------------------------
# the frequencies
# --------------------------------------------------------------------------------------------
def yarn_attention_factor(factor: float) -> float:
    r"""YaRN's attention factor :math:`\sqrt{1/t} = 0.1\ln s + 1`.

    Peng et al. (2024) divide the logits by a temperature :math:`t` with
    :math:`\sqrt{1/t} = 0.1 \ln s + 1`; implementations multiply both ``cos`` and ``sin``
    (hence :math:`q` and :math:`k`) by :math:`\sqrt{1/t}`, so the logits are multiplied by
    :math:`1/t = (0.1\ln s + 1)^2`.

    Parameters
    ----------
    factor : float
        Scale factor :math:`s \ge 1`.

    Returns
    -------
    float
        :math:`0.1\ln s + 1` (1.0 at :math:`s = 1`).
    """
    s = _check_factor(factor)
    return 0.1 * math.log(s) + 1.0


def _yarn_ramp(
    d: int, base: float, context: int, beta_fast: float, beta_slow: float, truncate: bool
) -> np.ndarray:
    """The weight gamma_i of the original frequency (1: keep theta_i, 0: theta_i / s)."""

    def index_of(rotations: float) -> float:
        # the (real) pair index i at which L theta_i / (2 pi) equals `rotations`
        return d * math.log(context / (rotations * 2.0 * math.pi)) / (2.0 * math.log(base))

    low, high = index_of(beta_fast), index_of(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    n = d // 2
    if low > d - 1:
        # Every pair turns more than beta_fast times: keep them all. (The reference code
        # clamps high to d - 1 < low, its ramp runs backwards and interpolates every pair.)
        return np.ones(n)
    if high < 0:
        # Every pair turns fewer than beta_slow times (L < 2 pi beta_slow): interpolate all.
        return np.zeros(n)
    low, high = max(low, 0), min(high, d - 1)  # the reference code clamps to d - 1
    if low == high:
        high += 0.001  # as in the reference code: avoid dividing by zero
    i = np.arange(n, dtype=np.float64)
    return 1.0 - np.clip((i - low) / (high - low), 0.0, 1.0)


def scaled_theta(
    d: int,
    base: float,
    method: str,
    factor: float,
    original_context: int | None = None,
    **params: Any,
) -> tuple[np.ndarray, float]:
    r"""Frequencies :math:`\theta_i'` and attention factor of a context-extension method.

    With :math:`\theta_i = b^{-2i/d}` (:func:`rope_lib.theta`), scale factor :math:`s`
    (``factor``) and training context :math:`L` (``original_context``):

    ``"none"``
        :math:`\theta_i' = \theta_i` (``factor`` is checked and otherwise ignored).
    ``"linear"``, position interpolation (Chen et al. 2023)
        :math:`\theta_i' = \theta_i / s`: position :math:`n` is read as :math:`n/s`.
    ``"ntk"``, NTK-aware scaling
        :math:`\theta_i' = (b')^{-2i/d}` with :math:`b' = b\, s^{d/(d-2)}`, so that
        :math:`\theta_0' = \theta_0` and :math:`\theta_{d/2-1}' = \theta_{d/2-1}/s`.
    ``"dynamic"``, dynamic NTK scaling
        Parameter ``seq_len`` = :math:`T`, the number of tokens of the current input,
        required. NTK with the effective factor
        :math:`s_T = s\,\max(T, L)/L - (s - 1)`, the rule of Hugging Face
        ``transformers``; :math:`s_T = 1` while :math:`T \le L`, and with ``factor=1``
        it is the :math:`\max(1, T/L)` of Peng et al. (2024).
    ``"yarn"``, YaRN (Peng et al. 2024)
        Parameters ``beta_fast=32``, ``beta_slow=1``, ``truncate=True``.
        :math:`\theta_i' = (1 - \gamma_i)\,\theta_i/s + \gamma_i\,\theta_i`, with the ramp
        :math:`\gamma_i = 1 - \operatorname{clip}\bigl((i - i_{\rm lo})/(i_{\rm hi} - i_{\rm lo}),
        0, 1\bigr)`, where :math:`i(\beta) = \frac{d \ln(L / (2\pi\beta))}{2 \ln b}` is the
        pair index whose frequency makes :math:`\beta` full turns over :math:`L` positions,
        :math:`i_{\rm lo} = \max(\lfloor i(\beta_{\rm fast})\rfloor, 0)` and
        :math:`i_{\rm hi} = \min(\lceil i(\beta_{\rm slow})\rceil, d - 1)` (no floor/ceil if
        ``truncate=False``). As in the paper (which calls the thresholds :math:`\beta` and
        :math:`\alpha`), pairs that turn more than :math:`\beta_{\rm fast}` times are kept and
        pairs that turn less than :math:`\beta_{\rm slow}` times are interpolated, provided some
        pair turns at least :math:`\beta_{\rm fast}` times (otherwise the clamp at index 0
        keeps pair 0, which the paper blends; the reference code does the same).
        Two deliberate differences from the reference code, in the corners where its ramp
        runs backwards (:math:`i_{\rm hi} < i_{\rm lo}` before the division): when
        :math:`i_{\rm lo} > d - 1` before clamping, that is :math:`L \ge 2\pi\beta_{\rm fast}
        b^2` with the floor (e.g. :math:`d = 4, b = 10, L = 32768`), every pair turns more than
        :math:`\beta_{\rm fast}` times and the reference code interpolates every pair; here
        every pair is kept. When :math:`i_{\rm hi} < 0` before clamping (every pair turns fewer
        than :math:`\beta_{\rm slow}` times; with the ceiling, :math:`L \le 2\pi\beta_{\rm slow}
        b^{-2/d}`), the reference code keeps every pair; here every pair is interpolated.
        The paper writes the ramp as linear in the number of turns
        :math:`\rho_i = L\theta_i/(2\pi)`, between :math:`\rho_i = \beta_{\rm slow}` and
        :math:`\rho_i = \beta_{\rm fast}`; the released code, followed here, makes it linear in
        :math:`i`, between the pair indices of those two turn counts rounded outward to
        integers (floor and ceiling, unless ``truncate=False``) and clamped to
        :math:`[0, d - 1]`. Attention factor :math:`0.1 \ln s + 1`
        (:func:`yarn_attention_factor`).
    ``"llama3"``, Llama 3.1
        Meta's reference code, ``apply_scaling`` in ``meta-llama/llama-models``, mirrored by
        Hugging Face's ``"llama3"`` rope type; parameters ``low_freq_factor=1``,
        ``high_freq_factor=4``; ``original_context`` defaults to 8192. With the period (wavelength) :math:`T_i = 2\pi/\theta_i` of pair i,

        .. math::
            \theta_i' = \begin{cases}
            \theta_i & T_i < L/\rho_{\rm high} \\
            \theta_i/s & T_i > L/\rho_{\rm low} \\
            (1 - \eta_i)\,\theta_i/s + \eta_i\,\theta_i, \quad
            \eta_i = \dfrac{L/T_i - \rho_{\rm low}}{\rho_{\rm high} - \rho_{\rm low}}
            & \text{otherwise,}
            \end{cases}

        where :math:`\rho_{\rm low}` = ``low_freq_factor`` and :math:`\rho_{\rm high}` =
        ``high_freq_factor`` are thresholds on the number of turns
        :math:`\rho_i = L/T_i` over :math:`L`. This is YaRN's ramp in the form the YaRN paper
        writes it (linear in :math:`\rho_i`) with :math:`\beta_{\rm slow} = \rho_{\rm low}`,
        :math:`\beta_{\rm fast} = \rho_{\rm high}`, and without YaRN's attention factor.

    Parameters
    ----------
    d : int
        Head dimension (even, >= 2; >= 4 for ``"ntk"`` and ``"dynamic"``, whose exponent
        :math:`d/(d-2)` needs :math:`d > 2`).
    base : float
        RoPE base :math:`b > 1`.
    method : str
        One of :data:`rope_lib.context_extension.EXTENSION_METHODS`.
    factor : float
        Scale factor :math:`s \ge 1` (target context over training context).
    original_context : int, optional
        Training context :math:`L`. Required by ``"dynamic"`` and ``"yarn"``; ``"llama3"``
        uses 8192 when it is omitted; the other methods ignore it (but check it if given).
    **params
        Method-specific parameters listed above; any other name raises ``TypeError``.

    Returns
    -------
    theta : numpy.ndarray
        float64 array of the :math:`d/2` frequencies :math:`\theta_i'`.
    attention_factor : float
        The factor by which implementations multiply ``cos`` and ``sin`` (so the attention
        logits are multiplied by its square): :math:`0.1\ln s + 1` for ``"yarn"``, 1.0 for
        every other method.
    """
    d = check_dim(d)
    base = check_base(base)
    method = _check_method(method)
    s = _check_factor(factor)
    p = _check_params(method, params)
    if original_context is not None:
        original_context = _check_context(original_context)
    elif method == "llama3":
        original_context = LLAMA3_ORIGINAL_CONTEXT
    elif method in ("dynamic", "yarn"):
        raise ValueError(
            f"original_context (the training context length, an integer >= 1) is required "
            f"by method {method!r}"
        )

    th = theta(d, base)
    if method == "none":
        return th, 1.0
    if method == "linear":
        return th / s, 1.0
    if method in ("ntk", "dynamic"):
        if d < 4:
            raise ValueError(f"d must be an even integer >= 4 for method {method!r}, got {d}")
        if method == "dynamic":
            if p["seq_len"] is None:
                raise ValueError(
                    "seq_len (the current sequence length, an integer >= 1) is required by "
                    "method 'dynamic'"
                )
            seq_len = _check_context(p["seq_len"], "seq_len")
            s = s * max(seq_len, original_context) / original_context - (s - 1.0)
        # b' = b s^{d/(d-2)}, computed in logs: theta_i' = exp(-(2i/d) (ln b + d/(d-2) ln s))
        log_base = math.log(base) + d / (d - 2) * math.log(s)
        i = np.arange(d // 2, dtype=np.float64)
        return np.exp(-(2.0 * i / d) * log_base), 1.0
    if method == "yarn":
        beta_fast = _positive(p["beta_fast"], "beta_fast")
        beta_slow = _positive(p["beta_slow"], "beta_slow")
        if beta_fast <= beta_slow:
            raise ValueError(
                f"beta_fast must be larger than beta_slow (full turns over the training context "
                f"above which a pair is kept, below which it is interpolated), got "
                f"{beta_fast} <= {beta_slow}"
            )
        truncate = check_flag(p["truncate"], "truncate")
        gamma = _yarn_ramp(d, base, original_context, beta_fast, beta_slow, truncate)
        return (1.0 - gamma) * th / s + gamma * th, yarn_attention_factor(s)
    # llama3
    low = _positive(p["low_freq_factor"], "low_freq_factor")
    high = _positive(p["high_freq_factor"], "high_freq_factor")
    if high <= low:
        raise ValueError(
            f"high_freq_factor must be larger than low_freq_factor, got {high} <= {low}"
        )
    wavelength = 2.0 * math.pi / th
    eta = (original_context / wavelength - low) / (high - low)
    out = np.where(
        wavelength < original_context / high,
        th,
        np.where(wavelength > original_context / low, th / s, (1.0 - eta) * th / s + eta * th),
    )
    return out, 1.0


# --------------------------------------------------------------------------------------------
# the base bound under scaling
# --------------------------------------------------------------------------------------------
def scaled_margin(
    m: Any,
    d: int,
    base: float,
    method: str,
    factor: float,
    original_context: int | None = None,
    **params: Any,
) -> np.ndarray | np.float64:
    r"""Similarity margin :math:`B_m' = \sum_i \cos(m\theta_i')` with scaled frequencies.

    .. math:: B_m' = \sum_{i=0}^{d/2-1} \cos(m\,\theta_i'),
              \qquad (\theta', a) = \texttt{scaled\_theta}(d, b, \text{method}, s, L, \dots)

    The attention factor :math:`a` of YaRN multiplies the logits, hence the margin, by
    :math:`a^2 > 0`; it changes no sign, so it is left out.

    Parameters
    ----------
    m : int or array_like of int
        Distance(s) :math:`m` (integers).
    d, base, method, factor, original_context, **params
        As in :func:`scaled_theta`.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        :math:`B_m'`, same shape as ``m``.
    """
    ms = check_integer_array(m, "m")
    th, _ = scaled_theta(d, base, method, factor, original_context, **params)
    return np.real(exp_sum(ms, th))


def scaled_horizon(
    d: int,
    base: float,
    method: str,
    factor: float,
    original_context: int | None = None,
    limit: int = 10_000_000,
    **params: Any,
) -> int | None:
    r"""First distance :math:`m \ge 0` with :math:`B_m' < 0`, searched below ``limit``.

    This is the largest context :math:`L^\ast` such that :math:`B_m' \ge 0` for every integer
    :math:`0 \le m < L^\ast`: the base bound of chapter ``base-bound`` for the scaled
    frequencies.

    Parameters
    ----------
    d, base, method, factor, original_context, **params
        As in :func:`scaled_theta`.
    limit : int
        Search :math:`0 \le m <` ``limit`` (default :math:`10^7`, at most
        ``MAX_HORIZON_LIMIT`` = 2**26, about ten seconds at d = 128).

    Returns
    -------
    int or None
        The first :math:`m` with :math:`B_m' < 0`, or ``None`` if there is none below ``limit``
        (pass a larger ``limit`` to search further).
    """
    limit = check_positive_int(
        limit,
        "limit",
        maximum=MAX_HORIZON_LIMIT,
        hint="rope_lib.context_extension.MAX_HORIZON_LIMIT = 2**26 bounds the scan",
    )
    th, _ = scaled_theta(d, base, method, factor, original_context, **params)
    chunk = 1 << 17
    for start in range(0, limit, chunk):
        m = np.arange(start, min(limit, start + chunk), dtype=np.int64)
        neg = np.flatnonzero(np.real(exp_sum(m, th)) < 0)
        if neg.size:
            return int(m[neg[0]])
    return None
