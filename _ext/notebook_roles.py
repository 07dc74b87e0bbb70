"""MyST roles written out as text in the notebooks made from the chapters.

A chapter's Markdown cells use MyST roles: ``{glue:text}`key:.2f``` for a number the code
computes, ``{cite}`key``` for a citation, ``{ref}``, ``{numref}``, ``{eq}`` and
``{prf:ref}`` for cross-references.  The book's HTML resolves them; a notebook shows them
raw (JupyterLab's MyST renderer cannot resolve a glue key, a citation or a label in another
chapter, and plain Jupyter renders none of them).  So wherever a notebook is *made* from a
chapter, the roles are replaced by the text the book shows:

* the ``.ipynb`` download of each chapter page (``_ext/notebook_downloads.py``), from the
  built environment of this Sphinx run;
* the student and instructor editions (``course/student.py``), which run no Sphinx: they
  read ``<build>/notebook_roles.json``, which this extension writes at the end of every
  build (the text of every cross-reference role in every notebook page, and the number of
  every labelled equation and exercise), and take glued values from their own execution.

The pure functions (:func:`resolve_markdown`, :func:`glue_values`, :func:`frontmatter_only`)
import no Sphinx, so ``course/student.py`` uses them too.  A displayed equation's label,
``$$ ... $$ (label)``, becomes ``\\tag{6.1}`` (its number in the book), so the number a
resolved ``{eq}`` names is the one shown beside the equation.

Each chapter opens with a Markdown cell tagged ``remove-cell`` (so the book never shows it)
that starts with a MyST front matter (``numbering: enumerator: "6.%s"``, which makes
JupyterLab's MyST renderer number exercises, equations and figures as the book does) and
then says, for readers of the live ``.md`` in JupyterLab, that roles show raw there.  In a
made notebook the roles are resolved, so that cell keeps only its front matter
(:func:`frontmatter_only`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

#: A role, or an inline code span (kept as it is: a role inside backticks is an example).
_ROLE_OR_CODE = re.compile(
    r"(?P<code>`[^`\n]+`)|\{(?P<name>[a-zA-Z][\w:.-]*)\}`(?P<content>[^`]*)`"
)
#: A displayed equation's closing ``$$`` with its label (MyST's dollarmath).
_EQ_LABEL = re.compile(r"\$\$[ \t]*\((?P<label>[^()\s]+)\)[ \t]*$", re.M)
#: ``title <target>`` in a cross-reference role.
_EXPLICIT = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", re.S)

GLUE_ROLES = ("glue", "glue:", "glue:any", "glue:text", "glue:md")
#: The cross-reference roles this module resolves: role -> (Sphinx domain, reference type).
XREF_ROLES = {
    "ref": ("std", "ref"),
    "numref": ("std", "numref"),
    "eq": ("math", "eq"),
    "prf:ref": ("prf", "ref"),
    "cite": ("cite", "p"),
    "cite:p": ("cite", "p"),
    "cite:ps": ("cite", "ps"),
    "cite:t": ("cite", "t"),
    "cite:ts": ("cite", "ts"),
    "cite:ct": ("cite", "ct"),
    "cite:cts": ("cite", "cts"),
    "cite:author": ("cite", "author"),
    "cite:year": ("cite", "year"),
    # links to the API reference (chapters/api/)
    "py:func": ("py", "func"),
    "py:class": ("py", "class"),
    "py:data": ("py", "data"),
}
#: Where the build writes the resolved roles for ``course/student.py``.
ROLES_FILE = "notebook_roles.json"
#: The tag of the chapter's first cell that only JupyterLab shows (with its front matter).
NOTE_TAG = "remove-cell"


class UnresolvedRole(ValueError):
    """A role this module has no text for (an unknown glue key or label)."""


def split_explicit(content: str) -> tuple[str | None, str]:
    """``"title <target>"`` -> ``("title", "target")``; ``"target"`` -> ``(None, "target")``."""
    match = _EXPLICIT.match(content.strip())
    if match:
        return match["title"], match["target"].strip()
    return None, content.strip()


def glue_text(data: Mapping[str, Any], spec: str) -> str:
    """The text MyST-NB pastes for ``{glue:text}`key:spec```, from the glued mime bundle.

    Parameters
    ----------
    data : mapping
        The glued output's mime bundle (``text/plain`` used).
    spec : str
        The format spec after the last ``:`` (``""`` for none).

    Returns
    -------
    str
        ``format(value, spec)`` of the literal value, as MyST-NB's ``format_plain_text``.
    """
    from myst_nb.core.variables import format_plain_text

    if "text/plain" not in data:
        raise UnresolvedRole("glued value has no text/plain form")
    return format_plain_text(data["text/plain"], spec or "s")


def glue_values(cells: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Glued mime bundles of executed code cells (MyST-NB's ``scrapbook`` outputs).

    Parameters
    ----------
    cells : iterable of notebook cells
        Executed cells; code cells' outputs are read, nothing is changed.

    Returns
    -------
    dict
        Glue key to its mime bundle, the ``application/papermill.record/`` prefix removed.
    """
    found: dict[str, dict[str, Any]] = {}
    for cell in cells:
        for output in cell.get("outputs", []) or []:
            scrap = (output.get("metadata") or {}).get("scrapbook")
            if not scrap:
                continue
            prefix = len(scrap.get("mime_prefix", ""))
            found[scrap["name"]] = {k[prefix:]: v for k, v in output.get("data", {}).items()}
    return found


