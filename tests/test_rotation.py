"""Tests of rope_lib.rotation: R_m, apply_rope, the teaching routes, layouts, accuracy, linear
attention and the figures.

Expected values come from routes independent of the code under test:

* ``rope_2x2``: a float64 route written here, pair by pair with explicit 2x2 rotation
  matrices and frequencies computed with Python's ``math`` (not ``rope_lib.theta``);
* real peers: Hugging Face transformers' ``apply_rotary_pos_emb``, ``rotate_half`` and
  ``LlamaRotaryEmbedding`` (half layout) and the ``rotary-embedding-torch`` package
  (interleaved layout, float32 only: it builds positions in the input's dtype);
* mpmath at 30 digits for the accuracy promise at positions up to 1e7 and bases up to 1e9;
* sympy-free algebraic laws checked with hypothesis for random d, base, m, n.
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import matplotlib.pyplot as plt
import mpmath
import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.text import Annotation

import rope_lib
from rope_lib import (
    apply_rope,
    apply_rope_matrix,
    apply_rope_refusals,
    apply_rotate_half,
    cos_sin_tables,
    elu_feature_map,
    float32_angle_error,
    layout_permutation,
    linear_attention,
    linear_attention_weights,
    llama_apply_rotary_emb,
    llama_precompute_freqs_cis,
    permute_qk_weight,
    qk_scores,
    rotate_half,
    rotate_half_cos_sin,
    rotation_matrix,
    score_error,
    table_error,
    time_rope_routes,
)

# ----------------------------------------------------------------- independent routes


def freqs_math(d: int, base: float) -> list[float]:
    """theta_i = base ** (-2 i / d) with Python floats."""
    return [base ** (-2.0 * i / d) for i in range(d // 2)]


def pairs(d: int, layout: str) -> list[tuple[int, int]]:
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def rope_2x2(x, positions, base=10000.0, layout="interleaved"):
    """float64 RoPE with one explicit 2x2 rotation per (position, pair)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    out = np.empty_like(x)
    freqs = freqs_math(d, base)
    for t, m in enumerate(positions):
        for (a, b), th in zip(pairs(d, layout), freqs, strict=True):
            ang = float(m) * th
            block = np.array([[math.cos(ang), -math.sin(ang)], [math.sin(ang), math.cos(ang)]])
            out[..., t, [a, b]] = x[..., t, [a, b]] @ block.T
    return out


def rotation_2x2(m, d, base=10000.0, layout="interleaved"):
    """R_m column by column: column j is the rotated unit vector e_j."""
    return rope_2x2(np.eye(d)[:, None, :], [m], base, layout)[:, 0, :].T


@pytest.fixture(scope="module")
def hf():
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama

    def rotary(d: int, base: float):
        config = LlamaConfig(
            hidden_size=2 * d,
            num_attention_heads=2,
            head_dim=d,
            rope_parameters={"rope_theta": base, "rope_type": "default"},
        )
        return modeling_llama.LlamaRotaryEmbedding(config)

    return SimpleNamespace(
        apply_rotary_pos_emb=modeling_llama.apply_rotary_pos_emb,
        rotate_half=modeling_llama.rotate_half,
        make_rotary=rotary,
    )


even_d = st.integers(1, 32).map(lambda h: 2 * h)
bases = st.floats(1.5, 1e9, allow_nan=False)
positions_st = st.integers(-(10**6), 10**6)


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


