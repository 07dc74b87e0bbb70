"""Tests of rope_lib.attention: attention against a naive loop, permutation symmetry,
numpy/torch agreement, the sentence demo, the sympy proofs and bad input."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lib import attention as att


# ---------------------------------------------------------------------------------------------
# an independent implementation: plain Python loops over math.exp, one query at a time
# ---------------------------------------------------------------------------------------------
def naive_attention(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    d = q.shape[1]
    out = np.zeros((q.shape[0], v.shape[1]))
    for m in range(q.shape[0]):
        scores = [
            sum(q[m, i] * k[n, i] for i in range(d)) / math.sqrt(d) for n in range(k.shape[0])
        ]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = math.fsum(weights)
        for n, w in enumerate(weights):
            out[m] += (w / total) * v[n]
    return out


def naive_self_attention(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=np.float64)
    q = np.array([w_q @ row for row in x])
    k = np.array([w_k @ row for row in x])
    v = np.array([w_v @ row for row in x])
    return naive_attention(q, k, v)


shapes = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 5), st.integers(1, 4))


@st.composite
def qkv(draw):
    t, s, d, dv = draw(shapes)
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    rng = np.random.default_rng(seed)
    return (
        scale * rng.standard_normal((t, d)),
        scale * rng.standard_normal((s, d)),
        rng.standard_normal((s, dv)),
    )


@given(qkv())
def test_attention_matches_naive_loop(arrays):
    q, k, v = arrays
    np.testing.assert_allclose(
        att.scaled_dot_product_attention(q, k, v), naive_attention(q, k, v), rtol=1e-12, atol=1e-12
    )


@given(qkv())
def test_weights_are_probabilities(arrays):
    q, k, _ = arrays
    w = att.attention_weights(q, k)
    assert w.shape == (q.shape[0], k.shape[0])
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=0, atol=1e-14)


@given(qkv())
def test_numpy_and_torch_agree(arrays):
    q, k, v = arrays
    out_np = att.scaled_dot_product_attention(q, k, v)
    out_t = att.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
    assert isinstance(out_t, torch.Tensor) and out_t.dtype == torch.float64
    assert isinstance(out_np, np.ndarray)
    np.testing.assert_allclose(out_t.numpy(), out_np, rtol=1e-12, atol=1e-13)


def test_torch_float32_keeps_dtype_and_matches_torch_sdpa():
    rng = np.random.default_rng(0)
    q, k, v = (
        torch.from_numpy(rng.standard_normal((2, 3, 5, 8)).astype(np.float32)) for _ in "qkv"
    )
    out = att.scaled_dot_product_attention(q, k, v)
    assert out.dtype == torch.float32 and out.shape == (2, 3, 5, 8)
    peer = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, peer, rtol=1e-5, atol=1e-6)


def test_numpy_batch_dimensions_broadcast():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 1, 4, 3))
    k = rng.standard_normal((1, 5, 6, 3))
    v = rng.standard_normal((1, 5, 6, 2))
    out = att.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 5, 4, 2)
    for a, b in itertools.product(range(2), range(5)):
        np.testing.assert_allclose(
            out[a, b], naive_attention(q[a, 0], k[0, b], v[0, b]), rtol=0, atol=1e-13
        )


def test_integer_input_promotes_to_float64_and_float32_is_kept():
    q = np.array([[1, 0], [0, 1]])
    out = att.scaled_dot_product_attention(q, q, q)
    assert out.dtype == np.float64
    out32 = att.scaled_dot_product_attention(*(q.astype(np.float32) for _ in range(3)))
    assert out32.dtype == np.float32


def test_softmax_stable_for_huge_scores():
    s = np.array([1000.0, 1000.0 + math.log(3.0)])
    np.testing.assert_allclose(att.softmax(s), [0.25, 0.75], rtol=1e-12)
    t = att.softmax(torch.tensor([[-1e4, 0.0]], dtype=torch.float64))
    assert isinstance(t, torch.Tensor)
    np.testing.assert_allclose(t.numpy(), [[0.0, 1.0]])
    by_column = att.softmax(np.array([[0.0, 0.0], [1.0, 1.0]]), axis=0)
    low = 1.0 / (1.0 + math.e)
    np.testing.assert_allclose(by_column, [[low, low], [1 - low, 1 - low]], rtol=1e-15)


@given(st.permutations(list(range(5))), st.integers(0, 2**32 - 1))
def test_softmax_is_permutation_equivariant_not_invariant(perm, seed):
    """Reordering a row reorders its softmax the same way (chapter 1's proof); it does not
    leave the softmax unchanged (the softmax is not order-blind)."""
    s = np.random.default_rng(seed).normal(size=5) * 3
    idx = np.asarray(perm)
    np.testing.assert_allclose(att.softmax(s[idx]), att.softmax(s)[idx], rtol=1e-14)
    if np.any(idx != np.arange(5)):
        assert not np.allclose(att.softmax(s[idx]), att.softmax(s))


# ---------------------------------------------------------------------------------------------
# the causal mask
# ---------------------------------------------------------------------------------------------
@given(qkv())
def test_causal_matches_torch_is_causal(arrays):
    """Peer: torch's fused kernel with is_causal=True (top-left aligned mask, also for T != S)."""
    q, k, v = arrays
    out = att.scaled_dot_product_attention(q, k, v, causal=True)
    peer = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), is_causal=True
    )
    np.testing.assert_allclose(out, peer.numpy(), rtol=1e-12, atol=1e-12)
    out_t = att.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), causal=True)
    assert isinstance(out_t, torch.Tensor) and out_t.dtype == torch.float64
    np.testing.assert_allclose(out_t.numpy(), out, rtol=1e-12, atol=1e-13)


