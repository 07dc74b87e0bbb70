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

Outputs come from the execution cache when the book is built with
``execute_notebooks: cache``: MyST-NB 1.4 writes ``jupyter_execute/<page>.ipynb`` from
the notebook it read, which has outputs only when this run executed it.  A page re-read
after an edit that left its code alone is taken from the cache, so that file has no
outputs at all; the outputs are merged back from the cache here (and the glued values,
which MyST-NB moves out of the notebook, are left out as it does).

The Markdown cells are resolved for a reader without the book (``notebook_roles``):
glued values, citations and cross-references become the text the page shows, an
equation's label becomes its number, and the chapter's JupyterLab note keeps only its
front matter.  A role that cannot be resolved is a warning, so ``make book`` (``-W``)
fails rather than offer a notebook with a raw role.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import notebook_roles  # the book's _ext folder is on sys.path
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


def with_cached_outputs(app: Sphinx, notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``notebook`` with the outputs of its match in the execution cache, if there is one.

    Parameters
    ----------
    app : sphinx.application.Sphinx
        The running Sphinx application (its MyST-NB configuration names the cache).
    notebook : nbformat.NotebookNode
        A notebook as MyST-NB wrote it to ``jupyter_execute``.

    Returns
    -------
    nbformat.NotebookNode
        In ``cache`` execution mode, a copy with the cached code cells' outputs merged in and
        the glue outputs taken out (as MyST-NB takes them out); otherwise ``notebook``.
    """
    config = getattr(app.env, "mystnb_config", None)
    if config is None or config.execution_mode != "cache":
        return notebook
    from jupyter_cache import get_cache
    from myst_nb.ext.glue import extract_glue_data_cell

    cache_path = config.execution_cache_path or str(Path(app.outdir).parent / ".jupyter_cache")
    try:
        _, merged = get_cache(cache_path).merge_match_into_notebook(notebook)
    except KeyError:  # not in the cache (e.g. its execution failed): keep what was written
        return notebook
    for cell in merged.cells:
        if cell.cell_type == "code":
            extract_glue_data_cell(cell)
    return merged


def download_notebook(
    executed: Path, app: Sphinx | None = None, pagename: str | None = None
) -> nbformat.NotebookNode:
    """The downloadable form of an executed notebook.

    Parameters
    ----------
    executed : pathlib.Path
        A notebook written by MyST-NB (``jupyter_execute/...ipynb``).
    app : sphinx.application.Sphinx, optional
        The running build: with it, outputs are taken from the execution cache when the
        file lacks them (:func:`with_cached_outputs`) and the Markdown cells' roles are
        resolved (``notebook_roles``).
    pagename : str, optional
        The page's docname (needed with ``app``).

    Returns
    -------
    nbformat.NotebookNode
        The same cells and outputs, with the build-only metadata removed; validated
        against the nbformat v4 schema.

    Raises
    ------
    sphinx.errors.ExtensionError
        If the notebook has no ``python3`` kernelspec or fails validation.
    notebook_roles.UnresolvedRole
        If a Markdown cell has a role that cannot be resolved.
    """
    notebook = nbformat.read(executed, as_version=4)
    if app is not None:
        notebook = with_cached_outputs(app, notebook)
        glue_file = executed.with_suffix(".glue.json")
        glue = {}
        if glue_file.is_file():
            glue = {
                key: output.get("data", {})
                for key, output in json.loads(glue_file.read_text(encoding="utf-8")).items()
            }
        roles = notebook_roles.SphinxRoles(app)
        notebook_roles.resolve_cells(
            notebook.cells,
            glue,
            lambda name, content: roles.text(pagename, name, content),
            roles.equation,
        )
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
    try:
        notebook = download_notebook(executed_notebook(app, pagename), app, pagename)
    except notebook_roles.UnresolvedRole as error:
        LOGGER.warning("notebook_downloads: %s: %s", pagename, error, location=pagename)
        return
    if not any(c.get("outputs") for c in notebook.cells if c.cell_type == "code"):
        LOGGER.warning(
            "notebook_downloads: %s: the notebook has no outputs (neither written by this "
            "run nor found in the execution cache); run `make clean book`",
            pagename,
            location=pagename,
        )
    nbformat.write(notebook, target)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the two page-context handlers around sphinx-book-theme's (priority 501)."""
    app.connect("html-page-context", _offer_notebook, priority=400)
    app.connect("html-page-context", _write_notebook, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
