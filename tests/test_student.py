"""The student and instructor editions (``make student``, ``make instructor``: course/).

One run of the generator into a temporary directory (both editions from one execution),
then: no solution text leaks into the
notebooks or the otter test files, and no expected value into the test files (the notebooks
keep the chapter's own text, which states a few answers, e.g. c0 in chapter 6); every listed exercise has
its answer cell, check cell and test file; each check accepts the right answer (for several
exercises computed here by an independent route, not by the book's code), rejects wrong ones
and blank ones with a message that does not show the answer; and every student notebook runs
under plain nbclient with blank answers, every check failing gracefully, while solutions
filled in at the end of two chapters make their checks pass. (Both executions draw the slider
figures statically, ROPE_LIB_STATIC=1 as in ``make book``: see course.student.KERNEL_ENV.)

Also: exercises and checks carry the book's numbers ("Exercise 6.5", read independently from
the built site's HTML); the notebooks show no raw MyST role; a new edition never replaces a
changed one; a self-check without its tests/ folder, or whose folder was replaced under a
running kernel, says what happened; and the instructor edition's answer key holds every
expected answer and its otter-grader archive grades a right and a wrong submission.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import mpmath
import nbformat
import numpy as np
import pytest
from otter.test_files.exception_test import ExceptionTestFile

from course import student as course_student
from course.answers import ANSWERS, Answer, Kind
from course.student import Edition, build, execute_notebooks

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("student")]

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_build" / "html"
#: Chapters whose notebooks get the book's own solutions appended as answers.
FILLED = ("03_sinusoidal", "05_rope_implementations")
#: The chapter whose autograder archive grades two submissions (one of the fastest to run).
GRADED = "03_sinusoidal"
#: MyST markup a reader of a notebook must not see raw.
RAW_ROLE = re.compile(r"\{(glue|glue:text|glue:md|cite|cite:p|cite:t|ref|numref|eq|prf:ref)\}`")
RAW_EQ_LABEL = re.compile(r"\$\$[ \t]*\([\w:.-]+\)[ \t]*$", re.M)


@pytest.fixture(scope="module")
def edition(tmp_path_factory: pytest.TempPathFactory) -> Edition:
    folder = tmp_path_factory.mktemp("edition")
    # the executions are kept (keyed on each notebook and rope_lib), so CI's `make student`
    # and `make instructor` after the tests reuse them instead of executing every chapter again
    return build(folder / "student", instructor=folder / "instructor")


def _label_chapter(edition: Edition) -> dict[str, str]:
    return {e.label: c.path.stem for c in edition.chapters for e in c.exercises}


def _notebook_text(path: Path) -> str:
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------- structure


def test_every_listed_exercise_has_answer_check_and_test_file(edition: Edition) -> None:
    where = _label_chapter(edition)
    assert set(edition.tests) == set(ANSWERS), "one test file per table entry"
    assert sorted(p.name for p in (edition.out / "tests").iterdir()) == sorted(
        f"{edition.numbers[label]}.py" for label in ANSWERS
    )
    for label, answer in ANSWERS.items():
        cells = nbformat.read(edition.notebooks[where[label]], as_version=4).cells
        sources = [c.source for c in cells]
        answer_at = [i for i, s in enumerate(sources) if s.startswith(f"{answer.name} = ...  #")]
        assert len(answer_at) == 1, f"{label}: one answer cell for {answer.name}"
        i = answer_at[0]
        number = edition.numbers[label]
        assert sources[i + 1] == f'grader.check("{number}")', f"{label}: check cell follows"
        assert cells[i - 1].cell_type == "markdown" and f"### {number}: " in sources[i - 1]
        assert edition.tests[label].name == f"{number}.py"
        assert f"\nname = {number!r}\n" in edition.tests[label].read_text()


def test_notebooks_are_plain_nbformat_with_one_init_cell(edition: Edition) -> None:
    assert sorted(edition.notebooks) == [c.path.stem for c in edition.chapters]
    assert len(edition.chapters) == 9
    for path in edition.notebooks.values():
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert notebook.nbformat == 4 and "jupytext" not in notebook.metadata
        code = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
        assert all(not notebook.cells[i].outputs for i in code), path.name
        init = [i for i in code if "grader = SelfCheck(" in notebook.cells[i].source]
        assert init == [code[1]], f"{path.name}: the init cell is the second code cell"
        assert 'tests_dir="tests"' in notebook.cells[code[1]].source
        lines = [line for i in code for line in notebook.cells[i].source.splitlines()]
        assert max(map(len, lines)) <= 75, f"{path.name}: a code line is wider than the page"


# --------------------------------------------------------------------------- leaks


def test_no_solution_text_leaks(edition: Edition) -> None:
    tests_text = "\n".join(p.read_text() for p in edition.tests.values())
    checked_lines = checked_sentences = 0
    for chapter in edition.chapters:
        student = _notebook_text(edition.notebooks[chapter.path.stem])
        student_lines = {line.strip() for line in (student + "\n" + tests_text).splitlines()}
        flat = _normalise(student + " " + tests_text)
        elsewhere = {line.strip() for line in chapter.outside_solutions().splitlines()}
        for marker in ("solution-start", "solution-end", "{solution"):
            assert marker not in student, f"{chapter.path.name}: {marker} left"
        for solution in chapter.solutions:
            for line in solution.body.splitlines():
                line = line.strip()
                if len(line) < 10 or line.startswith(("```", ":")) or line in elsewhere:
                    continue  # short, markup, or also in the chapter outside the solutions
                checked_lines += 1
                assert line not in student_lines, f"{solution.label}: line leaks: {line!r}"
            prose = re.sub(r"```\{code-cell\}.*?^```", " ", solution.body, flags=re.S | re.M)
            for sentence in re.split(r"(?<=[.?!:])\s+", _normalise(prose)):
                if len(sentence) >= 40:
                    checked_sentences += 1
                    assert sentence not in flat, f"{solution.label}: prose leaks: {sentence!r}"
        for exercise in chapter.exercises:  # the exercise text stays (roles written out)
            for piece in re.split(r"\{[\w:.-]+\}`[^`]*`|\$\$[ \t]*\([^)]*\)", exercise.body):
                piece = _normalise(piece)
                if len(piece) >= 10:
                    assert piece in _normalise(student), (exercise.label, piece)
    assert checked_lines > 300 and checked_sentences > 100  # the checks looked at something


def _spellings(value: Any) -> set[str]:
    """Ways the value could be written, kept to those with at least three digits."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        forms = {str(value), f"{value:,}", f"{value:_}"}
    else:
        forms = {repr(value), str(value)}
        forms |= {f"{value:.{n}g}" for n in range(3, 10)}
        forms |= {f"{value:.{n}f}" for n in range(1, 8)}
        forms |= {f"{value:.{n}e}" for n in range(2, 8)}
    return {f for f in forms if sum(ch.isdigit() for ch in f) >= 3}


