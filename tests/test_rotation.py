"""Tests of rope_lib.rotation: R_m, apply_rope (its numpy and torch results, both layouts) and RoPE
with linear attention.

Expected values come from routes independent of the code under test:

* ``rope_2x2`` (tests/peers.py): a float64 route, pair by pair with explicit 2x2 rotation
  matrices and frequencies computed with Python's ``math`` (not ``rope_lib.theta``);
* real peers: Hugging Face transformers' ``apply_rotary_pos_emb`` and ``LlamaRotaryEmbedding``
  (half layout) and the ``rotary-embedding-torch`` package (interleaved layout);
* sympy-free algebraic laws checked with hypothesis for random d, base, m, n.
"""

from __future__ import annotations

import math
import re
import warnings

import mpmath
import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st

import rope_lib
from rope_lib import (
    apply_rope,
    elu_feature_map,
    linear_attention,
    linear_attention_weights,
    rotation_matrix,
)

from .peers import (
    bases,
    even_d,
    freqs_math,
    one_layer_config,
    pairs,
    positions_st,
    requires_grad,
    rope_2x2,
    rotation_2x2,
    spy_on_rotary,
)

# ----------------------------------------------------------------------- R_m laws


@given(m=positions_st, d=even_d, base=bases)
def test_rotation_matrix_is_orthogonal(m, d, base):
    R = rotation_matrix(m, d, base)
    np.testing.assert_allclose(R.T @ R, np.eye(d), atol=1e-12)
    assert np.linalg.det(R) == pytest.approx(1.0, abs=1e-9)


@given(m=positions_st, n=positions_st, d=even_d, base=bases)
def test_relative_property(m, n, d, base):
    Rm, Rn, Rnm = (rotation_matrix(p, d, base) for p in (m, n, n - m))
    # Angles up to 2e6 rad carry float64 round-off of about 1e-10.
    np.testing.assert_allclose(Rm.T @ Rn, Rnm, atol=1e-8)


@given(m=st.integers(-5000, 5000), d=st.integers(1, 8).map(lambda h: 2 * h), base=bases)
def test_rotation_matrix_matches_explicit_blocks(m, d, base):
    for layout in ("interleaved", "half"):
        expected = rotation_2x2(m, d, base, layout)
        np.testing.assert_allclose(rotation_matrix(m, d, base, layout), expected, atol=1e-12)


def test_rotation_matrix_structure():
    R = rotation_matrix(3, 6, 100.0)
    th = freqs_math(6, 100.0)
    assert R[0, 0] == pytest.approx(math.cos(3 * th[0]))
    assert R[0, 1] == pytest.approx(-math.sin(3 * th[0]))
    assert R[1, 0] == pytest.approx(math.sin(3 * th[0]))
    assert R[4, 5] == pytest.approx(-math.sin(3 * th[2]))
    assert R[0, 2] == 0.0 and R[2, 0] == 0.0
    np.testing.assert_array_equal(rotation_matrix(0, 8), np.eye(8))


@given(m=positions_st, d=even_d, base=bases, seed=st.integers(0, 2**32 - 1))
def test_norms_preserved(m, d, base, seed):
    x = np.random.default_rng(seed).standard_normal((3, 1, d))
    for layout in ("interleaved", "half"):
        y = apply_rope(x, [m], base, layout)
        np.testing.assert_allclose(
            np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-13
        )


@given(
    m=st.integers(-(10**5), 10**5),
    n=st.integers(-(10**5), 10**5),
    s=st.integers(-(10**5), 10**5),
    d=even_d,
    base=bases,
    seed=st.integers(0, 2**32 - 1),
    layout=st.sampled_from(["interleaved", "half"]),
)
def test_scores_depend_on_relative_position_only(m, n, s, d, base, seed, layout):
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(d), rng.standard_normal(d)

    def score(a, b):
        return apply_rope(q[None], [a], base, layout)[0] @ apply_rope(k[None], [b], base, layout)[0]

    scale = np.linalg.norm(q) * np.linalg.norm(k)
    assert score(m, n) == pytest.approx(score(m + s, n + s), abs=1e-9 * scale)
    relative = q @ rotation_matrix(n - m, d, base, layout) @ k
    assert score(m, n) == pytest.approx(relative, abs=1e-9 * scale)


# ---------------------------------------------------------------- apply_rope itself


