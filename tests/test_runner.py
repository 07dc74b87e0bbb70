"""Tests of rope_lib.experiments.runner and the command line (rope_lib.experiments.cli).

A toy experiment (tests/runner_toy.py: each run squares a number) stands in for training, so
which runs are trained, in which order, by which process and what the results file holds are
known by hand.  The key's file list is checked against what a fresh interpreter actually loads
while it trains and evaluates a run; the smoke sweep is rerun through the command line, killed
and resumed, and compared with the stored smoke results.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rope_lib.experiments import cli, runner
from tests import runner_toy

ROOT = Path(__file__).resolve().parents[1]
REG = {"toy": runner_toy.TOY}


def toy_plan(tmp_path: Path, config: object = "toy") -> list[runner.Sweep]:
    return runner.plan([("toy", config)], tmp_path / "build", tmp_path / "out", REG)


def log_lines(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [tuple(int(x) for x in line.split()) for line in path.read_text().splitlines()]


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.log"
    monkeypatch.setenv("TOY_RUN_LOG", str(path))
    return path


# ------------------------------------------------------------------------------------------
# plan, order, resume
# ------------------------------------------------------------------------------------------
def test_runs_longest_first_and_resume_without_retraining(tmp_path: Path, log: Path) -> None:
    sweeps = toy_plan(tmp_path)
    assert [r.seconds for r in sweeps[0].runs] == [1.0, 2.0, 3.0, 4.0]
    assert runner.run_sweeps(sweeps, workers=1, progress=False, max_new_runs=2) is None
    assert [n for n, _ in log_lines(log)] == [4, 3]  # the longest first
    out = tmp_path / "out" / "experiment_toy_toy.json"
    assert not out.exists()
    sweeps = toy_plan(tmp_path)
    assert [r.done for r in sweeps[0].runs] == [False, False, True, True]
    blobs = runner.run_sweeps(sweeps, workers=1, progress=False)
    assert [n for n, _ in log_lines(log)] == [4, 3, 2, 1]  # 4 and 3 were read back
    assert blobs[0] == json.loads(out.read_text())
    assert [r["square"] for r in blobs[0]["runs"]] == [1, 4, 9, 16]  # in the config's order
    assert blobs[0]["key"] == sweeps[0].key and blobs[0]["config"]["numbers"] == [1, 2, 3, 4]
    runner.run_sweeps(toy_plan(tmp_path), workers=1, progress=False)
    assert len(log_lines(log)) == 4  # a finished sweep trains nothing
    assert not list(tmp_path.rglob("*.tmp"))


def test_two_workers_share_the_queue(tmp_path: Path, log: Path) -> None:
    cfg = runner_toy.ToyConfig("toy", (1, 2, 3, 4, 5, 6), pause=0.5)
    blobs = runner.run_sweeps(toy_plan(tmp_path, cfg), workers=2, progress=False)
    lines = log_lines(log)
    assert sorted(n for n, _ in lines) == [1, 2, 3, 4, 5, 6]
    assert len({pid for _, pid in lines}) == 2 and os.getpid() not in {p for _, p in lines}
    assert [r["square"] for r in blobs[0]["runs"]] == [1, 4, 9, 16, 25, 36]


def test_broken_foreign_and_other_config_files_are_retrained(tmp_path: Path, log: Path) -> None:
    runner.run_sweeps(toy_plan(tmp_path), workers=1, progress=False)
    runs = toy_plan(tmp_path)[0].runs
    runs[0].path.write_text('{"key": "' + runs[0].key + '", "run": ')  # cut short
    runs[1].path.write_text(json.dumps({"key": "other", "run": {}}))
    assert [r.done for r in toy_plan(tmp_path)[0].runs] == [False, False, True, True]
    runner.run_sweeps(toy_plan(tmp_path), workers=1, progress=False)
    assert [n for n, _ in log_lines(log)][4:] == [2, 1]
    other = runner_toy.ToyConfig("toy", (1, 2, 3, 4), pause=0.0001)  # another configuration
    assert toy_plan(tmp_path, other)[0].key != runs[0].key
    assert not any(r.done for r in toy_plan(tmp_path, other)[0].runs)


def test_describe_plan_counts_runs_and_minutes(tmp_path: Path) -> None:
    text = runner.describe_plan(toy_plan(tmp_path), workers=2)
    assert "toy toy" in text and "4" in text
    assert f"{(1 + 2 + 3 + 4) / 60:.1f}" in text


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    sweeps = toy_plan(tmp_path)
    with pytest.raises(ValueError, match=r"workers must be an integer <= 8"):
        runner.run_sweeps(sweeps, workers=9)
    with pytest.raises(TypeError, match=r"progress must be True or False"):
        runner.run_sweeps(sweeps, progress="yes")
    with pytest.raises(ValueError, match=r"experiment must be one of \('toy',\)"):
        runner.plan([("nope", "toy")], registry=REG)
    with pytest.raises(ValueError, match=r"config must be one of \('toy', 'smoke'\)"):
        runner.plan([("toy", "big")], registry=REG)


# ------------------------------------------------------------------------------------------
# files and keys
# ------------------------------------------------------------------------------------------
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "results.json"
    target.write_text('{"old": true}\n')

    def broken_dump(data: object, f: object, **kwargs: object) -> None:
        f.write('{"half": ')  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.setattr(runner.json, "dump", broken_dump)
    with pytest.raises(KeyboardInterrupt):
        runner.write_json_atomic(target, {"new": True})
    assert target.read_text() == '{"old": true}\n'
    assert list(tmp_path.iterdir()) == [target]


def test_key_changes_with_each_file_and_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "ROOT", tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    cfg = runner_toy.CONFIGS["toy"]
    key = runner.sweep_key(runner_toy.TOY, cfg, ["a.py", "b.py"])
    assert len(key) == 64 and key == runner.sweep_key(runner_toy.TOY, cfg, ["a.py", "b.py"])
    assert key != runner.sweep_key(runner_toy.TOY, runner_toy.CONFIGS["smoke"], ["a.py", "b.py"])
    assert key != runner.sweep_key(runner_toy.TOY, cfg, ["a.py"])
    (tmp_path / "b.py").write_text("y = 3\n")
    assert key != runner.sweep_key(runner_toy.TOY, cfg, ["a.py", "b.py"])


def test_key_files_cover_every_module_a_run_loads() -> None:
    """A fresh interpreter trains and evaluates one run of experiment 1 (function-level imports
    included); every rope_lib module it has loaded must be in the key's file list."""
    code = (
        "import sys, json\n"
        "from rope_lib.experiments import recall_task as rt, recall_model as rm\n"
        "cfg = rt.RecallConfig('k', (rt.RecallCell(16, 4, 4, (10.0,)),), (0,), n_keys=8,\n"
        "                      key_dim=4, n_values=2, steps=2, batch_size=2, n_bins=2,\n"
        "                      eval_per_bin=2)\n"
        "rm.run_recall(cfg, cfg.runs()[0])\n"
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items()\n"
        "                        if n == 'rope_lib' or n.startswith('rope_lib.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = {str(Path(f).resolve().relative_to(ROOT)) for f in json.loads(out.stdout)}
    files = set(runner.code_files(runner.REGISTRY["recall"].modules))
    assert loaded <= files, loaded - files
    for part in ("recall_task", "recall_model", "__init__"):
        assert f"rope_lib/experiments/{part}.py" in files
    for tool in ("runner", "cli", "report", "predictions"):
        assert f"rope_lib/experiments/{tool}.py" not in files  # they do not make the numbers
    assert not any(f.startswith("rope_lib/figures") for f in files)


# ------------------------------------------------------------------------------------------
# the stored results
# ------------------------------------------------------------------------------------------
def test_reader_refuses_missing_broken_and_stale_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no results file .*--smoke --only toy"):
        runner.load_results("toy", "smoke", tmp_path, REG)
    path = tmp_path / "experiment_toy_smoke.json"
    path.write_text('{"key": ')
    with pytest.raises(ValueError, match=r"is not a results file"):
        runner.load_results("toy", "smoke", tmp_path, REG)
    path.write_text(json.dumps({"key": "0" * 64, "runs": []}))
    with pytest.raises(ValueError, match=r"is stale.*--smoke --only toy"):
        runner.load_results("toy", "smoke", tmp_path, REG)
    key = runner.sweep_key(runner_toy.TOY, runner_toy.CONFIGS["smoke"])
    path.write_text(json.dumps({"key": key, "runs": []}))
    assert runner.load_results("toy", "smoke", tmp_path, REG)["key"] == key
    with pytest.raises(ValueError, match=r"experiment must be one of"):
        runner.load_results("nope", "smoke")


def test_stored_smoke_results_match_their_config() -> None:
    blob = runner.load_results("recall", "smoke")  # refuses a stale file
    cfg = runner.REGISTRY["recall"].config("smoke")
    assert blob["config"] == cfg.to_dict()
    strip = ("span", "tokens", "d", "distances", "eval_tokens", "base", "seed")
    assert [{k: r[k] for k in strip} for r in blob["runs"]] == cfg.runs()


# ------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------
def test_cli_plan_only_and_unknown_names(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["--plan", "--smoke", "--only", "recall"]) == 0
    err = capsys.readouterr().err
    assert "recall smoke" in err and "CPU min" in err
    with pytest.raises(SystemExit, match=r"unknown experiment 'bogus'"):
        cli.main(["--plan", "--only", "bogus"])
    assert cli.selected_sweeps(["recall:smoke"], smoke=False) == [("recall", "smoke")]
    assert cli.selected_sweeps(["recall"], smoke=False) == [("recall", "full")]


def test_cli_skips_an_experiment_whose_modules_are_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    missing = runner.Experiment("ghost", ("rope_lib.experiments.no_such_module",), "", "", "", "")
    monkeypatch.setitem(runner.REGISTRY, "ghost", missing)
    monkeypatch.setattr(cli, "REGISTRY", runner.REGISTRY)
    chosen = cli.selected_sweeps([], smoke=True)
    assert ("recall", "smoke") in chosen and all(e != "ghost" for e, _ in chosen)
    assert "'ghost': modules missing, skipped" in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"'ghost' is not available"):
        cli.selected_sweeps(["ghost"], smoke=True)