def test_test_files_do_not_contain_the_expected_values(edition: Edition) -> None:
    searched = 0
    for label, values in edition.expected.items():
        # digests and salts are long hex strings: drop them, a digit run inside one is chance
        text = re.sub(r"[0-9a-f]{16,}", "#", edition.tests[label].read_text())
        for value in values:
            for form in _spellings(value):
                searched += 1
                assert form not in text, f"{label}: test file contains {form}"
    assert searched > 100


# --------------------------------------------------------------------------- verdicts


def _run(path: Path, env: dict[str, Any]) -> tuple[bool, str]:
    test = ExceptionTestFile.from_file(str(path))
    test.run(env)
    return test.passed_all, test.summary()


def _nudge(kind: Kind, value: Any, units: float) -> Any:
    """``value`` moved by ``units`` steps of its precision (bools and ints: changed)."""
    if kind.type == "bool":
        return not value
    if kind.type == "int":
        return value + (1 if units > 0 else -1)
    if kind.abs is not None:
        return value + units * kind.abs
    return value * (1 + kind.rel) ** units


def _as_answer(answer: Answer, values: tuple[Any, ...]) -> Any:
    return tuple(values) if len(answer.kinds) > 1 else values[0]


def test_checks_accept_right_reject_wrong_and_blank(edition: Edition) -> None:
    for label, answer in ANSWERS.items():
        path, expected = edition.tests[label], edition.expected[label]
        shown = {s for v in expected for s in _spellings(v)}
        for env in ({}, {answer.name: ...}):
            passed, message = _run(path, env)
            assert not passed and "no answer yet" in message, label
        passed, message = _run(path, {answer.name: _as_answer(answer, expected)})
        assert passed, f"{label}: the book's own answer fails:\n{message}"
        for i, kind in enumerate(answer.kinds):
            for units in (-3, 3):
                wrong = list(expected)
                wrong[i] = _nudge(kind, expected[i], units)
                passed, message = _run(path, {answer.name: _as_answer(answer, tuple(wrong))})
                assert not passed and "not right yet" in message, (label, i, units)
                assert not any(s in message for s in shown), f"{label}: message shows answer"
                if len(answer.kinds) > 1:
                    assert f"value(s) {i + 1} of" in message
            if kind.type == "float":  # within 0.4 of a precision step: accepted
                close = list(expected)
                close[i] = _nudge(kind, expected[i], 0.4)
                assert _run(path, {answer.name: _as_answer(answer, tuple(close))})[0], label


