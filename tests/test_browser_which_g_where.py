"""The Which g where tab in headless Chromium: a click on a heat-map cell shows that point's
ranking, "Open in the live views" lands on the Chains tab with the point's lambda in the
sidebar, and a second point opens the same way; no error on the page.

Screenshots land in ``artifacts/browser/`` (gitignored).
"""

from __future__ import annotations

import json

import pytest
from browser_support import (  # noqa: F401  (the *_fixture names register fixtures)
    TIMEOUT_MS,
    app_url,
    assert_healthy,
    browser_fixture,
    button,
    input_value,
    open_app,
    open_tab,
    page_fixture,
    server_fixture,
    shot,
)
from playwright.sync_api import expect

from app.views import which_g_where as wg

pytestmark = pytest.mark.browser
expect.set_options(timeout=TIMEOUT_MS)

SHIPPED = json.loads(wg.SHIPPED.read_text(encoding="utf-8"))
POINT = '.st-key-wg_point [data-testid="stMarkdownContainer"]'
# the pixel position of a cell's centre in the clickable map (category axes: index positions)
CELL_CENTRE = """([col, row]) => {
    const gd = document.querySelector('.st-key-wg_pick .js-plotly-plot');
    const L = gd._fullLayout, box = gd.getBoundingClientRect();
    return [box.left + L._size.l + L.xaxis.l2p(col), box.top + L._size.t + L.yaxis.l2p(row)]; }"""


def click_cell(page, panel: dict, lam: float, sigma: float) -> None:
    page.locator(".st-key-wg_pick").scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const gd = document.querySelector('.st-key-wg_pick .js-plotly-plot');"
        " return gd && gd._fullLayout && gd._fullLayout.xaxis; }",
        timeout=TIMEOUT_MS,
    )
    x, y = page.evaluate(CELL_CENTRE, [panel["lam"].index(lam), panel["sigma"].index(sigma)])
    page.mouse.click(x, y)
    expect(
        page.locator(POINT).filter(has_text=f"λ = {lam:g}, σ = {sigma:g}: winner")
    ).to_be_visible()
    page.wait_for_timeout(300)  # let the rerun settle


def open_live(page, lam: float) -> None:
    button(page, "wg_open").click()
    page.wait_for_function(
        """() => [...document.querySelectorAll('[role="tab"]')].some(t =>
               t.innerText.trim() === 'Chains' && t.getAttribute('aria-selected') === 'true')""",
        timeout=TIMEOUT_MS,
    )
    page.wait_for_function(
        """lam => { const i = document.querySelector('[data-testid="stSidebar"] .st-key-lam input');
               return i && Math.abs(parseFloat(i.value) - lam) < 1e-9; }""",
        arg=lam,
        timeout=TIMEOUT_MS,
    )


def test_a_click_on_the_map_ranks_the_point_and_opens_it_live_twice(page, server):
    square = next(i for i, p in enumerate(SHIPPED["panels"]) if p["target"] == "square")
    panel = SHIPPED["panels"][square]
    query = {"size": "16", "chains": "2", "samplers": "barker", "wg_panel": str(square + 1)}
    open_app(page, app_url(server.url, query))
    open_tab(page, "Which g where")
    expect(page.locator(".st-key-wg_pick .js-plotly-plot")).to_be_visible()
    assert_healthy(page)
    shot(page, "which-g-where")

    for lam, sigma in ((panel["lam"][-1], panel["sigma"][1]), (panel["lam"][1], panel["sigma"][0])):
        click_cell(page, panel, lam, sigma)
        expect(button(page, "wg_open")).to_be_visible()
        assert_healthy(page)
        shot(page, f"which-g-where-{lam:g}-{sigma:g}")
        open_live(page, lam)
        assert abs(float(input_value(page, "sigma")) - sigma) < 1e-9
        assert_healthy(page)
        shot(page, f"which-g-where-open-{lam:g}-{sigma:g}")
        open_tab(page, "Which g where")
        expect(page.locator(".st-key-wg_pick .js-plotly-plot")).to_be_visible()


def choose_panel(page, index: int) -> None:
    page.locator(".st-key-wg_panel input[role=combobox]").click()
    page.keyboard.press("ArrowDown")
    page.locator('[role="option"]').nth(index).click()
    expect(page.locator(".st-key-wg_panel input")).to_have_value(
        wg.panel_label(SHIPPED["panels"][index])
    )
    page.wait_for_timeout(1000)  # the panel's map is drawn afresh
    expect(page.locator(".st-key-wg_pick .js-plotly-plot")).to_be_visible()


def test_after_changes_of_panel_the_last_click_is_the_point_shown_and_opened(page, server):
    """Clicks on two panels, then two cells of one: the boxes' old values, which the browser
    sends back after a click, must not undo it (they did: the page showed and opened the
    previous cell)."""
    panels = SHIPPED["panels"]
    square = next(i for i, p in enumerate(panels) if p["target"] == "square")
    other = next(i for i in range(len(panels)) if i != square)
    open_app(page, app_url(server.url, {"size": "16", "chains": "2", "samplers": "barker"}))
    open_tab(page, "Which g where")
    expect(page.locator(".st-key-wg_pick .js-plotly-plot")).to_be_visible()
    panel = panels[square]
    first = (panel["lam"][2], panel["sigma"][1])
    last = (panel["lam"][-2], panel["sigma"][-1])
    for index in (other, square):
        choose_panel(page, index)
        click_cell(page, panels[index], *first)
    click_cell(page, panel, *last)
    page.wait_for_timeout(2000)  # the rerun the browser sends after the click has come and gone
    point = page.locator(POINT).first
    expect(point).to_contain_text(f"λ = {last[0]:g}, σ = {last[1]:g}: winner")
    button(page, "wg_open").click()
    page.wait_for_function(
        """([lam, sigma]) => {
            const v = k => parseFloat(document.querySelector(
                `[data-testid="stSidebar"] .st-key-${k} input`)?.value);
            return Math.abs(v('lam') - lam) < 1e-9 && Math.abs(v('sigma') - sigma) < 1e-9; }""",
        arg=list(last),
        timeout=TIMEOUT_MS,
    )
    assert_healthy(page)
