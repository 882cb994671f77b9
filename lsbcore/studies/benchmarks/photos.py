"""Photo segmentation benchmark: ``python -m lsbcore.studies.benchmarks.photos [--json]``.

By default on a set of ten varied public-domain photos that ship inside scikit-image's wheel
(``skimage.data``'s files on disk; a dev requirement, nothing is downloaded): textured, colour,
grey, JPEG, RGBA and documents (``PUBLIC``). ``--assets`` runs the shipped photos of
``assets/`` instead. Every run is ``lsbcore.segment`` with 4 chains of checkerboard block Gibbs
from mixed starts, run until the marginal has settled (``diagnostics.settled``). Per photo:

- at a working side of 256 and 512 px (lambda 1) and at 256 px with lambda 1.5: wall seconds to
  a settled ``P(x = +1)`` (the data model's fit and the sampling; the exact MAP, computed only
  for comparison, apart), the sweeps it took, whether it settled, and the fraction of the
  lattice where the thresholded marginal equals the exact MAP;
- with a box prompt around the photo's object (``PUBLIC``'s boxes, fractions of the width and
  height), 256 px: the share of the box covered by the mask (no ground truth ships with these
  photos: the box's share is the figure to read against the object's shape, e.g. a disc fills
  78.5% of its box) and the seconds and sweeps of all its rounds.

Each figure is the median of ``--repeats`` runs with different seeds (the run shown is the
median one), after one warm-up run that compiles the kernels.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from pathlib import Path

import torch

from lsbcore import interrupt
from lsbcore.samplers import warmup
from lsbcore.segmentation.segment import segment

ASSETS = Path(__file__).resolve().parents[3] / "assets"
ASSET_PHOTOS = ("camera", "horse", "cell", "coffee")
#: name -> (file in skimage/data, what it is, a box around its object or None)
PUBLIC = {
    "rocket": ("rocket.jpg", "JPEG, colour, towers", (0.43, 0.27, 0.57, 0.97)),
    "chelsea": ("chelsea.png", "colour, fur texture", (0.05, 0.0, 0.95, 1.0)),
    "coins": ("coins.png", "grey, textured", (0.03, 0.74, 0.17, 0.96)),
    "moon": ("moon.png", "grey, surface texture", (0.18, 0.11, 0.3, 0.25)),
    "page": ("page.png", "grey document, gradient", (0.0, 0.0, 0.8, 0.18)),
    "text": ("text.png", "grey handwriting", (0.1, 0.1, 0.9, 0.9)),
    "astronaut": ("astronaut.png", "colour portrait", (0.05, 0.05, 0.85, 1.0)),
    "logo": ("logo.png", "RGBA, flat colours", (0.04, 0.04, 0.98, 0.98)),
    "hubble": ("hubble_deep_field.jpg", "JPEG, colour, speckle", (0.2, 0.52, 0.3, 0.64)),
    "brick": ("brick.png", "grey, regular texture", None),
}
SIDES = (256, 512)
CHAINS = 4


def skimage_data() -> Path:
    """The folder of scikit-image's bundled photos."""
    import skimage

    return Path(skimage.__file__).resolve().parent / "data"


def photo_path(name: str) -> Path:
    if name in PUBLIC:
        return skimage_data() / PUBLIC[name][0]
    return ASSETS / f"{name}.png"


