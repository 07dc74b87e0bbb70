"""Tests of rope_lib.experiments.recall_task: configurations, seeds, contexts, held-out sets.

Independent routes: loops over the rows of a batch that check the task's definition one context
at a time (positions distinct and in range, the target where its distance says, no distractor
with the target's key), the exact log-uniform probabilities ln(1 + 1/k) / ln(L + 1) against a
large sample, and bin edges written out by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rope_lib.experiments import recall_task as rt

TINY = rt.RecallConfig(
    name="tiny",
    cells=(rt.RecallCell(span=40, tokens=8, d=4, bases=(10.0, 1e4)),),
    seeds=(0, 1),
    n_keys=16,
    key_dim=8,
    n_values=4,
    steps=6,
    batch_size=4,
    n_bins=4,
    eval_per_bin=6,
)


# ------------------------------------------------------------------------------------------
# configurations
# ------------------------------------------------------------------------------------------
def test_runs_cover_every_cell_base_and_seed_in_order() -> None:
    cfg = rt.RecallConfig(
        name="x",
        cells=(
            rt.RecallCell(64, 8, 4, (10.0, 100.0)),
            rt.RecallCell(32, 32, 8, (5.0,), distances="uniform", eval_tokens=(4,)),
        ),
        seeds=(3, 1),
    )
    got = [
        (r["span"], r["tokens"], r["d"], r["distances"], r["base"], r["seed"]) for r in cfg.runs()
    ]
    assert got == [
        (64, 8, 4, "log_uniform", 10.0, 3),
        (64, 8, 4, "log_uniform", 10.0, 1),
        (64, 8, 4, "log_uniform", 100.0, 3),
        (64, 8, 4, "log_uniform", 100.0, 1),
        (32, 32, 8, "uniform", 5.0, 3),
        (32, 32, 8, "uniform", 5.0, 1),
    ]
    assert cfg.runs()[-1]["eval_tokens"] == [4]
    assert cfg.to_dict()["cells"][1]["eval_tokens"] == [4]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"tokens": 65}, ValueError, r"tokens must be an integer <= 64"),
        ({"tokens": 1}, ValueError, r"tokens must be an integer >= 2"),
        ({"d": 5}, ValueError, r"\bd must be an even integer"),
        ({"bases": (10.0, 1.0)}, ValueError, r"bases entries must be a finite real number > 1"),
        ({"bases": (10.0, 10.0)}, ValueError, r"bases must be distinct"),
        ({"bases": ()}, ValueError, r"bases must not be empty"),
        ({"bases": "10"}, TypeError, r"bases must be a sequence"),
        ({"distances": "normal"}, ValueError, r"distances must be one of"),
        ({"eval_tokens": (8,)}, ValueError, r"eval_tokens must be distinct token counts"),
        ({"eval_tokens": (128,)}, ValueError, r"eval_tokens entries must be an integer <= 64"),
    ],
)
def test_bad_cells_are_refused_by_name(kwargs: dict, error: type, message: str) -> None:
    args = {"span": 64, "tokens": 8, "d": 4, "bases": (10.0,), **kwargs}
    with pytest.raises(error, match=message):
        rt.RecallCell(**args)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"name": "a b"}, ValueError, r"name must be an identifier"),
        ({"cells": ()}, ValueError, r"cells must not be empty"),
        ({"cells": ("x",)}, TypeError, r"cells entries must be RecallCell"),
        ({"seeds": (0, 0)}, ValueError, r"seeds must be distinct"),
        ({"seeds": (-1,)}, ValueError, r"seeds entries must be an integer >= 0"),
        ({"layout": "split"}, ValueError, r"layout must be one of"),
        ({"lr": 0.0}, ValueError, r"lr must be a finite real number in \(0.0, 1.0\]"),
        ({"batch_size": 4096, "cells": (rt.RecallCell(8192, 8192, 4, (10.0,)),)}, ValueError,
         r"tokens per step exceeds"),
    ],
)  # fmt: skip
def test_bad_configs_are_refused_by_name(kwargs: dict, error: type, message: str) -> None:
    args = {"name": "x", "cells": (rt.RecallCell(64, 8, 4, (10.0,)),), "seeds": (0,), **kwargs}
    with pytest.raises(error, match=message):
        rt.RecallConfig(**args)


def test_named_configs_and_unknown_names() -> None:
    assert rt.recall_config("smoke").name == "smoke"
    assert rt.recall_config("full").name == "full"
    with pytest.raises(ValueError, match=r"name must be one of \('smoke', 'full'\)"):
        rt.recall_config("medium")
    with pytest.raises(TypeError, match=r"config must be one of"):
        rt.as_config(3)


def test_full_sweep_meets_the_statistics_it_promises() -> None:
    """Five seeds, and held-out bins with a binomial SE below 0.01 whatever the accuracy."""
    cfg = rt.recall_config("full")
    assert len(cfg.seeds) >= 5
    assert 0.5 / math.sqrt(cfg.eval_per_bin) <= 0.01
    assert {c.d for c in cfg.cells} >= {64, 128}


# ------------------------------------------------------------------------------------------
# randomness
# ------------------------------------------------------------------------------------------
def test_derived_seeds_are_stable_distinct_and_in_range() -> None:
    a = rt.derived_seed("data", 0, 1024, 128, "log_uniform")
    assert a == rt.derived_seed("data", 0, 1024, 128, "log_uniform")
    others = {
        rt.derived_seed("data", 1, 1024, 128, "log_uniform"),
        rt.derived_seed("data", 0, 256, 128, "log_uniform"),
        rt.derived_seed("eval", 0, 1024, 128, "log_uniform"),
        rt.derived_seed("data", 0, 1024, 128, "uniform"),
    }
    assert a not in others and len(others) == 4
    assert all(0 <= s < 2**62 for s in others | {a})


# ------------------------------------------------------------------------------------------
# distances and contexts
# ------------------------------------------------------------------------------------------
def test_log_uniform_distances_follow_their_exact_law() -> None:
    span, n = 20, 200_000
    got = rt.sample_distances(rt.generator(5), n, span, "log_uniform").numpy()
    assert got.min() >= 1 and got.max() <= span
    counts = np.bincount(got, minlength=span + 1)[1:]
    p = np.array([math.log1p(1 / k) / math.log(span + 1) for k in range(1, span + 1)])
    assert abs(p.sum() - 1) < 1e-12
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(counts / n - p) < 5 * se)


def test_uniform_distances_cover_one_to_span() -> None:
    got = rt.sample_distances(rt.generator(1), 50_000, 7, "uniform").numpy()
    counts = np.bincount(got, minlength=8)[1:]
    assert got.min() == 1 and got.max() == 7
    assert np.all(np.abs(counts / 50_000 - 1 / 7) < 5 * math.sqrt((1 / 7) * (6 / 7) / 50_000))


@pytest.mark.parametrize(("span", "tokens"), [(30, 6), (30, 30), (9, 2)])
def test_contexts_follow_the_task_definition_row_by_row(span: int, tokens: int) -> None:
    n, n_keys = 300, 5  # few keys: many clashes to resolve
    deltas = torch.randint(1, span + 1, (n,), generator=rt.generator(0))
    ctx = rt.sample_contexts(rt.generator(1), deltas, span, tokens, n_keys, 3)
    assert ctx.keys.shape == (n, tokens) and ctx.values.shape == (n, tokens)
    for row in range(n):
        if tokens == span:
            assert ctx.positions is None
            positions = list(range(span))
        else:
            positions = ctx.positions[row].tolist()
            assert int(ctx.target[row]) == 0
        t = int(ctx.target[row])
        assert len(set(positions)) == tokens and all(0 <= p < span for p in positions)
        assert positions[t] == span - int(deltas[row])
        keys = ctx.keys[row].tolist()
        assert keys.count(keys[t]) == 1  # the answer is unambiguous
        assert all(0 <= k < n_keys for k in keys)
        assert all(0 <= v < 3 for v in ctx.values[row].tolist())
    assert ctx.span == span and torch.equal(ctx.deltas, deltas)


def test_sparse_distractor_positions_are_uniform() -> None:
    """Each non-target position is taken with probability (N - 1) / (L - 1)."""
    span, tokens, n = 12, 4, 40_000
    deltas = torch.full((n,), 5)
    ctx = rt.sample_contexts(rt.generator(2), deltas, span, tokens, 50, 2)
    counts = np.bincount(ctx.positions[:, 1:].reshape(-1).numpy(), minlength=span)
    assert counts[span - 5] == 0
    p = (tokens - 1) / (span - 1)
    others = np.delete(counts, span - 5) / n
    assert np.all(np.abs(others - p) < 5 * math.sqrt(p * (1 - p) / n))


def test_distance_bins_by_hand() -> None:
    # geomspace(1, 17, 5) = 1, 2.03, 4.12, 8.37, 17 -> 1, 2, 4, 8, 17
    assert rt.distance_bins(16, 4).tolist() == [1, 2, 4, 8, 17]
    # a short span has fewer bins: geomspace(1, 4, 6) rounds to 1, 1, 2, 2, 3, 3, 4
    assert rt.distance_bins(3, 6).tolist() == [1, 2, 3, 4]


def test_heldout_set_is_balanced_per_bin_and_paired_across_bases() -> None:
    edges, chunks = rt.heldout_contexts(TINY, 0, 40, 8)
    ctxs = list(chunks)
    deltas = torch.cat([c.deltas for c in ctxs]).numpy()
    assert len(deltas) == TINY.eval_per_bin * (len(edges) - 1)
    for j in range(len(edges) - 1):
        part = deltas[j * TINY.eval_per_bin : (j + 1) * TINY.eval_per_bin]
        assert np.all((part >= edges[j]) & (part < edges[j + 1]))
    again = list(rt.heldout_contexts(TINY, 0, 40, 8)[1])
    other_seed = list(rt.heldout_contexts(TINY, 1, 40, 8)[1])
    assert all(torch.equal(a.keys, b.keys) for a, b in zip(ctxs, again, strict=True))
    assert not torch.equal(ctxs[0].keys, other_seed[0].keys)
