"""Write the student edition of the book: ``python -m course.student --out _build/student``.

For every chapter ``chapters/0*.md`` this writes a plain ``.ipynb`` (nbformat 4, no outputs,
no Jupytext needed) in which every exercise solution is removed: the gated block from
``{solution-start}`` to ``{solution-end}``, with its prose and code cells. The exercise text
stays, as a Markdown heading with the book's number (``### Exercise 6.5: <title>``) and its
paragraph (plain Jupyter does not render the ``{exercise}`` directive).

The notebooks read like the book: the MyST roles of the Markdown (glued values, citations,
cross-references, equation labels) are replaced by the text the book shows
(``_ext/notebook_roles.py``), from the roles file the book build writes
(``_build/notebook_roles.json``; ``make student`` builds the book first) and from the
glued values of this run's execution.

Each exercise listed in :data:`course.answers.ANSWERS` gets an answer cell
(``name = ...  # your answer: ...``) and a check cell (``grader.check("Exercise 6.5")``, the
exercise's number in the book), and the notebook gets one init cell after its first code
cell: otter-grader's ``Notebook`` for ``tests/``, whose checks say what happened and what to
do when ``tests/`` cannot be found. The checks are otter-grader exception-based test files
in ``tests/``, one per exercise (``tests/Exercise 6.5.py``). A test file holds the expected
answer only as salted SHA-256 digests of its value rounded to the stated precision (the
student's value is accepted if it rounds to that quantum or to a neighbouring one, so
round-off near a boundary does not flip the verdict); its messages say right or wrong and
never show the value. A blank answer (``...``) fails with "no answer yet".

The expected values come from the book's own solutions: each chapter is executed once with
nbclient, with a probe cell after every listed solution that evaluates the table's
expression in the solution's namespace. The executed notebooks are kept in
``_build/course-cache`` under a hash of the notebook and of ``rope_lib``, so ``make
student`` and ``make instructor`` (``course/instructor.py``) execute the chapters once.

An edition is never written over a student's work: an output folder that exists is
replaced only if it holds an edition this script wrote and nothing in it changed since
(its ``.student-edition`` file lists every file with its hash); otherwise the new edition
goes beside it (``student-2``, ``student-3``, ...) and the run says where.
"""

from __future__ import annotations

import argparse
import hashlib
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
sys.path.insert(0, str(ROOT / "_ext"))
import notebook_roles  # noqa: E402  (_ext/notebook_roles.py: MyST roles as text)

CHAPTERS = ROOT / "chapters"
#: The roles file of the last book build (``make book``).
ROLES_FILE = ROOT / "_build" / notebook_roles.ROLES_FILE
#: Executed probe notebooks, kept between runs (see :func:`execute_cached`).
CACHE_DIR = ROOT / "_build" / "course-cache"
#: Written into the output directory, with the hash of every file written; a directory
#: without it, or with a file changed, added or removed since, is never overwritten.
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


def check_cell(check: str) -> str:
    """The check cell's source: ``grader.check("Exercise 6.5")``."""
    return f'grader.check("{check}")'


INTRO = """\
**Student edition.** The worked solutions of this chapter's exercises are removed (they are
in the book, folded under *Solution*); exercises keep the book's numbers. An exercise with a
computable answer has an answer cell: replace `...` by your answer. The check cell after it,
such as `grader.check("Exercise 6.5")`, says whether the answer is right to the stated
precision without showing the expected value; it reads the files in `tests/` next to this
notebook, so keep the two together."""

#: The message of a self-check whose kernel lost its folder (deleted or replaced).
FOLDER_GONE = (
    "This notebook's folder was deleted or replaced while its kernel was running "
    "(for example by a new student edition written over it), so the self-checks "
    "cannot read tests/. Your answers are still in this notebook: save it, restart "
    "the kernel (Kernel > Restart Kernel) and run the cells again."
)
#: The message of a self-check with no ``tests/`` beside the notebook (``{here}``: where).
NO_TESTS = (
    "The self-checks read the folder tests/ next to this notebook, and there is none "
    "in {here}. Keep the notebook in the folder of the student edition it came in, "
    "or copy that whole folder (the notebooks and tests/) together."
)


def _string_lines(text: str, indent: int) -> str:
    """``text`` as adjacent Python string literals, one per line, within the line limit."""
    pad = " " * indent
    width = LINE_LIMIT - indent - 3  # the quotes and a margin
    pieces = textwrap.wrap(text, width=width, drop_whitespace=False, break_on_hyphens=False)
    return "\n".join(pad + json.dumps(piece) for piece in pieces)


