"""The Binder environment (``binder/``) and the chapters' ``.ipynb`` downloads.

What Binder would do, done here as far as this machine allows:

1. ``binder/requirements.txt`` names PyTorch's CPU wheel index and the CPU build of
   the root pin, and takes every other pin from the root ``requirements.txt``.
2. A FRESH virtual environment under ``_build/`` (``python -m venv``, not the project's
   ``.venv``) installs from it with pip, from the repository root as repo2docker does.
   This machine reaches only its own package registry, not PyTorch's index, so the
   install drops the one ``--extra-index-url`` line and nothing else (that registry
   serves the same ``torch 2.13.0+cpu`` wheel).  ``--no-compile`` skips writing
   ``.pyc`` files, which only saves time.
3. ``binder/postBuild`` runs with ``NB_PYTHON_PREFIX`` at that environment; the
   settings file it writes must be the one that environment's JupyterLab reads, and
   the viewer it names must be one Jupytext's installed extension provides.
4. Every chapter's downloaded ``.ipynb`` (from ``_build/html``, so ``make book``
   first) is copied to a temporary folder and executed in that environment by plain
   nbclient, in a process that never imports Jupytext; any error output fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .bookfiles import hrefs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import binder_env  # noqa: E402  (tools/binder_env.py: makes the environment, as make does)

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
BUILD = ROOT / "_build"
SITE = BUILD / "html"
VENV = BUILD / "binder-venv"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

pytestmark = pytest.mark.xdist_group("binder")


def _lines(path: Path) -> list[str]:
    """Requirement-file lines without comments and blanks."""
    stripped = (line.split(" #", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in stripped if line and not line.startswith("#")]


def _chapters() -> list[Path]:
    """The chapter notebooks: MyST Markdown files with a Jupytext header."""
    return sorted(
        p for p in (ROOT / "chapters").glob("*.md") if p.read_text().startswith("---\njupytext:")
    )


def _downloads() -> list[Path]:
    missing = [
        c.stem
        for c in _chapters()
        if not (SITE / "_sources/chapters" / f"{c.stem}.ipynb").is_file()
    ]
    assert not missing, f"no downloaded .ipynb in {SITE} for {missing}: run `make book` first"
    return [SITE / "_sources/chapters" / f"{c.stem}.ipynb" for c in _chapters()]


# --- 1. the requirements ---------------------------------------------------------------


def test_binder_requirements_take_the_cpu_build_and_the_root_pins() -> None:
    lines = _lines(BINDER / "requirements.txt")
    index_options = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")
    indexes = [line for line in lines if line.split()[0].split("=")[0] in index_options]
    assert indexes == [f"--extra-index-url {CPU_INDEX}"]
    assert "-r ../requirements.txt" in lines
    pins = [Requirement(line) for line in lines if not line.startswith("-")]
    # one source of pins, the root file; binder adds only the CPU torch and the notebook
    # release for the pinned JupyterLab (repo2docker's base environment has notebook 7.4.7)
    assert [str(p) for p in pins] == ["torch==2.13.0+cpu", "notebook==7.6.5"]
    root_names = {
        Requirement(line).name for line in _lines(ROOT / "requirements.txt") if line[0] != "-"
    }
    assert "notebook" not in root_names

    (root_torch,) = [
        Requirement(line)
        for line in _lines(ROOT / "requirements.txt")
        if not line.startswith("-") and Requirement(line).name == "torch"
    ]
    cpu = Version(str(pins[0].specifier).removeprefix("=="))
    assert cpu.local == "cpu"
    assert cpu.public == str(root_torch.specifier).removeprefix("==")
    # the root pin accepts the CPU build, so the two lines resolve to one torch
    assert root_torch.specifier.contains(cpu)


def test_binder_folder_holds_the_whole_configuration() -> None:
    # repo2docker ignores root-level configuration once binder/ exists
    assert not (ROOT / "postBuild").exists() and not (ROOT / "runtime.txt").exists()
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    assert os.access(BINDER / "postBuild", os.X_OK)


def test_postbuild_names_what_it_needs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NB_PYTHON_PREFIX"}
    unset = subprocess.run(
        ["bash", str(BINDER / "postBuild")], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert unset.returncode != 0 and "NB_PYTHON_PREFIX" in unset.stderr
    env["NB_PYTHON_PREFIX"] = str(tmp_path)
    empty = subprocess.run(
        ["bash", str(BINDER / "postBuild")], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert empty.returncode != 0 and "Jupytext's JupyterLab extension" in empty.stderr


def test_postbuild_merges_the_lab_settings_into_existing_overrides(tmp_path: Path) -> None:
    """Into a stand-in prefix: the book's viewer settings land, another override stays."""
    (tmp_path / "bin").mkdir()
    # a stand-in for the environment's python: this one (a symlink would lose the venv)
    (tmp_path / "bin" / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (tmp_path / "bin" / "python").chmod(0o755)
    (tmp_path / "share/jupyter/labextensions/jupyterlab-jupytext").mkdir(parents=True)
    settings = tmp_path / "share/jupyter/lab/settings"
    settings.mkdir(parents=True)
    theme = {"@jupyterlab/apputils-extension:themes": {"theme": "JupyterLab Dark"}}
    (settings / "overrides.json").write_text(json.dumps(theme))
    config = tmp_path / "jupyter-config"  # where the landing workspace goes, not ~/.jupyter
    env = os.environ | {"NB_PYTHON_PREFIX": str(tmp_path), "JUPYTER_CONFIG_DIR": str(config)}
    result = subprocess.run(
        ["bash", str(BINDER / "postBuild")], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    (workspace,) = (config / "lab" / "workspaces").glob("*.jupyterlab-workspace")
    assert json.loads(workspace.read_text())["metadata"]["id"] == "/rope-book"
    merged = json.loads((settings / "overrides.json").read_text())
    assert merged["@jupyterlab/apputils-extension:themes"] == {"theme": "JupyterLab Dark"}
    viewers = merged["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == "Jupytext Notebook"


# --- the downloads in the built site -----------------------------------------------------


@pytest.mark.parametrize("chapter", _chapters(), ids=lambda p: p.stem)
def test_chapter_page_offers_its_executed_notebook(chapter: Path) -> None:
    page = SITE / "chapters" / f"{chapter.stem}.html"
    links = hrefs(page)
    assert f"../_sources/chapters/{chapter.stem}.ipynb" in links
    assert f"../_sources/chapters/{chapter.stem}.md" in links

    notebook = nbformat.read(SITE / "_sources/chapters" / f"{chapter.stem}.ipynb", as_version=4)
    assert notebook.nbformat == 4
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    # the same code as the chapter's source (read independently, by Jupytext) ...
    source = jupytext.read(chapter)
    code = [c.source for c in source.cells if c.cell_type == "code"]
    assert [c.source for c in notebook.cells if c.cell_type == "code"] == code
    # ... and executed: code cells carry outputs
    assert any(c.outputs for c in notebook.cells if c.cell_type == "code")
    # read as the book reads: no raw MyST role, no equation label in the Markdown
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    raw = re.findall(r"\{(?:glue|glue:text|glue:md|cite|ref|numref|eq|prf:ref)\}`[^`]*`", markdown)
    assert not raw, f"{chapter.stem}.ipynb shows raw roles: {raw[:5]}"
    assert not re.search(r"\$\$[ \t]*\([\w:.-]+\)[ \t]*$", markdown, re.M)
    assert "Reading this chapter in JupyterLab" not in markdown  # the note is for the .md


# --- 2-4. a fresh environment from binder/ ----------------------------------------------


def _clean_env(home: Path) -> dict[str, str]:
    """The environment without the project venv, and with Jupyter's user folders empty."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH", "ROPE_LIB_STATIC") and not k.startswith("JUPYTER")
    }
    for name in ("HOME", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        env[name] = str(home / name.lower())
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # static slider figures, as in `make book`: nbclient can stall after a cell that opens
    # live ipywidgets (jupyter/nbclient#312); the live path is tested in test_lab.py
    env["ROPE_LIB_STATIC"] = "1"
    return env


@pytest.fixture(scope="module")
def binder_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The home folder binder/postBuild runs in (it writes the landing workspace there)."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def binder_venv(tmp_path_factory: pytest.TempPathFactory, binder_home: Path) -> Path:
    """The Binder environment (tools/binder_env.py: repo2docker's base Jupyter packages,
    then binder/requirements.txt, in a fresh venv), remade when its sources changed, then
    binder/postBuild run.  `make test` makes the environment while the book builds."""
    if not binder_env.is_current(VENV):
        binder_env.make(VENV)
    env = _clean_env(binder_home) | {"NB_PYTHON_PREFIX": str(VENV)}
    post = subprocess.run(
        ["bash", str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert post.returncode == 0, post.stdout + post.stderr
    return VENV


def _venv_python(code: str, home: Path) -> str:
    result = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", code],
        env=_clean_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_fresh_venv_has_the_cpu_torch_and_consistent_pins(
    binder_venv: Path, tmp_path: Path
) -> None:
    versions = json.loads(
        _venv_python(
            "import json, importlib.metadata as m; print(json.dumps({n: m.version(n) for n in "
            "('torch', 'jupyterlab', 'jupytext', 'rope_lib', 'numpy', 'notebook')}))",
            tmp_path,
        )
    )
    assert versions["torch"] == "2.13.0+cpu"
    assert versions["notebook"] == "7.6.5"  # binder's pin, over the base environment's
    root = {
        Requirement(line).name: str(Requirement(line).specifier).removeprefix("==")
        for line in _lines(ROOT / "requirements.txt")
        if not line.startswith("-")
    }
    for name in ("jupyterlab", "jupytext", "numpy"):
        assert versions[name] == root[name], name
    check = subprocess.run(
        [str(binder_venv / "bin" / "python"), "-m", "pip", "check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout


@pytest.mark.slow
def test_postbuild_makes_jupytext_the_default_viewer(
    binder_venv: Path, binder_home: Path, tmp_path: Path
) -> None:
    # where this environment's JupyterLab reads its settings overrides from
    settings_dir = Path(
        _venv_python(
            "from jupyterlab.labapp import LabApp; print(LabApp().app_settings_dir)", tmp_path
        ).strip()
    )
    overrides = json.loads((settings_dir / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["markdown"] == "Jupytext Notebook"

    # the landing workspace the Binder URL opens (?urlpath=lab/workspaces/rope-book)
    workspaces = Path(
        _venv_python(
            "from jupyterlab.labapp import LabApp; print(LabApp().workspaces_dir)", binder_home
        ).strip()
    )
    saved = [json.loads(p.read_text()) for p in workspaces.glob("*.jupyterlab-workspace")]
    assert [w["metadata"]["id"] for w in saved] == ["/rope-book"]
    assert "markdownviewer-widget:index.md" in saved[0]["data"]

    extensions = binder_venv / "share" / "jupyter" / "labextensions"
    assert (extensions / "@jupyter-widgets" / "jupyterlab-manager" / "package.json").is_file()
    assert (extensions / "jupyterlab-myst" / "package.json").is_file()
    jupytext_js = (extensions / "jupyterlab-jupytext" / "static").glob("*.js")
    assert any("Jupytext Notebook" in p.read_text(errors="replace") for p in jupytext_js), (
        "Jupytext's lab extension provides no viewer called 'Jupytext Notebook'"
    )


DRIVER = """
import json, shutil, sys, tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def run(notebook, folder):
    NotebookClient(
        notebook, kernel_name="python3", timeout=300, startup_timeout=120,
        resources={"metadata": {"path": folder}},
    ).execute()


def visible(cell):
    # MyST-NB's glue(..., display=False) output is hidden data for the book's text,
    # which the book build moves out of the notebook; every other output shows
    return [
        o for o in cell.outputs
        if not o.get("metadata", {}).get("scrapbook", {}).get("mime_prefix")
    ]


report = {"chapters": {}}
with tempfile.TemporaryDirectory() as folder:
    probe = nbformat.v4.new_notebook()
    probe.cells = [nbformat.v4.new_code_cell("import sys; print(sys.prefix)")]
    run(probe, folder)
    report["kernel_prefix"] = probe.cells[0].outputs[0]["text"].strip()
    for name in sys.argv[2:]:
        copy = Path(folder) / Path(name).name
        shutil.copy(name, copy)
        notebook = nbformat.read(copy, as_version=4)
        entry = report["chapters"][Path(name).stem] = {"raised": None}
        try:
            run(notebook, folder)
        except CellExecutionError as error:
            entry["raised"] = str(error)[-2000:]
        code = [c for c in notebook.cells if c.cell_type == "code"]
        entry["errors"] = [
            i for i, c in enumerate(code) if any(o.output_type == "error" for o in c.outputs)
        ]
        entry["with_output"] = [i for i, c in enumerate(code) if visible(c)]
report["jupytext_imported"] = any(m.split(".")[0] == "jupytext" for m in sys.modules)
Path(sys.argv[1]).write_text(json.dumps(report))
"""


@pytest.mark.slow
def test_downloaded_notebooks_execute_with_plain_nbclient(
    binder_venv: Path, tmp_path: Path
) -> None:
    downloads = _downloads()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    report_path = tmp_path / "report.json"
    result = subprocess.run(
        [str(binder_venv / "bin" / "python"), str(driver), str(report_path)]
        + [str(p) for p in downloads],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(report_path.read_text())

    assert Path(report["kernel_prefix"]).resolve() == binder_venv.resolve()
    assert report["jupytext_imported"] is False
    assert sorted(report["chapters"]) == sorted(c.stem for c in _chapters())
    for download in downloads:
        entry = report["chapters"][download.stem]
        assert entry["raised"] is None, f"{download.name}: {entry['raised']}"
        assert entry["errors"] == [], (
            f"{download.name}: error output in code cells {entry['errors']}"
        )
        # the cells that show output in the download are those that show output when run
        code = [c for c in nbformat.read(download, as_version=4).cells if c.cell_type == "code"]
        downloaded = [i for i, c in enumerate(code) if c.outputs]
        assert downloaded == entry["with_output"], download.name


SAVE_BACK = """
import json, shutil, sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_server.services.contents.largefilemanager import LargeFileManager
from jupytext.sync_contentsmanager import build_sync_jupytext_contents_manager_class

root = Path(sys.argv[1])
spec = KernelSpecManager().get_kernel_spec("python3")
manager = build_sync_jupytext_contents_manager_class(LargeFileManager)(root_dir=str(root))
changed = []
for page in sys.argv[2:]:
    before = (root / page).read_bytes()
    notebook = manager.get(page, content=True, type="notebook")["content"]
    notebook["metadata"]["kernelspec"] = {
        "display_name": spec.display_name, "language": spec.language, "name": "python3"}
    notebook["metadata"]["language_info"] = {"name": "python"}
    manager.save({"type": "notebook", "format": "json", "content": notebook}, page)
    if (root / page).read_bytes() != before:
        changed.append(page)
print(json.dumps({"changed": changed, "display_name": spec.display_name}))
"""


@pytest.mark.slow
def test_binder_jupyterlab_saves_the_chapters_back_unchanged(
    binder_venv: Path, tmp_path: Path
) -> None:
    """In the Binder environment too (its Jupytext and its kernel's name), a chapter that
    JupyterLab opens, runs and saves is byte for byte the file in the repository."""
    pages = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "chapters").glob("*.md"))]
    pages.append("index.md")
    for page in pages:
        (tmp_path / "book" / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "book" / page).write_bytes((ROOT / page).read_bytes())
    script = tmp_path / "save_back.py"
    script.write_text(SAVE_BACK)
    result = subprocess.run(
        [str(binder_venv / "bin" / "python"), str(script), str(tmp_path / "book"), *pages],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["changed"] == [], report
    header = (ROOT / "chapters" / "06_decay.md").read_text()
    assert f"display_name: {report['display_name']}\n" in header
