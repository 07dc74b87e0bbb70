"""Every page of the built site in a real browser (headless Chromium over localhost).

For each page: no console errors, no request leaving localhost, every equation
typeset by MathJax, every image loaded, a full-page screenshot saved under
``_build/screenshots/``.  For each interactive figure: every slider is labelled
and changes the figure, the keyboard moves it, and the numbers the page computes
equal ``rope_lib.figures.interactive.compute`` at several slider settings.

Run after ``make book`` (``make test`` does both).
"""

from __future__ import annotations

import numpy as np
import pytest

from rope_lib.figures.interactive import MODELS, compute

from .sitebrowser import (
    FIGURE_STATE_JS,
    SCREENSHOTS,
    SET_SLIDER_JS,
    SITE,
    chromium,
    is_local,
    pages,
    requested_urls,
    screenshot_full_page,
    serve,
    wait_for_math,
)

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

if not (SITE / "index.html").exists():  # pragma: no cover - make test builds first
    pytest.fail("the site is not built: run `make book` (or `make test`) first", pytrace=False)

PAGES = pages()
# Length parameters are kept moderate when values are shipped back to Python.
LENGTHS = {"max_distance", "max_m", "positions"}


@pytest.fixture(scope="module")
def site():
    with serve() as base_url, chromium() as driver:
        yield base_url, driver


def _open(site, page) -> object:
    base_url, driver = site
    driver.get_log("browser")
    requested_urls(driver)
    driver.get(base_url + page.as_posix())
    wait_for_math(driver)
    return driver


#: What no page may hold: each script lists the elements at fault (a short description of each).
PAGE_CHECKS = {
    "equations not typeset by MathJax": "return [...document.querySelectorAll('.math')]"
    ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60))",
    "images that did not load": "return [...document.images]"
    ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)",
    "images with neither alt text nor a caption": "return [...document.querySelectorAll("
    "'.bd-article img')].filter(i => !i.alt && !i.closest('figure')).map(i => i.src.slice(-60))",
    # A formula Markdown did not hand to MathJax (e.g. a line of it read as a list item)
    # shows its TeX: a $...$ pair, \( \) \[ \], or a command such as \frac, in the text.
    "TeX left raw in the text": "const w = document.createTreeWalker(document.querySelector("
    "'.bd-article') || document.body, NodeFilter.SHOW_TEXT), bad = [];"
    r"const re = /\$[^$\n]+\$|\\[()\[\]]|\\[A-Za-z]{2,}/;"
    "while (w.nextNode()) { const n = w.currentNode;"
    "if (n.parentElement.closest('pre, code, script, style, mjx-container, .math, "
    ".cell_output, textarea')) continue;"
    "if (re.test(n.textContent)) bad.push(n.textContent.trim().slice(0, 70)); }"
    "return bad;",
    "outputs, code or equations that scroll sideways": "return [...document.querySelectorAll("
    "'.bd-article .cell_output pre, .bd-article .cell_input pre, .bd-article div.math')]"
    ".filter(e => e.scrollWidth > e.clientWidth + 2)"
    ".map(e => e.textContent.trim().slice(0, 70))",
}


def test_raw_tex_check_flags_a_formula_left_untypeset(tmp_path) -> None:
    """The check of PAGE_CHECKS for raw TeX, on a page written here. A formula broken across
    a line that starts with '+ ' becomes a paragraph ending in its first half and a list
    item holding the rest: the half with a TeX command is flagged (a lone $ is not: it
    could be text), and so is a raw \\( \\) pair; typeset math, code and outputs are not."""
    (tmp_path / "page.html").write_text(
        "<html><body><article class='bd-article'>"
        "<p>the feature map $\\operatorname{elu}(x)</p><ul><li>1$ keeps scores positive</li></ul>"
        "<p>a checked formula <span class='math'>\\(x + 1\\)</span> and"
        " <code>\\frac{a}{b}</code>, and a plain sentence.</p>"
        "<div class='cell_output'><pre>$5 and \\alpha in an output</pre></div>"
        "<p>inline \\(x\\) left raw</p>"
        "</article></body></html>"
    )
    with serve(tmp_path) as base_url, chromium() as driver:
        driver.get(base_url + "page.html")
        found = driver.execute_script(PAGE_CHECKS["TeX left raw in the text"])
    assert found == ["the feature map $\\operatorname{elu}(x)", "inline \\(x\\) left raw"]


def _figures(driver) -> list:
    return driver.find_elements("css selector", "figure.ropefig")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.as_posix())
