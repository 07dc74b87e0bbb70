"""Tests of rope_lib.sinusoidal (chapter 3).

Expected values come from independent routes: explicit loops over ``math.sin``/``math.cos``
with ``base ** (-2 i / d)`` written out, mpmath at 40 digits, the closed form
``sum_i cos((m - n) theta_i)``, sympy, and hand-written 2x2 rotation blocks.
"""

from __future__ import annotations

import cmath
import math

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st

from rope_lib import (
    complex_encoding,
    cos_sin_encoding,
    diagonal_h_parts,
    diagonal_h_score,
    gram_matrix,
    orthogonal_normal_form,
    shift_isometry,
    shift_matrix,
    sinusoidal,
    symbolic_encoding,
    vaswani_permutation,
)

# --------------------------------------------------------------------------- references


def ref_theta(d: int, base: float) -> list[float]:
    """theta_i = base ** (-2 i / d), written with the power, not exp/log."""
    return [1.0 / base ** (2 * i / d) for i in range(d // 2)]


def ref_sinusoidal(positions, d: int, base: float) -> np.ndarray:
    """Vaswani et al. eq. (3.5), one scalar at a time."""
    out = np.zeros((len(positions), d))
    for a, pos in enumerate(positions):
        for i in range(d // 2):
            out[a, 2 * i] = math.sin(pos / base ** (2 * i / d))
            out[a, 2 * i + 1] = math.cos(pos / base ** (2 * i / d))
    return out


def ref_g(x: float, d: int, base: float) -> float:
    """The closed form <p_m, p_n> = sum_i cos((m - n) theta_i), with x = m - n."""
    return math.fsum(math.cos(x * t) for t in ref_theta(d, base))


def block(angle: float) -> np.ndarray:
    """Counter-clockwise rotation by ``angle``."""
    return np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])


even_dims = st.integers(min_value=1, max_value=64).map(lambda h: 2 * h)
bases = st.floats(min_value=1.5, max_value=1e6)
int_positions = st.integers(min_value=-5000, max_value=5000)
real_positions = st.floats(min_value=-5000.0, max_value=5000.0, allow_nan=False)


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("d", [2, 4, 10, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0, 2.0])
def test_sinusoidal_matches_explicit_loops(d, base):
    positions = [0, 1, 2, 3, 7, 100, 511, 4095, -3, 2.5, 1234.75]
    got = sinusoidal(positions, d, base)
    assert got.dtype == np.float64
    assert got.shape == (len(positions), d)
    np.testing.assert_allclose(got, ref_sinusoidal(positions, d, base), rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [8, 256])
def test_sinusoidal_matches_mpmath(d):
    """40-digit reference; float64 angles carry ~1e-16 * position of error, so 1e-12 holds
    for positions up to a few thousand."""
    mpmath.mp.dps = 40
    positions = [0, 1, 17, 255, 1000, 2047, 4096]
    got = sinusoidal(positions, d)
    for a, pos in enumerate(positions):
        for i in range(d // 2):
            angle = pos * mpmath.power(10000, -mpmath.mpf(2 * i) / d)
            assert abs(got[a, 2 * i] - float(mpmath.sin(angle))) < 1e-12
            assert abs(got[a, 2 * i + 1] - float(mpmath.cos(angle))) < 1e-12


def test_pair_zero_turns_fastest():
    # theta_0 = 1: column 0 is sin(m) itself; the last pair is the slowest.
    pos = np.arange(50)
    enc = sinusoidal(pos, 16)
    np.testing.assert_array_equal(enc[:, 0], np.sin(pos))
    steps = np.abs(np.diff(enc, axis=0)).mean(axis=0)
    assert np.all(np.diff(steps[0::2]) < 0)  # sin columns move less and less


def test_complex_and_cos_sin_forms():
    positions = [0, 1, 5, 99.5, -7]
    d, base = 12, 1000.0
    z = complex_encoding(positions, d, base)
    real = cos_sin_encoding(positions, d, base)
    assert z.dtype == np.complex128 and z.shape == (5, 6)
    assert real.shape == (5, 12)
    for a, pos in enumerate(positions):
        for i, t in enumerate(ref_theta(d, base)):
            expected = cmath.exp(1j * pos * t)
            assert abs(z[a, i] - expected) < 1e-13
            assert abs(real[a, 2 * i] - expected.real) < 1e-13
            assert abs(real[a, 2 * i + 1] - expected.imag) < 1e-13
    np.testing.assert_allclose(np.abs(z), 1.0, atol=1e-15)


def test_vaswani_permutation():
    np.testing.assert_array_equal(vaswani_permutation(2), [1, 0])
    np.testing.assert_array_equal(vaswani_permutation(6), [1, 0, 3, 2, 5, 4])
    for d in (2, 8, 64):
        perm = vaswani_permutation(d)
        assert perm.dtype == np.int64
        assert sorted(perm.tolist()) == list(range(d))  # a permutation
        np.testing.assert_array_equal(perm[perm], np.arange(d))  # its own inverse
        pos = np.arange(-3, 40)
        np.testing.assert_array_equal(sinusoidal(pos, d), cos_sin_encoding(pos, d)[:, perm])
        # orthogonal: the Gram matrices of the two layouts coincide
        a, b = sinusoidal(pos, d), cos_sin_encoding(pos, d)
        np.testing.assert_allclose(a @ a.T, b @ b.T, atol=1e-12)


def test_vaswani_pair_is_i_times_conjugate():
    # the sign convention: sin(m t) + i cos(m t) = i * conj(e^{i m t})
    pos, d = np.arange(30), 8
    vas = sinusoidal(pos, d)
    as_complex = vas[:, 0::2] + 1j * vas[:, 1::2]
    np.testing.assert_allclose(as_complex, 1j * np.conj(complex_encoding(pos, d)), atol=1e-15)


# --------------------------------------------------------------------------- Gram matrix


def test_gram_matrix_matches_closed_form():
    pos = np.arange(0, 64, 3)
    d, base = 32, 10000.0
    gram = gram_matrix(pos, d, base)
    expected = np.array([[ref_g(m - n, d, base) for n in pos] for m in pos])
    np.testing.assert_allclose(gram, expected, atol=1e-12)
    rect = gram_matrix([0, 5], d, base, n_positions=[1, 2, 3])
    assert rect.shape == (2, 3)
    assert abs(rect[1, 2] - ref_g(2, d, base)) < 1e-12


@given(m=int_positions, n=int_positions, d=even_dims, base=bases)
def test_inner_product_depends_on_m_minus_n_only(m, n, d, base):
    got = gram_matrix([m], d, base, n_positions=[n])[0, 0]
    tol = 1e-15 * d * (10 + abs(m) + abs(n))
    assert abs(got - ref_g(m - n, d, base)) <= tol
    shifted = gram_matrix([m + 777], d, base, n_positions=[n + 777])[0, 0]
    assert abs(shifted - got) <= 2 * tol


@given(m=real_positions, n=real_positions, d=even_dims)
def test_inner_product_identity_for_real_positions(m, n, d):
    got = gram_matrix([m], d, n_positions=[n])[0, 0]
    assert abs(got - ref_g(m - n, d, 10000.0)) <= 1e-15 * d * (10 + abs(m) + abs(n))


# --------------------------------------------------------------------------- shift map


@given(m=real_positions, k=real_positions, d=even_dims, base=bases)
def test_shift_matrix_moves_the_encoding(m, k, d, base):
    tol = 1e-15 * (10 + 2 * abs(m) + 2 * abs(k))
    m_k = shift_matrix(k, d, base)
    np.testing.assert_allclose(
        m_k @ sinusoidal([m], d, base)[0], sinusoidal([m + k], d, base)[0], atol=tol
    )
    m_k_cs = shift_matrix(k, d, base, layout="cos_sin")
    np.testing.assert_allclose(
        m_k_cs @ cos_sin_encoding([m], d, base)[0], cos_sin_encoding([m + k], d, base)[0], atol=tol
    )


def test_shift_matrix_blocks_and_group_law():
    d, base, k = 6, 100.0, 3.0
    thetas = ref_theta(d, base)
    m_k = shift_matrix(k, d, base)
    m_cs = shift_matrix(k, d, base, layout="cos_sin")
    for i, t in enumerate(thetas):
        sl = slice(2 * i, 2 * i + 2)
        np.testing.assert_allclose(m_k[sl, sl], block(-k * t), atol=1e-15)  # (sin, cos): -k theta
        np.testing.assert_allclose(m_cs[sl, sl], block(k * t), atol=1e-15)  # (cos, sin): +k theta
    off = m_k.copy()
    for i in range(d // 2):
        off[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = 0
    assert not off.any()
    np.testing.assert_allclose(m_k @ m_k.T, np.eye(d), atol=1e-15)
    np.testing.assert_allclose(
        shift_matrix(2, d, base) @ shift_matrix(5, d, base), shift_matrix(7, d, base), atol=1e-14
    )
    perm = vaswani_permutation(d)
    np.testing.assert_allclose(m_k, m_cs[np.ix_(perm, perm)], atol=1e-15)


@given(k=real_positions, d=even_dims, base=bases)
def test_shift_matrix_layouts_related_by_pair_swap(k, d, base):
    # D_k (Vaswani layout) = P_sigma R_k P_sigma, P_sigma built here by hand (swap within pairs)
    p_sigma = np.kron(np.eye(d // 2), np.array([[0.0, 1.0], [1.0, 0.0]]))
    d_k = shift_matrix(k, d, base)
    r_k = shift_matrix(k, d, base, layout="cos_sin")
    np.testing.assert_allclose(d_k, p_sigma @ r_k @ p_sigma, atol=1e-15)
    # R_k is block diag(Omega(k theta_i)), counter-clockwise
    for i, t in enumerate(ref_theta(d, base)):
        tol = 1e-14 * (1 + abs(k))
        np.testing.assert_allclose(
            r_k[2 * i : 2 * i + 2, 2 * i : 2 * i + 2], block(k * t), atol=tol
        )


def test_shift_matrix_layouts_differ():
    # D_1 != R_1: the proposition's shift and Vaswani's shift are different matrices; they
    # differ by 2 sin(theta_i) off the diagonal of block i, largest for theta_0 = 1
    gap = np.abs(shift_matrix(1, 4) - shift_matrix(1, 4, layout="cos_sin")).max()
    assert gap == pytest.approx(2 * math.sin(1.0), abs=1e-15)


@given(k=real_positions, d=even_dims, base=bases)
def test_vaswani_shift_is_the_backward_rotation(k, d, base):
    # D_k = R_(-k): block i of Vaswani's shift is the counter-clockwise rotation by -k theta_i
    d_k = shift_matrix(k, d, base)
    for i, t in enumerate(ref_theta(d, base)):
        tol = 1e-14 * (1 + abs(k))
        np.testing.assert_allclose(
            d_k[2 * i : 2 * i + 2, 2 * i : 2 * i + 2], block(-k * t), atol=tol
        )


def procrustes_shift(vectors: np.ndarray) -> tuple[np.ndarray, float]:
    """The orthogonal U that best fits p_(m+1) = U p_m (orthogonal Procrustes, by SVD), and
    the largest residual of the fit."""
    before, after = vectors[:-1], vectors[1:]
    left, _, right_t = np.linalg.svd(before.T @ after)
    u = (left @ right_t).T
    return u, float(np.abs(before @ u.T - after).max())


def factor_gram(gram: np.ndarray) -> np.ndarray:
    """Rows p_m with p_m . p_n = gram[m, n], for a positive semi-definite gram (eigenvalues
    below 1e-12 of the largest are round-off and count as zero)."""
    values, vectors = np.linalg.eigh(gram)
    values[values < 1e-12 * values.max()] = 0.0
    return vectors * np.sqrt(values)


@pytest.mark.parametrize(
    "g",
    [
        lambda x: 0.6 ** abs(x),  # full rank on the window
        lambda x: 1.0 + math.cos(0.7 * x) + 0.25 * (-1) ** x,  # rank 4 on 6 positions
    ],
)
def test_a_solution_on_a_window_is_an_orthogonal_shift(g):
    # Chapter 3: if <p_m, p_n> = g(m - n) holds for m, n = 0..N-1 only, an orthogonal U with
    # p_(m+1) = U p_m for m = 0..N-2 still exists (the isometry between two spans extends).
    n_pos = 6
    gram = np.array([[g(m - n) for n in range(n_pos)] for m in range(n_pos)])
    u, residual = procrustes_shift(factor_gram(gram))
    np.testing.assert_allclose(u.T @ u, np.eye(n_pos), atol=1e-12)
    assert residual < 1e-10


def test_a_window_without_a_toeplitz_gram_has_no_orthogonal_shift():
    # the control: the same fit fails when the inner products are not a function of m - n
    gram = np.array([[1.0 + m * n for n in range(6)] for m in range(6)]) + np.eye(6)
    _, residual = procrustes_shift(factor_gram(gram))
    assert residual > 0.1


def test_shift_isometry_refuses_a_window_where_the_shift_is_not_unique():
    # g(x) = 0.6^|x| on 6 positions: p_0..p_4 span 5 of the 6 dimensions of span(p_m), so an
    # orthogonal shift exists but is not determined by the data
    gram = np.array([[0.6 ** abs(m - n) for n in range(6)] for m in range(6)])
    with pytest.raises(ValueError, match="supply more positions"):
        shift_isometry(factor_gram(gram))


# --------------------------------------------------------------------------- every solution


def random_orthogonal(dim: int, seed: int) -> np.ndarray:
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    return q * np.sign(np.diag(r))


def block_diagonal(angles, signs) -> np.ndarray:
    """diag(Omega(a_1), ..., Omega(a_k), s_1, ..., s_l), built by hand."""
    dim = 2 * len(angles) + len(signs)
    out = np.zeros((dim, dim))
    for j, a in enumerate(angles):
        out[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = block(a)
    for j, s in enumerate(signs):
        out[2 * len(angles) + j, 2 * len(angles) + j] = s
    return out


def test_shift_isometry_of_the_sinusoidal_encoding():
    d, base = 16, 10000.0
    pos = np.arange(2048)  # the slowest pair, theta = 10^-3.5, turns 0.65 rad: visible
    enc = cos_sin_encoding(pos, d, base)
    u = shift_isometry(enc)
    expected = block_diagonal(ref_theta(d, base), [])  # (cos, sin): rotation by +theta_i
    np.testing.assert_allclose(u, expected, atol=1e-12)
    np.testing.assert_allclose(u.T @ u, np.eye(d), atol=1e-12)
    q, angles, signs = orthogonal_normal_form(u)
    np.testing.assert_allclose(angles, ref_theta(d, base), rtol=0, atol=1e-12)
    assert signs.size == 0


def test_reflection_solves_the_real_but_not_the_complex_condition():
    a, b = 0.8, 0.6
    pos = range(7)
    p = np.array([[a, (-1) ** m * b] for m in pos])
    gram = p @ p.T
    closed = np.array([[a * a + (-1) ** (m - n) * b * b for n in pos] for m in pos])
    np.testing.assert_allclose(gram, closed, atol=1e-15)
    z = p[:, 0] + 1j * p[:, 1]
    prod = z[:, None] * np.conj(z)[None, :]
    # Im[z_m conj(z_n)] = a b ((-1)^m - (-1)^n): -2ab and +2ab on the diagonal m - n = 1
    assert prod[1, 0].imag == pytest.approx(-2 * a * b)
    assert prod[2, 1].imag == pytest.approx(2 * a * b)
    u = shift_isometry(p)
    np.testing.assert_allclose(u, np.diag([1.0, -1.0]), atol=1e-12)
    q, angles, signs = orthogonal_normal_form(u)
    assert angles.size == 0
    np.testing.assert_array_equal(signs, [1.0, -1.0])
    np.testing.assert_allclose(np.abs(q), np.eye(2), atol=1e-12)


def test_rotated_basis_keeps_the_gram_matrix_but_not_the_pair_lengths():
    d, base = 8, 100.0
    q0 = random_orthogonal(d, seed=3)
    enc = sinusoidal(np.arange(300), d, base)
    rotated = enc @ q0.T  # row m: Q0 p_m
    np.testing.assert_allclose(rotated @ rotated.T, enc @ enc.T, atol=1e-12)
    pair_length = np.hypot(rotated[:, 0], rotated[:, 1])
    assert np.ptp(pair_length) > 0.1  # lengths of pair 0 vary; in enc they are all 1
    np.testing.assert_allclose(np.hypot(enc[:, 0], enc[:, 1]), 1.0, atol=1e-15)
    u = shift_isometry(rotated)
    # Vaswani's (sin, cos) layout turns by -theta_i: block(-theta_i)
    expected = q0 @ block_diagonal([-t for t in ref_theta(d, base)], []) @ q0.T
    np.testing.assert_allclose(u, expected, atol=1e-11)
    _, angles, signs = orthogonal_normal_form(u)
    np.testing.assert_allclose(angles, ref_theta(d, base), rtol=1e-10)
    assert signs.size == 0


def test_generic_solution_is_pairs_constants_and_alternations():
    angles0, signs0 = [2.0, 0.7], [1.0, -1.0]
    q0 = random_orthogonal(6, seed=5)
    u0 = q0 @ block_diagonal(angles0, signs0) @ q0.T
    p0 = np.random.default_rng(6).normal(size=6)
    pos = np.arange(40)
    p = np.array([np.linalg.matrix_power(u0, m) @ p0 for m in pos])
    u = shift_isometry(p)
    np.testing.assert_allclose(u, u0, atol=1e-10)
    q, angles, signs = orthogonal_normal_form(u)
    np.testing.assert_allclose(angles, angles0, atol=1e-10)
    np.testing.assert_array_equal(signs, signs0)
    y = p @ q  # coordinates in the normal-form basis
    for j, a in enumerate(angles0):
        r = math.hypot(y[0, 2 * j], y[0, 2 * j + 1])
        phase = math.atan2(y[0, 2 * j + 1], y[0, 2 * j])
        for m in pos:
            assert abs(y[m, 2 * j] - r * math.cos(phase + m * a)) < 1e-9
            assert abs(y[m, 2 * j + 1] - r * math.sin(phase + m * a)) < 1e-9
    np.testing.assert_allclose(y[:, 4], y[0, 4], atol=1e-9)  # eigenvalue +1: constant
    np.testing.assert_allclose(y[:, 5], (-1.0) ** pos * y[0, 5], atol=1e-9)  # -1: alternates


@given(
    angles=st.lists(st.floats(0.05, math.pi - 0.05), min_size=0, max_size=4),
    n_plus=st.integers(0, 2),
    n_minus=st.integers(0, 2),
    seed=st.integers(0, 10_000),
)
def test_orthogonal_normal_form_recovers_blocks(angles, n_plus, n_minus, seed):
    angles = sorted(angles, reverse=True)
    if any(a - b < 1e-3 for a, b in zip(angles, angles[1:], strict=False)):
        angles = angles[:1]  # keep the angles distinct so that the order is defined
    signs = [1.0] * n_plus + [-1.0] * n_minus
    dim = 2 * len(angles) + len(signs)
    if dim == 0:
        return
    q0 = random_orthogonal(dim, seed)
    u = q0 @ block_diagonal(angles, signs) @ q0.T
    q, got_angles, got_signs = orthogonal_normal_form(u)
    np.testing.assert_allclose(got_angles, angles, atol=1e-9)
    np.testing.assert_array_equal(got_signs, signs)
    np.testing.assert_allclose(q.T @ q, np.eye(dim), atol=1e-12)
    np.testing.assert_allclose(q.T @ u @ q, block_diagonal(angles, signs), atol=1e-9)


def test_shift_isometry_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="do not depend on m - n only"):
        shift_isometry([[m, 1.0] for m in range(5)])  # <p_m, p_n> = m n + 1
    with pytest.raises(ValueError, match="supply more positions"):
        shift_isometry([[1.0, 0.0], [math.cos(1.0), math.sin(1.0)]])  # p_0 alone spans 1-D
    with pytest.raises(ValueError, match="at least 2 rows"):
        shift_isometry([[1.0, 0.0]])
    with pytest.raises(ValueError, match="all zero"):
        shift_isometry(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"atol must be a finite real number in \(0.0, 1.0\)"):
        shift_isometry(np.eye(2), atol=0.0)
    with pytest.raises(ValueError, match="u must be orthogonal"):
        orthogonal_normal_form([[1.0, 1.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="u must be a square"):
        orthogonal_normal_form(np.ones((2, 3)))
    with pytest.raises(TypeError, match="u must be real"):
        orthogonal_normal_form([[1j]])


# --------------------------------------------------------------------------- diagonal H


@given(
    m=int_positions,
    n=int_positions,
    h=st.lists(st.floats(-3, 3), min_size=1, max_size=16).map(lambda v: v + v[::-1]),
    base=bases,
)
def test_diagonal_h_split(m, n, h, base):
    d = len(h)
    p_m = cos_sin_encoding([m], d, base)[0]
    p_n = cos_sin_encoding([n], d, base)[0]
    direct = float(p_m @ np.diag(h) @ p_n)
    score = diagonal_h_score(m, n, h, base)
    rel, absolute = diagonal_h_parts(m, n, h, base)
    tol = 1e-14 * d * (10 + abs(m) + abs(n))
    assert abs(score - direct) <= tol
    assert abs(rel + absolute - direct) <= tol
    thetas = ref_theta(d, base)
    rel_ref = math.fsum(
        0.5 * (h[2 * i] + h[2 * i + 1]) * math.cos((m - n) * t) for i, t in enumerate(thetas)
    )
    abs_ref = math.fsum(
        0.5 * (h[2 * i] - h[2 * i + 1]) * math.cos((m + n) * t) for i, t in enumerate(thetas)
    )
    assert abs(rel - rel_ref) <= tol
    assert abs(absolute - abs_ref) <= tol


def test_diagonal_h_equal_pairs_kill_absolute_part():
    h = np.repeat([2.0, 0.5, -1.0, 3.0], 2)  # h_{2i} = h_{2i+1}
    m = np.arange(20)[:, None]
    n = np.arange(20)[None, :]
    rel, absolute = diagonal_h_parts(m, n, h)
    assert rel.shape == absolute.shape == (20, 20)
    np.testing.assert_allclose(absolute, 0.0, atol=0)
    # relative part: constant along diagonals
    for x in range(-19, 20):
        diag = np.diagonal(rel, offset=-x)
        np.testing.assert_allclose(diag, diag[0], atol=1e-13)


def test_diagonal_h_broadcasting():
    """A column of m against a row of n gives the table of scores, each entry equal to the
    formula written out with math.cos/math.sin (and the parts add up to it)."""
    h = [1.0, 2.0, 3.0, 4.0]
    ms, ns = [0, 1, 2, -7], [1, -3, 250]
    t = ref_theta(4, 100.0)
    expected = np.array(
        [
            [
                math.fsum(
                    h[2 * i] * math.cos(m * t[i]) * math.cos(n * t[i])
                    + h[2 * i + 1] * math.sin(m * t[i]) * math.sin(n * t[i])
                    for i in range(2)
                )
                for n in ns
            ]
            for m in ms
        ]
    )
    out = diagonal_h_score(np.array(ms)[:, None], np.array(ns)[None, :], h, base=100.0)
    assert out.shape == (4, 3)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-13)
    rel, absolute = diagonal_h_parts(np.array(ms)[:, None], np.array(ns)[None, :], h, base=100.0)
    assert rel.shape == absolute.shape == (4, 3)
    np.testing.assert_allclose(rel + absolute, expected, rtol=0, atol=1e-13)


# --------------------------------------------------------------------------- sympy form


def test_symbolic_encoding_matches_numeric():
    m = sp.Symbol("m", real=True)
    d = 6
    for layout, numeric in (("sin_cos", sinusoidal), ("cos_sin", cos_sin_encoding)):
        expr = symbolic_encoding(m, d, layout=layout)
        assert expr.shape == (d, 1)
        thetas = sp.symbols(f"theta_0:{d // 2}", real=True)
        freqs = ref_theta(d, 10000.0)
        subs = {m: 13, **{t: sp.Float(v, 30) for t, v in zip(thetas, freqs, strict=True)}}
        values = np.array([float(e.evalf(30, subs=subs)) for e in expr])
        np.testing.assert_allclose(values, numeric([13], d)[0], atol=1e-13)


def test_symbolic_gram_identity():
    m, n = sp.symbols("m n", real=True)
    for d in (2, 4, 6):
        p_m = symbolic_encoding(m, d)
        p_n = symbolic_encoding(n, d)
        thetas = sp.symbols(f"theta_0:{d // 2}", real=True)
        target = sum(sp.cos((m - n) * t) for t in thetas)
        assert sp.expand(sp.expand_trig(sp.expand((p_m.T * p_n)[0] - target))) == 0
    assert symbolic_encoding("k", 2)[0] == sp.sin(
        sp.Symbol("k", real=True) * sp.Symbol("theta_0", real=True)
    )


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("func", [sinusoidal, complex_encoding, cos_sin_encoding])
def test_bad_dimension_and_base(func):
    with pytest.raises(ValueError, match="d must be an even integer"):
        func([0, 1], 3)
    with pytest.raises(ValueError, match="d must be an even integer"):
        func([0, 1], 0)
    with pytest.raises(ValueError, match="d must be an even integer"):
        func([0, 1], -4)
    with pytest.raises(TypeError, match="d must be an even integer"):
        func([0, 1], 4.0)
    with pytest.raises(TypeError, match="d must be an even integer"):
        func([0, 1], True)
    for bad in (1.0, 0.5, 0, -10):
        with pytest.raises(ValueError, match="base must be a finite real number > 1"):
            func([0, 1], 4, bad)
    for bad in (math.inf, math.nan):
        with pytest.raises(ValueError, match="base must be a finite real number > 1"):
            func([0, 1], 4, bad)
    with pytest.raises(TypeError, match="base must be a real number"):
        func([0, 1], 4, "10000")


@pytest.mark.parametrize("func", [sinusoidal, complex_encoding, cos_sin_encoding])
def test_bad_positions(func):
    for bad in ([0, math.nan], [math.inf], [1.0, -math.inf]):
        with pytest.raises(ValueError, match="positions must be finite"):
            func(bad, 4)
    with pytest.raises(ValueError, match="positions must be a 1-D sequence"):
        func(3, 4)
    with pytest.raises(ValueError, match="positions must be a 1-D sequence"):
        func([[0, 1], [2, 3]], 4)
    with pytest.raises(TypeError, match="positions must be real numbers"):
        func(["a", "b"], 4)
    with pytest.raises(TypeError, match="positions must be real numbers"):
        func([1 + 2j], 4)
    with pytest.raises(TypeError, match="positions must be real numbers"):
        func([True, False], 4)


def test_bad_inputs_of_the_other_functions():
    with pytest.raises(ValueError, match="d must be an even integer"):
        vaswani_permutation(5)
    with pytest.raises(ValueError, match="m_positions must be a 1-D"):
        gram_matrix(2, 4)
    with pytest.raises(ValueError, match="n_positions must be finite"):
        gram_matrix([0, 1], 4, n_positions=[math.nan])
    with pytest.raises(ValueError, match="h must be a 1-D array of even length"):
        diagonal_h_score(0, 1, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="h must be a 1-D array of even length"):
        diagonal_h_parts(0, 1, [[1.0, 2.0]])
    with pytest.raises(ValueError, match="h must be finite"):
        diagonal_h_parts(0, 1, [1.0, math.nan])
    with pytest.raises(ValueError, match="m must be finite"):
        diagonal_h_score(math.inf, 1, [1.0, 1.0])
    with pytest.raises(ValueError, match="m and n must broadcast"):
        diagonal_h_score([0, 1, 2], [0, 1], [1.0, 1.0])
    with pytest.raises(ValueError, match="base must be a finite real number > 1"):
        diagonal_h_parts(0, 1, [1.0, 1.0], base=1.0)
    with pytest.raises(ValueError, match="k must be a single finite real number"):
        shift_matrix([1, 2], 4)
    with pytest.raises(ValueError, match="k must be finite"):
        shift_matrix(math.nan, 4)
    with pytest.raises(ValueError, match="layout must be one of"):
        shift_matrix(1, 4, layout="interleaved")
    with pytest.raises(ValueError, match="layout must be one of"):
        symbolic_encoding("m", 4, layout="half")
    with pytest.raises(TypeError, match="position must be a sympy expression"):
        symbolic_encoding(3, 4)
    with pytest.raises(ValueError, match="d must be an even integer"):
        symbolic_encoding("m", 7)


# --------------------------------------------------------------------------- figures


# --------------------------------------------------------------------------- limits and forms

LIMIT = 2**32  # rope_lib._validate.MAX_POSITION


@pytest.mark.parametrize("func", [sinusoidal, complex_encoding, cos_sin_encoding])
def test_positions_up_to_the_limit_are_accurate_beyond_it_refused(func):
    # at |m| = 2**32 the float64 angle is within |m| 2**-53 ~ 5e-7 rad of the exact one
    got = cos_sin_encoding([LIMIT, -LIMIT], 8)
    for row, m in zip(got, (LIMIT, -LIMIT), strict=True):
        for i in range(4):
            angle = mpmath.mpf(m) * mpmath.power(10000, -mpmath.mpf(2 * i) / 8)
            assert row[2 * i] == pytest.approx(float(mpmath.cos(angle)), abs=2e-6)
            assert row[2 * i + 1] == pytest.approx(float(mpmath.sin(angle)), abs=2e-6)
    for bad in (
        [0, LIMIT + 1],
        [0, 2**60 + 1],  # a Python int that float64 would round
        [0, 2**70],  # a Python int beyond int64
        [0.0, 1e300],
        np.array([0, 2**64 - 1], dtype=np.uint64),  # not read as -1
        np.array([-(2**40)], dtype=np.int64),
    ):
        with pytest.raises(
            ValueError,
            match=r"positions must be finite real numbers of magnitude <= 4294967296 .*2\*\*32",
        ):
            func(bad, 8)


@pytest.mark.parametrize("func", [sinusoidal, complex_encoding, cos_sin_encoding])
def test_unusual_forms_of_positions_give_the_same_encoding(func):
    import torch

    expected = func([0, 3, 7], 8)
    for form in (
        np.array([0, 3, 7], dtype=np.uint16),
        np.array([0, 3, 7], dtype=np.uint64),
        np.array([0.0, 3.0, 7.0]),
        (0, 3, 7),
        torch.tensor([0, 3, 7]),
        torch.tensor([0.0, 3.0, 7.0], dtype=torch.float64, requires_grad=True),
    ):
        np.testing.assert_array_equal(func(form, 8), expected)


def test_fractional_positions_are_encoded_by_the_formula():
    np.testing.assert_allclose(
        sinusoidal([2.5, -0.75], 6, 50.0), ref_sinusoidal([2.5, -0.75], 6, 50.0), atol=1e-15
    )


def test_results_beyond_max_elements_are_refused_before_allocating():
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        sinusoidal(np.arange(1 << 12), 1 << 16)  # 2**28 elements
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        complex_encoding(np.arange(1 << 13), 1 << 16)
    with pytest.raises(ValueError, match=r"Gram matrix .*MAX_ELEMENTS"):
        gram_matrix(np.arange(20_000), 2)  # 4e8 entries
    with pytest.raises(ValueError, match=r"shift matrix \(d x d\).*MAX_ELEMENTS"):
        shift_matrix(1, 1 << 16)
    with pytest.raises(ValueError, match=r"m and n x len\(h\) / 2.*MAX_ELEMENTS"):
        diagonal_h_score(np.arange(1 << 20)[:, None], np.arange(1 << 10), np.ones(4))
    with pytest.raises(ValueError, match=r"Gram matrix .*vectors.*MAX_ELEMENTS"):
        shift_isometry(np.zeros((20_000, 2)))
    with pytest.raises(ValueError, match="h must have at most 65536 entries"):
        diagonal_h_parts(0, 1, np.ones(1 << 17))


def test_real_positions_and_shifts_of_diagonal_h_and_shift_matrix():
    # fractional positions and shifts are part of the contract: the formula holds for real m
    h = np.array([1.0, 3.0, -2.0, 0.5])
    m, n = 2.5, -1.25
    t = ref_theta(4, 100.0)
    expected = sum(
        h[2 * i] * math.cos(m * t[i]) * math.cos(n * t[i])
        + h[2 * i + 1] * math.sin(m * t[i]) * math.sin(n * t[i])
        for i in range(2)
    )
    assert diagonal_h_score(m, n, h, base=100.0) == pytest.approx(expected, abs=1e-14)
    rel, absolute = diagonal_h_parts(m, n, h, base=100.0)
    assert rel + absolute == pytest.approx(expected, abs=1e-14)
    shifted = shift_matrix(2.5, 4, base=100.0) @ sinusoidal([1.0], 4, 100.0)[0]
    np.testing.assert_allclose(shifted, ref_sinusoidal([3.5], 4, 100.0)[0], atol=1e-14)
    for bad in (LIMIT + 1, 2**60 + 1, 2**70, 1e300, np.uint64(2**64 - 1)):
        with pytest.raises(ValueError, match="k must be finite real numbers of magnitude"):
            shift_matrix(bad, 4)
    for name in ("m", "n"):
        with pytest.raises(ValueError, match=f"{name} must be finite real numbers of magnitude"):
            diagonal_h_score(**{"m": 0, "n": 0, name: [0, 2**60 + 1]}, h=h)
    with pytest.raises(ValueError, match="n_positions must be finite real numbers of magnitude"):
        gram_matrix([0, 1], 4, n_positions=np.array([2**64 - 1], dtype=np.uint64))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 0.0, "1e-9", True, None, [1e-9]])
def test_atol_is_checked_by_name(bad):
    u = shift_matrix(1, 4)
    with pytest.raises((ValueError, TypeError), match="atol must be a"):
        shift_isometry(sinusoidal(np.arange(12), 4, 10.0), atol=bad)
    with pytest.raises((ValueError, TypeError), match="atol must be a"):
        orthogonal_normal_form(u, atol=bad)


def test_symbolic_encoding_symbol_and_position_strings():
    assert symbolic_encoding("m", 2, symbol="phi")[0] == sp.sin(
        sp.Symbol("m", real=True) * sp.Symbol("phi_0", real=True)
    )
    for bad in (object(), 3, "", "a,b", "x:3", None):
        with pytest.raises(TypeError, match="symbol must be a str that is a Python identifier"):
            symbolic_encoding("m", 4, symbol=bad)
    with pytest.raises(ValueError, match="position must be a sympy expression or a str"):
        symbolic_encoding("m n", 4)


@pytest.mark.parametrize("atol", [1.0, 2.0, 2**63, 1e300])
def test_shift_isometry_refuses_atol_of_one_or_more(atol):
    """Fuzz item 2: atol is relative; at atol >= 1 even the largest singular value counted as
    zero and the rank-0 basis raised IndexError.  Now a ValueError names atol."""
    vectors = sinusoidal(np.arange(40), 4, base=10.0)
    with pytest.raises(ValueError, match=r"atol must be a finite real number in \(0.0, 1.0\)"):
        shift_isometry(vectors, atol=atol)
    # just below 1 it still returns the shift map (the encoding's own rotation)
    u = shift_isometry(vectors, atol=0.5)
    np.testing.assert_allclose(vectors[1:], vectors[:-1] @ u.T, atol=1e-9)


def test_shift_isometry_names_atol_when_round_off_fails_the_toeplitz_test():
    """A tiny atol turns the round-off of an exact Toeplitz Gram matrix into a refusal; the
    refusal names atol so the caller knows what to raise."""
    vectors = sinusoidal(np.arange(40), 4, base=10.0)
    with pytest.raises(ValueError, match=r"do not depend on m - n only.*raise atol"):
        shift_isometry(vectors, atol=1e-94)


def test_shift_isometry_refuses_vectors_whose_inner_products_overflow() -> None:
    vectors = sinusoidal(np.arange(40), 4, base=10.0) * 1e300
    with pytest.raises(ValueError, match=r"vectors are so large"):
        shift_isometry(vectors)


# ------------------------------------------- mutation testing (issue 22): edges and limits


def test_shift_isometry_of_one_dimensional_vectors_and_at_the_overflow_edge():
    # D = 1: p_m = (-1)^m c is shifted by U = [[-1]] (p_(m+1) = -p_m), by hand.
    np.testing.assert_allclose(shift_isometry([[2.0], [-2.0], [2.0]]), [[-1.0]], atol=1e-12)
    # |p| = 1e150 with D = 1 sits exactly at sqrt(max float / D)'s stand-in 1e150 / sqrt(D):
    # accepted (p_m constant: U = [[1]]); with D = 4 the edge is 1e150 / 2, and 1e150 is refused.
    np.testing.assert_allclose(shift_isometry([[1e150], [1e150]]), [[1.0]], atol=1e-12)
    with pytest.raises(
        ValueError,
        match=r"^vectors are so large that their inner products overflow float64: rescale "
        r"them \(the map U does not depend on a common scale\)$",
    ):
        shift_isometry(np.full((2, 4), 1e150))


def test_size_limits_of_the_score_and_the_shift_sit_at_max_elements(size_limit):
    for n, call, message in [
        (
            6,
            lambda: diagonal_h_score([0, 1, 2], 0, np.ones(4)),
            r"the table of angles \(broadcast size of m and n x len\(h\) / 2\) would have 6 "
            r"elements, .*; pass fewer positions at a time$",
        ),
        (
            9,
            lambda: shift_isometry([[2.0], [-2.0], [2.0]]),
            r"the Gram matrix and the map U \(N x N and D x D for vectors of shape \(N, D\)\) "
            r"would have 9 elements, .*; pass fewer or shorter vectors$",
        ),
    ]:
        size_limit(n, call, message)


def test_diagonal_h_score_at_the_default_base_by_hand():
    # sum_i h_2i cos(m t_i) cos(n t_i) + h_2i+1 sin(m t_i) sin(n t_i), t_i = 10^4^(-2i/d)
    h, m, n = np.array([0.5, -1.0, 2.0, 0.25]), 3.0, 11.0
    t = ref_theta(4, 10000.0)
    expected = sum(
        h[2 * i] * math.cos(m * t[i]) * math.cos(n * t[i])
        + h[2 * i + 1] * math.sin(m * t[i]) * math.sin(n * t[i])
        for i in range(2)
    )
    assert diagonal_h_score(m, n, h) == pytest.approx(expected, rel=1e-13)


def test_diagonal_h_parts_at_the_default_base_by_hand():
    # relative = sum_i (h_2i + h_2i+1)/2 cos((m - n) t_i), absolute with h_2i - h_2i+1 and m + n
    h, m, n = np.array([0.5, -1.0, 2.0, 0.25]), 3.0, 11.0
    t = ref_theta(4, 10000.0)
    rel = sum(0.5 * (h[2 * i] + h[2 * i + 1]) * math.cos((m - n) * t[i]) for i in range(2))
    ab = sum(0.5 * (h[2 * i] - h[2 * i + 1]) * math.cos((m + n) * t[i]) for i in range(2))
    got = diagonal_h_parts(m, n, h)
    assert got[0] == pytest.approx(rel, rel=1e-13) and got[1] == pytest.approx(ab, rel=1e-13)


def test_h_and_u_checks_at_their_edges():
    from rope_lib._validate import MAX_DIM

    # h: a 2-D array is refused even when its first axis has an even length >= 2; the
    # largest allowed length MAX_DIM is accepted
    with pytest.raises(ValueError, match=r"^h must be a 1-D array of even length >= 2"):
        diagonal_h_score(0, 1, np.ones((2, 4)))
    assert diagonal_h_score(0, 0, np.ones(MAX_DIM)) == pytest.approx(MAX_DIM / 2)
    # u: max |U^T U - I| equal to atol is accepted (the check is "> atol"): 1.25^2 - 1 = 0.5625
    # exactly; a smaller atol refuses it, and the interval in the message is open at both ends
    orthogonal_normal_form([[1.25]], atol=0.5625)
    with pytest.raises(ValueError, match=r"^u must be orthogonal: max \|U\^T U - I\| = 0.562"):
        orthogonal_normal_form([[1.25]], atol=0.5)
    with pytest.raises(
        ValueError, match=r"^atol must be a finite real number in \(0.0, inf\), got"
    ):
        orthogonal_normal_form([[1.0]], atol=-1.0)


def test_shift_matrix_at_the_default_base_moves_the_encoding():
    # D_k P_m = P_(m+k) for Vaswani's layout at b = 10^4, with P from eq. (3.5) by hand
    D = shift_matrix(3.0, 6)
    for m in (0.0, 5.0, 40.0):
        np.testing.assert_allclose(
            D @ ref_sinusoidal([m], 6, 1e4)[0], ref_sinusoidal([m + 3.0], 6, 1e4)[0], atol=1e-13
        )


def test_complex_encoding_size_limit_and_message(size_limit):
    size_limit(
        12,  # 3 positions x d = 4
        lambda: complex_encoding([0, 1, 2], 4),
        r"the encoding \(len\(positions\) x d\) would have 12 elements, .*; encode fewer "
        r"positions at a time$",
    )


def test_gram_matrix_size_checks_count_m_by_n(size_limit):
    # 3 x 1 Gram matrix of d = 2 encodings: the largest table is the encoding, 3 x 2 = 6
    accepted = size_limit(
        6,
        lambda: gram_matrix([0, 1, 2], 2, n_positions=[0]),
        r"the encoding \(len\(positions\) x d\) would have 6 elements, .*; encode fewer "
        r"positions at a time$",
    )
    np.testing.assert_allclose(accepted, ref_sinusoidal([0, 1, 2], 2, 1e4) @ [[0.0], [1.0]])
    # 3 x 4: the Gram matrix, 12, is the largest
    size_limit(
        12,
        lambda: gram_matrix([0, 1, 2], 2, n_positions=[0, 1, 2, 3]),
        r"the Gram matrix \(len\(m_positions\) x len\(n_positions\)\) would have 12 "
        r"elements, .*; pass fewer positions$",
    )


def test_sinusoidal_size_limit_and_message(size_limit):
    accepted = size_limit(
        12,  # 3 positions x d = 4
        lambda: sinusoidal([0, 1, 2], 4),
        r"the encoding \(len\(positions\) x d\) would have 12 elements, .*; encode fewer "
        r"positions at a time$",
    )
    np.testing.assert_allclose(accepted, ref_sinusoidal([0, 1, 2], 4, 1e4))


def test_shift_isometry_is_the_identity_off_the_span():
    # p_m = (cos m w, sin m w, 0): U turns the (x, y) plane by w and, by its definition, is the
    # identity on the orthogonal complement of span(p_m), here the z axis (by hand).
    w = 0.7
    p = np.array([[math.cos(m * w), math.sin(m * w), 0.0] for m in range(6)])
    c, s = math.cos(w), math.sin(w)
    expected = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(shift_isometry(p), expected, atol=1e-9)


def test_shift_matrix_size_limit_and_message(size_limit):
    size_limit(
        16,
        lambda: shift_matrix(1.0, 4),
        r"the shift matrix \(d x d\) would have 16 elements, .*; use a smaller d$",
    )


def test_shift_isometry_refusals_are_scale_free():
    with pytest.raises(ValueError, match=r"^vectors are all zero; there is no span to act on$"):
        shift_isometry(np.zeros((2, 2)))
    # small vectors, 1e-3 * (cos m w, sin m w), one entry moved by 1e-6 (relative 1e-3): the
    # Gram matrix is no longer Toeplitz, by far more than atol = 1e-9 relative to its scale,
    # so the refusal must not depend on the vectors' absolute size
    p = 1e-3 * np.array([[math.cos(0.7 * m), math.sin(0.7 * m)] for m in range(5)])
    p[2, 0] += 1e-6
    with pytest.raises(ValueError, match=r"^the inner products of the rows of vectors do not"):
        shift_isometry(p)


def test_shift_isometry_accepts_a_gram_spread_equal_to_the_tolerance():
    # Integer vectors near 30 (cos m pi/3, sin m pi/3): their Gram matrix, by hand,
    # [[900, 450, -450], [450, 901, 451], [-450, 451, 901]], spreads by 1 along its main and
    # first diagonals, with scale 901. "Not Toeplitz" means a spread *above* atol * scale:
    # atol = 1/901 (atol * 901 is 1.0 in float64) is accepted, a smaller atol is refused.
    p = np.array([[30.0, 0.0], [15.0, 26.0], [-15.0, 26.0]])
    atol = 1 / 901
    assert atol * 901 == 1.0
    u = shift_isometry(p, atol)
    # the least-squares shift of these rounded points: within 1 of the next point
    assert np.abs(u @ p[0] - p[1]).max() < 1.0 and np.abs(u @ p[1] - p[2]).max() < 1.0
    with pytest.raises(ValueError, match=r"^the inner products of the rows of vectors do not"):
        shift_isometry(p, 0.999 / 901)


def test_shift_isometry_refuses_when_the_first_positions_span_too_little():
    """p_m = s (cos m w, sin m w), m = 0, 1, 2, with w = 0.01: by hand, the singular values of
    the three rows are s sqrt(2 + cos 2w) and s sqrt(1 - cos 2w), those of p_0, p_1 are
    s sqrt(1 +- cos w). At atol = 3e-5 both rows' directions count (rank 2), but the smaller
    direction of p_0, p_1 falls below sqrt(atol) times the largest singular value: the shift
    is not determined on the plane, so the call refuses; at atol = 1e-5 it is, and U is the
    rotation by w. The scale s = 1000 checks that the threshold is relative."""
    w, s = 0.01, 1000.0
    p = s * np.array([[math.cos(m * w), math.sin(m * w)] for m in range(3)])
    top = s * math.sqrt(2 + math.cos(2 * w))
    low_all, low_first = s * math.sqrt(1 - math.cos(2 * w)), s * math.sqrt(1 - math.cos(w))
    assert low_first <= math.sqrt(3e-5) * top < low_all
    with pytest.raises(ValueError, match=r"^p_0, \.\.\., p_\(N-2\) span fewer than the 2 dim"):
        shift_isometry(p, 3e-5)
    assert math.sqrt(1e-5) * top < low_first
    rotation = np.array([[math.cos(w), -math.sin(w)], [math.sin(w), math.cos(w)]])
    np.testing.assert_allclose(shift_isometry(p, 1e-5), rotation, rtol=0, atol=1e-8)


def test_shift_isometry_treats_a_pair_that_barely_turns_as_constant():
    """Two pairs, s (cos 0.7 m, sin 0.7 m, cos 1e-6 m, sin 1e-6 m), m = 0..5, s = 1000: the
    slow pair moves by at most 5e-6 s, so the direction it adds has a singular value below
    sqrt(atol) = 3.2e-5 times the largest (atol = 1e-9) and counts as zero (the docstring's
    rule, relative to the largest singular value). U turns the first plane by 0.7 and leaves
    the slow pair fixed, to within its 1e-6 turn."""
    s, w, eps = 1000.0, 0.7, 1e-6
    p = s * np.array(
        [[math.cos(w * m), math.sin(w * m), math.cos(eps * m), math.sin(eps * m)] for m in range(6)]
    )
    expected = np.eye(4)
    expected[:2, :2] = [[math.cos(w), -math.sin(w)], [math.sin(w), math.cos(w)]]
    np.testing.assert_allclose(shift_isometry(p), expected, rtol=0, atol=1e-5)
