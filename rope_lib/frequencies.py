"""The rotation frequencies theta_i shared by the sinusoidal encoding and RoPE.

Every chapter uses :func:`theta`; the chapter on the base bound reads the
frequencies as functions of ``log(base)``.  ``angles`` is the table of angles
:math:`m\theta_i` that the sinusoidal encoding and every RoPE route start from (not exported:
its callers validate the positions first).
"""

from __future__ import annotations

import numpy as np

from ._validate import check_base, check_dim

__all__ = ["theta"]


def theta(d: int, base: float = 10000.0) -> np.ndarray:
    r"""Frequencies of the sinusoidal encoding and of RoPE.

    .. math:: \theta_i = b^{-2i/d}, \qquad i = 0, 1, \dots, d/2 - 1.

    Parameters
    ----------
    d : int
        Head dimension; an even integer >= 2.
    base : float
        The base :math:`b > 1` (10000 in Vaswani et al. and RoFormer).

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(d // 2,)``; ``theta[0] == 1`` is the fastest
        pair and ``theta[-1] = b^{-(d-2)/d}`` the slowest.
    """
    d = check_dim(d)
    base = check_base(base)
    i = np.arange(d // 2, dtype=np.float64)
    # exp/log keeps full float64 accuracy for bases up to 1e300.
    return np.exp(-(2.0 * i / d) * np.log(base))


def angles(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    r"""The angles :math:`m\theta_i` in float64, shape ``(len(positions), d/2)``.

    ``positions`` is a 1-D array of validated positions (integers or reals of magnitude at
    most ``MAX_POSITION``); ``d`` and ``base`` are validated too.  An integer position is exact
    in float64 below :math:`2^{53}` and the product is rounded once.  :math:`\theta_i` carries
    a relative error near :math:`|\ln\theta_i|\, 2^{-53}` but an absolute error of at most a
    few :math:`2^{-53}` (since :math:`|\ln t|\, t \le 1/e`), so the angle is off by about
    :math:`|m|\, 2^{-53}` at most: about :math:`10^{-9}` rad at position :math:`10^7`.
    """
    return np.asarray(positions, dtype=np.float64)[:, None] * theta(d, base)[None, :]
