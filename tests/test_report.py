"""Tests of rope_lib.experiments.report: statistics and summaries of experiment 1.

Independent routes: Student-t intervals with the tabulated t quantile, reaches of curves built
to cross the level at a chosen distance, summaries recomputed from the raw JSON of the stored
smoke results with plain loops, a regression with one intercept per cell done by demeaning
within cells (instead of a design matrix), and learned margins against dense rotation matrices
and chapter 7's B_m.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rope_lib import max_context, quarter_period, similarity_margin
from rope_lib.experiments import report as rp
from rope_lib.experiments import runner
from rope_lib.experiments.predictions import Pair, WindowEdge
from tests.test_recall_model import rotation

ROOT = Path(__file__).resolve().parents[1]
RAW = json.loads((ROOT / "rope_lib" / "data" / "experiment_recall_smoke.json").read_text())
T4 = 2.7764451051977987  # t_{0.975, 4} from tables
T1 = 12.706204736174707  # t_{0.975, 1}


@pytest.fixture(scope="module")
def smoke() -> dict:
    return runner.load_results("recall", "smoke")


def centres(edges: list[int]) -> np.ndarray:
    e = np.asarray(edges, dtype=float)
    return np.sqrt(e[:-1] * (e[1:] - 1))


def plain_reach(c: np.ndarray, acc: list[float], level: float = 0.5) -> float:
    for j, a in enumerate(acc):
        if a < level:
            if j == 0:
                return 0.0
            f = (acc[j - 1] - level) / (acc[j - 1] - a)
            return float(c[j - 1] * (c[j] / c[j - 1]) ** f)
    return math.inf


# ------------------------------------------------------------------------------------------
# statistics
# ------------------------------------------------------------------------------------------
def test_t_interval_by_hand() -> None:
    mean, low, high = rp.t_interval([1, 2, 3, 4, 5])
    half = T4 * math.sqrt(2.5) / math.sqrt(5)
    assert mean == 3 and math.isclose(low, 3 - half) and math.isclose(high, 3 + half)
    assert math.isnan(rp.t_interval([7.0])[1]) and rp.t_interval([7.0])[0] == 7.0
    assert math.isnan(rp.t_interval([1.0, math.inf])[2])
    with pytest.raises(ValueError, match=r"values must not be empty"):
        rp.t_interval([])


def test_reach_interpolates_in_log_distance() -> None:
    c = [1.0, 10.0, 100.0]
    assert math.isclose(rp.reach(c, [0.9, 0.7, 0.3]), 10**1.5)  # halfway between 0.7 and 0.3
    assert rp.reach(c, [0.4, 0.9, 0.9]) == 0.0
    assert rp.reach(c, [0.9, 0.8, 0.6]) == math.inf
    # 0.5 is not below the level 0.5: the fall is between 10 and 100, and starts at 10
    assert math.isclose(rp.reach(c, [0.9, 0.5, 0.1]), 10.0)


# ------------------------------------------------------------------------------------------
# summaries of the stored smoke results, against the raw JSON
# ------------------------------------------------------------------------------------------
def test_curves_match_the_raw_json(smoke: dict) -> None:
    cells = rp.recall_cells(smoke)
    assert cells == sorted({(r["span"], r["tokens"], r["d"], r["distances"]) for r in RAW["runs"]})
    for cell in cells:
        for tokens in (None, *([64] if cell[1] == 32 else [])):
            cur = rp.recall_curves(smoke, cell, tokens)
            runs = [
                r for r in RAW["runs"] if (r["span"], r["tokens"], r["d"], r["distances"]) == cell
            ]
            bases = sorted({r["base"] for r in runs})
            assert cur.bases.tolist() == bases
            for i, b in enumerate(bases):
                group = sorted((r for r in runs if r["base"] == b), key=lambda r: r["seed"])
                evs = [
                    next(e for e in r["evaluations"] if e["tokens"] == (tokens or cell[1]))
                    for r in group
                ]
                acc = np.array([e["accuracy"] for e in evs])
                n = len(group)
                for j in range(acc.shape[1]):
                    m = acc[:, j].mean()
                    half = T1 * acc[:, j].std(ddof=1) / math.sqrt(n)
                    assert math.isclose(cur.mean[i, j], m, abs_tol=1e-12)
                    assert math.isclose(cur.high[i, j], m + half, abs_tol=1e-9)
                    se = max(
                        math.sqrt(a * (1 - a) / e["n"][j])
                        for a, e in zip(acc[:, j], evs, strict=True)
                    )
                    assert math.isclose(cur.binomial_se[i, j], se)
                assert cur.horizon[i] == max_context(b, cell[2])
                assert math.isclose(cur.quarter_period[i], quarter_period(cell[2], b))


def test_reach_table_matches_a_plain_scan(smoke: dict) -> None:
    rows = rp.reach_table(smoke)
    assert len(rows) == len(
        {(r["span"], r["tokens"], r["d"], r["distances"], r["base"]) for r in RAW["runs"]}
    )
    for row in rows:
        runs = sorted(
            (
                r
                for r in RAW["runs"]
                if (r["span"], r["tokens"], r["d"], r["distances"]) == row["cell"]
                and r["base"] == row["base"]
            ),
            key=lambda r: r["seed"],
        )
        want = [
            plain_reach(centres(r["evaluations"][0]["bin_edges"]), r["evaluations"][0]["accuracy"])
            for r in runs
        ]
        np.testing.assert_allclose(row["reach"], want)
        assert row["far"] == [r["evaluations"][0]["accuracy"][-1] for r in runs]
        assert row["feasible"] == (max_context(row["base"], row["cell"][2]) >= row["cell"][0])


def test_distractor_effect_reads_each_evaluation(smoke: dict) -> None:
    cell = (256, 32, 16, "log_uniform")
    eff = rp.distractor_effect(smoke, cell)
    assert eff["tokens"] == [32, 64]
    runs = sorted(
        (r for r in RAW["runs"] if r["tokens"] == 32), key=lambda r: (r["base"], r["seed"])
    )
    for k, n in enumerate((32, 64)):
        want = [
            plain_reach(centres(e["bin_edges"]), e["accuracy"])
            for r in runs
            for e in r["evaluations"]
            if e["tokens"] == n
        ]
        np.testing.assert_allclose(eff["reach"][k].ravel(), want)


def test_pairs_and_edges_read_against_plain_loops(smoke: dict) -> None:
    pair = Pair(
        "T", "discriminating", 256, 32, (16, 1e4), (16, 100.0), (0, 0), (0, 0), "a", "b", "b"
    )
    out = rp.pair_outcomes(smoke, [pair])[0]
    runs = {
        b: sorted(
            (r for r in RAW["runs"] if r["tokens"] == 32 and r["base"] == b),
            key=lambda r: r["seed"],
        )
        for b in (1e4, 100.0)
    }
    ra = [
        plain_reach(centres(r["evaluations"][0]["bin_edges"]), r["evaluations"][0]["accuracy"])
        for r in runs[1e4]
    ]
    rb = [
        plain_reach(centres(r["evaluations"][0]["bin_edges"]), r["evaluations"][0]["accuracy"])
        for r in runs[100.0]
    ]
    np.testing.assert_allclose(out["reach_a"], ra)
    np.testing.assert_allclose(out["reach_b"], rb)
    fa = [r["evaluations"][0]["accuracy"][-1] for r in runs[1e4]]
    fb = [r["evaluations"][0]["accuracy"][-1] for r in runs[100.0]]
    diff = np.subtract(fa, fb)
    assert math.isclose(out["far_difference"][0], diff.mean())
    edge = WindowEdge(
        "T", 256, 32, 16, 1000.0, (1e4,), (100.0,), (0,), (0,), "inside", "outside", "outside"
    )
    e = rp.edge_outcomes(smoke, [edge])[0]
    np.testing.assert_allclose(e["far_inside"], fa)
    np.testing.assert_allclose(e["far_outside"], fb)
    mean, low, high = e["far_difference"]
    half = T1 * diff.std(ddof=1) / math.sqrt(2)
    assert math.isclose(mean, diff.mean()) and math.isclose(high, diff.mean() + half)
    assert e["far_verdict"] == ("inside" if low > 0 else "outside" if high < 0 else "undecided")


def test_summaries_refuse_what_is_not_experiment_1(smoke: dict) -> None:
    with pytest.raises(TypeError, match=r"results must be a results dict of experiment 1"):
        rp.recall_cells([1, 2])
    with pytest.raises(ValueError, match=r"its 'experiment' is not 'recall'"):
        rp.recall_cells({"experiment": "needle", "runs": [{}]})
    with pytest.raises(ValueError, match=r"cell must be one of the results' cells"):
        rp.recall_curves(smoke, (512, 32, 16, "log_uniform"))
    with pytest.raises(ValueError, match=r"tokens must be one of the run's evaluations \[32, 64\]"):
        rp.recall_curves(smoke, (256, 32, 16, "log_uniform"), tokens=99)


# ------------------------------------------------------------------------------------------
# the comparison of predictors, on results built to have a known answer
# ------------------------------------------------------------------------------------------
EDGES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1025]


def fake_run(span: int, d: int, base: float, seed: int, target_reach: float, **extra) -> dict:
    """A run whose accuracy is linear in log distance and crosses 1/2 at ``target_reach``."""
    c = centres(EDGES)
    acc = np.clip(0.5 - 0.08 * (np.log(c) - math.log(target_reach)), 0.0, 1.0)
    ev = {"tokens": 128, "bin_edges": EDGES, "n": [100] * 10, "accuracy": acc.tolist()}
    return {
        "span": span, "tokens": 128, "d": d, "distances": "log_uniform", "eval_tokens": [],
        "base": base, "seed": seed, "evaluations": [ev], "form_blocks": [[[1, 0], [0, 1]]] * (d // 2),
        **extra,
    }  # fmt: skip


def fake_blob(runs: list[dict]) -> dict:
    return {"experiment": "recall", "config": {"n_values": 16, "layout": "half"}, "runs": runs}


def demeaned_sd(y: np.ndarray, x: np.ndarray, g: np.ndarray) -> float:
    yd, xd = y.copy(), x.copy()
    for label in set(g.tolist()):
        yd[g == label] -= y[g == label].mean()
        xd[g == label] -= x[g == label].mean()
    slope = (xd @ yd) / (xd @ xd)
    resid = yd - slope * xd
    return math.sqrt(resid @ resid / (len(y) - len(set(g.tolist())) - 1))


def test_predictor_comparison_finds_a_reach_proportional_to_the_horizon() -> None:
    rng = np.random.default_rng(0)
    bases = [30.0, 100.0, 300.0, 1000.0, 3000.0]
    runs = []
    for d, factor in ((16, 0.8), (32, 1.5)):
        for b in bases:
            for s in range(5):
                wobble = math.exp(rng.normal(0, 0.01))  # a little seed noise
                runs.append(fake_run(1024, d, b, s, factor * max_context(b, d) * wobble))
    out = rp.predictor_comparison(fake_blob(runs))
    assert out["rows"] == [10] * 5
    assert out["horizon"]["sd_mean"] < 0.02 < out["base"]["sd_mean"]
    assert out["difference"]["base"][1] > 0  # the base is worse in every replicate
    # the residual SDs, recomputed per seed by demeaning within cells
    for s in range(5):
        rows = [r for r in runs if r["seed"] == s]
        y = np.log([plain_reach(centres(EDGES), r["evaluations"][0]["accuracy"]) for r in rows])
        g = np.array([r["d"] for r in rows])
        for name, fn in (
            ("horizon", lambda r: max_context(r["base"], r["d"])),
            ("quarter_period", lambda r: quarter_period(r["d"], r["base"])),
            ("base", lambda r: r["base"]),
        ):
            x = np.log([fn(r) for r in rows])
            assert math.isclose(
                out[name]["sd"][s], demeaned_sd(y, x, g), rel_tol=1e-9, abs_tol=1e-12
            )
            assert len(out[name]["slope"][s]) == 1  # one common slope


def test_predictor_comparison_per_d_slopes_context_intercepts_and_common_rows() -> None:
    """Reach = horizon^0.5 at d = 16 and base^0.8 at d = 32 (different slopes per head
    dimension); one row has an infinite reach in one seed and must leave every seed's fit."""
    bases = [30.0, 100.0, 300.0, 1000.0, 3000.0]
    runs = []
    for s in range(3):
        for b in bases:
            runs.append(fake_run(1024, 16, b, s, max_context(b, 16) ** 0.5 * (1 + 0.01 * s)))
            runs.append(fake_run(1024, 32, b, s, b**0.8 * (1 + 0.01 * s)))
    lost = next(r for r in runs if r["seed"] == 1 and r["d"] == 16 and r["base"] == 3000.0)
    lost["evaluations"][0]["accuracy"] = [0.9] * 10  # never below 1/2: infinite reach
    out = rp.predictor_comparison(fake_blob(runs), slopes="per_d")
    assert out["rows"] == [9] * 3  # the row lost in seed 1 is left out of every seed
    for s in range(3):
        rows = [r for r in runs if r["seed"] == s and not (r["d"] == 16 and r["base"] == 3000.0)]
        y = np.log([plain_reach(centres(EDGES), r["evaluations"][0]["accuracy"]) for r in rows])
        for name, fn in (
            ("horizon", lambda r: max_context(r["base"], r["d"])),
            ("base", lambda r: r["base"]),
        ):
            x = np.log([fn(r) for r in rows])
            # one regression per head dimension (one cell each), pooled residuals
            rss, slopes = 0.0, []
            for d in (16, 32):
                m = np.array([r["d"] == d for r in rows])
                xd, yd = x[m] - x[m].mean(), y[m] - y[m].mean()
                slopes.append((xd @ yd) / (xd @ xd))
                rss += float(((yd - slopes[-1] * xd) ** 2).sum())
            sd = math.sqrt(rss / (len(y) - 4))
            assert math.isclose(out[name]["sd"][s], sd, rel_tol=1e-9, abs_tol=1e-12)
            assert out[name]["slope"][s] == pytest.approx(slopes)
    # the two laws are exact in their own predictor within their own head dimension
    assert out["horizon"]["slope"][0][0] == pytest.approx(0.5, abs=0.02)
    assert out["base"]["slope"][0][1] == pytest.approx(0.8, abs=0.02)
    # one intercept per context: the two cells share it, so the fit has 2 slopes + 1 intercept
    ctx = rp.predictor_comparison(fake_blob(runs), slopes="per_d", intercepts="context")
    assert ctx["horizon"]["sd"][0] >= out["horizon"]["sd"][0] * (9 - 4) ** 0.5 / (9 - 3) ** 0.5
    with pytest.raises(ValueError, match="slopes"):
        rp.predictor_comparison(fake_blob(runs), slopes="each")
    with pytest.raises(ValueError, match="intercepts"):
        rp.predictor_comparison(fake_blob(runs), intercepts="base")


