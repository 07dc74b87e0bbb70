"""Experiment 2's model (rope_lib.experiments.needle_model): the paired design, determinism, the
smoke run's structure, the evaluation's counts against hand-built rules, and argument checks."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest
import torch

import rope_lib
from rope_lib.experiments import needle_model as nm
from rope_lib.experiments import needle_task as nt
from rope_lib.experiments import report as rp

SMOKE = nm.NEEDLE_CONFIGS["smoke"]
TIMING = {"train_seconds", "train_cpu_seconds", "eval_seconds", "wall_seconds", "cpu_seconds"}


@pytest.fixture(scope="module")
def smoke_run() -> dict[str, Any]:
    return nm.run_needle(SMOKE, SMOKE.bases[0], SMOKE.seeds[0])


# ------------------------------------------------------------------ pairing and determinism


def test_initial_weights_depend_on_the_seed_not_the_base() -> None:
    a = nm.build_model(SMOKE, 10.0, 3).state_dict()
    b = nm.build_model(SMOKE, 1e4, 3).state_dict()
    c = nm.build_model(SMOKE, 10.0, 4).state_dict()
    weights = [k for k in a if "inv_freq" not in k]
    assert weights and all(torch.equal(a[k], b[k]) for k in weights)
    assert not all(torch.equal(a[k], c[k]) for k in weights)


def test_the_model_rotates_with_the_books_frequencies() -> None:
    """Hugging Face's inv_freq of the built Llama is rope_lib.theta(head_dim, base)."""
    model = nm.build_model(SMOKE, 123.0, 0)
    inv = model.model.rotary_emb.inv_freq.double().numpy()
    assert np.allclose(inv, rope_lib.theta(SMOKE.head_dim, 123.0), rtol=1e-6)


def test_global_torch_rng_is_left_alone() -> None:
    torch.manual_seed(7)
    before = torch.rand(3)
    torch.manual_seed(7)
    nm.build_model(SMOKE, 10.0, 0)
    assert torch.equal(torch.rand(3), before)


def test_run_is_deterministic(smoke_run: dict[str, Any]) -> None:
    again = nm.run_needle(SMOKE, SMOKE.bases[0], SMOKE.seeds[0])
    strip = lambda r: {k: v for k, v in r.items() if k not in TIMING}  # noqa: E731
    assert strip(again) == strip(smoke_run)


# ------------------------------------------------------------------ the smoke run


def test_smoke_run_structure(smoke_run: dict[str, Any]) -> None:
    r = smoke_run
    json.dumps(r)  # JSON-ready
    nb = len(SMOKE.bin_edges) - 1
    assert r["bin_edges"] == list(SMOKE.bin_edges)
    assert r["total"] == [SMOKE.eval_per_bin] * nb
    # every count the report reads, the optional ones included (the smoke config shifts by 8)
    for key in (*rp.NEEDLE_COUNTS, *rp.NEEDLE_OPTIONAL_COUNTS):
        assert len(r[key]) == nb and all(
            0 <= c <= n for c, n in zip(r[key], r["total"], strict=True)
        )
    assert r["base"] == SMOKE.bases[0] and r["seed"] == SMOKE.seeds[0]
    assert len(r["filler_loss_curve"]) == len(r["value_loss_curve"]) == 10
    assert r["filler_loss"] > 0 and r["filler_tokens"] > 0
    assert r["filler_entropy"] == pytest.approx(
        nt.entropy_rate(nt.filler_chain(SMOKE.n_filler, SMOKE.filler_sharpness))
    )
    assert (
        r["recency_correct"][0] == r["total"][0]
    )  # distances 3 and 4: no needle fits after the target


# ------------------------------------------------------------------ the counts, by rule


