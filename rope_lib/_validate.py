"""Argument checks shared by every public function of :mod:`rope_lib`.

Each checker either returns the argument in a normalised form or raises a
``ValueError``/``TypeError`` whose message names the argument and says what it
accepts.  Nothing here guesses: a value that would give a silently wrong number
(an odd head dimension, a base of one, a position of 2.5, an unsigned integer that
would wrap, a flag given as the string ``"no"``) is refused.

The limits below are part of the contract: a call that would exceed one of them is
refused with a message that names the limit, instead of running for minutes or
allocating many gigabytes.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_DIM", "MAX_POSITION", "MAX_ELEMENTS"]

#: Largest head dimension ``d`` accepted by any function (``theta(MAX_DIM)`` is 256 KiB).
MAX_DIM = 1 << 16
#: Largest magnitude of an integer position or distance.  An angle ``m * theta_i`` is one
#: float64 product, so its absolute error is at most ``|m| * 2**-53`` rad: below 5e-7 rad
#: up to this limit.  Beyond it float64 angles stop being accurate to float32 round-off.
MAX_POSITION = 1 << 32
#: Largest number of elements one result, table or sample set may have (1 GiB of float64).
MAX_ELEMENTS = 1 << 27


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} of type {type(value).__name__}"


def _to_float(value: Any, name: str, what: str) -> float:
    """``float(value)``; a number beyond float64 (a Python int such as ``10**400``) is refused."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} must be {what}, got a number beyond float64 range") from None


def check_dim(d: Any, name: str = "d") -> int:
    """Return ``d`` as an ``int`` if it is an even integer in ``[2, MAX_DIM]``, else raise."""
    if _is_bool(d) or not isinstance(d, numbers.Integral):
        raise TypeError(
            f"{name} must be an even integer >= 2 (the head dimension), got {_describe(d)}"
        )
    d = int(d)
    if d < 2 or d % 2:
        raise ValueError(f"{name} must be an even integer >= 2 (the head dimension), got {d}")
    if d > MAX_DIM:
        raise ValueError(
            f"{name} must be at most {MAX_DIM} (rope_lib's MAX_DIM; real models use 64 to 256), "
            f"got {d}"
        )
    return d


def check_base(base: Any, name: str = "base") -> float:
    """Return ``base`` as a ``float`` if it is a finite real number > 1, else raise."""
    if _is_bool(base) or not isinstance(base, numbers.Real):
        raise TypeError(f"{name} must be a real number > 1, got {_describe(base)}")
    value = _to_float(base, name, "a finite real number > 1")
    if not np.isfinite(value) or value <= 1.0:
        raise ValueError(f"{name} must be a finite real number > 1, got {base!r}")
    return value


def check_positive_int(
    value: Any, name: str, minimum: int = 1, maximum: int | None = None, hint: str = ""
) -> int:
    """Return ``value`` as an ``int`` in ``[minimum, maximum]``, else raise.

    A float holding a whole number (``3.0``) is accepted; ``2.5``, ``nan``, booleans and
    strings are not.  ``hint`` is appended to the message when ``maximum`` is exceeded
    (for example, which keyword raises the limit).
    """
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {_describe(value)}")
    if not isinstance(value, numbers.Integral):
        as_float = _to_float(value, name, f"an integer >= {minimum}")
        if not (np.isfinite(as_float) and as_float.is_integer()):
            raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        extra = f"; {hint}" if hint else ""
        raise ValueError(f"{name} must be an integer <= {maximum}, got {value}{extra}")
    return value


def check_seed(seed: Any, name: str = "seed", maximum: int | None = None) -> int:
    """Return ``seed`` as an ``int >= 0`` (what ``numpy.random.default_rng`` accepts).

    ``maximum`` (optional) bounds it from above, for generators that take a fixed-width seed
    (``torch.manual_seed`` takes at most ``2**64 - 1``); a larger seed is refused by name.
    """
    if _is_bool(seed) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= 0, got {_describe(seed)}")
    if int(seed) < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {int(seed)}")
    if maximum is not None and int(seed) > maximum:
        raise ValueError(f"{name} must be an integer in [0, {maximum}], got a larger value")
    return int(seed)


