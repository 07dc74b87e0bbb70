r"""Scaled dot-product attention and its permutation symmetry (chapter ``symmetry``).

Chapter 1 (``chapters/01_symmetry.md``) shows that attention without position information
cannot see the order of its inputs. This module computes

* :func:`softmax`, :func:`attention_weights`, :func:`scaled_dot_product_attention` and
  :func:`self_attention`:
  scaled dot-product attention
  :math:`\operatorname{softmax}(\boldsymbol Q \boldsymbol K^\top/\sqrt d)\,\boldsymbol V`
  of Vaswani et al. (2017), for NumPy arrays and PyTorch tensors (NumPy in, NumPy out;
  torch in, torch out), with an optional causal mask (query :math:`m` sees keys
  :math:`n \le m` only);
* :func:`equivariance_gap`: how far self-attention is from permutation equivariance for a
  given permutation (zero up to round-off);
* the "this is awesome" / "this awesome is" demonstration: :func:`word_embeddings`,
  :func:`demo_projections`, :func:`random_positions` and :func:`sentence_attention`;
* :func:`symbolic_invariance` and :func:`symbolic_equivariance`: sympy proofs, for a few
  tokens with symbolic entries, that one token's output does not depend on the order of the
  other tokens, and that permuting the tokens permutes the outputs;

The chapter's figures are in ``rope_lib.figures.attention``.

Conventions: tokens are rows. A sequence of :math:`N` tokens of width :math:`d_\text{model}`
is an array ``x`` of shape ``(..., N, d_model)``; the projections act on columns,
:math:`\boldsymbol q_m = \boldsymbol W_q \boldsymbol x_m`, so in row form
:math:`\boldsymbol Q = \boldsymbol X \boldsymbol W_q^\top`.
"""

from __future__ import annotations

import itertools
import math
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._lazy import lazy_import
from ._validate import (
    MAX_DIM,
    check_elements,
    check_flag,
    check_positive_int,
    check_real,
    check_real_array,
    check_seed,
)

sp = lazy_import("sympy")


__all__ = [
    "softmax",
    "attention_weights",
    "scaled_dot_product_attention",
    "self_attention",
    "equivariance_gap",
    "word_embeddings",
    "demo_projections",
    "random_positions",
    "SentenceAttention",
    "sentence_attention",
    "symbolic_attention_row",
    "symbolic_invariance",
    "symbolic_equivariance",
]


# --------------------------------------------------------------------------------------------
# array handling: numpy in, numpy out; torch in, torch out
# --------------------------------------------------------------------------------------------
def _is_torch(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _as_numpy(x: Any, name: str) -> np.ndarray:
    """A real, finite NumPy array; integers become float64, float dtypes are kept."""
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be an array of real numbers, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real, got complex values")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got nan or inf")
    return arr


def _as_torch(x: Any, name: str):
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor when the other inputs are tensors")
    if not torch.is_floating_point(x):
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite, got nan or inf")
    return x


def _inputs(names: Sequence[str], values: Sequence[Any]) -> tuple[bool, list[Any]]:
    """Validate a group of arrays that must all be NumPy-like or all be torch tensors."""
    use_torch = any(_is_torch(v) for v in values)
    if use_torch and not all(_is_torch(v) for v in values):
        tensors = [n for n, v in zip(names, values, strict=True) if _is_torch(v)]
        others = [n for n, v in zip(names, values, strict=True) if not _is_torch(v)]
        raise TypeError(
            f"{', '.join(names)} must be all NumPy arrays or all torch tensors; "
            f"{', '.join(tensors)} {'is a tensor' if len(tensors) == 1 else 'are tensors'}, "
            f"{', '.join(others)} {'is not' if len(others) == 1 else 'are not'}"
        )
    if use_torch:
        out = [_as_torch(v, n) for n, v in zip(names, values, strict=True)]
        dtypes = {t.dtype for t in out}
        devices = {t.device for t in out}
        if len(dtypes) > 1 or len(devices) > 1:
            raise TypeError(
                f"{', '.join(names)} must share one dtype and device, got "
                f"{[str(t.dtype) for t in out]} on {[str(t.device) for t in out]}"
            )
        return True, out
    out = [_as_numpy(v, n) for n, v in zip(names, values, strict=True)]
    common = np.result_type(*out)
    return False, [a.astype(common, copy=False) for a in out]


def _check_ndim(x: Any, name: str, what: str) -> None:
    if x.ndim < 2:
        raise ValueError(f"{name} must have shape (..., {what}), got shape {tuple(x.shape)}")


def _batch_shape(names: Sequence[str], arrays: Sequence[Any]) -> None:
    shapes = [tuple(a.shape[:-2]) for a in arrays]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            f"the leading (batch) dimensions of {', '.join(names)} must broadcast, got "
            f"{', '.join(f'{n}: {tuple(a.shape)}' for n, a in zip(names, arrays, strict=True))}"
        ) from None


