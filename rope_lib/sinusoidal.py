"""The sinusoidal position encoding, derived from :math:`\\langle p_m, p_n\\rangle = g(m - n)`.

Chapter 3 (``chapters/03_sinusoidal.md``) solves the functional equation
:math:`\\langle \\boldsymbol p_m, \\boldsymbol p_n\\rangle = g(m - n)` with complex numbers and
finds :math:`z_m = (e^{\\mathrm i m\\theta_0}, \\dots, e^{\\mathrm i m\\theta_{d/2-1}})`.  This
module computes that solution in its three equivalent forms and the objects the chapter
studies:

* :func:`complex_encoding`: the complex vector :math:`z_m` of :math:`d/2` unit phasors;
* :func:`cos_sin_encoding`: its real view :math:`p_m`, pairs
  :math:`(\\cos m\\theta_i, \\sin m\\theta_i)`;
* :func:`sinusoidal`: the layout of *Attention Is All You Need*, :math:`P_\\sigma p_m` with
  pairs :math:`(\\sin m\\theta_i, \\cos m\\theta_i)`, related to the previous one by the
  fixed permutation :func:`vaswani_permutation`;
* :func:`gram_matrix`: the inner products :math:`\\langle p_m, p_n\\rangle`;
* :func:`diagonal_h_score` and :func:`diagonal_h_parts`: the score
  :math:`p_m^\\top \\operatorname{diag}(h)\\, p_n` and its split into a relative
  (:math:`\\cos (m-n)\\theta_i`) and an absolute (:math:`\\cos (m+n)\\theta_i`) part;
* :func:`shift_matrix`: the shift by :math:`k` positions, :math:`D_k` in Vaswani's layout and
  :math:`R_k` in the (cos, sin) layout, with :math:`D_k = P_\\sigma R_k P_\\sigma = R_{-k}`;
* :func:`shift_isometry` and :func:`orthogonal_normal_form`: for *any* solution of the real
  equation, the orthogonal map :math:`U` with :math:`p_{m+1} = U p_m`, and its normal form
  (rotating planes, fixed and flipped directions);
* :func:`symbolic_encoding`: the same encoding as a sympy matrix, for proofs;

The chapter's figures are in ``rope_lib.figures.sinusoidal``.

The encoding functions accept any finite real positions: the *formula* is defined for every
real :math:`m`, and fractional positions are what position interpolation feeds in.  Their
magnitude is limited to ``MAX_POSITION`` = 2**32 (``rope_lib._validate``): an angle
:math:`m\\theta_i` is one float64 product, accurate to :math:`|m|\\,2^{-53}` rad, which is below
5e-7 rad up to that limit and meaningless far beyond it.  The
*derivation* is another matter.  Chapter 3 proves its results (the form of the solutions of the
complex condition, and :math:`p_m = U^m p_0` for every solution of the real equation) for
integer positions: the proofs step from :math:`m` to :math:`m + 1`.  For real positions the
chapter shows, assuming :math:`g` measurable (e.g. :math:`m \\mapsto p_m` continuous), that every
solution is :math:`p_t = e^{tG} p_0` with :math:`G` antisymmetric: rotating pairs and constant
coordinates, no alternating ones.  In two dimensions the real equation at real positions
already implies the complex condition; without an assumption on :math:`g` its phase equation is
Cauchy's exponential equation, which has other, non-measurable solutions.  The width of the encoding, :math:`d_\\text{model}` in the book, is the argument
``d`` here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._lazy import lazy_import
from ._validate import (
    MAX_DIM,
    check_base,
    check_choice,
    check_dim,
    check_distance_array,
    check_elements,
    check_real,
    check_real_array,
)
from .frequencies import theta
from .taylor import diagonal_spread

sp = lazy_import("sympy")

__all__ = [
    "sinusoidal",
    "complex_encoding",
    "cos_sin_encoding",
    "vaswani_permutation",
    "gram_matrix",
    "diagonal_h_score",
    "diagonal_h_parts",
    "shift_matrix",
    "shift_isometry",
    "orthogonal_normal_form",
    "symbolic_encoding",
]

_LAYOUTS = ("sin_cos", "cos_sin")


def _positions(positions: Any, name: str = "positions") -> np.ndarray:
    """Finite real positions of magnitude <= MAX_POSITION as a 1-D float64 array.

    A scalar is refused.  Positions beyond ``MAX_POSITION`` (2**32) are refused by name:
    there the float64 angle ``m * theta_0`` is off by more than ``|m| 2**-53`` ~ 5e-7 rad,
    and an unsigned ``2**64 - 1`` or a Python int ``2**60 + 1`` is not silently rounded.
    """
    arr = check_distance_array(positions, name)
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D sequence of finite real numbers, got an array of shape "
            f"{arr.shape}; wrap a single position in a list"
        )
    return arr


def _angles(positions: np.ndarray, d: int, base: float) -> np.ndarray:
    """Angles m * theta_i, shape (len(positions), d/2), computed in float64."""
    return positions[:, None] * theta(d, base)[None, :]


def _check_layout(layout: Any) -> str:
    return check_choice(layout, "layout", _LAYOUTS)


def _check_table(rows: int, d: int, what: str) -> None:
    """Refuse a ``rows x d`` result beyond ``MAX_ELEMENTS`` before allocating it."""
    check_elements(rows * d, what, hint="encode fewer positions at a time")


def sinusoidal(positions: Any, d: int, base: float = 10000.0) -> np.ndarray:
    r"""The sinusoidal position encoding in the layout of Vaswani et al. (2017).

    .. math::
        P_{m, 2i} = \sin(m\theta_i), \qquad P_{m, 2i+1} = \cos(m\theta_i), \qquad
        \theta_i = b^{-2i/d}, \quad i = 0, \dots, d/2 - 1.

    Pair 0 (columns 0 and 1) turns fastest, with :math:`\theta_0 = 1`.

    Parameters
    ----------
    positions : array_like
        1-D sequence of finite real positions :math:`m` (usually ``0, 1, ..., N-1`` for N tokens;
        fractional positions are allowed, since the formula is defined for every real
        :math:`m`), of magnitude at most ``MAX_POSITION`` = 2**32.
    d : int
        Dimension of the encoding; an even integer >= 2.
    base : float
        The base :math:`b > 1` of the frequencies (10000 in the paper).

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(len(positions), d)``.

    Raises
    ------
    TypeError
        If ``d`` is not an integer, ``base`` is not a real number, or ``positions`` is not
        numeric (or is complex).
    ValueError
        If ``d`` is odd or < 2 or above ``MAX_DIM``, ``base <= 1`` or not finite, or
        ``positions`` is not 1-D, holds ``nan``/``inf`` or a magnitude above 2**32, or the
        result would exceed ``MAX_ELEMENTS``.
    """
    pos = _positions(positions)
    d = check_dim(d)
    base = check_base(base)
    _check_table(pos.shape[0], d, "the encoding (len(positions) x d)")
    angles = _angles(pos, d, base)
    out = np.empty((pos.shape[0], d), dtype=np.float64)
    out[:, 0::2] = np.sin(angles)
    out[:, 1::2] = np.cos(angles)
    return out


def complex_encoding(positions: Any, d: int, base: float = 10000.0) -> np.ndarray:
    r"""The complex solution of :math:`\langle p_m, p_n\rangle = g(m-n)`: :math:`d/2` phasors.

    .. math::
        \boldsymbol z_m = \left(e^{\mathrm i m\theta_0}, e^{\mathrm i m\theta_1}, \dots,
        e^{\mathrm i m\theta_{d/2-1}}\right), \qquad \theta_i = b^{-2i/d}.

    Parameters
    ----------
    positions : array_like
        1-D sequence of finite real positions, of magnitude <= 2**32 (``MAX_POSITION``).
    d : int
        Real dimension of the encoding (even, >= 2); the result has ``d // 2`` columns.
    base : float
        The base :math:`b > 1`.

    Returns
    -------
    numpy.ndarray
        complex128 array of shape ``(len(positions), d // 2)``.
    """
    pos = _positions(positions)
    d = check_dim(d)
    base = check_base(base)
    _check_table(pos.shape[0], d, "the encoding (len(positions) x d)")
    angles = _angles(pos, d, base)
    return np.cos(angles) + 1j * np.sin(angles)


def cos_sin_encoding(positions: Any, d: int, base: float = 10000.0) -> np.ndarray:
    r"""Real view :math:`p_m` of :func:`complex_encoding`: each phasor becomes a pair.

    .. math::
        \boldsymbol p_m = \left(\cos m\theta_0, \sin m\theta_0, \cos m\theta_1, \sin m\theta_1,
        \dots, \cos m\theta_{d/2-1}, \sin m\theta_{d/2-1}\right).

    This is the form the complex derivation produces; :func:`sinusoidal` holds the same
    numbers with the two entries of every pair swapped (see :func:`vaswani_permutation`).

    Parameters
    ----------
    positions : array_like
        1-D sequence of finite real positions, of magnitude <= 2**32 (``MAX_POSITION``).
    d : int
        Dimension of the encoding; an even integer >= 2.
    base : float
        The base :math:`b > 1`.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(len(positions), d)``.
    """
    z = complex_encoding(positions, d, base)
    out = np.empty((z.shape[0], 2 * z.shape[1]), dtype=np.float64)
    out[:, 0::2] = z.real
    out[:, 1::2] = z.imag
    return out


def vaswani_permutation(d: int) -> np.ndarray:
    r"""The fixed permutation that turns the (cos, sin) layout into Vaswani's (sin, cos) layout.

    Returns ``perm`` with ``sinusoidal(pos, d, b) == cos_sin_encoding(pos, d, b)[:, perm]``:

    .. math:: \sigma(2i) = 2i + 1, \qquad \sigma(2i + 1) = 2i, \qquad i = 0, \dots, d/2 - 1.

    The permutation swaps the two entries of every pair.  It is its own inverse and an
    orthogonal map, so it leaves every inner product :math:`\langle p_m, p_n\rangle`
    unchanged.  Read as complex numbers, the swap maps :math:`e^{\mathrm i m\theta}` to
    :math:`\sin m\theta + \mathrm i\cos m\theta = \mathrm i\, e^{-\mathrm i m\theta}`: Vaswani's
    pairs turn clockwise (the sign of :math:`\theta` flips) from a starting phase of
    :math:`\pi/2`.

    Parameters
    ----------
    d : int
        Dimension of the encoding; an even integer >= 2.

    Returns
    -------
    numpy.ndarray
        int64 array of shape ``(d,)``: ``[1, 0, 3, 2, ..., d-1, d-2]``.
    """
    d = check_dim(d)
    perm = np.arange(d, dtype=np.int64)
    perm[0::2] += 1
    perm[1::2] -= 1
    return perm


def gram_matrix(
    m_positions: Any, d: int, base: float = 10000.0, n_positions: Any = None
) -> np.ndarray:
    r"""Inner products of sinusoidal encodings, :math:`G_{mn} = \langle p_m, p_n\rangle`.

    Computed as ``sinusoidal(m) @ sinusoidal(n).T``, i.e. from the encodings themselves,
    not from the closed form; the chapter proves that

    .. math::
        \langle \boldsymbol p_m, \boldsymbol p_n\rangle
        = \sum_{i=0}^{d/2-1}\cos\big((m-n)\theta_i\big).

    Parameters
    ----------
    m_positions : array_like
        1-D sequence of finite real positions (rows), of magnitude <= 2**32.
    d : int
        Dimension of the encoding; an even integer >= 2.
    base : float
        The base :math:`b > 1`.
    n_positions : array_like, optional
        1-D sequence of finite real positions (columns), of magnitude <= 2**32; defaults to ``m_positions``.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(len(m_positions), len(n_positions))``.
    """
    m_arr = _positions(m_positions, "m_positions")
    n_arr = None if n_positions is None else _positions(n_positions, "n_positions")
    d = check_dim(d)
    base = check_base(base)
    n_cols = m_arr.shape[0] if n_arr is None else n_arr.shape[0]
    _check_table(max(m_arr.shape[0], n_cols), d, "the encoding (len(positions) x d)")
    check_elements(
        m_arr.shape[0] * n_cols,
        "the Gram matrix (len(m_positions) x len(n_positions))",
        hint="pass fewer positions",
    )
    p_m = sinusoidal(m_arr, d, base)
    p_n = p_m if n_arr is None else sinusoidal(n_arr, d, base)
    return p_m @ p_n.T


def _diag_h(h: Any) -> np.ndarray:
    arr = check_real_array(h, "h")
    if arr.ndim != 1 or arr.shape[0] < 2 or arr.shape[0] % 2:
        raise ValueError(
            f"h must be a 1-D array of even length >= 2 (the diagonal of H, one entry per "
            f"dimension), got shape {arr.shape}"
        )
    if arr.shape[0] > MAX_DIM:
        raise ValueError(
            f"h must have at most {MAX_DIM} entries (rope_lib's MAX_DIM, the largest d), "
            f"got {arr.shape[0]}"
        )
    return arr


def _pair_angles(m: Any, n: Any, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    m_arr = check_distance_array(m, "m")
    n_arr = check_distance_array(n, "n")
    try:
        shape = np.broadcast_shapes(m_arr.shape, n_arr.shape)
    except ValueError as error:
        raise ValueError(
            f"m and n must broadcast to a common shape, got {m_arr.shape} and {n_arr.shape}"
        ) from error
    check_elements(
        int(np.prod(shape)) * (d // 2),
        "the table of angles (broadcast size of m and n x len(h) / 2)",
        hint="pass fewer positions at a time",
    )
    m_arr, n_arr = np.broadcast_arrays(m_arr, n_arr)
    th = theta(d, base)
    return m_arr[..., None] * th, n_arr[..., None] * th


def diagonal_h_score(m: Any, n: Any, h: Any, base: float = 10000.0) -> np.ndarray:
    r"""The score :math:`p_m^\top \operatorname{diag}(h)\, p_n` in the (cos, sin) layout.

    With :math:`p_m` from :func:`cos_sin_encoding` and :math:`d` = ``len(h)``:

    .. math::
        \boldsymbol p_m^\top \mathcal H \boldsymbol p_n = \sum_{i=0}^{d/2-1}
        h_{2i}\cos m\theta_i \cos n\theta_i + h_{2i+1}\sin m\theta_i \sin n\theta_i .

    Parameters
    ----------
    m, n : array_like
        Finite real positions of magnitude <= 2**32; broadcast against each other.
    h : array_like
        The diagonal of :math:`\mathcal H`, a 1-D real array of even length :math:`d`.
    base : float
        The base :math:`b > 1`.

    Returns
    -------
    numpy.ndarray
        float64 array of the broadcast shape of ``m`` and ``n``.
    """
    h = _diag_h(h)
    base = check_base(base)
    am, an = _pair_angles(m, n, h.shape[0], base)
    return (h[0::2] * np.cos(am) * np.cos(an) + h[1::2] * np.sin(am) * np.sin(an)).sum(-1)


def diagonal_h_parts(
    m: Any, n: Any, h: Any, base: float = 10000.0
) -> tuple[np.ndarray, np.ndarray]:
    r"""Split :func:`diagonal_h_score` into its relative and absolute parts.

    By the product-to-sum formulas,

    .. math::
        \boldsymbol p_m^\top \mathcal H \boldsymbol p_n =
        \underbrace{\sum_i \tfrac12 (h_{2i} + h_{2i+1})
        \cos\big((m-n)\theta_i\big)}_{\text{relative}}
        + \underbrace{\sum_i \tfrac12 (h_{2i} - h_{2i+1})
        \cos\big((m+n)\theta_i\big)}_{\text{absolute}} .

    Parameters
    ----------
    m, n : array_like
        Finite real positions of magnitude <= 2**32; broadcast against each other.
    h : array_like
        The diagonal of :math:`\mathcal H`, a 1-D real array of even length :math:`d`, in the
        (cos, sin) layout of :func:`cos_sin_encoding`.
    base : float
        The base :math:`b > 1`.

    Returns
    -------
    (relative, absolute) : tuple of numpy.ndarray
        Two float64 arrays of the broadcast shape of ``m`` and ``n``; their sum is
        :func:`diagonal_h_score`.
    """
    h = _diag_h(h)
    base = check_base(base)
    am, an = _pair_angles(m, n, h.shape[0], base)
    mean = 0.5 * (h[0::2] + h[1::2])
    half_diff = 0.5 * (h[0::2] - h[1::2])
    relative = (mean * np.cos(am - an)).sum(-1)
    absolute = (half_diff * np.cos(am + an)).sum(-1)
    return relative, absolute


def shift_matrix(k: float, d: int, base: float = 10000.0, layout: str = "sin_cos") -> np.ndarray:
    r"""The linear map that shifts an encoding by :math:`k` positions.

    Returns :math:`D_k` for Vaswani's ``"sin_cos"`` layout and :math:`R_k` for the ``"cos_sin"``
    layout, with :math:`x_{m+k} = D_k\, x_m` (resp. :math:`R_k\, x_m`) for every position
    :math:`m`, where :math:`x_m` is the encoding in that layout; both are block diagonal.
    In Vaswani's ``"sin_cos"`` layout (:func:`sinusoidal`) block :math:`i` of :math:`D_k` is

    .. math::
        \begin{pmatrix}\sin (m+k)\theta_i \\ \cos (m+k)\theta_i\end{pmatrix} =
        \begin{pmatrix}\cos k\theta_i & \sin k\theta_i \\ -\sin k\theta_i & \cos k\theta_i
        \end{pmatrix}
        \begin{pmatrix}\sin m\theta_i \\ \cos m\theta_i\end{pmatrix},

    a rotation by :math:`-k\theta_i`; in the ``"cos_sin"`` layout (:func:`cos_sin_encoding`)
    block :math:`i` of :math:`R_k` is the rotation by :math:`+k\theta_i`,
    :math:`\begin{pmatrix}\cos k\theta_i & -\sin k\theta_i \\ \sin k\theta_i & \cos k\theta_i
    \end{pmatrix}` (:math:`R_k` is RoPE's rotation matrix at position :math:`k`).  The two are
    related by the pair swap :math:`P_\sigma` of :func:`vaswani_permutation`,
    :math:`D_k = P_\sigma R_k P_\sigma = R_{-k}`, so :math:`D_k \ne R_k` unless every
    :math:`\sin k\theta_i = 0`.  Both depend on :math:`k` only, not on :math:`m`.

    Parameters
    ----------
    k : float
        The shift, a finite real number of magnitude at most ``MAX_POSITION`` (2**32).
    d : int
        Dimension of the encoding; an even integer >= 2.
    base : float
        The base :math:`b > 1`.
    layout : {"sin_cos", "cos_sin"}
        ``"sin_cos"`` for :func:`sinusoidal`, ``"cos_sin"`` for :func:`cos_sin_encoding`.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(d, d)``, orthogonal.
    """
    k_arr = check_distance_array(k, "k")
    if k_arr.ndim != 0:
        raise ValueError(
            f"k must be a single finite real number, got an array of shape {k_arr.shape}"
        )
    d = check_dim(d)
    base = check_base(base)
    layout = _check_layout(layout)
    check_elements(d * d, "the shift matrix (d x d)", hint="use a smaller d")
    angle = float(k_arr) * theta(d, base)
    c, s = np.cos(angle), np.sin(angle)
    sign = 1.0 if layout == "sin_cos" else -1.0
    out = np.zeros((d, d), dtype=np.float64)
    idx = np.arange(0, d, 2)
    out[idx, idx] = c
    out[idx + 1, idx + 1] = c
    out[idx, idx + 1] = sign * s
    out[idx + 1, idx] = -sign * s
    return out


def shift_isometry(vectors: Any, atol: float = 1e-9) -> np.ndarray:
    r"""The linear map :math:`\boldsymbol U` with :math:`\boldsymbol p_{m+1} = \boldsymbol U
    \boldsymbol p_m`, recovered from vectors whose inner products depend on :math:`m - n` only.

    ``vectors`` holds :math:`\boldsymbol p_0, \dots, \boldsymbol p_{N-1}` (consecutive integer
    positions) as rows.  Let :math:`\boldsymbol B` (:math:`D \times r`) be an orthonormal
    basis of :math:`V = \operatorname{span}\{\boldsymbol p_m\}` (from the SVD) and
    :math:`\boldsymbol c_m = \boldsymbol B^\top \boldsymbol p_m` the coordinates.  The map
    :math:`\boldsymbol U_V` on :math:`V` is the least-squares solution of
    :math:`\boldsymbol c_{m+1} = \boldsymbol U_V \boldsymbol c_m`, :math:`m = 0, \dots, N-2`,
    and it is extended by the identity on the orthogonal complement:

    .. math::
        \boldsymbol U = \boldsymbol B \boldsymbol U_V \boldsymbol B^\top
        + (\boldsymbol I - \boldsymbol B \boldsymbol B^\top) .

    Nothing here imposes :math:`\boldsymbol U^\top \boldsymbol U = \boldsymbol I`: that the
    result is orthogonal is what chapter 3's theorem predicts for a Toeplitz Gram matrix, and
    what the caller should check.

    Parameters
    ----------
    vectors : array_like
        Real array of shape ``(N, D)``, ``N >= 2``: row ``m`` is :math:`\boldsymbol p_m`.
    atol : float
        Tolerance, relative to the largest :math:`\lvert\langle \boldsymbol p_m,
        \boldsymbol p_n\rangle\rvert`, for the Toeplitz test.  Singular values of the rows
        below :math:`\sqrt{\text{atol}}` times the largest count as zero, so a pair that
        barely turns over the given positions (a slow frequency, few positions) is treated
        as constant; give enough positions for every pair to turn visibly.  A relative
        tolerance, so ``0 < atol < 1``: at ``atol >= 1`` even the largest singular value
        would count as zero and nothing would be left to act on.

    Returns
    -------
    numpy.ndarray
        float64 array of shape ``(D, D)``.

    Raises
    ------
    ValueError
        If the rows are all zero, if their Gram matrix is not Toeplitz
        (:func:`diagonal_spread` above the tolerance), or if :math:`\boldsymbol p_0, \dots,
        \boldsymbol p_{N-2}` span less than :math:`V` (then the data do not determine
        :math:`\boldsymbol U` on :math:`V`: supply more positions).
    """
    arr = check_real_array(vectors, "vectors")
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(
            f"vectors must be a 2-D array with at least 2 rows (positions 0, 1, ...), "
            f"got shape {arr.shape}"
        )
    atol = check_real(atol, "atol", low=0.0, high=1.0, low_open=True, high_open=True)
    check_elements(
        max(arr.shape[0], arr.shape[1]) ** 2,
        "the Gram matrix and the map U (N x N and D x D for vectors of shape (N, D))",
        hint="pass fewer or shorter vectors",
    )
    # Inner products of rows overflow float64 beyond sqrt(max float / D) in magnitude.
    if arr.size and float(np.abs(arr).max()) > 1e150 / np.sqrt(arr.shape[1]):
        raise ValueError(
            "vectors are so large that their inner products overflow float64: rescale "
            "them (the map U does not depend on a common scale)"
        )
    gram = arr @ arr.T
    scale = float(np.abs(gram).max())
    if scale == 0.0:
        raise ValueError("vectors are all zero; there is no span to act on")
    spread = diagonal_spread(gram)
    if spread > atol * scale:
        raise ValueError(
            f"the inner products of the rows of vectors do not depend on m - n only: "
            f"diagonal_spread of their Gram matrix is {spread:.3g} > atol * {scale:.3g} with atol = {atol:.1e} (if that "
            f"spread is round-off, raise atol)"
        )
    _, sv, vt = np.linalg.svd(arr, full_matrices=False)
    rank = int(np.sum(sv > np.sqrt(atol) * sv[0]))
    basis = vt[:rank].T  # D x r, orthonormal columns
    coords = arr @ basis  # row m: c_m
    before, after = coords[:-1], coords[1:]
    sv_before = np.linalg.svd(before, compute_uv=False)
    if sv_before.shape[0] < rank or sv_before[rank - 1] <= np.sqrt(atol) * sv[0]:
        raise ValueError(
            f"p_0, ..., p_(N-2) span fewer than the {rank} dimensions of span(p_m): the shift "
            f"is not determined on the whole span; supply more positions (or, if the "
            f"smallest singular values are round-off, raise atol = {atol:.1e})"
        )
    u_v = np.linalg.lstsq(before, after, rcond=None)[0].T  # after = before @ U_V^T
    d_full = arr.shape[1]
    return basis @ u_v @ basis.T + (np.eye(d_full) - basis @ basis.T)


def orthogonal_normal_form(u: Any, atol: float = 1e-9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The real normal form of an orthogonal matrix: rotations of planes, and :math:`\pm 1`.

    Returns :math:`\boldsymbol O` orthogonal (the change of coordinates), angles
    :math:`\omega_1 \ge \dots \ge \omega_k` in :math:`(0, \pi)` and signs
    :math:`s_1, \dots, s_l \in \{+1, -1\}` (the :math:`+1` first) with

    .. math::
        \boldsymbol O^\top \boldsymbol U \boldsymbol O = \operatorname{diag}\big(
        \boldsymbol\Omega(\omega_1), \dots, \boldsymbol\Omega(\omega_k), s_1, \dots, s_l\big),
        \qquad
        \boldsymbol\Omega(\alpha) = \begin{pmatrix}\cos\alpha & -\sin\alpha \\
        \sin\alpha & \cos\alpha\end{pmatrix} .

    Columns :math:`2j, 2j+1` of :math:`\boldsymbol O` span the plane that turns by
    :math:`\omega_{j+1}`; the last :math:`l` columns are fixed (:math:`+1`) or flipped
    (:math:`-1`).  Computed from the real Schur form (``scipy.linalg.schur``), which is block
    diagonal for a normal matrix; a block that turns clockwise is made counter-clockwise by
    flipping the sign of its second column.

    Parameters
    ----------
    u : array_like
        A real square matrix with :math:`\boldsymbol U^\top \boldsymbol U = \boldsymbol I`.
    atol : float
        Absolute tolerance for orthogonality and for the block structure, a finite number > 0.

    Returns
    -------
    (O, angles, signs) : tuple of numpy.ndarray
        ``O`` float64 of shape ``(D, D)``; ``angles`` float64 of shape ``(k,)``, in
        :math:`(0, \pi)`, largest first; ``signs`` float64 of shape ``(D - 2k,)``.

    Raises
    ------
    ValueError
        If ``u`` is not square, or not orthogonal within ``atol``.
    """
    from scipy.linalg import schur

    arr = check_real_array(u, "u")
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 1:
        raise ValueError(f"u must be a square 2-D array, got shape {arr.shape}")
    atol = check_real(atol, "atol", low=0.0, low_open=True, high_open=True)
    dim = arr.shape[0]
    deviation = float(np.abs(arr.T @ arr - np.eye(dim)).max())
    if deviation > atol:
        raise ValueError(f"u must be orthogonal: max |U^T U - I| = {deviation:.3g} > {atol:.1e}")
    t, z = schur(arr, output="real")
    planes: list[tuple[float, np.ndarray]] = []
    fixed: list[tuple[float, np.ndarray]] = []
    j = 0
    while j < dim:
        if j + 1 < dim and abs(t[j + 1, j]) > atol:  # a 2 x 2 block: a rotating plane
            cols = z[:, j : j + 2].copy()
            angle = float(np.arctan2(t[j + 1, j], t[j, j]))
            if angle < 0:  # clockwise: flip the second column
                cols[:, 1] *= -1.0
                angle = -angle
            planes.append((angle, cols))
            j += 2
        else:
            fixed.append((float(np.sign(t[j, j])), z[:, j : j + 1]))
            j += 1
    planes.sort(key=lambda item: -item[0])
    fixed.sort(key=lambda item: -item[0])
    columns = [c for _, c in planes] + [c for _, c in fixed]
    q = np.concatenate(columns, axis=1)
    angles = np.array([a for a, _ in planes], dtype=np.float64)
    signs = np.array([s for s, _ in fixed], dtype=np.float64)
    return q, angles, signs


def symbolic_encoding(
    position: sp.Expr | str, d: int, layout: str = "sin_cos", symbol: str = "theta"
) -> sp.Matrix:
    r"""The encoding of one position as a sympy column vector with symbolic frequencies.

    ``"sin_cos"`` gives :math:`(\sin m\theta_0, \cos m\theta_0, \dots)` as in :func:`sinusoidal`;
    ``"cos_sin"`` gives :math:`(\cos m\theta_0, \sin m\theta_0, \dots)` as in
    :func:`cos_sin_encoding`.  The frequencies are the real symbols ``theta_0, ...,
    theta_{d/2-1}`` (pass ``symbol`` to rename them), so that the proofs of the chapter hold
    for every choice of frequencies, not only :math:`\theta_i = b^{-2i/d}`.

    Parameters
    ----------
    position : sympy expression or str
        The position, e.g. ``sympy.Symbol("m", real=True)`` or ``"m"`` (made a real symbol).
    d : int
        Dimension of the encoding; an even integer >= 2.
    layout : {"sin_cos", "cos_sin"}
        Order of the two entries of each pair.
    symbol : str
        Stem of the frequency symbols, a Python identifier such as ``"theta"``.

    Returns
    -------
    sympy.Matrix
        A ``d x 1`` matrix.
    """
    d = check_dim(d)
    layout = _check_layout(layout)
    from .symbolic import _symbolic_inputs

    position, thetas = _symbolic_inputs(position, d, symbol, "position")
    entries = []
    for th in thetas:
        pair = [sp.sin(position * th), sp.cos(position * th)]
        entries.extend(pair if layout == "sin_cos" else pair[::-1])
    return sp.Matrix(entries)
