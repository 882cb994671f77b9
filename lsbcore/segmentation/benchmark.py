"""Photo segmentation benchmark: ``python -m lsbcore.segmentation.benchmark [--json]``.

Two groups of figures on the shipped photos (``assets/``), 4 chains of checkerboard block
Gibbs from mixed starts, run until the marginal has settled (``lsbcore.segment``):

- settle: wall seconds to a settled P(x = +1) at a working side of 256 and 512 px, split
  into the data model's fit, the sampling and the exact MAP, with the sweeps it took;
- agreement: the fraction of the lattice where the thresholded marginal equals the exact MAP,
  at lambda 0.5, 1 and 1.5 (256 px), with whether the run settled.

Each settle figure is the median of ``--repeats`` runs with different seeds, after one warm-up
run that compiles the kernels.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from pathlib import Path

import torch

from lsbcore.samplers import warmup
from lsbcore.segmentation.segment import segment

ASSETS = Path(__file__).resolve().parents[2] / "assets"
PHOTOS = ("camera", "horse", "cell", "coffee")
SIDES = (256, 512)
LAMBDAS = (0.5, 1.0, 1.5)


def settle_figures(photo: str, side: int, repeats: int) -> dict:
    runs = [segment(ASSETS / f"{photo}.png", max_side=side, seed=seed) for seed in range(repeats)]
    total = [sum(r.timings.values()) for r in runs]
    middle = sorted(range(repeats), key=lambda k: total[k])[repeats // 2]
    run = runs[middle]
    return {
        "photo": photo,
        "lattice": list(run.target.shape),
        "seconds": round(statistics.median(total), 2),
        "fit_s": round(run.timings["fit"], 3),
        "sampling_s": round(run.timings["sampling"], 2),
        "map_s": round(run.timings["map"], 3),
        "sweeps": run.sweeps,
        "settled": all(r.settled for r in runs),
        "unsettled_fraction": round(run.settledness.unsettled_fraction, 4),
        "map_agreement": round(run.map_agreement, 4),
        "polarity": run.data.polarity,
    }


def agreement_figures(photo: str, lam: float) -> dict:
    run = segment(ASSETS / f"{photo}.png", lam=lam, max_side=256, seed=0)
    return {
        "photo": photo,
        "lam": lam,
        "map_agreement": round(run.map_agreement, 4),
        "settled": run.settled,
        "sweeps": run.sweeps,
    }


def photo_names(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The comma-separated photo names of ``--photos``; unknown ones end the command with
    the parser's error."""
    photos = [p for p in text.split(",") if p]
    unknown = [p for p in photos if not (ASSETS / f"{p}.png").is_file()]
    if unknown:
        parser.error(f"no such photo in assets/: {', '.join(unknown)}")
    return photos


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--photos", default=",".join(PHOTOS), help="comma-separated names")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    photos = photo_names(parser, args.photos)
    torch.set_num_threads(1)
    warmup.compile_kernels()
    segment(ASSETS / f"{photos[0]}.png", max_side=64, sweeps=20)  # warm caches
    settle = [settle_figures(p, side, args.repeats) for p in photos for side in SIDES]
    agreement = [agreement_figures(p, lam) for p in photos for lam in LAMBDAS]
    out = {"machine": platform.processor() or platform.machine(), "settle": settle,
           "agreement": agreement}  # fmt: skip
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print("settle (4 chains, checkerboard, mixed starts; median of repeats)")
    for f in settle:
        print(
            f"  {f['photo']:>8} {f['lattice'][0]:>3}x{f['lattice'][1]:<3} "
            f"{f['seconds']:6.2f} s (fit {f['fit_s']:.2f}, sampling {f['sampling_s']:.2f}, "
            f"MAP {f['map_s']:.2f}) {f['sweeps']:5d} sweeps settled={f['settled']} "
            f"MAP agreement {f['map_agreement']:.2%} object={f['polarity']}"
        )
    print("agreement with the exact MAP (256 px)")
    for f in agreement:
        print(
            f"  {f['photo']:>8} lambda {f['lam']:.1f}: {f['map_agreement']:.2%} "
            f"(settled={f['settled']}, {f['sweeps']} sweeps)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
