"""Interactive figures with sliders, live in Jupyter and self-contained in the built book.

Every chapter makes its slider figures with one call, :func:`show`::

    from rope_lib.figures import show
    show("ones_score", d=128, base=1e4, caption="...")

One call gives two renderings of the same *model* (a map from slider values to
curves):

* in a live kernel (Jupyter, Binder), ipywidgets sliders that recompute the
  model with ``rope_lib`` and redraw it with matplotlib;
* in the built HTML, where no kernel runs, a ``<figure>`` whose sliders recompute
  the same model in the page (``static/ropefig.js``, float64 arithmetic) and draw
  it as SVG, with no server and no network.

:func:`compute` is the single Python definition of each model, built from the
library's own functions (``theta``, ``sinusoidal``, ``ones_score``, ...); the
browser tests move the page's sliders and compare what the page computed with
:func:`compute` at the same values.  The book build sets ``ROPE_LIB_STATIC=1`` so
that executed notebooks carry only the in-page version (no widget state).
"""

from __future__ import annotations

import html
import importlib
import json
import os
import uuid
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

__all__ = ["MODELS", "Param", "compute", "render_matplotlib", "show", "static_html", "thin_curve"]


@dataclass(frozen=True)
class Param:
    """One slider of an interactive figure.

    ``kind`` is ``"int"`` (a linear slider of integers), ``"float"`` (linear),
    ``"log"`` (the slider moves ``log10`` of the value between ``min`` and ``max``,
    which are exponents) or ``"choice"`` (a drop-down of ``choices``).
    """

    name: str
    label: str
    kind: str
    min: float = 0.0
    max: float = 1.0
    step: float = 1.0
    value: Any = None
    choices: tuple[str, ...] = ()

    def to_slider(self, value: Any) -> Any:
        """The slider position of ``value`` (``log10`` for log sliders)."""
        return float(np.log10(value)) if self.kind == "log" else value

    def check(self, value: Any) -> Any:
        """Validate a value given to :func:`show` or :func:`compute` for this slider."""
        if self.kind == "choice":
            if value not in self.choices:
                raise ValueError(f"{self.name} must be one of {list(self.choices)}, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"{self.name} must be a number, got {value!r}")
        lo, hi = (10.0**self.min, 10.0**self.max) if self.kind == "log" else (self.min, self.max)
        if not lo <= value <= hi * (1 + 1e-12):
            raise ValueError(
                f"{self.name} must lie in [{lo:g}, {hi:g}] for this figure, got {value!r}"
            )
        if self.kind == "int":
            if float(value) != int(value) or (int(value) - self.min) % self.step:
                raise ValueError(
                    f"{self.name} must be an integer in steps of {self.step:g} from {self.min:g}, "
                    f"got {value!r}"
                )
            return int(value)
        return float(value)


@dataclass(frozen=True)
class Model:
    """A figure model: its title, alt text and sliders."""

    name: str
    title: str
    alt: str
    params: tuple[Param, ...] = field(default_factory=tuple)


def _d(value: int = 128, lo: int = 2, hi: int = 512, label: str = "head dimension d") -> Param:
    return Param("d", label, "int", lo, hi, 2, value)


def _base(value: float = 1e4, lo: float = 1.0, hi: float = 9.0) -> Param:
    return Param("base", "base b (log scale)", "log", lo, hi, 0.05, value)


#: The slider figures by name (the ``model`` argument of :func:`show` and :func:`compute`):
#: each :class:`Model` gives the figure's title, alt text and sliders.
MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model(
            "sinusoidal",
            "Inner products of sinusoidal position encodings",
            "Heatmap of the inner product of the sinusoidal encodings of positions m and n, "
            "and its profile against the distance",
            (
                _d(64, 2, 256, label="model width d_model"),
                _base(1e4, 0.5, 6.0),
                Param("positions", "positions", "int", 16, 256, 16, 64),
            ),
        ),
        Model(
            "rotation_2d",
            "RoPE in two dimensions",
            "Arrows of a query and a key before and after rotation by m theta and n theta",
            (
                Param("m", "query position m", "int", 0, 20, 1, 2),
                Param("n", "key position n", "int", 0, 20, 1, 5),
                Param("theta", "frequency θ", "float", 0.05, 1.5, 0.05, 0.4),
            ),
        ),
        Model(
            "ones_score",
            "Score of all-ones query and key",
            "Line plot of the RoPE score of an all-ones query and key against relative distance",
            (_d(), _base(), Param("max_distance", "largest distance", "int", 64, 102400, 64, 1024)),
        ),
        Model(
            "schedules",
            "Decay for four frequency schedules",
            "Line plot of the normalised score against distance for four frequency schedules",
            (
                _d(128),
                Param("alpha", "exponent α of t^α", "float", 0.5, 4.0, 0.25, 2.0),
                Param("max_distance", "largest distance", "int", 32, 20000, 32, 128),
            ),
        ),
        Model(
            "roformer_bound",
            "RoFormer's relative upper bound",
            "Line plot of RoFormer's relative upper bound against relative distance",
            (_d(), _base(), Param("max_distance", "largest distance", "int", 32, 20000, 32, 256)),
        ),
        Model(
            "similarity_margin",
            "The similarity margin B_m and the context it allows",
            "Line plot of B_m against distance m, with the first negative value marked",
            (_d(), _base(), Param("max_m", "largest distance m", "int", 256, 102400, 256, 4096)),
        ),
    )
}


