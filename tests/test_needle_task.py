"""Experiment 2's task (rope_lib.experiments.needle_task): the sampler's guarantees, checked by
brute force on the token sequences it returns, and the closed forms against enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lib.experiments import needle_task as nt

TASK = nt.NeedleTask(64, n_needles=8, n_queries=2)
SMALL = nt.NeedleTask(18, n_needles=3, n_queries=2, n_filler=4, n_keys=5, n_values=4)


def _eval(task: nt.NeedleTask, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    d = rng.integers(task.min_distance, task.max_distance + 1, size=n)
    return nt.sample_evaluation(task, rng, d)


@pytest.fixture(scope="module")
def big() -> dict[str, np.ndarray]:
    return _eval(TASK, 4000)


def _is_key(task: nt.NeedleTask, tok: np.ndarray) -> np.ndarray:
    return (tok >= task.key_offset) & (tok < task.value_offset)


def _is_value(task: nt.NeedleTask, tok: np.ndarray) -> np.ndarray:
    return (tok >= task.value_offset) & (tok < task.marker)


# ------------------------------------------------------------------ the sequence


def test_body_holds_exactly_the_needles(big: dict[str, np.ndarray]) -> None:
    """Read from the tokens alone: in the body every key is followed by a value, keys and values
    occur nowhere else, a sequence's keys are distinct and so are its values."""
    task, seq = TASK, big["input_ids"]
    body = seq[:, : task.body_length]
    for row in range(len(seq)):
        keys = np.flatnonzero(_is_key(task, body[row]))
        values = np.flatnonzero(_is_value(task, body[row]))
        assert len(keys) == task.n_needles and np.array_equal(values, keys + 1)
        assert len(set(body[row, keys])) == task.n_needles
        assert len(set(body[row, values])) == task.n_needles
        assert np.array_equal(np.sort(big["needle_pos"][row]), keys)
    assert (body[~(_is_key(task, body) | _is_value(task, body))] < task.n_filler).all()


def test_first_query_key_occurs_once_at_the_stated_distance(big: dict[str, np.ndarray]) -> None:
    task, seq = TASK, big["input_ids"]
    t = task.query_position
    assert (seq[:, t - 1] == task.marker).all()
    for row in range(len(seq)):
        where = np.flatnonzero(seq[row, :t] == seq[row, t])
        assert len(where) == 1
        assert t - where[0] == big["distance"][row]
        assert seq[row, where[0] + 1] == big["answer"][row] == seq[row, t + 1]


def test_queries_ask_needles_of_the_body() -> None:
    task = TASK
    rng = np.random.default_rng(3)
    b = nt.sample_batch(task, rng, nt.training_distances(task, rng, 2000))
    seq = b["input_ids"]
    tail = task.body_length + 3 * np.arange(task.n_queries)
    assert (seq[:, tail] == task.marker).all()
    for row in range(len(seq)):
        pairs = dict(
            zip(seq[row, b["needle_pos"][row]], seq[row, b["needle_pos"][row] + 1], strict=True)
        )
        for q in tail:
            assert pairs[seq[row, q + 1]] == seq[row, q + 2]
    assert b["value_target"].sum(axis=1).tolist() == [task.n_queries] * len(seq)
    assert (seq[b["value_target"]] >= task.value_offset).all()
    # the filler targets are filler tokens after filler tokens, and every such body token
    ft = b["filler_target"]
    assert (seq[ft] < task.n_filler).all()
    body = seq[:, : task.body_length]
    pairs = (body[:, 1:] < task.n_filler) & (body[:, :-1] < task.n_filler)
    assert ft[:, 1 : task.body_length].sum() == pairs.sum() == ft.sum()


# ------------------------------------------------------------------ the shortcuts


def test_elimination_never_decides_the_measured_query(big: dict[str, np.ndarray]) -> None:
    """Brute force from the tokens: the values not yet answered before the first query's
    answer are all n_p body values, so "pick an unanswered value" is right 1/n_p of the time."""
    task, seq = TASK, big["input_ids"]
    t = task.query_position
    left = []
    for row in range(len(seq)):
        body_values = set(
            seq[row, : task.body_length][_is_value(task, seq[row, : task.body_length])]
        )
        answered = set(
            seq[row, task.body_length : t + 1][_is_value(task, seq[row, task.body_length : t + 1])]
        )
        left.append(len(body_values - answered))
    assert min(left) == task.n_needles >= 2
    assert (nt.elimination_candidates(big, 0) == task.n_needles).all()


