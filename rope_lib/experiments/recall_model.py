r"""Experiment 1, the model: one RoPE attention layer trained on key-value recall (chapter 9).

The task (contexts, seeds, distances, held-out sets) is in
:mod:`rope_lib.experiments.recall_task`.  The layer:

Key ids are embedded by a *frozen* random table :math:`E` (``n_keys`` x ``key_dim``, entries
:math:`\mathcal N(0, 1/\text{key\_dim})`); the query and the target carry the same key vector
:math:`x = E_k`.  The only learned parameters are the projections :math:`W_q, W_k`
(:math:`d \times` ``key_dim``, no bias), and the values are read out exactly:

.. math::

    s_j = \frac{(R_L W_q x)^\top (R_{p_j} W_k x_j)}{\sqrt d}
        = \frac{q^\top R_{-\Delta_j} k_j}{\sqrt d}, \qquad
    a = \operatorname{softmax}(s), \qquad
    \text{logit}_v = \log \sum_{j : v_j = v} e^{s_j} = \log \sum_{j : v_j = v} a_j + \text{const},

with :math:`R` the rotation of :func:`rope_lib.apply_rope` (head dimension :math:`d`, base
:math:`b`) at the tokens' positions :math:`p_j` and the query's position :math:`L`: its cosines
and sines are read once per run from ``apply_rope`` for every position :math:`0..L`
(:func:`rotation_table`) and applied token by token (:func:`rotate`), since in sparse contexts
every token has its own position.  Everything
the layer learns is in :math:`W_q^\top R_m W_k`: the score model of chapter 7 with learned
instead of isotropic projections.  For isotropic inputs (:math:`E[xx^\top] = \sigma^2 I`) the
expected score of the target at distance :math:`\Delta` is
:math:`\sigma^2\operatorname{tr}(R_{-\Delta} F)` with the *learned form*
:math:`F = W_k W_q^\top`, and only the diagonal 2 x 2 pair blocks of :math:`F` enter the trace
(chapter 7, step 4 of the proof).  Pair :math:`i`'s block :math:`M` contributes

.. math:: \operatorname{tr}(R(\alpha) M) = c_i\cos\alpha + s_i\sin\alpha, \qquad
          c_i = M_{aa} + M_{bb},\quad s_i = M_{ab} - M_{ba},

at :math:`\alpha = -\Delta\theta_i`: an amplitude :math:`A_i = \sqrt{c_i^2 + s_i^2}` and a
*learned phase* :math:`\varphi_i = \operatorname{atan2}(s_i, c_i)`,
:math:`A_i\cos(\Delta\theta_i + \varphi_i)`.  Chapter 7's :math:`B_m` is the case
:math:`c_i` equal for every pair and :math:`s_i = 0`.

Training: Adam with a cosine learning-rate decay, cross-entropy on the value id, a fresh batch
every step, one thread.  :func:`run_recall` trains one run and evaluates it on its held-out
sets; the runner (:mod:`rope_lib.experiments.runner`) calls it for every run of a sweep.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validate import (
    _describe,
    check_base,
    check_choice,
    check_dim,
    check_integer_array,
    check_positive_int,
    check_real_array,
    check_seed,
)
from ..frequencies import theta
from ..rotation import apply_rope
from .recall_task import (
    LAYOUTS,
    MAX_SEED,
    Contexts,
    RecallCell,
    as_config,
    derived_seed,
    generator,
    heldout_contexts,
    sample_contexts,
    sample_distances,
)

__all__ = [
    "RecallModel",
    "train_recall",
    "evaluate_recall",
    "run_recall",
    "rotation_table",
    "rotate",
    "pair_blocks",
    "pair_energy",
    "rotation_terms",
    "general_form",
]


@dataclass(frozen=True)
class RecallModel:
    """A trained recall layer (:func:`train_recall`): its setting and its weights.

    Attributes
    ----------
    config : RecallConfig
        The sweep's shared settings.
    cell : RecallCell
        Span, tokens, head dimension and training distances of the run (its ``bases`` are
        those of the run only).
    base : float
        The run's base.
    seed : int
        The run's seed.
    key_emb, w_q, w_k : torch.Tensor
        The frozen key embedding ``(n_keys, key_dim)`` and the learned projections
        ``(d, key_dim)``.
    loss_curve : tuple of float
        Mean training loss over each tenth of the steps.
    train_seconds, train_cpu_seconds : float
        Wall time and CPU time of the training (on a busy machine the CPU time measures the
        work).
    """

    config: Any
    cell: RecallCell
    base: float
    seed: int
    key_emb: Any = field(repr=False)
    w_q: Any = field(repr=False)
    w_k: Any = field(repr=False)
    loss_curve: tuple[float, ...] = ()
    train_seconds: float = 0.0
    train_cpu_seconds: float = 0.0

    @property
    def d(self) -> int:
        """Head dimension."""
        return self.cell.d


def _project(emb: Any, w: Any, ids: Any) -> Any:
    """``E[ids] @ W^T``: through the table when the ids outnumber its rows (same numbers)."""
    if ids.numel() >= emb.shape[0]:
        return (emb @ w.T)[ids]
    return emb[ids] @ w.T


def rotation_table(span: int, d: int, base: float, layout: str = "half") -> tuple[Any, Any]:
    r"""Cosines and sines of every angle :math:`p\theta_i`, :math:`p = 0..L`, from
    :func:`rope_lib.apply_rope`.

    Rotating the vector with 1 on every pair's first coordinate and 0 on its second gives
    :math:`(\cos p\theta_i, \sin p\theta_i)` on pair :math:`i`; the table is that rotation at
    every position, read off pair by pair and cast to float32 (the angles are float64).

    Returns
    -------
    tuple of torch.Tensor
        ``(cos, sin)``, float32, shape ``(L + 1, d/2)`` each.
    """
    import torch

    pairs = _pairs(d, layout)
    unit = np.zeros((span + 1, d))
    unit[:, pairs[:, 0]] = 1.0
    turned = apply_rope(unit, np.arange(span + 1), base, layout)
    return (
        torch.from_numpy(turned[:, pairs[:, 0]]).float(),
        torch.from_numpy(turned[:, pairs[:, 1]]).float(),
    )


def rotate(x: Any, positions: Any, table: tuple[Any, Any], layout: str = "half") -> Any:
    r""":math:`R_{p}x` for every row of ``x`` at its own position, from a :func:`rotation_table`.

    ``x`` has shape ``(..., d)`` and ``positions`` (int64 tensor) the leading shape of ``x``;
    pair :math:`i` becomes :math:`(x_a\cos - x_b\sin,\ x_a\sin + x_b\cos)` of its angle, as
    in :func:`rope_lib.apply_rope` (differentiable in ``x``).
    """
    import torch

    cos, sin = table[0][positions], table[1][positions]
    d = x.shape[-1]
    if layout == "half":
        xa, xb = x[..., : d // 2], x[..., d // 2 :]
        return torch.cat([xa * cos - xb * sin, xa * sin + xb * cos], dim=-1)
    xa, xb = x[..., 0::2], x[..., 1::2]
    return torch.stack([xa * cos - xb * sin, xa * sin + xb * cos], dim=-1).reshape(x.shape)


def _forward(
    params: dict[str, Any], ctx: Contexts, table: tuple[Any, Any], layout: str, n_values: int
) -> tuple[Any, Any, Any, Any, Any]:
    """Logits, attention, pre-rotation q (n, d) and k (n, N, d), raw scores q^T R k (n, N)."""
    import torch

    n, tokens = ctx.keys.shape
    rows = torch.arange(n)
    k = _project(params["key_emb"], params["w_k"], ctx.keys)
    q = _project(params["key_emb"], params["w_q"], ctx.keys[rows, ctx.target])
    d = k.shape[-1]
    positions = torch.arange(tokens).expand(n, tokens) if ctx.positions is None else ctx.positions
    k_rot = rotate(k, positions, table, layout)
    q_rot = rotate(q, torch.full((n,), ctx.span), table, layout)
    raw = torch.einsum("njd,nd->nj", k_rot, q_rot)
    scores = raw / math.sqrt(d)
    attn = torch.softmax(scores, dim=-1)
    # log of the attention mass on each value id, up to the softmax's shared normaliser:
    # logsumexp of the scores of the tokens with that value id (-inf for an absent one)
    owns = ctx.values[..., None] == torch.arange(n_values)
    logits = torch.logsumexp(scores[..., None].masked_fill(~owns, -math.inf), dim=1)
    return logits, attn, q, k, raw


def _cell(span: Any, tokens: Any, d: Any, base: Any, distances: Any) -> RecallCell:
    return RecallCell(span=span, tokens=tokens, d=d, bases=(base,), distances=distances)


def train_recall(
    span: int,
    tokens: int,
    d: int,
    base: float,
    seed: int = 0,
    *,
    distances: str = "log_uniform",
    config: Any = "smoke",
) -> RecallModel:
    r"""Train one recall layer (module docstring) with the settings of ``config``.

    Parameters
    ----------
    span : int
        :math:`L`, the largest distance.
    tokens : int
        :math:`N \le L` context tokens (:math:`N = L`: dense contexts).
    d : int
        Head dimension, even, at most 1024.
    base : float
        RoPE base > 1.
    seed : int
        The run's seed: initial weights, key embedding and training data (never the base).
    distances : {"log_uniform", "uniform"}
        Distribution of the training distances.
    config : str or RecallConfig
        Shared settings: a name of :data:`rope_lib.experiments.recall_task.RECALL_CONFIGS`
        or a configuration.

    Returns
    -------
    RecallModel
    """
    import torch

    cfg = as_config(config)
    cell = _cell(span, tokens, d, base, distances)
    seed = check_seed(seed, maximum=MAX_SEED)
    base, d, kd, nv = cell.bases[0], cell.d, cfg.key_dim, cfg.n_values
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        init = generator(derived_seed("init", seed))
        data = generator(derived_seed("data", seed, cell.span, cell.tokens, cell.distances))

        def normal(*shape: int) -> Any:
            return torch.randn(*shape, generator=init) / math.sqrt(kd)

        key_emb = normal(cfg.n_keys, kd)  # first: the same table for every d
        params = {"w_q": normal(d, kd), "w_k": normal(d, kd)}
        for p in params.values():
            p.requires_grad_(True)
        opt = torch.optim.Adam(list(params.values()), lr=cfg.lr)
        rows = torch.arange(cfg.batch_size)
        table = rotation_table(cell.span, d, base, cfg.layout)
        losses = []
        for step in range(cfg.steps):
            for group in opt.param_groups:
                group["lr"] = cfg.lr * 0.5 * (1.0 + math.cos(math.pi * step / cfg.steps))
            deltas = sample_distances(data, cfg.batch_size, cell.span, cell.distances)
            ctx = sample_contexts(data, deltas, cell.span, cell.tokens, cfg.n_keys, nv)
            logits = _forward({**params, "key_emb": key_emb}, ctx, table, cfg.layout, nv)[0]
            loss = torch.nn.functional.cross_entropy(logits, ctx.values[rows, ctx.target])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        tenth = np.array_split(np.array(losses), min(10, len(losses)))
        return RecallModel(
            config=cfg,
            cell=cell,
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


def evaluate_recall(model: RecallModel, tokens: int | None = None) -> dict[str, Any]:
    r"""Accuracy by distance on the run's held-out set, and the statistics of the learned form.

    The held-out set depends on the seed, the span and the token count only
    (:func:`rope_lib.experiments.recall_task.heldout_contexts`).

    Parameters
    ----------
    model : RecallModel
        From :func:`train_recall`.
    tokens : int, optional
        Evaluate with this many context tokens over the same span (default: the training
        count).  More tokens means more distractors at the same distances.

    Returns
    -------
    dict
        ``tokens``; ``bin_edges`` (bin :math:`j` holds the distances :math:`[e_j, e_{j+1})`);
        per bin ``n`` (held-out contexts), ``correct`` (how many were answered right),
        ``accuracy`` (``correct / n``), ``target_attention`` (mean softmax weight on the
        target) and ``margin`` (mean of the target's raw score :math:`q^\top R k` minus the
        mean raw score of the other tokens).  At the training token count also the
        pre-rotation means ``mu_q``, ``mu_k`` (length d) and ``target_moment_blocks``, the
        pair blocks of :math:`E[k^* q^\top]` (:func:`pair_blocks`, ``(d/2, 2, 2)``).
    """
    import torch

    if not isinstance(model, RecallModel):
        raise TypeError(f"model must be a RecallModel from train_recall, got {_describe(model)}")
    cfg, cell = model.config, model.cell
    count = (
        cell.tokens
        if tokens is None
        else check_positive_int(tokens, "tokens", minimum=2, maximum=cell.span)
    )
    own = count == cell.tokens
    d, nv = model.d, cfg.n_values
    params = {"key_emb": model.key_emb, "w_q": model.w_q, "w_k": model.w_k}
    edges, chunks = heldout_contexts(cfg, model.seed, cell.span, count)
    table = rotation_table(cell.span, d, model.base, cfg.layout)
    correct, attn_t, margin = [], [], []
    s_q, s_k, s_tq, n_q, n_k = np.zeros(d), np.zeros(d), np.zeros((d, d)), 0, 0
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.no_grad():
            for ctx in chunks:
                rows = torch.arange(len(ctx.deltas))
                logits, attn, q, k, raw = _forward(params, ctx, table, cfg.layout, nv)
                answer = ctx.values[rows, ctx.target]
                correct.append((logits.argmax(dim=1) == answer).numpy())
                attn_t.append(attn[rows, ctx.target].double().numpy())
                raw = raw.double()
                s_target = raw[rows, ctx.target]
                others = (raw.sum(dim=1) - s_target) / (count - 1)
                margin.append((s_target - others).numpy())
                if own:
                    q64, k64 = q.double().numpy(), k.double().numpy()
                    s_q += q64.sum(axis=0)
                    s_k += k64.reshape(-1, d).sum(axis=0)
                    s_tq += k64[rows.numpy(), ctx.target.numpy()].T @ q64
                    n_q, n_k = n_q + len(q64), n_k + k64.shape[0] * k64.shape[1]
    finally:
        torch.set_num_threads(threads)
    n_bins = len(edges) - 1
    per = cfg.eval_per_bin
    right = np.concatenate(correct).reshape(n_bins, per)
    out: dict[str, Any] = {
        "tokens": count,
        "bin_edges": [int(e) for e in edges],
        "n": [per] * n_bins,
        "correct": [int(c) for c in right.sum(axis=1)],
        "accuracy": [float(a) for a in right.mean(axis=1)],
        "target_attention": [float(a) for a in np.concatenate(attn_t).reshape(n_bins, per).mean(1)],
        "margin": [float(m) for m in np.concatenate(margin).reshape(n_bins, per).mean(axis=1)],
    }
    if own:
        out["mu_q"] = (s_q / n_q).tolist()
        out["mu_k"] = (s_k / n_k).tolist()
        out["target_moment_blocks"] = pair_blocks(s_tq / n_q, cfg.layout).tolist()
    return out


def run_recall(config: Any, run: dict[str, Any]) -> dict[str, Any]:
    """Train and evaluate one run of a sweep (what the runner stores for it).

    Parameters
    ----------
    config : str or RecallConfig
        The sweep.
    run : dict
        One entry of ``config.runs()``: ``span``, ``tokens``, ``d``, ``distances``,
        ``eval_tokens``, ``base``, ``seed``.

    Returns
    -------
    dict
        JSON-ready: the run's parameters, ``form_blocks`` (pair blocks of the learned form
        :math:`F = W_k W_q^\top`, ``(d/2, 2, 2)``), ``evaluations`` (one
        :func:`evaluate_recall` dict per token count, the training count first),
        ``loss_curve`` and the CPU and wall seconds of training and evaluation.
    """
    cfg = as_config(config)
    model = train_recall(
        run["span"],
        run["tokens"],
        run["d"],
        run["base"],
        run["seed"],
        distances=run["distances"],
        config=cfg,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    evaluations = [evaluate_recall(model, n) for n in (run["tokens"], *run["eval_tokens"])]
    form = model.w_k.double().numpy() @ model.w_q.double().numpy().T
    return {
        **run,
        "form_blocks": pair_blocks(form, cfg.layout).tolist(),
        "evaluations": evaluations,
        "loss_curve": list(model.loss_curve),
        "train_seconds": model.train_seconds,
        "train_cpu_seconds": model.train_cpu_seconds,
        "eval_seconds": time.perf_counter() - t0,
        "eval_cpu_seconds": time.process_time() - c0,
    }


# --------------------------------------------------------------------------------------------
# the learned form, pair by pair
# --------------------------------------------------------------------------------------------
def _pairs(d: int, layout: str) -> np.ndarray:
    """``(d/2, 2)``: the coordinates (a_i, b_i) of pair i in ``layout``."""
    idx = np.arange(d)
    if layout == "interleaved":
        return np.stack([idx[0::2], idx[1::2]], axis=1)
    return np.stack([idx[: d // 2], idx[d // 2 :]], axis=1)


def pair_blocks(matrix: Any, layout: str = "half") -> np.ndarray:
    r"""The :math:`d/2` diagonal 2 x 2 blocks of a :math:`d \times d` matrix, one per pair.

    Block :math:`i` is :math:`\begin{pmatrix} M_{aa} & M_{ab} \\ M_{ba} & M_{bb}\end{pmatrix}`
    with :math:`(a, b) = (2i, 2i+1)` (``"interleaved"``) or :math:`(i, i + d/2)` (``"half"``).

    Returns
    -------
    numpy.ndarray
        float64, shape ``(d/2, 2, 2)``, pair 0 (fastest) first.
    """
    m = check_real_array(matrix, "matrix", ndim=2, max_abs=1e150)
    layout = check_choice(layout, "layout", LAYOUTS)
    if m.shape[0] != m.shape[1] or m.shape[0] < 2 or m.shape[0] % 2:
        raise ValueError(f"matrix must be square with an even size >= 2, got shape {m.shape}")
    pairs = _pairs(m.shape[0], layout)
    return m[pairs[:, :, None], pairs[:, None, :]]


def _blocks(blocks: Any, name: str = "blocks") -> np.ndarray:
    arr = check_real_array(blocks, name, max_abs=1e150)
    if arr.ndim != 3 or arr.shape[1:] != (2, 2) or arr.shape[0] < 1:
        raise ValueError(f"{name} must have shape (d/2, 2, 2), got {arr.shape}")
    return arr


def rotation_terms(blocks: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The cosine and sine weights :math:`(c_i, s_i)` of each pair block.

    :math:`\operatorname{tr}(R(\alpha)M_i) = c_i\cos\alpha + s_i\sin\alpha` with
    :math:`c_i = M_{aa} + M_{bb}` and :math:`s_i = M_{ab} - M_{ba}`, where :math:`R(\alpha)`
    rotates pair :math:`i` by :math:`\alpha`.

    Parameters
    ----------
    blocks : array_like, shape (d/2, 2, 2)
        Pair blocks (:func:`pair_blocks`).

    Returns
    -------
    tuple of numpy.ndarray
        ``(c, s)``, float64, shape ``(d/2,)`` each.
    """
    b = _blocks(blocks)
    return b[:, 0, 0] + b[:, 1, 1], b[:, 0, 1] - b[:, 1, 0]


