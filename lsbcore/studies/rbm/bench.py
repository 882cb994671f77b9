"""``python -m lsbcore.studies.rbm.bench``: per sampler, the seconds and target evaluations it takes
to
reach the MMD noise floor on a digits RBM (the issue's goal: the best within 10 s on 2 cores).

Each sampler runs on its own (its own process time, no other sampler interleaved) from the
experiment's shared uniform start of 16 chains, learning as in burn-in where it learns, after a
warm-up run that pays the one-off costs. Every checkpoint (steps on a log grid, ratio
``GROWTH``) compares ``log10 MMD`` of its chains to the ground truth with the floor level
(mean + std of ``FLOOR_DRAWS`` exact draws of as many samples); the first checkpoint at or
below it gives the steps, evaluations per chain and the sampler's own stepping seconds (MMD
checks excluded). Over seeds: the median, and how many reached the floor within the budget.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
import torch

from lsbcore import interrupt, out_path
from lsbcore.rbm.ground_truth import floor_draws, ground_truth
from lsbcore.rbm.live import RBMComparison
from lsbcore.rbm.variants import display_name
from lsbcore.studies.rbm.experiment import FLOOR_DRAWS, _labels
from lsbcore.studies.rbm.protocol import PAPER_LABELS
from lsbcore.studies.shared.arguments import int_in

__all__ = ["GROWTH", "main", "time_to_floor"]

GROWTH = 1.1  # each checkpoint 10% more steps than the last: the figures' resolution
DEFAULT_LABELS = (*PAPER_LABELS, "lsb1", "lsb2", "barker", "pas", "dmala", "gibbs")


def time_to_floor(rbm, label, chains, seed, truth, level, max_seconds, max_steps):
    """Steps, evaluations per chain and stepping seconds until ``label``'s chains first reach
    ``level`` (None each when not within ``max_seconds`` of stepping or ``max_steps``)."""
    comparison = RBMComparison(rbm, [label], chains, seed=seed, truth=truth)
    sampler = comparison.samplers[label]
    done = 0
    while sampler.wall_seconds < max_seconds and done < max_steps:
        k = max(1, math.ceil(done * (GROWTH - 1.0)))
        comparison.step(k, learn=sampler.learnable)
        done += k
        if comparison.log_mmd(label) <= level:
            return {"steps": done, "evals": int(sampler.n_target_evals),
                    "seconds": float(sampler.wall_seconds)}  # fmt: skip
    return {"steps": None, "evals": None, "seconds": None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.rbm.bench",
        description="Seconds and target evaluations to the MMD noise floor, per sampler.",
    )
    parser.add_argument("--model", default="digits-8x8", help="a shipped model or an .npz")
    parser.add_argument("--samplers", type=_labels, default=list(DEFAULT_LABELS))
    parser.add_argument("--chains", type=int_in(2, 4096), default=16)
    parser.add_argument("--seeds", type=int_in(1, 20), default=3)
    parser.add_argument("--max-seconds", type=float, default=30.0,
                        help="stepping budget per run (30)")  # fmt: skip
    parser.add_argument("--max-steps", type=int_in(1, 10**7), default=200_000)
    parser.add_argument("--threads", type=int_in(1, 256), default=1)
    parser.add_argument("--out", type=out_path.output_file, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    from lsbcore.rbm.models import load_model

    try:
        rbm = load_model(args.model)
    except (ValueError, OSError) as err:
        parser.error(f"--model {args.model!r}: {err}")
    torch.set_num_threads(args.threads)
    truth = ground_truth(rbm)
    floors = floor_draws(rbm, args.chains, FLOOR_DRAWS)
    mean, std = float(np.mean(floors)), float(np.std(floors, ddof=1))
    level = mean + std
    print(
        f"{args.model}: {rbm.describe()}; {args.chains} chains; noise floor {mean:.3f} ± "
        f"{std:.3f}, reached at <= {level:.3f}; seeds {args.seeds}; {torch.get_num_threads()} "
        f"thread(s)",
        file=sys.stderr,
    )
    rows, figures = [], {}
    for label in args.samplers:
        time_to_floor(rbm, label, args.chains, 10**6, truth, -math.inf, 0.5, 50)  # warm-up
        runs = [time_to_floor(rbm, label, args.chains, s, truth, level, args.max_seconds,
                              args.max_steps) for s in range(args.seeds)]  # fmt: skip
        figures[label] = runs
        reached = [r for r in runs if r["seconds"] is not None]

        def median(key, runs=reached):
            return float(np.median([r[key] for r in runs])) if runs else math.nan

        row = (display_name(label), median("seconds"), median("evals"), median("steps"),
               len(reached), len(runs))  # fmt: skip
        rows.append(row)
        print(f"{row[0]:12s} {row[1]:8.2f} s {row[2]:12,.0f} evals {row[3]:10,.0f} steps "
              f"({row[4]}/{row[5]} reached)", file=sys.stderr, flush=True)  # fmt: skip
    rows.sort(key=lambda r: (math.isnan(r[1]), r[1]))
    lines = [
        "| sampler | seconds to the floor | evaluations per chain | steps | reached |",
        "|---|---|---|---|---|",
        *(f"| {r[0]} | {r[1]:.2f} | {r[2]:,.0f} | {r[3]:,.0f} | {r[4]}/{r[5]} |"
          if r[4] else f"| {r[0]} | > {args.max_seconds:g} | - | - | 0/{r[5]} |"
          for r in rows),
    ]  # fmt: skip
    print("\n".join(lines))
    if args.out is not None:
        out_path.write_text(args.out, json.dumps({
            "model": args.model, "chains": args.chains, "floor_mean": mean, "floor_std": std,
            "level": level, "threads": torch.get_num_threads(), "runs": figures,
            "command": " ".join(
                ["python", "-m", "lsbcore.studies.rbm.bench", *(argv or sys.argv[1:])]
            ),
            "date": time.strftime("%Y-%m-%d"),
        }, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.rbm.bench"))