# ------------------------------------------------------------------------------------------
# the learned form
# ------------------------------------------------------------------------------------------
def test_learned_margin_of_equal_blocks_is_b_m_and_phases_follow_the_trace() -> None:
    d, base, sigma2 = 8, 500.0, 0.3
    eye = (sigma2 * np.eye(2)).tolist()
    plain = fake_run(64, d, base, 0, 10.0)
    plain["evaluations"][0].update(
        {"target_moment_blocks": [eye] * (d // 2), "mu_q": [0.0] * d, "mu_k": [0.0] * d}
    )
    out = rp.learned_form(fake_blob([plain]), (64, 128, d, "log_uniform"))
    dist = np.arange(1, 65)
    np.testing.assert_allclose(
        out["margin"][0, 0], 2 * sigma2 * similarity_margin(dist, d, base), atol=1e-12
    )
    assert np.all(out["sine_part"] == 0) and np.allclose(out["phase"], 0)
    # a full moment with antisymmetric parts and nonzero means: the trace of dense matrices
    rng = np.random.default_rng(1)
    moment = rng.standard_normal((d, d))
    mu_q, mu_k = rng.standard_normal(d), rng.standard_normal(d)
    blocks = [
        [[moment[i, i], moment[i, i + 4]], [moment[i + 4, i], moment[i + 4, i + 4]]]
        for i in range(4)
    ]
    run = fake_run(64, d, base, 0, 10.0)
    run["evaluations"][0].update(
        {"target_moment_blocks": blocks, "mu_q": mu_q.tolist(), "mu_k": mu_k.tolist()}
    )
    mask = np.zeros((d, d))
    for i in range(4):
        for a in (i, i + 4):
            for b in (i, i + 4):
                mask[a, b] = 1
    out = rp.learned_form(fake_blob([run]), (64, 128, d, "log_uniform"))
    want = [
        np.trace(rotation(-m, d, base, "half") @ (moment * mask))
        - mu_q @ rotation(-m, d, base, "half") @ mu_k
        for m in dist
    ]
    np.testing.assert_allclose(out["margin"][0, 0], want, atol=1e-10)
    first = next((m for m, v in zip(dist, want, strict=True) if v < 0), math.inf)
    assert out["learned_horizon"][0, 0] == first
    assert out["peak"][0, 0] == dist[int(np.argmax(want))]


def test_slow_energy_share_by_hand() -> None:
    run = fake_run(64, 6, 100.0, 0, 10.0)
    run["form_blocks"] = [[[1, 0], [0, 0]], [[0, 2], [0, 0]], [[0, 0], [3, 0]]]  # energies 1, 4, 9
    run["evaluations"][0].update(
        {"target_moment_blocks": run["form_blocks"], "mu_q": [0.0] * 6, "mu_k": [0.0] * 6}
    )
    out = rp.learned_form(fake_blob([run]), (64, 128, 6, "log_uniform"))
    assert math.isclose(out["slow_energy"][0, 0], (0.5 * 4 + 9) / 14)  # middle pair counts half


def test_edge_reference_takes_the_bases_of_nearest_horizon() -> None:
    from rope_lib.experiments.recall_task import half_decade

    reach_of = {470000.0: 300.0, 484000.0: 290.0, half_decade(11): 100.0, 1e6: 400.0, 1e4: 20.0}
    runs = [
        fake_run(1024, 16, b, s, r * (1 + 0.05 * s)) for b, r in reach_of.items() for s in range(3)
    ]
    edge = WindowEdge(
        "T", 1024, 128, 16, 480585.0, (470000.0,), (484000.0,), (1077,), (405,), "", "", ""
    )
    ref = rp.edge_outcomes(fake_blob(runs), [edge])[0]["reference"]
    # ln 1077 is nearest ln 1467 (base 1e6); ln 405 nearest ln 380 (base 10^5.5)
    assert ref["bases"] == (1e6, half_decade(11))
    assert ref["horizons"] == (max_context(1e6, 16), max_context(half_decade(11), 16))
    far = {
        b: [r["evaluations"][0]["accuracy"][-1] for r in runs if r["base"] == b]
        for b in ref["bases"]
    }
    assert math.isclose(
        ref["far_difference"][0], np.mean(np.subtract(far[1e6], far[half_decade(11)]))
    )


# ------------------------------------------------------------------ experiment 2


def _needle_blob(main: dict[float, list[list[int]]], total: int = 100) -> dict:
    """Runs with chosen main counts per (base, seed, bin); the controls built from them by
    rules stated here (absent target = 20, absent needle = 80, repeat = main)."""
    runs = []
    for base, per_seed in main.items():
        for seed, counts in enumerate(per_seed):
            nb = len(counts)
            runs.append(
                {
                    "base": base,
                    "seed": seed,
                    "bin_edges": [3, 5, 9, 17, 33][: nb + 1],
                    "total": [total] * nb,
                    "main_correct": counts,
                    "main_latest": [0] * nb,
                    "recency_correct": [total, 50, 10, 0][:nb],
                    "repeat_correct": counts,
                    "repeat_other": [0] * nb,
                    "absent_target": [20] * nb,
                    "absent_latest": [0] * nb,
                    "absent_needle": [80] * nb,
                }
            )
    return {
        "experiment": "needle",
        "config": {"n_needles": 4, "head_dim": 16, "context_length": 32},
        "runs": runs[::-1],  # order must not matter
    }


def test_needle_curves_rates_and_intervals_by_hand() -> None:
    blob = _needle_blob(
        {1e4: [[99, 98, 97, 96], [97, 96, 95, 94]], 10.0: [[60, 40, 30, 20], [70, 30, 20, 10]]}
    )
    c = rp.needle_curves(blob)
    assert list(c.bases) == [10.0, 1e4] and list(c.seeds) == [0, 1]
    assert c.rates["main_correct"][0, 1].tolist() == [0.7, 0.3, 0.2, 0.1]
    assert c.mean["main_correct"][1].tolist() == pytest.approx([0.98, 0.97, 0.96, 0.95])
    # bin 0 of base 1e4: seeds 0.99 and 0.97, s = 0.02 / sqrt 2, half-width t_{0.975,1} s / sqrt 2
    assert c.high["main_correct"][1, 0] - 0.98 == pytest.approx(T1 * 0.01)
    assert np.allclose(c.mean["absent_chance"], 0.2)
    assert c.mean["key_gain"][0].tolist() == pytest.approx([0.45, 0.15, 0.05, -0.05])
    assert c.binomial_se[0, 0] == pytest.approx(math.sqrt(0.6 * 0.4 / 100))  # the larger of 2
    assert c.horizon.tolist() == [max_context(10.0, 16), max_context(1e4, 16)]
    assert "shifted_correct" not in c.rates  # not in these runs
    for run in blob["runs"]:
        run["shifted_correct"] = [50] * 4
    assert np.allclose(rp.needle_curves(blob).rates["shifted_correct"], 0.5)
    assert c.quarter_period[0] == pytest.approx(quarter_period(16, 10.0))


def test_needle_outcomes_reach_far_bin_and_half_context() -> None:
    blob = _needle_blob(
        {
            1e4: [[99, 98, 97, 96], [97, 96, 95, 94], [98, 97, 96, 95]],
            10.0: [[60, 40, 30, 20], [70, 30, 20, 10], [65, 35, 25, 15]],
        }
    )
    low, high = rp.needle_outcomes(blob)
    assert low["reach_bins"] == [1, 1, 1] and high["reach_bins"] == [4, 4, 4]
    assert low["far_retrieved"] == "no" and high["far_retrieved"] == "yes"
    assert high["far"][0] == pytest.approx(0.95)
    # context 32: the bins up to 16 tokens are [3,5), [5,9), [9,17)
    assert high["min_to_half"] == pytest.approx([0.97, 0.95, 0.96])
    assert low["far_by_horizon"] is False and low["horizon_bin"] == 1  # from NEEDLE_PREDICTIONS
    # key gain: main minus the absent target rate 0.2, averaged over the four bins
    assert high["key_gain"] == pytest.approx([0.775, 0.755, 0.765])
    assert low["key_gain"] == pytest.approx([0.175, 0.125, 0.15])
    assert high["learned"] == [True] * 3 and low["learned"] == [False] * 3
    assert high["far_learned"] == pytest.approx([0.96, 0.94, 0.95]) and low["far_learned"] == []
    mixed = _needle_blob({100.0: [[99, 98, 97, 60], [97, 96, 95, 30]]})
    (row,) = rp.needle_outcomes(mixed)
    assert row["reach_bins"] == [4, 3] and row["far_retrieved"] == "undecided"
    assert row["far_by_quarter_period"] is True and row["far_by_horizon"] is False


def test_needle_outcomes_translation_control_beyond_the_horizon() -> None:
    # base 10 has horizon 5 at d = 16: the bins [5, 9), [9, 17), [17, 33) start at or beyond it
    blob = _needle_blob({10.0: [[90, 90, 90, 90], [80, 80, 80, 80]], 1e4: [[95, 95, 95, 95]] * 2})
    (ten, big) = rp.needle_outcomes(blob)
    assert ten["shifted_beyond"] == [None, None] and ten["main_min"] == pytest.approx([0.9, 0.8])
    for run in blob["runs"]:
        run["shifted_correct"] = [10, 70, 40, 50] if run["base"] == 10.0 else [99, 98, 97, 96]
    (ten, big) = rp.needle_outcomes(blob)
    assert ten["shifted_beyond"] == pytest.approx([0.4, 0.4])  # the 0.10 in [3, 5) is before
    assert all(math.isnan(x) for x in big["shifted_beyond"])  # horizon 91: no bin starts there


def test_needle_report_refuses_other_blobs() -> None:
    with pytest.raises(TypeError, match="results"):
        rp.needle_curves([1, 2])
    with pytest.raises(ValueError, match="needle"):
        rp.needle_curves({"experiment": "recall", "runs": [{}]})
    blob = _needle_blob({10.0: [[1, 2, 3, 4]]})
    del blob["runs"][0]["absent_target"]
    with pytest.raises(ValueError, match="absent_target"):
        rp.needle_outcomes(blob)


# ---- issue 22, rep1: value tests of the readings of chapter 9 (reach, reach_table, pairs,
# window edges, distractors, predictor comparison, learned horizons) on hand-built runs ----
# Bins [1, 2), [2, 3), ..., [6, 7): the centres sqrt(e (e' - 1)) are the whole numbers 1..6.
E7 = [1, 2, 3, 4, 5, 6, 7]


def curve(r: float, far: float | None = None) -> list[float]:
    """Six bins whose reach at level 1/2 is ``r`` (0, 1..5 or inf); ``far`` is the last bin
    (default 0.1, and 0.6 for r = inf, which must stay at or above the level).

    For r = k + 1, bins 0..k-1 are 0.9, bin k (centre k + 1) is 0.5 (at the level, not below
    it) and the rest 0.2, so the curve first falls below 1/2 at bin k + 1 and the
    interpolation starts from centre k + 1 with weight 0.  At level 0.7 the same curve first falls below
    at bin k, halfway (in accuracy) from 0.9 to 0.5: reach sqrt(k (k + 1)), 0 for k = 0.
    """
    far = (0.6 if r == math.inf else 0.1) if far is None else far
    if r == 0:
        return [0.3] * 5 + [far]
    if r == math.inf:
        return [0.9] * 5 + [far]
    k = int(r) - 1
    return [0.9] * k + [0.5] + [0.2] * (4 - k) + [far]


def r1_run(
    span: int, d: int, base: float, seed: int, acc: list[float], more: dict | None = None
) -> dict:
    """A run of experiment 1 trained with 32 tokens; ``more`` adds evaluations {tokens: acc}."""
    evs = [{"tokens": t, "bin_edges": E7, "n": [100] * 6, "accuracy": a} for t, a in
           {32: acc, **(more or {})}.items()]  # fmt: skip
    return {
        "span": span, "tokens": 32, "d": d, "distances": "log_uniform", "eval_tokens": [],
        "base": base, "seed": seed, "evaluations": evs, "form_blocks": [[[1, 0], [0, 1]]] * (d // 2),
    }  # fmt: skip


def test_reach_plateau_at_the_level_and_float32_accuracies() -> None:
    c = [1.0, 10.0, 100.0, 1000.0]
    # a plateau exactly at the level is not below it: the fall starts at its last bin, 100
    assert math.isclose(rp.reach(c, [0.9, 0.5, 0.5, 0.1]), 100.0)
    # the first bin is at the level, not below it: the reach is its centre, not 0
    assert math.isclose(rp.reach(c, [0.5, 0.1, 0.1, 0.1]), 1.0)
    # float32 accuracies are read as the numbers they are: float32(0.7) = 0.69999998... is
    # below 0.7, so the curve falls below 0.7 at the second bin, not after the plateau
    acc = np.array([0.9, 0.7, 0.7, 0.1], dtype=np.float32)
    a0, a1 = float(acc[0]), float(acc[1])
    want = math.exp((a0 - 0.7) / (a0 - a1) * math.log(10.0))
    assert math.isclose(rp.reach(c, acc, 0.7), want, rel_tol=1e-12) and 9.9 < want < 10.0


def test_reach_table_by_hand() -> None:
    # span 16 is the horizon of base 100 at d = 16 (max_context(100, 16) = 16): feasible
    # means horizon >= span, so base 100 is feasible and base 10 (horizon 5) is not
    span = max_context(100.0, 16)
    assert span == 16
    reaches = {10.0: (2, 3), 100.0: (1, 1), 1000.0: (0, 2), 1e4: (math.inf, 2)}
    fars = {10.0: (0.1, 0.3), 100.0: (0.2, 0.2), 1000.0: (0.1, 0.1), 1e4: (0.6, 0.2)}
    at64 = {10.0: (4, 5)}
    runs = [
        r1_run(span, 16, b, s, curve(r[s], fars[b][s]), {64: curve(at64.get(b, (1, 1))[s])})
        for b, r in reaches.items()
        for s in (0, 1)
    ]
    rows = rp.reach_table(fake_blob(runs[::-1]))
    assert [r["base"] for r in rows] == [10.0, 100.0, 1000.0, 1e4]
    assert [r["feasible"] for r in rows] == [False, True, True, True]
    ten, hundred, thousand, big = rows
    assert ten["reach"] == pytest.approx([2, 3]) and thousand["reach"] == pytest.approx([0, 2])
    half = T1 * (math.log(3) - math.log(2)) / 2  # s = (ln 3 - ln 2) / sqrt 2, over sqrt 2
    mid = (math.log(2) + math.log(3)) / 2
    assert (ten["log_reach"], ten["log_reach_low"], ten["log_reach_high"]) == pytest.approx(
        (mid, mid - half, mid + half)
    )
    # reach 1 in both seeds: ln 1 = 0 with no spread
    assert (
        hundred["log_reach"],
        hundred["log_reach_low"],
        hundred["log_reach_high"],
    ) == pytest.approx((0, 0, 0), abs=1e-12)
    for row in (thousand, big):  # a reach of 0 or inf in one seed: no log mean
        assert all(math.isnan(row[k]) for k in ("log_reach", "log_reach_low", "log_reach_high"))
    # far: seeds 0.1 and 0.3, s = 0.1 sqrt 2, half-width T1 * 0.1
    assert (ten["far_mean"], ten["far_low"], ten["far_high"]) == pytest.approx(
        (0.2, 0.2 - T1 * 0.1, 0.2 + T1 * 0.1)
    )
    assert (hundred["far_mean"], hundred["far_low"], hundred["far_high"]) == pytest.approx(
        (0.2, 0.2, 0.2)
    )
    # another evaluation and another level (see curve)
    assert rp.reach_table(fake_blob(runs), tokens=64)[0]["reach"] == pytest.approx([4, 5])
    assert rp.reach_table(fake_blob(runs), level=0.7)[0]["reach"] == pytest.approx(
        [math.sqrt(2), math.sqrt(6)]
    )
    for bad in (0.0, 1.0, 1.5, -0.5):
        with pytest.raises(
            ValueError, match=r"^level must be a finite real number in \(0\.0, 1\.0\)"
        ):
            rp.reach_table(fake_blob(runs), level=bad)
    runs[0]["seed"] = 2  # base 1e4 now has seeds 1 and 2, the others 0 and 1
    with pytest.raises(
        ValueError, match=r"bases of cell \(16, 32, 16, 'log_uniform'\) have different seeds"
    ):
        rp.reach_table(fake_blob(runs))


def test_pair_outcomes_verdicts_by_hand() -> None:
    # per base, the reach in seeds 0 and 1 (see curve)
    reaches = {
        11.0: (2, 4), 12.0: (1, 2), 13.0: (3, 2), 14.0: (math.inf,) * 2, 15.0: (0, 0),
        16.0: (math.inf, 2), 17.0: (2, math.inf),
    }  # fmt: skip
    runs = [r1_run(64, 16, b, s, curve(r[s])) for b, r in reaches.items() for s in (0, 1)]
    blob = fake_blob(runs)

    def pair(a: float, b: float, d_b: int = 16) -> Pair:
        return Pair("T", "discriminating", 64, 32, (16, a), (d_b, b), (0, 0), (0, 0), "a", "b", "b")

    cases = [  # (a, b, verdict, log ratio per seed or None when a reach is 0 or inf)
        (11.0, 12.0, "a", [math.log(2), math.log(2)]),  # 2/1 and 4/2
        (12.0, 11.0, "b", [-math.log(2), -math.log(2)]),
        (13.0, 13.0, "undecided", [0.0, 0.0]),  # equal reaches: the interval is [0, 0]
        (14.0, 11.0, "a", None),  # a never falls below the level
        (15.0, 12.0, "b", None),  # a is below it from the first bin
        (14.0, 14.0, "undecided", None),  # both infinite: a tie in every seed
        (16.0, 17.0, "undecided", None),  # a in one seed, b in the other
        (14.0, 16.0, "undecided", None),  # a in one seed, a tie in the other
    ]
    pairs = [pair(a, b) for a, b, _, _ in cases]
    out = rp.pair_outcomes(blob, pairs)
    for row, p, (a, b, verdict, logs) in zip(out, pairs, cases, strict=True):
        assert row["pair"] is p
        assert row["reach_a"] == pytest.approx(reaches[a]) and row["reach_b"] == pytest.approx(
            reaches[b]
        )
        assert row["verdict"] == verdict, (a, b)
        if logs is None:
            assert len(row["log_ratio"]) == 3 and all(math.isnan(x) for x in row["log_ratio"])
        else:  # the two seeds agree, so the interval has no width
            m = sum(logs) / 2
            assert row["log_ratio"] == pytest.approx((m, m, m), abs=1e-12)
    # at level 0.7 the reaches are sqrt(k (k + 1)) (see curve)
    (row,) = rp.pair_outcomes(blob, [pairs[0]], level=0.7)
    assert row["reach_a"] == pytest.approx([math.sqrt(2), math.sqrt(12)])
    assert row["reach_b"] == pytest.approx([0.0, math.sqrt(2)])
    # members run with other seeds are refused by name, not paired on the common seeds or
    # stretched: one seed against two (with an infinite reach, and with finite ones), and
    # two seeds with other ids
    refusal = r"^results: the members of pair .* were run with different seeds"
    for acc, seeds in ((curve(math.inf), (0,)), (curve(2), (0,)), (curve(2), (5, 6))):
        more = [r1_run(64, 32, 21.0, s, acc) for s in seeds]
        with pytest.raises(ValueError, match=refusal):
            rp.pair_outcomes(fake_blob(runs + more), [pair(11.0, 21.0, d_b=32)])


def test_edge_outcomes_verdicts_by_hand() -> None:
    # edges of one cell, 3 seeds; per base the reach and the farthest-bin accuracy per seed
    inf = math.inf
    bases = {
        21.0: ((4, 2, 4), (0.3,) * 3), 22.0: ((4, 2, 4), (0.1,) * 3),  # E1 inside
        23.0: ((2, 1, 2), (0.1,) * 3), 24.0: ((2, 1, 2), (0.1,) * 3),  # E1 outside
        25.0: ((1, 1, 1), (0.1,) * 3), 26.0: ((2, 2, 2), (0.3,) * 3),  # E2
        27.0: ((3, 3, 3), (0.2,) * 3), 28.0: ((3, 3, 3), (0.2,) * 3),  # E3: equal sides
        29.0: ((4, 1, 2), (0.3, 0.1, 0.2)), 30.0: ((1, 4, 2), (0.1, 0.3, 0.2)),  # E4
        31.0: ((0, 2, 2), (0.1,) * 3), 32.0: ((2, 2, 2), (0.1,) * 3),  # E5: a 0 inside
        33.0: ((inf, 2, 2), (0.6, 0.1, 0.1)), 34.0: ((2, 2, 2), (0.1,) * 3),  # E6: inf inside
        35.0: ((2, 2, 2), (0.1,) * 3), 36.0: ((0, 2, 2), (0.1,) * 3),  # E7: a 0 outside
        37.0: ((2, 2, 2), (0.1,) * 3), 38.0: ((inf, 2, 2), (0.6, 0.1, 0.1)),  # E8: inf outside
    }  # fmt: skip
    runs = [
        r1_run(64, 16, b, s, curve(r[s], f[s])) for b, (r, f) in bases.items() for s in range(3)
    ]

    def edge(inside: tuple, outside: tuple) -> WindowEdge:
        return WindowEdge("T", 64, 32, 16, 1.0, inside, outside, (0,), (0,), "", "", "")

    edges = [
        edge((21.0, 22.0), (23.0, 24.0)), edge((25.0,), (26.0,)), edge((27.0,), (28.0,)),
        edge((29.0,), (30.0,)), edge((31.0,), (32.0,)), edge((33.0,), (34.0,)),
        edge((35.0,), (36.0,)), edge((37.0,), (38.0,)),
    ]  # fmt: skip
    out = rp.edge_outcomes(fake_blob(runs), edges)  # the default level is 1/2
    ln2, ln4 = math.log(2), math.log(4)
    # E1: per seed, inside far (0.3 + 0.1) / 2 = 0.2 against 0.1; mean log reach inside
    # (ln 4, ln 2, ln 4), outside (ln 2, 0, ln 2): ln 2 in every seed
    e1 = out[0]
    assert e1["edge"] is edges[0] and e1["reference"] is None  # every base is at an edge
    assert e1["far_inside_runs"] == [[0.3] * 3, [0.1] * 3]
    assert e1["far_outside_runs"] == [[0.1] * 3, [0.1] * 3]
    np.testing.assert_allclose(e1["reach_inside"], [[4, 2, 4], [4, 2, 4]])
    np.testing.assert_allclose(e1["reach_outside"], [[2, 1, 2], [2, 1, 2]])
    assert e1["far_difference"] == pytest.approx((0.1, 0.1, 0.1), abs=1e-12)
    assert e1["log_reach_difference"] == pytest.approx((ln2, ln2, ln2), abs=1e-12)
    assert (e1["far_verdict"], e1["reach_verdict"]) == ("inside", "inside")
    e2 = out[1]  # inside reach 1 (ln 1 = 0) against 2; far 0.1 against 0.3
    assert e2["log_reach_difference"] == pytest.approx((-ln2, -ln2, -ln2), abs=1e-12)
    assert e2["far_difference"] == pytest.approx((-0.2, -0.2, -0.2), abs=1e-12)
    assert (e2["far_verdict"], e2["reach_verdict"]) == ("outside", "outside")
    e3 = out[2]  # the same runs on both sides: differences exactly 0, no sign
    assert e3["far_difference"] == (0, 0, 0) and e3["log_reach_difference"] == (0, 0, 0)
    assert (e3["far_verdict"], e3["reach_verdict"]) == ("undecided", "undecided")
    # E4: per seed far differences 0.2, -0.2, 0 and log differences ln 4, -ln 4, 0: mean 0,
    # half-widths t_{0.975,2} s / sqrt 3 with s = 0.2 and ln 4 (t_{0.975,2} = 4.3027)
    e4 = out[3]
    t2 = 4.302652729749464
    assert e4["far_difference"] == pytest.approx(
        (0, -t2 * 0.2 / 3**0.5, t2 * 0.2 / 3**0.5), abs=1e-9
    )
    assert e4["log_reach_difference"] == pytest.approx(
        (0, -t2 * ln4 / 3**0.5, t2 * ln4 / 3**0.5), abs=1e-9
    )
    assert (e4["far_verdict"], e4["reach_verdict"]) == ("undecided", "undecided")
    for e in out[4:]:  # a reach of 0 or inf on either side: no log difference
        assert len(e["log_reach_difference"]) == 3
        assert all(math.isnan(x) for x in e["log_reach_difference"])
        assert e["reach_verdict"] == "undecided"


def test_edge_reference_with_exactly_two_other_bases() -> None:
    # horizons at d = 16: base 10 -> 5, base 1e4 -> 91 (max_context); the edge's inside
    # horizon 100 is nearest 91, its outside horizon 4 nearest 5
    assert (max_context(10.0, 16), max_context(1e4, 16)) == (5, 91)
    fars = {40.0: (0.1, 0.1), 50.0: (0.1, 0.1), 1e4: (0.3, 0.2), 10.0: (0.1, 0.1)}
    runs = [r1_run(64, 16, b, s, curve(2, f[s])) for b, f in fars.items() for s in (0, 1)]
    edge = WindowEdge("T", 64, 32, 16, 1.0, (40.0,), (50.0,), (100,), (4,), "", "", "")
    ref = rp.edge_outcomes(fake_blob(runs), [edge])[0]["reference"]
    assert ref["bases"] == (1e4, 10.0) and ref["horizons"] == (91, 5)
    # farthest bins 0.3 - 0.1 and 0.2 - 0.1: mean 0.15, s = 0.05 sqrt 2, half-width T1 * 0.05
    assert ref["far_difference"] == pytest.approx((0.15, 0.15 - T1 * 0.05, 0.15 + T1 * 0.05))


def test_distractor_effect_one_seed_at_level_0_7() -> None:
    # one seed per base; reaches at level 1/2 of the 32- and 64-token evaluations, read at
    # level 0.7 where a reach k + 1 becomes sqrt(k (k + 1)) (see curve)
    runs = [
        r1_run(64, 16, 10.0, 0, curve(2), {64: curve(4)}),
        r1_run(64, 16, 100.0, 0, curve(3), {64: curve(1)}),
    ]
    eff = rp.distractor_effect(fake_blob(runs[::-1]), (64, 32, 16, "log_uniform"), level=0.7)
    assert eff["tokens"] == [32, 64] and eff["bases"] == [10.0, 100.0]
    assert eff["reach"].shape == (2, 2, 1)
    np.testing.assert_allclose(
        eff["reach"][:, :, 0], [[math.sqrt(2), math.sqrt(6)], [math.sqrt(12), 0.0]]
    )


def test_learned_horizon_of_a_zero_form_and_the_interleaved_layout() -> None:
    d, base = 8, 500.0
    zero = [[[0.0, 0.0], [0.0, 0.0]]] * (d // 2)
    run = fake_run(64, d, base, 0, 10.0)
    run["evaluations"][0].update(
        {"target_moment_blocks": zero, "mu_q": [0.0] * d, "mu_k": [0.0] * d}
    )
    out = rp.learned_form(fake_blob([run]), (64, 128, d, "log_uniform"))
    # nothing learned: the margin is 0 at every distance, never negative, so no horizon
    assert np.all(out["margin"] == 0)
    assert out["learned_horizon"][0, 0] == math.inf and out["cosine_horizon"][0, 0] == math.inf
    # interleaved pairs (2i, 2i + 1): with no target moment the margin is -mu_q R_{-m} mu_k
    rng = np.random.default_rng(2)
    mu_q, mu_k = rng.standard_normal(d), rng.standard_normal(d)
    run["evaluations"][0].update({"mu_q": mu_q.tolist(), "mu_k": mu_k.tolist()})
    blob = fake_blob([run])
    blob["config"]["layout"] = "interleaved"
    out = rp.learned_form(blob, (64, 128, d, "log_uniform"))
    want = [-mu_q @ rotation(-m, d, base, "interleaved") @ mu_k for m in range(1, 65)]
    np.testing.assert_allclose(out["margin"][0, 0], want, atol=1e-10)


def test_predictor_comparison_context_intercepts_level_and_selection_by_hand() -> None:
    rng = np.random.default_rng(3)
    bases = [30.0, 100.0, 300.0, 1000.0, 3000.0]
    runs = []
    for span in (512, 1024):
        for d in (16, 32):
            for b in bases:
                for s in (0, 1):
                    target = 3 * max_context(b, d) ** 0.7 * (1.3 if span == 1024 else 1.0)
                    target *= math.exp(rng.normal(0, 0.1))
                    run = fake_run(span, d, b, s, target)
                    # a steeper fall for larger bases, so that the reach at another level is
                    # not the same multiple of the reach at 1/2 in every row
                    slope = 0.05 + 0.02 * bases.index(b)
                    acc = 0.5 - slope * (np.log(centres(EDGES)) - math.log(target))
                    run["evaluations"][0]["accuracy"] = np.clip(acc, 0.0, 1.0).tolist()
                    runs.append(run)
    lu = list(runs)
    for b in bases:  # a cell trained on other distances: left out unless asked for
        for s in (0, 1):
            runs.append(fake_run(1024, 16, b, s, 20.0 * (1 + 0.1 * s)))
            runs[-1]["distances"] = "uniform"
    blob = fake_blob(runs)
    out = rp.predictor_comparison(blob, level=0.6, intercepts="context")
    assert out["cells"] == [(s, 128, d, "log_uniform") for s in (512, 1024) for d in (16, 32)]
    assert out["rows"] == [20, 20]
    fns = {
        "horizon": lambda r: max_context(r["base"], r["d"]),
        "quarter_period": lambda r: quarter_period(r["d"], r["base"]),
        "base": lambda r: r["base"],
    }
    sds = {}
    for name, fn in fns.items():
        sds[name] = []
        for s in (0, 1):
            rows = [r for r in lu if r["seed"] == s]
            y = [plain_reach(centres(EDGES), r["evaluations"][0]["accuracy"], 0.6) for r in rows]
            g = np.array([r["span"] for r in rows])  # one intercept per context: the span here
            sds[name].append(demeaned_sd(np.log(y), np.log([fn(r) for r in rows]), g))
        a, b = sds[name]
        assert out[name]["sd"] == pytest.approx([a, b], rel=1e-9)
        m, half = (a + b) / 2, T1 * abs(a - b) / 2
        got = (out[name]["sd_mean"], out[name]["sd_low"], out[name]["sd_high"])
        assert got == pytest.approx((m, m - half, m + half), rel=1e-9)
    for name in ("quarter_period", "base"):
        diff = np.subtract(sds[name], sds["horizon"])
        assert out["difference"][name][0] == pytest.approx(diff.mean(), rel=1e-9)
    # chosen cells, the other distances among them, and chosen bases
    cells = [[1024, 128, 16, "uniform"], (512, 128, 32, "log_uniform")]
    picked = rp.predictor_comparison(blob, cells=cells)
    assert picked["cells"] == [(1024, 128, 16, "uniform"), (512, 128, 32, "log_uniform")]
    assert picked["rows"] == [10, 10]
    assert rp.predictor_comparison(blob, bases=[100, 300.0, 1000])["rows"] == [12, 12]


def test_predictor_comparison_rows_of_reach_one_and_zero_and_its_refusals() -> None:
    # fake_run's curve is 1/2 at the first centre (1) for a target reach of 1: reach exactly 1,
    # a finite positive reach; a target of 0.5 puts the first bin below 1/2: reach 0
    assert (
        plain_reach(centres(EDGES), fake_run(1024, 16, 30.0, 0, 1.0)["evaluations"][0]["accuracy"])
        == 1.0
    )
    targets = {30.0: (1.0, 1.0), 100.0: (0.5, 9.0), 300.0: (20.0, 22.0), 1000.0: (40.0, 41.0)}
    runs = [fake_run(1024, 16, b, s, t[s]) for b, t in targets.items() for s in (0, 1)]
    assert rp.predictor_comparison(fake_blob(runs))["rows"] == [3, 3]  # all but base 100
    for run in runs:
        run["evaluations"][0]["accuracy"] = [0.9] * 10
    with pytest.raises(ValueError, match=r"^no row has a finite reach in every seed"):
        rp.predictor_comparison(fake_blob(runs))
    with pytest.raises(ValueError, match=r"^slopes must be one of \('common', 'per_d'\)"):
        rp.predictor_comparison(fake_blob(runs), slopes="each")
    with pytest.raises(ValueError, match=r"^intercepts must be one of \('cell', 'context'\)"):
        rp.predictor_comparison(fake_blob(runs), intercepts="base")


# ---- issue 22, rep2: surviving mutants of t_interval, recall_curves, learned_form, the
# ---- residual SD of predictor_comparison, needle_curves and needle_outcomes, each pinned on
# ---- a hand-built input whose every output is worked out below with plain arithmetic
LEVEL_REFUSAL = r"\blevel must be a finite real number in \(0\.0, 1\.0\)"


def test_i22_t_interval_exact_inputs_levels_and_a_quiet_single_seed() -> None:
    import warnings
    from fractions import Fraction

    from scipy.stats import t

    # exact fractions (accuracies as counts / N) are read as numbers
    mean, low, high = rp.t_interval([Fraction(97, 100), Fraction(99, 100)])
    assert math.isclose(mean, 0.98) and math.isclose(high - mean, T1 * 0.01)
    assert math.isclose(mean - low, T1 * 0.01)
    x = [0.9, 0.7, 0.8, 0.6]  # mean 0.75, s^2 = (0.15^2 + 0.05^2) * 2 / 3
    s = math.sqrt((0.15**2 + 0.05**2) * 2 / 3)
    for level in (0.5, 0.9, 0.99):
        half = t.ppf(0.5 + level / 2, 3) * s / 2
        assert rp.t_interval(x, level) == pytest.approx((0.75, 0.75 - half, 0.75 + half))
    for bad in (0.0, 1.0, 1.5, -0.5):
        with pytest.raises(ValueError, match=LEVEL_REFUSAL):
            rp.t_interval(x, bad)
    with pytest.raises(ValueError, match=r"\bvalues must not be empty\b"):
        rp.t_interval([])
    # one seed, or a non-finite value: a nan interval and no RuntimeWarning in a chapter cell
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(rp.t_interval([7.0])[1:]).all()
        assert np.isnan(rp.t_interval([1.0, math.inf])[1:]).all()
        assert np.isnan(rp.t_interval([math.nan, 1.0])[1:]).all()


def _i22_recall_run(base: float, seed: int, acc: list[float], edges: list, **extra) -> dict:
    nb = len(acc)
    return {
        "span": 64, "tokens": 32, "d": 8, "distances": "log_uniform", "base": base, "seed": seed,
        "evaluations": [
            {"tokens": 32, "bin_edges": edges, "n": [100, 50, 40, 20][:nb], "accuracy": acc},
            {"tokens": 64, "bin_edges": edges, "n": [100] * nb, "accuracy": [0.5] * nb},
        ],
        "form_blocks": [[[1, 0], [0, 1]]] * 4,
        **extra,
    }  # fmt: skip


def test_i22_recall_curves_pins_every_field_on_two_bases_and_two_seeds() -> None:
    from rope_lib import min_base

    edges = [1, 3, 9, 33, 65]
    acc = {  # (base, seed) -> accuracy per bin
        (10.0, 0): [0.9, 0.6, 0.3, 0.1],
        (10.0, 1): [0.8, 0.5, 0.2, 0.0],
        (100.0, 0): [1.0, 0.9, 0.7, 0.5],
        (100.0, 1): [0.9, 0.9, 0.6, 0.3],
    }
    runs = [_i22_recall_run(b, s, a, edges) for (b, s), a in acc.items()]
    blob = {"experiment": "recall", "config": {"n_values": 10}, "runs": runs[::-1]}
    cell = (64, 32, 8, "log_uniform")
    cur = rp.recall_curves(blob, cell)
    assert cur.cell == cell and cur.tokens == 32 and rp.recall_curves(blob, cell, 64).tokens == 64
    assert cur.bases.tolist() == [10.0, 100.0] and cur.seeds.tolist() == [0, 1]
    assert cur.bin_edges.tolist() == edges and cur.bin_edges.dtype == np.int64
    np.testing.assert_allclose(
        cur.bin_centres, [math.sqrt(1 * 2), math.sqrt(3 * 8), math.sqrt(9 * 32), math.sqrt(33 * 64)]
    )
    for i, b in enumerate((10.0, 100.0)):
        a0, a1 = np.array(acc[b, 0]), np.array(acc[b, 1])
        assert cur.accuracy[i].tolist() == [acc[b, 0], acc[b, 1]]
        half = T1 * np.abs(a0 - a1) / 2  # two seeds: s = |a0 - a1| / sqrt 2
        np.testing.assert_allclose(cur.mean[i], (a0 + a1) / 2, atol=1e-12)
        np.testing.assert_allclose(cur.low[i], (a0 + a1) / 2 - half, atol=1e-12)
        np.testing.assert_allclose(cur.high[i], (a0 + a1) / 2 + half, atol=1e-12)
        n = np.array([100, 50, 40, 20])
        se = np.maximum(np.sqrt(a0 * (1 - a0) / n), np.sqrt(a1 * (1 - a1) / n))
        np.testing.assert_allclose(cur.binomial_se[i], se, atol=1e-15)
    assert cur.binomial_se.shape == (2, 4)
    assert cur.horizon.tolist() == [max_context(10.0, 8), max_context(100.0, 8)]
    np.testing.assert_allclose(
        cur.quarter_period, [quarter_period(8, 10.0), quarter_period(8, 100.0)]
    )
    assert cur.min_base == min_base(64, 8)
    assert cur.chance == 0.1  # 1 / n_values of the configuration
    # one seed per base, no configuration (16 values), edges stored as floats: still int64
    one = {
        "experiment": "recall",
        "runs": [_i22_recall_run(10.0, 3, acc[10.0, 0], [1.0, 3.0, 9.0, 33.0, 65.0])],
    }
    cur = rp.recall_curves(one, cell)
    assert cur.chance == 1 / 16 and cur.seeds.tolist() == [3] and cur.tokens == 32
    assert cur.bin_edges.dtype == np.int64 and cur.bin_edges.tolist() == edges
    assert cur.accuracy.tolist() == [[acc[10.0, 0]]] and np.isnan(cur.low).all()
    # the runs of a cell must share their distance bins
    runs[0]["evaluations"][0]["bin_edges"] = [1, 3, 9, 33, 66]
    with pytest.raises(
        ValueError, match=r"cell \(64, 32, 8, 'log_uniform'\) have different distance bins"
    ):
        rp.recall_curves(blob, cell)


def _i22_needle_run(base: float, seed: int, main: list[int], total: int, edges: list) -> dict:
    """A run of experiment 2: main counts as given; absent target 1/4 and absent needle 3/4 of
    the total; the other controls zero."""
    nb = len(main)
    zeros = [0] * nb
    return {
        "base": base, "seed": seed, "bin_edges": edges, "total": [total] * nb,
        "main_correct": main, "main_latest": zeros, "recency_correct": zeros,
        "repeat_correct": zeros, "repeat_other": zeros, "absent_target": [total // 4] * nb,
        "absent_latest": zeros, "absent_needle": [3 * total // 4] * nb,
    }  # fmt: skip


def test_i22_needle_curves_pins_totals_intervals_and_configuration() -> None:
    edges = [3, 5, 9, 17, 33]
    main = {  # (base, seed) -> (counts, total)
        (10.0, 0): ([60, 40, 30, 20], 100),
        (10.0, 1): ([35, 15, 10, 5], 40),
        (100.0, 0): ([99, 98, 97, 96], 100),
        (100.0, 1): ([38, 37, 36, 35], 40),
    }
    runs = [_i22_needle_run(b, s, m, n, edges) for (b, s), (m, n) in main.items()]
    blob = {"experiment": "needle", "config": {"n_needles": 5, "head_dim": 8}, "runs": runs}
    c = rp.needle_curves(blob)
    assert c.total.tolist() == [[[100] * 4, [40] * 4]] * 2
    for i, b in enumerate((10.0, 100.0)):
        p0 = np.array(main[b, 0][0]) / main[b, 0][1]
        p1 = np.array(main[b, 1][0]) / main[b, 1][1]
        half = T1 * np.abs(p0 - p1) / 2
        for key, shift in (("main_correct", 0.0), ("key_gain", 0.25)):  # gain: minus 1/4
            m = (p0 + p1) / 2 - shift
            np.testing.assert_allclose(c.mean[key][i], m, atol=1e-12)
            np.testing.assert_allclose(c.low[key][i], m - half, atol=1e-12)
            np.testing.assert_allclose(c.high[key][i], m + half, atol=1e-12)
        se0, se1 = np.sqrt(p0 * (1 - p0) / main[b, 0][1]), np.sqrt(p1 * (1 - p1) / main[b, 1][1])
        np.testing.assert_allclose(c.binomial_se[i], np.maximum(se0, se1), atol=1e-15)
    assert c.binomial_se.shape == (2, 4)
    np.testing.assert_allclose(c.rates["absent_chance"], 0.75 / 5)  # n_needles = 5
    assert c.horizon.tolist() == [max_context(10.0, 8), max_context(100.0, 8)]  # head_dim 8
    np.testing.assert_allclose(
        c.quarter_period, [quarter_period(8, 10.0), quarter_period(8, 100.0)]
    )
    # no configuration: 4 needles, head dimension 16; one seed per base; edges stored as floats
    fl = [3.0, 5.0, 9.0, 17.0]
    one = {
        "experiment": "needle",
        "runs": [_i22_needle_run(b, 7, [90, 80, 70], 100, fl) for b in (12.0, 100.0)],
    }
    c = rp.needle_curves(one)
    assert c.bin_edges.dtype == np.int64 and c.bin_edges.tolist() == [3, 5, 9, 17]
    assert c.bases.tolist() == [12.0, 100.0] and c.seeds.tolist() == [7]
    np.testing.assert_allclose(c.rates["absent_chance"], 0.75 / 4)
    assert c.horizon.tolist() == [max_context(12.0, 16), max_context(100.0, 16)]
    assert np.isnan(c.low["main_correct"]).all()
    # refusals name what differs
    runs[3]["seed"] = 2
    with pytest.raises(
        ValueError, match=r"\bresults: the bases of experiment 2 have different seeds\b"
    ):
        rp.needle_curves(blob)
    runs[3]["seed"] = 1
    runs[3]["bin_edges"] = [3, 5, 9, 17, 34]
    with pytest.raises(
        ValueError, match=r"\bresults: the runs of experiment 2 have different distance bins\b"
    ):
        rp.needle_curves(blob)
    what = r"results must be a results dict of experiment 2 \(runner.load_results\('needle'"
    with pytest.raises(TypeError, match=what + r".*got \[1, 2\] of type list"):
        rp.needle_curves([1, 2])
    with pytest.raises(ValueError, match=what + r".*its 'runs' is empty"):
        rp.needle_curves({"experiment": "needle", "runs": []})


def test_i22_needle_outcomes_rows_defaults_and_boundaries() -> None:
    from rope_lib.experiments.predictions import NEEDLE_PREDICTIONS

    keys = {
        "base", "horizon", "quarter_period", "reach_bins", "far", "far_retrieved",
        "far_by_horizon", "far_by_quarter_period", "horizon_bin", "quarter_period_bin",
        "min_to_half", "key_gain", "learned", "far_learned", "main_min", "shifted_beyond",
    }  # fmt: skip
    # no configuration: the context is twice the last edge, so every bin ends by its half
    fl = [3.0, 5.0, 9.0, 17.0]
    one = {
        "experiment": "needle",
        "runs": [_i22_needle_run(b, 0, [90, 80, 70], 100, fl) for b in (12.0, 100.0)],
    }
    other, hundred = rp.needle_outcomes(one)
    assert set(other) == keys and set(hundred) == keys
    assert other["base"] == 12.0 and other["horizon"] == max_context(12.0, 16)
    assert other["quarter_period"] == pytest.approx(quarter_period(16, 12.0))
    assert other["min_to_half"] == pytest.approx([0.7]) and hundred["min_to_half"] == pytest.approx(
        [0.7]
    )
    # base 12 has no written prediction, base 100 has one
    p = next(p for p in NEEDLE_PREDICTIONS if p.base == 100.0)
    assert [
        other[k]
        for k in ("far_by_horizon", "far_by_quarter_period", "horizon_bin", "quarter_period_bin")
    ] == [None] * 4
    got = [
        hundred[k]
        for k in ("far_by_horizon", "far_by_quarter_period", "horizon_bin", "quarter_period_bin")
    ]
    assert got == [p.far_by_horizon, p.far_by_quarter_period, p.horizon_bin, p.quarter_period_bin]
    # total 128: rates are exact binary fractions.  main 112, 104, 64, 104: mean 0.75, so the
    # key gain is exactly 0.75 - 0.25 = 0.5, which does not exceed LEARNED_GAIN; 64/128 = 0.5
    # is not below the level; context 30: half 15, bins ending by 15 are [3, 5) and [5, 9)
    edges = [3, 5, 9, 17, 33]
    run = _i22_needle_run(10.0, 0, [112, 104, 64, 104], 128, edges)
    run["shifted_correct"] = [13, 38, 51, 64]
    blob = {"experiment": "needle", "config": {"head_dim": 16, "context_length": 30}, "runs": [run]}
    (row,) = rp.needle_outcomes(blob)
    assert row["key_gain"] == [0.5] and row["learned"] == [False] and row["far_learned"] == []
    assert row["reach_bins"] == [4]
    assert row["min_to_half"] == [104 / 128]
    # horizon 5 at d = 16, base 10: the bins starting at 5, 9, 17 are at or beyond it
    assert max_context(10.0, 16) == 5 and row["shifted_beyond"] == [38 / 128]
    for bad in (0.0, 1.0, 1.5, -0.5):
        with pytest.raises(ValueError, match=LEVEL_REFUSAL):
            rp.needle_outcomes(blob, bad)


def test_i22_learned_form_pins_every_output_with_the_configured_layout() -> None:
    d, base, span = 4, 100.0, 40
    b0, b1 = [[0.1, 0.5], [-0.3, 0.1]], [[1.0, -0.2], [0.6, 0.8]]
    mu_q, mu_k = np.array([0.3, -0.2, 0.5, 0.1]), np.array([0.4, 0.6, -0.1, 0.2])
    run = fake_run(span, d, base, 0, 10.0)
    run["form_blocks"] = [[[1, 2], [0, 0]], [[0, 0], [0, 3]]]  # energies 5 and 9
    run["evaluations"][0].update(
        {"target_moment_blocks": [b0, b1], "mu_q": mu_q.tolist(), "mu_k": mu_k.tolist()}
    )
    cell = (span, 128, d, "log_uniform")
    blob = {"experiment": "recall", "config": {"layout": "interleaved"}, "runs": [run]}
    out = rp.learned_form(blob, cell)
    assert set(out) == {
        "bases", "distances", "amplitude", "phase", "cosine_part", "sine_part", "mean_part",
        "margin", "slow_energy", "learned_horizon", "cosine_horizon", "peak",
    }  # fmt: skip
    assert out["bases"] == [base] and out["distances"].tolist() == list(range(1, span + 1))
    # c_i = M_aa + M_bb, s_i = M_ab - M_ba; theta = (1, 1/10)
    c, s, th = np.array([0.2, 1.8]), np.array([0.8, -0.8]), np.array([1.0, 0.1])
    np.testing.assert_allclose(out["amplitude"][0, 0], [math.hypot(0.2, 0.8), math.hypot(1.8, 0.8)])
    np.testing.assert_allclose(out["phase"][0, 0], [math.atan2(0.8, 0.2), math.atan2(-0.8, 1.8)])
    dense = np.zeros((d, d))
    dense[:2, :2], dense[2:, 2:] = b0, b1  # interleaved pairs (0, 1) and (2, 3)
    m = np.arange(1, span + 1)
    cos_part = np.array([c @ np.cos(k * th) for k in m])
    sin_part = np.array([-(s @ np.sin(k * th)) for k in m])

    def mean_part(layout: str) -> np.ndarray:
        return np.array([-(mu_q @ rotation(-k, d, base, layout) @ mu_k) for k in m])

    mean = mean_part("interleaved")
    margin = np.array([np.trace(rotation(-k, d, base, "interleaved") @ dense) for k in m]) + mean
    np.testing.assert_allclose(cos_part + sin_part + mean, margin, atol=1e-12)  # two routes
    for key, want in (
        ("cosine_part", cos_part), ("sine_part", sin_part), ("mean_part", mean), ("margin", margin)
    ):  # fmt: skip
        np.testing.assert_allclose(out[key][0, 0], want, atol=1e-12)
    first = [float(k) for k, v in zip(m, margin, strict=True) if v < 0]
    first_cos = [float(k) for k, v in zip(m, cos_part + mean, strict=True) if v < 0]
    assert out["learned_horizon"][0, 0] == (first[0] if first else math.inf)
    assert out["cosine_horizon"][0, 0] == (first_cos[0] if first_cos else math.inf) == 14.0
    assert out["peak"][0, 0] == m[int(np.argmax(margin))]
    assert math.isclose(out["slow_energy"][0, 0], 9 / 14)  # d/4 = 1: pair 1 is the slow half
    # chosen distances, in the order given; a single distance is enough
    some = rp.learned_form(blob, cell, distances=[7, 2])
    assert some["distances"].tolist() == [7, 2]
    np.testing.assert_allclose(some["margin"][0, 0], margin[[6, 1]], atol=1e-12)
    np.testing.assert_allclose(rp.learned_form(blob, cell, [3])["margin"][0, 0], margin[[2]])
    with pytest.raises(ValueError, match=r"^distances must be a 1-D array of integers"):
        rp.learned_form(blob, cell, distances=[[1, 2]])
    for bad in ([0, 1], [], [-3]):
        with pytest.raises(ValueError, match=r"\bdistances\b.* integers >= 1$"):
            rp.learned_form(blob, cell, distances=bad)
    # no configuration: the layout is "half", which pairs (0, 2) and (1, 3) of the means
    plain = rp.learned_form({"experiment": "recall", "runs": [run]}, cell)
    np.testing.assert_allclose(plain["mean_part"][0, 0], mean_part("half"), atol=1e-12)
    assert not np.allclose(mean_part("half"), mean)  # the two layouts differ on these means


def test_i22_residual_sd_one_cell_and_one_intercept_for_two_slopes() -> None:
    # one cell of three bases: one intercept and one slope leave n - 2 = 1 degree of freedom
    runs = [
        fake_run(1024, 16, b, s, max_context(b, 16) ** 0.7 * (1 + 0.03 * s * k))
        for k, b in enumerate((30.0, 300.0, 3000.0))
        for s in range(2)
    ]
    out = rp.predictor_comparison(fake_blob(runs))
    for s in range(2):
        rows = [r for r in runs if r["seed"] == s]
        y = np.log([plain_reach(centres(EDGES), r["evaluations"][0]["accuracy"]) for r in rows])
        x = np.log([max_context(r["base"], 16) for r in rows])
        want = demeaned_sd(y, x, np.zeros(3))
        assert math.isclose(out["horizon"]["sd"][s], want, rel_tol=1e-9, abs_tol=1e-12)
    # two bases: no degree of freedom left
    two = [r for r in runs if r["base"] != 3000.0]
    with pytest.raises(ValueError, match=r"\btoo few rows for the slopes and intercepts\b"):
        rp.predictor_comparison(fake_blob(two))
    # two head dimensions, one intercept (one context) and one slope per head dimension:
    # demean over all rows, then solve the 2 x 2 normal equations of the two slope columns
    runs = []
    for dd, power in ((16, 0.6), (32, 0.9)):
        for k, b in enumerate((30.0, 100.0, 300.0, 1000.0)):
            for s in range(2):
                runs.append(fake_run(1024, dd, b, s, b**power * (1 + 0.05 * ((k + s) % 3))))
    out = rp.predictor_comparison(fake_blob(runs), slopes="per_d", intercepts="context")
    for s in range(2):
        rows = [r for r in runs if r["seed"] == s]
        y = np.log([plain_reach(centres(EDGES), r["evaluations"][0]["accuracy"]) for r in rows])
        x = np.log([r["base"] for r in rows])
        cols = np.array(
            [
                [xi if r["d"] == dd else 0.0 for dd in (16, 32)]
                for xi, r in zip(x, rows, strict=True)
            ]
        )
        cols -= cols.mean(axis=0)
        yc = y - y.mean()
        slopes = np.linalg.solve(cols.T @ cols, cols.T @ yc)
        resid = yc - cols @ slopes
        sd = math.sqrt(resid @ resid / (len(y) - 3))
        assert math.isclose(out["base"]["sd"][s], sd, rel_tol=1e-9)
        assert out["base"]["slope"][s] == pytest.approx(slopes.tolist(), rel=1e-9)


def test_learned_form_refuses_distances_that_are_not_whole_numbers() -> None:
    """distances=[2.5] was read as [2] (np.asarray with dtype int64 truncates): a silent
    wrong number; 2.0 is a whole number and reads as 2 (found by rep2's triage)."""
    blob = RAW
    cell = rp.recall_cells(blob)[0]
    two = rp.learned_form(blob, cell, distances=[2])
    assert rp.learned_form(blob, cell, distances=[2.0])["margin"] == pytest.approx(two["margin"])
    for bad in ([2.5], [[2]], [0], []):
        with pytest.raises((ValueError, TypeError), match=r"^distances must be"):
            rp.learned_form(blob, cell, distances=bad)
