"""Symbolic checks: when the book calls a sympy expression identically zero.

Chapters 3 and 4 (``chapters/03_sinusoidal.md``, ``chapters/04_rope.md``) prove their
identities by reducing "left side minus right side" to zero with sympy.  Products of
complex exponentials, and sines and cosines of sums, do not cancel under
``sympy.simplify`` alone; :func:`vanishes` first expands them into real and imaginary
parts of sines and cosines of single symbols, where the cancellation is polynomial.

The symbolic constructions of chapters 3 and 4 (``rope_lib.sinusoidal.symbolic_encoding``,
``rope_lib.rotation.symbolic_rotation_matrix``) read their position symbol and frequency
symbols through one private helper, ``_symbolic_inputs``, so that both accept and refuse
the same inputs.

sympy is imported when one of these functions is first called, not when :mod:`rope_lib` is.
"""

from __future__ import annotations

from typing import Any

from ._validate import _describe

__all__ = ["vanishes"]


def vanishes(expr: Any) -> bool:
    """Return ``True`` if sympy reduces ``expr`` to exactly zero.

    The reduction is ``simplify(expand(expand_trig(expand(expand_complex(expand(expr))))))``:
    products are multiplied out, :math:`e^{\\mathrm i x}` becomes
    :math:`\\cos x + \\mathrm i \\sin x`, and :math:`\\sin(a + b)`, :math:`\\cos(a + b)` are
    written with the addition formulas, so that an identity among them becomes a polynomial
    identity in the sines and cosines of the symbols.

    Parameters
    ----------
    expr : sympy expression, or anything ``sympy.sympify`` accepts
        The difference of the two sides of a claimed identity.

    Returns
    -------
    bool
        ``True`` when the reduced form is the number 0.  ``False`` means sympy did not
        reach zero: for a non-zero expression that is the right answer; for an identity
        that needs other rewriting it is a failure to prove, never a false proof.

    Raises
    ------
    TypeError
        If ``expr`` cannot be turned into a sympy expression.
    """
    import sympy as sp

    try:
        expr = sp.sympify(expr, strict=True)
    except (sp.SympifyError, TypeError) as error:
        raise TypeError(
            f"expr must be a sympy expression (or a number), got {expr!r} "
            f"of type {type(expr).__name__}"
        ) from error
    if isinstance(expr, sp.MatrixBase):
        return all(vanishes(entry) for entry in expr)
    expr = sp.expand_complex(sp.expand(expr))
    return sp.simplify(sp.expand(sp.expand_trig(sp.expand(expr)))) == 0


def _symbolic_inputs(position: Any, d: int, symbol: str, name: str) -> tuple[Any, tuple]:
    r"""The position :math:`m` and the frequencies :math:`\theta_0, \dots, \theta_{d/2-1}`
    of a symbolic construction, as real sympy symbols.

    Parameters
    ----------
    position : sympy expression or str
        :math:`m`; a str names a real symbol and must be a Python identifier (``"m"``).
    d : int
        Head dimension, already checked to be even and positive.
    symbol : str
        Stem of the frequency symbols: ``"theta"`` gives ``theta_0``, ``theta_1``, ...
    name : str
        The caller's name for ``position``, used in error messages.

    Returns
    -------
    (sympy expression, tuple of sympy.Symbol)
        :math:`m` and the :math:`d/2` frequency symbols.

    Raises
    ------
    TypeError
        ``symbol`` not a str that is an identifier; ``position`` neither a sympy expression
        nor a str.
    ValueError
        ``position`` a str that is not an identifier.
    """
    import sympy as sp

    if not (isinstance(symbol, str) and symbol.isidentifier()):
        raise TypeError(
            f"symbol must be a str that is a Python identifier (the stem of the frequency "
            f"symbols, e.g. 'theta' for theta_0, theta_1, ...), got {_describe(symbol)}"
        )
    if isinstance(position, str):
        if not position.isidentifier():
            raise ValueError(
                f"{name} must be a sympy expression or a str that names a symbol (a Python "
                f"identifier such as 'm'), got {position!r:.80}"
            )
        position = sp.Symbol(position, real=True)
    if not isinstance(position, sp.Expr):
        raise TypeError(f"{name} must be a sympy expression or a str, got {_describe(position)}")
    return position, sp.symbols(f"{symbol}_0:{d // 2}", real=True)
