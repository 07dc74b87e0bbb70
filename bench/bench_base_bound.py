"""Benchmark: the certified minimum-base table against the published grid search.

Times ``rope_lib.min_base`` for the table L = 2^10 .. 2^20 (d = 128), from a cold start (no
memo, no JSON cache), against a plain numpy reimplementation of the method of Su (2024,
archive 10122): bases scanned upward on a two-significant-digit grid, each checked by brute
force for all m < L (``rope_lib.base_table.grid_min_base``), run in the same process. The
baseline is slow for long contexts, so both are timed on the same subset
(L = 2^10 .. 2^``--grid-max``, default 2^16), and the certified sweep is also timed on the
full table.

Budget: ``min_base``'s default ``max_steps`` (50,000) covers L up to 2^17 from scratch and
raises beyond, so every call here passes :data:`BUDGET`, the budget the book's shipped table
(``rope_lib/data/min_base_table.json``) is computed with (``TABLE_MAX_STEPS``). The output
says which budget ran.

Quick mode (``--quick``, ``make bench QUICK=1``): the subset stops at 2^13 and the full table
is not recomputed; its last row is read from the shipped table, and the output says so
(and whether that table is current for this code).

Usage: ``python -m bench base_bound [--quick]`` or
``python bench/bench_base_bound.py [--grid-max K] [--quick]``. Prints times and ratios.
"""

from __future__ import annotations

import argparse
import json
import time

from rope_lib import base_bound, base_table

#: The budget of every certified sweep here: what the shipped table is computed with.
BUDGET = base_table.TABLE_MAX_STEPS
FULL = list(range(10, 21))
QUICK_GRID_MAX = 13


def _certified(ks: list[int]) -> tuple[float, dict[int, float]]:
    base_bound._SWEEPS.clear()
    t0 = time.perf_counter()
    out = {k: base_bound.min_base(1 << k, max_steps=BUDGET) for k in ks}
    return time.perf_counter() - t0, out


def _grid(ks: list[int]) -> tuple[float, dict[int, float]]:
    t0 = time.perf_counter()
    out = {k: base_table.grid_min_base(1 << k) for k in ks}
    return time.perf_counter() - t0, out


def shipped_table() -> tuple[dict[int, float], bool]:
    """The shipped table's bases by log2 L, and whether it is current for this code."""
    blob = json.loads(base_table._CACHE.read_text())
    rows = {int(k): row["base"] for k, row in blob["rows"].items()}
    return rows, blob.get("key") == base_table._source_key()


def main(argv: list[str] | None = None, quick: bool = False) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid-max", type=int, default=None, help="largest log2 L for the grid")
    parser.add_argument("--quick", action="store_true", help="small subset, no full table")
    args = parser.parse_args(argv)
    quick = quick or args.quick
    grid_max = args.grid_max or (QUICK_GRID_MAX if quick else 16)
    subset = list(range(10, grid_max + 1))
    print(f"certified sweeps with max_steps = {BUDGET:,} (TABLE_MAX_STEPS, the shipped table's)")
    t_cert_sub, cert = _certified(subset)
    t_grid, grid = _grid(subset)
    print(f"subset L = 2^10 .. 2^{grid_max}, d = 128")
    print(f"{'L':>8} {'min_base (certified)':>22} {'grid (2 digits)':>16}")
    for k in subset:
        print(f"{1 << k:>8} {cert[k]:>22.6e} {grid[k]:>16.2e}")
    print(f"certified sweep: {t_cert_sub:8.2f} s")
    print(f"grid baseline  : {t_grid:8.2f} s")
    print(f"ratio grid / certified: {t_grid / t_cert_sub:.1f}x")
    shipped, current = shipped_table()
    state = "current for this code" if current else "STALE: its key does not match this code"
    if quick:
        print(
            f"quick mode: the full table L = 2^10 .. 2^20 is not recomputed; the shipped table "
            f"({base_table._CACHE.name}, {state}) gives min_base(2^20) = {shipped[20]:.6e}"
        )
        return
    t_full, full = _certified(FULL)
    print(f"certified sweep, full table L = 2^10 .. 2^20: {t_full:.2f} s (max_steps = {BUDGET:,})")
    same = all(abs(full[k] / shipped[k] - 1) < 1e-12 for k in FULL if k in shipped)
    print(
        f"min_base(2^20) = {full[20]:.6e}; the shipped table ({state}) "
        f"{'agrees' if same else 'DIFFERS'}; the grid baseline was not run beyond "
        f"2^{grid_max} (it took {t_grid:.1f} s up to there)"
    )


if __name__ == "__main__":
    main()