# --------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------
def softmax(scores: Any, axis: int = -1):
    r"""Numerically stable softmax along ``axis``.

    .. math:: \operatorname{softmax}(\boldsymbol s)_j
              = \frac{e^{s_j - \max_k s_k}}{\sum_l e^{s_l - \max_k s_k}},

    which equals :math:`e^{s_j}/\sum_l e^{s_l}` but never overflows: the largest exponent is 0.

    Parameters
    ----------
    scores : numpy.ndarray or torch.Tensor
        Finite real scores, at least 1-D, with at least one entry along ``axis``.
    axis : int
        The axis that sums to one.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Same type, shape and (floating) dtype as ``scores``.
    """
    use_torch, (s,) = _inputs(["scores"], [scores])
    if s.ndim < 1:
        raise ValueError("scores must be at least 1-D, got a scalar")
    if (
        isinstance(axis, bool)
        or not isinstance(axis, (int, np.integer))
        or not (-s.ndim <= axis < s.ndim)
    ):
        raise ValueError(f"axis must be an integer in [-{s.ndim}, {s.ndim}), got {axis!r}")
    if s.shape[axis] == 0:
        raise ValueError(
            f"scores must have at least one entry along axis {axis} (a softmax over no scores "
            f"is no probability vector), got shape {tuple(s.shape)}"
        )
    if use_torch:
        import torch

        return torch.softmax(s, dim=int(axis))
    shifted = s - np.max(s, axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def _check_causal(causal: Any) -> bool:
    return check_flag(causal, "causal")


def _masked_softmax(scores: Any, use_torch: bool):
    """Row-wise softmax with the causal mask: entry (m, n) is dropped when n > m."""
    t, s = scores.shape[-2], scores.shape[-1]
    if use_torch:
        import torch

        keep = torch.ones(t, s, dtype=torch.bool, device=scores.device).tril()
        return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    keep = np.tril(np.ones((t, s), dtype=bool))
    masked = np.where(keep, scores, -np.inf)  # key 0 is always kept: every row has a finite max
    e = np.exp(masked - np.max(masked, axis=-1, keepdims=True))  # exp(-inf) = 0
    return e / np.sum(e, axis=-1, keepdims=True)


def attention_weights(q: Any, k: Any, causal: bool = False):
    r"""Attention weights :math:`\boldsymbol A = \operatorname{softmax}(\boldsymbol Q
    \boldsymbol K^\top/\sqrt d)`, row by row.

    .. math:: A_{mn} = \frac{\exp(\boldsymbol q_m^\top \boldsymbol k_n/\sqrt d)}
              {\sum_{l \in V_m} \exp(\boldsymbol q_m^\top \boldsymbol k_l/\sqrt d)}
              \quad (n \in V_m), \qquad A_{mn} = 0 \quad (n \notin V_m),

    with :math:`V_m` all keys, or with ``causal`` the keys :math:`n \le m` (query :math:`m`
    sees keys :math:`0, \dots, m`; the mask is aligned at the top left, as in
    ``torch.nn.functional.scaled_dot_product_attention(..., is_causal=True)``).

    Parameters
    ----------
    q : numpy.ndarray or torch.Tensor
        Queries, shape ``(..., N, d)``.
    k : numpy.ndarray or torch.Tensor
        Keys, shape ``(..., S, d)``; batch dimensions broadcast against those of ``q``.
    causal : bool
        Mask out the keys :math:`n > m` for query :math:`m` (``True`` or ``False`` only).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Shape ``(..., N, S)``; every row is a probability vector (with ``causal``, row
        :math:`m` is zero beyond column :math:`m`).

    Raises
    ------
    ValueError
        If a score :math:`\boldsymbol q_m^\top \boldsymbol k_n/\sqrt d` overflows the dtype
        (softmax would return nan).
    """
    causal = _check_causal(causal)
    use_torch, (q, k) = _inputs(["q", "k"], [q, k])
    return _attention_weights(q, k, causal, use_torch, "q and k are")


def _attention_weights(q: Any, k: Any, causal: bool, use_torch: bool, culprit: str):
    """:func:`attention_weights` for validated arrays; ``culprit`` names the caller's
    arguments in the refusal of scores that overflow (``"q and k are"``, or ``"x (with w_q
    and w_k) is"`` when self-attention made q and k)."""
    _check_ndim(q, "q", "N, d")
    _check_ndim(k, "k", "S, d")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dimension d, got q: {tuple(q.shape)}, "
            f"k: {tuple(k.shape)}"
        )
    if q.shape[-1] == 0 or k.shape[-2] == 0:
        raise ValueError(
            f"q and k need d >= 1 and at least one key, got q: {tuple(q.shape)}, "
            f"k: {tuple(k.shape)}"
        )
    _batch_shape(["q", "k"], [q, k])
    scale = 1.0 / math.sqrt(q.shape[-1])  # a Python float keeps float32 inputs float32
    k_t = k.transpose(-1, -2) if use_torch else np.swapaxes(k, -1, -2)
    if use_torch:
        scores = (q @ k_t) * scale
        finite = bool(scores.isfinite().all())
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            scores = (q @ k_t) * scale
        finite = bool(np.all(np.isfinite(scores)))
    if not finite:
        raise ValueError(
            f"{culprit} so large that the scores q k^T / sqrt(d) overflow their dtype "
            f"({scores.dtype}); scale them down"
        )
    if causal:
        return _masked_softmax(scores, use_torch)
    return softmax(scores, axis=-1)


