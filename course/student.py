"""Write the student edition of the book: ``python -m course.student --out _build/student``.

For every chapter ``chapters/0*.md`` this writes a plain ``.ipynb`` (nbformat 4, no outputs,
no Jupytext needed) in which every exercise solution is removed: the gated block from
``{solution-start}`` to ``{solution-end}``, with its prose and code cells. The exercise text
stays, as a Markdown heading and paragraph (plain Jupyter does not render the
``{exercise}`` directive).

Each exercise listed in :data:`course.answers.ANSWERS` gets an answer cell
(``name = ...  # your answer: ...``) and a check cell (``grader.check("ex-...")``), and the
notebook gets one init cell after its first code cell
(``grader = otter.Notebook(tests_dir="tests")``). The checks are otter-grader
exception-based test files in ``tests/``, one per exercise. A test file holds the expected
answer only as salted SHA-256 digests of its value rounded to the stated precision (the
student's value is accepted if it rounds to that quantum or to a neighbouring one, so
round-off near a boundary does not flip the verdict); its messages say right or wrong and
never show the value. A blank answer (``...``) fails with "no answer yet".

The expected values come from the book's own solutions: each chapter is executed once with
nbclient, with a probe cell after every listed solution that evaluates the table's
expression in the solution's namespace.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import secrets
import shutil
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jupytext
import nbformat
from nbclient import NotebookClient

from course.answers import ANSWERS, Answer

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
#: Written into the output directory; a directory without it is never overwritten.
MARKER = ".student-edition"
PROBE_MARK = "@@course-probe@@"
#: Longest line of a generated code cell (the chapters' own limit).
LINE_LIMIT = 75

_EXERCISE = re.compile(
    r"^```\{exercise\}(?P<title>[^\n]*)\n"
    r"(?P<options>(?::[^\n]*\n)*)"
    r"(?P<body>.*?)^```[ \t]*(?:\n|\Z)",
    re.S | re.M,
)
_SOLUTION = re.compile(
    r"^```\{solution-start\}[ \t]+(?P<label>\S+)[ \t]*\n"
    r"(?P<options>(?::[^\n]*\n)*)```[ \t]*\n"
    r"(?P<body>.*?)"
    r"^```\{solution-end\}[ \t]*\n```[ \t]*(?:\n|\Z)",
    re.S | re.M,
)
_LABEL = re.compile(r"^:label:[ \t]*(\S+)[ \t]*$", re.M)


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Exercise:
    """One ``{exercise}`` directive of a chapter."""

    label: str
    title: str
    body: str
    start: int
    end: int


@dataclass(frozen=True)
class Solution:
    """One gated solution, from ``{solution-start}`` to ``{solution-end}`` inclusive."""

    label: str
    body: str
    start: int
    end: int
    #: where the closing ``{solution-end}`` marker starts (a probe goes just before it)
    end_marker: int

    def code_cells(self) -> list[str]:
        """The sources of the solution's ``{code-cell}`` blocks."""
        notebook = jupytext.reads(self.body, fmt="md:myst")
        return [c.source for c in notebook.cells if c.cell_type == "code"]


@dataclass(frozen=True)
class Chapter:
    """A chapter's text with its exercises and their solutions, in order."""

    path: Path
    text: str
    exercises: tuple[Exercise, ...]
    solutions: tuple[Solution, ...]

    def outside_solutions(self) -> str:
        """The chapter text with every solution block cut out."""
        return _replace_spans(self.text, [(s.start, s.end, "") for s in self.solutions])


