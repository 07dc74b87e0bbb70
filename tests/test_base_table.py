"""Tests of rope_lib.base_table: chapter 7's table and the published methods beside it.

Independent routes: mpmath sums, direct float64 cosine sums and the infeasibility
certificate of ``tests/test_base_bound.py`` (written there, not the module's), a naive
transcription of Su's search, torch float32 (Men et al.'s check as quoted), NumPy float32,
and a hand-written HTML table.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rope_lib import _certified_sweep as cs
from rope_lib import base_bound as bb
from rope_lib import base_table as bt

from .test_base_bound import brute_horizon, certify_infeasible, feasible


def test_grid_search_and_published_values():
    assert bt.grid_min_base(1024) == 4300.0
    assert bt.brute_force_feasible(4300.0, 1024) == feasible(4300.0, 1024, 128)
    # Su's 1.2e4 for L = 2048 fails: the horizon of 1.2e4 is 1554
    assert brute_horizon(1.2e4, 128, 2048) == 1554 == bb.max_context(1.2e4)


def test_float32_margin_matches_torch():
    d, base = 128, 5e5
    m = np.arange(0, 1 << 20, 997)
    inv = (1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)).float()
    ref = torch.cos(torch.outer(torch.tensor(m, dtype=torch.float32), inv)).sum(-1).numpy()
    np.testing.assert_allclose(bt.float32_margin(m, d, base), ref, atol=2e-4)


# ------------------------------------------------------------------------------------------
# Su's published search, the grid hypothesis, the published tables
# ------------------------------------------------------------------------------------------
def naive_su(length: int, d: int) -> float:
    """Su's code (archive 10122) transcribed: every grid point checked, no shortcut."""
    top = 1000.0 * length
    m = np.arange(length, dtype=float)
    i = np.arange(d // 2)
    for k in range(1, 6):
        bs = np.linspace(0, 1, 10**k + 1)[1:] * top
        ys = np.array([np.cos(m[:, None] * b ** (-2 * i[None] / d)).sum(axis=1).min() for b in bs])
        top = float(bs[np.argmax(ys >= 0)])
        assert ys.max() >= 0  # argmax above is meaningful: some point passed
    return top


def test_su_min_base_equals_naive_transcription():
    for length, d in [(100, 8), (150, 32)]:
        assert bt.su_min_base(length, d) == naive_su(length, d)


def test_su_min_base_reproduces_the_rerun_and_the_printed_table():
    # Reviewer's independent rerun of Su's search: 4293.45 (L = 1024), 11587.4 (L = 2048).
    got = {L: bt.su_min_base(L) for L in (1024, 2048)}
    assert round(got[1024], 2) == 4293.45
    assert round(got[2048], 1) == 11587.4
    for L, b in got.items():
        assert feasible(b, L, 128)
        assert 0 <= b / bb.min_base(L) - 1 < 2e-5
    # printed to two digits, they are Su's table entries
    assert [float(f"{got[L]:.1e}") for L in (1024, 2048)] == [4.3e3, 1.2e4]
    assert not feasible(1.2e4, 2048, 128)  # ... and 1.2e4 fails: no grid search returns it


def test_grid_exact_check_agrees_with_brute_force():
    for L in (1024, 2048, 4096):
        assert bt.grid_min_base(L, exact=True) == bt.grid_min_base(L)
    assert bt.grid_min_base(2048) == 1.6e4 == bt.PUBLISHED_MIN_BASE[11][0]


def test_published_summary_classifies_rows():
    def row(L, base, paper, su, grid2):
        r2 = float(f"{base:.1e}")
        return {
            "L": L, "base": base, "base_m_le_L": base, "round2": r2, "grid2": grid2,
            "paper": paper, "paper_ok": paper >= base, "su": su, "su_ok": su == base,
        }  # fmt: skip

    rows = [row(1, 1234.0, 1300.0, 1200.0, 1300.0), row(2, 5678.0, 5700.0, 5700.0, 6000.0)]
    out = bt.published_summary(rows)
    assert out["su_round_down"] == [1] and out["su_round_up"] == [2]
    assert out["su_bad"] == [1, 2] and out["su_is_round2"] == [1, 2]
    assert out["paper_departs"] == [1] and out["grid_matches"] == [1]


def _independent_summary(top: int) -> None:
    """published_summary of the shipped table for L = 2^10 .. 2^top, against lists derived
    here from evidence that does not use the table's numbers as facts:

    * every base below b_T (1 - 1e-7) is infeasible (certify_infeasible, one chain over the
      rows; the table's b_T only says where to stop), and b_T itself is feasible
      (first_negative), so the minimum lies in [b_T (1 - 1e-7), b_T];
    * a published value is feasible or not by first_negative; an infeasible one is rounded
      down if it lies below b_T (1 - 1e-7), up if above b_T (then b_T, feasible, is below it);
    * the two-digit grid can return the paper's value only if that value is feasible and
      every grid point from the proven bound up to it fails.
    """
    ks = list(range(10, top + 1))
    rows = bt.min_base_table(ks)
    levels = [(r["L"], math.log(r["base"] * (1 - 1e-7))) for r in rows]
    reached = certify_infeasible(levels, 128)
    expected: dict[str, list[int]] = {
        key: []
        for key in (
            "su_is_round2",
            "su_bad",
            "su_round_down",
            "su_round_up",
            "paper_bad",
            "paper_departs",
            "grid_matches",
        )
    }
    for row, u_low in zip(rows, reached, strict=True):
        L, b_top = row["L"], row["base"]
        b_low = math.exp(u_low) * (1 - 1e-14)  # every base <= b_low is infeasible
        assert feasible(b_top, L, 128), L
        round2 = float(f"{b_low:.1e}")
        assert round2 == float(f"{b_top:.1e}")  # the minimum's two-digit rounding is known
        paper, su = bt.PUBLISHED_MIN_BASE[L.bit_length() - 1]
        if su == round2:
            expected["su_is_round2"].append(L)
        if not feasible(su, L, 128):
            expected["su_bad"].append(L)
            assert su < b_low or su > b_top, (L, su)
            expected["su_round_down" if su < b_low else "su_round_up"].append(L)
        paper_ok = feasible(paper, L, 128)
        if not paper_ok:
            expected["paper_bad"].append(L)
        if paper != round2:
            expected["paper_departs"].append(L)
            if paper_ok:
                grid = [c * 10.0**e for e in range(1, 12) for c in range(10, 100)]  # from 100 up
                between = [g for g in grid if b_low < g < paper]
                if not any(feasible(g, L, 128) for g in between):
                    expected["grid_matches"].append(L)
    summary = bt.published_summary(rows)
    for key, value in expected.items():
        assert summary[key] == value, (key, summary[key], value)


def test_published_values_classified_by_independent_evidence():
    """Rows L = 2^10 .. 2^17 (about 3 s of CPU): published_summary against lists derived here."""
    _independent_summary(17)


@pytest.mark.slow
def test_published_values_classified_by_independent_evidence_long_rows():
    """All rows, L = 2^10 .. 2^20: about 30 s of CPU (the certificate chain, then full scans)."""
    _independent_summary(20)


# ------------------------------------------------------------------------------------------
# float32: the minimum moves by ~1e-6 and the verdict at the exact minimum is a knife edge
# ------------------------------------------------------------------------------------------
def numpy_f32_min(inv: np.ndarray, length: int) -> float:
    m = np.arange(length, dtype=np.float32)
    return float(np.cos(np.multiply.outer(m, inv).astype(np.float32)).sum(axis=1).min())


def test_float32_min_base_passes_and_the_point_below_fails():
    for L in (1024, 2048, 4096):
        b = bt.float32_min_base(L)
        below = b - bb.min_base(L) * 1e-8
        rounded = lambda x: np.array(  # noqa: E731
            [x ** (-2.0 * i / 128) for i in range(64)], dtype=np.float32
        )
        assert numpy_f32_min(rounded(b), L) >= 0 > numpy_f32_min(rounded(below), L)
        assert abs(b / bb.min_base(L) - 1) < 2e-6


def test_float32_verdict_depends_on_the_theta_recipe():
    L, d = 2048, 128
    b0 = bb.min_base(L)
    m = torch.arange(L, dtype=torch.float32)
    hf = 1.0 / (b0 ** (torch.arange(0, d, 2).float() / d))  # Hugging Face's float32 recipe
    rounded = torch.tensor([b0 ** (-2.0 * i / d) for i in range(d // 2)], dtype=torch.float64)
    score = lambda inv: float(torch.cos(torch.outer(m, inv)).sum(-1).min())  # noqa: E731
    assert score(hf) >= 0 > score(rounded.float())
    assert bt.float32_margin(np.arange(L), d, b0, inv_freq=hf.numpy()).min() >= 0
    assert bt.float32_margin(np.arange(L), d, b0).min() < 0


def test_html_table():
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows: list[list[str]] = []

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])

        def handle_data(self, data):
            if self.rows:
                self.rows[-1].append(data)

    parser = Cells()
    parser.feed(bt.html_table(["a", "b"], [[1, "<b>no</b>"], ["x", 2.5]]))
    assert parser.rows == [["a", "b"], ["1", "no"], ["x", "2.5"]]
    with pytest.raises(ValueError, match="cells"):
        bt.html_table(["a", "b"], [[1]])


#: A floor on the wall time of one sweep iteration or full scan: CPython with NumPy cannot do
#: one in under a microsecond (each makes several NumPy calls), so a recorded time below
#: 1e-6 * (n_steps + n_scans) was not measured on the computation it describes.
_SECONDS_FLOOR = 1e-6


def test_table_seconds_are_a_cold_measurement_even_when_the_memo_is_warm():
    """min_base_table times a fresh chain of sweeps: warming min_base's memo first must not
    turn the recorded seconds into the time of a memo look-up."""
    d = 16
    bb.min_base(512, d)  # memoises 4, 8, ..., 512 for d = 16
    rows = bt.min_base_table((8, 9), d, use_cache=False)
    again = bt.min_base_table((8, 9), d, use_cache=False)
    for row, other in zip(rows, again, strict=True):
        assert row["seconds"] >= _SECONDS_FLOOR * (row["n_steps"] + row["n_scans"])
        # a cold chain does the same work every time, whatever the memo held
        assert row["work"] == other["work"] > 0
        assert (row["n_steps"], row["n_scans"]) == (other["n_steps"], other["n_scans"])
    # and min_base_search keeps the cost of the computation that made a memoised result
    first = bb.min_base_search(512, d)
    assert bb.min_base_search(512, d).seconds == first.seconds
    assert first.seconds >= _SECONDS_FLOOR * (first.n_steps + first.n_scans)


def test_stored_table_seconds_are_real_measurements():
    """The seconds the chapter glues (the last row, cumulative over the chain) were measured on
    a cold computation: at least a microsecond per iteration, and the stored work is what a
    cold recomputation of the first rows does."""
    import json

    rows = json.loads(bt._CACHE.read_text())["rows"]
    assert sorted(map(int, rows)) == list(range(10, 21))
    for row in rows.values():
        assert row["work"] > 0
        assert row["seconds"] >= _SECONDS_FLOOR * (row["n_steps"] + row["n_scans"])
    ordered = [rows[str(k)] for k in range(10, 21)]
    assert all(a["seconds"] < b["seconds"] for a, b in zip(ordered[:-1], ordered[1:], strict=True))
    fresh = bt.min_base_table((10, 11), use_cache=False)
    for row in fresh:
        stored = rows[str(row["L"].bit_length() - 1)]
        assert (row["n_steps"], row["n_scans"], row["work"]) == (
            stored["n_steps"],
            stored["n_scans"],
            stored["work"],
        )
        assert row["base"] == pytest.approx(stored["base"], rel=1e-12)


def test_table_source_files_are_all_the_code_the_table_runs():
    """The cache key covers TABLE_SOURCE_FILES; computing a table (sweeps, m <= L sweeps, grid
    checks, horizons of published values) runs no other file of rope_lib. (It runs
    base_table.py, base_bound.py, _certified_sweep.py and _validate.py; frequencies.py, which
    defines theta_i for the package, is in the key as well, so that a change to the
    frequencies recomputes the table.)"""
    import sys
    from pathlib import Path

    package = Path(bb.__file__).parent
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.parent == package:
                seen.add(path.name)

    sys.setprofile(profile)
    try:
        bt.min_base_table((4, 5), 8, use_cache=False)
        bt.min_base_table((10,), 128, use_cache=False)
    finally:
        sys.setprofile(None)
    assert {"base_table.py", "base_bound.py", "_certified_sweep.py"} <= seen
    assert seen <= set(bt.TABLE_SOURCE_FILES)
    # nothing in the key that the table does not run, but for the frequencies
    assert set(bt.TABLE_SOURCE_FILES) - seen <= {"frequencies.py"}


@pytest.mark.parametrize("flag", ["no", "", 0, 1, None, 2.0])
def test_use_cache_must_be_a_bool_and_the_shipped_table_is_not_rewritten(flag):
    before = bt._CACHE.read_bytes()
    with pytest.raises(TypeError, match="use_cache"):
        bt.min_base_table((4,), 8, use_cache=flag)
    # Non-default calls read the cache at most; they never write it.
    bt.min_base_table((4, 5), 8, use_cache=True)
    bt.min_base_table((10,), 128, use_cache=True)
    bt.min_base_table((10, 11), 128, use_cache=False)
    assert bt._CACHE.read_bytes() == before


def test_limits_are_refused_quickly_by_name():
    import time

    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"context_length must be an integer <= 4194304"):
        bb.min_base(10**12)
    with pytest.raises(ValueError, match="context_length"):
        bb.min_base_search(bb.MAX_CONTEXT_LENGTH + 1)
    with pytest.raises(ValueError, match=r"limit must be an integer <= 67108864"):
        bb.max_context(1e300, limit=10**12)
    with pytest.raises(ValueError, match=r"\bm\b must be integers of magnitude"):
        bb.similarity_margin([2**60], 8)
    with pytest.raises(ValueError, match="log2_lengths"):
        bt.min_base_table((22,), 8, use_cache=False)
    with pytest.raises(ValueError, match="levels"):
        bt.su_min_base(64, 8, levels=8)
    with pytest.raises(ValueError, match="digits"):
        bt.grid_min_base(64, 8, digits=16)
    with pytest.raises(ValueError, match="n_samples"):
        bb.similarity_gap_monte_carlo([1, 2], 8, n_samples=10**9)
    assert time.perf_counter() - t0 < 5


def test_other_searches_have_budgets():
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bt.grid_min_base(1024, 8, max_steps=3)
    assert bt.grid_min_base(16, 8, max_steps=10**4) == bt.grid_min_base(16, 8)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bt.su_min_base(64, 8, levels=3, max_steps=50)
    with pytest.raises(ValueError, match="max_steps"):
        bt.float32_min_base(64, 8, rel_step=1e-9, max_steps=1000)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.feasible_window_top(200.0, 16, 8, max_steps=2)
    with pytest.raises(TypeError, match="max_steps"):
        bb.min_base(16, 8, max_steps=True)


def test_argument_checks_name_the_argument():
    with pytest.raises(ValueError, match="confidence"):
        bb.similarity_gap_monte_carlo([1], 8, confidence=1.0)
    with pytest.raises(TypeError, match="confidence"):
        bb.similarity_gap_monte_carlo([1], 8, confidence="0.9")
    with pytest.raises(TypeError, match="eps_scale"):
        bb.similarity_gap_monte_carlo([1], 8, eps_scale="a")
    with pytest.raises(ValueError, match="seed"):
        bb.similarity_gap_monte_carlo([1], 8, seed=-1)
    with pytest.raises(TypeError, match="mean_q"):
        bb.similarity_gap_expected([1], 8, mean_q=object())
    with pytest.raises(ValueError, match="mean_k"):
        bb.similarity_gap_expected([1], 8, mean_k=[1.0, 2.0])
    with pytest.raises(TypeError, match="exact"):
        bt.grid_min_base(16, 8, exact="no")
    with pytest.raises(TypeError, match="inv_freq"):
        bt.float32_min_base(16, 8, inv_freq=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="rows"):
        bt.published_summary(object())
    with pytest.raises(TypeError, match="header"):
        bt.html_table(object(), [])


# ----------------------------------------------------------------- fuzz report regressions
def test_huge_python_ints_are_refused_by_name():
    # item 1
    with pytest.raises(ValueError, match="rel_step"):
        bb.feasible_window_top(2000.0, 64, 16, rel_step=10**400)
    with pytest.raises(ValueError, match="start"):
        bt.grid_min_base(64, 8, start=10**400)
    with pytest.raises(ValueError, match="base"):
        bb.similarity_margin([1], 8, base=10**400)


@pytest.mark.parametrize("length", [1, 2])
def test_su_min_base_needs_three_distances(length):
    # item 10: for L <= 2 every base works, and the grid search would return a "base" < 1
    with pytest.raises(ValueError, match="context_length"):
        bt.su_min_base(length, 16, levels=3)


def test_su_min_base_large_d_does_not_allocate_a_huge_table():
    # item 8: (bases x witnesses x d/2) in blocks; the result passes the direct sums here.
    import tracemalloc

    tracemalloc.start()
    got = bt.su_min_base(8, d=4096, levels=2)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**28
    assert brute_horizon(got, 4096, 8) is None


@pytest.mark.parametrize(
    "bad", [np.full(4, np.nan, np.float32), np.full(4, np.inf, np.float32), -np.ones(4, np.float32)]
)
def test_float32_margin_refuses_bad_inv_freq(bad):
    # item 13
    with pytest.raises(ValueError, match="inv_freq"):
        bt.float32_margin([0, 3], 8, inv_freq=bad)
    with pytest.raises(ValueError, match="inv_freq"):
        bt.float32_margin([0, 3], 8, inv_freq=np.ones(3, np.float32))


def test_float32_min_base_refuses_a_nan_recipe():
    # item 14: not the misleading "widen rel_span"
    with pytest.raises(ValueError, match="inv_freq"):
        bt.float32_min_base(64, 16, inv_freq=lambda b: np.full(8, np.nan, np.float32))


def test_budgets_count_work_not_only_iterations():
    # item 6: one full scan of all m < L costs about L / 1024 steps, so a budget that would
    # allow many iterations stops a search whose scans are long, quickly.
    import time

    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"max_steps = 3000; pass a larger max_steps"):
        bb.min_base(2**21 + 1, 16, max_steps=3000)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bt.grid_min_base(2**21, 16, max_steps=3000)
    with pytest.raises(ValueError, match="pass a larger max_steps"):
        bb.feasible_window_top(1706.12, 64, d=65536, rel_step=1e-3, max_steps=10**3)
    assert time.perf_counter() - start < 20.0
    assert cs._work(2**22, 16) == 4096 and cs._work(1, 16) == 1