@pytest.mark.parametrize(
    ("dtype", "tol"),
    [(torch.float32, 1e-6), (torch.float16, 2.0**-11), (torch.bfloat16, 2.0**-8)],
)
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_low_precision_torch(dtype, tol, layout):
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.uniform(-1, 1, (2, 3, 7, 16))).to(dtype)
    pos = np.array([0, 1, 5, 100, 4096, 65537, 10**6])
    y = apply_rope(x, pos, 10000.0, layout)
    assert y.dtype == dtype and y.device == x.device and y.shape == x.shape
    expected = rope_2x2(x.double().numpy(), pos, 10000.0, layout)
    # Rounded once at the end: at most half an ulp of the result (relative tol) plus float32 noise.
    err = np.abs(y.double().numpy() - expected)
    assert np.all(err <= tol * np.maximum(np.abs(expected), 2.0**-14) + 1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_apply_rope_low_precision_numpy(dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (4, 6, 10)).astype(dtype)
    pos = np.arange(6) * 1000
    y = apply_rope(x, pos)
    assert isinstance(y, np.ndarray) and y.dtype == dtype
    expected = rope_2x2(x.astype(np.float64), pos)
    tol = 1e-6 if dtype == np.float32 else 2.0**-11
    assert np.all(np.abs(y - expected) <= tol * np.maximum(np.abs(expected), 2.0**-14) + 1e-6)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_accepts_views_and_float_positions(layout):
    x = torch.randn(3, 9, 13, dtype=torch.float64)[..., 1:9, 1:13]  # odd storage offset, strided
    pos = torch.arange(8, dtype=torch.float32) * 3  # whole numbers stored as floats
    expected = rope_2x2(x.numpy(), np.arange(8) * 3, layout=layout)
    np.testing.assert_allclose(apply_rope(x, pos, layout=layout).numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(
        apply_rope(x.transpose(0, 1).transpose(0, 1), pos, layout=layout).numpy(),
        expected,
        atol=1e-12,
    )
    rows_first = x.transpose(0, 1).contiguous().transpose(0, 1)  # same values, T-major strides
    assert not rows_first.is_contiguous()
    np.testing.assert_allclose(
        apply_rope(rows_first, pos, layout=layout).numpy(), expected, atol=1e-12
    )
    x32 = x.float()
    np.testing.assert_allclose(
        apply_rope(x32, pos, layout=layout).double().numpy(), expected, atol=2e-6
    )
    assert torch.equal(x32, x.float())  # the input is not modified


# ------------------------------------------------ half-layout blocks and the table cache


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("shape", [(0, 4, 8), (2, 0, 8), (3, 0, 2)])
def test_apply_rope_empty_inputs(layout, shape):
    pos = np.arange(shape[-2])
    for x in (np.zeros(shape), torch.zeros(shape), torch.zeros(shape, dtype=torch.bfloat16)):
        y = apply_rope(x, pos, layout=layout)
        assert type(y) is type(x) and tuple(y.shape) == shape and y.dtype == x.dtype


# ------------------------------------------------------------------- real peers


@pytest.mark.parametrize(("d", "base"), [(8, 10000.0), (64, 10000.0), (128, 500000.0), (32, 1e9)])
def test_half_layout_matches_hugging_face_float64(hf, d, base):
    """HF's apply_rotary_pos_emb with float64 cos/sin tables built here by the math module."""
    rng = np.random.default_rng(d)
    T = 11
    pos = rng.integers(0, 10**6, size=T)
    ang = np.array([[float(m) * th for th in freqs_math(d, base)] for m in pos])
    cos = torch.from_numpy(np.cos(np.concatenate([ang, ang], -1)))[None]  # (1, T, d)
    sin = torch.from_numpy(np.sin(np.concatenate([ang, ang], -1)))[None]
    q = torch.from_numpy(rng.standard_normal((1, 3, T, d)))
    k = torch.from_numpy(rng.standard_normal((1, 3, T, d)))
    q_hf, k_hf = hf.apply_rotary_pos_emb(q, k, cos, sin)
    np.testing.assert_allclose(apply_rope(q, pos, base, "half").numpy(), q_hf.numpy(), atol=1e-12)
    np.testing.assert_allclose(apply_rope(k, pos, base, "half").numpy(), k_hf.numpy(), atol=1e-12)


# ---------------------------------------------------------- partial rotation (rotary_dim)


def rope_partial(x, positions, base, layout, r):
    """The reference for rotary_dim = r: rope_2x2 on the first r coordinates (frequencies
    base**(-2i/r) from Python's math), the other coordinates copied."""
    x = np.asarray(x, dtype=np.float64)
    return np.concatenate((rope_2x2(x[..., :r], positions, base, layout), x[..., r:]), axis=-1)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(("d", "r"), [(8, 2), (8, 4), (12, 6), (16, 8), (96, 24), (10, 10)])
def test_partial_rotation_matches_reference(layout, d, r):
    rng = np.random.default_rng(d * 100 + r)
    x = rng.standard_normal((2, 3, 7, d))
    pos = rng.integers(-(10**6), 10**6, size=7)
    expected = rope_partial(x, pos, 500.0, layout, r)
    got = apply_rope(x, pos, 500.0, layout, rotary_dim=r)
    assert type(got) is np.ndarray and got.dtype == np.float64 and got.shape == x.shape
    np.testing.assert_allclose(got, expected, atol=1e-9)
    np.testing.assert_array_equal(got[..., r:], x[..., r:])  # passed through exactly
    t = torch.from_numpy(x)
    got_t = apply_rope(t, pos, 500.0, layout, rotary_dim=r)
    assert got_t.dtype == torch.float64 and got_t.shape == t.shape
    np.testing.assert_allclose(got_t.numpy(), expected, atol=1e-9)
    assert torch.equal(got_t[..., r:], t[..., r:])
    f32 = apply_rope(t.float(), pos, 500.0, layout, rotary_dim=r)
    assert f32.dtype == torch.float32 and f32.shape == t.shape
    assert np.abs(f32.double().numpy() - expected).max() < 1e-5 * np.abs(x).max()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotary_dim_of_the_whole_head_is_the_default(layout):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 5, 16))
    pos = [0, 7, -3, 10**5, 2**31]
    full = apply_rope(x, pos, layout=layout)
    for r in (None, 16, np.int64(16)):
        np.testing.assert_array_equal(apply_rope(x, pos, layout=layout, rotary_dim=r), full)
    t = torch.from_numpy(x).float()
    assert torch.equal(
        apply_rope(t, pos, layout=layout, rotary_dim=16), apply_rope(t, pos, layout=layout)
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_partial_rotation_keeps_scores_relative_and_is_differentiable(layout):
    """Partial rotation is RoPE whose last (d - r)/2 pairs have frequency 0: scores depend
    on n - m only, and the gradient is the inverse rotation of the rotated part."""
    rng = np.random.default_rng(12)
    d, r = 16, 4
    q, k = rng.standard_normal((2, d))
    s1 = (
        apply_rope(q[None], [40], rotary_dim=r, layout=layout)[0]
        @ apply_rope(k[None], [10], rotary_dim=r, layout=layout)[0]
    )
    s2 = (
        apply_rope(q[None], [10**6 + 30], rotary_dim=r, layout=layout)[0]
        @ apply_rope(k[None], [10**6], rotary_dim=r, layout=layout)[0]
    )
    assert abs(s1 - s2) < 1e-9
    x = torch.tensor(rng.standard_normal((2, 5, d)), requires_grad=True)
    pos = [0, 3, -7, 100, 10**6]
    y = apply_rope(x, pos, 10000.0, layout, rotary_dim=r)
    g = rng.standard_normal((2, 5, d))
    (y * torch.from_numpy(g)).sum().backward()
    expected = rope_partial(g, [-m for m in pos], 10000.0, layout, r)
    np.testing.assert_allclose(x.grad.numpy(), expected, atol=1e-12)


def _gpt_neox_config(heads: int, head: int, pct: float, base: float):
    """A one-layer GPT-NeoX config: ``heads`` heads of width ``head``, rotary_pct and
    rotary_emb_base as given."""
    from transformers import GPTNeoXConfig

    return one_layer_config(
        GPTNeoXConfig,
        hidden_size=heads * head,
        num_attention_heads=heads,
        rotary_pct=pct,
        rotary_emb_base=base,
    )


@pytest.mark.parametrize(
    ("head", "pct", "base"),
    [
        (96, 0.25, 10000.0),
        (128, 0.25, 10000.0),
        (32, 0.25, 10000.0),
        (40, 0.5, 500.0),
        (16, 1.0, 10000.0),
    ],
)
def test_partial_rotation_matches_gpt_neox_attention(monkeypatch, head, pct, base):
    """Hugging Face's GPTNeoXAttention on random weights: rope_lib's half layout with
    rotary_dim = int(rotary_pct * head) rotates q and k as its code path does (the inverse
    frequencies of GPTNeoXRotaryEmbedding, from the same number), and the attention output
    agrees.
    (96, 0.25) is GPT-NeoX-20B's head (6144 / 64) and fraction, (128, 0.25) Pythia 6.9B's."""
    from transformers.models.gpt_neox import modeling_gpt_neox as neox

    heads, N, batch = 3, 9, 2
    config = _gpt_neox_config(heads, head, pct, base)
    torch.manual_seed(head)
    attn = neox.GPTNeoXAttention(config, layer_idx=0).eval()
    r = attn.rotary_ndims
    assert r == int(head * pct)
    x = torch.randn(batch, N, heads * head)
    position_ids = torch.arange(N)[None].expand(batch, N)
    cos, sin = neox.GPTNeoXRotaryEmbedding(config)(x, position_ids)
    assert cos.shape[-1] == r  # the width apply_rotary_pos_emb rotates
    seen = spy_on_rotary(monkeypatch, neox)
    with torch.no_grad():
        out_hf, _ = attn(x, attention_mask=None, position_embeddings=(cos, sin))
        # q, k, v from the weights, as GPT-NeoX lays them out: per head [q | k | v]
        W, b = attn.query_key_value.weight, attn.query_key_value.bias
        qkv = (x @ W.T + b).view(batch, N, heads, 3 * head).transpose(1, 2)
        q, k, v = qkv.chunk(3, dim=-1)
        assert (q - seen["q"]).abs().max().item() < 1e-5
        pos = np.arange(N)
        q_rot = apply_rope(q, pos, base, "half", rotary_dim=r)
        k_rot = apply_rope(k, pos, base, "half", rotary_dim=r)
        scale = x.abs().max().item() * W.abs().max().item() * heads * head
        # HF's float32 tables at positions below 9: errors near 1e-7 of the entries
        assert (q_rot - seen["q_rot"]).abs().max().item() < 1e-6 * scale
        assert (k_rot - seen["k_rot"]).abs().max().item() < 1e-6 * scale
        weights = torch.softmax(q_rot @ k_rot.transpose(-1, -2) / head**0.5, dim=-1)
        ours = (weights @ v).transpose(1, 2).reshape(batch, N, heads * head)
        ours = ours @ attn.dense.weight.T + attn.dense.bias
        assert (ours - out_hf).abs().max().item() < 1e-5 * max(1.0, out_hf.abs().max().item())
        if r < head:  # the whole head rotated instead: not GPT-NeoX
            wrong = apply_rope(q, pos, base, "half")
            assert (wrong - seen["q_rot"]).abs().max().item() > 1e-2


def test_hugging_face_gpt_neox_takes_the_rotated_width_from_its_tables():
    """Chapter 5 and apply_rope's docstring: in Hugging Face's GPT-NeoX the inverse frequencies
    come from GPTNeoXRotaryEmbedding, with int(head_dim * partial_rotary_factor), and
    apply_rotary_pos_emb rotates as many coordinates as the tables have; the attention's
    rotary_ndims holds the same number but is not used (setting it changes nothing)."""
    from transformers.models.gpt_neox import modeling_gpt_neox as neox

    head, heads, N, base = 96, 2, 7, 10000.0

    r = int(head * 0.25)
    rotary = neox.GPTNeoXRotaryEmbedding(_gpt_neox_config(heads, head, 0.25, base))
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), freqs_math(r, base), rtol=1e-6)
    torch.manual_seed(1)
    attn = neox.GPTNeoXAttention(_gpt_neox_config(heads, head, 0.25, base), layer_idx=0).eval()
    assert attn.rotary_ndims == r
    x = torch.randn(1, N, heads * head)
    cos, sin = rotary(x, torch.arange(N)[None])
    assert cos.shape[-1] == r
    with torch.no_grad():
        out = attn(x, attention_mask=None, position_embeddings=(cos, sin))[0]
        attn.rotary_ndims = head  # the whole head, if forward read it
        assert torch.equal(attn(x, attention_mask=None, position_embeddings=(cos, sin))[0], out)
    # tables of another width: that many coordinates are rotated, whatever rotary_ndims says
    cos2, sin2 = neox.GPTNeoXRotaryEmbedding(_gpt_neox_config(heads, head, 0.5, base))(
        x, torch.arange(N)[None]
    )
    q = torch.randn(1, heads, N, head)
    q_hf, _ = neox.apply_rotary_pos_emb(q, q, cos2, sin2)
    ours = apply_rope(q, np.arange(N), base, "half", rotary_dim=head // 2)
    assert (q_hf - ours).abs().max().item() < 1e-5


@pytest.mark.parametrize(("head", "r"), [(64, 16), (256, 64), (32, 32)])
def test_partial_rotation_matches_gpt_j_attention(head, r):
    """Hugging Face's GPTJAttention (rotate_every_two, the interleaved layout, over the first
    rotary_dim coordinates; frequencies from rotary_dim, base 1e4): the queries and keys its
    code path hands to the attention product.  (256, 64) is GPT-J-6B's head and rotary_dim."""
    from transformers import GPTJConfig
    from transformers.models.gptj import modeling_gptj as gptj

    heads, N, batch = 2, 9, 2
    config = GPTJConfig(
        n_embd=heads * head,
        n_head=heads,
        rotary_dim=r,
        n_positions=64,
        n_layer=1,
        vocab_size=8,
        bos_token_id=None,
        eos_token_id=None,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(r)
    attn = gptj.GPTJAttention(config, layer_idx=0).eval()
    x = torch.randn(batch, N, heads * head)
    seen = {}
    real = attn._attn

    def spy(query, key, value, attention_mask=None):
        seen.update(q=query, k=key)
        return real(query, key, value, attention_mask)

    attn._attn = spy
    with torch.no_grad():
        attn(x, position_ids=torch.arange(N)[None].expand(batch, N))
        pos = np.arange(N)
        for name, proj in (("q", attn.q_proj), ("k", attn.k_proj)):
            y = (x @ proj.weight.T).view(batch, N, heads, head).transpose(1, 2)
            ours = apply_rope(y, pos, 10000.0, "interleaved", rotary_dim=r)
            assert (ours - seen[name]).abs().max().item() < 1e-5 * y.abs().max().item()
            if r < head:  # GPT-J's layout is interleaved, not half
                other = apply_rope(y, pos, 10000.0, "half", rotary_dim=r)
                assert (other - seen[name]).abs().max().item() > 1e-2


def test_rotary_dim_is_validated():
    x = np.zeros((4, 8))
    pos = np.arange(4)
    for bad in (3, 0, -2, 10, 1):
        with pytest.raises(ValueError, match=r"rotary_dim must be None .* 2 <= rotary_dim <= d"):
            apply_rope(x, pos, rotary_dim=bad)
    for bad in (4.0, "4", True, [4], 2.5, torch.tensor(4)):
        with pytest.raises(TypeError, match="rotary_dim"):
            apply_rope(x, pos, rotary_dim=bad)
    with pytest.raises(ValueError, match="rotary_dim"):
        apply_rope(torch.zeros(2, 4, 8), pos, rotary_dim=12)


@pytest.mark.parametrize(("d", "base"), [(16, 10000.0), (64, 10000.0), (128, 1000.0)])
def test_interleaved_matches_rotary_embedding_torch(d, base):
    from rotary_embedding_torch import RotaryEmbedding

    rng = np.random.default_rng(d)
    T = 8
    x = torch.from_numpy(rng.uniform(-1, 1, (2, 4, T, d))).float()
    peer = RotaryEmbedding(dim=d, theta=base).rotate_queries_or_keys(x, seq_dim=-2)
    ours = apply_rope(x, np.arange(T), base)
    assert (ours - peer).abs().max().item() < 1e-6
    shifted = RotaryEmbedding(dim=d, theta=base).rotate_queries_or_keys(x, seq_dim=-2, offset=3)
    assert (apply_rope(x, np.arange(3, 3 + T), base) - shifted).abs().max().item() < 1e-6


# ------------------------------------------------------------------------ layouts


# ----------------------------------------------------------------------- accuracy


# ------------------------------------------------------------- linear attention


def test_elu_feature_map():
    x = np.linspace(-5, 5, 101)
    expected = torch.nn.functional.elu(torch.from_numpy(x)).numpy() + 1.0
    np.testing.assert_allclose(elu_feature_map(x), expected, atol=1e-15)
    assert np.all(elu_feature_map(x) > 0)


def test_linear_attention_denominator_can_underflow_to_zero():
    """Chapters 4 and the docstrings of elu_feature_map: positive in exact arithmetic, but
    e^x underflows to 0 in float64, and the denominator of q = (5, -800), k = (-800, 5) is
    exactly 0; linear_attention then returns a non-finite output, with numpy's warning."""
    assert elu_feature_map(np.array([-800.0]))[0] == 0.0 < math.exp(-700)
    q, k = np.array([[5.0, -800.0]]), np.array([[-800.0, 5.0]])
    _, Z = linear_attention_weights(q, k, [0])
    assert Z[0, 0] == 0.0
    with pytest.warns(RuntimeWarning):
        out = linear_attention(q, k, np.ones((1, 1)), [0])
    assert not np.isfinite(out).any()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_linear_attention_matches_quadratic_route(causal, layout):
    rng = np.random.default_rng(6)
    T, d, dv = 7, 8, 3
    q, k, v = (
        rng.standard_normal((2, T, d)),
        rng.standard_normal((2, T, d)),
        rng.standard_normal((2, T, dv)),
    )
    pos = np.arange(T) * 5 + 2
    fq = np.where(q > 0, q + 1, np.exp(q))
    fk = np.where(k > 0, k + 1, np.exp(k))
    expected = np.zeros((2, T, dv))
    for bt in range(2):
        for m in range(T):
            Rm = rotation_2x2(pos[m], d, 10000.0, layout)
            num, den = np.zeros(dv), 0.0
            for n in range(T if not causal else m + 1):
                Rn = rotation_2x2(pos[n], d, 10000.0, layout)
                num += ((Rm @ fq[bt, m]) @ (Rn @ fk[bt, n])) * v[bt, n]
                den += fq[bt, m] @ fk[bt, n]
            expected[bt, m] = num / den
    got = linear_attention(q, k, v, pos, layout=layout, causal=causal)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_linear_attention_numerator_is_relative():
    rng = np.random.default_rng(7)
    T, d = 9, 16
    q, k, v = rng.standard_normal((T, d)), rng.standard_normal((T, d)), rng.standard_normal((T, 4))
    pos = np.arange(T)
    N, D = linear_attention_weights(q, k, pos)
    N_shift, D_shift = linear_attention_weights(q, k, pos + 1000)
    np.testing.assert_allclose(N_shift, N, atol=1e-11)
    np.testing.assert_array_equal(D_shift, D)
    np.testing.assert_allclose(
        linear_attention(q, k, v, pos + 1000), linear_attention(q, k, v, pos), atol=1e-11
    )
    # Same content at every position: the numerator is a Toeplitz matrix (constant diagonals).
    Nc, _ = linear_attention_weights(np.tile(q[0], (T, 1)), np.tile(k[0], (T, 1)), pos)
    for offset in range(-T + 1, T):
        diag = np.diagonal(Nc, offset)
        np.testing.assert_allclose(diag, diag[0], atol=1e-12)
    assert np.all(D > 0)


# ------------------------------------------------------------------------ autograd


GRAD_POSITIONS = [0, 3, -7, 100, 10**6]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_gradcheck(layout):
    (x,) = requires_grad(np.random.default_rng(20).standard_normal((2, 5, 8)))
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, GRAD_POSITIONS, 500.0, layout), (x,))
    assert torch.autograd.gradgradcheck(
        lambda t: apply_rope(t, GRAD_POSITIONS, 500.0, layout), (x,)
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_apply_rope_gradient_is_the_inverse_rotation(layout, dtype):
    """d/dx <g, R_m x> = R_m^T g = R_{-m} g, computed here with the 2x2 route at -m."""
    rng = np.random.default_rng(21)
    x = torch.tensor(rng.standard_normal((3, 5, 16)), dtype=dtype, requires_grad=True)
    g = rng.standard_normal((3, 5, 16))
    y = apply_rope(x, GRAD_POSITIONS, 10000.0, layout)
    assert y.requires_grad and y.dtype == dtype
    (y * torch.tensor(g, dtype=dtype)).sum().backward()
    expected = rope_2x2(g, [-m for m in GRAD_POSITIONS], 10000.0, layout)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(x.grad.double().numpy(), expected, atol=tol)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_forward_mode_and_vmap(layout):
    """The tangent of a linear map is the map of the tangent: torch.func.jvp gives the
    explicit route applied to the tangent; torch.func.vmap gives the unbatched result."""
    rng = np.random.default_rng(25)
    x, v = (torch.from_numpy(rng.standard_normal((3, 5, 8))) for _ in range(2))
    y, dy = torch.func.jvp(lambda t: apply_rope(t, GRAD_POSITIONS, 500.0, layout), (x,), (v,))
    np.testing.assert_allclose(y.numpy(), rope_2x2(x.numpy(), GRAD_POSITIONS, 500.0, layout))
    np.testing.assert_allclose(dy.numpy(), rope_2x2(v.numpy(), GRAD_POSITIONS, 500.0, layout))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's note on a slow batching rule
        batched = torch.func.vmap(lambda t: apply_rope(t, GRAD_POSITIONS, 500.0, layout))(x)
    np.testing.assert_allclose(batched.numpy(), y.numpy(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_grad_and_inference_paths_agree(layout):
    x = torch.randn(2, 4, 6, 32)
    pos = np.arange(6) * 1000
    fast = apply_rope(x, pos, layout=layout)
    with_grad = apply_rope(x.clone().requires_grad_(), pos, layout=layout)
    with torch.no_grad():
        no_grad = apply_rope(x.clone().requires_grad_(), pos, layout=layout)
    assert with_grad.grad_fn is not None and no_grad.grad_fn is None
    torch.testing.assert_close(with_grad.detach(), fast, rtol=0, atol=1e-6)
    assert torch.equal(no_grad, fast)
    expected = rope_2x2(x.double().numpy(), pos, 10000.0, layout)
    assert np.abs(with_grad.detach().double().numpy() - expected).max() < 2e-6


def test_apply_rope_gradient_through_half_precision():
    x = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
    apply_rope(x, np.arange(4), layout="half").float().sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.bfloat16
    expected = rope_2x2(np.ones((4, 8)), -np.arange(4), 10000.0, "half")
    assert np.abs(x.grad.double().numpy() - expected).max() < 2.0**-7


def _attention(x, W_q, W_k, W_v, rotate):
    """One causal attention head with RoPE on q and k: softmax(q_r k_r^T / sqrt d) v."""
    q, k, v = rotate(x @ W_q.T), rotate(x @ W_k.T), x @ W_v.T
    T, d = q.shape
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    scores = (q @ k.T / math.sqrt(d)).masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _attention_loss(x, W_q, W_k, W_v, target, rotate):
    return ((_attention(x, W_q, W_k, W_v, rotate) - target) ** 2).mean()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_float32_training_step_matches_explicit_matrix_reference(layout):
    """Gradients of a tiny model whose q, k go through apply_rope in float32 equal those of
    the same model in float64 with explicit 2x2-route matrices; Adam then lowers the loss."""
    rng = np.random.default_rng(24)
    T, d, d_model, base = 12, 16, 24, 10000.0
    pos = np.arange(T) * 37 + 5
    x64 = torch.tensor(rng.standard_normal((T, d_model)))
    W = [0.3 * rng.standard_normal((d, d_model)) for _ in range(2)]
    Wv64 = torch.tensor(0.3 * rng.standard_normal((d, d_model)))
    teacher = [torch.tensor(0.3 * rng.standard_normal((d, d_model))) for _ in range(2)]
    R = torch.tensor(np.stack([rotation_2x2(m, d, base, layout) for m in pos]))  # (T, d, d)

    def explicit(y):
        return torch.einsum("tij,tj->ti", R.to(y.dtype), y)

    def ours(y):
        return apply_rope(y, pos, base, layout)

    target = _attention(x64, teacher[0], teacher[1], Wv64, explicit)

    def grads(dtype, rotate):
        Wq, Wk = (torch.tensor(w, dtype=dtype, requires_grad=True) for w in W[:2])
        loss = _attention_loss(x64.to(dtype), Wq, Wk, Wv64.to(dtype), target.to(dtype), rotate)
        loss.backward()
        return loss.item(), Wq.grad.double(), Wk.grad.double()

    loss_ref, gq_ref, gk_ref = grads(torch.float64, explicit)
    loss_32, gq_32, gk_32 = grads(torch.float32, ours)
    loss_64, gq_64, gk_64 = grads(torch.float64, ours)
    assert abs(loss_32 - loss_ref) <= 1e-6 * loss_ref  # measured 2e-8 to 7e-8
    assert abs(loss_64 - loss_ref) <= 1e-13 * loss_ref
    for got, got_64, ref in ((gq_32, gq_64, gq_ref), (gk_32, gk_64, gk_ref)):
        assert (got - ref).abs().max() <= 1e-5 * ref.abs().max()  # measured 3e-7 to 6e-7
        assert (got_64 - ref).abs().max() <= 1e-12 * ref.abs().max()

    Wq, Wk = (torch.tensor(w, dtype=torch.float32, requires_grad=True) for w in W[:2])
    opt = torch.optim.Adam([Wq, Wk], lr=3e-2)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = _attention_loss(x64.float(), Wq, Wk, Wv64.float(), target.float(), ours)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert np.isfinite(losses).all()


# ----------------------------------------------------------------------- figures


# -------------------------------------------------------------------- bad input


def test_apply_rope_bad_input():
    x = np.zeros((4, 8))
    with pytest.raises(ValueError, match="x.shape"):
        apply_rope(np.zeros((4, 7)), np.arange(4))
    with pytest.raises(ValueError, match="base"):
        apply_rope(x, np.arange(4), base=1.0)
    with pytest.raises(ValueError, match="base"):
        apply_rope(x, np.arange(4), base=0.5)
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, np.arange(3))
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, [0])  # never broadcast a single position
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, [0, 1, 2.5, 3])
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, [0, 1, np.nan, 3])
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, [0, 1, np.inf, 3])
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, np.arange(4)[None])
    with pytest.raises(ValueError, match="positions"):
        apply_rope(x, torch.tensor([0.0, 0.5, 1.0, 2.0]))
    with pytest.raises(ValueError, match="x"):
        apply_rope(np.zeros(8), [0])
    with pytest.raises(ValueError, match="layout"):
        apply_rope(x, np.arange(4), layout="neox")
    with pytest.raises(TypeError, match="x"):
        apply_rope(np.zeros((4, 8), dtype=np.int64), np.arange(4))
    with pytest.raises(TypeError, match="x"):
        apply_rope(torch.zeros((4, 8), dtype=torch.int32), np.arange(4))
    with pytest.raises(TypeError, match="x"):
        apply_rope(torch.zeros((4, 8), dtype=torch.complex64), np.arange(4))
    with pytest.raises(TypeError, match="x"):
        apply_rope(np.zeros((4, 8), dtype=bool), np.arange(4))