def resolve_markdown(
    text: str,
    glue: Mapping[str, Mapping[str, Any]],
    xref: Callable[[str, str], str],
    equation: Callable[[str], str],
) -> str:
    """Replace every MyST role of a Markdown cell by its text.

    Parameters
    ----------
    text : str
        The cell's Markdown.
    glue : mapping
        Glue key to mime bundle, for ``{glue...}`` roles (``doc::key`` is looked up by key).
    xref : callable
        ``xref(role, content)`` -> the text (or Markdown link) of a cross-reference role.
    equation : callable
        ``equation(label)`` -> the number of a labelled equation, e.g. ``"6.1"``.

    Returns
    -------
    str
        The Markdown with roles replaced and equation labels as ``\\tag{...}``; inline code
        spans are left as they are.

    Raises
    ------
    UnresolvedRole
        If a role names an unknown glue key or label, or is not one this module knows.
    """

    def role(match: re.Match) -> str:
        if match["code"]:
            return match["code"]
        name, content = match["name"], match["content"]
        if name in GLUE_ROLES:
            if name in ("glue:text", "glue:md") and ":" in content.replace("::", ""):
                key, spec = content.rsplit(":", 1)
            else:
                key, spec = content, ""
            key = key.split("::")[-1]  # "doc.md::key": keys are unique across the book
            if key not in glue:
                raise UnresolvedRole(f"{{{name}}}`{content}`: no glued value {key!r}")
            if name == "glue:md":
                if "text/markdown" not in glue[key]:
                    raise UnresolvedRole(f"{{{name}}}`{content}`: {key!r} is not Markdown")
                return str(glue[key]["text/markdown"]).strip()
            return glue_text(glue[key], spec)
        if name in XREF_ROLES:
            return xref(name, content)
        raise UnresolvedRole(f"{{{name}}}`{content}`: a role this module does not resolve")

    out = _ROLE_OR_CODE.sub(role, text)
    return _EQ_LABEL.sub(lambda m: "\\tag{" + equation(m["label"]) + "} $$", out)


_GLUE_DIRECTIVE = re.compile(
    r"^```\{glue:md\}[ \t]+(?P<key>\S+)[ \t]*\n(?P<options>(?::[^\n]*\n)*)```[ \t]*$", re.M
)


def paste_glue_directives(text: str, glue: Mapping[str, Mapping[str, Any]]) -> str:
    """Replace each ```` ```{glue:md} key ```` block by the glued Markdown it pastes."""

    def paste(match: re.Match) -> str:
        key = match["key"].split("::")[-1]
        if key not in glue or "text/markdown" not in glue[key]:
            raise UnresolvedRole(f"{{glue:md}} {key}: no glued Markdown")
        return str(glue[key]["text/markdown"]).strip()

    return _GLUE_DIRECTIVE.sub(paste, text)


