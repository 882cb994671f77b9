"""How often importance sampling's error bar covers the exact answer, by Pareto k-hat:
``python -m tools.importance_coverage``.

On the paper's synthetic posteriors (``synthetic_posterior``: the central square, uniform
noise, lambda = 0.5, free boundary) of each side, under both proposals, ``--seeds`` runs of
``--draws`` draws each: the error ``log Z^ - log Z`` against the exact ``log Z`` (enumeration or
the transfer matrix), in units of the delta-method se. Printed: per window and proposal the
median Kish ESS and k-hat and the root-mean-square error; then, pooled over all runs, the share
whose error lay within 2 and 3 se in each class of k-hat and of ESS (below an ESS of 5 the
Importance sampling tab shows no bar), and whose estimate lay below the exact ``log Z``.
"""

from __future__ import annotations

import argparse
import math
import statistics

from lsbcore.importance import (
    PROPOSALS,
    exact_log_partition,
    importance_sample,
    pareto,
    synthetic_posterior,
)

SIDES = (3, 4, 5, 6, 8, 10, 12)


def z_score(estimate, exact: float) -> float:
    """``(log Z^ - log Z) / se``, signed: below zero where the estimate is too low."""
    error = estimate.log_z - exact
    if estimate.log_z_se > 0:
        return error / estimate.log_z_se
    return 0.0 if abs(error) < 1e-9 else math.copysign(math.inf, error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    runs = []  # (k-hat, ESS, error / se)
    print(f"{args.draws:,} draws, {args.seeds} seeds; threshold {pareto.threshold(args.draws):.2f}")
    print("window  proposal     ESS (median)  k-hat (median)  rmse of log Z^")
    for side in SIDES:
        target = synthetic_posterior(side)
        exact = exact_log_partition(target)
        for proposal in PROPOSALS:
            found = [
                importance_sample(target, proposal, args.draws, seed) for seed in range(args.seeds)
            ]
            runs += [(e.pareto_k, e.ess, z_score(e, exact)) for e in found]
            ks = [e.pareto_k for e in found if not math.isnan(e.pareto_k)]
            ess = statistics.median(e.ess for e in found)
            k_hat = statistics.median(ks) if ks else math.nan
            rmse = math.sqrt(statistics.mean((e.log_z - exact) ** 2 for e in found))
            print(f"{side:2} x {side:<2}  {proposal:11} {ess:12.1f}  {k_hat:14.2f}  {rmse:14.3f}")
    classes = {
        "k-hat <= 0.7 or flat": lambda k, ess: k <= 0.7,
        "0.7 < k-hat <= 1": lambda k, ess: 0.7 < k <= 1,
        "k-hat > 1": lambda k, ess: k > 1,
        "k-hat not fitted (ties)": lambda k, ess: math.isnan(k),
        "ESS < 5 (no bar shown)": lambda k, ess: ess < 5,
        "ESS >= 5 (bar shown)": lambda k, ess: ess >= 5,
    }
    print("class                       runs  within 2 se  within 3 se  below log Z")
    for name, member in classes.items():
        scores = [z for k, ess, z in runs if member(k, ess)]
        if scores:
            within = [sum(abs(z) < c for z in scores) / len(scores) for c in (2, 3)]
            below = sum(z < 0 for z in scores) / len(scores)
            print(f"{name:26} {len(scores):5}  {within[0]:11.0%}  {within[1]:11.0%}  {below:11.0%}")


if __name__ == "__main__":
    main()
