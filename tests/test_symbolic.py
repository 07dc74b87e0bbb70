"""Tests of rope_lib.symbolic: vanishes proves true identities and refuses false ones."""

from __future__ import annotations

import pytest
import sympy as sp

from rope_lib import vanishes

a, b, t = sp.symbols("a b t", real=True)


@pytest.mark.parametrize(
    "identity",
    [
        sp.sin(a + b) - (sp.sin(a) * sp.cos(b) + sp.cos(a) * sp.sin(b)),
        sp.cos(a - b) - (sp.cos(a) * sp.cos(b) + sp.sin(a) * sp.sin(b)),
        sp.exp(sp.I * a) * sp.exp(-sp.I * b) - sp.exp(sp.I * (a - b)),
        sp.re(sp.exp(sp.I * a * t) * sp.conjugate(sp.exp(sp.I * b * t))) - sp.cos((a - b) * t),
        (a + b) ** 2 - a**2 - 2 * a * b - b**2,
        sp.Matrix([[sp.sin(a) ** 2 + sp.cos(a) ** 2 - 1, 0]]),
    ],
)
def test_true_identities_vanish(identity) -> None:
    assert vanishes(identity)


@pytest.mark.parametrize(
    "expression",
    [
        sp.sin(a + b) - sp.sin(a) - sp.sin(b),
        sp.exp(sp.I * a) - sp.cos(a),
        sp.Integer(1),
        sp.Matrix([[0, sp.sin(a)]]),
        a * b - b,
    ],
)
def test_non_identities_do_not_vanish(expression) -> None:
    assert not vanishes(expression)


def test_numbers_are_accepted() -> None:
    assert vanishes(0) and vanishes(0.0) and not vanishes(1e-300)


@pytest.mark.parametrize("bad", ["sin(a)", object(), [1, 2]])
def test_non_expressions_are_refused(bad) -> None:
    with pytest.raises(TypeError, match="expr"):
        vanishes(bad)
