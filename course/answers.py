"""Which exercises get a self-check in the student edition, and how their answers are read.

Each :class:`Answer` names an exercise label, the variable a student fills in, a Python
expression that the generator evaluates in the *book's* kernel right after that exercise's
solution (so the expected value comes from the book's own solution code; most solutions assert
their result against an independent route, and tests/test_student.py checks nine answers
against values it computes without rope_lib), the kind and precision of each value, and the prompt shown
in the answer cell. Exercises whose answer is a proof, a formula or a free choice (for
example "find two positions such that ...") have no entry.
"""

from __future__ import annotations

import keyword
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """How one value of an answer is compared.

    Parameters
    ----------
    type : {"bool", "int", "float"}
        Booleans and integers are compared exactly.
    abs : float, optional
        For floats: the absolute precision (the quantum the value is rounded to).
    rel : float, optional
        For floats: the relative precision instead (the value is rounded on a
        logarithmic grid with steps of ``1 + rel``); the value must not be zero.
    """

    type: str
    abs: float | None = None
    rel: float | None = None

    def __post_init__(self) -> None:
        if self.type not in ("bool", "int", "float"):
            raise ValueError(f"Kind.type must be 'bool', 'int' or 'float', got {self.type!r}")
        if self.type == "float":
            given = [v for v in (self.abs, self.rel) if v is not None]
            if len(given) != 1 or not (math.isfinite(given[0]) and given[0] > 0):
                raise ValueError(
                    "a float Kind needs exactly one of abs= or rel=, a positive finite number; "
                    f"got abs={self.abs!r}, rel={self.rel!r}"
                )
        elif self.abs is not None or self.rel is not None:
            raise ValueError(f"Kind {self.type!r} takes no precision (abs=, rel=)")

    def describe(self) -> str:
        """Say in words what a student should enter, e.g. ``"float to 0.01"``."""
        if self.type == "bool":
            return "True/False"
        if self.type == "int":
            return "int"
        if self.abs is not None:
            return f"float to {self.abs:g}"
        return f"float to {self.rel * 100:g} %"


BOOL = Kind("bool")
INT = Kind("int")


def to(quantum: float) -> Kind:
    """A float compared to the absolute precision ``quantum``."""
    return Kind("float", abs=quantum)


def rel(fraction: float) -> Kind:
    """A float compared to the relative precision ``fraction`` (0.01 is 1 %)."""
    return Kind("float", rel=fraction)


@dataclass(frozen=True)
class Answer:
    """The self-check of one exercise.

    Parameters
    ----------
    label : str
        The exercise label, e.g. ``"ex-decay-1"``.
    name : str
        The variable the student assigns in the answer cell.
    expr : str
        A Python expression evaluated in the book's kernel right after the solution; its
        value is the expected answer (a scalar, or a tuple with one value per kind).
    kinds : tuple of Kind
        One kind per value; more than one means the answer is a tuple.
    prompt : str
        What the value is, shown after ``# your answer:`` (the kinds are appended).
    """

    label: str
    name: str
    expr: str
    kinds: tuple[Kind, ...]
    prompt: str

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise ValueError(
                f"Answer {self.label}: name must be a Python identifier, got {self.name!r}"
            )
        if not self.kinds:
            raise ValueError(f"Answer {self.label}: kinds must name at least one Kind")

    def describe(self) -> str:
        """The full prompt: what the value is and what to enter."""
        kinds = [k.describe() for k in self.kinds]
        if len(kinds) == 1:
            return f"{self.prompt} [{kinds[0]}]"
        if len(set(kinds)) == 1:
            many = {"True/False": "True/False values", "int": "ints"}.get(kinds[0])
            many = many or kinds[0].replace("float", "floats", 1)
            return f"{self.prompt} [tuple of {len(kinds)} {many}]"
        return f"{self.prompt} [tuple: {', '.join(kinds)}]"


def _answers(*answers: Answer) -> dict[str, Answer]:
    table: dict[str, Answer] = {}
    for answer in answers:
        if answer.label in table:
            raise ValueError(f"exercise {answer.label} has two Answer entries")
        table[answer.label] = answer
    return table