def test_later_training_queries_carry_no_elimination_signal() -> None:
    """Later queries ask needles with replacement: the second query repeats the first one's
    needle 1/n_p of the time (so a rule that avoids answered values is not rewarded)."""
    task = TASK
    rng = np.random.default_rng(5)
    n = 40_000
    b = nt.sample_batch(task, rng, nt.training_distances(task, rng, n))
    seq = b["input_ids"]
    t = task.query_position
    repeat = (seq[:, t + 3] == seq[:, t]).mean()
    se = math.sqrt((1 / 8) * (7 / 8) / n)
    assert abs(repeat - 1 / task.n_needles) < 5 * se
    assert (nt.elimination_candidates(b, 1) == task.n_needles - 1).all()


def _arrangements(cells: int, count: int) -> list[tuple[int, ...]]:
    """Every set of ``count`` non-overlapping two-cell blocks in ``cells`` cells (brute force)."""
    return [
        c
        for c in itertools.combinations(range(cells - 1), count)
        if all(b - a >= 2 for a, b in zip(c, c[1:], strict=False))
    ]


def _enumerated_latest(task: nt.NeedleTask, distance: int) -> tuple[float, dict]:
    """P(target latest) and the distribution of the others' positions, by enumerating every
    arrangement of the other needles around the target."""
    p0 = task.query_position - distance
    body = task.body_length
    layouts = []
    for c in _arrangements(body, task.n_needles - 1):
        if all(x + 1 < p0 or x > p0 + 1 for x in c):
            layouts.append(c)
    latest = sum(all(x < p0 for x in c) for c in layouts) / len(layouts)
    return latest, {c: 1 / len(layouts) for c in layouts}


@pytest.mark.parametrize("distance", range(3, SMALL.max_distance + 1))
def test_recency_probability_matches_enumeration(distance: int) -> None:
    latest, _ = _enumerated_latest(SMALL, distance)
    assert nt.recency_probability(SMALL, distance) == pytest.approx(latest, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("distance", [3, 5, 7, 10, SMALL.max_distance])
def test_other_needles_are_uniform_over_arrangements(distance: int) -> None:
    """Chi-square of the sampled layouts against the uniform law over every arrangement."""
    _, law = _enumerated_latest(SMALL, distance)
    n = 6000
    rng = np.random.default_rng(distance)
    b = nt.sample_batch(SMALL, rng, np.full(n, distance))
    seen: dict = {}
    for row in b["needle_pos"]:
        key = tuple(sorted(int(x) for x in row[1:]))
        assert key in law
        seen[key] = seen.get(key, 0) + 1
    expected = n / len(law)
    chi2 = sum((seen.get(k, 0) - expected) ** 2 / expected for k in law)
    dof = len(law) - 1
    assert chi2 < dof + 6 * math.sqrt(2 * max(dof, 1)) + 10


def test_recency_baseline_is_the_latest_needle_and_matches_the_closed_form(
    big: dict[str, np.ndarray],
) -> None:
    """Brute force from tokens: the value after the body's last key; its agreement with the
    answer, per distance, against recency_probability (4 binomial SE, pooled over the bin)."""
    task, seq = TASK, big["input_ids"]
    body = seq[:, : task.body_length]
    last_key = np.array([np.flatnonzero(_is_key(task, r))[-1] for r in body])
    latest = body[np.arange(len(body)), last_key + 1]
    assert np.array_equal(latest, big["latest_value"])
    hit = latest == big["answer"]
    assert np.array_equal(hit, nt.recency_baseline(big))
    for lo, hi in [(3, 5), (5, 9), (9, 17), (17, 33), (33, 60)]:
        m = (big["distance"] >= lo) & (big["distance"] < hi)
        p = np.mean([nt.recency_probability(task, int(d)) for d in big["distance"][m]])
        se = math.sqrt(max(p * (1 - p), 1e-4) / m.sum())
        assert abs(hit[m].mean() - p) < 4 * se + 1e-9
    assert nt.recency_probability(task, 3) == nt.recency_probability(task, 4) == 1.0
    assert nt.recency_probability(task, 33) < 1e-3


def test_absent_key_is_absent_and_only_the_key_differs(big: dict[str, np.ndarray]) -> None:
    task = TASK
    t = task.query_position
    main, absent = big["input_ids"], big["absent_ids"]
    differ = main != absent
    assert (differ.sum(axis=1) == 1).all() and differ[:, t].all()
    assert _is_key(task, absent[:, t]).all()
    for row in range(len(absent)):
        assert absent[row, t] not in absent[row, :t]


def test_repeat_query_repeats_the_answered_key(big: dict[str, np.ndarray]) -> None:
    t = TASK.query_position
    seq = big["input_ids"]
    assert (seq[:, t + 3] == seq[:, t]).all()
    assert (seq[:, t + 1] == big["answer"]).all() and (seq[:, t + 4] == big["answer"]).all()
    assert (seq[:, t + 2] == TASK.marker).all()


# ------------------------------------------------------------------ bins, filler, distances


@given(st.lists(st.integers(3, 59), min_size=1, max_size=50))
@settings(max_examples=50, deadline=None)
def test_bin_index_by_brute_force(distances: list[int]) -> None:
    edges = nt.distance_bins(TASK, [3, 5, 9, 17, 33, 49, 60])
    got = nt.bin_index(distances, edges)
    for d, j in zip(distances, got, strict=True):
        want = [k for k in range(len(edges) - 1) if edges[k] <= d < edges[k + 1]]
        assert [j] == want or (j == -1 and not want)


def test_training_distances_cover_the_range() -> None:
    rng = np.random.default_rng(1)
    for kind in ("uniform", "log-uniform"):
        d = nt.training_distances(TASK, rng, 50_000, kind)
        assert d.min() == 3 and d.max() == TASK.max_distance
        assert set(range(3, TASK.max_distance + 1)) == set(d.tolist())
    u = nt.training_distances(TASK, rng, 50_000, "uniform")
    assert abs(u.mean() - (3 + TASK.max_distance) / 2) < 0.3


def test_entropy_rate_of_a_two_state_chain() -> None:
    """Closed form: pi = (q, p)/(p + q) and H = pi_0 h(p) + pi_1 h(q)."""
    p, q = 0.3, 0.8
    h = lambda x: -x * math.log(x) - (1 - x) * math.log(1 - x)  # noqa: E731
    want = q / (p + q) * h(p) + p / (p + q) * h(q)
    assert nt.entropy_rate([[1 - p, p], [q, 1 - q]]) == pytest.approx(want, rel=1e-12)
    chain = nt.filler_chain(32, 3.0)
    assert np.allclose(chain.sum(axis=1), 1.0) and np.array_equal(chain, nt.filler_chain(32, 3.0))


def test_sampler_is_a_function_of_the_generator_state() -> None:
    a = _eval(TASK, 64, seed=9)
    b = _eval(TASK, 64, seed=9)
    assert all(np.array_equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------ argument checks


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"context_length": 20}, "context_length"),
        ({"context_length": 64, "n_needles": 1}, "n_needles"),
        ({"context_length": 64, "n_queries": 1}, "n_queries"),
        ({"context_length": 64, "n_keys": 8}, "n_keys"),
        ({"context_length": 64, "n_values": 7}, "n_values"),
        ({"context_length": 64, "n_filler": 1}, "n_filler"),
        ({"context_length": 64, "filler_sharpness": float("nan")}, "filler_sharpness"),
        ({"context_length": 64.5}, "context_length"),
        ({"context_length": "64"}, "context_length"),
    ],
)
def test_bad_task_fields_are_refused_by_name(kwargs: dict, name: str) -> None:
    with pytest.raises((ValueError, TypeError), match=name):
        nt.NeedleTask(**kwargs)


