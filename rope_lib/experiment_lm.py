r"""Experiment 2 of issue 13 (SKETCH, not yet part of the book): a tiny Llama on needle recall.

Status: a first sketch of the runner, written after experiment 1 (:mod:`rope_lib.experiment`)
was done; it trains and evaluates, but its configuration is not tuned, it has no tests and no
stored results, and nothing in the book reads it yet.

The task
--------
A sequence of ``L`` tokens: filler drawn from a fixed random bigram chain (so the filler has
structure a language model can learn, and its loss is meaningful), with ``n_pairs`` needles
inserted at random positions, each a key token followed by its value token.  The sequence
ends with a query marker and the key of one needle; the next token to predict is that needle's
value.  The distance is the number of positions from the needle's key to the query's key (3 to
``L - 1``).

The model
---------
``transformers.LlamaForCausalLM`` from a tiny ``LlamaConfig`` (no home-made transformer), with
``rope_parameters={"rope_type": "default", "rope_theta": base}``.  Training: AdamW on the usual
next-token loss over the whole sequence, fixed seeds and threads.  Evaluation, on a fixed
held-out set: retrieval accuracy by distance bin (argmax at the query position equals the
value) and the mean next-token loss on filler positions (the "perplexity looks fine" half of
Men et al.'s superficial long context).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validate import check_base, check_positive_int, check_seed

__all__: list[str] = []  # a sketch: nothing exported yet


@dataclass(frozen=True)
class LMConfig:
    """Settings of one sweep of experiment 2 (sketch; see the module docstring)."""

    name: str = "lm_sketch"
    context_length: int = 256
    bases: tuple[float, ...] = (100.0, 2168.0, 1e5)  # below, at, above min_base(256, 32)
    seeds: tuple[int, ...] = (0, 1, 2)
    n_filler: int = 64
    n_keys: int = 64
    n_values: int = 64
    n_pairs: int = 8
    hidden_size: int = 64
    n_layers: int = 2
    n_heads: int = 2  # head_dim = hidden_size / n_heads = 32
    steps: int = 1500
    batch_size: int = 16
    lr: float = 3e-3
    n_bins: int = 8
    eval_per_bin: int = 64
    threads: int = 1

    @property
    def vocab_size(self) -> int:
        return self.n_filler + self.n_keys + self.n_values + 1  # + the query marker


def _tokens(cfg: LMConfig) -> dict[str, int]:
    return {
        "key0": cfg.n_filler,
        "value0": cfg.n_filler + cfg.n_keys,
        "query": cfg.n_filler + cfg.n_keys + cfg.n_values,
    }


def _bigram(cfg: LMConfig, seed: int) -> Any:
    return _stream(cfg.n_filler, seed)


@functools.lru_cache(maxsize=4)
def _stream(n_filler: int, seed: int, length: int = 1 << 20) -> Any:
    """A long filler stream from a fixed random bigram chain; sequences are windows of it.

    The chain's rows are softmax(3 z) of Gaussian z, so each token has a few likely
    successors.  The stream is generated once per call (sequential, in numpy).
    """
    import torch

    rng = np.random.default_rng(seed)
    probs = np.exp(3.0 * rng.standard_normal((n_filler, n_filler)))
    cum = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
    u = rng.random(length)
    stream = np.empty(length, dtype=np.int64)
    stream[0] = 0
    for t in range(1, length):
        stream[t] = min(int(np.searchsorted(cum[stream[t - 1]], u[t])), n_filler - 1)
    return torch.from_numpy(stream)


def _sample(cfg: LMConfig, gen: Any, n: int, chain: Any, deltas: Any = None) -> dict[str, Any]:
    """``n`` sequences of ``context_length`` tokens: filler, needles, query marker and key."""
    import torch

    length = cfg.context_length
    tok = _tokens(cfg)
    body = length - 2  # the last two positions hold the query marker and the query key
    start = torch.randint(len(chain) - length, (n,), generator=gen)
    seq = chain[start[:, None] + torch.arange(length)].clone()
    is_filler = torch.ones(n, length, dtype=torch.bool)
    rows = torch.arange(n)
    # needle slots: non-overlapping positions p (key at p, value at p + 1), p + 1 < body
    slots = torch.rand(n, (body - 1) // 2, generator=gen).argsort(dim=1)[:, : cfg.n_pairs] * 2
    keys = torch.rand(n, cfg.n_keys, generator=gen).argsort(dim=1)[:, : cfg.n_pairs]
    values = torch.randint(cfg.n_values, (n, cfg.n_pairs), generator=gen)
    which = torch.randint(cfg.n_pairs, (n,), generator=gen)
    if deltas is not None:  # place the queried needle at the requested distance
        slots[rows, which] = (length - 1 - deltas).clamp(0, body - 2)
        # drop other needles that would overlap it
        clash = (slots - slots[rows, which][:, None]).abs() < 2
        clash[rows, which] = False
        slots = torch.where(clash, slots[rows, which][:, None], slots)
    for j in range(cfg.n_pairs):
        p = slots[:, j]
        seq[rows, p] = tok["key0"] + keys[:, j]
        seq[rows, p + 1] = tok["value0"] + values[:, j]
        is_filler[rows, p] = False
        is_filler[rows, p + 1] = False
    p_query = slots[rows, which]
    seq[rows, p_query] = tok["key0"] + keys[rows, which]
    seq[rows, p_query + 1] = tok["value0"] + values[rows, which]
    seq[:, length - 2] = tok["query"]
    seq[:, length - 1] = tok["key0"] + keys[rows, which]
    is_filler[:, length - 2 :] = False
    return {
        "input_ids": seq,
        "answer": tok["value0"] + values[rows, which],
        "delta": (length - 1) - p_query,
        "is_filler": is_filler,
    }


def build_model(cfg: LMConfig, base: float, seed: int) -> Any:
    """A tiny ``LlamaForCausalLM`` with RoPE base ``base`` (weights from ``seed``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    base = check_base(base)
    seed = check_seed(seed, maximum=2**62)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=4 * cfg.hidden_size,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        max_position_embeddings=cfg.context_length,
        rope_parameters={"rope_type": "default", "rope_theta": base},
        bos_token_id=None,
        eos_token_id=None,
        tie_word_embeddings=True,
    )
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config)


