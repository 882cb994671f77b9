"""What the segmentation's downloads cost the server: a photo whose header lies is refused,
a real 8000 x 8000 photo's downloads all build under 1 GB of peak server memory, and a
download that cannot be built says so on the page.

The memory test runs the page in a fresh Python process (Streamlit's AppTest: the app's
script, session state and widgets, as the server runs them), uploads the photo, and builds
every file the page hands to a download button, as a click on each does, from a process that
has compiled its kernels (a server does that once, when it starts; in a fresh checkout the
compiler alone took this process past 1 GB before any photo arrived). The lying file's page
must peak under 1 GB; the real photo's clicks must add at most one build's budget to the
memory the page held before them (its run's own state, about 400 MB over a warm server's
baseline for an 8000 px photo, is the page's, not the clicks').
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app import large_builds, photo_downloads, state
from app.text import plain
from app.views import segmentation
from tests.app_support import open_app, stop_runs_fixture  # noqa: F401  (autouse fixture)
from tests.lying_images import small_jpeg, with_jpeg_size
from tools.bench_downloads import gradient_photo

ROOT = Path(__file__).resolve().parent.parent
PEAK_LIMIT_MB = 1000
BUILDS_LIMIT_MB = 300  # photo_downloads' budget (about 256 MB a build), one build at a time

# The page in a fresh process: each upload in turn; after one that is accepted, run until there
# are draws, open Segmentation, and build every file handed to a download button there. Prints
# what the page said after each upload, and the peak memory.
_PAGE = r"""
import json, os, sys
from streamlit.delta_generator import DeltaGenerator
from streamlit.testing.v1 import AppTest
from app import state

handed = []  # (label, data) of every download button drawn
draw = DeltaGenerator.download_button


def spy(self, label, data, *args, **kwargs):
    handed.append((label, data))
    return draw(self, label, data, *args, **kwargs)


DeltaGenerator.download_button = spy
from lsbcore.samplers import warmup

warmup.compile_kernels()  # what a server has done before its first visitor


def memory(field):
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field)) / 1e3


def restart_peak():
    with open("/proc/self/clear_refs", "w") as peak:
        peak.write("5")  # the peak (VmHWM) restarts from the memory in use now


restart_peak()
at = AppTest.from_file("app/streamlit_app.py", default_timeout=120).run()
at.radio(key="source").set_value("upload").run()
pages = []
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    at.file_uploader(key="upload").upload(os.path.basename(path), data, "image/jpeg")
    at.run()
    errors = [e.value for e in at.error] + [e.value for e in at.exception]
    files = {}
    if not errors:
        run = at.session_state["_run"]
        state.advance(run, 60.0, run.config.burn_in + 20)
        at.session_state["view"] = "Segmentation"
        handed.clear()
        at.run()
        errors = [e.value for e in at.error] + [e.value for e in at.exception]
        before, page_peak = memory("VmRSS"), memory("VmHWM")
        restart_peak()
        for label, data in handed:
            files[label] = len(data() if callable(data) else data)
        builds = memory("VmHWM") - before
        state._pause_all_runs()
    else:
        page_peak, builds = memory("VmHWM"), 0.0
    captions = " | ".join(str(c.value) for c in at.caption)
    pages.append({"errors": errors, "files": files, "captions": captions,
                  "peak_mb": page_peak, "builds_mb": builds})