def test_checks_say_what_kind_of_value_is_wanted(edition: Edition) -> None:
    causal = ANSWERS["ex-sym-causal"]  # a tuple of two booleans
    passed, message = _run(edition.tests[causal.label], {causal.name: (1, 0)})
    assert not passed and "should be True or False" in message
    passed, message = _run(edition.tests[causal.label], {causal.name: (True,)})
    assert not passed and "should be a tuple of 2 values" in message
    counts = ANSWERS["ex-ropeimpl-4"]  # a tuple of two ints
    passed, message = _run(edition.tests[counts.label], {counts.name: (896.5, 512)})
    assert not passed and "should be an integer" in message
    passed, message = _run(edition.tests[counts.label], {counts.name: (..., 512)})
    assert not passed and "no answer yet" in message
    c0 = ANSWERS["ex-bb-5"]
    passed, message = _run(edition.tests[c0.label], {c0.name: "0.6"})
    assert not passed and "should be a number" in message


def _independent_answers() -> dict[str, tuple[Any, ...]]:
    """Answers worked out here from the exercise statements, without rope_lib or the book."""
    sixteen_theta = 1e4 ** (-np.arange(8) / 8)  # d_model = 16, b = 1e4
    x = np.arange(1, 5000)
    return {
        # 256 exact integers, 5 binades of 128 in [256, 8192), and 8192; spacing 2^(16-7)
        "ex-ropeimpl-4": (256 + 5 * 128 + 1, 2 ** (16 - 7)),
        # interleaved coordinate 2i sits at i, 2i + 1 at i + d/2
        "ex-ropeimpl-1": tuple(j for i in range(4) for j in (i, i + 4)),
        # s l / L - (s - 1) = s
        "ex-ce-3": (4096 * (2 * 4 - 1) // 4,),
        "ex-bb-5": (float(mpmath.findroot(mpmath.ci, 0.6)),),
        # |p_m - p_n|^2 = d_model - 2 g(1) at the nearest positions
        "ex-sinusoidal-2": (math.sqrt(16 - 2 * np.cos(sixteen_theta).sum()), 1),
        "ex-sinusoidal-1": (1.0, math.pi / 2),
        "ex-decay-2": (int(x[np.argmax(2 * np.cos(x) + 2 * np.cos(x / 100))]),),
        # lambda^(m+n) is a function of m - n only for lambda = 1
        "ex-rope-2": (1.0,),
        # 3 free constants: gamma, beta and the split of gamma between a and b
        "ex-tay-affine": (3,),
    }


@pytest.mark.parametrize("label", sorted(_independent_answers()))
def test_checks_accept_independently_derived_answers(edition: Edition, label: str) -> None:
    answer = ANSWERS[label]
    values = _independent_answers()[label]
    passed, message = _run(edition.tests[label], {answer.name: _as_answer(answer, values)})
    assert passed, f"{label}: the independently derived answer fails:\n{message}"


# --------------------------------------------------------------------------- execution


def _check_text(cell: nbformat.NotebookNode) -> str:
    return "\n".join(
        o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in cell.outputs
    )


def test_student_notebooks_run_with_blank_and_filled_answers(edition: Edition) -> None:
    where = _label_chapter(edition)
    notebooks = {stem: nbformat.read(p, as_version=4) for stem, p in edition.notebooks.items()}
    blank = {stem: len(nb.cells) for stem, nb in notebooks.items()}
    filled: list[tuple[str, str, bool]] = []  # (chapter, label, should pass)
    for chapter in edition.chapters:
        stem = chapter.path.stem
        if stem not in FILLED:
            continue
        for solution in chapter.solutions:
            answer = ANSWERS.get(solution.label)
            if answer is None:
                continue
            cells = notebooks[stem].cells
            cells += [nbformat.v4.new_code_cell(s) for s in solution.code_cells()]
            cells.append(nbformat.v4.new_code_cell(f"{answer.name} = ({answer.expr})"))
            check = f'grader.check("{edition.numbers[answer.label]}")'
            cells.append(nbformat.v4.new_code_cell(check))
            filled.append((stem, answer.label, True))
            wrong = list(edition.expected[answer.label])
            wrong[-1] = _nudge(answer.kinds[-1], wrong[-1], 3)
            cells.append(
                nbformat.v4.new_code_cell(f"{answer.name} = {_as_answer(answer, tuple(wrong))!r}")
            )
            cells.append(nbformat.v4.new_code_cell(check))
            filled.append((stem, answer.label, False))
    assert {s for s, _, _ in filled} == set(FILLED) and len(filled) >= 8

    # later chapters take longest: start them first so the two kernels finish together
    jobs = [(notebooks[stem], edition.out) for stem in sorted(notebooks, reverse=True)]
    execute_notebooks(jobs, parallel=2)

    for stem, notebook in notebooks.items():
        errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
        assert not [o for o in errors if o.output_type == "error"], stem
        checks = [
            (i, c)
            for i, c in enumerate(notebook.cells)
            if c.cell_type == "code" and c.source.startswith("grader.check(")
        ]
        blank_checks = [(i, c) for i, c in checks if i < blank[stem]]
        assert len(blank_checks) == sum(1 for label in ANSWERS if where[label] == stem)
        for _, cell in blank_checks:
            text = _check_text(cell)
            assert "Test case failed" in text and "no answer yet" in text, (stem, text)
        later = [_check_text(c) for i, c in checks if i >= blank[stem]]
        expected = [(label, ok) for s, label, ok in filled if s == stem]
        assert len(later) == len(expected)
        for text, (label, ok) in zip(later, expected, strict=True):
            if ok:
                assert "All test cases passed" in text, f"{label}: solution fails:\n{text}"
            else:
                assert "not right yet" in text, f"{label}: wrong answer passes:\n{text}"


def test_docs_count_the_checked_exercises(edition: Edition) -> None:
    """The teaching page and the README state how many exercises have a self-check."""
    total = sum(len(c.exercises) for c in edition.chapters)
    root = Path(__file__).resolve().parents[1]
    teaching = (root / "chapters" / "teaching.md").read_text()
    assert f"The {len(ANSWERS)} exercises (of {total})" in teaching
    readme = (root / "README.md").read_text()
    assert f"each of the {len(ANSWERS)} exercises with a numeric" in readme


# --------------------------------------------------------------------------- numbers, roles


def _site_numbers() -> dict[str, str]:
    """Exercise label -> its number as the built site's HTML shows it ("Exercise 6.5")."""
    found = {}
    for page in sorted((SITE / "chapters").glob("0*.html")):
        for label, number in re.findall(
            r'<div class="exercise admonition" id="([^"]+)">\s*<p class="admonition-title">'
            r'<span class="caption-number">(Exercise [0-9.]+) </span>',
            page.read_text(encoding="utf-8"),
        ):
            found[label] = number
    return found


def test_exercises_and_checks_carry_the_sites_numbers(edition: Edition) -> None:
    site = _site_numbers()
    labels = [e.label for c in edition.chapters for e in c.exercises]
    assert len(labels) == len(set(labels)), labels  # one check id per exercise
    assert set(labels) == set(site), sorted(set(labels) ^ set(site))
    assert {label: edition.numbers[label] for label in labels} == {
        label: site[label] for label in labels
    }
    for chapter in edition.chapters:  # every exercise, numbered, in the book's order
        text = _notebook_text(edition.notebooks[chapter.path.stem])
        headings = re.findall(r"^### (Exercise [0-9.]+): ", text, re.M)
        assert headings == [site[e.label] for e in chapter.exercises], chapter.path.name


def test_notebooks_show_no_raw_roles(edition: Edition) -> None:
    solutions = edition.instructor / "solutions"
    notebooks = list(edition.notebooks.values()) + sorted(solutions.glob("*.ipynb"))
    assert len(notebooks) == 18
    for path in notebooks:
        notebook = nbformat.read(path, as_version=4)
        markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
        raw = [m.group(0) for text in markdown for m in RAW_ROLE.finditer(text)]
        raw += [m.group(0) for text in markdown for m in RAW_EQ_LABEL.finditer(text)]
        assert not raw, f"{path.name}: raw MyST roles {raw[:5]}"
        # the chapter's JupyterLab note keeps only its front matter (exercise numbering)
        first = markdown[0]
        assert first.startswith("---\nnumbering:") and first.endswith("---"), first[:200]
    decay = _notebook_text(edition.notebooks["06_decay"])
    assert "\\tag{6.1}" in decay  # an equation's label became its number in the book


# --------------------------------------------------------------------------- never delete


def _fake_edition(folder: Path) -> None:
    def write(target: Path) -> None:
        (target / "tests").mkdir()
        (target / "01_symmetry.ipynb").write_text("{}")
        (target / "tests" / "Exercise 1.2.py").write_text("name = 'Exercise 1.2'\n")

    course_student._write_folder(folder, write, course_student.MARKER)


def test_a_changed_edition_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "student"
    assert course_student.choose_out(out) == (out, "")
    _fake_edition(out)
    assert course_student.choose_out(out) == (out, "")  # untouched: may be replaced
    (out / ".OTTER_LOG").write_bytes(b"a student ran a check")
    target, note = course_student.choose_out(out)
    assert target == tmp_path / "student-2"
    assert "changed since it was written" in note and str(target) in note
    _fake_edition(target)  # the next run writes beside both, unless student-2 is untouched
    assert course_student.choose_out(out)[0] == target
    (target / "01_symmetry.ipynb").write_text('{"answers": 1}')
    assert course_student.choose_out(out)[0] == tmp_path / "student-3"
    assert (out / ".OTTER_LOG").read_bytes() == b"a student ran a check"
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("x")
    target, note = course_student.choose_out(foreign)
    assert target == tmp_path / "notes-2" and "not a student edition" in note


@pytest.mark.parametrize("change", ["edit", "remove"])
def test_write_student_keeps_a_changed_edition(
    edition: Edition, tmp_path: Path, change: str
) -> None:
    """The real writer: a saved answer survives a second run, which writes beside it."""
    out = tmp_path / "student"
    shutil.copytree(edition.out, out)
    notebook = out / "03_sinusoidal.ipynb"
    if change == "edit":
        notebook.write_text(notebook.read_text().replace("= ...  #", "= 1.0  #", 1))
    else:
        (out / "tests" / "Exercise 3.1.py").unlink()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    again = course_student.write_student(edition.prepared, out, log=lambda s: None)
    assert again.out == tmp_path / "student-2" and again.note
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    written = [f"{stem}.ipynb" for stem in edition.notebooks] + ["tests", ".student-edition"]
    assert sorted(p.name for p in again.out.iterdir()) == sorted(written)


# --------------------------------------------------------------------------- missing tests/


def test_a_check_without_tests_says_what_to_do(edition: Edition, tmp_path: Path) -> None:
    """A notebook moved away from tests/, and one whose folder was replaced under its kernel."""
    from nbclient import NotebookClient

    moved = tmp_path / "moved"
    moved.mkdir()
    init = course_student.INIT
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(init),
            nbformat.v4.new_code_cell('grader.check("Exercise 3.1")'),
        ]
    )
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, allow_errors=True)
    client.resources = {"metadata": {"path": str(moved)}}
    client.execute()
    (error,) = [o for o in notebook.cells[1].outputs if o.output_type == "error"]
    assert error.ename == "FileNotFoundError", error
    assert "tests/ next to this notebook" in error.evalue and str(moved) in error.evalue

    # the folder replaced while the kernel runs: same path, new inode
    folder = tmp_path / "edition"
    shutil.copytree(edition.out, folder)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(init)])
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, allow_errors=True)
    client.resources = {"metadata": {"path": str(folder)}}
    with client.setup_kernel():
        client.execute_cell(notebook.cells[0], 0)
        shutil.rmtree(folder)
        shutil.copytree(edition.out, folder)
        check = nbformat.v4.new_code_cell('grader.check("Exercise 3.1")')
        notebook.cells.append(check)
        client.execute_cell(check, 1)
    (error,) = [o for o in check.outputs if o.output_type == "error"]
    assert error.ename == "RuntimeError", error
    assert "deleted or replaced while its kernel was running" in error.evalue
    assert "restart the kernel" in error.evalue
    assert "read-only" not in error.evalue


