"""Every figure can be read without colour (issue 23, WCAG 2.1 success criterion 1.4.1).

Each public ``plot_*`` function of rope_lib is called with small arguments.  In every panel
(an Axes together with its twins, which share one legend), the series a reader tells apart
are collected:

* every line with data, labelled or not (labelled: it has a legend entry; unlabelled: a
  caption names it, such as the exact-expectation lines of ``plot_monte_carlo``);
* every legend-only proxy line (``ax.plot([], [], label=...)``): it is a legend entry;
* every error-bar series (its style is that of its data line);
* every labelled bar series, filled area or collection.

No two of them may differ by colour alone: two lines or error-bar series need another
marker or a dash pattern that looks different as drawn (:func:`_alike`: ``"--"`` and
``(0, (5, 1))`` at one width look alike; short and long dashes do not); two filled areas or
bar series need different ``(hatch, alpha)`` pairs.  Line width alone is not counted: it is
a weak cue at the book's widths, and the issue asks for line styles or markers.

Three kinds of line are left out, each by a narrow rule:

1. **Reference lines**: *unlabelled* ``axhline``/``axvline`` (a line in axes coordinates
   across the whole panel).  They are the zero line, grid-like guides, or positions named
   by an annotation next to them or by a number in a legend entry, never by colour.
   A *labelled* ``axhline``/``axvline`` is a legend entry and is checked.
2. **Single-point marks without a label** (a dot on a curve, a triangle at a position):
   their meaning is their position, named by an annotation, the caption or a legend text.
3. **Pieces of one series**: an unlabelled line identical in colour, dash pattern and
   marker to another line of the panel (``+envelope`` and ``-envelope``).  Two *labelled*
   entries that are identical are reported as indistinguishable.

Also here, for the by-hand colour-vision-deficiency check of the issue:
:func:`simulate_cvd`, the Machado, Oliveira and Fernandes (2009) simulation of protanopia,
deuteranopia and tritanopia (severity 1), and its test against the published matrices as
``colorspacious`` applies them.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import colorspacious
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import Collection
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import rope_lib

# --------------------------------------------------------------------------- the calls
DATA = Path(rope_lib.__file__).parent / "data"


@functools.cache
def _table_rows() -> list[dict]:
    # The shipped rows of min_base_table, read directly: a stale key would otherwise make
    # plot_min_base_table recompute the table (a minute) and rewrite the shipped file.
    rows = json.loads((DATA / "min_base_table.json").read_text())["rows"]
    return [rows[k] for k in sorted(rows, key=int)]


#: Small, fast arguments for every public plot function (same figure layout as the book's
#: calls: the same number of series per panel and the same marks).
CALLS: dict[str, Callable[[], dict]] = {
    "plot_reordering_weights": lambda: {},
    "plot_token_output": lambda: {},
    "plot_error_order": lambda: {},
    "plot_term_sizes": lambda: {"eps": np.geomspace(1e-2, 3.0, 12)},
    "plot_inner_products": lambda: {"d": 16, "length": 32},
    "plot_encoding": lambda: {"length": 16, "d": 8},
    "plot_rotation_2d": lambda: {},
    "plot_layout_mismatch": lambda: {"d": 8, "max_distance": 20},
    "plot_accuracy": lambda: {"d": 8, "max_position": 1000, "num": 5},
    "plot_counterexamples": lambda: {"d": 8, "max_distance": 20},
    "plot_ones_score": lambda: {"ds": (4, 8), "base": 100.0, "max_distance": 200},
    "plot_windowed_mean": lambda: {"d": 16, "base": 100.0, "max_distance": 400},
    "plot_quarter_period": lambda: {"ds": (4, 8, 16)},
    "plot_sum_vs_integral": lambda: {"d": 16, "max_distance": 1000},
    "plot_schedules": lambda: {"long_max": 1000.0, "n_points": 20},
    "plot_roformer_bound": lambda: {"d": 16, "max_distance": 50},
    "plot_monte_carlo": lambda: {"d": 8, "max_distance": 32, "n_samples": 50},
    "plot_diagonal_h": lambda: {"d": 16, "max_distance": 50},
    "plot_similarity_margin": lambda: {"d": 8, "base": 100.0},
    "plot_monte_carlo_gap": lambda: {"d": 8, "max_distance": 10, "n_samples": 200},
    "plot_horizon_vs_base": lambda: {
        "d": 16,
        "base_range": (100.0, 4000.0),  # holds min_base(32, 16) and min_base(64, 16)
        "n_bases": 30,
        "lengths": (32, 64),
    },
    "plot_min_base_table": lambda: {"rows": _table_rows()},
    "plot_wavelengths": lambda: {"d": 16, "original_context": 64},
    "plot_margins": lambda: {"d": 16, "original_context": 64, "max_distance": 2000, "n_points": 50},
}


def test_every_public_plot_function_is_called() -> None:
    public = {name for name in rope_lib.__all__ if name.startswith("plot_")}
    assert public == set(CALLS), (
        f"public plot functions without a call in CALLS: {sorted(public - set(CALLS))}; "
        f"calls of functions that are not public: {sorted(set(CALLS) - public)}"
    )


# ------------------------------------------------------------------------- the series
def _dashes(line: Line2D) -> Any:
    """The dash pattern as drawn: ``"none"`` for no line, else (offset, on-off sequence)."""
    if line.get_linestyle() in ("None", " ", ""):
        return "none"
    offset, seq = line._unscaled_dash_pattern  # "--" and (0, (5, 1)) both report "--"
    return (float(offset), None if seq is None else tuple(round(float(s), 6) for s in seq))


def _drawn_dashes(line: Line2D) -> Any:
    """The on-off lengths as drawn, in points (the pattern scaled by the line width)."""
    if line.get_linestyle() in ("None", " ", ""):
        return "none"
    seq = line._dash_pattern[1]
    return "solid" if seq is None else tuple(float(s) for s in seq)


def _alike(a: Any, b: Any) -> bool:
    """Two drawn dash patterns a reader cannot tell apart: equal, or dashed with as many
    segments, each within a factor of 2 (so "--" and (0, (5, 1)) at one width are alike;
    short and long dashes, or dashes of a thin and of a thick line, are not)."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if len(a) != len(b):
        return False
    return all(max(x, y) < 2.0 * min(x, y) for x, y in zip(a, b, strict=True))


