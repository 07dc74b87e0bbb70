"""rope_lib: the companion package of *Rotary Position Embeddings from First Principles*.

Every chapter of the book imports this package so that the chapters stay prose
plus short calls.  The public contract (names, signatures, meanings) is listed
in the book's notation page and in ``API.md``; everything listed in a module's
``__all__`` is importable from the top level::

    from rope_lib import theta, apply_rope, ones_score, min_base
"""

from __future__ import annotations

from importlib import import_module

# The concept modules, in the book's order.  Each one's ``__all__`` is re-exported
# here, so ``from rope_lib import theta, apply_rope, ...`` works.
_MODULES = tuple(
    import_module(f"{__name__}.{name}")
    for name in (
        "frequencies",
        "symbolic",
        "attention",
        "taylor",
        "sinusoidal",
        "rotation",
        "decay",
        "base_bound",
        "context_extension",
        "experiment",
        "experiment_report",
        "experiment_lm",
        "experiment_lm_report",
    )
)

__all__: list[str] = []
for _module in _MODULES:
    for _name in _module.__all__:
        if _name in __all__:  # one public name, one meaning
            raise ImportError(f"rope_lib.{_name} is exported by two modules")
        globals()[_name] = getattr(_module, _name)
    __all__ += _module.__all__
del _module, _name

__version__ = "0.4.0"