@given(qkv())
def test_causal_equals_attention_over_each_prefix(arrays):
    """Independent route: query m attends, without a mask, to keys 0..m (the naive loop)."""
    q, k, v = arrays
    out = att.scaled_dot_product_attention(q, k, v, causal=True)
    for m in range(q.shape[0]):
        visible = min(m + 1, k.shape[0])
        expected = naive_attention(q[m : m + 1], k[:visible], v[:visible])[0]
        np.testing.assert_allclose(out[m], expected, rtol=1e-12, atol=1e-12)
    weights = att.attention_weights(q, k, causal=True)
    assert np.all(np.triu(weights, k=1) == 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-14)


def test_causal_self_attention_float32_and_batches():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4, 4)).astype(np.float32)
    out = att.self_attention(torch.from_numpy(x), *(torch.from_numpy(m) for m in w), causal=True)
    assert out.dtype == torch.float32 and out.shape == (2, 6, 4)
    for b in range(2):
        expected = [
            naive_self_attention(x[b, : m + 1], *w)[m] for m in range(6)
        ]  # token m over its prefix, float64
        np.testing.assert_allclose(out[b].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_causal_last_token_ignores_order_first_slot_does_not():
    """The two facts of chapter 1's causal exercise, by a route without the library's mask."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3))
    w = rng.standard_normal((3, 3, 3))
    out = att.self_attention(x, *w, causal=True)
    for perm in itertools.permutations(range(3)):
        idx = [*perm, 3]
        np.testing.assert_allclose(
            att.self_attention(x[idx], *w, causal=True)[3], out[3], rtol=0, atol=1e-13
        )
    swapped = att.self_attention(x[[1, 0, 2, 3]], *w, causal=True)
    np.testing.assert_allclose(
        swapped[0], w[2] @ x[1], rtol=0, atol=1e-14
    )  # slot 0 sees itself only
    assert np.max(np.abs(swapped[0] - out[1])) > 1e-2  # round-off is 1e-16


# ---------------------------------------------------------------------------------------------
# permutation symmetry
# ---------------------------------------------------------------------------------------------
@st.composite
def sequences(draw):
    t = draw(st.integers(2, 7))
    d = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    perm = draw(st.permutations(list(range(t))))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((t, d))
    w = rng.standard_normal((3, d, d)) / np.sqrt(d)
    return x, perm, w


@given(sequences())
def test_self_attention_is_permutation_equivariant(case):
    x, perm, w = case
    idx = np.asarray(perm)
    before = naive_self_attention(x, *w)
    after = att.self_attention(x[idx], *w)
    np.testing.assert_allclose(after, before[idx], rtol=1e-12, atol=1e-12)
    assert att.equivariance_gap(x, perm, *w) < 1e-12
    assert (
        att.equivariance_gap(torch.from_numpy(x), perm, *(torch.from_numpy(m) for m in w)) < 1e-12
    )


@given(sequences(), st.data())
def test_one_token_output_ignores_order_of_others(case, data):
    x, perm, w = case
    token = data.draw(st.integers(0, x.shape[0] - 1))
    others = [i for i in perm if i != token]
    order = others[:]
    order.insert(token, token)  # keep the token in its slot, shuffle the others
    out = att.self_attention(x[np.asarray(order)], *w)
    np.testing.assert_allclose(out[token], naive_self_attention(x, *w)[token], rtol=0, atol=1e-12)


def test_positions_break_the_symmetry():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3))
    w = rng.standard_normal((3, 3, 3))
    p = att.random_positions(4, 3, seed=5)
    idx = np.array([0, 2, 1, 3])
    out = att.self_attention(x + p, *w)
    out_perm = att.self_attention(x[idx] + p, *w)
    assert np.max(np.abs(out_perm[0] - out[0])) > 1e-3
    assert np.max(np.abs(out_perm[idx.argsort()] - out)) > 1e-3


def test_equivariance_gap_detects_non_equivariance():
    # a model that is NOT equivariant (it adds positions) must give a visible gap; check the gap
    # formula itself on a case computed by hand: one token, any permutation is the identity
    x = np.array([[1.0, 2.0]])
    assert att.equivariance_gap(x, [0], np.eye(2), np.eye(2), np.eye(2)) == 0.0


# ---------------------------------------------------------------------------------------------
# the sentence demo
# ---------------------------------------------------------------------------------------------
def test_word_embeddings_depend_on_word_only():
    a = att.word_embeddings("this is awesome", d=5, seed=2)
    b = att.word_embeddings(["awesome", "this", "is", "is"], d=5, seed=2)
    np.testing.assert_array_equal(a[2], b[0])
    np.testing.assert_array_equal(a[1], b[3])
    assert not np.allclose(a[0], a[1])
    assert not np.allclose(att.word_embeddings("is", 5, seed=3), a[1])


def test_sentence_demo_awesome_invariant_without_positions():
    a = att.sentence_attention("this is awesome")
    b = att.sentence_attention("this awesome is")
    np.testing.assert_allclose(b.row("awesome"), a.row("awesome"), rtol=0, atol=1e-15)
    # check against the naive loop with the same embeddings and projections
    x = att.word_embeddings("this is awesome", 4, 0)
    w = att.demo_projections(4, 0)
    np.testing.assert_allclose(a.output, naive_self_attention(x, *w), rtol=0, atol=1e-13)
    assert a.weights_of("awesome") == pytest.approx(b.weights_of("awesome"), abs=1e-15)


def test_sentence_demo_awesome_changes_with_positions():
    p = att.random_positions(3, 4, seed=0)
    a = att.sentence_attention("this is awesome", positions=p)
    b = att.sentence_attention("this awesome is", positions=p)
    assert np.max(np.abs(a.row("awesome") - b.row("awesome"))) > 0.05
    x = att.word_embeddings("this is awesome", 4, 0) + p
    np.testing.assert_allclose(
        a.output, naive_self_attention(x, *att.demo_projections(4, 0)), rtol=0, atol=1e-13
    )


def test_random_positions_distinct_and_scaled():
    p = att.random_positions(50, 8, seed=1, scale=0.5)
    assert p.shape == (50, 8)
    assert len({tuple(r) for r in p}) == 50
    assert 0.4 < p.std() < 0.6


def test_reordered_sentence_agrees_up_to_round_off_of_the_terms():
    """Chapter 1: without positions, "this" (slot 0 in both) and "awesome" (slot 2, then 1)
    keep their outputs up to a few units of round-off of the terms sum_n A_mn |v_n|, for
    every seed; bit-identical weights and 1-ulp outputs hold only for some seeds (the
    chapter says 'happen to be' of its seed 0)."""
    eps = np.finfo(float).eps
    weights_differ = outputs_beyond_one_ulp = 0
    for seed in range(500):
        a = att.sentence_attention("this is awesome", d=4, seed=seed)
        b = att.sentence_attention("this awesome is", d=4, seed=seed)
        v = a.x @ att.demo_projections(4, seed)[2].T
        for word in ("this", "awesome"):
            i = a.index(word)
            gap = np.abs(a.row(word) - b.row(word))
            assert np.all(gap <= 4 * eps * (a.weights[i] @ np.abs(v))), (seed, word)
        weights_differ += a.weights_of("awesome") != b.weights_of("awesome")
        gap = np.abs(a.row("awesome") - b.row("awesome"))
        outputs_beyond_one_ulp += bool(np.any(gap > np.spacing(np.abs(a.row("awesome")))))
    assert weights_differ > 0 and outputs_beyond_one_ulp > 0


@given(st.integers(0, 2**32 - 1))
def test_distinct_tokens_can_hide_a_reordering_from_distinct_positions(seed):
    """Chapter 1, after prop-sym-distinct: with x_2 = x_1 + p_3 - p_2 and
    x_3 = x_1 + p_1 - p_2 the 3-cycle (0, 2, 3, 1) only permutes the inputs x + p, so the
    output of slot 0 is unchanged for every weight (checked against the naive loop)."""
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((4, 3))
    x = np.empty((4, 3))
    x[:2] = rng.standard_normal((2, 3))
    x[2], x[3] = x[1] + p[3] - p[2], x[1] + p[1] - p[2]
    w_q, w_k, w_v = rng.standard_normal((3, 3, 3))
    w_v = w_v[:2]  # d_v = 2
    before = naive_self_attention(x + p, w_q, w_k, w_v)[0]
    after = att.self_attention(x[[0, 2, 3, 1]] + p, w_q, w_k, w_v)[0]
    np.testing.assert_allclose(after, before, rtol=0, atol=1e-12)


@pytest.mark.parametrize("sigma", [(0, 2, 3, 1), (0, 3, 1, 2), (0, 2, 1, 3), (0, 1, 3, 2)])
def test_proposition_slope_by_finite_differences(sigma):
    """The proof of prop-sym-distinct: with x_i = xi_i eta, W_k = e_1 eta^T,
    W_q = t e_1 eta^T, W_v = e_1' eta^T (d_model = 5, d = 3, d_v = 2), the t-derivative at
    t = 0 of the change of o_0 is (2 z_0 / (N sqrt d)) sum_i xi_i (tau_{sigma^-1(i)} - tau_i).
    The derivative is taken by central differences of the library's self-attention."""
    rng = np.random.default_rng(11)
    n, d_model, d, d_v = 4, 5, 3, 2
    eta = rng.standard_normal(d_model)
    eta /= np.linalg.norm(eta)
    p = rng.standard_normal((n, d_model))
    xi = rng.standard_normal(n)
    x = xi[:, None] * eta
    e1, e1v = np.eye(d)[0], np.eye(d_v)[0]

    def change(t):
        w_q, w_k, w_v = t * np.outer(e1, eta), np.outer(e1, eta), np.outer(e1v, eta)
        moved = att.self_attention(x[list(sigma)] + p, w_q, w_k, w_v)[0, 0]
        return moved - att.self_attention(x + p, w_q, w_k, w_v)[0, 0]

    h = 1e-5
    slope = (change(h) - change(-h)) / (2 * h)
    tau = p @ eta
    inverse = [sigma.index(i) for i in range(n)]
    z0 = xi[0] + tau[0]
    expected = 2 * z0 / (n * np.sqrt(d)) * np.sum(xi * (tau[inverse] - tau))
    assert abs(change(0.0)) < 1e-14
    assert slope == pytest.approx(expected, rel=1e-6, abs=1e-9)
    if list(sigma) != inverse:  # a 3-cycle: the formula with sigma itself is wrong
        wrong = 2 * z0 / (n * np.sqrt(d)) * np.sum(xi * (tau[list(sigma)] - tau))
        assert abs(slope - wrong) > 1e-3


# ---------------------------------------------------------------------------------------------
# sympy proofs
# ---------------------------------------------------------------------------------------------
def test_symbolic_invariance_is_zero():
    result = att.symbolic_invariance(n_tokens=3, d=2, token=0)
    assert set(result) == {(0, 1, 2), (0, 2, 1)}
    assert all(diff.is_zero_matrix for diff in result.values())
    result = att.symbolic_invariance(n_tokens=3, d=1, token=1)
    assert set(result) == {(0, 1, 2), (2, 1, 0)}
    assert all(diff.is_zero_matrix for diff in result.values())


def test_symbolic_invariance_with_positions_is_not_zero():
    result = att.symbolic_invariance(n_tokens=3, d=1, token=0, with_positions=True)
    diff = result[(0, 2, 1)][0]
    values = {
        s: sp.Rational(k + 1, 3) * (-1) ** k
        for k, s in enumerate(sorted(diff.free_symbols, key=str))
    }
    assert abs(float(diff.subs(values))) > 1e-6
    assert result[(0, 1, 2)].is_zero_matrix


def test_symbolic_row_matches_numbers():
    # the symbolic formula evaluated at numbers equals the naive loop
    d = 2
    xs = [sp.Matrix([sp.Rational(1, 2), -1]), sp.Matrix([2, sp.Rational(1, 3)]), sp.Matrix([0, 1])]
    w = [sp.Matrix([[1, 2], [0, -1]]), sp.Matrix([[sp.Rational(1, 2), 0], [1, 1]]), sp.eye(2)]
    row = att.symbolic_attention_row(xs[1], xs, *w)
    x = np.array([[float(v) for v in t] for t in xs])
    wn = [np.array(m.tolist(), dtype=float) for m in w]
    expected = naive_self_attention(x, *wn)[1]
    np.testing.assert_allclose([float(v) for v in row], expected, rtol=1e-13)
    assert row.shape == (d, 1)


def test_symbolic_equivariance_is_zero():
    assert att.symbolic_equivariance([2, 0, 1], d=2).is_zero_matrix
    assert att.symbolic_equivariance([1, 0], d=1).shape == (2, 1)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: att.scaled_dot_product_attention(
                np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 1))
            ),
            ValueError,
            "q and k",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                np.ones((2, 3)), np.ones((4, 3)), np.ones((2, 1))
            ),
            ValueError,
            "k and v",
        ),
        (
            lambda: att.scaled_dot_product_attention(np.ones(3), np.ones((4, 3)), np.ones((4, 1))),
            ValueError,
            "q must have shape",
        ),
        (
            lambda: att.scaled_dot_product_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones(2)),
            ValueError,
            "v must have shape",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                np.full((2, 3), np.nan), np.ones((2, 3)), np.ones((2, 1))
            ),
            ValueError,
            "q must be finite",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                np.ones((2, 3)), np.ones((2, 3)) * 1j, np.ones((2, 1))
            ),
            TypeError,
            "k must be real",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                np.ones((2, 3)), np.ones((2, 3)), np.array([["a"], ["b"]])
            ),
            TypeError,
            "v must be",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                np.ones((2, 3, 3)), np.ones((4, 3, 3)), np.ones((4, 3, 1))
            ),
            ValueError,
            "batch",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                torch.ones(2, 3), np.ones((2, 3)), torch.ones(2, 1)
            ),
            TypeError,
            "must be all NumPy arrays or all torch tensors",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                torch.ones(2, 3), torch.ones(2, 3, dtype=torch.float64), torch.ones(2, 1)
            ),
            TypeError,
            "dtype",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                torch.ones(2, 3, dtype=torch.int64), torch.ones(2, 3), torch.ones(2, 1)
            ),
            TypeError,
            "q must be a floating",
        ),
        (
            lambda: att.scaled_dot_product_attention(
                np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), causal=1
            ),
            TypeError,
            "causal",
        ),
        (
            lambda: att.self_attention(np.ones((3, 2)), *np.ones((3, 2, 2)), causal="yes"),
            TypeError,
            "causal",
        ),
        (lambda: att.softmax(np.float64(1.0)), ValueError, "scores"),
        (lambda: att.softmax(np.ones(3), axis=1), ValueError, "axis"),
        (
            lambda: att.self_attention(
                np.ones((3, 2)), np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 2))
            ),
            ValueError,
            "w_q",
        ),
        (
            lambda: att.self_attention(
                np.ones((3, 2)), np.ones((2, 2)), np.ones((3, 2)), np.ones((2, 2))
            ),
            ValueError,
            "w_q and w_k",
        ),
        (
            lambda: att.equivariance_gap(np.ones((3, 2)), [0, 1, 1], *np.ones((3, 2, 2))),
            ValueError,
            "perm",
        ),
        (
            lambda: att.equivariance_gap(np.ones((3, 2)), [0.0, 1.0, 2.0], *np.ones((3, 2, 2))),
            TypeError,
            "perm",
        ),
        (lambda: att.word_embeddings([], 4), TypeError, "words"),
        (lambda: att.word_embeddings("a b", 0), ValueError, "d"),
        (lambda: att.word_embeddings("a b", 4, seed=-1), ValueError, "seed"),
        (lambda: att.random_positions(3, 4, scale=0.0), ValueError, "scale"),
        (lambda: att.random_positions(0, 4), ValueError, "n_positions"),
        (
            lambda: att.sentence_attention("a b c", positions=np.ones((2, 4))),
            ValueError,
            "positions",
        ),
        (lambda: att.sentence_attention("a b c").row("d"), ValueError, "word"),
        (lambda: att.symbolic_invariance(n_tokens=6), ValueError, "n_tokens"),
        (lambda: att.symbolic_invariance(d=5), ValueError, "d must"),
        (lambda: att.symbolic_invariance(token=3), ValueError, "token"),
        (lambda: att.symbolic_invariance(with_positions=1), TypeError, "with_positions"),
        (lambda: att.symbolic_equivariance([0]), ValueError, "perm"),
        (lambda: att.symbolic_equivariance("012"), TypeError, "perm"),
        (lambda: att.symbolic_equivariance([0, 2]), ValueError, "perm"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---------------------------------------------------------------------------------------------
# figures
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# argument validation (issue 11): names, limits, unusual but valid forms
# ---------------------------------------------------------------------------------------------
def _row_args():
    return {
        "query": sp.Matrix([1, 2]),
        "tokens": [sp.Matrix([1, 2]), sp.Matrix([3, 4])],
        "w_q": sp.eye(2),
        "w_k": sp.eye(2),
        "w_v": sp.Matrix([[1, 0]]),
    }


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: att.demo_projections(10**9), ValueError, r"d must be an integer <= 65536"),
        (lambda: att.demo_projections(6689), ValueError, r"demo_projections\(d=6689\).*MAX_ELEM"),
        (lambda: att.demo_projections(seed=2.5), TypeError, "seed must"),
        (lambda: att.random_positions(10**9, 4), ValueError, "n_positions=1000000000"),
        (lambda: att.random_positions(3, 4, scale=1e308), ValueError, "scale .* overflow"),
        (lambda: att.random_positions(3, 4, scale="1"), TypeError, "scale must"),
        (lambda: att.word_embeddings(object()), TypeError, "words must"),
        (lambda: att.word_embeddings(b"a b"), TypeError, "words must"),
        (lambda: att.word_embeddings("a b", 10**9), ValueError, "d must"),
        (lambda: att.sentence_attention(object()), TypeError, "words must"),
        (
            lambda: att.sentence_attention("a b", positions=np.full((2, 4), 1e200)),
            ValueError,
            "positions are so large",
        ),
        (
            lambda: att.attention_weights(np.full((2, 2), 1e200), np.full((2, 2), 1e200)),
            ValueError,
            "q and k",
        ),
        (
            lambda: att.attention_weights(torch.full((2, 2), 1e20), torch.full((2, 2), 1e20)),
            ValueError,
            "q and k",
        ),
        (
            lambda: att.attention_weights(np.ones((2, 2)), np.ones((2, 2)), causal="no"),
            TypeError,
            "causal must be True or False",
        ),
        (lambda: att.symbolic_invariance(with_positions="no"), TypeError, "with_positions must"),
        (lambda: att.symbolic_invariance(d=10**15), ValueError, "d must"),
        (lambda: att.symbolic_equivariance(np.int64(3)), TypeError, "perm"),
        (lambda: att.symbolic_equivariance(object()), TypeError, "perm"),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "query": object()}),
            TypeError,
            "query must be a sympy",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "query": sp.Matrix([[1, 2]])}),
            ValueError,
            "query must be a column",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "tokens": object()}),
            TypeError,
            "tokens must",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "tokens": sp.Matrix([1, 2])}),
            TypeError,
            "tokens must",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "tokens": []}),
            ValueError,
            "tokens must",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "tokens": [sp.Matrix([1])]}),
            ValueError,
            r"tokens\[0\]",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "tokens": [[1, 2]]}),
            TypeError,
            r"tokens\[0\]",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "w_q": np.eye(2)}),
            TypeError,
            "w_q must be a sympy",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "w_k": sp.eye(3)}),
            ValueError,
            "w_k must have",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "w_v": "x"}),
            TypeError,
            "w_v must be a sympy",
        ),
        (
            lambda: att.symbolic_attention_row(**{**_row_args(), "w_k": sp.Matrix([[1, 0]])}),
            ValueError,
            "w_q and w_k",
        ),
    ],
)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("d", [1, 3, 5])
def test_odd_widths_are_valid_demo_widths(d):
    """Nothing in the demonstration pairs coordinates, so any width >= 1 is a valid width."""
    x = att.word_embeddings("this is awesome", d, 0)
    w_q, w_k, w_v = att.demo_projections(d, 0)
    assert x.shape == (3, d) and w_q.shape == (d, d)
    run = att.sentence_attention("this is awesome", d=d, seed=0)
    np.testing.assert_allclose(
        run.output, naive_self_attention(x, w_q, w_k, w_v), rtol=0, atol=1e-13
    )


