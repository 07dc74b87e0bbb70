r"""One resumable runner for every sweep of chapter 9's experiments.

An *experiment* (:class:`Experiment`, listed in :data:`REGISTRY`) is a task module and a model
module with three entry points: its named configurations, the runs of a configuration (JSON-ready
dicts) and a function that trains and evaluates one run.  A *sweep* is one configuration of one
experiment.  :func:`run_sweeps`

* makes a plan (:func:`plan`): every run of the chosen sweeps with its estimated CPU seconds,
  the finished ones found on disk;
* trains the others on ``workers`` processes (two by default, each single-threaded), the
  longest first (so the last runs to finish are short ones and both cores stay busy), runs of
  every experiment in one queue;
* shows one progress bar, in estimated CPU minutes, with the time left;
* writes each finished run to its own file ``<build>/<experiment>/<config>/<key[:16]>/<run>.json``
  at once, so an interrupted sweep resumes where it stopped;
* writes a sweep's results file when all its runs are done.

Every file is written to a temporary file beside its target and moved into place with
``os.replace`` (:func:`write_json_atomic`): no reader ever sees a half-written file.

The key
-------
A sweep's results are identified by

.. math:: \text{key} = \operatorname{SHA256}\big(\text{experiment} \,\|\, p_1 \,\|\,
          \text{src}(p_1) \,\|\, \dots \,\|\, \operatorname{JSON}(\text{config})\big)

over the rope_lib source files :math:`p_1, p_2, \dots` on the results' path
(:func:`code_files`): every rope_lib module that importing the experiment's task and model
modules loads (found by importing them in a fresh interpreter, so the package's own
``__init__`` imports count), together with every rope_lib module that those files import
anywhere, inside functions too (found by reading their ``import`` statements).  Changing any of
them, or the configuration, changes the key, and :func:`load_results` refuses the stored file
as stale.  This module, the command line and the report are not on the path: they move and
read results, they do not change them.

Adding an experiment
--------------------
An entry of :data:`REGISTRY` names its modules and three functions by ``"module:attribute"``
strings (so that worker processes can import them): ``configs`` (a dict of named
configurations, each a dataclass with a ``name``), ``runs(config) -> list[dict]`` and
``run(config, run) -> dict`` (JSON-ready), and ``cost(config, run) -> float`` (estimated CPU
seconds, used only for the order of the queue and the progress bar).  Experiment 2
(``needle``) is plugged in by the adapters :func:`needle_runs` and :func:`needle_run` around
``rope_lib.experiments.needle_model.run_needle(config, base, seed)``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._validate import _describe, check_flag, check_positive_int

__all__ = [
    "Experiment",
    "REGISTRY",
    "PlannedRun",
    "code_files",
    "sweep_key",
    "plan",
    "run_sweeps",
    "load_results",
    "write_json_atomic",
]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rope_lib"
DATA = PACKAGE / "data"
BUILD = ROOT / "_build" / "experiments"


# --------------------------------------------------------------------------------------------
# the registry
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Experiment:
    """An experiment the runner can train: where its pieces are, by import path.

    Attributes
    ----------
    name : str
        Short name (``"recall"``, ``"needle"``): the results files are
        ``experiment_<name>_<config>.json``.
    modules : tuple of str
        The task and model modules (dotted names); the key covers what they import.
    configs : str
        ``"module:ATTRIBUTE"`` of the dict of named configurations.
    runs, run, cost : str
        ``"module:function"`` of ``runs(config) -> list[dict]``, ``run(config, run) -> dict``
        and ``cost(config, run) -> float`` (estimated CPU seconds).
    chapter, smoke : tuple of str
        The configurations chapter 9 reads (``python -m rope_lib.experiments``) and the smoke
        configurations (``--smoke``).
    """

    name: str
    modules: tuple[str, ...]
    configs: str
    runs: str
    run: str
    cost: str
    chapter: tuple[str, ...] = ("full",)
    smoke: tuple[str, ...] = ("smoke",)

    def available(self) -> bool:
        """Whether every module of the experiment exists (experiment 2 may not be merged yet)."""
        return all(importlib.util.find_spec(m) is not None for m in self.modules)

    def config(self, name: str) -> Any:
        """The named configuration."""
        configs = _resolve(self.configs)
        if name not in configs:
            raise ValueError(
                f"config must be one of {tuple(configs)} for experiment {self.name!r}, got {name!r}"
            )
        return configs[name]


def _resolve(path: str) -> Any:
    """The object at ``"module:attribute"``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _experiment(name: str, configs: str, run: str) -> Experiment:
    """An experiment of this package: modules ``<name>_task`` and ``<name>_model``, and the
    runner's ``<name>_runs`` and ``<name>_cost``; ``configs`` and ``run`` as
    ``"module:attribute"`` within the package."""
    package = __name__.rpartition(".")[0]
    return Experiment(
        name=name,
        modules=(f"{package}.{name}_task", f"{package}.{name}_model"),
        configs=f"{package}.{configs}",
        runs=f"{__name__}:{name}_runs",
        run=f"{package}.{run}",
        cost=f"{__name__}:{name}_cost",
    )


