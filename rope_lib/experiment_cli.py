"""Command line of experiment 1 (:mod:`rope_lib.experiment`).

``python -m rope_lib.experiment_cli --config full`` (what ``make experiment`` runs) trains the
sweep with a progress bar, resuming from ``_build/experiment/``, and writes
``rope_lib/data/experiment_full.json``; ``--help`` lists the options.  The entry point lives in
its own module because ``rope_lib`` imports :mod:`rope_lib.experiment` on import, and running an
already imported module with ``python -m`` makes Python warn.
"""

from __future__ import annotations

from rope_lib.experiment import main

if __name__ == "__main__":
    raise SystemExit(main())
