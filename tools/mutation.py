"""Mutation testing of rope_lib's math modules (``make mutation``).

A mutant is a copy of one module with one small plausible bug (a flipped sign, an
off-by-one constant, a swapped argument, a dropped keyword).  mutmut makes the
mutants; this script runs each module's mutants against that module's own test file
(``tests/test_<module>.py``, and for most modules the argument contract
``tests/test_api.py``: see :data:`MODULES`), so a score says how well *those* tests
guard *that* module, and gathers the results.

A module is named by its dotted path below ``rope_lib`` (its *key*): ``decay`` is
``rope_lib/decay.py``, ``experiments.report`` is ``rope_lib/experiments/report.py``
(:func:`_source`).  The key names the module everywhere: ``--only``, the scratch
directory, the record and the ``module`` of an entry of the equivalence list.

Each module runs in its own scratch directory under ``_build/mutation/<module>``
(mutmut reads its configuration from the working directory and writes its
``mutants/`` copy there), with a configuration generated from :data:`MODULES`:
this file is mutmut's one configuration.  A module's run ends by recording its result
in ``_build/mutation/<module>/result.json``: every mutant's name, mutmut's verdict and
changed line, and the git blob ids of the files the verdicts depend on (the module and
its test files).  A result whose files have changed since is *stale*.  CI's sample
(``--quick``) runs under ``_build/mutation/quick/`` and records nothing, so it never
overwrites a module's full result.

A surviving mutant is either killed by a new test with an independent expected value,
or listed in ``tools/mutation-equivalent.toml`` with the reason it cannot change a
result (an equivalent mutant) or only changes something no promise covers.  An entry
matches a survivor by module, function and the changed line before and after, so it
survives renumbering.  The list is read when results are reported, not when they are
recorded, so a new entry needs no rerun; a new test does (it changes a test file's blob,
which makes the module's result stale).  A run fails if a survivor is neither, and the
summary of every module fails if an entry explains no open mutant of the records (its line
is gone, or a test now kills the mutant): the list holds only what is still true.

Usage::

    python tools/mutation.py --only frequencies  # run some modules, record their results
    python tools/mutation.py --summary           # assemble the summary from the records
    python tools/mutation.py --summary --only rotation  # report a record, write nothing
    python tools/mutation.py                     # run every module, then --summary
    python tools/mutation.py --quick             # CI's fixed sample (see QUICK)

``--summary`` runs no mutant: it reads every module's recorded result, refuses (exit 2,
naming each) if one is missing, stale or from another mutmut version, writes
``tools/mutation-summary.json`` (per module: mutants, killed, survived, equivalent, no
tests, timeouts, score, minutes) and prints the table the README quotes.  Modules run one
at a time (``--only``, in any order and on any day) and assemble the same summary as
one long run.  With ``--only``, ``--summary`` reports those modules' records against the
current equivalence list (a triage aid) and writes no summary.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = ROOT / "_build" / "mutation"
EQUIVALENT = ROOT / "tools" / "mutation-equivalent.toml"
SUMMARY = ROOT / "tools" / "mutation-summary.json"
RESULT = "result.json"  # a module's recorded run, in its scratch directory

# module -> the test files its mutants run against: the module's own tests and the
# argument contract (tests/test_api.py), which holds every function's refusals.
# frequencies.py and rotation.py run against their own tests only.  The reason was that
# they are in the key of chapter 9's stored results, which test_api.py read when collected
# (a mutated copy made it refuse them as stale); test_api.py no longer reads them, so adding
# it back for these two is possible but has not been run.
# Keys are dotted paths below rope_lib (see _source).
MODULES: dict[str, list[str]] = {
    module: [f"tests/test_{module}.py", "tests/test_api.py"]
    for module in (
        "sinusoidal",
        "taylor",
        "implementations",
        "decay",
        "base_bound",
        "context_extension",
    )
} | {
    # chapter 7's private sweep: its own tests and those of the searches that run it
    "_certified_sweep": [
        "tests/test_certified_sweep.py",
        "tests/test_base_bound.py",
        "tests/test_api.py",
    ],
    "frequencies": ["tests/test_frequencies.py"],
    "rotation": ["tests/test_rotation.py"],
    # Scope: chapter 7's table builder, base_table.py, is not run.  It is in the key of its
    # own cache (rope_lib/data/min_base_table.json), so in mutmut's copy the cache is stale
    # and the clean run recomputes it; its tests then call searches of several seconds each,
    # and a sample of 12 of its 1,186 mutants took 16.6 s per mutant: about 6 h with one
    # job, beyond the hour this target may take.  The searches it tabulates (base_bound,
    # _certified_sweep) are run here; base_table's own tests compare its rows with
    # independent scans (tests/test_base_table.py).
    #
    # chapter 9's summaries of the stored experiment results.  report.py is not in the key
    # of those results (runner.code_files covers the task and model modules only), so a
    # mutated copy reads them as the real one does; no function of it is in test_api.py.
    "experiments.report": ["tests/test_report.py"],
}

# CI's fixed sample: every mutant of a few functions, the certified step of chapter 7's
# sweep and its curvature bound, and the NumPy route of apply_rope, _rotate_pairs.
QUICK: dict[str, list[str]] = {
    "_certified_sweep": ["*_Terms*curvature__mutmut_*", "*x__certified_step__mutmut_*"],
    "rotation": ["*x__rotate_pairs__mutmut_*"],
}

# mutmut's exit codes, as its stats module reads them.
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    36: "timeout",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    37: "killed",
    None: "not checked",
}
# The verdicts that leave a mutant open unless the equivalence list explains it.
OPEN = ("survived", "no tests", "suspicious", "not checked")


def _blob(path: Path) -> str:
    """The git blob id of ``path`` (what ``git hash-object`` prints), without git."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _source(module: str) -> str:
    """The file of a module key: ``experiments.report`` -> ``rope_lib/experiments/report.py``."""
    return "rope_lib/" + module.replace(".", "/") + ".py"


