"""Tests of rope_lib.implementations (chapter 5): the teaching routes (explicit matrices, LLaMA's
complex numbers, rotate_half), the layouts and checkpoint conversion, and the accuracy of the
angle tables.

Expected values come from routes independent of the code under test: ``rope_2x2`` and
``mp_tables`` (tests/peers.py: explicit 2x2 rotations with Python's ``math``, and mpmath at 30
digits), and real peers: Hugging Face transformers' Llama, GPT-NeoX and GPT-J code and its
checkpoint converter's permutation.
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lib import (
    apply_rope,
    apply_rope_matrix,
    apply_rope_refusals,
    apply_rotate_half,
    cos_sin_tables,
    float32_angle_error,
    layout_permutation,
    llama_apply_rotary_emb,
    llama_precompute_freqs_cis,
    permute_qk_weight,
    qk_scores,
    rotate_half,
    rotate_half_cos_sin,
    rotation_matrix,
    score_error,
    table_error,
)

from .peers import (
    bases,
    even_d,
    freqs_math,
    mp_tables,
    new_tensors,
    one_layer_config,
    pairs,
    positions_st,
    requires_grad,
    rope_2x2,
    rotation_2x2,
    spy_on_rotary,
)


def hf_converter_permute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The row permutation of Hugging Face's LLaMA checkpoint converter (Meta -> HF)."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def _lib_table_error_mp(m: int, d: int, base: float) -> float:
    """Largest |table - exact| of the "rope_lib" tables at position m, exact = mpmath at 50
    digits (the float32 table values are compared in mpmath, not rounded first)."""
    c, s = cos_sin_tables([m], d, base, "rope_lib")
    with mpmath.workdps(50):
        err = mpmath.mpf(0)
        for i in range(d // 2):
            angle = mpmath.mpf(m) * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / d)
            err = max(
                err,
                abs(mpmath.mpf(float(c[0, i])) - mpmath.cos(angle)),
                abs(mpmath.mpf(float(s[0, i])) - mpmath.sin(angle)),
            )
        return float(err)


def round_to_bfloat16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even) by bit manipulation."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def _float32_recipe_angles(pos: np.ndarray, d: int, base: float):
    """The usual float32 recipe, from torch: its inverse frequencies theta~ (a float32 tensor)
    and its angles m theta~ (the float32 product, returned as float64)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angle32 = (torch.from_numpy(pos).float()[:, None] * inv_freq[None, :]).double().numpy()
    return inv_freq, angle32