print(json.dumps({"pages": pages, "peak_mb": memory("VmHWM")}))
sys.stdout.flush()
os._exit(0)  # past the app's threads, whose teardown at exit may abort the process
"""


def run_page(tmp_path: Path, uploads: dict[str, bytes]) -> dict:
    paths = []
    for name, data in uploads.items():
        paths.append(tmp_path / name)
        paths[-1].write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-c", _PAGE, *map(str, paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_lying_jpeg_is_refused_and_a_real_8000_px_photo_downloads_under_1_gb(tmp_path):
    lying = with_jpeg_size(small_jpeg(64), 8900, 8900)  # 4 kB whose header claims 79 MP
    photo = gradient_photo(8000)
    assert len(photo) < 25_000_000 and Image.open(io.BytesIO(photo)).size == (8000, 8000)
    result = run_page(tmp_path, {"lying.jpg": lying, "big.jpg": photo})
    refused, page = result["pages"]
    assert len(refused["errors"]) == 1 and "8900 x 8900" in refused["errors"][0], refused
    assert "header" in refused["errors"][0] and not refused["files"]
    assert not page["errors"], page["errors"]
    # every photo-sized file (mask, probability, uncertainty, overlay) and the array were built
    big = f"{photo_downloads.MAX_SIDE}x{photo_downloads.MAX_SIDE}"
    assert sorted(page["files"]) == sorted(
        [f"Mask ({big})", f"P(x = +1) ({big})", f"Uncertainty ({big})", f"Overlay ({big})"]
        + ["P(x = +1) array (.npy)"]
    )
    assert all(size > 0 for size in page["files"].values())
    assert (
        "this photo is 8,000 × 8,000 px, so they are scaled to 3,072 × 3,072" in (page["captions"])
    )
    # the lying file's page, from upload to refusal, stays under 1 GB (it took 4.1 GB)
    assert refused["peak_mb"] < PEAK_LIMIT_MB, result
    # clicking every download of the 8000 px photo adds at most one build's budget to the
    # server (3.7 GB before); what the photo's run itself holds is the page's, not the clicks'
    assert 0 < page["builds_mb"] < BUILDS_LIMIT_MB, result


def photo_run():
    """A small colour photo's run with draws, and its page on the Segmentation view."""
    at = open_app(source="sample", sample="coffee", size="48")
    run = at.session_state["_run"]
    state.advance(run, 60.0, 400)
    at.session_state["view"] = "Segmentation"
    return at.run(), run


def marginal_of(run) -> np.ndarray:
    return run.comparison.marginals["checkerboard"].mean()


def test_a_download_that_waits_too_long_for_its_turn_says_so_on_the_page(monkeypatch):
    at, run = photo_run()
    assert not at.warning and not at.exception
    monkeypatch.setattr(large_builds, "WAIT_S", 0.05)
    mask = segmentation.download_files(run, marginal_of(run), 0.5)[0]
    with large_builds.one_at_a_time(), pytest.raises(large_builds.BuildBusy):
        mask.build()  # another visitor's build holds the turn
    at.run()
    warnings = [w.value for w in at.warning]
    assert warnings == [f"{mask.label} was not built: {large_builds.BUSY}."]
    assert not at.exception
    assert mask.build()[:8] == b"\x89PNG\r\n\x1a\n"  # its turn free, it builds ...
    at.run()
    assert not at.warning  # ... and the page stops saying it failed


def test_a_download_whose_photo_cannot_be_read_again_says_so_on_the_page():
    at, run = photo_run()
    run.source = b"not an image any more"
    files = segmentation.download_files(run, marginal_of(run), 0.5)
    overlay = next(f for f in files if f.key == "overlay")
    with pytest.raises(ValueError):  # ImageError
        overlay.build()
    at.run()
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and warnings[0].startswith(f"{overlay.label} could not be built")
    assert "not an image" in warnings[0] and not at.exception


def test_a_running_page_offers_the_photo_downloads_only_once_it_is_paused():
    at, run = photo_run()
    assert [b.label for b in at.get("download_button")][0].startswith("Mask (")
    # marked running without a worker (a settled photo's worker would pause at once): the page
    # now redraws itself every second
    run.running = True
    try:
        at.run()
        assert segmentation.WAIT_FOR_PAUSE in [i.value for i in at.info]
        assert not at.get("download_button") and not at.exception
    finally:
        run.running = False
    at.run()
    assert len(at.get("download_button")) == 5


def test_an_upload_waits_for_the_servers_turn_to_decode_and_is_read_once_it_is_free(
    monkeypatch,
):
    """A large photo's decode peaks at hundreds of MB (a progressive 8,900 px JPEG: about 260
    MB), so the decodes of several visitors take the one turn that the downloads take: eight
    pages uploaded at once peak at one decode over what they hold (BENCHMARKS.md)."""
    at = open_app()
    at.radio(key="source").set_value("upload").run()
    monkeypatch.setattr(large_builds, "WAIT_S", 0.05)
    photo = with_jpeg_size(small_jpeg(64), 64, 64)
    with large_builds.one_at_a_time():  # another visitor's photo is being decoded
        at.file_uploader(key="upload").upload("photo.jpg", photo, "image/jpeg")
        at.run()
    assert [e.value for e in at.sidebar.error] == [
        plain(f"The photo was not read yet: {large_builds.BUSY}.")
    ]
    assert "_run" not in at.session_state or at.session_state["_run"].image is None
    at.run()  # the turn is free: the same upload is read, not the refusal remembered
    assert not at.sidebar.error and not at.exception
    assert at.session_state["_run"].problem.target.shape == (64, 64)
