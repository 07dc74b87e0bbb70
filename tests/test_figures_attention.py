"""Tests of rope_lib.figures.attention: chapter 1's figures show the weights and outputs that a
naive attention loop gives, and their arguments are checked by name."""

from __future__ import annotations

import numpy as np
import pytest

from rope_lib import attention as att
from rope_lib.figures import attention as fatt

from .test_attention import naive_attention, naive_self_attention

# ---------------------------------------------------------------------------------------------
# an independent implementation: plain Python loops over math.exp, one query at a time
# ---------------------------------------------------------------------------------------------


def test_plot_reordering_weights_shows_the_weights():
    fig = fatt.plot_reordering_weights(("this", "is", "awesome"), (0, 2, 1), d=4, seed=0)
    axes = [ax for ax in fig.axes if ax.images]
    assert len(axes) == 4
    x = att.word_embeddings("this is awesome", 4, 0)
    w_q, w_k, _ = att.demo_projections(4, 0)
    q, k = x @ w_q.T, x @ w_k.T
    expected = np.array([[naive_attention(q[i : i + 1], k, np.eye(3))[0] for i in range(3)]])[0]
    np.testing.assert_allclose(axes[0].images[0].get_array(), expected, rtol=0, atol=1e-13)
    # top right: the reordered sentence; its weights are the original ones, permuted
    idx = np.array([0, 2, 1])
    np.testing.assert_allclose(
        axes[1].images[0].get_array(), expected[np.ix_(idx, idx)], rtol=0, atol=1e-13
    )
    labels = [t.get_text() for t in axes[1].get_xticklabels()]
    assert labels == ["this", "awesome", "is"]
    # bottom row (with positions) differs from the top row after undoing the reordering
    bottom = np.asarray(axes[3].images[0].get_array())
    assert np.max(np.abs(bottom - expected[np.ix_(idx, idx)])) > 1e-3
    assert all(ax.get_xlabel() and ax.get_ylabel() and ax.get_title() for ax in axes)


def test_plot_token_output_bars():
    fig = fatt.plot_token_output(d=4, seed=0)
    ax_plain, ax_pos = fig.axes[:2]
    heights = [[p.get_height() for p in c] for c in ax_plain.containers]
    x = att.word_embeddings("this is awesome", 4, 0)
    expected = naive_self_attention(x, *att.demo_projections(4, 0))[2]
    np.testing.assert_allclose(heights[0], expected, rtol=0, atol=1e-13)
    np.testing.assert_allclose(heights[1], expected, rtol=0, atol=1e-13)
    heights_pos = [[p.get_height() for p in c] for c in ax_pos.containers]
    assert np.max(np.abs(np.subtract(*heights_pos))) > 0.05
    assert fig.legends and ax_plain.get_xlabel()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "\u201cthis is awesome\u201d",
        "\u201cthis awesome is\u201d",
    ]


def test_plot_positions_use_position_scale_and_seed():
    """The bottom (with positions) bars are the naive self-attention of x + p with
    p = random_positions(N, d, position_seed, position_scale)."""
    fig = fatt.plot_token_output(d=4, seed=0, position_scale=2.5, position_seed=7)
    ax_pos = fig.axes[1]
    heights = [[p.get_height() for p in c] for c in ax_pos.containers]
    x = att.word_embeddings("this is awesome", 4, 0)
    p = np.random.default_rng([7, 2]).standard_normal((3, 4)) * 2.5
    expected = naive_self_attention(x + p, *att.demo_projections(4, 0))[2]
    np.testing.assert_allclose(heights[0], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("plot", [fatt.plot_reordering_weights, fatt.plot_token_output])
def test_figures_name_position_scale_when_scores_overflow(plot):
    """Fuzz item 23: position_scale=1e300 was refused as "positions are so large"; the
    figures take no positions, so the refusal names position_scale."""
    with pytest.raises(ValueError, match=r"^position_scale = 1e\+300 is so large"):
        plot(position_scale=1e300)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fatt.plot_reordering_weights(order=(0, 1)), ValueError, "order"),
        (lambda: fatt.plot_token_output(token="great"), ValueError, "token"),
    ],
)
def test_figure_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: fatt.plot_token_output(position_scale=float("nan")), ValueError, "position_scale"),
        (lambda: fatt.plot_token_output(position_scale=[1.0]), TypeError, "position_scale"),
        (lambda: fatt.plot_reordering_weights(position_scale=0.0), ValueError, "position_scale"),
        (lambda: fatt.plot_reordering_weights(position_seed=-1), ValueError, "position_seed"),
        (lambda: fatt.plot_token_output(position_seed=2.5), TypeError, "position_seed"),
        (lambda: fatt.plot_token_output(token=2), TypeError, "token must"),
        (lambda: fatt.plot_token_output(d=257), ValueError, "d must be at most 256"),
        (lambda: fatt.plot_reordering_weights(d=10**9), ValueError, "d must"),
        (lambda: fatt.plot_reordering_weights(words=object()), TypeError, "words must"),
        (
            lambda: fatt.plot_reordering_weights(
                words=[f"w{i}" for i in range(33)], order=range(33)
            ),
            ValueError,
            "words must hold at most 32",
        ),
        (lambda: fatt.plot_reordering_weights(order="021"), TypeError, "order"),
        (lambda: fatt.plot_reordering_weights(order=[[0], [1, 2]]), TypeError, "order"),
    ],
)
def test_figure_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()
