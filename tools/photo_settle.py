"""Seconds from Run to "Settled at step" for uploaded photos: ``python -m tools.photo_settle``.

One server, one headless Chromium page. For each photo (a path, or a name of scikit-image's
shipped photos; default: six that are not in ``assets/``) it chooses "Your image", uploads it,
keeps the resolution the app picks from the machine's measured speed, presses Run with the
defaults ("Stop when settled" on) and reads the page every quarter second until the status
line says the run settled. Printed per photo: the sidebar's pick sentence, the seconds (the
data fit, burn-in and redraws included: what the user waits), the step it settled at and the
steps per second over that wait (a step of the photo's default, block Gibbs, is a sweep).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from tools.browser_kit import (
    StreamlitServer,
    button,
    launch_chromium,
    open_app,
    page_problems,
)

PHOTOS = ("coins.png", "chelsea.png", "retina.jpg", "ihc.png", "page.png", "brick.png")
LIMIT_S = 120.0


def photo_path(name: str) -> Path:
    path = Path(name)
    if path.exists():
        return path
    import skimage

    return Path(skimage.__file__).parent / "data" / name


def picked(page) -> str | None:
    """The sidebar's sentence on the resolution it picked, if it shows one."""
    found = re.search(
        r"Picked [^\n]*", page.locator("section[data-testid='stSidebar']").inner_text()
    )
    return found.group(0) if found else None


def time_to_settled(page, photo: Path) -> tuple[str, float | None, str | None]:
    """The pick sentence, the seconds from Run to settled and the step (None: not in time)."""
    page.locator(".st-key-source label").filter(has_text="Your image").first.click()
    before = picked(page)
    page.locator(".st-key-upload input[type=file]").set_input_files(str(photo))
    # the uploader names the file, then the rerun decodes it and writes its pick sentence
    # (the same as the last photo's when the pick and the measured speed are); a long name is
    # shown cut in the middle ("hubble_..._field.jpg"): its end is enough
    page.locator(".st-key-upload").get_by_text(photo.name[-8:]).first.wait_for(timeout=60_000)
    deadline = time.monotonic() + 10
    while (pick := picked(page)) == before and time.monotonic() < deadline:
        time.sleep(0.25)
    page.wait_for_timeout(500)  # the rest of that rerun
    start = time.monotonic()
    button(page, "run").click()
    while time.monotonic() - start < LIMIT_S:
        settled = re.search(r"Settled at step ([\d,]+)", page.locator("body").inner_text())
        if settled:
            return pick or "?", time.monotonic() - start, settled.group(1)
        time.sleep(0.25)
    return pick or "?", None, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("photos", nargs="*", default=list(PHOTOS))
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    problems = []
    with StreamlitServer() as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        open_app(page, server.url)
        time.sleep(8.0)  # the warm-up compiles or loads the kernels and measures the speed
        for name in args.photos:
            pick, seconds, step = time_to_settled(page, photo_path(name))
            waited = (
                f"{seconds:.1f} s, settled at step {step} "
                f"({int(step.replace(',', '')) / seconds:.0f} steps/s over the wait)"
                if seconds
                else "not settled"
            )
            print(f"{name}: {waited} | {pick}", flush=True)
            problems += page_problems(page)
            button(page, "reset").click()
            page.wait_for_timeout(1500)
        browser.close()
    for problem in problems:
        print("page problem:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