def test_numeric_routes_do_not_load_sympy_or_matplotlib():
    """rotation imports sympy and matplotlib lazily: the numeric routes never load them."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, numpy as np, rope_lib\n"
        "rope_lib.apply_rope(np.ones((3, 8)), [0, 1, 2], layout='half')\n"
        "rope_lib.rotation_matrix(3, 8); rope_lib.cos_sin_tables([0, 1], 8)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout.splitlines()[-1])}
    assert not loaded & {"sympy", "matplotlib", "mpmath"}


# --------------------------------------------------------------------- fuzz regressions


@pytest.mark.parametrize("m", ["1+", "m n", "", " ", "2*m", "m)"])
def test_symbolic_rotation_matrix_refuses_a_str_that_names_no_symbol(m):
    """Fuzz item 11: symbolic_rotation_matrix("1+", 2) built a symbol named "1+"; a str
    must name a symbol (a Python identifier), as in symbolic_encoding."""
    with pytest.raises(ValueError, match=r"^m must be a sympy expression or a str that names"):
        rope_lib.symbolic_rotation_matrix(m, 2)
    R = rope_lib.symbolic_rotation_matrix("m_1", 2)
    assert R.free_symbols == {sp.Symbol("m_1", real=True), sp.Symbol("theta_0", real=True)}


NONFINITE_ROUTES = ["numpy", "torch", "torch grad", "half numpy", "half torch", "half grad"]


@pytest.mark.parametrize("route", NONFINITE_ROUTES)
def test_apply_rope_non_finite_inputs_propagate_pairwise(route):
    """Fuzz item 18, documented behaviour: apply_rope does not scan x for nan or inf (no
    extra pass on the training path); an inf at position 0 gives (inf, nan) in its pair
    (sin 0 = 0 and inf * 0 = nan), a nan makes its pair nan, other pairs and rows are the
    finite rotation."""
    layout = "half" if route.startswith("half") else "interleaved"
    (a0, b0), (a1, b1) = pairs(4, layout)[:2]
    x = np.random.default_rng(0).standard_normal((3, 4))
    x[0, a0] = np.inf
    x[1, b1] = np.nan
    pos = [0, 5, 9]
    if "numpy" in route:
        with np.errstate(invalid="ignore"):
            out = apply_rope(x, pos, layout=layout)
    else:
        xt = torch.tensor(x, requires_grad="grad" in route)
        out = apply_rope(xt, pos, layout=layout).detach().numpy()
    assert out[0, a0] == np.inf and np.isnan(out[0, b0])
    assert np.isnan(out[1, a1]) and np.isnan(out[1, b1])
    finite = rope_2x2(np.nan_to_num(x, nan=0.0, posinf=0.0), pos, layout=layout)
    mask = np.ones_like(out, dtype=bool)
    mask[0, [a0, b0]] = mask[1, [a1, b1]] = False
    np.testing.assert_allclose(out[mask], finite[mask], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("q_or_k", ["q", "k"])
@pytest.mark.parametrize("weights", [False, True])
def test_linear_attention_names_non_finite_q_or_k(q_or_k, weights):
    """Fuzz item 21: a nan in q (or k) was refused as "x must be finite", x being the
    argument of the feature map; the refusal names q or k."""
    q, k = np.ones((2, 4)), np.ones((2, 4))
    (q if q_or_k == "q" else k)[1, 2] = np.nan
    with pytest.raises(ValueError, match=rf"^{q_or_k} must be finite"):
        if weights:
            linear_attention_weights(q, k, [0, 1])
        else:
            linear_attention(q, k, np.ones((2, 3)), [0, 1])


def test_other_bad_input():
    with pytest.raises(ValueError, match="d"):
        rotation_matrix(1, 7)
    with pytest.raises(ValueError, match="base"):
        rotation_matrix(1, 8, base=1.0)
    with pytest.raises(ValueError, match="m"):
        rotation_matrix(1.5, 8)
    with pytest.raises(ValueError, match="m"):
        rotation_matrix(float("nan"), 8)
    with pytest.raises(ValueError, match="layout"):
        rotation_matrix(1, 8, layout="x")
    with pytest.raises(ValueError, match="v"):
        linear_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((2, 4)), np.arange(3))
    with pytest.raises(ValueError, match="positions"):
        linear_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), np.arange(2))
    with pytest.raises(TypeError, match="x"):
        elu_feature_map(None)
    q = np.ones((3, 4))
    for flag in ("no", 0, 1, None):
        with pytest.raises(TypeError, match="causal"):
            linear_attention(q, q, np.ones((3, 2)), np.arange(3), causal=flag)
    with pytest.raises(TypeError, match="symbol"):
        rope_lib.symbolic_rotation_matrix("m", 4, symbol="a:b")


def test_size_limits_are_checked_before_allocating():
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        rotation_matrix(0, 2**16)  # 2**32 entries
    with pytest.raises(ValueError, match=r"\bd\b"):
        rope_lib.symbolic_rotation_matrix("m", 256)
    q = np.ones((1, 4096, 256))
    with pytest.raises(ValueError, match="causal"):
        linear_attention(q, q, np.ones((1, 4096, 256)), np.arange(4096), causal=True)
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        linear_attention_weights(np.ones((16, 4096, 4)), np.ones((16, 4096, 4)), np.arange(4096))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_float32_inputs_are_rotated_in_float32_arithmetic(layout: str) -> None:
    # The promise: float64 angles and tables, cast once to float32, then the rotation's
    # two products and one sum per coordinate in float32, as the peers compute it.  Tables
    # from mpmath (50 digits) rounded to float32, the arithmetic written out here; a route
    # that computed in float64 and rounded at the end differs in some of these 2048 entries.
    rng = np.random.default_rng(7)
    N, d, base = 64, 32, 10000.0
    x = rng.standard_normal((N, d)).astype(np.float32)
    positions = np.arange(N) * 37 + 5
    mpmath.mp.dps = 50
    angles = [
        [mpmath.mpf(int(m)) * mpmath.power(base, -mpmath.mpf(2 * i) / d) for i in range(d // 2)]
        for m in positions
    ]
    c = np.array([[float(mpmath.cos(a)) for a in row] for row in angles]).astype(np.float32)
    s = np.array([[float(mpmath.sin(a)) for a in row] for row in angles]).astype(np.float32)
    if layout == "interleaved":
        x1, x2 = x[:, 0::2], x[:, 1::2]
    else:
        x1, x2 = x[:, : d // 2], x[:, d // 2 :]
    o1 = x1 * c - x2 * s  # float32 * float32 -> float32, each product rounded once
    o2 = x1 * s + x2 * c
    expected = np.empty_like(x)
    if layout == "interleaved":
        expected[:, 0::2], expected[:, 1::2] = o1, o2
    else:
        expected[:, : d // 2], expected[:, d // 2 :] = o1, o2
    got = apply_rope(x, positions, base, layout=layout)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    # the same data in float64 arithmetic is not bit-equal: the check can tell the two apart
    wide = (x1.astype(np.float64) * c - x2.astype(np.float64) * s).astype(np.float32)
    assert np.any(wide != o1)


# ------------------------------------------- mutation testing (issue 22): value checks


def _generator(d: int, base: float, layout: str) -> np.ndarray:
    """The skew-symmetric A with R_m = expm(m A): A[b_i, a_i] = theta_i = -A[a_i, b_i]."""
    A = np.zeros((d, d))
    for (a, b), th in zip(pairs(d, layout), freqs_math(d, base), strict=True):
        A[b, a], A[a, b] = th, -th
    return A


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("d", [2, 6])
def test_rotation_matrices_are_the_exponential_of_their_generator(layout, d):
    """R_m = expm(m A) (scipy's Pade route, not cos/sin tables), for rotation_matrix at its
    default base 10^4 and for symbolic_rotation_matrix with its symbols substituted."""
    from scipy.linalg import expm

    A = _generator(d, 10000.0, layout)
    for m in (0, 1, -3, 7):
        expected = expm(m * A)
        np.testing.assert_allclose(rotation_matrix(m, d, layout=layout), expected, atol=1e-13)
        R = rope_lib.symbolic_rotation_matrix("m", d, layout=layout)
        assert R.shape == (d, d)
        values = {sp.Symbol("m", real=True): m}
        values |= {
            sp.Symbol(f"theta_{i}", real=True): th for i, th in enumerate(freqs_math(d, 10000.0))
        }
        np.testing.assert_allclose(
            np.array(R.subs(values).evalf(), dtype=np.float64), expected, atol=1e-13
        )


def test_symbolic_rotation_matrix_accepts_d_up_to_128():
    # The documented range is 2 <= d <= 128: the largest one is accepted, 130 refused.
    R = rope_lib.symbolic_rotation_matrix("m", 128)
    assert R.shape == (128, 128) and R[127, 126] == sp.sin(
        sp.Symbol("m", real=True) * sp.Symbol("theta_63", real=True)
    )
    with pytest.raises(ValueError, match="d must be at most 128"):
        rope_lib.symbolic_rotation_matrix("m", 130)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_linear_attention_weights_written_out(layout):
    """C[b, m, n] = (R_m psi(q_m))^T (R_n psi(k_n)) and Z = psi(q_m)^T psi(k_n), over a batch
    axis, at the default base 10^4, with the 2x2 route and psi written out here; and
    linear_attention's default is the non-causal sum."""
    rng = np.random.default_rng(11)
    B, T, d, dv = 2, 5, 6, 3
    q, k, v = (rng.standard_normal((B, T, e)) for e in (d, d, dv))
    pos = np.array([0, 3, -2, 9, 4])
    fq = np.where(q > 0, q + 1, np.exp(q))
    fk = np.where(k > 0, k + 1, np.exp(k))
    C = np.zeros((B, T, T))
    for b in range(B):
        for m in range(T):
            for n in range(T):
                Rm = rotation_2x2(pos[m], d, 10000.0, layout)
                Rn = rotation_2x2(pos[n], d, 10000.0, layout)
                C[b, m, n] = (Rm @ fq[b, m]) @ (Rn @ fk[b, n])
    Z = np.einsum("bmd,bnd->bmn", fq, fk)
    got_C, got_Z = linear_attention_weights(q, k, pos, layout=layout)
    np.testing.assert_allclose(got_C, C, atol=1e-12)
    np.testing.assert_allclose(got_Z, Z, atol=1e-12)
    # torch inputs (even ones that require grad) are converted, with the same values
    tq, tk = requires_grad(q, k)
    got_C, got_Z = linear_attention_weights(tq, tk, pos, layout=layout)
    np.testing.assert_allclose(got_C, C, atol=1e-12)
    expected = (C @ v) / Z.sum(-1)[..., None]
    np.testing.assert_allclose(linear_attention(q, k, v, pos, layout=layout), expected, atol=1e-12)


def _refusals():
    from rope_lib.implementations import apply_rotate_half, rotate_half

    x, t = np.ones((2, 4)), torch.ones(2, 4, dtype=torch.float64)
    ragged = [[1.0], [1.0, 2.0]]
    return [
        # (call, exception, the message from its start: names the argument and the value)
        (lambda: apply_rope(x, [0, 1], layout="x"), ValueError, "layout must be one of"),
        (
            lambda: apply_rope(np.ones((3, 4)), [0, 1]),
            ValueError,
            r"positions must have one entry per row of x along axis -2: got 2 positions "
            r"for x of shape \(3, 4\)",
        ),
        (lambda: apply_rope(x, [[0], [1]]), ValueError, r"positions must be a 1-D array"),
        (lambda: apply_rope(x, [0, 1], rotary_dim=2.5), TypeError, r"rotary_dim .* got 2\.5 of"),
        (
            lambda: apply_rope(ragged, [0, 1]),
            TypeError,
            r"x must be a floating-point array, got \[\[1\.0\], \[1\.0, 2\.0\]\] of type list",
        ),
        (
            lambda: apply_rope(x.astype(int), [0, 1]),
            TypeError,
            r"x must .* got array\(\[\[1, 1, 1, 1\],",
        ),
        (
            lambda: apply_rope(np.ones(4), [0]),
            ValueError,
            r"x must have at least 2 axes \(\.\.\., N, d\): ",
        ),
        (
            lambda: rotate_half(np.float64(1.0)),
            ValueError,
            r"x must have at least 1 axes \(\.\.\., d\), got shape \(\)$",
        ),
        (lambda: rotation_matrix([1], 4), ValueError, r"m must be a 0-D array"),
        (lambda: rotation_matrix(1.5, 4), ValueError, r"m must be"),
        (
            lambda: apply_rotate_half(x, t, t),
            TypeError,
            r"cos must be a floating-point numpy array, like x, got tensor\(",
        ),
        (
            lambda: apply_rotate_half(t, x, x),
            TypeError,
            r"cos must be a floating-point torch tensor, like x, got array\(",
        ),
        (
            lambda: apply_rotate_half(t, t.long(), t),
            TypeError,
            r"cos must be a floating-point tensor, got dtype torch.int64$",
        ),
        (
            lambda: apply_rotate_half(t, t + 0j, t),
            TypeError,
            r"cos must be a floating-point tensor, got dtype torch.complex128$",
        ),
        (
            lambda: apply_rotate_half(x, ragged, x),
            TypeError,
            r"cos must be a floating-point array, got \[\[1\.0\], \[1\.0, 2\.0\]\] of type list$",
        ),
        (
            lambda: apply_rotate_half(x, [[1, 2, 3, 4]], x),
            TypeError,
            r"cos must be a floating-point array, got \[\[1, 2, 3, 4\]\] of type list$",
        ),
        *[
            (
                lambda s=s: apply_rotate_half(x, np.ones(s), x),
                ValueError,
                r"cos must have shape \(N, d\) \(or any shape that broadcasts to x's \(2, 4\) "
                rf"with the same last axis\), got {re.escape(str(s))}$",
            )
            for s in [(3, 2, 4), (3, 4), (2, 1), (4, 2), ()]
        ],
        (
            lambda: linear_attention(np.ones((3, 4), int), x, x, [0, 1]),
            TypeError,
            r"q must be a floating-point array",
        ),
        (
            lambda: linear_attention(np.ones((3, 4)), np.ones((3, 4), int), x, [0, 1]),
            TypeError,
            r"k must be a floating-point array",
        ),
        (
            lambda: linear_attention_weights(np.ones((3, 4), int), x, [0, 1]),
            TypeError,
            r"q must be a floating-point array",
        ),
        (
            lambda: linear_attention(np.ones((3, 4)), x, x, [0, 1, 2]),
            ValueError,
            r"q and k must have the same shape, got \(3, 4\) and \(2, 4\)$",
        ),
        (
            lambda: linear_attention(np.ones((2, 3, 4)), np.ones((2, 3, 4)), x, [0, 1, 2]),
            ValueError,
            r"v must have shape \(\.\.\., N, d_v\) matching q's \(2, 3\), got \(2, 4\)$",
        ),
        (lambda: linear_attention(x, x, [["a"]], [0, 1]), TypeError, r"v must be real numbers"),
        (lambda: linear_attention(x, x, x, [0, 1], causal=1), TypeError, r"causal must be"),
        (lambda: elu_feature_map(None), TypeError, r"x must be"),
        (
            lambda: rope_lib.symbolic_rotation_matrix(3, 4),
            TypeError,
            r"m must be a sympy expression or a str, got 3 of type int$",
        ),
        (
            lambda: rope_lib.symbolic_rotation_matrix("m", 4, symbol=3),
            TypeError,
            r"symbol must .* got 3 of type int$",
        ),
    ]


@pytest.mark.parametrize("case", range(len(_refusals())))
def test_refusals_name_the_argument_and_the_value(case):
    """Each refusal of this module's checks, from the start of its message (the argument's
    name first, then what it accepts and the value received).  tests/test_api.py holds the
    same contract for every public function, but rotation.py's mutants run against this file
    only (tools/mutation.py), so its own checks are pinned here."""
    call, error, message = _refusals()[case]
    with pytest.raises(error, match="^" + message):
        call()


def test_valid_tables_are_accepted_in_every_broadcasting_shape():
    # apply_rotate_half with tables of shape (N, d), (d,) and (1, d), over a 3-D x, numpy and
    # torch: x * cos + rotate_half(x) * sin written out on the two halves.
    from rope_lib.implementations import apply_rotate_half

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4))
    for shape in [(3, 4), (4,), (1, 4)]:
        c, s = rng.standard_normal(shape), rng.standard_normal(shape)
        cb, sb = np.broadcast_to(c, x.shape), np.broadcast_to(s, x.shape)
        expected = np.concatenate(
            (
                x[..., :2] * cb[..., :2] - x[..., 2:] * sb[..., :2],
                x[..., 2:] * cb[..., 2:] + x[..., :2] * sb[..., 2:],
            ),
            axis=-1,
        )
        np.testing.assert_allclose(apply_rotate_half(x, c, s), expected, rtol=1e-15)
        got = apply_rotate_half(*(torch.from_numpy(np.array(a)) for a in (x, c, s)))
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-15)


