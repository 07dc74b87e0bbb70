"""The student edition (``make student``, course/student.py).

One run of the generator into a temporary directory, then: no solution text leaks into the
notebooks or the otter test files, and no expected value into the test files (the notebooks
keep the chapter's own text, which states a few answers, e.g. c0 in chapter 6); every listed exercise has
its answer cell, check cell and test file; each check accepts the right answer (for several
exercises computed here by an independent route, not by the book's code), rejects wrong ones
and blank ones with a message that does not show the answer; and every student notebook runs
under plain nbclient with blank answers, every check failing gracefully, while solutions
filled in at the end of two chapters make their checks pass. (Both executions draw the slider
figures statically, ROPE_LIB_STATIC=1 as in ``make book``: see course.student.KERNEL_ENV.)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import mpmath
import nbformat
import numpy as np
import pytest
from otter.test_files.exception_test import ExceptionTestFile

from course.answers import ANSWERS, Answer, Kind
from course.student import Edition, build, execute_notebooks

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("student")]

#: Chapters whose notebooks get the book's own solutions appended as answers.
FILLED = ("03_sinusoidal", "05_rope_implementations")


@pytest.fixture(scope="module")
def edition(tmp_path_factory: pytest.TempPathFactory) -> Edition:
    return build(tmp_path_factory.mktemp("edition") / "student")


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
        f"{label}.py" for label in ANSWERS
    )
    for label, answer in ANSWERS.items():
        cells = nbformat.read(edition.notebooks[where[label]], as_version=4).cells
        sources = [c.source for c in cells]
        answer_at = [i for i, s in enumerate(sources) if s.startswith(f"{answer.name} = ...  #")]
        assert len(answer_at) == 1, f"{label}: one answer cell for {answer.name}"
        i = answer_at[0]
        assert sources[i + 1] == f'grader.check("{label}")', f"{label}: check cell follows"
        assert cells[i - 1].cell_type == "markdown" and "### Exercise:" in sources[i - 1]


def test_notebooks_are_plain_nbformat_with_one_init_cell(edition: Edition) -> None:
    assert sorted(edition.notebooks) == [c.path.stem for c in edition.chapters]
    assert len(edition.chapters) == 9
    for path in edition.notebooks.values():
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert notebook.nbformat == 4 and "jupytext" not in notebook.metadata
        code = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"]
        assert all(not notebook.cells[i].outputs for i in code), path.name
        init = [i for i in code if "otter.Notebook(" in notebook.cells[i].source]
        assert init == [code[1]], f"{path.name}: the init cell is the second code cell"
        assert 'tests_dir="tests"' in notebook.cells[code[1]].source


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
        for exercise in chapter.exercises:  # the exercise text stays
            assert _normalise(exercise.body) in _normalise(student), exercise.label
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
            cells.append(nbformat.v4.new_code_cell(f'grader.check("{answer.label}")'))
            filled.append((stem, answer.label, True))
            wrong = list(edition.expected[answer.label])
            wrong[-1] = _nudge(answer.kinds[-1], wrong[-1], 3)
            cells.append(
                nbformat.v4.new_code_cell(f"{answer.name} = {_as_answer(answer, tuple(wrong))!r}")
            )
            cells.append(nbformat.v4.new_code_cell(f'grader.check("{answer.label}")'))
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