def scaled_dot_product_attention(q: Any, k: Any, v: Any, causal: bool = False):
    r"""Scaled dot-product attention of Vaswani et al. (2017).

    .. math:: \operatorname{Attention}(\boldsymbol Q, \boldsymbol K, \boldsymbol V)
              = \operatorname{softmax}\!\Big(\frac{\boldsymbol Q \boldsymbol K^\top}{\sqrt d}
              \Big)\boldsymbol V,
              \qquad \boldsymbol o_m = \sum_n A_{mn} \boldsymbol v_n ,

    with the weights :math:`A_{mn}` of :func:`attention_weights`. With ``causal`` the sum runs
    over :math:`n \le m` only, so :math:`\boldsymbol o_m` is attention over the prefix
    :math:`0, \dots, m` (a decoder's masked self-attention).

    Parameters
    ----------
    q : numpy.ndarray or torch.Tensor
        Queries, shape ``(..., N, d)``.
    k : numpy.ndarray or torch.Tensor
        Keys, shape ``(..., S, d)``.
    v : numpy.ndarray or torch.Tensor
        Values, shape ``(..., S, d_v)``: one value per key.
    causal : bool
        Query :math:`m` attends to keys :math:`0, \dots, m` only.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Outputs of shape ``(..., N, d_v)``; NumPy in, NumPy out (integers promoted to
        float64), torch in, torch out with the inputs' dtype and device.
    """
    causal = _check_causal(causal)
    use_torch, (q, k, v) = _inputs(["q", "k", "v"], [q, k, v])
    return _attention(q, k, v, causal, use_torch, "q and k are")


def _attention(q: Any, k: Any, v: Any, causal: bool, use_torch: bool, culprit: str):
    """:func:`scaled_dot_product_attention` for validated arrays (``culprit`` as in
    :func:`_attention_weights`)."""
    _check_ndim(v, "v", "S, d_v")
    if v.ndim >= 2 and k.ndim >= 2 and v.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"k and v must hold the same number of tokens S (one value per key), got "
            f"k: {tuple(k.shape)}, v: {tuple(v.shape)}"
        )
    weights = _attention_weights(q, k, causal, use_torch, culprit)
    _batch_shape(["q", "k", "v"], [q, k, v])
    return weights @ v


def self_attention(x: Any, w_q: Any, w_k: Any, w_v: Any, causal: bool = False):
    r"""Single-head self-attention of a sequence ``x`` with projections
    :math:`\boldsymbol q_m = \boldsymbol W_q \boldsymbol x_m`,
    :math:`\boldsymbol k_m = \boldsymbol W_k \boldsymbol x_m`,
    :math:`\boldsymbol v_m = \boldsymbol W_v \boldsymbol x_m`.

    .. math:: \boldsymbol o_m = \sum_n
              \operatorname{softmax}_n\!\Big(\frac{\boldsymbol x_m^\top \boldsymbol W_q^\top
              \boldsymbol W_k \boldsymbol x_n}{\sqrt{d}}\Big)\, \boldsymbol W_v \boldsymbol x_n

    (the softmax over :math:`n`; with ``causal``, over :math:`n \le m` only).

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        Token vectors as rows, shape ``(..., N, d_model)``.
    w_q, w_k : numpy.ndarray or torch.Tensor
        Query and key projections, shape ``(d, d_model)``.
    w_v : numpy.ndarray or torch.Tensor
        Value projection, shape ``(d_v, d_model)``.
    causal : bool
        Token :math:`m` attends to tokens :math:`0, \dots, m` only.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Outputs, shape ``(..., N, d_v)``.

    Raises
    ------
    ValueError
        If ``x`` (with the projections) is so large that the values or the scores overflow
        the dtype; the message names ``x``.
    """
    causal = _check_causal(causal)
    use_torch, (x, w_q, w_k, w_v) = _inputs(["x", "w_q", "w_k", "w_v"], [x, w_q, w_k, w_v])
    _check_ndim(x, "x", "N, d_model")
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if w.ndim != 2 or w.shape[1] != x.shape[-1]:
            raise ValueError(
                f"{name} must be a matrix of shape (d_out, d_model) with d_model = "
                f"{x.shape[-1]} (the width of x), got shape {tuple(w.shape)}"
            )
    if w_q.shape[0] != w_k.shape[0]:
        raise ValueError(
            f"w_q and w_k must map to the same dimension d, got {tuple(w_q.shape)} and "
            f"{tuple(w_k.shape)}"
        )
    if use_torch:
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        v_finite = bool(v.isfinite().all())
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        v_finite = bool(np.all(np.isfinite(v)))
    if not v_finite:
        raise ValueError(
            f"x (with w_v) is so large that the values x w_v^T overflow their dtype "
            f"({v.dtype}); scale x or w_v down"
        )
    # q or k may hold inf here: the scores are then non-finite and refused by name.
    return _attention(q, k, v, causal, use_torch, "x (with w_q and w_k) is")


