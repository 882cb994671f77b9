"""How long a visitor waits for a usable page: ``python -m tools.first_render``.

For each of ``--servers`` fresh ``streamlit run`` servers of this tree (or of ``--root``): the
first visitor (cold: the server has imported nothing of the app yet) and then ``--warm`` more
visitors, each in a new browser context (a new session), are timed from navigation to a
visible, enabled Run button. Chromium is started before the clock; the server's start (until
its health check answers) is not counted. It prints the median cold and warm times, every
reading, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from tools import browser_kit

USABLE_RUN = """() => { const b = [...document.querySelectorAll('.st-key-run button')]
    .find(b => b.offsetParent !== null); return !!b && !b.disabled; }"""


def visit(browser, url: str) -> float:
    """Seconds from navigation to a usable Run button, in a new session."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        start = time.perf_counter()
        page.goto(url, timeout=browser_kit.TIMEOUT_MS)
        page.wait_for_function(USABLE_RUN, timeout=browser_kit.TIMEOUT_MS, polling=20)
        return time.perf_counter() - start
    finally:
        context.close()


def main(argv=None) -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(prog="python -m tools.first_render", description=__doc__)
    parser.add_argument("--root", type=Path, default=browser_kit.ROOT, help="the app to serve")
    parser.add_argument("--servers", type=int, default=3, help="fresh servers (cold visits)")
    parser.add_argument("--warm", type=int, default=3, help="later visitors per server")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    cold, warm = [], []
    with sync_playwright() as playwright:
        browser = browser_kit.launch_chromium(playwright)
        try:
            for _ in range(args.servers):
                with browser_kit.StreamlitServer(root=args.root.resolve()) as server:
                    cold.append(visit(browser, server.url))
                    warm.extend(visit(browser, server.url) for _ in range(args.warm))
        finally:
            browser.close()
    print(f"{args.root.resolve()}: first page render to a usable Run button")
    print(f"  cold (a fresh server's first visitor): median {statistics.median(cold):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in cold)})")  # fmt: skip
    print(f"  warm (the visitors after): median {statistics.median(warm):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in warm)})")  # fmt: skip
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
