"""``python -m rope_lib.experiments``: see :mod:`rope_lib.experiments.cli`."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
