r"""Rotary position embedding (RoPE): rotation matrices, ``apply_rope`` and its implementations.

Chapter 4 (``chapters/04_rope.md``, label ``rope``) derives RoPE: the query at position
:math:`m` is multiplied by the block-diagonal rotation :math:`R_m`, whose block :math:`i`
turns the pair of coordinates :math:`i` by the angle :math:`m\theta_i`, so that
:math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k` depends on :math:`n - m` only.  Chapter 5
(``chapters/05_rope_implementations.md``, label ``rope-implementations``) computes the same
map in the ways real code does and measures their accuracy.  This module holds:

* :func:`rotation_matrix` and :func:`symbolic_rotation_matrix`: :math:`R_m` as numbers and
  as a sympy matrix with symbolic frequencies (for proofs);
* :func:`apply_rope`: the library's fast and accurate implementation (numpy and torch, both
  layouts, any leading axes, angles in float64);
* teaching routes: :func:`apply_rope_matrix` (explicit :math:`d\times d` matrices),
  :func:`llama_precompute_freqs_cis` and :func:`llama_apply_rotary_emb` (complex numbers, as
  in the LLaMA reference code), :func:`rotate_half`, :func:`rotate_half_cos_sin` and
  :func:`apply_rotate_half` (the GPT-NeoX / Hugging Face route);
* layouts: :func:`layout_permutation` (interleaved pairs :math:`(2i, 2i+1)` versus half pairs
  :math:`(i, i + d/2)`) and :func:`permute_qk_weight` (the row permutation of
  :math:`W_q, W_k` that checkpoint converters apply);
* accuracy: :func:`cos_sin_tables` for the usual float32 recipe, bfloat16 tables or
  positions, and rope_lib's own route; :func:`table_error`, :func:`score_error`;
* RoPE with linear attention: :func:`elu_feature_map`, :func:`linear_attention_weights`,
  :func:`linear_attention`;
* figures: :func:`plot_rotation_2d`, :func:`plot_layout_mismatch`, :func:`plot_accuracy`.

Every argument is checked by :mod:`rope_lib._validate`: positions are exact integers of
magnitude at most ``MAX_POSITION`` = :math:`2^{32}` (``3.0`` and unsigned integers are
accepted, ``2.5``, ``nan`` and ``2**64 - 1`` are refused), queries and keys are floating
arrays or tensors with an even last axis, and results larger than ``MAX_ELEMENTS`` are
refused before they are allocated.  The torch routes (:func:`apply_rope` in both layouts,
:func:`llama_apply_rotary_emb`, :func:`rotate_half`, :func:`apply_rotate_half`) are
differentiable.  ``torch``, sympy and matplotlib are imported only by the functions that
need them, so importing :mod:`rope_lib` stays fast.
"""

from __future__ import annotations

import functools
import numbers
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from ._lazy import lazy_import

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from . import _fused, plotting
from ._validate import (
    MAX_POSITION,
    _describe,
    _is_bool,
    check_base,
    check_choice,
    check_dim,
    check_elements,
    check_flag,
    check_integer_array,
    check_positive_int,
    check_real,
    check_real_array,
    check_seed,
)
from .frequencies import theta

sp = lazy_import("sympy")

__all__ = [
    "rotation_matrix",
    "symbolic_rotation_matrix",
    "apply_rope",
    "apply_rope_matrix",
    "llama_precompute_freqs_cis",
    "llama_apply_rotary_emb",
    "rotate_half",
    "rotate_half_cos_sin",
    "apply_rotate_half",
    "layout_permutation",
    "permute_qk_weight",
    "RECIPES",
    "cos_sin_tables",
    "table_error",
    "score_error",
    "elu_feature_map",
    "linear_attention_weights",
    "linear_attention",
    "qk_scores",
    "float32_angle_error",
    "apply_rope_refusals",
    "time_rope_routes",
    "plot_rotation_2d",
    "plot_layout_mismatch",
    "plot_accuracy",
]

_LAYOUTS = ("interleaved", "half")

#: Largest d of :func:`symbolic_rotation_matrix` (a d x d matrix of sympy expressions).
_MAX_SYMBOLIC_DIM = 128
#: Limits of :func:`time_rope_routes`: repeats, and repeats x the explicit route's work.
_MAX_REPEATS = 1000
_MAX_TIMING_WORK = 1 << 32
#: Largest number of panels of :func:`plot_rotation_2d`.
_MAX_PANELS = 12
#: Largest magnitude of an entry of q or k in :func:`plot_rotation_2d`: lengths (and the axis
#: limits, 1.25 times the longer arrow) and the score q^T k stay far from float64 overflow.
_MAX_ARROW = 1e100

#: Ways of computing the cos/sin tables compared in chapter 5 (see :func:`cos_sin_tables`).
RECIPES: tuple[str, ...] = ("rope_lib", "float32", "bfloat16_tables", "bfloat16_positions")

_RECIPE_LABELS = {
    "rope_lib": "rope_lib (float64 angles)",
    "float32": "usual float32 recipe",
    "bfloat16_tables": "bfloat16 tables",
    "bfloat16_positions": "bfloat16 positions",
}


# ----------------------------------------------------------------------------- helpers


def _check_layout(layout: Any, name: str = "layout") -> str:
    return check_choice(layout, name, _LAYOUTS)


