r"""Experiment 2's model: a tiny Hugging Face Llama trained from scratch on needle recall.

One run (:func:`run_needle`) builds a ``transformers.LlamaForCausalLM`` from a tiny
``LlamaConfig`` (Hugging Face's own RoPE and attention, ``rope_theta`` = the base), trains it on
the task of :mod:`rope_lib.experiments.needle_task`, and evaluates the main query and its three
controls per distance bin on a held-out set.

Training
--------
The loss is a weighted sum of two means of the next-token cross-entropy
:math:`\ell_t = -\log p_\theta(x_t \mid x_{<t})`: over the filler positions :math:`F` (a filler
token after a filler token, so it follows the chain) and over the query values :math:`V` (every
query):

.. math:: \mathcal L = w_F\,\frac{1}{|F|}\sum_{t \in F} \ell_t + \frac{1}{|V|}\sum_{t \in V} \ell_t .

Needle keys and values and query keys are random and are not trained on.  AdamW
(:math:`\beta = (0.9, 0.98)`), a constant learning rate or a linear warm-up and a cosine decay
to zero (``lr_schedule``), gradient clipping at norm 1, a fresh batch every step, the first
query's distance drawn by :func:`~rope_lib.experiments.needle_task.training_distances`
(``train_distances``).  A *length curriculum* (``curriculum_steps > 0``) trains the first steps
on the same task at ``curriculum_length`` tokens; with RoPE the same weights run at any length.
The full configuration uses it: trained at 64 tokens from the start, this model stays at chance
(it never starts to match keys), while a first stage at 24 tokens lets it learn retrieval,
which then carries over to 64 tokens (pilots on the branch ``exp2``).

Determinism and pairing
-----------------------
A run uses one thread and three independent random streams derived from its seed alone:
the initial weights (``torch.manual_seed``), the training data and the evaluation data
(``numpy.random.default_rng([seed, stream])``).  Runs that share a seed therefore share their
initial weights, every training batch and the evaluation set whatever their base (a paired
design), and the same call returns bit-identical results on one machine.

Evaluation
----------
For each distance bin of ``bin_edges``, ``eval_per_bin`` held-out bodies whose target distance
is uniform on the bin's integers, each read as the main and the absent sequence of
:func:`~rope_lib.experiments.needle_task.sample_evaluation`.  An answer is the argmax of the
model's next-token distribution over the whole vocabulary.  Counted per bin:

``main_correct``
    the main query's answer is the target's value (the retrieval accuracy);
``main_latest``
    the main answer is the latest needle's value;
``recency_correct``
    the latest needle's value *is* the target's (the recency baseline: no model);
``repeat_correct``, ``repeat_other``
    the repeat query (second query, same key as the first, just answered) is answered with the
    target's value, or with another needle's value (elimination would do this);
``absent_target``, ``absent_latest``, ``absent_needle``
    the absent-key query is answered with the target's value, with the latest needle's value,
    with any needle's value (so ``absent_needle / n_needles`` is the rate of a needle picked
    without regard to position);
``primacy_correct``
    the earliest needle's value *is* the target's (the primacy baseline: no model; at the
    largest distances the target is the earliest needle);
``shifted_correct`` (when ``shift > 0``)
    the main query answered with the target's value when the same sequence is read with
    ``shift`` filler tokens in front: every distance the same, every position moved.  A model
    whose match depends on relative distance only is unaffected; one that uses absolute
    positions may fail (the translation control).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import (
    _describe,
    check_base,
    check_choice,
    check_dim,
    check_flag,
    check_positive_int,
    check_real,
    check_seed,
)
from . import needle_task as nt

__all__ = [
    "NeedleConfig",
    "NEEDLE_CONFIGS",
    "build_model",
    "train_needle",
    "evaluate_needle",
    "run_needle",
]

_MAX_SEED = 2**62
_MAX_BATCH_TOKENS = 1 << 20
#: Random streams derived from a run's seed.
_TRAIN_STREAM, _EVAL_STREAM = 1, 2
_EVAL_CHUNK = 256
_MAX_SHIFT = 1024


@dataclass(frozen=True, kw_only=True)
class NeedleConfig(nt.NeedleTask):
    r"""Everything that shapes a run of experiment 2: the task, and the model, training,
    evaluation and the sweep's bases and seeds.

    A configuration is a :class:`~rope_lib.experiments.needle_task.NeedleTask` with more
    fields: it inherits the task's fields and their checks, and :attr:`task` gives the task
    alone.  Every field but ``context_length`` is passed by keyword.

    Attributes
    ----------
    name : str
        An identifier (the sweep's name).
    context_length : int
        :math:`L`.
    head_dim, n_heads, n_layers, mlp_ratio : int
        The Llama: ``hidden_size = head_dim * n_heads``, ``n_layers`` decoder layers, MLP width
        ``mlp_ratio * hidden_size``.
    n_needles, n_queries, n_filler, n_keys, n_values : int
        The task (:class:`~rope_lib.experiments.needle_task.NeedleTask`).
    filler_sharpness : float
        :math:`\beta` of the filler chain.
    steps, batch_size, warmup : int
        AdamW steps (all stages), sequences per step, warm-up steps (``warmup < steps``).
    lr, weight_decay : float
        Peak learning rate and AdamW's weight decay.
    lr_schedule : str
        ``"cosine"`` (linear warm-up, then cosine decay to zero) or ``"constant"`` (``lr`` at
        every step; ``warmup`` must be 0).
    filler_weight : float
        :math:`w_F`, the weight of the filler term of the loss (0: no loss on the filler).
    curriculum_steps, curriculum_length : int
        The first ``curriculum_steps`` steps train on sequences of ``curriculum_length`` tokens
        (the same task otherwise), the remaining ``steps - curriculum_steps`` at
        ``context_length`` (0: no curriculum).
    train_distances : str
        ``"uniform"`` or ``"log-uniform"``: the first query's distance in training.
    bin_edges : tuple of int
        Distance bins :math:`[e_j, e_{j+1})` of the evaluation.
    eval_per_bin : int
        Held-out bodies per bin (each read with the main query and the controls).
    shift : int
        The translation control: the main sequence is also read with ``shift`` filler tokens
        (from the chain) in front, so every distance stays the same and every position moves
        by ``shift`` (0: no translation control).
    bases : tuple of float
        RoPE bases of the sweep (> 1).
    seeds : tuple of int
        Seeds of the sweep (>= 0).
    """

    name: str
    bin_edges: tuple[int, ...]
    bases: tuple[float, ...]
    seeds: tuple[int, ...]
    head_dim: int = 16
    n_heads: int = 4
    n_layers: int = 2
    mlp_ratio: int = 2
    attention_bias: bool = False
    steps: int = 3000
    batch_size: int = 32
    warmup: int = 100
    lr: float = 3e-3
    weight_decay: float = 0.0
    lr_schedule: str = "cosine"
    filler_weight: float = 1.0
    curriculum_steps: int = 0
    curriculum_length: int = 24
    train_distances: str = "uniform"
    eval_per_bin: int = 2560
    shift: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be an identifier such as 'smoke', got {self.name!r}")
        v: dict[str, Any] = {
            "bases": tuple(check_base(b, "bases entries") for b in _seq(self.bases, "bases")),
            "seeds": tuple(
                check_seed(s, "seeds entries", maximum=_MAX_SEED) for s in _seq(self.seeds, "seeds")
            ),
            "head_dim": check_dim(self.head_dim, "head_dim"),
            "n_heads": check_positive_int(self.n_heads, "n_heads", maximum=64),
            "n_layers": check_positive_int(self.n_layers, "n_layers", maximum=64),
            "mlp_ratio": check_positive_int(self.mlp_ratio, "mlp_ratio", maximum=16),
            "attention_bias": check_flag(self.attention_bias, "attention_bias"),
            "steps": check_positive_int(self.steps, "steps", maximum=10**6),
            "batch_size": check_positive_int(self.batch_size, "batch_size", maximum=4096),
            "warmup": check_positive_int(self.warmup, "warmup", minimum=0, maximum=10**6),
            "lr": check_real(self.lr, "lr", 0.0, 1.0, low_open=True),
            "weight_decay": check_real(self.weight_decay, "weight_decay", 0.0, 1.0),
            "lr_schedule": check_choice(self.lr_schedule, "lr_schedule", ("cosine", "constant")),
            "filler_weight": check_real(self.filler_weight, "filler_weight", 0.0, 10.0),
            "curriculum_steps": check_positive_int(
                self.curriculum_steps, "curriculum_steps", minimum=0, maximum=10**6
            ),
            "curriculum_length": check_positive_int(
                self.curriculum_length, "curriculum_length", maximum=_MAX_BATCH_TOKENS
            ),
            "train_distances": check_choice(
                self.train_distances, "train_distances", ("uniform", "log-uniform")
            ),
            "eval_per_bin": check_positive_int(self.eval_per_bin, "eval_per_bin", maximum=1 << 16),
            "shift": check_positive_int(self.shift, "shift", minimum=0, maximum=_MAX_SHIFT),
        }
        if v["head_dim"] > 1024:
            raise ValueError(f"head_dim must be at most 1024, got {v['head_dim']}")
        if v["warmup"] >= v["steps"]:
            raise ValueError(f"warmup must be smaller than steps = {v['steps']}, got {v['warmup']}")
        if v["lr_schedule"] == "constant" and v["warmup"] != 0:
            raise ValueError(f"warmup must be 0 with lr_schedule 'constant', got {v['warmup']}")
        if v["curriculum_steps"] >= v["steps"]:
            raise ValueError(
                f"curriculum_steps must be smaller than steps = {v['steps']} (the last stage "
                f"trains at context_length), got {v['curriculum_steps']}"
            )
        for key, value in v.items():
            object.__setattr__(self, key, value)
        shortest = 3 * self.n_queries + 2 * self.n_needles + 1
        if self.curriculum_steps and not shortest <= self.curriculum_length <= self.context_length:
            raise ValueError(
                f"curriculum_length must lie in [{shortest}, {self.context_length}] (the needles, "
                f"one filler token and the queries must fit, and the first stage is not longer "
                f"than context_length), got {self.curriculum_length}"
            )
        edges = nt.distance_bins(self.task, _seq(self.bin_edges, "bin_edges"))
        object.__setattr__(self, "bin_edges", tuple(int(e) for e in edges))
        if self.batch_size * self.context_length > _MAX_BATCH_TOKENS:
            raise ValueError(
                f"batch_size * context_length = {self.batch_size * self.context_length} tokens "
                f"per step exceeds {_MAX_BATCH_TOKENS}; use a smaller batch_size"
            )

    @property
    def task(self) -> nt.NeedleTask:
        """The task part of the configuration."""
        return self.task_at(self.context_length)

    def task_at(self, context_length: int) -> nt.NeedleTask:
        """The task at another context length (the curriculum's first stage)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(nt.NeedleTask)}
        return nt.NeedleTask(**(fields | {"context_length": context_length}))

    def runs(self) -> list[tuple[float, int]]:
        """Every run as ``(base, seed)``."""
        return [(b, s) for b in self.bases for s in self.seeds]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (tuples as lists)."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }


def _seq(values: Any, name: str) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise TypeError(f"{name} must be a sequence, got {_describe(values)}")
    if len(values) == 0:
        raise ValueError(f"{name} must not be empty")
    return tuple(values)


#: What the smoke and the full configuration share: the task's shape and the training recipe
#: the pilots settled on (branch ``exp2``), a first curriculum stage of 24 tokens included.
_RECIPE: dict[str, Any] = {
    "n_needles": 4,
    "n_queries": 4,
    "filler_lag": 2,
    "warmup": 0,
    "lr": 1e-3,
    "lr_schedule": "constant",
    "filler_weight": 0.0,
    "curriculum_length": 24,
}

NEEDLE_CONFIGS: dict[str, NeedleConfig] = {
    "smoke": NeedleConfig(
        name="smoke",
        context_length=32,
        bin_edges=(3, 5, 12, 22),
        bases=(10.0, 1e4),
        seeds=(0,),
        head_dim=8,
        n_heads=2,
        n_layers=2,
        n_keys=8,
        n_values=8,
        n_filler=8,
        steps=30,
        batch_size=8,
        curriculum_steps=10,
        eval_per_bin=16,
        **_RECIPE,
    ),
    "full": NeedleConfig(
        name="full",
        context_length=64,
        bin_edges=(3, 5, 9, 13, 17, 25, 33, 49, 54),
        bases=(10.0, 20.0, 30.0, 100.0, 1e4),
        seeds=(0, 1, 2, 3, 4),
        n_keys=16,
        n_values=16,
        steps=8000,
        curriculum_steps=6000,
        **_RECIPE,
    ),
}


def _config(config: Any) -> NeedleConfig:
    if isinstance(config, NeedleConfig):
        return config
    if isinstance(config, str):
        return NEEDLE_CONFIGS[check_choice(config, "config", tuple(NEEDLE_CONFIGS))]
    raise TypeError(
        f"config must be one of {tuple(NEEDLE_CONFIGS)} or a NeedleConfig, got {_describe(config)}"
    )


# --------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------
def build_model(config: Any, base: float, seed: int) -> Any:
    """A fresh ``LlamaForCausalLM`` of ``config`` with ``rope_theta = base``.

    Its weights depend on ``seed`` and the sizes only (not on ``base``); the caller's global
    torch random state is left as it was.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging

    cfg = _config(config)
    base = check_base(base)
    seed = check_seed(seed, maximum=_MAX_SEED)
    hidden = cfg.head_dim * cfg.n_heads
    hf = LlamaConfig(
        vocab_size=cfg.task.vocab_size,
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
        attention_bias=cfg.attention_bias,
    )
    hf._attn_implementation = "sdpa"
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return LlamaForCausalLM(hf)
    finally:
        logging.set_verbosity(verbosity)


def _lr(cfg: NeedleConfig, step: int) -> float:
    if cfg.lr_schedule == "constant":
        return cfg.lr
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * (step - cfg.warmup) / (cfg.steps - cfg.warmup)))


def train_needle(config: Any, base: float, seed: int) -> tuple[Any, dict[str, Any]]:
    """Train one model (module docstring); returns it (eval mode) and its training record."""
    import torch

    cfg = _config(config)
    base = check_base(base)
    seed = check_seed(seed, maximum=_MAX_SEED)
    stages = (cfg.task_at(cfg.curriculum_length), cfg.task)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        model = build_model(cfg, base, seed)
        rng = np.random.default_rng([seed, _TRAIN_STREAM])
        opt = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98)
        )
        filler_losses, value_losses = [], []
        model.train()
        for step in range(cfg.steps):
            for group in opt.param_groups:
                group["lr"] = _lr(cfg, step)
            task = stages[step >= cfg.curriculum_steps]
            dist = nt.training_distances(task, rng, cfg.batch_size, cfg.train_distances)
            batch = nt.sample_batch(task, rng, dist)
            ids = torch.from_numpy(batch["input_ids"])
            logits = model(input_ids=ids).logits
            ce = torch.nn.functional.cross_entropy(
                logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
            )
            filler = ce[torch.from_numpy(batch["filler_target"][:, 1:])].mean()
            values = ce[torch.from_numpy(batch["value_target"][:, 1:])].mean()
            loss = cfg.filler_weight * filler + values
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            filler_losses.append(float(filler.detach()))
            value_losses.append(float(values.detach()))
        model.eval()
        parts = min(10, cfg.steps)
        record = {
            "filler_loss_curve": [float(p.mean()) for p in np.array_split(filler_losses, parts)],
            "value_loss_curve": [float(p.mean()) for p in np.array_split(value_losses, parts)],
            "train_seconds": time.perf_counter() - t0,
            "train_cpu_seconds": time.process_time() - c0,
        }
        return model, record
    finally:
        torch.set_num_threads(threads)


def evaluate_needle(model: Any, config: Any, seed: int) -> dict[str, Any]:
    """Main query and controls per distance bin, and the filler loss (module docstring)."""
    import torch

    cfg = _config(config)
    seed = check_seed(seed, maximum=_MAX_SEED)
    task = cfg.task
    edges = np.asarray(cfg.bin_edges)
    rng = np.random.default_rng([seed, _EVAL_STREAM])
    dist = np.concatenate(
        [
            rng.integers(lo, hi, size=cfg.eval_per_bin)
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)
        ]
    )
    batch = nt.sample_evaluation(task, rng, dist)
    n = len(dist)
    t = task.query_position
    if cfg.shift:  # drawn after the evaluation set, which is therefore the same for any shift
        cum = np.cumsum(nt.filler_chain(cfg.n_filler, cfg.filler_sharpness), axis=1)
        prefix = nt._filler(cum, rng, n, cfg.shift, cfg.filler_lag)
        shifted_ids = np.concatenate([prefix, batch["input_ids"]], axis=1)
    answers: dict[str, list] = {"main": [], "repeat": [], "absent": [], "shifted": []}
    filler_sum, filler_count = 0.0, 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    try:
        with torch.no_grad():
            for start in range(0, n, _EVAL_CHUNK):
                sl = slice(start, start + _EVAL_CHUNK)
                ids = torch.from_numpy(batch["input_ids"][sl])
                logits = model(input_ids=ids).logits
                answers["main"].append(logits[:, t].argmax(dim=1).numpy())
                answers["repeat"].append(logits[:, t + 3].argmax(dim=1).numpy())
                ce = torch.nn.functional.cross_entropy(
                    logits[:, :-1].transpose(1, 2).double(), ids[:, 1:], reduction="none"
                )
                mask = torch.from_numpy(batch["filler_target"][sl, 1:])
                filler_sum += float(ce[mask].sum())
                filler_count += int(mask.sum())
                absent = model(input_ids=torch.from_numpy(batch["absent_ids"][sl])).logits
                answers["absent"].append(absent[:, t].argmax(dim=1).numpy())
                if cfg.shift:
                    moved = model(input_ids=torch.from_numpy(shifted_ids[sl])).logits
                    answers["shifted"].append(moved[:, t + cfg.shift].argmax(dim=1).numpy())
    finally:
        torch.set_num_threads(threads)
    main, repeat, absent = (np.concatenate(answers[k]) for k in ("main", "repeat", "absent"))
    target, latest = batch["answer"], batch["latest_value"]
    needles = batch["needle_value"]
    is_needle = lambda a: (needles == a[:, None]).any(axis=1)  # noqa: E731
    counts = {
        "main_correct": main == target,
        "main_latest": main == latest,
        "recency_correct": nt.recency_baseline(batch),
        "primacy_correct": nt.primacy_baseline(batch),
        "repeat_correct": repeat == target,
        "repeat_other": is_needle(repeat) & (repeat != target),
        "absent_target": absent == target,
        "absent_latest": absent == latest,
        "absent_needle": is_needle(absent),
    }
    if cfg.shift:
        counts["shifted_correct"] = np.concatenate(answers["shifted"]) == target
    bins = nt.bin_index(dist, edges)
    nb = len(edges) - 1
    out: dict[str, Any] = {
        "bin_edges": [int(e) for e in edges],
        "total": [int((bins == j).sum()) for j in range(nb)],
    }
    for key, hit in counts.items():
        out[key] = [int(hit[bins == j].sum()) for j in range(nb)]
    out["filler_loss"] = filler_sum / filler_count
    out["filler_tokens"] = filler_count
    out["eval_seconds"] = time.perf_counter() - t0
    return out


def run_needle(config: Any, base: float, seed: int) -> dict[str, Any]:
    """Train one model and evaluate it: the JSON-ready result of one run of the sweep."""
    cfg = _config(config)
    base = check_base(base)
    seed = check_seed(seed, maximum=_MAX_SEED)
    t0, c0 = time.perf_counter(), time.process_time()
    model, record = train_needle(cfg, base, seed)
    result = evaluate_needle(model, cfg, seed)
    return {
        "base": base,
        "seed": seed,
        **result,
        **record,
        "filler_entropy": nt.entropy_rate(nt.filler_chain(cfg.n_filler, cfg.filler_sharpness)),
        "wall_seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
    }