def _marker(line: Line2D) -> str:
    marker = line.get_marker()
    return "none" if marker in (None, "None", "none", " ", "") else str(marker)


def _labelled(artist: Any) -> bool:
    label = artist.get_label()
    return bool(label) and not str(label).startswith("_")


def _is_reference_line(ax: Axes, line: Line2D) -> bool:
    """An axhline/axvline: drawn in axes coordinates across the panel in one direction."""
    transform = line.get_transform()
    return transform in (ax.get_xaxis_transform("grid"), ax.get_yaxis_transform("grid"))


def _series(ax: Axes) -> list[dict]:
    """The series of one Axes a reader tells apart (see the module docstring)."""
    found = []
    in_errorbars = set()
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            data_line = container.lines[0]
            in_errorbars.update(id(a) for a in container.get_children())
            if data_line is None:
                continue
            found.append(
                {
                    "name": f"error bars {container.get_label()!r}",
                    "kind": "line",
                    "labelled": _labelled(container),
                    "colour": to_rgba(data_line.get_color()),
                    "style": (_dashes(data_line), _marker(data_line)),
                    "drawn": _drawn_dashes(data_line),
                }
            )
        elif isinstance(container, BarContainer) and _labelled(container):
            patch = container.patches[0]
            in_errorbars.update(id(p) for p in container.patches)
            found.append(
                {
                    "name": f"bars {container.get_label()!r}",
                    "kind": "area",
                    "labelled": True,
                    "colour": to_rgba(patch.get_facecolor()),
                    "style": (patch.get_hatch() or "", patch.get_alpha()),
                }
            )
    for line in ax.get_lines():
        if id(line) in in_errorbars:
            continue
        labelled = _labelled(line)
        n_points = len(np.atleast_1d(line.get_xdata()))
        if not labelled and _is_reference_line(ax, line):
            continue  # rule 1: reference line
        if not labelled and n_points <= 1:
            continue  # rule 2: a single-point mark named by its position
        found.append(
            {
                "name": f"line {line.get_label()!r}" if labelled else f"unlabelled line {n_points}",
                "kind": "line",
                "labelled": labelled,
                "colour": to_rgba(line.get_color()),
                "style": (_dashes(line), _marker(line)),
                "drawn": _drawn_dashes(line),
            }
        )
    for artist in [*ax.patches, *ax.collections]:
        if id(artist) in in_errorbars or not _labelled(artist):
            continue
        if isinstance(artist, (Patch, Collection)):
            face = artist.get_facecolor()
            face = face[0] if np.ndim(face) == 2 and len(face) else face
            found.append(
                {
                    "name": f"area {artist.get_label()!r}",
                    "kind": "area",
                    "labelled": True,
                    "colour": to_rgba(face) if len(face) else (0, 0, 0, 0),
                    "style": (artist.get_hatch() or "", artist.get_alpha()),
                }
            )
    return found


