"""Nothing a user made is lost by navigating, in a real browser (headless Chromium; issue 46,
items 3 and 7 and the reload): a photo's prompt, run and resolution survive a visit to another
source; the user's own RBM keeps its data, settings and training across a target switch, and
its bar goes when training ends; a reload mid-run takes the run back."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from tests.browser_support import (  # noqa: F401  (fixtures, known to pytest by name)
    TIMEOUT_MS,
    app_url,
    assert_healthy,
    browser_fixture,
    button,
    input_value,
    open_app,
    page_fixture,
    server_fixture,
    shot,
)
from tests.test_browser_prompt import drag, photo_png, plot_area
from tools.browser_kit import steps_shown

pytestmark = pytest.mark.browser


def choose(page, key: str, label: str) -> None:
    page.locator(f'.st-key-{key} [data-testid="stRadioOption"]').filter(has_text=label).click()
    expect(
        page.locator(f'.st-key-{key} [data-testid="stRadioOption"][data-selected="true"]')
    ).to_have_text(label)


def pick_target(page, label: str) -> None:
    page.locator(".st-key-target").first.click()
    page.get_by_role("option", name=label, exact=True).click()


def wait_for_steps(page, least: int) -> int:
    page.wait_for_function(
        """least => { const m = [...document.querySelectorAll(
                '[data-testid="stCaptionContainer"]')].map(e => e.innerText)
                .map(t => t.match(/Step ([\\d,]+) · /)).find(m => m);
            return m && Number(m[1].replace(/,/g, '')) >= least; }""",
        arg=least,
        timeout=TIMEOUT_MS,
        polling=200,
    )
    return steps_shown(page)


def test_a_photo_keeps_its_prompt_run_and_resolution_across_a_change_of_source(page, server):
    # a run that cannot end by itself while the test looks: a small photo's run settles (and
    # pauses itself, Pause disabled) within a second at full speed, so "stop when settled" is
    # off and the speed capped at 50 steps a second (the photo's run lasts minutes)
    query = {"burn_in": "5", "chains": "2", "until_settled": "0", "speed": "10"}
    open_app(page, app_url(server.url, query))
    choose(page, "source", "Your image")
    page.locator(".st-key-upload input[type=file]").set_input_files(
        {"name": "disc.png", "mimeType": "image/png", "buffer": photo_png(60, 90)}
    )
    plot_area(page)
    thumb = page.locator('.st-key-size input[type="range"]').first
    size = int(thumb.input_value())
    thumb.focus()
    for _ in range(3):  # a resolution of one's own, under the one picked
        thumb.press("ArrowLeft")
    expect(thumb).not_to_have_value(str(size))
    page.wait_for_timeout(1500)  # the slider sends its value, the page reruns
    chosen = thumb.input_value()
    assert int(chosen) < size
    page.get_by_text("No prompt").first.wait_for()
    drag(page, (0.2, 0.15), (0.8, 0.85))
    page.get_by_text("Your prompt: a box").first.wait_for()
    button(page, "run").click()
    wait_for_steps(page, 5)
    button(page, "pause").click()
    page.get_by_text("· paused ·").first.wait_for()  # the status line's last count
    steps = steps_shown(page)
    assert steps >= 5
    choose(page, "source", "Paper case")
    page.get_by_text("Case 3").first.wait_for()
    choose(page, "source", "Your image")
    page.get_by_text("Back to the run kept for this source").first.wait_for()
    expect(page.get_by_text("Your prompt: a box").first).to_be_visible()
    assert thumb.input_value() == chosen
    assert steps_shown(page) >= steps  # the run sampled before, not a new one
    assert_healthy(page)
    shot(page, "navigation-source-round-trip")


def test_your_own_rbm_keeps_its_data_settings_and_training_across_targets(page, server):
    page.goto(app_url(server.url, {"target": "own"}))  # no model yet: no Run button
    page.locator(".st-key-rbm_upload").first.wait_for()
    rows = (np.random.default_rng(3).random((3000, 12, 12)) < 0.4).astype(np.uint8)
    buffer = io.BytesIO()
    np.save(buffer, rows)
    page.locator(".st-key-rbm_upload input[type=file]").set_input_files(
        {"name": "mine.npy", "mimeType": "application/octet-stream", "buffer": buffer.getvalue()}
    )
    page.get_by_text("3,000 rows of 144 values").first.wait_for()
    for key, value in (("rbm_hidden", "200"), ("rbm_epochs", "500")):
        box = page.locator(f".st-key-{key} input")
        box.fill(value)
        box.press("Enter")
        expect(box).to_have_value(value)
    button(page, "rbm_train").click()
    page.get_by_text(re.compile("Training: ")).first.wait_for()
    pick_target(page, "Ising segmentation")
    page.get_by_text("Burn-in (learning): 0").first.wait_for()
    pick_target(page, "RBM: your own")
    page.get_by_text(re.compile("Training: ")).first.wait_for()
    assert (input_value(page, "rbm_hidden"), input_value(page, "rbm_epochs")) == ("200", "500")
    expect(page.get_by_text("Using “mine.npy”, read earlier").first).to_be_visible()
    button(page, "rbm_stop").click()
    page.get_by_text(re.compile("Trained: 144 visible, 200 hidden")).first.wait_for()
    page.wait_for_timeout(1500)  # a few of the bar's redraws: it must be gone, not greyed
    assert page.locator('[data-testid="stSidebar"] [data-testid="stProgress"]').count() == 0
    assert page.locator(".st-key-rbm_stop").count() == 0
    assert_healthy(page)
    shot(page, "navigation-own-rbm")


def test_a_reload_mid_run_takes_the_run_back(page, server):
    open_app(page, app_url(server.url, {"burn_in": "5", "chains": "2", "speed": "5"}))
    button(page, "run").click()
    before = wait_for_steps(page, 10)
    page.reload()
    page.get_by_text("The page was reloaded: its run is back as the server held").first.wait_for()
    after = wait_for_steps(page, before + 10)  # it goes on sampling from where it was
    assert after > before
    assert_healthy(page)
    shot(page, "navigation-reload")
