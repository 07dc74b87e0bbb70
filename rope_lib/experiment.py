r"""Does the base bound bind?  Experiment 1: one RoPE attention layer trained on key-value recall.

Chapter 7 (``chapters/07_base_bound.md``, label ``base-bound``) derives the margin
:math:`B_m = \sum_i \cos(m\theta_i)` and the general form
:math:`\delta_m = \operatorname{tr}(R_m\Sigma_q) + \mu_q^\top R_m(\mu_q - \mu_k)`, and concludes
that a context of :math:`L` tokens needs a base above ``min_base(L, d)``.  This module trains
a minimal model in which that claim can be tested, and records what the chapter on the
experiments (issue 13) compares with the predictions.

The task
--------
A context of :math:`L` tokens at positions :math:`0, \dots, L-1`; token :math:`n` carries a key
id :math:`k_n` (one of ``n_keys``) and a value id :math:`v_n` (one of ``n_values``), both
uniform.  A query token at position :math:`L` carries the key of one
context token, the target, at distance :math:`\Delta = L - n_{\text{target}} \in [1, L]`; no
other context token carries that key, and the model must output the target's value.

The model
---------
Key ids are embedded by a *frozen* random table :math:`E` (``n_keys`` x ``key_dim``, entries
:math:`\mathcal N(0, 1/\text{key\_dim})`, drawn from the seed); the query token and the
target carry the same key vector :math:`x = E_k`.  The only learned parameters are the query and
key projections :math:`W_q, W_k` (d x key_dim, no bias), and the values are read out exactly:

.. math::

    s_n = \frac{(R_L W_q E_{k})^\top (R_n W_k E_{k_n})}{\sqrt d}, \qquad
    a = \operatorname{softmax}(s), \qquad
    p(v) = \sum_{n : v_n = v} a_n, \qquad \text{logits}_v = \log p(v) + \text{const},

that is, the value vectors are one-hot and the output is the attention mass on each value id.
Frozen isotropic inputs and an exact readout isolate the mechanism: whatever the layer learns is
in :math:`W_q^\top R_m W_k`, which is exactly the score model of chapter 7 (a similar key
:math:`W_k E_k` against random keys :math:`W_k E_{k'}`).  A learned value path would add a
long loss plateau (attention and readout must both appear before either helps) without adding
anything about positions.  :math:`R_m` is applied by :func:`rope_lib.apply_rope` (``layout``
``"half"`` or ``"interleaved"``, head dimension ``d``, base ``b``).  The query's score with the
token at distance :math:`\Delta` is :math:`q^\top R_{-\Delta} k` (the chapter's
:math:`m = -\Delta`).  The embeddings have mean about zero and there are no biases, so the
mean term of the general form is small by construction here.

Training and evaluation
-----------------------
Adam with a cosine learning-rate decay, cross-entropy on the value, a fresh batch every step
with :math:`\Delta` drawn from the configuration's distance distribution (uniform or
log-uniform on :math:`[1, L]`, :class:`ExperimentConfig`); all randomness comes from ``torch.Generator``
objects seeded by the run's seed, and the number of threads is fixed (one by default), so a run
is deterministic on one machine (two processes on the build machine give identical files).
Runs with the same seed, context length and head dimension share their key embedding, initial
weights and training data across bases (a paired design: a difference between two bases is not
a difference of draws).  Evaluation uses a fixed held-out set per configuration and context
length (the same ids for every seed and base, drawn from a generator that training never uses):
``eval_per_bin`` fresh contexts in each of the logarithmic distance bins over :math:`[1, L]`.
:func:`evaluate_recall` returns per bin the accuracy, the mean attention on the target and the
measured margin (target score minus the mean score of the other tokens, unscaled
:math:`q^\top R k`), and the statistics of the pre-rotation queries and keys that the general
form needs: :math:`\mu_q`, :math:`\mu_k`, the 2 x 2 diagonal pair blocks of :math:`\Sigma_q`,
:math:`\Sigma_k` and of the target moment :math:`E[k^* q^\top]` (only those blocks enter
:math:`\operatorname{tr}(R_m M)`, chapter 7, step 4 of the proof).  :func:`pair_energy` gives
the Frobenius norm of each pair's 2 x 2 block of the learned form :math:`W_q W_k^\top`.

Sweeps and stored results
-------------------------
:data:`EXPERIMENT_CONFIGS` names the sweeps (``"smoke"`` for CI; ``"full"`` and ``"uniform"``,
its contrast with uniform training distances, for the chapter).
:func:`run_experiment` (``python -m rope_lib.experiment_cli --config full``, or ``make experiment``)
trains every run of a configuration with a progress bar and an ETA, writes one small result
file per run under ``_build/experiment/<key>/`` (so an interrupted sweep resumes where it
stopped) and at the end ``rope_lib/data/experiment_<config>.json``; every file is written to a
temporary file first and moved into place with ``os.replace``, so none is ever half-written.
The key is a SHA-256 of the code the numbers depend on (:data:`CODE_FILES`) and of the
configuration; :func:`experiment_results` reads the stored file and refuses a missing or stale
one, saying how to regenerate it.
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

from ._validate import (
    _describe,
    check_base,
    check_choice,
    check_dim,
    check_integer_array,
    check_positive_int,
    check_real,
    check_real_array,
    check_seed,
)
from .frequencies import theta
from .sweep import SweepPlan, as_path, code_key, load_results, run_sweep

__all__ = [
    "ExperimentConfig",
    "RecallModel",
    "EXPERIMENT_CONFIGS",
    "CODE_FILES",
    "experiment_config",
    "train_recall",
    "evaluate_recall",
    "pair_energy",
    "general_form",
    "run_experiment",
    "experiment_plan",
    "experiment_results",
]

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
_LAYOUTS = ("interleaved", "half")
_DISTANCES = ("uniform", "log_uniform")
#: The modules whose code determines the trained numbers: this one, ``apply_rope`` and the
#: frequencies and argument checks it uses.  Their SHA-256 keys the stored results.
CODE_FILES = ("experiment.py", "rotation.py", "_fastpath.py", "frequencies.py", "_validate.py")
#: Seeds must fit ``torch.Generator.manual_seed`` after the offsets used below.
_MAX_SEED = 2**62
#: Seed of the held-out set of a context length L is _EVAL_SEED + L (same for every run).
_EVAL_SEED = 1_000_003
#: Largest context, key vocabulary and batch (a batch of contexts is B x L x d floats).
_MAX_LENGTH = 1 << 14
_MAX_KEYS = 1 << 16
_MAX_BATCH_TOKENS = 1 << 22


# --------------------------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------------------------
def _int_tuple(values: Any, name: str, minimum: int, maximum: int) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise TypeError(f"{name} must be a non-empty sequence of integers, got {_describe(values)}")
    return tuple(
        check_positive_int(v, f"{name} entries", minimum=minimum, maximum=maximum) for v in values
    )


@dataclass(frozen=True)
class ExperimentConfig:
    r"""One sweep of experiment 1: which runs to train and how.

    Every run trains one model for each combination of ``context_lengths``, ``head_dims``,
    ``bases`` and ``seeds``; the other fields are shared by all runs.  Arguments are checked
    on construction (a base <= 1 or an odd head dimension is refused by name).

    Attributes
    ----------
    name : str
        The configuration's name (also the name of its results file).
    context_lengths, head_dims, bases, seeds : tuple
        The sweep: context lengths L, even head dimensions d, bases > 1,
        seeds >= 0.
    layout : {"half", "interleaved"}
        Pair layout of :func:`rope_lib.apply_rope`.
    n_keys, n_values, key_dim : int
        Key vocabulary, number of
        values (chance accuracy is ``1 / n_values``), width of the frozen key embedding
        (at least 2).
    distances : {"uniform", "log_uniform"}
        Distribution of the training distance :math:`\Delta \in [1, L]`: uniform, or
        log-uniform, :math:`\Delta = \lfloor e^{u} \rfloor` with :math:`u` uniform on
        :math:`[0, \ln(L + 1))`, so :math:`P(\Delta = k) = \ln(1 + 1/k) / \ln(L + 1)` (every
        octave of distances gets the same share of training; uniform gives the last half of
        the context half of the examples).
    steps, batch_size : int
        Adam steps and contexts per step.
    lr : float
        Peak learning rate (cosine decay to zero over ``steps``).
    n_bins, eval_per_bin : int
        Logarithmic distance bins over [1, L] (fewer when L is small: bins are whole
        distances) and held-out examples per bin.
    threads : int
        ``torch.set_num_threads`` during training (results are reproducible for a fixed value).
    """

    name: str
    context_lengths: tuple[int, ...]
    head_dims: tuple[int, ...]
    bases: tuple[float, ...]
    seeds: tuple[int, ...]
    layout: str = "half"
    n_keys: int = 4096
    n_values: int = 16
    key_dim: int = 64
    distances: str = "uniform"
    steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-2
    n_bins: int = 16
    eval_per_bin: int = 128
    threads: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be an identifier such as 'smoke', got {self.name!r}")
        keys = check_positive_int(self.n_keys, "n_keys", minimum=2, maximum=_MAX_KEYS)
        lengths = _int_tuple(self.context_lengths, "context_lengths", 2, _MAX_LENGTH)
        if isinstance(self.head_dims, (str, bytes)) or not isinstance(self.head_dims, Sequence):
            raise TypeError(
                f"head_dims must be a sequence of even integers, got {self.head_dims!r}"
            )
        if not self.head_dims:
            raise ValueError("head_dims must not be empty")
        dims = tuple(check_dim(d, "head_dims entries") for d in self.head_dims)
        if isinstance(self.bases, (str, bytes)) or not isinstance(self.bases, Sequence):
            raise TypeError(f"bases must be a sequence of real numbers > 1, got {self.bases!r}")
        if not self.bases:
            raise ValueError("bases must not be empty")
        bases = tuple(check_base(b, "bases entries") for b in self.bases)
        if isinstance(self.seeds, (str, bytes)) or not isinstance(self.seeds, Sequence):
            raise TypeError(f"seeds must be a sequence of integers >= 0, got {self.seeds!r}")
        if not self.seeds:
            raise ValueError("seeds must not be empty")
        seeds = tuple(check_seed(s, "seeds entries", maximum=_MAX_SEED) for s in self.seeds)
        values = {
            "context_lengths": lengths,
            "head_dims": dims,
            "bases": bases,
            "seeds": seeds,
            "layout": check_choice(self.layout, "layout", _LAYOUTS),
            "n_keys": keys,
            "n_values": check_positive_int(self.n_values, "n_values", minimum=2, maximum=1024),
            "key_dim": check_positive_int(self.key_dim, "key_dim", minimum=2, maximum=4096),
            "distances": check_choice(self.distances, "distances", _DISTANCES),
            "steps": check_positive_int(self.steps, "steps", maximum=10**6),
            "batch_size": check_positive_int(self.batch_size, "batch_size", maximum=4096),
            "lr": check_real(self.lr, "lr", 0.0, 1.0, low_open=True),
            "n_bins": check_positive_int(self.n_bins, "n_bins", maximum=256),
            "eval_per_bin": check_positive_int(self.eval_per_bin, "eval_per_bin", maximum=4096),
            "threads": check_positive_int(self.threads, "threads", maximum=256),
        }
        if values["batch_size"] * max(lengths) > _MAX_BATCH_TOKENS:
            raise ValueError(
                f"batch_size * max(context_lengths) = {values['batch_size'] * max(lengths)} "
                f"tokens per step exceeds {_MAX_BATCH_TOKENS}; use a smaller batch_size"
            )
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def runs(self) -> list[tuple[int, int, float, int]]:
        """Every run as ``(context_length, d, base, seed)``, in the order they are trained."""
        return [
            (L, d, b, s)
            for L in self.context_lengths
            for d in self.head_dims
            for b in self.bases
            for s in self.seeds
        ]

    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready data (tuples as lists)."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    def key(self) -> str:
        """SHA-256 of :data:`CODE_FILES` and of this configuration: the results' identity."""
        return code_key([_HERE / name for name in CODE_FILES], self.to_dict())


