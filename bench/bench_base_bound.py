"""Benchmark: the certified minimum-base table against the published grid search.

Times ``rope_lib.min_base`` for the table L = 2^10 .. 2^20 (d = 128), from a cold start (no
memo, no JSON cache), against a plain numpy reimplementation of the method of Su (2024,
archive 10122): bases scanned upward on a two-significant-digit grid, each checked by brute
force for all m < L (``rope_lib.base_bound.grid_min_base``), run in the same process. The
baseline is slow for long contexts, so by default both are timed on the same subset
(L = 2^10 .. 2^``--grid-max``), and the certified sweep is also timed on the full table.
Usage: ``python bench/bench_base_bound.py [--grid-max K]``. Prints times and ratios.
"""

from __future__ import annotations

import argparse
import time

from rope_lib import base_bound


def _certified(ks: list[int]) -> tuple[float, dict[int, float]]:
    base_bound._SWEEPS.clear()
    t0 = time.perf_counter()
    out = {k: base_bound.min_base(1 << k) for k in ks}
    return time.perf_counter() - t0, out


def _grid(ks: list[int]) -> tuple[float, dict[int, float]]:
    t0 = time.perf_counter()
    out = {k: base_bound.grid_min_base(1 << k) for k in ks}
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid-max", type=int, default=16, help="largest log2 L for the grid")
    args = parser.parse_args(argv)
    subset = list(range(10, args.grid_max + 1))
    t_cert_sub, cert = _certified(subset)
    t_grid, grid = _grid(subset)
    print(f"subset L = 2^10 .. 2^{args.grid_max}, d = 128")
    print(f"{'L':>8} {'min_base (certified)':>22} {'grid (2 digits)':>16}")
    for k in subset:
        print(f"{1 << k:>8} {cert[k]:>22.6e} {grid[k]:>16.2e}")
    print(f"certified sweep: {t_cert_sub:8.2f} s")
    print(f"grid baseline  : {t_grid:8.2f} s")
    print(f"ratio grid / certified: {t_grid / t_cert_sub:.1f}x")
    if args.grid_max < 20:
        t_full, full = _certified(list(range(10, 21)))
        print(f"certified sweep, full table L = 2^10 .. 2^20: {t_full:.2f} s")
        print(
            f"min_base(2^20) = {full[20]:.6e}; the grid baseline was not run beyond "
            f"2^{args.grid_max} (it took {t_grid:.1f} s up to there)"
        )


if __name__ == "__main__":
    main()
