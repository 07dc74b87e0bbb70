"""Argument checks shared by every public function of :mod:`rope_lib`.

Each checker either returns the argument in a normalised form or raises a
``ValueError``/``TypeError`` whose message names the argument and says what it
accepts.  Nothing here guesses: a value that would give a silently wrong number
(an odd head dimension, a base of one, a position of 2.5) is refused.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__: list[str] = []


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def check_dim(d: Any, name: str = "d") -> int:
    """Return ``d`` as an ``int`` if it is an even integer >= 2, else raise."""
    if _is_bool(d) or not isinstance(d, numbers.Integral):
        raise TypeError(
            f"{name} must be an even integer >= 2 (the head dimension), got {d!r} "
            f"of type {type(d).__name__}"
        )
    d = int(d)
    if d < 2 or d % 2:
        raise ValueError(f"{name} must be an even integer >= 2 (the head dimension), got {d}")
    return d


def check_base(base: Any, name: str = "base") -> float:
    """Return ``base`` as a ``float`` if it is a finite real number > 1, else raise."""
    if _is_bool(base) or not isinstance(base, numbers.Real):
        raise TypeError(
            f"{name} must be a real number > 1, got {base!r} of type {type(base).__name__}"
        )
    value = float(base)
    if not np.isfinite(value) or value <= 1.0:
        raise ValueError(f"{name} must be a finite real number > 1, got {base!r}")
    return value


def check_positive_int(value: Any, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` if it is an integer >= ``minimum``, else raise."""
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer() and not _is_bool(value):
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def check_integer_array(
    values: Any, name: str = "positions", ndim: int | None = None
) -> np.ndarray:
    """Return ``values`` as an ``int64`` array if every entry is a finite whole number.

    Floats are accepted when they hold whole numbers (``3.0``), because position
    tensors are often stored as floats; ``2.5``, ``nan`` and ``inf`` are refused.
    """
    arr = np.asarray(values)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(
            f"{name} must be integers (a number or an array of numbers), got {values!r}"
        )
    if arr.dtype == bool:
        raise TypeError(f"{name} must be integers, not booleans")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real integers, got complex values")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array of integers, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64, copy=False)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite integers, got a non-finite value (nan or inf)")
    if not np.all(arr == np.round(arr)):
        raise ValueError(f"{name} must be whole numbers (integers), got a fractional value")
    if np.any(np.abs(arr) > 2.0**53):
        raise ValueError(f"{name} must be integers of magnitude <= 2**53, got larger values")
    return arr.astype(np.int64)


def check_real_array(values: Any, name: str) -> np.ndarray:
    """Return ``values`` as a finite ``float64`` array, else raise."""
    arr = np.asarray(values)
    if arr.dtype == object or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be real numbers, got {values!r}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real numbers, got complex values")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got nan or inf")
    return arr