#: The named sweeps.  ``smoke`` (9 runs) runs the same code path as ``full`` in about 15 s of
#: one core (it is rerun by ``tests/test_experiment.py``); ``full`` (72 runs, log-uniform
#: training distances) brackets ``min_base(L, d)`` for the chapter; ``uniform`` (18 runs) is its
#: L = 1024, d = 32 cell trained on uniform distances.  The results files record the measured
#: training time of each run.
EXPERIMENT_CONFIGS: dict[str, ExperimentConfig] = {
    "smoke": ExperimentConfig(
        name="smoke",
        context_lengths=(128,),
        head_dims=(16,),
        bases=(100.0, 3000.0, 100000.0),  # min_base(128, 16) = 2768
        seeds=(0, 1, 2),
        n_keys=1024,
        distances="log_uniform",
        steps=800,
        batch_size=32,
        lr=3e-2,
        n_bins=8,
        eval_per_bin=128,
    ),
    "full": ExperimentConfig(
        name="full",
        context_lengths=(256, 1024),
        head_dims=(16, 32),
        # min_base(256, d) = 8570 (d = 16), 2168 (d = 32);
        # min_base(1024, d) = 413409 (d = 16), 58153 (d = 32)
        bases=(10.0, 100.0, 1000.0, 1e4, 1e5, 1e6),
        seeds=(0, 1, 2),
        n_keys=4096,
        distances="log_uniform",
        steps=2000,
        batch_size=32,
        lr=3e-2,
        n_bins=12,
        eval_per_bin=128,
    ),
    # The contrast: the cell of "full" with L = 1024, d = 32, trained on uniform distances.
    "uniform": ExperimentConfig(
        name="uniform",
        context_lengths=(1024,),
        head_dims=(32,),
        bases=(10.0, 100.0, 1000.0, 1e4, 1e5, 1e6),
        seeds=(0, 1, 2),
        n_keys=4096,
        distances="uniform",
        steps=2000,
        batch_size=32,
        lr=3e-2,
        n_bins=12,
        eval_per_bin=128,
    ),
}