@pytest.mark.parametrize("row_pairs", [False, True])
@pytest.mark.parametrize("hint", [False, True])
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize(
    "shape", [(1, 2), (5, 2), (7, 8), (3, 37, 8), (2, 3, 11, 16), (40, 3, 4), (2, 1, 6)]
)
def test_apply_rope_torch_matches_explicit_route(monkeypatch, row_pairs, hint, layout, shape):
    """Both layouts, float64 and float32, with and without the huge-page hint's route (an
    empty result, advised when it spans a whole huge page, then written by ``out=``), and
    in the half layout both forms of the partner terms: two half updates, or one update
    over the view that pairs each row with the next (used from 4 MiB; here at any size)."""
    monkeypatch.setattr(rope_lib.rotation, "_HUGE_PAGE_OUTPUTS", hint)
    monkeypatch.setattr(rope_lib.rotation, "_HUGE_PAGE_MIN_BYTES", 1024)
    monkeypatch.setattr(rope_lib.rotation, "_ROW_PAIR_MIN_BYTES", 0 if row_pairs else 1 << 62)
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape)
    pos = rng.integers(-3000, 3000, size=shape[-2])
    expected = rope_2x2(x, pos, 500.0, layout)
    got = apply_rope(torch.from_numpy(x), pos, 500.0, layout)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    got32 = apply_rope(torch.from_numpy(x).float(), pos, 500.0, layout)
    assert got32.dtype == torch.float32
    assert np.abs(got32.double().numpy() - expected).max() < 2e-6 * max(1.0, np.abs(x).max())


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_huge_page_hint_gives_an_ordinary_tensor(monkeypatch, layout):
    """With the hint on, a result above the size limit (4 MiB here) is a plain torch
    tensor: right values, its own resizable storage, freed like any other."""
    monkeypatch.setattr(rope_lib.rotation, "_HUGE_PAGE_OUTPUTS", True)
    monkeypatch.setattr(rope_lib.rotation, "_HUGE_PAGE_MIN_BYTES", 1 << 22)
    found = rope_lib.rotation._madvise()
    if found is None:
        pytest.skip("no madvise(MADV_HUGEPAGE) on this platform")
    calls = []

    def recording(start, length, advice):
        calls.append((start, length))
        return found[0](start, length, advice)

    monkeypatch.setattr(rope_lib.rotation, "_madvise", lambda: (recording, found[1]))
    rng = np.random.default_rng(33)
    x = torch.from_numpy(rng.standard_normal((4, 1024, 128)).astype(np.float32))  # 2 MiB
    x2 = torch.cat((x, x))  # 4 MiB: hinted
    pos = rng.integers(0, 10**6, size=1024)
    small = apply_rope(x, pos, layout=layout)
    assert not calls  # below the size limit
    big = apply_rope(x2, pos, layout=layout)
    (start, length) = calls[0]
    begin = big.untyped_storage().data_ptr()
    assert start % (1 << 21) == 0 and length % (1 << 21) == 0 and length > 0
    assert begin <= start and start + length <= begin + big.untyped_storage().nbytes()
    assert torch.equal(big[:4], small) and torch.equal(big[4:], small)
    expected = rope_2x2(x[:, :8].double().numpy(), pos[:8], layout=layout)
    assert np.abs(big[:4, :8].double().numpy() - expected).max() < 2e-6 * x.abs().max().item()
    assert big.is_contiguous() and big.untyped_storage().resizable()
    big.resize_(3)  # an ordinary storage can be resized
    assert big.shape == (3,)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("shape", [(0, 4, 8), (2, 0, 8), (3, 0, 2)])
def test_apply_rope_empty_inputs(layout, shape):
    pos = np.arange(shape[-2])
    for x in (np.zeros(shape), torch.zeros(shape), torch.zeros(shape, dtype=torch.bfloat16)):
        y = apply_rope(x, pos, layout=layout)
        assert type(y) is type(x) and tuple(y.shape) == shape and y.dtype == x.dtype


