"""Tests of rope_lib.experiment_report: the summaries and the figure of experiment 1.

Independent routes: the stored results file parsed here with ``json`` and summarised with
plain numpy and ``statistics`` (means, standard errors, energy and amplitude fractions);
hand-computed values on small made-up results; the horizon of B_m by a brute-force scan of
``sum(cos(m * b**(-2i/d)))`` over every distance; the quarter period from its definition (the
first zero of the slowest pair's cosine); min_base checked by brute force at the returned base
and just below it.
"""

from __future__ import annotations

import importlib
import json
import math
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

import rope_lib  # noqa: E402
from rope_lib import experiment_report as rep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FULL_FILE = ROOT / "rope_lib" / "data" / "experiment_full.json"
CELLS = [(256, 16), (256, 32), (1024, 16), (1024, 32)]


@pytest.fixture(scope="module")
def full() -> dict:
    """The stored full results through the library's reader (which refuses a stale file)."""
    return rope_lib.experiment_results("full")


@pytest.fixture(scope="module")
def raw() -> dict:
    """The same file parsed here, not through rope_lib."""
    return json.loads(FULL_FILE.read_text())


def raw_cell(raw: dict, length: int, d: int) -> dict[float, list[dict]]:
    """The runs of one (L, d) by base, each list in seed order, grouped here."""
    out: dict[float, list[dict]] = {}
    for run in raw["runs"]:
        if run["context_length"] == length and run["d"] == d:
            out.setdefault(run["base"], []).append(run)
    return {b: sorted(rs, key=lambda r: r["seed"]) for b, rs in sorted(out.items())}


