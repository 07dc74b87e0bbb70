r"""Experiment 1, the task: key-value recall over a span of positions (chapter 9).

A *context* holds :math:`N` tokens at distinct positions in :math:`[0, L)` (the *span*
:math:`L`); token :math:`j` carries a key id :math:`k_j` (one of ``n_keys``) and a value id
:math:`v_j` (one of ``n_values``), both uniform.  A query at position :math:`L` carries the key
id of one context token, the *target*, at distance :math:`\Delta = L - p_{\text{target}} \in
[1, L]`; no other token carries that key id, and the answer is the target's value id (chance
``1 / n_values``).

* **Dense** contexts (:math:`N = L`) fill every position: token :math:`j` sits at position
  :math:`j`, as in a real model's context of :math:`L` tokens.
* **Sparse** contexts (:math:`N < L`) hold the target at :math:`L - \Delta` and :math:`N - 1`
  distractors at distinct positions drawn uniformly from the other :math:`L - 1`.  The number
  of distractors is then the same for every span, so a longer span changes only which
  distances occur, not how many keys the query must beat (the search-difficulty control of
  chapter 9); the target is stored as token 0 (the layer has no notion of token order, only
  of positions).

Randomness and pairing
----------------------
Every random draw comes from a ``torch.Generator`` whose seed is derived (SHA-256,
:func:`derived_seed`) from the run's seed and from the parts of the setting the draw depends
on, and *never from the base*:

* ``"init"`` (seed): the frozen key embedding, then :math:`W_q` and :math:`W_k`;
* ``"data"`` (seed, span, tokens, distances): the training contexts;
* ``"eval"`` (seed, span, tokens): the held-out contexts.

So runs of one seed share their initial weights, training data and held-out set across bases
(a paired design: a difference between two bases is not a difference of draws), while two
seeds are independent replicates of everything, the held-out sample included.

Training distances and evaluation
---------------------------------
A training distance is drawn log-uniformly, :math:`\Delta = \lfloor e^u\rfloor` with :math:`u`
uniform on :math:`[0, \ln(L + 1))`, so :math:`P(\Delta = k) = \ln(1 + 1/k)/\ln(L + 1)`, or
uniformly on :math:`\{1, \dots, L\}`.  The held-out set has ``eval_per_bin`` contexts in each
logarithmic distance bin over :math:`[1, L]` (:func:`distance_bins`), the distance uniform
within the bin.  With ``eval_per_bin`` :math:`= n` the binomial standard error of one run's
accuracy :math:`p` in a bin is :math:`\sqrt{p(1-p)/n} \le 1/(2\sqrt n)`: at most 0.01 for
:math:`n \ge 2500`.

This module defines the sweeps (:class:`RecallConfig`, :data:`RECALL_CONFIGS`) and draws the
contexts; the layer, its training and its evaluation are in
:mod:`rope_lib.experiments.recall_model`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._validate import (
    _describe,
    check_base,
    check_choice,
    check_dim,
    check_positive_int,
    check_real,
    check_seed,
)

__all__ = [
    "RecallCell",
    "RecallConfig",
    "RECALL_CONFIGS",
    "Contexts",
    "recall_config",
    "half_decade",
    "derived_seed",
    "distance_bins",
    "sample_distances",
    "sample_contexts",
    "heldout_contexts",
]

LAYOUTS = ("half", "interleaved")
DISTANCES = ("log_uniform", "uniform")
#: Largest span, key vocabulary, token count per step (a step holds batch x N x d floats).
MAX_SPAN = 1 << 16
MAX_KEYS = 1 << 16
MAX_STEP_TOKENS = 1 << 22
MAX_SEED = 2**62


# --------------------------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------------------------
def _tuple(values: Any, name: str, what: str) -> tuple:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of {what}, got {_describe(values)}")
    if not values:
        raise ValueError(f"{name} must not be empty")
    return tuple(values)


@dataclass(frozen=True)
class RecallCell:
    r"""One cell of a sweep: a span, a token count, a head dimension and its bases.

    Attributes
    ----------
    span : int
        :math:`L`, the largest distance (positions :math:`0..L-1`, the query at :math:`L`).
    tokens : int
        :math:`N \le L`, context tokens (``tokens == span``: a dense context).
    d : int
        Head dimension, even.
    bases : tuple of float
        RoPE bases > 1, each trained with every seed of the sweep.
    distances : {"log_uniform", "uniform"}
        Distribution of the training distance.
    eval_tokens : tuple of int
        Token counts at which every model of the cell is evaluated besides ``tokens`` (at most
        ``span`` each; the same distances, more or fewer distractors).
    """

    span: int
    tokens: int
    d: int
    bases: tuple[float, ...]
    distances: str = "log_uniform"
    eval_tokens: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        span = check_positive_int(self.span, "span", minimum=2, maximum=MAX_SPAN)
        tokens = check_positive_int(
            self.tokens, "tokens", minimum=2, maximum=span, hint=f"at most the span {span}"
        )
        d = check_dim(self.d)
        if d > 1024:
            raise ValueError(f"d must be at most 1024 for this experiment, got {d}")
        bases = tuple(
            check_base(b, "bases entries") for b in _tuple(self.bases, "bases", "numbers > 1")
        )
        if len(set(bases)) != len(bases):
            raise ValueError(f"bases must be distinct, got {bases}")
        extra = self.eval_tokens
        if isinstance(extra, (str, bytes)) or not isinstance(extra, Sequence):
            raise TypeError(f"eval_tokens must be a sequence of integers, got {_describe(extra)}")
        extra = tuple(
            check_positive_int(n, "eval_tokens entries", minimum=2, maximum=span) for n in extra
        )
        if tokens in extra or len(set(extra)) != len(extra):
            raise ValueError(
                f"eval_tokens must be distinct token counts other than tokens = {tokens}, "
                f"got {extra}"
            )
        values = {
            "span": span,
            "tokens": tokens,
            "d": d,
            "bases": bases,
            "distances": check_choice(self.distances, "distances", DISTANCES),
            "eval_tokens": extra,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)


@dataclass(frozen=True)
class RecallConfig:
    r"""One sweep of experiment 1: its cells, its seeds and the settings every run shares.

    Attributes
    ----------
    name : str
        An identifier (also in the name of the results file).
    cells : tuple of RecallCell
        The cells; every base of a cell is trained with every seed.
    seeds : tuple of int
        Seeds >= 0 (:mod:`rope_lib.experiments.recall_task`, "Randomness and pairing").
    layout : {"half", "interleaved"}
        Pair layout of :func:`rope_lib.apply_rope`.
    n_keys, n_values, key_dim : int
        Key vocabulary, value ids (chance is ``1 / n_values``), width of the frozen key
        embedding.
    steps, batch_size : int
        Adam steps and contexts per step.
    lr : float
        Peak learning rate (cosine decay to zero over ``steps``).
    n_bins, eval_per_bin : int
        Logarithmic distance bins over :math:`[1, L]` and held-out contexts per bin.
    threads : int
        ``torch.set_num_threads`` during a run.
    """

    name: str
    cells: tuple[RecallCell, ...]
    seeds: tuple[int, ...]
    layout: str = "half"
    n_keys: int = 4096
    n_values: int = 16
    key_dim: int = 64
    steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-2
    n_bins: int = 12
    eval_per_bin: int = 2500
    threads: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be an identifier such as 'smoke', got {self.name!r}")
        cells = _tuple(self.cells, "cells", "RecallCell")
        for cell in cells:
            if not isinstance(cell, RecallCell):
                raise TypeError(f"cells entries must be RecallCell, got {_describe(cell)}")
        seeds = tuple(
            check_seed(s, "seeds entries", maximum=MAX_SEED)
            for s in _tuple(self.seeds, "seeds", "integers >= 0")
        )
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        values = {
            "cells": cells,
            "seeds": seeds,
            "layout": check_choice(self.layout, "layout", LAYOUTS),
            "n_keys": check_positive_int(self.n_keys, "n_keys", minimum=2, maximum=MAX_KEYS),
            "n_values": check_positive_int(self.n_values, "n_values", minimum=2, maximum=1024),
            "key_dim": check_positive_int(self.key_dim, "key_dim", minimum=2, maximum=4096),
            "steps": check_positive_int(self.steps, "steps", maximum=10**6),
            "batch_size": check_positive_int(self.batch_size, "batch_size", maximum=4096),
            "lr": check_real(self.lr, "lr", 0.0, 1.0, low_open=True),
            "n_bins": check_positive_int(self.n_bins, "n_bins", maximum=256),
            "eval_per_bin": check_positive_int(self.eval_per_bin, "eval_per_bin", maximum=10**5),
            "threads": check_positive_int(self.threads, "threads", maximum=256),
        }
        most = max(c.tokens for c in cells) * values["batch_size"]
        if most > MAX_STEP_TOKENS:
            raise ValueError(
                f"batch_size * tokens = {most} tokens per step exceeds {MAX_STEP_TOKENS}; "
                "use a smaller batch_size"
            )
        keys = [(c.span, c.tokens, c.d, c.distances) for c in cells]
        if len(set(keys)) != len(keys):
            raise ValueError(
                "cells must differ in (span, tokens, d, distances); put the bases of one "
                "setting in one cell"
            )
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def runs(self) -> list[dict[str, Any]]:
        """Every run as a JSON-ready dict: the cell's setting, the base and the seed."""
        return [
            {
                "span": c.span,
                "tokens": c.tokens,
                "d": c.d,
                "distances": c.distances,
                "eval_tokens": list(c.eval_tokens),
                "base": b,
                "seed": s,
            }
            for c in self.cells
            for b in c.bases
            for s in self.seeds
        ]

    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready data (tuples as lists)."""
        return json_ready(dataclasses.asdict(self))


def json_ready(value: Any) -> Any:
    """Tuples as lists, recursively (dataclass dicts as JSON would read them back)."""
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def half_decade(k: int) -> float:
    """The base :math:`10^{k/2}` (one expression everywhere, so equal bases are equal floats)."""
    return 10.0 ** (k / 2)


def _decades(lo: int, hi: int) -> tuple[float, ...]:
    return tuple(half_decade(k) for k in range(lo, hi + 1))


#: Bases just inside and just outside two top edges of feasible windows for L = 1024, d = 16
#: (rope_lib/experiments/predictions.py, EDGES).
_WINDOW_BASES = (
    470_000.0, 474_000.0, 478_000.0, 484_000.0, 488_000.0, 492_000.0,
    530_000.0, 536_000.0, 542_000.0, 548_000.0, 553_000.0, 560_000.0,
)  # fmt: skip

# The sweeps.  ``smoke`` runs the code path of ``full`` in well under a minute of one core
# (CI reruns it).  ``full`` is what chapter 9 reads; rope_lib/experiments/predictions.py says
# what each cell tests.  Cells, all with 5 seeds:
# * span 1024, 128 tokens, d = 16, 32, 64, 128, bases every half decade: the comparison of
#   predictors and the discriminating pairs; d = 16 also has the window bases, d = 32 is also
#   evaluated with 32 and 256 tokens (more or fewer distractors at the same distances);
# * span 256 with 128 tokens and dense (256 tokens), d = 32: the span at a fixed number of
#   distractors, and the number of distractors at a fixed span;
# * span 1024, 128 tokens, d = 32, trained on uniform distances.
RECALL_CONFIGS: dict[str, RecallConfig] = {
    "smoke": RecallConfig(
        name="smoke",
        cells=(
            RecallCell(span=256, tokens=32, d=16, bases=(100.0, 1e4), eval_tokens=(64,)),
            RecallCell(span=64, tokens=64, d=16, bases=(100.0,), distances="uniform"),
        ),
        seeds=(0, 1),
        n_keys=1024,
        steps=300,
        batch_size=32,
        n_bins=6,
        eval_per_bin=200,
    ),
    "full": RecallConfig(
        name="full",
        cells=(
            RecallCell(1024, 128, 16, _decades(2, 12) + _WINDOW_BASES),
            RecallCell(1024, 128, 32, _decades(2, 10), eval_tokens=(32, 256)),
            RecallCell(1024, 128, 64, _decades(2, 8)),
            RecallCell(1024, 128, 128, _decades(4, 7)),
            RecallCell(256, 128, 32, _decades(2, 7), eval_tokens=(256,)),
            RecallCell(256, 256, 32, _decades(2, 7), eval_tokens=(128,)),
            RecallCell(1024, 128, 32, _decades(6, 10)[::2], distances="uniform"),
        ),
        seeds=(0, 1, 2, 3, 4),
        steps=1250,
    ),
}


def recall_config(name: str) -> RecallConfig:
    """The named configuration of :data:`RECALL_CONFIGS` (``"smoke"`` or ``"full"``)."""
    return RECALL_CONFIGS[check_choice(name, "name", tuple(RECALL_CONFIGS))]


def as_config(config: Any, name: str = "config") -> RecallConfig:
    """A configuration given by name or as a :class:`RecallConfig`."""
    if isinstance(config, RecallConfig):
        return config
    if isinstance(config, str):
        return RECALL_CONFIGS[check_choice(config, name, tuple(RECALL_CONFIGS))]
    raise TypeError(
        f"{name} must be one of {tuple(RECALL_CONFIGS)} or a RecallConfig, got {_describe(config)}"
    )


# --------------------------------------------------------------------------------------------
# randomness
# --------------------------------------------------------------------------------------------
def derived_seed(purpose: str, *parts: Any) -> int:
    """A seed in :math:`[0, 2^{62})` from SHA-256 of ``purpose`` and ``parts`` (their repr).

    Two different tuples give independent-looking seeds; the same tuple always the same one.
    """
    text = "|".join([purpose, *(repr(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 2


def generator(seed: int) -> Any:
    """A ``torch.Generator`` seeded with ``seed``."""
    import torch

    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


# --------------------------------------------------------------------------------------------
# contexts
# --------------------------------------------------------------------------------------------
class Contexts(NamedTuple):
    r"""A batch of ``n`` contexts of ``N`` tokens (torch tensors).

    Attributes
    ----------
    keys, values : torch.Tensor
        int64, ``(n, N)``: key and value ids of the tokens.
    positions : torch.Tensor or None
        int64, ``(n, N)``: the tokens' positions in :math:`[0, L)`; ``None`` for dense
        contexts, whose token :math:`j` is at position :math:`j`.
    target : torch.Tensor
        int64, ``(n,)``: index of the target token (0 in sparse contexts).
    deltas : torch.Tensor
        int64, ``(n,)``: the target's distance :math:`\Delta = L - p_{\text{target}}`.
    span : int
        :math:`L`; the query sits at position :math:`L`.
    """

    keys: Any
    values: Any
    positions: Any
    target: Any
    deltas: Any
    span: int


def sample_distances(gen: Any, n: int, span: int, distances: str) -> Any:
    r"""``n`` training distances on :math:`[1, L]`: log-uniform or uniform (module docstring)."""
    import torch

    if distances == "log_uniform":
        u = torch.rand(n, generator=gen, dtype=torch.float64) * math.log(span + 1)
        return u.exp().floor().long().clamp_(1, span)  # clamp: exp rounding at the top
    return torch.randint(1, span + 1, (n,), generator=gen)


def sample_contexts(
    gen: Any, deltas: Any, span: int, tokens: int, n_keys: int, n_values: int
) -> Contexts:
    """Contexts whose targets sit at the given distances (module docstring).

    Key ids are uniform with replacement, except that no token but the target carries the
    target's key id: a clash is moved to another id by a uniform nonzero shift modulo
    ``n_keys``.
    """
    import torch

    n = len(deltas)
    rows = torch.arange(n)
    keys = torch.randint(n_keys, (n, tokens), generator=gen)
    values = torch.randint(n_values, (n, tokens), generator=gen)
    if tokens == span:
        positions, target = None, span - deltas
    else:
        # N - 1 distinct positions among the L - 1 that are not the target's: choose among
        # 0..L-2, then step over the target's position
        target_pos = (span - deltas)[:, None]
        chosen = torch.rand(n, span - 1, generator=gen).topk(tokens - 1, dim=1).indices
        others = chosen + (chosen >= target_pos).long()
        positions = torch.cat([target_pos, others], dim=1)
        target = torch.zeros(n, dtype=torch.int64)
    clash = keys == keys[rows, target][:, None]
    clash[rows, target] = False
    shift = torch.randint(1, n_keys, (n, tokens), generator=gen)
    keys = torch.where(clash, (keys + shift) % n_keys, keys)
    return Contexts(keys, values, positions, target, deltas, span)


def distance_bins(span: int, n_bins: int) -> np.ndarray:
    r"""Edges of logarithmic distance bins over :math:`[1, L]`: bin :math:`j` is
    :math:`[e_j, e_{j+1})`, :math:`e_0 = 1`, last edge :math:`L + 1`.

    The edges are ``round(geomspace(1, L + 1, n_bins + 1))`` with repeats removed, so a short
    span has fewer bins (bins are whole distances).
    """
    span = check_positive_int(span, "span", minimum=1, maximum=MAX_SPAN)
    n_bins = check_positive_int(n_bins, "n_bins", maximum=256)
    return np.unique(np.round(np.geomspace(1, span + 1, n_bins + 1)).astype(np.int64))


def heldout_distances(gen: Any, edges: np.ndarray, per_bin: int) -> Any:
    """``per_bin`` distances uniform in each bin ``[e_j, e_{j+1})``, bin after bin."""
    import torch

    return torch.cat(
        [
            torch.randint(int(lo), int(hi), (per_bin,), generator=gen)
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )


def heldout_chunk(tokens: int) -> int:
    """Contexts per chunk of a held-out set: about :math:`2^{16}` tokens (part of its draw)."""
    return max(1, (1 << 16) // tokens)


def heldout_contexts(
    config: RecallConfig, seed: int, span: int, tokens: int
) -> tuple[np.ndarray, Any]:
    """The held-out set of a seed, span and token count.

    Returns the bin edges and an iterator of :class:`Contexts` in chunks of
    :func:`heldout_chunk` contexts, ``eval_per_bin`` per bin in bin order; the same for every
    base and head dimension (drawn from the ``"eval"`` seed of ``(seed, span, tokens)``).
    """
    edges = distance_bins(span, config.n_bins)
    chunk = heldout_chunk(tokens)

    def chunks() -> Any:
        gen = generator(derived_seed("eval", seed, span, tokens))
        deltas = heldout_distances(gen, edges, config.eval_per_bin)
        for start in range(0, len(deltas), chunk):
            yield sample_contexts(
                gen, deltas[start : start + chunk], span, tokens, config.n_keys, config.n_values
            )

    return edges, chunks()