def test_unusual_forms_give_the_same_demo():
    np.testing.assert_array_equal(
        att.word_embeddings("a b", np.int64(4), np.int64(7)), att.word_embeddings(("a", "b"), 4, 7)
    )
    for a, b in zip(
        att.demo_projections(np.int32(4), np.uint8(3)), att.demo_projections(4, 3), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        att.random_positions(3.0, 4, 0, np.float32(2.0)), att.random_positions(3, 4, 0, 2.0)
    )
    assert att.symbolic_equivariance(np.array([1, 0]), d=1) == att.symbolic_equivariance(
        (1, 0), d=1
    )
    args = _row_args()
    immutable = {k: (sp.ImmutableMatrix(v) if k != "tokens" else tuple(v)) for k, v in args.items()}
    assert sp.simplify(
        att.symbolic_attention_row(**immutable) - att.symbolic_attention_row(**args)
    ) == sp.zeros(1, 1)


def test_symbolic_row_of_unit_scores_is_the_plain_mean():
    """With w_k = 0 every score is exp(0) = 1, so the row is the mean of w_v x_n."""
    x0, x1 = sp.Matrix([1, 2]), sp.Matrix([5, -4])
    row = att.symbolic_attention_row(x0, [x0, x1], sp.eye(2), sp.zeros(2, 2), sp.eye(2))
    assert row == sp.Matrix([3, -1])


