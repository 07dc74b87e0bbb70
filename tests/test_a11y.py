"""Accessibility of every page of the built site: WCAG 2.0 and 2.1, levels A and AA.

axe-core (the engine behind most accessibility checkers) runs in headless Chromium on every
page, in the theme's light and then its dark mode, and any violation fails the test with the page, the
rule and the elements.  axe-core comes from the npm registry at a pinned version (the Makefile's
``AXE`` variable; ``make test`` fetches it into ``_build/axe``): the test injects it into the
page, so the site itself never loads it and no page requests anything from outside.

Run after ``make book`` (``make test`` does both).
"""

from __future__ import annotations

import pytest

from .sitebrowser import SITE, chromium, pages, serve, wait_for_math

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("a11y")]

AXE = SITE.parent / "axe" / "axe.min.js"
if not AXE.exists():  # pragma: no cover - make test fetches it first
    pytest.fail(f"axe-core is missing at {AXE}: run `make test`", pytrace=False)

# The rules of WCAG 2.0 and 2.1 at levels A and AA, by axe's tags.
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

RUN_AXE_JS = """
const done = arguments[arguments.length - 1];
axe.run(document, {runOnly: {type: 'tag', values: arguments[0]}, resultTypes: ['violations']})
  .then((r) => done(r.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => ({target: n.target.join(' '), html: n.html.slice(0, 160),
                                  summary: (n.failureSummary || '').slice(0, 240)}))}))))
  .catch((e) => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));
"""


@pytest.fixture(scope="module")
def site():
    with serve() as base_url, chromium() as driver:
        yield base_url, driver


def axe_violations(driver, mode: str) -> list[dict]:
    """Switch the open page to the theme's ``mode`` ("light" or "dark"); return axe's violations."""
    # Colours are checked in their final state: the theme animates some of them when the mode
    # changes, and axe would otherwise read a colour half-way through the transition.
    driver.execute_script(
        "if (!document.getElementById('a11y-no-transitions')) {"
        "  const s = document.createElement('style'); s.id = 'a11y-no-transitions';"
        "  s.textContent = '*, *::before, *::after {transition: none !important}';"
        "  document.head.appendChild(s);"
        "}"
        "document.documentElement.dataset.mode = arguments[0];"
        "document.documentElement.dataset.theme = arguments[0];",
        mode,
    )
    if not driver.execute_script("return typeof axe !== 'undefined'"):
        driver.execute_script(AXE.read_text(encoding="utf-8"))
    driver.set_script_timeout(120)
    return driver.execute_async_script(RUN_AXE_JS, WCAG_TAGS)


def describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(f"  {v['id']} ({v['impact']}): {v['help']}")
        lines.extend(f"    {n['target']}: {n['html']}" for n in v["nodes"][:6])
        if len(v["nodes"]) > 6:
            lines.append(f"    ... and {len(v['nodes']) - 6} more")
    return "\n".join(lines)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.as_posix())
def test_no_wcag_violations(site, page) -> None:
    """axe finds nothing on the page, in light mode and then in dark mode."""
    base_url, driver = site
    driver.get(base_url + page.as_posix())
    wait_for_math(driver)
    report = {mode: axe_violations(driver, mode) for mode in ("light", "dark")}
    failures = [f"{mode} mode:\n{describe(v)}" for mode, v in report.items() if v]
    assert not failures, f"{page} violates WCAG 2.1 AA\n" + "\n".join(failures)


def test_formulas_carry_assistive_mathml(site) -> None:
    """A screen reader reads each typeset formula from MathJax's hidden MathML copy."""
    base_url, driver = site
    checked = 0
    for page in pages():
        if "math" not in (SITE / page).read_text(encoding="utf-8"):
            continue
        driver.get(base_url + page.as_posix())
        wait_for_math(driver)
        missing = driver.execute_script(
            "return [...document.querySelectorAll('mjx-container')]"
            ".filter(c => !c.querySelector('mjx-assistive-mml math'))"
            ".map(c => c.textContent.slice(0, 40))"
        )
        assert not missing, f"{page}: formulas without assistive MathML: {missing[:5]}"
        checked += 1
    assert checked >= 9, f"only {checked} pages with formulas were found"


