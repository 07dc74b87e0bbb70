"""The book build must fail when a chapter raises, and its downloads keep their outputs.

Jupyter Book 1 exits 0 on a failing notebook unless told otherwise. This test
builds two throwaway books with the project's own `_config.yml` and the
Makefile's own build recipe: one whose only chapter raises (the build must
fail and name the error) and an identical one that does not (it must pass, so
the failure is the raised error and nothing else).

The project's `_config.yml` executes through the cache (`execute_notebooks: cache`), and
MyST-NB 1.4 writes a page taken from the cache without outputs: a third throwaway book is
built, one chapter's prose edited (its code unchanged, so it comes from the cache), and
built again, as `make book` does after an edit; every chapter's `.ipynb` download must
still carry its outputs, with its MyST roles written out.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .bookfiles import MYST_HEADER

ROOT = Path(__file__).resolve().parents[1]


def _make_book(folder: Path, cell: str) -> None:
    folder.mkdir()
    shutil.copy(ROOT / "_config.yml", folder / "_config.yml")
    shutil.copy(ROOT / "references.bib", folder / "references.bib")
    shutil.copytree(ROOT / "_ext", folder / "_ext")
    (folder / "_assets").mkdir()
    shutil.copy(ROOT / "_assets" / "favicon.png", folder / "_assets" / "favicon.png")
    (folder / "_toc.yml").write_text("format: jb-book\nroot: index\n")
    (folder / "index.md").write_text(
        MYST_HEADER + "# A throwaway book\n\nCites {cite}`vaswani2017attention`.\n\n"
        "```{code-cell} ipython3\n" + cell + "\n```\n\n```{bibliography}\n```\n"
    )


def _build(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(folder),
            "-f",
            str(ROOT / "Makefile"),
            "jb-build",
            f"VENV={ROOT / '.venv'}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
@pytest.mark.xdist_group("build")
def test_build_fails_on_a_raising_cell(tmp_path: Path) -> None:
    _make_book(tmp_path / "bad", 'raise RuntimeError("deliberate failure in a chapter")')
    result = _build(tmp_path / "bad")
    assert result.returncode != 0, "a chapter raised but the build exited 0"
    assert "deliberate failure in a chapter" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("build")
def test_same_book_without_the_error_builds(tmp_path: Path) -> None:
    _make_book(tmp_path / "good", "print(1 + 1)")
    result = _build(tmp_path / "good")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "good" / "_build" / "html" / "index.html").exists()


PAGE = (
    MYST_HEADER
    + """
({label})=
# Chapter {label}

{prose} The answer is {{glue:text}}`answer_{label}:.1f`; see {{ref}}`{other}` and
{{cite}}`vaswani2017attention`.

```{{code-cell}} ipython3
from myst_nb import glue

print("output of {label}")
glue("answer_{label}", 6 * 7, display=False)
```
"""
)


def _two_chapter_book(folder: Path) -> None:
    _make_book(folder, "print('landing')")
    (folder / "_toc.yml").write_text(
        "format: jb-book\nroot: index\nchapters:\n  - file: one\n  - file: two\n"
    )
    for label, other in (("one", "two"), ("two", "one")):
        (folder / f"{label}.md").write_text(
            PAGE.format(label=label, other=other, prose="First words.")
        )


def _download(folder: Path, page: str) -> dict:
    return json.loads((folder / "_build" / "html" / "_sources" / f"{page}.ipynb").read_text())


@pytest.mark.slow
@pytest.mark.xdist_group("build")
def test_downloads_keep_their_outputs_after_an_incremental_build(tmp_path: Path) -> None:
    book = tmp_path / "book"
    _two_chapter_book(book)
    assert _build(book).returncode == 0
    # edit one chapter's prose only: its code is in the execution cache
    text = (book / "one.md").read_text()
    (book / "one.md").write_text(text.replace("First words.", "Edited words."))
    result = _build(book)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Using cached notebook" in result.stdout + result.stderr  # the path of issue 19
    for page in ("index", "one", "two"):
        notebook = _download(book, page)
        code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        outputs = [o for c in code for o in c["outputs"]]
        assert outputs, f"{page}.ipynb has no outputs after an incremental build"
        assert not [o for o in outputs if o.get("metadata", {}).get("scrapbook")], page
    one = "\n".join("".join(c["source"]) for c in _download(book, "one")["cells"])
    assert "Edited words." in one
    prose = " ".join(one.replace("\\[", "[").replace("\\]", "]").split())
    assert "The answer is 42.0; see Chapter two and [Vaswani et al., 2017]" in prose, prose