def test_attention_overflow_is_refused_not_nan():
    """Scores beyond float64 would make softmax return nan; the inputs are refused instead,
    and scores just below the limit still give probabilities."""
    q = np.array([[1e150, 0.0]])
    k = np.array([[1e150, 0.0], [0.0, 1.0]])
    w = att.attention_weights(q, k)
    np.testing.assert_array_equal(w, [[1.0, 0.0]])
    with pytest.raises(ValueError, match="q and k"):
        att.attention_weights(q * 1e10, k * 1e10)


# --------------------------------------------------------------------- fuzz regressions


@pytest.mark.parametrize(
    "scores", [np.zeros(0), np.zeros((2, 0)), torch.zeros(0), torch.zeros(3, 0)]
)
def test_softmax_over_no_scores_is_refused_by_name(scores):
    """Fuzz item 20: softmax(np.zeros(0)) raised numpy's "zero-size array to reduction
    operation maximum"; a softmax over an empty axis is refused, naming scores."""
    with pytest.raises(ValueError, match=r"scores must have at least one entry along axis"):
        att.softmax(scores)


def test_softmax_over_a_non_empty_axis_of_an_empty_array_is_empty():
    """Only the softmax axis must be non-empty: no rows of three scores give no rows."""
    out = att.softmax(np.zeros((0, 3)))
    assert out.shape == (0, 3)


