"""Screenshots of the main views for the README.

``python -m tools.screenshots --out docs/screenshots`` starts a server
(``tools.browser_kit.StreamlitServer``), drives Debian's headless Chromium through Playwright and
saves six PNGs, each cropped to the part of the page worth looking at:

- ``chains.png``: the default configuration (paper case 3) after burn-in and some mixing: the
  posterior, the controls, and every sampler's chains with the running posterior marginal;
- ``proposal.png``: one slow-motion step (Pause, then Step): where each sampler wants to flip,
  with the proposed site marked;
- ``segmentation.png``: the horse sample image segmented: observed image, posterior marginal,
  mask and uncertainty;
- ``presentation-1280x720.png`` and ``presentation-1600x1000.png``: presentation mode, the
  whole screen as a room sees it: the Chains view after a run by keyboard, then the Proposal
  view after one step with S;
- ``narrow-800.png``: the page at 800 px with the sidebar open, the Mixing tab's charts
  stacked;
- ``rbm-digits.png``: the RBM target, digits 16 x 16, after burn-in and some mixing: each of the
  six default samplers' eight chains drawn as digits;
- ``presentation-<W>x<H>-<view>.png``: every view of the Ising page in presentation mode at
  1280 x 720 and 1600 x 1000, the whole screen (in 128 colours, to keep each small); likewise
  ``presentation-<W>x<H>-rbm-<view>.png`` (the 16 x 16 digits RBM) and
  ``presentation-<W>x<H>-network-<view>.png`` (MN 1).

``--only rbm`` (or chains, segmentation, lecture, narrow, views) takes one group of them.

Every wait is on something the page shows (a progress text, a caption); nothing is taken of a
spinner. The run takes about two minutes on two cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tools.browser_kit import (
    TIMEOUT_MS,
    ServerError,
    StreamlitServer,
    app_url,
    button,
    launch_chromium,
    open_app,
    open_tab,
    page_problems,
)

VIEWPORT = {"width": 1400, "height": 2000}  # tall, so that nothing needs scrolling; then crop
LECTURE = {"width": 1280, "height": 720}  # presentation mode: a projector's whole screen
LECTURE_WIDE = {"width": 1600, "height": 1000}
NARROW = {"width": 800, "height": 2600}  # a laptop's half screen, the sidebar open
SCALE = 1  # device pixels per CSS pixel (keeps each PNG well under 300 KB)
RUN_TIMEOUT_MS = 240_000
PANEL = '[role="tabpanel"]'


def wait_for_mixing(page, steps: int, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Wait until the progress text says at least ``steps`` mixing steps are done."""
    page.wait_for_function(
        """n => { const m = document.body.innerText.match(/Mixing: ([\\d,]+) \\//);
                  return m !== null && parseInt(m[1].replace(/,/g, ''), 10) >= n; }""",
        arg=steps,
        timeout=timeout_ms,
        polling=500,
    )


def _box(locator) -> dict:
    box = locator.bounding_box()
    if box is None:
        raise RuntimeError(f"{locator} is not on the page")
    return box


def clip_around(page, top, bottom, margin: int = 16) -> dict:
    """A clip rectangle from the top of ``top`` to the bottom of ``bottom`` (locators) across
    the main column, ``margin`` pixels around it."""
    main = _box(page.locator('[data-testid="stMainBlockContainer"]').first)
    sidebar = _box(page.locator('[data-testid="stSidebar"]').first)
    t, b = _box(top), _box(bottom)
    x0 = max(main["x"] - margin, sidebar["x"] + sidebar["width"] + 2)  # not its border
    x1 = main["x"] + main["width"] + margin
    y0 = t["y"] - margin
    y1 = b["y"] + b["height"] + margin
    return {"x": max(0, x0), "y": max(0, y0), "width": x1 - max(0, x0), "height": y1 - max(0, y0)}


def save(page, path: Path, clip: dict) -> Path:
    problems = page_problems(page)
    if problems:
        raise RuntimeError(f"the page shows an error, not taking {path.name}: {problems}")
    page.wait_for_timeout(600)  # let the last redraw paint (Plotly animates its first draw)
    page.screenshot(path=str(path), clip=clip)
    return path


