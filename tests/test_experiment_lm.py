"""Tests of rope_lib.experiment_lm: the tiny-Llama needle experiment of issue 13 (experiment 2).

Independent routes: the sequences are checked token by token against the task's definition;
the filler's bigram frequencies against the chain matrix; the entropy rate against a power
iteration written here; the summary against means and standard deviations of the raw JSON
computed with :mod:`statistics`, a horizon of B_m found by a plain loop, and min_base checked by
the sign of B_m on either side of it; resuming against an uninterrupted sweep; the stored smoke
results against a fresh run, with a tolerance taken from their own spread across seeds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rope_lib import experiment_lm as ex
from rope_lib import experiment_lm_report as rep

ROOT = Path(__file__).resolve().parents[1]

#: Four runs of a few steps each: for the resume, file and evaluation tests.
TINY = ex.LMConfig(
    name="tiny",
    context_length=24,
    bases=(10.0, 1e4),
    seeds=(0, 1),
    n_filler=8,
    n_keys=8,
    n_values=8,
    n_pairs=3,
    n_queries=2,
    head_dim=8,
    n_heads=2,
    n_layers=1,
    steps=6,
    batch_size=4,
    warmup=2,
    n_bins=3,
    eval_per_bin=4,
)


def _batch(cfg: ex.LMConfig, n: int, length: int, seed: int = 0) -> dict:
    import torch

    cum = torch.from_numpy(np.cumsum(ex._chain(cfg.n_filler, cfg.filler_sharpness), axis=1))
    gen = ex._generator(seed)
    deltas = ex._train_deltas(gen, n, length)
    return ex._sample(cfg, cum, gen, length, deltas)


# ------------------------------------------------------------------------------------------
# the task
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["smoke", "full"])
def test_sequences_follow_the_task_definition(name: str) -> None:
    cfg = ex.lm_config(name)
    length = cfg.context_length
    batch = _batch(cfg, 300, length)
    ids = batch["input_ids"].numpy()
    key0, value0, marker = cfg.n_filler, cfg.n_filler + cfg.n_keys, cfg.vocab_size - 1
    body = length - 3 * cfg.n_queries
    for row, delta, query_pos, answer, ft, vt in zip(
        ids,
        batch["delta"].numpy(),
        batch["query_pos"].numpy(),
        batch["answer"].numpy(),
        batch["filler_target"].numpy(),
        batch["value_target"].numpy(),
        strict=True,
    ):
        kinds = [
            "f" if t < key0 else "k" if t < value0 else "v" if t < marker else "Q" for t in row
        ]
        # the body: filler with n_pairs needles "k v", distinct keys
        key_pos = [p for p in range(body) if kinds[p] == "k"]
        assert len(key_pos) == cfg.n_pairs
        assert all(kinds[p + 1] == "v" for p in key_pos)
        assert kinds[:body].count("v") == cfg.n_pairs
        needle = {int(row[p]): int(row[p + 1]) for p in key_pos}
        assert len(needle) == cfg.n_pairs
        # the tail: n_queries triples "Q k v" of distinct needles, with their values
        tail = row[body:].reshape(cfg.n_queries, 3)
        assert all(t[0] == marker for t in tail)
        assert len({int(t[1]) for t in tail}) == cfg.n_queries
        assert all(needle[int(t[1])] == int(t[2]) for t in tail)
        # the measured query (the last one, or the first for distances below 3 n_q) asks for
        # the needle whose key is delta positions before its own key
        assert 3 <= delta <= length - 2
        slot = cfg.n_queries - 1 if delta >= 3 * cfg.n_queries else 0
        t = body + 3 * slot + 1
        assert query_pos == t
        p = t - delta
        assert row[p] == row[t] and row[p + 1] == row[t + 1] == answer
        # targets: filler after filler, and the query values
        expected_ft = [t > 0 and kinds[t] == kinds[t - 1] == "f" for t in range(length)]
        assert ft.tolist() == expected_ft
        assert np.flatnonzero(vt).tolist() == [body + 3 * j + 2 for j in range(cfg.n_queries)]


def test_training_distances_cover_the_whole_range() -> None:
    cfg = ex.lm_config("full")
    deltas = _batch(cfg, 4000, cfg.context_length)["delta"].numpy()
    assert deltas.min() == 3 and deltas.max() == cfg.context_length - 2


def test_filler_follows_the_bigram_chain() -> None:
    """Bigram frequencies of the filler against the chain matrix (an independent count)."""
    import torch

    cfg = ex.lm_config("full")
    p = ex._chain(cfg.n_filler, cfg.filler_sharpness)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)
    cum = torch.from_numpy(np.cumsum(p, axis=1))
    seq = ex._filler(cum, ex._generator(5), 400, 256).numpy()
    counts = np.zeros_like(p)
    np.add.at(counts, (seq[:, :-1].ravel(), seq[:, 1:].ravel()), 1)
    rows = counts.sum(axis=1, keepdims=True)
    freq = counts / rows
    # binomial standard error of each frequency; 5 of them allows for the 1024 cells
    se = np.sqrt(p * (1 - p) / rows)
    assert np.all(np.abs(freq - p) <= 5 * se + 1e-3)


def test_entropy_rate_matches_a_power_iteration() -> None:
    p = ex._chain(32, 3.0)
    pi = np.full(32, 1 / 32)
    for _ in range(2000):
        pi = pi @ p
    h = -sum(pi[a] * sum(p[a, b] * math.log(p[a, b]) for b in range(32)) for a in range(32))
    assert ex._entropy_rate(p) == pytest.approx(h, rel=1e-9)
    assert 0 < h < math.log(32)


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------
def test_unknown_config_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"name must be one of \('smoke', 'full'\)"):
        ex.lm_config("medium")
    with pytest.raises(ValueError, match=r"config must be one of \('smoke', 'full'\)"):
        ex.run_lm_experiment("medium", build_dir=tmp_path, output=tmp_path / "x.json")
    with pytest.raises(ValueError, match=r"config must be one of"):
        ex.lm_results("medium")
    with pytest.raises(TypeError, match=r"config must be one of .* or an LMConfig"):
        ex.train_lm(10.0, config=3)
    with pytest.raises(SystemExit) as exc:
        ex.main(["--config", "medium"])
    assert exc.value.code == 2
    proc = subprocess.run(
        [sys.executable, "-m", "rope_lib.experiment_cli", "--experiment", "lm"]
        + ["--config", "medium"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "--config" in proc.stderr and "'medium'" in proc.stderr


@pytest.mark.parametrize("base", [1.0, 0.5, -2.0, float("nan"), float("inf")])
def test_base_at_most_one_is_refused_by_name(base: float) -> None:
    with pytest.raises(ValueError, match=r"\bbase must be a finite real number > 1"):
        ex.train_lm(base, config=TINY)
    with pytest.raises(ValueError, match=r"bases entries must be a finite real number > 1"):
        dataclasses.replace(TINY, bases=(10.0, base))


@pytest.mark.parametrize("d", [3, 15, 0, -4])
def test_odd_head_dimension_is_refused_by_name(d: int) -> None:
    with pytest.raises(ValueError, match=r"head_dim must be an even integer >= 2"):
        dataclasses.replace(TINY, head_dim=d)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "two words", r"name must be an identifier"),
        ("n_pairs", 9, r"n_pairs must be .*<= 8.*distinct keys"),
        ("n_queries", 4, r"n_pairs must be an integer >= 4"),
        ("context_length", 12, r"context_length must be at least 13"),
        ("warmup", 6, r"warmup must be smaller than steps = 6"),
        ("seeds", (), r"seeds must not be empty"),
        ("bases", "10", r"bases must be a sequence"),
        ("lr", 0.0, r"\blr must be"),
        ("batch_size", 10**5, r"batch_size must be"),
    ],
)
def test_other_bad_settings_are_refused_by_name(field: str, value: object, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        dataclasses.replace(TINY, **{field: value})


def test_context_longer_than_trained_is_refused_at_evaluation() -> None:
    model = ex.train_lm(10.0, config=TINY)
    with pytest.raises(
        ValueError, match=r"context_length must be an integer <= 24.*trained with context_length"
    ):
        ex.evaluate_lm(model, context_length=25)
    with pytest.raises(ValueError, match=r"context_length must be at least 13"):
        ex.evaluate_lm(model, context_length=12)
    with pytest.raises(TypeError, match=r"model must be an LMModel"):
        ex.evaluate_lm(model.model)
    shorter = ex.evaluate_lm(model, context_length=16)  # shorter is fine
    assert shorter["context_length"] == 16 and shorter["bin_edges"][-1] == 15


# ------------------------------------------------------------------------------------------
# the model, its training and its evaluation
# ------------------------------------------------------------------------------------------
def test_the_model_is_a_hugging_face_llama_with_the_requested_rope() -> None:
    from transformers import LlamaForCausalLM

    model = ex.train_lm(123.0, seed=1, config=TINY)
    assert isinstance(model.model, LlamaForCausalLM)
    hf = model.model.config
    assert hf.rope_parameters["rope_theta"] == 123.0
    assert hf.head_dim == TINY.head_dim and hf.num_attention_heads == TINY.n_heads
    assert hf.hidden_size == TINY.head_dim * TINY.n_heads
    assert hf.vocab_size == TINY.n_filler + TINY.n_keys + TINY.n_values + 1
    # the rotary frequencies Hugging Face uses are b^(-2i/d)
    inv_freq = model.model.model.rotary_emb.inv_freq.double().numpy()
    np.testing.assert_allclose(
        inv_freq, [123.0 ** (-2 * i / TINY.head_dim) for i in range(TINY.head_dim // 2)], rtol=1e-6
    )


def test_training_is_deterministic_and_seeded() -> None:
    a = ex.train_lm(100.0, seed=3, config=TINY)
    b = ex.train_lm(100.0, seed=3, config=TINY)
    c = ex.train_lm(100.0, seed=4, config=TINY)
    assert a.loss_curve == b.loss_curve
    assert ex.evaluate_lm(a) == ex.evaluate_lm(b)
    assert a.loss_curve != c.loss_curve


def test_held_out_set_is_balanced_over_distance_bins() -> None:
    """eval_per_bin examples in every bin: the accuracies are multiples of 1/eval_per_bin."""
    result = ex.evaluate_lm(ex.train_lm(100.0, config=TINY))
    edges = result["bin_edges"]
    assert edges[0] == 3 and edges[-1] == TINY.context_length - 1
    assert np.all(np.diff(edges) > 0)
    for acc in result["accuracy"]:
        assert acc * TINY.eval_per_bin == pytest.approx(round(acc * TINY.eval_per_bin))
    assert len(result["answer_loss"]) == len(edges) - 1
    assert result["filler_loss"] > 0 and result["filler_tokens"] > 0


# ------------------------------------------------------------------------------------------
# resume and atomic files
# ------------------------------------------------------------------------------------------
def _strip_times(blob: dict) -> list[dict]:
    timing = ("train_seconds", "train_cpu_seconds")
    return [{k: v for k, v in run.items() if k not in timing} for run in blob["runs"]]


def test_resume_after_an_interruption_gives_the_same_results(tmp_path: Path) -> None:
    whole = ex.run_lm_experiment(
        TINY, build_dir=tmp_path / "a", output=tmp_path / "a.json", progress=False
    )
    out = tmp_path / "b.json"
    stopped = ex.run_lm_experiment(
        TINY, build_dir=tmp_path / "b", output=out, progress=False, max_new_runs=2
    )
    assert stopped is None and not out.exists()
    run_files = sorted((tmp_path / "b").rglob("*.json"))
    assert len(run_files) == 2
    for f in run_files:
        assert json.loads(f.read_text())["key"] == TINY.key()  # whole files
    before = {p.name: p.read_text() for p in run_files}
    # the plan (what make experiment's progress bar reads) sees the two finished runs
    plan = ex.lm_plan(TINY, tmp_path / "b")
    assert plan.key == TINY.key() and list(plan.runs) == TINY.runs()
    assert len(plan.finished()) == 2
    tokens = TINY.context_length * TINY.batch_size * TINY.steps / 1e6
    assert plan.cost(TINY.runs()[0]) == pytest.approx(tokens)
    done, total = plan.estimated_seconds()
    assert done == pytest.approx(total * 2 / len(TINY.runs()))
    resumed = ex.run_lm_experiment(TINY, build_dir=tmp_path / "b", output=out, progress=False)
    assert {p.name: p.read_text() for p in run_files} == before  # loaded, not retrained
    assert _strip_times(resumed) == _strip_times(whole)
    assert json.loads(out.read_text()) == resumed
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob(".*.tmp"))


def test_reader_refuses_missing_and_stale_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ex, "_output_path", lambda cfg: tmp_path / f"lm_{cfg.name}.json")
    hint = r"python -m rope_lib.experiment_cli --experiment lm --config smoke"
    with pytest.raises(FileNotFoundError, match=hint):
        ex.lm_results("smoke")
    (tmp_path / "lm_smoke.json").write_text(json.dumps({"key": "0" * 64, "runs": []}))
    with pytest.raises(ValueError, match="stale.*" + hint):
        ex.lm_results("smoke")
    (tmp_path / "lm_smoke.json").write_text('{"key": "abc", "runs": [')  # cut short
    with pytest.raises(ValueError, match="not a results file.*" + hint):
        ex.lm_results("smoke")


# ------------------------------------------------------------------------------------------
# the summary, recomputed from the raw JSON
# ------------------------------------------------------------------------------------------
def _b_m(m: int, d: int, base: float) -> float:
    return sum(math.cos(m * base ** (-2 * i / d)) for i in range(d // 2))


@pytest.mark.parametrize("name", ["smoke", "full"])
def test_summary_recomputed_from_the_raw_json(name: str) -> None:
    path = ROOT / "rope_lib" / "data" / f"experiment_lm_{name}.json"
    raw = json.loads(path.read_text())
    summary = rep.lm_summary(ex.lm_results(name))
    cfg = raw["config"]
    d, length = cfg["head_dim"], cfg["context_length"]
    bases = sorted({r["base"] for r in raw["runs"]})
    assert summary.bases.tolist() == bases
    assert summary.chance == 1 / cfg["n_values"]
    for k, base in enumerate(bases):
        runs = [r for r in raw["runs"] if r["base"] == base]
        n = len(runs)
        assert summary.n_seeds[k] == n == len(cfg["seeds"])
        for j in range(len(runs[0]["accuracy"])):
            values = [r["accuracy"][j] for r in runs]
            assert summary.accuracy_mean[k, j] == pytest.approx(statistics.fmean(values))
            assert summary.accuracy_se[k, j] == pytest.approx(
                statistics.stdev(values) / math.sqrt(n), abs=1e-15
            )
        losses = [r["filler_loss"] for r in runs]
        assert summary.filler_loss_mean[k] == pytest.approx(statistics.fmean(losses))
        assert summary.filler_loss_se[k] == pytest.approx(statistics.stdev(losses) / math.sqrt(n))
        # the horizon of B_m by a plain loop, and the quarter period by its formula
        m = 0
        while _b_m(m, d, base) >= 0:
            m += 1
        assert summary.horizon[k] == m
        assert summary.quarter_period[k] == pytest.approx(math.pi / 2 * base ** ((d - 2) / d))
    # min_base: B_m >= 0 for every m < L just above it, and not just below it
    mb = summary.min_base
    assert all(_b_m(m, d, mb * (1 + 1e-6)) >= 0 for m in range(length))
    assert any(_b_m(m, d, mb * (1 - 1e-3)) < 0 for m in range(length))
    assert summary.filler_entropy == raw["filler_entropy"]
    assert summary.last_query_from == 3 * cfg["n_queries"]
    edges = np.array(raw["runs"][0]["bin_edges"])
    np.testing.assert_allclose(summary.bin_centres, np.sqrt(edges[:-1] * (edges[1:] - 1)))


def test_summary_refuses_what_is_not_a_results_blob() -> None:
    with pytest.raises(TypeError, match=r"results must be a results dict"):
        rep.lm_summary([1, 2])
    with pytest.raises(ValueError, match=r"results must be .*'runs' is missing"):
        rep.lm_summary({"config": ex.lm_config("smoke").to_dict(), "filler_entropy": 1.0})
    with pytest.raises(ValueError, match=r"lacks 'filler_entropy'"):
        rep.lm_summary({"config": ex.lm_config("smoke").to_dict(), "runs": [{}]})


def test_plot_has_labelled_axes_a_chance_line_and_a_legend() -> None:
    summary = rep.lm_summary(ex.lm_results("full"))
    fig = rep.plot_lm_recall(summary)
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert ax.get_xscale() == "log"
    chance = [ln for ln in ax.get_lines() if ln.get_label().startswith("chance")]
    assert len(chance) == 1 and chance[0].get_ydata()[0] == pytest.approx(summary.chance)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for base in summary.bases:
        assert any(t.startswith(f"b = {base:g}:") for t in labels)
    with pytest.raises(TypeError, match=r"summary must be an LMSummary"):
        rep.plot_lm_recall({"bases": []})
    with pytest.raises(TypeError, match=r"ax must be None or a matplotlib Axes"):
        rep.plot_lm_recall(summary, ax="left")


# ------------------------------------------------------------------------------------------
# the stored results
# ------------------------------------------------------------------------------------------
def _cells(blob: dict) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Per base: accuracy (seeds, bins) and filler loss (seeds,)."""
    cells: dict[float, tuple[list, list]] = {}
    for run in blob["runs"]:
        acc, fil = cells.setdefault(run["base"], ([], []))
        acc.append(run["accuracy"])
        fil.append(run["filler_loss"])
    return {b: (np.array(a), np.array(f)) for b, (a, f) in cells.items()}


