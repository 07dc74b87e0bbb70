"""Tests of rope_lib.figures.experiments: chapter 9's figures, drawn from stored results.

Each figure is checked for what its caption will claim: labelled axes, one curve per base or
cell, the plotted values equal to the report's numbers, and the chance and horizon marks.
Also: reading results never imports matplotlib (the report modules do not).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rope_lib.experiments import report, runner
from rope_lib.experiments.predictions import WindowEdge
from rope_lib.figures import experiments as fx

CELL = (256, 32, 16, "log_uniform")


@pytest.fixture(scope="module")
def smoke() -> dict:
    return runner.load_results("recall", "smoke")


def test_recall_curves_plot_the_report_means(smoke: dict) -> None:
    fig = fx.plot_recall_curves(smoke, CELL)
    ax = fig.axes[0]
    cur = report.recall_curves(smoke, CELL)
    curves = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(curves) == len(cur.bases)
    for line, mean in zip(curves, cur.mean, strict=True):
        np.testing.assert_allclose(line.get_ydata(), mean)
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_xscale() == "log"
    flat = [line for line in ax.get_lines() if list(line.get_ydata()) == [cur.chance] * 2]
    assert len(flat) == 1  # the chance line
    verticals = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(verticals) == sum(h <= CELL[0] for h in cur.horizon)
    with pytest.raises(ValueError, match=r"bases must be bases of the cell"):
        fx.plot_recall_curves(smoke, CELL, bases=[7.0])
    with pytest.raises(TypeError, match=r"ax must be None or a matplotlib Axes"):
        fx.plot_recall_curves(smoke, CELL, ax="axes")


def test_learned_form_and_window_figures(smoke: dict) -> None:
    fig = fx.plot_learned_form(smoke, CELL)
    assert len(fig.axes) == 2 and all(ax.get_xlabel() and ax.get_ylabel() for ax in fig.axes)
    edge = WindowEdge("T", 256, 32, 16, 1000.0, (100.0,), (1e4,), (0,), (0,), "", "", "")
    fig = fx.plot_window_edges(smoke, [edge])
    ax = fig.axes[0]
    out = report.edge_outcomes(smoke, [edge])[0]
    mean = [line for line in ax.get_lines() if line.get_color() == "black"][0]
    np.testing.assert_allclose(
        mean.get_ydata(), np.mean([out["far_inside_runs"][0], out["far_outside_runs"][0]], axis=1)
    )
    assert "inside - outside" in ax.get_title()


def test_reading_results_does_not_import_matplotlib() -> None:
    code = (
        "import sys\n"
        "from rope_lib.experiments import report, runner\n"
        "b = runner.load_results('recall', 'smoke')\n"
        "report.reach_table(b); report.learned_form(b, (256, 32, 16, 'log_uniform'))\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_predictor_panels_centre_each_cell() -> None:
    from rope_lib import max_context
    from tests.test_report import fake_blob, fake_run

    runs = [
        fake_run(1024, d, b, s, f * max_context(b, d) * (1 + 0.01 * s))
        for d, f in ((16, 0.8), (32, 1.5))
        for b in (30.0, 100.0, 300.0, 1000.0)
        for s in range(3)
    ]
    blob = fake_blob(runs)
    fig = fx.plot_predictors(blob)
    assert len(fig.axes) == 3
    comparison = report.predictor_comparison(blob)
    for ax, key in zip(fig.axes, report.PREDICTORS, strict=True):
        assert f"residual SD {comparison[key]['sd_mean']:.2f}" in ax.get_title()
        for line in ax.get_lines():
            assert abs(np.mean(line.get_xdata())) < 1e-12 and abs(np.mean(line.get_ydata())) < 1e-12
        assert len(ax.get_lines()) == 2  # one per cell


def test_needle_controls_plot_the_report_rates() -> None:
    from tests.test_report import _needle_blob

    # base 10: seed 1 learns nothing (main = the absent-key rate 0.2 everywhere)
    blob = _needle_blob(
        {10.0: [[60, 70, 80, 90], [20, 20, 20, 20]], 100.0: [[99, 98, 97, 96], [97, 96, 95, 94]]}
    )
    fig = fx.plot_needle_controls(blob)
    cur = report.needle_curves(blob)
    assert len(fig.axes) == 2
    for i, ax in enumerate(fig.axes):
        seeds = [line for line in ax.get_lines() if line.get_marker() in (None, "None", "")][:2]
        for s, line in enumerate(seeds):
            np.testing.assert_allclose(line.get_ydata(), cur.rates["main_correct"][i, s])
        np.testing.assert_allclose(seeds[0].get_xdata(), [3.5, 6.5, 12.5, 24.5])  # bin middles
        learned = [i == 1 or s == 0 for s in range(2)]
        assert [line.get_linestyle() == "-" for line in seeds] == learned
        controls = [line for line in ax.get_lines() if line.get_marker() == "o"]
        drawn = [line for line in fx.NEEDLE_LINES if line[0] in cur.rates]  # no optional counts
        assert [line.get_label() for line in controls] == [lab for _, lab, _ in drawn]
        for line, (key, _, _) in zip(controls, drawn, strict=True):
            rates = cur.rates[key][i][np.array(learned)]  # averaged over the seeds that learned
            np.testing.assert_allclose(line.get_ydata(), rates.mean(axis=0))
        assert ax.get_xlabel() and ("1 of 2 learned" in ax.get_title()) == (i == 0)
        verticals = [line for line in ax.get_lines() if line.get_marker() in (None, "None", "")][2:]
        marks = {line.get_linestyle(): line.get_xdata()[0] for line in verticals}
        # horizons 5 (b = 10) and 16 (b = 100) lie inside [3, 33]; quarter periods 11.8 and 88.3
        assert marks[":"] == cur.horizon[i]
        assert ("-." in marks) == (cur.quarter_period[i] <= 33)
    assert fig.axes[0].get_ylabel()
    with pytest.raises(ValueError, match="bases"):
        fx.plot_needle_controls(blob, bases=[7.0])


def test_needle_controls_draw_the_optional_controls_when_the_runs_carry_them() -> None:
    from tests.test_report import _needle_blob

    blob = _needle_blob({10.0: [[60, 70, 80, 90], [20, 20, 20, 20]]})
    blob["config"]["shift"] = 8
    for run in blob["runs"]:  # the moved sequence: 10 fewer right per bin; primacy: 5 per bin
        run["shifted_correct"] = [c - 10 for c in run["main_correct"]]
        run["primacy_correct"] = [5, 5, 5, 5]
    ax = fx.plot_needle_controls(blob).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    # averaged over the one seed that learned (seed 0)
    np.testing.assert_allclose(
        lines["retrieval, moved 8 tokens later"].get_ydata(), [0.5, 0.6, 0.7, 0.8]
    )
    np.testing.assert_allclose(lines["primacy baseline (no model)"].get_ydata(), [0.05] * 4)


def test_needle_controls_grid_of_at_most_three_panels_a_row() -> None:
    from tests.test_report import _needle_blob

    counts = [[90, 90, 90, 90], [20, 20, 20, 20]]
    blob = _needle_blob({b: counts for b in (10.0, 20.0, 30.0, 100.0)})
    fig = fx.plot_needle_controls(blob)
    assert len(fig.axes) == 6  # two rows of three
    drawn = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title().split(":")[0] for ax in drawn] == [
        "b = 10",
        "b = 20",
        "b = 30",
        "b = 100",
    ]
    legends = [ax for ax in fig.axes if ax.get_legend() is not None]
    assert legends == [fig.axes[4]] and not fig.axes[4].axison  # in the first empty cell
    labels = [t.get_text() for t in fig.axes[4].get_legend().get_texts()]
    assert labels[0] == "retrieval, one line per seed" and "repeat control" in labels
    assert drawn[0].get_ylabel() and drawn[3].get_ylabel()  # first panel of each row