def paper_case_shots(page, url: str, out: Path, log) -> list[Path]:
    """Chains after burn-in, then one slow-motion step on the Proposal tab."""
    open_app(page, url)
    button(page, "run").click()
    log("running paper case 3 (2,000 burn-in steps, then mixing)…")
    wait_for_mixing(page, 3000)
    button(page, "pause").click()
    page.get_by_text("· paused ·").first.wait_for(timeout=TIMEOUT_MS)
    caption = page.get_by_text("posterior marginal P(x=+1)").last
    caption.wait_for(timeout=TIMEOUT_MS)
    images = page.locator(f'{PANEL} [data-testid="stImage"]')
    top = page.locator('[data-testid="stCaptionContainer"]').filter(has_text="sites ·").first
    shots = [save(page, out / "chains.png", clip_around(page, top, images.last))]

    button(page, "step").click()
    step = page.locator(f'{PANEL} [data-testid="stCaptionContainer"]').filter(
        has_text="just before the step"
    )
    step.wait_for(timeout=TIMEOUT_MS)
    plot = page.locator(f"{PANEL} .js-plotly-plot").first
    plot.locator(".main-svg").first.wait_for(timeout=TIMEOUT_MS)
    tabs = page.locator('[role="tablist"]').first
    shots.append(save(page, out / "proposal.png", clip_around(page, tabs, plot)))
    return shots


def segmentation_shot(page, url: str, out: Path, log) -> Path:
    """The horse sample image, segmented after burn-in and some mixing."""
    # run on past the settled point: the shot waits for 2,000 mixing sweeps
    open_app(page, app_url(url, {"source": "sample", "sample": "horse", "until_settled": "0"}))
    button(page, "run").click()
    log("running the horse sample image…")
    wait_for_mixing(page, 2000)
    button(page, "pause").click()
    page.get_by_text("· paused ·").first.wait_for(timeout=TIMEOUT_MS)
    open_tab(page, "Segmentation")
    summary = page.locator(f'{PANEL} [data-testid="stCaptionContainer"]').filter(
        has_text="posterior marginal from"
    )
    summary.wait_for(timeout=TIMEOUT_MS)
    tabs = page.locator('[role="tablist"]').first
    clip = clip_around(page, tabs, summary)
    download = page.locator(".st-key-download_mask")
    if download.count():  # stop above the button (a photo's downloads come after the summary)
        clip["height"] = min(clip["height"], _box(download.first)["y"] - 6 - clip["y"])
    return save(page, out / "segmentation.png", clip)


def lecture_shots(page, url: str, out: Path, log) -> list[Path]:
    """Presentation mode as the room sees it, the whole screen: paper case 3 run and paused by
    keyboard at 1280 x 720 (the Chains view), then one step with S at 1600 x 1000 (the
    Proposal view with its sentence)."""
    open_app(page, app_url(url, {"present": "1"}))
    page.keyboard.press("Space")
    log("presentation mode: running paper case 3…")
    wait_for_mixing(page, 3000)
    page.keyboard.press("Space")
    page.get_by_text("· paused ·").first.wait_for(timeout=TIMEOUT_MS)
    page.get_by_text("last: posterior marginal P(x=+1)").last.wait_for(timeout=TIMEOUT_MS)
    shots = [save(page, out / "presentation-1280x720.png", _screen(page))]

    page.set_viewport_size(LECTURE_WIDE)
    page.keyboard.press("s")
    page.locator(f'{PANEL} [data-testid="stCaptionContainer"]').filter(
        has_text="just before the step"
    ).wait_for(timeout=TIMEOUT_MS)
    page.locator(f"{PANEL} .js-plotly-plot .main-svg").first.wait_for(timeout=TIMEOUT_MS)
    shots.append(save(page, out / "presentation-1600x1000.png", _screen(page)))
    for path in shots:
        shrink(path)
    return shots