def parse_chapter(path: Path, text: str | None = None) -> Chapter:
    """Find the exercises and solutions of a chapter and check that they pair up.

    Parameters
    ----------
    path : Path
        The chapter's MyST Markdown file (used for its text unless ``text`` is given, and in
        error messages).
    text : str, optional
        The chapter text, if already read.

    Returns
    -------
    Chapter
        The exercises and solutions in order of appearance.

    Raises
    ------
    ValueError
        If a solution does not directly follow the exercise it names, an exercise has no
        solution, or a solution marker is left over that the patterns did not match.
    """
    text = path.read_text(encoding="utf-8") if text is None else text
    exercises = []
    for match in _EXERCISE.finditer(text):
        label = _LABEL.search(match["options"])
        if label is None:
            raise ValueError(f"{path.name}: an exercise without :label: at offset {match.start()}")
        exercises.append(
            Exercise(label[1], match["title"].strip(), match["body"], match.start(), match.end())
        )
    solutions = tuple(
        Solution(m["label"], m["body"], m.start(), m.end(), m.start() + m.group(0).rfind("```{"))
        for m in _SOLUTION.finditer(text)
    )
    labels = [e.label for e in exercises]
    if len(set(labels)) != len(labels):
        raise ValueError(f"{path.name}: duplicate exercise labels in {labels}")
    for solution in solutions:
        before = [e for e in exercises if e.end <= solution.start]
        if not before or before[-1].label != solution.label:
            raise ValueError(f"{path.name}: solution {solution.label} does not follow its exercise")
        gap = text[before[-1].end : solution.start]
        if gap.strip():
            raise ValueError(
                f"{path.name}: text between exercise {solution.label} and its solution"
            )
    unsolved = set(labels) - {s.label for s in solutions}
    if unsolved:
        raise ValueError(f"{path.name}: exercises without a gated solution: {sorted(unsolved)}")
    chapter = Chapter(path, text, tuple(exercises), solutions)
    rest = chapter.outside_solutions()
    for marker in ("{solution-start}", "{solution-end}", "{solution}"):
        if marker in rest:
            raise ValueError(
                f"{path.name}: a {marker} marker outside the solution blocks this script "
                "recognises (expected ```{solution-start} label / :class: dropdown / ``` ... "
                "```{solution-end} / ```)"
            )
    return chapter


def _replace_spans(text: str, spans: Sequence[tuple[int, int, str]]) -> str:
    out, at = [], 0
    for start, end, new in sorted(spans):
        out.append(text[at:start])
        out.append(new)
        at = end
    out.append(text[at:])
    return "".join(out)


# --------------------------------------------------------------------------- cells


def _code_block(source: str) -> str:
    return f"```{{code-cell}} ipython3\n{source.rstrip()}\n```\n"


def answer_cell(answer: Answer) -> str:
    """The answer cell's source: ``name = ...  # your answer: <prompt>``, wrapped at 75."""
    head = f"{answer.name} = ...  # your answer: "
    words = answer.describe()
    first_width = max(LINE_LIMIT - len(head), 20)
    lines = textwrap.wrap(words, width=first_width, break_on_hyphens=False)
    first, rest = lines[0], " ".join(lines[1:])
    more = textwrap.wrap(rest, width=LINE_LIMIT - 4, break_on_hyphens=False) if rest else []
    return "\n".join([head + first, *("#   " + line for line in more)])


def check_cell(answer: Answer) -> str:
    """The check cell's source."""
    return f'grader.check("{answer.label}")'


INTRO = """\
**Student edition.** The worked solutions of this chapter's exercises are removed (they are
in the book, folded under *Solution*). An exercise with a computable answer has an answer
cell: replace `...` by your answer. The check cell after it, `grader.check(...)`, says
whether the answer is right to the stated precision without showing the expected value; it
reads the files in `tests/` next to this notebook, so keep the two together."""

INIT = """\
import otter

grader = otter.Notebook(tests_dir="tests")"""

_PROBE_HELPER = f'''\
def _course_probe(label, value):
    import json
    import numbers

    def plain(v):
        if isinstance(v, (tuple, list)):
            return [plain(x) for x in v]
        if type(v).__name__ in ("bool", "bool_"):
            return bool(v)
        if isinstance(v, numbers.Integral):
            return int(v)
        if isinstance(v, numbers.Real):
            return float(v)
        raise TypeError(f"probe {{label}}: cannot read a {{type(v).__name__}}")

    print("{PROBE_MARK}", json.dumps([label, plain(value)]))'''


def student_text(chapter: Chapter, answers: Mapping[str, Answer]) -> str:
    """The chapter text without solutions, exercises as plain Markdown, checks in place."""
    spans: list[tuple[int, int, str]] = []
    for exercise in chapter.exercises:
        body = exercise.body.strip("\n")
        spans.append((exercise.start, exercise.end, f"### Exercise: {exercise.title}\n\n{body}\n"))
    for solution in chapter.solutions:
        answer = answers.get(solution.label)
        cells = "" if answer is None else _code_block(answer_cell(answer)) + "\n"
        cells += "" if answer is None else _code_block(check_cell(answer))
        spans.append((solution.start, solution.end, cells))
    return _replace_spans(chapter.text, spans)


