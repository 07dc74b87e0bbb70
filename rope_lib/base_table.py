r"""Chapter 7's table of minimum bases, beside the published ones (chapter ``base-bound``).

The table and the published methods
------------------------------------
* :func:`min_base_table`: :func:`rope_lib.base_bound.min_base` for :math:`L = 2^k` and the
  checks beside it, read from a JSON cache keyed on the source files the table's code runs
  (``TABLE_SOURCE_FILES``).
* The published values (:data:`PUBLISHED_MIN_BASE`, :data:`REAL_MODELS`) and methods:
  :func:`su_min_base`, Su's coarse-to-fine search; :func:`grid_min_base`, the first feasible
  base of a two-digit grid (the list of the search that the conference version of Men et al.
  prints as its Appendix E, known to the book through a third-party quotation, with an exact
  check in place of its float32 sums), with :func:`brute_force_feasible` the plain check it
  runs; :func:`published_summary`, the comparison of the published tables with the exact one.
* :func:`float32_margin`: :math:`B_m` with angles rounded as a float32 implementation would;
  :func:`float32_min_base`: the first base that passes in float32, on a fine grid within a
  relative :math:`10^{-5}` of the exact minimum.
* :func:`html_table`: the chapter's tables as HTML.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._certified_sweep import _charge, _OutOfSteps, _work
from ._validate import (
    check_base,
    check_dim,
    check_flag,
    check_integer_array,
    check_positive_int,
    check_real,
)
from .base_bound import (
    _SWEEPS,
    DEFAULT_MAX_STEPS,
    MAX_CONTEXT_LENGTH,
    MAX_STEPS,
    BaseSearch,
    _budget_error,
    _check_length,
    _check_steps,
    _feasible,
    _search_checked,
    max_context,
    min_base,
)
from .frequencies import theta

__all__ = [
    "min_base_table",
    "PUBLISHED_MIN_BASE",
    "REAL_MODELS",
    "float32_margin",
    "float32_min_base",
    "grid_min_base",
    "su_min_base",
    "published_summary",
    "html_table",
    "brute_force_feasible",
]
#: Published minimum bases for d = 128 as printed, keyed by log2(L), each a pair
#: (Men et al. 2024, Table 2; Su 2024, archive 10122).
PUBLISHED_MIN_BASE: dict[int, tuple[float, float]] = {
    10: (4.3e3, 4.3e3),
    11: (1.6e4, 1.2e4),
    12: (2.7e4, 2.7e4),
    13: (8.4e4, 8.4e4),
    14: (3.1e5, 2.3e5),
    15: (6.4e5, 6.3e5),
    16: (2.1e6, 2.1e6),
    17: (7.8e6, 4.9e6),
    18: (3.6e7, 2.4e7),
    19: (6.4e7, 5.8e7),
    20: (5.1e8, 6.5e7),
}

#: The settings of Men et al. 2024, Table 1, as (model, base, training context length), d = 128.
REAL_MODELS: tuple[tuple[str, float, int], ...] = (
    ("Llama-7B", 1e4, 2048),
    ("Llama2-7B", 1e4, 4096),
    ("Llama3-8B", 5e5, 8192),
    ("Mistral-7B-v0.2", 1e6, 32768),
    ("Baichuan2-7B", 1e4, 4096),
)

#: Largest number of angles one block of the direct cosine sums holds (32 MiB of float64).
_BLOCK_TERMS = 1 << 22
_CACHE = Path(__file__).with_name("data") / "min_base_table.json"
#: The files of ``rope_lib`` the cache ``rope_lib/data/min_base_table.json`` is keyed on (a
#: SHA-256 of exactly these): the four whose code computes :func:`min_base_table` (this module,
#: ``base_bound.py``, ``_certified_sweep.py`` and ``_validate.py``;
#: ``tests/test_base_table.py`` checks that computing the table runs no other file of the
#: package) and ``frequencies.py``, which defines :math:`\theta_i` for the package, so that a
#: change to the frequencies also recomputes the table.
TABLE_SOURCE_FILES: tuple[str, ...] = (
    "base_table.py",
    "base_bound.py",
    "_certified_sweep.py",
    "frequencies.py",
    "_validate.py",
)
#: The lengths of the shipped table (``min_base_table()``): the only call that writes the cache.
_DEFAULT_LOG2_LENGTHS = tuple(range(10, 21))
#: Default budget of :func:`min_base_table`, shared by the rows it computes: the chapter's
#: table (L = 2**10 .. 2**20, d = 128) is computed once (about a minute) and cached.
TABLE_MAX_STEPS = 3_000_000


def _check_rows(rows: Any, name: str, keys: Sequence[str]) -> list[dict]:
    """``rows`` as a list of dicts holding ``keys`` (rows of :func:`min_base_table`)."""
    what = f"{name} must be a sequence of rows of min_base_table (dicts with keys {list(keys)})"
    if isinstance(rows, str | bytes | dict) or not isinstance(rows, Sequence | np.ndarray):
        raise TypeError(f"{what}, got {type(rows).__name__}")
    out = list(rows)
    for row in out:
        if not isinstance(row, dict):
            raise TypeError(f"{what}, got an entry of type {type(row).__name__}")
        missing = [k for k in keys if k not in row]
        if missing:
            raise ValueError(f"{what}; a row lacks {missing}")
    return out


# --------------------------------------------------------------------------------------------
# the table of the chapter, cached on the source
# --------------------------------------------------------------------------------------------
def _source_key() -> str:
    """SHA-256 of the files of ``TABLE_SOURCE_FILES`` (see there which and why)."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in TABLE_SOURCE_FILES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def _round2(value: float) -> float:
    """``value`` rounded to two significant digits (to nearest), as a float."""
    return float(f"{value:.1e}")


