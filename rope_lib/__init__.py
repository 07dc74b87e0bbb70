"""rope_lib: the companion package of *Rotary Position Embeddings from First Principles*.

Every chapter of the book imports this package so that the chapters stay prose
plus short calls.  The public contract (names, signatures, meanings) is listed
in the book's notation page and in ``API.md``; everything listed in a module's
``__all__`` is importable from the top level::

    from rope_lib import theta, apply_rope, ones_score, min_base
"""

from __future__ import annotations

from . import (
    attention,
    base_bound,
    context_extension,
    decay,
    frequencies,
    rotation,
    sinusoidal,
    taylor,
)
from .attention import *  # noqa: F401,F403
from .base_bound import *  # noqa: F401,F403
from .context_extension import *  # noqa: F401,F403
from .decay import *  # noqa: F401,F403
from .frequencies import *  # noqa: F401,F403
from .rotation import *  # noqa: F401,F403
from .sinusoidal import *  # noqa: F401,F403
from .taylor import *  # noqa: F401,F403

__version__ = "0.1.0"

__all__ = [
    name
    for module in (
        frequencies,
        attention,
        taylor,
        sinusoidal,
        rotation,
        decay,
        base_bound,
        context_extension,
    )
    for name in module.__all__
]