def test_size_limits_sit_exactly_at_max_elements(size_limit):
    """Every size check of this module counts the result it guards, exactly: at
    MAX_ELEMENTS the call goes through, one below it is refused with the count."""
    x = np.ones((5, 8))
    size_limit(
        20,
        lambda: apply_rope(x, np.arange(5)),
        r"the cos/sin tables of 5 positions x d/2 = 4 pairs would have 20 elements, more than "
        r"rope_lib's MAX_ELEMENTS = 19 \(1 GiB of float64\); pass fewer positions or a smaller d$",
    )
    size_limit(
        10,
        lambda: apply_rope(x, np.arange(5), rotary_dim=4),
        r"the cos/sin tables of 5 positions x d/2 = 2 pairs would have 10 elements",
    )
    size_limit(
        16,
        lambda: rotation_matrix(1, 4),
        r"the rotation matrices R_m, shape \(N, d, d\) = \(1, 4, 4\), would have 16 elements, .*; "
        r"use apply_rope, which never builds them, or a smaller d$",
    )
    q = np.ones((2, 5, 4))
    size_limit(
        100,
        lambda: linear_attention_weights(q, q, np.arange(5)),
        r"the weight matrices of shape \(\.\.\., N, N\) with N = 5 \(q of shape \(2, 5, 4\)\) "
        r"would have 100 elements, .*; use linear_attention, which never builds them$",
    )
    size_limit(
        120,
        lambda: linear_attention(q, q, np.ones((2, 5, 3)), np.arange(5), causal=True),
        r"the causal prefix sums of shape \(\.\.\., N, d, d_v\) = \(2, 5, 4, 3\) would have 120 "
        r"elements, .*; use causal=False, or fewer positions$",
    )
