r"""Experiment 2's task: needle recall that only a key match can answer, with its controls.

Chapter 9 trains a tiny Llama (:mod:`rope_lib.experiments.needle_model`) on this task across RoPE
bases.  Issue 20 showed that the first edition of the task could be solved without matching
keys: every long distance was measured at the last query, whose answer was the one needle value
not yet answered (elimination), and short distances at a query whose needle was almost always
the latest one (recency).  This module fixes the sampling so that the measured answer can only
come from the key, and builds three controls that show it.

The sequence
------------
:math:`L` tokens from four disjoint sets: ``n_filler`` filler tokens, ``n_keys`` keys,
``n_values`` values, and one query marker ``Q``.  The first :math:`L_b = L - 3 n_q` tokens
(the *body*, :math:`n_q` = ``n_queries``) are filler from a fixed random bigram chain
(:func:`filler_chain`) with :math:`n_p` = ``n_needles`` *needles* written over it: a needle is
a key at position :math:`p` and a value at :math:`p + 1`.  Needles do not overlap; the keys of
one sequence are distinct and so are its values, so a value names its needle.  The last
:math:`3 n_q` tokens are :math:`n_q` queries ``Q k v``, query :math:`j` at positions
:math:`L_b + 3j, L_b + 3j + 1, L_b + 3j + 2`.

The measured query
------------------
Every distance is measured at the **first** query: its key sits at :math:`t = L_b + 1`, it asks
for needle 0 (the *target*), whose key is at :math:`p_0 = t - \Delta`, and the retrieval is
right when the prediction at :math:`t` (the next token after ``Q k``) is the target's value.
Distances run from :math:`\Delta_{\min} = 3` (the needle right before the queries) to
:math:`\Delta_{\max} = t = L_b + 1` (the needle at position 0).  Why each shortcut fails there:

* **Elimination.**  No query has been answered before the first one, so every one of the
  :math:`n_p \ge 2` needle values is still a candidate: a rule that picks among unanswered
  values is right with probability :math:`1/n_p`.  (In training, the later queries ask needles
  drawn uniformly *with replacement*, independently of earlier queries, so elimination carries
  no information at any query and is never rewarded.)
* **Recency.**  Given the target's position, the other :math:`n_p - 1` needles are placed
  uniformly among all non-overlapping arrangements in the rest of the body
  (:func:`sample_batch`).  The target is the latest needle exactly when none of them falls in
  the :math:`R = L_b - p_0 - 2` body cells after it, which has probability

  .. math:: P_{\text{latest}}(\Delta) = \frac{N(p_0, n_p - 1)}
            {\sum_{a=0}^{n_p-1} N(p_0, a)\,N(R, n_p - 1 - a)},\qquad
            N(n, a) = \binom{n - a}{a},

  :math:`N(n, a)` being the number of ways to put :math:`a` two-cell needles in :math:`n`
  cells (:func:`recency_probability`).  It is 1 at :math:`\Delta \le 4` (no needle fits in
  between) and falls quickly with :math:`\Delta`; :func:`recency_baseline` counts it on the
  sampled evaluation set per distance bin.

The controls
------------
The evaluation set (:func:`sample_evaluation`) gives each body two sequences that differ only in
their queries.  In the *main* sequence the first query asks the target and the second query
repeats the first (same key, the first query's value given): the prediction at :math:`t` is the
main retrieval and the prediction at :math:`t + 3` is the **repeat control**.  In the *absent*
sequence the first query's key is a key that appears nowhere before :math:`t` (the **absent-key
control**).

* Absent key: the two sequences agree on every token up to :math:`t - 1`, so any rule that does
  not read the query's key gives the same answer to both.  The rate at which the absent query
  is answered with the target's value must therefore be compared with the main accuracy: what
  the main query gains over it is the key's contribution.  With no key to match, the target's
  value should come out no more often than any other needle's value (``1/n_p`` of the rate at
  which some needle value comes out).
* Repeat: a rule that avoids answered values (elimination) cannot return the value just
  answered; a key match returns it.
* Recency baseline: the accuracy of "answer with the latest needle's value", per distance bin,
  computed from the data (no model), next to the model's accuracy.

Randomness comes from ``numpy.random.Generator`` objects passed in by the caller, so a batch
is a pure function of the generator's state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import _describe, check_integer_array, check_positive_int, check_real

__all__ = [
    "NeedleTask",
    "filler_chain",
    "entropy_rate",
    "sample_batch",
    "sample_evaluation",
    "training_distances",
    "distance_bins",
    "bin_index",
    "recency_probability",
    "recency_baseline",
    "primacy_baseline",
    "elimination_candidates",
]

#: Seed of the filler's bigram chain (the same language for every run and every base).
CHAIN_SEED = 12_345
_MAX_LENGTH = 1 << 12
_MAX_VOCAB = 4096


@dataclass(frozen=True)
class NeedleTask:
    r"""The shape of a needle-recall sequence (module docstring).

    Attributes
    ----------
    context_length : int
        :math:`L`, tokens per sequence.
    n_needles : int
        :math:`n_p`, needles in the body (at least 2, so the first query is never decided by
        elimination).
    n_queries : int
        :math:`n_q`, queries at the end (at least 2: the second carries the repeat control).
    n_filler, n_keys, n_values : int
        Vocabulary sizes.  ``n_keys >= n_needles + 1`` (distinct keys and one absent key),
        ``n_values >= n_needles`` (distinct values).
    filler_sharpness : float
        :math:`\beta` of the filler chain (:func:`filler_chain`).
    filler_lag : int
        1: :math:`x_t \sim P[x_{t-1}]` (a bigram chain, predictable from the current token);
        2: :math:`x_t \sim P[x_{t-2}]` (predicting the next token needs the previous one, so the
        filler rewards a previous-token attention head).  Either way the filler's entropy rate
        is :func:`entropy_rate` of P: with lag 2 the even and the odd positions are two
        independent chains with transitions P.

    Raises
    ------
    ValueError, TypeError
        A field out of range, naming it; a context too short for the needles and queries.
    """

    context_length: int
    n_needles: int = 8
    n_queries: int = 2
    n_filler: int = 32
    n_keys: int = 32
    n_values: int = 32
    filler_sharpness: float = 3.0
    filler_lag: int = 1

    def __post_init__(self) -> None:
        n_q = check_positive_int(self.n_queries, "n_queries", minimum=2, maximum=256)
        n_p = check_positive_int(self.n_needles, "n_needles", minimum=2, maximum=1024)
        v = {
            "n_queries": n_q,
            "n_needles": n_p,
            "n_filler": check_positive_int(self.n_filler, "n_filler", 2, _MAX_VOCAB),
            "n_keys": check_positive_int(
                self.n_keys,
                "n_keys",
                n_p + 1,
                _MAX_VOCAB,
            ),
            "n_values": check_positive_int(self.n_values, "n_values", n_p, _MAX_VOCAB),
            "filler_sharpness": check_real(self.filler_sharpness, "filler_sharpness", 0.0, 20.0),
            "filler_lag": check_positive_int(self.filler_lag, "filler_lag", 1, 2),
        }
        shortest = 3 * n_q + 2 * n_p + 1
        length = check_positive_int(self.context_length, "context_length", 1, _MAX_LENGTH)
        if length < shortest:
            raise ValueError(
                f"context_length must be at least 3 n_queries + 2 n_needles + 1 = {shortest} "
                f"(the needles, one filler token and the queries must fit), got {length}"
            )
        v["context_length"] = length
        for key, value in v.items():
            object.__setattr__(self, key, value)

    @property
    def vocab_size(self) -> int:
        """Filler, keys, values and the query marker."""
        return self.n_filler + self.n_keys + self.n_values + 1

    @property
    def key_offset(self) -> int:
        """Token id of key 0 (keys are ``key_offset + 0 .. n_keys - 1``)."""
        return self.n_filler

    @property
    def value_offset(self) -> int:
        """Token id of value 0."""
        return self.n_filler + self.n_keys

    @property
    def marker(self) -> int:
        """Token id of the query marker ``Q``."""
        return self.vocab_size - 1

    @property
    def body_length(self) -> int:
        """:math:`L_b = L - 3 n_q`."""
        return self.context_length - 3 * self.n_queries

    @property
    def query_position(self) -> int:
        """:math:`t = L_b + 1`, the position of the first (measured) query's key."""
        return self.body_length + 1

    @property
    def min_distance(self) -> int:
        """3: the target's value right before the first query's marker."""
        return 3

    @property
    def max_distance(self) -> int:
        """:math:`t`: the target's key at position 0."""
        return self.query_position


