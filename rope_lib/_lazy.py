"""Deferred imports, so that ``import rope_lib`` stays cheap.

sympy, matplotlib and mpmath take most of a second to import and most callers of
``apply_rope`` or ``theta`` never need them.  A module that uses one of them writes
``sp = lazy_import("sympy")``: the name behaves like the module, and the import happens
on the first attribute access (after which Python's module cache answers).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__: list[str] = []


class LazyModule:
    """Stand-in for a module that is imported on first attribute access."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def _load(self) -> ModuleType:
        return importlib.import_module(self._name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_import(name: str) -> Any:
    """Return a stand-in for module ``name`` that imports it when first used."""
    return LazyModule(name)
