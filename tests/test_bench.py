"""``make bench`` runs to the end (speed claims live in the benchmarks, not here).

* The minimum-base benchmark computes L up to 2^20; ``min_base``'s default budget raises
  from 2^18 on (issue 19: ``make bench`` exited 1 there), so every call must pass the
  budget the shipped table is computed with.  Checked by recording the calls, without the
  minute the real table takes; ``make bench`` runs it.
* Its quick mode runs for real, reads the last row from the shipped table and says so.
* A benchmark that raises does not hide the others, and the run exits non-zero naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import bench_base_bound
from rope_lib import base_bound, base_table

ROOT = Path(__file__).resolve().parents[1]


def test_full_table_runs_with_the_shipped_tables_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    table = json.loads((ROOT / "rope_lib" / "data" / "min_base_table.json").read_text())
    shipped = {int(k): row["base"] for k, row in table["rows"].items()}
    budgets: dict[int, int] = {}

    def min_base(length: int, d: int = 128, *, max_steps: int = base_bound.DEFAULT_MAX_STEPS):
        k = length.bit_length() - 1
        budgets[k] = max_steps
        if k >= 18 and max_steps <= base_bound.DEFAULT_MAX_STEPS:
            raise ValueError("did not finish within max_steps")  # what the real call does
        return shipped[k]

    monkeypatch.setattr(base_bound, "min_base", min_base)
    monkeypatch.setattr(
        base_table, "grid_min_base", lambda length: shipped[length.bit_length() - 1]
    )
    bench_base_bound.main(["--grid-max", "12"])
    assert sorted(budgets) == list(range(10, 21))
    assert set(budgets.values()) == {base_table.TABLE_MAX_STEPS}
    out = capsys.readouterr().out
    assert f"max_steps = {base_table.TABLE_MAX_STEPS:,}" in out
    assert "the shipped table" in out and "agrees" in out


@pytest.mark.slow
def test_quick_mode_runs_and_says_where_the_table_comes_from() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench", "base_bound", "decay", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "=== bench_base_bound (quick)" in result.stdout
    assert "quick mode: the full table L = 2^10 .. 2^20 is not recomputed" in result.stdout
    assert "current for this code" in result.stdout
    assert "(bench_decay took" in result.stdout


def test_a_failing_benchmark_fails_the_run_after_the_others(tmp_path: Path) -> None:
    package = tmp_path / "bench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text((ROOT / "bench" / "__main__.py").read_text())
    (package / "bench_a.py").write_text("def main(quick=False):\n    raise ValueError('boom')\n")
    (package / "bench_b.py").write_text("def main(quick=False):\n    print('b ran', quick)\n")
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "b ran True" in result.stdout
    assert "bench: a failed" in result.stderr and "ValueError: boom" in result.stderr