def _permutation(perm: Any, size: int, name: str = "perm") -> np.ndarray:
    arr = np.asarray(perm)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        raise TypeError(f"{name} must be a 1-D sequence of integers, got {perm!r}")
    if sorted(arr.tolist()) != list(range(size)):
        raise ValueError(
            f"{name} must be a permutation of 0..{size - 1} (one entry per token), got "
            f"{arr.tolist()}"
        )
    return arr.astype(np.int64)


def equivariance_gap(x: Any, perm: Any, w_q: Any, w_k: Any, w_v: Any) -> float:
    r"""Largest entry of :math:`|\operatorname{SA}(\boldsymbol P\boldsymbol X) -
    \boldsymbol P\operatorname{SA}(\boldsymbol X)|` for the permutation ``perm``.

    Row :math:`i` of :math:`\boldsymbol P\boldsymbol X` is row ``perm[i]`` of
    :math:`\boldsymbol X`. Self-attention is permutation equivariant, so the gap is zero up
    to round-off for every permutation.

    Parameters
    ----------
    x : array_like
        Tokens as rows, shape ``(..., N, d_model)``.
    perm : sequence of int
        A permutation of ``0..N-1``, :math:`N` the number of tokens (rows of ``x``).
    w_q, w_k, w_v : array_like
        Projections as in :func:`self_attention`.

    Returns
    -------
    float
        The largest absolute difference.
    """
    use_torch, (x,) = _inputs(["x"], [x])
    _check_ndim(x, "x", "N, d_model")
    idx = _permutation(perm, x.shape[-2])
    out = self_attention(x, w_q, w_k, w_v)
    if use_torch:
        import torch

        t_idx = torch.as_tensor(idx, device=x.device)
        gap = self_attention(x[..., t_idx, :], w_q, w_k, w_v) - out[..., t_idx, :]
        return float(gap.abs().max())
    gap = self_attention(x[..., idx, :], w_q, w_k, w_v) - out[..., idx, :]
    return float(np.max(np.abs(gap)))


# --------------------------------------------------------------------------------------------
# the "this is awesome" demonstration
# --------------------------------------------------------------------------------------------
def _words(words: Any) -> tuple[str, ...]:
    what = "a string or a non-empty sequence of non-empty strings"
    if isinstance(words, str):
        words = words.split()
    if isinstance(words, (bytes, dict)) or not hasattr(words, "__iter__"):
        raise TypeError(f"words must be {what}, got {words!r:.80}")
    words = tuple(words)
    if not words or not all(isinstance(w, str) and w for w in words):
        raise TypeError(f"words must be {what}, got {words!r:.80}")
    return words


def _width(d: Any) -> int:
    """The embedding width of the demonstration: any integer in [1, MAX_DIM] (no rotation
    acts on it, so odd widths are fine)."""
    return check_positive_int(
        d, "d", maximum=MAX_DIM, hint="d is the embedding width, at most rope_lib's MAX_DIM"
    )


def word_embeddings(words: Any, d: int = 4, seed: int = 0) -> np.ndarray:
    r"""Fixed random embeddings :math:`\boldsymbol x_w \sim \mathcal N(0, \boldsymbol I_d)`,
    one per word.

    The vector of a word depends only on the word and on ``seed`` (the generator is seeded
    with ``(seed, crc32(word))``), never on its neighbours or its place in the sentence, as
    for a real embedding table.

    Parameters
    ----------
    words : str or sequence of str
        The tokens; a string is split on white space.
    d : int
        Embedding width, 1 to ``MAX_DIM`` (any width: nothing rotates pairs of coordinates
        here); ``len(words) * d`` at most ``MAX_ELEMENTS``.
    seed : int
        Seed of the embedding table, >= 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(len(words), d)``, row :math:`m` the embedding of word
        :math:`m`.
    """
    words = _words(words)
    d = _width(d)
    seed = check_seed(seed)
    check_elements(len(words) * d, f"word_embeddings of {len(words)} words with width d = {d}")
    rows = [
        np.random.default_rng([seed, zlib.crc32(w.encode("utf-8"))]).standard_normal(d)
        for w in words
    ]
    return np.stack(rows)