INIT = f"""\
import os

import otter

FOLDER_GONE = (
{_string_lines(FOLDER_GONE, 4)}
)
NO_TESTS = (
{_string_lines(NO_TESTS, 4)}
)


class SelfCheck(otter.Notebook):
    \"\"\"otter's self-checks; they say what to do if tests/ is missing.\"\"\"

    def check(self, question, global_env=None):
        try:
            here = os.getcwd()
        except FileNotFoundError:  # the kernel's folder was deleted
            raise RuntimeError(FOLDER_GONE) from None
        if not os.path.isdir(os.path.join(here, "tests")):
            raise FileNotFoundError(NO_TESTS.format(here=here))
        return super().check(question, global_env or globals())


grader = SelfCheck(tests_dir="tests")"""

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


def student_text(
    chapter: Chapter, answers: Mapping[str, Answer], numbers: Mapping[str, str]
) -> str:
    """The chapter text without solutions, exercises as plain Markdown, checks in place.

    ``numbers`` gives each exercise label its name in the book, e.g. ``"Exercise 6.5"``:
    the heading and the check use it.
    """
    spans: list[tuple[int, int, str]] = []
    for exercise in chapter.exercises:
        body = exercise.body.strip("\n")
        heading = f"### {numbers[exercise.label]}: {exercise.title}"
        spans.append((exercise.start, exercise.end, f"{heading}\n\n{body}\n"))
    for solution in chapter.solutions:
        answer = answers.get(solution.label)
        cells = "" if answer is None else _code_block(answer_cell(answer)) + "\n"
        cells += "" if answer is None else _code_block(check_cell(numbers[solution.label]))
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


def _plain_notebook(notebook: nbformat.NotebookNode, outputs: bool) -> nbformat.NotebookNode:
    """A fresh nbformat 4 notebook of the same cells (outputs kept only if ``outputs``)."""
    notebook.metadata.pop("jupytext", None)
    notebook.metadata["language_info"] = {"name": "python"}
    fresh = nbformat.v4.new_notebook(metadata=notebook.metadata)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(cell.source, metadata=dict(cell.metadata))
            if outputs:
                new.outputs = cell.get("outputs", [])
                new.execution_count = cell.get("execution_count")
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source, metadata=dict(cell.metadata))
        else:
            new = nbformat.v4.new_raw_cell(cell.source, metadata=dict(cell.metadata))
        fresh.cells.append(new)
    nbformat.validate(fresh)
    return fresh


@dataclass(frozen=True)
class Resolver:
    """What a chapter's Markdown roles resolve to (see ``_ext/notebook_roles.py``)."""

    table: Mapping[str, Any]
    glue: Mapping[str, Mapping[str, Any]]

    def resolve(self, chapter: Chapter, cells: list) -> None:
        """Resolve the roles of ``cells`` (of ``chapter``) in place."""
        docname = f"chapters/{chapter.path.stem}"
        xref, equation = notebook_roles.table_resolvers(self.table, docname)
        try:
            notebook_roles.resolve_cells(cells, self.glue, xref, equation)
        except notebook_roles.UnresolvedRole as error:
            raise ValueError(
                f"{chapter.path.name}: {error}; the roles file {ROLES_FILE} is older than "
                "the chapter: run `make book` (`make student` does) and try again"
            ) from None


def student_notebook(
    chapter: Chapter,
    answers: Mapping[str, Answer],
    numbers: Mapping[str, str],
    resolver: Resolver,
) -> nbformat.NotebookNode:
    """The student notebook of a chapter (nbformat 4, no outputs, no Jupytext metadata).

    ``numbers`` names each exercise as the book does (``"Exercise 6.5"``); ``resolver``
    turns the Markdown's roles into text.
    """
    notebook = jupytext.reads(student_text(chapter, answers, numbers), fmt="md:myst")
    at = _first_code_index(notebook, chapter.path) + 1
    notebook.cells[at:at] = [nbformat.v4.new_markdown_cell(INTRO), nbformat.v4.new_code_cell(INIT)]
    resolver.resolve(chapter, notebook.cells)
    return _plain_notebook(notebook, outputs=False)