class _Rule:
    """A stand-in model whose next-token logits follow a fixed rule on the tokens."""

    def __init__(self, task: nt.NeedleTask, rule: str) -> None:
        self.task, self.rule = task, rule

    def __call__(self, input_ids: torch.Tensor) -> Any:
        ids = input_ids.numpy()
        n, length = ids.shape
        logits = np.zeros((n, length, self.task.vocab_size), dtype=np.float32)
        is_key = (ids >= self.task.key_offset) & (ids < self.task.value_offset)
        for row in range(n):
            for i in range(length):
                earlier = np.flatnonzero(is_key[row, :i])
                if self.rule == "match":  # the token after the latest earlier copy of this key
                    hits = earlier[ids[row, earlier] == ids[row, i]]
                    if len(hits):
                        logits[row, i, ids[row, hits[-1] + 1]] = 1
                elif self.rule == "latest":  # the value after the body's last key
                    body = earlier[earlier < self.task.body_length]
                    if len(body):
                        logits[row, i, ids[row, body[-1] + 1]] = 1
        return type("Out", (), {"logits": torch.from_numpy(logits)})()


def test_counts_of_a_key_matching_rule() -> None:
    r = nm.evaluate_needle(_Rule(SMOKE.task, "match"), SMOKE, 0)
    assert r["main_correct"] == r["total"] == r["repeat_correct"]
    assert r["absent_target"] == r["absent_needle"] == [0] * len(r["total"])
    assert r["repeat_other"] == [0] * len(r["total"])
    assert r["main_latest"] == r["recency_correct"]


def test_counts_of_a_recency_rule() -> None:
    r = nm.evaluate_needle(_Rule(SMOKE.task, "latest"), SMOKE, 0)
    assert r["main_correct"] == r["recency_correct"] == r["absent_target"]
    assert r["main_latest"] == r["absent_latest"] == r["absent_needle"] == r["total"]


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"name": "not an identifier"}, "name"),
        ({"bases": (1.0,)}, "bases"),
        ({"bases": ()}, "bases"),
        ({"seeds": (-1,)}, "seeds"),
        ({"head_dim": 15}, "head_dim"),
        ({"warmup": 30}, "warmup"),
        ({"lr": 0.0}, "lr"),
        ({"train_distances": "linear"}, "train_distances"),
        ({"bin_edges": (3, 3)}, "edges"),
        ({"bin_edges": (3, 40)}, "edges"),
        ({"n_needles": 1}, "n_needles"),
        ({"context_length": 12}, "context_length"),
        ({"eval_per_bin": 0}, "eval_per_bin"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"lr_schedule": "linear"}, "lr_schedule"),
        ({"warmup": 5}, "warmup"),  # a constant schedule has no warm-up
        ({"filler_weight": -1.0}, "filler_weight"),
        ({"curriculum_steps": 30}, "curriculum_steps"),  # no steps left at context_length
        ({"curriculum_steps": -1}, "curriculum_steps"),
        ({"curriculum_length": 20}, "curriculum_length"),  # 3 * 4 + 2 * 4 + 1 = 21 needed
        ({"curriculum_length": 33}, "curriculum_length"),  # longer than context_length
    ],
)
def test_bad_config_fields_are_refused_by_name(change: dict, name: str) -> None:
    with pytest.raises((ValueError, TypeError), match=name):
        dataclasses.replace(SMOKE, **change)


@pytest.mark.parametrize("func", [nm.run_needle, nm.train_needle, nm.build_model])
def test_bad_run_arguments_are_refused_by_name(func: Any) -> None:
    with pytest.raises(ValueError, match="config"):
        func("bogus", 10.0, 0)
    with pytest.raises(TypeError, match="config"):
        func(object(), 10.0, 0)
    with pytest.raises(ValueError, match="base"):
        func(SMOKE, 1.0, 0)
    with pytest.raises(TypeError, match="seed"):
        func(SMOKE, 10.0, 0.5)
    with pytest.raises(ValueError, match="seed"):
        func(SMOKE, 10.0, -1)


def test_named_configs() -> None:
    assert {"smoke", "full"} <= set(nm.NEEDLE_CONFIGS)
    for name, cfg in nm.NEEDLE_CONFIGS.items():
        assert cfg.name == name and len(cfg.seeds) >= (5 if name == "full" else 1)


