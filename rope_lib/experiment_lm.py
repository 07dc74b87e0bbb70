r"""Does the base bound bind?  Experiment 2: a tiny Llama trained on needle recall in filler.

Chapter 9 ("Does the bound bind?", issue 13) reads the stored results of this module next to
those of :mod:`rope_lib.experiment`.  Experiment 1 isolates one RoPE attention layer; this one
asks the question of Men et al.'s "superficial long context" with a real decoder: a small
``transformers.LlamaForCausalLM`` built from a tiny ``LlamaConfig`` (Hugging Face's own RoPE
and attention; no home-made transformer), trained from scratch at a context of :math:`L`
tokens with RoPE bases below, at and above ``min_base(L, head_dim)`` (chapter 7,
:func:`rope_lib.min_base`).  For each run it measures the retrieval accuracy by distance and
the next-token loss on the filler: a small base that keeps the filler loss but loses far
retrieval would be the superficial long context.  The summaries and the figure are in
:mod:`rope_lib.experiment_lm_report`.

The task
--------
A sequence of :math:`L` tokens from four disjoint sets: ``n_filler`` filler tokens, ``n_keys``
keys, ``n_values`` values and one query marker ``Q``.  Its first
:math:`L_b = L - 3\,n_q` tokens (the body, :math:`n_q` = ``n_queries``) are filler from a fixed
random bigram chain :math:`P` (row :math:`a` is :math:`\operatorname{softmax}(\beta z_a)` of
Gaussian :math:`z_a`, :math:`\beta` = ``filler_sharpness``; the same chain for every run, drawn
from a fixed seed) with ``n_pairs`` needles written over it: a needle is a key token at position
:math:`p` followed by a value token at :math:`p + 1`; the keys of one sequence are distinct,
values are uniform, and needles do not overlap.  The last :math:`3 n_q` tokens are the queries:
:math:`n_q` triples ``Q k v`` for distinct needles of the body.  Predicting a query's ``v``
from ``Q k`` is a retrieval; its distance is :math:`\Delta = t - p`, from the needle's key
(position :math:`p`) to the query's key (position :math:`t`).  Each sequence has one *measured*
query at a chosen distance :math:`\Delta \in [3, L - 2]`: the last query (:math:`t = L - 2`)
when :math:`\Delta \ge 3 n_q`, else the first (:math:`t = L_b + 1`), the only one whose needle
can be that near.

Training and evaluation
-----------------------
The training loss is the sum of two means of the next-token cross-entropy
:math:`\ell_t = -\log p_\theta(x_t \mid x_{<t})`: over the filler positions :math:`F`
(:math:`x_t` and :math:`x_{t-1}` both filler, so :math:`x_t` follows the chain) and over the
query values :math:`V` (every query, measured or not):

.. math:: \mathcal L = \frac{1}{|F|}\sum_{t \in F} \ell_t + \frac{1}{|V|}\sum_{t \in V} \ell_t .

Needle keys and values and query keys are random and are not trained on.  AdamW with a linear
warm-up, a cosine decay and gradient clipping, a fresh batch every step, the measured query's
distance log-uniform on :math:`[3, L - 2]` (:func:`_train_deltas`); all randomness from
``torch.Generator`` objects seeded by the run's seed, and one thread (``threads``), so a run is
deterministic on one machine.  Runs with the same seed share their initial weights and training
data across bases (a paired design).

Evaluation (:func:`evaluate_lm`) uses a fixed held-out set per configuration and context length
(the same sequences for every seed and base, from a generator that training never uses): for
each logarithmic distance bin over :math:`[3, L - 2]`, ``eval_per_bin`` sequences whose measured
query's needle sits at a distance uniform in the bin.  The retrieval accuracy of a bin is the
fraction of those sequences in which the argmax of the model's prediction at the measured
query's key is that needle's value (chance: :math:`1/n_v`).  The filler loss is the mean of
:math:`\ell_t` over the filler positions of the whole held-out set, in nats; the best any model
can do is the chain's entropy rate :math:`H = -\sum_a \pi_a \sum_b P_{ab}\log P_{ab}`
(:math:`\pi` its stationary distribution), stored with the results.  The filler is a bigram
chain, so a model needs only the previous token to reach :math:`H`: the filler loss measures the
"perplexity looks fine" half of the superficial long context, not long-range modelling.

Sweeps and stored results
-------------------------
:data:`LM_CONFIGS` names the sweeps (``"smoke"`` for CI, ``"full"`` for the chapter).
:func:`run_lm_experiment` (``python -m rope_lib.experiment_cli --experiment lm --config full``)
trains them with :func:`rope_lib.sweep.run_sweep`: progress bar with an ETA, one file per run
under ``_build/experiment_lm/<key[:16]>/`` (resumable), every file written atomically, and at the
end ``rope_lib/data/experiment_lm_<config>.json``.  The key is a SHA-256 of
:data:`LM_CODE_FILES` and of the configuration; :func:`lm_results` refuses a missing or stale
file and says how to regenerate it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import sweep
from ._validate import (
    _describe,
    check_base,
    check_choice,
    check_dim,
    check_flag,
    check_positive_int,
    check_real,
    check_seed,
)
from .base_bound import min_base

__all__ = [
    "LMConfig",
    "LMModel",
    "LM_CONFIGS",
    "LM_CODE_FILES",
    "lm_config",
    "train_lm",
    "evaluate_lm",
    "lm_plan",
    "run_lm_experiment",
    "lm_results",
]

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
#: The modules whose code determines the trained numbers; their SHA-256 keys the results.
#: (:mod:`rope_lib.sweep` only moves results around, and the summaries only read them.)
LM_CODE_FILES = ("experiment_lm.py", "_validate.py")
_MAX_SEED = 2**62
#: Seed of the held-out set of a context length L is _EVAL_SEED + L (same for every run).
_EVAL_SEED = 2_000_003
#: Seed of the filler's bigram chain (the same language for every run).
_CHAIN_SEED = 12_345
_MAX_LENGTH = 1 << 12
_MAX_BATCH_TOKENS = 1 << 20
#: CPU seconds per Mtok (context tokens x steps) of training and evaluation, measured with the
#: full sweep on the 2-core build machine (1378 s of training for 92 Mtok, plus evaluation).
_SECONDS_PER_MTOK = 15.5


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
class LMConfig:
    r"""One sweep of experiment 2: the task, the model, the training and the bases.

    Every run trains one model for each combination of ``bases`` and ``seeds``; the other
    fields are shared.  Arguments are checked on construction; a bad one is refused by name
    (a base <= 1, an odd ``head_dim``, ...).

    Attributes
    ----------
    name : str
        The configuration's name (also the name of its results file); an identifier.
    context_length : int
        :math:`L`, the tokens of a training sequence.
    bases, seeds : tuple
        RoPE bases > 1 and seeds >= 0.
    n_filler, n_keys, n_values : int
        Sizes of the filler, key and value vocabularies (chance accuracy is ``1 / n_values``).
    n_pairs, n_queries : int
        Needles in the body and queries at the end of a sequence (``n_queries <= n_pairs <=
        n_keys``).
    filler_sharpness : float
        :math:`\beta` of the bigram chain (larger: a more predictable filler).
    head_dim, n_heads, n_layers, mlp_ratio : int
        The Llama: hidden size ``head_dim * n_heads``, ``n_layers`` decoder layers, MLP width
        ``mlp_ratio`` times the hidden size.
    steps, batch_size, warmup : int
        AdamW steps, sequences per step, linear warm-up steps.
    lr, weight_decay : float
        Peak learning rate (cosine decay to zero) and AdamW's weight decay.
    n_bins, eval_per_bin : int
        Logarithmic distance bins over :math:`[3, L - 2]` (fewer when the range is short:
        bins are whole distances) and held-out sequences per bin.
    threads : int
        ``torch.set_num_threads`` during training and evaluation.
    """

    name: str
    context_length: int
    bases: tuple[float, ...]
    seeds: tuple[int, ...]
    n_filler: int = 32
    n_keys: int = 32
    n_values: int = 32
    n_pairs: int = 8
    n_queries: int = 4
    filler_sharpness: float = 3.0
    head_dim: int = 32
    n_heads: int = 2
    n_layers: int = 2
    mlp_ratio: int = 2
    steps: int = 1000
    batch_size: int = 32
    warmup: int = 50
    lr: float = 3e-3
    weight_decay: float = 0.0
    n_bins: int = 8
    eval_per_bin: int = 64
    threads: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be an identifier such as 'smoke', got {self.name!r}")
        bases = _tuple(self.bases, "bases", "real numbers > 1")
        seeds = _tuple(self.seeds, "seeds", "integers >= 0")
        v: dict[str, Any] = {
            "bases": tuple(check_base(b, "bases entries") for b in bases),
            "seeds": tuple(check_seed(s, "seeds entries", maximum=_MAX_SEED) for s in seeds),
            "n_filler": check_positive_int(self.n_filler, "n_filler", minimum=2, maximum=4096),
            "n_keys": check_positive_int(self.n_keys, "n_keys", minimum=1, maximum=4096),
            "n_values": check_positive_int(self.n_values, "n_values", minimum=2, maximum=4096),
            "n_queries": check_positive_int(self.n_queries, "n_queries", maximum=256),
            "filler_sharpness": check_real(self.filler_sharpness, "filler_sharpness", 0.0, 20.0),
            "head_dim": check_dim(self.head_dim, "head_dim"),
            "n_heads": check_positive_int(self.n_heads, "n_heads", maximum=64),
            "n_layers": check_positive_int(self.n_layers, "n_layers", maximum=64),
            "mlp_ratio": check_positive_int(self.mlp_ratio, "mlp_ratio", maximum=16),
            "steps": check_positive_int(self.steps, "steps", maximum=10**6),
            "batch_size": check_positive_int(self.batch_size, "batch_size", maximum=4096),
            "warmup": check_positive_int(self.warmup, "warmup", minimum=0, maximum=10**6),
            "lr": check_real(self.lr, "lr", 0.0, 1.0, low_open=True),
            "weight_decay": check_real(self.weight_decay, "weight_decay", 0.0, 1.0),
            "n_bins": check_positive_int(self.n_bins, "n_bins", maximum=256),
            "eval_per_bin": check_positive_int(self.eval_per_bin, "eval_per_bin", maximum=4096),
            "threads": check_positive_int(self.threads, "threads", maximum=256),
        }
        if v["head_dim"] > 1024:
            raise ValueError(f"head_dim must be at most 1024, got {v['head_dim']}")
        v["n_pairs"] = check_positive_int(
            self.n_pairs,
            "n_pairs",
            minimum=v["n_queries"],
            maximum=v["n_keys"],
            hint=f"a sequence's needles have distinct keys (n_keys = {v['n_keys']})",
        )
        shortest = _shortest(v["n_pairs"], v["n_queries"])
        v["context_length"] = _check_length(self.context_length, shortest, _MAX_LENGTH)
        if v["warmup"] >= v["steps"]:
            raise ValueError(f"warmup must be smaller than steps = {v['steps']}, got {v['warmup']}")
        if v["batch_size"] * v["context_length"] > _MAX_BATCH_TOKENS:
            raise ValueError(
                f"batch_size * context_length = {v['batch_size'] * v['context_length']} tokens "
                f"per step exceeds {_MAX_BATCH_TOKENS}; use a smaller batch_size"
            )
        for key, value in v.items():
            object.__setattr__(self, key, value)

    @property
    def vocab_size(self) -> int:
        """Filler, keys, values and the query marker."""
        return self.n_filler + self.n_keys + self.n_values + 1

    def runs(self) -> list[tuple[float, int]]:
        """Every run as ``(base, seed)``, in the order they are trained."""
        return [(b, s) for b in self.bases for s in self.seeds]

    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready data (tuples as lists)."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    def key(self) -> str:
        """SHA-256 of :data:`LM_CODE_FILES` and of this configuration: the results' identity."""
        return sweep.code_key([_HERE / n for n in LM_CODE_FILES], self.to_dict())