def solutions_notebook(
    chapter: Chapter, executed: nbformat.NotebookNode, resolver: Resolver
) -> nbformat.NotebookNode:
    """The instructor's copy of a chapter: the executed probe notebook, solutions and
    outputs kept, probes taken out, roles resolved."""
    from myst_nb.ext.glue import extract_glue_data_cell

    notebook = nbformat.reads(nbformat.writes(executed), as_version=4)
    keep = []
    for cell in notebook.cells:
        if cell.cell_type == "code":
            if cell.source.startswith(("_course_probe(", "def _course_probe(")):
                continue
            extract_glue_data_cell(cell)  # the glued values are in the text now
        keep.append(cell)
    notebook.cells = keep
    resolver.resolve(chapter, notebook.cells)
    return _plain_notebook(notebook, outputs=True)


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
"""Self-check of {check} ({label}; written by course/student.py; do not edit).

The expected answer is stored only as salted SHA-256 digests of its value rounded to the
stated precision; the messages say right or wrong and never show it.
"""

import hashlib
import math
import numbers

from otter.test_files import test_case

OK_FORMAT = False  # otter: an exception-based test file, not the OK format

name = {check!r}
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


def test_file_source(
    answer: Answer, values: Sequence[Any], salt: str | None = None, check: str | None = None
) -> str:
    """The otter exception-based test file of one exercise.

    Parameters
    ----------
    answer : Answer
        The table entry.
    values : sequence
        The expected values, one per kind.
    salt : str, optional
        The salt of the digests (random if not given).
    check : str, optional
        The test's name, the argument of ``grader.check`` (default: the label); the
        edition names it as the book does, e.g. ``"Exercise 6.5"``.

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
        check=check or answer.label,
        label=answer.label,
        name=answer.name,
        is_tuple=len(answer.kinds) > 1,
        salt=salt,
        rows="\n".join(rows),
        tokens=TOKENS_SOURCE,
    )


# --------------------------------------------------------------------------- the edition


@dataclass
class Prepared:
    """The chapters executed with their solutions, and what the editions are made of."""

    chapters: list[Chapter]
    answers: dict[str, Answer]
    #: exercise label -> its name in the book, e.g. ``"Exercise 6.5"``
    numbers: dict[str, str]
    #: chapter stem -> the executed probe notebook
    executed: dict[str, nbformat.NotebookNode]
    #: chapter stem -> what its roles resolve to
    resolvers: dict[str, Resolver]
    #: exercise label -> the expected values (one per kind)
    expected: dict[str, tuple[Any, ...]]

    def test_source(self, label: str) -> str:
        """The otter test file of the exercise ``label``, named as the book names it."""
        return test_file_source(
            self.answers[label], self.expected[label], check=self.numbers[label]
        )


@dataclass
class Edition:
    """What :func:`build` wrote, and the expected values it found (kept in memory only)."""

    out: Path
    chapters: list[Chapter]
    notebooks: dict[str, Path] = field(default_factory=dict)
    tests: dict[str, Path] = field(default_factory=dict)
    expected: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    #: exercise label -> its name in the book and its check, e.g. ``"Exercise 6.5"``
    numbers: dict[str, str] = field(default_factory=dict)
    #: what happened to an output folder that already existed ("" if there was none)
    note: str = ""
    #: the instructor edition's folder, if one was written in the same run
    instructor: Path | None = None
    #: what it was made from (to write it again, e.g. beside a changed copy)
    prepared: Prepared | None = None


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


def _file_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but the marker, by relative path."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MARKER
    }


def is_untouched_edition(folder: Path) -> bool:
    """Whether ``folder`` holds a student edition exactly as this script wrote it.

    True when its marker file lists every file in it with the hash it was written with:
    nothing was saved, added (an ``.OTTER_LOG``, a checkpoint) or removed since, so no
    student's work can be in it.
    """
    marker = folder / MARKER
    try:
        written = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return written == _file_hashes(folder)


def choose_out(out: Path) -> tuple[Path, str]:
    """Where to write an edition asked for at ``out``, and what happened to ``out``.

    Parameters
    ----------
    out : Path
        The folder asked for (``--out``).

    Returns
    -------
    (Path, str)
        ``out`` itself if it does not exist, is empty, or holds an untouched edition
        (:func:`is_untouched_edition`, replaced); otherwise the first free or untouched
        sibling ``out-2``, ``out-3``, ..., and a message saying why ``out`` was kept.
    """

    def usable(folder: Path) -> bool:
        if not folder.exists():
            return True
        return folder.is_dir() and (not any(folder.iterdir()) or is_untouched_edition(folder))

    if usable(out):
        return out, ""
    why = (
        "holds a student edition that was changed since it was written (answers may be saved there)"
        if (out / MARKER).exists()
        else "is not a student edition this script wrote"
    )
    n = 2
    while not usable(out.with_name(f"{out.name}-{n}")):
        n += 1
    beside = out.with_name(f"{out.name}-{n}")
    return beside, (
        f"{out} {why}, so it is left as it is; the new edition is in {beside}. "
        f"Copy your answers across from {out}, and delete it yourself once you do not "
        "need it (the next run writes beside it again until then)."
    )


def _write_folder(target: Path, write: Callable[[Path], None], marker: str) -> None:
    """Write a folder in a temporary sibling, then put it in place of ``target``.

    ``target`` must be free or replaceable (the caller decided); ``write(folder)`` fills
    the folder; the marker file then records every file's hash.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        tmp.mkdir()
        write(tmp)
        stamp = {"written_by": "course/student.py", "files": _file_hashes(tmp)}
        (tmp / marker).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def rope_lib_hash() -> str:
    """SHA-256 of rope_lib's files (code, data, static assets): what executions depend on."""
    digest = hashlib.sha256()
    package = ROOT / "rope_lib"
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def execute_cached(
    jobs: Sequence[tuple[nbformat.NotebookNode, Path]],
    cache_dir: Path | None,
    parallel: int = 2,
    log: Callable[[str], None] = lambda s: None,
) -> None:
    """:func:`execute_notebooks`, reusing an execution of the same notebook and rope_lib.

    Parameters
    ----------
    jobs : sequence of (notebook, directory)
        As for :func:`execute_notebooks`; executed (or filled from the cache) in place.
    cache_dir : Path or None
        Where executed notebooks are kept, named by a SHA-256 of the notebook, of
        :func:`rope_lib_hash` and of :data:`KERNEL_ENV`; None: always execute.
    parallel : int
        Notebooks executed at once.
    log : callable
        Receives one line saying how many were taken from the cache.
    """
    keys = []
    for notebook, _ in jobs:
        # the cells' content only: fresh cells get random ids
        content = [(c.cell_type, c.source, c.get("metadata", {})) for c in notebook.cells]
        digest = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode())
        digest.update(rope_lib_hash().encode() + json.dumps(KERNEL_ENV).encode())
        keys.append(digest.hexdigest()[:32])
    todo = []
    for (notebook, where), key in zip(jobs, keys, strict=True):
        cached = None if cache_dir is None else cache_dir / f"{key}.ipynb"
        if cached is not None and cached.is_file():
            executed = nbformat.read(cached, as_version=4)
            notebook.cells, notebook.metadata = executed.cells, executed.metadata
        else:
            todo.append((notebook, where, cached))
    log(
        f"executing {len(todo)} chapter(s) with their solutions, {parallel} at a time"
        + (f" ({len(jobs) - len(todo)} from {cache_dir})" if len(todo) < len(jobs) else "")
    )
    execute_notebooks([(nb, where) for nb, where, _ in todo], parallel)
    for notebook, _, cached in todo:
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, cached)