# --------------------------------------------------------------------------- instructor


def test_instructor_edition_has_solutions_and_the_answer_key(edition: Edition) -> None:
    folder = edition.instructor
    key = json.loads((folder / "answer-key.json").read_text())
    assert sorted(row["label"] for row in key) == sorted(ANSWERS)
    for row in key:
        values = edition.expected[row["label"]]
        assert row["exercise"] == edition.numbers[row["label"]]
        assert row["expected"] == (list(values) if len(values) > 1 else values[0])
        assert row["variable"] == ANSWERS[row["label"]].name
    markdown = (folder / "answer-key.md").read_text()
    assert all(f"| {edition.numbers[label]} | `{label}` |" in markdown for label in ANSWERS)
    for chapter in edition.chapters:
        notebook = nbformat.read(folder / "solutions" / f"{chapter.path.stem}.ipynb", 4)
        code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
        for solution in chapter.solutions:  # every solution's code is there, executed
            for source in solution.code_cells():
                assert source.strip() in code, (chapter.path.name, solution.label)
        assert "_course_probe" not in code
        assert any(c.outputs for c in notebook.cells if c.cell_type == "code")
    archives = sorted((folder / "autograder").glob("*.zip"))
    names = []
    for archive in archives:
        with zipfile.ZipFile(archive) as zf:
            files = zf.namelist()
            assert {"run_autograder", "setup.sh", "environment.yml", "otter_config.json"} <= set(
                files
            ), archive.name
            assert "files/rope_lib/__init__.py" in files
            assert "export ROPE_LIB_STATIC=1" in zf.read("run_autograder").decode()
            assert "python=3.11" in zf.read("environment.yml").decode()
            names += [Path(f).stem for f in files if f.startswith("tests/")]
    assert sorted(names) == sorted(edition.numbers[label] for label in ANSWERS)