def train_lm(cfg: LMConfig, base: float, seed: int = 0) -> tuple[Any, list[float], float]:
    """Train one model; return it, the mean loss per tenth of the steps and the CPU seconds."""
    import torch

    steps = check_positive_int(cfg.steps, "steps")
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        c0 = time.process_time()
        model = build_model(cfg, base, seed)
        chain = _bigram(cfg, 12345)  # the language is the same for every run
        gen = torch.Generator().manual_seed(2 * seed + 1)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
        losses = []
        model.train()
        for step in range(steps):
            for group in opt.param_groups:
                group["lr"] = cfg.lr * 0.5 * (1 + math.cos(math.pi * step / steps))
            batch = _sample(cfg, gen, cfg.batch_size, chain)
            logits = model(input_ids=batch["input_ids"]).logits
            # next-token loss on the sequence, plus the answer after the query key (weighted
            # as much as the whole sequence: it is the only retrieval target)
            lm_loss = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), batch["input_ids"][:, 1:].reshape(-1)
            )
            loss = lm_loss + torch.nn.functional.cross_entropy(logits[:, -1], batch["answer"])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        parts = np.array_split(np.array(losses), min(10, steps))
        return model, [float(p.mean()) for p in parts], time.process_time() - c0
    finally:
        torch.set_num_threads(threads)


def evaluate_lm(cfg: LMConfig, model: Any) -> dict[str, Any]:
    """Retrieval accuracy by distance bin and the filler loss, on a fixed held-out set."""
    import torch

    from .experiment import _distance_bins

    chain = _bigram(cfg, 12345)
    gen = torch.Generator().manual_seed(1_000_003 + cfg.context_length)
    # the queried needle's key sits at least 3 positions before the query key (its value and
    # the query marker come between) and at most L - 1: bins over [3, L - 1]
    edges = 2 + _distance_bins(cfg.context_length - 3, cfg.n_bins)
    deltas = torch.cat(
        [
            torch.randint(int(lo), int(hi), (cfg.eval_per_bin,), generator=gen)
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )
    batch = _sample(cfg, gen, len(deltas), chain, deltas=deltas)
    assert torch.equal(batch["delta"], deltas)
    model.eval()
    correct, filler = [], []
    with torch.no_grad():
        for start in range(0, len(deltas), 32):
            sl = slice(start, start + 32)
            logits = model(input_ids=batch["input_ids"][sl]).logits
            correct.append((logits[:, -1].argmax(dim=1) == batch["answer"][sl]).double())
            ce = torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]),
                batch["input_ids"][sl, 1:].reshape(-1),
                reduction="none",
            ).reshape(logits.shape[0], -1)
            mask = batch["is_filler"][sl, 1:] & batch["is_filler"][sl, :-1]
            filler.append(ce[mask].double())
    acc = torch.cat(correct).numpy()
    bins = np.repeat(np.arange(len(edges) - 1), cfg.eval_per_bin)
    return {
        "bin_edges": [int(e) for e in edges],
        "accuracy": [float(acc[bins == j].mean()) for j in range(len(edges) - 1)],
        "filler_loss": float(torch.cat(filler).mean()),
    }