# ------------------------------------------------------------------------------------------
# chapter 7 after the independent review: Men et al.'s Appendix E, the grid and its windows
# ------------------------------------------------------------------------------------------
def _appendix_e_horizon(base: float, limit: int) -> int:
    """First m < limit with a negative sum in the check that the conference version of Men
    et al. prints as Appendix E (as quoted by ri.k117.org): float32 PyTorch,
    ``torch.outer(torch.arange(0, L), base ** (-2 * d / dim)).cos().sum(dim=1)`` with
    ``d = torch.arange(0, dim / 2, 1)``; here in chunks of distances (``limit`` if none)."""
    theta = base ** (-2 * torch.arange(0, 128 / 2, 1) / 128)
    assert theta.dtype == torch.float32
    for start in range(0, limit, 1 << 15):
        pos = torch.arange(start, min(limit, start + (1 << 15)))
        neg = torch.nonzero(torch.outer(pos, theta).cos().sum(dim=1) < 0)
        if len(neg):
            return start + int(neg[0, 0])
    return limit


_APPENDIX_E_LIST = [
    (i + j / 10) * 10**x for x in range(3, 10) for i in range(1, 10) for j in range(10)
]


def test_appendix_e_check_in_chunks_equals_the_quoted_single_table():
    """The chunks change no sum: the quoted code builds one (L x 64) table; for L = 2^13 the
    verdict of every listed base up to the answer is the same."""
    L = 1 << 13
    for base in [b for b in _APPENDIX_E_LIST if b <= 8.4e4]:
        realdim = 128 / 2
        d = torch.arange(0, realdim, 1)
        theta = base ** (-2 * d / 128)
        ans = torch.outer(torch.arange(0, L), theta).cos().sum(dim=1) / realdim
        quoted = True not in (ans < 0)
        assert quoted == (_appendix_e_horizon(base, L) >= L)