def check_flag(value: Any, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (or a numpy bool), else raise.

    Strings such as ``"no"`` and numbers such as ``0`` are refused rather than read by
    their truth value.
    """
    if not _is_bool(value):
        raise TypeError(f"{name} must be True or False, got {_describe(value)}")
    return bool(value)


def check_choice(value: Any, name: str, choices: Sequence[str]) -> str:
    """Return ``value`` if it is one of the strings ``choices``, else raise."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_real(
    value: Any,
    name: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a finite ``float`` in the given interval, else raise."""
    lo_br, hi_br = ("(" if low_open else "["), (")" if high_open else "]")
    interval = f"{lo_br}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_br}"
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in {interval}, got {_describe(value)}")
    x = _to_float(value, name, f"a finite real number in {interval}")
    bad = not np.isfinite(x)
    if low is not None:
        bad = bad or x < low or (low_open and x == low)
    if high is not None:
        bad = bad or x > high or (high_open and x == high)
    if bad:
        raise ValueError(f"{name} must be a finite real number in {interval}, got {value!r}")
    return x


def check_elements(count: int, what: str, hint: str = "") -> int:
    """Refuse a result of more than ``MAX_ELEMENTS`` elements before allocating it."""
    if count > MAX_ELEMENTS:
        extra = f"; {hint}" if hint else ""
        raise ValueError(
            f"{what} would have {count} elements, more than rope_lib's MAX_ELEMENTS = "
            f"{MAX_ELEMENTS} (1 GiB of float64){extra}"
        )
    return count


def _numeric_array(values: Any, name: str, what: str) -> np.ndarray:
    torch = __import__("sys").modules.get("torch")
    if torch is not None and isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, OverflowError) as error:  # ragged lists and the like
        raise TypeError(f"{name} must be {what}, got {_describe(values)}") from error
    return arr


def check_integer_array(
    values: Any, name: str = "positions", ndim: int | None = None, max_abs: int = MAX_POSITION
) -> np.ndarray:
    """Return ``values`` as an ``int64`` array if every entry is an exact whole number.

    Accepted: signed and unsigned integer arrays, Python ints, and floats that hold whole
    numbers (``3.0``: position tensors are often stored as floats), each of magnitude at
    most ``max_abs`` (``MAX_POSITION`` by default).  Refused, with a message naming
    ``name``: ``2.5``, ``nan``, ``inf``, booleans, complex numbers, strings, and integers
    beyond ``max_abs`` (an unsigned ``2**64 - 1`` is not read as ``-1``).
    """
    what = "integers (a number or an array of numbers)"
    arr = _numeric_array(values, name, what)
    limit_msg = (
        f"{name} must be integers of magnitude <= {max_abs} (2**{max_abs.bit_length() - 1}"
        ", where float64 angles stay accurate), got a larger value"
    )
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        if flat and all(isinstance(v, numbers.Integral) and not _is_bool(v) for v in flat):
            if any(abs(int(v)) > max_abs for v in flat):
                raise ValueError(limit_msg)
            arr = np.array(flat, dtype=np.int64).reshape(arr.shape)
        else:
            raise TypeError(f"{name} must be {what}, got {_describe(values)}")
    if arr.dtype == bool:
        raise TypeError(f"{name} must be integers, not booleans")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real integers, got complex values")
    if not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be {what}, got {_describe(values)}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array of integers, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.unsignedinteger):
        if arr.size and int(arr.max()) > max_abs:
            raise ValueError(limit_msg)
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        arr = arr.astype(np.int64, copy=False)
        if arr.size and (int(arr.max()) > max_abs or int(arr.min()) < -max_abs):
            raise ValueError(limit_msg)
        return arr
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite integers, got a non-finite value (nan or inf)")
    if not np.all(arr == np.round(arr)):
        raise ValueError(f"{name} must be whole numbers (integers), got a fractional value")
    if arr.size and float(np.max(np.abs(arr))) > max_abs:
        raise ValueError(limit_msg)
    return arr.astype(np.int64)


def check_real_array(
    values: Any, name: str, ndim: int | None = None, max_abs: float | None = None
) -> np.ndarray:
    """Return ``values`` as a finite ``float64`` array, else raise.

    ``ndim`` fixes the number of axes; ``max_abs`` bounds the magnitude of every entry.
    """
    what = "real numbers (a number or an array of numbers)"
    arr = _numeric_array(values, name, what)
    if arr.dtype == object or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be {what}, got {_describe(values)}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real numbers, got complex values")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array of real numbers, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got nan or inf")
    if max_abs is not None and arr.size and float(np.max(np.abs(arr))) > max_abs:
        raise ValueError(f"{name} must have magnitude <= {max_abs:g}, got a larger value")
    return arr


def check_distance_array(
    values: Any,
    name: str = "distance",
    ndim: int | None = None,
    max_abs: float | None = MAX_POSITION,
) -> np.ndarray:
    """Return ``values`` as a finite ``float64`` array of magnitude at most ``max_abs``.

    For arguments that are real numbers on the position axis: distances, and positions of
    functions that accept fractional ones.  Accepted: integer (signed or unsigned) and float
    arrays, Python ints and floats, torch tensors.  Refused, with a message naming ``name``:
    ``nan``, ``inf``, booleans, complex numbers, strings, and magnitudes beyond ``max_abs``
    (``MAX_POSITION`` by default: beyond it a float64 angle ``x * theta_i`` is off by more than
    ``|x| 2**-53`` rad ~ 5e-7 rad, and at 1e300 it is meaningless).  Python ints beyond the
    limit are refused by their exact value, never wrapped or rounded first.  ``max_abs=None``
    is for phase-free formulas (smooth envelopes) that stay accurate at any magnitude.
    """
    what = "real numbers (a number or an array of numbers)"
    arr = _numeric_array(values, name, what)
    if max_abs is None:
        limit_msg = ""
    else:
        text = str(int(max_abs)) if float(max_abs).is_integer() else repr(max_abs)
        note = (
            " (rope_lib's MAX_POSITION = 2**32: beyond it float64 angles x * theta_i lose accuracy)"
            if max_abs == MAX_POSITION
            else ""
        )
        limit_msg = f"{name} must be finite real numbers of magnitude <= {text}{note}"
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        if not (flat and all(isinstance(v, numbers.Real) and not _is_bool(v) for v in flat)):
            raise TypeError(f"{name} must be {what}, got {_describe(values)}")
        if max_abs is not None and any(abs(v) > max_abs for v in flat):  # exact for big ints
            raise ValueError(f"{limit_msg}, got a larger value")
        try:
            arr = np.array([float(v) for v in flat], dtype=np.float64).reshape(arr.shape)
        except OverflowError as error:
            raise ValueError(f"{name} must be finite, got a value beyond float64") from error
        values = arr
    out = check_real_array(values, name, ndim)
    if max_abs is not None and out.size:
        largest = float(np.max(np.abs(out)))
        if largest > max_abs:
            raise ValueError(f"{limit_msg}, got {largest:.6g}")
    return out
