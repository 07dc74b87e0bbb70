"""Sphinx extension: drop sphinx-thebe's scripts from every page.

Jupyter Book 1 always loads sphinx-thebe, whose configuration script is added
twice per page (``init_thebe_core`` runs on each ``env-before-read-docs``), so every
page logged ``Identifier 'THEBE_JS_URL' has already been declared``.  The book
does not use Thebe (launch_buttons.thebe is false; readers run the chapters on
Binder or locally), so the clean fix is to not ship its scripts at all.
"""

from __future__ import annotations


def _is_thebe(script) -> bool:
    body = getattr(script, "attributes", {}).get("body", "") or ""
    filename = getattr(script, "filename", "") or ""
    return "THEBE_JS_URL" in body or filename.endswith("sphinx-thebe.js")


def _drop_thebe(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_thebe(s)]


def setup(app):
    app.connect("html-page-context", _drop_thebe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