def experiment_config(name: str) -> ExperimentConfig:
    """The named configuration of :data:`EXPERIMENT_CONFIGS`.

    Parameters
    ----------
    name : str
        ``"smoke"``, ``"full"`` or ``"uniform"``.

    Returns
    -------
    ExperimentConfig
    """
    return EXPERIMENT_CONFIGS[check_choice(name, "name", tuple(EXPERIMENT_CONFIGS))]


def _config(config: Any, name: str = "config") -> ExperimentConfig:
    """A configuration given by name or as an :class:`ExperimentConfig`."""
    if isinstance(config, ExperimentConfig):
        return config
    if isinstance(config, str):
        return EXPERIMENT_CONFIGS[check_choice(config, name, tuple(EXPERIMENT_CONFIGS))]
    raise TypeError(
        f"{name} must be one of {tuple(EXPERIMENT_CONFIGS)} or an ExperimentConfig, "
        f"got {_describe(config)}"
    )


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecallModel:
    """A trained recall layer (:func:`train_recall`): its setting and its weights.

    Attributes
    ----------
    config : ExperimentConfig
        Training and evaluation settings (the run's own L, d, base and seed are below).
    context_length, d, base, seed : int, int, float, int
        The run.
    key_emb : torch.Tensor
        The frozen key embedding, ``(n_keys, key_dim)``.
    w_q, w_k : torch.Tensor
        The learned projections, shape ``(d, key_dim)`` each.
    loss_curve : tuple of float
        Mean training loss over each tenth of the steps.
    train_seconds, train_cpu_seconds : float
        Wall time and CPU time (of this process) of the training; on a busy machine the CPU
        time is the better measure of the work.
    """

    config: ExperimentConfig
    context_length: int
    d: int
    base: float
    seed: int
    key_emb: Any = field(repr=False)
    w_q: Any = field(repr=False)
    w_k: Any = field(repr=False)
    loss_curve: tuple[float, ...] = ()
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0


