"""Tests of rope_lib.experiments.predictions: the written predictions are what rope_lib says.

Each literal (horizons, quarter periods, which member or side each predictor favours) is
recomputed from rope_lib; the feasibility of every window base is checked by the brute-force
scan of chapter 7 (rope_lib.brute_force_feasible); and every setting a prediction names is in
the full sweep.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rope_lib import brute_force_feasible, max_context
from rope_lib.experiments import predictions as pr
from rope_lib.experiments import recall_task as rt


@pytest.mark.parametrize("pair", pr.PAIRS, ids=lambda p: p.label)
def test_pair_literals_are_what_rope_lib_computes(pair: pr.Pair) -> None:
    got = pr.pair_predictions(pair)
    for key, value in got.items():
        assert getattr(pair, key) == value, key
    votes = {pair.by_horizon, pair.by_quarter_period, pair.by_base}
    if pair.kind == "discriminating":
        # the horizon disagrees with both others
        assert pair.by_quarter_period == pair.by_base != pair.by_horizon
    else:
        assert pair.kind == "capacity" and len(votes) == 1
        # all favour the member with the smaller head dimension
        small = "a" if pair.a[0] < pair.b[0] else "b"
        assert pair.by_horizon == small


@pytest.mark.parametrize("edge", pr.EDGES, ids=lambda e: e.label)
def test_window_edges_by_brute_force(edge: pr.WindowEdge) -> None:
    got = pr.edge_predictions(edge)
    assert all(got["feasible_inside"]) and not any(got["feasible_outside"])
    for b in edge.inside:
        assert brute_force_feasible(b, edge.span, edge.d)
    for b in edge.outside:
        assert not brute_force_feasible(b, edge.span, edge.d)
        assert max_context(b, edge.d) < edge.span
    assert got["horizons_inside"] == edge.horizons_inside
    assert got["horizons_outside"] == edge.horizons_outside
    assert (edge.by_horizon, edge.by_quarter_period, edge.by_base) == (
        got["by_horizon"], got["by_quarter_period"], got["by_base"]
    )  # fmt: skip
    # a top edge: the feasible side has the smaller bases, and the edge lies between the sides
    assert max(edge.inside) < edge.edge < min(edge.outside)
    top = pr.window_top(edge.span, edge.d, edge.inside[0])
    assert math.isclose(top, edge.edge, rel_tol=2e-4)
    assert brute_force_feasible(top * (1 - 2e-4), edge.span, edge.d)
    assert not brute_force_feasible(top * (1 + 2e-4), edge.span, edge.d)


def test_every_predicted_setting_is_trained_by_the_full_sweep() -> None:
    cfg = rt.recall_config("full")
    trained = {
        (r["span"], r["tokens"], r["d"], r["base"])
        for r in cfg.runs()
        if r["distances"] == "log_uniform"
    }
    for pair in pr.PAIRS:
        for d, base in (pair.a, pair.b):
            assert (pair.span, pair.tokens, d, base) in trained, pair.label
    for edge in pr.EDGES:
        for base in edge.inside + edge.outside:
            assert (edge.span, edge.tokens, edge.d, base) in trained, edge.label
    assert len(pr.EDGES) >= 2 and all(len(e.inside) >= 3 and len(e.outside) >= 3 for e in pr.EDGES)


# ------------------------------------------------------------------ experiment 2


def test_needle_literals_are_what_rope_lib_computes_for_the_full_sweep() -> None:
    from rope_lib.experiments import needle_model as nm

    cfg = nm.NEEDLE_CONFIGS["full"]
    assert tuple(p.base for p in pr.NEEDLE_PREDICTIONS) == cfg.bases
    for p in pr.NEEDLE_PREDICTIONS:
        assert pr.needle_prediction(p.base, cfg.head_dim, cfg.bin_edges) == p
        # independent route: the horizon is the first m with sum_i cos(m theta_i) < 0, the
        # quarter period pi / (2 theta_slowest)
        theta = p.base ** (-2.0 * np.arange(cfg.head_dim // 2) / cfg.head_dim)
        m = np.arange(1, 200)
        assert p.horizon == m[np.cos(np.outer(m, theta)).sum(axis=1) < 0][0]
        assert p.quarter_period == round(math.pi / 2 / theta[-1])
        assert p.far_by_horizon == (p.horizon >= cfg.bin_edges[-1])
        assert p.far_by_quarter_period == (p.quarter_period >= cfg.bin_edges[-1])
    discriminating = [
        p.base for p in pr.NEEDLE_PREDICTIONS if p.far_by_horizon != p.far_by_quarter_period
    ]
    assert discriminating == [100.0]
