r"""Rotary position embedding (RoPE): the rotation :math:`R_m`, ``apply_rope``, linear attention.

Chapter 4 (``chapters/04_rope.md``, label ``rope``) derives RoPE: the query at position
:math:`m` is multiplied by the block-diagonal rotation :math:`R_m`, whose block :math:`i`
turns the pair of coordinates :math:`i` by the angle :math:`m\theta_i`, so that
:math:`(R_m q)^\top (R_n k) = q^\top R_{n-m} k` depends on :math:`n - m` only.  This module
holds:

* :func:`rotation_matrix` and :func:`symbolic_rotation_matrix`: :math:`R_m` as numbers and
  as a sympy matrix with symbolic frequencies (for proofs);
* :func:`apply_rope`: the library's implementation (numpy and torch, both layouts, any
  leading axes, angles in float64): its arguments checked, its formula, and one dispatch to
  the fast torch route of the private module ``rope_lib._fastpath`` (table caches, a fused
  C++ kernel, an opt-in huge-page hint);
* RoPE with linear attention: :func:`elu_feature_map`, :func:`linear_attention_weights`,
  :func:`linear_attention`.

Chapter 5's other routes (explicit matrices, LLaMA's complex numbers, ``rotate_half``), the
layouts and the accuracy of angle tables are in :mod:`rope_lib.implementations`; the figures
are in ``rope_lib.figures.rotation``.

Every argument is checked (``rope_lib._validate``): positions are exact integers of
magnitude at most ``MAX_POSITION`` = :math:`2^{32}` (``3.0`` and unsigned integers are
accepted, ``2.5``, ``nan`` and ``2**64 - 1`` are refused), queries and keys are floating
arrays or tensors with an even last axis, and results larger than ``MAX_ELEMENTS`` are
refused before they are allocated.  The torch route of :func:`apply_rope` is differentiable
in both layouts.  ``torch`` and sympy are imported only by the functions that need them.
"""

from __future__ import annotations

import numbers
import sys
from typing import Any

import numpy as np

from . import _fastpath
from ._lazy import lazy_import
from ._validate import (
    _describe,
    _is_bool,
    check_base,
    check_choice,
    check_dim,
    check_elements,
    check_flag,
    check_integer_array,
    check_real_array,
)
from .frequencies import angles

sp = lazy_import("sympy")

__all__ = [
    "rotation_matrix",
    "symbolic_rotation_matrix",
    "apply_rope",
    "elu_feature_map",
    "linear_attention_weights",
    "linear_attention",
]

_LAYOUTS = ("interleaved", "half")

#: Largest d of :func:`symbolic_rotation_matrix` (a d x d matrix of sympy expressions).
_MAX_SYMBOLIC_DIM = 128


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
    """float64 angles m * theta_i, shape (N, d/2) (:func:`rope_lib.frequencies.angles`),
    refused beyond ``MAX_ELEMENTS`` before they are computed."""
    _check_tables(positions.size, d)
    return angles(positions, d, base)


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
    from .symbolic import _symbolic_inputs

    m, thetas = _symbolic_inputs(m, d, symbol, "m")
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
    C++ kernel (in ``rope_lib._fastpath``: compiled on the first such call and cached on
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
    _check_tables(pos.size, r)
    head = x if r == d else x[..., :r]
    if is_torch:  # the same formula, on torch's fast route (tables cached, fused kernel)
        out = _fastpath.rotate_torch(head, layout, pos, r, base)
        if r == d:
            return out
        import torch

        return torch.cat((out, x[..., r:]), dim=-1)
    out = _rotate_pairs(head, *_fastpath.cos_sin(pos, r, base), layout)
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


def _rotate_pairs(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, layout: str) -> np.ndarray:
    """The formula of :func:`apply_rope` on a numpy ``x``: ``(x_a, x_b) -> (x_a cos - x_b sin,
    x_a sin + x_b cos)`` for the pairs of ``layout``, in float64 for float64 ``x`` and float32
    otherwise, rounded once to ``x``'s dtype."""
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