def probe_text(chapter: Chapter, answers: Mapping[str, Answer]) -> str:
    """The chapter text with a probe cell before the end marker of every listed solution."""
    spans = []
    for solution in chapter.solutions:
        answer = answers.get(solution.label)
        if answer is not None:
            probe = f"_course_probe({answer.label!r}, ({answer.expr}))"
            spans.append((solution.end_marker, solution.end_marker, "\n" + _code_block(probe)))
    return _replace_spans(chapter.text, spans)


def _first_code_index(notebook: nbformat.NotebookNode, path: Path) -> int:
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            return i
    raise ValueError(f"{path.name}: no code cell")


def student_notebook(chapter: Chapter, answers: Mapping[str, Answer]) -> nbformat.NotebookNode:
    """The student notebook of a chapter (nbformat 4, no outputs, no Jupytext metadata)."""
    notebook = jupytext.reads(student_text(chapter, answers), fmt="md:myst")
    notebook.metadata.pop("jupytext", None)
    notebook.metadata["language_info"] = {"name": "python"}
    at = _first_code_index(notebook, chapter.path) + 1
    notebook.cells[at:at] = [nbformat.v4.new_markdown_cell(INTRO), nbformat.v4.new_code_cell(INIT)]
    fresh = nbformat.v4.new_notebook(metadata=notebook.metadata)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(cell.source, metadata=dict(cell.metadata))
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source, metadata=dict(cell.metadata))
        else:
            new = nbformat.v4.new_raw_cell(cell.source, metadata=dict(cell.metadata))
        fresh.cells.append(new)
    nbformat.validate(fresh)
    return fresh


# --------------------------------------------------------------------------- expected values


def _check_value(answer: Answer, value: Any) -> tuple[Any, ...]:
    values = tuple(value) if isinstance(value, list) else (value,)
    if len(answer.kinds) > 1 and not isinstance(value, list):
        raise ValueError(f"probe {answer.label}: expected a tuple, the expression gave {value!r}")
    if len(values) != len(answer.kinds):
        raise ValueError(
            f"probe {answer.label}: expected {len(answer.kinds)} values, got {len(values)}"
        )
    for kind, v in zip(answer.kinds, values, strict=True):
        ok = {
            "bool": isinstance(v, bool),
            "int": isinstance(v, int) and not isinstance(v, bool),
            "float": isinstance(v, (int, float)) and not isinstance(v, bool),
        }[kind.type]
        if not ok or (kind.rel is not None and v == 0):
            raise ValueError(f"probe {answer.label}: {v!r} is not {kind.describe()}")
    return values


#: Environment of the kernels that execute notebooks here: the slider figures are drawn
#: statically, as in ``make book``. With live ipywidgets, nbclient now and then never gets
#: past a cell that opens widgets (the kernel idle, the client waiting; seen twice here
#: after ``show(...)`` cells, and reported upstream as jupyter/nbclient#312).
KERNEL_ENV = {"ROPE_LIB_STATIC": "1"}

#: Kernel starts tried per notebook.  Kernels launched at the same moment by different
#: processes can pick the same free TCP port (seen on CI: "ZMQError: Address already in
#: use", then "Kernel didn't respond"); a kernel that never ran a cell is started again.
STARTUP_ATTEMPTS = 3


def _execute_one(source: str, where: str, timeout: int) -> str:
    """Execute one notebook (given and returned as JSON text) in this worker process."""
    os.environ.update(KERNEL_ENV)  # inherited by the kernel this process starts
    for attempt in range(STARTUP_ATTEMPTS):
        notebook = nbformat.reads(source, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=timeout,
            startup_timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": where}},
        )
        try:
            client.execute()
        except RuntimeError:  # "Kernel didn't respond", DeadKernelError
            ran = any(c.get("execution_count") for c in notebook.cells if c.cell_type == "code")
            if ran or attempt == STARTUP_ATTEMPTS - 1:
                raise
            continue  # the kernel never started: another try is safe
        return nbformat.writes(notebook)
    raise AssertionError("unreachable")


