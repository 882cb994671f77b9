"""The page in a lecture hall and on a narrow screen, in headless Chromium.

- Presentation mode at 1280 x 720 and 1600 x 1000: the run's buttons and the open view's first
  figure on the screen without scrolling, no tab label cut in any group of views, the sidebar
  collapsed as the mode turns on and back as it turns off, each in the switch's own rerun.
- Every view of the Ising, RBM (16 x 16 digits) and network (MN 1) pages in presentation mode
  at both sizes: its main figure whole on the screen, no chart's x-axis title on its legend.
- Presentation mode from a link (``present=1``) at 1600 px: large type, a sentence per view, the
  why panel; Space runs and pauses, S takes one step.
- The layout at 800 and 1600 px: chain strips and proposal maps wrap instead of running off the
  page or shrinking, side-by-side charts stack when narrow, no figure title touches its legend.

Screenshots land in ``artifacts/browser/`` (``tools.screenshots`` makes the README's).
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from browser_support import (  # noqa: F401  (the *_fixture names register fixtures)
    TIMEOUT_MS,
    app_url,
    assert_healthy,
    browser_fixture,
    button,
    open_app,
    open_tab,
    server_fixture,
    shot,
    stop_if_running,
)
from playwright.sync_api import expect

from app import config
from app.view_catalogue import ISING
from lsbcore import CSV_COLUMNS
from tools.browser_kit import steps_shown
from tools.screenshots import (
    _FIGURES,
    _MAIN_FIGURE,
    FIGURE_WAIT_MS,
    FIGURELESS,
    LECTURE,
    LECTURE_TARGETS,
    LECTURE_WIDE,
    RUN_TIMEOUT_MS,
    lecture_labels,
    view_stem,
    wait_for_mixing,
)

pytestmark = pytest.mark.browser
expect.set_options(timeout=TIMEOUT_MS)

PANEL = '[role="tabpanel"]:visible'
# a long default run capped at 200 steps per redraw: its 200,000 steps take minutes, so it
# cannot finish before a test pauses it (at 1000 a redraw, 5-10 redraws a second, it could in
# 20 s), and it leaves the 2-core machine some room for the browser
LONG = replace(config.Config(), steps=200_000, burn_in=200, speed="200")
SCREENS = (LECTURE, LECTURE_WIDE)  # a projector's whole screen, and a large one


@pytest.fixture(params=[800, 1600], ids=lambda w: f"{w}px")
def width(request):
    return request.param


def new_page(browser, server, width: int):
    context = browser.new_context(viewport={"width": width, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    return context, context.new_page()


def run_a_little(page) -> None:
    """Run until the mixing phase has some records (1,000 steps: what a first redraw of 1,000
    steps gave the views before the run was capped at 200 a redraw), then pause."""
    button(page, "run").click()
    page.wait_for_function(
        "() => /Mixing: \\d{1,3},\\d{3}/.test(document.body.innerText)",
        timeout=TIMEOUT_MS,
        polling=300,
    )
    button(page, "pause").click()
    expect(button(page, "run")).to_be_enabled()


def overflow(page, selector: str) -> list[str]:
    """Elements under ``selector`` (visible) whose right edge passes the open tab panel's."""
    return page.evaluate(
        """sel => { const panel = [...document.querySelectorAll('[role="tabpanel"]')]
                        .find(p => p.offsetParent !== null);
            const right = panel.getBoundingClientRect().right + 1;
            return [...panel.querySelectorAll(sel)].filter(e => e.offsetParent !== null)
                .filter(e => e.getBoundingClientRect().right > right)
                .map(e => e.tagName + ' ' + Math.round(e.getBoundingClientRect().right)); }""",
        selector,
    )


def title_legend_overlaps(page) -> list[str]:
    """Plotly figures in the open tab whose title box intersects their legend box."""
    return page.evaluate(
        """() => [...document.querySelectorAll('[role="tabpanel"] .js-plotly-plot')]
            .filter(p => p.offsetParent !== null).flatMap(p => {
              const t = p.querySelector('.gtitle'), l = p.querySelector('.legend');
              if (!t || !l) return [];
              const a = t.getBoundingClientRect(), b = l.getBoundingClientRect();
              const apart = a.right < b.left || b.right < a.left || a.bottom < b.top
                || b.bottom < a.top;
              return apart ? [] : [t.textContent]; })"""
    )