def test_bad_arguments_are_refused_by_name() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="distances"):
        nt.sample_batch(TASK, rng, [2])
    with pytest.raises(ValueError, match="distances"):
        nt.sample_batch(TASK, rng, [TASK.max_distance + 1])
    with pytest.raises(ValueError, match="distances"):
        nt.sample_batch(TASK, rng, [3.5])
    with pytest.raises(TypeError, match="rng"):
        nt.sample_batch(TASK, 0, [3])
    with pytest.raises(TypeError, match="task"):
        nt.sample_evaluation("task", rng, [3])
    with pytest.raises(ValueError, match="kind"):
        nt.training_distances(TASK, rng, 3, "linear")
    with pytest.raises(ValueError, match="edges"):
        nt.distance_bins(TASK, [3, 3, 9])
    with pytest.raises(ValueError, match="edges"):
        nt.distance_bins(TASK, [2, 9])
    with pytest.raises(ValueError, match="edges"):
        nt.distance_bins(TASK, [3, TASK.max_distance + 2])
    with pytest.raises(ValueError, match="p"):
        nt.entropy_rate([[0.5, 0.6], [0.5, 0.5]])
    with pytest.raises(ValueError, match="query"):
        nt.elimination_candidates(_eval(TASK, 2), TASK.n_queries)


def test_primacy_baseline_reads_the_earliest_needle() -> None:
    batch = {"needle_pos": np.array([[1, 5, 9], [5, 1, 9], [9, 5, 1]])}
    assert nt.primacy_baseline(batch).tolist() == [True, False, False]
    with pytest.raises(TypeError, match="batch"):
        nt.primacy_baseline([1, 2])
