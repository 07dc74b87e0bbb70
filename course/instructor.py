"""Write the instructor edition: ``python -m course.instructor --out _build/instructor``.

For the teacher only (it holds every answer).  The folder gets

* ``solutions/<chapter>.ipynb``: every chapter with its worked solutions and their outputs
  (the execution the editions' expected values come from), the MyST roles written out as
  in the student edition;
* ``answer-key.md`` and ``answer-key.json``: the expected answer of every self-check of the
  student edition, with its exercise number, variable and precision;
* ``autograder/<chapter>.zip``: an otter-grader autograder archive for each chapter with
  self-checks (otter's standard layout, made by ``otter generate``: ``run_autograder``,
  ``setup.sh``, ``environment.yml``, ``otter_config.json``, ``tests/`` with the same
  test files as the student edition, and ``files/rope_lib``, the book's package, which
  grading copies next to the submission).  A student submits the chapter's notebook of the
  student edition with the answer cells filled in; one archive grades one chapter.  Upload
  an archive to Gradescope as a programming assignment's autograder, or grade on this
  machine without Docker (``otter grade`` needs Docker):
  ``ROPE_LIB_STATIC=1 otter run -a autograder/06_decay.zip submission.ipynb``.
  The archive's ``run_autograder`` sets ``ROPE_LIB_STATIC=1`` (static slider figures: a
  notebook with live ipywidgets can stall a headless run, jupyter/nbclient#312), and its
  environment is Python 3.11 with the book's pins and PyTorch's CPU build.

The chapters are executed once for the student and the instructor editions (see
``course/student.py``: the executed notebooks are kept in ``_build/course-cache``).  The
folder is rewritten on every run if an earlier run wrote it (it holds no student work);
any other non-empty folder is refused.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import nbformat

from course.student import (
    CACHE_DIR,
    ROOT,
    Prepared,
    _write_folder,
    prepare,
    solutions_notebook,
)

#: Written into the instructor folder; a non-empty folder without it is never replaced.
MARKER = ".instructor-edition"
#: The packages a chapter needs to run (the chapters' install guard), whose pins the
#: autograder's environment takes from requirements.txt.
GRADING_PACKAGES = (
    "torch",
    "numpy",
    "sympy",
    "mpmath",
    "scipy",
    "matplotlib",
    "ipywidgets",
    "ipykernel",
    "myst-nb",
)
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: The Python of the autograder's environment (the book needs 3.11 or newer).
PYTHON_VERSION = "3.11"


def grading_requirements(requirements: Path = ROOT / "requirements.txt") -> str:
    """The autograder's ``requirements.txt``: the book's pins of :data:`GRADING_PACKAGES`.

    torch is PyTorch's CPU build from PyTorch's CPU index, as in ``binder/``.
    """
    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name, version = line.split("==", 1)
            pins[name.strip().lower()] = version.strip()
    missing = [name for name in GRADING_PACKAGES if name not in pins]
    if missing:
        raise ValueError(f"{requirements} pins none of {missing}")
    lines = [f"--extra-index-url {CPU_INDEX}"]
    for name in GRADING_PACKAGES:
        version = pins[name] + ("+cpu" if name == "torch" else "")
        lines.append(f"{name}=={version}")
    return "\n".join(lines) + "\n"


def _copy_rope_lib(target: Path) -> None:
    shutil.copytree(
        ROOT / "rope_lib", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )


def autograder_zip(prepared: Prepared, stem: str, target: Path) -> list[str]:
    """Write the otter-grader autograder archive of one chapter.

    Parameters
    ----------
    prepared : Prepared
        The executed chapters (``course.student.prepare``).
    stem : str
        The chapter, e.g. ``"06_decay"``.
    target : Path
        The ``.zip`` to write.

    Returns
    -------
    list of str
        The names of the tests in it (``"Exercise 6.5"``, ...), in the chapter's order.
    """
    from otter.generate import main as otter_generate

    chapter = next(c for c in prepared.chapters if c.path.stem == stem)
    labels = [s.label for s in chapter.solutions if s.label in prepared.expected]
    with tempfile.TemporaryDirectory() as stage_name:
        stage = Path(stage_name)
        (stage / "tests").mkdir()
        for label in labels:
            test = stage / "tests" / f"{prepared.numbers[label]}.py"
            test.write_text(prepared.test_source(label), encoding="utf-8")
        _copy_rope_lib(stage / "rope_lib")
        (stage / "requirements.txt").write_text(grading_requirements(), encoding="utf-8")
        made = stage / "autograder.zip"
        with contextlib.chdir(stage), contextlib.redirect_stdout(io.StringIO()):
            otter_generate(
                tests_dir="tests",
                output_path=str(made),
                no_config=True,
                requirements="requirements.txt",
                no_environment=True,
                files=["rope_lib"],
                python_version=PYTHON_VERSION,
                lang="python",
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        _with_static_figures(made, target)
    return [prepared.numbers[label] for label in labels]


def _with_static_figures(source: Path, target: Path) -> None:
    """Copy the archive, with ``export ROPE_LIB_STATIC=1`` in its ``run_autograder``."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "run_autograder":
                lines = data.decode().splitlines()
                # static slider figures: live ipywidgets can stall a headless execution
                lines.insert(1, "export ROPE_LIB_STATIC=1")
                data = ("\n".join(lines) + "\n").encode()
            zout.writestr(item, data)