READING_ORDER_JS = """
const blocks = [...document.querySelectorAll(
  '.bd-article > section p, .bd-article > section h1, .bd-article > section h2,'
  + ' .bd-article > section h3, .bd-article > section figure, .bd-article > section .cell')]
  .filter((e) => e.checkVisibility({visibilityProperty: true, opacityProperty: true}));
const out = [];
let prev = null, prevText = '';
for (const e of blocks) {
  const r = e.getBoundingClientRect();
  if (r.height === 0) continue;
  // out of order: the whole block lies above the block the document puts before it
  if (prev && r.bottom <= prev.top + 1) {
    out.push(e.tagName + ': ' + e.textContent.trim().slice(0, 60) + ' <after> ' + prevText);
  }
  prev = r; prevText = e.tagName + '.' + e.className + ': ' + e.textContent.trim().slice(0, 40);
}
return out;
"""


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.as_posix())
def test_reading_order_is_visual_order(site, page) -> None:
    """In the article, no paragraph, heading, figure or cell lies wholly above the one the
    document puts before it: a screen reader, which follows the document, reads what the eye
    reads (blocks side by side, as in a table row, are allowed)."""
    base_url, driver = site
    driver.get(base_url + page.as_posix())
    wait_for_math(driver)
    out_of_order = driver.execute_script(READING_ORDER_JS)
    assert not out_of_order, f"{page}: blocks that appear above their predecessor: {out_of_order}"


GENERIC_ALT = {"plot", "figure", "image", "graph", "chart", "output", "png", "picture", "svg"}

FIGURE_ALTS_JS = """
return [...document.querySelectorAll('.bd-article img')].map((i) => ['img ' + i.src.slice(-40), i.alt])
  .concat([...document.querySelectorAll('.bd-article svg[role=img]')]
          .map((s) => ['interactive figure', s.getAttribute('aria-label') || '']));
"""


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.as_posix())
def test_every_figure_says_what_it_shows(site, page) -> None:
    """Every image and every interactive figure has a text alternative of at least eight words
    that is more than a generic word ("plot", "figure", ...): what a sighted reader sees."""
    base_url, driver = site
    driver.get(base_url + page.as_posix())
    weak = []
    for where, alt in driver.execute_script(FIGURE_ALTS_JS):
        words = alt.replace(".", " ").split()
        if len(words) < 8 or {w.lower() for w in words} <= GENERIC_ALT:
            weak.append(f"{where}: {alt!r}")
    assert not weak, f"{page}: figures without a text alternative that describes them: {weak}"


FIGURE_PAGES = [p for p in pages() if "ropefig" in (SITE / p).read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", FIGURE_PAGES, ids=lambda p: p.as_posix())
def test_sliders_announce_their_value_when_moved_by_keyboard(site, page) -> None:
    """Each slider is reached with Tab-able focus, moves with the arrow keys, and tells a
    screen reader its new value (aria-valuetext); the figure's readout is a live region."""
    from selenium.webdriver.common.keys import Keys

    base_url, driver = site
    driver.get(base_url + page.as_posix())
    for figure in driver.find_elements("css selector", "figure.ropefig"):
        readout = figure.find_element("css selector", ".ropefig-readout")
        assert readout.get_attribute("aria-live") == "polite", f"{page}: readout not live"
        for slider in figure.find_elements("css selector", "input[type=range]"):
            assert slider.get_attribute("tabindex") in (None, "", "0"), f"{page}: not focusable"
            before = slider.get_attribute("aria-valuetext")
            label = driver.execute_script("return arguments[0].labels[0].textContent", slider)
            assert before and before.startswith(label), f"{page}: {label!r} says {before!r}"
            at_max = float(slider.get_attribute("value")) >= float(slider.get_attribute("max"))
            slider.send_keys(Keys.ARROW_LEFT if at_max else Keys.ARROW_RIGHT)
            after = slider.get_attribute("aria-valuetext")
            assert after != before, f"{page}: {label!r} announces nothing new ({after!r})"
            shown = driver.execute_script(
                "return document.querySelector(`output[for='${arguments[0].id}']`).textContent",
                slider,
            )
            assert after.endswith(shown), f"{page}: announced {after!r}, shown {shown!r}"