def _timing_free(run: dict) -> dict:
    return {k: v for k, v in run.items() if not k.endswith("seconds")}


@pytest.mark.slow
def test_smoke_reproduces_the_stored_results_after_a_kill(tmp_path: Path) -> None:
    """``python -m rope_lib.experiments --smoke``: killed after two runs, resumed, it writes the
    stored smoke results again (nothing under rope_lib/data)."""
    stored = runner.load_results("recall", "smoke")
    cmd = [sys.executable, "-m", "rope_lib.experiments", "--smoke", "--only", "recall",
           "--build-dir", str(tmp_path), "--no-progress"]  # fmt: skip
    data_before = sorted(p.stat().st_mtime for p in (ROOT / "rope_lib" / "data").iterdir())
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 300
    while len(list((tmp_path / "recall").rglob("*.json"))) < 2:
        assert proc.poll() is None, "the smoke sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the command line and its two workers
    proc.wait()
    files = list((tmp_path / "recall").rglob("*.json"))
    for f in files:
        json.loads(f.read_text())  # every file that exists is whole
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    new = json.loads((tmp_path / "experiment_recall_smoke.json").read_text())
    assert new["key"] == stored["key"]
    if (new["versions"], new["machine"]) == (stored["versions"], stored["machine"]):
        # same machine and libraries: seeded, single-threaded runs repeat to the bit
        assert [_timing_free(r) for r in new["runs"]] == [_timing_free(r) for r in stored["runs"]]
    else:  # elsewhere float32 round-off may differ: accuracies within 5 binomial SEs
        for a, b in zip(new["runs"], stored["runs"], strict=True):
            for ea, eb in zip(a["evaluations"], b["evaluations"], strict=True):
                for pa, pb, n in zip(ea["accuracy"], eb["accuracy"], eb["n"], strict=True):
                    assert abs(pa - pb) <= 5 * max(pb * (1 - pb), 1 / n) ** 0.5 / n**0.5
    after = sorted(p.stat().st_mtime for p in (ROOT / "rope_lib" / "data").iterdir())
    assert after == data_before