def _within_seed_noise(new: tuple, stored: tuple, eval_per_bin: int) -> bool:
    """Do two sets of seeds agree within the stored spread across seeds?

    Rerun on another machine, float32 round-off can send training down another path, like a
    change of seed.  So the allowed difference of the seed means is four standard errors of a
    difference of two means of n seeds, with the standard deviation across seeds pooled over
    the bins (accuracy), plus the resolution of one bin (one example in ``eval_per_bin``) for
    the accuracy and 0.002 nats for the filler loss.
    """
    (acc_new, fil_new), (acc_old, fil_old) = new, stored
    n = acc_old.shape[0]
    sd_acc = math.sqrt(float(np.mean(np.var(acc_old, axis=0, ddof=1))))
    tol_acc = 4 * sd_acc * math.sqrt(2 / n) + 1 / eval_per_bin
    tol_fil = 4 * float(np.std(fil_old, ddof=1)) * math.sqrt(2 / n) + 0.002
    return bool(
        np.all(np.abs(acc_new.mean(axis=0) - acc_old.mean(axis=0)) <= tol_acc)
        and abs(fil_new.mean() - fil_old.mean()) <= tol_fil
    )


@pytest.mark.slow
def test_smoke_config_reproduces_the_stored_numbers(tmp_path: Path) -> None:
    """Rerun the smoke sweep from the command line (interrupted once and resumed) and compare
    with rope_lib/data/experiment_lm_smoke.json."""
    stored = ex.lm_results("smoke")  # refuses a stale file
    cfg = ex.lm_config("smoke")
    out = tmp_path / "smoke.json"
    build = tmp_path / "build"
    assert (
        ex.run_lm_experiment("smoke", build_dir=build, output=out, progress=False, max_new_runs=2)
        is None
    )
    assert not out.exists()
    args = ["--config", "smoke", "--build-dir", str(build), "--output", str(out)]
    assert ex.main([*args, "--no-progress"]) == 0
    new = json.loads(out.read_text())
    assert new["key"] == stored["key"] and new["config"] == stored["config"]
    old_cells, new_cells = _cells(stored), _cells(new)
    assert old_cells.keys() == new_cells.keys()
    for base, cell in old_cells.items():
        assert _within_seed_noise(new_cells[base], cell, cfg.eval_per_bin), base
    # the tolerance can fail: a copy with one base's accuracies moved by 0.5, or its filler
    # loss by 0.1 nats, is refused.  (The smoke models retrieve at about chance, so their
    # accuracies are noisy: the tolerance is about 0.2 to 0.35 there, and 0.02 to 0.05 nats
    # on the filler loss, which is what the smoke comparison pins down best.)
    for base, (acc, fil) in old_cells.items():
        moved = np.where(acc >= 0.5, acc - 0.5, acc + 0.5)
        assert not _within_seed_noise((moved, fil), (acc, fil), cfg.eval_per_bin), base
        assert not _within_seed_noise((acc, fil + 0.1), (acc, fil), cfg.eval_per_bin), base


@pytest.mark.parametrize("name", ["smoke", "full"])
def test_stored_results_match_their_config(name: str) -> None:
    blob = ex.lm_results(name)
    cfg = ex.lm_config(name)
    assert blob["config"] == cfg.to_dict()
    assert [(r["base"], r["seed"]) for r in blob["runs"]] == cfg.runs()
    assert blob["min_base"] == ex.min_base(cfg.context_length, cfg.head_dim)
    assert all(r["context_length"] == cfg.context_length for r in blob["runs"])


def test_full_results_learned_the_task_with_the_largest_base() -> None:
    """The experiment says something only if the model learned the task: with the largest
    base, retrieval at the shortest distances is far above chance, and the filler loss is
    close to the chain's entropy rate."""
    blob = ex.lm_results("full")
    cfg = ex.lm_config("full")
    top = max(cfg.bases)
    runs = [r for r in blob["runs"] if r["base"] == top]
    near = np.mean([r["accuracy"][0] for r in runs])
    assert near > 0.5 and near > 5 / cfg.n_values
    for r in blob["runs"]:
        assert r["filler_loss"] < blob["filler_entropy"] + 0.05
