"""The rotation frequencies theta_i shared by the sinusoidal encoding and RoPE.

Every chapter uses :func:`theta`; the chapter on the base bound reads the
frequencies as functions of ``log(base)``.
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