def _generator(seed: int) -> Any:
    import torch

    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def _sample(
    gen: Any,
    n: int,
    length: int,
    n_keys: int,
    n_values: int,
    deltas: Any = None,
    distances: str = "uniform",
) -> tuple[Any, Any, Any, Any]:
    """``n`` contexts: keys and values (n, L), target index and distance (n,).

    Key ids are uniform (with replacement), except that no token other than the target carries
    the target's key, so the answer is unambiguous.  Distances not given are drawn from
    ``distances`` (see :class:`ExperimentConfig`).
    """
    import torch

    rows = torch.arange(n)
    keys = torch.randint(n_keys, (n, length), generator=gen)
    values = torch.randint(n_values, (n, length), generator=gen)
    if deltas is None and distances == "log_uniform":
        u = torch.rand(n, generator=gen, dtype=torch.float64) * math.log(length + 1)
        deltas = u.exp().floor().long().clamp_(1, length)  # clamp: exp rounding at the top
    elif deltas is None:
        deltas = torch.randint(1, length + 1, (n,), generator=gen)
    target = length - deltas
    clash = keys == keys[rows, target][:, None]
    clash[rows, target] = False
    shift = torch.randint(1, n_keys, (n, length), generator=gen)
    keys = torch.where(clash, (keys + shift) % n_keys, keys)
    return keys, values, target, deltas


def _forward(
    params: dict[str, Any],
    keys: Any,
    values: Any,
    target: Any,
    d: int,
    base: float,
    layout: str,
    n_values: int,
) -> tuple[Any, Any, Any, Any, Any]:
    """Logits, attention, pre-rotation q (n, d), k (n, L, d) and raw scores q^T R k (n, L)."""
    import torch

    from .rotation import apply_rope

    n, length = keys.shape
    emb = params["key_emb"]
    # Project the table once, then gather: the same numbers as E[keys] @ W^T up to float32
    # summation order, and far cheaper than projecting every token.
    k = (emb @ params["w_k"].T)[keys]
    q = emb[keys[torch.arange(n), target]] @ params["w_q"].T
    k_rot = apply_rope(k, np.arange(length), base, layout)
    q_rot = apply_rope(q[:, None, :], np.array([length]), base, layout)[:, 0]
    raw = torch.einsum("nld,nd->nl", k_rot, q_rot)
    scores = raw / math.sqrt(d)
    attn = torch.softmax(scores, dim=-1)
    # log of the attention mass on each value id, up to the shared normaliser.  A value id
    # absent from the context has mass 0: the clamp gives it a finite log and a zero gradient.
    top = scores.max(dim=1, keepdim=True).values.detach()
    mass = torch.zeros(n, n_values, dtype=scores.dtype).scatter_add(1, values, (scores - top).exp())
    logits = mass.clamp_min(1e-30).log() + top
    return logits, attn, q, k, raw


