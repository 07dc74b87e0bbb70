"""rope_lib: the companion package of *Rotary Position Embeddings from First Principles*.

Every chapter of the book imports this package so that the chapters stay prose plus short
calls.  The public contract (names, signatures, meanings) is listed in ``API.md`` and in the
book's API reference; every public name but chapter 9's is importable from the top level::

    from rope_lib import theta, apply_rope, ones_score, min_base

Chapter 9's experiments are imported by their module path instead
(``rope_lib.experiments.report``, ``rope_lib.figures.experiments``...): they are not in
``PUBLIC_MODULES``.

The top level loads nothing until a name is asked for (PEP 562): ``import rope_lib`` imports
no chapter module, and ``rope_lib.apply_rope`` imports :mod:`rope_lib.rotation` and what it
needs, no more.  That keeps ``import rope_lib`` fast, and it keeps what a computation depends
on visible: chapter 9's stored results are keyed on the files their code imports.
:data:`EXPORTS` says which module defines each name; ``ARCHITECTURE.md`` says how the
modules are layered.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

__version__ = "0.4.0"

#: The modules whose public names the top level re-exports, in the book's order: the math
#: module of each chapter, then its figures.  A module's public names are its ``__all__``,
#: written once, in the module; :data:`EXPORTS` reads them from the source files.
PUBLIC_MODULES: tuple[str, ...] = (
    # shared
    "frequencies",
    "symbolic",
    # chapter 1, symmetry
    "attention",
    "figures.attention",
    # chapter 2, Taylor expansion
    "taylor",
    "figures.taylor",
    # chapter 3, sinusoidal encoding
    "sinusoidal",
    "figures.sinusoidal",
    # chapter 4, RoPE
    "rotation",
    "figures.rotation",
    # chapter 5, implementations
    "implementations",
    "figures.implementations",
    "timing",
    # chapter 6, decay
    "decay",
    "figures.decay",
    # chapter 7, base bound
    "base_bound",
    "base_table",
    "figures.base_bound",
    # chapter 8, context extension
    "context_extension",
    "figures.context_extension",
)

_ALL = re.compile(r"^__all__ = (\[.*?\])[ \t]*$", re.MULTILINE | re.DOTALL)


def _public_names(module: str) -> tuple[str, ...]:
    """The ``__all__`` of ``rope_lib.<module>``, read from its source without importing it."""
    path = Path(__file__).parent.joinpath(*module.split(".")).with_suffix(".py")
    found = _ALL.search(path.read_text(encoding="utf-8"))
    if found is None:
        raise ImportError(f"rope_lib.{module} has no literal list __all__ = [...]")
    return tuple(ast.literal_eval(found.group(1)))


#: Module -> the public names it defines (its ``__all__``), for every module of
#: ``PUBLIC_MODULES``.  ``tests/test_architecture.py`` checks that importing each module
#: gives the same ``__all__``.
EXPORTS: dict[str, tuple[str, ...]] = {module: _public_names(module) for module in PUBLIC_MODULES}

#: Name -> module that defines it (one public name, one meaning).
_WHERE: dict[str, str] = {}
for _module, _names in EXPORTS.items():
    for _name in _names:
        if _name in _WHERE:
            raise ImportError(f"rope_lib.{_name} is exported by two modules")
        _WHERE[_name] = _module
del _module, _names, _name

#: Submodules reachable as attributes of the package (``rope_lib.rotation``...), imported on
#: first access like the names.
_SUBMODULES = frozenset(
    {m.split(".")[0] for m in EXPORTS}
    | {
        "figures",
        "experiments",
        "_fastpath",
        "_validate",
        "_lazy",
    }
)

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` and return the name (PEP 562)."""
    if name in _WHERE:
        value = getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
        globals()[name] = value  # the next lookup is an ordinary attribute
        return value
    if name in _SUBMODULES:
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)


class _Package(ModuleType):
    """The package's module type: one public name, one meaning, whatever the import order.

    ``rope_lib.sinusoidal`` is the encoding (API.md) and also the name of its module.  Python
    sets a package attribute to each submodule it imports, which would replace the function
    by the module; here the function of that name is kept instead.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name in _WHERE:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