def execute_notebooks(
    jobs: Sequence[tuple[nbformat.NotebookNode, Path]], parallel: int = 2, timeout: int = 600
) -> None:
    """Execute notebooks in place with nbclient, ``parallel`` at a time.

    Each notebook runs through nbclient's plain blocking ``execute()`` in a worker process,
    with :data:`KERNEL_ENV` in its kernel's environment.

    Parameters
    ----------
    jobs : sequence of (notebook, directory)
        Each notebook and the working directory of its kernel.
    parallel : int
        How many notebooks run at once (at least 1).
    timeout : int
        Seconds a single cell may run.

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        From the first notebook (in the order given) with a cell that raises.
    """
    if parallel < 1:
        raise ValueError(f"parallel must be at least 1, got {parallel!r}")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=parallel, mp_context=context) as pool:
        futures = [
            pool.submit(_execute_one, nbformat.writes(nb), str(where), timeout)
            for nb, where in jobs
        ]
        for (notebook, _), future in zip(jobs, futures, strict=True):
            executed = nbformat.reads(future.result(), as_version=4)
            notebook.cells = executed.cells
            notebook.metadata = executed.metadata


def probe_notebook(chapter: Chapter, answers: Mapping[str, Answer]) -> nbformat.NotebookNode:
    """The book chapter, solutions included, with a probe after every listed solution."""
    notebook = jupytext.reads(probe_text(chapter, answers), fmt="md:myst")
    at = _first_code_index(notebook, chapter.path) + 1
    notebook.cells.insert(at, nbformat.v4.new_code_cell(_PROBE_HELPER))
    return notebook