def _task(task: Any) -> NeedleTask:
    if not isinstance(task, NeedleTask):
        raise TypeError(f"task must be a NeedleTask, got {_describe(task)}")
    return task


def _rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {_describe(rng)}")
    return rng


# --------------------------------------------------------------------------------------------
# the filler
# --------------------------------------------------------------------------------------------
def filler_chain(n_filler: int, sharpness: float) -> np.ndarray:
    r"""The filler's bigram chain: :math:`P_{ab} = \operatorname{softmax}_b(\beta z_{ab})`.

    :math:`z_{ab}` are standard normal numbers drawn from the fixed seed :data:`CHAIN_SEED`, so
    every run speaks the same filler language.

    Parameters
    ----------
    n_filler : int
        Filler tokens (rows and columns of P), >= 2.
    sharpness : float
        :math:`\beta \in [0, 20]` (0: uniform rows; larger: more predictable).

    Returns
    -------
    numpy.ndarray
        float64 (n_filler, n_filler), rows summing to one.
    """
    n = check_positive_int(n_filler, "n_filler", 2, _MAX_VOCAB)
    beta = check_real(sharpness, "sharpness", 0.0, 20.0)
    rng = np.random.default_rng(CHAIN_SEED)
    z = beta * rng.standard_normal((n, n))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def entropy_rate(p: Any) -> float:
    r"""Entropy rate of a Markov chain: :math:`H = -\sum_a \pi_a \sum_b P_{ab} \log P_{ab}`.

    :math:`\pi` is the stationary distribution (:math:`\pi P = \pi`, the eigenvector of
    :math:`P^\top` for eigenvalue 1).  The lowest expected next-token loss on the filler, in nats.

    Parameters
    ----------
    p : array_like
        A square row-stochastic matrix.

    Returns
    -------
    float
    """
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 1:
        raise ValueError(f"p must be a square matrix, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or arr.min() < 0 or not np.allclose(arr.sum(axis=1), 1.0):
        raise ValueError("p must be row-stochastic (entries >= 0, rows summing to one)")
    w, vecs = np.linalg.eig(arr.T)
    pi = np.real(vecs[:, np.argmin(np.abs(w - 1.0))])
    pi = pi / pi.sum()
    logp = np.log(arr, where=arr > 0, out=np.zeros_like(arr))
    return float(-(pi * (arr * logp).sum(axis=1)).sum())


def _filler(
    cum: np.ndarray, rng: np.random.Generator, n: int, length: int, lag: int = 1
) -> np.ndarray:
    r"""``n`` filler sequences of ``length`` tokens: the first ``lag`` tokens uniform, then
    :math:`x_t \sim P[x_{t - lag}]`; ``cum`` is P's row cumsum."""
    n_filler = cum.shape[0]
    u = rng.random((n, length))
    out = np.empty((n, length), dtype=np.int64)
    out[:, :lag] = rng.integers(n_filler, size=(n, lag))
    for t in range(lag, length):
        nxt = (cum[out[:, t - lag]] < u[:, t : t + 1]).sum(axis=1)
        out[:, t] = np.minimum(nxt, n_filler - 1)
    return out


# --------------------------------------------------------------------------------------------
# needle placement
# --------------------------------------------------------------------------------------------
def _log_arrangements(n: np.ndarray, a: np.ndarray) -> np.ndarray:
    r""":math:`\log N(n, a) = \log\binom{n-a}{a}` (ways to put a two-cell needles in n cells);
    ``-inf`` where no arrangement exists."""
    n = np.asarray(n, dtype=np.float64)
    a = np.asarray(a, dtype=np.float64)
    ok = (a >= 0) & (n - 2 * a >= 0)
    top = np.where(ok, n - a, 1.0)
    bot = np.where(ok, a, 0.0)
    lg = np.vectorize(math.lgamma)
    val = lg(top + 1) - lg(bot + 1) - lg(top - bot + 1)
    return np.where(ok, val, -np.inf)


def _split_weights(task: NeedleTask, target: np.ndarray) -> np.ndarray:
    """Probability of a other needles before the target (columns a = 0 .. n_p - 1), per row."""
    k = task.n_needles - 1
    a = np.arange(k + 1)[None, :]
    left = target[:, None]
    right = task.body_length - target[:, None] - 2
    logw = _log_arrangements(left, a) + _log_arrangements(right, k - a)
    logw = logw - logw.max(axis=1, keepdims=True)
    w = np.exp(logw)
    return w / w.sum(axis=1, keepdims=True)


def _choose_blocks(
    rng: np.random.Generator, cells: np.ndarray, count: np.ndarray, k: int
) -> np.ndarray:
    """Per row, ``count`` non-overlapping two-cell blocks placed uniformly in ``cells`` cells.

    Returns the blocks' first cells, shape (n, k), sorted, padded with -1 beyond ``count``.
    A uniform arrangement of a blocks and n - 2a single cells is a uniform choice of which
    a of the n - a items are blocks: starts c_i + i for sorted distinct c_i in [0, n - a).
    """
    n = len(cells)
    width = int(max(1, cells.max(initial=1)))
    items = cells - count  # n - a
    scores = rng.random((n, width))
    scores[np.arange(width)[None, :] >= items[:, None]] = np.inf
    # a random order of the valid indices [0, n - a) comes first (the others scored inf);
    # its first `count` entries are a uniform subset, sorted after masking the rest
    order = np.argsort(scores, axis=1, kind="stable")
    if order.shape[1] < k:
        order = np.pad(order, ((0, 0), (0, k - order.shape[1])))
    take = np.arange(k)[None, :] < count[:, None]
    chosen = np.sort(np.where(take, order[:, :k], np.iinfo(np.int64).max), axis=1)
    return np.where(take, chosen + np.arange(k)[None, :], -1)


def _place(task: NeedleTask, rng: np.random.Generator, target: np.ndarray) -> np.ndarray:
    """Key positions of the needles, shape (n, n_p), column 0 the target at ``target``.

    Given the target, the other needles are uniform over every non-overlapping arrangement in
    the rest of the body: a = how many lie before it, drawn with weights N(left, a) N(right,
    k - a); then a uniform arrangement on each side.
    """
    k = task.n_needles - 1
    n = len(target)
    w = _split_weights(task, target)
    u = rng.random(n)
    a = np.minimum((np.cumsum(w, axis=1) < u[:, None]).sum(axis=1), k)
    right_cells = task.body_length - target - 2
    left = _choose_blocks(rng, target, a, k)
    right = _choose_blocks(rng, right_cells, k - a, k)
    right = np.where(right >= 0, right + target[:, None] + 2, -1)
    # merge: the a left starts and the k - a right starts, in order
    both = np.concatenate([left, right], axis=1)
    both = np.sort(np.where(both >= 0, both, np.iinfo(np.int64).max), axis=1)[:, :k]
    return np.concatenate([target[:, None], both], axis=1)


# --------------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------------
def _check_distances(task: NeedleTask, distances: Any) -> np.ndarray:
    d = check_integer_array(distances, "distances", ndim=1)
    if d.size == 0:
        raise ValueError("distances must not be empty")
    lo, hi = task.min_distance, task.max_distance
    if d.min() < lo or d.max() > hi:
        raise ValueError(
            f"distances must lie in [{lo}, {hi}] (from the needle right before the queries to "
            f"the needle at position 0, for context_length = {task.context_length} and "
            f"n_queries = {task.n_queries}), got values in [{d.min()}, {d.max()}]"
        )
    return d


def sample_batch(task: Any, rng: Any, distances: Any) -> dict[str, np.ndarray]:
    r"""Training sequences: the first query's target at ``distances``, later queries at random.

    Per sequence: filler from the chain; :math:`n_p` needles with distinct keys and distinct
    values (uniform without replacement), needle 0's key at :math:`t - \Delta`, the others
    uniform over the non-overlapping arrangements of the rest of the body; query 0 asks
    needle 0; queries :math:`1 .. n_q - 1` ask needles drawn uniformly *with replacement*
    (so no query's answer follows from the earlier ones).

    Parameters
    ----------
    task : NeedleTask
    rng : numpy.random.Generator
        Source of all randomness (advanced in place).
    distances : array_like of int
        :math:`\Delta` per sequence, in ``[3, task.max_distance]``.

    Returns
    -------
    dict of numpy.ndarray
        ``input_ids`` (n, L) int64; ``filler_target`` (n, L) bool, positions whose token is a
        filler following a filler (trained on the chain); ``value_target`` (n, L) bool, the
        query values (trained); ``needle_pos`` (n, n_p) key positions, column 0 the target;
        ``needle_key``, ``needle_value`` (n, n_p) token ids; ``asked`` (n, n_q) needle index of
        each query; ``distance`` (n,); ``spare_key`` (n,) a key token absent from the
        sequence.
    """
    task = _task(task)
    rng = _rng(rng)
    dist = _check_distances(task, distances)
    n, n_p, n_q = len(dist), task.n_needles, task.n_queries
    t0 = task.query_position
    rows = np.arange(n)[:, None]
    cum = np.cumsum(filler_chain(task.n_filler, task.filler_sharpness), axis=1)
    seq = _filler(cum, rng, n, task.context_length, task.filler_lag)
    pos = _place(task, rng, t0 - dist)
    keys = np.argsort(rng.random((n, task.n_keys)), axis=1)[:, : n_p + 1]
    values = np.argsort(rng.random((n, task.n_values)), axis=1)[:, :n_p]
    key_tok = task.key_offset + keys[:, :n_p]
    value_tok = task.value_offset + values
    seq[rows, pos] = key_tok
    seq[rows, pos + 1] = value_tok
    asked = np.concatenate(
        [np.zeros((n, 1), dtype=np.int64), rng.integers(n_p, size=(n, n_q - 1))], axis=1
    )
    tail = task.body_length + 3 * np.arange(n_q)
    seq[:, tail] = task.marker
    seq[:, tail + 1] = np.take_along_axis(key_tok, asked, axis=1)
    seq[:, tail + 2] = np.take_along_axis(value_tok, asked, axis=1)
    is_filler = np.zeros((n, task.context_length), dtype=bool)
    is_filler[:, : task.body_length] = True
    is_filler[rows, pos] = False
    is_filler[rows, pos + 1] = False
    filler_target = np.zeros_like(is_filler)
    lag = task.filler_lag
    filler_target[:, lag:] = is_filler[:, lag:] & is_filler[:, :-lag]
    value_target = np.zeros_like(is_filler)
    value_target[:, tail + 2] = True
    return {
        "input_ids": seq,
        "filler_target": filler_target,
        "value_target": value_target,
        "needle_pos": pos,
        "needle_key": key_tok,
        "needle_value": value_tok,
        "asked": asked,
        "distance": dist,
        "spare_key": task.key_offset + keys[:, n_p],
    }


def sample_evaluation(task: Any, rng: Any, distances: Any) -> dict[str, np.ndarray]:
    r"""Held-out bodies, each as a *main* and an *absent* sequence (module docstring).

    The body and the queries are drawn as in :func:`sample_batch`, then the second query is set
    to repeat the first (key and value of the target) in the main sequence, and the absent
    sequence is the main one with the first query's key replaced by a key that appears nowhere
    in the sequence.

    Parameters
    ----------
    task : NeedleTask
    rng : numpy.random.Generator
    distances : array_like of int
        :math:`\Delta` of the target per body, in ``[3, task.max_distance]``.

    Returns
    -------
    dict of numpy.ndarray
        Everything :func:`sample_batch` returns (``input_ids`` is the main sequence), plus
        ``absent_ids`` (n, L); ``query_pos`` (n,) = :math:`t`, where the main, the absent and
        (at ``query_pos + 3``) the repeat predictions are read; ``answer`` (n,) the target's
        value; ``latest_value`` (n,) the value of the needle whose key is the last one in the
        body; ``absent_key`` (n,).
    """
    task = _task(task)
    rng = _rng(rng)
    batch = sample_batch(task, rng, distances)
    n = len(batch["distance"])
    t0 = task.query_position
    seq = batch["input_ids"]
    batch["asked"][:, 1] = 0
    seq[:, t0 + 3] = batch["needle_key"][:, 0]
    seq[:, t0 + 4] = batch["needle_value"][:, 0]
    absent = seq.copy()
    absent[:, t0] = batch["spare_key"]
    latest = np.argmax(batch["needle_pos"], axis=1)
    batch.update(
        absent_ids=absent,
        query_pos=np.full(n, t0, dtype=np.int64),
        answer=batch["needle_value"][:, 0].copy(),
        latest_value=batch["needle_value"][np.arange(n), latest],
        absent_key=batch["spare_key"].copy(),
    )
    return batch


def training_distances(task: Any, rng: Any, n: int, kind: str = "uniform") -> np.ndarray:
    r"""Distances of the first query in training.

    ``"uniform"``: uniform on the integers :math:`[3, \Delta_{\max}]`.  ``"log-uniform"``:
    :math:`\lfloor \exp(\ln 3 + u \ln((\Delta_{\max} + 1)/3)) \rfloor`, :math:`u \sim U[0, 1)`.

    Parameters
    ----------
    task : NeedleTask
    rng : numpy.random.Generator
    n : int
        How many.
    kind : {"uniform", "log-uniform"}

    Returns
    -------
    numpy.ndarray
        int64 (n,).
    """
    task = _task(task)
    rng = _rng(rng)
    n = check_positive_int(n, "n", maximum=1 << 24)
    lo, hi = task.min_distance, task.max_distance
    if kind == "uniform":
        return rng.integers(lo, hi + 1, size=n)
    if kind == "log-uniform":
        u = rng.random(n)
        d = np.floor(np.exp(math.log(lo) + u * math.log((hi + 1) / lo))).astype(np.int64)
        return np.clip(d, lo, hi)
    raise ValueError(f"kind must be one of ('uniform', 'log-uniform'), got {kind!r}")


# --------------------------------------------------------------------------------------------
# bins and baselines
# --------------------------------------------------------------------------------------------
def distance_bins(task: Any, edges: Any) -> np.ndarray:
    r"""Checked distance-bin edges: bin :math:`j` holds :math:`\Delta \in [e_j, e_{j+1})`.

    Parameters
    ----------
    task : NeedleTask
    edges : sequence of int
        Strictly increasing, at least two, :math:`e_0 \ge 3` and :math:`e_{-1} \le
        \Delta_{\max} + 1`.

    Returns
    -------
    numpy.ndarray
        int64 edges.
    """
    task = _task(task)
    e = check_integer_array(edges, "edges", ndim=1)
    if len(e) < 2 or np.any(np.diff(e) <= 0):
        raise ValueError(f"edges must be at least two strictly increasing integers, got {e}")
    if e[0] < task.min_distance or e[-1] > task.max_distance + 1:
        raise ValueError(
            f"edges must lie in [{task.min_distance}, {task.max_distance + 1}] (distances "
            f"3 .. {task.max_distance} for this task), got {e[0]} .. {e[-1]}"
        )
    return e


def bin_index(distances: Any, edges: Any) -> np.ndarray:
    """The bin of each distance (``-1`` outside every bin): ``j`` with ``e_j <= d < e_{j+1}``."""
    d = check_integer_array(distances, "distances", ndim=1)
    e = check_integer_array(edges, "edges", ndim=1)
    j = np.searchsorted(e, d, side="right") - 1
    return np.where((d >= e[0]) & (d < e[-1]), j, -1)


def recency_probability(task: Any, distance: int) -> float:
    r""":math:`P_{\text{latest}}(\Delta)`: the chance that the target is the latest needle.

    Exact count over the arrangements :func:`sample_batch` draws from (module docstring).

    Parameters
    ----------
    task : NeedleTask
    distance : int
        :math:`\Delta \in [3, \Delta_{\max}]`.

    Returns
    -------
    float
    """
    task = _task(task)
    d = _check_distances(task, [distance])
    w = _split_weights(task, task.query_position - d)
    return float(w[0, -1])


def recency_baseline(batch: dict[str, np.ndarray]) -> np.ndarray:
    """Per sequence, whether "answer with the latest needle's value" is right (bool (n,))."""
    if not isinstance(batch, dict) or "needle_pos" not in batch:
        raise TypeError(f"batch must be a dict from sample_evaluation, got {_describe(batch)}")
    latest = np.argmax(batch["needle_pos"], axis=1)
    return latest == 0


def primacy_baseline(batch: dict[str, np.ndarray]) -> np.ndarray:
    """Per sequence, whether "answer with the earliest needle's value" is right (bool (n,)).

    At the largest distances the target is the earliest needle, so this rule, which reads no
    key, is right there as often as recency is right at the smallest.
    """
    if not isinstance(batch, dict) or "needle_pos" not in batch:
        raise TypeError(f"batch must be a dict from sample_evaluation, got {_describe(batch)}")
    return np.argmin(batch["needle_pos"], axis=1) == 0


def elimination_candidates(batch: dict[str, np.ndarray], query: int = 0) -> np.ndarray:
    """Per sequence, how many needle values no earlier query has answered before ``query``.

    Elimination decides a query only when this is 1.  For the first query it is ``n_p``.
    """
    if not isinstance(batch, dict) or "asked" not in batch:
        raise TypeError(f"batch must be a dict from sample_batch, got {_describe(batch)}")
    n_q = batch["asked"].shape[1]
    q = check_positive_int(query, "query", minimum=0, maximum=n_q - 1)
    n_p = batch["needle_pos"].shape[1]
    answered = np.zeros((len(batch["asked"]), n_p), dtype=bool)
    rows = np.arange(len(answered))
    for j in range(q):
        answered[rows, batch["asked"][:, j]] = True
    return n_p - answered.sum(axis=1)