def _inputs(module: str) -> dict[str, str]:
    """The files a module's verdicts depend on, with their blob ids: its code, its tests."""
    files = [_source(module), *MODULES[module]]
    return {f: _blob(ROOT / f) for f in files}


@dataclass
class Mutant:
    name: str
    status: str
    function: str = ""
    removed: str = ""
    added: str = ""
    reason: str = ""


@dataclass
class Result:
    module: str
    seconds: float
    mutants: list[Mutant] = field(default_factory=list)

    @classmethod
    def load(cls, record: dict) -> Result:
        mutants = [Mutant(**m) for m in record["mutants"]]
        return cls(record["module"], record["seconds"], mutants)

    def count(self, status: str) -> int:
        return sum(m.status == status for m in self.mutants)

    def row(self) -> dict[str, object]:
        total = len(self.mutants)
        equivalent = self.count("equivalent")
        caught = self.count("killed") + self.count("timeout")
        judged = total - equivalent
        return {
            "module": self.module,
            "mutants": total,
            "killed": self.count("killed"),
            "timeout": self.count("timeout"),
            "survived": self.count("survived"),
            "no tests": self.count("no tests"),
            # mutmut's "suspicious" (a run far slower than the clean one) and "not checked"
            "other open": self.count("suspicious") + self.count("not checked"),
            "equivalent": equivalent,
            "score": round(caught / judged, 4) if judged else 1.0,
            "minutes": round(self.seconds / 60, 1),
        }


def _function(name: str) -> str:
    """``rope_lib._certified_sweep.xǁ_Termsǁcurvature__mutmut_3`` -> ``_Terms.curvature``.

    mutmut names a mutant by the module's dotted path, then the mangled function, whose
    name has no dot (a method is ``xǁClassǁmethod``), so the function is what follows the
    last dot: ``rope_lib.experiments.report.x_far_accuracy__mutmut_3`` -> ``far_accuracy``.
    """
    tail = name.rsplit(".", 1)[1]
    tail = re.sub(r"__mutmut_\d+$", "", tail)
    tail = tail[2:] if tail.startswith("x_") else tail
    return tail.replace("xǁ", "").replace("ǁ", ".").strip(".")


def _config(module: str, tests: list[str], jobs: int) -> str:
    pytest = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    lines = [
        "[tool.pytest.ini_options]",
        f"testpaths = {json.dumps(tests)}",
        f"markers = {json.dumps(pytest['ini_options']['markers'])}",
        "",
        "[tool.mutmut]",
        'source_paths = ["rope_lib"]',
        f"only_mutate = {json.dumps([_source(module)])}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        # A fixed hypothesis seed: every mutant meets the same examples, so a verdict does
        # not depend on the draw, and the clean run cannot fail on a rare draw of a test
        # that guards another module (test_api.py's fuzz test did, once, on base_bound).
        # pytest's unraisableexception plugin ends every session with repeated full garbage
        # collections: in a fork of a process holding torch and sympy that took 0.5 to 0.6 s
        # of the 0.8 s a mutant's run of one test_api.py case costs (measured), for a
        # plugin that only reports exceptions raised inside finalizers.
        'pytest_add_cli_args = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", '
        '"-p", "no:unraisableexception", "--hypothesis-seed=0"]',
        'also_copy = ["tests"]',
        "use_git_change_detection = false",
    ]
    return "\n".join(lines) + "\n"


