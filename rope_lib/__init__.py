"""rope_lib: the companion package of *Rotary Position Embeddings from First Principles*.

Every chapter of the book imports this package so that the chapters stay prose plus short
calls.  The public contract (names, signatures, meanings) is listed in ``API.md`` and in the
book's API reference; every public name is importable from the top level::

    from rope_lib import theta, apply_rope, ones_score, min_base

The top level loads nothing until a name is asked for (PEP 562): ``import rope_lib`` imports
no chapter module, and ``rope_lib.apply_rope`` imports :mod:`rope_lib.rotation` and what it
needs, no more.  That keeps ``import rope_lib`` fast, and it keeps what a computation depends
on visible: chapter 9's stored results are keyed on the files their code imports.
:data:`EXPORTS` says which module defines each name; ``ARCHITECTURE.md`` says how the
modules are layered.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import Any

__version__ = "0.4.0"

#: The modules whose public names (their ``__all__``) the top level re-exports, in the book's
#: order: the math module of each chapter, then its figures.  ``tests/test_architecture.py``
#: checks that this table and the modules' ``__all__`` agree.
EXPORTS: dict[str, tuple[str, ...]] = {
    # shared
    "frequencies": ("theta",),
    "symbolic": ("vanishes",),
    # chapter 1, symmetry
    "attention": (
        "softmax",
        "attention_weights",
        "scaled_dot_product_attention",
        "self_attention",
        "equivariance_gap",
        "word_embeddings",
        "demo_projections",
        "random_positions",
        "SentenceAttention",
        "sentence_attention",
        "symbolic_attention_row",
        "symbolic_invariance",
        "symbolic_equivariance",
    ),
    "figures.attention": ("plot_reordering_weights", "plot_token_output"),
    # chapter 2, Taylor expansion
    "taylor": (
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
    ),
    "figures.taylor": ("plot_error_order", "plot_term_sizes"),
    # chapter 3, sinusoidal encoding
    "sinusoidal": (
        "sinusoidal",
        "complex_encoding",
        "cos_sin_encoding",
        "vaswani_permutation",
        "gram_matrix",
        "diagonal_h_score",
        "diagonal_h_parts",
        "shift_matrix",
        "shift_isometry",
        "orthogonal_normal_form",
        "symbolic_encoding",
    ),
    "figures.sinusoidal": ("plot_inner_products", "plot_encoding"),
    # chapter 4, RoPE
    "rotation": (
        "rotation_matrix",
        "symbolic_rotation_matrix",
        "apply_rope",
        "elu_feature_map",
        "linear_attention_weights",
        "linear_attention",
    ),
    "figures.rotation": ("plot_rotation_2d",),
    # chapter 5, implementations
    "implementations": (
        "apply_rope_matrix",
        "llama_precompute_freqs_cis",
        "llama_apply_rotary_emb",
        "rotate_half",
        "rotate_half_cos_sin",
        "apply_rotate_half",
        "layout_permutation",
        "permute_qk_weight",
        "qk_scores",
        "RECIPES",
        "cos_sin_tables",
        "table_error",
        "score_error",
        "float32_angle_error",
        "apply_rope_refusals",
    ),
    "figures.implementations": ("plot_layout_mismatch", "plot_accuracy"),
    "timing": ("time_rope_routes",),
    # chapter 6, decay
    "decay": (
        "exp_sum",
        "ones_score",
        "roformer_bound",
        "abel_bound",
        "periods",
        "quarter_period",
        "windowed_mean_score",
        "integral_score",
        "undersampled_terms",
        "gap_rms",
        "schedule_theta",
        "schedule_frequencies",
        "schedule_score",
        "schedule_integral",
        "schedule_envelope",
        "envelope_crossover",
        "monte_carlo_score",
    ),
    "figures.decay": (
        "plot_counterexamples",
        "plot_ones_score",
        "plot_windowed_mean",
        "plot_quarter_period",
        "plot_sum_vs_integral",
        "plot_schedules",
        "plot_roformer_bound",
        "plot_monte_carlo",
        "plot_diagonal_h",
    ),
    # chapter 7, base bound
    "base_bound": (
        "similarity_margin",
        "max_context",
        "min_base",
        "min_base_search",
        "BaseSearch",
        "min_base_table",
        "PUBLISHED_MIN_BASE",
        "REAL_MODELS",
        "float32_margin",
        "float32_min_base",
        "base_is_feasible",
        "feasible_window_top",
        "grid_min_base",
        "su_min_base",
        "published_summary",
        "html_table",
        "brute_force_feasible",
        "similarity_gap_monte_carlo",
        "similarity_gap_expected",
        "symbolic_similarity_gap",
    ),
    "figures.base_bound": (
        "plot_similarity_margin",
        "plot_monte_carlo_gap",
        "plot_horizon_vs_base",
        "plot_min_base_table",
    ),
    # chapter 8, context extension
    "context_extension": (
        "EXTENSION_METHODS",
        "scaled_theta",
        "yarn_attention_factor",
        "scaled_margin",
        "scaled_horizon",
    ),
    "figures.context_extension": ("plot_wavelengths", "plot_margins"),
    # chapter 9, experiments
    "experiment": (
        "ExperimentConfig",
        "RecallModel",
        "EXPERIMENT_CONFIGS",
        "CODE_FILES",
        "experiment_config",
        "train_recall",
        "evaluate_recall",
        "pair_energy",
        "general_form",
        "run_experiment",
        "experiment_plan",
        "experiment_results",
    ),
    "experiment_report": (
        "RecallCurves",
        "PairEnergySummary",
        "RecallReach",
        "MarginHorizons",
        "margin_horizons",
        "learned_margin",
        "experiment_summary",
        "recall_curves",
        "recall_reach",
        "plot_recall_by_distance",
        "pair_energy_summary",
    ),
    "experiment_lm": (
        "LMConfig",
        "LMModel",
        "LM_CONFIGS",
        "LM_CODE_FILES",
        "lm_config",
        "train_lm",
        "evaluate_lm",
        "lm_plan",
        "run_lm_experiment",
        "lm_results",
    ),
    "experiment_lm_report": ("LMSummary", "lm_summary", "plot_lm_recall"),
}

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
        "plotting",
        "widgets",
        "sweep",
        "experiment_cli",
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