#: The experiments of chapter 9.
REGISTRY: dict[str, Experiment] = {
    e.name: e
    for e in (
        _experiment("recall", "recall_task:RECALL_CONFIGS", "recall_model:run_recall"),
        _experiment("needle", "needle_model:NEEDLE_CONFIGS", "runner:needle_run"),
    )
}


def recall_runs(config: Any) -> list[dict[str, Any]]:
    """Runs of a :class:`~rope_lib.experiments.recall_task.RecallConfig`."""
    return config.runs()


#: CPU seconds of experiment 1 on the 2-core build machine under load, one thread, fitted to
#: a pilot of one run per cell of the full sweep (1500 steps; measured 4.0, 4.9, 7.0 and 14.5
#: ms per step at d = 16, 32, 64, 128 with 32 x 128 tokens, and 0.33, 0.39, 1.28, 2.1 us per
#: held-out token): a step costs ``RECALL_STEP_FIXED`` plus ``RECALL_STEP_PER_TOKEN_DIM``
#: times batch x tokens x d, a held-out token ``RECALL_EVAL_PER_TOKEN_DIM`` times d.
RECALL_STEP_FIXED = 2.5e-3
RECALL_STEP_PER_TOKEN_DIM = 2.0e-8
RECALL_EVAL_PER_TOKEN_DIM = 1.6e-8


def recall_cost(config: Any, run: Mapping[str, Any]) -> float:
    """Estimated CPU seconds of one run of experiment 1 (training and every evaluation)."""
    d = run["d"]
    step = RECALL_STEP_FIXED + RECALL_STEP_PER_TOKEN_DIM * config.batch_size * run["tokens"] * d
    bins = len(_recall_bins(run["span"], config.n_bins)) - 1
    held_out = bins * config.eval_per_bin * (run["tokens"] + sum(run["eval_tokens"]))
    return config.steps * step + RECALL_EVAL_PER_TOKEN_DIM * held_out * d


def _recall_bins(span: int, n_bins: int) -> Any:
    from .recall_task import distance_bins

    return distance_bins(span, n_bins)


def needle_runs(config: Any) -> list[dict[str, Any]]:
    """Runs of a NeedleConfig: every ``(base, seed)``."""
    return [{"base": b, "seed": s} for b in config.bases for s in config.seeds]


def needle_run(config: Any, run: Mapping[str, Any]) -> dict[str, Any]:
    """One run of experiment 2: ``run_needle(config, base, seed)`` with the run's parameters."""
    from .needle_model import run_needle  # type: ignore[import-not-found]

    return {**run, **run_needle(config, run["base"], run["seed"])}


#: CPU seconds of experiment 2 on the 2-core build machine under load, one thread, from a
#: pilot run of the full configuration (base 1e4, seed 0: 238 CPU-s for 6000 steps at 24
#: tokens and 2000 at 64, batch 32; 28 s for 2 x 15,360 held-out sequences of 64 tokens): a
#: step costs ``NEEDLE_STEP_FIXED`` plus ``NEEDLE_STEP_PER_TOKEN`` times batch x tokens, a
#: held-out token ``NEEDLE_EVAL_PER_TOKEN``.
NEEDLE_STEP_FIXED = 4.5e-3
NEEDLE_STEP_PER_TOKEN = 1.9e-5
NEEDLE_EVAL_PER_TOKEN = 1.4e-5


def needle_cost(config: Any, run: Mapping[str, Any]) -> float:
    """Estimated CPU seconds of one run of experiment 2 (both training stages, evaluation)."""

    def steps(n: int, length: int) -> float:
        return n * (NEEDLE_STEP_FIXED + NEEDLE_STEP_PER_TOKEN * config.batch_size * length)

    first = config.curriculum_steps
    # the main and the absent-key sequences, and the main one moved by ``shift`` tokens
    per_body = 2 * config.context_length + (config.context_length + config.shift) * bool(
        config.shift
    )
    held_out = config.eval_per_bin * (len(config.bin_edges) - 1) * per_body
    return (
        steps(first, config.curriculum_length)
        + steps(config.steps - first, config.context_length)
        + NEEDLE_EVAL_PER_TOKEN * held_out
    )


