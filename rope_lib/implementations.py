r"""Implementing RoPE: three routes, two memory layouts, accurate angle tables (chapter 5).

Chapter 5 (``chapters/05_rope_implementations.md``, label ``rope-implementations``) computes
the map :math:`x_t \mapsto R_{m_t} x_t` of :func:`rope_lib.apply_rope` the ways real code does,
converts checkpoints between the two memory layouts, and measures how accurate the angle
tables are.  This module holds:

* the routes: :func:`apply_rope_matrix` (explicit :math:`d\times d` matrices, for teaching),
  :func:`llama_precompute_freqs_cis` and :func:`llama_apply_rotary_emb` (complex numbers, as
  in the LLaMA reference code), :func:`rotate_half`, :func:`rotate_half_cos_sin` and
  :func:`apply_rotate_half` (the GPT-NeoX / Hugging Face route);
* layouts: :func:`layout_permutation` (interleaved pairs :math:`(2i, 2i+1)` versus half pairs
  :math:`(i, i + d/2)`), :func:`permute_qk_weight` (the row permutation of :math:`W_q, W_k`
  that checkpoint converters apply) and :func:`qk_scores` (every head's scores, with
  grouped-query attention);
* accuracy: :func:`cos_sin_tables` for the recipes of :data:`RECIPES` (the usual float32
  recipe, bfloat16 tables or positions, and rope_lib's own float64 angles),
  :func:`table_error`, :func:`score_error`, :func:`float32_angle_error`;
* :func:`apply_rope_refusals`: the inputs :func:`rope_lib.apply_rope` must refuse, and what it
  says.

The timing of the routes is :func:`rope_lib.timing.time_rope_routes`; the figures are in
``rope_lib.figures.implementations``.  Arguments are checked as in :mod:`rope_lib.rotation`;
the torch routes (:func:`llama_apply_rotary_emb`, :func:`rotate_half`,
:func:`apply_rotate_half`) are differentiable.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._validate import (
    MAX_POSITION,
    _describe,
    check_base,
    check_choice,
    check_dim,
    check_elements,
    check_positive_int,
    check_real_array,
    check_seed,
)
from .frequencies import theta
from .rotation import (
    _angles,
    _check_layout,
    _check_positions_length,
    _check_table_like,
    _check_tables,
    _check_x,
    _is_torch,
    _positions,
    _rotate_pairs,
    _rotation_stack,
    apply_rope,
)

__all__ = [
    "apply_rope_matrix",
    "llama_precompute_freqs_cis",
    "llama_apply_rotary_emb",
    "rotate_half",
    "rotate_half_cos_sin",
    "apply_rotate_half",
    "layout_permutation",
    "permute_qk_weight",
    "qk_scores",
    "RECIPES",
    "cos_sin_tables",
    "table_error",
    "score_error",
    "float32_angle_error",
    "apply_rope_refusals",
]


#: Ways of computing the cos/sin tables compared in chapter 5 (see :func:`cos_sin_tables`).
RECIPES: tuple[str, ...] = ("rope_lib", "float32", "bfloat16_tables", "bfloat16_positions")


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
    q_ref = _rotate_pairs(q.astype(np.float64), *cos_sin_tables(pos, d, base, "float64"), "half")
    k_ref = _rotate_pairs(
        k.astype(np.float64), *cos_sin_tables(key_pos, d, base, "float64"), "half"
    )
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