def _panels(fig: Figure) -> list[list[Axes]]:
    """The Axes of a figure grouped by panel: twins (same position) share one panel."""
    groups: dict[tuple, list[Axes]] = {}
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        key = tuple(np.round(ax.get_position().bounds, 6))
        groups.setdefault(key, []).append(ax)
    return list(groups.values())


def colour_only_pairs(fig: Figure) -> list[str]:
    """Every pair of series in one panel that differ by colour alone (or not at all)."""
    problems = []
    for p, axes in enumerate(_panels(fig)):
        series = [s for ax in axes for s in _series(ax)]
        # rule 3: an unlabelled line identical to another line of the panel is a piece of it
        kept = []
        for s in series:
            twin = any(
                t is not s
                and t["kind"] == s["kind"]
                and t["style"] == s["style"]
                and np.allclose(t["colour"], s["colour"])
                for t in series
            )
            if not (twin and not s["labelled"]):
                kept.append(s)
        for a, b in itertools.combinations(kept, 2):
            if a["kind"] != b["kind"]:
                continue
            if a["kind"] == "line":
                if a["style"][1] != b["style"][1] or not _alike(a["drawn"], b["drawn"]):
                    continue  # another marker, or a dash pattern that looks different
            elif a["style"] != b["style"]:
                continue
            same_colour = np.allclose(a["colour"][:3], b["colour"][:3])
            what = "look identical" if same_colour else "differ by colour alone"
            problems.append(f"panel {p}: {a['name']} and {b['name']} {what} (style {a['style']})")
    return problems


@pytest.mark.parametrize("name", sorted(CALLS))
def test_figure_readable_without_colour(name: str) -> None:
    fig = getattr(rope_lib, name)(**CALLS[name]())
    try:
        problems = colour_only_pairs(fig)
    finally:
        plt.close(fig)
    assert not problems, f"{name}: " + "; ".join(problems)


