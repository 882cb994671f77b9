"""An RBM run's speed with one tab or another open: ``python -m tools.rbm_tab_speed``.

A ``streamlit run`` server of this tree (or of ``--root``) and one headless Chromium page per
tab, each on a link that opens the RBM page (8 x 8 digits, ``--samplers``) on that tab; Run is
pressed, and after ``--settle`` seconds the step counter of the status line is read every
quarter second for ``--seconds``; one untimed page first warms the server up (its kernels, the
model's truth). It prints each tab's steps per second (the median of ``--repeats`` pages, each
a fresh run on the same server) and, for the MMD tab, how long after the page drew its Run
button the tab drew its chart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from tools import browser_kit

SAMPLERS = "barker,lsb1,flsb1,flsb2,gwg,gibbs-2,gibbs-4,hb-10-1,pas,dmala"
CHART = '[role="tabpanel"] .js-plotly-plot .main-svg'


def one_page(server, tab: str, samplers: str, settle_s: float, seconds: float) -> dict:
    """Open the RBM page on ``tab``, press Run, and read its rate after ``settle_s``."""
    from playwright.sync_api import sync_playwright

    query = {
        "target": "digits-8x8", "rbm_view": tab, "samplers": samplers,
        "burn_in": "0", "steps": "1000000",
    }  # fmt: skip
    with sync_playwright() as playwright:
        browser = browser_kit.launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            browser_kit.open_app(page, browser_kit.app_url(server.url, query))
            drawn = time.perf_counter()
            if tab == "MMD":  # the first open computes the noise floor
                page.locator(CHART).first.wait_for(timeout=120_000)
            shown_s = time.perf_counter() - drawn
            browser_kit.button(page, "run").click()
            page.wait_for_timeout(1000 * settle_s)
            seen = []
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                step = browser_kit.steps_shown(page)
                if step >= 0 and (not seen or step != seen[-1][1]):
                    seen.append((time.perf_counter(), step))
                page.wait_for_timeout(250)
            browser_kit.button(page, "pause").click()
        finally:
            browser.close()
    if len(seen) < 2:  # the counter never moved in the window
        return {"steps_per_second": float("nan"), "shown_s": shown_s}
    (t0, s0), (t1, s1) = seen[0], seen[-1]
    return {"steps_per_second": (s1 - s0) / (t1 - t0), "shown_s": shown_s}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.rbm_tab_speed", description=__doc__)
    parser.add_argument("--root", type=Path, default=browser_kit.ROOT, help="the app to serve")
    parser.add_argument("--tabs", default="Acceptance and hops,MMD", help="comma-separated")
    parser.add_argument("--samplers", default=SAMPLERS, help="comma-separated RBM labels")
    parser.add_argument("--settle", type=float, default=6.0, help="seconds after Run")
    parser.add_argument("--seconds", type=float, default=12.0, help="seconds measured")
    parser.add_argument("--repeats", type=int, default=3, help="pages per tab (median)")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with browser_kit.StreamlitServer(root=args.root.resolve()) as server:
        # untimed: a fresh server's first run also compiles its kernels and loads the truth
        one_page(server, "Digits", args.samplers, args.settle, 2.0)
        for tab in args.tabs.split(","):
            runs = [
                one_page(server, tab, args.samplers, args.settle, args.seconds)
                for _ in range(args.repeats)
            ]
            rates = [r["steps_per_second"] for r in runs]
            shown = [r["shown_s"] for r in runs]
            print(
                f"{tab}: {statistics.median(rates):,.1f} steps/s (runs: "
                f"{', '.join(f'{r:,.1f}' for r in rates)}); its chart drew "
                f"{statistics.median(shown):.2f} s after the Run button "
                f"({', '.join(f'{s:.2f}' for s in shown)})"
            )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
