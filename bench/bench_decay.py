"""Benchmark of rope_lib.decay: the fast exact routes against the naive outer product.

Run ``python bench/bench_decay.py`` (or ``main()``). For d = 512 and 10^5 integer distances it
prints the time of ``ones_score`` and ``roformer_bound`` and of the naive numpy method
(``cos``/``exp`` of the full N x d/2 outer product) measured in the same run, their ratio and the
largest difference between the two, then the time of a slider update: recompute the curve,
replace the line's data and redraw the figure with the Agg backend.
"""

from __future__ import annotations

import time

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from rope_lib import decay, theta  # noqa: E402
from rope_lib.figures import decay as decay_figures  # noqa: E402

D = 512
N = 100_000
TARGET_MS = 100.0


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _naive_ones(x: np.ndarray, d: int) -> np.ndarray:
    return 2.0 * np.cos(np.multiply.outer(x, theta(d))).sum(axis=1)


def _naive_bound(x: np.ndarray, d: int) -> np.ndarray:
    return np.abs(np.cumsum(np.exp(1j * np.multiply.outer(x, theta(d))), axis=1)).mean(axis=1)


def _slider_update(d: int, base: float, n: int, repeat: int = 3) -> float:
    """Seconds for one slider move on the long-range figure: recompute, set data, redraw."""
    fig = decay_figures.plot_ones_score(ds=(d,), base=base, max_distance=n - 1)
    ax = fig.axes[0]
    line = ax.get_lines()[0]
    x = np.arange(n)
    fig.canvas.draw()

    def update() -> None:
        line.set_ydata(decay.ones_score(x, d, base * 1.01))
        fig.canvas.draw()

    seconds, _ = _best(update, repeat)
    matplotlib.pyplot.close(fig)
    return seconds


def main(quick: bool = False) -> None:
    """Print the table; ``quick``: one repetition of each (a check that it runs)."""
    x = np.arange(N)
    rows = []
    for name, fast, naive, fast_rep, naive_rep in (
        ("ones_score", decay.ones_score, _naive_ones, 1 if quick else 5, 1 if quick else 2),
        ("roformer_bound", decay.roformer_bound, _naive_bound, 1 if quick else 3, 1),
    ):
        t_fast, y_fast = _best(lambda f=fast: f(x, D), fast_rep)
        t_naive, y_naive = _best(lambda f=naive: f(x.astype(float), D), naive_rep)
        err = float(np.max(np.abs(np.asarray(y_fast) - y_naive)))
        rows.append((name, t_fast, t_naive, err))
    print(f"rope_lib.decay, d = {D}, {N} integer distances 0..{N - 1}")
    print(f"{'function':<16}{'rope_lib ms':>13}{'naive ms':>11}{'speed-up':>10}{'max |diff|':>13}")
    for name, t_fast, t_naive, err in rows:
        print(
            f"{name:<16}{1e3 * t_fast:>13.1f}{1e3 * t_naive:>11.1f}"
            f"{t_naive / t_fast:>9.1f}x{err:>13.2e}"
        )
    t_slider = _slider_update(D, 10000.0, N, 1 if quick else 3)
    verdict = "ok" if 1e3 * t_slider < TARGET_MS else "OVER TARGET"
    print(
        f"slider update (ones_score + redraw of {N} points): {1e3 * t_slider:.1f} ms "
        f"(target < {TARGET_MS:.0f} ms: {verdict})"
    )


if __name__ == "__main__":
    main()