def _shortest(n_pairs: int, n_queries: int) -> int:
    """The shortest context that holds the needles, the queries and one filler token, and whose
    body is long enough for the first query's needle at every distance below ``3 n_q``."""
    return 3 * n_queries + max(2 * n_pairs + 1, 3 * n_queries)


def _check_length(value: Any, minimum: int, maximum: int, hint: str = "") -> int:
    length = check_positive_int(value, "context_length", maximum=maximum, hint=hint)
    if length < minimum:
        raise ValueError(
            f"context_length must be at least {minimum} (3 n_queries + max(2 n_pairs + 1, "
            f"3 n_queries): the needles and the queries must fit), got {length}"
        )
    return length


#: The named sweeps.  ``smoke`` runs the same code path as ``full`` in seconds (it is rerun by
#: ``tests/test_experiment_lm.py``); ``full`` is the chapter's sweep, bases below, at and above
#: ``min_base(L, head_dim)``.
LM_CONFIGS: dict[str, LMConfig] = {
    "smoke": LMConfig(
        name="smoke",
        context_length=32,
        # min_base(32, 16) = 208.5
        bases=(10.0, 209.0, 1e4),
        seeds=(0, 1, 2),
        n_filler=16,
        n_keys=8,
        n_values=8,
        n_pairs=4,
        n_queries=3,
        head_dim=16,
        n_heads=2,
        n_layers=2,
        steps=200,
        batch_size=16,
        warmup=20,
        lr=3e-3,
        n_bins=4,
        eval_per_bin=32,
    ),
    "full": LMConfig(
        name="full",
        context_length=64,
        # min_base(64, 16) = 1706.1; the horizon of B_m is 3, 5, 16, 103, 279 tokens
        bases=(3.0, 10.0, 100.0, 1707.0, 1e5),
        seeds=(0, 1, 2),
        n_filler=32,
        n_keys=16,
        n_values=16,
        n_pairs=4,
        n_queries=4,
        head_dim=16,
        n_heads=4,
        n_layers=2,
        steps=3000,
        batch_size=32,
        warmup=100,
        lr=3e-3,
        n_bins=8,
        eval_per_bin=128,
    ),
}


