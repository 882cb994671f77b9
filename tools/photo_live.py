"""Live redraws while a photo is segmented: ``python -m tools.photo_live [--size 256]``.

One server, one headless Chromium session on a shipped photo (``--sample``, default camera) at
``--size`` px with the photo defaults (block Gibbs, 4 chains), "Stop when settled" off so that
it keeps sampling, speed auto. For ``--seconds`` on the Chains tab and then as long on the
Segmentation tab it counts, in the page, how often the tab's images changed (as
``tools.loadtest`` does) and how often the live status line changed (a redraw), and prints
both per second, the longest gaps and the sweeps per second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tools.browser_kit import (
    REDRAW_COUNTER,
    StreamlitServer,
    app_url,
    button,
    launch_chromium,
    open_app,
    open_tab,
    page_problems,
    steps_shown,
)

# The live status line ("Step N · ...") changes on every redraw of the fragment while sampling
# goes on, whichever tab is open; the images of a settled marginal may not (8-bit gray levels).
_STATUS_COUNTER = r"""() => {
    const text = () => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
        .map(e => e.innerText).find(t => t.startsWith('Step ')) || '';
    const state = window.__lsbStatus = {last: text(), times: []};
    setInterval(() => { const now = text();
        if (now !== state.last) { state.last = now; state.times.push(Date.now()); } }, 50);
}"""


def _rate(times: list[float], start: float, elapsed: float) -> tuple[float, float]:
    times = [t for t in times if start <= t <= start + elapsed]
    edges = [start, *times, start + elapsed]
    gap = max(b - a for a, b in zip(edges, edges[1:], strict=False))
    return round(len(times) / elapsed, 2), round(gap, 2)


def measure(page, seconds: float) -> dict:
    page.evaluate("() => { delete window.__lsbRedraws; }")
    page.evaluate(REDRAW_COUNTER)
    page.evaluate(_STATUS_COUNTER)
    steps0, start = steps_shown(page), time.time()
    time.sleep(seconds)
    elapsed = time.time() - start
    images = [t / 1000 for t in page.evaluate("() => window.__lsbRedraws.times")]
    status = [t / 1000 for t in page.evaluate("() => window.__lsbStatus.times")]
    redraws, gap = _rate(status, start, elapsed)
    image_changes, image_gap = _rate(images, start, elapsed)
    return {
        "redraws_per_s": redraws,
        "longest_gap_s": gap,
        "image_changes_per_s": image_changes,
        "longest_image_gap_s": image_gap,
        "sweeps_per_s": round((steps_shown(page) - steps0) / elapsed, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="camera")
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--shots", type=Path, default=None, help="a screenshot per tab here")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from app import config as cfgmod

    cfg = cfgmod.defaults_for("sample", sample=args.sample)
    query = cfgmod.to_query_params(cfg)
    query.update(size=str(args.size), until_settled="0", steps="200000")
    out: dict = {"sample": args.sample, "size": args.size}
    with StreamlitServer() as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        open_app(page, app_url(server.url, query))
        button(page, "run").click()
        time.sleep(3.0)  # burn-in and the first redraws
        for tab in ("Chains", "Segmentation"):
            open_tab(page, tab)
            time.sleep(1.0)
            out[tab] = measure(page, args.seconds)
            print(f"{tab:13s} {out[tab]}")
            if args.shots is not None:
                page.screenshot(path=str(args.shots / f"photo-live-{tab}.png"), full_page=True)
        out["problems"] = page_problems(page)
        button(page, "pause").click()
        browser.close()
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if not out["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