def _checks(
    k: int, base: float, d: int, budget: list[int], max_steps: int, memo: dict | None = None
) -> dict:
    """The comparison columns of the chapter's table for L = 2^k."""
    length = 1 << k
    out = {
        "base_m_le_L": _search_checked(length + 1, d, budget, max_steps, memo).base,
        "round2": _round2(base),
        "round2_ok": _feasible(_round2(base), length, d),
        "grid2": _grid_min_base(length, d, 2, 100.0, True, budget, max_steps),
    }
    if d == 128 and k in PUBLISHED_MIN_BASE:
        for name, value in zip(("paper", "su"), PUBLISHED_MIN_BASE[k], strict=True):
            out[name] = value
            out[f"{name}_horizon"] = max_context(value, d)
            out[f"{name}_ok"] = out[f"{name}_horizon"] >= length
    return out


def min_base_table(
    log2_lengths: Sequence[int] = _DEFAULT_LOG2_LENGTHS,
    d: int = 128,
    *,
    use_cache: bool = True,
    max_steps: int = TABLE_MAX_STEPS,
) -> list[dict]:
    r"""The chapter's table: :func:`min_base` for :math:`L = 2^k` and the checks beside it.

    Each row holds ``L``, ``base`` (:func:`min_base`), and the evidence of the sweep, all
    cumulative over the chain of sweeps that led to it (from :math:`b = 1` through the shorter
    rows and their ``m <= L`` variants): ``n_steps``, ``n_scans``, ``n_gaps``, ``work``
    (steps of budget) and ``seconds`` (CPU time of those sweeps: the cost of a cold
    computation, see :attr:`BaseSearch.seconds`); then ``base_m_le_L``
    (the minimum under the criterion :math:`m \le L`, i.e. ``min_base(L + 1)``),
    ``round2`` / ``round2_ok`` (``base`` rounded to two digits and whether that is feasible),
    ``grid2`` (the first feasible base of the two-digit grid, :func:`grid_min_base` with
    ``exact=True``) and, for ``d = 128`` and the published lengths, ``paper``, ``su``
    (:data:`rope_lib.base_table.PUBLISHED_MIN_BASE`) with their horizons and feasibility.

    The rows this call computes are computed on a chain of its own, started afresh at
    :math:`b = 1` whatever :func:`min_base` has memoised in the process, so their evidence and
    seconds describe a cold computation; the results are then shared with the memo of
    :func:`min_base`.

    The sweep for the whole default table (:math:`L = 2^{10} \dots 2^{20}`, ``d = 128``) takes
    tens of seconds, so the rows are stored in ``rope_lib/data/min_base_table.json`` together
    with a SHA-256 of the files of ``TABLE_SOURCE_FILES`` (this module, ``base_bound.py``,
    ``_certified_sweep.py``, ``frequencies.py`` and ``_validate.py``). The cache is read
    only when that key and ``d`` match and every requested length is present; otherwise the
    rows are recomputed. The file is rewritten only by the default call (``d = 128`` and
    exactly the default lengths, ``use_cache=True``) when it is stale, so no call with other
    arguments can replace the shipped table.

    Parameters
    ----------
    log2_lengths : sequence of int
        Exponents k, for context lengths :math:`L = 2^k` (1 <= k <= 21: the row for k needs
        ``min_base(2**k + 1)``, within ``MAX_CONTEXT_LENGTH`` = 2**22).
    d : int
        Head dimension.
    use_cache : bool
        ``True`` or ``False`` (nothing else): read the JSON cache (and, for the default
        table only, rewrite it when stale).
    max_steps : int
        Budget of the rows computed by this call (sweeps, ``m <= L`` sweeps, grid checks),
        shared, in steps of work as in :func:`min_base_search`; default
        ``TABLE_MAX_STEPS`` = 3,000,000, what the shipped table needs from scratch (about a minute:
        it is computed once and cached). Past it a ``ValueError`` asks for a larger one.
    """
    d = check_dim(d)
    use_cache = check_flag(use_cache, "use_cache")
    max_steps = _check_steps(max_steps)
    if isinstance(log2_lengths, str) or not isinstance(log2_lengths, Sequence | np.ndarray):
        raise TypeError(
            f"log2_lengths must be a sequence of integers k (L = 2**k), got {log2_lengths!r}"
        )
    ks = [
        check_positive_int(
            k, "log2_lengths entries", maximum=21, hint="min_base(2**k + 1) must stay <= 2**22"
        )
        for k in log2_lengths
    ]
    key = _source_key()
    cached: dict[str, dict] = {}
    if use_cache and _CACHE.exists():
        try:
            blob = json.loads(_CACHE.read_text())
        except (OSError, ValueError):
            blob = {}
        if blob.get("key") == key and blob.get("d") == d:
            cached = blob.get("rows", {})
    if all(str(k) in cached for k in ks):
        return [cached[str(k)] for k in ks]
    rows = dict(cached)
    budget = [max_steps]
    chain: dict[int, BaseSearch] = {}  # a fresh chain: rows computed (and timed) cold
    for k in sorted(ks):
        if str(k) in rows:
            continue
        res = _search_checked(1 << k, d, budget, max_steps, chain)
        rows[str(k)] = {
            "L": 1 << k,
            "base": res.base,
            "n_steps": res.n_steps,
            "n_scans": res.n_scans,
            "n_gaps": len(res.gaps),
            "work": res.work,
            "seconds": res.seconds,
        }
        rows[str(k)].update(_checks(k, res.base, d, budget, max_steps, chain))
    memo = _SWEEPS.setdefault(d, {})
    for length, result in chain.items():
        memo.setdefault(length, result)
    if use_cache and d == 128 and sorted(set(ks)) == list(_DEFAULT_LOG2_LENGTHS):
        shipped = {str(k): rows[str(k)] for k in _DEFAULT_LOG2_LENGTHS}
        try:
            _CACHE.parent.mkdir(exist_ok=True)
            _CACHE.write_text(json.dumps({"key": key, "d": d, "rows": shipped}, indent=1) + "\n")
        except OSError:
            pass
    return [rows[str(k)] for k in ks]