def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _pair_slices(d: int, layout: str) -> tuple[slice, slice]:
    """Slices of the first and second coordinates of the d/2 pairs, in pair order."""
    if layout == "interleaved":
        return slice(0, d, 2), slice(1, d, 2)
    return slice(0, d // 2), slice(d // 2, d)


def _positions(positions: Any, name: str = "positions") -> np.ndarray:
    return check_integer_array(positions, name, ndim=1)


def _scalar_position(m: Any, name: str = "m") -> int:
    return int(check_integer_array(m, name, ndim=0))


def _check_tables(n_positions: int, d: int) -> None:
    """Refuse cos/sin tables of shape (N, d/2) beyond MAX_ELEMENTS before computing them."""
    check_elements(
        n_positions * (d // 2),
        f"the cos/sin tables of {n_positions} positions x d/2 = {d // 2} pairs",
        "pass fewer positions or a smaller d",
    )


def _angles(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    """float64 angles m * theta_i, shape (N, d/2).

    int64 -> float64 is exact below 2**53 and the product is rounded once.  theta_i =
    exp(-(2i/d) ln b) carries a relative error near |ln theta_i| 2**-53 (up to a few 1e-15
    for the slow pairs), but an absolute error of at most a few 2**-53, since |ln t| t <= 1/e:
    the angle is off by about |m| 2**-53 at most (about 1e-9 rad at position 1e7).
    """
    _check_tables(positions.size, d)
    return positions.astype(np.float64)[:, None] * theta(d, base)[None, :]


def _check_x(x: Any, name: str = "x", min_ndim: int = 2) -> tuple[Any, bool]:
    """Validate a query/key array or tensor; return (array, is_torch).

    Floating dtypes only: an integer input would be truncated on the way back, a boolean or
    complex one has no meaning here.  At least ``min_ndim`` axes, an even last axis.
    """
    if _is_torch(x):
        if x.is_complex() or not x.is_floating_point():
            raise TypeError(
                f"{name} must be a floating-point tensor (float64, float32, float16 or "
                f"bfloat16), got dtype {x.dtype}"
            )
        arr, is_torch = x, True
    else:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as error:  # ragged nested lists
            raise TypeError(f"{name} must be a floating-point array, got {_describe(x)}") from error
        if arr.dtype.kind != "f":
            raise TypeError(
                f"{name} must be a floating-point array (float64, float32 or float16), "
                f"got {_describe(x)} with dtype {arr.dtype}"
            )
        is_torch = False
    if arr.ndim < min_ndim:
        if min_ndim == 2:
            raise ValueError(
                f"{name} must have at least 2 axes (..., N, d): positions along axis -2 and "
                f"the head dimension along axis -1, got shape {tuple(arr.shape)}"
            )
        raise ValueError(
            f"{name} must have at least {min_ndim} axes (..., d), got shape {tuple(arr.shape)}"
        )
    check_dim(int(arr.shape[-1]), name=f"{name}.shape[-1]")
    return arr, is_torch


def _check_table_like(table: Any, name: str, x: Any, is_torch: bool) -> Any:
    """Validate a cos or sin table that multiplies ``x`` elementwise (broadcasting)."""
    kind = "torch tensor" if is_torch else "numpy array"
    if is_torch != _is_torch(table):
        raise TypeError(f"{name} must be a floating-point {kind}, like x, got {_describe(table)}")
    if is_torch:
        if table.is_complex() or not table.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {table.dtype}")
    else:
        try:
            arr = np.asarray(table)
        except (ValueError, TypeError):  # ragged nested lists
            arr = np.asarray(None)
        if arr.dtype.kind != "f":
            raise TypeError(f"{name} must be a floating-point array, got {_describe(table)}")
        table = arr
    shape = tuple(table.shape)
    try:
        ok = np.broadcast_shapes(shape, tuple(x.shape)) == tuple(x.shape)
    except ValueError:
        ok = False
    if not ok or not shape or shape[-1] != x.shape[-1]:
        raise ValueError(
            f"{name} must have shape (N, d) (or any shape that broadcasts to x's "
            f"{tuple(x.shape)} with the same last axis), got {shape}"
        )
    return table


def _check_positions_length(pos: np.ndarray, x: Any, name: str = "positions") -> None:
    if pos.shape[0] != x.shape[-2]:
        raise ValueError(
            f"{name} must have one entry per row of x along axis -2: got {pos.shape[0]} "
            f"positions for x of shape {tuple(x.shape)} (no broadcasting)"
        )


# ----------------------------------------------------------------------- R_m itself


def rotation_matrix(
    m: int, d: int, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    r"""The RoPE rotation :math:`R_m` as a dense float64 matrix.

    .. math::

        R_m = \operatorname{diag}\big(\Omega(m\theta_0), \dots, \Omega(m\theta_{d/2-1})\big),\qquad
        \Omega(\alpha) = \begin{pmatrix}\cos\alpha & -\sin\alpha\\ \sin\alpha & \cos\alpha
        \end{pmatrix},\qquad \theta_i = b^{-2i/d}.

    With ``layout="interleaved"`` block :math:`i` acts on coordinates :math:`(2i, 2i+1)`, so
    the matrix is block diagonal; with ``layout="half"`` it acts on :math:`(i, i + d/2)`,
    which gives :math:`R^{\text{half}}_m = P R_m P^\top`, where :math:`R_m` is the interleaved
    matrix and :math:`P` is the permutation matrix with :math:`(Px)_j = x_{p_j}` (the rows of
    the identity taken in the order :math:`p` of :func:`layout_permutation`).

    Parameters
    ----------
    m : int
        The position (any integer of magnitude at most ``MAX_POSITION`` = :math:`2^{32}`,
        negative allowed).
    d : int
        Head dimension; an even integer >= 2 with :math:`d^2` at most ``MAX_ELEMENTS``
        (:math:`d \le 11584`).
    base : float
        The base :math:`b > 1`.
    layout : {"interleaved", "half"}
        Which coordinates form pair :math:`i`.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(d, d)``, orthogonal, with :math:`R_m^\top R_n = R_{n-m}`.
    """
    m = _scalar_position(m)
    d = check_dim(d)
    base = check_base(base)
    layout = _check_layout(layout)
    return _rotation_stack(np.array([m], dtype=np.int64), d, base, layout)[0]


def _rotation_stack(pos: np.ndarray, d: int, base: float, layout: str) -> np.ndarray:
    """The matrices R_m for every m in ``pos``, shape (N, d, d), float64."""
    check_elements(
        pos.size * d * d,
        f"the rotation matrices R_m, shape (N, d, d) = ({pos.size}, {d}, {d}),",
        "use apply_rope, which never builds them, or a smaller d",
    )
    angle = _angles(pos, d, base)
    c, s = np.cos(angle), np.sin(angle)
    a, b = _pair_slices(d, layout)
    idx = np.arange(d)
    ia, ib = idx[a], idx[b]
    R = np.zeros((pos.size, d, d))
    R[:, ia, ia] = c
    R[:, ia, ib] = -s
    R[:, ib, ia] = s
    R[:, ib, ib] = c
    return R


def symbolic_rotation_matrix(
    m: sp.Expr | str, d: int, layout: str = "interleaved", symbol: str = "theta"
) -> sp.Matrix:
    r""":math:`R_m` as a sympy matrix with symbolic position and frequencies.

    The frequencies are the real symbols ``theta_0, ..., theta_{d/2-1}``, so identities proved
    with this matrix (orthogonality, :math:`R_m^\top R_n = R_{n-m}`) hold for every choice of
    frequencies, not only :math:`\theta_i = b^{-2i/d}`.

    Parameters
    ----------
    m : sympy expression or str
        The position; a str must name a symbol (a Python identifier such as ``"m"``) and
        is made a real symbol.
    d : int
        Head dimension; an even integer from 2 to 128 (``d**2`` sympy entries).
    layout : {"interleaved", "half"}
        Which coordinates form pair :math:`i`, as in :func:`rotation_matrix`.
    symbol : str
        Stem of the frequency symbols, a Python identifier.

    Returns
    -------
    sympy.Matrix
        A ``d x d`` matrix.
    """
    d = check_dim(d)
    if d > _MAX_SYMBOLIC_DIM:
        raise ValueError(
            f"d must be at most {_MAX_SYMBOLIC_DIM} for a symbolic matrix (d**2 sympy "
            f"entries), got {d}; use rotation_matrix for numbers"
        )
    layout = _check_layout(layout)
    if not isinstance(symbol, str) or not symbol.isidentifier():
        raise TypeError(
            f"symbol must be a str that is a Python identifier (the stem of the frequency "
            f"symbols, e.g. 'theta'), got {_describe(symbol)}"
        )
    if isinstance(m, str):
        if not m.isidentifier():
            raise ValueError(
                f"m must be a sympy expression or a str that names a symbol (a Python "
                f"identifier such as 'm'), got {m!r:.80}"
            )
        m = sp.Symbol(m, real=True)
    if not isinstance(m, sp.Expr):
        raise TypeError(f"m must be a sympy expression or a str, got {_describe(m)}")
    thetas = sp.symbols(f"{symbol}_0:{d // 2}", real=True)
    R = sp.zeros(d, d)
    for i, th in enumerate(thetas):
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
        c, s = sp.cos(m * th), sp.sin(m * th)
        R[a, a], R[a, b], R[b, a], R[b, b] = c, -s, s, c
    return R


# ---------------------------------------------------------------------- apply_rope


def apply_rope(
    x: Any,
    positions: Any,
    base: float = 10000.0,
    layout: str = "interleaved",
    rotary_dim: int | None = None,
) -> Any:
    r"""Rotate the last axis of ``x`` by RoPE: row :math:`t` becomes :math:`R_{m_t} x_t`.

    With :math:`r` = ``rotary_dim`` (default: the whole head, :math:`r = d`), the first
    :math:`r` coordinates form :math:`r/2` pairs with frequencies
    :math:`\theta_i = b^{-2i/r}`, :math:`i = 0, \dots, r/2 - 1`.  For pair :math:`i` with
    coordinates :math:`(a_i, b_i)` and angle :math:`\alpha = m\theta_i`,

    .. math::

        x'_{a_i} = x_{a_i}\cos\alpha - x_{b_i}\sin\alpha,\qquad
        x'_{b_i} = x_{a_i}\sin\alpha + x_{b_i}\cos\alpha,

    with :math:`(a_i, b_i) = (2i, 2i+1)` for ``layout="interleaved"`` (RoFormer, the LLaMA
    reference code, GPT-J) and :math:`(i, i + r/2)` for ``layout="half"`` (GPT-NeoX, the
    Hugging Face ``rotate_half`` models).  Coordinates :math:`r, \dots, d - 1` pass through
    unchanged (partial rotation): ``apply_rope(x, p, b, layout, r)`` is ``apply_rope`` of
    ``x[..., :r]`` with head dimension :math:`r`, followed by ``x[..., r:]``.  This is what
    GPT-NeoX does with ``rotary_ndims = int(rotary_pct * head_dim)`` in the half layout, and
    GPT-J with ``rotary_dim`` in the interleaved layout.  (Hugging Face's GPT-NeoX computes
    the inverse frequencies in ``GPTNeoXRotaryEmbedding`` from ``int(head_dim *
    partial_rotary_factor)``, not from the head dimension, and its ``apply_rotary_pos_emb``
    rotates ``cos.shape[-1]`` coordinates; ``GPTNeoXAttention.rotary_ndims`` holds the same
    number but is not used.)

    Accuracy: the angles :math:`m\theta_i` and their cosines and sines are computed in
    float64 for every input dtype, then cast once.  For float32 inputs the result is at
    float32 round-off (error below 1e-6 for unit-scale inputs) at positions up to
    :math:`10^7` and bases up to :math:`10^9`; float16 and bfloat16 inputs are rotated in
    float32 and rounded once at the end.

    Non-finite inputs: ``x`` is not scanned for ``nan`` or ``inf`` (that would cost a pass
    over every query and key of a training step); they propagate as in torch's and numpy's
    own arithmetic.  A ``nan`` makes its pair :math:`(a_i, b_i)` ``nan``; an ``inf`` makes
    its pair non-finite, and where the cosine or the sine of the angle is exactly zero (at
    position 0 the sine is) the product ``inf * 0 = nan`` turns the partner coordinate into
    ``nan``: ``apply_rope(x, [0])`` with ``x[0, 0] = inf`` gives ``(inf, nan)`` in pair 0.
    Other pairs and other rows are unaffected.

    Autograd: both layouts are differentiable with respect to a torch ``x`` (backward, and
    forward mode through ``torch.func.jvp``).  When ``x`` requires grad (with grad mode
    on) the half layout builds its result out of place; otherwise it computes
    ``x * [cos | cos]`` in one new tensor and adds the partner terms to its two halves in
    place, or, for a contiguous CPU ``x`` of at least 4 MiB, rotates it in one pass with a
    C++ kernel (:mod:`rope_lib._fused`: compiled on the first such call and cached on
    disk; without a compiler, or with the environment variable ``ROPE_LIB_FUSED=0``, the
    two passes).  The cos/sin tables of the 16 most recent combinations of positions,
    ``d``, base, dtype, device and layout are kept, keyed by the positions' values.
    The angles stay float64 either way.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        Queries or keys of shape ``(..., N, d)``: any leading axes (batch, heads), positions
        along axis -2, the even head dimension ``d`` along axis -1.  Floating dtypes only
        (float64, float32, float16; torch also bfloat16).
    positions : array-like of int, shape (N,)
        The position of each row; never broadcast.
    base : float
        The base :math:`b > 1`.
    layout : {"interleaved", "half"}
        Which coordinates form pair :math:`i`.
    rotary_dim : int or None
        The number :math:`r` of rotated coordinates, an even integer with
        :math:`2 \le r \le d`; ``None`` (the default) rotates the whole head, :math:`r = d`.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Same type, shape, dtype (and device) as ``x``.

    Raises
    ------
    ValueError
        ``x`` with fewer than 2 axes or an odd last axis; ``base <= 1``; positions that are
        not whole, not finite, beyond ``MAX_POSITION`` = :math:`2^{32}`, not 1-D, or whose
        length differs from ``x.shape[-2]``; an unknown ``layout``; a ``rotary_dim`` that is
        odd, below 2 or above ``d``.
    TypeError
        ``x`` of an integer, boolean or complex dtype; a ``rotary_dim`` that is not an
        integer (or None).
    """
    x, is_torch = _check_x(x)
    base = check_base(base)
    layout = _check_layout(layout)
    d = int(x.shape[-1])
    r = _check_rotary_dim(rotary_dim, d)
    pos = _positions(positions)
    _check_positions_length(pos, x)
    key = (pos.tobytes(), r, base)
    head = x if r == d else x[..., :r]
    if is_torch:
        out = _apply_torch(head, layout, *key)
        if r == d:
            return out
        import torch

        return torch.cat((out, x[..., r:]), dim=-1)
    out = _apply_numpy(head, *_cos_sin_float64(*key), layout)
    return out if r == d else np.concatenate((out, x[..., r:]), axis=-1)


def _check_rotary_dim(rotary_dim: Any, d: int) -> int:
    """``rotary_dim`` as an int: None means ``d``; else an even integer in ``[2, d]``."""
    if rotary_dim is None:
        return d
    what = (
        f"rotary_dim must be None (rotate the whole head) or an even integer with "
        f"2 <= rotary_dim <= d = x.shape[-1] = {d} (the number of rotated coordinates)"
    )
    if _is_bool(rotary_dim) or not isinstance(rotary_dim, numbers.Integral):
        raise TypeError(f"{what}, got {_describe(rotary_dim)}")
    r = int(rotary_dim)
    if r < 2 or r % 2 or r > d:
        raise ValueError(f"{what}, got {r}")
    return r


@functools.lru_cache(maxsize=16)
def _cos_sin_float64(pos_bytes: bytes, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 cos/sin tables, cached: a model rotates q and k of every layer at the same
    positions, so the tables are computed once per set of positions."""
    angle = _angles(np.frombuffer(pos_bytes, dtype=np.int64), d, base)
    cos, sin = np.cos(angle), np.sin(angle)
    cos.flags.writeable = False
    sin.flags.writeable = False
    return cos, sin


@functools.lru_cache(maxsize=16)
def _torch_tables(pos_bytes: bytes, d: int, base: float, dtype: Any, device: Any, layout: str):
    r"""The cached float64 tables cast once to the working dtype and moved to the device.

    Interleaved layout: ``(phasor,)``, the complex table :math:`e^{i m\theta_j}` of shape
    ``(N, d/2)``.  Half layout: ``(cos2, sin2)`` of shape ``(N, d)``, ``cos2 = [cos | cos]``
    and ``sin2 = [sin | -sin]``: ``cos2`` multiplies a whole row at once, and ``sin2`` holds
    the sine with the sign of each half's partner term (see :func:`_apply_torch`).
    """
    import torch

    cos, sin = _cos_sin_float64(pos_bytes, d, base)
    # Normal tensors even when first asked for under torch.inference_mode: the cache must
    # serve a later training step, and autograd refuses to save inference tensors.
    with torch.inference_mode(False):
        if layout == "interleaved":
            c = torch.from_numpy(cos.copy()).to(device=device, dtype=dtype)
            s = torch.from_numpy(sin.copy()).to(device=device, dtype=dtype)
            return (torch.complex(c, s),)
        # Signs and repeats applied in float64, then one rounding to the working dtype.
        cos2 = torch.from_numpy(np.concatenate((cos, cos), axis=1))
        sin2 = torch.from_numpy(np.concatenate((sin, -sin), axis=1))
        return (cos2.to(device=device, dtype=dtype), sin2.to(device=device, dtype=dtype))


#: Whether the torch routes of :func:`apply_rope` ask Linux to back large results with
#: transparent huge pages (see :func:`_hinted_empty`): 512 times fewer page faults when the
#: result is first written, which on the benchmark's (1, 32, 4096, 128) float32 input is
#: most of the time of every route.  On, unless the environment variable
#: :data:`HUGE_PAGE_ENV` is ``"0"``.  The cost: where
#: ``/sys/kernel/mm/transparent_hugepage/defrag`` is ``madvise`` (Linux's default), a fault
#: in an advised region may wait for memory compaction when free memory is fragmented.
#: ``make bench`` times the half layout with and without it.
_HUGE_PAGE_OUTPUTS = True
#: ``ROPE_LIB_HUGE_PAGES=0`` switches the huge-page hint off ("1", the default: on).
HUGE_PAGE_ENV = "ROPE_LIB_HUGE_PAGES"
#: Results of at least this many bytes get the hint: larger than glibc's largest mmap
#: threshold (32 MiB), so the hint lands on a mapping of their own, never on the heap.
_HUGE_PAGE_MIN_BYTES = 1 << 25
_HUGE_PAGE_BYTES = 1 << 21


@functools.cache
def _madvise() -> Any:
    """libc's ``madvise`` through ctypes on Linux (with ``MADV_HUGEPAGE``), else None."""
    import ctypes
    import mmap

    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if not sys.platform.startswith("linux") or advice is None:
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn, advice


def _hinted_empty(a: Any) -> Any:
    """A new uninitialized tensor like ``a`` (contiguous when ``a`` is), advised to use
    huge pages when :data:`_HUGE_PAGE_OUTPUTS` is on, ``a`` is a large CPU tensor and
    ``madvise`` exists; None when no hint applies (the caller allocates as usual)."""
    import os

    import torch

    setting = os.environ.get(HUGE_PAGE_ENV, "1")
    if setting not in ("0", "1"):
        raise ValueError(f"{HUGE_PAGE_ENV} must be '0' or '1' (unset: '1'), got {setting!r}")
    if not (_HUGE_PAGE_OUTPUTS and setting == "1" and a.device.type == "cpu"):
        return None
    found = _madvise() if a.numel() * a.element_size() >= _HUGE_PAGE_MIN_BYTES else None
    if found is None:
        return None
    out = torch.empty_like(a)
    fn, advice = found
    begin, nbytes = out.untyped_storage().data_ptr(), out.untyped_storage().nbytes()
    first = -(-begin // _HUGE_PAGE_BYTES) * _HUGE_PAGE_BYTES  # whole huge pages only
    last = (begin + nbytes) // _HUGE_PAGE_BYTES * _HUGE_PAGE_BYTES
    if last > first:
        fn(first, last - first, advice)  # a refusal (return -1) leaves small pages
    return out


def _product(a: Any, table: Any) -> Any:
    """``a * table`` in a new tensor.  With :data:`_HUGE_PAGE_OUTPUTS`, a large CPU result
    is first advised to use huge pages (2 MiB: 512 times fewer page faults when the product
    first writes it; a hint only, so where Linux declines it nothing changes)."""
    import torch

    taped = torch.is_grad_enabled() and (a.requires_grad or table.requires_grad)
    out = None if taped else _hinted_empty(a)  # out= has no autograd
    if out is None:
        return a * table
    return torch.mul(a, table, out=out)


def _apply_numpy(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, layout: str) -> np.ndarray:
    work = np.float64 if x.dtype == np.float64 else np.float32
    xw = x.astype(work, copy=False)
    c, s = cos.astype(work), sin.astype(work)
    a, b = _pair_slices(x.shape[-1], layout)
    x1, x2 = xw[..., a], xw[..., b]
    out = np.empty(xw.shape, dtype=work)
    o1, o2 = out[..., a], out[..., b]
    np.multiply(x1, c, out=o1)
    o1 -= x2 * s
    np.multiply(x1, s, out=o2)
    o2 += x2 * c
    return out.astype(x.dtype, copy=False)


#: Smallest ``x`` (bytes) for which :func:`_half_layout_inference` builds its row-pair
#: view: below it the two half updates are cheaper (16 against 32 microseconds of call
#: overhead for a (1, 8, 16, 64) float32 ``x``).
_ROW_PAIR_MIN_BYTES = 1 << 22


def _half_layout_inference(x: Any, cos2: Any, sin2: Any) -> Any:
    r"""Half-layout RoPE without autograd: ``x * [cos | cos] + swap_halves(x) * [-sin | sin]``.

    Pass 1 multiplies whole rows by ``cos2 = [cos | cos]`` into a new tensor.  Pass 2 adds
    the partner terms; it must read the second half of a row while writing the first half
    and the reverse, a swap that no strided view with non-negative strides expresses within
    one row.  Across two consecutive rows :math:`r, r + 1` of a contiguous ``x`` it is one:
    the view ``(r, j)`` takes, for :math:`j = 0`, the second half of row :math:`r` (partner:
    the first half of row :math:`r`, sign :math:`+`) and, for :math:`j = 1`, the first half
    of row :math:`r + 1` (partner: the second half of row :math:`r + 1`, sign :math:`-`),
    with strides :math:`h = d/2` for the result and :math:`d + h` for ``x`` and
    ``sin2 = [sin | -sin]``.  So pass 2 is one ``addcmul_`` over every head, plus two small
    ones for the first half of row 0 and the second half of row :math:`N - 1`.  (Two
    ``addcmul_`` over the halves do the same work in two passes; each parallel pass waits
    for both threads, and on a loaded 2-core machine the one-pass form measured 8-18 %
    faster.)  A tensor that is not contiguous takes the two-pass form on its own strides,
    and so does one below :data:`_ROW_PAIR_MIN_BYTES`, where the views' setup costs more
    than the pass it saves.
    """
    out = _product(x, cos2)
    if x.numel() == 0:
        return out
    N, d = x.shape[-2:]
    h = d // 2
    small = x.numel() * x.element_size() < _ROW_PAIR_MIN_BYTES
    if small or not (x.is_contiguous() and out.is_contiguous()):
        out[..., :h].addcmul_(x[..., h:], sin2[:, h:])
        out[..., h:].addcmul_(x[..., :h], sin2[:, :h])
        return out
    L, Td = x.numel() // (N * d), N * d
    o_v = out.as_strided((L, N - 1, 2, h), (Td, d, h, 1), out.storage_offset() + h)
    x_v = x.as_strided((L, N - 1, 2, h), (Td, d, d + h, 1), x.storage_offset())
    s_v = sin2.as_strided((N - 1, 2, h), (d, d + h, 1), sin2.storage_offset())
    o_v.addcmul_(x_v, s_v)
    rows = out.view(L, N, d)
    x3 = x.view(L, N, d)
    rows[:, 0, :h].addcmul_(x3[:, 0, h:], sin2[0, h:])
    rows[:, N - 1, h:].addcmul_(x3[:, N - 1, :h], sin2[N - 1, :h])
    return out


@functools.lru_cache(maxsize=16)
def _fused_table(pos_bytes: bytes, d: int, base: float, dtype: Any) -> Any:
    """``[cos | sin]``, shape ``(N, d)``, for the fused kernel: the cached float64 tables
    rounded once to ``dtype`` (the numbers of :func:`_torch_tables`'s half layout), CPU."""
    import torch

    cos, sin = _cos_sin_float64(pos_bytes, d, base)
    with torch.inference_mode(False):  # as in _torch_tables
        return torch.from_numpy(np.concatenate((cos, sin), axis=1)).to(dtype)


def _transformed(x: Any) -> bool:
    """Whether ``x`` is seen through a transform the kernel would bypass: functorch's
    wrappers (``vmap``, ``torch.func.jvp``), forward-mode dual levels (a plain tensor may
    carry a tangent), torch dispatch modes.  True also if torch lacks these (private)
    queries, so that a torch without them keeps the eager route."""
    import torch

    try:
        return bool(
            torch._C._functorch.is_functorch_wrapped_tensor(x)
            or torch.autograd.forward_ad._current_level >= 0
            or torch._C._len_torch_dispatch_stack() > 0
        )
    except AttributeError:
        return True


def _half_layout_fused(x: Any, pos_bytes: bytes, d: int, base: float) -> Any:
    """Half-layout RoPE in one pass by the C++ kernel of :mod:`rope_lib._fused`, or None.

    Taken for a plain, contiguous CPU tensor of at least ``_fused.MIN_BYTES`` outside
    autograd's forward mode, functorch's transforms (``vmap``, ``torch.func.jvp``) and
    torch dispatch modes (``FakeTensorMode``, ``FlopCounterMode``: they would not see the
    kernel), when the kernel is switched on and builds (the first such call builds it);
    None otherwise, and the caller takes :func:`_half_layout_inference`.
    """
    import torch

    if (
        type(x) is not torch.Tensor
        or x.device.type != "cpu"
        or x.layout != torch.strided
        or x.numel() * x.element_size() < _fused.MIN_BYTES
        or not x.is_contiguous()
        or x.is_neg()
        or _transformed(x)
        or _fused.kernel() is None
    ):
        return None
    out = _hinted_empty(x)
    if out is None:
        out = torch.empty_like(x)
    table = _fused_table(pos_bytes, d, base, x.dtype)
    return out if _fused.rotate(x, table, out) else None


def _apply_torch(x: Any, layout: str, pos_bytes: bytes, d: int, base: float) -> Any:
    import torch

    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xw = x.to(work)
    h = d // 2
    if layout == "half" and not (torch.is_grad_enabled() and xw.requires_grad):
        out = _half_layout_fused(xw, pos_bytes, d, base)  # needs only its own table
        if out is not None:
            return out.to(x.dtype)
    tables = _torch_tables(pos_bytes, d, base, work, x.device, layout)
    if layout == "interleaved":
        # One pass: pairs (2i, 2i+1) are complex numbers, the rotation is a product with
        # the unit phasor e^{i m theta_i} (built from the float64 cos/sin).
        xw = xw.contiguous()
        if xw.storage_offset() % 2:
            xw = xw.clone()
        z = torch.view_as_complex(xw.view(*xw.shape[:-1], h, 2))
        out = torch.view_as_real(_product(z, tables[0])).view(xw.shape)
    elif torch.is_grad_enabled() and xw.requires_grad:
        # Autograd: in-place updates of a result are not differentiable here, so build
        # the two halves out of place (one more temporary per half).
        cos2, sin2 = tables
        x1, x2 = xw[..., :h], xw[..., h:]
        out = torch.cat(
            (x1 * cos2[:, :h] + x2 * sin2[:, h:], x2 * cos2[:, h:] + x1 * sin2[:, :h]), dim=-1
        )
    else:
        out = _half_layout_inference(xw, *tables)
    return out.to(x.dtype)


# -------------------------------------------------------------- teaching routes


def apply_rope_matrix(
    x: Any, positions: Any, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    r"""RoPE by explicit matrices: ``out[..., t, :] = R_{m_t} @ x[..., t, :]``.

    Builds the stack of :math:`N` dense matrices :math:`R_{m_t}` (:func:`rotation_matrix`),
    shape ``(N, d, d)``, and multiplies; :math:`O(N d^2)` work and memory instead of
    :math:`O(N d)`, which is why no real model does it.  For teaching and checking only.

    Non-finite inputs are not refused; they propagate as in numpy's own arithmetic, and
    since every entry of :math:`R_{m_t}` (zeros included) multiplies every coordinate of row
    :math:`t`, they spread over the whole row, not only over their pair as in
    :func:`apply_rope`: a ``nan`` makes the row ``nan``; an ``inf`` makes every coordinate
    whose entry of :math:`R_{m_t}` against it is zero ``nan`` (``inf * 0 = nan``) and the
    others infinite.  Other rows are unaffected.

    Parameters
    ----------
    x : array-like, shape (..., N, d)
        Real queries or keys (converted to float64 numpy).
    positions : array-like of int, shape (N,)
    base : float
    layout : {"interleaved", "half"}

    Returns
    -------
    numpy.ndarray
        float64 array of the shape of ``x``.
    """
    arr, is_torch = _check_x(x)
    if is_torch:
        arr = arr.detach().cpu().double().numpy()
    arr = arr.astype(np.float64)
    pos = _positions(positions)
    _check_positions_length(pos, arr)
    base = check_base(base)
    layout = _check_layout(layout)
    R = _rotation_stack(pos, arr.shape[-1], base, layout)  # (N, d, d)
    return np.einsum("tij,...tj->...ti", R, arr)


def llama_precompute_freqs_cis(d: int, end: int, base: float = 10000.0) -> Any:
    r"""The complex table of the LLaMA reference code: ``freqs_cis[t, i] = e^{i t theta_i}``.

    As in the LLaMA code the frequencies and the angles are computed in float32
    (``1 / base ** (arange(0, d, 2) / d)``, then an outer product with ``arange(end)``) and
    turned into unit complex numbers with ``torch.polar``; this is the usual float32 recipe,
    whose error grows in proportion to :math:`t`, of the order of
    :math:`2^{-24} t \approx 6\cdot 10^{-8}\, t`: for ``d = 128``, ``base = 1e4`` the largest
    table error over the pairs measures between about :math:`1.5\cdot 10^{-8}\, t` and
    :math:`7\cdot 10^{-8}\, t` for :math:`t` from :math:`10^2` to :math:`10^7`
    (``test_llama_table_error_grows_like_2_to_minus_24_t``).

    Parameters
    ----------
    d : int
        Head dimension (even).
    end : int
        Number of positions ``0 .. end-1``.
    base : float

    Returns
    -------
    torch.Tensor
        complex64 tensor of shape ``(end, d // 2)``.
    """
    import torch

    d = check_dim(d)
    end = check_positive_int(
        end, "end", maximum=MAX_POSITION, hint="positions beyond 2**32 are refused everywhere"
    )
    base = check_base(base)
    check_elements(end * (d // 2), f"freqs_cis of shape (end, d/2) = ({end}, {d // 2})")
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2)[: d // 2].float() / d))  # (d/2,)
    t = torch.arange(end, dtype=torch.float32)  # (end,)
    angles = torch.outer(t, inv_freq)  # (end, d/2), float32
    return torch.polar(torch.ones_like(angles), angles)  # (end, d/2), complex64


def llama_apply_rotary_emb(xq: Any, xk: Any, freqs_cis: Any) -> tuple[Any, Any]:
    r"""RoPE as complex multiplication, with the shapes of the LLaMA reference code.

    ``xq`` and ``xk`` have shape ``(batch, N, H, d)`` (batch, positions, heads, head dim). Each
    is viewed as ``(batch, N, H, d/2)`` complex numbers :math:`x_{2i} + \mathrm i\, x_{2i+1}`
    (pairs of adjacent coordinates), multiplied by ``freqs_cis`` of shape ``(N, d/2)``
    reshaped to ``(1, N, 1, d/2)``, and viewed back as real ``(batch, N, H, d)``:

    .. math:: (x_{2i} + \mathrm i\, x_{2i+1})\, e^{\mathrm i m\theta_i}.

    As in the LLaMA code, float32, float16 and bfloat16 inputs are rotated in float32
    (``xq.float()``); float64 inputs are rotated in float64 (with a complex64 table the
    product is promoted to complex128), so that ``torch.autograd.gradcheck`` can check the
    route.  The route is differentiable with respect to ``xq``, ``xk`` and ``freqs_cis``.

    Non-finite inputs are not scanned for, as in the LLaMA code: they propagate through the
    complex product as in torch's own arithmetic.  A ``nan`` makes its pair ``nan``; an
    ``inf`` makes its pair non-finite, and where the phasor's real or imaginary part is
    exactly zero (at position 0 the imaginary part is) ``inf * 0 = nan`` turns the partner
    coordinate into ``nan``.  Other pairs, positions and heads are unaffected.

    Parameters
    ----------
    xq, xk : torch.Tensor
        Floating tensors of shape ``(batch, N, H, d)``; ``xk`` may have another number of
        heads (grouped-query attention) but the same ``N`` and ``d``.
    freqs_cis : torch.Tensor
        Complex tensor of shape ``(N, d/2)``, e.g. :func:`llama_precompute_freqs_cis`.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        The rotated queries and keys, in the input dtypes.

    Raises
    ------
    TypeError
        ``xq`` or ``xk`` not a floating torch tensor (integers are refused rather than
        truncated on the way back); ``freqs_cis`` not a complex torch tensor.
    ValueError
        Wrong numbers of axes, an odd ``d``, or shapes that do not match.
    """
    import torch

    for name, t in (("xq", xq), ("xk", xk)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{name} must be a 4-D floating torch tensor (batch, N, H, d), got {_describe(t)}"
            )
        if t.is_complex() or not t.is_floating_point():
            raise TypeError(
                f"{name} must be a floating torch tensor (float64, float32, float16 or "
                f"bfloat16), got dtype {t.dtype}"
            )
        if t.ndim != 4:
            raise ValueError(
                f"{name} must be a 4-D torch tensor (batch, N, H, d), got shape {tuple(t.shape)}"
            )
        check_dim(int(t.shape[-1]), name=f"{name}.shape[-1]")
    N, half = xq.shape[1], xq.shape[-1] // 2
    if xk.shape[1] != N or xk.shape[-1] != xq.shape[-1]:
        raise ValueError(
            f"xk must have the N and d of xq (axes 1 and 3): xq {tuple(xq.shape)}, "
            f"xk {tuple(xk.shape)}"
        )
    if not isinstance(freqs_cis, torch.Tensor) or not freqs_cis.is_complex():
        raise TypeError(
            "freqs_cis must be a complex torch tensor of unit phasors e^{i t theta_i} "
            f"(see llama_precompute_freqs_cis), got {_describe(freqs_cis)}"
        )
    if tuple(freqs_cis.shape) != (N, half):
        raise ValueError(
            f"freqs_cis must have shape (N, d/2) = {(N, half)}, got {tuple(freqs_cis.shape)}"
        )
    f = freqs_cis.reshape(1, N, 1, half)  # broadcast over batch and heads
    xq_out = torch.view_as_real(_llama_complex(xq, half) * f).flatten(3)  # -> (batch, N, H, d)
    xk_out = torch.view_as_real(_llama_complex(xk, half) * f).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _llama_complex(x: Any, half: int) -> Any:
    """``x`` of shape (..., d) as (..., d/2) complex numbers x_{2i} + i x_{2i+1} (a view)."""
    import torch

    xw = x.double() if x.dtype == torch.float64 else x.float()
    pairs = xw.reshape(*xw.shape[:-1], half, 2)  # (batch, N, H, d/2, 2)
    try:
        return torch.view_as_complex(pairs)
    except RuntimeError:  # strides view_as_complex cannot reinterpret: copy once
        return torch.view_as_complex(pairs.clone(memory_format=torch.contiguous_format))


def rotate_half(x: Any) -> Any:
    r"""The map :math:`(x_1, x_2) \mapsto (-x_2, x_1)` on the two halves of the last axis.

    With :math:`x_1 = x_{0:d/2}` and :math:`x_2 = x_{d/2:d}` this is the "multiply by
    :math:`\mathrm i`" of the half layout, used by GPT-NeoX and Hugging Face:
    :math:`R_m x = x \odot \cos + \operatorname{rotate\_half}(x) \odot \sin`.
    Works on floating numpy arrays and torch tensors of shape ``(..., d)``, ``d`` even
    (differentiable for tensors). Non-finite entries are not refused: they move with
    their coordinates (a sign change and a swap), exactly like finite ones.
    """
    x, is_torch = _check_x(x, min_ndim=1)
    h = x.shape[-1] // 2
    if is_torch:
        import torch

        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return np.concatenate((-x[..., h:], x[..., :h]), axis=-1)


def rotate_half_cos_sin(positions: Any, d: int, base: float = 10000.0) -> tuple[Any, Any]:
    r"""The ``cos`` and ``sin`` tables of the Hugging Face route, shape ``(N, d)``.

    Both halves repeat the ``d/2`` angles, :math:`[m\theta_0, \dots, m\theta_{d/2-1},
    m\theta_0, \dots, m\theta_{d/2-1}]`, computed with the usual float32 recipe (float32
    inverse frequencies times float32 positions), as ``LlamaRotaryEmbedding`` does.

    Returns
    -------
    (torch.Tensor, torch.Tensor)
        float32 tensors of shape ``(N, d)``.
    """
    import torch

    c, s = (
        torch.from_numpy(t.astype(np.float32))
        for t in cos_sin_tables(positions, d, base, "float32")
    )
    return torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)


def apply_rotate_half(x: Any, cos: Any, sin: Any) -> Any:
    r""":math:`x \odot \cos + \operatorname{rotate\_half}(x) \odot \sin`, the half-layout RoPE.

    ``cos`` and ``sin`` of shape ``(N, d)`` (as from :func:`rotate_half_cos_sin`) broadcast
    against ``x`` of shape ``(..., N, d)``.  Coordinate :math:`i < d/2` becomes
    :math:`x_i\cos m\theta_i - x_{i+d/2}\sin m\theta_i` and coordinate :math:`i + d/2`
    becomes :math:`x_{i+d/2}\cos m\theta_i + x_i\sin m\theta_i`.

    ``x``, ``cos`` and ``sin`` are all floating numpy arrays or all floating torch tensors
    (differentiable with respect to each of them); ``d`` is even.

    Non-finite inputs are not scanned for, as in Hugging Face's code: they propagate as in
    torch's and numpy's own arithmetic.  A ``nan`` in coordinate :math:`i` makes
    coordinates :math:`i` and :math:`i \pm d/2` ``nan``; an ``inf`` makes them non-finite,
    and where ``sin`` or ``cos`` is exactly zero (``sin`` at position 0) ``inf * 0 = nan``
    turns the partner coordinate into ``nan``.  Other pairs and rows are unaffected.
    """
    x, is_torch = _check_x(x, min_ndim=1)
    cos = _check_table_like(cos, "cos", x, is_torch)
    sin = _check_table_like(sin, "sin", x, is_torch)
    return x * cos + rotate_half(x) * sin


# ---------------------------------------------------------------------- layouts


def layout_permutation(d: int) -> np.ndarray:
    r"""The permutation :math:`p` that turns the interleaved layout into the half layout.

    :math:`p = (0, 2, 4, \dots, d-2,\; 1, 3, \dots, d-1)`: coordinate :math:`j` of the half
    layout is coordinate :math:`p_j` of the interleaved one, so pair :math:`(2i, 2i+1)` lands
    on :math:`(i, i + d/2)`.  For every :math:`x` and position :math:`m`,

    .. math:: \operatorname{rope}_{\text{half}}(x_{[p]}, m) =
              \operatorname{rope}_{\text{interleaved}}(x, m)_{[p]},

    i.e. :math:`R^{\text{half}}_m = P R^{\text{interleaved}}_m P^\top` with
    :math:`P = I_{[p]}` (rows of the identity).  The inverse is ``numpy.argsort(p)``.

    Returns
    -------
    numpy.ndarray
        int64 array of length ``d``.
    """
    d = check_dim(d)
    return np.concatenate((np.arange(0, d, 2), np.arange(1, d, 2)))


def permute_qk_weight(weight: Any, n_heads: int, to: str = "half") -> Any:
    r"""Permute the rows of a query or key projection, head by head, between layouts.

    A projection :math:`W` of shape ``(n_heads * d, d_model)`` produces
    ``n_heads`` heads of ``d`` coordinates.  ``to="half"`` reorders the rows of every head by
    :func:`layout_permutation`, :math:`W'_{hd + j} = W_{hd + p_j}`, which is what checkpoint
    converters from the interleaved (Meta LLaMA) layout to the half (Hugging Face) layout
    do; then :math:`W' x = (W x)_{[p]}` per head and the model computes the same scores.
    ``to="interleaved"`` applies the inverse permutation.

    Parameters
    ----------
    weight : numpy.ndarray or torch.Tensor
        Shape ``(n_heads * d, d_model)`` (or 1-D ``(n_heads * d,)`` for a bias).
    n_heads : int
        Number of heads; must divide ``weight.shape[0]`` into even head dimensions.
    to : {"half", "interleaved"}
        Target layout.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        The permuted weight, same type and shape. It only reorders rows, so non-finite
        entries (not refused) are moved like any other.
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    to = _check_layout(to, "to")
    if _is_torch(weight):
        if weight.is_complex() or weight.dtype == sys.modules["torch"].bool:
            raise TypeError(f"weight must be a real tensor, got dtype {weight.dtype}")
    else:
        try:
            arr = np.asarray(weight)
        except (ValueError, TypeError) as error:  # ragged nested lists
            raise TypeError(f"weight must be a real array, got {_describe(weight)}") from error
        if arr.dtype.kind not in "fiu":
            raise TypeError(
                f"weight must be a real array (float or integer), got {_describe(weight)} "
                f"with dtype {arr.dtype}"
            )
        weight = arr
    if weight.ndim not in (1, 2):
        raise ValueError(
            f"weight must be 2-D (n_heads * d, d_model) or 1-D (n_heads * d,) for a bias, "
            f"got shape {tuple(weight.shape)}"
        )
    rows = int(weight.shape[0])
    if rows % n_heads:
        raise ValueError(f"weight.shape[0] = {rows} must be a multiple of n_heads = {n_heads}")
    d = check_dim(rows // n_heads, name="weight.shape[0] // n_heads")
    p = layout_permutation(d)
    if to == "interleaved":
        p = np.argsort(p)
    index = (np.arange(n_heads)[:, None] * d + p[None, :]).ravel()
    if _is_torch(weight):
        import torch

        return weight[torch.from_numpy(index).to(weight.device)]
    return weight[index]


def qk_scores(
    x: Any,
    W_q: Any,
    W_k: Any,
    n_heads: int,
    positions: Any,
    n_kv_heads: int | None = None,
    b_q: Any = None,
    b_k: Any = None,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> np.ndarray:
    r"""Attention scores of every head with RoPE: ``scores[h, m, n]`` :math:`= q_{h,m}^\top k_{g(h),n}`.

    The tokens ``x`` of shape ``(N, d_model)`` are projected, split into heads, rotated and
    multiplied,

    .. math::

        q_{h,m} = R_{m}\big(W_q x_m + b_q\big)_{[h]},\qquad
        k_{g,n} = R_{n}\big(W_k x_n + b_k\big)_{[g]},\qquad
        g(h) = \Big\lfloor \frac{h}{n_\text{heads} / n_\text{kv}} \Big\rfloor,

    where :math:`(\cdot)_{[h]}` is the block of ``d`` coordinates of head :math:`h`.  With
    ``n_kv_heads < n_heads`` (grouped-query attention, GQA) consecutive query heads share a
    key head, as Hugging Face's ``repeat_kv`` arranges them.

    Parameters
    ----------
    x : array-like, shape (N, d_model)
    W_q : array-like, shape (n_heads * d, d_model)
    W_k : array-like, shape (n_kv_heads * d, d_model)
    n_heads : int
    positions : array-like of int, shape (N,)
    n_kv_heads : int, optional
        Number of key heads; must divide ``n_heads``.  Default ``n_heads``.
    b_q, b_k : array-like, optional
        Biases of shapes ``(n_heads * d,)`` and ``(n_kv_heads * d,)``.
    base : float
    layout : {"interleaved", "half"}

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n_heads, N, N)``.

    Raises
    ------
    ValueError
        Besides the argument checks: ``x``, the weights or the biases so large that a score
        overflows float64 (the message names them).
    """
    n_heads = check_positive_int(n_heads, "n_heads")
    n_kv = n_heads if n_kv_heads is None else check_positive_int(n_kv_heads, "n_kv_heads")
    if n_heads % n_kv:
        raise ValueError(f"n_kv_heads = {n_kv} must divide n_heads = {n_heads}")
    x = check_real_array(x, "x", ndim=2)
    W_q = check_real_array(W_q, "W_q", ndim=2)
    W_k = check_real_array(W_k, "W_k", ndim=2)
    N, d_model = x.shape
    for name, W in (("W_q", W_q), ("W_k", W_k)):
        if W.shape[1] != d_model:
            raise ValueError(
                f"{name} must have d_model = x.shape[1] = {d_model} columns, got shape {W.shape}"
            )
    if W_q.shape[0] % n_heads:
        raise ValueError(f"W_q.shape[0] = {W_q.shape[0]} must be a multiple of n_heads")
    d = check_dim(W_q.shape[0] // n_heads, name="W_q.shape[0] // n_heads")
    if W_k.shape[0] != n_kv * d:
        raise ValueError(f"W_k must have n_kv_heads * d = {n_kv * d} rows, got {W_k.shape[0]}")
    biases = []
    for name, b, rows in (("b_q", b_q, n_heads * d), ("b_k", b_k, n_kv * d)):
        if b is not None:
            b = check_real_array(b, name, ndim=1)
            if b.shape[0] != rows:
                raise ValueError(f"{name} must have shape ({rows},), got {b.shape}")
        biases.append(b)
    pos = _positions(positions)
    _check_positions_length(pos, x)
    base = check_base(base)
    layout = _check_layout(layout)
    check_elements(n_heads * N * N, f"the scores of shape (n_heads, N, N) = ({n_heads}, {N}, {N})")

    def heads(W: np.ndarray, b: Any, count: int) -> np.ndarray:  # (count, N, d), rotated
        y = x @ W.T + (0.0 if b is None else b)
        return apply_rope(y.reshape(N, count, d).transpose(1, 0, 2), pos, base, layout)

    # Overflow shows up in the scores themselves (an inf in q or k makes them inf or nan),
    # so one check of the (n_heads, N, N) result covers every step; apply_rope is unchanged.
    with np.errstate(over="ignore", invalid="ignore"):
        q = heads(W_q, biases[0], n_heads)
        k = np.repeat(heads(W_k, biases[1], n_kv), n_heads // n_kv, axis=0)
        scores = q @ k.transpose(0, 2, 1)
    if not np.all(np.isfinite(scores)):
        raise ValueError(
            "x, W_q and W_k (with b_q, b_k) are so large that the scores q^T k overflow "
            "float64; scale x or the weights down"
        )
    return scores


# ---------------------------------------------------------------------- accuracy


def _torch_positions(pos: np.ndarray, dtype: Any) -> Any:
    import torch

    return torch.from_numpy(pos).to(dtype)


def cos_sin_tables(
    positions: Any, d: int, base: float = 10000.0, recipe: str = "rope_lib"
) -> tuple[np.ndarray, np.ndarray]:
    r"""The tables :math:`\cos m\theta_i`, :math:`\sin m\theta_i` as a given recipe stores them.

    * ``"rope_lib"``: float64 angles :math:`m\theta_i` and float64 cos/sin, rounded once to
      float32 (what :func:`apply_rope` uses for float32 inputs).  Against an exact (mpmath)
      reference the error is at most the float32 rounding of the result,
      :math:`2^{-25} \approx 3.0\cdot 10^{-8}`, plus the float64 angle's own error, up to
      about :math:`|m|\, 2^{-53}`; the second is below 5 % of the first for
      :math:`|m| \le 10^7`, so up to there the error is the float32 rounding.  Beyond, it
      grows: for ``d = 128``, ``base = 1e4`` it is :math:`7.7\cdot 10^{-8}` at :math:`10^9`
      and :math:`2.5\cdot 10^{-7}` at :math:`2^{32}`, within the bound
      :math:`2^{-25} + |m|\, 2^{-52}` (``test_rope_lib_tables_against_mpmath_up_to_2_to_32``).
    * ``"float32"``: the usual recipe (Hugging Face's ``LlamaRotaryEmbedding``, the LLaMA
      code): ``inv_freq = 1 / base ** (arange(0, d, 2) / d)`` in float32, angle =
      ``float32(m) * inv_freq`` in float32, cos/sin in float32.  Each product is rounded to
      a relative :math:`2^{-24}`, an absolute angle error near :math:`6\cdot 10^{-8}\,m`.
    * ``"bfloat16_tables"``: the float32 recipe, then the tables rounded to bfloat16 (models
      run in bfloat16 cast cos/sin to the activations' dtype).
    * ``"bfloat16_positions"``: positions rounded to bfloat16 first (as
      ``rotary-embedding-torch`` does for bfloat16 inputs), then the float32 recipe.
    * ``"float64"``: the float64 values without rounding, the reference.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        float64 arrays of shape ``(N, d/2)`` holding exactly the values the recipe uses.
    """
    pos = _positions(positions)
    d = check_dim(d)
    base = check_base(base)
    recipe = check_choice(recipe, "recipe", RECIPES + ("float64",))
    _check_tables(pos.size, d)
    if recipe in ("float64", "rope_lib"):
        angle = _angles(pos, d, base)
        c, s = np.cos(angle), np.sin(angle)
        if recipe == "rope_lib":
            c, s = c.astype(np.float32), s.astype(np.float32)
        return c.astype(np.float64), s.astype(np.float64)
    import torch

    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    if recipe == "bfloat16_positions":
        t = _torch_positions(pos, torch.bfloat16).float()
    else:
        t = _torch_positions(pos, torch.float32)
    angle = t[:, None] * inv_freq[None, :]
    c, s = angle.cos(), angle.sin()
    if recipe == "bfloat16_tables":
        c, s = c.to(torch.bfloat16), s.to(torch.bfloat16)
    return c.double().numpy(), s.double().numpy()


def table_error(
    positions: Any, d: int, base: float = 10000.0, recipe: str = "float32"
) -> np.ndarray:
    r"""Largest error of a recipe's tables at each position.

    .. math:: e(m) = \max_i \max\big(|\tilde c_{m,i} - \cos m\theta_i|,\
              |\tilde s_{m,i} - \sin m\theta_i|\big),

    with :math:`\tilde c, \tilde s` from :func:`cos_sin_tables` and the reference in float64
    (the ``"float64"`` recipe: rope_lib's own float64 angles).  That reference is itself off
    by up to about :math:`|m|\, 2^{-53}`, so this function cannot see errors of that size:
    it measures the other recipes, and the ``"rope_lib"`` recipe's float32 rounding, but not
    the float64 angle error that the ``"rope_lib"`` tables carry, which matters beyond
    :math:`|m| \approx 10^7` (see :func:`cos_sin_tables`; measure it against mpmath).

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(N,)``.
    """
    c, s = cos_sin_tables(positions, d, base, recipe)
    c_ref, s_ref = cos_sin_tables(positions, d, base, "float64")
    return np.maximum(np.abs(c - c_ref), np.abs(s - s_ref)).max(axis=1)


def score_error(
    positions: Any,
    d: int,
    base: float = 10000.0,
    recipe: str = "float32",
    offset: int = 1,
    n_vectors: int = 8,
    seed: int = 0,
) -> np.ndarray:
    r"""Relative error of attention scores computed in float32 with a recipe's tables.

    For each position :math:`m` the query sits at :math:`m` and the key at
    :math:`\max(m - \text{offset}, 0)`; ``n_vectors`` random pairs :math:`(q, k)` with
    standard normal float32 entries are rotated in the half layout with float32 arithmetic
    (``recipe="rope_lib"``: :func:`apply_rope` on float32 torch tensors; other recipes:
    :math:`q\odot\cos + \operatorname{rotate\_half}(q)\odot\sin` with that recipe's tables),
    and the score is compared with the float64 score of the same float32 vectors:

    .. math:: e(m) = \max_{\text{pairs}} \frac{|\tilde s - s|}{\lVert q\rVert\,\lVert k\rVert},
              \qquad s = (R_m q)^\top (R_n k) = q^\top R_{n-m} k.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(N,)``.
    """
    import torch

    pos = _positions(positions)
    d = check_dim(d)
    base = check_base(base)
    recipe = check_choice(recipe, "recipe", RECIPES)
    offset = check_positive_int(
        offset,
        "offset",
        minimum=0,
        maximum=MAX_POSITION,
        hint="MAX_POSITION, the largest position rope_lib accepts",
    )
    n_vectors = check_positive_int(n_vectors, "n_vectors")
    seed = check_seed(seed)
    check_elements(
        n_vectors * pos.size * d,
        f"the n_vectors = {n_vectors} random queries of shape (N, d) = ({pos.size}, {d})",
        "lower n_vectors",
    )
    key_pos = np.maximum(pos - offset, 0)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_vectors, pos.size, d)).astype(np.float32)
    k = rng.standard_normal((n_vectors, pos.size, d)).astype(np.float32)
    # Reference: float64 rotation with float64 angles of the same float32 numbers.
    q_ref = _apply_numpy(q.astype(np.float64), *cos_sin_tables(pos, d, base, "float64"), "half")
    k_ref = _apply_numpy(k.astype(np.float64), *cos_sin_tables(key_pos, d, base, "float64"), "half")
    exact = (q_ref * k_ref).sum(-1)
    if recipe == "rope_lib":
        qr = apply_rope(torch.from_numpy(q), pos, base, "half")
        kr = apply_rope(torch.from_numpy(k), key_pos, base, "half")
    else:

        def rotate(x: np.ndarray, p: np.ndarray) -> Any:
            c, s = (torch.from_numpy(t).float() for t in cos_sin_tables(p, d, base, recipe))
            return apply_rotate_half(
                torch.from_numpy(x), torch.cat((c, c), -1), torch.cat((s, s), -1)
            )

        qr, kr = rotate(q, pos), rotate(k, key_pos)
    approx = (qr * kr).sum(-1).double().numpy()
    norms = np.linalg.norm(q.astype(np.float64), axis=-1) * np.linalg.norm(
        k.astype(np.float64), axis=-1
    )
    return (np.abs(approx - exact) / norms).max(axis=0)


def float32_angle_error(
    positions: Any, d: int, base: float = 10000.0
) -> tuple[np.ndarray, np.ndarray]:
    r"""The angle error of the usual float32 recipe, split into its two causes.

    The recipe (see :func:`cos_sin_tables`) uses :math:`\tilde\theta_i`, the float32 inverse
    frequencies, and rounds the product to float32, :math:`\tilde\alpha_{m,i} =
    \operatorname{fl}_{32}(m\tilde\theta_i)`.  Its angle error splits exactly as

    .. math::

        \tilde\alpha_{m,i} - m\theta_i
        = \underbrace{m(\tilde\theta_i - \theta_i)}_{\text{frequency part}}
        + \underbrace{\operatorname{fl}_{32}(m\tilde\theta_i) - m\tilde\theta_i}_
          {\text{product rounding}} .

    The frequency part is RoPE with the slightly different frequencies
    :math:`\tilde\theta_i`: scores still depend on :math:`n - m` only, and a model trained with
    the same recipe has learned those frequencies.  The product rounding depends on
    :math:`m` itself (it is bounded by :math:`2^{-24} m\tilde\theta_i` and vanishes when
    :math:`m\tilde\theta_i` is a float32 number), so it breaks the shift invariance.

    Both parts are computed in float64, where they are exact for :math:`|m| < 2^{24}`
    (:math:`\tilde\theta_i` has 24 significant bits, so :math:`m\tilde\theta_i` fits in the 53
    of float64), up to the float64 rounding of :math:`\theta_i` itself.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        float64 arrays of shape ``(N, d/2)``: the frequency part and the product rounding
        (signed, radians).
    """
    import torch

    pos = _positions(positions)
    d = check_dim(d)
    base = check_base(base)
    _check_tables(pos.size, d)
    if np.abs(pos).max(initial=0) >= 2**24:
        raise ValueError("positions must be below 2**24 in absolute value (exact in float32)")
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    theta32 = inv_freq.double().numpy()  # the float32 values, exactly
    exact_product = pos.astype(np.float64)[:, None] * theta32[None, :]  # exact in float64
    rounded = exact_product.astype(np.float32).astype(np.float64)
    frequency_part = pos.astype(np.float64)[:, None] * (theta32 - theta(d, base))[None, :]
    return frequency_part, rounded - exact_product


# ---------------------------------------------------------- RoPE with linear attention


def elu_feature_map(x: Any) -> np.ndarray:
    r"""The feature map of Katharopoulos et al.: :math:`\psi(x) = \operatorname{elu}(x) + 1`.

    .. math:: \psi(x) = x + 1 \ (x > 0),\qquad \psi(x) = e^{x} \ (x \le 0);

    positive everywhere in exact arithmetic, so the linear-attention denominator is positive;
    in float64, :math:`e^x` underflows to 0 for :math:`x` below about -745, and a denominator
    can then be exactly 0 (``q = (5, -800)``, ``k = (-800, 5)``), which makes the output of
    :func:`linear_attention` infinite or ``nan`` (with numpy's division warning).

    ``x`` is any finite real array (or torch tensor, converted); the result is float64
    numpy of the same shape.
    """
    x = check_real_array(x, "x")
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def _as_numpy(x: Any) -> Any:
    return x.detach().cpu().numpy() if _is_torch(x) else x


def _linear_inputs(q: Any, k: Any, positions: Any, base: float, layout: str):
    q = check_real_array(_check_x(_as_numpy(q), "q")[0], "q")
    k = check_real_array(_check_x(_as_numpy(k), "k")[0], "k")
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape, got {q.shape} and {k.shape}")
    pos = _positions(positions)
    _check_positions_length(pos, q)
    base = check_base(base)
    layout = _check_layout(layout)
    fq, fk = elu_feature_map(q), elu_feature_map(k)
    return fq, fk, apply_rope(fq, pos, base, layout), apply_rope(fk, pos, base, layout)


def linear_attention_weights(
    q: Any, k: Any, positions: Any, base: float = 10000.0, layout: str = "interleaved"
) -> tuple[np.ndarray, np.ndarray]:
    r"""The two weight matrices of RoPE with linear attention, written out in full.

    .. math::

        C_{mn} = \big(R_m\psi(q_m)\big)^\top \big(R_n\psi(k_n)\big)
               = \psi(q_m)^\top R_{n-m}\,\psi(k_n),\qquad
        Z_{mn} = \psi(q_m)^\top \psi(k_n),

    with :math:`\psi` = :func:`elu_feature_map`.  The output of
    :func:`linear_attention` at :math:`m` is :math:`\sum_n C_{mn} v_n / \sum_n Z_{mn}`: the
    rotation enters the numerator only; the denominator stays positive (in exact arithmetic;
    see :func:`elu_feature_map` for float64 underflow).

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``C`` and ``Z``, float64, shape ``(..., N, N)`` for ``N`` positions.
    """
    q = check_real_array(_check_x(_as_numpy(q), "q")[0], "q")
    N = q.shape[-2]
    check_elements(
        2 * (q.size // q.shape[-1]) * N,
        f"the weight matrices of shape (..., N, N) with N = {N} (q of shape {q.shape})",
        "use linear_attention, which never builds them",
    )
    fq, fk, rq, rk = _linear_inputs(q, k, positions, base, layout)
    return rq @ np.swapaxes(rk, -1, -2), fq @ np.swapaxes(fk, -1, -2)


def linear_attention(
    q: Any,
    k: Any,
    v: Any,
    positions: Any,
    base: float = 10000.0,
    layout: str = "interleaved",
    causal: bool = False,
) -> np.ndarray:
    r"""Linear attention with RoPE in the numerator (RoFormer, section 3.4.2).

    .. math::

        o_m = \frac{\sum_n \big(R_m\psi(q_m)\big)^\top\big(R_n\psi(k_n)\big)\, v_n}
                   {\sum_n \psi(q_m)^\top \psi(k_n)}
            = \frac{\big(R_m\psi(q_m)\big)^\top \sum_n R_n\psi(k_n)\, v_n^\top}
                   {\psi(q_m)^\top \sum_n \psi(k_n)},

    computed the linear way (the sums over :math:`n` once, or as prefix sums over
    :math:`n \le m` when ``causal``), in :math:`O(N d\, d_v)` instead of :math:`O(N^2)`.

    Parameters
    ----------
    q, k : array-like, shape (..., N, d)
    v : array-like, shape (..., N, d_v)
    positions : array-like of int, shape (N,)
    base : float
    layout : {"interleaved", "half"}
    causal : bool
        Sum over :math:`n \le m` only.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(..., N, d_v)``.
    """
    causal = check_flag(causal, "causal")
    fq, fk, rq, rk = _linear_inputs(q, k, positions, base, layout)
    v = check_real_array(v, "v")
    if v.ndim < 2 or v.shape[:-1] != fq.shape[:-1]:
        raise ValueError(
            f"v must have shape (..., N, d_v) matching q's {fq.shape[:-1]}, got {v.shape}"
        )
    if causal:
        check_elements(
            fq.size * v.shape[-1],
            f"the causal prefix sums of shape (..., N, d, d_v) = {fq.shape + v.shape[-1:]}",
            "use causal=False, or fewer positions",
        )
        kv = np.cumsum(rk[..., :, None] * v[..., None, :], axis=-3)  # (..., N, d, d_v)
        num = np.einsum("...td,...tde->...te", rq, kv)
        den = (fq * np.cumsum(fk, axis=-2)).sum(-1)
    else:
        num = rq @ (np.swapaxes(rk, -1, -2) @ v)
        den = fq @ fk.sum(axis=-2)[..., :, None]
        den = den[..., 0]
    return num / den[..., None]


# ------------------------------------------------------------- refusals and timing


def apply_rope_refusals() -> dict[str, tuple[str, str]]:
    r"""Call :func:`apply_rope` with eight inputs it must refuse; return what it said.

    The calls: an odd head dimension (``x`` of shape ``(4, 7)``), ``base=1``, a fractional
    position ``2.5``, a non-finite position ``inf``, one position for four rows, ``x`` with
    one axis (shape ``(8,)``), an integer torch tensor, ``rotary_dim=10`` for a head of 8.

    Returns
    -------
    dict
        ``{name: (exception class name, message)}``, in the order above.

    Raises
    ------
    AssertionError
        If :func:`apply_rope` accepts one of the calls, or raises something other than
        ``ValueError`` or ``TypeError``.
    """
    import torch

    ok, four = np.zeros((4, 8)), np.arange(4)
    calls = {
        "odd d": (np.zeros((4, 7)), four, 10000.0),
        "base 1": (ok, four, 1.0),
        "position 2.5": (ok, [0, 1, 2.5, 3], 10000.0),
        "position inf": (ok, [0, 1, np.inf, 3], 10000.0),
        "one position for 4 rows": (ok, [0], 10000.0),
        "one axis": (np.zeros(8), [0], 10000.0),
        "integer tensor": (torch.zeros(4, 8, dtype=torch.int64), four, 10000.0),
        "rotary_dim 10 of d = 8": (ok, four, 10000.0, "interleaved", 10),
    }
    said = {}
    for name, args in calls.items():
        try:
            apply_rope(*args)
        except (ValueError, TypeError) as error:
            said[name] = (type(error).__name__, str(error))
        else:
            raise AssertionError(f"apply_rope accepted the call {name!r}")
    return said


def time_rope_routes(
    batch: int = 1, heads: int = 8, N: int = 256, d: int = 64, repeats: int = 25, seed: int = 0
) -> dict[str, float]:
    r"""Median wall-clock time of each RoPE route, rotating a query and a key, in microseconds.

    A query and a key tensor of shape ``(batch, heads, N, d)``, float32 (positions
    ``0 .. N-1``, base :math:`10^4`, random entries from ``seed``), are rotated ``repeats``
    times by each route, the routes taking turns so that they share the machine's state; the
    tables are built beforehand, as a model builds them once per forward pass.  Routes:

    * ``"explicit matrix"``: :func:`apply_rope_matrix` (float64 numpy; builds the ``N``
      matrices, :math:`O(N d^2)`);
    * ``"LLaMA complex"``: :func:`llama_apply_rotary_emb` on the ``(batch, N, heads, d)``
      views;
    * ``"rotate_half"``: :func:`apply_rotate_half` with the float32 tables (Hugging Face's
      formula);
    * ``"apply_rope interleaved"``, ``"apply_rope half"``: :func:`apply_rope` on the torch
      tensors (tables cached after the first call);
    * ``"copy"``: ``clone`` of both tensors, the cost of reading and writing them once.

    torch runs on one thread during the measurement (the previous setting is restored).  The
    numbers are measurements on the machine that runs the call; nothing here asserts a time.

    ``seed`` is any integer >= 0; torch's generator takes 64 bits, so it is seeded with
    ``seed % 2**63`` (seeds below :math:`2^{63}` are used as they are).

    Limits: ``repeats <= 1000``, and ``repeats * batch * heads * N * d**2`` (the explicit
    route's multiply-adds) at most :math:`2^{32}`; the defaults use about 5 % of that budget.

    Returns
    -------
    dict
        Route name to median time in microseconds, in the order above.
    """
    import time

    import torch

    batch, heads, N = (
        check_positive_int(value, name)
        for name, value in (("batch", batch), ("heads", heads), ("N", N))
    )
    repeats = check_positive_int(
        repeats, "repeats", maximum=_MAX_REPEATS, hint="medians need no more than a few dozen"
    )
    d = check_dim(d)
    seed = check_seed(seed)
    check_elements(
        2 * batch * heads * N * d,
        f"the query and key tensors of shape (batch, heads, N, d) = ({batch}, {heads}, {N}, {d})",
    )
    check_elements(N * d * d, f"the explicit route's N = {N} matrices of shape (d, d) = ({d}, {d})")
    work = repeats * batch * heads * N * d * d  # the explicit route's multiply-adds dominate
    if work > _MAX_TIMING_WORK:
        raise ValueError(
            f"repeats * batch * heads * N * d * d = {work} multiply-adds of the explicit route "
            f"exceed the timing budget of {_MAX_TIMING_WORK} (2**32); lower repeats or the shape"
        )
    gen = torch.Generator().manual_seed(seed % (1 << 63))
    q, k = torch.randn(2, batch, heads, N, d, generator=gen)
    q_l, k_l = q.transpose(1, 2), k.transpose(1, 2)  # LLaMA's (batch, N, heads, d) views
    q_np, k_np = q.numpy(), k.numpy()
    pos = np.arange(N)
    freqs_cis = llama_precompute_freqs_cis(d, N)
    cos, sin = rotate_half_cos_sin(pos, d)
    routes = {
        "explicit matrix": lambda: (apply_rope_matrix(q_np, pos), apply_rope_matrix(k_np, pos)),
        "LLaMA complex": lambda: llama_apply_rotary_emb(q_l, k_l, freqs_cis),
        "rotate_half": lambda: (apply_rotate_half(q, cos, sin), apply_rotate_half(k, cos, sin)),
        "apply_rope interleaved": lambda: (apply_rope(q, pos), apply_rope(k, pos)),
        "apply_rope half": lambda: (
            apply_rope(q, pos, layout="half"),
            apply_rope(k, pos, layout="half"),
        ),
        "copy": lambda: (q.clone(), k.clone()),
    }
    times: dict[str, list[float]] = {name: [] for name in routes}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared machine, thread contention swamps small shapes
    try:
        for route in routes.values():  # warm-up: caches, allocator
            route()
        for _ in range(repeats):
            for name, route in routes.items():
                start = time.perf_counter()
                route()
                times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return {name: 1e6 * float(np.median(t)) for name, t in times.items()}


# ---------------------------------------------------------------------- figures


def plot_rotation_2d(
    q: Any = (1.0, 0.3),
    k: Any = (0.8, 0.6),
    theta_2d: float = 0.4,
    positions: Any = ((2, 5), (7, 10)),
) -> Figure:
    r"""Arrows of :math:`q, k, R_m q, R_n k` in the plane, one panel per pair :math:`(m, n)`.

    :math:`R_m` turns by :math:`m\theta` (``theta_2d``).  The title of each panel gives the
    score :math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k`; pairs with the same :math:`n - m`
    show the same angle between the rotated arrows and the same score.

    Parameters
    ----------
    q, k : pair of float
        The query and the key (2-D), finite, entries of magnitude at most 1e100 (so that
        the lengths, the axis limits and the score stay finite).
    theta_2d : float
        The frequency :math:`\theta` (radians per position).
    positions : sequence of (m, n)
        One panel per pair of integer positions.

    Returns
    -------
    matplotlib.figure.Figure
        Panel ``j`` holds four annotations (arrows) ending at ``q``, ``k``, ``R_m q``,
        ``R_n k``, in this order.
    """
    q = check_real_array(q, "q", ndim=1, max_abs=_MAX_ARROW)
    k = check_real_array(k, "k", ndim=1, max_abs=_MAX_ARROW)
    for name, vec in (("q", q), ("k", k)):
        if vec.shape != (2,):
            raise ValueError(f"{name} must be a finite 2-vector, got shape {vec.shape}")
    if not (np.any(q) or np.any(k)):
        raise ValueError("q and k must not both be zero (nothing to draw)")
    theta_2d = check_real(theta_2d, "theta_2d")
    pairs = check_integer_array(positions, "positions", ndim=2)
    if pairs.shape[1] != 2 or not 1 <= pairs.shape[0] <= _MAX_PANELS:
        raise ValueError(
            f"positions must be a sequence of 1 to {_MAX_PANELS} (m, n) pairs (one panel "
            f"each), got shape {pairs.shape}"
        )

    def rot(a: float) -> np.ndarray:
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])

    fig, axes = plotting.new_figure(ncols=len(pairs), width=3.6 * len(pairs), height=3.8)
    axes = np.atleast_1d(axes)
    r = 1.25 * max(np.linalg.norm(q), np.linalg.norm(k))
    for ax, (m, n) in zip(axes, pairs, strict=True):
        qm, kn = rot(m * theta_2d) @ q, rot(n * theta_2d) @ k
        arrows = (
            ("$q$", q, 0, 0.45),
            ("$k$", k, 1, 0.45),
            (f"$R_{{{m}}}q$", qm, 0, 1.0),
            (f"$R_{{{n}}}k$", kn, 1, 1.0),
        )
        for label, vec, colour, alpha in arrows:
            style = plotting.line_style(colour)
            ax.annotate(
                "",
                xy=(vec[0], vec[1]),
                xytext=(0.0, 0.0),
                arrowprops={
                    "arrowstyle": "-|>",
                    "color": style["color"],
                    "alpha": alpha,
                    "linewidth": 1.6,
                    "linestyle": "-" if alpha == 1.0 else "--",
                },
            )
            ax.text(
                1.06 * vec[0], 1.06 * vec[1], label, color=style["color"], alpha=max(alpha, 0.7)
            )
        ax.set_xlim(-r, r)
        ax.set_ylim(-r, r)
        ax.set_aspect("equal")
        ax.set_xlabel("coordinate 0")
        ax.set_ylabel("coordinate 1")
        ax.set_title(f"$m = {m}$, $n = {n}$: score {float(qm @ kn):.4f}")
    fig.suptitle(rf"RoPE in 2-D, $\theta = {theta_2d:g}$: the score depends on $n - m$")
    return fig


def plot_layout_mismatch(
    d: int = 64, base: float = 10000.0, max_distance: int = 200, seed: int = 0
) -> Figure:
    r"""Scores of an interleaved-layout model run with the half layout, converted or not.

    A query :math:`q` and a similar key :math:`k = q + \varepsilon` (standard normal
    :math:`q`, :math:`\varepsilon` with standard deviation 0.3) are placed at positions
    :math:`m = 0` and :math:`n`.  Plotted against the distance :math:`n - m`:

    * the original model, interleaved layout: :math:`q^\top R_{n-m} k`;
    * the checkpoint converted with :func:`permute_qk_weight`, half layout: the rows are
      permuted, :math:`(Pq)^\top R^{\text{half}}_{n-m} (Pk)` — the same curve;
    * the permutation forgotten, half layout: :math:`q^\top R^{\text{half}}_{n-m} k` — equal
      at :math:`n - m = 0` only.

    Returns
    -------
    matplotlib.figure.Figure
        Axes 0: the three score curves (lines 0, 1, 2 in this order); axes 1: the absolute
        error of the converted and of the forgotten route.
    """
    d = check_dim(d)
    base = check_base(base)
    max_distance = check_positive_int(
        max_distance,
        "max_distance",
        maximum=MAX_POSITION,
        hint="MAX_POSITION, the largest position rope_lib accepts",
    )
    seed = check_seed(seed)
    check_elements(
        (max_distance + 1) * d,
        f"the rotated keys of shape (max_distance + 1, d) = ({max_distance + 1}, {d})",
        "lower max_distance",
    )
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(d)
    k = q + 0.3 * rng.standard_normal(d)
    x = np.arange(max_distance + 1)
    zeros = np.zeros_like(x)
    p = layout_permutation(d)

    def scores(qv: np.ndarray, kv: np.ndarray, layout: str) -> np.ndarray:
        qr = apply_rope(np.broadcast_to(qv, (x.size, d)), zeros, base, layout)
        kr = apply_rope(np.broadcast_to(kv, (x.size, d)), x, base, layout)
        return (qr * kr).sum(-1)

    original = scores(q, k, "interleaved")
    converted = scores(q[p], k[p], "half")
    forgotten = scores(q, k, "half")
    fig, (ax, ax_err) = plotting.new_figure(ncols=2, width=9.0, height=3.6)
    ax.plot(x, original, label="original (interleaved)", linewidth=2.2, **plotting.line_style(0))
    ax.plot(x, converted, label="converted (half, rows permuted)", **plotting.line_style(2))
    ax.plot(x, forgotten, label="permutation forgotten (half)", **plotting.line_style(1))
    ax.set_xlabel("distance $n - m$ (positions)")
    ax.set_ylabel(r"score $q^\top R_{n-m} k$")
    ax.set_title("scores of one query-key pair")
    ax.legend(loc="upper right")
    ax_err.semilogy(
        x, np.abs(converted - original) + 1e-17, label="converted", **plotting.line_style(2)
    )
    ax_err.semilogy(
        x, np.abs(forgotten - original) + 1e-17, label="forgotten", **plotting.line_style(1)
    )
    ax_err.set_xlabel("distance $n - m$ (positions)")
    ax_err.set_ylabel("|score - original score|")
    ax_err.set_title("error (1e-17 added for the log scale)")
    ax_err.legend(loc="center right")
    fig.suptitle(f"Interleaved weights in a half-layout model, $d = {d}$, $b = {base:g}$")
    return fig


def plot_accuracy(
    d: int = 128, base: float = 10000.0, max_position: int = 10**7, num: int = 57, seed: int = 0
) -> Figure:
    r"""Error of the cos/sin tables and of float32 attention scores against position.

    Left: :func:`table_error` for each recipe of :data:`RECIPES`.  Right:
    :func:`score_error` (query at :math:`m`, key at :math:`m - 1`, float32 arithmetic) for
    each recipe.  Positions are ``num`` integers spaced logarithmically from 1 to
    ``max_position``.  A dotted line marks :math:`2^{-24} m \approx 6\cdot 10^{-8}\, m`, the
    unit round-off of float32 times the position: the order of the float32 recipe's angle
    errors, whose largest (over the pairs) has the size of one float32 rounding of an angle
    near :math:`m` (pair 0's angle :math:`m\theta_0 = m` itself is exact).

    Returns
    -------
    matplotlib.figure.Figure
        Axes 0 and 1 each hold one line per recipe, in the order of :data:`RECIPES`, with
        x data the positions and y data the errors; then the dotted guide line.
    """
    d = check_dim(d)
    base = check_base(base)
    max_position = check_positive_int(
        max_position,
        "max_position",
        minimum=10,
        maximum=MAX_POSITION,
        hint="MAX_POSITION, the largest position rope_lib accepts",
    )
    num = check_positive_int(num, "num", minimum=2)
    seed = check_seed(seed)
    check_elements(
        8 * num * d,
        f"the score samples (8 vectors x num = {num} positions x d = {d})",
        "lower num",
    )
    positions = np.unique(np.round(np.logspace(0, np.log10(max_position), num)).astype(np.int64))
    fig, (ax_t, ax_s) = plotting.new_figure(ncols=2, width=9.5, height=3.9)
    for j, recipe in enumerate(RECIPES):
        style = plotting.line_style(j if j < 3 else j + 1)  # line_style(3) is dotted, as the guide
        lw = 2.2 if recipe == "rope_lib" else 1.5
        t_err = np.maximum(table_error(positions, d, base, recipe), 1e-17)
        s_err = np.maximum(score_error(positions, d, base, recipe, seed=seed), 1e-17)
        ax_t.loglog(positions, t_err, label=_RECIPE_LABELS[recipe], linewidth=lw, **style)
        ax_s.loglog(positions, s_err, label=_RECIPE_LABELS[recipe], linewidth=lw, **style)
    guide = 2.0**-24 * positions
    for ax in (ax_t, ax_s):
        ax.loglog(
            positions,
            guide,
            color="0.4",
            linestyle=":",
            linewidth=1.0,
            label=r"$2^{-24}\,m$",
        )
        ax.set_xlabel("position $m$")
        ax.set_ylim(1e-9, 3.0)
    ax_t.set_ylabel(r"max error of $\cos m\theta_i$, $\sin m\theta_i$")
    ax_t.set_title("cos/sin tables")
    ax_s.set_ylabel("relative score error")
    ax_s.set_title("scores $q_m^\\top k_{m-1}$, float32")
    fig.legend(*ax_t.get_legend_handles_labels(), loc="outside lower center", ncols=5, fontsize=9)
    fig.suptitle(f"Accuracy of RoPE implementations, $d = {d}$, $b = {base:g}$")
    return fig