def _mp_angles(pos: np.ndarray, d: int, base: float) -> np.ndarray:
    """The exact angles m base^(-2i/d), from mpmath at 40 digits, rounded to float64."""
    with mpmath.workdps(40):
        return np.array(
            [
                [
                    float(mpmath.mpf(int(m)) * mpmath.power(base, mpmath.mpf(-2 * i) / d))
                    for i in range(d // 2)
                ]
                for m in pos
            ]
        )


def _hf_score_error(hf, pos: np.ndarray, key_pos: np.ndarray, d: int, base: float) -> np.ndarray:
    """What score_error(..., "float32") promises, through Hugging Face's real pipeline: on
    score_error's documented draws (8 float32 query/key pairs from default_rng(0)), the largest
    |HF score - exact float64 score| / (|q| |k|) at each query position, the key at key_pos."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((8, pos.size, d)).astype(np.float32)
    k = rng.standard_normal((8, pos.size, d)).astype(np.float32)
    emb = hf.make_rotary(d, base)
    qt, kt = torch.from_numpy(q), torch.from_numpy(k)
    cq, sq = emb(qt, torch.from_numpy(pos)[None])
    ck, sk = emb(kt, torch.from_numpy(key_pos)[None])
    q_hf, _ = hf.apply_rotary_pos_emb(qt, qt, cq[0], sq[0], unsqueeze_dim=0)
    _, k_hf = hf.apply_rotary_pos_emb(kt, kt, ck[0], sk[0], unsqueeze_dim=0)
    approx = (q_hf * k_hf).sum(-1).double().numpy()
    exact = (rope_2x2(q, pos, base, "half") * rope_2x2(k, key_pos, base, "half")).sum(-1)
    norms = np.linalg.norm(q.astype(float), axis=-1) * np.linalg.norm(k.astype(float), axis=-1)
    return (np.abs(approx - exact) / norms).max(axis=0)


@given(m=positions_st, d=even_d, base=bases, seed=st.integers(0, 2**32 - 1))
def test_layout_equivalence(m, d, base, seed):
    x = np.random.default_rng(seed).standard_normal((2, 3, d))
    p = layout_permutation(d)
    pos = [m, m + 1, -m]
    np.testing.assert_allclose(
        apply_rope(x[..., p], pos, base, "half"), apply_rope(x, pos, base)[..., p], atol=1e-12
    )
    P = np.eye(d)[p]  # (P x) = x[p]
    np.testing.assert_allclose(
        rotation_matrix(m, d, base, "half"), P @ rotation_matrix(m, d, base) @ P.T, atol=1e-15
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("shape", [(5, 8), (2, 5, 8), (2, 3, 5, 4), (1, 2, 3, 5, 2)])
def test_apply_rope_float64_matches_explicit_route(shape, layout):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    pos = rng.integers(-3000, 3000, size=shape[-2])
    expected = rope_2x2(x, pos, 500.0, layout)
    got = apply_rope(x, pos, 500.0, layout)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == shape
    np.testing.assert_allclose(got, expected, atol=1e-12)
    got_t = apply_rope(torch.from_numpy(x), torch.from_numpy(pos), 500.0, layout)
    assert isinstance(got_t, torch.Tensor) and got_t.dtype == torch.float64
    np.testing.assert_allclose(got_t.numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(apply_rope_matrix(x, pos, 500.0, layout), expected, atol=1e-12)


@pytest.mark.parametrize(("d", "base"), [(16, 10000.0), (128, 10000.0), (128, 500000.0)])
def test_half_layout_matches_hugging_face_float32(hf, d, base):
    """The whole HF pipeline (LlamaRotaryEmbedding tables, float32) at small positions."""
    rng = np.random.default_rng(d + 1)
    T = 8  # HF's own float32 angle error grows like 6e-8 * position; keep it below 1e-6
    q = torch.from_numpy(rng.uniform(-1, 1, (2, 4, T, d))).float()
    cos, sin = hf.make_rotary(d, base)(q, torch.arange(T)[None])
    q_hf, _ = hf.apply_rotary_pos_emb(q, q, cos, sin)
    ours = apply_rope(q, torch.arange(T), base, "half")
    assert ours.dtype == torch.float32
    assert (ours - q_hf).abs().max().item() < 1e-6
    # Same peer arithmetic, tables from float64 angles: both at float32 round-off everywhere.
    pos = np.array([3, 1000, 77777, 10**6, 10**7, 5, 6, 7])
    c, s = (torch.from_numpy(t).float() for t in cos_sin_tables(pos, d, base, "float64"))
    q_hf2, _ = hf.apply_rotary_pos_emb(
        q, q, torch.cat((c, c), -1)[None], torch.cat((s, s), -1)[None]
    )
    assert (apply_rope(q, pos, base, "half") - q_hf2).abs().max().item() < 1e-6


def test_teaching_routes_equal_hugging_face_exactly(hf):
    x = torch.randn(2, 3, 6, 32)
    torch.testing.assert_close(rotate_half(x), hf.rotate_half(x), rtol=0, atol=0)
    np.testing.assert_array_equal(rotate_half(x.numpy()), hf.rotate_half(x).numpy())
    cos, sin = rotate_half_cos_sin(np.arange(6), 32, 10000.0)
    cos_hf, sin_hf = hf.make_rotary(32, 10000.0)(x, torch.arange(6)[None])
    torch.testing.assert_close(cos, cos_hf[0], rtol=0, atol=1e-7)
    torch.testing.assert_close(sin, sin_hf[0], rtol=0, atol=1e-7)
    q_hf, _ = hf.apply_rotary_pos_emb(x, x, cos[None], sin[None])
    torch.testing.assert_close(apply_rotate_half(x, cos, sin), q_hf, rtol=0, atol=0)


def test_hugging_face_builds_tables_per_sequence(hf):
    """Chapter 5: current Hugging Face code builds cos and sin of shape (batch, N, d) from
    position_ids of shape (batch, N), one table per sequence, and apply_rotary_pos_emb
    unsqueezes them to (batch, 1, N, d); rope_lib's teaching tables are (N, d)."""
    batch, N, d = 3, 6, 16
    x = torch.randn(batch, 2, N, d)
    position_ids = torch.stack([torch.arange(N) + 10 * b for b in range(batch)])
    cos, sin = hf.make_rotary(d, 10000.0)(x, position_ids)
    assert tuple(cos.shape) == tuple(sin.shape) == (batch, N, d)
    assert not torch.equal(cos[0], cos[1])  # each sequence its own positions
    q_hf, _ = hf.apply_rotary_pos_emb(x, x, cos, sin)
    for b in range(batch):
        ours = apply_rope(x[b], position_ids[b], 10000.0, "half")
        assert (ours - q_hf[b]).abs().max().item() < 1e-5
    assert tuple(rotate_half_cos_sin(np.arange(N), d)[0].shape) == (N, d)


def test_hugging_face_casts_its_tables_to_bfloat16(hf):
    """Chapter 5: LlamaRotaryEmbedding computes cos and sin in float32 and casts them to the
    activations' dtype, so a model run in bfloat16 uses bfloat16 tables: the numbers of
    rope_lib's "bfloat16_tables" recipe, with errors near 2**-9 (Meta's code keeps complex64)."""
    d, N = 64, 3000
    x = torch.zeros(1, N, 2 * d, dtype=torch.bfloat16)
    cos, sin = hf.make_rotary(d, 10000.0)(x, torch.arange(N)[None])
    assert cos.dtype == sin.dtype == torch.bfloat16
    c, s = cos_sin_tables(np.arange(N), d, 10000.0, "bfloat16_tables")
    for got, ours in ((cos, c), (sin, s)):
        halves = got[0].double().numpy().reshape(N, 2, d // 2)
        np.testing.assert_array_equal(halves[:, 0], halves[:, 1])  # [c | c]
        assert np.abs(halves[:, 0] - ours).max() <= 2**-8  # at most one bfloat16 step
    c64, _ = cos_sin_tables(np.arange(N), d, 10000.0, "float64")
    assert np.abs(cos[0, :, : d // 2].double().numpy() - c64).max() > 2**-10


def test_llama_complex_route():
    rng = np.random.default_rng(4)
    B, T, H, d = 2, 9, 3, 16
    xq = torch.from_numpy(rng.uniform(-1, 1, (B, T, H, d))).float()
    xk = torch.from_numpy(rng.uniform(-1, 1, (B, T, H, d))).float()
    freqs_cis = llama_precompute_freqs_cis(d, T)
    assert freqs_cis.shape == (T, d // 2) and freqs_cis.dtype == torch.complex64
    q_out, k_out = llama_apply_rotary_emb(xq, xk, freqs_cis)
    assert q_out.shape == (B, T, H, d) and q_out.dtype == torch.float32
    # The LLaMA layout is (B, T, H, d): positions on axis 1, so move them to axis -2.
    expected = rope_2x2(xq.double().numpy().transpose(0, 2, 1, 3), np.arange(T)).transpose(
        0, 2, 1, 3
    )
    assert np.abs(q_out.double().numpy() - expected).max() < 1e-6
    np.testing.assert_allclose(
        freqs_cis.numpy(), np.exp(1j * np.outer(np.arange(T), freqs_math(d, 1e4))), atol=1e-6
    )
    with pytest.raises(ValueError, match="freqs_cis"):
        llama_apply_rotary_emb(xq, xk, freqs_cis[:-1])


def test_layout_permutation_values():
    np.testing.assert_array_equal(layout_permutation(8), [0, 2, 4, 6, 1, 3, 5, 7])
    np.testing.assert_array_equal(layout_permutation(2), [0, 1])


@pytest.mark.parametrize(("n_heads", "d"), [(1, 8), (4, 16), (3, 64)])
def test_permute_qk_weight_matches_converter_and_keeps_scores(n_heads, d):
    rng = np.random.default_rng(n_heads)
    d_model = 24
    Wq = rng.standard_normal((n_heads * d, d_model))
    Wk = rng.standard_normal((n_heads * d, d_model))
    Wq_half = permute_qk_weight(Wq, n_heads)
    np.testing.assert_array_equal(
        Wq_half, hf_converter_permute(torch.from_numpy(Wq), n_heads).numpy()
    )
    np.testing.assert_array_equal(permute_qk_weight(Wq_half, n_heads, to="interleaved"), Wq)
    torch.testing.assert_close(
        permute_qk_weight(torch.from_numpy(Wq), n_heads), torch.from_numpy(Wq_half), rtol=0, atol=0
    )
    x = rng.standard_normal((10, d_model))
    pos = np.arange(10) * 37

    def scores(Wq_, Wk_, layout):
        q = (x @ Wq_.T).reshape(10, n_heads, d).transpose(1, 0, 2)  # (heads, T, d)
        k = (x @ Wk_.T).reshape(10, n_heads, d).transpose(1, 0, 2)
        return apply_rope(q, pos, layout=layout) @ apply_rope(k, pos, layout=layout).transpose(
            0, 2, 1
        )

    original = scores(Wq, Wk, "interleaved")
    converted = scores(Wq_half, permute_qk_weight(Wk, n_heads), "half")
    np.testing.assert_allclose(converted, original, atol=1e-9)
    forgotten = scores(Wq, Wk, "half")
    # The silent bug: the diagonal (distance 0) is right, everything else is wrong.
    np.testing.assert_allclose(
        np.diagonal(forgotten, axis1=1, axis2=2), np.diagonal(original, axis1=1, axis2=2)
    )
    off = ~np.eye(10, dtype=bool)
    assert np.all(np.abs(forgotten - original)[:, off].max(axis=-1) > 1e-3)


@pytest.mark.parametrize("d", [6, 8, 16, 64])
@pytest.mark.parametrize("m", [-7, 1, 3, 1000])
def test_half_layout_matrix_is_P_R_PT(d, m):
    """The claim of rotation_matrix's docstring: R_half = P R_m P^T with (P x)_j = x_{p_j}.

    R_half is read off apply_rope(layout="half") column by column (an independent route from
    rotation_matrix(layout="half")); the transposed order P^T R_m P differs for d >= 6.
    """
    P = np.eye(d)[layout_permutation(d)]  # rows of the identity in the order p
    x = np.random.default_rng(d).standard_normal(d)
    np.testing.assert_array_equal(P @ x, x[layout_permutation(d)])  # (P x)_j = x_{p_j}
    R = rotation_matrix(m, d)
    columns = apply_rope(np.eye(d)[:, None, :], [m], layout="half")[:, 0, :]  # row j = R e_j
    R_half = columns.T
    np.testing.assert_allclose(P @ R @ P.T, R_half, atol=1e-14)
    np.testing.assert_allclose(rotation_matrix(m, d, layout="half"), R_half, atol=1e-14)
    assert np.abs(P.T @ R @ P - R_half).max() > 1e-3  # the other order is wrong


def test_qk_scores_against_explicit_matrices():
    """Scores per head from rotation_matrix and explicit loops, with GQA and biases."""
    rng = np.random.default_rng(11)
    T, n_heads, n_kv, d, d_model = 5, 4, 2, 8, 12
    x = rng.standard_normal((T, d_model))
    W_q, b_q = rng.standard_normal((n_heads * d, d_model)), rng.standard_normal(n_heads * d)
    W_k, b_k = rng.standard_normal((n_kv * d, d_model)), rng.standard_normal(n_kv * d)
    pos = np.array([0, 3, 4, 10, 11])
    for layout in ("interleaved", "half"):
        got = qk_scores(x, W_q, W_k, n_heads, pos, n_kv, b_q, b_k, layout=layout)
        expected = np.empty((n_heads, T, T))
        for h in range(n_heads):
            g = h // (n_heads // n_kv)  # query heads 0,1 -> key head 0; 2,3 -> 1
            for a in range(T):
                for c in range(T):
                    q = rotation_2x2(pos[a], d, layout=layout) @ (
                        W_q[h * d : (h + 1) * d] @ x[a] + b_q[h * d : (h + 1) * d]
                    )
                    k = rotation_2x2(pos[c], d, layout=layout) @ (
                        W_k[g * d : (g + 1) * d] @ x[c] + b_k[g * d : (g + 1) * d]
                    )
                    expected[h, a, c] = q @ k
        np.testing.assert_allclose(got, expected, atol=1e-10)
    with pytest.raises(ValueError, match="n_kv_heads"):
        qk_scores(x, W_q, W_k, n_heads, pos, 3)


def test_gqa_converter_permutes_keys_per_kv_head_and_biases():
    """Interleaved -> half for GQA: W_q and b_q per n_heads, W_k and b_k per n_kv_heads.

    Hugging Face's converter permutes the key projection with n_kv_heads; the permuted
    checkpoint gives the same scores in the half layout.  Permuting W_k per n_heads, or
    forgetting the biases, changes the scores away from distance 0.
    """
    rng = np.random.default_rng(12)
    T, n_heads, n_kv, d, d_model = 9, 8, 2, 16, 24
    x = rng.standard_normal((T, d_model))
    W_q, b_q = rng.standard_normal((n_heads * d, d_model)), rng.standard_normal(n_heads * d)
    W_k, b_k = rng.standard_normal((n_kv * d, d_model)), rng.standard_normal(n_kv * d)
    pos = np.arange(T) * 3
    np.testing.assert_array_equal(
        permute_qk_weight(W_k, n_kv), hf_converter_permute(torch.from_numpy(W_k), n_kv).numpy()
    )
    original = qk_scores(x, W_q, W_k, n_heads, pos, n_kv, b_q, b_k)
    right = (
        permute_qk_weight(W_q, n_heads),
        permute_qk_weight(W_k, n_kv),
        permute_qk_weight(b_q, n_heads),
        permute_qk_weight(b_k, n_kv),
    )
    converted = qk_scores(
        x, right[0], right[1], n_heads, pos, n_kv, right[2], right[3], layout="half"
    )
    np.testing.assert_allclose(converted, original, atol=1e-9)
    off = ~np.eye(T, dtype=bool)
    wrong_k = permute_qk_weight(W_k, n_heads)  # per query head: wrong blocks for GQA
    wrong = qk_scores(
        x,
        right[0],
        wrong_k,
        n_heads,
        pos,
        n_kv,
        right[2],
        permute_qk_weight(b_k, n_heads),
        layout="half",
    )
    assert np.abs(wrong - original)[:, off].max() > 1e-2
    no_bias = qk_scores(x, right[0], right[1], n_heads, pos, n_kv, b_q, b_k, layout="half")
    assert np.abs(no_bias - original)[:, off].max() > 1e-2


def test_one_token_output_test_misses_converter_mistakes():
    """Chapter 5 (the forgotten permutation, exercise 5): in a causal language model the
    output at the first position does not depend on W_q and W_k (one key, softmax weight 1),
    so comparing the outputs of a one-token prompt misses every conversion mistake, while the
    second position of a two-token prompt shows all three (the permutation forgotten, W_k
    permuted per n_heads, the biases left alone).  Peer: Hugging Face's LlamaForCausalLM in the
    half layout, with GQA and biased q/k projections, converted from an interleaved checkpoint
    made here by the inverse permutation."""
    from transformers import LlamaConfig, LlamaForCausalLM

    H, H_kv, d = 4, 2, 8
    config = LlamaConfig(
        vocab_size=32,
        hidden_size=H * d,
        intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=H,
        num_key_value_heads=H_kv,
        head_dim=d,
        attention_bias=True,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                proj.bias.normal_()  # initialised to zero
    half = {k: v.clone() for k, v in model.state_dict().items()}

    def heads(name: str, mistake: str = "") -> int:
        return H if "q_proj" in name or mistake == "W_k per n_heads" else H_kv

    rotary = [k for k in half if "q_proj" in k or "k_proj" in k]
    interleaved = dict(half)
    for k in rotary:
        interleaved[k] = permute_qk_weight(half[k], heads(k), to="interleaved")

    def convert(mistake: str) -> dict:
        state = dict(interleaved)
        for k in rotary:
            if mistake == "forgotten" or (mistake == "biases kept" and k.endswith("bias")):
                continue
            state[k] = permute_qk_weight(interleaved[k], heads(k, mistake))
        return state

    def logits(state: dict, tokens: list[int]) -> torch.Tensor:
        model.load_state_dict(state)
        with torch.no_grad():
            return model(torch.tensor([tokens])).logits[0]

    right = convert("right")
    assert all(torch.equal(right[k], half[k]) for k in rotary)
    one, two = logits(right, [5]), logits(right, [5, 17])
    for mistake in ("forgotten", "W_k per n_heads", "biases kept"):
        state = convert(mistake)
        assert any(not torch.equal(state[k], half[k]) for k in rotary)
        assert torch.equal(logits(state, [5]), one)  # a one-token test passes
        wrong = logits(state, [5, 17])
        assert torch.equal(wrong[0], two[0])  # the first position too
        assert (wrong[1] - two[1]).abs().max().item() > 1e-3 * two[1].abs().max().item()


@pytest.mark.parametrize("model", ["qwen3", "olmo2"])
def test_converter_permutes_the_qk_norm_weights(monkeypatch, model):
    """Chapter 5 (converting checkpoints): a normalisation between the projection and the
    rotation must be permuted with the rows.  Hugging Face's Qwen3 normalises each head of q
    and k (weight of d entries: permuted by sigma), OLMo 2 the whole width (weight permuted head
    by head like the rows).  The scores of the converted Hugging Face attention equal those of
    the interleaved model, computed here with its RMSNorm written out; with the norm weights
    left alone they do not."""
    import importlib

    import transformers

    hf_mod = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    prefix = {"qwen3": "Qwen3", "olmo2": "Olmo2"}[model]
    Config = getattr(transformers, f"{prefix}Config")
    H, H_kv, d, N, width = 4, 2, 16, 7, 32
    config = one_layer_config(
        Config, hidden_size=width, num_attention_heads=H, num_key_value_heads=H_kv, head_dim=d
    )
    torch.manual_seed(2)
    attn = getattr(hf_mod, f"{prefix}Attention")(config, layer_idx=0).eval()
    eps, base = config.rms_norm_eps, config.rope_parameters["rope_theta"]
    per_head = model == "qwen3"
    W_q, W_k = torch.randn(H * d, width), torch.randn(H_kv * d, width)
    norm_size = (d, d) if per_head else (H * d, H_kv * d)
    w_q, w_k = (1 + 0.5 * torch.randn(n) for n in norm_size)
    x = torch.randn(1, N, width)

    def rms(y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * w

    def reference(W: torch.Tensor, w: torch.Tensor, count: int) -> torch.Tensor:
        y = x @ W.T  # (1, N, count * d)
        y = rms(y.view(1, N, count, d), w) if per_head else rms(y, w).view(1, N, count, d)
        return apply_rope(y.transpose(1, 2), np.arange(N), base, "interleaved")

    def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return q @ k.repeat_interleave(H // H_kv, dim=1).transpose(-1, -2)

    expected = scores(reference(W_q, w_q, H), reference(W_k, w_k, H_kv))
    seen = spy_on_rotary(monkeypatch, hf_mod)
    position_embeddings = getattr(hf_mod, f"{prefix}RotaryEmbedding")(config)(
        x, torch.arange(N)[None]
    )

    def converted(norm_q: torch.Tensor, norm_k: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            attn.q_proj.weight.copy_(permute_qk_weight(W_q, H))
            attn.k_proj.weight.copy_(permute_qk_weight(W_k, H_kv))
            attn.q_norm.weight.copy_(norm_q)
            attn.k_norm.weight.copy_(norm_k)
            attn(x, position_embeddings=position_embeddings, attention_mask=None)
        return scores(seen["q_rot"], seen["k_rot"])

    if per_head:
        p = torch.from_numpy(layout_permutation(d))
        right = converted(w_q[p], w_k[p])
    else:
        right = converted(permute_qk_weight(w_q, H), permute_qk_weight(w_k, H_kv))
    scale = expected.abs().max().item()
    assert (right - expected).abs().max().item() < 1e-5 * scale
    kept = converted(w_q, w_k)  # the norm weights left alone
    assert (kept - expected).abs().max().item() > 1e-2 * scale


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_partial_rotation_layouts_differ_by_sigma_of_rotary_dim(layout):
    """Chapter 5: with rotary_dim = r < d, converting between the layouts permutes the first r
    coordinates of each head by sigma of size r and leaves the rest; sigma of size d does
    not convert."""
    d, r = 16, 8
    x = np.random.default_rng(14).standard_normal((3, 9, d))
    pos = np.arange(9) * 5
    p_r = np.r_[layout_permutation(r), np.arange(r, d)]
    other = "half" if layout == "interleaved" else "interleaved"
    if layout == "interleaved":  # interleaved -> half: x -> x[p]

        def convert(y, p):
            return y[..., p]
    else:  # half -> interleaved: the inverse permutation

        def convert(y, p):
            return y[..., np.argsort(p)]

    ours = apply_rope(x, pos, layout=layout, rotary_dim=r)
    converted = apply_rope(convert(x, p_r), pos, layout=other, rotary_dim=r)
    np.testing.assert_allclose(converted, convert(ours, p_r), atol=1e-12)
    p_d = layout_permutation(d)
    wrong = apply_rope(convert(x, p_d), pos, layout=other, rotary_dim=r)
    assert np.abs(wrong - convert(ours, p_d)).max() > 1e-2
    # RoPE of dimension d with frequencies base**(-2i/r), then 0: exactly so in the
    # interleaved layout, only up to the permutation p_r in the half layout
    freqs = freqs_math(r, 10000.0) + [0.0] * ((d - r) // 2)
    full = np.empty_like(x)
    for (a, b), th in zip(pairs(d, layout), freqs, strict=True):
        c, s = np.cos(pos * th)[:, None], np.sin(pos * th)[:, None]
        full[..., [a]], full[..., [b]] = (
            x[..., [a]] * c - x[..., [b]] * s,
            x[..., [a]] * s + x[..., [b]] * c,
        )
    if layout == "interleaved":
        np.testing.assert_allclose(ours, full, atol=1e-12)
    else:
        assert np.abs(ours - full).max() > 1e-2


@pytest.mark.parametrize("base", [10.0, 10000.0, 500000.0, 1e9])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_accuracy_promise_against_mpmath(base, layout):
    """float32 apply_rope at positions up to 1e7 stays at float32 round-off (< 1e-6)."""
    d = 128
    pos = np.array([0, 12345, 10**6, 9_999_991, 10**7])
    x = torch.from_numpy(np.random.default_rng(5).uniform(-1, 1, (3, pos.size, d))).float()
    a, b = (
        (np.arange(0, d, 2), np.arange(1, d, 2))
        if layout == "interleaved"
        else (
            np.arange(d // 2),
            np.arange(d // 2, d),
        )
    )
    xd = x.double().numpy()
    expected = np.empty_like(xd)
    for t, m in enumerate(pos):
        c, s = mp_tables(int(m), d, base)
        expected[..., t, a] = xd[..., t, a] * c - xd[..., t, b] * s
        expected[..., t, b] = xd[..., t, a] * s + xd[..., t, b] * c
    err = np.abs(apply_rope(x, pos, base, layout).double().numpy() - expected).max()
    assert err < 1e-6
    c_lib, s_lib = cos_sin_tables([10**7], d, base, "rope_lib")
    c_mp, s_mp = mp_tables(10**7, d, base)
    assert max(np.abs(c_lib[0] - c_mp).max(), np.abs(s_lib[0] - s_mp).max()) <= 2.0**-25


@pytest.mark.parametrize("base", [1.5, 10.0, 10000.0, 500000.0, 1e9])
def test_rope_lib_tables_against_mpmath_up_to_2_to_32(base):
    """cos_sin_tables' documented accuracy of the "rope_lib" tables against an exact
    reference: at most 2**-25 + |m| 2**-52 (the float32 rounding plus the float64 angle's
    error), so within 5 % of the float32 rounding up to |m| = 1e7; at 1e9 and 2**32 more
    than the float32 rounding, which table_error's float64 reference cannot see."""
    d = 128
    for m in (1, 10**6, 10**7, 10**8, 10**9, 2**32):
        err = _lib_table_error_mp(m, d, base)
        assert err <= 2.0**-25 + m * 2.0**-52 + 1e-15
        if m <= 10**7:
            assert err <= 1.05 * 2.0**-25
    if base == 10000.0:  # the numbers chapter 5 and the docstring quote
        for m, quoted in ((10**9, 7.7e-8), (2**32, 2.5e-7)):
            err = _lib_table_error_mp(m, d, base)
            assert abs(err - quoted) < 0.05 * quoted and err > 2.0**-25
            assert table_error([m], d, base, "rope_lib")[0] <= 2.0**-25  # blind to it


def test_usual_float32_recipe_is_inaccurate_at_large_positions():
    d, base = 128, 10000.0
    c, s = cos_sin_tables([10**6, 10**7], d, base, "float32")
    for row, m in enumerate((10**6, 10**7)):
        c_mp, s_mp = mp_tables(m, d, base)
        assert np.abs(c[row] - c_mp).max() > 1e-3  # angle error ~ 6e-8 * m
    # The same numbers as LLaMA's complex table (the same float32 recipe).
    f = llama_precompute_freqs_cis(d, 1001)
    c1, s1 = cos_sin_tables([1000], d, base, "float32")
    np.testing.assert_allclose(f[1000].real.numpy(), c1[0], atol=1e-7)
    np.testing.assert_allclose(f[1000].imag.numpy(), s1[0], atol=1e-7)


def test_llama_table_error_grows_like_2_to_minus_24_t():
    """The docstring's growth rate of the LLaMA table error, against float64 tables."""
    d, end = 128, 2**17 + 1
    f = llama_precompute_freqs_cis(d, end).numpy()
    theta = np.array(freqs_math(d, 1e4))
    for t in (100, 1000, 10**4, 77777, 2**17):
        err = np.abs(f[t] - np.exp(1j * t * theta)).max()
        assert 1.2e-8 * t < err < 7.5e-8 * t, (t, err / t)


def test_bfloat16_recipes():
    pos = np.array([1, 255, 257, 4097, 70001])
    d = 16
    rounded_pos = round_to_bfloat16(pos.astype(np.float32)).astype(np.int64)
    assert list(rounded_pos[:3]) == [1, 255, 256]  # 257 is not a bfloat16 number
    np.testing.assert_array_equal(
        cos_sin_tables(pos, d, recipe="bfloat16_positions")[0],
        cos_sin_tables(rounded_pos, d, recipe="float32")[0],
    )
    c32 = cos_sin_tables(pos, d, recipe="float32")[0].astype(np.float32)
    np.testing.assert_array_equal(
        cos_sin_tables(pos, d, recipe="bfloat16_tables")[0], round_to_bfloat16(c32)
    )
    # Distinct bfloat16 positions among 0..4095: the collapse rotary-embedding-torch shows.
    assert np.unique(round_to_bfloat16(np.arange(4096, dtype=np.float32))).size == 769


def test_table_and_score_error():
    pos = np.array([1, 10, 1000, 10**5, 10**7])
    lib = table_error(pos, 128, recipe="rope_lib")
    assert np.all(lib <= 2.0**-25)
    f32 = table_error(pos, 128, recipe="float32")
    assert f32[-1] > 0.05 and f32[0] < 1e-7
    c_mp, s_mp = mp_tables(10**7, 128, 1e4)
    c, s = cos_sin_tables([10**7], 128, recipe="float32")
    assert f32[-1] == pytest.approx(
        max(np.abs(c[0] - c_mp).max(), np.abs(s[0] - s_mp).max()), rel=1e-6
    )
    assert np.all(score_error(pos, 128, recipe="rope_lib") < 1e-6)
    assert score_error(pos, 128, recipe="float32")[-1] > 1e-3


def test_score_error_float32_recipe_equals_hugging_face_pipeline(hf):
    """score_error('float32') is the error of HF's real pipeline on the same vectors."""
    d, base, pos = 64, 10000.0, np.array([5, 3000, 10**6])
    expected = _hf_score_error(hf, pos, pos - 1, d, base)
    np.testing.assert_allclose(
        score_error(pos, d, base, "float32"), expected, rtol=1e-6, atol=1e-12
    )


def test_float32_angle_error_split():
    """frequency part + product rounding = the recipe's angle error; the parts behave as stated."""
    d, base = 128, 10000.0
    pos = np.array([0, 1, 2, 1024, 12345, 10**6, 2**23 + 1])
    freq, rounding = float32_angle_error(pos, d, base)
    # Independent route for the total: the recipe's float32 angle, from torch, against mpmath.
    inv_freq, angle32 = _float32_recipe_angles(pos, d, base)
    np.testing.assert_allclose(
        freq + rounding, angle32 - _mp_angles(pos, d, base), rtol=0, atol=1e-9
    )
    # The frequency part is linear in m: a fixed change of frequencies.
    np.testing.assert_allclose(
        freq[1:] / pos[1:, None], np.broadcast_to(freq[1], freq[1:].shape), rtol=1e-9, atol=1e-20
    )
    # Product rounding: none where m theta~ is a float32 number (m = 0, 1, 2, 1024), at most
    # half an ulp elsewhere, and not zero at large m.
    assert np.all(rounding[:4] == 0)
    bound = 2.0**-24 * np.abs(pos[:, None] * inv_freq.double().numpy()[None, :])
    assert np.all(np.abs(rounding) <= bound)
    assert np.abs(rounding[5]).max() > 1e-3
    with pytest.raises(ValueError, match="2\\*\\*24"):
        float32_angle_error([2**24], d, base)


def test_apply_rope_refusals():
    said = apply_rope_refusals()
    assert list(said) == [
        "odd d",
        "base 1",
        "position 2.5",
        "position inf",
        "one position for 4 rows",
        "one axis",
        "integer tensor",
        "rotary_dim 10 of d = 8",
    ]
    expected_words = [
        "x.shape[-1]",
        "base",
        "positions",
        "non-finite",
        "positions",
        "at least 2 axes",
        "x must be",
        "rotary_dim must be",
    ]
    for (kind, message), word in zip(said.values(), expected_words, strict=True):
        assert kind in ("ValueError", "TypeError")
        assert word in message


def test_teaching_routes_allocate_as_chapter_5_says():
    """Chapter 5: the LLaMA route writes one tensor per rotated tensor in float32 (the complex
    product; xq.float() and the views copy nothing) and three in float16 (the float32 copy, the
    product, the conversion back); the rotate_half route writes five (-x2, the concatenation,
    two products, the sum)."""
    N, d = 6, 8
    freqs_cis = llama_precompute_freqs_cis(d, N)
    for dtype, per_tensor in ((torch.float32, 1), (torch.float16, 3)):
        xq = torch.randn(2, N, 4, d).to(dtype)
        n, _ = new_tensors(lambda xq=xq: llama_apply_rotary_emb(xq, xq, freqs_cis))
        assert n == 2 * per_tensor  # query and key
    cos, sin = rotate_half_cos_sin(np.arange(N), d)
    xh = torch.randn(2, 4, N, d)
    n, ops = new_tensors(lambda: apply_rotate_half(xh, cos, sin))
    assert n == 5 and "cat.default" in ops and "neg.default" in ops


def test_teaching_routes_gradcheck():
    rng = np.random.default_rng(22)
    T, d = 5, 8
    xq, xk = requires_grad(rng.standard_normal((2, T, 3, d)), rng.standard_normal((2, T, 1, d)))
    angles = np.outer(np.arange(T), freqs_math(d, 1e4))
    freqs_cis = torch.tensor(np.exp(1j * angles), dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(llama_apply_rotary_emb, (xq, xk, freqs_cis))
    tables = np.concatenate((angles, angles), axis=-1)
    x, cos, sin = requires_grad(rng.standard_normal((2, T, d)), np.cos(tables), np.sin(tables))
    assert torch.autograd.gradcheck(apply_rotate_half, (x, cos, sin))
    assert torch.autograd.gradcheck(rotate_half, (x,))


def test_llama_route_float64_input_is_rotated_in_float64():
    rng = np.random.default_rng(23)
    T, d = 6, 8
    xq = torch.tensor(rng.standard_normal((1, T, 2, d)))
    angles = np.outer(np.arange(T), freqs_math(d, 1e4))
    freqs_cis = torch.tensor(np.exp(1j * angles), dtype=torch.complex128)
    q_out, _ = llama_apply_rotary_emb(xq, xq, freqs_cis)
    assert q_out.dtype == torch.float64
    expected = rope_2x2(xq.numpy().transpose(0, 2, 1, 3), np.arange(T)).transpose(0, 2, 1, 3)
    np.testing.assert_allclose(q_out.numpy(), expected, atol=1e-13)


def test_teaching_routes_accept_gqa_keys_and_strided_views():
    """xk with fewer heads than xq (GQA) and odd storage offsets still work, and agree with
    apply_rope."""
    base_q = torch.randn(1, 5, 3, 9)
    xq, xk = base_q[..., 1:], torch.randn(1, 5, 1, 8)
    q_out, k_out = llama_apply_rotary_emb(xq, xk, llama_precompute_freqs_cis(8, 5))
    ours = apply_rope(xq.transpose(1, 2), np.arange(5)).transpose(1, 2)
    assert (q_out - ours).abs().max().item() < 1e-6
    assert k_out.shape == xk.shape


@pytest.mark.parametrize(
    "scales",
    [{"x": 1e300}, {"x": 1e160}, {"W_q": 1e200, "W_k": 1e200}, {"b_q": 1e200, "b_k": 1e200}],
)
def test_qk_scores_refuses_scores_that_overflow(scales):
    """Fuzz item 17: qk_scores(np.full((3, 6), 1e300), ...) returned inf and -inf scores
    with an overflow warning; it is refused, naming x and the weights, with no warning."""
    args = {"x": np.ones((3, 6)), "W_q": np.eye(6), "W_k": np.eye(6)}
    args |= {"b_q": np.zeros(6), "b_k": np.zeros(6)}
    for name, scale in scales.items():
        args[name] = args[name] * scale + (scale if name.startswith("b_") else 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^x, W_q and W_k \(with b_q, b_k\) are so large"):
            qk_scores(n_heads=3, positions=[0, 1, 2], **args)


def test_qk_scores_just_below_overflow_is_finite():
    x = np.zeros((2, 2))
    x[:, 0] = 1e150
    scores = qk_scores(x, np.eye(2), np.eye(2), 1, [0, 0])
    np.testing.assert_allclose(scores, np.full((1, 2, 2), 1e300), rtol=1e-12)


def test_apply_rope_matrix_non_finite_input_spoils_its_row():
    """Documented: every entry of R_m (zeros included) meets every coordinate of its row.
    At position 0 (R = I) an inf in coordinate 2 stays inf and every other coordinate of the
    row is 0 * inf = nan; at position 3 its pair partner is infinite too; a nan spoils the
    whole row; other rows are untouched."""
    x = np.random.default_rng(1).standard_normal((4, 4))
    x[0, 2] = x[1, 2] = np.inf
    x[2, 1] = np.nan
    with np.errstate(invalid="ignore"):
        out = apply_rope_matrix(x, [0, 3, 5, 7])
    assert out[0, 2] == np.inf and np.all(np.isnan(out[0, [0, 1, 3]]))
    assert np.all(np.isinf(out[1, [2, 3]])) and np.all(np.isnan(out[1, [0, 1]]))
    assert np.all(np.isnan(out[2]))
    np.testing.assert_allclose(out[3], rope_2x2(x[3:], [7])[0], atol=1e-12)


def test_rotate_half_and_llama_routes_propagate_non_finite_inputs():
    """Documented: apply_rotate_half and llama_apply_rotary_emb, like the peers they copy,
    do not scan for nan or inf; an inf at position 0 gives (inf, nan) in its pair."""
    x = torch.ones(2, 4)
    x[0, 0] = torch.inf
    cos, sin = rotate_half_cos_sin([0, 1], 4)
    out = apply_rotate_half(x, cos, sin)
    assert out[0, 0] == torch.inf and torch.isnan(out[0, 2])
    assert torch.isfinite(out[0, [1, 3]]).all() and torch.isfinite(out[1]).all()
    xq = x.reshape(1, 2, 1, 4)
    oq, ok = llama_apply_rotary_emb(xq, xq.clone(), llama_precompute_freqs_cis(4, 2))
    for o in (oq, ok):
        assert o[0, 0, 0, 0] == torch.inf and torch.isnan(o[0, 0, 0, 1])
        assert torch.isfinite(o[0, 0, 0, 2:]).all() and torch.isfinite(o[0, 1]).all()


@pytest.mark.parametrize(
    "func",
    [apply_rope, apply_rope_matrix, apply_rotate_half, llama_apply_rotary_emb],
)
def test_non_finite_behaviour_is_documented(func):
    doc = " ".join(func.__doc__.split())
    assert "Non-finite inputs" in doc and "inf * 0 = nan" in doc


def test_other_bad_input():
    with pytest.raises(ValueError, match="weight"):
        permute_qk_weight(np.zeros((12, 4)), n_heads=5)
    with pytest.raises(ValueError, match="head dimension"):
        permute_qk_weight(np.zeros((6, 4)), n_heads=2)
    with pytest.raises(ValueError, match="recipe"):
        cos_sin_tables([1], 8, recipe="fp8")
    with pytest.raises(ValueError, match="d"):
        layout_permutation(5)


def test_teaching_routes_validate_their_arguments():
    x = np.zeros((3, 8))
    with pytest.raises(ValueError, match=r"x\.shape\[-1\]"):
        rotate_half(np.zeros((3, 7)))
    with pytest.raises(TypeError, match="x"):
        rotate_half(np.arange(8))  # integers: negation of unsigned ones would wrap
    with pytest.raises(TypeError, match="x"):
        rotate_half(np.zeros(8, dtype=complex))
    with pytest.raises(ValueError, match=r"x\.shape\[-1\]"):
        apply_rotate_half(np.zeros((3, 7)), np.ones((3, 7)), np.zeros((3, 7)))
    with pytest.raises(TypeError, match="x"):
        apply_rotate_half(torch.zeros(3, 8, dtype=torch.int64), torch.ones(3, 8), torch.ones(3, 8))
    with pytest.raises(TypeError, match="cos"):
        apply_rotate_half(torch.zeros(3, 8), np.ones((3, 8)), torch.ones(3, 8))
    with pytest.raises(ValueError, match="sin"):
        apply_rotate_half(x, np.ones((3, 8)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="cos"):
        apply_rotate_half(x, np.ones((4, 8)), np.zeros((3, 8)))
    # to="bogus" blames `to`, the argument the caller spelled
    with pytest.raises(ValueError, match=r"^to must be one of"):
        permute_qk_weight(np.zeros((16, 4)), 2, to="bogus")
    with pytest.raises(TypeError, match="weight"):
        permute_qk_weight(None, 2)
    with pytest.raises(ValueError, match="weight"):
        permute_qk_weight(np.zeros((2, 8, 4)), 2)
    xq = torch.randn(1, 4, 2, 8)
    freqs_cis = llama_precompute_freqs_cis(8, 4)
    with pytest.raises(TypeError, match="freqs_cis"):
        llama_apply_rotary_emb(xq, xq, freqs_cis.real.contiguous())  # real: refused
    with pytest.raises(TypeError, match="xq"):
        llama_apply_rotary_emb(xq.to(torch.int64), xq, freqs_cis)  # not truncated
    with pytest.raises(ValueError, match="xk"):
        llama_apply_rotary_emb(xq, xq[:, :3], freqs_cis)
    W = np.ones((8, 8))
    with pytest.raises(ValueError, match="b_q"):
        qk_scores(np.ones((3, 8)), W, W, 2, np.arange(3), b_q=np.ones(4))
    with pytest.raises(ValueError, match="W_k"):
        qk_scores(np.ones((3, 8)), W, np.ones((8, 5)), 2, np.arange(3))


def test_size_limits_are_checked_before_allocating():
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        apply_rope_matrix(np.zeros((4096, 256)), np.arange(4096))  # 2**28 matrix entries
    with pytest.raises(ValueError, match="positions"):
        cos_sin_tables(np.arange(2**13), 2**16)  # 2**28 table entries
    with pytest.raises(ValueError, match="end"):
        llama_precompute_freqs_cis(8, 2**33)
    with pytest.raises(ValueError, match="end"):
        llama_precompute_freqs_cis(2**16, 2**13)
    with pytest.raises(ValueError, match="n_vectors"):
        score_error([0, 1], 8, n_vectors=10**12)
    with pytest.raises(ValueError, match="offset"):
        score_error([0, 1], 8, offset=2**40)


# ------------------------------------------- mutation testing (issue 22): value checks


def test_llama_complex_route_rotates_the_keys_as_the_queries():
    rng = np.random.default_rng(5)
    B, T, H, d = 1, 6, 2, 8
    xq = torch.from_numpy(rng.uniform(-1, 1, (B, T, H, d)))
    xk = torch.from_numpy(rng.uniform(-1, 1, (B, T, H, d)))
    _, k_out = llama_apply_rotary_emb(xq.float(), xk.float(), llama_precompute_freqs_cis(d, T))
    expected = rope_2x2(xk.numpy().transpose(0, 2, 1, 3), np.arange(T)).transpose(0, 2, 1, 3)
    assert np.abs(k_out.double().numpy() - expected).max() < 1e-6


def test_qk_scores_without_biases_and_one_key_head_per_query_head():
    """No biases (b = None adds nothing) and n_kv_heads defaulting to n_heads, at the default
    base, against explicit 2x2 rotations."""
    rng = np.random.default_rng(13)
    T, n_heads, d, d_model = 4, 2, 4, 6
    x = rng.standard_normal((T, d_model))
    W_q, W_k = (
        rng.standard_normal((n_heads * d, d_model)),
        rng.standard_normal((n_heads * d, d_model)),
    )
    pos = np.array([0, 2, 7, 9])
    got = qk_scores(x, W_q, W_k, n_heads, pos)
    expected = np.empty((n_heads, T, T))
    for h in range(n_heads):
        rows = slice(h * d, (h + 1) * d)
        for a in range(T):
            for c in range(T):
                q = rotation_2x2(pos[a], d) @ (W_q[rows] @ x[a])
                k = rotation_2x2(pos[c], d) @ (W_k[rows] @ x[c])
                expected[h, a, c] = q @ k
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_qk_scores_refusals_name_the_argument_and_the_numbers():
    x, W = np.ones((3, 12)), np.ones((16, 12))
    cases = [
        (
            (x, np.ones((10, 12)), W, 4, [0, 1, 2]),
            ValueError,
            r"W_q.shape\[0\] = 10 must be a multiple of n_heads",
        ),
        (
            (x, W, np.ones((12, 12)), 4, [0, 1, 2], 2),
            ValueError,
            r"W_k must have n_kv_heads \* d = 8 rows, got 12$",
        ),
        ((np.ones((1, 3, 12)), W, W, 4, [0, 1, 2]), ValueError, r"x must be a 2-D"),
        ((x, np.ones((1, 16, 12)), W, 4, [0, 1, 2]), ValueError, r"W_q must be a 2-D"),
        ((x, W, np.ones((1, 16, 12)), 4, [0, 1, 2]), ValueError, r"W_k must be a 2-D"),
        ((x, W, W, 4, [0, 1, 2], None, np.ones((1, 16))), ValueError, r"b_q must be a 1-D"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match="^" + message):
            qk_scores(*args)


@pytest.mark.parametrize("base", [None, 500.0])
def test_float32_angle_error_parts_sum_to_the_recipes_error_at_any_base(base):
    """As test_float32_angle_error_split, at the default base (10^4) and at 500."""
    d, pos = 16, np.array([3, 1000, 123457])
    b = 10000.0 if base is None else base
    freq, rounding = float32_angle_error(pos, d) if base is None else float32_angle_error(pos, d, b)
    inv_freq, angle32 = _float32_recipe_angles(pos, d, b)
    np.testing.assert_allclose(freq + rounding, angle32 - _mp_angles(pos, d, b), rtol=0, atol=1e-9)
    # the frequency part alone: m (theta~ - theta), theta from mpmath
    with mpmath.workdps(40):
        th = np.array([float(mpmath.power(b, mpmath.mpf(-2 * i) / d)) for i in range(d // 2)])
    np.testing.assert_allclose(
        freq, pos[:, None] * (inv_freq.double().numpy() - th), rtol=1e-6, atol=1e-15
    )


def test_apply_rope_matrix_takes_torch_tensors():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((3, 6))
    got = apply_rope_matrix(torch.from_numpy(x), [0, 4, 9])
    np.testing.assert_allclose(np.asarray(got), rope_2x2(x, [0, 4, 9]), atol=1e-12)


def test_score_error_keys_stop_at_position_zero_and_offset_zero_is_allowed(hf):
    """The key sits at max(m - offset, 0): at m = 0 with offset 1 it is at 0; offset = 0 puts
    it on the query.  Expected from Hugging Face's pipeline as in the test above, default base."""
    d, base = 16, 10000.0
    pos = np.array([0, 5, 3000])
    for offset in (1, 0):
        expected = _hf_score_error(hf, pos, np.maximum(pos - offset, 0), d, base)
        got = score_error(pos, d, recipe="float32", offset=offset)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-12)


def test_apply_rope_refusals_quote_the_documented_calls():
    # The numbers of the calls listed in the docstring appear in the messages.
    said = apply_rope_refusals()
    assert said["odd d"][1].endswith("got 7")
    assert said["one position for 4 rows"][1].startswith(
        "positions must have one entry per row of x along axis -2: got 1 positions for x of "
        "shape (4, 8)"
    )
    assert said["one axis"][1].endswith("got shape (8,)")
    assert said["rotary_dim 10 of d = 8"][1].endswith(
        "= 8 (the number of rotated coordinates), got 10"
    )
    assert said["integer tensor"][1].endswith("got dtype torch.int64")


def test_refusals_of_the_teaching_routes_from_the_start_of_the_message():
    f = llama_precompute_freqs_cis(6, 3)
    ok = torch.ones(1, 3, 2, 6)
    cases = [
        (
            lambda: llama_apply_rotary_emb(torch.ones(2, 3, 4), ok, f),
            ValueError,
            r"xq must be a 4-D torch tensor \(batch, N, H, d\), got shape \(2, 3, 4\)$",
        ),
        (
            lambda: llama_apply_rotary_emb(torch.ones(1, 3, 2, 5), ok, f),
            ValueError,
            r"xq.shape\[-1\] must be an even integer >= 2",
        ),
        (
            lambda: llama_apply_rotary_emb(ok, ok, "x"),
            TypeError,
            r"freqs_cis must be a complex torch tensor .* got 'x' of type str$",
        ),
        (
            lambda: llama_apply_rotary_emb(np.ones((1, 3, 2, 6)), ok, f),
            TypeError,
            r"xq must be a 4-D floating torch tensor \(batch, N, H, d\), got array\(",
        ),
        (
            lambda: permute_qk_weight(torch.ones(8, 3, dtype=torch.bool), 1),
            TypeError,
            r"weight must be a real tensor, got dtype torch.bool$",
        ),
        (
            lambda: permute_qk_weight(torch.ones(8, 3) + 0j, 1),
            TypeError,
            r"weight must be a real tensor, got dtype torch.complex64$",
        ),
        (
            lambda: permute_qk_weight([[1], [1, 2]], 1),
            TypeError,
            r"weight must be a real array, got \[\[1\], \[1, 2\]\] of type list$",
        ),
        (
            lambda: permute_qk_weight(np.ones((4, 3), dtype=complex), 1),
            TypeError,
            r"weight must be a real array \(float or integer\), got array\(",
        ),
        (
            lambda: permute_qk_weight(np.ones((6, 3)), 2),
            ValueError,
            r"weight.shape\[0\] // n_heads must be an even integer >= 2",
        ),
        (
            lambda: qk_scores(
                np.ones((3, 12)), np.ones((16, 12)), np.ones((8, 10)), 4, [0, 1, 2], 2
            ),
            ValueError,
            r"W_k must have d_model = x.shape\[1\] = 12 columns, got shape \(8, 10\)$",
        ),
        (
            lambda: qk_scores(
                np.ones((3, 12)), np.ones((16, 10)), np.ones((8, 12)), 4, [0, 1, 2], 2
            ),
            ValueError,
            r"W_q must have d_model = x.shape\[1\] = 12 columns, got shape \(16, 10\)$",
        ),
        (
            lambda: qk_scores(np.ones((3, 12)), np.ones((12, 12)), np.ones((12, 12)), 4, [0, 1, 2]),
            ValueError,
            r"W_q.shape\[0\] // n_heads must be an even integer >= 2",
        ),
        (
            lambda: qk_scores(np.ones((3, 6)) * 1e300, np.eye(6), np.eye(6), 3, [0, 1, 2]),
            ValueError,
            r"x, W_q and W_k \(with b_q, b_k\) are so large that the scores q\^T k overflow "
            r"float64; scale x or the weights down$",
        ),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match="^" + message):
            call()


def test_rotate_half_takes_a_single_vector_and_permutes_torch_weights():
    # rotate_half and apply_rotate_half work on any (..., d), one axis included; the
    # permutation of a torch weight stays a torch tensor with the rows of layout_permutation.
    np.testing.assert_array_equal(
        rotate_half(np.array([1.0, 2.0, 3.0, 4.0])), [-3.0, -4.0, 1.0, 2.0]
    )
    x, c, s = np.array([1.0, 2.0]), np.array([0.5, 0.5]), np.array([0.25, 0.25])
    np.testing.assert_allclose(apply_rotate_half(x, c, s), [0.5 - 0.5, 1.0 + 0.25])
    w = torch.arange(8.0)[:, None].repeat(1, 3)
    out = permute_qk_weight(w, 1)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out[:, 0].numpy(), [0, 2, 4, 6, 1, 3, 5, 7])


def test_qk_scores_size_limit_sits_at_max_elements(size_limit):
    x = np.ones((3, 4))
    size_limit(
        18,  # n_heads * N * N = 2 * 3 * 3
        lambda: qk_scores(x, np.ones((8, 4)), np.ones((8, 4)), 2, [0, 1, 2]),
        r"the scores of shape \(n_heads, N, N\) = \(2, 3, 3\) would have 18 elements",
    )


def test_rotate_half_tables_are_hugging_faces_float32_tables(hf):
    # rotate_half_cos_sin uses the float32 recipe of LlamaRotaryEmbedding: at position 10^5
    # it differs from exact tables by about 1e-3 but matches Hugging Face's.
    d, base, pos = 16, 10000.0, np.array([0, 7, 10**5])
    c, s = rotate_half_cos_sin(pos, d, base)
    assert c.shape == (3, d) and s.shape == (3, d)
    emb = hf.make_rotary(d, base)
    c_hf, s_hf = emb(torch.zeros(1, 3, d), torch.from_numpy(pos)[None])
    np.testing.assert_allclose(c.numpy(), c_hf[0].numpy(), atol=2e-6)
    np.testing.assert_allclose(s.numpy(), s_hf[0].numpy(), atol=2e-6)
    exact = np.cos(pos[-1] * np.array(freqs_math(d, base)))
    assert np.abs(c.numpy()[-1, : d // 2] - exact).max() > 1e-4


def test_rope_lib_and_bfloat16_tables_are_rounded_as_documented():
    """ "rope_lib": float64 cos/sin (math.cos of m * b^(-2i/d)) rounded once to float32;
    "bfloat16_tables": both tables rounded to bfloat16 (bit rounding written out above);
    table_error of "rope_lib" is that float32 rounding, measured against float64."""
    import math

    d, base, pos = 8, 10000.0, np.array([1, 3, 77, 12345])
    ang = [[float(m) * th for th in freqs_math(d, base)] for m in pos]
    c64 = np.array([[math.cos(a) for a in row] for row in ang])
    s64 = np.array([[math.sin(a) for a in row] for row in ang])
    c, s = cos_sin_tables(pos, d, base, "rope_lib")
    np.testing.assert_allclose(c, c64.astype(np.float32), rtol=0, atol=1e-15)
    np.testing.assert_allclose(s, s64.astype(np.float32), rtol=0, atol=1e-15)
    err = np.maximum(np.abs(c64.astype(np.float32) - c64), np.abs(s64.astype(np.float32) - s64))
    np.testing.assert_allclose(table_error(pos, d, base, "rope_lib"), err.max(axis=1), atol=1e-13)
    assert np.all(err.max(axis=1) > 0)
    cb, sb = cos_sin_tables(pos, d, base, "bfloat16_tables")
    c32, s32 = cos_sin_tables(pos, d, base, "float32")
    np.testing.assert_array_equal(cb, round_to_bfloat16(c32))
    np.testing.assert_array_equal(sb, round_to_bfloat16(s32))
    assert np.any(sb != s32)


def test_limits_of_the_table_functions_and_their_messages(size_limit):
    cases = [
        (
            lambda: llama_precompute_freqs_cis(4, 2**32 + 1),
            r"end must be an integer <= 4294967296, got 4294967297; positions beyond 2\*\*32 are "
            r"refused everywhere$",
        ),
        (
            lambda: score_error([0, 1], 4, offset=2**32 + 1),
            r"offset must be an integer <= 4294967296, got 4294967297; MAX_POSITION, the largest "
            r"position rope_lib accepts$",
        ),
        (
            lambda: float32_angle_error([2**24], 4),
            r"positions must be below 2\*\*24 in absolute value \(exact in float32\)$",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match="^" + message):
            call()
    # no positions: empty parts, not an error
    freq, rounding = float32_angle_error([], 4)
    assert freq.shape == rounding.shape == (0, 2)
    # the size checks count the result exactly (3 x 3 table; 2 vectors x 3 positions x 4)
    for n, call, message in [
        (
            9,
            lambda: llama_precompute_freqs_cis(6, 3),
            r"freqs_cis of shape \(end, d/2\) = \(3, 3\) would have 9 elements",
        ),
        (
            24,
            lambda: score_error([0, 1, 2], 4, n_vectors=2),
            r"the n_vectors = 2 random queries of shape \(N, d\) = \(3, 4\) would have 24 "
            r"elements, .*; lower n_vectors$",
        ),
    ]:
        size_limit(n, call, message)


def test_rotate_half_tables_default_to_base_ten_thousand(hf):
    c, s = rotate_half_cos_sin(np.array([0, 7, 300]), 8)
    c_hf, s_hf = hf.make_rotary(8, 10000.0)(torch.zeros(1, 3, 8), torch.tensor([[0, 7, 300]]))
    np.testing.assert_allclose(c.numpy(), c_hf[0].numpy(), atol=2e-6)
    np.testing.assert_allclose(s.numpy(), s_hf[0].numpy(), atol=2e-6)


def test_llama_route_takes_a_tensor_whose_last_axis_is_not_contiguous():
    # x = y.transpose(-1, -2): the pairs cannot be viewed as complex numbers in place, so
    # the route copies them once into contiguous memory; the result is the 2x2 route's.
    y = torch.from_numpy(np.random.default_rng(16).uniform(-1, 1, (1, 3, 4, 2)))
    x = y.transpose(-1, -2)  # (batch, N, H, d) = (1, 3, 2, 4), last-axis stride 2
    q_out, _ = llama_apply_rotary_emb(x.float(), x.float(), llama_precompute_freqs_cis(4, 3))
    expected = rope_2x2(x.numpy().transpose(0, 2, 1, 3), np.arange(3)).transpose(0, 2, 1, 3)
    assert np.abs(q_out.double().numpy() - expected).max() < 1e-6


def test_qk_scores_refuses_projections_that_overflow_without_a_warning():
    # W_q x = 1e310 overflows to inf, and rotating it makes inf - inf = nan: still one clean
    # refusal naming x and the weights, with no numpy warning on the way (fuzz item 17).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^x, W_q and W_k \(with b_q, b_k\) are so large"):
            qk_scores(np.full((3, 6), 1e300), 1e10 * np.eye(6), np.eye(6), 3, [0, 1, 2])


def test_qk_scores_wrong_key_rows_message_gives_the_row_count():
    # W_k has 12 rows and 10 columns: the message must report the rows (12), not the columns.
    x, W_q, W_k = np.ones((3, 10)), np.ones((16, 10)), np.ones((12, 10))
    with pytest.raises(ValueError, match=r"^W_k must have n_kv_heads \* d = 8 rows, got 12$"):
        qk_scores(x, W_q, W_k, 4, [0, 1, 2], 2)


def test_score_error_rope_lib_recipe_is_apply_rope_in_float32():
    """score_error('rope_lib') is the error of apply_rope on float32 torch tensors (its
    docstring), not of rotate_half with the "rope_lib" tables: on these vectors the two
    float32 scores differ by up to about 4e-6, which moves e(m) (about 2e-8) by far more than
    the tolerance. The exact score is the float64 2x2 route of tests/peers.py; it and
    score_error's float64 reference differ by about 1e-13 at m = 1e6 (float64 angles), hence
    the absolute 1e-12."""
    d, base, pos = 64, 10000.0, np.array([5, 3000, 10**6])
    key_pos = pos - 1
    rng = np.random.default_rng(0)  # score_error's documented draws
    q = rng.standard_normal((8, pos.size, d)).astype(np.float32)
    k = rng.standard_normal((8, pos.size, d)).astype(np.float32)
    q32 = apply_rope(torch.from_numpy(q), pos, base, "half")
    k32 = apply_rope(torch.from_numpy(k), key_pos, base, "half")
    assert q32.dtype == torch.float32 and k32.dtype == torch.float32
    approx = (q32 * k32).sum(-1).double().numpy()
    exact = (rope_2x2(q, pos, base, "half") * rope_2x2(k, key_pos, base, "half")).sum(-1)
    norms = np.linalg.norm(q.astype(float), axis=-1) * np.linalg.norm(k.astype(float), axis=-1)
    expected = (np.abs(approx - exact) / norms).max(axis=0)
    np.testing.assert_allclose(
        score_error(pos, d, base, "rope_lib"), expected, rtol=1e-6, atol=1e-12
    )