def _clear_table_caches():
    rope_lib.rotation._cos_sin_float64.cache_clear()
    rope_lib.rotation._torch_tables.cache_clear()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_table_cache_keys_positions_base_and_dtype(layout):
    """Calls that differ only in positions, base or dtype, in turn and then again (from the
    cache): each result is the explicit route's at its own positions and base."""
    _clear_table_caches()
    rng = np.random.default_rng(30)
    x = rng.standard_normal((2, 6, 8))
    pos = np.array([0, 5, -3, 100, 7, 2])
    calls = [
        (torch.float64, pos, 10000.0),
        (torch.float64, pos + 1, 10000.0),
        (torch.float64, pos[::-1], 10000.0),
        (torch.float64, pos, 500.0),
        (torch.float32, pos, 500.0),
        (torch.float32, pos, 10000.0),
        (torch.bfloat16, pos, 10000.0),
    ]
    for _ in range(2):
        for dtype, p, base in calls:
            xt = torch.from_numpy(x).to(dtype)
            y = apply_rope(xt, p, base, layout)
            assert y.dtype == dtype
            expected = rope_2x2(xt.double().numpy(), p, base, layout)
            tol = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 2e-2}[dtype]
            assert np.abs(y.double().numpy() - expected).max() < tol, (dtype, base)
            np_y = apply_rope(xt.double().numpy(), p, base, layout)  # numpy route, same cache
            np.testing.assert_allclose(np_y, expected, atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_mutating_inputs_or_outputs_after_a_call_leaves_no_stale_tables(layout):
    """The tables are keyed by the positions' values, not by the array holding them, and
    no result shares memory with a cached table."""
    _clear_table_caches()
    x = torch.from_numpy(np.random.default_rng(31).standard_normal((3, 5, 8)))
    pos = np.arange(5)
    first = apply_rope(x, pos, layout=layout)
    np.testing.assert_allclose(first.numpy(), rope_2x2(x.numpy(), range(5), layout=layout))
    pos *= 7  # the same array, new values
    second = apply_rope(x, pos, layout=layout)
    np.testing.assert_allclose(second.numpy(), rope_2x2(x.numpy(), pos, layout=layout))
    pos_t = torch.arange(5)
    third = apply_rope(x, pos_t, layout=layout)
    pos_t.mul_(7)  # a position tensor changed in place
    np.testing.assert_allclose(apply_rope(x, pos_t, layout=layout).numpy(), second.numpy())
    first.fill_(0.0)  # a result changed in place
    third.mul_(2.0)
    np.testing.assert_allclose(
        apply_rope(x, range(5), layout=layout).numpy(), rope_2x2(x.numpy(), range(5), layout=layout)
    )
    x_np = x.numpy().copy()
    out_np = apply_rope(x_np, range(5), layout=layout)
    out_np[...] = 0.0  # a numpy result changed in place (its cached tables are read-only)
    np.testing.assert_allclose(
        apply_rope(x_np, range(5), layout=layout), rope_2x2(x_np, range(5), layout=layout)
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_tables_are_kept_per_device(layout):
    """Tables built for one device are never handed to a tensor on another: a call on the
    meta device (and on CUDA when present) first, then the same call on the CPU."""
    _clear_table_caches()
    x = torch.from_numpy(np.random.default_rng(32).standard_normal((2, 5, 8)))
    pos = [0, 1, 2, 30, 400]
    devices = ["meta"] + (["cuda"] if torch.cuda.is_available() else [])
    expected = rope_2x2(x.numpy(), pos, layout=layout)
    for device in devices:
        y = apply_rope(x.to(device), pos, layout=layout)
        assert y.device.type == device and y.shape == x.shape and y.dtype == x.dtype
        if device != "meta":
            np.testing.assert_allclose(y.cpu().numpy(), expected, atol=1e-12)
    y = apply_rope(x, pos, layout=layout)
    assert y.device.type == "cpu"
    np.testing.assert_allclose(y.numpy(), expected, atol=1e-12)


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
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox import modeling_gpt_neox as neox

    heads, N, batch = 3, 9, 2
    config = GPTNeoXConfig(
        hidden_size=heads * head,
        num_attention_heads=heads,
        rotary_pct=pct,
        rotary_emb_base=base,
        intermediate_size=8,
        num_hidden_layers=1,
        vocab_size=8,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(head)
    attn = neox.GPTNeoXAttention(config, layer_idx=0).eval()
    r = attn.rotary_ndims
    assert r == int(head * pct)
    x = torch.randn(batch, N, heads * head)
    position_ids = torch.arange(N)[None].expand(batch, N)
    cos, sin = neox.GPTNeoXRotaryEmbedding(config)(x, position_ids)
    assert cos.shape[-1] == r  # the width apply_rotary_pos_emb rotates
    seen = {}
    real = neox.apply_rotary_pos_emb

    def spy(q, k, c, s, *args, **kwargs):
        out = real(q, k, c, s, *args, **kwargs)
        seen.update(q=q, k=k, q_rot=out[0], k_rot=out[1])
        return out

    monkeypatch.setattr(neox, "apply_rotary_pos_emb", spy)
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
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox import modeling_gpt_neox as neox

    head, heads, N, base = 96, 2, 7, 10000.0

    def config(pct):
        c = GPTNeoXConfig(
            hidden_size=heads * head,
            num_attention_heads=heads,
            rotary_pct=pct,
            rotary_emb_base=base,
            intermediate_size=8,
            num_hidden_layers=1,
            vocab_size=8,
        )
        c._attn_implementation = "eager"
        return c

    r = int(head * 0.25)
    rotary = neox.GPTNeoXRotaryEmbedding(config(0.25))
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), freqs_math(r, base), rtol=1e-6)
    torch.manual_seed(1)
    attn = neox.GPTNeoXAttention(config(0.25), layer_idx=0).eval()
    assert attn.rotary_ndims == r
    x = torch.randn(1, N, heads * head)
    cos, sin = rotary(x, torch.arange(N)[None])
    assert cos.shape[-1] == r
    with torch.no_grad():
        out = attn(x, attention_mask=None, position_embeddings=(cos, sin))[0]
        attn.rotary_ndims = head  # the whole head, if forward read it
        assert torch.equal(attn(x, attention_mask=None, position_embeddings=(cos, sin))[0], out)
    # tables of another width: that many coordinates are rotated, whatever rotary_ndims says
    cos2, sin2 = neox.GPTNeoXRotaryEmbedding(config(0.5))(x, torch.arange(N)[None])
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


# ------------------------------------------------------------------------ layouts


def hf_converter_permute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The row permutation of Hugging Face's LLaMA checkpoint converter (Meta -> HF)."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


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
    config = Config(
        hidden_size=width,
        num_attention_heads=H,
        num_key_value_heads=H_kv,
        head_dim=d,
        intermediate_size=8,
        num_hidden_layers=1,
        vocab_size=8,
    )
    config._attn_implementation = "eager"
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
    seen = {}
    real = hf_mod.apply_rotary_pos_emb

    def spy(q, k, cos, sin, *args, **kwargs):
        out = real(q, k, cos, sin, *args, **kwargs)
        seen.update(q=out[0], k=out[1])
        return out

    monkeypatch.setattr(hf_mod, "apply_rotary_pos_emb", spy)
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
        return scores(seen["q"], seen["k"])

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


# ----------------------------------------------------------------------- accuracy


def mp_tables(pos: int, d: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    with mpmath.workdps(30):
        angles = [
            mpmath.mpf(pos) * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / d)
            for i in range(d // 2)
        ]
        return (
            np.array([float(mpmath.cos(a)) for a in angles]),
            np.array([float(mpmath.sin(a)) for a in angles]),
        )


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


def round_to_bfloat16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest, ties to even) by bit manipulation."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


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
    key_pos = pos - 1
    rng = np.random.default_rng(0)  # score_error's documented draws
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
    expected = (np.abs(approx - exact) / norms).max(axis=0)
    np.testing.assert_allclose(
        score_error(pos, d, base, "float32"), expected, rtol=1e-6, atol=1e-12
    )


def test_float32_angle_error_split():
    """frequency part + product rounding = the recipe's angle error; the parts behave as stated."""
    d, base = 128, 10000.0
    pos = np.array([0, 1, 2, 1024, 12345, 10**6, 2**23 + 1])
    freq, rounding = float32_angle_error(pos, d, base)
    # Independent route for the total: the recipe's float32 angle, from torch, against mpmath.
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    angle32 = (torch.from_numpy(pos).float()[:, None] * inv_freq[None, :]).double().numpy()
    with mpmath.workdps(40):
        exact = np.array(
            [
                [
                    float(mpmath.mpf(int(m)) * mpmath.power(base, mpmath.mpf(-2 * i) / d))
                    for i in range(d // 2)
                ]
                for m in pos
            ]
        )
    np.testing.assert_allclose(freq + rounding, angle32 - exact, rtol=0, atol=1e-9)
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


#: The routes time_rope_routes measures, in the order of chapter 5's table.
TIMED_ROUTES = [
    "explicit matrix",
    "LLaMA complex",
    "rotate_half",
    "apply_rope interleaved",
    "apply_rope half",
    "copy",
]


def test_time_rope_routes_reports_every_route():
    """No assert on speed: only that every route ran and got a positive, finite time."""
    threads = torch.get_num_threads()
    times = time_rope_routes(batch=1, heads=2, N=16, d=8, repeats=3)
    assert list(times) == TIMED_ROUTES
    assert all(np.isfinite(t) and t > 0 for t in times.values())
    assert torch.get_num_threads() == threads


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


def _requires_grad(*arrays, dtype=torch.float64):
    return [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]


GRAD_POSITIONS = [0, 3, -7, 100, 10**6]


def _new_tensors(fn) -> tuple[int, list[str]]:
    """Run ``fn`` under a torch dispatch mode; return how many tensors its aten ops created
    with storage of their own (not a view, not an in-place result), and the op names."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    ops: list[tuple[str, int]] = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inputs = tree_flatten((args, kwargs))[0]
            given = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
            made = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            ops.append(
                (func.__name__, sum(t.untyped_storage().data_ptr() not in given for t in made))
            )
            return out

    with Record():
        fn()
    return sum(n for _, n in ops), [name for name, _ in ops]


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_allocations_are_as_chapter_5_says(layout):
    """Chapter 5's account of the torch route (the eager route, which every tensor below the
    fused kernel's size limit takes): float32 and float64 outside autograd, once the tables
    are cached, one new tensor, the output; the first call at new positions also builds the
    tables (interleaved: two casts and the complex table; half: two (N, d) tables); a tensor
    with an odd storage offset is copied first in the interleaved layout; float16 and
    bfloat16, two more (the float32 copy of x, the result converted back); under autograd the
    half layout builds its result out of place; rotary_dim < d adds the concatenation with the
    passed-through coordinates (and, interleaved, a contiguous copy of the rotated slice)."""
    pos = np.arange(5)

    def count(x, **kwargs):
        apply_rope(x, pos, layout=layout, **kwargs)  # tables cached first, as in a model
        return _new_tensors(lambda: apply_rope(x, pos, layout=layout, **kwargs))

    for dtype in (torch.float32, torch.float64):
        assert count(torch.randn(2, 5, 16, dtype=dtype))[0] == 1
    _clear_table_caches()
    x_new = torch.randn(2, 5, 16)
    n, ops = _new_tensors(lambda: apply_rope(x_new, pos, layout=layout))
    if layout == "interleaved":
        assert n == 4 and ops.count("_to_copy.default") == 2 and "complex.default" in ops
    else:
        assert n == 3 and ops.count("_to_copy.default") == 2
    odd = torch.randn(2 * 5 * 16 + 1)[1:].view(2, 5, 16)  # contiguous, storage offset 1
    assert odd.is_contiguous() and odd.storage_offset() == 1
    assert count(odd)[0] == (1 if layout == "half" else 2)
    # not contiguous: the interleaved layout copies it once first
    strided = torch.randn(5, 2, 16).transpose(0, 1)
    assert count(strided)[0] == (1 if layout == "half" else 2)
    for dtype in (torch.float16, torch.bfloat16):
        n, ops = count(torch.randn(2, 5, 16).to(dtype))
        assert n == 3 and ops.count("_to_copy.default") == 2
    n, ops = count(torch.randn(2, 5, 16, requires_grad=True))
    if layout == "half":
        assert n > 3 and "cat.default" in ops
    else:
        assert n == 1  # the complex product is differentiable as it is
    n, ops = count(torch.randn(2, 5, 16), rotary_dim=8)
    assert n == (2 if layout == "half" else 3) and "cat.default" in ops


def test_teaching_routes_allocate_as_chapter_5_says():
    """Chapter 5: the LLaMA route writes one tensor per rotated tensor in float32 (the complex
    product; xq.float() and the views copy nothing) and three in float16 (the float32 copy, the
    product, the conversion back); the rotate_half route writes five (-x2, the concatenation,
    two products, the sum)."""
    N, d = 6, 8
    freqs_cis = llama_precompute_freqs_cis(d, N)
    for dtype, per_tensor in ((torch.float32, 1), (torch.float16, 3)):
        xq = torch.randn(2, N, 4, d).to(dtype)
        n, _ = _new_tensors(lambda xq=xq: llama_apply_rotary_emb(xq, xq, freqs_cis))
        assert n == 2 * per_tensor  # query and key
    cos, sin = rotate_half_cos_sin(np.arange(N), d)
    xh = torch.randn(2, 4, N, d)
    n, ops = _new_tensors(lambda: apply_rotate_half(xh, cos, sin))
    assert n == 5 and "cat.default" in ops and "neg.default" in ops


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_gradcheck(layout):
    (x,) = _requires_grad(np.random.default_rng(20).standard_normal((2, 5, 8)))
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


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_tables_cached_under_inference_mode_serve_training(layout):
    """Evaluation under torch.inference_mode, then a training step at the same positions:
    the cached tables must not be inference tensors (autograd cannot save those)."""
    pos = [11, 12, 13]
    x = torch.randn(3, 24)
    rope_lib.rotation._torch_tables.cache_clear()  # the first request is the inference one
    with torch.inference_mode():
        evaluated = apply_rope(x, pos, layout=layout)
    xr = x.clone().requires_grad_()
    trained = apply_rope(xr, pos, layout=layout)
    trained.sum().backward()
    torch.testing.assert_close(trained.detach(), evaluated.clone(), rtol=0, atol=1e-6)
    expected = rope_2x2(np.ones((3, 24)), [-m for m in pos], 10000.0, layout)
    assert np.abs(xr.grad.double().numpy() - expected).max() < 1e-6


def test_apply_rope_gradient_through_half_precision():
    x = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
    apply_rope(x, np.arange(4), layout="half").float().sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.bfloat16
    expected = rope_2x2(np.ones((4, 8)), -np.arange(4), 10000.0, "half")
    assert np.abs(x.grad.double().numpy() - expected).max() < 2.0**-7


def test_teaching_routes_gradcheck():
    rng = np.random.default_rng(22)
    T, d = 5, 8
    xq, xk = _requires_grad(rng.standard_normal((2, T, 3, d)), rng.standard_normal((2, T, 1, d)))
    angles = np.outer(np.arange(T), freqs_math(d, 1e4))
    freqs_cis = torch.tensor(np.exp(1j * angles), dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(llama_apply_rotary_emb, (xq, xk, freqs_cis))
    tables = np.concatenate((angles, angles), axis=-1)
    x, cos, sin = _requires_grad(rng.standard_normal((2, T, d)), np.cos(tables), np.sin(tables))
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


def test_plot_rotation_2d():
    fig = rope_lib.plot_rotation_2d(
        q=(1.0, 0.3), k=(0.8, 0.6), theta_2d=0.4, positions=((2, 5), (7, 10))
    )
    try:
        assert len(fig.axes) == 2
        scores = []
        for ax, (m, n) in zip(fig.axes, ((2, 5), (7, 10)), strict=True):
            tips = [a.xy for a in ax.texts if isinstance(a, Annotation)]
            qm = (
                math.cos(0.4 * m) - 0.3 * math.sin(0.4 * m),
                math.sin(0.4 * m) + 0.3 * math.cos(0.4 * m),
            )
            kn = (
                0.8 * math.cos(0.4 * n) - 0.6 * math.sin(0.4 * n),
                0.8 * math.sin(0.4 * n) + 0.6 * math.cos(0.4 * n),
            )
            np.testing.assert_allclose(tips, [(1.0, 0.3), (0.8, 0.6), qm, kn], atol=1e-12)
            score = qm[0] * kn[0] + qm[1] * kn[1]
            assert f"{score:.4f}" in ax.get_title()
            assert ax.get_xlabel() and ax.get_ylabel()
            scores.append(score)
        assert scores[0] == pytest.approx(scores[1])  # same n - m
    finally:
        plt.close(fig)


def test_plot_layout_mismatch():
    d, base = 16, 10000.0
    fig = rope_lib.plot_layout_mismatch(d=d, base=base, max_distance=50, seed=3)
    try:
        ax = fig.axes[0]
        original, converted, forgotten = (line.get_ydata() for line in ax.get_lines()[:3])
        x = ax.get_lines()[0].get_xdata()
        np.testing.assert_array_equal(x, np.arange(51))
        rng = np.random.default_rng(3)
        q = rng.standard_normal(d)
        k = q + 0.3 * rng.standard_normal(d)
        expected = np.array([q @ rotation_2x2(int(xi), d, base) @ k for xi in x])
        np.testing.assert_allclose(original, expected, atol=1e-10)
        np.testing.assert_allclose(converted, expected, atol=1e-10)
        assert forgotten[0] == pytest.approx(expected[0])
        assert np.abs(forgotten[1:] - expected[1:]).max() > 1.0
        assert "distance" in ax.get_xlabel() and ax.get_ylabel()
        assert "n - m" in ax.get_xlabel() and "$x" not in ax.get_xlabel()  # x: a vector
        assert ax.get_legend() is not None
    finally:
        plt.close(fig)


def test_plot_accuracy():
    fig = rope_lib.plot_accuracy(d=64, base=10000.0, max_position=10**7, num=5)
    try:
        ax_t, ax_s = fig.axes[:2]
        lines = dict(zip(rope_lib.RECIPES, ax_t.get_lines(), strict=False))
        pos = lines["rope_lib"].get_xdata()
        np.testing.assert_array_equal(pos, np.unique(np.round(np.logspace(0, 7, 5)).astype(int)))
        assert np.all(lines["rope_lib"].get_ydata() <= 2.0**-25)
        f32 = lines["float32"].get_ydata()
        c_mp, s_mp = mp_tables(int(pos[-1]), 64, 1e4)
        c, s = cos_sin_tables(pos[-1:], 64, recipe="float32")
        assert f32[-1] == pytest.approx(
            max(np.abs(c[0] - c_mp).max(), np.abs(s[0] - s_mp).max()), rel=1e-6
        )
        score_lines = dict(zip(rope_lib.RECIPES, ax_s.get_lines(), strict=False))
        assert np.all(score_lines["rope_lib"].get_ydata() < 1e-6)
        assert score_lines["float32"].get_ydata()[-1] > 1e-3
        for ax in (ax_t, ax_s):
            assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
            assert ax.get_xlabel() == "position $m$" and ax.get_ylabel()
    finally:
        plt.close(fig)


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
    with pytest.raises(ValueError, match="weight"):
        permute_qk_weight(np.zeros((12, 4)), n_heads=5)
    with pytest.raises(ValueError, match="head dimension"):
        permute_qk_weight(np.zeros((6, 4)), n_heads=2)
    with pytest.raises(ValueError, match="recipe"):
        cos_sin_tables([1], 8, recipe="fp8")
    with pytest.raises(ValueError, match="d"):
        layout_permutation(5)
    with pytest.raises(ValueError, match="v"):
        linear_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((2, 4)), np.arange(3))
    with pytest.raises(ValueError, match="positions"):
        linear_attention(np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 4)), np.arange(2))
    with pytest.raises(ValueError, match="positions"):
        rope_lib.plot_rotation_2d(positions=(1, 2))


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
    with pytest.raises(TypeError, match="x"):
        elu_feature_map(None)
    q = np.ones((3, 4))
    for flag in ("no", 0, 1, None):
        with pytest.raises(TypeError, match="causal"):
            linear_attention(q, q, np.ones((3, 2)), np.arange(3), causal=flag)
    W = np.ones((8, 8))
    with pytest.raises(ValueError, match="b_q"):
        qk_scores(np.ones((3, 8)), W, W, 2, np.arange(3), b_q=np.ones(4))
    with pytest.raises(ValueError, match="W_k"):
        qk_scores(np.ones((3, 8)), W, np.ones((8, 5)), 2, np.arange(3))
    with pytest.raises(TypeError, match="symbol"):
        rope_lib.symbolic_rotation_matrix("m", 4, symbol="a:b")
    with pytest.raises(TypeError, match="theta_2d"):
        rope_lib.plot_rotation_2d(theta_2d=True)


def test_teaching_routes_accept_gqa_keys_and_strided_views():
    """xk with fewer heads than xq (GQA) and odd storage offsets still work, and agree with
    apply_rope."""
    base_q = torch.randn(1, 5, 3, 9)
    xq, xk = base_q[..., 1:], torch.randn(1, 5, 1, 8)
    q_out, k_out = llama_apply_rotary_emb(xq, xk, llama_precompute_freqs_cis(8, 5))
    ours = apply_rope(xq.transpose(1, 2), np.arange(5)).transpose(1, 2)
    assert (q_out - ours).abs().max().item() < 1e-6
    assert k_out.shape == xk.shape


def test_size_and_time_limits_are_checked_before_allocating():
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        rotation_matrix(0, 2**16)  # 2**32 entries
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        apply_rope_matrix(np.zeros((4096, 256)), np.arange(4096))  # 2**28 matrix entries
    with pytest.raises(ValueError, match="positions"):
        cos_sin_tables(np.arange(2**13), 2**16)  # 2**28 table entries
    with pytest.raises(ValueError, match=r"\bd\b"):
        rope_lib.symbolic_rotation_matrix("m", 256)
    with pytest.raises(ValueError, match="end"):
        llama_precompute_freqs_cis(8, 2**33)
    with pytest.raises(ValueError, match="end"):
        llama_precompute_freqs_cis(2**16, 2**13)
    with pytest.raises(ValueError, match="n_vectors"):
        score_error([0, 1], 8, n_vectors=10**12)
    with pytest.raises(ValueError, match="offset"):
        score_error([0, 1], 8, offset=2**40)
    with pytest.raises(ValueError, match="repeats"):
        time_rope_routes(repeats=10**6)
    with pytest.raises(ValueError, match="repeats"):
        time_rope_routes(N=2048, d=128, repeats=500)  # past the 2**32 work budget
    with pytest.raises(ValueError, match="heads"):
        time_rope_routes(heads=10**12)
    with pytest.raises(ValueError, match="seed"):
        time_rope_routes(seed=-1)
    with pytest.raises(ValueError, match="max_distance"):
        rope_lib.plot_layout_mismatch(d=8, max_distance=10**12)
    with pytest.raises(ValueError, match="num"):
        rope_lib.plot_accuracy(d=8, max_position=100, num=10**12)
    with pytest.raises(ValueError, match="max_position"):
        rope_lib.plot_accuracy(d=8, max_position=2**40)
    with pytest.raises(ValueError, match="positions"):
        rope_lib.plot_rotation_2d(positions=[(0, 1)] * 13)
    q = np.ones((1, 4096, 256))
    with pytest.raises(ValueError, match="causal"):
        linear_attention(q, q, np.ones((1, 4096, 256)), np.arange(4096), causal=True)
    with pytest.raises(ValueError, match="MAX_ELEMENTS"):
        linear_attention_weights(np.ones((16, 4096, 4)), np.ones((16, 4096, 4)), np.arange(4096))


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


@pytest.mark.parametrize("arg", ["q", "k"])
def test_plot_rotation_2d_bounds_the_arrows(arg):
    """Fuzz item 24: q = (1e300, 3e299) reached matplotlib ("Axis limits cannot be NaN or
    Inf"); entries beyond 1e100 are refused by name, 1e100 itself is drawn."""
    with pytest.raises(ValueError, match=rf"^{arg} must have magnitude <= 1e\+100"):
        rope_lib.plot_rotation_2d(**{arg: (1e300, 3e299)})
    fig = rope_lib.plot_rotation_2d(**{arg: (1e100, -1e100)})
    lo, hi = fig.axes[0].get_xlim()
    assert np.isfinite([lo, hi]).all() and hi >= 1e100
    plt.close(fig)


def test_time_rope_routes_accepts_any_seed():
    """Fuzz item 25: seed = 2**64 + 5 overflowed torch's generator; the seed is reduced
    modulo 2**63, as documented."""
    times = time_rope_routes(N=8, d=8, repeats=1, seed=2**64 + 5)
    assert list(times) == TIMED_ROUTES
    assert all(t > 0 for t in times.values())


def test_huge_page_hint_is_on_by_default_and_switched_by_the_environment(monkeypatch):
    """ROPE_LIB_HUGE_PAGES: unset or "1" advises a large result, "0" does not, anything else
    is refused naming the variable."""
    monkeypatch.setattr(rope_lib.rotation, "_HUGE_PAGE_MIN_BYTES", 1 << 22)
    found = rope_lib.rotation._madvise()
    if found is None:
        pytest.skip("no madvise(MADV_HUGEPAGE) on this platform")
    calls = []
    monkeypatch.setattr(
        rope_lib.rotation, "_madvise", lambda: (lambda *a: calls.append(a) or 0, found[1])
    )
    x = torch.zeros(4, 1024, 512)  # 8 MiB
    pos = np.arange(1024)
    assert rope_lib.rotation._HUGE_PAGE_OUTPUTS is True
    monkeypatch.delenv("ROPE_LIB_HUGE_PAGES", raising=False)
    apply_rope(x, pos, layout="half")
    assert len(calls) == 1
    monkeypatch.setenv("ROPE_LIB_HUGE_PAGES", "0")
    apply_rope(x, pos, layout="half")
    assert len(calls) == 1
    monkeypatch.setenv("ROPE_LIB_HUGE_PAGES", "yes")
    with pytest.raises(ValueError, match=r"ROPE_LIB_HUGE_PAGES must be '0' or '1'"):
        apply_rope(x, pos, layout="half")


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
