"""A page's first run, second by second: ``python -m tools.first_run``.

A ``streamlit run`` server of this tree (or of ``--root``) and one headless Chromium page on a
link that opens ``--target`` (the link's ``target`` value: ``digits-16x16`` by default); after
``--wait`` seconds (the server's warm-up) Run is pressed and the status line's step counter is
read every half second for ``--seconds``. It prints the counter over time, the first second with
steps and when the counter stopped (the run's end). ``--fresh-cache`` gives the server an empty
numba cache (``NUMBA_CACHE_DIR``): a fresh install's first run, compiling everything. With
``--before T``, the page first runs ``T``'s page for ``--before-seconds`` and then opens
``--target`` the same way (a page after another one, on the same server).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from tools import browser_kit


def run_page(page, base: str, target: str, seconds: float, extra: dict[str, str]) -> list:
    """Open ``target``'s page, press Run and read the counter for ``seconds``: ``[(s, steps)]``."""
    browser_kit.open_app(page, browser_kit.app_url(base, {"target": target, **extra}))
    browser_kit.button(page, "run").click()
    start, seen = time.perf_counter(), []
    while time.perf_counter() - start < seconds:
        page.wait_for_timeout(500)
        seen.append((round(time.perf_counter() - start, 1), browser_kit.steps_shown(page)))
    return seen


def summary(seen: list) -> dict:
    """The first second with steps, and the first at which the counter reached its last value."""
    last = seen[-1][1] if seen else 0
    return {
        "first_steps_s": next((t for t, s in seen if s > 0), None),
        "final_steps": last,
        "final_at_s": next((t for t, s in seen if s == last), None) if last > 0 else None,
    }


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(prog="python -m tools.first_run", description=__doc__)
    parser.add_argument("--root", type=Path, default=browser_kit.ROOT, help="the app to serve")
    parser.add_argument("--target", default="digits-16x16", help="the link's target value")
    parser.add_argument("--steps", default=None, help="the link's mixing steps")
    parser.add_argument("--wait", type=float, default=130.0, help="seconds before Run")
    parser.add_argument("--seconds", type=float, default=30.0, help="of reading the counter")
    parser.add_argument("--fresh-cache", action="store_true", help="an empty numba cache")
    parser.add_argument("--before", default=None, help="a target whose page runs first")
    parser.add_argument("--before-seconds", type=float, default=10.0)
    args = parser.parse_args()
    extra = {"steps": args.steps} if args.steps else {}
    with tempfile.TemporaryDirectory() as cache:
        if args.fresh_cache:
            os.environ["NUMBA_CACHE_DIR"] = cache  # the server inherits it
        with browser_kit.StreamlitServer(root=args.root) as server, sync_playwright() as pw:
            browser = browser_kit.launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                browser_kit.open_app(page, server.url)
                page.wait_for_timeout(1000 * args.wait)
                if args.before:
                    before = run_page(page, server.url, args.before, args.before_seconds, {})
                    print(f"{args.before} first: {summary(before)}")
                seen = run_page(page, server.url, args.target, args.seconds, extra)
            finally:
                browser.close()
    print(f"{args.target}: steps after Run (s, steps): {seen}")
    print(f"{args.target}: {summary(seen)}")


if __name__ == "__main__":
    main()
