"""Launch buttons and notebook downloads (``_ext/launch.py``, ``_ext/notebook_downloads.py``).

Two builds of a tiny Sphinx project (sphinx-book-theme, MyST-NB and the book's two
extensions, one MyST notebook page under ``docs/``) check what a reader sees:

* with ``repository_url`` set, the page has a Binder and a JupyterHub link whose URLs
  follow mybinder.org's documented scheme (``/v2/gh/ORG/REPO/REF?urlpath=...``) and
  nbgitpuller's (``/hub/user-redirect/git-pull?repo=...&urlpath=...&branch=...``),
  both opening the page's own file in JupyterLab;
* with it empty, the page has no launch link at all and the build prints which
  setting to fill (at INFO level: both builds run with ``-W``);
* both pages offer the executed ``.ipynb`` download, with the cell's output.

The expected URLs are written out here from those schemes, not read from the theme.
A further test feeds the book's own ``_config.yml`` through Jupyter Book's config
translation, so a setting that never reaches the theme fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
import yaml
from sphinx.errors import ConfigError

from .bookfiles import MYST_HEADER, hrefs

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "_ext"
sys.path.insert(0, str(EXT))

import launch  # noqa: E402

REPO = "https://github.com/rope-org/rope-book"
HUB = "https://hub.test-university.edu"

PAGE = (
    MYST_HEADER
    + """
# A lesson

```{code-cell} ipython3
print(6 * 7)
```
"""
)

CONF = """
import sys
sys.path.insert(0, {ext!r})
project = "launch test"
extensions = ["myst_nb", "notebook_downloads", "launch"]
html_theme = "sphinx_book_theme"
nb_execution_mode = "force"
html_theme_options = {{
    "repository_url": {repo!r},
    "repository_branch": "main",
    "path_to_docs": "docs",
    "use_download_button": True,
    "launch_buttons": {{
        "notebook_interface": "jupyterlab",
        "binderhub_url": "https://mybinder.org",
        "jupyterhub_url": {hub!r},
        "thebe": False,
    }},
}}
"""


def _build(folder: Path, repo: str, hub: str) -> tuple[subprocess.CompletedProcess, Path]:
    docs = folder / "docs"
    docs.mkdir(parents=True)
    (docs / "conf.py").write_text(CONF.format(ext=str(EXT), repo=repo, hub=hub))
    (docs / "index.md").write_text(PAGE)
    out = folder / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-n", "--keep-going"]
        + [str(docs), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=folder,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result, out


def _assert_notebook_download(out: Path) -> None:
    assert "_sources/index.ipynb" in hrefs(out / "index.html")
    notebook = nbformat.read(out / "_sources" / "index.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    # the clean copy, also when the theme's launch buttons copied MyST-NB's raw one
    assert "source_map" not in notebook.metadata
    (cell,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert [o.get("text") for o in cell.outputs] == ["42\n"]


@pytest.mark.slow
@pytest.mark.xdist_group("build")
def test_repository_url_set_gives_binder_and_jupyterhub_links(tmp_path: Path) -> None:
    result, out = _build(tmp_path, REPO, HUB)
    links = hrefs(out / "index.html")

    binder = [h for h in links if h.startswith("https://mybinder.org/")]
    assert binder == [
        "https://mybinder.org/v2/gh/rope-org/rope-book/main?urlpath=lab/tree/docs/index.md"
    ]
    hub = [urlsplit(h) for h in links if h.startswith(HUB)]
    assert len(hub) == 1
    assert hub[0].path == "/hub/user-redirect/git-pull"
    assert parse_qs(hub[0].query) == {
        "repo": [REPO],
        "urlpath": ["lab/tree/rope-book/docs/index.md"],
        "branch": ["main"],
    }
    assert "launch buttons off" not in result.stdout
    assert "JupyterHub launch button off" not in result.stdout
    _assert_notebook_download(out)


@pytest.mark.slow
@pytest.mark.xdist_group("build")
def test_repository_url_unset_gives_no_launch_link_and_says_what_to_set(
    tmp_path: Path,
) -> None:
    result, out = _build(tmp_path, "", "")
    html = (out / "index.html").read_text()
    links = hrefs(out / "index.html")
    assert not [h for h in links if "mybinder" in h or "git-pull" in h]
    assert "launch-buttons" not in html
    assert "set repository.url in _config.yml" in result.stdout
    assert "set launch_buttons.jupyterhub_url in _config.yml" in result.stdout
    # printed as INFO: -W turned no warning into an error, and no line says WARNING
    said = [line for line in result.stdout.splitlines() if "launch button" in line]
    assert len(said) == 2 and not [line for line in said if "WARNING" in line.upper()]
    _assert_notebook_download(out)


def _options(repo: object, **launch_buttons: object) -> SimpleNamespace:
    buttons = {"notebook_interface": "jupyterlab", "binderhub_url": "https://mybinder.org"}
    buttons.update(launch_buttons)
    return SimpleNamespace(html_theme_options={"repository_url": repo, "launch_buttons": buttons})


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "https://github.com/executablebooks/jupyter-book",
        "https://github.com/<org>/<repo>",
        "https://github.com/{org}/{repo}",
        "https://example.com/org/repo",
    ],
)
def test_placeholder_repository_turns_every_launch_button_off(url: str) -> None:
    config = _options(url, jupyterhub_url=HUB, colab_url="https://colab.research.google.com")
    launch.configure_launch_buttons(None, config)
    buttons = config.html_theme_options["launch_buttons"]
    assert buttons["binderhub_url"] == buttons["jupyterhub_url"] == buttons["colab_url"] == ""
    assert config.html_theme_options["repository_url"] == ""


def test_real_repository_keeps_the_buttons() -> None:
    config = _options(REPO + "/", jupyterhub_url=HUB)
    launch.configure_launch_buttons(None, config)
    buttons = config.html_theme_options["launch_buttons"]
    assert buttons["binderhub_url"] == "https://mybinder.org"
    assert buttons["jupyterhub_url"] == HUB


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (_options("github.com/rope-org/rope-book"), "repository.url"),
        (_options("https://github.com/rope-org"), "repository.url"),
        (_options(42), "repository.url"),
        (_options("https://git.rope.dev/org/repo"), "repository.url"),
        (_options(REPO, binderhub_url="mybinder.org"), "launch_buttons.binderhub_url"),
        (_options(REPO, jupyterhub_url="ftp://hub"), "launch_buttons.jupyterhub_url"),
        (_options(REPO, notebook_interface="lab"), "launch_buttons.notebook_interface"),
    ],
)
def test_bad_settings_are_refused_by_name(config: SimpleNamespace, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        launch.configure_launch_buttons(None, config)


def test_book_config_reaches_the_theme() -> None:
    """The book's `_config.yml`, through Jupyter Book, gives the theme both settings."""
    from jupyter_book.config import get_final_config

    book = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "url" in book["repository"]
    book["repository"]["url"] = REPO
    sphinx_config, _ = get_final_config(
        user_yaml=book, cli_config={"latex_individualpages": False}, sourcedir=ROOT
    )
    options = sphinx_config["html_theme_options"]
    assert options["repository_url"] == REPO
    assert options["repository_branch"] == "main"
    assert options["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert options["launch_buttons"]["notebook_interface"] == "jupyterlab"
    # the book's own theme options (sphinx.config) are merged, not lost
    assert options["use_download_button"] is True
    assert {"notebook_downloads", "launch"} <= set(sphinx_config["extensions"])
