"""Mutation testing of rope_lib's math modules (``make mutation``).

A mutant is a copy of one module with one small plausible bug (a flipped sign, an
off-by-one constant, a swapped argument, a dropped keyword).  mutmut makes the
mutants; this script runs each module's mutants against that module's own test file
only (``tests/test_<module>.py``), so a score says how well *those* tests guard
*that* module, and gathers the results.

Each module runs in its own scratch directory under ``_build/mutation/<module>``
(mutmut reads its configuration from the working directory and writes its
``mutants/`` copy there), with a configuration generated from :data:`MODULES`:
this file is mutmut's one configuration.

A surviving mutant is either killed by a new test with an independent expected value,
or listed in ``tools/mutation-equivalent.toml`` with the reason it cannot change a
result (an equivalent mutant) or only changes something no promise covers.  An entry
matches a survivor by module, function and the changed line before and after, so it
survives renumbering.  The run fails if a survivor is neither.

Usage::

    python tools/mutation.py                     # every module; writes the summary
    python tools/mutation.py --only frequencies  # some modules; no summary written
    python tools/mutation.py --quick             # CI's fixed sample (see QUICK)

The full run writes ``tools/mutation-summary.json`` (per module: mutants, killed,
survived, equivalent, no tests, timeouts, score) and prints the table the README
quotes.
"""

from __future__ import annotations

import argparse
import fnmatch
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

# module -> the test files its mutants run against: the module's own tests and the
# argument contract (tests/test_api.py), which holds every function's refusals.
# frequencies.py and rotation.py are part of the key of chapter 9's stored results, so
# a mutated copy makes test_api.py's collection refuse those results as stale: their
# mutants run against their own tests only.
MODULES: dict[str, list[str]] = {
    module: [f"tests/test_{module}.py", "tests/test_api.py"]
    for module in (
        "sinusoidal",
        "taylor",
        "implementations",
        "decay",
        "base_bound",
        "base_table",
        "context_extension",
        "experiment_report",
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
            "equivalent": equivalent,
            "score": round(caught / judged, 4) if judged else 1.0,
            "minutes": round(self.seconds / 60, 1),
        }


def _function(name: str) -> str:
    """``rope_lib._certified_sweep.xǁ_Termsǁcurvature__mutmut_3`` -> ``_Terms.curvature``."""
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
        f'only_mutate = ["rope_lib/{module}.py"]',
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        'pytest_add_cli_args = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist"]',
        'also_copy = ["tests"]',
        "use_git_change_detection = false",
    ]
    return "\n".join(lines) + "\n"


def _prepare(module: str, jobs: int) -> Path:
    work = SCRATCH / module
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build")
    shutil.copytree(ROOT / "rope_lib", work / "rope_lib", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    (work / "pyproject.toml").write_text(_config(module, MODULES[module], jobs))
    return work


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
    return subprocess.run([str(exe), *args], cwd=work, env=env, text=True, capture_output=True)


def _diff(work: Path, name: str) -> tuple[str, str]:
    shown = _mutmut(work, "show", name).stdout.splitlines()
    removed = [x[1:].strip() for x in shown if x.startswith("-") and not x.startswith("---")]
    added = [x[1:].strip() for x in shown if x.startswith("+") and not x.startswith("+++")]
    return " / ".join(removed), " / ".join(added)


def _equivalents() -> list[dict[str, str]]:
    if not EQUIVALENT.exists():
        return []
    return tomllib.loads(EQUIVALENT.read_text())["mutant"]


def run_module(module: str, jobs: int, patterns: list[str] | None) -> Result:
    work = _prepare(module, jobs)
    start = time.monotonic()
    names = patterns or []
    done = _mutmut(work, "run", "--max-children", str(jobs), *names)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"mutation: mutmut failed on {module} (exit {done.returncode})")
    meta = json.loads((work / "mutants" / "rope_lib" / f"{module}.py.meta").read_text())
    codes = meta["exit_code_by_key"]
    if names:
        codes = {n: c for n, c in codes.items() if any(fnmatch.fnmatch(n, p) for p in names)}
    result = Result(module, time.monotonic() - start)
    listed = _equivalents()
    for name, code in sorted(codes.items()):
        m = Mutant(name, STATUS.get(code, "suspicious"), _function(name))
        if m.status in ("survived", "no tests", "suspicious", "not checked"):
            m.removed, m.added = _diff(work, name)
            for entry in listed:
                if entry["module"] == module and all(
                    value == entry[key] or fnmatch.fnmatchcase(value, entry[key])
                    for key, value in (
                        ("function", m.function),
                        ("before", m.removed),
                        ("after", m.added),
                    )
                ):
                    m.status, m.reason = "equivalent", entry["reason"]
                    break
        result.mutants.append(m)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated modules (default: all)")
    parser.add_argument("--quick", action="store_true", help="CI's fixed sample only")
    parser.add_argument("--jobs", type=int, default=2, help="parallel mutants (default 2)")
    args = parser.parse_args(argv)
    modules = list(QUICK) if args.quick else list(MODULES)
    if args.only:
        modules = [m.strip() for m in args.only.split(",")]
        unknown = sorted(set(modules) - set(MODULES))
        if unknown:
            parser.error(f"--only: unknown modules {unknown}; known: {sorted(MODULES)}")
    rows, open_ = [], []
    for module in modules:
        print(f"mutation: {module} ...", flush=True)
        result = run_module(module, args.jobs, QUICK.get(module) if args.quick else None)
        rows.append(result.row())
        print("  " + json.dumps(rows[-1]), flush=True)
        open_ += [
            (module, m)
            for m in result.mutants
            if m.status in ("survived", "no tests", "suspicious", "not checked")
        ]
    print("\n| module | mutants | killed | timeout | survived | no tests | equivalent | score |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            "| {module} | {mutants} | {killed} | {timeout} | {survived} | {no tests} "
            "| {equivalent} | {score:.1%} |".format(**r)
        )
    if not args.quick and not args.only:
        SUMMARY.write_text(json.dumps({"mutmut": _version(), "modules": rows}, indent=1) + "\n")
        print(f"summary written to {SUMMARY.relative_to(ROOT)}")
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


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


if __name__ == "__main__":
    sys.exit(main())