@pytest.mark.slow
def test_appendix_e_search_gives_the_grid_column_and_four_printed_values():
    """Chapter 7, Men et al.: rerun for L = 2^10 .. 2^20, the search of Appendix E (first listed
    base whose float32 sums are >= 0 for every m < L) returns the two-digit grid column of the
    table (rope_lib's exact check) at every row, and the printed value of the paper only at
    L = 2^10, 2^11, 2^13, 2^16; its float32 check gives every printed value its exact horizon,
    so it rejects the same seven. About 40 s (float32 horizons up to 2^20)."""
    rows = bt.min_base_table()
    top = rows[-1]["L"] + 1
    horizon: dict[float, int] = {}
    found = {}
    for base in _APPENDIX_E_LIST:
        horizon[base] = _appendix_e_horizon(base, top)
        for r in rows:
            if r["L"] not in found and horizon[base] >= r["L"]:
                found[r["L"]] = base
        if len(found) == len(rows):
            break
    assert [found[r["L"]] for r in rows] == [r["grid2"] for r in rows]
    paper = {1 << k: v[0] for k, v in bt.PUBLISHED_MIN_BASE.items()}
    assert [L for L in found if found[L] == paper[L]] == [1024, 2048, 8192, 65536]
    for value in paper.values():
        exact = bb.max_context(value, limit=1 << 23)
        assert _appendix_e_horizon(value, exact + 1) == exact
    assert sum(bb.max_context(v, limit=1 << 23) < L for L, v in paper.items()) == 7


def test_grid_finds_a_window_narrower_than_its_spacing():
    """Chapter 7: a two-digit grid *can* miss a window narrower than its spacing, but it finds
    one when a grid point falls inside. At L = 1024 the window around 4300 lies inside
    (4290, 4340), narrower than the spacing 100; at L = 8192 the one around 84000 lies inside
    (83700, 84500), narrower than 1000. Direct float64 sums (``feasible``), not the module."""
    for L, lo, point, hi, spacing in [
        (1024, 4290.0, 4300.0, 4340.0, 100.0),
        (8192, 83700.0, 84000.0, 84500.0, 1000.0),
    ]:
        assert feasible(point, L, 128)
        assert not feasible(lo, L, 128) and not feasible(hi, L, 128)
        assert hi - lo < spacing
        assert bt.grid_min_base(L) == point
