"""Importance-sampling collapse benchmark: ``python -m lsbcore.studies.benchmarks.importance
[--json]``.

The paper's data model (``alpha = mu * truth + U(-sigma, sigma)``, free boundary) on square
lattices of growing side, one fixed ``lambda``; ``N`` draws from each factorised proposal
(field, mean field). Printed per lattice: the sites, ``ESS / N``, the delta-method ``se`` of
``log Z^``, the standard deviation of the log weights, the Pareto k-hat of the weights' tail
(``lsbcore.importance.pareto``), ``log Z^ - log Z`` where the exact value
is known (enumeration up to 12 sites, the transfer matrix up to a side of 16), and the seconds;
then the total wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time

import torch

from lsbcore import interrupt
from lsbcore.importance.collapse import MAX_SIDE, SIDES, collapse_study, synthetic_posterior
from lsbcore.importance.estimate import MAX_SAMPLES, PROPOSALS


def json_number(value: float) -> float | str | None:
    """A float for strict JSON: null for NaN (no fit), "-inf" for a flat tail."""
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else str(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--sides", default=",".join(map(str, SIDES)), help="comma-separated")
    parser.add_argument("--samples", type=int, default=10_000, help="draws per lattice")
    parser.add_argument("--lam", type=float, default=0.5, help="coupling lambda")
    parser.add_argument("--mu", type=float, default=1.0)
    parser.add_argument("--sigma", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    try:
        sides = [int(s) for s in args.sides.split(",") if s.strip()]
    except ValueError:
        parser.error("--sides must be whole numbers separated by commas")
    if not sides or not all(1 <= s <= MAX_SIDE for s in sides):
        parser.error(f"--sides must be between 1 and {MAX_SIDE}")
    if not 2 <= args.samples <= MAX_SAMPLES:
        parser.error(f"--samples must be between 2 and {MAX_SAMPLES:,}")
    if args.threads < 1:
        parser.error("--threads must be at least 1")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        targets = [synthetic_posterior(s, args.lam, args.mu, args.sigma, args.seed) for s in sides]
    except ValueError as err:
        parser.error(str(err))
    rows = collapse_study(targets, PROPOSALS, args.samples, args.seed)
    wall = time.perf_counter() - start
    out = {
        "machine": platform.processor() or platform.machine(),
        "threads": args.threads,
        "lam": args.lam,
        "mu": args.mu,
        "sigma": args.sigma,
        "samples": args.samples,
        "seed": args.seed,
        "wall_s": round(wall, 2),
        "rows": [
            {
                "side": r.shape[0],
                "sites": r.sites,
                "proposal": r.proposal,
                "ess_fraction": r.ess_fraction,
                "log_z": r.log_z,
                "log_z_se": r.log_z_se,
                "log_w_sd": r.log_w_sd,
                "pareto_k": json_number(r.pareto_k),
                "exact_log_z": r.exact_log_z,
                "error": r.error,
                "converged": r.converged,
                "seconds": round(r.seconds, 3),
            }
            for r in rows
        ],
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(
        f"importance sampling, lambda {args.lam:g}, alpha = {args.mu:g} truth + "
        f"U(-{args.sigma:g}, {args.sigma:g}), free boundary, N = {args.samples:,} per lattice"
    )
    print(f"{'side':>5} {'sites':>6}  {'proposal':<10} {'ESS/N':>9} {'se logZ':>8} "
          f"{'sd logw':>8} {'k-hat':>6} {'error':>9} {'seconds':>8}")  # fmt: skip
    for r in rows:
        error = "-" if r.error is None else f"{r.error:+.3f}"
        print(
            f"{r.shape[0]:>5} {r.sites:>6}  {r.proposal:<10} {r.ess_fraction:>9.2e} "
            f"{r.log_z_se:>8.3f} {r.log_w_sd:>8.2f} {r.pareto_k:>6.2f} {error:>9} {r.seconds:>8.2f}"
        )
    unconverged = [r.shape[0] for r in rows if r.converged is False]
    print(
        "mean-field fits: all converged"
        if not unconverged
        else f"mean field did not converge at side {', '.join(map(str, unconverged))}"
    )
    print(f"wall time {wall:.1f} s ({args.threads} thread{'s' if args.threads > 1 else ''})")
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.importance"))
