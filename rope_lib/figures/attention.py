"""The figures of chapter 1 (``chapters/01_symmetry.md``): the same attention, two word orders.

:func:`plot_reordering_weights` draws the attention weights of a sentence and of its
reordering, without and with position vectors; :func:`plot_token_output` draws one word's
output vector in both orders.  The numbers come from :mod:`rope_lib.attention`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import (
    check_real,
    check_seed,
)
from ..attention import (
    _order,
    _random_positions,
    _sentence_attention,
    _width,
    _words,
    sentence_attention,
)
from .style import CMAP, line_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_reordering_weights", "plot_token_output"]


#: Largest number of bar groups (coordinates of the output) in :func:`plot_token_output`.
_MAX_PLOT_WIDTH = 256


#: Largest number of words in the figures: each heatmap annotates all N**2 weights.
_MAX_PLOT_WORDS = 32


def _demo_pair(
    words: Any, order: Any, d: int, seed: int, position_scale: float, position_seed: int
) -> dict:
    """The four runs of the figures, after validating every argument by the caller's name."""
    words = _words(words)
    if len(words) > _MAX_PLOT_WORDS:
        raise ValueError(
            f"words must hold at most {_MAX_PLOT_WORDS} words for the figures, got {len(words)}"
        )
    idx = _order(order, len(words))
    reordered = tuple(words[i] for i in idx)
    d = _width(d)
    seed = check_seed(seed)
    position_scale = check_real(position_scale, "position_scale", low=0.0, low_open=True)
    position_seed = check_seed(position_seed, "position_seed")
    p = _random_positions(len(words), d, position_seed, position_scale, "position_scale")
    culprit = f"position_scale = {position_scale!r} is"
    return {
        (False, False): sentence_attention(words, d, seed),
        (False, True): sentence_attention(reordered, d, seed),
        (True, False): _sentence_attention(words, d, seed, p, culprit),
        (True, True): _sentence_attention(reordered, d, seed, p, culprit),
    }


def plot_reordering_weights(
    words: Any = ("this", "is", "awesome"),
    order: Sequence[int] = (0, 2, 1),
    d: int = 4,
    seed: int = 0,
    position_scale: float = 1.0,
    position_seed: int = 0,
) -> Figure:
    r"""Figure: attention weights of a sentence and of its reordering, without and with
    position vectors.

    A 2 x 2 grid of heatmaps: columns are the sentence and the sentence reordered by
    ``order`` (slot :math:`i` holds word ``order[i]``); the top row uses the word embeddings
    alone, the bottom row adds :func:`random_positions` ``(N, d, position_seed,
    position_scale)``. Each cell is annotated with its weight :math:`A_{mn}`.

    Parameters
    ----------
    words : str or sequence of str
        The sentence, at most 32 words (every heatmap annotates all :math:`N^2` weights).
    order : sequence of int
        A permutation of ``0..N-1``, :math:`N` the number of words.
    d, seed : int
        Width and seed of :func:`sentence_attention`.
    position_scale : float
        Standard deviation of the position vectors, a finite number > 0; a scale so large
        that the attention scores overflow float64 is refused by name.
    position_seed : int
        Seed of the position vectors, >= 0.

    Returns
    -------
    matplotlib.figure.Figure
    """
    runs = _demo_pair(words, order, d, seed, position_scale, position_seed)
    fig, axes = new_figure(ncols=2, nrows=2, width=7.6, height=6.6)
    titles = {False: "embeddings only", True: r"embeddings + positions $\boldsymbol{p}_m$"}
    image = None
    for (with_p, reordered), run in runs.items():
        ax = axes[int(with_p), int(reordered)]
        ax.grid(False)
        image = ax.imshow(run.weights, cmap=CMAP, vmin=0.0, vmax=1.0)
        t = len(run.words)
        ax.set_xticks(range(t), run.words)
        ax.set_yticks(range(t), run.words)
        for i in range(t):
            for j in range(t):
                value = run.weights[i, j]
                ax.text(
                    j,
                    i,
                    f"{value:.2f}",
                    ha="center",
                    va="center",
                    fontsize=10,
                    color="black" if value > 0.55 else "white",
                )
        ax.set(xlabel="key (attended word)", ylabel="query word")
        ax.set_title(f"\u201c{' '.join(run.words)}\u201d\n{titles[with_p]}", fontsize=10.5)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight $A_{mn}$")
    return fig


def plot_token_output(
    words: Any = ("this", "is", "awesome"),
    order: Sequence[int] = (0, 2, 1),
    token: str = "awesome",
    d: int = 4,
    seed: int = 0,
    position_scale: float = 1.0,
    position_seed: int = 0,
) -> Figure:
    r"""Figure: the output vector of one word in a sentence and in its reordering.

    Two panels of grouped bars (one group per coordinate of :math:`\boldsymbol o`): left
    without positions (the bars coincide), right with :func:`random_positions` added (they
    differ). Arguments as in :func:`plot_reordering_weights`; ``token`` names the word (a
    string), and ``d`` is at most 256 (one group of bars per coordinate).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(token, str):
        raise TypeError(f"token must be one of the words (a string), got {token!r:.80}")
    if _width(d) > _MAX_PLOT_WIDTH:
        raise ValueError(
            f"d must be at most {_MAX_PLOT_WIDTH} in plot_token_output (one group of bars per "
            f"coordinate), got {d}"
        )
    runs = _demo_pair(words, order, d, seed, position_scale, position_seed)
    if token not in runs[(False, False)].words:
        raise ValueError(
            f"token must be one of the words {runs[(False, False)].words}, got {token!r}"
        )
    fig, axes = new_figure(ncols=2, width=8.0, height=3.4, sharey=True)
    titles = {False: "embeddings only", True: r"embeddings + positions $\boldsymbol{p}_m$"}
    for ax, with_p in zip(axes, (False, True), strict=True):
        width = 0.38
        for k, reordered in enumerate((False, True)):
            run = runs[(with_p, reordered)]
            coords = np.arange(run.output.shape[1])
            style = line_style(k)
            ax.bar(
                coords + (k - 0.5) * width,
                run.row(token),
                width=width,
                color=style["color"],
                hatch="" if k == 0 else "//",
                edgecolor="white",
                label=f"\u201c{' '.join(run.words)}\u201d",
            )
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_xticks(coords, [f"$o_{{{i}}}$" for i in coords])
        ax.set(xlabel=f"coordinate of the output of \u201c{token}\u201d", title=titles[with_p])
    axes[0].set_ylabel("value")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=2, frameon=False)
    return fig