def _model(name: str) -> Model:
    if name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {name!r}")
    return MODELS[name]


def _values(model: Model, given: dict[str, Any]) -> dict[str, Any]:
    unknown = set(given) - {p.name for p in model.params}
    if unknown:
        raise TypeError(
            f"unknown parameter(s) {sorted(unknown)} for model {model.name!r}; "
            f"it takes {[p.name for p in model.params]}"
        )
    return {p.name: p.check(given.get(p.name, p.value)) for p in model.params}


def _lines(title: str, xlabel: str, ylabel: str, series, vlines=()) -> dict:
    return {
        "kind": "lines",
        "title": title,
        "xlabel": xlabel,
        "ylabel": ylabel,
        "series": [
            {"label": lab, "x": np.asarray(x, float), "y": np.asarray(y, float)}
            for lab, x, y in series
        ],
        "vlines": list(vlines),
    }


def compute(model: str, **values: Any) -> dict:
    r"""Compute the curves of an interactive figure with ``rope_lib``'s own functions.

    The page's script computes the same structure; this is the reference the
    browser tests compare it with.

    Parameters
    ----------
    model : str
        One of :data:`MODELS`: ``"sinusoidal"`` (Gram matrix
        :math:`\langle p_m, p_n\rangle` and its profile), ``"rotation_2d"``
        (:math:`R_m q`, :math:`R_n k` in two dimensions), ``"ones_score"``
        (:math:`2\sum_i\cos(x\theta_i)`), ``"schedules"`` (four schedules
        :math:`\theta_t`), ``"roformer_bound"`` and ``"similarity_margin"``
        (:math:`B_m` and the first :math:`m` with :math:`B_m < 0`).
    **values
        Slider values; missing ones take the model's defaults.

    Returns
    -------
    dict
        ``{"panels": [...], "readout": str, ...}``; a panel is ``lines`` (series of
        ``x``, ``y`` arrays and vertical markers), ``heatmap`` (``z`` of shape
        ``(ny, nx)``) or ``arrows``.
    """
    spec = _model(model)
    v = _values(spec, values)
    return _COMPUTE[model](v)


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def _compute_sinusoidal(v: dict) -> dict:
    # The Gram matrix of the encodings themselves (p @ p.T), not the closed form
    # g(m - n): constant diagonals are then computed, not assumed.  The page does the same.
    from ..taylor import diagonal_spread

    # looked up on the module at call time, so that a test can substitute other encodings
    encode = importlib.import_module("..sinusoidal", __package__).sinusoidal
    n = v["positions"]
    p = encode(np.arange(n), v["d"], v["base"])
    gram = p @ p.T
    spread = float(diagonal_spread(gram))
    # sequential colour scale from the smallest inner product up to d/2 (the diagonal)
    return {
        "panels": [
            {
                "kind": "heatmap",
                "title": "⟨p_m, p_n⟩",
                "xlabel": "position n",
                "ylabel": "position m",
                "z": gram,
                "nx": n,
                "ny": n,
                "vmin": float(gram.min()),
                "vmax": v["d"] / 2,
            },
            _lines(
                "⟨p_0, p_x⟩, row m = 0",
                "distance x",
                "inner product",
                [("⟨p_0, p_x⟩", np.arange(n), gram[0])],
            ),
        ],
        "readout": f"d = {v['d']}, base = {_fmt(v['base'])}: computed from the encodings, the "
        f"largest range along a diagonal is {spread:.1e} (float64 round-off)",
        "spread": spread,
    }