def demo_projections(d: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Random projections :math:`\boldsymbol W_q, \boldsymbol W_k, \boldsymbol W_v` of shape
    ``(d, d)`` with entries :math:`\mathcal N(0, 1/d)` (so that projected vectors keep the
    scale of their inputs).

    Parameters
    ----------
    d : int
        Width of the model and of the head, >= 1, with :math:`3 d^2` at most ``MAX_ELEMENTS``
        (so ``d <= 6688``).
    seed : int
        Seed, >= 0.

    Returns
    -------
    tuple of numpy.ndarray
        ``(w_q, w_k, w_v)``, each float64 of shape ``(d, d)``.
    """
    d = _width(d)
    seed = check_seed(seed)
    check_elements(3 * d * d, f"demo_projections(d={d}), three d x d matrices,", "lower d")
    rng = np.random.default_rng([seed, 1])
    w = rng.standard_normal((3, d, d)) / np.sqrt(d)
    return w[0], w[1], w[2]


def random_positions(n_positions: int, d: int = 4, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    r"""Distinct random position vectors :math:`\boldsymbol p_0, \dots,
    \boldsymbol p_{N-1} \sim \mathcal N(0, \text{scale}^2 \boldsymbol I_d)`.

    Any distinct vectors break the permutation symmetry of attention; chapter
    ``sinusoidal`` derives a structured choice.

    Parameters
    ----------
    n_positions : int
        Number of positions :math:`N`, >= 1, with ``n_positions * d`` at most ``MAX_ELEMENTS``.
    d : int
        Width, 1 to ``MAX_DIM``.
    seed : int
        Seed, >= 0.
    scale : float
        Standard deviation of each entry, a finite number > 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(n_positions, d)``; row :math:`m` is :math:`\boldsymbol p_m`.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    d = _width(d)
    seed = check_seed(seed)
    scale = check_real(scale, "scale", low=0.0, low_open=True)
    return _random_positions(n_positions, d, seed, scale, "scale")


def _random_positions(n_positions: int, d: int, seed: int, scale: float, scale_name: str):
    """:func:`random_positions` for validated arguments; ``scale_name`` is the caller's name
    for ``scale`` (in the refusal of a scale so large that the vectors overflow)."""
    check_elements(
        n_positions * d, f"random_positions(n_positions={n_positions}, d={d})", "lower either"
    )
    rng = np.random.default_rng([seed, 2])
    with np.errstate(over="ignore"):
        out = scale * rng.standard_normal((n_positions, d))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{scale_name} = {scale!r} is so large that the vectors overflow float64")
    return out


@dataclass(frozen=True)
class SentenceAttention:
    """Self-attention of one sentence: the words, the inputs, the weights and the outputs.

    Attributes
    ----------
    words : tuple of str
        The tokens in sentence order.
    x : numpy.ndarray
        Inputs, shape ``(N, d)``: word embeddings, plus :math:`\\boldsymbol p_m` at position
        :math:`m` if positions were given.
    weights : numpy.ndarray
        Attention weights, shape ``(N, N)``; row :math:`m` is what word :math:`m` attends to.
    output : numpy.ndarray
        Outputs, shape ``(N, d)``.
    """

    words: tuple[str, ...]
    x: np.ndarray
    weights: np.ndarray
    output: np.ndarray

    def index(self, word: str) -> int:
        """Position of the first occurrence of ``word``."""
        if word not in self.words:
            raise ValueError(f"word must be one of {self.words}, got {word!r}")
        return self.words.index(word)

    def row(self, word: str) -> np.ndarray:
        """The output vector of ``word`` (its first occurrence)."""
        return self.output[self.index(word)]

    def weights_of(self, word: str) -> dict[str, float]:
        """How much ``word`` attends to each word, as a dict keyed by word."""
        i = self.index(word)
        return {w: float(a) for w, a in zip(self.words, self.weights[i], strict=True)}


def sentence_attention(
    words: Any,
    d: int = 4,
    seed: int = 0,
    positions: Any = None,
) -> SentenceAttention:
    r"""Self-attention of a sentence with the demo embeddings and projections.

    Row :math:`m` of the input is :math:`\boldsymbol x_{w_m}` (:func:`word_embeddings`), or
    :math:`\boldsymbol x_{w_m} + \boldsymbol p_m` when ``positions`` holds the vectors
    :math:`\boldsymbol p_m`; the projections are :func:`demo_projections` with the same
    ``d`` and ``seed``.

    Parameters
    ----------
    words : str or sequence of str
        The sentence; a string is split on white space.
    d : int
        Embedding width, >= 1 (limits as in :func:`demo_projections`).
    seed : int
        Seed of the embeddings and projections, >= 0.
    positions : array_like, optional
        Finite position vectors, shape ``(N', d)`` with ``N' >= len(words)``; row :math:`m` is
        added to the word at position :math:`m`. Vectors so large that the attention scores
        overflow float64 are refused.

    Returns
    -------
    SentenceAttention
    """
    return _sentence_attention(words, d, seed, positions, "positions are")


def _sentence_attention(
    words: Any, d: Any, seed: Any, positions: Any, culprit: str
) -> SentenceAttention:
    """:func:`sentence_attention`; ``culprit`` names the caller's argument that made the
    positions (``"positions are"``, or ``"position_scale = ... is"`` for the figures) in the
    refusal of scores that overflow."""
    words = _words(words)
    d = _width(d)
    seed = check_seed(seed)
    check_elements(len(words) ** 2, f"the attention weights of {len(words)} words")
    x = word_embeddings(words, d, seed)
    if positions is not None:
        p = check_real_array(positions, "positions")
        if p.ndim != 2 or p.shape[1] != x.shape[1] or p.shape[0] < len(words):
            raise ValueError(
                f"positions must have shape (N, d) with N >= {len(words)} and d = {x.shape[1]}, "
                f"got {p.shape}"
            )
        x = x + p[: len(words)]
    w_q, w_k, w_v = demo_projections(x.shape[1], seed)
    with np.errstate(over="ignore", invalid="ignore"):
        q, k, v = x @ w_q.T, x @ w_k.T, x @ w_v.T
        finite = all(np.all(np.isfinite(a)) for a in (q, k, v, q @ k.T))
    if not finite:
        raise ValueError(f"{culprit} so large that the attention scores overflow float64")
    weights = attention_weights(q, k)
    output = weights @ v
    return SentenceAttention(words=words, x=x, weights=weights, output=output)


# --------------------------------------------------------------------------------------------
# symbolic proofs
# --------------------------------------------------------------------------------------------
def _symbolic_tokens(n_tokens: int, d: int, prefix: str) -> list[sp.Matrix]:
    return [
        sp.Matrix(d, 1, lambda i, _j, t=t: sp.Symbol(f"{prefix}_{{{t},{i}}}", real=True))
        for t in range(n_tokens)
    ]


def _symbolic_matrix(name: str, d: int) -> sp.Matrix:
    return sp.Matrix(d, d, lambda i, j: sp.Symbol(f"{name}_{{{i}{j}}}", real=True))


def _simplify(expr: sp.Expr) -> sp.Expr:
    """Put a difference over one denominator; call the full simplifier only if that leaves a
    non-zero numerator."""
    expr = sp.together(expr)
    return expr if expr == 0 else sp.simplify(expr)


def _sympy_matrix(value: Any, name: str, what: str) -> sp.Matrix:
    if not isinstance(value, sp.MatrixBase):
        raise TypeError(f"{name} must be a sympy Matrix ({what}), got {type(value).__name__}")
    if 0 in value.shape:
        raise ValueError(
            f"{name} must be a non-empty sympy Matrix ({what}), got shape {value.shape}"
        )
    _check_sympy_finite(value, name)
    return value


def _check_sympy_finite(value: sp.MatrixBase, name: str) -> None:
    """Refuse entries that are or contain nan, oo, -oo or zoo (sympy's non-finite numbers)."""
    if value.has(sp.nan, sp.oo, sp.S.NegativeInfinity, sp.zoo):
        raise ValueError(
            f"{name} must have finite entries (numbers or symbols), got nan or an infinity: "
            f"{value.tolist()!r:.80}"
        )


def _check_symbolic_row(query: Any, tokens: Any, w_q: Any, w_k: Any, w_v: Any) -> tuple:
    """Validate the arguments of :func:`symbolic_attention_row`: sympy matrices of matching
    shapes."""
    query = _sympy_matrix(query, "query", "a column vector of shape (d_model, 1)")
    if query.shape[1] != 1:
        raise ValueError(f"query must be a column vector of shape (d_model, 1), got {query.shape}")
    d_model = query.shape[0]
    if isinstance(tokens, sp.MatrixBase) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"tokens must be a sequence (list or tuple) of sympy column vectors, got "
            f"{type(tokens).__name__}"
        )
    if len(tokens) == 0:
        raise ValueError("tokens must hold at least one token")
    for i, x in enumerate(tokens):
        if not isinstance(x, sp.MatrixBase):
            raise TypeError(f"tokens[{i}] must be a sympy Matrix, got {type(x).__name__}")
        if x.shape != (d_model, 1):
            raise ValueError(
                f"tokens[{i}] must have the shape of query, ({d_model}, 1), got {x.shape}"
            )
        _check_sympy_finite(x, f"tokens[{i}]")
    w_q = _sympy_matrix(w_q, "w_q", "shape (d, d_model)")
    w_k = _sympy_matrix(w_k, "w_k", "shape (d, d_model)")
    w_v = _sympy_matrix(w_v, "w_v", "shape (d_v, d_model)")
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if w.shape[1] != d_model:
            raise ValueError(
                f"{name} must have d_model = {d_model} columns (the length of query), got "
                f"shape {w.shape}"
            )
    if w_q.shape != w_k.shape:
        raise ValueError(f"w_q and w_k must have the same shape, got {w_q.shape} and {w_k.shape}")
    return query, list(tokens), w_q, w_k, w_v