@pytest.mark.parametrize("use_torch", [False, True])
def test_self_attention_overflow_names_x(use_torch):
    """Fuzz item 22: self_attention and equivariance_gap of a huge x named q and k, which
    the caller never passed; the refusal names x."""
    x = np.random.default_rng(0).standard_normal((3, 2)) * 1e300
    w = np.eye(2)
    args = [x, w, w, w]
    if use_torch:
        args = [torch.tensor(a) for a in args]
    with pytest.raises(ValueError, match=r"^x \(with w_q and w_k\) is so large"):
        att.self_attention(*args)
    with pytest.raises(ValueError, match=r"^x \(with w_q and w_k\) is so large"):
        att.equivariance_gap(args[0], [2, 0, 1], *args[1:])
    # values that overflow (a huge w_v) are refused too, naming x and w_v
    big_v = np.full((3, 2), 10.0), w, w, w * 1e308
    if use_torch:
        big_v = tuple(torch.as_tensor(a) for a in big_v)
    with pytest.raises(ValueError, match=r"^x \(with w_v\) is so large"):
        att.self_attention(*big_v)


def test_attention_weights_overflow_still_names_q_and_k():
    q = np.array([[1e160, 0.0]])
    with pytest.raises(ValueError, match=r"^q and k are so large"):
        att.scaled_dot_product_attention(q, q, q)


