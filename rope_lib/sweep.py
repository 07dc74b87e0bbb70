r"""Resumable training sweeps with atomic result files (the runner of chapter 9's experiments).

Chapter 9 (``chapters/09_experiments.md``) reads stored results of two sweeps:
:mod:`rope_lib.experiment` (one RoPE attention layer) and :mod:`rope_lib.experiment_lm` (a tiny
Llama).  Both are run by :func:`run_sweep`, which

* trains the runs of a sweep in order, one small JSON file per finished run under
  ``<build_dir>/<key[:16]>/``, so an interrupted sweep resumes where it stopped;
* shows a progress bar with an ETA over the sweep's work (tqdm; a line per run without it);
* writes the results file once every run is done;
* writes every file to a temporary file beside its target, then ``os.replace`` it: no reader
  ever sees a half-written file.

A sweep's identity is its *key* (:func:`code_key`): the SHA-256 of the source files its numbers
depend on and of its configuration, as in

.. math:: \text{key} = \operatorname{SHA256}\big(f_1 \,\|\, \text{src}(f_1) \,\|\, \dots \,\|\,
          \operatorname{JSON}(\text{config})\big).

:func:`load_results` refuses a results file whose key differs from the current one (stale: the
code or the configuration changed since it was written), naming the command that regenerates it.
This module itself is not part of any key: it moves results around, it does not change them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._validate import _describe, check_flag, check_positive_int

__all__ = ["SweepPlan", "code_key", "run_sweep", "load_results", "write_json_atomic"]

_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep trains and where its per-run files go, without training anything.

    ``make experiment`` reads the plans of every sweep to show one progress bar while the
    sweeps run in other processes (:func:`rope_lib.experiment.main`).

    Attributes
    ----------
    name : str
        The sweep's name, for progress messages.
    key : str
        The sweep's identity (:func:`code_key`).
    runs : tuple
        Every run, in the order of the results file.
    run_id : callable
        ``run_id(run)``: the file name (without ``.json``) of a run's result.
    cost : callable
        ``cost(run)``: the run's work in ``unit``.
    build_dir : Path
        Per-run files go to ``build_dir / key[:16]``.
    unit : str
        Name of the work unit.
    seconds_per_unit : float
        Measured CPU seconds per unit on the build machine (for an overall estimate across
        sweeps whose units differ).
    """

    name: str
    key: str
    runs: tuple
    run_id: Callable[[tuple], str]
    cost: Callable[[tuple], float]
    build_dir: Path
    unit: str = "Mtok"
    seconds_per_unit: float = 1.0

    @property
    def run_dir(self) -> Path:
        """The directory of this sweep's per-run files."""
        return Path(self.build_dir) / self.key[:16]

    def finished(self) -> dict[tuple, dict[str, Any]]:
        """The runs whose result file exists and carries this sweep's key, with their results."""
        done: dict[tuple, dict[str, Any]] = {}
        for r in self.runs:
            path = self.run_dir / f"{self.run_id(r)}.json"
            if not path.exists():
                continue
            try:
                blob = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(blob, dict) and blob.get("key") == self.key:
                done[r] = blob["run"]
        return done

    def estimated_seconds(self) -> tuple[float, float]:
        """``(done, total)``: estimated CPU seconds of the finished runs and of all runs."""
        done = self.finished()
        cost = {r: float(self.cost(r)) * self.seconds_per_unit for r in self.runs}
        return sum(cost[r] for r in done), sum(cost.values())


def code_key(files: Sequence[Path], config: dict[str, Any]) -> str:
    """SHA-256 of the named source files (name and bytes) and of a JSON-ready configuration.

    Parameters
    ----------
    files : sequence of Path
        Source files whose bytes the results depend on, hashed in the order given.
    config : dict
        The configuration, hashed as JSON with sorted keys.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    digest = hashlib.sha256()
    for path in files:
        path = Path(path)
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(json.dumps(config, sort_keys=True).encode())
    return digest.hexdigest()


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to a temporary file beside ``path``, then ``os.replace`` it.

    The temporary file is flushed and synced first, so ``path`` holds either its old content or
    the complete new one, never a part; a failure leaves no temporary file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def as_path(value: Any, name: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`, or a TypeError naming ``name``."""
    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise TypeError(f"{name} must be a path (str or os.PathLike), got {_describe(value)}")
    return Path(value)