def lm_config(name: str) -> LMConfig:
    """The named configuration of :data:`LM_CONFIGS`.

    Parameters
    ----------
    name : str
        ``"smoke"`` or ``"full"``.

    Returns
    -------
    LMConfig
    """
    return LM_CONFIGS[check_choice(name, "name", tuple(LM_CONFIGS))]


def _config(config: Any, name: str = "config") -> LMConfig:
    if isinstance(config, LMConfig):
        return config
    if isinstance(config, str):
        return LM_CONFIGS[check_choice(config, name, tuple(LM_CONFIGS))]
    raise TypeError(
        f"{name} must be one of {tuple(LM_CONFIGS)} or an LMConfig, got {_describe(config)}"
    )


# --------------------------------------------------------------------------------------------
# the data
# --------------------------------------------------------------------------------------------
def _generator(seed: int) -> Any:
    import torch

    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def _chain(n_filler: int, sharpness: float) -> np.ndarray:
    """The bigram chain's transition matrix P (rows sum to one), float64, from a fixed seed."""
    rng = np.random.default_rng(_CHAIN_SEED)
    z = sharpness * rng.standard_normal((n_filler, n_filler))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def _entropy_rate(p: np.ndarray) -> float:
    r""":math:`H = -\sum_a \pi_a \sum_b P_{ab}\log P_{ab}` with :math:`\pi P = \pi` (nats)."""
    w, vecs = np.linalg.eig(p.T)
    pi = np.real(vecs[:, np.argmin(np.abs(w - 1.0))])
    pi = pi / pi.sum()
    logp = np.log(p, where=p > 0, out=np.zeros_like(p))
    return float(-(pi * (p * logp).sum(axis=1)).sum())