# what keeps a lecture's screen from showing what it should: each a short sentence
_OFF_SCREEN = """() => {
  const out = [], box = e => e.getBoundingClientRect(), vh = innerHeight;
  for (const key of ["run", "pause", "step", "reset"]) {
    const b = box(document.querySelector(`.st-key-${key} button`));
    if (b.top < 0 || b.bottom > vh) out.push(`button ${key} at ${Math.round(b.top)}`);
  }
  const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(p => p.offsetParent);
  const figure = [...panel.querySelectorAll('.js-plotly-plot, [data-testid="stImage"] img')]
    .find(e => e.offsetParent);
  const f = figure ? box(figure) : null;
  if (!f || f.top < 0 || f.bottom > vh) out.push(`first figure ${f && Math.round(f.bottom)}`);
  if (document.querySelector('[data-testid="stMain"]').scrollTop) out.push("page scrolled");
  return out.concat(cutTabs());
}"""
_CUT_TABS = """cutTabs = () => [...document.querySelectorAll('[role="tablist"]')].flatMap(list => {
  const right = list.getBoundingClientRect().right + 0.5;
  return [...list.querySelectorAll('[role="tab"]')].filter(t => t.scrollWidth > t.clientWidth
      || t.getBoundingClientRect().right > right).map(t => `tab ${t.innerText} cut`)
    .concat(list.scrollWidth > list.clientWidth ? ["tab strip scrolls"] : []); })"""
# the switch's label cut short: any part of it narrower than its text, or past its column
_CUT_SWITCH = """() => { const box = document.querySelector('.st-key-present');
  const right = box.closest('[data-testid="stColumn"]').getBoundingClientRect().right + 0.5;
  return [...box.querySelectorAll('label, label *')].filter(e => (e.textContent || '').trim())
    .filter(e => e.scrollWidth > e.clientWidth || e.getBoundingClientRect().right > right)
    .map(e => e.tagName + ' ' + e.textContent); }"""
_SIDEBAR_RIGHT = """() => { const s = document.querySelector('[data-testid="stSidebar"]');
  return s ? s.getBoundingClientRect().right : 0; }"""


