"""How fast the book rebuilds and how fast its sliders redraw.

* ``make book`` with nothing changed (target: under 30 s);
* every interactive figure of the built site, in headless Chromium: time of one
  slider change (recompute + SVG redraw, from the page's Performance API) at the
  default settings and with d = 512 and the longest distance range the figure
  offers (target: 50 ms for d up to 512);
* the live-kernel path: ``rope_lib.figures.interactive.compute`` plus the matplotlib redraw
  for the same settings.

Run with ``make bench`` after ``make book``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rope_lib.figures.interactive import MODELS, compute, render_matplotlib  # noqa: E402
from tests.sitebrowser import SET_SLIDER_JS, SITE, chromium, pages, serve  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 7
QUICK_REPEATS = 3


def _rebuild_seconds() -> float:
    start = time.perf_counter()
    subprocess.run(
        ["make", "--no-print-directory", "book"], cwd=ROOT, check=True, capture_output=True
    )
    return time.perf_counter() - start


def _heaviest(spec: dict) -> dict:
    """Slider positions with d at 512 (or its max) and the longest range."""
    out = {}
    for p in spec["params"]:
        if p["name"] == "d" or p["name"] in {"max_distance", "max_m", "positions"}:
            out[p["name"]] = p["max"]
    return out


def _time_figure(driver, figure, spec: dict, setting: dict, repeats: int) -> list[float]:
    for k, p in enumerate(spec["params"]):
        if p["name"] in setting:
            element = figure.find_element("id", f"{spec['id']}-{k}")
            driver.execute_script(SET_SLIDER_JS, element, str(setting[p["name"]]))
    # the slider moved in each repetition is the first one that is not d (or d itself)
    k, p = next(((k, p) for k, p in enumerate(spec["params"]) if p["kind"] != "choice"))
    element = figure.find_element("id", f"{spec['id']}-{k}")
    times = []
    for r in range(repeats):
        value = float(element.get_attribute("value"))
        step = float(p["step"]) * (1 if r % 2 == 0 else -1)
        target = value + step if p["min"] <= value + step <= p["max"] else value - step
        driver.execute_script(SET_SLIDER_JS, element, str(target))
        times.append(driver.execute_script("return arguments[0].ropefig.ms", figure))
    return times


def _python_seconds(model: str, values: dict) -> float:
    start = time.perf_counter()
    fig = render_matplotlib(compute(model, **values))
    fig.canvas.draw()
    plt.close(fig)
    return time.perf_counter() - start


def main(quick: bool = False) -> None:
    """Print the timings; ``quick``: three repetitions per figure instead of seven."""
    repeats = QUICK_REPEATS if quick else REPEATS
    print(f"make book with nothing changed: {_rebuild_seconds():.1f} s (target < 30 s)")
    rows = []
    with serve() as base_url, chromium() as driver:
        for page in pages():
            if "ropefig" not in (SITE / page).read_text(encoding="utf-8"):
                continue
            driver.get(base_url + page.as_posix())
            for figure in driver.find_elements("css selector", "figure.ropefig"):
                spec = json.loads(
                    figure.find_element("css selector", "script.ropefig-spec").get_attribute(
                        "textContent"
                    )
                )
                default = _time_figure(driver, figure, spec, {}, repeats)
                heavy = _time_figure(driver, figure, spec, _heaviest(spec), repeats)
                values = driver.execute_script("return arguments[0].ropefig.values", figure)
                rows.append((page.stem, spec["model"], default, heavy, values))
    print(f"\nslider redraw in the page (ms, min / median of {repeats}); target 50 ms at d <= 512")
    print(f"{'page':28} {'model':18} {'default':>14} {'heaviest':>14}  heaviest settings")
    worst = 0.0
    for page, model, default, heavy, values in rows:
        worst = max(worst, statistics.median(heavy))
        shown = {
            k: v for k, v in values.items() if k in {"d", "max_distance", "max_m", "positions"}
        }
        print(
            f"{page:28} {model:18} {min(default):6.1f} / {statistics.median(default):5.1f}"
            f" {min(heavy):6.1f} / {statistics.median(heavy):5.1f}  {shown}"
        )
    if rows:
        print(
            f"worst median redraw: {worst:.1f} ms -> {'within' if worst <= 50 else 'OVER'} the 50 ms target"
        )
    print(
        "\nlive-kernel path (compute + matplotlib redraw), seconds, at each model's heaviest settings"
    )
    for model, spec in MODELS.items():
        heavy = {  # the largest value on each slider's grid
            p.name: int(p.min + (p.max - p.min) // p.step * p.step)
            for p in spec.params
            if p.name == "d" or p.name in {"max_distance", "max_m", "positions"}
        }
        print(f"  {model:18} {_python_seconds(model, heavy):6.3f} s  {heavy}")


if __name__ == "__main__":
    main()