def _submission(edition: Edition, folder: Path, wrong: set[str]) -> Path:
    """The student notebook of GRADED with every answer filled in (``wrong`` ones off)."""
    notebook = nbformat.read(edition.notebooks[GRADED], as_version=4)
    by_name = {a.name: a for a in ANSWERS.values()}
    for cell in notebook.cells:
        name = cell.source.split(" = ...  #", 1)[0]
        if cell.cell_type == "code" and name in by_name and " = ...  #" in cell.source:
            answer = by_name[name]
            values = list(edition.expected[answer.label])
            if answer.label in wrong:
                values[-1] = _nudge(answer.kinds[-1], values[-1], 3)
            cell.source = f"{name} = {_as_answer(answer, tuple(values))!r}"
    folder.mkdir()
    path = folder / f"{GRADED}.ipynb"
    nbformat.write(notebook, path)
    return path


def test_autograder_grades_right_and_wrong_submissions(edition: Edition, tmp_path: Path) -> None:
    """otter's no-Docker route (`otter run`), as the teaching page says, on two submissions."""
    archive = edition.instructor / "autograder" / f"{GRADED}.zip"
    chapter = next(c for c in edition.chapters if c.path.stem == GRADED)
    labels = [s.label for s in chapter.solutions if s.label in ANSWERS]
    assert len(labels) >= 2
    otter = Path(sys.executable).with_name("otter")
    for case, wrong in (("right", set()), ("wrong", {labels[0]})):
        submission = _submission(edition, tmp_path / case, wrong)
        out = tmp_path / f"{case}-results"
        out.mkdir()
        result = subprocess.run(
            [str(otter), "run", "-a", str(archive), "-o", str(out), str(submission)],
            env=os.environ | {"ROPE_LIB_STATIC": "1"},
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        tests = json.loads((out / "results.json").read_text())["tests"]
        scores = {t["name"]: t["score"] for t in tests if t["name"].startswith("Exercise")}
        expected = {edition.numbers[label]: 0.0 if label in wrong else 1.0 for label in labels}
        assert scores == expected, (case, scores, result.stdout[-2000:])