def test_page_renders_offline_and_cleanly(site, page) -> None:
    driver = _open(site, page)
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"{page}: console errors: {errors}"
    outside = [u for u in requested_urls(driver) if not is_local(u)]
    assert not outside, f"{page}: requests left localhost: {outside}"
    for problem, script in PAGE_CHECKS.items():
        found = driver.execute_script(script)
        assert not found, f"{page}: {problem} ({len(found)}): {found[:5]}"
    screenshot_full_page(driver, SCREENSHOTS / (page.as_posix().replace("/", "__") + ".png"))


def _state(driver, figure) -> dict:
    return driver.execute_script(FIGURE_STATE_JS, figure)


# The highlighted source pages (_modules/, the API reference's viewcode) show the figures'
# code, which names "ropefig", but hold no figure.
FIGURE_PAGES = [
    p
    for p in PAGES
    if p.parts[0] != "_modules" and "ropefig" in (SITE / p).read_text(encoding="utf-8")
]


def test_some_pages_have_interactive_figures() -> None:
    assert FIGURE_PAGES, "no page of the built book has an interactive figure"


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.as_posix())
def test_every_slider_is_labelled_and_moves_its_figure(site, page) -> None:
    from selenium.webdriver.common.keys import Keys

    driver = _open(site, page)
    for figure in _figures(driver):
        inputs = figure.find_elements("css selector", "input[type=range], select")
        assert inputs, f"{page}: a figure without controls"
        for element in inputs:
            label = driver.execute_script(
                "return [...arguments[0].labels].map(l => l.textContent).join(' ')", element
            )
            assert label.strip(), f"{page}: a slider without a label"
            before = _state(driver, figure)
            if element.tag_name == "select":  # a drop-down: take another option
                options = [
                    o.get_attribute("value") for o in element.find_elements("tag name", "option")
                ]
                target = next(o for o in options if o != element.get_attribute("value"))
            else:
                lo, hi, step, value = (
                    float(element.get_attribute(a)) for a in ("min", "max", "step", "value")
                )
                target = value + step if value + step <= hi else value - step
            driver.execute_script(SET_SLIDER_JS, element, str(target))
            after = _state(driver, figure)
            assert after["values"] != before["values"], (
                f"{page}: slider {label!r} did not change the values"
            )
            assert after["svg"] != before["svg"], (
                f"{page}: slider {label!r} did not redraw the figure"
            )
        # keyboard: focus the first slider and press the right arrow
        first = next(e for e in inputs if e.tag_name == "input")
        before = _state(driver, figure)
        if float(first.get_attribute("value")) >= float(first.get_attribute("max")):
            first.send_keys(Keys.ARROW_LEFT)
        else:
            first.send_keys(Keys.ARROW_RIGHT)
        assert _state(driver, figure)["values"] != before["values"], (
            f"{page}: keyboard did not move a slider"
        )
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"{page}: console errors while moving sliders: {errors}"


def _settings(spec) -> list[dict]:
    """Slider positions to test: defaults, all minima, all maxima (lengths kept moderate)."""
    lows, highs = {}, {}
    for p in spec["params"]:
        if p["kind"] == "choice":
            continue
        lows[p["name"]] = p["min"]
        top = p["max"]
        if p["name"] in LENGTHS:
            top = min(p["max"], p["min"] + 32 * p["step"])
        highs[p["name"]] = top
    return [{}, lows, highs]


def _compare(page_data: dict, expected: dict, where: str) -> None:
    for got, want in zip(page_data["panels"], expected["panels"], strict=True):
        assert got["kind"] == want["kind"], where
        if want["kind"] == "lines":
            for gs, ws in zip(got["series"], want["series"], strict=True):
                np.testing.assert_array_equal(gs["x"], ws["x"], err_msg=where)
                scale = max(1.0, float(np.max(np.abs(ws["y"]))))
                np.testing.assert_allclose(
                    gs["y"], ws["y"], rtol=0, atol=1e-9 * scale, err_msg=where
                )
                for band in ("lo", "hi"):
                    assert (band in gs) == (band in ws), where
                    if band in ws:
                        np.testing.assert_allclose(
                            gs[band], ws[band], rtol=0, atol=1e-9 * scale, err_msg=where
                        )
            assert got["vlines"] == [v["x"] for v in want["vlines"]], where
        elif want["kind"] == "heatmap":
            z = np.asarray(got["z"]).reshape(got["ny"], got["nx"])
            np.testing.assert_allclose(
                z, want["z"], rtol=0, atol=1e-9 * float(np.max(np.abs(want["z"]))), err_msg=where
            )
        else:
            want_xy = [[a["x"], a["y"]] for a in want["arrows"]]
            np.testing.assert_allclose(got["arrows"], want_xy, rtol=0, atol=1e-12, err_msg=where)


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.as_posix())
def test_page_computes_what_rope_lib_computes(site, page) -> None:
    import json

    driver = _open(site, page)
    for figure in _figures(driver):
        spec = json.loads(
            figure.find_element("css selector", "script.ropefig-spec").get_attribute("textContent")
        )
        assert spec["model"] in MODELS
        for setting in _settings(spec):
            for k, p in enumerate(spec["params"]):
                if p["name"] in setting:
                    element = figure.find_element("id", f"{spec['id']}-{k}")
                    driver.execute_script(SET_SLIDER_JS, element, str(setting[p["name"]]))
            state = _state(driver, figure)
            expected = compute(spec["model"], **state["values"])
            _compare(state, expected, f"{page} {spec['model']} at {state['values']}")