ANSWERS: dict[str, Answer] = _answers(
    # 1 symmetry
    Answer(
        "ex-sym-equal-positions",
        "same_output",
        'bool(np.allclose(a.row("this"), b.row("this"), rtol=0, atol=1e-14))',
        (BOOL,),
        'is the output of "this" the same in both orders?',
    ),
    Answer(
        "ex-sym-causal",
        "last_token_unchanged",
        "(all(np.allclose(rope_lib.self_attention(x[[*p, 3]], *w, causal=True)[3],"
        " out[3], rtol=0, atol=1e-13) for p in itertools.permutations(range(3))),"
        " bool(max(stacked) < 1e-12))",
        (BOOL, BOOL),
        "is the last token's output unchanged by every reordering of the tokens"
        " before it, (after one causal layer, after two causal layers)?",
    ),
    # 2 taylor
    Answer(
        "ex-tay-affine",
        "n_solutions",
        "len(solutions)",
        (INT,),
        "number of independent solutions of the 36 equations on the window"
        " (the dimension of the solution space)",
    ),
    Answer(
        "ex-tay-interaction",
        "product_factor",
        "int(sp.Poly(sp.expand(product.interaction()), pm, pn).coeff_monomial(pm * pn))",
        (INT,),
        "for f = x_m x_n, the coefficient of p_m p_n in the interaction (calligraphic I)",
    ),
    Answer(
        "ex-tay-order",
        "remainder_order",
        "int(round(slope))",
        (INT,),
        "the order of the remainder of the attention outputs (the log-log slope"
        " you measure, rounded to an integer)",
    ),
    Answer(
        "ex-tay-dense-h",
        "relative_only",
        'tuple(bool(spread[k] < 1e-12) for k in ("identity", "diagonal", "dense"))',
        (BOOL, BOOL, BOOL),
        "does G depend on m - n only (spread zero up to round-off), for"
        " (a) H = I, (b) diagonal H, (c) dense H?",
    ),
    # 3 sinusoidal
    Answer(
        "ex-sinusoidal-1",
        "vaswani_r_phi0",
        "(float(sp.Abs(at_vaswani.subs(m_r, 0))), float(sp.arg(at_vaswani.subs(m_r, 0))))",
        (to(1e-3), to(1e-3)),
        "r and phi_0 (in radians, in (-pi, pi]) of the clockwise solution that"
        " gives Vaswani's pairs",
    ),
    Answer(
        "ex-sinusoidal-2",
        "closest_pair",
        "(float(np.sqrt(sq.min())), int(np.abs(closest[:, 0] - closest[:, 1]).max()))",
        (to(1e-4), INT),
        "the smallest distance |p_m - p_n| among positions 0..999, and |m - n|"
        " of the pairs at that distance",
    ),
    Answer(
        "ex-sinusoidal-reflection",
        "reflection_keeps",
        "(bool(np.ptp(np.abs(0.8 + 0.6j * (-1.0) ** np.arange(6))) < 1e-12),"
        " not bool(np.ptp(np.mod(steps - steps[0] + np.pi, 2 * np.pi)) > 1))",
        (BOOL, BOOL),
        "for mu = 0.8, nu = 0.6: does p_m keep (a constant length, a phase that"
        " grows linearly in m)?",
    ),
    # 4 rope
    Answer(
        "ex-rope-2",
        "lam_relative",
        "float(sp.solve(sp.Eq(ratio.subs({m_r: 3, n_r: 1}),"
        " ratio.subs({m_r: 5, n_r: 3})), lam)[0])",
        (to(1e-3),),
        "the lambda > 0 for which the product depends on m - n only",
    ),
    Answer(
        "ex-rope-3",
        "scores_agree",
        "(bool(np.ptp(rope_scores) < 1e-8), bool(np.ptp(additive) < 1e-8))",
        (BOOL, BOOL),
        "do the five scores agree to 1e-8, for (RoPE, the additive sinusoidal encoding)?",
    ),
    Answer(
        "ex-rope-reflection",
        "conditions_hold",
        "(bool(real_spread < 1e-12), bool(complex_spread < 1e-12))",
        (BOOL, BOOL),
        "does f(q, m) = F^m q satisfy (the real condition, the complex condition)?",
    ),
    Answer(
        "ex-rope-feature-order",
        "constant_diagonals",
        '(bool(spread["rotation first"] < 1e-12), bool(spread["feature map first"] < 1e-12))',
        (BOOL, BOOL),
        "is the weight matrix constant along its diagonals, for (rotation first,"
        " feature map first)?",
    ),
    # 5 rope implementations
    Answer(
        "ex-ropeimpl-1",
        "sigma_inv",
        "tuple(int(i) for i in p_inv)",
        (INT,) * 8,
        "sigma^-1 for d = 8, the index of each interleaved coordinate in the half layout",
    ),
    Answer(
        "ex-ropeimpl-2",
        "error_128k",
        "float(at_128k)",
        (rel(0.01),),
        'the table error of the "float32" recipe at m = 2**17 (d = 128, b = 1e4)',
    ),
    Answer(
        "ex-ropeimpl-4",
        "bfloat16_counts",
        "(int(n_distinct), int(step))",
        (INT, INT),
        "(number of distinct bfloat16 values of the integers 0..8191, spacing of"
        " bfloat16 numbers near 1e5)",
    ),
    Answer(
        "ex-ropeimpl-5",
        "changes_at_0",
        "tuple(bool(np.diagonal(np.abs(tries[k] - original), axis1=1, axis2=2).max()"
        ' / np.abs(original).max() > 1e-2) for k in ("right", "W_k per n_heads",'
        ' "biases kept"))',
        (BOOL, BOOL, BOOL),
        "does the conversion change the distance-0 scores by more than 1 % of the"
        " largest score, for (the right conversion, W_k permuted per n_heads,"
        " biases left alone)?",
    ),
    # 6 decay
    Answer(
        "ex-decay-1",
        "first_negative",
        "tuple(int(np.argmax(rope_lib.ones_score(xs, d) < 0)) for d in (32, 64, 128, 256))",
        (INT,) * 4,
        "the first integer distance at which g(x) is negative, for d = 32, 64, 128, 256",
    ),
    Answer(
        "ex-decay-2",
        "best_x",
        "int(best)",
        (INT,),
        "the integer x in 1..4999 at which g is largest",
    ),
    Answer(
        "ex-decay-4",
        "sbar_levels",
        "(float(rope_lib.roformer_bound(0, d)), float(model))",
        (to(0.01), to(0.1)),
        "for d = 64: (S(0), the level at which S(x) settles by your random-walk estimate)",
    ),
    Answer(
        "ex-decay-abel-ones",
        "smallest_bound",
        "tuple(float(decay.abel_bound(np.ones(d), np.ones(d), xs).min())"
        " for d in (16, 64, 128, 256))",
        (to(0.01),) * 4,
        "the smallest Abel bound over x = 0..1e5, for d = 16, 64, 128, 256",
    ),
    Answer(
        "ex-decay-first-zero",
        "first_zeros",
        "tuple(float(brentq(lambda v, b=b: decay.integral_score(v, 2, b),"
        " 0.5 * b, 0.7 * b)) for b in (1e3, 1e4, 1e5, 1e6))",
        (to(0.01),) * 4,
        "the first zero x_0(b) of the continuum score, for b = 1e3, 1e4, 1e5, 1e6",
    ),
    # 7 base bound
    Answer(
        "ex-bb-2",
        "half_rotation",
        "(bool(worst >= -1e-9), int(bb.max_context(b, d)))",
        (BOOL, INT),
        "d = 128, b = 1e4: (is B_m >= 0 for every m < 1e6 with half the pairs"
        " rotated?, the horizon of full rotation: the first m with B_m < 0)",
    ),
    Answer(
        "ex-bb-3",
        "grid_check",
        "(bool(bb.base_is_feasible(rounded, L)), float(g))",
        (BOOL, rel(1e-3)),
        "L = 4096, d = 128: (is min_base(L) rounded to two digits feasible?, the"
        " base the two-digit grid search returns)",
    ),
    Answer(
        "ex-bb-4",
        "horizon_2_17",
        'int(next(h for h, r in zip(horizons, rows) if r["L"] == 2**17))',
        (INT,),
        "the horizon max_context(min_base(L)) for L = 2**17",
    ),
    Answer(
        "ex-bb-5",
        "ci_first_zero",
        "float(c0)",
        (to(1e-4),),
        "c_0, the first zero of Ci",
    ),
    Answer(
        "ex-bb-6",
        "power_law",
        "(float(np.exp(intercept)), float(slope))",
        (rel(0.01), to(1e-3)),
        "the least-squares fit b = C L^p to the exact table, (C, p)",
    ),
    # 8 context extension
    Answer(
        "ex-ce-1",
        "interpolation_horizons",
        '(int(h0), *(int(ce.scaled_horizon(128, 1e4, "linear", float(s))) for s in (2, 4, 8)))',
        (INT,) * 4,
        "the horizon of position interpolation for s = 1 (the original), 2, 4, 8",
    ),
    Answer(
        "ex-ce-2",
        "slowest_pair",
        "(float(th[-1] / plain[-1]),"
        " int((partial & (s * L * plain > L * th * (1 + 1e-9))).sum()),"
        " int((partial & (s * L * ntk_theta > L * th * (1 + 1e-9))).sum()))",
        (to(1e-4), INT, INT),
        "d = 128, s = 8: (the factor by which the base b*s interpolates the"
        " slowest pair, the number of slow pairs of the running example beyond"
        " their arc with base b*s, and with base b*s**(d/(d-2)))",
    ),
    Answer(
        "ex-ce-3",
        "ell_full",
        "int(ell)",
        (INT,),
        "the sequence length at which dynamic NTK uses the factor s itself, for L = 4096 and s = 4",
    ),
    Answer(
        "ex-ce-4",
        "llama_horizons",
        "(int(hs[0]), int(first), all(a < b for a, b in zip(hs, hs[1:])))",
        (INT, INT, BOOL),
        "(the horizon of Llama 3.1's frequencies, the smallest integer s in 8..16"
        " whose horizon reaches 131,072, does the horizon grow with s on 8..16?)",
    ),
    # 9 experiments
    Answer(
        "ex-ex-far-share",
        "far_fraction",
        "far_share",
        (to(0.001),),
        "the fraction of log-uniform training distances above L/2 for L = 1024",
    ),
    Answer(
        "ex-ex-p1",
        "p1_order_survives",
        "bool(long[1e5] > long[10**4.5])",
        (BOOL,),
        "after 5000 training steps, does base 1e5 still reach farther than base 10^4.5?",
    ),
    Answer(
        "ex-ex-recency",
        "latest_at_17",
        "p_latest(17)",
        (to(0.001),),
        "the probability that the target is the latest needle at distance 17",
    ),
)
