"""Run every benchmark of the book: ``make bench`` (or ``python -m bench``).

Each ``bench/bench_<topic>.py`` has a ``main()`` that measures rope_lib against a
peer in the same run and prints the ratios.  Speed targets live here, never in
the tests.  ``python -m bench site rope`` runs only the named topics.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    here = Path(__file__).parent
    topics = sorted(
        m.name[len("bench_") :]
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )
    chosen = argv or topics
    unknown = sorted(set(chosen) - set(topics))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; available: {topics}")
    sys.argv = sys.argv[:1]  # each benchmark's main() sees no arguments of ours
    for topic in chosen:
        print(f"\n=== bench_{topic} " + "=" * (60 - len(topic)), flush=True)
        start = time.perf_counter()
        importlib.import_module(f"bench.bench_{topic}").main()
        print(f"(bench_{topic} took {time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
