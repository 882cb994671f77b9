"""Variable selection in a real browser (headless Chromium): pick it in the target picker, change
the number of features twice (the second time below the informative ones), run, and see the
Inclusion view's chart follow the chains with the exact values drawn, and no error."""

from __future__ import annotations

from tests.browser_support import (  # noqa: F401  (fixtures, known to pytest by name)
    TIMEOUT_MS,
    assert_healthy,
    browser_fixture,
    button,
    open_app,
    page_fixture,
    server_fixture,
    shot,
    stop_if_running,
)

RUN_TIMEOUT_MS = 60_000  # the first run compiles its steps
# the open tab's inclusion chart: the first sampler's dots and the number of features, as a string
DOTS = """() => {
    const g = [...document.querySelectorAll('[role="tabpanel"] .js-plotly-plot')]
        .find(e => e.offsetParent !== null);
    if (!g || !g.data || !g.data.some(t => t.name === 'exact')) return null;
    const dots = g.data[g.data.length - 1];
    return JSON.stringify(Array.from(dots.y)); }"""


def set_number(page, key: str, value: int) -> None:
    box = page.locator(f".st-key-{key} input")
    box.fill(str(value))
    box.press("Enter")


def dots(page, n: int, other: str | None = None) -> str:
    """The chart's dots once it shows ``n`` features (and differs from ``other``)."""
    page.wait_for_function(
        f"([n, other]) => {{ const c = ({DOTS})(); "
        "return c !== null && JSON.parse(c).length === n && c !== other; }",
        arg=[n, other],
        timeout=RUN_TIMEOUT_MS,
        polling=200,
    )
    return page.evaluate(DOTS)


def test_variable_selection_runs_live_with_its_inclusion_chart(page, server):
    open_app(page, server.url)
    page.locator(".st-key-target").first.click()
    page.get_by_role("option", name="Variable selection (synthetic)", exact=True).click()
    page.get_by_text("100 features, 10 of them informative").first.wait_for(timeout=TIMEOUT_MS)
    set_number(page, "features", 12)
    page.get_by_text("12 features, 10 of them informative").first.wait_for(timeout=TIMEOUT_MS)
    set_number(page, "features", 8)  # below m: m follows, in a sentence
    page.get_by_text("8 features, 8 of them informative").first.wait_for(timeout=TIMEOUT_MS)
    page.get_by_text("Informative features: 10 is outside [1, 8]").first.wait_for(
        timeout=TIMEOUT_MS
    )
    set_number(page, "burn_in", 20)
    before = dots(page, 8)
    assert_healthy(page)
    button(page, "run").click()
    dots(page, 8, before)  # the dots follow the chains while running
    assert_healthy(page)
    shot(page, "selection-inclusion")
    stop_if_running(page)
