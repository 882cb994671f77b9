"""The Block proposals tab in headless Chromium: opened from its group, the block size changed
twice and the tile twice (a click on the image, then the row input), the numbers following each
change and no error on the page.

Screenshots land in ``artifacts/browser/`` (gitignored).
"""

from __future__ import annotations

import pytest
from browser_support import (  # noqa: F401  (the *_fixture names register fixtures)
    TIMEOUT_MS,
    app_url,
    assert_healthy,
    browser_fixture,
    open_app,
    open_tab,
    page_fixture,
    server_fixture,
    shot,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
expect.set_options(timeout=TIMEOUT_MS)

NUMBERS = '.st-key-bp_numbers [data-testid="stMetricValue"]'
# the pixel position of a tile's centre in the clickable image (plotly's own axis maps)
TILE_CENTRE = """([row, col, k]) => {
    const gd = document.querySelector('.st-key-bp_pick:not([data-stale="true"]) .js-plotly-plot');
    const L = gd._fullLayout, box = gd.getBoundingClientRect();
    const x = (col - 1) * k + (k - 1) / 2, y = (row - 1) * k + (k - 1) / 2;
    return [box.left + L._size.l + L.xaxis.l2p(x), box.top + L._size.t + L.yaxis.l2p(y)]; }"""


def numbers(page) -> str:
    """The KL and expected acceptance shown, as one text."""
    return " | ".join(page.locator(NUMBERS).all_inner_texts())


def wait_for_new_numbers(page, before: str) -> str:
    page.wait_for_function(
        """([sel, before]) => { const now = [...document.querySelectorAll(sel)]
               .map(e => e.innerText).join(' | ');
           return now.length > 0 && now !== before
               && !document.querySelector('[data-testid="stStatusWidget"]'); }""",
        arg=[NUMBERS, before],
        timeout=TIMEOUT_MS,
        polling=200,
    )
    page.wait_for_timeout(300)  # let the rerun settle
    return numbers(page)


def tile_inputs(page) -> tuple[str, str]:
    return (
        page.locator(".st-key-bp_row input").input_value(),
        page.locator(".st-key-bp_col input").input_value(),
    )


def test_block_proposals_tab_follows_block_size_and_tile(page, server):
    query = {"size": "24", "chains": "2", "samplers": "checkerboard", "bp_weights": "untrained"}
    open_app(page, app_url(server.url, query))
    open_tab(page, "Block proposals")
    expect(page.locator(NUMBERS).first).to_be_visible()
    assert_healthy(page)
    first = numbers(page)
    assert "nats" in first
    shot(page, "block-proposals-k2")

    for k in (3, 4):  # the block size, twice
        page.locator(".st-key-bp_k button", has_text=f"{k} x {k}").first.click()
        first = wait_for_new_numbers(page, first)
        assert_healthy(page)
    expect(page.get_by_text("Median KL in nats").first).to_be_visible()
    shot(page, "block-proposals-k4")

    # a click on the image picks the tile under it (24 x 24, k = 4: 6 x 6 tiles)
    # mid-rerun Streamlit may keep a stale copy of the element beside the new one: the new one
    page.locator('.st-key-bp_pick:not([data-stale="true"])').first.scroll_into_view_if_needed()
    x, y = page.evaluate(TILE_CENTRE, [5, 2, 4])
    page.mouse.click(x, y)
    page.wait_for_function(
        """() => document.querySelector('.st-key-bp_row input').value === '5'
               && document.querySelector('.st-key-bp_col input').value === '2'""",
        timeout=TIMEOUT_MS,
        polling=200,
    )
    first = wait_for_new_numbers(page, first)
    assert_healthy(page)

    # the row input, the fallback that always works
    row = page.locator(".st-key-bp_row input")
    row.fill("3")
    row.press("Enter")
    wait_for_new_numbers(page, first)
    assert tile_inputs(page) == ("3", "2")
    assert_healthy(page)
    shot(page, "block-proposals-tile")
