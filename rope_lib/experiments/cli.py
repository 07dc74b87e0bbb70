"""The command line of chapter 9's experiments: ``python -m rope_lib.experiments``.

* ``python -m rope_lib.experiments``: every sweep chapter 9 reads (``make experiment``), on two
  worker processes, with one progress bar and the time left; resumable (per-run files under
  ``_build/experiments``); writes ``rope_lib/data/experiment_<experiment>_<config>.json``.
* ``--smoke``: the smoke configurations instead, written under ``_build/experiments`` (nothing
  under ``rope_lib/data`` unless ``--output-dir`` says so).
* ``--only NAME``: one experiment (``recall``, ``needle``) or one sweep (``recall:full``);
  repeatable.
* ``--plan``: print the runs and their estimated CPU minutes, train nothing.

It starts sweeps and does not change their numbers, so it is not part of any results key.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from .runner import BUILD, REGISTRY, describe_plan, plan, run_sweeps

__all__ = ["main", "selected_sweeps"]


def selected_sweeps(only: Sequence[str], smoke: bool) -> list[tuple[str, str]]:
    """``(experiment, config)`` pairs for ``--only`` names (all experiments when empty).

    An experiment whose modules are missing (experiment 2 before its branch is merged) is
    skipped with a message on stderr, unless it was named in ``only``, which is an error.
    """
    chosen: list[tuple[str, str]] = []
    names = list(only) or list(REGISTRY)
    for name in names:
        experiment, _, config = name.partition(":")
        if experiment not in REGISTRY:
            raise SystemExit(f"--only: unknown experiment {experiment!r}; one of {tuple(REGISTRY)}")
        exp = REGISTRY[experiment]
        if not exp.available():
            if only:
                raise SystemExit(
                    f"--only: experiment {experiment!r} is not available (modules "
                    f"{', '.join(exp.modules)} missing)"
                )
            print(f"experiment {experiment!r}: modules missing, skipped", file=sys.stderr)
            continue
        configs = [config] if config else list(exp.smoke if smoke else exp.chapter)
        chosen += [(experiment, c) for c in configs]
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, plan, train (unless ``--plan``) and write the results files."""
    parser = argparse.ArgumentParser(
        prog="python -m rope_lib.experiments",
        description="Train the sweeps of chapter 9's experiments (resumable).",
    )
    parser.add_argument("--smoke", action="store_true", help="the smoke configurations")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="experiment or experiment:config (repeatable)",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--build-dir",
        type=Path,
        default=None,
        help=f"per-run files (default {BUILD.relative_to(BUILD.parents[1])})",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="results files (default rope_lib/data; with --smoke, the build dir)",
    )
    parser.add_argument("--plan", action="store_true", help="print the plan, train nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    build = args.build_dir if args.build_dir is not None else BUILD
    output = args.output_dir
    if output is None and args.smoke:
        output = build
    sweeps = plan(selected_sweeps(args.only, args.smoke), build, output)
    print(describe_plan(sweeps, args.workers), file=sys.stderr)
    if args.plan:
        return 0
    try:
        blobs = run_sweeps(sweeps, workers=args.workers, progress=not args.no_progress)
    except KeyboardInterrupt:
        return 130
    assert blobs is not None
    for sweep, blob in zip(sweeps, blobs, strict=True):
        seconds = sum(
            r.get("train_cpu_seconds", 0) + r.get("eval_cpu_seconds", 0) for r in blob["runs"]
        )
        print(
            f"wrote {sweep.output} ({len(blob['runs'])} runs, {seconds / 60:.1f} CPU-min)",
            file=sys.stderr,
        )
    return 0
