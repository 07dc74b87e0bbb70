"""Sphinx extension: the book's API reference, one page per chapter module (``chapters/api/``).

Each page documents the public names of one chapter, as the chapters call them
(``rope_lib.apply_rope``), with ``autodoc``, ``autosummary`` (a table at the top that links
to the entries on the same page), ``napoleon`` (NumPy-style docstrings) and ``viewcode`` (a
``[source]`` link to the highlighted code of the module that defines the name).

One thing is added here: docstrings name their neighbours briefly, ``:func:`theta``` inside
``rope_lib.rotation``.  Where the page documents that neighbour as ``rope_lib.theta`` (the
public name), such a reference is resolved to it; a constant, documented through its
module (``rope_lib.taylor.TERM_NAMES``: autodoc finds its ``#:`` comment only there), is
found there when ``rope_lib.TERM_NAMES`` is not.  Only names of ``rope_lib.__all__`` are
resolved so; any other missing reference still fails the build (``-n -W``).

It also adds ``_assets/api_reference.css``: on the highlighted source pages, viewcode's
"[docs]" links need a lighter colour in dark mode to reach WCAG 2.1 AA contrast.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes


def _public_target(node: nodes.Element) -> str | None:
    """``rope_lib.NAME...`` for a Python reference to a public rope_lib name written briefly
    or through its module (``theta``, ``SecondOrderExpansion.interaction``,
    ``rope_lib.rotation.apply_rope``), else None."""
    import rope_lib

    target = node.get("reftarget", "")
    module = node.get("py:module") or ""
    if target.startswith("rope_lib."):
        rest = target.removeprefix("rope_lib.")
        for name in sorted(rope_lib.EXPORTS, key=len, reverse=True):  # a module prefix
            if rest.startswith(name + "."):
                rest = rest.removeprefix(name + ".")
                break
    elif module.startswith("rope_lib"):
        rest = target
    else:
        return None
    if rest.split(".")[0] in rope_lib.__all__:
        return f"rope_lib.{rest}"
    return None


def _module_target(target: str) -> str | None:
    """``rope_lib.MODULE.NAME`` for ``rope_lib.NAME``: a constant is documented through the
    module that defines it (autodoc finds its ``#:`` comment only there)."""
    import rope_lib

    name = target.removeprefix("rope_lib.")
    for module, names in rope_lib.EXPORTS.items():
        if name in names:
            return f"rope_lib.{module}.{name}"
    return None


def resolve_public_names(app: Any, env: Any, node: nodes.Element, contnode: nodes.Node) -> Any:
    """``missing-reference`` handler: see the module docstring."""
    if node.get("refdomain") != "py":
        return None
    target = _public_target(node)
    if target is None:
        return None
    domain = env.get_domain("py")
    found = None
    if target != node.get("reftarget"):
        found = domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], target, node, contnode
        )
    qualified = _module_target(target)
    if found is None and qualified is not None:
        found = domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], qualified, node, contnode
        )
    return found


def setup(app: Any) -> dict[str, Any]:
    app.connect("missing-reference", resolve_public_names)
    # _assets/api_reference.css (html_static_path): the dark-mode contrast of viewcode's
    # "[docs]" links on the highlighted source pages.
    app.add_css_file("api_reference.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