# --------------------------------------------------------------------------------------------
# the published method: a grid of bases, each checked by brute force
# --------------------------------------------------------------------------------------------
def brute_force_feasible(base: float, context_length: int, d: int = 128) -> bool:
    r"""Plain check of :math:`B_m \ge 0` for every :math:`0 \le m < L`: direct float64 sums of
    :math:`\cos(m\theta_i)`, in chunks of distances, stopping at the first negative one.

    This is the brute force of the published computations (no matrix trick, no rounding
    margin); it serves as the independent check of :func:`min_base` and inside
    :func:`grid_min_base`."""
    base = check_base(base)
    length = _check_length(context_length)
    d = check_dim(d)
    return _brute_force(base, length, d)


def _brute_force(base: float, length: int, d: int, budget: list[int] | None = None) -> bool:
    """:func:`brute_force_feasible` for checked arguments, charging ``budget`` per chunk."""
    freqs = theta(d, base)
    chunk = max(16, (1 << 18) // freqs.size)
    for start in range(0, length, chunk):
        m = np.arange(start, min(length, start + chunk), dtype=np.float64)
        _charge(budget, _work(m.size, d, factor=4))
        if np.cos(np.multiply.outer(m, freqs)).sum(axis=1).min() < 0:
            return False
    return True


def grid_min_base(
    context_length: int,
    d: int = 128,
    digits: int = 2,
    start: float = 100.0,
    *,
    exact: bool = False,
    max_steps: int = 100_000,
):
    r"""First base of a grid with ``digits`` significant digits that passes the brute force.

    Scan bases upward on the grid :math:`c \cdot 10^e` (``digits``-digit mantissas c, from
    ``start``) and check :math:`B_m \ge 0` for all :math:`m < L` at each by brute force
    (:func:`brute_force_feasible`). With ``digits=2`` this is the list of the search that the
    conference version of Men et al. (NeurIPS 2024) prints as its Appendix E, as quoted by a
    third party (:math:`(i + j/10)\,10^x`, :math:`x = 3 \dots 9`), with a float64 or exact
    check in place of the appendix's float32 sums; for ``d = 128`` and
    :math:`L = 2^{10} \dots 2^{20}`, with ``exact=True`` (the chapter's table), the two give
    the same bases (a test reruns the float32 search). It can only return grid points, and it can step over a feasible window narrower
    than the grid spacing (it finds one only where a grid point falls inside). For
    ``d = 128`` it reproduces the value of Men et al. at :math:`L = 2^{10}, 2^{11}, 2^{13},
    2^{16}` but not at the other seven lengths (chapter ``base-bound``). Su's published search
    is :func:`su_min_base`.

    ``exact=True`` checks each grid base with :func:`base_is_feasible` (exact and much faster
    for long contexts) instead of the plain float64 brute force; the two differ only where
    :math:`\min_m B_m` is within rounding of zero at a grid base.

    ``digits`` is at most 15 (float64 holds 15 significant digits). ``max_steps`` (default
    100,000, at most 10**8) is a budget of work: one step per grid base checked plus one per
    ``STEP_TERMS`` = 2**16 (distance, frequency) terms its check evaluates (four times as many
    for the brute force, which costs more per term), so it bounds the time of the call
    (about 30 s); past it a ``ValueError`` asks for a larger ``max_steps``."""
    length = _check_length(context_length)
    d = check_dim(d)
    digits = check_positive_int(
        digits, "digits", maximum=15, hint="float64 holds 15 significant digits"
    )
    start = check_base(start, "start")
    exact = check_flag(exact, "exact")
    max_steps = _check_steps(max_steps)
    return _grid_min_base(length, d, digits, start, exact, [max_steps], max_steps)


def _grid_min_base(
    length: int, d: int, digits: int, start: float, exact: bool, budget: list[int], max_steps: int
) -> float:
    """:func:`grid_min_base` for checked arguments, charging ``budget``."""
    exponent = math.floor(math.log10(start)) - (digits - 1)
    mantissa = math.ceil(start / 10.0**exponent)
    try:
        while True:
            _charge(budget, 1)
            if mantissa >= 10**digits:
                mantissa, exponent = 10 ** (digits - 1), exponent + 1
            base = mantissa * 10.0**exponent
            if base > 1e300:
                raise ValueError(f"no grid base below 1e300 is feasible for L = {length}")
            if (
                _feasible(base, length, d, budget)
                if exact
                else _brute_force(base, length, d, budget)
            ):
                return float(f"{mantissa}e{exponent}")
            mantissa += 1
    except _OutOfSteps:
        pass
    raise _budget_error(
        f"grid_min_base for context_length = {length}, d = {d} (from start = {start:g}, "
        f"digits = {digits}; a finer grid has more points)",
        max_steps,
    )


def _direct_margins(bases: np.ndarray, ms: np.ndarray, d: int, dtype: type) -> np.ndarray:
    """B_m for each base (rows) and distance (columns), direct cosine sums in ``dtype``."""
    i = np.arange(d // 2, dtype=dtype)
    th = np.asarray(bases, dtype=dtype)[:, None] ** (dtype(-2.0) * i[None, :] / dtype(d))
    ms = np.asarray(ms, dtype=dtype)
    out = np.empty((th.shape[0], ms.size), dtype=dtype)
    # Blocks of at most 2**22 angles, so no temporary exceeds 32 MiB whatever d and the counts.
    cols = max(1, min(ms.size, _BLOCK_TERMS // th.shape[1]))
    rows = max(1, _BLOCK_TERMS // (cols * th.shape[1]))
    for r in range(0, th.shape[0], rows):
        for c in range(0, ms.size, cols):
            angles = ms[None, c : c + cols, None] * th[r : r + rows, None, :]
            out[r : r + rows, c : c + cols] = np.cos(angles).sum(axis=2, dtype=dtype)
    return out


def _first_passing(
    bases: np.ndarray,
    length: int,
    margins,
    d: int,
    batch: int = 512,
    budget: list[int] | None = None,
) -> int:
    """Index of the first base (in the given order) with margins >= 0 for every m < length.

    ``margins(bases, ms)`` returns the (bases x distances) array. A base is declared
    infeasible only on a negative value it was evaluated at: first at a few *witness*
    distances (those that failed for earlier bases; neighbouring bases of a fine grid
    usually fail at the same m), otherwise by a full scan of all m < length. Returns -1 if
    no base passes. ``budget[0]``, if given, is the number of steps of work left: one per
    base examined plus four per ``STEP_TERMS`` = 2**16 (distance, frequency) terms of the direct
    sums (``d`` terms per distance, at least 64); :class:`_OutOfSteps` is raised when it runs
    out.
    """
    witnesses = np.empty(0, dtype=np.int64)

    def charged(chunk: np.ndarray, ms: np.ndarray) -> np.ndarray:
        _charge(budget, _work(chunk.size * ms.size, d, factor=4))
        return margins(chunk, ms)

    for lo in range(0, bases.size, batch):
        chunk = bases[lo : lo + batch]
        _charge(budget, chunk.size)
        alive = np.ones(chunk.size, dtype=bool)
        if witnesses.size:
            alive = charged(chunk, witnesses).min(axis=1) >= 0
        for j in range(chunk.size):
            if not alive[j]:
                continue
            failing = -1
            for start in range(0, length, 2048):
                ms = np.arange(start, min(length, start + 2048))
                values = charged(chunk[j : j + 1], ms)[0]
                if values.min() < 0:
                    failing = int(ms[np.argmin(values)])
                    break
            if failing < 0:
                return lo + j
            alive[j] = False
            near = np.clip(failing + np.arange(-2, 3), 0, length - 1)
            witnesses = np.unique(np.concatenate([witnesses[-60:], near]))
            rest = np.flatnonzero(alive[j + 1 :]) + j + 1
            if rest.size:
                bad = charged(chunk[rest], near).min(axis=1) < 0
                alive[rest[bad]] = False
    return -1


def su_min_base(
    context_length: int,
    d: int = 128,
    levels: int = 5,
    start_factor: float = 1000.0,
    dtype: type = np.float64,
    *,
    max_steps: int = 200_000,
) -> float:
    r"""Su's published coarse-to-fine search for the smallest base (Su 2024, archive 10122).

    Start from the upper end :math:`\bar b = 1000\,L` (feasible for every
    :math:`L \le 10^6`, d = 128; Su calls it B, a name this book keeps for the margin
    :math:`B_m`). For :math:`k = 1, \dots, 5`: divide :math:`[0, \bar b]` into :math:`10^k`
    equal parts, take the *first* division point :math:`b = j\bar b/10^k` (j = 1, 2, ...) at
    which :math:`\min_{0 \le m < L} \sum_i \cos(m\, b^{-2i/d}) \ge 0`, and set
    :math:`\bar b = b`. Return the final :math:`\bar b`.

    Each level searches all of :math:`[0, \bar b]` again, so a window missed by a coarse level
    is found by a finer one if it is wider than the final spacing
    :math:`\bar b/10^5` (:math:`\bar b` the upper end the last level starts from): the result
    is the first feasible point of a grid with that spacing. The check is Su's direct cosine
    sum, in ``dtype`` (his JAX code runs in float32 unless 64-bit mode is enabled; with
    ``np.float32`` this is a NumPy emulation, whose cosine and order of summation may differ
    from JAX's); here the points are
    visited in order and the scan stops at the first point that passes, which gives the same
    answer as checking every point.

    Parameters
    ----------
    context_length : int
        :math:`3 \le L \le` ``MAX_CONTEXT_LENGTH`` = 2**22 (for :math:`L \le 2` every base
        works and the search has no lower end).
    d : int
        Head dimension.
    levels : int
        Number of refinements (5 in Su's code), at most 7 (level k builds a grid of
        :math:`10^k` bases).
    start_factor : float
        :math:`\bar b = ` ``start_factor`` :math:`\cdot L` at the start (1000); > 0, with
        :math:`1 < \bar b \le 10^{300}`.
    dtype : numpy float type
        ``np.float64`` (default) or ``np.float32``.
    max_steps : int
        Budget of work over all levels (default 200,000, at most 10**8): one step per grid
        base examined plus four per ``STEP_TERMS`` = 2**16 (distance, frequency) terms of the
        direct sums, so it bounds the time of the call (about 30 s). Level k examines about
        :math:`10^k` bases; past the budget a ``ValueError`` asks for a larger one.
    """
    length = check_positive_int(
        context_length,
        "context_length",
        minimum=3,
        maximum=MAX_CONTEXT_LENGTH,
        hint="rope_lib.base_bound.MAX_CONTEXT_LENGTH = 2**22 bounds the scans",
    )
    d = check_dim(d)
    levels = check_positive_int(
        levels, "levels", maximum=7, hint="level k builds a grid of 10**k bases"
    )
    start_factor = check_real(start_factor, "start_factor", 0.0, low_open=True)
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"dtype must be numpy.float64 or numpy.float32, got {dtype!r}")
    dtype = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    max_steps = _check_steps(max_steps)
    top = start_factor * length
    if not 1.0 < top <= 1e300:
        raise ValueError(
            f"start_factor * context_length (the upper end the search starts from) must lie "
            f"in (1, 1e300], got start_factor = {start_factor:g}, product {top:g}"
        )

    def margins(bases: np.ndarray, ms: np.ndarray) -> np.ndarray:
        return _direct_margins(bases, ms, d, dtype)

    budget = [max_steps]
    try:
        if _first_passing(np.array([top]), length, margins, d, budget=budget) < 0:
            raise ValueError(
                f"the starting upper end start_factor * L = {top:g} is not feasible for "
                f"context_length = {length}, d = {d}: pass a larger start_factor"
            )
        for k in range(1, levels + 1):
            grid = np.linspace(0.0, 1.0, 10**k + 1)[1:] * top
            # grid[-1] = top passes, so an index is always found
            top = float(grid[_first_passing(grid, length, margins, d, budget=budget)])
    except _OutOfSteps:
        what = f"su_min_base for context_length = {length}, d = {d}"
        raise _budget_error(what, max_steps) from None
    return top


def published_summary(rows: Sequence[dict]) -> dict[str, Any]:
    r"""Compare the published minimum bases with the exact ones, row by row of
    :func:`min_base_table` (``d = 128``).

    Returns a dict of lists of context lengths L:

    * ``su_is_round2``: Su's value equals the exact minimum rounded to two significant digits;
    * ``su_bad``: Su's value fails :math:`B_m \ge 0` for some :math:`m < L`, split into
      ``su_round_down`` (printed value below the exact minimum, hence infeasible) and
      ``su_round_up`` (above it, but outside the feasible window that starts there);
    * ``paper_bad``: the value of Men et al. fails the criterion; ``paper_above``: it is at
      or above the exact minimum rounded to two digits;
    * ``paper_departs``: the paper's value differs from the rounded exact minimum, and
      ``grid_matches``: of those, the rows where the two-digit grid (``grid2``) gives the
      paper's value;
    * ``le_same``: the minimum under :math:`m \le L` equals the one under :math:`m < L`
      (relative difference below :math:`10^{-6}`).
    """
    keys = ("L", "base", "round2", "base_m_le_L", "grid2", "su", "su_ok", "paper", "paper_ok")
    rows = _check_rows(rows, "rows", keys)
    out: dict[str, Any] = {
        "su_is_round2": [r["L"] for r in rows if r["su"] == r["round2"]],
        "su_bad": [r["L"] for r in rows if not r["su_ok"]],
        "su_round_down": [r["L"] for r in rows if not r["su_ok"] and r["su"] < r["base"]],
        "su_round_up": [r["L"] for r in rows if not r["su_ok"] and r["su"] > r["base"]],
        "paper_bad": [r["L"] for r in rows if not r["paper_ok"]],
        "paper_above": [r["L"] for r in rows if r["paper"] >= r["round2"]],
        "paper_departs": [r["L"] for r in rows if r["paper"] != r["round2"]],
        "le_same": [r["L"] for r in rows if abs(r["base_m_le_L"] / r["base"] - 1) < 1e-6],
    }
    out["grid_matches"] = [
        r["L"] for r in rows if r["L"] in out["paper_departs"] and r["grid2"] == r["paper"]
    ]
    return out


def html_table(header: Sequence[Any], body: Sequence[Sequence[Any]]) -> str:
    """A small right-aligned HTML table (header row, then one row per entry of ``body``).

    Cells are inserted as given (they may hold markup such as ``<b>no</b>``); every row
    must have as many cells as the header.
    """
    pad = 'style="padding: 0.15em 0.4em; text-align: right"'
    if isinstance(header, str) or not isinstance(header, Sequence):
        raise TypeError(f"header must be a sequence of cells, got {type(header).__name__}")
    if isinstance(body, str) or not isinstance(body, Sequence):
        raise TypeError(f"body must be a sequence of rows, got {type(body).__name__}")
    width = len(header)
    for row in body:
        if isinstance(row, str) or not isinstance(row, Sequence):
            raise TypeError(f"every row of body must be a sequence of cells, got {row!r}")
        if len(row) != width:
            raise ValueError(
                f"every row of body needs {width} cells (as many as header), got {len(row)}: "
                f"{row!r}"
            )

    def cells(row: Sequence[Any], tag: str) -> str:
        return "".join(f"<{tag} {pad}>{c}</{tag}>" for c in row)

    rows = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in body)
    return f"<table><tr>{cells(header, 'th')}</tr>{rows}</table>"


# --------------------------------------------------------------------------------------------
# float32 angles
# --------------------------------------------------------------------------------------------
def float32_margin(
    m: Any, d: int, base: float = 10000.0, inv_freq: Any = None
) -> np.ndarray | np.float32:
    r""":math:`B_m` as a float32 implementation computes it.

    .. math:: \tilde B_m = \sum_i \cos_{32}\bigl(\mathrm{fl}_{32}(m \cdot
              \tilde\theta_i)\bigr),

    the float32 angle table ``outer(positions, inv_freq)`` of LLaMA / Hugging Face code,
    cosines and sum in float32. :math:`\tilde\theta_i` is ``inv_freq`` if given (a float32
    array of length d/2, e.g. from a framework's own recipe), otherwise the float32
    rounding of the float64 :math:`\theta_i`. Recipes differ by an ulp here and there
    (Hugging Face computes ``1 / base ** (arange(0, d, 2) / d)`` in float32), and at a base
    where :math:`\min_m B_m` is within rounding of zero the verdict depends on the recipe.
    The phase error is about :math:`m\theta_i 2^{-24}`.

    Parameters
    ----------
    m : int or array_like of int
        Distances (whole numbers, at most 2**24 so that float32 holds them exactly).
    d : int
        Head dimension.
    base : float
        Base :math:`b > 1` (ignored when ``inv_freq`` is given).
    inv_freq : array_like of float32, optional
        The frequencies to use, length d/2.
    """
    d = check_dim(d)
    base = check_base(base)
    ms = check_integer_array(m, "m")
    if np.any(np.abs(ms) > 2**24):
        raise ValueError("m must have magnitude <= 2**24 (exact in float32)")
    if inv_freq is None:
        inv = theta(d, base).astype(np.float32)
    else:
        inv = _inv_freq(inv_freq, d)
    flat = ms.ravel().astype(np.float32)
    out = np.empty(flat.shape, dtype=np.float32)
    step = max(1, (1 << 20) // inv.size)
    for s in range(0, flat.size, step):
        ang = np.multiply.outer(flat[s : s + step], inv).astype(np.float32)
        out[s : s + step] = np.cos(ang).sum(axis=1, dtype=np.float32)
    out = out.reshape(ms.shape)
    return out[()] if out.ndim == 0 else out


def _inv_freq(inv_freq: Any, d: int, name: str = "inv_freq") -> np.ndarray:
    """A float32 array of d/2 finite positive frequencies, else a ValueError naming ``name``."""
    torch = __import__("sys").modules.get("torch")
    if torch is not None and isinstance(inv_freq, torch.Tensor):
        inv_freq = inv_freq.detach().cpu().numpy()
    try:
        inv = np.asarray(inv_freq)
    except (ValueError, TypeError) as error:
        raise TypeError(f"{name} must be a float32 array of shape ({d // 2},)") from error
    if inv.shape != (d // 2,) or inv.dtype != np.float32:
        raise ValueError(
            f"{name} must be a float32 array of shape ({d // 2},), got "
            f"{getattr(inv, 'dtype', type(inv).__name__)} of shape {inv.shape}"
        )
    if not (np.all(np.isfinite(inv)) and np.all(inv > 0)):
        raise ValueError(f"{name} must hold finite positive frequencies, got nan, inf or <= 0")
    return inv


def float32_min_base(
    context_length: int,
    d: int = 128,
    inv_freq=None,
    rel_step: float = 1e-8,
    rel_span: float = 1e-5,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
) -> float:
    r"""The smallest base that passes :math:`\tilde B_m \ge 0` (float32, :func:`float32_margin`)
    for every :math:`m < L`, on a fine grid around the exact :func:`min_base` :math:`b^*`.

    Scans :math:`b^*(1 + j s)` for :math:`j = -J, \dots, J` (:math:`s` = ``rel_step``,
    :math:`J s` = ``rel_span``) upward and returns the first base that passes. Raises if the
    first grid point already passes (the float32 boundary may lie further down: widen
    ``rel_span``) or if none passes.

    Parameters
    ----------
    context_length, d : int
        The problem (L at most ``MAX_CONTEXT_LENGTH`` = 2**22).
    inv_freq : callable, optional
        ``inv_freq(base) -> float32 array`` of the d/2 frequencies (a framework's recipe);
        default: float32 rounding of the float64 :math:`\theta_i`.
    rel_step, rel_span : float
        Grid spacing and half-width, relative to :math:`b^*`: ``0 < rel_step <= rel_span
        < 0.5``.
    max_steps : int
        Budget (default 50,000, at most 10**8), in steps of work: of the sweep of
        :func:`min_base`, and separately of the float32 grid scan (one step per grid point
        plus four per ``STEP_TERMS`` = 2**16 terms of the float32 sums); a grid of more than
        ``max_steps`` points, :math:`2J + 1`, is refused before any work.
    """
    length = _check_length(context_length)
    d = check_dim(d)
    if inv_freq is not None and not callable(inv_freq):
        raise TypeError(
            "inv_freq must be None or a callable inv_freq(base) -> float32 array of the d/2 "
            f"frequencies, got {type(inv_freq).__name__}"
        )
    rel_step = check_real(rel_step, "rel_step", 0.0, 0.5, low_open=True, high_open=True)
    rel_span = check_real(rel_span, "rel_span", 0.0, 0.5, low_open=True, high_open=True)
    if rel_step > rel_span:
        raise ValueError(f"rel_step must be <= rel_span, got {rel_step:g} > {rel_span:g}")
    max_steps = _check_steps(max_steps)
    n = int(round(rel_span / rel_step))
    if 2 * n + 1 > max_steps:
        raise ValueError(
            f"the grid of rel_span / rel_step = {n} points each side exceeds max_steps = "
            f"{max_steps}; pass a larger max_steps (at most {MAX_STEPS}) or a larger rel_step"
        )
    exact = min_base(length, d, max_steps=max_steps)
    grid = exact * (1.0 + rel_step * np.arange(-n, n + 1))

    def recipe(b: float):
        if inv_freq is None:
            return None
        return _inv_freq(inv_freq(float(b)), d, "inv_freq(base), the result of inv_freq,")

    def margins(bases: np.ndarray, ms: np.ndarray) -> np.ndarray:
        return np.stack([float32_margin(ms, d, float(b), recipe(b)) for b in bases])

    budget = [max_steps]
    try:
        idx = _first_passing(grid, length, margins, d, batch=64, budget=budget)
    except _OutOfSteps:
        what = f"float32_min_base for context_length = {length}, d = {d}"
        raise _budget_error(what, max_steps) from None
    if idx < 0:
        raise ValueError(f"no base within a relative {rel_span:g} of min_base passes in float32")
    if idx == 0:
        raise ValueError("the lowest grid point already passes in float32: widen rel_span")
    return float(grid[idx])