def symbolic_attention_row(
    query: sp.Matrix, tokens: Sequence[sp.Matrix], w_q: sp.Matrix, w_k: sp.Matrix, w_v: sp.Matrix
) -> sp.Matrix:
    r"""The attention output of a query token over ``tokens``, as a sympy column vector.

    .. math:: \boldsymbol o = \frac{\sum_n \exp\big(\boldsymbol x^\top \boldsymbol W_q^\top
              \boldsymbol W_k \boldsymbol x_n/\sqrt d\big)\, \boldsymbol W_v \boldsymbol x_n}
              {\sum_n \exp\big(\boldsymbol x^\top \boldsymbol W_q^\top \boldsymbol W_k
              \boldsymbol x_n/\sqrt d\big)}

    Parameters
    ----------
    query : sympy.Matrix
        The querying token :math:`\boldsymbol x`, shape ``(d_model, 1)``.
    tokens : sequence of sympy.Matrix
        The tokens :math:`\boldsymbol x_n` it attends to (including itself), in order, each
        of shape ``(d_model, 1)``; at least one.
    w_q, w_k, w_v : sympy.Matrix
        Projections, shape ``(d, d_model)`` (``w_v``: ``(d_v, d_model)``). Anything that is not
        a sympy matrix of these shapes is refused by name, and so is an entry of any argument
        that is or contains ``nan``, ``oo``, ``-oo`` or ``zoo``.

    Returns
    -------
    sympy.Matrix
        Column vector of shape ``(d_v, 1)``.
    """
    query, tokens, w_q, w_k, w_v = _check_symbolic_row(query, tokens, w_q, w_k, w_v)
    d = w_q.shape[0]
    q = w_q * query
    scores = [sp.exp((q.T * (w_k * x))[0, 0] / sp.sqrt(d)) for x in tokens]
    total = sp.Add(*scores)
    return sp.Matrix.hstack(*[s * (w_v * x) for s, x in zip(scores, tokens, strict=True)]) * (
        sp.ones(len(tokens), 1) / total
    )