def brute_horizon(base: float, d: int, chunk: int = 1 << 16, stop: int = 1 << 23) -> int:
    """First m >= 0 with sum_i cos(m b^(-2i/d)) < 0, scanning every integer m."""
    th = np.array([base ** (-2.0 * i / d) for i in range(d // 2)])
    for start in range(0, stop, chunk):
        m = np.arange(start, start + chunk, dtype=np.float64)
        b_m = np.cos(np.outer(m, th)).sum(axis=1)
        neg = np.flatnonzero(b_m < 0)
        if neg.size:
            return start + int(neg[0])
    raise AssertionError(f"no negative B_m below {stop} for base {base}, d {d}")


def brute_min_margin(base: float, length: int, d: int) -> float:
    """min over 0 <= m < L of B_m, summed directly."""
    th = np.array([base ** (-2.0 * i / d) for i in range(d // 2)])
    return float(np.cos(np.outer(np.arange(length), th)).sum(axis=1).min())


def made_up(accuracies: dict[float, list[list[float]]], d: int = 8, **extra: list) -> dict:
    """A results blob with L = 16, the given accuracies (per base, per seed) and pair data."""
    runs = []
    for base, per_seed in accuracies.items():
        for seed, acc in enumerate(per_seed):
            run = {
                "context_length": 16,
                "d": d,
                "base": base,
                "seed": seed,
                "bin_edges": [1, 2, 5, 17],
                "accuracy": acc,
                "pair_energy": [1.0] * (d // 2),
            }
            for key, values in extra.items():
                run[key] = values[seed]
            runs.append(run)
    return {"config": {"n_values": 4}, "runs": runs}


# ------------------------------------------------------------------------------------------
# recall curves
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("length", "d"), CELLS)
def test_means_and_standard_errors_match_a_plain_numpy_summary(
    full: dict, raw: dict, length: int, d: int
) -> None:
    curves = rep.recall_curves(full, length, d)
    cell = raw_cell(raw, length, d)
    assert curves.bases.tolist() == list(cell)
    assert curves.n_seeds.tolist() == [3] * 6
    edges = cell[10.0][0]["bin_edges"]
    assert curves.bin_edges.tolist() == edges
    for k, runs in enumerate(cell.values()):
        acc = np.array([r["accuracy"] for r in runs])
        np.testing.assert_allclose(curves.accuracy_mean[k], acc.mean(axis=0), rtol=1e-12)
        se = [statistics.stdev(col) / math.sqrt(len(col)) for col in acc.T.tolist()]
        np.testing.assert_allclose(curves.accuracy_se[k], se, rtol=1e-9, atol=1e-15)
    assert curves.chance == 1 / raw["config"]["n_values"]
    # each centre lies between the first and last distance of its bin, at their geometric mean
    first, last = np.array(edges[:-1]), np.array(edges[1:]) - 1
    assert np.all((first <= curves.bin_centres) & (curves.bin_centres <= last))
    np.testing.assert_allclose(np.log(curves.bin_centres), (np.log(first) + np.log(last)) / 2)


def test_standard_error_by_hand() -> None:
    """Three seeds 0.2, 0.4, 0.9: mean 0.5, sample variance 0.13, SE sqrt(0.13 / 3)."""
    blob = made_up({100.0: [[0.2, 1.0, 0.0], [0.4, 1.0, 0.5], [0.9, 1.0, 1.0]]})
    curves = rep.recall_curves(blob, 16, 8)
    np.testing.assert_allclose(curves.accuracy_mean[0], [0.5, 1.0, 0.5], rtol=1e-12)
    np.testing.assert_allclose(
        curves.accuracy_se[0], [math.sqrt(0.13 / 3), 0.0, math.sqrt(0.25 / 3)], rtol=1e-12
    )
    one_seed = rep.recall_curves(made_up({100.0: [[0.2, 1.0, 0.0]]}), 16, 8)
    assert np.all(np.isnan(one_seed.accuracy_se))
    assert one_seed.chance == 0.25


@pytest.mark.parametrize(("length", "d"), [(256, 16), (1024, 32)])
def test_horizons_equal_a_brute_force_scan_of_b_m(full: dict, length: int, d: int) -> None:
    curves = rep.recall_curves(full, length, d)
    expected = [brute_horizon(b, d) for b in curves.bases]
    assert curves.horizon.tolist() == expected


def test_quarter_periods_from_their_definition(full: dict) -> None:
    """T/4 is where cos(m * theta_slowest) first reaches zero: theta_slowest * T/4 = pi/2."""
    for d in (16, 32):
        curves = rep.recall_curves(full, 256, d)
        for base, quarter in zip(curves.bases, curves.quarter_period, strict=True):
            slowest = base ** (-(d - 2) / d)
            assert quarter == pytest.approx(math.pi / 2 / slowest, rel=1e-12)
            assert quarter == pytest.approx(2 * math.pi * base ** (1 - 2 / d) / 4, rel=1e-12)


@pytest.mark.parametrize(("length", "d"), CELLS)
def test_min_base_is_feasible_and_just_below_it_is_not(full: dict, length: int, d: int) -> None:
    b = rep.recall_curves(full, length, d).min_base
    assert brute_min_margin(b, length, d) >= -1e-9
    assert brute_min_margin(b * (1 - 1e-6), length, d) < 0


# ------------------------------------------------------------------------------------------
# the figure
# ------------------------------------------------------------------------------------------
def test_figure_has_a_curve_per_base_markers_labels_and_chance(full: dict, raw: dict) -> None:
    length, d = 256, 16
    fig = rep.plot_recall_by_distance(full, length, d)
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    bases = list(raw_cell(raw, length, d))
    assert len(bars) == len(bases)
    assert ax.get_xscale() == "log"
    assert ax.get_ylim() == (0.0, 1.0)
    assert "distance" in ax.get_xlabel() and "accuracy" in ax.get_ylabel()
    assert "L = 256" in ax.get_title() and "d = 16" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for base in bases:
        assert any(
            lab.startswith(f"b = {base:g}: horizon {brute_horizon(base, d)}") for lab in labels
        )
    assert any("chance" in lab for lab in labels)
    # chance: a dashed horizontal line at 1/n_values
    chance = [
        line
        for line in ax.get_lines()
        if line.get_linestyle() == "--" and list(line.get_ydata()) == [1 / 16, 1 / 16]
    ]
    assert len(chance) == 1
    # a dotted vertical line at each horizon within [1, L + 1], none for those beyond
    verticals = sorted(
        float(line.get_xdata()[0])
        for line in ax.get_lines()
        if line.get_linestyle() == ":" and len(set(line.get_xdata())) == 1
    )
    horizons = [brute_horizon(b, d) for b in bases]
    assert verticals == sorted(float(h) for h in horizons if h <= length + 1)
    assert 0 < len(verticals) < len(bases)  # the sweep brackets the horizon
    # a triangle at each quarter period within range
    triangles = sorted(
        float(line.get_xdata()[0])
        for line in ax.get_lines()
        if line.get_marker() == "v" and len(line.get_xdata()) == 1
    )
    quarters = [math.pi / 2 * b ** ((d - 2) / d) for b in bases]
    np.testing.assert_allclose(triangles, sorted(q for q in quarters if q <= length + 1))
    # the error bars carry the seed means at the bin centres
    cell = raw_cell(raw, length, d)
    for bar, runs in zip(bars, cell.values(), strict=True):
        y = bar.lines[0].get_ydata()
        np.testing.assert_allclose(y, np.mean([r["accuracy"] for r in runs], axis=0))
    n_points = sum(len(bar.lines[0].get_xdata()) for bar in bars)
    assert n_points <= importlib.import_module("rope_lib.figures.style").MAX_FIGURE_POINTS


def test_figure_draws_chosen_bases_into_a_given_axes(full: dict) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        out = rep.plot_recall_by_distance(full, 1024, 32, bases=[1e6, 10.0, 10], ax=ax)
        assert out is fig
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert len(bars) == 2
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels[0].startswith("b = 10:") and labels[1].startswith("b = 1e+06:")
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------------------
# pair energy
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("length", "d"), CELLS)
def test_slow_fractions_match_an_explicit_computation(
    full: dict, raw: dict, length: int, d: int
) -> None:
    summary = rep.pair_energy_summary(full, length, d)
    cell = raw_cell(raw, length, d)
    assert summary.bases.tolist() == list(cell)
    for k, runs in enumerate(cell.values()):
        energy_fracs, amp_fracs = [], []
        for run in runs:
            e2 = [e * e for e in run["pair_energy"]]
            energy_fracs.append(sum(e2[d // 4 :]) / sum(e2))
            amps = [
                math.hypot(m[0][0] + m[1][1], m[0][1] - m[1][0])
                for m in run["target_moment_blocks"]
            ]
            amp_fracs.append(sum(amps[d // 4 :]) / sum(amps))
        n = len(runs)
        assert summary.slow_energy_mean[k] == pytest.approx(statistics.fmean(energy_fracs))
        assert summary.slow_energy_se[k] == pytest.approx(
            statistics.stdev(energy_fracs) / math.sqrt(n)
        )
        assert summary.slow_amplitude_mean[k] == pytest.approx(statistics.fmean(amp_fracs))
        assert summary.slow_amplitude_se[k] == pytest.approx(
            statistics.stdev(amp_fracs) / math.sqrt(n)
        )
        np.testing.assert_allclose(summary.energy_share_mean[k].sum(), 1.0, rtol=1e-12)


@pytest.mark.parametrize("d", [8, 6])
def test_equal_pairs_give_one_half_and_a_slowest_pair_gives_one(d: int) -> None:
    """Equal weights on every pair: 1/2 (also for an odd number of pairs, d = 6); all weight
    on the slowest pair: 1; on the fastest: 0."""
    n = d // 2
    rotation = [[1.0, -1.0], [1.0, 1.0]]  # a scaled rotation: amplitude 2 * sqrt(2)
    zero = [[0.0, 0.0], [0.0, 0.0]]
    blob = made_up(
        {10.0: [[0.5, 0.5, 0.5]] * 2},
        d=d,
        target_moment_blocks=[[rotation] * n, [zero] * (n - 1) + [rotation]],
    )
    blob["runs"][1]["pair_energy"] = [0.0] * (n - 1) + [3.0]
    summary = rep.pair_energy_summary(blob, 16, d)
    # seed 0: equal pairs, 1/2; seed 1: only the slowest pair, 1
    assert summary.slow_energy_mean[0] == pytest.approx(0.75)
    assert summary.slow_amplitude_mean[0] == pytest.approx(0.75)
    # two seeds 1/2 and 1: sample sd 0.25 * sqrt(2), SE = sd / sqrt(2) = 0.25
    assert summary.slow_energy_se[0] == pytest.approx(0.25)
    fast = made_up({10.0: [[0.5, 0.5, 0.5]]}, d=d)
    fast["runs"][0]["pair_energy"] = [2.0] + [0.0] * (n - 1)
    assert rep.pair_energy_summary(fast, 16, d).slow_energy_mean[0] == 0.0
    assert np.isnan(rep.pair_energy_summary(fast, 16, d).slow_amplitude_mean[0])


def test_a_reflection_block_has_energy_but_no_amplitude() -> None:
    """[[1, 0], [0, -1]] adds nothing to tr(R M), so it carries no amplitude."""
    reflection = [[1.0, 0.0], [0.0, -1.0]]
    rotation = [[1.0, 0.0], [0.0, 1.0]]
    blob = made_up(
        {10.0: [[0.5, 0.5, 0.5]]},
        d=4,
        target_moment_blocks=[[rotation, reflection]],
    )
    summary = rep.pair_energy_summary(blob, 16, 4)
    assert summary.slow_amplitude_mean[0] == 0.0
    assert summary.slow_energy_mean[0] == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------
FUNCTIONS = [
    rep.recall_curves,
    rep.recall_reach,
    rep.margin_horizons,
    rep.pair_energy_summary,
    rep.plot_recall_by_distance,
]


@pytest.mark.parametrize("func", FUNCTIONS)
def test_cells_not_in_the_results_are_refused_by_name(full: dict, func) -> None:
    with pytest.raises(ValueError, match=r"context_length must be one of .*\[256, 1024\].*512"):
        func(full, 512, 16)
    with pytest.raises(ValueError, match=r"\bd must be one of .*\[16, 32\].*64"):
        func(full, 256, 64)
    with pytest.raises(ValueError, match=r"\bd must be an even integer >= 2"):
        func(full, 256, 15)
    with pytest.raises(TypeError, match=r"context_length must be an integer"):
        func(full, 256.5, 16)
    with pytest.raises(TypeError, match=r"results must be a results dict"):
        func([1, 2], 256, 16)
    with pytest.raises(
        ValueError, match=r"results must be a results dict.*lacks \['d', 'base'.*'accuracy'"
    ):
        func({"config": {"n_values": 4}, "runs": [{"context_length": 16}]}, 256, 16)


@pytest.mark.parametrize("base", [1.0, 0.5, -3.0, float("nan")])
def test_bases_at_most_one_are_refused_by_name(full: dict, base: float) -> None:
    with pytest.raises(ValueError, match=r"bases entries must be a finite real number > 1"):
        rep.plot_recall_by_distance(full, 256, 16, bases=[10.0, base])


def test_bases_not_in_the_results_and_bad_axes_are_refused(full: dict) -> None:
    with pytest.raises(ValueError, match=r"bases entries must be bases of the results.*500"):
        rep.plot_recall_by_distance(full, 256, 16, bases=[10.0, 500.0])
    with pytest.raises(ValueError, match=r"bases must not be empty"):
        rep.plot_recall_by_distance(full, 256, 16, bases=[])
    with pytest.raises(TypeError, match=r"bases must be None or a sequence"):
        rep.plot_recall_by_distance(full, 256, 16, bases="10")
    with pytest.raises(TypeError, match=r"\bax must be None or a matplotlib Axes"):
        rep.plot_recall_by_distance(full, 256, 16, ax=object())


# ------------------------------------------------------------------------------------------
# how far recall reaches, and where the expected margin turns negative
# ------------------------------------------------------------------------------------------
def test_reach_interpolates_in_log_distance_by_hand() -> None:
    """Bins [1], [2, 4], [5, 16]: centres 1, sqrt(8), sqrt(80).  Accuracy 0.7 then 0.3 crosses
    0.5 halfway, which on a log axis is the geometric mean of the two centres, 640**(1/4)."""
    blob = made_up(
        {
            10.0: [[0.9, 0.7, 0.3], [0.4, 0.9, 0.9]],  # seed 1 starts below the level
            100.0: [[0.9, 0.8, 0.6], [0.9, 0.4, 0.9]],  # seed 1 dips and recovers
        }
    )
    reach = rep.recall_reach(blob, 16, 8)
    assert reach.level == 0.5
    assert reach.reach_per_seed[0, 0] == pytest.approx(640**0.25, rel=1e-12)
    assert reach.reach_per_seed[0, 1] == 0.0
    assert reach.reach_per_seed[1, 0] == math.inf
    # 0.9 -> 0.4 crosses 0.5 four fifths of the way from centre 1 to centre 2
    expected = math.exp(0.8 * math.log(math.sqrt(8)))
    assert reach.reach_per_seed[1, 1] == pytest.approx(expected, rel=1e-12)
    # the mean curves: base 10 is [0.65, 0.8, 0.6] (never below), base 100 [0.9, 0.6, 0.75]
    assert reach.reach[0] == math.inf
    assert reach.reach[1] == math.inf
    lower = rep.recall_reach(blob, 16, 8, level=0.7)
    # base 10 mean [0.65, ...] starts below 0.7; base 100 mean 0.9 -> 0.6 crosses at 2/3
    assert lower.reach[0] == 0.0
    assert lower.reach[1] == pytest.approx(math.exp((2 / 3) * math.log(math.sqrt(8))))


@pytest.mark.parametrize("level", [0.25, 0.1, 1.0, 1.5, float("nan")])
def test_reach_level_outside_chance_to_one_is_refused(level: float) -> None:
    blob = made_up({10.0: [[0.9, 0.7, 0.3]]})  # chance 1/4
    with pytest.raises(ValueError, match=r"\blevel must be"):
        rep.recall_reach(blob, 16, 8, level=level)


def test_reach_on_the_stored_results_matches_a_plain_scan(full: dict, raw: dict) -> None:
    reach = rep.recall_reach(full, 1024, 32)
    cell = raw_cell(raw, 1024, 32)
    edges = np.array(next(iter(cell.values()))[0]["bin_edges"], dtype=float)
    centres = np.sqrt(edges[:-1] * (edges[1:] - 1))
    for k, runs in enumerate(cell.values()):
        for s, run in enumerate(runs):
            acc = run["accuracy"]
            j = next((i for i, a in enumerate(acc) if a < 0.5), None)
            if j is None:
                want = math.inf
            elif j == 0:
                want = 0.0
            else:
                # straight line in (log distance, accuracy) through the two bins
                t = (acc[j - 1] - 0.5) / (acc[j - 1] - acc[j])
                want = centres[j - 1] ** (1 - t) * centres[j] ** t
            assert reach.reach_per_seed[k, s] == pytest.approx(want, rel=1e-12)


def _random_run(d: int, base: float, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "d": d,
        "base": base,
        "mu_q": rng.normal(size=d).tolist(),
        "mu_k": rng.normal(size=d).tolist(),
        "target_moment_blocks": rng.normal(size=(d // 2, 2, 2)).tolist(),
    }


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_learned_margin_equals_dense_rotation_matrices(layout: str) -> None:
    """delta(D) = tr(R_{-D} M) - mu_q^T R_{-D} mu_k with dense R and M placed on its pairs."""
    d, base = 8, 37.0
    run = _random_run(d, base, 3)
    idx = np.arange(d)
    a, b = (idx[: d // 2], idx[d // 2 :]) if layout == "half" else (idx[0::2], idx[1::2])
    dense = np.zeros((d, d))
    for i, block in enumerate(np.array(run["target_moment_blocks"])):
        for r, row in enumerate((a[i], b[i])):
            for c, col in enumerate((a[i], b[i])):
                dense[row, col] = block[r, c]
    mu_q, mu_k = np.array(run["mu_q"]), np.array(run["mu_k"])
    distances = np.array([0, 1, 2, 5, 40, 1000])
    want = []
    for delta in distances:
        rot = rope_lib.rotation_matrix(-int(delta), d, base, layout)
        want.append(np.trace(rot @ dense) - mu_q @ rot @ mu_k)
    got = rep.learned_margin(run, distances, layout)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_learned_margin_with_equal_weights_is_two_sigma_squared_b_m() -> None:
    d, base, sigma2 = 16, 500.0, 0.3
    mu = np.full(d, 0.7)
    run = {
        "d": d,
        "base": base,
        "mu_q": mu.tolist(),
        "mu_k": mu.tolist(),
        # M = E[k* q^T] = Sigma + mu mu^T restricted to the pair blocks
        "target_moment_blocks": [
            (sigma2 * np.eye(2) + 0.49 * np.ones((2, 2))).tolist() for _ in range(d // 2)
        ],
    }
    m = np.arange(200)
    th = np.array([base ** (-2.0 * i / d) for i in range(d // 2)])
    b_m = np.cos(np.outer(m, th)).sum(axis=1)
    np.testing.assert_allclose(rep.learned_margin(run, m), 2 * sigma2 * b_m, atol=1e-12)


def test_margin_horizons_of_the_stored_results_by_a_plain_scan(full: dict, raw: dict) -> None:
    horizons = rep.margin_horizons(full, 256, 16)
    cell = raw_cell(raw, 256, 16)
    assert horizons.equal_weight.tolist() == [brute_horizon(b, 16) for b in cell]
    dist = np.arange(1, 1 << 16, dtype=np.float64)
    for k, (base, runs) in enumerate(cell.items()):
        th = np.array([base ** (-2.0 * i / 16) for i in range(8)])
        for s, run in enumerate(runs):
            blocks = np.array(run["target_moment_blocks"])
            cos_w = blocks[:, 0, 0] + blocks[:, 1, 1]
            sin_w = blocks[:, 0, 1] - blocks[:, 1, 0]
            mu_q, mu_k = np.array(run["mu_q"]), np.array(run["mu_k"])
            # half layout: pair i is (i, i + 8); mean term -mu_q^T R_{-D} mu_k pair by pair
            u_a, u_b, v_a, v_b = mu_q[:8], mu_q[8:], mu_k[:8], mu_k[8:]
            ang = -np.outer(dist, th)
            margin = np.cos(ang) @ cos_w + np.sin(ang) @ sin_w
            margin -= np.cos(ang) @ (u_a * v_a + u_b * v_b) + np.sin(ang) @ (u_b * v_a - u_a * v_b)
            negative = np.flatnonzero(margin < 0)
            want = float(dist[negative[0]]) if negative.size else math.inf
            assert horizons.learned[k, s] == want


def test_margin_horizon_limit_is_checked(full: dict) -> None:
    with pytest.raises(ValueError, match=r"\blimit must be an integer"):
        rep.margin_horizons(full, 256, 16, limit=0)


# ------------------------------------------------------------------------------------------
# experiment_summary (issue 22: the table chapter 9 reads had no value test)
# ------------------------------------------------------------------------------------------
def _plain_reach(acc: list[float], centres: np.ndarray, level: float) -> float:
    """First fall below level, on a straight line in (log distance, accuracy)."""
    j = next((i for i, a in enumerate(acc) if a < level), None)
    if j is None:
        return math.inf
    if j == 0:
        return 0.0
    t = (acc[j - 1] - level) / (acc[j - 1] - acc[j])
    return float(centres[j - 1] ** (1 - t) * centres[j] ** t)


def _plain_learned_horizon(run: dict, d: int) -> float:
    """First distance D >= 1 with a negative learned margin, pair by pair (half layout)."""
    h = d // 2
    dist = np.arange(1, 1 << 16, dtype=np.float64)
    th = np.array([run["base"] ** (-2.0 * i / d) for i in range(h)])
    blocks = np.array(run["target_moment_blocks"])
    cos_w = blocks[:, 0, 0] + blocks[:, 1, 1]
    sin_w = blocks[:, 0, 1] - blocks[:, 1, 0]
    mu_q, mu_k = np.array(run["mu_q"]), np.array(run["mu_k"])
    u_a, u_b, v_a, v_b = mu_q[:h], mu_q[h:], mu_k[:h], mu_k[h:]
    ang = -np.outer(dist, th)
    margin = np.cos(ang) @ cos_w + np.sin(ang) @ sin_w
    margin -= np.cos(ang) @ (u_a * v_a + u_b * v_b) + np.sin(ang) @ (u_b * v_a - u_a * v_b)
    negative = np.flatnonzero(margin < 0)
    return float(dist[negative[0]]) if negative.size else math.inf


def test_experiment_summary_by_hand_from_the_stored_json(full: dict, raw: dict) -> None:
    """Every row of chapter 9's table for L = 256, d = 16, each entry recomputed here from
    the JSON file: seed means and SEs of the first and last bin, the reach of the mean curve
    and the smallest and largest reach of a seed (at level 0.6, not the default), the median
    learned horizon by a plain scan, B_m's horizon by brute force, the quarter period from its
    definition, min_base by feasibility on both sides, and the slow-pair energy fraction."""
    level, length, d = 0.6, 256, 16
    table = rep.experiment_summary(full, level=level)
    assert {(r["context_length"], r["d"]) for r in table} == set(CELLS)
    rows = [r for r in table if (r["context_length"], r["d"]) == (length, d)]
    cell = raw_cell(raw, length, d)
    assert [r["base"] for r in rows] == list(cell)
    edges = np.array(next(iter(cell.values()))[0]["bin_edges"], dtype=float)
    centres = np.sqrt(edges[:-1] * (edges[1:] - 1))
    min_base = rows[0]["min_base"]
    assert brute_min_margin(min_base, length, d) >= -1e-9
    assert brute_min_margin(min_base * (1 - 1e-6), length, d) < 0
    for row, (base, runs) in zip(rows, cell.items(), strict=True):
        n = len(runs)
        acc = np.array([r["accuracy"] for r in runs])
        assert row["min_base"] == min_base
        assert row["above_min_base"] is (base >= min_base)
        assert row["horizon"] == brute_horizon(base, d)
        assert row["quarter_period"] == pytest.approx(math.pi / 2 * base ** ((d - 2) / d))
        for key, col in (("near_accuracy", 0), ("far_accuracy", -1)):
            values = acc[:, col].tolist()
            assert row[key] == pytest.approx(statistics.fmean(values), rel=1e-12)
            se = statistics.stdev(values) / math.sqrt(n)
            assert row[key + "_se"] == pytest.approx(se, rel=1e-9, abs=1e-15)
        assert row["reach"] == pytest.approx(
            _plain_reach(acc.mean(axis=0).tolist(), centres, level), rel=1e-12
        )
        per_seed = [_plain_reach(r["accuracy"], centres, level) for r in runs]
        assert row["reach_lo"] == pytest.approx(min(per_seed), rel=1e-12)
        assert row["reach_hi"] == pytest.approx(max(per_seed), rel=1e-12)
        learned = [_plain_learned_horizon(r, d) for r in runs]
        assert row["learned_horizon"] == statistics.median(learned)
        fracs = []
        for r in runs:
            e2 = [e * e for e in r["pair_energy"]]
            fracs.append(sum(e2[d // 4 :]) / sum(e2))
        assert row["slow_energy"] == pytest.approx(statistics.fmean(fracs), rel=1e-12)
        assert row["slow_energy_se"] == pytest.approx(statistics.stdev(fracs) / math.sqrt(n))
    # the seeds differ: the smallest and the largest reach are not the same number
    assert any(r["reach_lo"] < r["reach_hi"] for r in rows)
    assert any(r["near_accuracy"] != r["far_accuracy"] for r in rows)