def _prepare(module: str, jobs: int, scratch: Path) -> Path:
    work = scratch / module
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build")
    shutil.copytree(ROOT / "rope_lib", work / "rope_lib", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    (work / "pyproject.toml").write_text(_config(module, MODULES[module], jobs))
    return work


#: Address space each process of a mutmut run may take (``RLIMIT_AS``, inherited by the forked
#: children that run the mutants).  A mutant can ask for more memory than the machine has:
#: ``_certified_sweep._scan`` with its block width squared allocates 8 GiB per array at
#: d = 128 and 4096 distances, and the kernel's OOM killer ended it (a "suspicious" SIGKILL,
#: not a verdict).  Under the limit numpy raises MemoryError, a test fails, and the mutant is
#: killed like any other.  Every module's test files pass under this limit (checked with
#: ``prlimit --as``, all of them in one process, torch included).
MEMORY_LIMIT = 6 << 30


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _mutmut(work: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("mutmut")
    env = dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        TERM="dumb",
    )
    return subprocess.run(
        [str(exe), *args],
        cwd=work,
        env=env,
        text=True,
        capture_output=True,
        preexec_fn=_limit_memory if args[:1] == ("run",) else None,
    )


def _diff(work: Path, name: str) -> tuple[str, str]:
    shown = _mutmut(work, "show", name).stdout.splitlines()
    removed = [x[1:].strip() for x in shown if x.startswith("-") and not x.startswith("---")]
    added = [x[1:].strip() for x in shown if x.startswith("+") and not x.startswith("+++")]
    return " / ".join(removed), " / ".join(added)


def _equivalents() -> list[dict[str, str]]:
    if not EQUIVALENT.exists():
        return []
    return tomllib.loads(EQUIVALENT.read_text())["mutant"]


def _matches(entry: dict[str, str], m: Mutant) -> bool:
    """Whether an entry of the equivalence list explains mutant ``m`` (of its module)."""
    return all(
        value == entry[key] or fnmatch.fnmatchcase(value, entry[key])
        for key, value in (("function", m.function), ("before", m.removed), ("after", m.added))
    )


def _judge(result: Result) -> Result:
    """A copy of ``result`` with the survivors that the equivalence list explains marked."""
    listed = [e for e in _equivalents() if e["module"] == result.module]
    judged = Result(result.module, result.seconds)
    for m in result.mutants:
        m = Mutant(**vars(m))
        if m.status in OPEN:
            for entry in listed:
                if _matches(entry, m):
                    m.status, m.reason = "equivalent", entry["reason"]
                    break
        judged.mutants.append(m)
    return judged


def _unused(results: list[Result]) -> list[dict[str, str]]:
    """Entries of the equivalence list that explain no open mutant of ``results``: the code or
    the tests changed under them (the line is gone, or a test now kills the mutant)."""
    open_ = [(r.module, m) for r in results for m in r.mutants if m.status in OPEN]
    return [
        e
        for e in _equivalents()
        if not any(module == e["module"] and _matches(e, m) for module, m in open_)
    ]


def run_module(module: str, jobs: int, patterns: list[str] | None) -> Result:
    """Run a module's mutants (all, or those matching ``patterns``: CI's sample).

    A full run records its result (mutmut's verdicts, before the equivalence list is
    applied) in ``_build/mutation/<module>/result.json``; a sample records nothing.
    """
    inputs = _inputs(module)
    work = _prepare(module, jobs, SCRATCH / "quick" if patterns else SCRATCH)
    start = time.monotonic()
    names = patterns or []
    done = _mutmut(work, "run", "--max-children", str(jobs), *names)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"mutation: mutmut failed on {module} (exit {done.returncode})")
    meta = json.loads((work / "mutants" / f"{_source(module)}.meta").read_text())
    codes = meta["exit_code_by_key"]
    if names:
        codes = {n: c for n, c in codes.items() if any(fnmatch.fnmatch(n, p) for p in names)}
    result = Result(module, time.monotonic() - start)
    for name, code in sorted(codes.items()):
        m = Mutant(name, STATUS.get(code, "suspicious"), _function(name))
        if m.status in OPEN:
            m.removed, m.added = _diff(work, name)
        result.mutants.append(m)
    if not patterns:
        record = {"module": module, "mutmut": _version(), "inputs": inputs}
        record |= {"seconds": result.seconds, "mutants": [vars(m) for m in result.mutants]}
        (work / RESULT).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return result


