"""What the README and the teaching page promise, checked against the repository.

* Every ``make`` command the README names (a target, with its options) is run by ``.ci/run``
  on a fresh clone, in the quick variant where the README gives one; the commands CI cannot
  run are listed here with the reason.
* The README's topic list has one entry per chapter.
* The landing page and the teaching page link the chapters with Markdown links whose text
  is the chapter's title (they render in JupyterLab's Markdown preview too, where a
  ``{ref}`` role shows its label), and the teaching page's homework names each exercise by
  its number in the built site.
* The teaching page covers what issue 19 found missing: Binder and its launch buttons, the
  Python version, the CPU build of PyTorch, the instructor edition and the autograder, and
  a JupyterHub start script; ``tools/hub-user-start`` gives each user the workspace.
* ``make experiment SMOKE=1`` writes nothing under ``rope_lib/data``, and ``make bench``'s
  minimum-base table runs with the budget that computes the shipped table.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
TEACHING = (ROOT / "chapters" / "teaching.md").read_text(encoding="utf-8")
INDEX = (ROOT / "index.md").read_text(encoding="utf-8")
CHAPTERS = sorted((ROOT / "chapters").glob("0*.md"))

#: README commands CI does not run as written, and why.
NOT_IN_CI = {
    # needs PyTorch's own index, which the build machines cannot reach (their registry
    # serves the same CPU build, so `make book` and `make lab` in CI are this command)
    "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make book",
    "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make lab",
    # the full sweeps, benchmarks and mutation run take hours and tens of minutes: CI
    # runs `make experiment SMOKE=1`, `make bench QUICK=1` and `make mutation QUICK=1`
    "make experiment",
    "make bench",
    "make mutation",
    # another port: CI starts `make lab LAB_PORT=<a free port>`
    "make lab LAB_PORT=8890",
}


def _readme_commands() -> set[str]:
    """Every code span of the README that is a make command (with its variables)."""
    spans = re.findall(r"`([^`\n]+)`", README)
    commands = set()
    for span in spans:
        span = span.strip()
        if re.fullmatch(r"([A-Z_]+=\S+ )*make [a-z][\w-]*( [A-Z_]+=\S+)*", span):
            commands.add(span)
    return commands


def _ci_commands() -> set[str]:
    """The make commands .ci/run runs (each on its own line, maybe after `step` or `&`)."""
    found = set()
    for line in CI.splitlines():
        line = line.split("#", 1)[0]
        for match in re.finditer(
            r"(?:^|[\s'\"(])((?:[A-Z_]+=\S+ )*make [a-z][\w-]*(?: [A-Z_]+=\S+)*)", line
        ):
            found.add(match.group(1).strip())
    return found


def test_readme_names_the_targets_it_documents() -> None:
    commands = _readme_commands()
    targets = {re.search(r"make ([a-z][\w-]*)", c).group(1) for c in commands}
    expected = {
        "book", "test", "serve", "lab", "student", "instructor", "experiment", "bench",
        "lint", "clean",
    }  # fmt: skip
    assert expected <= targets, sorted(expected - targets)
    makefile = (ROOT / "Makefile").read_text()
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M), f"README names make {target}"


def _without_port(command: str) -> str:
    """The command without its port (CI picks a free one)."""
    return re.sub(r"\s*\b(?:LAB_)?PORT=\S+", "", command).strip()


def test_ci_runs_every_readme_command() -> None:
    ci = {_without_port(c) for c in _ci_commands()}
    missing = []
    for command in sorted(_readme_commands() - NOT_IN_CI):
        if _without_port(command) not in ci:
            missing.append(command)
    assert not missing, f".ci/run does not run {missing}"
    for quick in ("make bench QUICK=1", "make experiment SMOKE=1", "make mutation QUICK=1"):
        assert quick in _readme_commands() and quick in ci, quick
    assert {"make lab", "make serve"} <= ci  # started and stopped
    assert "git status --porcelain" in CI  # and the commands leave the clone clean


def _title(path: Path) -> str:
    return re.search(r"^# (.+)$", path.read_text(encoding="utf-8"), re.M).group(1)


def test_readme_topic_list_has_one_entry_per_chapter() -> None:
    intro = README.split("## ", 1)[0]
    items = re.findall(r"^(\d+)\. ", intro, re.M)
    assert items == [str(i) for i in range(1, len(CHAPTERS) + 1)], items
    assert len(CHAPTERS) == 9


def test_readme_says_why_not_colab() -> None:
    assert re.search(r"Colab.{0,200}\.md", README, re.S), "README: a sentence on why not Colab"


@pytest.mark.parametrize(("page", "text"), [("index.md", INDEX), ("teaching.md", TEACHING)])
def test_chapter_links_are_markdown_links_with_the_chapter_title(page: str, text: str) -> None:
    here = ROOT if page == "index.md" else ROOT / "chapters"
    links = re.findall(r"\[([^\]]+)\]\(((?:chapters/)?[\w-]+\.md)\)", text)
    assert links, page
    for shown, target in links:
        assert shown == _title(here / target), (page, shown, target)
    linked = {Path(t).name for _, t in links}
    assert {p.name for p in CHAPTERS} <= linked, page
    if page == "index.md":  # the landing page uses no MyST role: it renders anywhere
        assert not re.search(r"\{[\w:]+\}`", text), re.findall(r"\{[\w:]+\}`[^`]*`", text)
        assert "```bash" not in text  # Jupytext would make it a code cell


def test_teaching_homework_uses_the_sites_exercise_numbers() -> None:
    site = ROOT / "_build" / "html" / "chapters"
    if not site.is_dir():
        pytest.skip("the built site is missing: run `make book` first")
    numbers = {}
    for page in site.glob("0*.html"):
        numbers.update(
            dict(
                re.findall(
                    r'<div class="exercise admonition" id="([^"]+)">\s*<p class="admonition-'
                    r'title"><span class="caption-number">(Exercise [0-9.]+) </span>',
                    page.read_text(encoding="utf-8"),
                )
            )
        )
    homework = re.findall(r"\{ref\}`(Exercise [0-9.]+) <([\w-]+)>`", TEACHING)
    assert len(homework) >= 15
    wrong = [
        (shown, label, numbers.get(label))
        for shown, label in homework
        if numbers.get(label) != shown
    ]
    assert not wrong, wrong
    assert not re.search(r"\{ref\}`ex-", TEACHING)  # every exercise named by its number


def test_teaching_page_covers_running_and_grading() -> None:
    for needed in (
        "Binder",
        "repository.url",
        "Python 3.11",
        "https://download.pytorch.org/whl/cpu",
        "make instructor",
        "autograder",
        "otter run",
        "tools/hub-user-start",
        "lifecycleHooks.postStart",
        "Colab",
    ):
        assert needed in TEACHING, needed
    assert "necessary but not sufficient" not in TEACHING
    assert "hypothesis" in TEACHING
    assert re.search(r"chapters 1, 5 and 7.{0,200}chapter 9", TEACHING.replace("\n", " "))


def test_hub_start_script_gives_every_user_the_workspace(tmp_path: Path) -> None:
    script = ROOT / "tools" / "hub-user-start"
    assert os.access(script, os.X_OK)
    for user in ("ada", "alan"):
        home = tmp_path / user
        env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
        env |= {"HOME": str(home), "PYTHON": sys.executable}
        result = subprocess.run([str(script)], env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        (workspace,) = (home / ".jupyter" / "lab" / "workspaces").glob("*.jupyterlab-workspace")
        assert json.loads(workspace.read_text())["metadata"]["id"] == "/rope-book"


def test_experiment_smoke_writes_only_under_build(monkeypatch: pytest.MonkeyPatch) -> None:
    from rope_lib.experiments import cli

    calls = []

    def record(sweeps, **kw):
        calls.append(sweeps)
        return [{"runs": []} for _ in sweeps]

    monkeypatch.setattr(cli, "run_sweeps", record)
    assert cli.main(["--smoke", "--no-progress"]) == 0
    (sweeps,) = calls
    assert [(s.experiment.name, s.config.name) for s in sweeps] == [
        ("recall", "smoke"),
        ("needle", "smoke"),
    ]
    for sweep in sweeps:
        assert sweep.output.is_relative_to(ROOT / "_build"), sweep.output
        assert all(run.path.is_relative_to(ROOT / "_build") for run in sweep.runs)
    makefile = (ROOT / "Makefile").read_text()
    assert "$(PY) -m rope_lib.experiments $(if $(SMOKE),--smoke)" in makefile