def read_probes(
    chapter: Chapter, notebook: nbformat.NotebookNode, answers: Mapping[str, Answer]
) -> dict[str, tuple[Any, ...]]:
    """Read the probe outputs of an executed :func:`probe_notebook`.

    Returns
    -------
    dict
        Label to the tuple of expected values (one per kind).
    """
    wanted = {s.label for s in chapter.solutions if s.label in answers}
    found: dict[str, tuple[Any, ...]] = {}
    for cell in notebook.cells:
        # a print may arrive in several stream messages: join them before reading lines
        text = "".join(
            o.get("text", "")
            for o in cell.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        for line in text.splitlines():
            if line.startswith(PROBE_MARK):
                label, value = json.loads(line[len(PROBE_MARK) :])
                found[label] = _check_value(answers[label], value)
    missing = wanted - set(found)
    if missing:
        raise RuntimeError(f"{chapter.path.name}: no probe output for {sorted(missing)}")
    return found


# --------------------------------------------------------------------------- test files

#: Shared by the generator (to hash the expected value) and every test file (to hash the
#: student's value and its neighbours): one definition, so the two cannot drift apart.
TOKENS_SOURCE = '''\
def _tokens(kind, abs_q, rel_q, value):
    """The value rounded to its precision, and its two neighbours, as strings to hash."""
    if kind == "bool":
        return ["b:" + str(bool(value))]
    if kind == "int":
        return ["i:" + str(int(value))]
    if abs_q is not None:
        k = round(float(value) / abs_q)
        return ["f:" + str(k + j) for j in (0, -1, 1)]
    sign = "+" if value > 0 else "-"
    k = round(math.log(abs(float(value))) / math.log1p(rel_q))
    return ["r:" + sign + str(k + j) for j in (0, -1, 1)]


def _digest(salt, index, token):
    return hashlib.sha256(f"{salt}:{index}:{token}".encode()).hexdigest()
'''

TEST_TEMPLATE = '''\
"""Self-check of exercise {label} (written by course/student.py; do not edit).

The expected answer is stored only as salted SHA-256 digests of its value rounded to the
stated precision; the messages say right or wrong and never show it.
"""

import hashlib
import math
import numbers

from otter.test_files import test_case

OK_FORMAT = False  # otter: an exception-based test file, not the OK format

name = {label!r}
points = 1

VARIABLE = {name!r}
IS_TUPLE = {is_tuple!r}
SALT = {salt!r}
# one row per value: (kind, absolute precision, relative precision, digest)
EXPECTED = [
{rows}
]


{tokens}

def _kind_problem(kind, rel_q, value):
    """Why ``value`` cannot be compared as ``kind``, or None."""
    is_bool = type(value).__name__ in ("bool", "bool_")
    if kind == "bool":
        return None if is_bool else "should be True or False"
    if is_bool or not isinstance(value, numbers.Real):
        return "should be a number"
    if not math.isfinite(float(value)):
        return "should be a finite number"
    if kind == "int" and not float(value).is_integer():
        return "should be an integer"
    if rel_q is not None and value == 0:
        return "should not be zero"
    return None


@test_case(points=1)
def answer_is_right(env):
    value = env.get(VARIABLE, ...)
    if value is ...:
        raise AssertionError(f"no answer yet: set {{VARIABLE}} in the answer cell")
    if IS_TUPLE:
        if hasattr(value, "tolist"):
            value = value.tolist()
        if not isinstance(value, (tuple, list)) or len(value) != len(EXPECTED):
            raise AssertionError(
                f"{{VARIABLE}} should be a tuple of {{len(EXPECTED)}} values"
            )
        values = list(value)
    else:
        values = [value]
    wrong = []
    for index, ((kind, abs_q, rel_q, digest), v) in enumerate(zip(EXPECTED, values)):
        where = f"value {{index + 1}} of {{VARIABLE}}" if IS_TUPLE else VARIABLE
        if v is ...:
            raise AssertionError(f"no answer yet: {{where}} is ...")
        problem = _kind_problem(kind, rel_q, v)
        if problem is not None:
            raise AssertionError(f"{{where}} {{problem}}, got {{type(v).__name__}}")
        tokens = _tokens(kind, abs_q, rel_q, v)
        if not any(_digest(SALT, index, t) == digest for t in tokens):
            wrong.append(index + 1)
    if wrong and IS_TUPLE:
        listed = ", ".join(str(i) for i in wrong)
        raise AssertionError(
            f"not right yet: value(s) {{listed}} of {{VARIABLE}} do not match the"
            " answer to the stated precision"
        )
    if wrong:
        raise AssertionError(
            f"not right yet: {{VARIABLE}} does not match the answer to the stated precision"
        )
'''


def _token_functions() -> tuple[Callable[..., list[str]], Callable[..., str]]:
    namespace: dict[str, Any] = {}
    exec("import hashlib\nimport math\n" + TOKENS_SOURCE, namespace)
    return namespace["_tokens"], namespace["_digest"]


def test_file_source(answer: Answer, values: Sequence[Any], salt: str | None = None) -> str:
    """The otter exception-based test file of one exercise.

    Parameters
    ----------
    answer : Answer
        The table entry.
    values : sequence
        The expected values, one per kind.
    salt : str, optional
        The salt of the digests (random if not given).

    Returns
    -------
    str
        Python source; it contains digests, never the values.
    """
    tokens, digest = _token_functions()
    salt = secrets.token_hex(16) if salt is None else salt
    rows = []
    for index, (kind, value) in enumerate(zip(answer.kinds, values, strict=True)):
        centre = tokens(kind.type, kind.abs, kind.rel, value)[0]
        rows.append(
            f"    ({kind.type!r}, {kind.abs!r}, {kind.rel!r}, {digest(salt, index, centre)!r}),"
        )
    return TEST_TEMPLATE.format(
        label=answer.label,
        name=answer.name,
        is_tuple=len(answer.kinds) > 1,
        salt=salt,
        rows="\n".join(rows),
        tokens=TOKENS_SOURCE,
    )


# --------------------------------------------------------------------------- the edition


@dataclass
class Edition:
    """What :func:`build` wrote, and the expected values it found (kept in memory only)."""

    out: Path
    chapters: list[Chapter]
    notebooks: dict[str, Path] = field(default_factory=dict)
    tests: dict[str, Path] = field(default_factory=dict)
    expected: dict[str, tuple[Any, ...]] = field(default_factory=dict)


def chapter_paths() -> list[Path]:
    """The book's chapters, ``chapters/0*.md``, in order."""
    return sorted(CHAPTERS.glob("0*.md"))


def _check_table(chapters: Sequence[Chapter], answers: Mapping[str, Answer]) -> None:
    known = {e.label: c for c in chapters for e in c.exercises}
    unknown = sorted(set(answers) - set(known))
    if unknown:
        raise ValueError(f"course/answers.py names exercises that no chapter has: {unknown}")
    for chapter in chapters:
        code = "\n".join(
            c.source
            for c in jupytext.reads(chapter.text, fmt="md:myst").cells
            if c.cell_type == "code"
        )
        names = [a.name for a in answers.values() if known[a.label] is chapter]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"{chapter.path.name}: answer variable {name} used twice")
            if re.search(rf"\b{re.escape(name)}\b", code):
                raise ValueError(
                    f"{chapter.path.name}: answer variable {name} is also a name in the "
                    "chapter's code (solutions included); choose another name in "
                    "course/answers.py"
                )


