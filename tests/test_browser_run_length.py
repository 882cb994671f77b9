"""A run waits for the samplers it was asked to run, in a real browser (headless Chromium).

Issue 46's finding: on the Ising page with ``samplers=barker,lsb1,flow-exact,flow-latent``,
``size=16`` and ``view=Flow``, the others took all their steps while the flow trained; once
training was stopped the flow samplers joined "at step N of the run" with no step to take, and
the page said "Run complete" with Run disabled. Here the same link (with one α for all chains,
which the flow samplers need on a paper case, and a short run so that the flow samplers' slow
steps fit in seconds) must show the run waiting for them, then each flow sampler reaching the
run's length, before "Run complete".
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser_support import (  # noqa: F401  (fixtures, known to pytest by name)
    TIMEOUT_MS,
    app_url,
    assert_healthy,
    browser_fixture,
    button,
    open_app,
    open_tab,
    page_fixture,
    server_fixture,
    shot,
)

pytestmark = pytest.mark.browser
expect.set_options(timeout=TIMEOUT_MS)

TOTAL = 20  # burn-in 5 + mixing 15: a flow (exact) step takes a tenth of a second or more here
QUERY = {
    "samplers": "barker,lsb1,flow-exact,flow-latent", "size": "16", "view": "Flow",
    "shared_alpha": "1", "burn_in": "5", "steps": "15", "flow_steps": "20000",
}  # fmt: skip
CAPTION = '[data-testid="stCaptionContainer"]'


def caption(page, pattern: str):
    """The visible captions whose text matches ``pattern``."""
    return page.locator(CAPTION).filter(visible=True).filter(has_text=re.compile(pattern))


def test_flow_samplers_that_join_after_the_others_finished_take_the_runs_length(page, server):
    open_app(page, app_url(server.url, QUERY))
    open_tab(page, "Flow")
    expect(page.get_by_text(re.compile(r"Flow training: [\d,]+ / 20,000 steps")).first
           ).to_be_visible()  # fmt: skip
    button(page, "run").click()
    # the others take all their steps while the flow trains: the run waits for the flow ones
    expect(caption(page, rf"Step {TOTAL} ·").first).to_be_visible()
    expect(caption(page, rf"Step {TOTAL} ·.*waiting for the flow's training").first
           ).to_be_visible()  # fmt: skip
    expect(caption(page, rf"t/\(1\+t\): {TOTAL} of {TOTAL} steps").first).to_be_visible()
    expect(caption(page, r"Flow \(exact\): waiting for its flow's training").first).to_be_visible()
    expect(page.get_by_text("the run waits for the flow samplers").first).to_be_visible()
    assert page.get_by_text("Run complete").count() == 0
    assert_healthy(page)
    shot(page, "run-length-waiting")

    button(page, "flow_stop").click()  # they join on the flow as it is, and take their steps
    expect(page.get_by_text(f"Run complete: every sampler took its {TOTAL} steps").first
           ).to_be_visible()  # fmt: skip
    each = rf"Flow \(exact\): {TOTAL} of {TOTAL} steps · Flow latent \(approx\.\): {TOTAL} of"
    expect(caption(page, rf"joined at step {TOTAL} of the run.*{each}").first).to_be_visible()
    expect(button(page, "run")).to_be_disabled()
    assert_healthy(page)
    shot(page, "run-length-complete")