# ------------------------------------------------------------------ schedule and curriculum


def test_constant_and_cosine_learning_rates() -> None:
    """Closed forms: constant lr; warm-up (step + 1) / warmup, then 1/2 (1 + cos(pi s / S))."""
    assert SMOKE.lr_schedule == "constant"
    assert [nm._lr(SMOKE, k) for k in range(SMOKE.steps)] == [SMOKE.lr] * SMOKE.steps
    cos = dataclasses.replace(SMOKE, lr_schedule="cosine", warmup=4, lr=2e-3)
    assert nm._lr(cos, 0) == pytest.approx(2e-3 / 4)
    assert nm._lr(cos, 3) == pytest.approx(2e-3)
    assert nm._lr(cos, 4) == pytest.approx(2e-3)  # the decay starts at its peak
    assert nm._lr(cos, 4 + 13) == pytest.approx(1e-3)  # half-way through the 26 decay steps
    assert nm._lr(cos, 29) == pytest.approx(1e-3 * (1 + np.cos(np.pi * 25 / 26)))


def test_the_curriculum_trains_its_first_steps_at_the_shorter_length(monkeypatch: Any) -> None:
    lengths: list[int] = []
    real = nt.sample_batch

    def spy(task: nt.NeedleTask, rng: Any, distances: Any) -> dict:
        batch = real(task, rng, distances)
        lengths.append(batch["input_ids"].shape[1])
        return batch

    monkeypatch.setattr(nt, "sample_batch", spy)
    nm.train_needle(SMOKE, 10.0, 0)
    k = SMOKE.curriculum_steps
    assert 0 < k < SMOKE.steps and SMOKE.curriculum_length < SMOKE.context_length
    assert lengths == [SMOKE.curriculum_length] * k + [SMOKE.context_length] * (SMOKE.steps - k)


# ------------------------------------------------------------------ translation and primacy


def test_the_translation_control_passes_a_relative_rule_and_catches_an_absolute_one() -> None:
    """Key matching reads no position: moving the sequence leaves it right.  The recency rule
    of _Rule reads the body by absolute index (positions below body_length), so once the
    sequence moves by SMOKE.shift it looks at the wrong tokens somewhere."""
    assert SMOKE.shift > 0
    match = nm.evaluate_needle(_Rule(SMOKE.task, "match"), SMOKE, 0)
    assert match["shifted_correct"] == match["main_correct"] == match["total"]
    latest = nm.evaluate_needle(_Rule(SMOKE.task, "latest"), SMOKE, 0)
    assert latest["main_correct"] == latest["recency_correct"]
    assert latest["shifted_correct"] != latest["main_correct"]
    unshifted = nm.evaluate_needle(
        _Rule(SMOKE.task, "match"), dataclasses.replace(SMOKE, shift=0), 0
    )
    assert "shifted_correct" not in unshifted
    same = {k: v for k, v in match.items() if k not in TIMING | {"shifted_correct"}}
    assert {k: v for k, v in unshifted.items() if k not in TIMING} == same  # same held-out set


def test_primacy_counts_match_the_needle_positions() -> None:
    r = nm.evaluate_needle(_Rule(SMOKE.task, "match"), SMOKE, 0)
    rng = np.random.default_rng([0, nm._EVAL_STREAM])
    edges = np.asarray(SMOKE.bin_edges)
    dist = np.concatenate(
        [
            rng.integers(lo, hi, size=SMOKE.eval_per_bin)
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )
    batch = nt.sample_evaluation(SMOKE.task, rng, dist)
    earliest = batch["needle_pos"].min(axis=1) == batch["needle_pos"][:, 0]
    bins = nt.bin_index(dist, edges)
    assert r["primacy_correct"] == [int(earliest[bins == j].sum()) for j in range(len(edges) - 1)]
    assert r["primacy_correct"][0] < r["total"][0]  # near the query another needle comes first