def _problem(module: str) -> str | None:
    """Why the module's recorded full run cannot be used (missing, stale, other mutmut)."""
    path = SCRATCH / module / RESULT
    if not path.exists():
        return f"{module}: no recorded result ({path.relative_to(ROOT)})"
    record = json.loads(path.read_text())
    now = _inputs(module)
    changed = sorted(
        f for f in now.keys() | record["inputs"] if record["inputs"].get(f) != now.get(f)
    )
    if changed:
        return f"{module}: stale, {', '.join(changed)} changed since the recorded run"
    if record["mutmut"] != _version():
        return f"{module}: recorded with mutmut {record['mutmut']}, not the installed {_version()}"
    return None


def report(results: list[Result]) -> int:
    """Print the README table and every open survivor; 1 if a survivor is open."""
    rows, open_ = [], []
    for result in map(_judge, results):
        rows.append(result.row())
        open_ += [(result.module, m) for m in result.mutants if m.status in OPEN]
    print(
        "\n| module | mutants | killed | timeout | survived | no tests | other open "
        "| equivalent | score |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| {module} | {mutants} | {killed} | {timeout} | {survived} | {no tests} "
            "| {other open} | {equivalent} | {score:.1%} |".format(**r)
        )
    for module, m in open_:
        print(
            f"OPEN {m.status}: {module} {m.function} [{m.name}]\n"
            f"    before: {m.removed}\n    after:  {m.added}"
        )
    if open_:
        print(
            f"mutation: {len(open_)} mutants neither killed nor listed in "
            f"{EQUIVALENT.relative_to(ROOT)}"
        )
        return 1
    return 0


def summary(modules: list[str]) -> int:
    """Report the recorded results of ``modules``; for every module, also write the summary.

    Refuses (2) if a module's record is missing, stale or from another mutmut version.
    """
    problems = [p for p in map(_problem, modules) if p]
    if problems:
        print(
            "mutation: cannot assemble the summary:\n  " + "\n  ".join(problems) + "\n"
            "run each such module again:  python tools/mutation.py --only MODULE",
            file=sys.stderr,
        )
        return 2
    results = [Result.load(json.loads((SCRATCH / m / RESULT).read_text())) for m in modules]
    status = report(results)
    if set(modules) == set(MODULES):
        unused = _unused(results)
        for e in unused:
            print(f"UNUSED entry: {e['module']} {e['function']}\n    before: {e['before']}")
        if unused:
            print(
                f"mutation: {len(unused)} entries of {EQUIVALENT.relative_to(ROOT)} explain no "
                "mutant of the current records: remove them"
            )
            status = status or 1
        rows = [_judge(r).row() for r in results]
        SUMMARY.write_text(json.dumps({"mutmut": _version(), "modules": rows}, indent=1) + "\n")
        print(f"summary written to {SUMMARY.relative_to(ROOT)}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated modules (default: all)")
    parser.add_argument("--quick", action="store_true", help="CI's fixed sample only")
    parser.add_argument(
        "--summary",
        action="store_true",
        help="run nothing: report the recorded results (of --only's modules, or of all "
        "of them, which also writes the summary)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="parallel mutants (default 2)")
    args = parser.parse_args(argv)
    if args.summary and args.quick:
        parser.error("--summary reads the recorded full runs; --quick records none")
    modules = list(QUICK) if args.quick else list(MODULES)
    if args.only:
        modules = [m.strip() for m in args.only.split(",")]
        unknown = sorted(set(modules) - set(MODULES))
        if unknown:
            parser.error(f"--only: unknown modules {unknown}; known: {sorted(MODULES)}")
    if args.summary:
        return summary(modules)
    results = []
    for module in modules:
        print(f"mutation: {module} ...", flush=True)
        results.append(run_module(module, args.jobs, QUICK.get(module) if args.quick else None))
        print("  " + json.dumps(_judge(results[-1]).row()), flush=True)
    if not args.quick and not args.only:
        return summary(modules)
    return report(results)


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


if __name__ == "__main__":
    sys.exit(main())