def test_check_sees_colour_only_lines() -> None:
    """The check itself: two labelled solid lines in two colours fail, a dash pattern or a
    marker fixes them; the three exclusion rules leave out only what they say."""
    from rope_lib.figures import style

    fig, ax = style.new_figure()
    ax.plot([0, 1], [0, 1], label="a", color="C0")
    ax.plot([0, 1], [1, 0], label="b", color="C1")
    assert len(colour_only_pairs(fig)) == 1
    ax.lines[1].set_linestyle("--")
    assert colour_only_pairs(fig) == []
    ax.plot([0, 1], [2, 2], label="c", color="C2", linestyle=(0, (5, 1)))
    assert len(colour_only_pairs(fig)) == 1  # dashes like "--" at the same width
    ax.lines[2].set_linestyle((0, (1, 1)))
    assert colour_only_pairs(fig) == []
    ax.plot([0, 1], [3, 3], label="d", color="C3", marker="o")
    ax.plot([0, 1], [4, 4], label="e", color="C4", marker="s")
    assert colour_only_pairs(fig) == []
    ax.axhline(0.5, color="C5")  # rule 1
    ax.plot([0.5], [0.5], "o", color="C6")  # rule 2
    ax.plot([0, 1], [-1, -2], color="C0")  # rule 3: a piece of "a"
    assert colour_only_pairs(fig) == []
    ax.axvline(0.5, color="C7", label="labelled guide")  # checked: same style as "a"
    ax.plot([0, 1], [-3, -3], color="C8")  # unlabelled data line: checked
    assert len(colour_only_pairs(fig)) == 3
    plt.close(fig)

    fig, ax = style.new_figure()
    ax.errorbar([0, 1], [0, 1], yerr=0.1, fmt="o", color="C0", label="x")
    ax.errorbar([0, 1], [1, 2], yerr=0.1, fmt="o", color="C1", label="y")
    ax.bar([0], [1], color="C0", label="p")
    ax.bar([1], [1], color="C1", label="q")
    assert len(colour_only_pairs(fig)) == 2
    plt.close(fig)


# --------------------------------------------------- colour-vision-deficiency simulation
#: Machado, Oliveira and Fernandes (2009), severity 1.0, on linear sRGB.
MACHADO_2009 = {
    "protanopia": np.array(
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ]
    ),
    "deuteranopia": np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ]
    ),
    "tritanopia": np.array(
        [
            [1.255528, -0.076749, -0.178779],
            [-0.078411, 0.930809, 0.147602],
            [0.004733, 0.691367, 0.303900],
        ]
    ),
}


def _to_linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _to_srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def simulate_cvd(rgb: np.ndarray, kind: str) -> np.ndarray:
    """An sRGB image (floats in [0, 1], last axis RGB or RGBA) as seen with ``kind``.

    The Machado et al. matrix acts on linear RGB; alpha is kept.  Use, for example::

        img = plt.imread("fig.png"); plt.imsave("fig_deut.png", simulate_cvd(img, "deuteranopia"))
    """
    rgb = np.asarray(rgb, dtype=float)
    out = rgb.copy()
    out[..., :3] = _to_srgb(_to_linear(rgb[..., :3]) @ MACHADO_2009[kind].T)
    return out


def test_simulate_cvd_matches_colorspacious() -> None:
    """The matrices as colorspacious (an independent implementation) applies them."""
    rng = np.random.default_rng(0)
    rgb = rng.uniform(0.0, 1.0, size=(50, 3))
    names = {
        "protanopia": "protanomaly",
        "deuteranopia": "deuteranomaly",
        "tritanopia": "tritanomaly",
    }
    for kind, cvd_type in names.items():
        space = {"name": "sRGB1+CVD", "cvd_type": cvd_type, "severity": 100}
        expected = np.clip(colorspacious.cspace_convert(rgb, space, "sRGB1"), 0.0, 1.0)
        np.testing.assert_allclose(simulate_cvd(rgb, kind), expected, atol=1e-4)


def test_simulate_cvd_keeps_greys_and_merges_red_green() -> None:
    """Greys are fixed points (each matrix row sums to 1); red and green come together."""
    grey = np.full((1, 3), 0.5)
    for kind in MACHADO_2009:
        np.testing.assert_allclose(simulate_cvd(grey, kind), grey, atol=2e-6)
    red, green = np.array([[1.0, 0.0, 0.0]]), np.array([[0.0, 0.6, 0.0]])
    before = np.abs(red - green).sum()
    after = np.abs(simulate_cvd(red, "deuteranopia") - simulate_cvd(green, "deuteranopia")).sum()
    assert after < 0.5 * before
