"""The public API's argument contract, checked for every name in ``rope_lib.__all__``.

Every public function declares here, argument by argument, what kind of value it takes
(a head dimension, a base, integer positions, a flag, ...).  For each argument the test
feeds a family of bad values of that kind (wrong type, NaN, infinity, negative, zero,
huge, empty, unsigned, misspelled) with every other argument valid, and requires one of:

* a ``ValueError`` or ``TypeError`` whose message names the argument, or
* for values that are merely unusual forms of a valid one (unsigned or float-held
  integers, a tuple instead of an array), the same result as the canonical form;

never another exception, never a hang (each call has a time limit), never a call that
allocates beyond the documented limits (each call runs under an address-space cap),
and never a change to an input array.  A public function or argument that is not
declared here fails the test, so a new function cannot skip its contract.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import resource
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rope_lib

# ------------------------------------------------------------------ bad-value families

#: For each kind, values that must be refused with an error naming the argument.
BAD: dict[str, list[Any]] = {
    "dim": [3, 0, -2, 2.5, "8", None, True, float("nan"), 10**9, [8]],
    "base": [1.0, 0.5, -3.0, 0, float("nan"), float("inf"), "1e4", True, None, [1e4]],
    "positions": [
        [0, 1.5],
        [0, float("nan")],
        [0, float("inf")],
        np.array([0, 2**64 - 1], dtype=np.uint64),
        [0, 2**60 + 1],
        [0, 2**70],
        [True, False],
        ["a", "b"],
        "01",
        None,
        object(),
    ],
    "position": [2.5, float("nan"), 2**70, 2**60 + 1, "3", True, None, object()],
    "distance": [
        [0.0, float("nan")],
        [0.0, float("inf")],
        [0.0, 1e300],
        [True, False],
        "ab",
        None,
        object(),
        [0, 2**70],
    ],
    "count": [0, -1, 2.5, "10", True, None, float("nan"), 10**15],
    "count0": [-1, 2.5, "10", True, None, float("nan"), 10**15],
    "seed": [-1, 2.5, "0", True, None, float("nan")],
    "flag": ["no", "", 0, 1, None, 2.0],
    "choice": ["bogus", "", None, 3, ["half"]],
    "real": [float("nan"), float("inf"), "a", True, None, [1.0]],
    "array": [None, "abc", object(), np.array([[1 + 1j, 2j]])],
    "other": [object()],
}

#: Unusual but valid forms of a kind: (transform of the canonical value, comparable?).
EQUIVALENT: dict[str, list[Callable[[Any], Any]]] = {
    "positions": [
        lambda p: np.asarray(p, dtype=np.uint16),
        lambda p: np.asarray(p, dtype=np.float64),
        lambda p: tuple(int(v) for v in np.ravel(p)) if np.ndim(p) == 1 else p,
        lambda p: torch.as_tensor(np.asarray(p)),
    ],
    "position": [lambda m: np.int32(m), lambda m: float(m)],
    "dim": [lambda d: np.int64(d)],
    "base": [lambda b: np.float32(b) if float(np.float32(b)) == b else b, lambda b: int(b)],
    "count": [lambda n: np.int64(n)],
}


@dataclass
class Contract:
    """How to call one public function: valid arguments and the kind of each argument."""

    valid: dict[str, Any]
    kinds: dict[str, str]
    #: extra bad values per argument (range violations specific to the function)
    extra_bad: dict[str, list[Any]] = field(default_factory=dict)
    #: bad values of the kind family that this function legitimately accepts
    allowed: dict[str, list[Any]] = field(default_factory=dict)


def _x(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _expansion() -> Any:
    f, xm, xn = rope_lib.attention_output_model(1)
    return rope_lib.second_order_expansion(f, xm, xn)


SMALL_ROWS = rope_lib.min_base_table((10, 11), d=128)

# Kinds by argument name: one name, one meaning across the library.
BY_NAME = {
    "d": "dim",
    "base": "base",
    "positions": "positions",
    "m_positions": "positions",
    "n_positions": "positions",
    "distance": "distance",
    "seed": "seed",
    "position_seed": "seed",
    "causal": "flag",
    "use_cache": "flag",
    "with_positions": "flag",
    "exact": "flag",
    "interaction": "flag",
    "layout": "choice",
    "recipe": "choice",
    "kind": "choice",
    "method": "choice",
    "to": "choice",
    "schedule": "choice",
    "n_samples": "count",
    "repeats": "count",
    "num": "count",
    "n_points": "count",
    "n_bases": "count",
    "length": "count",
    "limit": "count",
    "max_steps": "count",
    "levels": "count",
    "dps": "count",
    "n_vectors": "count",
    "end": "count",
    "max_position": "count",
    "context_length": "count",
    "n_heads": "count",
    "n_kv_heads": "count",
    "n_tokens": "count",
    "original_context": "count",
    "batch": "count",
    "heads": "count",
    "N": "count",
    "offset": "count0",
    "token": "count0",
    "step": "count",
    "digits": "count",
    "rho": "real",
    "eps_scale": "real",
    "confidence": "real",
    "sigma": "real",
    "factor": "real",
    "scale": "real",
    "position_scale": "real",
    "theta_2d": "real",
    "alpha": "real",
    "atol": "real",
    "rel_step": "real",
    "rel_span": "real",
    "start": "real",
    "start_factor": "real",
    "fit_max": "real",
    "short_max": "real",
    "long_max": "real",
}


def C(valid: dict[str, Any], **kinds: str) -> Contract:
    return Contract(valid=valid, kinds=kinds)


# The declared contracts.  ``kinds`` lists only what BY_NAME does not already say.
CONTRACTS: dict[str, Contract] = {
    "theta": C({"d": 8}),
    "vanishes": C({"expr": sp.Integer(0)}, expr="other"),
    "softmax": C({"scores": _x(3, 4)}, scores="array", axis="other"),
    "attention_weights": C({"q": _x(3, 4), "k": _x(5, 4)}, q="array", k="array"),
    "scaled_dot_product_attention": C(
        {"q": _x(3, 4), "k": _x(5, 4), "v": _x(5, 2)}, q="array", k="array", v="array"
    ),
    "self_attention": C(
        {"x": _x(5, 3), "w_q": _x(3, 3), "w_k": _x(3, 3), "w_v": _x(3, 3)},
        x="array",
        w_q="array",
        w_k="array",
        w_v="array",
    ),
    "equivariance_gap": C(
        {"x": _x(4, 3), "perm": [1, 0, 3, 2], "w_q": _x(3, 3), "w_k": _x(3, 3), "w_v": _x(3, 3)},
        x="array",
        perm="other",
        w_q="array",
        w_k="array",
        w_v="array",
    ),
    "word_embeddings": C({"words": ["this", "is"]}, words="other"),
    "demo_projections": C({}),
    "random_positions": C({"n_positions": 3}, n_positions="count"),
    "sentence_attention": C({"words": "this is awesome"}, words="other"),
    "symbolic_attention_row": C(
        {
            "query": sp.Matrix([1]),
            "tokens": [sp.Matrix([1]), sp.Matrix([2])],
            "w_q": sp.Matrix([[1]]),
            "w_k": sp.Matrix([[1]]),
            "w_v": sp.Matrix([[1]]),
        },
        query="other",
        tokens="other",
        w_q="other",
        w_k="other",
        w_v="other",
    ),
    "symbolic_invariance": C({"n_tokens": 3, "d": 1}),
    "symbolic_equivariance": C({"perm": [1, 0, 2], "d": 1}, perm="other"),
    "plot_reordering_weights": C({}, words="other", order="other"),
    "plot_token_output": C({}, words="other", order="other", token="other"),
    "second_order_expansion": C(
        {"f": sp.Symbol("a") * sp.Symbol("b"), "x_m": [sp.Symbol("a")], "x_n": [sp.Symbol("b")]},
        f="other",
        x_m="other",
        x_n="other",
        p_m="other",
        p_n="other",
    ),
    "score_model": C({"d": 2}),
    "attention_output_model": C({"d": 1}, readout="other"),
    "demo_point": C({"d": 2}),
    "expansion_error": C(
        {"expansion": _expansion(), "point": rope_lib.demo_point(1), "eps": [1e-3, 1e-2]},
        expansion="other",
        point="other",
        eps="array",
    ),
    "term_sizes": C(
        {"expansion": _expansion(), "point": rope_lib.demo_point(1), "eps": [1e-3, 1e-2]},
        expansion="other",
        point="other",
        eps="array",
    ),
    "interaction_along_ray": C(
        {"expansion": _expansion(), "point": rope_lib.demo_point(1), "eps": [1e-3, 1e-2]},
        expansion="other",
        point="other",
        eps="array",
    ),
    "diagonal_spread": C({"gram": _x(4, 4)}, gram="array"),
    "loglog_slope": C(
        {"eps": [1e-3, 1e-2, 1e-1], "err": [1e-9, 1e-6, 1e-3]}, eps="array", err="array"
    ),
    "plot_error_order": C({}, expansion="other", point="other", eps="array"),
    "plot_term_sizes": C({}, expansion="other", point="other", eps="array"),
    "sinusoidal": C({"positions": [0, 1, 2], "d": 8}),
    "complex_encoding": C({"positions": [0, 1, 2], "d": 8}),
    "cos_sin_encoding": C({"positions": [0, 1, 2], "d": 8}),
    "vaswani_permutation": C({"d": 8}),
    "gram_matrix": C({"m_positions": [0, 1, 2], "d": 8}),
    "diagonal_h_score": C(
        {"m": [0, 1], "n": [2, 3], "h": np.ones(8)}, m="positions", n="positions", h="array"
    ),
    "diagonal_h_parts": C(
        {"m": [0, 1], "n": [2, 3], "h": np.ones(8)}, m="positions", n="positions", h="array"
    ),
    "shift_matrix": C({"k": 3, "d": 8}, k="position"),
    "shift_isometry": C({"vectors": rope_lib.sinusoidal(np.arange(12), 4, 10.0)}, vectors="array"),
    "orthogonal_normal_form": C({"u": np.eye(4)}, u="array"),
    "symbolic_encoding": C({"position": "m", "d": 4}, position="other", symbol="other"),
    "plot_inner_products": C({"d": 8, "length": 16}, max_distance="count"),
    "plot_encoding": C({"length": 16, "d": 8}),
    "rotation_matrix": C({"m": 3, "d": 8}, m="position"),
    "symbolic_rotation_matrix": C({"m": "m", "d": 4}, m="other", symbol="other"),
    "apply_rope": C(
        {"x": _x(3, 8), "positions": [0, 1, 2], "rotary_dim": 4},
        x="array",
        rotary_dim="dim",
    ),
    "apply_rope_matrix": C({"x": _x(3, 8), "positions": [0, 1, 2]}, x="array"),
    "llama_precompute_freqs_cis": C({"d": 8, "end": 4}),
    "llama_apply_rotary_emb": C(
        {
            "xq": torch.randn(1, 4, 2, 8),
            "xk": torch.randn(1, 4, 2, 8),
            "freqs_cis": rope_lib.llama_precompute_freqs_cis(8, 4),
        },
        xq="array",
        xk="array",
        freqs_cis="array",
    ),
    "rotate_half": C({"x": _x(3, 8)}, x="array"),
    "rotate_half_cos_sin": C({"positions": [0, 1, 2], "d": 8}),
    "apply_rotate_half": C(
        {"x": _x(3, 8), "cos": np.ones((3, 8)), "sin": np.zeros((3, 8))},
        x="array",
        cos="array",
        sin="array",
    ),
    "layout_permutation": C({"d": 8}),
    "permute_qk_weight": C({"weight": _x(16, 4), "n_heads": 2}, weight="array"),
    "cos_sin_tables": C({"positions": [0, 1, 2], "d": 8}),
    "table_error": C({"positions": [0, 1, 2], "d": 8}),
    "score_error": C({"positions": [0, 1, 2], "d": 8}),
    "elu_feature_map": C({"x": _x(3, 4)}, x="array"),
    "linear_attention_weights": C(
        {"q": _x(3, 4), "k": _x(3, 4), "positions": [0, 1, 2]}, q="array", k="array"
    ),
    "linear_attention": C(
        {"q": _x(3, 4), "k": _x(3, 4), "v": _x(3, 2), "positions": [0, 1, 2]},
        q="array",
        k="array",
        v="array",
    ),
    "qk_scores": C(
        {"x": _x(3, 8), "W_q": _x(8, 8), "W_k": _x(8, 8), "n_heads": 2, "positions": [0, 1, 2]},
        x="array",
        W_q="array",
        W_k="array",
        b_q="array",
        b_k="array",
    ),
    "float32_angle_error": C({"positions": [0, 1, 2], "d": 8}),
    "apply_rope_refusals": C({}),
    "time_rope_routes": C({"N": 8, "d": 8, "repeats": 1}),
    "plot_rotation_2d": C({}, q="array", k="array", positions="other"),
    "plot_layout_mismatch": C({"d": 8, "max_distance": 8}, max_distance="count"),
    "plot_accuracy": C({"d": 8, "max_position": 100, "num": 3}),
    "exp_sum": C({"distance": [0, 1, 2], "frequencies": [1.0, 0.1]}, frequencies="array"),
    "ones_score": C({"distance": [0, 1, 2], "d": 8}),
    "roformer_bound": C({"distance": [0, 1, 2], "d": 8}),
    "abel_bound": C({"q": _x(8), "k": _x(8), "distance": [0, 1, 2]}, q="array", k="array"),
    "periods": C({"d": 8}),
    "quarter_period": C({"d": 8}),
    "windowed_mean_score": C({"distance": [0, 1, 2], "d": 8}, half_width="count0"),
    "integral_score": C({"distance": [1.0, 2.0], "d": 8}),
    "undersampled_terms": C({"distance": [1.0, 2.0], "d": 8}),
    "gap_rms": C({"windows": [(100, 200)], "d": 8}, windows="other"),
    "schedule_theta": C({"t": [0.0, 0.5], "schedule": "t^2"}, t="array"),
    "schedule_frequencies": C({"d": 8, "schedule": "t^2"}),
    "schedule_score": C({"distance": [0, 1, 2], "d": 8, "schedule": "t^2"}),
    "schedule_integral": C({"distance": [1.0, 2.0], "schedule": "t^2"}),
    "schedule_envelope": C({"distance": [1.0, 2.0], "schedule": "10000^-t"}),
    "envelope_crossover": C({"base": 1e4, "alpha": 2.0}),
    "monte_carlo_score": C({"distance": [0, 1, 2], "d": 8, "n_samples": 16}),
    "plot_counterexamples": C({"d": 8, "max_distance": 8}, max_distance="count"),
    "plot_ones_score": C({"ds": (4, 8), "max_distance": 16}, ds="other", max_distance="count"),
    "plot_windowed_mean": C(
        {"d": 8, "max_distance": 16}, max_distance="count", half_width="count0"
    ),
    "plot_quarter_period": C({"ds": (4, 8)}, ds="other"),
    "plot_sum_vs_integral": C({"d": 8, "max_distance": 64}, max_distance="count"),
    "plot_schedules": C({"d": 8, "n_points": 16, "long_max": 100.0}, schedules="other"),
    "plot_roformer_bound": C({"d": 8, "max_distance": 16}, max_distance="count"),
    "plot_monte_carlo": C({"d": 8, "max_distance": 16, "n_samples": 16}, max_distance="count"),
    "plot_diagonal_h": C({"d": 8, "max_distance": 16}, max_distance="count"),
    "similarity_margin": C({"m": [0, 1, 2], "d": 8}, m="positions"),
    "max_context": C({"base": 100.0, "d": 8}),
    "min_base": C({"context_length": 16, "d": 8}),
    "min_base_search": C({"context_length": 16, "d": 8}),
    "min_base_table": C({"log2_lengths": (4,), "d": 8, "use_cache": False}, log2_lengths="other"),
    "float32_margin": C({"m": [0, 1, 2], "d": 8}, m="positions", inv_freq="array"),
    "float32_min_base": C({"context_length": 16, "d": 8}, inv_freq="array"),
    "base_is_feasible": C({"base": 100.0, "context_length": 16, "d": 8}),
    "feasible_window_top": C({"base": 200.0, "context_length": 16, "d": 8}),
    "grid_min_base": C({"context_length": 16, "d": 8}),
    "su_min_base": C({"context_length": 16, "d": 8, "levels": 2}, dtype="other"),
    "published_summary": C({"rows": SMALL_ROWS}, rows="other"),
    "html_table": C({"header": ["a", "b"], "body": [[1, 2]]}, header="other", body="other"),
    "brute_force_feasible": C({"base": 100.0, "context_length": 16, "d": 8}),
    "similarity_gap_monte_carlo": C(
        {"m": [0, 1, 2], "d": 8, "n_samples": 64}, m="positions", mean_q="other", mean_k="other"
    ),
    "similarity_gap_expected": C(
        {"m": [0, 1, 2], "d": 8}, m="positions", mean_q="other", mean_k="other"
    ),
    "symbolic_similarity_gap": C({"d": 2}),
    "plot_similarity_margin": C({"d": 8, "max_distance": 16}, max_distance="count"),
    "plot_monte_carlo_gap": C(
        {"d": 8, "max_distance": 8, "n_samples": 64},
        max_distance="count",
        mean_q="other",
        mean_k="other",
    ),
    "plot_horizon_vs_base": C(
        {"d": 8, "n_bases": 4, "lengths": (16,)}, base_range="other", lengths="other"
    ),
    "plot_min_base_table": C({"rows": SMALL_ROWS, "d": 8}, rows="other"),
    "scaled_theta": C({"d": 8, "base": 1e4, "method": "linear", "factor": 2.0}, params="other"),
    "yarn_attention_factor": C({"factor": 2.0}),
    "scaled_margin": C(
        {"m": [0, 1, 2], "d": 8, "base": 1e4, "method": "linear", "factor": 2.0},
        m="positions",
        params="other",
    ),
    "scaled_horizon": C(
        {"d": 8, "base": 1e4, "method": "linear", "factor": 2.0, "limit": 10_000}, params="other"
    ),
    "plot_wavelengths": C({"d": 8}, methods="other"),
    "plot_margins": C(
        {"d": 8, "max_distance": 64, "n_points": 16}, max_distance="count", methods="other"
    ),
}

# Range violations that a kind's family does not cover, per function and argument.
EXTRA_BAD: dict[tuple[str, str], list[Any]] = {
    ("monte_carlo_score", "rho"): [1.5, -1.5],
    # more coordinates than the head (d = 8) has; a float-held integer
    ("apply_rope", "rotary_dim"): [10, 4.0],
    # real positions and shifts of the sinusoidal encodings: finite, within MAX_POSITION
    ("sinusoidal", "positions"): [[0.0, 1e300]],
    ("complex_encoding", "positions"): [[0.0, 1e300]],
    ("cos_sin_encoding", "positions"): [[0.0, 1e300]],
    ("gram_matrix", "m_positions"): [[0.0, 1e300]],
    ("gram_matrix", "n_positions"): [[0.0, 1e300]],
    ("diagonal_h_score", "m"): [[0.0, 1e300]],
    ("diagonal_h_score", "n"): [[0.0, 1e300]],
    ("diagonal_h_parts", "m"): [[0.0, 1e300]],
    ("diagonal_h_parts", "n"): [[0.0, 1e300]],
    ("shift_matrix", "k"): [1e300, 2.0**33],
    ("similarity_gap_monte_carlo", "confidence"): [0.0, 1.0, 1.5, "0.9"],
    ("similarity_gap_monte_carlo", "sigma"): [0.0, -1.0],
    ("similarity_gap_monte_carlo", "eps_scale"): [-1.0, "a"],
    ("similarity_gap_expected", "sigma"): [0.0, -1.0],
    ("scaled_theta", "factor"): [0.0, -2.0],
    ("yarn_attention_factor", "factor"): [0.0, -2.0],
    ("random_positions", "scale"): [-1.0],
}

# The sinusoidal encodings are defined for every real position (module docstring of
# rope_lib.sinusoidal: fractional positions are what position interpolation feeds in), so
# they accept the fractional member of the positions family; every other member is refused.
_FRACTIONAL_POSITIONS = BAD["positions"][0]  # [0, 1.5]
_FRACTIONAL_SHIFT = BAD["position"][0]  # 2.5

# Functions whose d is a width of plain attention (no rotation), where odd values are valid.
_ODD_WIDTH = BAD["dim"][0]  # 3
_WIDTH_FUNCTIONS = (
    "word_embeddings",
    "demo_projections",
    "random_positions",
    "sentence_attention",
    "symbolic_invariance",
    "symbolic_equivariance",
    "plot_reordering_weights",
    "plot_token_output",
    "score_model",
    "attention_output_model",
    "demo_point",
)

# Values of a kind's family that a function accepts on purpose, with the reason.
ALLOWED: dict[tuple[str, str], list[Any]] = {
    # d=None means "one panel per schedule at every d" in plot_schedules
    ("plot_schedules", "d"): [None],
    # None selects the library's default for these optional arguments
    ("gram_matrix", "n_positions"): [None, _FRACTIONAL_POSITIONS],
    # real positions of the sinusoidal encodings (see _FRACTIONAL_POSITIONS above)
    ("gram_matrix", "m_positions"): [_FRACTIONAL_POSITIONS],
    ("sinusoidal", "positions"): [_FRACTIONAL_POSITIONS],
    ("complex_encoding", "positions"): [_FRACTIONAL_POSITIONS],
    ("cos_sin_encoding", "positions"): [_FRACTIONAL_POSITIONS],
    ("diagonal_h_score", "m"): [_FRACTIONAL_POSITIONS],
    ("diagonal_h_score", "n"): [_FRACTIONAL_POSITIONS],
    ("diagonal_h_parts", "m"): [_FRACTIONAL_POSITIONS],
    ("diagonal_h_parts", "n"): [_FRACTIONAL_POSITIONS],
    ("shift_matrix", "k"): [_FRACTIONAL_SHIFT],
    ("qk_scores", "n_kv_heads"): [None],
    # None rotates the whole head
    ("apply_rope", "rotary_dim"): [None],
    ("qk_scores", "b_q"): [None],
    ("qk_scores", "b_k"): [None],
    ("float32_margin", "inv_freq"): [None],
    ("float32_min_base", "inv_freq"): [None],
    ("attention_output_model", "readout"): [None],
    ("plot_inner_products", "max_distance"): [None],
    ("plot_ones_score", "max_distance"): [None],
    ("windowed_mean_score", "half_width"): [None],
    ("plot_windowed_mean", "half_width"): [None],
    ("plot_similarity_margin", "max_distance"): [None],
    ("scaled_theta", "original_context"): [None],
    ("scaled_margin", "original_context"): [None],
    ("scaled_horizon", "original_context"): [None],
    ("second_order_expansion", "p_m"): [None],
    ("second_order_expansion", "p_n"): [None],
    ("plot_error_order", "expansion"): [None],
    ("plot_error_order", "point"): [None],
    ("plot_error_order", "eps"): [None],
    ("plot_term_sizes", "expansion"): [None],
    ("plot_term_sizes", "point"): [None],
    ("plot_term_sizes", "eps"): [None],
    ("plot_min_base_table", "rows"): [None],
    ("plot_monte_carlo_gap", "mean_q"): [None],
    ("plot_monte_carlo_gap", "mean_k"): [None],
    ("sentence_attention", "positions"): [None],
    # None: the largest limit the work bound allows for this d
    ("max_context", "limit"): [None],
    # d is an embedding or model width here, not a RoPE head dimension: no rotation pairs
    # its coordinates, so odd widths are valid (chapter 1 runs symbolic_equivariance at d = 1)
    **{(name, "d"): [_ODD_WIDTH] for name in _WIDTH_FUNCTIONS},
}

#: Public names that are data or classes, not functions with arguments.
NOT_FUNCTIONS = {
    "SentenceAttention",
    "TERM_NAMES",
    "SecondOrderExpansion",
    "RECIPES",
    "BaseSearch",
    "PUBLISHED_MIN_BASE",
    "REAL_MODELS",
    "EXTENSION_METHODS",
}

SECONDS_PER_CALL = 20
ADDRESS_SPACE_HEADROOM = 3 << 30  # 3 GiB above what the process already maps


# ------------------------------------------------------------------ guards


class Hang(Exception):
    pass


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Run a block with a time limit and a cap on new address space."""

    def _alarm(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {SECONDS_PER_CALL} s")

    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    resource.setrlimit(resource.RLIMIT_AS, (mapped + ADDRESS_SPACE_HEADROOM, hard))
    signal.alarm(SECONDS_PER_CALL)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _snapshot(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return bool(torch.equal(a, b))
    return np.array_equal(a, b, equal_nan=True)


def _call(name: str, kwargs: dict[str, Any]) -> tuple[str, Any]:
    """Call ``rope_lib.<name>(**kwargs)``; return ("ok", result) or ("error", exception)."""
    snapshots = {k: _snapshot(v) for k, v in kwargs.items()}
    try:
        with guarded():
            result = getattr(rope_lib, name)(**kwargs)
        outcome = ("ok", result)
    except (ValueError, TypeError) as error:
        outcome = ("error", error)
    for key, before in snapshots.items():
        if before is not None:
            assert _same(before, kwargs[key]), f"{name} changed its input {key!r}"
    return outcome


def _call_bad(name: str, arg: str, value: Any, kwargs: dict[str, Any]) -> tuple[str, Any]:
    """``_call`` for a bad ``value`` of ``arg``: a hang, a huge allocation or any exception
    other than ValueError/TypeError fails the test, naming the call."""
    try:
        return _call(name, kwargs)
    except Hang as error:
        pytest.fail(f"{name}({arg}={value!r}) hung: {error}")
    except MemoryError:
        pytest.fail(f"{name}({arg}={value!r}) tried to allocate beyond the limits")
    except AssertionError:
        raise
    except Exception as error:  # noqa: BLE001 - the point is to catch every other kind
        pytest.fail(f"{name}({arg}={value!r}) raised {type(error).__name__}: {error}")


def _kinds(name: str) -> dict[str, str]:
    contract = CONTRACTS[name]
    params = inspect.signature(getattr(rope_lib, name)).parameters
    kinds = {}
    for p in params.values():
        if p.kind is p.VAR_KEYWORD:
            kinds[p.name] = contract.kinds.get(p.name, "other")
            continue
        kind = contract.kinds.get(p.name, BY_NAME.get(p.name))
        kinds[p.name] = kind
    return kinds


def _equal_results(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_equal_results(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (np.ndarray, np.generic, float, int, torch.Tensor)):
        a_np = a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        b_np = b.detach().cpu().numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
        return a_np.shape == b_np.shape and np.allclose(a_np, b_np, rtol=1e-12, atol=1e-12)
    return True  # figures, dataclasses: compared by not raising


FUNCTIONS = sorted(n for n in rope_lib.__all__ if n not in NOT_FUNCTIONS)


# ------------------------------------------------------------------ the tests


def test_every_public_function_declares_a_contract() -> None:
    missing = [n for n in FUNCTIONS if n not in CONTRACTS]
    assert not missing, f"public functions without an argument contract: {missing}"
    stale = [n for n in CONTRACTS if n not in FUNCTIONS]
    assert not stale, f"contracts for names that are not public: {stale}"
    for name in FUNCTIONS:
        undeclared = [a for a, k in _kinds(name).items() if k is None]
        assert not undeclared, f"{name}: arguments without a declared kind: {undeclared}"


@pytest.mark.parametrize("name", FUNCTIONS)
def test_valid_call_succeeds(name: str) -> None:
    status, result = _call(name, dict(CONTRACTS[name].valid))
    assert status == "ok", f"{name} refused its declared valid arguments: {result}"


def _bad_value(name: str, arg: str, index: int) -> Any:
    family = BAD[_kinds(name)[arg]] + EXTRA_BAD.get((name, arg), [])
    return family[index]


def _accepted_on_purpose(name: str, arg: str, value: Any) -> bool:
    """``value`` is in ALLOWED for this argument: a bad value of the kind that the function
    accepts on purpose (no case is generated for it)."""
    allowed = ALLOWED.get((name, arg), [])
    return any(value is a or (isinstance(a, str) and value == a) for a in allowed)


def _bad_cases() -> list[tuple[str, str, int]]:
    """(function, argument, index in its bad-value family), without the values the function
    accepts on purpose, so that every generated case is a check (none is skipped)."""
    cases = []
    for name in FUNCTIONS:
        if name not in CONTRACTS:
            continue
        for arg, kind in _kinds(name).items():
            if kind is None:
                continue
            n_bad = len(BAD[kind]) + len(EXTRA_BAD.get((name, arg), []))
            cases += [
                (name, arg, i)
                for i in range(n_bad)
                if not _accepted_on_purpose(name, arg, _bad_value(name, arg, i))
            ]
    return cases


@pytest.mark.parametrize(("name", "arg", "index"), _bad_cases())
def test_bad_value_is_refused_by_name(name: str, arg: str, index: int) -> None:
    value = _bad_value(name, arg, index)
    kwargs = dict(CONTRACTS[name].valid)
    if _kinds(name)[arg] == "other" and arg == "params":
        kwargs["bogus_keyword"] = value
        arg = "bogus_keyword"
    else:
        kwargs[arg] = value
    status, result = _call_bad(name, arg, value, kwargs)
    assert status == "error", f"{name} accepted {arg}={value!r} and returned {result!r:.80}"
    assert re.search(rf"\b{re.escape(arg)}\b", str(result)), (
        f"{name}({arg}={value!r}): the message does not name {arg!r}: {result}"
    )


def _equivalent_cases() -> list[tuple[str, str, int]]:
    """(function, argument, index of the transform); figures and timings are left out when
    the cases are built (their results are not comparable), so no case is skipped."""
    cases = []
    for name in FUNCTIONS:
        if name.startswith("plot_") or name in {"time_rope_routes"}:
            continue
        for arg, kind in _kinds(name).items():
            if arg in CONTRACTS[name].valid and kind in EQUIVALENT:
                cases += [(name, arg, i) for i in range(len(EQUIVALENT[kind]))]
    return cases


@pytest.mark.parametrize(("name", "arg", "index"), _equivalent_cases())
def test_equivalent_forms_give_the_same_result(name: str, arg: str, index: int) -> None:
    kwargs = dict(CONTRACTS[name].valid)
    status, canonical = _call(name, dict(kwargs))
    assert status == "ok"
    kwargs[arg] = EQUIVALENT[_kinds(name)[arg]][index](kwargs[arg])
    status, result = _call(name, kwargs)
    assert status == "ok", f"{name} refused {arg}={kwargs[arg]!r}: {result}"
    assert _equal_results(canonical, result), f"{name}: {arg}={kwargs[arg]!r} changed the result"


POSITION_FUNCTIONS = [
    n
    for n in FUNCTIONS
    if _kinds(n).get("positions") == "positions" and "positions" in CONTRACTS[n].valid
]
#: Functions whose documented position limit is below MAX_POSITION, with the reason.
POSITION_LIMITS = {
    # its exact split into frequency and rounding parts needs float32-exact positions
    "float32_angle_error": 2**24,
}


@given(data=st.data())
def test_integer_positions_are_exact_or_refused(data: st.DataObject) -> None:
    """Any integer position list: refused by name when beyond MAX_POSITION, else exact."""
    name = data.draw(st.sampled_from(POSITION_FUNCTIONS))
    limit = POSITION_LIMITS.get(name, rope_lib._validate.MAX_POSITION)
    value = data.draw(st.integers(-(2**80), 2**80))
    kwargs = dict(CONTRACTS[name].valid)
    n = len(np.ravel(kwargs["positions"]))
    positions = [0] * (n - 1) + [value]
    kwargs["positions"] = positions
    status, result = _call(name, kwargs)
    if abs(value) > limit:
        assert status == "error" and "positions" in str(result)
    else:
        assert status == "ok", f"{name} refused position {value}: {result}"


# ------------------------------------------------------------------ random values

#: Which drawn values are valid, per kind: a value outside the predicate must be refused.
VALID: dict[str, Callable[[Any], bool]] = {
    "dim": lambda v: (
        isinstance(v, int) and not isinstance(v, bool) and 2 <= v <= 2**16 and v % 2 == 0
    ),
    "base": lambda v: (
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and v > 1
        and (isinstance(v, int) or np.isfinite(v))
    ),
    # a width goes through check_positive_int, which reads a whole float such as 3.0 as 3
    "width": lambda v: (
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and float(v).is_integer()
        and 1 <= v <= 2**16
    ),
    "seed": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "flag": lambda v: isinstance(v, bool),
}

ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(-3, 3), max_size=3),
)

RANDOM_CASES = [
    (name, arg)
    for name in FUNCTIONS
    for arg, kind in _kinds(name).items()
    if kind in {"dim", "base", "seed", "flag", "count", "count0", "real", "choice"}
    and not name.startswith("plot_")
    and name not in {"time_rope_routes"}
]


@settings(max_examples=400)
@given(case=st.sampled_from(RANDOM_CASES), value=ANY_VALUE)
def test_random_values_are_refused_by_name_or_accepted(case: tuple[str, str], value: Any) -> None:
    """Any value: a refusal naming the argument, or a result; an invalid value is refused."""
    name, arg = case
    kind = _kinds(name)[arg]
    kwargs = dict(CONTRACTS[name].valid)
    kwargs[arg] = value
    status, result = _call_bad(name, arg, value, kwargs)
    if status == "error":
        assert re.search(rf"\b{re.escape(arg)}\b", str(result)), (
            f"{name}({arg}={value!r}): the message does not name {arg!r}: {result}"
        )
    elif kind in VALID and value is not None:
        allowed = ALLOWED.get((name, arg), [])
        valid = VALID[kind]
        if kind == "dim" and 3 in allowed:  # a width, not a head dimension: any d >= 1
            valid = VALID["width"]
        assert valid(value) or any(value is a for a in allowed), (
            f"{name} accepted the invalid {arg}={value!r}"
        )
