"""Sweeps to a settled marginal by the coupling lambda: ``python -m tools.lambda_settle``.

Each photo is segmented as the app does (``lsbcore.segment``: the fitted colour mixture, block
Gibbs, 4 chains started apart, "Stop when settled") at ``--side`` px for each ``--lams`` value,
at most ``--cap`` sweeps. Printed per run: the sweeps taken, whether it settled (else the
verdict: the chains disagreeing, or P not yet known to +-0.1), the share of the lattice in the
object, the seconds; then how much of each mask agrees with the first lambda's. Behind the
closing line's advice to lower lambda where the chains disagree (app/live.py).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import lsbcore
from tools.photo_settle import photo_path

PHOTOS = ("grass.png", "gravel.png", "brick.png", "chelsea.png", "rocket.jpg")


def lams(text: str) -> list[float]:
    values = [float(v) for v in text.split(",")]
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError("lambdas: comma-separated values >= 0, e.g. 1,0.7,0.5")
    return values


def settle(photo, lam: float, side: int, cap: int, seed: int = 0) -> dict:
    """One photo at one lambda: sweeps taken, settled or not (and why), the mask."""
    start = time.perf_counter()
    result = lsbcore.segment(photo, lam=lam, max_side=side, max_sweeps=cap, seed=seed)
    return {
        "sweeps": result.sweeps,
        "settled": result.settled,
        "reason": result.settledness.reason,
        "mask": result.working_mask,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "photos", nargs="*", default=list(PHOTOS), help="scikit-image names or paths"
    )
    parser.add_argument("--lams", type=lams, default=[1.0, 0.7, 0.5])
    parser.add_argument("--side", type=int, default=288, help="the working lattice's longer side")
    parser.add_argument("--cap", type=int, default=3000, help="at most this many sweeps")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name in args.photos:
        runs = {
            lam: settle(photo_path(name), lam, args.side, args.cap, args.seed) for lam in args.lams
        }
        for lam, run in runs.items():
            verdict = "settled" if run["settled"] else run["reason"]
            print(
                f"{name:20s} lambda {lam:4.2f}  {run['sweeps']:6,d} sweeps  object "
                f"{run['mask'].mean():.3f}  {run['seconds']:5.1f} s  {verdict}",
                flush=True,
            )
        first = runs[args.lams[0]]["mask"]
        agree = ", ".join(
            f"{lam:g}: {np.mean(runs[lam]['mask'] == first):.3f}" for lam in args.lams[1:]
        )
        print(f"{'':20s} mask agreement with lambda {args.lams[0]:g}: {agree}")


if __name__ == "__main__":
    main()