# The open view's main figure (its first chart or image, else its table; the RBM's digit grid,
# a row per sampler read together, whole) and the page's fixed header: where they lie on the
# screen, in CSS pixels, without scrolling; and the charts whose x-axis title meets their legend
_MAIN_FIGURE = """() => {
  const panel = [...document.querySelectorAll('[role="tabpanel"]')].find(p => p.offsetParent);
  const shown = sel => [...panel.querySelectorAll(sel)].filter(e => e.offsetParent);
  // a view that is a table (no chart, no image): the table
  const figure = shown('.js-plotly-plot, [data-testid="stImage"] img')[0]
    || shown('[data-testid="stDataFrame"], [data-testid="stTable"]')[0];
  const header = document.querySelector('[data-testid="stHeader"]');
  const box = e => { const b = e.getBoundingClientRect();
    return {top: b.top, bottom: b.bottom, left: b.left, right: b.right}; };
  const union = (a, b) => ({top: Math.min(a.top, b.top), bottom: Math.max(a.bottom, b.bottom),
    left: Math.min(a.left, b.left), right: Math.max(a.right, b.right)});
  const grid = shown('[class*="st-key-digitrow_"] img').map(box);
  const meet = (a, b) => !(a.right < b.left || b.right < a.left || a.bottom < b.top
    || b.bottom < a.top);
  const overlaps = shown('.js-plotly-plot').flatMap(p => {
    const legend = p.querySelector('.legend');
    if (!legend) return [];
    return [...p.querySelectorAll('[class*="xtitle"]')].filter(t => (t.textContent || '').trim())
      .filter(t => meet(box(t), box(legend))).map(t => t.textContent); });
  return {figure: grid.length ? grid.reduce(union) : figure ? box(figure) : null,
          header: header ? box(header).bottom : 0, width: innerWidth, height: innerHeight,
          scrolled: document.querySelector('[data-testid="stMain"]').scrollTop, overlaps};
}"""
# Views whose figure is not drawn when they open: a study's (computed on a press of its button),
# the flow's (only with a flow sampler in the run), pins' (none pinned) and the exports (none).
FIGURELESS = {
    "Exact chain",
    "Tempering",
    "MAP (annealing)",
    "Importance sampling",
    "Flow",
    "Export",
    "Compare",
}
FIGURE_WAIT_MS = 15_000  # a view draws its figures a moment after its tab opens
_FIGURES = '.js-plotly-plot .main-svg, [data-testid="stImage"] img, [data-testid="stDataFrame"]'


# the pages a lecture shows beside the Ising posterior's, by the name their screenshots carry:
# the paper's 16 x 16 digits RBM and the Markov network MN 1
LECTURE_TARGETS = {"rbm": "digits-16x16", "network": "mn1"}