def is_note_cell(cell: Mapping[str, Any]) -> bool:
    """Whether ``cell`` is a chapter's JupyterLab note (front matter and a remark)."""
    tags = (cell.get("metadata") or {}).get("tags", [])
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    return cell.get("cell_type") == "markdown" and NOTE_TAG in tags and source.startswith("---\n")


def frontmatter_only(source: str) -> str:
    """The MyST front matter block (``---`` ... ``---``) at the start of ``source``."""
    end = source.find("\n---", 4)
    if not source.startswith("---\n") or end < 0:
        raise ValueError("the cell does not start with a front matter block")
    return source[: end + 4]


def resolve_cells(
    cells: list[dict[str, Any]],
    glue: Mapping[str, Mapping[str, Any]],
    xref: Callable[[str, str], str],
    equation: Callable[[str], str],
) -> None:
    """Resolve the roles of every Markdown cell in place; the note keeps its front matter."""
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        source = cell["source"]
        source = "".join(source) if isinstance(source, list) else source
        if is_note_cell(cell):
            cell["source"] = frontmatter_only(source)
            continue
        source = paste_glue_directives(source, glue)
        cell["source"] = resolve_markdown(source, glue, xref, equation)


# --------------------------------------------------------------------------- the roles file


def read_roles(path: Path) -> dict[str, Any]:
    """The roles file a book build wrote (see :func:`write_roles`)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def table_resolvers(
    table: Mapping[str, Any], docname: str
) -> tuple[Callable[[str, str], str], Callable[[str], str]]:
    """``xref`` and ``equation`` callables for :func:`resolve_markdown` from a roles file.

    Parameters
    ----------
    table : mapping
        What :func:`read_roles` returns.
    docname : str
        The chapter, e.g. ``"chapters/06_decay"`` (its own entries come first).

    Returns
    -------
    tuple of callables
        They raise :class:`UnresolvedRole` for a role the table lacks (the book was built
        before the chapter changed: run ``make book``).
    """
    roles = table.get("roles", {})
    equations = table.get("equations", {})

    def xref(name: str, content: str) -> str:
        key = f"{{{name}}}`{content}`"
        for scope in (docname, "*"):
            entry = roles.get(scope, {}).get(key)
            if entry is not None:
                return entry
        raise UnresolvedRole(f"{key} in {docname}: not in the roles file (run `make book`)")

    def equation(label: str) -> str:
        if label not in equations:
            raise UnresolvedRole(f"equation {label} in {docname}: not in the roles file")
        return equations[label]

    return xref, equation


# --------------------------------------------------------------------------- Sphinx


def _escape(text: str) -> str:
    """Text for Markdown: characters Markdown would read as markup are escaped."""
    return re.sub(r"([\\*_\[\]`<>])", r"\\\1", text)


class SphinxRoles:
    """Resolve cross-reference roles with the domains of a finished Sphinx environment.

    Each role is resolved the way Sphinx resolves it in the page (a ``pending_xref`` given
    to its domain), so its text is the page's: "Exercise 6.5", "(6.1)", "Fig. 6.2",
    "[Su et al., 2021]".  With ``html_baseurl`` set the text links to the page.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.env = app.env
        self.base = (app.config.html_baseurl or "").rstrip("/")

    def text(self, docname: str, name: str, content: str) -> str:
        """The text (or link) of role ``name`` with ``content`` in page ``docname``."""
        from docutils import nodes
        from sphinx import addnodes

        domain_name, typ = XREF_ROLES[name]
        title, target = split_explicit(content)
        if domain_name == "std" and typ == "ref":
            target = target.lower()
            registry = getattr(self.env, "sphinx_exercise_registry", {})
            entry = registry.get(target)
            if title is None and entry is not None and _is_enumerable_exercise(entry):
                typ = "numref"  # what sphinx-exercise does to a plain {ref} of an exercise
        if domain_name == "cite":
            title, target = None, content.strip()
        node = addnodes.pending_xref(
            "",
            refdomain=domain_name,
            reftype=typ,
            reftarget=target,
            refexplicit=title is not None,
            refwarn=True,
            refdoc=docname,
        )
        contnode = nodes.inline(title or target, title or target)
        node += contnode
        try:
            domain = self.env.get_domain(domain_name)
        except Exception as error:  # an extension that is not loaded
            raise UnresolvedRole(f"{{{name}}}`{content}`: no {domain_name} domain") from error
        result = domain.resolve_xref(
            self.env, docname, self.app.builder, typ, target, node, contnode
        )
        if result is None:
            raise UnresolvedRole(f"{{{name}}}`{content}` in {docname}: no such target")
        text = re.sub(r"\s+", " ", result.astext()).strip()
        uri = _first_uri(result)
        if self.base and uri is not None:
            page = docname.rsplit("/", 1)[0] + "/" if "/" in docname else ""
            if uri.startswith("#"):
                uri = docname.rsplit("/", 1)[-1] + ".html" + uri
            return f"[{_escape(text)}]({self.base}/{_normpath(page + uri)})"
        return _escape(text)

    def equation(self, label: str) -> str:
        """The number of the labelled equation ``label`` in the book, e.g. ``"6.1"``."""
        from docutils.nodes import make_id

        domain = self.env.get_domain("math")
        found = domain.equations.get(label)
        if not found:
            raise UnresolvedRole(f"equation {label}: no such label")
        docname, number = found
        node_id = make_id(f"equation-{label}")  # as Sphinx's math domain names it
        numbers = self.env.toc_fignumbers.get(docname, {}).get("displaymath", {}).get(node_id)
        if numbers:  # as the math domain writes it
            eqno = ".".join(map(str, numbers))
            return self.app.config.math_numsep.join(eqno.rsplit(".", 1))
        return str(number)


