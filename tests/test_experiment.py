"""Tests of rope_lib.experiment: the recall experiment of issue 13 (experiment 1).

Independent routes: explicit matrices with known 2 x 2 block norms and index lists written
here (pair energy), dense rotation matrices built here from cos/sin and the trace of their
product with a full covariance (general form), an uninterrupted run (resume), and the stored
smoke results with a tolerance taken from their own spread across seeds (reproduction).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rope_lib import experiment as ex
from rope_lib import sweep

ROOT = Path(__file__).resolve().parents[1]

#: A sweep of four runs that trains in about a second: for the resume and file tests.
TINY = ex.ExperimentConfig(
    name="tiny",
    context_lengths=(16,),
    head_dims=(4,),
    bases=(10.0, 1e4),
    seeds=(0, 1),
    n_keys=64,
    key_dim=8,
    n_values=4,
    steps=20,
    batch_size=8,
    n_bins=4,
    eval_per_bin=8,
)


# ------------------------------------------------------------------------------------------
# independent helpers
# ------------------------------------------------------------------------------------------
def pairs(d: int, layout: str) -> list[tuple[int, int]]:
    """Coordinates of pair i, from the definition of the two layouts."""
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def rotation(m: int, d: int, base: float, layout: str) -> np.ndarray:
    r = np.zeros((d, d))
    for i, (a, b) in enumerate(pairs(d, layout)):
        angle = m * base ** (-2.0 * i / d)
        r[a, a], r[a, b], r[b, a], r[b, b] = (
            math.cos(angle),
            -math.sin(angle),
            math.sin(angle),
            math.cos(angle),
        )
    return r


# ------------------------------------------------------------------------------------------
# pair energy and the general form
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_pair_energy_reads_known_block_norms(layout: str) -> None:
    d = 8
    rng = np.random.default_rng(0)
    norms = np.array([0.5, 2.0, 3.0, 7.0])
    m = rng.standard_normal((d, d)) * 100  # off-block entries must not count
    for i, (a, b) in enumerate(pairs(d, layout)):
        # r / sqrt(2) times a rotation has Frobenius norm r
        phi = 0.3 * i + 0.1
        block = (
            norms[i]
            / math.sqrt(2)
            * np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])
        )
        m[np.ix_([a, b], [a, b])] = block
    # w_q w_k^T = m with w_k the identity
    np.testing.assert_allclose(ex.pair_energy(m, np.eye(d), layout), norms, rtol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_pair_energy_of_random_weights_matches_explicit_sums(layout: str) -> None:
    rng = np.random.default_rng(1)
    d, width = 6, 5
    w_q, w_k = rng.standard_normal((d, width)), rng.standard_normal((d, width))
    expected = []
    for a, b in pairs(d, layout):
        total = 0.0
        for r in (a, b):
            for c in (a, b):
                total += sum(w_q[r, j] * w_k[c, j] for j in range(width)) ** 2
        expected.append(math.sqrt(total))
    np.testing.assert_allclose(ex.pair_energy(w_q, w_k, layout), expected, rtol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_general_form_equals_its_definition(layout: str) -> None:
    """tr(R_m Sigma_q) + mu_q^T R_m (mu_q - mu_k) with dense R_m and a full covariance."""
    rng = np.random.default_rng(2)
    d, base = 8, 50.0
    a = rng.standard_normal((d, 3 * d))
    sigma = a @ a.T / (3 * d)  # full, correlated across pairs
    mu_q, mu_k = rng.standard_normal(d), rng.standard_normal(d)
    ms = np.array([0, 1, -1, 7, -30, 1000])
    expected = [
        np.trace(rotation(m, d, base, layout) @ sigma)
        + mu_q @ rotation(m, d, base, layout) @ (mu_q - mu_k)
        for m in ms
    ]
    got = ex.general_form(ms, d, base, mu_q, sigma, mu_k, layout)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)
    # a non-symmetric matrix (a cross moment): the trace keeps its antisymmetric part
    cross = rng.standard_normal((d, d))
    zero = np.zeros(d)
    expected = [np.trace(rotation(m, d, base, layout) @ cross) for m in ms]
    got = ex.general_form(ms, d, base, zero, cross, zero, layout)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_general_form_isotropic_equal_means_is_twice_sigma2_b_m() -> None:
    from rope_lib import base_bound as bb

    d, base, sigma2 = 16, 300.0, 0.7
    ms = np.arange(0, 200)
    mu = np.full(d, 0.4)
    got = ex.general_form(-ms, d, base, mu, sigma2 * np.eye(d), mu)
    np.testing.assert_allclose(got, 2 * sigma2 * bb.similarity_margin(ms, d, base), atol=1e-9)


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------
def test_unknown_config_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"name must be one of \('smoke', 'full', 'uniform'\)"):
        ex.experiment_config("medium")
    with pytest.raises(ValueError, match=r"config must be one of"):
        ex.run_experiment("medium")
    with pytest.raises(ValueError, match=r"config must be one of"):
        ex.experiment_results("medium")
    with pytest.raises(TypeError, match=r"config must be one of"):
        ex.train_recall(16, 4, 10.0, config=3)
    proc = subprocess.run(
        [sys.executable, "-m", "rope_lib.experiment_cli", "--config", "medium"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "--config" in proc.stderr and "'medium'" in proc.stderr


@pytest.mark.parametrize("base", [1.0, 0.5, -2.0, float("nan")])
def test_base_at_most_one_is_refused_by_name(base: float) -> None:
    with pytest.raises(ValueError, match=r"\bbase must be a finite real number > 1"):
        ex.train_recall(16, 4, base, config=TINY)
    with pytest.raises(ValueError, match=r"bases entries must be a finite real number > 1"):
        ex.ExperimentConfig("x", (16,), (4,), (10.0, base), (0,))


@pytest.mark.parametrize("d", [3, 15, 0])
def test_odd_head_dimension_is_refused_by_name(d: int) -> None:
    with pytest.raises(ValueError, match=r"\bd must be an even integer >= 2"):
        ex.train_recall(16, d, 10.0, config=TINY)
    with pytest.raises(ValueError, match=r"head_dims entries must be an even integer >= 2"):
        ex.ExperimentConfig("x", (16,), (4, d), (10.0,), (0,))


def test_context_longer_than_trained_is_refused_at_evaluation() -> None:
    model = ex.train_recall(16, 4, 10.0, config=TINY)
    with pytest.raises(ValueError, match=r"context_length must be an integer <= 16.*trained"):
        ex.evaluate_recall(model, context_length=17)
    shorter = ex.evaluate_recall(model, context_length=8)  # shorter is fine
    assert shorter["bin_edges"][-1] == 9


# ------------------------------------------------------------------------------------------
# the model and its evaluation
# ------------------------------------------------------------------------------------------
def test_training_is_deterministic_and_seeded() -> None:
    a = ex.train_recall(16, 4, 100.0, seed=3, config=TINY)
    b = ex.train_recall(16, 4, 100.0, seed=3, config=TINY)
    c = ex.train_recall(16, 4, 100.0, seed=4, config=TINY)
    assert a.loss_curve == b.loss_curve
    assert np.array_equal(a.w_q.numpy(), b.w_q.numpy())
    assert not np.array_equal(a.w_q.numpy(), c.w_q.numpy())


def test_held_out_set_is_balanced_over_distance_bins() -> None:
    """eval_per_bin examples in every bin: the bin accuracies are multiples of 1/eval_per_bin."""
    model = ex.train_recall(16, 4, 100.0, config=TINY)
    result = ex.evaluate_recall(model)
    edges = result["bin_edges"]
    assert edges[0] == 1 and edges[-1] == 17 and np.all(np.diff(edges) > 0)
    for acc in result["accuracy"]:
        assert acc * TINY.eval_per_bin == pytest.approx(round(acc * TINY.eval_per_bin))
    d = model.d
    assert np.shape(result["sigma_q_blocks"]) == (d // 2, 2, 2)
    assert len(result["mu_q"]) == d and len(result["pair_energy"]) == d // 2


# ------------------------------------------------------------------------------------------
# resume and atomic files
# ------------------------------------------------------------------------------------------
def _strip_times(blob: dict) -> list[dict]:
    timing = ("train_seconds", "train_cpu_seconds")
    return [{k: v for k, v in run.items() if k not in timing} for run in blob["runs"]]


def test_resume_after_an_interruption_gives_the_same_results(tmp_path: Path) -> None:
    whole = ex.run_experiment(
        TINY, build_dir=tmp_path / "a", output=tmp_path / "a.json", progress=False
    )
    out = tmp_path / "b.json"
    stopped = ex.run_experiment(
        TINY, build_dir=tmp_path / "b", output=out, progress=False, max_new_runs=2
    )
    assert stopped is None and not out.exists()
    run_files = sorted((tmp_path / "b").rglob("*.json"))
    assert len(run_files) == 2
    before = {p.name: p.read_text() for p in run_files}
    resumed = ex.run_experiment(TINY, build_dir=tmp_path / "b", output=out, progress=False)
    # the two finished runs were loaded, not retrained
    assert {p.name: p.read_text() for p in run_files} == before
    assert _strip_times(resumed) == _strip_times(whole)
    assert json.loads(out.read_text()) == resumed
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_failed_write_leaves_no_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "results.json"
    target.write_text('{"old": true}\n')

    def broken_dump(data: object, f: object, **kwargs: object) -> None:
        f.write('{"half": ')  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep.json, "dump", broken_dump)
    with pytest.raises(KeyboardInterrupt):
        sweep.write_json_atomic(target, {"new": True})
    assert target.read_text() == '{"old": true}\n'
    assert list(tmp_path.iterdir()) == [target]


# ------------------------------------------------------------------------------------------
# the stored results
# ------------------------------------------------------------------------------------------
def test_reader_refuses_missing_and_stale_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = ROOT / "rope_lib" / "data" / "experiment_does_not_exist.json"
    monkeypatch.setattr(ex, "_output_path", lambda cfg: fake)
    with pytest.raises(
        FileNotFoundError, match=r"python -m rope_lib.experiment_cli --config smoke"
    ):
        ex.experiment_results("smoke")
    with pytest.raises(FileNotFoundError, match=r"make experiment"):
        ex.experiment_results("full")
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"key": "0" * 64, "runs": []}))
    rel = Path(os.path.relpath(stale, ROOT))
    monkeypatch.setattr(ex, "_output_path", lambda cfg: ROOT / rel)
    with pytest.raises(
        ValueError, match=r"stale.*python -m rope_lib.experiment_cli --config smoke"
    ):
        ex.experiment_results("smoke")
    stale.write_text('{"key": "abc", "runs": [')  # cut short
    with pytest.raises(ValueError, match=r"not a results file.*--config smoke"):
        ex.experiment_results("smoke")


def _cells(blob: dict) -> dict[tuple, np.ndarray]:
    """Accuracy per (L, d, base) cell: an array (seeds, bins)."""
    cells: dict[tuple, list] = {}
    for run in blob["runs"]:
        cells.setdefault((run["context_length"], run["d"], run["base"]), []).append(run["accuracy"])
    return {k: np.array(v) for k, v in cells.items()}


def _within_seed_noise(new: np.ndarray, stored: np.ndarray, eval_per_bin: int) -> bool:
    """Do two sets of seeds agree, bin by bin, within the stored spread across seeds?

    Rerun elsewhere, float32 round-off can send training down another path, like a change of
    seed.  So the allowed difference of the seed means in a bin is four standard errors of a
    difference of two means of n seeds, with the standard deviation across seeds pooled over
    the cell's bins, plus the resolution of one bin (one example in ``eval_per_bin``).
    """
    n = stored.shape[0]
    sd = math.sqrt(float(np.mean(np.var(stored, axis=0, ddof=1))))
    tol = 4 * sd * math.sqrt(2 / n) + 1 / eval_per_bin
    return bool(np.all(np.abs(new.mean(axis=0) - stored.mean(axis=0)) <= tol))


@pytest.mark.slow
def test_smoke_config_reproduces_the_stored_numbers_after_a_kill(tmp_path: Path) -> None:
    """Run the smoke sweep from the command line, kill it after two runs, resume it, and
    compare with rope_lib/data/experiment_smoke.json."""
    stored = ex.experiment_results("smoke")  # refuses a stale file
    cfg = ex.experiment_config("smoke")
    out = tmp_path / "smoke.json"
    cmd = [
        sys.executable,
        "-m",
        "rope_lib.experiment_cli",
        "--config",
        "smoke",
        "--build-dir",
        str(tmp_path / "build"),
        "--output",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(list((tmp_path / "build").rglob("*.json"))) < 2:
        assert proc.poll() is None, "the smoke sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    files = list((tmp_path / "build").rglob("*.json"))
    assert 2 <= len(files) < len(cfg.runs())
    for f in files:
        json.loads(f.read_text())  # every file that exists is whole
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    new = json.loads(out.read_text())
    assert new["key"] == stored["key"]
    old_cells, new_cells = _cells(stored), _cells(new)
    assert old_cells.keys() == new_cells.keys()
    for cell, acc in old_cells.items():
        assert _within_seed_noise(new_cells[cell], acc, cfg.eval_per_bin), cell
    # the tolerance can fail: the cells of neighbouring bases are told apart
    cells = sorted(old_cells)
    for a, b in zip(cells, cells[1:], strict=False):
        assert not _within_seed_noise(old_cells[b], old_cells[a], cfg.eval_per_bin), (a, b)


def test_stored_smoke_results_match_their_config() -> None:
    blob = ex.experiment_results("smoke")
    cfg = ex.experiment_config("smoke")
    assert blob["config"] == cfg.to_dict()
    assert [(r["context_length"], r["d"], r["base"], r["seed"]) for r in blob["runs"]] == (
        cfg.runs()
    )
    chance = 1 / cfg.n_values
    top = max(cfg.bases)
    best = np.mean([r["accuracy"] for r in blob["runs"] if r["base"] == top])
    assert best > 10 * chance  # the largest base learned the task