# --------------------------------------------------------------------------------------------
# keys
# --------------------------------------------------------------------------------------------
def _module_file(name: str) -> Path | None:
    """The source file of a rope_lib module (or package ``__init__``), or None."""
    if name != "rope_lib" and not name.startswith("rope_lib."):
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # "package.name" where name is not a submodule
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _module_name(path: Path) -> str:
    rel = path.resolve().relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """rope_lib modules named by the import statements of a file, anywhere in it."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # submodules
    return {m for m in found if m == "rope_lib" or m.startswith("rope_lib.")}


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _loaded_by_import(modules: Sequence[str]) -> set[str]:
    """rope_lib modules loaded when a fresh interpreter imports ``modules``."""
    code = (
        "import importlib, json, sys\n"
        f"for m in {list(modules)!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(n for n in sys.modules "
        "if n == 'rope_lib' or n.startswith('rope_lib.'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


@functools.lru_cache(maxsize=32)
def code_files(modules: tuple[str, ...]) -> tuple[str, ...]:
    """The rope_lib source files on the path of results made by ``modules`` (module docstring).

    Parameters
    ----------
    modules : tuple of str
        Dotted names of the experiment's task and model modules.

    Returns
    -------
    tuple of str
        Paths relative to the repository root (``rope_lib/...``), sorted.
    """
    names = _loaded_by_import(modules) | {p for m in modules for p in _with_parents(m)}
    todo, files = list(names), set()
    while todo:
        path = _module_file(todo.pop())
        if path is None or path in files:
            continue
        files.add(path)
        for module in _imports(path):
            todo.extend(_with_parents(module))
    return tuple(sorted(str(p.relative_to(ROOT)) for p in files))


def config_dict(config: Any) -> dict[str, Any]:
    """A configuration as JSON-ready data: its ``to_dict()``, or its dataclass fields."""
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return json.loads(json.dumps(dataclasses.asdict(config)))
    raise TypeError(f"config must be a dataclass instance, got {_describe(config)}")


def sweep_key(experiment: Experiment, config: Any, files: Sequence[str] | None = None) -> str:
    """SHA-256 of the experiment's name, its code files (path and bytes) and the configuration.

    Parameters
    ----------
    experiment : Experiment
        The experiment.
    config : dataclass
        One of its configurations.
    files : sequence of str, optional
        Paths relative to the repository root (default :func:`code_files` of the
        experiment's modules).

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    digest = hashlib.sha256(experiment.name.encode() + b"\0")
    for rel in code_files(experiment.modules) if files is None else files:
        digest.update(rel.encode() + b"\0" + (ROOT / rel).read_bytes() + b"\0")
    digest.update(json.dumps(config_dict(config), sort_keys=True).encode())
    return digest.hexdigest()


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------
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


def _read_run(path: Path, key: str) -> dict[str, Any] | None:
    """A finished run's result if its file is whole and carries ``key``, else None."""
    try:
        blob = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(blob, dict) and blob.get("key") == key and isinstance(blob.get("run"), dict):
        return blob["run"]
    return None


def run_id(run: Mapping[str, Any]) -> str:
    """File name of a run: its scalar parameters, then 12 hex digits of SHA-256 of all of them."""
    scalars = [str(v) for v in run.values() if isinstance(v, (int, float, str))]
    digest = hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest()[:12]
    return "-".join([*scalars, digest]).replace("/", "_")


def results_path(experiment: str, config: str, directory: Path | None = None) -> Path:
    """``<directory>/experiment_<experiment>_<config>.json`` (default: rope_lib/data)."""
    return (
        DATA if directory is None else Path(directory)
    ) / f"experiment_{experiment}_{config}.json"


# --------------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: where its file goes, its estimated cost, and whether it is done."""

    #: the experiment and its configuration (a dataclass) and the sweep's key
    experiment: Experiment
    config: Any
    key: str
    #: the run's parameters, as passed to the experiment's ``run``
    run: dict[str, Any]
    #: the per-run file, the estimated CPU seconds, and whether the file holds a result
    path: Path
    seconds: float
    done: bool


@dataclass(frozen=True)
class Sweep:
    """One configuration of one experiment, planned."""

    experiment: Experiment
    config: Any
    #: the key and the code files it covers (paths relative to the repository)
    key: str
    files: tuple[str, ...]
    #: every run of the configuration, in its order, and the results file
    runs: tuple[PlannedRun, ...]
    output: Path


def plan(
    sweeps: Iterable[tuple[str, Any]],
    build_dir: Path | None = None,
    output_dir: Path | None = None,
    registry: Mapping[str, Experiment] | None = None,
) -> list[Sweep]:
    """Every run of the given sweeps, with its file, estimated CPU seconds and state.

    Parameters
    ----------
    sweeps : iterable of (str, config)
        ``(experiment name, configuration or its name)``.
    build_dir : Path, optional
        Root of the per-run files (default ``_build/experiments``).
    output_dir : Path, optional
        Where the results files go (default ``rope_lib/data``).
    registry : mapping, optional
        Experiments by name (default :data:`REGISTRY`).

    Returns
    -------
    list of Sweep
    """
    registry = REGISTRY if registry is None else registry
    build = BUILD if build_dir is None else Path(build_dir)
    planned = []
    for name, config in sweeps:
        if name not in registry:
            raise ValueError(f"experiment must be one of {tuple(registry)}, got {name!r}")
        exp = registry[name]
        cfg = exp.config(config) if isinstance(config, str) else config
        files = code_files(exp.modules)
        key = sweep_key(exp, cfg, files)
        cost = _resolve(exp.cost)
        folder = build / name / cfg.name / key[:16]
        runs = []
        for run in _resolve(exp.runs)(cfg):
            path = folder / f"{run_id(run)}.json"
            done = _read_run(path, key) is not None
            runs.append(PlannedRun(exp, cfg, key, run, path, float(cost(cfg, run)), done))
        planned.append(
            Sweep(exp, cfg, key, files, tuple(runs), results_path(name, cfg.name, output_dir))
        )
    return planned


def describe_plan(sweeps: Sequence[Sweep], workers: int = 2) -> str:
    """A table of the plan: runs, runs done, estimated CPU minutes per sweep, and the total."""
    lines = [f"{'sweep':24s} {'runs':>5s} {'done':>5s} {'CPU min':>8s} {'left':>8s}"]
    total = left = 0.0
    for sweep in sweeps:
        cpu = sum(r.seconds for r in sweep.runs) / 60
        todo = sum(r.seconds for r in sweep.runs if not r.done) / 60
        n_done = sum(r.done for r in sweep.runs)
        name = f"{sweep.experiment.name} {sweep.config.name}"
        lines.append(f"{name:24s} {len(sweep.runs):5d} {n_done:5d} {cpu:8.1f} {todo:8.1f}")
        total, left = total + cpu, left + todo
    lines.append(f"{'total':24s} {'':5s} {'':5s} {total:8.1f} {left:8.1f}")
    lines.append(f"about {left / workers:.0f} minutes on {workers} workers (estimated)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------
def _init_worker() -> None:
    """Each worker computes on one thread (set before torch is first imported)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"


def _work(task: PlannedRun) -> tuple[float, float]:
    """Train one run, write its file; returns (estimated, measured) CPU seconds."""
    c0 = time.process_time()
    result = _resolve(task.experiment.run)(task.config, dict(task.run))
    write_json_atomic(task.path, {"key": task.key, "run": result})
    return task.seconds, time.process_time() - c0


def _finish(sweep: Sweep) -> dict[str, Any]:
    """Write a sweep's results file from its per-run files (all must be done)."""
    runs = []
    for task in sweep.runs:
        result = _read_run(task.path, sweep.key)
        if result is None:
            raise RuntimeError(f"run {task.path.name} of {sweep.experiment.name} is not done")
        runs.append(result)
    versions = {"python": platform.python_version()}
    for package in ("numpy", "torch", "transformers"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    blob = {
        "key": sweep.key,
        "experiment": sweep.experiment.name,
        "config_name": sweep.config.name,
        "config": config_dict(sweep.config),
        "code_files": list(sweep.files),
        "regenerate": _hint(sweep.experiment.name, sweep.config.name),
        "versions": versions,
        "machine": platform.machine(),
        "runs": runs,
    }
    write_json_atomic(sweep.output, blob)
    return blob


def _hint(experiment: str, config: str) -> str:
    if config == "smoke":
        return (
            f"python -m rope_lib.experiments --smoke --only {experiment} --output-dir rope_lib/data"
        )
    return f"make experiment  (python -m rope_lib.experiments --only {experiment})"


def _bar(total: float, done: float, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(
        total=total / 60,
        initial=done / 60,
        unit="CPU-min",
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.1f}/{total:.1f} CPU-min "
        "[{elapsed} elapsed, {remaining} left]{postfix}",
        desc="experiments",
        file=sys.stderr,
    )


def run_sweeps(
    sweeps: Sequence[Sweep],
    *,
    workers: int = 2,
    progress: bool = True,
    max_new_runs: int | None = None,
) -> list[dict[str, Any]] | None:
    """Train every run of a plan that is not done, then write the sweeps' results files.

    Runs go to ``workers`` processes (spawned, one thread each), the longest first; with
    ``workers = 1`` they run in this process.  Interrupted (Ctrl-C), the finished runs stay on
    disk and the next call resumes.

    Parameters
    ----------
    sweeps : sequence of Sweep
        From :func:`plan`.
    workers : int
        Worker processes (1 to 8).
    progress : bool
        Show one progress bar (estimated CPU minutes, time left) on stderr.
    max_new_runs : int, optional
        Stop after this many new runs (the rest is left for a later call).

    Returns
    -------
    list of dict or None
        The results of every sweep (as written), or ``None`` when stopped by ``max_new_runs``.
    """
    workers = check_positive_int(workers, "workers", maximum=8)
    progress = check_flag(progress, "progress")
    if max_new_runs is not None:
        max_new_runs = check_positive_int(max_new_runs, "max_new_runs", minimum=0, maximum=10**6)
    every = [task for sweep in sweeps for task in sweep.runs]
    todo = sorted((t for t in every if not t.done), key=lambda t: -t.seconds)
    stopped = max_new_runs is not None and len(todo) > max_new_runs
    todo = todo[:max_new_runs] if max_new_runs is not None else todo
    total = sum(t.seconds for t in every)
    bar = _bar(total, total - sum(t.seconds for t in every if not t.done), progress)
    finished = sum(t.done for t in every)

    def tick(estimated: float, measured: float) -> None:
        nonlocal finished
        finished += 1
        if bar is not None:
            bar.update(estimated / 60)
            bar.set_postfix_str(f"runs {finished}/{len(every)}, last {measured:.0f} s")

    try:
        if workers == 1:
            _init_worker()
            for task in todo:
                tick(*_work(task))
        else:
            _run_pool(todo, workers, tick)
    except KeyboardInterrupt:
        print("\ninterrupted: finished runs are kept; run again to resume", file=sys.stderr)
        raise
    finally:
        if bar is not None:
            bar.close()
    if stopped:
        return None
    return [_finish(sweep) for sweep in sweeps]


def _run_pool(todo: Sequence[PlannedRun], workers: int, tick: Callable) -> None:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker) as pool:
        pending = {pool.submit(_work, task) for task in todo}  # submitted longest first
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    tick(*future.result())
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def load_results(
    experiment: str,
    config: str,
    directory: Path | None = None,
    registry: Mapping[str, Experiment] | None = None,
) -> dict[str, Any]:
    """A stored results file, refused when missing, unreadable or stale.

    Parameters
    ----------
    experiment : str
        A name of :data:`REGISTRY`.
    config : str
        One of the experiment's configurations.
    directory : Path, optional
        Where the file is (default ``rope_lib/data``).
    registry : mapping, optional
        Experiments by name (default :data:`REGISTRY`).

    Returns
    -------
    dict
        ``key``, ``experiment``, ``config``, ``code_files``, provenance and ``runs`` (one
        result per run, in the order of the configuration's runs).

    Raises
    ------
    FileNotFoundError
        The file does not exist; the message says how to generate it.
    ValueError
        Not a results file, or stale (made by other code or another configuration).
    """
    registry = REGISTRY if registry is None else registry
    if experiment not in registry:
        raise ValueError(f"experiment must be one of {tuple(registry)}, got {experiment!r}")
    exp = registry[experiment]
    cfg = exp.config(config)
    path = results_path(experiment, cfg.name, directory)
    hint = _hint(experiment, cfg.name)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if not path.exists():
        raise FileNotFoundError(
            f"{experiment} {config!r}: no results file {shown}; generate it with `{hint}` from "
            "the repository root"
        )
    try:
        blob = json.loads(path.read_text())
    except ValueError:
        blob = None
    if not isinstance(blob, dict):
        raise ValueError(f"{experiment} {config!r}: {shown} is not a results file; `{hint}`")
    if blob.get("key") != sweep_key(exp, cfg):
        raise ValueError(
            f"{experiment} {config!r}: {shown} is stale (the code on its path or the "
            f"configuration changed since it was written); regenerate it with `{hint}`"
        )
    return blob
