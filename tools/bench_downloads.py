"""Memory of the segmentation's photo-sized downloads: peak resident memory per build.

    python -m tools.bench_downloads [--side 8000] [--ways app,before] [--kinds mask,...]
        [--together 1] [--out artifacts/bench_downloads.json]

A real ``side`` x ``side`` JPEG is made (a gradient with shapes, about 1 MB at 8000 px); each
download is then built in a fresh Python process, and the growth of its peak resident memory
(VmHWM, reset just before) over its resident memory before the build is printed, in MB and in
bytes per pixel of the file built: the app's builds (``app.photo_downloads``, capped at
``MAX_SIDE``) beside the full-size builds from ``lsbcore.segmentation.outputs`` that the page
used before. ``--together N`` clicks each download N times at once (threads in one process,
as N visitors on one server); the app's builds then take turns (``app.large_builds``).
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("mask", "probability", "entropy", "overlay")

_CHILD = r"""
import sys
import threading
import numpy as np
import lsbcore
from app import large_builds, photo_downloads
from lsbcore.segmentation import outputs
from lsbcore.segmentation.segment import overlay_at_size

path, kind, way, together = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
source = open(path, "rb").read()
photo = lsbcore.load_photo(source, max_side=256)
marginal = np.random.default_rng(0).random(photo.luma.shape)
full = photo.original_shape
capped = photo_downloads.download_shape(full)
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024

open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from here
before = status("VmRSS:")
if way == "app":
    build = {
        "mask": lambda: photo_downloads.mask_png(marginal, capped, 0.5),
        "probability": lambda: photo_downloads.probability_png(marginal, capped),
        "entropy": lambda: photo_downloads.entropy_png(marginal, capped),
        "overlay": lambda: photo_downloads.overlay_png(source, marginal, capped, 0.5),
    }[kind]
    pixels = capped[0] * capped[1]
else:
    build = {
        "mask": lambda: outputs.mask_png(outputs.upsample(marginal, full) >= 0.5),
        "probability": lambda: outputs.probability_png(outputs.upsample(marginal, full)),
        "entropy": lambda: outputs.entropy_png(outputs.upsample(marginal, full)),
        "overlay": lambda: overlay_at_size(source, marginal, photo, 0.5),
    }[kind]
    pixels = full[0] * full[1] if kind != "overlay" else min(max(full), 4096) ** 2
sizes = []


def click():
    if way == "app":  # the app's builds take the server's one turn, as the page's buttons do
        with large_builds.one_at_a_time():
            sizes.append(len(build()))
    else:
        sizes.append(len(build()))


clicks = [threading.Thread(target=click) for _ in range(together)]
for thread in clicks:
    thread.start()
for thread in clicks:
    thread.join()
grown = status("VmHWM:") - before
print(grown, pixels, sizes[0])
"""


def gradient_photo(side: int) -> bytes:
    """A real photo-like JPEG: a smooth diagonal gradient with a red disc and a blue box,
    quality 80 (about 1 MB at 8000 px), built in 8-bit to stay cheap."""
    half = (np.arange(side, dtype=np.uint32) * 127 // max(1, side - 1)).astype(np.uint8)
    gray = Image.fromarray(np.add.outer(half, half))  # [side, side], 0..254
    image = Image.merge("RGB", (gray, gray, gray))
    draw = ImageDraw.Draw(image)
    draw.ellipse((side // 4, side // 4, 3 * side // 4, 3 * side // 4), fill=(200, 40, 40))
    draw.rectangle((side // 16, 5 * side // 8, 3 * side // 8, 15 * side // 16), fill=(20, 20, 120))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def measure(path: Path, kind: str, way: str, together: int = 1) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), kind, way, str(together)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    grown, pixels, size = (int(v) for v in done.stdout.split())
    return {
        "kind": kind,
        "way": way,
        "peak_growth_mb": grown / 1e6,
        "pixels": pixels,
        "bytes_per_pixel": grown / pixels,
        "file_mb": size / 1e6,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=8000, help="the photo's side in pixels")
    parser.add_argument("--ways", default="app,before", help="app, before or both")
    parser.add_argument(
        "--together", type=int, default=1, help="clicks on each download at once (threads)"
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="which downloads to build")
    parser.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    if not 16 <= args.side <= 8900:
        parser.error("--side must be between 16 and 8900")
    ways = [w for w in args.ways.split(",") if w]
    if not ways or any(w not in ("app", "before") for w in ways):
        parser.error("--ways takes app, before or both, separated by a comma")
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds):
        parser.error(f"--kinds takes some of {', '.join(KINDS)}, separated by a comma")
    if not 1 <= args.together <= 8:
        parser.error("--together must be between 1 and 8")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "photo.jpg"
        path.write_bytes(gradient_photo(args.side))
        print(f"{args.side} x {args.side} JPEG, {path.stat().st_size / 1e6:.2f} MB")
        for way in ways:
            for kind in kinds:
                row = measure(path, kind, way, args.together)
                rows.append(row)
                print(
                    f"{way:7s} {kind:12s} x{args.together} peak +{row['peak_growth_mb']:7.0f} MB  "
                    f"{row['bytes_per_pixel']:6.1f} B/px of {row['pixels'] / 1e6:5.1f} MP  "
                    f"file {row['file_mb']:.1f} MB"
                )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