def test_sentence_attention_still_names_positions():
    with pytest.raises(ValueError, match=r"^positions are so large"):
        att.sentence_attention("a b", 2, 0, positions=np.full((2, 2), 1e300))


@pytest.mark.parametrize("bad", [sp.nan, sp.oo, -sp.oo, sp.zoo, sp.Symbol("a") + sp.oo])
@pytest.mark.parametrize("where", ["query", "tokens[1]", "w_q", "w_k", "w_v"])
def test_symbolic_attention_row_refuses_non_finite_entries(bad, where):
    """Fuzz item 4: a nan query (or nan w_q, w_k) raised AttributeError from inside sympy;
    every argument with a non-finite entry is refused by name."""
    one = sp.Matrix([1, 0])
    args = {
        "query": one,
        "tokens": [one, sp.Matrix([0, 1])],
        "w_q": sp.eye(2),
        "w_k": sp.eye(2),
        "w_v": sp.eye(2),
    }
    if where == "tokens[1]":
        args["tokens"] = [one, sp.Matrix([bad, 1])]
    elif where == "query":
        args["query"] = sp.Matrix([bad, bad])
    else:
        args[where] = sp.Matrix([[bad, 0], [0, 1]])
    with pytest.raises(ValueError, match=rf"^{re.escape(where)} must have finite entries"):
        att.symbolic_attention_row(**args)


def test_mixed_numpy_and_torch_inputs_name_every_argument() -> None:
    import torch

    q, k, v = np.ones((2, 4)), np.ones((3, 4)), torch.ones(3, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"q, k, v must be all NumPy arrays or all torch") as e:
        att.scaled_dot_product_attention(q, k, v)
    assert "v is a tensor" in str(e.value) and "q, k are not" in str(e.value)