def _value_text(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return repr(value)


def answer_key(prepared: Prepared) -> tuple[str, list[dict]]:
    """The answer key as Markdown and as JSON rows, in the book's order."""
    rows = []
    for chapter in prepared.chapters:
        for solution in chapter.solutions:
            label = solution.label
            if label not in prepared.expected:
                continue
            answer = prepared.answers[label]
            values = prepared.expected[label]
            rows.append(
                {
                    "exercise": prepared.numbers[label],
                    "label": label,
                    "chapter": chapter.path.stem,
                    "variable": answer.name,
                    "expected": list(values) if len(values) > 1 else values[0],
                    "precision": [k.describe() for k in answer.kinds],
                    "prompt": answer.prompt,
                }
            )
    lines = [
        "# Answer key of the self-checks (instructors only)",
        "",
        "The expected answer of every self-check of the student edition, computed by the",
        "book's own solutions in this run. A float is accepted within its precision (see the",
        "teaching page). Do not hand this folder to students.",
        "",
        "| exercise | label | variable | expected | precision |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        values = prepared.expected[row["label"]]
        shown = ", ".join(_value_text(v) for v in values)
        if len(values) > 1:
            shown = f"({shown})"
        lines.append(
            f"| {row['exercise']} | `{row['label']}` | `{row['variable']}` | `{shown}` | "
            f"{', '.join(row['precision'])} |"
        )
    return "\n".join(lines) + "\n", rows


README = """\
# Instructor edition (do not give this folder to students)

Written by `make instructor` (`course/instructor.py`) from the same execution as the
student edition (`make student`).

* `solutions/`: every chapter with its worked solutions and outputs.
* `answer-key.md`, `answer-key.json`: the expected answer of each of the {n} self-checks.
* `autograder/<chapter>.zip`: an otter-grader autograder for each chapter with self-checks
  ({tests} tests in all). A submission is that chapter's notebook from the student edition,
  answers filled in. Upload the archive to Gradescope as the autograder of a programming
  assignment, or grade here without Docker:
  `ROPE_LIB_STATIC=1 .venv/bin/otter run -a autograder/06_decay.zip 06_decay.ipynb`
  (writes `results.json`; `otter grade` does the same for many submissions, in Docker).
"""


def write_instructor(prepared: Prepared, out: Path, log: Callable[[str], None] = print) -> Path:
    """Write the instructor edition of ``prepared`` to ``out`` (see the module docstring).

    Raises
    ------
    ValueError
        If ``out`` is a file, or a non-empty folder that this script did not write.
    """
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).exists())):
        raise ValueError(
            f"--out {out}: not empty and not an instructor edition this script wrote; "
            "give a new or empty folder"
        )
    markdown, rows = answer_key(prepared)
    with_checks = [
        c.path.stem
        for c in prepared.chapters
        if any(s.label in prepared.expected for s in c.solutions)
    ]
    counts: dict[str, int] = {}

    def write(folder: Path) -> None:
        (folder / "solutions").mkdir()
        for chapter in prepared.chapters:
            stem = chapter.path.stem
            notebook = solutions_notebook(
                chapter, prepared.executed[stem], prepared.resolvers[stem]
            )
            nbformat.write(notebook, folder / "solutions" / f"{stem}.ipynb")
        (folder / "answer-key.md").write_text(markdown, encoding="utf-8")
        (folder / "answer-key.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        for stem in with_checks:
            counts[stem] = len(
                autograder_zip(prepared, stem, folder / "autograder" / f"{stem}.zip")
            )
        (folder / "README.md").write_text(
            README.format(n=len(rows), tests=sum(counts.values())), encoding="utf-8"
        )

    _write_folder(out, write, MARKER)
    log(
        f"instructor edition: {len(prepared.chapters)} solution notebooks, an answer key of "
        f"{len(rows)} self-checks and {len(with_checks)} autograder archives in {out}"
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m course.instructor [--out DIR] [CHAPTER.md ...]``."""
    parser = argparse.ArgumentParser(
        prog="python -m course.instructor", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "instructor")
    parser.add_argument("--parallel", type=int, default=2, help="chapters executed at once")
    parser.add_argument(
        "--no-cache", action="store_true", help=f"execute even if {CACHE_DIR} has the result"
    )
    parser.add_argument("chapters", nargs="*", type=Path, help="default: chapters/0*.md")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error(f"--parallel must be at least 1, got {args.parallel}")
    try:
        prepared = prepare(
            args.chapters or None,
            log=print,
            parallel=args.parallel,
            cache_dir=None if args.no_cache else CACHE_DIR,
        )
        write_instructor(prepared, args.out)
    except ValueError as error:
        print(f"course.instructor: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
