"""The bookkeeping of ``make mutation`` (``tools/mutation.py``), without running mutmut.

* A mutant's function is read from mutmut's name, also for methods and nested modules.
* An entry of the equivalence list explains a survivor of its module whose function and
  changed line match (exactly, or as a glob), and nothing else; a killed mutant needs no
  entry; an entry that explains no open mutant of the records is reported as unused.
* A score counts killed and timed-out mutants over those not explained.
* A record is stale when its module or one of its test files changed since it was made.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
mu = importlib.util.module_from_spec(_spec)
sys.modules["mutation_tool"] = mu  # its dataclasses look their module up there
_spec.loader.exec_module(mu)


@pytest.mark.parametrize(
    ("name", "function"),
    [
        ("rope_lib.decay.x__blocks__mutmut_12", "_blocks"),
        ("rope_lib.decay.x_ones_score__mutmut_3", "ones_score"),
        ("rope_lib._certified_sweep.xǁ_Termsǁcurvature__mutmut_3", "_Terms.curvature"),
        ("rope_lib._certified_sweep.xǁ_Termsǁ__init____mutmut_43", "_Terms.__init__"),
        ("rope_lib.experiments.report.x_far_accuracy__mutmut_7", "far_accuracy"),
    ],
)
def test_function_is_read_from_the_mutant_name(name, function):
    assert mu._function(name) == function


ENTRY = {
    "module": "decay",
    "function": "_blocks",
    "before": "step = 4096",
    "after": "step = 409*",
    "reason": "Harmless: a block width.",
}


def _mutant(status="survived", function="_blocks", before="step = 4096", after="step = 4097"):
    return mu.Mutant("rope_lib.decay.x__blocks__mutmut_1", status, function, before, after)


def test_an_entry_explains_a_matching_survivor_and_nothing_else(monkeypatch):
    monkeypatch.setattr(mu, "_equivalents", lambda: [ENTRY])
    result = mu.Result(
        "decay",
        60.0,
        [
            _mutant(),  # matches: the glob 409* takes 4097
            _mutant(after="step = 8192"),  # another change of the same line
            _mutant(function="_windows"),  # the same line in another function
            _mutant(status="killed"),  # killed: no entry needed, none applied
            _mutant(status="suspicious"),  # open verdicts other than survived match too
        ],
    )
    judged = [m.status for m in mu._judge(result).mutants]
    assert judged == ["equivalent", "survived", "survived", "killed", "equivalent"]
    assert mu._judge(result).mutants[0].reason == ENTRY["reason"]
    # the same survivor in another module is not explained by a decay entry
    other = mu.Result("taylor", 1.0, [_mutant()])
    assert [m.status for m in mu._judge(other).mutants] == ["survived"]


def test_an_entry_that_explains_no_open_mutant_is_unused(monkeypatch):
    gone = dict(ENTRY, before="step = 2048")  # the line's mutant is killed now
    elsewhere = dict(ENTRY, module="taylor")  # the same lines, but in another module
    monkeypatch.setattr(mu, "_equivalents", lambda: [ENTRY, gone, elsewhere])
    results = [mu.Result("decay", 1.0, [_mutant(), _mutant(status="killed", before="step = 2048")])]
    assert mu._unused(results) == [gone, elsewhere]


def test_score_counts_killed_and_timeouts_over_the_mutants_not_explained(monkeypatch):
    monkeypatch.setattr(mu, "_equivalents", lambda: [ENTRY])
    statuses = ["killed"] * 6 + ["timeout"] * 2 + ["survived", "no tests"]
    mutants = [_mutant(status=s, after=f"x{i}") for i, s in enumerate(statuses)]
    mutants.append(_mutant())  # explained
    row = mu._judge(mu.Result("decay", 90.0, mutants)).row()
    assert row["mutants"] == 11 and row["equivalent"] == 1
    assert (row["killed"], row["timeout"], row["survived"], row["no tests"]) == (6, 2, 1, 1)
    assert row["score"] == 8 / 10
    assert row["minutes"] == 1.5


def test_a_record_is_stale_once_its_module_or_a_test_file_changes(monkeypatch, tmp_path):
    root = tmp_path / "repo"
    (root / "rope_lib").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "rope_lib" / "decay.py").write_text("x = 1\n")
    (root / "tests" / "test_decay.py").write_text("def test(): pass\n")
    monkeypatch.setattr(mu, "ROOT", root)
    monkeypatch.setattr(mu, "SCRATCH", root / "_build" / "mutation")
    monkeypatch.setattr(mu, "MODULES", {"decay": ["tests/test_decay.py"]})
    monkeypatch.setattr(mu, "_version", lambda: "3.8.1")
    assert "no recorded result" in mu._problem("decay")
    record = {"module": "decay", "mutmut": "3.8.1", "inputs": mu._inputs("decay")}
    (mu.SCRATCH / "decay").mkdir(parents=True)
    (mu.SCRATCH / "decay" / mu.RESULT).write_text(json.dumps(record))
    assert mu._problem("decay") is None
    (root / "tests" / "test_decay.py").write_text("def test(): assert True\n")
    assert (
        mu._problem("decay") == "decay: stale, tests/test_decay.py changed since the recorded run"
    )
    (root / "tests" / "test_decay.py").write_text("def test(): pass\n")  # back as it was
    assert mu._problem("decay") is None
    monkeypatch.setattr(mu, "_version", lambda: "3.9.0")
    assert "recorded with mutmut 3.8.1, not the installed 3.9.0" in mu._problem("decay")


def test_blob_is_gits_object_id(tmp_path):
    """_blob hashes like `git hash-object` (git's ids of the empty blob and of "hello\\n",
    as git prints them)."""
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "hello").write_bytes(b"hello\n")
    assert mu._blob(tmp_path / "empty") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert mu._blob(tmp_path / "hello") == "ce013625030ba8dba906f756967f9e9ca394464a"