def read_roles_file(roles_file: Path) -> dict[str, Any]:
    """The roles file of the last book build, or a ValueError saying how to make it."""
    try:
        return notebook_roles.read_roles(roles_file)
    except FileNotFoundError:
        raise ValueError(
            f"no roles file {roles_file}: the editions take the text of the book's "
            "cross-references from the last book build; run `make book` first (`make "
            "student` and `make instructor` do)"
        ) from None


def prepare(
    paths: Sequence[Path] | None = None,
    answers: Mapping[str, Answer] = ANSWERS,
    log: Callable[[str], None] = lambda s: None,
    parallel: int = 2,
    roles_file: Path = ROLES_FILE,
    cache_dir: Path | None = CACHE_DIR,
) -> Prepared:
    """Execute the chapters with their solutions and read everything the editions need.

    Parameters
    ----------
    paths : sequence of Path, optional
        Chapters to include (default: every ``chapters/0*.md``).
    answers : mapping of label to Answer
        The answer table; entries for chapters not included are ignored.
    log : callable
        Receives progress lines.
    parallel : int
        How many chapters execute at once (each in its own kernel).
    roles_file : Path
        The roles file of the book build (``_build/notebook_roles.json``).
    cache_dir : Path or None
        Executed notebooks kept between runs (:func:`execute_cached`); None: execute.

    Returns
    -------
    Prepared
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
    roles = read_roles_file(roles_file)
    numbers = dict(roles.get("exercises", {}))
    missing = sorted(labels - set(numbers))
    if missing:
        raise ValueError(
            f"the roles file {roles_file} has no number for the exercises {missing}: the "
            "book was built before they were added; run `make book`"
        )
    probes = [probe_notebook(c, table) for c in chapters]
    # the later chapters take longest (chapter 9 about a third of the total): start them first
    jobs = [(nb, c.path.parent) for nb, c in zip(probes, chapters, strict=True)]
    execute_cached(jobs[::-1], cache_dir, parallel, log)
    prepared = Prepared(chapters, table, {k: numbers[k] for k in labels}, {}, {}, {})
    for chapter, probe in zip(chapters, probes, strict=True):
        stem = chapter.path.stem
        prepared.executed[stem] = probe
        prepared.expected.update(read_probes(chapter, probe, table))
        glue = notebook_roles.glue_values(probe.cells)
        prepared.resolvers[stem] = Resolver(roles, glue)
    return prepared


def write_student(prepared: Prepared, out: Path, log: Callable[[str], None] = print) -> Edition:
    """Write the student edition of ``prepared`` at ``out`` (or beside it: :func:`choose_out`).

    Returns
    -------
    Edition
        Its folder (``edition.out``, which may differ from ``out``), notebooks and tests.
    """
    target, note = choose_out(out)
    notebooks = {
        c.path.stem: student_notebook(
            c, prepared.answers, prepared.numbers, prepared.resolvers[c.path.stem]
        )
        for c in prepared.chapters
    }

    def write(folder: Path) -> None:
        (folder / "tests").mkdir()
        for stem, notebook in notebooks.items():
            nbformat.write(notebook, folder / f"{stem}.ipynb")
        for label in prepared.expected:
            name = f"{prepared.numbers[label]}.py"
            (folder / "tests" / name).write_text(prepared.test_source(label), encoding="utf-8")

    _write_folder(target, write, MARKER)
    edition = Edition(target, prepared.chapters, expected=dict(prepared.expected), note=note)
    edition.numbers = dict(prepared.numbers)
    edition.prepared = prepared
    for chapter in prepared.chapters:
        stem = chapter.path.stem
        edition.notebooks[stem] = target / f"{stem}.ipynb"
        checks = [s.label for s in chapter.solutions if s.label in prepared.expected]
        for label in checks:
            edition.tests[label] = target / "tests" / f"{prepared.numbers[label]}.py"
        log(f"{stem}.ipynb: {len(chapter.solutions)} solutions removed, {len(checks)} self-checks")
    if note:
        log(f"course.student: {note}")
    return edition


def build(
    out: Path,
    paths: Sequence[Path] | None = None,
    answers: Mapping[str, Answer] = ANSWERS,
    log: Callable[[str], None] = lambda s: None,
    parallel: int = 2,
    *,
    roles_file: Path = ROLES_FILE,
    cache_dir: Path | None = CACHE_DIR,
    instructor: Path | None = None,
) -> Edition:
    """Write the student edition to ``out`` (and, optionally, the instructor edition).

    Parameters
    ----------
    out : Path
        Output folder; created, replaced if it holds an untouched edition, else the
        edition goes beside it (:func:`choose_out`; ``edition.out`` says where).
    paths, answers, log, parallel, roles_file, cache_dir
        As for :func:`prepare`.
    instructor : Path, optional
        Also write the instructor edition there (``course/instructor.py``), from the same
        execution.

    Returns
    -------
    Edition
        Paths written and the expected values.
    """
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    prepared = prepare(paths, answers, log, parallel, roles_file, cache_dir)
    edition = write_student(prepared, out, log)
    if instructor is not None:
        from course.instructor import write_instructor

        edition.instructor = write_instructor(prepared, instructor, log)
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
    parser.add_argument(
        "--no-cache", action="store_true", help=f"execute even if {CACHE_DIR} has the result"
    )
    parser.add_argument("chapters", nargs="*", type=Path, help="default: chapters/0*.md")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error(f"--parallel must be at least 1, got {args.parallel}")
    for path in args.chapters:
        if not path.is_file():
            parser.error(f"chapter {path}: no such file")
    try:
        edition = build(
            args.out,
            args.chapters or None,
            log=print,
            parallel=args.parallel,
            cache_dir=None if args.no_cache else CACHE_DIR,
        )
    except ValueError as error:
        print(f"course.student: {error}", file=sys.stderr)
        return 2
    print(
        f"wrote {len(edition.notebooks)} notebooks and {len(edition.tests)} self-checks "
        f"to {edition.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