def test_runs_of_two_experiments_share_one_queue_longest_first(tmp_path: Path, log: Path) -> None:
    other = runner.Experiment(**{**runner_toy.TOY.__dict__, "name": "toy2"})
    registry = {"toy": runner_toy.TOY, "toy2": other}
    sweeps = runner.plan([("toy", "toy"), ("toy2", "smoke")], tmp_path, tmp_path, registry)
    blobs = runner.run_sweeps(sweeps, workers=1, progress=False)
    assert [n for n, _ in log_lines(log)] == [6, 5, 4, 3, 2, 1]  # across the two experiments
    assert [b["experiment"] for b in blobs] == ["toy", "toy2"]
    assert (tmp_path / "experiment_toy2_smoke.json").exists()


def test_experiment_2_runs_through_its_registry_entry(tmp_path: Path) -> None:
    """The needle smoke sweep through the runner: one run per (base, seed), each the result of
    run_needle with the run's parameters, the config stored whole, the cost estimate positive."""
    from rope_lib.experiments import needle_model as nm

    cfg = nm.NEEDLE_CONFIGS["smoke"]
    assert runner.REGISTRY["needle"].available()
    assert all(runner.needle_cost(cfg, r) > 0 for r in runner.needle_runs(cfg))
    sweeps = runner.plan([("needle", "smoke")], tmp_path, tmp_path)
    blob = runner.run_sweeps(sweeps, workers=1, progress=False)[0]
    assert [(r["base"], r["seed"]) for r in blob["runs"]] == [
        (b, s) for b in cfg.bases for s in cfg.seeds
    ]
    direct = nm.run_needle(cfg, cfg.bases[-1], cfg.seeds[0])
    timing = {"train_seconds", "train_cpu_seconds", "eval_seconds", "wall_seconds", "cpu_seconds"}
    stored = blob["runs"][len(cfg.seeds) * (len(cfg.bases) - 1)]
    assert {k: v for k, v in stored.items() if k not in timing} == {
        k: v for k, v in direct.items() if k not in timing
    }
    assert blob["config"] == json.loads(json.dumps(cfg.to_dict()))
