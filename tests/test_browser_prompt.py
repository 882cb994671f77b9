"""The object prompt and the Segmentation tab in a real browser (headless Chromium): a box
dragged on the photo becomes part of the posterior and the mask stays inside it, a click marks
a point, and an upload on the Segmentation tab leaves the threshold at 0.50."""

from __future__ import annotations

import io
import re
import time

import numpy as np
from PIL import Image

from tests.browser_support import (  # noqa: F401  (fixtures, known to pytest by name)
    app_url,
    assert_healthy,
    browser_fixture,
    button,
    open_app,
    open_tab,
    page_fixture,
    server_fixture,
    shot,
)

CHART = "[class*='st-key-prompt_figure'] .js-plotly-plot"


def plot_area(page, timeout_s: float = 60.0) -> dict:
    """The prompt figure's plot area once it is drawn: a rerun (a mode switch) replaces the
    figure, and on a loaded machine the new one can take seconds to appear."""
    deadline = time.monotonic() + timeout_s
    while True:
        area = page.locator(f"{CHART} .nsewdrag").first
        box = area.bounding_box() if area.count() else None
        if box is not None or time.monotonic() > deadline:
            assert box is not None, "the prompt figure was not drawn"
            return box
        page.wait_for_timeout(250)


def drag(page, start, end) -> None:
    """Drag on the prompt figure between two points given as fractions of its plot area."""
    area = plot_area(page)
    x0, y0 = area["x"] + start[0] * area["width"], area["y"] + start[1] * area["height"]
    x1, y1 = area["x"] + end[0] * area["width"], area["y"] + end[1] * area["height"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    page.mouse.move(x1, y1, steps=4)
    page.mouse.up()


def threshold_shown(page) -> str:
    return page.locator(".st-key-seg_threshold [data-testid='stSliderThumbValue']").inner_text()


def photo_png(height: int, width: int) -> bytes:
    rows, cols = np.mgrid[:height, :width]
    disc = (rows - height / 2) ** 2 + (cols - width / 2) ** 2 < (height / 3) ** 2
    buffer = io.BytesIO()
    Image.fromarray(np.where(disc, 60, 200).astype(np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def upload(page, name: str, data: bytes) -> None:
    page.locator(".st-key-upload input[type=file]").set_input_files(
        {"name": name, "mimeType": "image/png", "buffer": data}
    )
    page.get_by_text(name).first.wait_for()


def test_a_dragged_box_rebuilds_the_run_and_the_mask_stays_inside_it(page, server):
    query = {"source": "sample", "sample": "coffee", "size": "48", "burn_in": "5"}
    open_app(page, app_url(server.url, query))
    page.locator(CHART).first.wait_for()
    assert page.get_by_text("No prompt").count() == 1
    drag(page, (0.3, 0.25), (0.7, 0.75))  # a box over 40% x 50% of the photo
    page.get_by_text("Your prompt: a box").first.wait_for()
    caption = page.get_by_text("Your prompt").first.inner_text()
    box = [int(v) for v in re.findall(r"(\d+)%", caption)[:4]]  # left, right, top, bottom
    assert abs(box[0] - 30) <= 3 and abs(box[1] - 70) <= 3, caption
    button(page, "run").click()
    open_tab(page, "Segmentation")
    summary = page.get_by_text(re.compile(r"From the posterior marginal .* Object: ")).first
    summary.wait_for()
    share = float(re.search(r"Object: ([\d.]+)% of the pixels", summary.inner_text())[1])
    area = (box[1] - box[0]) * (box[3] - box[2]) / 100
    assert 0 < share <= area + 2, (share, area)  # the mask lies within the box
    # a click in "background points" mode marks a point where it lands
    page.get_by_text("click background points").click()
    page.wait_for_timeout(1500)
    area = plot_area(page)
    page.mouse.click(area["x"] + 0.5 * area["width"], area["y"] + 0.5 * area["height"])
    page.get_by_text(re.compile(r"Your prompt: a box .* and 1 background point")).first.wait_for()
    assert_healthy(page)
    shot(page, "prompt-box-and-point")


def test_an_upload_on_the_segmentation_tab_keeps_the_threshold(page, server):
    page.goto(app_url(server.url, {"source": "upload", "size": "32"}))
    page.locator(".st-key-upload input[type=file]").wait_for(state="attached")
    upload(page, "first.png", photo_png(40, 50))
    button(page, "run").wait_for()
    open_tab(page, "Segmentation")
    assert threshold_shown(page) == "0.50"
    upload(page, "second.png", photo_png(60, 44))  # a new photo, a new layout of the page
    page.get_by_text("mask (P ≥ 0.50) over it").first.wait_for()
    page.wait_for_timeout(1000)
    assert threshold_shown(page) == "0.50"
    assert_healthy(page)