def _median_run(runs: list) -> tuple[object, float]:
    """The run of median time to settle, and that median (seconds)."""
    settle = [r.timings["fit"] + r.timings["sampling"] for r in runs]
    middle = sorted(range(len(runs)), key=lambda k: settle[k])[len(runs) // 2]
    return runs[middle], statistics.median(settle)


def settle_figures(photo: str, side: int, repeats: int, lam: float = 1.0) -> dict:
    path = photo_path(photo)
    runs = [segment(path, lam=lam, max_side=side, seed=s, n_chains=CHAINS) for s in range(repeats)]
    run, seconds = _median_run(runs)
    return {
        "photo": photo,
        "lam": lam,
        "lattice": list(run.target.shape),
        "seconds": round(seconds, 2),
        "fit_s": round(run.timings["fit"], 3),
        "sampling_s": round(run.timings["sampling"], 2),
        "map_s": round(run.timings["map"], 3),
        "sweeps": run.sweeps,
        "site_updates": run.sweeps * CHAINS * run.target.n_sites,
        "settled": all(r.settled for r in runs),
        "unsettled_fraction": round(run.settledness.unsettled_fraction, 4),
        "max_error": round(run.settledness.max_error, 3),
        "map_agreement": round(run.map_agreement, 4),
        "polarity": run.data.polarity,
    }


def box_figures(photo: str, repeats: int, side: int = 256) -> dict | None:
    """The box prompt's run: the share of the box the mask covers."""
    box = PUBLIC.get(photo, (None, None, None))[2]
    if box is None:
        return None
    path = photo_path(photo)
    runs = [segment(path, max_side=side, seed=s, n_chains=CHAINS, box=box) for s in range(repeats)]
    run, seconds = _median_run(runs)
    height, width = run.working_mask.shape
    left, top, right, bottom = box
    rows = slice(int(round(top * height)), max(int(round(bottom * height)), 1))
    cols = slice(int(round(left * width)), max(int(round(right * width)), 1))
    inside = run.working_mask[rows, cols]
    return {
        "photo": photo,
        "box": list(box),
        "seconds": round(seconds, 2),
        "sweeps": run.sweeps,
        "rounds": list(getattr(run, "rounds", ())),
        "settled": all(r.settled for r in runs),
        "box_covered": round(float(inside.mean()), 4),
        "mask_outside_box": round(1.0 - float(inside.sum()) / max(run.working_mask.sum(), 1), 4),
        "map_agreement": round(run.map_agreement, 4),
    }


def photo_names(parser: argparse.ArgumentParser, text: str, assets: bool) -> list[str]:
    """The comma-separated photo names of ``--photos``; unknown ones end the command with
    the parser's error."""
    photos = [p for p in text.split(",") if p]
    unknown = [p for p in photos if not photo_path(p).is_file() or (p in PUBLIC) == assets]
    if unknown:
        where = "assets/" if assets else f"the public set ({', '.join(PUBLIC)})"
        parser.error(f"no such photo in {where}: {', '.join(unknown)}")
    return photos


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--assets", action="store_true", help="the photos of assets/ instead")
    parser.add_argument("--photos", default=None, help="comma-separated names")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    default = ASSET_PHOTOS if args.assets else tuple(PUBLIC)
    photos = photo_names(parser, args.photos or ",".join(default), args.assets)
    torch.set_num_threads(1)
    warmup.compile_kernels()
    segment(photo_path(photos[0]), max_side=64, sweeps=20)  # warm caches
    show = (lambda *a, **k: None) if args.json else print
    show(f"settle ({CHAINS} chains, checkerboard, mixed starts; median of {args.repeats})")
    settle = []
    for photo in photos:
        for side, lam in [(side, 1.0) for side in SIDES] + [(256, 1.5)]:
            settle.append(settle_figures(photo, side, args.repeats, lam=lam))
            show(_settle_line(settle[-1]), flush=True)
    boxes = []
    if not args.assets:
        show("box prompt (256 px, lambda 1)")
        for photo in photos:
            figures = box_figures(photo, args.repeats)
            if figures is not None:
                boxes.append(figures)
                show(_box_line(figures), flush=True)
    if args.json:
        out = {"machine": platform.processor() or platform.machine(), "chains": CHAINS,
               "settle": settle, "box": boxes}  # fmt: skip
        print(json.dumps(out, indent=1))
    return 0


def _settle_line(f: dict) -> str:
    return (
        f"  {f['photo']:>9} {f['lattice'][0]:>3}x{f['lattice'][1]:<3} lambda {f['lam']:.1f} "
        f"{f['seconds']:6.2f} s (fit {f['fit_s']:.2f}, sampling {f['sampling_s']:.2f}; "
        f"MAP {f['map_s']:.2f}) {f['sweeps']:5d} sweeps ({f['site_updates'] / 1e6:,.0f} M site "
        f"updates) settled={f['settled']} MAP agreement {f['map_agreement']:.2%} "
        f"max error {f['max_error']:.3f}"
    )


def _box_line(f: dict) -> str:
    return (
        f"  {f['photo']:>9} box {f['box']}: mask covers {f['box_covered']:.1%} of the box, "
        f"{f['mask_outside_box']:.1%} of the mask outside it; {f['seconds']:.2f} s, "
        f"{f['sweeps']} sweeps {f['rounds']} settled={f['settled']} "
        f"MAP agreement {f['map_agreement']:.2%}"
    )


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.photos"))
