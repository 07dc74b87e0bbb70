"""Tests of rope_lib.experiments.recall_model: rotation, scores, training, evaluation, the form.

Independent routes: dense rotation matrices built here from cos/sin (rotation and scores), the
attention mass of each value id summed in a Python loop (logits), explicit sums over the
held-out set (target moment), 2 x 2 blocks written out by hand (pair blocks and their rotation
terms), and the trace of dense rotation matrices with a full matrix (general form).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from rope_lib import apply_rope, similarity_margin
from rope_lib.experiments import recall_model as rm
from rope_lib.experiments import recall_task as rt
from tests.test_recall_task import TINY


def pairs(d: int, layout: str) -> list[tuple[int, int]]:
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def rotation(m: int, d: int, base: float, layout: str) -> np.ndarray:
    r = np.zeros((d, d))
    for i, (a, b) in enumerate(pairs(d, layout)):
        angle = m * base ** (-2.0 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        r[a, a], r[a, b], r[b, a], r[b, b] = c, -s, s, c
    return r


# ------------------------------------------------------------------------------------------
# rotation and scores
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rotation_table_rotates_like_dense_matrices_and_apply_rope(layout: str) -> None:
    d, base, span = 8, 300.0, 50
    table = rm.rotation_table(span, d, base, layout)
    assert table[0].shape == (span + 1, d // 2) and table[0].dtype == torch.float32
    x = torch.randn(7, d, generator=rt.generator(0))
    pos = torch.tensor([0, 1, 5, 17, 33, 49, 50])
    got = rm.rotate(x, pos, table, layout).numpy()
    dense = np.stack(
        [rotation(int(p), d, base, layout) @ x[i].double().numpy() for i, p in enumerate(pos)]
    )
    np.testing.assert_allclose(got, dense, atol=2e-6)
    np.testing.assert_allclose(got, apply_rope(x, pos.numpy(), base, layout).numpy(), atol=2e-6)


@pytest.mark.parametrize("tokens", [8, 40])
def test_scores_and_logits_match_their_definition(tokens: int) -> None:
    """raw score = q^T R_{-Delta} k (dense matrices); logit_v = log of the attention mass of v."""
    d, base, span, nv = 4, 50.0, 40, 4
    gen = rt.generator(3)
    params = {
        "key_emb": torch.randn(16, 8, generator=gen),
        "w_q": torch.randn(d, 8, generator=gen),
        "w_k": torch.randn(d, 8, generator=gen),
    }
    deltas = torch.randint(1, span + 1, (5,), generator=gen)
    ctx = rt.sample_contexts(gen, deltas, span, tokens, 16, nv)
    table = rm.rotation_table(span, d, base, "half")
    logits, attn, q, k, raw = rm._forward(params, ctx, table, "half", nv)
    emb, wq, wk = (params[n].double().numpy() for n in ("key_emb", "w_q", "w_k"))
    for row in range(5):
        keys = ctx.keys[row].numpy()
        t = int(ctx.target[row])
        pos = np.arange(tokens) if ctx.positions is None else ctx.positions[row].numpy()
        qv = wq @ emb[keys[t]]
        want = [
            qv @ rotation(int(p) - span, d, base, "half") @ (wk @ emb[kid])
            for p, kid in zip(pos, keys, strict=True)
        ]
        np.testing.assert_allclose(raw[row].double().numpy(), want, rtol=1e-4, atol=1e-4)
        s = np.array(want) / math.sqrt(d)
        a = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
        np.testing.assert_allclose(attn[row].double().numpy(), a, rtol=1e-4, atol=1e-6)
        mass = [sum(a[j] for j in range(tokens) if ctx.values[row, j] == v) for v in range(nv)]
        lg = logits[row].double().numpy()
        present = [v for v in range(nv) if mass[v] > 0]
        assert all(lg[v] == -math.inf for v in range(nv) if v not in present)
        diffs = [lg[v] - math.log(mass[v]) for v in present]
        assert max(diffs) - min(diffs) < 1e-4  # equal up to one shared constant


# ------------------------------------------------------------------------------------------
# training, pairing and evaluation
# ------------------------------------------------------------------------------------------
def test_training_is_deterministic_and_seeded() -> None:
    a = rm.train_recall(40, 8, 4, 100.0, 3, config=TINY)
    b = rm.train_recall(40, 8, 4, 100.0, 3, config=TINY)
    c = rm.train_recall(40, 8, 4, 100.0, 4, config=TINY)
    assert a.loss_curve == b.loss_curve and torch.equal(a.w_q, b.w_q)
    assert not torch.equal(a.w_q, c.w_q)


def test_runs_of_one_seed_share_weights_data_and_heldout_set_across_bases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[float, list] = {}
    real = rt.sample_contexts

    def spy(gen, deltas, span, tokens, n_keys, n_values):  # type: ignore[no-untyped-def]
        ctx = real(gen, deltas, span, tokens, n_keys, n_values)
        seen.setdefault(current, []).append((ctx.keys.clone(), ctx.positions.clone()))
        return ctx

    monkeypatch.setattr(rm, "sample_contexts", spy)
    monkeypatch.setattr(rt, "sample_contexts", spy)
    models = {}
    for current in (10.0, 1e4):
        models[current] = rm.train_recall(40, 8, 4, current, 0, config=TINY)
        rm.evaluate_recall(models[current])
    lo, hi = seen[10.0], seen[1e4]
    assert len(lo) == len(hi) == TINY.steps + 1  # training steps, then one held-out chunk
    assert all(
        torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(lo, hi, strict=True)
    )
    assert torch.equal(models[10.0].key_emb, models[1e4].key_emb)
    # the key embedding does not depend on d either
    wide = rm.train_recall(40, 8, 8, 10.0, 0, config=TINY)
    assert torch.equal(wide.key_emb, models[10.0].key_emb)


def test_evaluation_counts_and_statistics_by_brute_force() -> None:
    model = rm.train_recall(40, 8, 4, 100.0, 1, config=TINY)
    ev = rm.evaluate_recall(model)
    assert ev["tokens"] == 8 and ev["bin_edges"][0] == 1 and ev["bin_edges"][-1] == 41
    assert ev["n"] == [TINY.eval_per_bin] * (len(ev["bin_edges"]) - 1)
    assert [c / n for c, n in zip(ev["correct"], ev["n"], strict=True)] == ev["accuracy"]
    # the target moment E[k* q^T] and the means, summed context by context
    emb, wq, wk = (t.double().numpy() for t in (model.key_emb, model.w_q, model.w_k))
    _, chunks = rt.heldout_contexts(TINY, 1, 40, 8)
    moment, mu_q, mu_k, n_q, n_k = np.zeros((4, 4)), np.zeros(4), np.zeros(4), 0, 0
    right = []
    table = rm.rotation_table(40, 4, 100.0, "half")
    for ctx in chunks:
        for row in range(len(ctx.deltas)):
            keys = ctx.keys[row].numpy()
            t = int(ctx.target[row])
            q = wq @ emb[keys[t]]
            moment += np.outer(wk @ emb[keys[t]], q)
            mu_q += q
            mu_k += (wk @ emb[keys].T).sum(axis=1)
            n_q, n_k = n_q + 1, n_k + len(keys)
        logits = rm._forward(
            {"key_emb": model.key_emb, "w_q": model.w_q, "w_k": model.w_k}, ctx, table, "half", 4
        )[0]
        right += (
            logits.argmax(1) == ctx.values[torch.arange(len(ctx.deltas)), ctx.target]
        ).tolist()
    np.testing.assert_allclose(ev["mu_q"], mu_q / n_q, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ev["mu_k"], mu_k / n_k, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        ev["target_moment_blocks"], rm.pair_blocks(moment / n_q), rtol=1e-5, atol=1e-6
    )
    assert sum(ev["correct"]) == sum(right)


def test_evaluation_with_other_token_counts_and_bad_ones() -> None:
    model = rm.train_recall(40, 8, 4, 100.0, 0, config=TINY)
    more = rm.evaluate_recall(model, tokens=20)
    assert more["tokens"] == 20 and "mu_q" not in more
    with pytest.raises(ValueError, match=r"tokens must be an integer <= 40"):
        rm.evaluate_recall(model, tokens=41)
    with pytest.raises(TypeError, match=r"model must be a RecallModel"):
        rm.evaluate_recall("model")


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((40, 8, 4, 1.0, 0), ValueError, r"bases entries must be a finite real number > 1"),
        ((40, 8, 3, 10.0, 0), ValueError, r"\bd must be an even integer"),
        ((40, 41, 4, 10.0, 0), ValueError, r"tokens must be an integer <= 40"),
        ((40, 8, 4, 10.0, -1), ValueError, r"seed must be an integer >= 0"),
    ],
)
def test_bad_training_arguments_are_refused_by_name(args: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        rm.train_recall(*args, config=TINY)


def test_run_recall_returns_json_ready_results() -> None:
    run = {**TINY.runs()[0], "eval_tokens": [16]}
    out = rm.run_recall(TINY, run)
    assert json.loads(json.dumps(out)) == out
    assert [ev["tokens"] for ev in out["evaluations"]] == [8, 16]
    assert np.shape(out["form_blocks"]) == (2, 2, 2)
    assert {k: out[k] for k in run} == run


# ------------------------------------------------------------------------------------------
# the learned form
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_pair_blocks_and_rotation_terms_by_hand(layout: str) -> None:
    d = 6
    m = np.arange(d * d, dtype=float).reshape(d, d) ** 1.5
    blocks = rm.pair_blocks(m, layout)
    for i, (a, b) in enumerate(pairs(d, layout)):
        np.testing.assert_array_equal(blocks[i], [[m[a, a], m[a, b]], [m[b, a], m[b, b]]])
    c, s = rm.rotation_terms(blocks)
    for i in range(d // 2):
        # tr(R(alpha) M_i) at alpha = 0.7 from 2 x 2 matrices
        r = np.array([[math.cos(0.7), -math.sin(0.7)], [math.sin(0.7), math.cos(0.7)]])
        assert math.isclose(np.trace(r @ blocks[i]), c[i] * math.cos(0.7) + s[i] * math.sin(0.7))
    np.testing.assert_allclose(rm.pair_energy(blocks), np.sqrt((blocks**2).sum(axis=(1, 2))))
    with pytest.raises(ValueError, match=r"matrix must be square with an even size"):
        rm.pair_blocks(np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"blocks must have shape \(d/2, 2, 2\)"):
        rm.rotation_terms(np.ones((2, 3, 2)))


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_general_form_equals_its_definition(layout: str) -> None:
    rng = np.random.default_rng(2)
    d, base = 8, 50.0
    sigma = rng.standard_normal((d, d))  # not symmetric: a cross moment
    mu_q, mu_k = rng.standard_normal(d), rng.standard_normal(d)
    ms = np.array([0, 1, -1, 7, -30, 1000])
    expected = [
        np.trace(rotation(m, d, base, layout) @ sigma)
        + mu_q @ rotation(m, d, base, layout) @ (mu_q - mu_k)
        for m in ms
    ]
    got = rm.general_form(ms, d, base, mu_q, sigma, mu_k, layout)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_general_form_isotropic_equal_means_is_twice_sigma2_b_m() -> None:
    d, base, sigma2 = 16, 300.0, 0.7
    ms = np.arange(0, 200)
    mu = np.full(d, 0.4)
    got = rm.general_form(-ms, d, base, mu, sigma2 * np.eye(d), mu)
    np.testing.assert_allclose(got, 2 * sigma2 * similarity_margin(ms, d, base), atol=1e-9)
