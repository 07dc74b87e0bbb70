"""The book build must fail when a chapter raises.

Jupyter Book 1 exits 0 on a failing notebook unless told otherwise. This test
builds two throwaway books with the project's own `_config.yml` and the
Makefile's own build recipe: one whose only chapter raises (the build must
fail and name the error) and an identical one that does not (it must pass, so
the failure is the raised error and nothing else).
"""

from __future__ import annotations

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
