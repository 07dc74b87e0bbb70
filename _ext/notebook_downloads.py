"""Sphinx extension: offer every executed chapter as a ``.ipynb`` download.

MyST-NB executes each notebook page (the chapters are MyST Markdown notebooks) and
writes the executed notebook, outputs included, to ``<build>/jupyter_execute/<page>.ipynb``.
This extension copies that notebook next to the page's source in the HTML output
(``_sources/<page>.ipynb``) and sets the page context ``ipynb_source``, from which
sphinx-book-theme draws an ".ipynb" entry in the page's download menu, beside the
``.md`` source.  A student can then open the chapter in any Jupyter, JupyterHub or
Colab without Jupytext.

The copy is a valid nbformat v4 notebook: MyST-NB's internal ``source_map`` and
Jupytext's ``text_representation`` (which describes the ``.md`` file, not this one)
are dropped from its metadata; the cells, their outputs and the kernelspec are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)

#: MyST-NB writes executed notebooks here, beside the HTML output folder.
EXECUTED_FOLDER = "jupyter_execute"


def executed_notebook(app: Sphinx, pagename: str) -> Path:
    """Path of the notebook MyST-NB executed for ``pagename``.

    Parameters
    ----------
    app : sphinx.application.Sphinx
        The running Sphinx application.
    pagename : str
        The Sphinx docname, e.g. ``"chapters/01_symmetry"``.

    Returns
    -------
    pathlib.Path
        ``<outdir>/../jupyter_execute/<pagename>.ipynb`` (it may not exist).
    """
    folder = getattr(getattr(app.env, "mystnb_config", None), "output_folder", None)
    base = Path(folder) if folder else Path(app.outdir).parent / EXECUTED_FOLDER
    return base.joinpath(*pagename.split("/")).with_suffix(".ipynb")


def download_notebook(executed: Path) -> nbformat.NotebookNode:
    """The downloadable form of an executed notebook.

    Parameters
    ----------
    executed : pathlib.Path
        A notebook written by MyST-NB (``jupyter_execute/...ipynb``).

    Returns
    -------
    nbformat.NotebookNode
        The same cells and outputs, with the build-only metadata removed; validated
        against the nbformat v4 schema.

    Raises
    ------
    sphinx.errors.ExtensionError
        If the notebook has no ``python3`` kernelspec or fails validation.
    """
    notebook = nbformat.read(executed, as_version=4)
    notebook.metadata.pop("source_map", None)
    jupytext_meta = notebook.metadata.get("jupytext")
    if isinstance(jupytext_meta, dict):
        jupytext_meta.pop("text_representation", None)
        if not jupytext_meta:
            notebook.metadata.pop("jupytext")
    kernel = notebook.metadata.get("kernelspec", {}).get("name")
    if kernel != "python3":
        raise ExtensionError(
            f"notebook_downloads: {executed} has kernelspec name {kernel!r}; the chapters "
            "must declare kernelspec name 'python3' in their front matter"
        )
    try:
        nbformat.validate(notebook)
    except nbformat.ValidationError as error:
        raise ExtensionError(
            f"notebook_downloads: {executed} is not a valid nbformat v4 notebook: {error}"
        ) from error
    return notebook


def _is_notebook_page(app: Sphinx, pagename: str) -> bool:
    metadata = app.env.metadata.get(pagename, {})
    return "kernelspec" in metadata


def _target(app: Sphinx, pagename: str) -> Path:
    return Path(app.outdir, "_sources", *pagename.split("/")).with_suffix(".ipynb")


def _offer_notebook(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """Before the theme draws its download menu: point ``ipynb_source`` at the copy."""
    if doctree is None or not _is_notebook_page(app, pagename):
        return
    if not executed_notebook(app, pagename).is_file():
        LOGGER.warning(
            "notebook_downloads: no executed notebook for %s at %s, so its page offers no "
            ".ipynb download (MyST-NB writes one for every notebook page it reads; run "
            "`make clean book` if the build folder was edited by hand)",
            pagename,
            executed_notebook(app, pagename),
        )
        return
    context["ipynb_source"] = pagename + ".ipynb"


def _write_notebook(
    app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any
) -> None:
    """After the theme (whose launch buttons copy the raw notebook): write the clean copy."""
    if context.get("ipynb_source") != pagename + ".ipynb":
        return
    target = _target(app, pagename)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(download_notebook(executed_notebook(app, pagename)), target)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the two page-context handlers around sphinx-book-theme's (priority 501)."""
    app.connect("html-page-context", _offer_notebook, priority=400)
    app.connect("html-page-context", _write_notebook, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
