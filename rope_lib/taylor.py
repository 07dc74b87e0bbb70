r"""The second-order Taylor expansion of a model around its position vectors (chapter ``taylor``).

Chapter 2 (``chapters/02_taylor.md``) adds position vectors to two inputs of a model,
:math:`\tilde f = f(\dots, \boldsymbol x_m + \boldsymbol p_m, \dots, \boldsymbol x_n +
\boldsymbol p_n, \dots)`, and expands to second order in :math:`\boldsymbol p_m,
\boldsymbol p_n`:

.. math:: \tilde f \approx f + \boldsymbol p_m^\top \nabla_m f + \boldsymbol p_n^\top \nabla_n f
          + \tfrac12 \boldsymbol p_m^\top \mathcal H_{mm} \boldsymbol p_m
          + \tfrac12 \boldsymbol p_n^\top \mathcal H_{nn} \boldsymbol p_n
          + \boldsymbol p_m^\top \mathcal H \boldsymbol p_n,
          \qquad \mathcal H = \mathcal H_{mn} = \frac{\partial^2 f}{\partial \boldsymbol x_m
          \partial \boldsymbol x_n^\top},

where :math:`\mathcal H_{mm}`, :math:`\mathcal H_{nn}` and :math:`\mathcal H_{mn}` are the blocks
of the Hessian of :math:`f` in the two inputs (entries :math:`(\mathcal H_{mn})_{jl} =
\partial^2 f/\partial x_{m,j}\partial x_{n,l}`).

The vectors :math:`\boldsymbol x_m, \boldsymbol p_m` have the model width
:math:`d_\text{model}`; the score model divides by :math:`\sqrt d`, :math:`d` the head
dimension (the symbolic models here take :math:`d = d_\text{model}`).

This module computes

* :func:`second_order_expansion`: the six named terms for any sympy expression ``f``, and
  (method :meth:`SecondOrderExpansion.interaction`) the exact interaction
  :math:`\mathcal I = f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n + \boldsymbol p_n)
  - f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n) - f(\boldsymbol x_m, \boldsymbol x_n
  + \boldsymbol p_n) + f(\boldsymbol x_m, \boldsymbol x_n)`, the part of :math:`\tilde f`
  that is not a sum of single-position functions;
* two concrete models for the chapter: :func:`score_model` (the attention score
  :math:`\boldsymbol x_m^\top \boldsymbol M \boldsymbol x_n/\sqrt d`,
  :math:`\boldsymbol M = \boldsymbol W_q^\top \boldsymbol W_k`, whose expansion is exact) and
  :func:`attention_output_model` (a softmax-weighted output of two tokens, whose expansion has
  an :math:`O(\varepsilon^3)` remainder);
* :func:`expansion_error`, :func:`term_sizes` and :func:`loglog_slope`: the numerical check
  that the remainder shrinks like the cube of the perturbation size;
* :func:`interaction_along_ray`: the exact interaction against the cross term along a ray;
* :func:`diagonal_spread`: how far a matrix :math:`G_{mn}` is from depending on
  :math:`m - n` only;

The chapter's figures are in ``rope_lib.figures.taylor``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._lazy import lazy_import
from ._validate import (
    MAX_DIM,
    check_positive_int,
    check_real_array,
    check_seed,
)

sp = lazy_import("sympy")
mpmath = lazy_import("mpmath")

__all__ = [
    "TERM_NAMES",
    "SecondOrderExpansion",
    "second_order_expansion",
    "score_model",
    "attention_output_model",
    "demo_point",
    "expansion_error",
    "term_sizes",
    "interaction_along_ray",
    "diagonal_spread",
    "loglog_slope",
]

#: Largest number of decimal digits of the mpmath evaluations (``dps``); 40 already resolve
#: remainders far below float64 round-off.
_MAX_DPS = 1000
#: Largest number of perturbation sizes ``eps`` along one ray (each costs an mpmath evaluation).
_MAX_EPS = 4096
#: Largest magnitude of an entry of ``point`` (base point and directions).  The checks are
#: about unit-scale inputs (:func:`demo_point`); at 1e300 the terms are ~1e300, every digit
#: of the remainder is lost to round-off, and the "remainder" comes back as 0.
_MAX_POINT = 1e6

#: The six terms of the expansion, in the order of the chapter's equation.
TERM_NAMES: tuple[str, ...] = (
    "constant",
    "linear_m",
    "linear_n",
    "quadratic_m",
    "quadratic_n",
    "cross",
)

#: Order of each term in the perturbation size: along p = eps * u a term scales as eps**order.
_ORDERS = {
    "constant": 0,
    "linear_m": 1,
    "linear_n": 1,
    "quadratic_m": 2,
    "quadratic_n": 2,
    "cross": 2,
}


def _symbols(values: Any, name: str) -> tuple[sp.Symbol, ...]:
    if isinstance(values, sp.Symbol):
        values = (values,)
    try:
        out = tuple(values)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of sympy symbols, got {values!r}") from None
    if not out or not all(isinstance(s, sp.Symbol) for s in out):
        raise TypeError(f"{name} must be a non-empty sequence of sympy symbols, got {values!r}")
    return out


def _check_perturbation_lengths(
    x_m: Sequence[sp.Symbol], x_n: Sequence[sp.Symbol], p_m: Sequence[Any], p_n: Sequence[Any]
) -> None:
    """One perturbation symbol per coordinate: ``len(p_m) == len(x_m)``, ``len(p_n) == len(x_n)``."""
    if len(p_m) != len(x_m) or len(p_n) != len(x_n):
        raise ValueError(
            f"p_m and p_n must have the lengths of x_m ({len(x_m)}) and x_n ({len(x_n)}), got "
            f"{len(p_m)} and {len(p_n)}"
        )


@dataclass(frozen=True)
class SecondOrderExpansion:
    r"""The second-order expansion of :math:`f` in the perturbations of two inputs.

    Attributes
    ----------
    f : sympy.Expr
        The model, a scalar expression in ``x_m``, ``x_n`` (and possibly other symbols).
    x_m, x_n : tuple of sympy.Symbol
        Coordinates of the two perturbed inputs.
    p_m, p_n : tuple of sympy.Symbol
        Coordinates of the perturbations (position vectors).
    grad_m, grad_n : sympy.Matrix
        :math:`\nabla_m f` and :math:`\nabla_n f`, column vectors.
    hess_mm, hess_nn, hess_mn : sympy.Matrix
        :math:`\mathcal H_{mm} = \partial^2 f/\partial x_m\partial x_m^\top`,
        :math:`\mathcal H_{nn} = \partial^2 f/\partial x_n\partial x_n^\top` and the mixed
        Hessian :math:`\mathcal H = \mathcal H_{mn} = \partial^2 f/\partial x_m\partial x_n^\top`
        (rows: :math:`x_m`).
    terms : dict
        The six terms keyed by :data:`TERM_NAMES`, each a sympy expression in ``x`` and ``p``.
    """

    f: sp.Expr
    x_m: tuple[sp.Symbol, ...]
    x_n: tuple[sp.Symbol, ...]
    p_m: tuple[sp.Symbol, ...]
    p_n: tuple[sp.Symbol, ...]
    grad_m: sp.Matrix
    grad_n: sp.Matrix
    hess_mm: sp.Matrix
    hess_nn: sp.Matrix
    hess_mn: sp.Matrix
    terms: dict[str, sp.Expr] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A hand-built instance with p_m one symbol short and p_n one long would otherwise
        # shift x_m's last coordinate by p_n's first in perturbed(): a silent wrong answer.
        _check_perturbation_lengths(self.x_m, self.x_n, self.p_m, self.p_n)

    def total(self) -> sp.Expr:
        """The second-order approximation: the sum of the six terms."""
        return sp.Add(*(self.terms[name] for name in TERM_NAMES))

    def perturbed(self) -> sp.Expr:
        r""":math:`\tilde f`: ``f`` with :math:`x_m \to x_m + p_m` and :math:`x_n \to x_n + p_n`."""
        shift = {x: x + p for x, p in zip(self.x_m + self.x_n, self.p_m + self.p_n, strict=True)}
        return self.f.subs(shift, simultaneous=True)

    def interaction(self) -> sp.Expr:
        r"""The exact interaction of the two perturbations,

        .. math:: \mathcal I(\boldsymbol p_m, \boldsymbol p_n)
                  = f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n + \boldsymbol p_n)
                  - f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n)
                  - f(\boldsymbol x_m, \boldsymbol x_n + \boldsymbol p_n)
                  + f(\boldsymbol x_m, \boldsymbol x_n).

        :math:`\tilde f = f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n) +
        f(\boldsymbol x_m, \boldsymbol x_n + \boldsymbol p_n) - f(\boldsymbol x_m,
        \boldsymbol x_n) + \mathcal I`: everything in :math:`\tilde f` that is not a sum of a
        function of :math:`\boldsymbol p_m` and a function of :math:`\boldsymbol p_n` is in
        :math:`\mathcal I`. Its second-order part is the cross term
        :math:`\boldsymbol p_m^\top \mathcal H \boldsymbol p_n`; unlike the remainder of the
        six-term expansion it holds no single-position terms of order three or higher.
        """
        shift_m = {x: x + p for x, p in zip(self.x_m, self.p_m, strict=True)}
        shift_n = {x: x + p for x, p in zip(self.x_n, self.p_n, strict=True)}
        only_m = self.f.subs(shift_m, simultaneous=True)
        only_n = self.f.subs(shift_n, simultaneous=True)
        return self.perturbed() - only_m - only_n + self.f

    def mixed_dependence(self) -> dict[str, sp.Matrix]:
        r"""For each term, the matrix :math:`\partial^2 (\text{term})/\partial p_m \partial
        p_n^\top`: zero unless the term couples the two positions (only ``"cross"``, where it
        is :math:`\mathcal H`)."""
        pm, pn = sp.Matrix(self.p_m), sp.Matrix(self.p_n)
        return {
            name: sp.Matrix(
                len(self.p_m), len(self.p_n), lambda i, j, t=term: sp.diff(t, pm[i], pn[j])
            )
            for name, term in self.terms.items()
        }


def second_order_expansion(
    f: sp.Expr,
    x_m: Sequence[sp.Symbol],
    x_n: Sequence[sp.Symbol],
    p_m: Sequence[sp.Symbol] | None = None,
    p_n: Sequence[sp.Symbol] | None = None,
) -> SecondOrderExpansion:
    r"""Second-order Taylor expansion of ``f`` in perturbations of the inputs ``x_m``, ``x_n``.

    .. math:: f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n + \boldsymbol p_n)
              = \underbrace{f}_{\text{constant}}
              + \underbrace{\boldsymbol p_m^\top \nabla_m f}_{\text{linear\_m}}
              + \underbrace{\boldsymbol p_n^\top \nabla_n f}_{\text{linear\_n}}
              + \underbrace{\tfrac12 \boldsymbol p_m^\top \mathcal H_{mm}
                \boldsymbol p_m}_{\text{quadratic\_m}}
              + \underbrace{\tfrac12 \boldsymbol p_n^\top \mathcal H_{nn}
                \boldsymbol p_n}_{\text{quadratic\_n}}
              + \underbrace{\boldsymbol p_m^\top \mathcal H \boldsymbol p_n}_{\text{cross}}
              + O(\lVert p\rVert^3),

    all derivatives taken at :math:`(\boldsymbol x_m, \boldsymbol x_n)`. The cross term carries
    the factor 1, not 1/2: the mixed block appears twice in the full quadratic form
    (:math:`\mathcal H` and :math:`\mathcal H^\top`).

    Parameters
    ----------
    f : sympy.Expr
        A scalar expression.
    x_m, x_n : sequence of sympy.Symbol
        The coordinates of the two inputs that receive position vectors (same length not
        required).
    p_m, p_n : sequence of sympy.Symbol, optional
        Symbols for the perturbations; default ``p_{m,i}`` and ``p_{n,i}``.

    Returns
    -------
    SecondOrderExpansion
    """
    if not isinstance(f, sp.Expr):
        raise TypeError(f"f must be a sympy expression, got {type(f).__name__}")
    x_m = _symbols(x_m, "x_m")
    x_n = _symbols(x_n, "x_n")
    if set(x_m) & set(x_n):
        raise ValueError("x_m and x_n must be disjoint sets of symbols")
    p_m = (
        _symbols(p_m, "p_m")
        if p_m is not None
        else tuple(sp.Symbol(f"p_{{m,{i}}}", real=True) for i in range(len(x_m)))
    )
    p_n = (
        _symbols(p_n, "p_n")
        if p_n is not None
        else tuple(sp.Symbol(f"p_{{n,{i}}}", real=True) for i in range(len(x_n)))
    )
    _check_perturbation_lengths(x_m, x_n, p_m, p_n)  # before the terms need it
    used = set(p_m) | set(p_n)
    if used & f.free_symbols or used & set(x_m + x_n) or len(used) != len(p_m) + len(p_n):
        raise ValueError("p_m and p_n must be new, distinct symbols that do not occur in f")
    vm, vn = sp.Matrix(x_m), sp.Matrix(x_n)
    pm, pn = sp.Matrix(p_m), sp.Matrix(p_n)
    grad_m = sp.Matrix([f]).jacobian(vm).T
    grad_n = sp.Matrix([f]).jacobian(vn).T
    hess_mm = grad_m.jacobian(vm)
    hess_nn = grad_n.jacobian(vn)
    hess_mn = grad_m.jacobian(vn)
    terms = {
        "constant": f,
        "linear_m": (pm.T * grad_m)[0, 0],
        "linear_n": (pn.T * grad_n)[0, 0],
        "quadratic_m": sp.Rational(1, 2) * (pm.T * hess_mm * pm)[0, 0],
        "quadratic_n": sp.Rational(1, 2) * (pn.T * hess_nn * pn)[0, 0],
        "cross": (pm.T * hess_mn * pn)[0, 0],
    }
    return SecondOrderExpansion(
        f=f,
        x_m=x_m,
        x_n=x_n,
        p_m=p_m,
        p_n=p_n,
        grad_m=grad_m,
        grad_n=grad_n,
        hess_mm=hess_mm,
        hess_nn=hess_nn,
        hess_mn=hess_mn,
        terms=terms,
    )


def _check_small_d(d: Any) -> int:
    d = check_positive_int(d, "d")
    if d > 4:
        raise ValueError(f"d must be between 1 and 4 (the models are symbolic), got {d}")
    return d


def _vector(name: str, d: int) -> tuple[sp.Symbol, ...]:
    return tuple(sp.Symbol(f"{name}_{{{i}}}", real=True) for i in range(d))


def score_model(
    d: int = 2,
) -> tuple[sp.Expr, tuple[sp.Symbol, ...], tuple[sp.Symbol, ...], sp.Matrix]:
    r"""The attention score of token :math:`m` (query) on token :math:`n` (key), symbolically.

    .. math:: s(\boldsymbol x_m, \boldsymbol x_n) = \frac{\boldsymbol x_m^\top \boldsymbol M
              \boldsymbol x_n}{\sqrt d}, \qquad \boldsymbol M = \boldsymbol W_q^\top
              \boldsymbol W_k,

    with a symbolic :math:`d \times d` matrix :math:`\boldsymbol M` (entries ``M_{ij}``); the
    model takes the head dimension equal to the model width, :math:`d = d_\text{model}`. The
    score is bilinear, so its second-order expansion is exact and :math:`\mathcal H =
    \boldsymbol M/\sqrt d`.

    Parameters
    ----------
    d : int
        Width, 1 to 4.

    Returns
    -------
    tuple
        ``(f, x_m, x_n, M)``.
    """
    d = _check_small_d(d)
    x_m, x_n = _vector("x_m", d), _vector("x_n", d)
    m = sp.Matrix(d, d, lambda i, j: sp.Symbol(f"M_{{{i}{j}}}", real=True))
    f = (sp.Matrix(x_m).T * m * sp.Matrix(x_n))[0, 0] / sp.sqrt(d)
    return f, x_m, x_n, m


def attention_output_model(
    d: int = 2, readout: Sequence[Any] | None = None
) -> tuple[sp.Expr, tuple[sp.Symbol, ...], tuple[sp.Symbol, ...]]:
    r"""A softmax-weighted attention output of two tokens, read out to a scalar.

    Token :math:`m` attends to itself and to token :math:`n`, with identity projections
    (:math:`\boldsymbol q = \boldsymbol k = \boldsymbol v = \boldsymbol x`):

    .. math:: f(\boldsymbol x_m, \boldsymbol x_n) = \boldsymbol c^\top
              \frac{e^{s_{mm}} \boldsymbol x_m + e^{s_{mn}} \boldsymbol x_n}
              {e^{s_{mm}} + e^{s_{mn}}},
              \qquad s_{mn} = \frac{\boldsymbol x_m^\top \boldsymbol x_n}{\sqrt d},

    with readout :math:`\boldsymbol c` (default all ones). The expression is built in the
    equivalent form :math:`\boldsymbol c^\top(\boldsymbol x_n + (\boldsymbol x_m -
    \boldsymbol x_n)/(1 + e^{s_{mn} - s_{mm}}))`, the two-way softmax written as a logistic
    function of the score difference. Unlike
    :func:`score_model`, ``f`` is not a polynomial: its Taylor series does not stop, and the
    second-order expansion leaves a remainder of third order.

    Parameters
    ----------
    d : int
        Width, 1 to 4.
    readout : sequence of numbers, optional
        The vector :math:`\boldsymbol c` of length ``d``.

    Returns
    -------
    tuple
        ``(f, x_m, x_n)``.
    """
    d = _check_small_d(d)
    if readout is None:
        c = sp.ones(d, 1)
    else:
        arr = check_real_array(readout, "readout")
        if arr.shape != (d,):
            raise ValueError(f"readout must have shape ({d},), got {arr.shape}")
        c = sp.Matrix([sp.nsimplify(v) for v in arr])
    x_m, x_n = _vector("x_m", d), _vector("x_n", d)
    vm, vn = sp.Matrix(x_m), sp.Matrix(x_n)
    s_mm = (vm.T * vm)[0, 0] / sp.sqrt(d)
    s_mn = (vm.T * vn)[0, 0] / sp.sqrt(d)
    # softmax over two scores is a logistic function of their difference; this form gives
    # sympy derivatives about three times smaller than the quotient of exponentials.
    weight_m = 1 / (1 + sp.exp(s_mn - s_mm))
    out = vn + weight_m * (vm - vn)
    return (c.T * out)[0, 0], x_m, x_n


def demo_point(d: int = 2, seed: int = 0) -> dict[str, np.ndarray]:
    r"""A base point and perturbation directions for the numerical checks.

    Returns the inputs :math:`\boldsymbol x_m, \boldsymbol x_n \sim \mathcal N(0,
    \boldsymbol I_d)` and unit directions :math:`\hat{\boldsymbol p}_m, \hat{\boldsymbol p}_n`
    (keys ``p_hat_m``, ``p_hat_n``); the perturbations are then :math:`\boldsymbol p_m =
    \varepsilon\hat{\boldsymbol p}_m`, :math:`\boldsymbol p_n = \varepsilon\hat{\boldsymbol
    p}_n`.

    Parameters
    ----------
    d : int
        Width of each vector, 1 to ``MAX_DIM`` (odd widths are fine: nothing rotates here).
    seed : int
        Seed, >= 0.

    Returns
    -------
    dict
        Keys ``"x_m"``, ``"x_n"``, ``"p_hat_m"``, ``"p_hat_n"``, each a float64 array of shape ``(d,)``.
    """
    d = check_positive_int(
        d, "d", maximum=MAX_DIM, hint="d is the model width, at most rope_lib's MAX_DIM"
    )
    seed = check_seed(seed)
    rng = np.random.default_rng([seed, 3])
    x_m, x_n, u_m, u_n = rng.standard_normal((4, d))
    return {
        "x_m": x_m,
        "x_n": x_n,
        "p_hat_m": u_m / np.linalg.norm(u_m),
        "p_hat_n": u_n / np.linalg.norm(u_n),
    }


def _point(point: dict[str, Any], key: str, size: int) -> np.ndarray:
    """``point[key]`` as a float64 vector of length ``size``; refusals name ``point['key']``."""
    name = f"point[{key!r}]"
    arr = check_real_array(point[key], name, max_abs=_MAX_POINT)
    if arr.shape != (size,):
        raise ValueError(
            f"{name} must have shape ({size},) (one entry per coordinate of the model's "
            f"x_{key[-1]}), got {arr.shape}"
        )
    return arr


def _eps(eps: Any) -> np.ndarray:
    arr = check_real_array(eps, "eps")
    if arr.ndim != 1 or arr.size == 0 or np.any(arr <= 0):
        raise ValueError("eps must be a non-empty 1-D array of positive perturbation sizes")
    if arr.size > _MAX_EPS:
        raise ValueError(
            f"eps must hold at most {_MAX_EPS} perturbation sizes (each is one mpmath "
            f"evaluation), got {arr.size}"
        )
    return arr


def _finite(values: list[float], what: str) -> np.ndarray:
    """The float64 results of an mpmath evaluation; refuse a point and eps whose results
    overflow."""
    out = np.array(values, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError(
            f"eps (with point) holds perturbation sizes so large that {what} overflows "
            "float64; use smaller eps or a smaller point"
        )
    return out


def _ray(expansion: SecondOrderExpansion, point: dict[str, Any], eps: Any, dps: int):
    """Validate the inputs of the numerical checks; return the numeric pieces."""
    if not isinstance(expansion, SecondOrderExpansion):
        raise TypeError(f"expansion must be a SecondOrderExpansion, got {type(expansion).__name__}")
    if not isinstance(point, dict):
        raise TypeError("point must be a dict with keys 'x_m', 'x_n', 'p_hat_m', 'p_hat_n'")
    missing = {"x_m", "x_n", "p_hat_m", "p_hat_n"} - set(point)
    if missing:
        raise ValueError(f"point is missing the keys {sorted(missing)}")
    dm, dn = len(expansion.x_m), len(expansion.x_n)
    x = np.concatenate([_point(point, "x_m", dm), _point(point, "x_n", dn)])
    u = np.concatenate([_point(point, "p_hat_m", dm), _point(point, "p_hat_n", dn)])
    eps = _eps(eps)
    dps = check_positive_int(
        dps,
        "dps",
        minimum=16,
        maximum=_MAX_DPS,
        hint="decimal digits of the mpmath evaluation; 40 resolve remainders down to 1e-30",
    )
    extra = expansion.f.free_symbols - set(expansion.x_m + expansion.x_n)
    if extra:
        raise ValueError(
            f"the model has free symbols besides x_m and x_n: {sorted(map(str, extra))}; "
            "substitute numbers for them first"
        )
    return x, u, eps, dps


def _evaluate(
    expansion: SecondOrderExpansion, point: dict[str, Any], eps: Any, dps: int
) -> dict[str, np.ndarray]:
    r"""The six terms and :math:`\tilde f` at :math:`x = x_0`, :math:`p = \varepsilon u`.

    The derivatives are evaluated once at the base point; along the ray each term is then
    (its value at :math:`\varepsilon = 1`) times :math:`\varepsilon^k`, :math:`k` its order.
    Only :math:`\tilde f` is evaluated at every :math:`\varepsilon`. All in mpmath with ``dps``
    digits.
    """
    x, u, eps, dps = _ray(expansion, point, eps, dps)
    args = expansion.x_m + expansion.x_n + expansion.p_m + expansion.p_n
    f = sp.lambdify(expansion.x_m + expansion.x_n, expansion.f, modules="mpmath")
    with mpmath.workdps(dps):
        xs = [mpmath.mpf(float(v)) for v in x]
        us = [mpmath.mpf(float(v)) for v in u]
        units = {
            name: sp.lambdify(args, expansion.terms[name], modules="mpmath", cse=True)(*xs, *us)
            for name in TERM_NAMES
        }
        terms: dict[str, list] = {name: [] for name in TERM_NAMES}
        exact, remainder = [], []
        for e in eps:
            e_mp = mpmath.mpf(float(e))
            values = {n: units[n] * e_mp ** _ORDERS[n] for n in TERM_NAMES}
            value = f(*[xi + e_mp * ui for xi, ui in zip(xs, us, strict=True)])
            for n in TERM_NAMES:
                terms[n].append(float(values[n]))
            exact.append(float(value))
            remainder.append(float(abs(value - mpmath.fsum(values.values()))))
    out = {n: _finite(v, f"the term {n!r}") for n, v in terms.items()}
    out["exact"] = _finite(exact, "the model")
    out["remainder"] = _finite(remainder, "the remainder")
    return out


def expansion_error(
    expansion: SecondOrderExpansion, point: dict[str, Any], eps: Any, dps: int = 40
) -> np.ndarray:
    r"""The remainder of the second-order expansion along a ray.

    .. math:: r(\varepsilon) = \big|\tilde f(\varepsilon) - \textstyle\sum_{\text{six terms}}
              (\varepsilon)\big|, \qquad \boldsymbol p_m = \varepsilon \hat{\boldsymbol p}_m,\;
              \boldsymbol p_n = \varepsilon \hat{\boldsymbol p}_n,

    evaluated with ``dps`` significant digits (mpmath), so that round-off never hides a
    remainder as small as :math:`10^{-20}`. For a smooth ``f``, :math:`r = O(\varepsilon^3)` as
    :math:`\varepsilon \to 0`.

    Parameters
    ----------
    expansion : SecondOrderExpansion
        From :func:`second_order_expansion`; its ``f`` may contain no symbols besides
        :math:`x` and :math:`p`.
    point : dict
        ``x_m``, ``x_n`` (base point) and ``p_hat_m``, ``p_hat_n`` (the unit directions
        :math:`\hat{\boldsymbol p}_m, \hat{\boldsymbol p}_n`), as from
        :func:`demo_point`: finite vectors of the model's widths, entries of magnitude at
        most 1e6 (beyond that the remainder drowns in round-off of the large terms and
        would come back as 0); refusals name the entry, e.g. ``point['x_m']``.
    eps : array_like
        Positive perturbation sizes :math:`\varepsilon`, at most 4096 of them; sizes so large
        that a result overflows float64 are refused.
    dps : int
        Decimal digits of the mpmath evaluation, 16 to 1000.

    Returns
    -------
    numpy.ndarray
        float64 array of :math:`r(\varepsilon)`, one per ``eps``.
    """
    return _evaluate(expansion, point, eps, dps)["remainder"]


def term_sizes(
    expansion: SecondOrderExpansion, point: dict[str, Any], eps: Any, dps: int = 40
) -> dict[str, np.ndarray]:
    r"""Absolute value of each of the six terms, and of the remainder, along a ray.

    Parameters and ray as in :func:`expansion_error`.

    Returns
    -------
    dict
        Keys :data:`TERM_NAMES` and ``"remainder"``; values float64 arrays. Along the ray a
        linear term scales like :math:`\varepsilon`, a quadratic or cross term like
        :math:`\varepsilon^2`, and the remainder of a smooth model like :math:`\varepsilon^3`
        as :math:`\varepsilon \to 0` (for large :math:`\varepsilon` it can grow more
        slowly).
    """
    values = _evaluate(expansion, point, eps, dps)
    out = {name: np.abs(values[name]) for name in TERM_NAMES}
    out["remainder"] = values["remainder"]
    return out


def interaction_along_ray(
    expansion: SecondOrderExpansion, point: dict[str, Any], eps: Any, dps: int = 40
) -> dict[str, np.ndarray]:
    r"""The exact interaction of the two positions against the cross term, along a ray.

    With :math:`\boldsymbol p_m = \varepsilon \hat{\boldsymbol p}_m`, :math:`\boldsymbol p_n =
    \varepsilon \hat{\boldsymbol p}_n`,

    .. math:: \mathcal I(\varepsilon) = f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n +
              \boldsymbol p_n) - f(\boldsymbol x_m + \boldsymbol p_m, \boldsymbol x_n)
              - f(\boldsymbol x_m, \boldsymbol x_n + \boldsymbol p_n)
              + f(\boldsymbol x_m, \boldsymbol x_n),
              \qquad \mathcal I_2(\varepsilon) = \boldsymbol p_m^\top \mathcal H \boldsymbol p_n,

    both evaluated with ``dps`` significant digits (mpmath). :math:`\mathcal I` is the whole
    part of :math:`\tilde f` that couples the two positions
    (:meth:`SecondOrderExpansion.interaction`), and :math:`\mathcal I_2` is its second-order
    part, the cross term; :math:`\mathcal I - \mathcal I_2 = O(\varepsilon^3)` is the coupling
    that the cross term misses. Unlike the remainder of :func:`expansion_error` it contains no
    single-position terms.

    Parameters
    ----------
    expansion, point, eps, dps
        As in :func:`expansion_error`.

    Returns
    -------
    dict
        ``"interaction"``: :math:`\mathcal I(\varepsilon)`; ``"cross"``:
        :math:`\mathcal I_2(\varepsilon)` (both signed); ``"beyond_cross"``:
        :math:`|\mathcal I(\varepsilon) - \mathcal I_2(\varepsilon)|`. Each a
        float64 array, one entry per ``eps``.
    """
    x, u, eps, dps = _ray(expansion, point, eps, dps)
    dm = len(expansion.x_m)
    args = expansion.x_m + expansion.x_n + expansion.p_m + expansion.p_n
    f = sp.lambdify(expansion.x_m + expansion.x_n, expansion.f, modules="mpmath")
    cross_unit = sp.lambdify(args, expansion.terms["cross"], modules="mpmath", cse=True)
    interaction, cross, beyond = [], [], []
    with mpmath.workdps(dps):
        xs = [mpmath.mpf(float(v)) for v in x]
        us = [mpmath.mpf(float(v)) for v in u]
        c1 = cross_unit(*xs, *us)
        base = f(*xs)
        for e in eps:
            e_mp = mpmath.mpf(float(e))
            moved = [xi + e_mp * ui for xi, ui in zip(xs, us, strict=True)]
            value = f(*moved) - f(*moved[:dm], *xs[dm:]) - f(*xs[:dm], *moved[dm:]) + base
            c = c1 * e_mp**2
            interaction.append(float(value))
            cross.append(float(c))
            beyond.append(float(abs(value - c)))
    return {
        "interaction": _finite(interaction, "the interaction"),
        "cross": _finite(cross, "the cross term"),
        "beyond_cross": _finite(beyond, "the interaction beyond the cross term"),
    }


def diagonal_spread(gram: Any) -> float:
    r"""Largest spread of a square matrix along its diagonals :math:`m - n = \text{const}`.

    .. math:: \max_{k} \Big(\max_{m - n = k} G_{mn} - \min_{m - n = k} G_{mn}\Big),

    which is zero exactly when :math:`G_{mn}` depends on :math:`m - n` only (a Toeplitz
    matrix), for instance when :math:`G_{mn} = \langle \boldsymbol p_m, \boldsymbol p_n
    \rangle = g(m - n)`.

    Parameters
    ----------
    gram : array_like
        A real square matrix, shape ``(N, N)`` with ``N >= 1``.

    Returns
    -------
    float
    """
    g = check_real_array(gram, "gram")
    if g.ndim != 2 or g.shape[0] != g.shape[1] or g.shape[0] == 0:
        raise ValueError(f"gram must be a non-empty square matrix, got shape {g.shape}")
    size = g.shape[0]
    return float(max(np.ptp(np.diagonal(g, offset=k)) for k in range(-size + 1, size)))


def loglog_slope(eps: Any, err: Any) -> float:
    r"""Least-squares slope of :math:`\log r` against :math:`\log \varepsilon`.

    .. math:: \hat k = \frac{\sum_j (\ell_j - \bar\ell)(e_j - \bar e)}
              {\sum_j (\ell_j - \bar\ell)^2}, \qquad \ell_j = \log\varepsilon_j,\;
              e_j = \log r_j .

    A remainder :math:`r \approx C\varepsilon^k` gives :math:`\hat k \approx k`.

    Parameters
    ----------
    eps, err : array_like
        Positive values of the same shape, at least two distinct ``eps``.

    Returns
    -------
    float
    """
    e = check_real_array(eps, "eps")
    r = check_real_array(err, "err")
    if e.ndim != 1 or e.shape != r.shape or e.size < 2:
        raise ValueError(
            f"eps and err must be 1-D arrays of the same length >= 2, got {e.shape}, {r.shape}"
        )
    if np.any(e <= 0) or np.any(r <= 0):
        raise ValueError("eps and err must be positive (their logarithms are fitted)")
    if np.ptp(e) == 0:
        raise ValueError("eps must hold at least two distinct values")
    slope, _ = np.polyfit(np.log(e), np.log(r), 1)
    return float(slope)
