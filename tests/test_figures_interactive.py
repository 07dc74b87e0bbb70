"""rope_lib.figures.interactive: every figure model against direct sums, and both renderings.

The in-page (JavaScript) twin of each model is compared with ``compute`` in
``tests/test_site.py``; here ``compute`` itself is checked against plain loops of
``math.cos`` written independently of the library.
"""

from __future__ import annotations

import cmath
import json
import math
import re

import numpy as np
import pytest

from rope_lib.figures import interactive
from rope_lib.figures.interactive import MODELS, compute, render_matplotlib, show, static_html


def _theta(d: int, base: float) -> list[float]:
    return [base ** (-2 * i / d) for i in range(d // 2)]


def _series(data: dict, panel: int = 0, k: int = 0) -> np.ndarray:
    return data["panels"][panel]["series"][k]["y"]


@pytest.mark.parametrize(("d", "base", "n"), [(2, 10.0, 16), (64, 1e4, 48), (256, 1e6, 32)])
def test_sinusoidal_model_is_the_gram_matrix(d: int, base: float, n: int) -> None:
    data = compute("sinusoidal", d=d, base=base, positions=n)
    th = _theta(d, base)
    expected = [[sum(math.cos((a - b) * t) for t in th) for b in range(n)] for a in range(n)]
    np.testing.assert_allclose(data["panels"][0]["z"], expected, atol=1e-11)
    np.testing.assert_allclose(_series(data, 1), expected[0], atol=1e-11)


def test_sinusoidal_model_computes_the_gram_matrix_of_the_encodings(monkeypatch) -> None:
    """The heatmap is P P^T of whatever encodings the library returns, not the closed form.

    With encodings whose inner products are *not* a function of m - n substituted for
    ``rope_lib.sinusoidal``, the model must show a matrix that is not constant along its
    diagonals; a model drawn from g(|m - n|) would still show constant diagonals.
    """
    import sys

    module = sys.modules["rope_lib.sinusoidal"]
    real = module.sinusoidal

    def stretched(positions, d, base=10000.0):  # row m scaled by 1 + m/10: not relative
        p = real(positions, d, base)
        return p * (1.0 + np.asarray(positions, float)[:, None] / 10)

    monkeypatch.setattr(module, "sinusoidal", stretched)
    data = compute("sinusoidal", d=16, base=1e4, positions=16)
    th = _theta(16, 1e4)
    expected = [
        [(1 + a / 10) * (1 + b / 10) * sum(math.cos((a - b) * t) for t in th) for b in range(16)]
        for a in range(16)
    ]
    np.testing.assert_allclose(data["panels"][0]["z"], expected, atol=1e-11)
    np.testing.assert_allclose(_series(data, 1), expected[0], atol=1e-11)
    assert data["spread"] > 1.0  # the diagonals are no longer constant, and the model says so
    monkeypatch.undo()
    assert compute("sinusoidal", d=16, base=1e4, positions=16)["spread"] < 1e-12


@pytest.mark.parametrize(
    ("m", "n", "theta"), [(0, 0, 0.4), (2, 5, 0.4), (17, 3, 1.5), (20, 20, 0.05)]
)
def test_rotation_model_score_depends_on_n_minus_m(m: int, n: int, theta: float) -> None:
    data = compute("rotation_2d", m=m, n=n, theta=theta)
    q, k, phi = (1.0, 0.3), (0.8, 0.6), (n - m) * theta
    expected = math.cos(phi) * (q[0] * k[0] + q[1] * k[1]) + math.sin(phi) * (
        q[1] * k[0] - q[0] * k[1]
    )
    assert data["score"] == pytest.approx(expected, abs=1e-14)
    arrows = data["panels"][0]["arrows"]
    assert math.hypot(arrows[2]["x"], arrows[2]["y"]) == pytest.approx(math.hypot(*q))


@pytest.mark.parametrize(("d", "base", "x_max"), [(2, 1e4, 64), (128, 1e4, 1024), (512, 1e9, 320)])
def test_ones_score_model(d: int, base: float, x_max: int) -> None:
    data = compute("ones_score", d=d, base=base, max_distance=x_max)
    th = _theta(d, base)
    expected = [2 * sum(math.cos(x * t) for t in th) for x in range(x_max + 1)]
    np.testing.assert_allclose(_series(data), expected, atol=1e-10 * d)


@pytest.mark.parametrize(("d", "base"), [(2, 1e4), (128, 1e4), (64, 500.0)])
def test_roformer_bound_model(d: int, base: float) -> None:
    data = compute("roformer_bound", d=d, base=base, max_distance=256)
    th = _theta(d, base)
    expected = []
    for x in range(257):
        partial, total = 0j, 0.0
        for t in th:
            partial += cmath.exp(1j * x * t)
            total += abs(partial)
        expected.append(total / (d // 2))
    np.testing.assert_allclose(_series(data), expected, atol=1e-10)


@pytest.mark.parametrize("alpha", [0.5, 2.0, 4.0])
def test_schedules_model(alpha: float) -> None:
    d, x_max = 64, 96
    data = compute("schedules", d=d, alpha=alpha, max_distance=x_max)
    h = d // 2
    schedules = {
        "10000^-t": lambda t: 10000.0**-t,
        "1000^-t": lambda t: 1000.0**-t,
        "t^alpha": lambda t: t**alpha,
        "t": lambda t: t,
    }
    for k, fn in enumerate(schedules.values()):
        th = [fn(i / h) for i in range(h)]
        expected = [sum(math.cos(x * t) for t in th) / h for x in range(x_max + 1)]
        np.testing.assert_allclose(_series(data, 0, k), expected, atol=1e-11)


@pytest.mark.parametrize(("d", "base"), [(128, 1e4), (128, 500.0), (16, 1e3), (512, 1e6)])
def test_similarity_margin_model_marks_the_first_negative(d: int, base: float) -> None:
    data = compute("similarity_margin", d=d, base=base, max_m=4096)
    th = _theta(d, base)
    expected = np.array([sum(math.cos(m * t) for t in th) for m in range(4097)])
    np.testing.assert_allclose(_series(data), expected, atol=1e-10 * d)
    negative = np.flatnonzero(expected < 0)
    first = int(negative[0]) if negative.size else -1
    assert data["horizon"] == first
    assert [v["x"] for v in data["panels"][0]["vlines"]] == ([first] if first >= 0 else [])


def test_unknown_model_and_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        compute("nope")
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['dim'\]"):
        compute("ones_score", dim=4)
    with pytest.raises(ValueError, match="d must be an integer in steps of 2"):
        compute("ones_score", d=7)
    with pytest.raises(ValueError, match=r"base must lie in \[10, 1e\+09\]"):
        compute("ones_score", base=2.0)
    with pytest.raises(TypeError, match="d must be a number"):
        show("ones_score", d="128")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_render_matplotlib_draws_every_panel(model: str) -> None:
    data = compute(model)
    fig = render_matplotlib(data)
    try:
        axes = fig.axes[: len(data["panels"])]
        for ax, panel in zip(axes, data["panels"], strict=True):
            assert ax.get_xlabel() == panel["xlabel"] and ax.get_ylabel() == panel["ylabel"]
            if panel["kind"] == "lines":
                for line, s in zip(ax.get_lines(), panel["series"], strict=False):
                    np.testing.assert_array_equal(line.get_ydata(), s["y"])
            elif panel["kind"] == "heatmap":
                np.testing.assert_array_equal(ax.images[0].get_array(), panel["z"])
            else:
                drawn = {t.get_text().strip() for t in ax.texts}
                assert {a["label"] for a in panel["arrows"]} <= drawn
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_static_html_is_self_contained(model: str) -> None:
    page = static_html(model, caption="A <em>caption</em>.")
    spec = json.loads(re.search(r'class="ropefig-spec">(.*?)</script>', page).group(1))
    assert spec["model"] == model
    assert [p["name"] for p in spec["params"]] == [p.name for p in MODELS[model].params]
    assert "<figcaption>A <em>caption</em>.</figcaption>" in page
    assert "window.RopeFig" in page and ".ropefig-svg" in page
    assert not re.search(r'(src|href)="https?://', page), "the figure must not load anything"


def test_log_sliders_carry_the_exponent() -> None:
    spec = json.loads(
        re.search(
            r'class="ropefig-spec">(.*?)</script>', static_html("ones_score", base=1e6)
        ).group(1)
    )
    base = next(p for p in spec["params"] if p["name"] == "base")
    assert base["kind"] == "log" and base["value"] == pytest.approx(6.0)


def test_show_is_static_in_the_book_build_and_live_in_a_kernel(monkeypatch) -> None:
    monkeypatch.setenv("ROPE_LIB_STATIC", "1")
    static = show("ones_score")
    bundle = static._repr_mimebundle_()
    assert static.widget is None and "application/vnd.jupyter.widget-view+json" not in bundle
    assert bundle["text/html"].startswith('<figure class="ropefig"')

    monkeypatch.delenv("ROPE_LIB_STATIC")
    live = show("similarity_margin", d=64, base=1e3)
    bundle = live._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" in bundle
    sliders = {c.description: c.value for c in live.widget.children[0].children}
    assert sliders["head dimension d"] == 64 and sliders["base b (log scale)"] == pytest.approx(1e3)


def test_every_model_has_a_javascript_twin() -> None:
    script = interactive._asset("ropefig.js")
    for name in MODELS:
        assert re.search(rf"\n    {name}\(v\) {{", script), f"no in-page model {name!r}"


def test_thin_curve_keeps_every_column_extreme() -> None:
    from rope_lib.figures.interactive import thin_curve

    rng = np.random.default_rng(7)
    x = np.arange(100_001, dtype=float)
    y = np.cumsum(rng.normal(size=x.size))
    tx, ty = thin_curve(x, y, columns=500)
    assert tx.size < 2000 and tx[0] == 0 and tx[-1] == 100_000
    np.testing.assert_array_equal(ty, y[tx.astype(int)])  # only original points
    edges = np.linspace(0, 100_000, 501)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        inside = (x >= lo) & (x < hi)
        kept = (tx >= lo) & (tx < hi)
        assert ty[kept].max() == y[inside].max() and ty[kept].min() == y[inside].min()
    short = np.arange(10.0)
    assert thin_curve(short, short)[0] is not None and thin_curve(short, short)[0].size == 10


def test_a_choice_slider_accepts_only_its_choices() -> None:
    """The drop-down kind, which no model uses now: a listed value is returned as given, any
    other is refused by name."""
    p = interactive.Param(
        "length", "context length", "choice", value="256", choices=("256", "1024")
    )
    assert p.check("1024") == "1024"
    with pytest.raises(ValueError, match=r"length must be one of \['256', '1024'\], got '512'"):
        p.check("512")
    with pytest.raises(ValueError, match=r"length must be one of"):
        p.check(256)  # the number, not the listed string