def _filler(cum: Any, gen: Any, n: int, length: int) -> Any:
    """``n`` filler sequences of the chain (first token uniform); ``cum`` is P's row cumsum."""
    import torch

    n_filler = cum.shape[0]
    u = torch.rand(n, length, generator=gen, dtype=torch.float64)
    out = torch.empty(n, length, dtype=torch.int64)
    out[:, 0] = torch.randint(n_filler, (n,), generator=gen)
    for t in range(1, length):
        nxt = (cum[out[:, t - 1]] < u[:, t : t + 1]).sum(dim=1)
        out[:, t] = nxt.clamp_max(n_filler - 1)
    return out


def _query_slot(deltas: Any, n_queries: int) -> Any:
    """Which query is measured at distance ``delta``: the last one when it can be (``delta >=
    3 n_q``), else the first (the only one whose needle can be nearer)."""
    import torch

    return torch.where(deltas >= 3 * n_queries, n_queries - 1, 0)


def _sample(cfg: LMConfig, cum: Any, gen: Any, length: int, deltas: Any) -> dict[str, Any]:
    """Sequences of ``length`` tokens (module docstring), the measured query at ``deltas``.

    The measured query is the last one when ``delta >= 3 n_q``, else the first
    (:func:`_query_slot`); its needle's key is ``delta`` positions before the query's key.
    Returns the token ids ``(n, L)``, the masks of the filler positions and of the query values
    (the positions whose token is a trained target), and per sequence the measured query's key
    position ``query_pos`` (the prediction there is the retrieval), its ``answer`` and
    ``delta``.
    """
    import torch

    n = len(deltas)
    n_p, n_q = cfg.n_pairs, cfg.n_queries
    key0, value0 = cfg.n_filler, cfg.n_filler + cfg.n_keys
    marker = cfg.vocab_size - 1
    body = length - 3 * n_q
    rows = torch.arange(n)[:, None]
    seq = _filler(cum, gen, n, length)
    slot = _query_slot(deltas, n_q)
    query_pos = body + 3 * slot + 1
    # the measured query's needle (index 0) at position P = query_pos - delta.  The others
    # start at x_i = c_i + i, c sorted and distinct in [0, V - n_p + 2) with V = L_b - 4 (so
    # x_i is in [0, V) with gaps >= 2), moved to x_i + 3 from x_i = P - 1 on: they avoid
    # [P - 1, P + 1] and end before the body does
    target = query_pos - deltas
    free = (body - 4) - (n_p - 2)
    c = torch.rand(n, free, generator=gen).argsort(dim=1)[:, : n_p - 1].sort(dim=1).values
    others = c + torch.arange(n_p - 1)
    others = torch.where(others <= target[:, None] - 2, others, others + 3)
    pos = torch.cat([target[:, None], others], dim=1)  # (n, n_p)
    keys = torch.rand(n, cfg.n_keys, generator=gen).argsort(dim=1)[:, :n_p]
    values = torch.randint(cfg.n_values, (n, n_p), generator=gen)
    seq[rows, pos] = key0 + keys
    seq[rows, pos + 1] = value0 + values
    # queries: n_q - 1 distinct other needles in random order, and needle 0 in its slot
    order = torch.rand(n, n_p - 1, generator=gen).argsort(dim=1)[:, : n_q - 1] + 1
    zero = torch.zeros(n, 1, dtype=torch.int64)
    asked = torch.where(
        (slot == 0)[:, None], torch.cat([zero, order], dim=1), torch.cat([order, zero], dim=1)
    )  # (n, n_q)
    tail = body + 3 * torch.arange(n_q)
    seq[:, tail] = marker
    seq[:, tail + 1] = key0 + torch.gather(keys, 1, asked)
    seq[:, tail + 2] = value0 + torch.gather(values, 1, asked)
    is_filler = torch.zeros(n, length, dtype=torch.bool)
    is_filler[:, :body] = True
    is_filler[rows, pos] = False
    is_filler[rows, pos + 1] = False
    filler_target = is_filler.clone()
    filler_target[:, 1:] &= is_filler[:, :-1]
    filler_target[:, 0] = False
    value_target = torch.zeros(n, length, dtype=torch.bool)
    value_target[:, tail + 2] = True
    return {
        "input_ids": seq,
        "filler_target": filler_target,
        "value_target": value_target,
        "query_pos": query_pos,
        "answer": value0 + values[:, 0],
        "delta": deltas,
    }