def _bar(name: str, total: float, done: float, unit: str) -> Any:
    """A tqdm bar over the sweep's work, or None when tqdm is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(
        total=total,
        initial=done,
        unit=unit,
        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} "
        + unit
        + " [{elapsed}<{remaining}]{postfix}",
        desc=name,
        file=sys.stderr,
    )


def run_sweep(
    *,
    name: str,
    key: str,
    runs: Sequence[tuple],
    run_id: Callable[[tuple], str],
    train: Callable[[tuple], dict[str, Any]],
    cost: Callable[[tuple], float],
    build_dir: Path,
    output: Path,
    header: dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]],
    progress: bool = True,
    max_new_runs: int | None = None,
    unit: str = "Mtok",
) -> dict[str, Any] | None:
    """Train the runs not done yet, then write the results file.

    Parameters
    ----------
    name : str
        The sweep's name, shown on the progress bar.
    key : str
        The sweep's identity (:func:`code_key`); a per-run file with another key is retrained.
    runs : sequence of tuple
        Every run, in the order of the results file.
    run_id : callable
        ``run_id(run)``: the file name (without ``.json``) of a run's result.
    train : callable
        ``train(run)``: trains and evaluates one run, returns its JSON-ready result.
    cost : callable
        ``cost(run)``: its work in ``unit`` (for the progress bar and the ETA).
    build_dir : Path
        Per-run files go to ``build_dir / key[:16]``.
    output : Path
        The results file, written when every run is done.
    header : dict or callable
        Entries of the results file besides ``key`` and ``runs`` (configuration, provenance),
        or a function of the list of run results that returns them (for totals).
    progress : bool
        Show progress with an ETA on stderr.
    max_new_runs : int, optional
        Stop after training this many runs (the rest is left for a later call).
    unit : str
        Name of the work unit of ``cost``.

    Returns
    -------
    dict or None
        ``{"key": key, **header, "runs": [...]}`` as written to ``output``, or ``None`` when
        stopped by ``max_new_runs`` before every run was done.
    """
    progress = check_flag(progress, "progress")
    if max_new_runs is not None:
        max_new_runs = check_positive_int(max_new_runs, "max_new_runs", minimum=0, maximum=10**6)
    plan = SweepPlan(name, key, tuple(runs), run_id, cost, Path(build_dir), unit)
    run_dir = plan.run_dir
    work = {r: float(cost(r)) for r in runs}
    results = plan.finished()
    total = sum(work.values())
    done = sum(work[r] for r in results)
    bar = _bar(name, total, done, unit) if progress else None
    t_start = time.perf_counter()
    new, new_work = 0, 0.0
    try:
        for r in runs:
            if r in results:
                continue
            if max_new_runs is not None and new >= max_new_runs:
                return None
            if bar is not None:
                bar.set_postfix_str(f"run {len(results) + 1}/{len(runs)}: {run_id(r)}")
            result = train(r)
            write_json_atomic(run_dir / f"{run_id(r)}.json", {"key": key, "run": result})
            results[r] = result
            new += 1
            done += work[r]
            new_work += work[r]
            if bar is not None:
                bar.update(work[r])
            elif progress:
                elapsed = time.perf_counter() - t_start
                eta = elapsed / new_work * (total - done) if new_work else 0.0
                print(
                    f"{name}: run {len(results)}/{len(runs)} {run_id(r)} done; "
                    f"elapsed {elapsed:.0f} s, ETA {eta:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        if bar is not None:
            bar.close()
    done_runs = [results[r] for r in runs]
    head = header(done_runs) if callable(header) else header
    blob = {"key": key, **head, "runs": done_runs}
    write_json_atomic(Path(output), blob)
    return blob


def load_results(path: Path, key: str, name: str, hint: str) -> dict[str, Any]:
    """A stored results file, refused when missing, unreadable or stale.

    Parameters
    ----------
    path : Path
        The results file.
    key : str
        The current key of the sweep (:func:`code_key`).
    name : str
        The configuration's name, for messages.
    hint : str
        The command that regenerates the file, for messages.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        The file is not a JSON object, or its key differs from ``key``.
    """
    path = Path(path)
    try:
        shown = path.relative_to(_ROOT)
    except ValueError:
        shown = path
    if not path.exists():
        raise FileNotFoundError(
            f"config {name!r}: no results file {shown}; generate it with `{hint}` from the "
            f"repository root"
        )
    try:
        blob = json.loads(path.read_text())
    except ValueError:
        blob = None
    if not isinstance(blob, dict):
        raise ValueError(
            f"config {name!r}: {shown} is not a results file (not a JSON object); regenerate "
            f"it with `{hint}` from the repository root"
        )
    if blob.get("key") != key:
        raise ValueError(
            f"config {name!r}: {shown} is stale (the code or the configuration changed since "
            f"it was written); regenerate it with `{hint}` from the repository root"
        )
    return blob