def train_recall(
    context_length: int, d: int, base: float, seed: int = 0, *, config: Any = "smoke"
) -> RecallModel:
    r"""Train one recall layer (module docstring) with the settings of ``config``.

    Parameters
    ----------
    context_length : int
        L, the number of context tokens (2 <= L <= 16384).
    d : int
        Head dimension, even, >= 2.
    base : float
        RoPE base b > 1.
    seed : int
        Seed of the initial weights, the frozen key embedding and the training data.
    config : str or ExperimentConfig
        Training settings: a name of :data:`EXPERIMENT_CONFIGS` or a configuration.

    Returns
    -------
    RecallModel
    """
    import torch

    cfg = _config(config)
    length = check_positive_int(
        context_length,
        "context_length",
        minimum=2,
        maximum=_MAX_LENGTH,
    )
    d = check_dim(d)
    if d > 1024:
        raise ValueError(f"d must be at most 1024 for this experiment, got {d}")
    base = check_base(base)
    seed = check_seed(seed, maximum=_MAX_SEED)
    if cfg.batch_size * length > _MAX_BATCH_TOKENS:
        raise ValueError(
            f"context_length * batch_size = {length * cfg.batch_size} tokens per step exceeds "
            f"{_MAX_BATCH_TOKENS}; use a shorter context_length or a smaller batch_size"
        )
    kd, nv = cfg.key_dim, cfg.n_values
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        init = _generator(2 * seed)
        data = _generator(2 * seed + 1)

        def normal(*shape: int, fan_in: int) -> Any:
            return torch.randn(*shape, generator=init) / math.sqrt(fan_in)

        key_emb = normal(cfg.n_keys, kd, fan_in=kd)
        params = {
            "w_q": normal(d, kd, fan_in=kd),
            "w_k": normal(d, kd, fan_in=kd),
        }
        for p in params.values():
            p.requires_grad_(True)
        opt = torch.optim.Adam(list(params.values()), lr=cfg.lr)
        losses = []
        for step in range(cfg.steps):
            for group in opt.param_groups:
                group["lr"] = cfg.lr * 0.5 * (1.0 + math.cos(math.pi * step / cfg.steps))
            keys, values, target, _ = _sample(
                data, cfg.batch_size, length, cfg.n_keys, nv, distances=cfg.distances
            )
            logits = _forward(
                {**params, "key_emb": key_emb}, keys, values, target, d, base, cfg.layout, nv
            )[0]
            answer = values[torch.arange(cfg.batch_size), target]
            loss = torch.nn.functional.cross_entropy(logits, answer)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        tenth = np.array_split(np.array(losses), min(10, len(losses)))
        return RecallModel(
            config=cfg,
            context_length=length,
            d=d,
            base=base,
            seed=seed,
            key_emb=key_emb,
            **{k: v.detach() for k, v in params.items()},
            loss_curve=tuple(float(part.mean()) for part in tenth),
            train_seconds=time.perf_counter() - t0,
            train_cpu_seconds=time.process_time() - c0,
        )
    finally:
        torch.set_num_threads(threads)


def _distance_bins(context_length: int, n_bins: int) -> np.ndarray:
    """Edges of the logarithmic distance bins over [1, L]: bin j is [e_j, e_{j+1})."""
    edges = np.unique(np.round(np.geomspace(1, context_length + 1, n_bins + 1)).astype(np.int64))
    return edges