def _train_deltas(gen: Any, n: int, length: int) -> Any:
    r"""Distances of the measured query in training: log-uniform on [3, L - 2].

    :math:`\Delta = \lfloor \exp(\ln 3 + u \ln((L - 1)/3)) \rfloor` with :math:`u` uniform on
    [0, 1): every logarithmic distance bin of the evaluation gets a similar share of the
    training examples (the other queries' needles fall anywhere in the body).
    """
    import torch

    u = torch.rand(n, generator=gen, dtype=torch.float64)
    deltas = torch.exp(math.log(3.0) + u * math.log((length - 1) / 3.0)).floor().long()
    return deltas.clamp(3, length - 2)


def _distance_bins(lo: int, hi: int, n_bins: int) -> np.ndarray:
    """Edges of logarithmic bins over the whole distances [lo, hi]: bin j is [e_j, e_{j+1})."""
    return np.unique(np.round(np.geomspace(lo, hi + 1, n_bins + 1)).astype(np.int64))


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LMModel:
    """A trained tiny Llama (:func:`train_lm`): its setting, its module and its training record.

    Attributes
    ----------
    config : LMConfig
        Task, model and training settings.
    base : float
        The RoPE base of this run.
    seed : int
        The run's seed.
    model : transformers.LlamaForCausalLM
        The trained model (in eval mode).
    loss_curve : tuple of float
        Mean training loss over each tenth of the steps.
    train_seconds, train_cpu_seconds : float
        Wall time and CPU time of the training.
    """

    config: LMConfig
    base: float
    seed: int
    model: Any = field(repr=False)
    loss_curve: tuple[float, ...] = ()
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0


