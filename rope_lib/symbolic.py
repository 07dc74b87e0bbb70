"""Symbolic checks: when the book calls a sympy expression identically zero.

Chapters 3 and 4 (``chapters/03_sinusoidal.md``, ``chapters/04_rope.md``) prove their
identities by reducing "left side minus right side" to zero with sympy.  Products of
complex exponentials, and sines and cosines of sums, do not cancel under
``sympy.simplify`` alone; :func:`vanishes` first expands them into real and imaginary
parts of sines and cosines of single symbols, where the cancellation is polynomial.

sympy is imported when :func:`vanishes` is first called, not when :mod:`rope_lib` is.
"""

from __future__ import annotations

from typing import Any

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
