"""What a large photo's page holds on the server: ``python -m tools.page_memory [--pages 8]``.

One ``streamlit run`` server and one headless Chromium. The server's baseline is its resident
memory (children included) once a first page with the default setup has been drawn and its
kernels are compiled. Then one session is opened on "Your image" with a large real photo
uploaded (``--side`` px, default 8,900: skimage's astronaut scaled up, with a little noise so
that it compresses as a photo does; ``--progressive`` for the costlier kind of JPEG) at a
working lattice of ``--size`` px (fixed: the page's own pick follows the machine's speed) and left
alone: no click on Run or anywhere else. What it holds is the server's resident memory over the
baseline once the server is idle again; its peak is sampled every 0.2 s. Then ``--pages`` - 1
more sessions are opened and the photo uploaded to all of them at once, so that their decodes
overlap, and the same two figures are read for all the pages together.

Prints the figures and a JSON summary (``--json FILE`` also writes it). ``--root`` measures
another checkout's app (a before/after pair), as ``tools.loadtest`` does.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from tools.browser_kit import (
    ROOT,
    TIMEOUT_MS,
    MemorySampler,
    StreamlitServer,
    app_url,
    cpu_seconds,
    launch_chromium,
    memory_kb,
    open_app,
    page_problems,
)

SETTLE_S = 8.0  # after a page is drawn: the server's decode and run setup done, sampling not begun


def large_photo(side: int, seed: int = 0, progressive: bool = False) -> bytes:
    """A real photo (skimage's astronaut) scaled to ``side`` x ``side`` with mild noise, as JPEG
    (progressive ones, common on the web, are the costlier to decode)."""
    from skimage import data

    image = Image.fromarray(data.astronaut()).resize((side, side), Image.Resampling.BICUBIC)
    pixels = np.asarray(image, dtype=np.int16)
    noise = np.random.default_rng(seed).integers(-12, 13, size=pixels.shape, dtype=np.int16)
    image = Image.fromarray(np.clip(pixels + noise, 0, 255).astype(np.uint8))
    buffer = io.BytesIO()
    # about 17-19 MB at 8,900 px: a camera's file of that size
    image.save(buffer, format="JPEG", quality=90, progressive=progressive)
    return buffer.getvalue()


def settled_mb(pid: int, seconds: float) -> float:
    """The server's resident memory once it is idle (under a tenth of a core) and has stopped
    growing over ``seconds`` (at most 120 s): the warm-up's compiles and a page's setup done."""
    deadline = time.monotonic() + 120
    last, cpu = memory_kb(pid)[0], cpu_seconds([pid])
    while time.monotonic() < deadline:
        time.sleep(seconds)
        now, used = memory_kb(pid)[0], cpu_seconds([pid])
        if abs(now - last) < 5_000 and used - cpu < 0.1 * seconds:
            return now / 1e3
        last, cpu = now, used
    return last / 1e3


def photo_page(browser, url: str, size: int):
    """A fresh session (its own browser context) on "Your image", its uploader drawn."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(app_url(url, {"source": "upload", "size": str(size)}), timeout=TIMEOUT_MS)
    page.locator(".st-key-upload input[type=file]").wait_for(state="attached", timeout=TIMEOUT_MS)
    return page


def upload(page, photo: bytes) -> None:
    page.locator(".st-key-upload input[type=file]").set_input_files(
        {"name": "large.jpg", "mimeType": "image/jpeg", "buffer": photo}
    )


def drawn(page) -> None:
    """Wait until the page shows the photo's lattice (its header names the sites)."""
    page.get_by_text("sites").first.wait_for(timeout=TIMEOUT_MS * 4)


def measure(pages: int, side: int, size: int, progressive: bool, root: Path) -> dict:
    from playwright.sync_api import sync_playwright

    photo = large_photo(side, progressive=progressive)
    kind = "progressive" if progressive else "baseline"
    print(f"photo: {side} x {side} {kind} JPEG, {len(photo) / 1e6:.1f} MB", flush=True)
    with StreamlitServer(root=root) as server, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        open_app(browser.new_context().new_page(), server.url)
        baseline = settled_mb(server.pid, 5.0)  # the warm-up thread compiles in the background
        print(f"baseline: {baseline:,.0f} MB", flush=True)
        sampler = MemorySampler(server.pid, 0.2)
        sampler.start()
        first = photo_page(browser, server.url, size)
        upload(first, photo)
        drawn(first)
        one = settled_mb(server.pid, SETTLE_S) - baseline
        one_peak = sampler.peak_rss_kb / 1e3 - baseline
        print(f"one page: holds +{one:,.0f} MB, peaked at +{one_peak:,.0f} MB", flush=True)
        others = [photo_page(browser, server.url, size) for _ in range(pages - 1)]
        for page in others:  # every upload at once: their decodes overlap on the server
            upload(page, photo)
        for page in others:
            drawn(page)
        every = settled_mb(server.pid, SETTLE_S) - baseline
        sampler.stop()
        peak = sampler.peak_rss_kb / 1e3 - baseline
        problems = [p for page in [first, *others] for p in page_problems(page)]
        if pages > 1:
            print(f"{pages} pages: hold +{every:,.0f} MB, peaked at +{peak:,.0f} MB", flush=True)
        browser.close()
    return {
        "side": side,
        "size": size,
        "jpeg": kind,
        "photo_mb": round(len(photo) / 1e6, 2),
        "baseline_mb": round(baseline),
        "one_page_holds_mb": round(one),
        "one_page_peak_mb": round(one_peak),
        "pages": pages,
        "pages_hold_mb": round(every),
        "pages_peak_mb": round(peak),
        "problems": problems,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1, help="photo pages opened (default 1)")
    parser.add_argument("--side", type=int, default=8900, help="the photo's side in px")
    parser.add_argument(
        "--size", type=int, default=256, help="the working lattice's longer side (default 256)"
    )
    parser.add_argument("--progressive", action="store_true", help="a progressive JPEG")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app runs")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    summary = measure(args.pages, args.side, args.size, args.progressive, args.root)
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
