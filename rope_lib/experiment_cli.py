"""Command line of chapter 9's experiments (``make experiment`` runs ``--all``).

* ``python -m rope_lib.experiment_cli --config full``: one sweep of experiment 1
  (:mod:`rope_lib.experiment`), with a progress bar, resuming from ``_build/experiment/``;
* ``python -m rope_lib.experiment_cli --experiment lm --config full``: one sweep of
  experiment 2 (:mod:`rope_lib.experiment_lm`);
* ``python -m rope_lib.experiment_cli --all``: every sweep the chapter reads, on both cores:
  experiment 1's ``full`` and ``uniform`` in one process and experiment 2's ``full`` in
  another, each single-threaded (so each run's numbers do not depend on the other process),
  with one progress bar and an estimate of the time left for the whole; the processes'
  own output goes to ``_build/experiment/<sweep>.log``.  Interrupted, it leaves the
  finished runs in place and the next call resumes them;
* ``python -m rope_lib.experiment_cli --all --smoke`` (``make experiment SMOKE=1``): the
  smoke sweeps of both experiments, the same way, with their per-run files, logs and
  results files all under ``_build/experiment-smoke/`` (nothing is written to
  ``rope_lib/data``): a check, in about a minute, that the whole path runs.

The entry point lives in its own module because ``rope_lib`` imports the experiment modules on
import, and running an already imported module with ``python -m`` makes Python warn.  It is
not part of any results key: it starts sweeps, it does not change their numbers.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

#: The sweeps of ``--all``, grouped by process: each group runs in order in one process.
ALL_GROUPS = ((("recall", "full"), ("recall", "uniform")), (("lm", "full"),))
#: The sweeps of ``--all --smoke``: each experiment's smoke configuration.
SMOKE_GROUPS = ((("recall", "smoke"),), (("lm", "smoke"),))
_ROOT = Path(__file__).resolve().parent.parent
#: Where ``--all --smoke`` writes everything (per-run files, logs, results).
SMOKE_DIR = _ROOT / "_build" / "experiment-smoke"


def _plan(experiment: str, config: str, build: Path | None):
    if experiment == "recall":
        from rope_lib.experiment import experiment_plan

        return experiment_plan(config, None if build is None else build / "experiment")
    from rope_lib.experiment_lm import lm_plan

    return lm_plan(config, None if build is None else build / "experiment_lm")


def _command(experiment: str, config: str, build: Path | None, out: Path | None) -> str:
    cmd = [sys.executable, "-m", "rope_lib.experiment_cli", "--config", config, "--no-progress"]
    if experiment == "lm":
        cmd += ["--experiment", "lm"]
    if build is not None:
        cmd += [
            "--build-dir",
            str(build / ("experiment_lm" if experiment == "lm" else "experiment")),
        ]
    if out is not None:
        name = f"experiment_lm_{config}" if experiment == "lm" else f"experiment_{config}"
        cmd += ["--output", str(out / f"{name}.json")]
    return " ".join(shlex.quote(c) for c in cmd)


def run_all(
    groups: Sequence[Sequence[tuple[str, str]]] = ALL_GROUPS,
    *,
    build_dir: Path | None = None,
    output_dir: Path | None = None,
    poll_seconds: float = 2.0,
) -> int:
    """Run sweeps in parallel, one process per group, with one progress bar.

    Parameters
    ----------
    groups : sequence of sequences of (experiment, config)
        Each group runs in order in its own process; ``experiment`` is ``"recall"`` or
        ``"lm"``.  Default :data:`ALL_GROUPS`, what the chapter reads.
    build_dir : Path, optional
        Root of the per-run files and logs (default ``_build``).
    output_dir : Path, optional
        Where the results files go (default ``rope_lib/data``).
    poll_seconds : float
        How often the progress bar looks at the finished runs.

    Returns
    -------
    int
        0 when every sweep finished, else the first failing process's exit code.
    """
    from tqdm import tqdm

    plans = [_plan(*sweep, build_dir) for group in groups for sweep in group]
    log_dir = (build_dir or _ROOT / "_build") / "experiment"
    log_dir.mkdir(parents=True, exist_ok=True)
    scripts = []
    for group in groups:
        steps = [_command(*sweep, build_dir, output_dir) for sweep in group]
        logs = [log_dir / f"{experiment}-{config}.log" for experiment, config in group]
        scripts.append(
            " && ".join(
                f"{s} > {shlex.quote(str(log))} 2>&1" for s, log in zip(steps, logs, strict=True)
            )
        )
    procs = [subprocess.Popen(["sh", "-c", script], cwd=_ROOT) for script in scripts]

    def seconds() -> tuple[float, float]:
        pairs = [plan.estimated_seconds() for plan in plans]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    done, total = seconds()
    bar = tqdm(
        total=total / 60,
        initial=done / 60,
        unit="CPU-min",
        bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} CPU-min [{elapsed}<{remaining}]",
        desc="make experiment",
        file=sys.stderr,
    )
    try:
        while any(p.poll() is None for p in procs):
            time.sleep(poll_seconds)
            now, _ = seconds()
            bar.update(now / 60 - bar.n)
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        print("\ninterrupted: finished runs are kept; run again to resume", file=sys.stderr)
        return 130
    finally:
        bar.close()
    codes = [p.returncode for p in procs]
    for code, group in zip(codes, groups, strict=True):
        names = ", ".join(f"{e} {c}" for e, c in group)
        if code:
            print(f"failed ({names}): see {log_dir}/*.log", file=sys.stderr)
    return next((c for c in codes if c), 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to experiment 1, experiment 2, or run every sweep (``--all``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--all"]:
        return run_all()
    if sorted(argv) == ["--all", "--smoke"]:
        code = run_all(SMOKE_GROUPS, build_dir=SMOKE_DIR, output_dir=SMOKE_DIR)
        if code == 0:
            print(f"smoke sweeps done: results in {SMOKE_DIR} (rope_lib/data untouched)")
        return code
    if "--smoke" in argv:
        print("--smoke goes with --all: python -m rope_lib.experiment_cli --all --smoke")
        return 2
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--experiment", choices=("recall", "lm"), default="recall")
    known, rest = parser.parse_known_args(argv)
    if known.experiment == "lm":
        from rope_lib.experiment_lm import main as lm_main

        return lm_main(rest)
    from rope_lib.experiment import main as recall_main

    return recall_main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
