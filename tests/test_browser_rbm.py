"""The RBM in a real browser (headless Chromium): pick the 8 x 8 digits in the sidebar, run,
watch the digit grid change and the MMD chart draw, then go back to the Ising posterior and on
to the 16 x 16 digits without an error."""

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

RUN_TIMEOUT_MS = 120_000  # the first RBM run draws its ground truth and compiles its steps
# every digit row's image source, one string per sampler row
DIGIT_SRCS = """() => [...document.querySelectorAll('[class*="st-key-digitrow_"]')]
    .filter(e => e.offsetParent !== null)
    .map(e => [...e.querySelectorAll('img')].map(img => img.src).join('|'))"""


def pick_target(page, label: str) -> None:
    page.locator(".st-key-target").first.click()
    page.get_by_role("option", name=label, exact=True).click()


def digit_rows(page, n: int) -> list[str]:
    page.wait_for_function(
        f"n => ({DIGIT_SRCS})().length === n", arg=n, timeout=RUN_TIMEOUT_MS, polling=200
    )
    return page.evaluate(DIGIT_SRCS)


def test_the_digits_rbm_runs_live_and_the_targets_switch_back_and_forth(page, server):
    open_app(page, server.url)
    pick_target(page, "RBM: digits 8 × 8")
    before = digit_rows(page, 6)  # the six default samplers, one row each
    assert_healthy(page)
    button(page, "run").click()
    page.wait_for_function(
        f"""before => {{ const now = ({DIGIT_SRCS})();
               return now.length === before.length &&
                      now.every((s, i) => s !== before[i]); }}""",
        arg=before,
        timeout=RUN_TIMEOUT_MS,
        polling=200,
    )  # every sampler's digits changed while running
    page.get_by_role("tab", name="MMD", exact=True).click()
    page.locator('[role="tabpanel"] .js-plotly-plot .main-svg').first.wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    page.get_by_text("noise floor (").first.wait_for(timeout=TIMEOUT_MS)  # the floor, named
    assert_healthy(page)
    shot(page, "rbm-digits-8x8-mmd")
    stop_if_running(page)

    pick_target(page, "Ising segmentation")
    page.get_by_text("Burn-in (learning): 0").first.wait_for(timeout=TIMEOUT_MS)
    assert_healthy(page)
    pick_target(page, "RBM: digits 16 × 16")  # the RBM page reopens on its MMD tab
    page.locator('[role="tabpanel"] .js-plotly-plot .main-svg').first.wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    page.get_by_role("tab", name="Digits", exact=True).click()
    digit_rows(page, 6)
    assert_healthy(page)
    shot(page, "rbm-digits-16x16")