def pair_energy(blocks: Any) -> np.ndarray:
    """Frobenius norm of each pair block: ``(d/2,)`` float64 (pair 0 first)."""
    b = _blocks(blocks)
    return np.sqrt((b**2).sum(axis=(1, 2)))


def general_form(
    m: Any,
    d: int,
    base: float,
    mu_q: Any,
    sigma_q: Any,
    mu_k: Any,
    layout: str = "half",
) -> np.ndarray:
    r"""Chapter 7's general form :math:`\operatorname{tr}(R_m\Sigma_q) + \mu_q^\top R_m(\mu_q -
    \mu_k)`, pair by pair.

    The expected advantage of a key similar to the query at relative position :math:`m` (a key
    :math:`\Delta` tokens before the query has :math:`m = -\Delta`).  Pair :math:`i`
    contributes :math:`c_i\cos\alpha_i + s_i\sin\alpha_i` with :math:`\alpha_i = m\theta_i`,
    :math:`(c_i, s_i)` the :func:`rotation_terms` of the block of :math:`\Sigma_q +
    (\mu_q - \mu_k)\mu_q^\top` (the mean term is
    :math:`\operatorname{tr}(R_m (\mu_q - \mu_k)\mu_q^\top)`).  A non-symmetric
    :math:`\Sigma_q` (a cross moment) is accepted: its antisymmetric part gives the sine terms.

    Parameters
    ----------
    m : int or array_like of int
        Relative positions.
    d : int
        Head dimension, even.
    base : float
        RoPE base > 1.
    mu_q, mu_k : array_like, shape (d,)
        Means of the query and of a random key.
    sigma_q : array_like, shape (d, d)
        Covariance (or cross moment) of the query.
    layout : {"half", "interleaved"}
        Which coordinates form pair :math:`i`.

    Returns
    -------
    numpy.ndarray
        float64, the shape of ``m``.
    """
    ms = check_integer_array(m, "m")
    d = check_dim(d)
    base = check_base(base)
    layout = check_choice(layout, "layout", LAYOUTS)
    u = check_real_array(mu_q, "mu_q", ndim=1, max_abs=1e150)
    mk = check_real_array(mu_k, "mu_k", ndim=1, max_abs=1e150)
    s = check_real_array(sigma_q, "sigma_q", ndim=2, max_abs=1e150)
    for name, arr, shape in (("mu_q", u, (d,)), ("mu_k", mk, (d,)), ("sigma_q", s, (d, d))):
        if arr.shape != shape:
            raise ValueError(f"{name} must have shape {shape} for d = {d}, got {arr.shape}")
    c, sn = rotation_terms(pair_blocks(s + np.outer(u - mk, u), layout))
    angle = ms.astype(np.float64)[..., None] * theta(d, base)
    return np.cos(angle) @ c + np.sin(angle) @ sn