@pytest.mark.parametrize("screen", [(1280, 720), (1600, 1000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_presentation_mode_fits_the_screen(browser, server, screen):
    context = browser.new_context(viewport={"width": screen[0], "height": screen[1]})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.add_init_script(f"window.{_CUT_TABS}")
    try:
        open_app(page, app_url(server.url, {**config.to_query_params(LONG), "present": "1"}))
        expect(page.locator(f"{PANEL} [data-testid='stImage'] img").first).to_be_visible()
        expect(page.get_by_text("What you are seeing.").first).to_be_visible()
        assert page.evaluate(_SIDEBAR_RIGHT) <= 1
        page.wait_for_timeout(500)  # the last redraw
        assert page.evaluate(_OFF_SCREEN) == []
        assert_healthy(page)
        shot(page, f"presentation-{screen[0]}x{screen[1]}")
        for group in ("Beyond LSB", "Results"):  # the other groups' tab strips fit too
            page.locator(".st-key-view_group button", has_text=group).click()
            first = ISING.groups[group][0].label
            expect(page.get_by_role("tab", selected=True)).to_have_text(first)
            assert page.evaluate("() => cutTabs()") == []

        # the switch: off brings the sidebar back, on collapses it, with no further rerun, also
        # after the user closed and opened the sidebar by hand (the page remembers that)
        switch = page.locator(".st-key-present label").first
        switch.click()
        page.wait_for_function(f"() => ({_SIDEBAR_RIGHT})() > 200", timeout=10_000)
        page.hover('[data-testid="stSidebar"]')
        page.locator('[data-testid="stSidebarCollapseButton"] button').click()
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.wait_for_function(f"() => ({_SIDEBAR_RIGHT})() > 200", timeout=10_000)
        switch.click()
        page.wait_for_function(f"() => ({_SIDEBAR_RIGHT})() <= 1", timeout=10_000)
        # the sidebar opened by hand in the lecture: the switch's label stays whole
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.wait_for_function(f"() => ({_SIDEBAR_RIGHT})() > 200", timeout=10_000)
        page.wait_for_timeout(300)  # the columns' new widths
        assert page.evaluate(_CUT_SWITCH) == [], page.evaluate(_CUT_SWITCH)
        assert_healthy(page)
    finally:
        context.close()
        server.check()


def _settled_steps(page, until=lambda n: n > 0, timeout_s: float = 60.0) -> int:
    """The visible status line's step count once ``until`` holds and two reads agree."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        now = steps_shown(page)
        if now == last and until(now):
            return now
        last = now
        page.wait_for_timeout(300)
    return steps_shown(page)


def test_presentation_mode_from_a_link(browser, server):
    context, page = new_page(browser, server, 1600)
    try:
        query = {**config.to_query_params(LONG), "present": "1"}
        open_app(page, app_url(server.url, query))
        assert_healthy(page)
        # the sidebar is collapsed: nothing of it lies on the screen
        right = page.evaluate(
            """() => { const s = document.querySelector('[data-testid="stSidebar"]');
                       return s ? s.getBoundingClientRect().right : 0; }"""
        )
        assert right <= 1, right
        # the lecture's type size: its style arrives with the page's elements, a moment after
        # the sidebar has collapsed on a busy machine
        page.wait_for_function(
            "() => getComputedStyle(document.documentElement).fontSize === '19px'", timeout=10_000
        )
        expect(page.get_by_text("What you are seeing.").first).to_be_visible()

        # Space runs, Space pauses, S takes exactly one step
        page.keyboard.press("Space")
        expect(button(page, "pause")).to_be_enabled()
        page.wait_for_function("() => /Mixing: [1-9]/.test(document.body.innerText)", polling=300)
        page.keyboard.press("Space")
        expect(button(page, "run")).to_be_enabled()
        open_tab(page, "Mixing")  # a clicked tab keeps the focus while S is pressed
        # the open tab draws its own status line: read it once it is there and settled
        before = _settled_steps(page)
        page.keyboard.press("s")
        assert _settled_steps(page, until=lambda n: n != before) == before + 1

        # the Step key opened the Proposal tab: its sentence and the why panel are there, and
        # the tab left behind shows no focus ring
        expect(page.get_by_text("Where each sampler wants to flip next").first).to_be_visible()
        mixing = page.get_by_role("tab", name="Mixing", exact=True)
        ring = mixing.evaluate(
            "t => [getComputedStyle(t).boxShadow, getComputedStyle(t).outlineStyle]"
        )
        assert ring == ["none", "none"], ring
        heading = page.get_by_role("heading", name="Why the balancing functions behave")
        expect(heading).to_be_visible()
        expect(page.get_by_text("never drops below 1").first).to_be_visible()
        assert_healthy(page)
        shot(page, "lecture-presentation-1600")
    finally:
        context.close()
        server.check()


def test_the_layout_wraps_instead_of_cutting_or_shrinking(browser, server, width):
    context, page = new_page(browser, server, width)
    try:
        open_app(page, app_url(server.url, config.to_query_params(LONG)))
        run_a_little(page)
        assert_healthy(page)

        # Chains: every tile of every strip on the page
        tiles = page.locator(f"{PANEL} [class*='st-key-chainrow_'] img")
        expect(page.get_by_text("last: posterior marginal").last).to_be_visible()
        page.wait_for_timeout(500)  # the last redraw
        assert tiles.count() == len(LONG.samplers) * (LONG.chains + 1)  # chains + marginal
        assert overflow(page, "img") == []
        shot(page, f"lecture-chains-{width}")

        # Mixing: the two charts side by side when wide, one under the other when narrow
        open_tab(page, "Mixing")
        cells = page.locator("[class*='st-key-chart_row_mixing'] > div")
        expect(page.locator(f"{PANEL} .js-plotly-plot").nth(1)).to_be_visible()
        first, second = cells.nth(0).bounding_box(), cells.nth(1).bounding_box()
        stacked = second["y"] >= first["y"] + first["height"] - 1
        assert stacked == (width == 800), (first, second)
        assert title_legend_overlaps(page) == []
        assert overflow(page, ".js-plotly-plot") == []
        shot(page, f"lecture-mixing-{width}")

        # Proposal: one cell per sampler, maps at least 150 px wide, nothing off the page
        open_tab(page, "Proposal")
        maps = page.locator(f"{PANEL} .js-plotly-plot")
        expect(maps.nth(len(LONG.samplers) - 1)).to_be_visible()
        boxes = [maps.nth(k).bounding_box() for k in range(len(LONG.samplers))]
        assert all(box["width"] >= 150 for box in boxes), boxes
        rows = len({round(box["y"]) for box in boxes})
        assert (rows > 1) == (width == 800), boxes
        assert overflow(page, ".js-plotly-plot") == []
        assert_healthy(page)
        shot(page, f"lecture-proposal-{width}")
    finally:
        context.close()
        server.check()


def test_exports_report_traces_and_a_chart(browser, server, tmp_path):
    """The lab notebook: the HTML report, the compressed traces and a chart as SVG, each named
    after the problem, the seed and the date."""
    import gzip
    import re

    context, page = new_page(browser, server, 1600)
    try:
        open_app(page, app_url(server.url, config.to_query_params(LONG)))
        run_a_little(page)
        open_tab(page, "Export")
        stem = re.compile(  # problem, settings, seed, digest, date
            r"^lsb-case-3-[a-z-]+-n\d+-lam[\d.]+-mu[\d.]+-sigma[\d.]+-seed0-[0-9a-f]{6}-"
            r"\d{4}-\d{2}-\d{2}-"
        )

        with page.expect_download() as report:
            button(page, "download_report").click()
        assert stem.match(report.value.suggested_filename)
        assert report.value.suggested_filename.endswith("-report.html")
        report.value.save_as(tmp_path / "report.html")
        html = (tmp_path / "report.html").read_text()
        assert html.lstrip().lower().startswith("<!doctype html") and "t/(1+t)" in html

        button(page, "prepare_traces").click()
        expect(button(page, "download_traces")).to_be_visible()
        with page.expect_download() as traces:
            button(page, "download_traces").click()
        name = traces.value.suggested_filename
        assert stem.match(name) and name.endswith(".csv.gz")
        traces.value.save_as(tmp_path / name)
        with gzip.open(tmp_path / name, "rt") as lines:
            assert lines.readline().strip().split(",") == list(CSV_COLUMNS)

        # every chart's toolbar saves it in the format chosen here
        page.locator(".st-key-figure_format").get_by_text("SVG").click()
        open_tab(page, "Mixing")
        plot = page.locator(f"{PANEL} .js-plotly-plot").first
        plot.hover()
        with page.expect_download() as svg:
            plot.locator('[data-title="Download plot"]').click()
        name = svg.value.suggested_filename
        assert stem.match(name) and name.endswith("-autocorrelation.svg"), name
        svg.value.save_as(tmp_path / name)
        assert "<svg" in (tmp_path / name).read_text()[:500]
        assert_healthy(page)
    finally:
        context.close()
        server.check()


# ----------------------------------------------------------------------------- every view
QUIET_LOOKS = 3  # the page is at rest once this many looks in a row, LOOK_MS apart, agree
LOOK_MS = 100
# one look: the open view's main figure where ``walk_views`` measures it, and how many charts
# and images the view has drawn
_LOOK = f"""() => {{
  const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(p => p.offsetParent);
  const drawn = panel ? panel.querySelectorAll('.js-plotly-plot .main-svg, img').length : -1;
  return JSON.stringify([({_MAIN_FIGURE})(), drawn]); }}"""
# at rest: the script run has finished (an RBM's MMD view draws its noise floor, seconds of
# Gibbs sampling, after its curves) and the last QUIET_LOOKS looks saw the same page (Plotly's
# first drawing, or its redrawing at a new width, is over)
_AT_REST = f"""n => {{
  const rest = window.__lsbRest || (window.__lsbRest = {{last: null, same: 0}});
  const now = ({_LOOK})();
  if (now === rest.last) rest.same += 1; else {{ rest.last = now; rest.same = 0; }}
  return rest.same >= n && document.querySelector('[data-testid="stApp"]')
    ?.getAttribute('data-test-script-state') === 'notRunning'; }}"""


def at_rest(page) -> None:
    """Wait until the page is at rest (``_AT_REST``)."""
    page.evaluate("() => { window.__lsbRest = null; }")
    page.wait_for_function(_AT_REST, arg=QUIET_LOOKS, polling=LOOK_MS, timeout=RUN_TIMEOUT_MS)


def walk_every_view(page, labels, out, figureless=(), name: str = "") -> dict:
    """``walk_views``' walk with waits on the page instead of fixed pauses: at 1280 x 720, then
    at 1600 x 1000, every view's tab opened, and once the page is at rest, where its main
    figure lies (``(size, label) -> _MAIN_FIGURE``'s answer), that it shows no error, and a
    screenshot of the screen (``view_stem``)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    found = {}
    for screen in SCREENS:
        page.set_viewport_size(screen)
        for label in labels:
            open_tab(page, label)
            panel = page.locator(f"{PANEL}:visible")
            panel.locator(".lsb-seeing").first.wait_for()  # the view is drawn
            if label not in figureless:
                try:  # the figure (the caller sees none if it never comes)
                    panel.locator(_FIGURES).first.wait_for(timeout=FIGURE_WAIT_MS)
                except PlaywrightTimeout:
                    pass
            at_rest(page)
            found[f"{screen['width']}x{screen['height']}", label] = page.evaluate(_MAIN_FIGURE)
            assert_healthy(page)
            page.screenshot(path=str(out / f"{view_stem(screen, label, name)}.png"))
    return found


def not_whole(found: dict) -> tuple[list[str], set[str]]:
    """From ``walk_every_view``' answer: each view whose main figure is not whole on the screen
    below the page's header (or that scrolled the page), or one of whose charts has its x-axis
    title run into its legend, in a short sentence; and the views that drew no figure."""
    off, figureless = [], set()
    for (size, label), where in found.items():
        if where["overlaps"]:
            off.append(f"{label} at {size}: x-axis title {where['overlaps'][0]!r} on the legend")
        f = where["figure"]
        if f is None:  # those listed draw none; any they draw must fit too
            figureless.add(label)
            continue
        inside = (
            f["top"] >= where["header"] - 1
            and f["bottom"] <= where["height"] + 1
            and f["left"] >= -1
            and f["right"] <= where["width"] + 1
        )
        if not inside or where["scrolled"]:
            off.append(f"{label} at {size}: {f['top']:.0f}-{f['bottom']:.0f} px")
    return off, figureless


def test_every_view_shows_its_main_figure_whole_on_a_lecture_screen(browser, server, tmp_path):
    """Presentation mode at 1280 x 720 and 1600 x 1000: in every view of the Ising page the main
    figure (the first chart or image) lies whole on the screen below the page's header, without
    scrolling, and no chart's x-axis title runs into its legend. One page walks every view at
    both sizes; its screenshots land in a temporary folder (``python -m tools.screenshots
    --only views`` keeps them in docs/screenshots/)."""
    context = browser.new_context(viewport=LECTURE)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        open_app(page, app_url(server.url, {**config.to_query_params(LONG), "present": "1"}))
        run_a_little(page)
        labels = [view.label for view in ISING.views]
        found = walk_every_view(page, labels, tmp_path, FIGURELESS)
        off, figureless = not_whole(found)
        assert off == [], off
        assert figureless <= FIGURELESS, figureless - FIGURELESS
        assert len(list(tmp_path.glob("presentation-*.png"))) == 2 * len(labels)
        assert_healthy(page)
    finally:
        context.close()
        server.check()


@pytest.mark.parametrize("name", ["rbm", "network"])
def test_every_rbm_and_network_view_shows_its_main_figure_whole_on_a_lecture_screen(
    browser, server, tmp_path, name
):
    """The same on the RBM page (the paper's 16 x 16 digits: the digit grid whole, a row per
    sampler) and the Markov network page (MN 1), after a short run (100 burn-in steps, in which
    the learned functions learn, then 100 of mixing): every view draws its figure (Acceptance
    and hops: its table; the network's Export has none) as it opens, none waits for a button."""
    from app.view_catalogue import NETWORK, RBM

    context = browser.new_context(viewport=LECTURE)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        query = {"present": "1", "speed": "1000", "target": LECTURE_TARGETS[name]}
        open_app(page, app_url(server.url, {**query, "burn_in": "100"}), RUN_TIMEOUT_MS)
        button(page, "run").click()
        wait_for_mixing(page, 100)
        stop_if_running(page)  # 1,000 steps a refresh: MN 1's run can finish in a few seconds
        labels = lecture_labels(RBM if name == "rbm" else NETWORK)
        found = walk_every_view(page, labels, tmp_path, FIGURELESS, name=name)
        off, figureless = not_whole(found)
        assert off == [], off
        assert figureless == FIGURELESS & set(labels), figureless  # the network's Export
        assert len(list(tmp_path.glob(f"presentation-*-{name}-*.png"))) == 2 * len(labels)
        assert_healthy(page)
    finally:
        context.close()
        server.check()