def view_stem(screen: dict, label: str, page: str = "") -> str:
    """A view's screenshot name: ``presentation-1280x720-balancing-functions`` on the Ising
    page, ``presentation-1280x720-rbm-balancing-functions`` on the ``rbm`` one."""
    slug = "".join(c if c.isalnum() else "-" for c in f"{page} {label}".strip().lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"presentation-{screen['width']}x{screen['height']}-{slug.strip('-')}"


def walk_views(
    page, screens, labels, out: Path | None = None, figureless=(), name: str = ""
) -> dict[tuple[str, str], dict]:
    """Open every view in ``labels`` at every screen size in ``screens`` (presentation mode is
    on), and say where its main figure lies: ``(size, label) -> _MAIN_FIGURE``'s answer, its
    figure None when the view draws none once opened (those in ``figureless`` are not waited
    for). With ``out``, a screenshot of the whole screen per view (``view_stem``, the page
    called ``name``)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    found = {}
    for screen in screens:
        page.set_viewport_size(screen)
        for label in labels:
            open_tab(page, label)
            panel = page.locator(f"{PANEL}:visible")
            panel.locator(".lsb-seeing").first.wait_for(timeout=TIMEOUT_MS)  # the view is drawn
            if label not in figureless:
                try:  # the figure, then its last redraw (Plotly animates its first drawing)
                    panel.locator(_FIGURES).first.wait_for(timeout=FIGURE_WAIT_MS)
                except PlaywrightTimeout:
                    pass  # drawn off screen, or too slowly: the caller sees no figure
            page.wait_for_timeout(500)
            found[f"{screen['width']}x{screen['height']}", label] = page.evaluate(_MAIN_FIGURE)
            if out is not None:
                save(page, out / f"{view_stem(screen, label, name)}.png", _screen(page))
    return found


def open_lecture(page, url: str, target: str = "ising", mixing: int = 2000) -> None:
    """``target``'s page in presentation mode, run until ``mixing`` steps of its mixing phase
    are done, then paused."""
    query = {"present": "1", "speed": "1000"}
    if target != "ising":
        query["target"] = target
    open_app(page, app_url(url, query), RUN_TIMEOUT_MS)  # an RBM draws its truth first
    button(page, "run").click()
    wait_for_mixing(page, mixing)
    button(page, "pause").click()
    page.get_by_text("· paused ·").first.wait_for(timeout=TIMEOUT_MS)


def lecture_labels(views) -> list[str]:
    """The views the lecture targets' pages offer: all of ``views`` (a ``Page``) but those only
    a variable-selection run has (the network page's lecture target is MN 1)."""
    from app import network_run

    return [v.label for v in views.views if v.offered is not network_run.is_selection_run]


def views_shots(page, url: str, out: Path, log) -> list[Path]:
    """Every view of the Ising, RBM and network pages in presentation mode, at 1280 x 720 and
    1600 x 1000, after a short run: the whole screen as the room sees it."""
    from app.view_catalogue import ISING, NETWORK, RBM  # imports torch: only here

    screens, paths = (LECTURE, LECTURE_WIDE), []
    pages = (
        ("", "ising", ISING),
        *((n, t, RBM if n == "rbm" else NETWORK) for n, t in LECTURE_TARGETS.items()),
    )
    for name, target, views in pages:
        log(f"presentation mode: every view of the {target} page at two screen sizes…")
        open_lecture(page, url, target, 2000 if target == "ising" else 200)
        labels = lecture_labels(views)
        walk_views(page, screens, labels, out, FIGURELESS, name)
        paths += [out / f"{view_stem(s, label, name)}.png" for s in screens for label in labels]
    for path in paths:
        shrink(path)
    return paths


def shrink(path: Path) -> None:
    """The PNG in 128 colours: a screen of text and charts stays sharp at a third of the size."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(128, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _screen(page) -> dict:
    size = page.viewport_size
    return {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}


def narrow_shot(page, url: str, out: Path, log) -> Path:
    """The Mixing tab at 800 px wide with the sidebar open: the two charts one under the other."""
    open_app(page, url)
    button(page, "run").click()
    log("800 px: running paper case 3…")
    wait_for_mixing(page, 2000)
    button(page, "pause").click()
    page.get_by_text("· paused ·").first.wait_for(timeout=TIMEOUT_MS)
    open_tab(page, "Mixing")
    plots = page.locator(f"{PANEL} .js-plotly-plot")
    plots.nth(1).locator(".main-svg").first.wait_for(timeout=TIMEOUT_MS)
    bottom = _box(plots.nth(1))
    clip = {"x": 0, "y": 0, "width": NARROW["width"], "height": bottom["y"] + bottom["height"]}
    return save(page, out / "narrow-800.png", clip)


def rbm_shot(page, url: str, out: Path, log) -> Path:
    """The digit grid of the 16 x 16 digits RBM after its burn-in and 2,000 mixing steps."""
    open_app(page, app_url(url, {"target": "digits-16x16"}), RUN_TIMEOUT_MS)  # draws its truth
    button(page, "run").click()
    log("running the 16 x 16 digits RBM…")
    wait_for_mixing(page, 2000)
    button(page, "pause").click()
    page.get_by_text("· paused ·").first.wait_for(timeout=TIMEOUT_MS)
    rows = page.locator(f'{PANEL} [class*="st-key-digitrow_"]')
    rows.last.locator("img").first.wait_for(timeout=TIMEOUT_MS)
    tabs = page.locator('[role="tablist"]').first
    return save(page, out / "rbm-digits.png", clip_around(page, tabs, rows.last))


SHOTS = {
    "chains": (paper_case_shots, VIEWPORT),
    "segmentation": (segmentation_shot, VIEWPORT),
    "lecture": (lecture_shots, LECTURE),
    "narrow": (narrow_shot, NARROW),
    "rbm": (rbm_shot, VIEWPORT),
    "views": (views_shots, LECTURE),
}


def take(out: Path, port: int | None = None, log=print, only=None) -> list[Path]:
    """Start a server and a browser, take the screenshots into ``out``; return their paths."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with StreamlitServer(port) as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            paths = []
            shots = [SHOTS[name] for name in only] if only else list(SHOTS.values())
            for shoot, viewport in shots:
                context = browser.new_context(viewport=viewport, device_scale_factor=SCALE)
                context.set_default_timeout(TIMEOUT_MS)
                page = context.new_page()
                result = shoot(page, server.url, out, log)
                paths += result if isinstance(result, list) else [result]
                context.close()
        finally:
            browser.close()
        if not server.alive():
            raise ServerError(server.describe("died while taking screenshots"))
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.screenshots", description="Screenshots of the main views."
    )
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--only", nargs="*", choices=list(SHOTS), help="default: every group")
    args = parser.parse_args(argv)
    start = time.time()
    try:
        paths = take(args.out, args.port, only=args.only)
    except (FileNotFoundError, ServerError, RuntimeError) as err:
        print(err, file=sys.stderr)
        return 1
    for path in paths:
        print(f"{path} ({path.stat().st_size / 1000:.0f} KB)")
    print(f"done in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
