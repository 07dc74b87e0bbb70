"""Run every benchmark of the book: ``make bench`` (or ``python -m bench``).

Each ``bench/bench_<topic>.py`` has a ``main(quick=False)`` that measures rope_lib against
a peer in the same run and prints the ratios.  Speed targets live here, never in the
tests.  ``python -m bench site rope`` runs only the named topics; ``--quick``
(``make bench QUICK=1``) runs each in its quick mode (fewer repetitions, smaller
tables: a check that everything runs, in about two minutes, not a measurement to quote).
A benchmark that raises does not stop the others; the run exits 1 at the end, naming it.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback
from pathlib import Path


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    argv = [a for a in argv if a != "--quick"]
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
    failed = []
    for topic in chosen:
        mode = " (quick)" if quick else ""
        print(f"\n=== bench_{topic}{mode} " + "=" * (60 - len(topic + mode)), flush=True)
        start = time.perf_counter()
        try:
            importlib.import_module(f"bench.bench_{topic}").main(quick=quick)
        except Exception:
            traceback.print_exc()
            failed.append(topic)
        print(f"(bench_{topic} took {time.perf_counter() - start:.1f} s)", flush=True)
    if failed:
        raise SystemExit(f"bench: {', '.join(failed)} failed (tracebacks above)")


if __name__ == "__main__":
    main(sys.argv[1:])