def _symbolic_width(d: Any) -> int:
    d = check_positive_int(d, "d")
    if d > 4:
        raise ValueError(f"d must be between 1 and 4 (symbolic cost), got {d}")
    return d


def symbolic_invariance(
    n_tokens: int = 3, d: int = 2, token: int = 0, with_positions: bool = False
) -> dict[tuple[int, ...], sp.Matrix]:
    r"""sympy check that a token's output does not depend on the order of the other tokens.

    Tokens :math:`\boldsymbol x_0, \dots, \boldsymbol x_{N-1}` and the projections
    :math:`\boldsymbol W_q, \boldsymbol W_k, \boldsymbol W_v` have symbolic real entries
    (named ``x_{t,i}`` for coordinate :math:`i` of token :math:`t`, and ``a_{ij}``,
    ``b_{ij}``, ``c_{ij}`` for row :math:`i`, column :math:`j` of :math:`\boldsymbol W_q`,
    :math:`\boldsymbol W_k`, :math:`\boldsymbol W_v`; position vectors ``p_{t,i}``).
    For every permutation :math:`\sigma` that fixes the slot of ``token`` and reorders the
    others, the function returns the simplified difference

    .. math:: \boldsymbol o_\text{token}(\boldsymbol x_{\sigma(0)}, \dots,
              \boldsymbol x_{\sigma(N-1)}) - \boldsymbol o_\text{token}(\boldsymbol x_0, \dots,
              \boldsymbol x_{N-1}),

    which is the zero vector. The original order itself is included (its difference is zero
    by construction and proves nothing; it serves only as a control); every other entry is a
    genuine reordering. With ``with_positions=True`` the token in slot :math:`m` is
    :math:`\boldsymbol x_{\sigma(m)} + \boldsymbol p_m` (symbolic :math:`\boldsymbol p_m`), and
    the differences are no longer zero; they are then only put over a common denominator
    (full simplification of a large non-zero expression is slow), and substituting numbers
    shows that they do not vanish.

    Parameters
    ----------
    n_tokens : int
        Number of tokens :math:`N`, 2 to 5 (the number of permutations grows as
        :math:`(N-1)!`).
    d : int
        Width of tokens and head, 1 to 4.
    token : int
        Slot of the token whose output is compared, ``0 <= token < n_tokens``.
    with_positions : bool
        Add a symbolic position vector to each slot.

    Returns
    -------
    dict
        Maps each permutation (a tuple, slot :math:`m` holds token ``perm[m]``) to the
        simplified difference, a sympy column vector.
    """
    n_tokens = check_positive_int(n_tokens, "n_tokens", minimum=2)
    if n_tokens > 5:
        raise ValueError(f"n_tokens must be between 2 and 5, got {n_tokens}")
    d = _symbolic_width(d)
    token = check_positive_int(token, "token", minimum=0)
    if token >= n_tokens:
        raise ValueError(f"token must satisfy 0 <= token < n_tokens = {n_tokens}, got {token}")
    with_positions = check_flag(with_positions, "with_positions")
    xs = _symbolic_tokens(n_tokens, d, "x")
    ps = _symbolic_tokens(n_tokens, d, "p") if with_positions else [sp.zeros(d, 1)] * n_tokens
    w_q, w_k, w_v = (_symbolic_matrix(n, d) for n in ("a", "b", "c"))

    def output(perm: Sequence[int]) -> sp.Matrix:
        seq = [xs[perm[m]] + ps[m] for m in range(n_tokens)]
        return symbolic_attention_row(seq[token], seq, w_q, w_k, w_v)

    identity = tuple(range(n_tokens))
    reference = output(identity)
    others = [t for t in identity if t != token]
    result: dict[tuple[int, ...], sp.Matrix] = {}
    for order in itertools.permutations(others):
        perm = list(order)
        perm.insert(token, token)
        diff = output(perm) - reference
        result[tuple(perm)] = diff.applyfunc(_simplify if not with_positions else sp.together)
    return result