def _compute_rotation_2d(v: dict) -> dict:
    q, k = np.array([1.0, 0.3]), np.array([0.8, 0.6])

    def rot(a: float) -> np.ndarray:
        return np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])

    qm, kn = rot(v["m"] * v["theta"]) @ q, rot(v["n"] * v["theta"]) @ k
    score = float(qm @ kn)
    arrows = [("q", q, True), ("k", k, True), ("R_m q", qm, False), ("R_n k", kn, False)]
    return {
        "panels": [
            {
                "kind": "arrows",
                "title": "q rotated by mθ, k rotated by nθ",
                "xlabel": "coordinate 0",
                "ylabel": "coordinate 1",
                "arrows": [
                    {"label": lab, "x": float(a[0]), "y": float(a[1]), "faint": f}
                    for lab, a, f in arrows
                ],
            }
        ],
        "readout": f"score (R_m q)·(R_n k) = {score:.4f} depends on n − m = {v['n'] - v['m']} only",
        "score": score,
    }


def _distance_curve(v: dict, fn, title: str, ylabel: str, label: str, readout: str) -> dict:
    """One panel: ``fn(x, d, base)`` over the distances ``x = 0 .. max_distance``."""
    x = np.arange(v["max_distance"] + 1)
    curve = (label, x, fn(x, v["d"], v["base"]))
    return {"panels": [_lines(title, "relative distance x", ylabel, [curve])], "readout": readout}


def _compute_ones_score(v: dict) -> dict:
    from ..decay import ones_score

    readout = f"d = {v['d']}, base = {_fmt(v['base'])}: score at x = 0 is d = {v['d']}"
    title = "RoPE score of q = k = ones"
    return _distance_curve(v, ones_score, title, "score 2 Σ cos(x θ_i)", "score", readout)


def _compute_schedules(v: dict) -> dict:
    from ..decay import schedule_score

    x = np.arange(v["max_distance"] + 1)
    alpha = f"t^{v['alpha']!r}"
    names = {"10000^-t": "10000^-t", "1000^-t": "1000^-t", alpha: f"t^{_fmt(v['alpha'])}", "t": "t"}
    # schedule_score is 2 Σ cos(x θ_t); dividing by d gives the normalised (2/d) Σ cos.
    series = [(label, x, schedule_score(x, v["d"], name) / v["d"]) for name, label in names.items()]
    return {
        "panels": [
            _lines(
                "(2/d) Σ cos(x θ_t) for four schedules",
                "relative distance x",
                "normalised score",
                series,
            )
        ],
        "readout": f"d = {v['d']}, α = {_fmt(v['alpha'])}",
    }


def _compute_roformer_bound(v: dict) -> dict:
    from ..decay import roformer_bound

    readout = f"d = {v['d']}, base = {_fmt(v['base'])}"
    title = "RoFormer's relative upper bound"
    return _distance_curve(v, roformer_bound, title, "(1/(d/2)) Σ_j |S_j|", "bound", readout)


def _compute_similarity_margin(v: dict) -> dict:
    from ..base_bound import similarity_margin

    m = np.arange(v["max_m"] + 1)
    b = similarity_margin(m, v["d"], v["base"])
    # the horizon (max_context) when it lies in the plotted range, else -1
    negative = np.flatnonzero(b < 0)
    first = int(negative[0]) if negative.size else -1
    d, base = v["d"], _fmt(v["base"])
    readout = (
        f"d = {d}, base = {base}: B_m ≥ 0 for m < {first}, so the context is at most {first}"
        if first >= 0
        else f"d = {d}, base = {base}: B_m ≥ 0 on the whole plotted range (m ≤ {v['max_m']})"
    )
    vlines = [{"x": first, "label": f"first m with B_m < 0: {first}"}] if first >= 0 else []
    return {
        "panels": [_lines("B_m = Σ cos(m θ_i)", "distance m", "B_m", [("B_m", m, b)], vlines)],
        "readout": readout,
        "horizon": first,
    }