def _check_out(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise ValueError(f"--out {out}: exists and is not a directory")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise ValueError(
                f"--out {out}: the directory is not empty and was not written by "
                "course/student.py; give a new or empty directory"
            )


def _prepare_out(out: Path) -> None:
    _check_out(out)
    if out.exists():
        shutil.rmtree(out)
    (out / "tests").mkdir(parents=True)
    (out / MARKER).write_text("written by course/student.py; rewritten on every run\n")


def build(
    out: Path,
    paths: Sequence[Path] | None = None,
    answers: Mapping[str, Answer] = ANSWERS,
    log: Callable[[str], None] = lambda s: None,
    parallel: int = 2,
) -> Edition:
    """Write the student edition to ``out``.

    Parameters
    ----------
    out : Path
        Output directory; created, or replaced if an earlier run wrote it.
    paths : sequence of Path, optional
        Chapters to include (default: every ``chapters/0*.md``).
    answers : mapping of label to Answer
        The answer table; entries for chapters not included are ignored.
    log : callable
        Receives progress lines.
    parallel : int
        How many chapters execute at once (each in its own kernel).

    Returns
    -------
    Edition
        Paths written and the expected values.
    """
    paths = chapter_paths() if paths is None else list(paths)
    if not paths:
        raise ValueError("no chapters to convert (chapters/0*.md is empty?)")
    chapters = [parse_chapter(Path(p)) for p in paths]
    labels = {e.label for c in chapters for e in c.exercises}
    table = {k: v for k, v in answers.items() if k in labels}
    if len(paths) == len(chapter_paths()):
        _check_table(chapters, answers)
    else:
        _check_table(chapters, table)
    _check_out(out)  # before the long part, so a wrong --out fails at once
    probes = [probe_notebook(c, table) for c in chapters]
    log(f"executing {len(chapters)} chapter(s) with their solutions, {parallel} at a time")
    # the later chapters take longest (chapter 7 about half of the total): start them first
    jobs = [(nb, c.path.parent) for nb, c in zip(probes, chapters, strict=True)]
    execute_notebooks(jobs[::-1], parallel)
    _prepare_out(out)  # only now: a chapter that fails leaves an earlier edition in place
    edition = Edition(out, chapters)
    for chapter, probe in zip(chapters, probes, strict=True):
        expected = read_probes(chapter, probe, table)
        edition.expected.update(expected)
        notebook = student_notebook(chapter, table)
        target = out / (chapter.path.stem + ".ipynb")
        nbformat.write(notebook, target)
        edition.notebooks[chapter.path.stem] = target
        for label, values in expected.items():
            test = out / "tests" / f"{label}.py"
            test.write_text(test_file_source(table[label], values), encoding="utf-8")
            edition.tests[label] = test
        log(
            f"{target.name}: {len(chapter.solutions)} solutions removed, "
            f"{len(expected)} self-checks"
        )
    return edition


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m course.student [--out DIR] [CHAPTER.md ...]``."""
    parser = argparse.ArgumentParser(
        prog="python -m course.student", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student")
    parser.add_argument(
        "--parallel", type=int, default=2, help="chapters executed at once (default 2)"
    )
    parser.add_argument("chapters", nargs="*", type=Path, help="default: chapters/0*.md")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error(f"--parallel must be at least 1, got {args.parallel}")
    for path in args.chapters:
        if not path.is_file():
            parser.error(f"chapter {path}: no such file")
    try:
        edition = build(args.out, args.chapters or None, log=print, parallel=args.parallel)
    except ValueError as error:
        print(f"course.student: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {len(edition.notebooks)} notebooks and {len(edition.tests)} self-checks "
        f"to {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