def _build(cfg: LMConfig, base: float) -> Any:
    """A fresh ``LlamaForCausalLM`` of ``cfg`` with RoPE base ``base`` (torch's current seed)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    hidden = cfg.head_dim * cfg.n_heads
    config = LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=hidden,
        intermediate_size=cfg.mlp_ratio * hidden,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.context_length,
        rope_parameters={"rope_type": "default", "rope_theta": base},
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=True,
        use_cache=False,
    )
    config._attn_implementation = "sdpa"
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        return LlamaForCausalLM(config)
    finally:
        logging.set_verbosity(verbosity)


def _losses(logits: Any, batch: dict[str, Any]) -> tuple[Any, Any]:
    """Mean next-token cross-entropy over the filler targets and over the query values."""
    import torch

    ce = torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), batch["input_ids"][:, 1:], reduction="none"
    )
    filler = ce[batch["filler_target"][:, 1:]]
    values = ce[batch["value_target"][:, 1:]]
    return filler.mean(), values.mean()


def train_lm(base: float, seed: int = 0, *, config: Any = "smoke") -> LMModel:
    r"""Train one tiny Llama on the needle task (module docstring).

    The loss is :math:`\bar\ell_{\text{filler}} + \bar\ell_{\text{values}}`; the learning rate
    rises linearly over ``warmup`` steps to ``lr`` and decays as
    :math:`\tfrac12(1 + \cos(\pi s'/S'))` over the remaining :math:`S'` steps.

    Parameters
    ----------
    base : float
        RoPE base b > 1 (``rope_theta`` of the Llama).
    seed : int
        Seed of the initial weights and of the training data.
    config : str or LMConfig
        A name of :data:`LM_CONFIGS` or a configuration.

    Returns
    -------
    LMModel
    """
    import torch

    cfg = _config(config)
    base = check_base(base)
    seed = check_seed(seed, maximum=_MAX_SEED)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left alone
            torch.manual_seed(2 * seed)  # Hugging Face initialises from the global RNG
            model = _build(cfg, base)
        data = _generator(2 * seed + 1)
        cum = torch.from_numpy(np.cumsum(_chain(cfg.n_filler, cfg.filler_sharpness), axis=1))
        opt = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98)
        )
        decay = cfg.steps - cfg.warmup
        losses = []
        model.train()
        for step in range(cfg.steps):
            if step < cfg.warmup:
                lr = cfg.lr * (step + 1) / cfg.warmup
            else:
                lr = cfg.lr * 0.5 * (1.0 + math.cos(math.pi * (step - cfg.warmup) / decay))
            for group in opt.param_groups:
                group["lr"] = lr
            deltas = _train_deltas(data, cfg.batch_size, cfg.context_length)
            batch = _sample(cfg, cum, data, cfg.context_length, deltas)
            logits = model(input_ids=batch["input_ids"]).logits
            filler, values = _losses(logits, batch)
            loss = filler + values
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        model.eval()
        tenth = np.array_split(np.array(losses), min(10, len(losses)))
        return LMModel(
            config=cfg,
            base=base,
            seed=seed,
            model=model,
            loss_curve=tuple(float(part.mean()) for part in tenth),
            train_seconds=time.perf_counter() - t0,
            train_cpu_seconds=time.process_time() - c0,
        )
    finally:
        torch.set_num_threads(threads)


def evaluate_lm(model: LMModel, context_length: int | None = None) -> dict[str, Any]:
    r"""Retrieval accuracy by distance and the filler loss, on the fixed held-out set.

    Parameters
    ----------
    model : LMModel
        From :func:`train_lm`.
    context_length : int, optional
        Evaluate at this context length (default: the one the model was trained for).  A
        longer context than the model was trained for is refused.

    Returns
    -------
    dict
        ``context_length``; ``bin_edges`` (bin j holds the distances :math:`\Delta \in
        [e_j, e_{j+1})` from the measured query's needle key to its key); per bin ``accuracy``
        (the argmax at the query's key is the needle's value) and ``answer_loss`` (mean
        cross-entropy of that value, nats); ``filler_loss`` (mean next-token cross-entropy
        on the filler positions of the held-out set, nats) and ``filler_tokens`` (how many).
    """
    import torch

    if not isinstance(model, LMModel):
        raise TypeError(f"model must be an LMModel from train_lm, got {_describe(model)}")
    cfg = model.config
    if context_length is None:
        length = cfg.context_length
    else:
        length = _check_length(
            context_length,
            _shortest(cfg.n_pairs, cfg.n_queries),
            cfg.context_length,
            hint=f"the model was trained with context_length = {cfg.context_length}",
        )
    edges = _distance_bins(3, length - 2, cfg.n_bins)
    gen = _generator(_EVAL_SEED + length)
    deltas = torch.cat(
        [
            torch.randint(int(lo), int(hi), (cfg.eval_per_bin,), generator=gen)
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )
    cum = torch.from_numpy(np.cumsum(_chain(cfg.n_filler, cfg.filler_sharpness), axis=1))
    batch = _sample(cfg, cum, gen, length, deltas)
    correct, answer_loss, filler = [], [], []
    chunk = 64
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.no_grad():
            for start in range(0, len(deltas), chunk):
                part = {k: v[start : start + chunk] for k, v in batch.items()}
                logits = model.model(input_ids=part["input_ids"]).logits
                last = logits[torch.arange(len(logits)), part["query_pos"]]
                correct.append((last.argmax(dim=1) == part["answer"]).double())
                answer_loss.append(
                    torch.nn.functional.cross_entropy(
                        last.double(), part["answer"], reduction="none"
                    )
                )
                ce = torch.nn.functional.cross_entropy(
                    logits[:, :-1].transpose(1, 2).double(),
                    part["input_ids"][:, 1:],
                    reduction="none",
                )
                filler.append(ce[part["filler_target"][:, 1:]])
    finally:
        torch.set_num_threads(threads)
    bins = np.repeat(np.arange(len(edges) - 1), cfg.eval_per_bin)
    acc = torch.cat(correct).numpy()
    ans = torch.cat(answer_loss).numpy()
    fil = torch.cat(filler).numpy()
    return {
        "context_length": length,
        "bin_edges": [int(e) for e in edges],
        "accuracy": [float(acc[bins == j].mean()) for j in range(len(edges) - 1)],
        "answer_loss": [float(ans[bins == j].mean()) for j in range(len(edges) - 1)],
        "filler_loss": float(fil.mean()),
        "filler_tokens": int(fil.size),
    }


# --------------------------------------------------------------------------------------------
# the sweep and its stored results
# --------------------------------------------------------------------------------------------
def _run_id(base: float, seed: int) -> str:
    return f"b{base!r}-s{seed}"


def _output_path(cfg: LMConfig) -> Path:
    return _HERE / "data" / f"experiment_lm_{cfg.name}.json"


def _regenerate_hint(name: str) -> str:
    return f"python -m rope_lib.experiment_cli --experiment lm --config {name}"


def _train_and_evaluate(cfg: LMConfig, run: tuple[float, int]) -> dict[str, Any]:
    base, seed = run
    model = train_lm(base, seed, config=cfg)
    return {
        "base": base,
        "seed": seed,
        **evaluate_lm(model),
        "loss_curve": list(model.loss_curve),
        "train_seconds": model.train_seconds,
        "train_cpu_seconds": model.train_cpu_seconds,
    }


def lm_plan(config: Any = "smoke", build_dir: Any = None) -> sweep.SweepPlan:
    """The runs of a configuration, their cost and where their files go (nothing is trained).

    Parameters
    ----------
    config : str or LMConfig
        A name of :data:`LM_CONFIGS` or a configuration.
    build_dir : path, optional
        Directory of the per-run files (default ``_build/experiment_lm`` in the repository).

    Returns
    -------
    rope_lib.sweep.SweepPlan
        Runs ``(base, seed)``, each costing ``context_length * batch_size * steps / 1e6`` Mtok.
    """
    cfg = _config(config)
    build = (
        sweep.as_path(build_dir, "build_dir")
        if build_dir is not None
        else _ROOT / "_build" / "experiment_lm"
    )
    return sweep.SweepPlan(
        name=f"experiment_lm {cfg.name}",
        key=cfg.key(),
        runs=tuple(cfg.runs()),
        run_id=lambda r: _run_id(*r),
        cost=lambda r: cfg.context_length * cfg.batch_size * cfg.steps / 1e6,
        build_dir=build,
        unit="Mtok",
        seconds_per_unit=_SECONDS_PER_MTOK,
    )


def run_lm_experiment(
    config: Any = "smoke",
    *,
    build_dir: Any = None,
    output: Any = None,
    progress: bool = True,
    max_new_runs: int | None = None,
) -> dict[str, Any] | None:
    """Train every run of a configuration (resuming) and write its results file.

    Runs are trained by :func:`rope_lib.sweep.run_sweep`: one file per finished run under
    ``<build_dir>/<key[:16]>/`` (runs whose file exists are loaded, not retrained), every file
    written atomically, the results file written when every run is done.

    Parameters
    ----------
    config : str or LMConfig
        A name of :data:`LM_CONFIGS` or a configuration.
    build_dir : path, optional
        Directory of the per-run files (default ``_build/experiment_lm`` in the repository).
    output : path, optional
        Results file (default ``rope_lib/data/experiment_lm_<name>.json``).
    progress : bool
        Show a progress bar with an ETA on stderr.
    max_new_runs : int, optional
        Stop after training this many runs (the rest is left for a later call).

    Returns
    -------
    dict or None
        The results as written to ``output`` (``key``, ``config``, ``filler_entropy``,
        provenance, ``runs``: one dict per run as in :func:`evaluate_lm` plus ``base``,
        ``seed``, ``loss_curve``, ``train_seconds``, ``train_cpu_seconds``), or ``None`` when
        stopped by ``max_new_runs`` before every run was done.
    """
    import torch
    import transformers

    cfg = _config(config)
    plan = lm_plan(cfg, build_dir)
    out = sweep.as_path(output, "output") if output is not None else _output_path(cfg)
    progress = check_flag(progress, "progress")
    header = {
        "config": cfg.to_dict(),
        "code_files": [f"rope_lib/{n}" for n in LM_CODE_FILES],
        "regenerate": _regenerate_hint(cfg.name),
        "filler_entropy": _entropy_rate(_chain(cfg.n_filler, cfg.filler_sharpness)),
        "min_base": float(min_base(cfg.context_length, cfg.head_dim)),
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "numpy_version": np.__version__,
        "machine": platform.machine(),
    }
    blob = sweep.run_sweep(
        name=plan.name,
        key=plan.key,
        runs=plan.runs,
        run_id=plan.run_id,
        train=lambda r: _train_and_evaluate(cfg, r),
        cost=plan.cost,
        build_dir=plan.build_dir,
        output=out,
        header=header,
        progress=progress,
        max_new_runs=max_new_runs,
        unit=plan.unit,
    )
    return blob


def lm_results(config: str = "full") -> dict[str, Any]:
    """The stored results of a named configuration, refused when missing or stale.

    Parameters
    ----------
    config : str
        A name of :data:`LM_CONFIGS`.

    Returns
    -------
    dict
        As returned by :func:`run_lm_experiment`.

    Raises
    ------
    FileNotFoundError
        The file does not exist; the message says how to generate it.
    ValueError
        The file is not a results file, or was made by other code or another configuration
        (its key differs); the message says how to regenerate it.
    """
    cfg = _config(config)
    return sweep.load_results(_output_path(cfg), cfg.key(), cfg.name, _regenerate_hint(cfg.name))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m rope_lib.experiment_cli --experiment lm --config full``."""
    parser = argparse.ArgumentParser(
        prog="python -m rope_lib.experiment_cli --experiment lm",
        description="Train the tiny-Llama needle sweep of experiment 2 (resumable).",
    )
    parser.add_argument("--config", required=True, choices=sorted(LM_CONFIGS))
    parser.add_argument(
        "--build-dir", default=None, help="per-run files (default _build/experiment_lm)"
    )
    parser.add_argument("--output", default=None, help="results file (default rope_lib/data/...)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    blob = run_lm_experiment(
        args.config, build_dir=args.build_dir, output=args.output, progress=not args.no_progress
    )
    assert blob is not None
    where = args.output or _output_path(lm_config(args.config)).relative_to(_ROOT)
    seconds = sum(r["train_seconds"] for r in blob["runs"])
    print(f"wrote {where} ({len(blob['runs'])} runs, {seconds:.0f} s of training)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
