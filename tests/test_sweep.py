"""Tests of rope_lib.sweep: keys, resumable sweeps, the plan a progress bar reads, the reader.

A toy sweep (the square of each run's number, no torch) stands in for training, so every
expectation is computed here by hand: which runs are trained, in which order, what the results
file holds.  The real sweeps are run through the same functions by tests/test_experiment.py and
tests/test_experiment_lm.py, and by the command-line test at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rope_lib import sweep

ROOT = Path(__file__).resolve().parents[1]
RUNS = ((1,), (2,), (3,), (4,))


def toy(tmp_path: Path, calls: list, key: str = "k" * 64, **kw):
    def train(run: tuple) -> dict:
        calls.append(run)
        return {"n": run[0], "square": run[0] ** 2}

    return sweep.run_sweep(
        name="toy",
        key=key,
        runs=RUNS,
        run_id=lambda r: f"n{r[0]}",
        train=train,
        cost=lambda r: float(r[0]),
        build_dir=tmp_path / "build",
        output=tmp_path / "out.json",
        header=lambda done: {"total": sum(d["square"] for d in done)},
        progress=False,
        **kw,
    )


def test_code_key_changes_with_each_file_and_the_config(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    key = sweep.code_key([a, b], {"n": 1})
    assert len(key) == 64 and key == sweep.code_key([a, b], {"n": 1})
    assert key != sweep.code_key([a, b], {"n": 2})
    assert key != sweep.code_key([b, a], {"n": 1})
    b.write_text("y = 3\n")
    assert key != sweep.code_key([a, b], {"n": 1})


def test_an_interrupted_sweep_resumes_without_retraining(tmp_path: Path) -> None:
    calls: list = []
    assert toy(tmp_path, calls, max_new_runs=2) is None
    assert calls == [(1,), (2,)] and not (tmp_path / "out.json").exists()
    blob = toy(tmp_path, calls)
    assert calls == [(1,), (2,), (3,), (4,)]  # runs 1 and 2 were read back, not retrained
    assert blob == json.loads((tmp_path / "out.json").read_text())
    assert blob["key"] == "k" * 64 and blob["total"] == 1 + 4 + 9 + 16
    assert [r["square"] for r in blob["runs"]] == [1, 4, 9, 16]
    toy(tmp_path, calls)
    assert len(calls) == 4  # a finished sweep trains nothing


def test_plan_counts_only_whole_files_with_its_key(tmp_path: Path) -> None:
    calls: list = []
    toy(tmp_path, calls, max_new_runs=2)
    plan = sweep.SweepPlan(
        "toy",
        "k" * 64,
        RUNS,
        lambda r: f"n{r[0]}",
        lambda r: float(r[0]),
        tmp_path / "build",
        seconds_per_unit=10.0,
    )
    assert set(plan.finished()) == {(1,), (2,)}
    assert plan.estimated_seconds() == (10.0 * (1 + 2), 10.0 * (1 + 2 + 3 + 4))
    (plan.run_dir / "n3.json").write_text('{"key": "' + "k" * 64 + '", "run": ')  # cut short
    (plan.run_dir / "n4.json").write_text(json.dumps({"key": "other", "run": {}}))
    assert set(plan.finished()) == {(1,), (2,)}
    toy(tmp_path, calls)
    assert calls[2:] == [(3,), (4,)]  # the broken and the foreign file were retrained


def test_a_new_key_retrains_everything(tmp_path: Path) -> None:
    calls: list = []
    toy(tmp_path, calls)
    toy(tmp_path, calls, key="j" * 64)
    assert len(calls) == 8


def test_reader_refuses_missing_broken_and_stale_files(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    with pytest.raises(FileNotFoundError, match=r"config 'x': no results file .*`make it`"):
        sweep.load_results(path, "k", "x", "make it")
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"not a results file.*`make it`"):
        sweep.load_results(path, "k", "x", "make it")
    path.write_text(json.dumps({"key": "old"}))
    with pytest.raises(ValueError, match=r"is stale.*`make it`"):
        sweep.load_results(path, "k", "x", "make it")
    path.write_text(json.dumps({"key": "k", "runs": []}))
    assert sweep.load_results(path, "k", "x", "make it") == {"key": "k", "runs": []}


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"progress must be"):
        sweep.run_sweep(
            name="toy",
            key="k",
            runs=RUNS,
            run_id=str,
            train=dict,
            cost=len,
            build_dir=tmp_path,
            output=tmp_path / "o.json",
            header={},
            progress="yes",
        )
    with pytest.raises(ValueError, match=r"max_new_runs must be"):
        toy(tmp_path, [], max_new_runs=-1)
    with pytest.raises(TypeError, match=r"build_dir must be a path"):
        sweep.as_path(3, "build_dir")


@pytest.mark.slow
def test_make_experiment_driver_runs_both_smoke_sweeps_in_parallel(tmp_path: Path) -> None:
    """``experiment_cli.run_all`` with the two smoke sweeps: both results files appear, keyed
    like the stored smoke files, and the logs hold each process's own output."""
    code = (
        "import sys; from pathlib import Path; from rope_lib import experiment_cli as c; "
        "sys.exit(c.run_all(((('recall', 'smoke'),), (('lm', 'smoke'),)), "
        f"build_dir=Path({str(tmp_path / 'build')!r}), "
        f"output_dir=Path({str(tmp_path / 'out')!r}), poll_seconds=0.5))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "make experiment" in proc.stderr and "CPU-min" in proc.stderr
    for name in ("experiment_smoke", "experiment_lm_smoke"):
        new = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        stored = json.loads((ROOT / "rope_lib" / "data" / f"{name}.json").read_text())
        assert new["key"] == stored["key"]
    logs = sorted(p.name for p in (tmp_path / "build" / "experiment").glob("*.log"))
    assert logs == ["lm-smoke.log", "recall-smoke.log"]
