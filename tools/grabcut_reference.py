"""Box prompts against OpenCV's GrabCut: the mask a GrabCut user would get, beside ours.

    python -m tools.grabcut_reference --opencv-python /tmp/cvenv/bin/python [--json]

Issue 46 asks for box-prompted segmentation that finds the object "the way GrabCut users
expect". This tool measures that expectation: on the benchmark's photos
(``lsbcore.studies.benchmarks.box_prompts``: the boxes and hand masks written down before any
tuning), each photo is read onto the same working lattice as ``segment`` (256 px, the same
decoder), and both

- ours: ``segment(photo, box=...)`` with its defaults (refits while it runs, until settled),
  its mask the marginal's mode, and
- GrabCut: ``cv2.grabCut`` initialised with the same box (OpenCV's rectangle: the box's pixels,
  as whole pixels), ``--iterations`` rounds (10 by default), its mask the definite and probable
  foreground,

are scored by IoU with the hand mask (where one exists) and by the share of the box they cover.

OpenCV is not a dependency of the product: it runs in a separate interpreter given by
``--opencv-python`` (any Python with ``opencv-python-headless`` and numpy, e.g.
``python -m venv /tmp/cvenv && /tmp/cvenv/bin/pip install opencv-python-headless numpy``),
through ``tools/grabcut_cv.py``; the lattices go to it and the masks come back in ``.npz`` files
in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from lsbcore import interrupt
from lsbcore.segmentation.segment import read_photo, segment
from lsbcore.studies.benchmarks.box_prompts import BOXES, SIDE, box_sites, hand_mask
from lsbcore.studies.benchmarks.photos import skimage_data

RUNNER = Path(__file__).with_name("grabcut_cv.py")


def iou(mask: np.ndarray, truth: np.ndarray) -> float:
    return float((mask & truth).sum() / max((mask | truth).sum(), 1))


def grabcut_masks(python: str, photos: dict, iterations: int) -> dict[str, np.ndarray]:
    """GrabCut's mask of each photo ``name -> (rgb uint8 [H, W, 3], box)``, run by ``python``."""
    with tempfile.TemporaryDirectory() as folder:
        inputs, outputs = Path(folder) / "in.npz", Path(folder) / "out.npz"
        arrays = {f"{n}.rgb": rgb for n, (rgb, _) in photos.items()}
        arrays |= {f"{n}.box": np.asarray(box, dtype=float) for n, (_, box) in photos.items()}
        np.savez(inputs, **arrays)
        subprocess.run(
            [python, str(RUNNER), str(inputs), str(outputs), str(iterations)], check=True
        )
        with np.load(outputs) as masks:
            return {name: masks[name].astype(bool) for name in photos}


def compare(names: list[str], python: str, iterations: int, seed: int) -> list[dict]:
    """One row per photo: IoU with the hand mask and the box's share covered, ours and GrabCut's."""
    ours, photos = {}, {}
    for name in names:
        file, _, box, _ = BOXES[name]
        path = skimage_data() / file
        ours[name] = segment(path, max_side=SIDE, seed=seed, box=box).working_mask
        rgb = read_photo(path, SIDE).rgb  # the same lattice, the same decoder
        photos[name] = (np.round(rgb * 255).astype(np.uint8), box)
    theirs = grabcut_masks(python, photos, iterations)
    rows = []
    for name in names:
        box, truth = BOXES[name][2], hand_mask(name, ours[name].shape)
        inside = box_sites(box, ours[name].shape)
        row = {"photo": name, "what": BOXES[name][1], "box": list(box)}
        for who, mask in (("ours", ours[name]), ("grabcut", theirs[name])):
            row[f"{who}_box_covered"] = round(float(mask[inside].mean()), 4)
            row[f"{who}_iou"] = None if truth is None else round(iou(mask, truth), 4)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--opencv-python", required=True, help="a Python interpreter with opencv and numpy"
    )
    parser.add_argument("--photos", default=",".join(BOXES), help="comma-separated names")
    parser.add_argument("--iterations", type=int, default=10, help="GrabCut's rounds")
    parser.add_argument("--seed", type=int, default=0, help="our sampler's seed")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    names = [p for p in args.photos.split(",") if p]
    unknown = [p for p in names if p not in BOXES]
    if unknown:
        parser.error(f"no such photo: {', '.join(unknown)} (known: {', '.join(BOXES)})")
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    rows = compare(names, args.opencv_python, args.iterations, args.seed)
    if args.json:
        print(json.dumps({"side": SIDE, "iterations": args.iterations, "rows": rows}, indent=1))
        return 0
    print(f"box prompts at {SIDE} px: ours (segment) against GrabCut ({args.iterations} rounds)")
    for r in rows:
        scores = (
            ""
            if r["ours_iou"] is None
            else (f"; IoU with hand mask {r['ours_iou']:.3f} against {r['grabcut_iou']:.3f}")
        )
        print(
            f"  {r['photo']:>10}: box covered {r['ours_box_covered']:.1%} against "
            f"{r['grabcut_box_covered']:.1%}{scores}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(interrupt.run_command(main, "python -m tools.grabcut_reference"))