def _pair_blocks(matrix: np.ndarray, layout: str) -> np.ndarray:
    """The d/2 diagonal 2 x 2 blocks of a d x d matrix, pair i on (a_i, b_i) of ``layout``."""
    d = matrix.shape[-1]
    idx = np.arange(d)
    a, b = (idx[0::2], idx[1::2]) if layout == "interleaved" else (idx[: d // 2], idx[d // 2 :])
    pairs = np.stack([a, b], axis=1)  # (d/2, 2)
    return matrix[pairs[:, :, None], pairs[:, None, :]]


def evaluate_recall(model: RecallModel, context_length: int | None = None) -> dict[str, Any]:
    r"""Accuracy by distance and the learned statistics, on the fixed held-out set.

    The held-out set depends on the configuration and the context length only (the same ids
    for every seed and base): ``eval_per_bin`` contexts per logarithmic distance bin, with the
    distance uniform within the bin.

    Parameters
    ----------
    model : RecallModel
        From :func:`train_recall`.
    context_length : int, optional
        Evaluate at this context length (default: the one the model was trained for).  A
        longer context than the model was trained for is refused.

    Returns
    -------
    dict
        ``bin_edges`` (bin j holds distances in ``[e_j, e_{j+1})``), per bin ``accuracy``,
        ``target_attention`` (mean softmax weight on the target) and ``margin`` (mean of the
        target's score minus the mean score of the other tokens, :math:`q^\top R k` unscaled);
        ``pair_energy`` (:func:`pair_energy` of :math:`W_q` and :math:`W_k`);
        the pre-rotation statistics ``mu_q``, ``mu_k`` (length d) and the pair blocks
        ``sigma_q_blocks``, ``sigma_k_blocks``, ``target_moment_blocks`` (:math:`E[k^*q^\top]`),
        each ``(d/2, 2, 2)``, nested lists.
    """
    import torch

    if not isinstance(model, RecallModel):
        raise TypeError(f"model must be a RecallModel from train_recall, got {_describe(model)}")
    cfg = model.config
    if context_length is None:
        length = model.context_length
    else:
        length = check_positive_int(
            context_length,
            "context_length",
            minimum=2,
            maximum=model.context_length,
            hint=f"the model was trained with context_length = {model.context_length}",
        )
    d, nv = model.d, cfg.n_values
    edges = _distance_bins(length, cfg.n_bins)
    gen = _generator(_EVAL_SEED + length)
    n_bins = len(edges) - 1
    deltas = torch.cat(
        [
            torch.randint(int(lo), int(hi), (cfg.eval_per_bin,), generator=gen)
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )
    keys, values, target, deltas = _sample(gen, len(deltas), length, cfg.n_keys, nv, deltas)
    params = {
        "key_emb": model.key_emb,
        "w_q": model.w_q,
        "w_k": model.w_k,
    }
    correct, attn_t, margin = [], [], []
    s_q = np.zeros(d)
    s_qq = np.zeros((d, d))
    s_k = np.zeros(d)
    s_kk = np.zeros((d, d))
    s_tq = np.zeros((d, d))
    chunk = max(1, (1 << 16) // length)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.no_grad():
            for start in range(0, len(deltas), chunk):
                sl = slice(start, start + chunk)
                rows = torch.arange(len(keys[sl]))
                logits, attn, q, k, raw = _forward(
                    params, keys[sl], values[sl], target[sl], d, model.base, cfg.layout, nv
                )
                answer = values[sl][rows, target[sl]]
                correct.append((logits.argmax(dim=1) == answer).double())
                attn_t.append(attn[rows, target[sl]].double())
                raw = raw.double()
                s_target = raw[rows, target[sl]]
                margin.append(s_target - (raw.sum(dim=1) - s_target) / (length - 1))
                q64, k64 = q.double().numpy(), k.double().numpy().reshape(-1, d)
                k_target = k[rows, target[sl]].double().numpy()
                s_q += q64.sum(axis=0)
                s_qq += q64.T @ q64
                s_k += k64.sum(axis=0)
                s_kk += k64.T @ k64
                s_tq += k_target.T @ q64
    finally:
        torch.set_num_threads(threads)
    n_q, n_k = len(deltas), len(deltas) * length
    mu_q, mu_k = s_q / n_q, s_k / n_k
    sigma_q = s_qq / n_q - np.outer(mu_q, mu_q)
    sigma_k = s_kk / n_k - np.outer(mu_k, mu_k)
    bins = np.repeat(np.arange(n_bins), cfg.eval_per_bin)

    def per_bin(parts: list) -> list[float]:
        values_ = torch.cat(parts).numpy()
        return [float(values_[bins == j].mean()) for j in range(n_bins)]

    w_q = model.w_q.double().numpy()
    w_k = model.w_k.double().numpy()
    return {
        "context_length": length,
        "bin_edges": [int(e) for e in edges],
        "accuracy": per_bin(correct),
        "target_attention": per_bin(attn_t),
        "margin": per_bin(margin),
        "pair_energy": pair_energy(w_q, w_k, cfg.layout).tolist(),
        "mu_q": mu_q.tolist(),
        "mu_k": mu_k.tolist(),
        "sigma_q_blocks": _pair_blocks(sigma_q, cfg.layout).tolist(),
        "sigma_k_blocks": _pair_blocks(sigma_k, cfg.layout).tolist(),
        "target_moment_blocks": _pair_blocks(s_tq / n_q, cfg.layout).tolist(),
    }


# --------------------------------------------------------------------------------------------
# what the chapter reads off the trained model
# --------------------------------------------------------------------------------------------
def _weight(w: Any, name: str) -> np.ndarray:
    arr = check_real_array(w, name, ndim=2, max_abs=1e150)
    if arr.shape[0] < 2 or arr.shape[0] % 2 or arr.shape[1] < 1:
        raise ValueError(
            f"{name} must have shape (d, width) with an even d >= 2 (rows are head "
            f"coordinates), got shape {arr.shape}"
        )
    return arr


def pair_energy(w_q: Any, w_k: Any, layout: str = "interleaved") -> np.ndarray:
    r"""Frobenius norm of each rotation pair's 2 x 2 block of :math:`W_q W_k^\top`.

    With :math:`q = W_q x` and :math:`k = W_k y` (rows are head coordinates, as in
    ``torch.nn.Linear``) the score is :math:`x^\top W_q^\top R\, W_k y`; for isotropic inputs
    its expectation on a matching pair is :math:`\operatorname{tr}(R\, W_k W_q^\top)`, which
    reads only the diagonal 2 x 2 blocks of :math:`W_q W_k^\top` (the same matrix as
    :math:`W_q^\top W_k` when the weights are written width x d).  The energy of pair
    :math:`i` is the Frobenius norm of its block.

    Parameters
    ----------
    w_q, w_k : array_like, shape (d, width)
        Query and key projections, d even.
    layout : {"interleaved", "half"}
        Pair :math:`i` is :math:`(2i, 2i+1)` or :math:`(i, i + d/2)`.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d // 2,)``, pair 0 (fastest) first.
    """
    w_q = _weight(w_q, "w_q")
    w_k = _weight(w_k, "w_k")
    layout = check_choice(layout, "layout", _LAYOUTS)
    if w_q.shape != w_k.shape:
        raise ValueError(f"w_q and w_k must have the same shape, got {w_q.shape} and {w_k.shape}")
    blocks = _pair_blocks(w_q @ w_k.T, layout)
    return np.sqrt((blocks**2).sum(axis=(1, 2)))


def general_form(
    m: Any,
    d: int,
    base: float,
    mu_q: Any,
    sigma_q: Any,
    mu_k: Any,
    layout: str = "interleaved",
) -> np.ndarray:
    r"""The general form of chapter 7: :math:`\operatorname{tr}(R_m\Sigma_q) + \mu_q^\top R_m
    (\mu_q - \mu_k)`.

    The expected advantage :math:`\delta_m` of a key similar to the query at relative position
    :math:`m` (key at position :math:`n + m` for a query at :math:`n`; a key :math:`\Delta` tokens
    before the query has :math:`m = -\Delta`).  Computed pair by pair: pair :math:`i` contributes
    :math:`\cos\alpha_i(S_{aa} + S_{bb}) + \sin\alpha_i(S_{ab} - S_{ba})` to the trace
    (:math:`\alpha_i = m\theta_i`; the sine term vanishes for a symmetric :math:`\Sigma_q`, and a
    non-symmetric matrix such as a cross moment is accepted) and
    :math:`\cos\alpha_i(u_a v_a + u_b v_b) + \sin\alpha_i(u_b v_a - u_a v_b)` to the mean term,
    with :math:`u = \mu_q`, :math:`v = \mu_q - \mu_k`.

    Parameters
    ----------
    m : int or array_like of int
        Relative positions (whole numbers).
    d : int
        Head dimension, even.
    base : float
        RoPE base > 1.
    mu_q, mu_k : array_like, shape (d,)
        Means of the query and of a random key.
    sigma_q : array_like, shape (d, d)
        Covariance of the query.
    layout : {"interleaved", "half"}
        Pair :math:`i` is :math:`(2i, 2i+1)` or :math:`(i, i + d/2)`.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``m``.
    """
    ms = check_integer_array(m, "m")
    d = check_dim(d)
    base = check_base(base)
    layout = check_choice(layout, "layout", _LAYOUTS)
    u = check_real_array(mu_q, "mu_q", ndim=1, max_abs=1e150)
    mk = check_real_array(mu_k, "mu_k", ndim=1, max_abs=1e150)
    s = check_real_array(sigma_q, "sigma_q", ndim=2, max_abs=1e150)
    for name, arr, shape in (("mu_q", u, (d,)), ("mu_k", mk, (d,)), ("sigma_q", s, (d, d))):
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape} for d = {d}, got {arr.shape}")
    v = u - mk
    idx = np.arange(d)
    a, b = (idx[0::2], idx[1::2]) if layout == "interleaved" else (idx[: d // 2], idx[d // 2 :])
    cos_w = s[a, a] + s[b, b] + u[a] * v[a] + u[b] * v[b]
    sin_w = s[a, b] - s[b, a] + u[b] * v[a] - u[a] * v[b]
    angle = ms.astype(np.float64)[..., None] * theta(d, base)
    return np.cos(angle) @ cos_w + np.sin(angle) @ sin_w


# --------------------------------------------------------------------------------------------
# the sweep: resumable, atomic files (rope_lib.sweep)
# --------------------------------------------------------------------------------------------
def _run_id(length: int, d: int, base: float, seed: int) -> str:
    return f"L{length}-d{d}-b{base!r}-s{seed}"


def _output_path(cfg: ExperimentConfig) -> Path:
    return _HERE / "data" / f"experiment_{cfg.name}.json"


#: CPU seconds per million context tokens of training (tokens x steps), measured on the
#: 2-core build machine: the full sweep, 2949 Mtok, took 1153 s of training.
_SECONDS_PER_MTOK = 0.39


def experiment_plan(config: Any = "smoke", build_dir: Any = None) -> SweepPlan:
    """The runs of a configuration, their cost and where their files go (nothing is trained).

    Parameters
    ----------
    config : str or ExperimentConfig
        A name of :data:`EXPERIMENT_CONFIGS` or a configuration.
    build_dir : path, optional
        Directory of the per-run files (default ``_build/experiment`` in the repository).

    Returns
    -------
    rope_lib.sweep.SweepPlan
    """
    cfg = _config(config)
    build = (
        as_path(build_dir, "build_dir")
        if build_dir is not None
        else _ROOT / "_build" / "experiment"
    )
    return SweepPlan(
        name=f"experiment {cfg.name}",
        key=cfg.key(),
        runs=tuple(cfg.runs()),
        run_id=lambda r: _run_id(*r),
        cost=lambda r: r[0] * cfg.steps * cfg.batch_size / 1e6,
        build_dir=build,
        unit="Mtok",
        seconds_per_unit=_SECONDS_PER_MTOK,
    )


def run_experiment(
    config: Any = "smoke",
    *,
    build_dir: Any = None,
    output: Any = None,
    progress: bool = True,
    max_new_runs: int | None = None,
) -> dict[str, Any] | None:
    """Train every run of a configuration (resuming) and write its results file.

    Each finished run is stored as ``<build_dir>/<key[:16]>/<run>.json``; runs whose file
    exists are loaded, not retrained.  When all runs are done the results are written to
    ``output``.  Every file is written atomically (temporary file, then ``os.replace``); the
    runner is :func:`rope_lib.sweep.run_sweep`.

    Parameters
    ----------
    config : str or ExperimentConfig
        A name of :data:`EXPERIMENT_CONFIGS` or a configuration.
    build_dir : path, optional
        Directory of the per-run files (default ``_build/experiment`` in the repository).
    output : path, optional
        Results file (default ``rope_lib/data/experiment_<name>.json``).
    progress : bool
        Show a progress bar with an ETA (tqdm if installed, else one line per run) on stderr.
    max_new_runs : int, optional
        Stop after training this many runs (the rest is left for a later call).

    Returns
    -------
    dict or None
        The results (as written to ``output``), or ``None`` when stopped by ``max_new_runs``
        before every run was done.
    """
    import torch

    cfg = _config(config)
    plan = experiment_plan(cfg, build_dir)
    out = as_path(output, "output") if output is not None else _output_path(cfg)

    def train(r: tuple) -> dict[str, Any]:
        model = train_recall(*r, config=cfg)
        return {
            "context_length": r[0],
            "d": r[1],
            "base": r[2],
            "seed": r[3],
            **evaluate_recall(model),
            "loss_curve": list(model.loss_curve),
            "train_seconds": model.train_seconds,
            "train_cpu_seconds": model.train_cpu_seconds,
        }

    def header(done: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "config": cfg.to_dict(),
            "code_files": [f"rope_lib/{n}" for n in CODE_FILES],
            "regenerate": _regenerate_hint(cfg.name),
            "torch_version": torch.__version__,
            "numpy_version": np.__version__,
            "machine": platform.machine(),
            "train_seconds": sum(run["train_seconds"] for run in done),
            "train_cpu_seconds": sum(run["train_cpu_seconds"] for run in done),
        }

    return run_sweep(
        name=plan.name,
        key=plan.key,
        runs=plan.runs,
        run_id=plan.run_id,
        train=train,
        cost=plan.cost,
        build_dir=plan.build_dir,
        output=out,
        header=header,
        progress=progress,
        max_new_runs=max_new_runs,
    )


def _regenerate_hint(name: str) -> str:
    if name in ("full", "uniform"):
        return "make experiment  (python -m rope_lib.experiment_cli --config full)"
    return f"python -m rope_lib.experiment_cli --config {name}"


def experiment_results(config: str = "full") -> dict[str, Any]:
    """The stored results of a named configuration, refused when missing or stale.

    Parameters
    ----------
    config : str
        A name of :data:`EXPERIMENT_CONFIGS`.

    Returns
    -------
    dict
        ``key``, ``config``, ``runs`` (one dict per run, as in :func:`evaluate_recall` plus
        ``context_length``, ``d``, ``base``, ``seed``, ``loss_curve``, ``train_seconds``,
        ``train_cpu_seconds``) and provenance (versions, machine, total training seconds).

    Raises
    ------
    FileNotFoundError
        The file does not exist; the message says how to generate it.
    ValueError
        The file was made by other code or another configuration (its key differs).
    """
    cfg = _config(config)
    return load_results(_output_path(cfg), cfg.key(), cfg.name, _regenerate_hint(cfg.name))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m rope_lib.experiment_cli --config full``."""
    parser = argparse.ArgumentParser(
        prog="python -m rope_lib.experiment_cli",
        description="Train the recall sweep of experiment 1 (resumable) and write its results.",
    )
    parser.add_argument("--config", required=True, choices=sorted(EXPERIMENT_CONFIGS))
    parser.add_argument(
        "--build-dir", default=None, help="per-run files (default _build/experiment)"
    )
    parser.add_argument("--output", default=None, help="results file (default rope_lib/data/...)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    blob = run_experiment(
        args.config, build_dir=args.build_dir, output=args.output, progress=not args.no_progress
    )
    assert blob is not None
    where = args.output or _output_path(experiment_config(args.config)).relative_to(_ROOT)
    print(f"wrote {where} ({len(blob['runs'])} runs, {blob['train_seconds']:.0f} s of training)")
    return 0