SUBSTITUTE_ENCODINGS_JS = """
const api = window.RopeFig, real = api.sinusoidal, n = arguments[0], d = arguments[1];
const own = Array.from(real(n, d, 1e4));
api.sinusoidal = (rows, dim, base) => {  // row m scaled by 1 + m/10: not relative
  const p = real(rows, dim, base);
  for (let m = 0; m < rows; m++) for (let j = 0; j < dim; j++) p[m * dim + j] *= 1 + m / 10;
  return p;
};
try {
  const out = api.models.sinusoidal({d: d, base: 1e4, positions: n});
  return {own: own, z: Array.from(out.panels[0].z), row: Array.from(out.panels[1].series[0].y),
          spread: out.spread};
} finally {
  api.sinusoidal = real;
}
"""


def test_in_page_gram_heatmap_is_computed_from_the_encodings(site) -> None:
    """The page's Gram heatmap is P P^T of its own encodings, not the closed form g(|m - n|).

    The page's encodings equal ``rope_lib.sinusoidal``; with encodings whose inner products
    depend on more than m - n substituted, the page's heatmap follows them (its diagonals
    are no longer constant).  A heatmap drawn from g(|m - n|) would fail both checks.
    """
    import rope_lib

    page = next(
        (p for p in FIGURE_PAGES if 'data-model="sinusoidal"' in (SITE / p).read_text("utf-8")),
        None,
    )
    assert page is not None, "no page carries the sinusoidal figure"
    driver = _open(site, page)
    n, d = 16, 16
    got = driver.execute_script(SUBSTITUTE_ENCODINGS_JS, n, d)
    p = rope_lib.sinusoidal(np.arange(n), d, 1e4)
    np.testing.assert_allclose(np.reshape(got["own"], (n, d)), p, rtol=0, atol=1e-13)
    stretched = p * (1 + np.arange(n)[:, None] / 10)
    expected = stretched @ stretched.T
    np.testing.assert_allclose(np.reshape(got["z"], (n, n)), expected, rtol=0, atol=1e-11)
    np.testing.assert_allclose(got["row"], expected[0], rtol=0, atol=1e-11)
    assert got["spread"] > 1.0


CONTRAST_JS = """
const lum = (c) => {
  const v = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map((x) => x / 255)
    .map((x) => (x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4)));
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
};
return [...document.querySelectorAll('figure.ropefig, figure.ropefig figcaption, figure.ropefig label,'
    + ' figure.ropefig .ropefig-readout')].map((e) => {
  const fig = e.closest('figure.ropefig');
  const a = lum(getComputedStyle(e).color), b = lum(getComputedStyle(fig).backgroundColor);
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
});
"""


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_figure_text_has_enough_contrast(site, mode) -> None:
    """WCAG AA contrast (4.5:1) for the figures' text in the theme's light and dark modes."""
    if not FIGURE_PAGES:
        pytest.skip("no interactive figure")
    driver = _open(site, FIGURE_PAGES[0])
    driver.execute_script(
        f"localStorage.setItem('theme', '{mode}'); localStorage.setItem('mode', '{mode}');"
    )
    driver.refresh()
    wait_for_math(driver)
    assert driver.execute_script("return document.documentElement.dataset.theme") == mode
    ratios = driver.execute_script(CONTRAST_JS)
    assert ratios and min(ratios) >= 4.5, f"{mode} mode: contrast ratios {ratios}"
    name = FIGURE_PAGES[0].as_posix().replace("/", "__")
    screenshot_full_page(driver, SCREENSHOTS / f"{name}-{mode}.png")
    driver.execute_script("localStorage.removeItem('theme'); localStorage.removeItem('mode');")