def _is_enumerable_exercise(entry: Mapping[str, Any]) -> bool:
    from sphinx_exercise.nodes import exercise_enumerable_node

    return isinstance(entry.get("node"), exercise_enumerable_node)


def _first_uri(node: Any) -> str | None:
    from docutils import nodes

    for ref in node.findall(nodes.reference) if hasattr(node, "findall") else []:
        uri = ref.get("refuri") or (("#" + ref["refid"]) if ref.get("refid") else None)
        if uri:
            return uri
    return None


def _normpath(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def notebook_pages(app: Any) -> list[str]:
    """The docnames of the book's notebook pages (a kernelspec in their front matter)."""
    return sorted(d for d, meta in app.env.metadata.items() if "kernelspec" in meta)


def collect_roles(app: Any) -> dict[str, Any]:
    """Every cross-reference role of every notebook page, resolved, and every number.

    Returns
    -------
    dict
        ``{"roles": {docname: {role markup: text}}, "equations": {label: number},
        "exercises": {label: number}}``: what :func:`table_resolvers` reads.
    """
    resolver = SphinxRoles(app)
    roles: dict[str, dict[str, str]] = {}
    for docname in notebook_pages(app):
        text = Path(app.env.doc2path(docname)).read_text(encoding="utf-8")
        found: dict[str, str] = {}
        for match in _ROLE_OR_CODE.finditer(text):
            name = match["name"]
            if name in XREF_ROLES:
                markup = match.group(0)
                found.setdefault(markup, resolver.text(docname, name, match["content"]))
        roles[docname] = found
    math = app.env.get_domain("math")
    equations = {label: resolver.equation(label) for label in math.equations}
    exercises = {}
    registry = getattr(app.env, "sphinx_exercise_registry", {})
    for label, entry in registry.items():
        if _is_enumerable_exercise(entry):
            text = resolver.text(entry.get("docname", ""), "numref", label)
            exercises[label] = text
    return {"roles": roles, "equations": equations, "exercises": exercises}


def write_roles(app: Any, exception: Exception | None) -> None:
    """At the end of a successful build: write :data:`ROLES_FILE` beside the HTML folder."""
    if exception is not None or app.builder.format != "html":
        return
    table = collect_roles(app)
    target = Path(app.outdir).parent / ROLES_FILE
    text = json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")


def setup(app: Any) -> dict[str, Any]:
    """Write the roles file after every HTML build."""
    app.connect("build-finished", write_roles)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