def symbolic_equivariance(perm: Sequence[int], d: int = 2) -> sp.Matrix:
    r"""sympy check of permutation equivariance, :math:`\operatorname{SA}(\boldsymbol P
    \boldsymbol X) = \boldsymbol P \operatorname{SA}(\boldsymbol X)`.

    Tokens and projections have symbolic real entries; row :math:`i` of
    :math:`\boldsymbol P\boldsymbol X` is token ``perm[i]``.

    Parameters
    ----------
    perm : sequence of int
        A permutation of ``0..N-1`` with :math:`2 \le N \le 5` (:math:`N` tokens).
    d : int
        Width, 1 to 4.

    Returns
    -------
    sympy.Matrix
        The simplified difference, shape ``(N, d)``: the zero matrix.
    """
    if (
        isinstance(perm, (str, bytes))
        or not isinstance(perm, (Sequence, np.ndarray))
        or np.ndim(perm) == 0
    ):
        raise TypeError(f"perm must be a sequence of integers, got {perm!r:.80}")
    n_tokens = len(perm)
    if not 2 <= n_tokens <= 5:
        raise ValueError(f"perm must permute between 2 and 5 tokens, got {n_tokens}")
    idx = _order(perm, n_tokens, "perm")
    d = _symbolic_width(d)
    xs = _symbolic_tokens(n_tokens, d, "x")
    w_q, w_k, w_v = (_symbolic_matrix(n, d) for n in ("a", "b", "c"))
    permuted = [xs[i] for i in idx]
    rows_after = [symbolic_attention_row(x, permuted, w_q, w_k, w_v).T for x in permuted]
    rows_before = [symbolic_attention_row(x, xs, w_q, w_k, w_v).T for x in xs]
    diff = sp.Matrix.vstack(*rows_after) - sp.Matrix.vstack(*[rows_before[i] for i in idx])
    return diff.applyfunc(_simplify)


def _order(order: Any, size: int, name: str = "order") -> np.ndarray:
    if isinstance(order, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of integers, got {order!r}")
    try:
        arr = np.asarray(order)
    except (ValueError, TypeError):  # ragged sequences
        raise TypeError(f"{name} must be a sequence of integers, got {order!r:.80}") from None
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be a sequence of integers, got {order!r}")
    return _permutation(arr, size, name)