_COMPUTE = {
    "sinusoidal": _compute_sinusoidal,
    "rotation_2d": _compute_rotation_2d,
    "ones_score": _compute_ones_score,
    "schedules": _compute_schedules,
    "roformer_bound": _compute_roformer_bound,
    "similarity_margin": _compute_similarity_margin,
}


# ------------------------------------------------------------------ rendering


def thin_curve(x: np.ndarray, y: np.ndarray, columns: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    """Keep the first, the smallest and the largest point of each of ``columns`` bins of x.

    A curve of 10^5 points drawn at figure resolution looks the same through its
    per-column extremes, and draws an order of magnitude faster (the in-page
    script does the same per pixel column).  Curves of at most ``4 * columns``
    points are returned unchanged.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size <= 4 * columns:
        return x, y
    edges = np.linspace(x[0], x[-1], columns + 1)
    bins = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, columns - 1)
    starts = np.flatnonzero(np.r_[True, bins[1:] != bins[:-1]])
    keep = [starts]
    for reduce in (np.minimum, np.maximum):
        extreme = reduce.reduceat(y, starts)
        hit = y == np.repeat(extreme, np.diff(np.r_[starts, y.size]))
        # first index in each bin where the extreme is reached
        first = np.flatnonzero(hit & np.r_[True, ~hit[:-1] | (bins[1:] != bins[:-1])])
        keep.append(first[np.r_[True, bins[first][1:] != bins[first][:-1]]])
    idx = np.unique(np.concatenate(keep + [[x.size - 1]]))
    return x[idx], y[idx]


def render_matplotlib(data: dict, title: str | None = None):
    """Draw the output of :func:`compute` with matplotlib (the live-kernel view).

    Returns
    -------
    matplotlib.figure.Figure
        One panel per entry of ``data["panels"]``.
    """
    from .style import CMAP, line_style, new_figure

    panels = data["panels"]
    fig, axes = new_figure(ncols=len(panels), width=4.6 * len(panels), height=3.8)
    axes = np.atleast_1d(axes)
    for ax, panel in zip(axes, panels, strict=True):
        ax.set(title=panel["title"], xlabel=panel["xlabel"], ylabel=panel["ylabel"])
        if panel["kind"] == "lines":
            for k, s in enumerate(panel["series"]):
                style = line_style(k)
                ax.plot(*thin_curve(s["x"], s["y"]), label=s["label"], linewidth=1.4, **style)
                if "lo" in s:
                    ax.fill_between(s["x"], s["lo"], s["hi"], color=style["color"], alpha=0.18)
            for j, vl in enumerate(panel["vlines"]):
                dash = "--" if j % 2 == 0 else ":"
                ax.axvline(vl["x"], color="#D55E00", linestyle=dash, label=vl["label"])
            if panel.get("xlog"):
                ax.set_xscale("log")
            if "ylim" in panel:
                ax.set_ylim(*panel["ylim"])
            if len(panel["series"]) > 1 or panel["vlines"]:
                ax.legend()
        elif panel["kind"] == "heatmap":
            image = ax.imshow(
                panel["z"], cmap=CMAP, vmin=panel["vmin"], vmax=panel["vmax"], origin="upper"
            )
            ax.grid(False)
            fig.colorbar(image, ax=ax, shrink=0.85)
        elif panel["kind"] == "arrows":
            r = 1.2 * max(np.hypot(a["x"], a["y"]) for a in panel["arrows"])
            for k, a in enumerate(panel["arrows"]):
                style = line_style(k)
                ax.annotate(
                    "",
                    xy=(a["x"], a["y"]),
                    xytext=(0, 0),
                    arrowprops={
                        "arrowstyle": "->",
                        "color": style["color"],
                        "alpha": 0.5 if a["faint"] else 1.0,
                    },
                )
                ax.text(a["x"], a["y"], " " + a["label"], color=style["color"])
            ax.set_xlim(-r, r)
            ax.set_ylim(-r, r)
            ax.set_aspect("equal")
        else:  # pragma: no cover - compute() only makes the three kinds above
            raise ValueError(f"unknown panel kind {panel['kind']!r}")
    fig.suptitle(title or data["readout"], fontsize=10)
    return fig


def _asset(name: str) -> str:
    return resources.files("rope_lib.figures").joinpath("static", name).read_text(encoding="utf-8")


def static_html(model: str, caption: str = "", **values: Any) -> str:
    """The self-contained HTML of an interactive figure for the built book.

    A ``<figure>`` with the model's description as JSON, an empty plot area, and
    the style and script (``static/ropefig.css``, ``static/ropefig.js``) inline,
    so the page needs nothing else.  The caption may use inline HTML.
    """
    spec = _model(model)
    v = _values(spec, values)
    fig_id = "ropefig-" + uuid.uuid4().hex[:10]
    params = []
    for p in spec.params:
        entry = {"name": p.name, "label": p.label, "kind": p.kind, "value": p.to_slider(v[p.name])}
        if p.kind == "choice":
            entry["choices"] = list(p.choices)
        else:
            entry.update(min=p.min, max=p.max, step=p.step)
        params.append(entry)
    spec_json = {"id": fig_id, "model": model, "params": params}
    payload = json.dumps(spec_json).replace("</", "<\\/")
    caption_html = f"<figcaption>{caption}</figcaption>" if caption else ""
    return (
        f'<figure class="ropefig" id="{fig_id}" data-model="{model}" data-alt="{html.escape(spec.alt)}">'
        f"<style>{_asset('ropefig.css')}</style>"
        f'<script type="application/json" class="ropefig-spec">{payload}</script>'
        f'<div class="ropefig-controls" role="group" aria-label="{html.escape(spec.title)}: controls"></div>'
        f'<div class="ropefig-plot"></div><p class="ropefig-readout" aria-live="polite"></p>'
        f"{caption_html}<script>{_asset('ropefig.js')}</script></figure>"
    )


class InteractiveFigure:
    """What :func:`show` returns: displays as live widgets or as in-page HTML."""

    def __init__(self, model: str, caption: str, values: dict[str, Any], live: bool) -> None:
        self.model, self.caption, self.values = model, caption, values
        self.html = static_html(model, caption, **values)
        self.widget = _live_widget(model, values) if live else None

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {
            "text/plain": f"<interactive figure {self.model!r} {self.values}>",
            "text/html": self.html,
        }
        if self.widget is not None:
            bundle.update(self.widget._repr_mimebundle_())
            bundle["text/html"] = self.html  # fallback for front ends without ipywidgets
        return bundle


def _live_widget(model: str, values: dict[str, Any]):
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import display

    spec = _model(model)
    controls = {}
    for p in spec.params:
        style = {"description_width": "initial"}
        if p.kind == "int":
            controls[p.name] = w.IntSlider(
                values[p.name], p.min, p.max, p.step, description=p.label, style=style
            )
        elif p.kind == "float":
            controls[p.name] = w.FloatSlider(
                values[p.name], min=p.min, max=p.max, step=p.step, description=p.label, style=style
            )
        elif p.kind == "log":
            controls[p.name] = w.FloatLogSlider(
                values[p.name],
                base=10,
                min=p.min,
                max=p.max,
                step=p.step,
                description=p.label,
                style=style,
            )
        else:
            controls[p.name] = w.Dropdown(
                options=list(p.choices), value=values[p.name], description=p.label, style=style
            )

    def redraw(**kw):
        fig = render_matplotlib(compute(model, **kw))
        display(fig)
        plt.close(fig)

    out = w.interactive_output(redraw, controls)
    return w.VBox([w.HBox(list(controls.values()), layout=w.Layout(flex_flow="row wrap")), out])


def show(model: str, caption: str = "", **values: Any) -> InteractiveFigure:
    """Display an interactive figure with sliders.

    Parameters
    ----------
    model : str
        Name of the figure model (see :func:`compute`).
    caption : str
        Caption shown under the figure (inline HTML allowed).
    **values
        Initial slider values, e.g. ``d=128, base=1e4``.

    Returns
    -------
    InteractiveFigure
        Live ipywidgets in a kernel, plus the self-contained HTML version, which is
        the only one produced when the environment variable ``ROPE_LIB_STATIC`` is
        ``1`` (the book build).
    """
    spec = _model(model)
    v = _values(spec, values)
    live = os.environ.get("ROPE_LIB_STATIC", "") != "1"
    return InteractiveFigure(model, caption, v, live)
