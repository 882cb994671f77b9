"""Parallel tempering benchmark: ``python -m lsbcore.studies.benchmarks.tempering [--sweeps N]
[--json]``.

On the bimodal preset (16 x 16, free boundary, alpha = 0, lambda = 0.8: the two modes equally
likely by symmetry), for block Gibbs and for sqrt inside the replicas: the mode switches of the
cold chain of parallel tempering in ``--sweeps`` sweeps per replica (after ``--burn-in`` sweeps
that adapt the ladder), against a single chain of the same sampler over the same sweeps, with
the wall time of each. Target (issue 15): tempering at least 20 switches in 10^4 sweeps, the
single chain fewer than 2. Every system (``--chains``) is counted separately; the figures are
the smallest and the mean over them. ``--out FILE`` also writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np
import torch

from lsbcore import interrupt, out_path
from lsbcore.samplers import warmup
from lsbcore.tempering.bimodal import BIMODAL_LAMBDA, bimodal_ising
from lsbcore.tempering.comparison import compare_with_single_chain

SAMPLERS = ("checkerboard", "sqrt")


def figures(sampler: str, args) -> dict:
    result = compare_with_single_chain(
        bimodal_ising(lam=args.lam), sampler, sweeps=args.sweeps, burn_in=args.burn_in,
        n_chains=args.chains, n_replicas=args.replicas, beta_min=args.beta_min, adapt=True,
        seed=args.seed,
    )  # fmt: skip
    pt, single = result.tempered_modes, result.single_modes
    return {
        "sampler": sampler,
        "sweeps": result.sweeps,
        "burn_in": result.burn_in,
        "chains": args.chains,
        "ladder": [round(float(b), 4) for b in result.betas],
        "swap_rates": [round(float(a), 3) for a in result.swap_rates],
        "pt_switches": pt.switches.tolist(),
        "pt_switches_min": int(pt.switches.min()),
        "pt_switches_mean": round(float(pt.switches.mean()), 1),
        "pt_fraction_plus": [round(float(f), 3) for f in pt.fraction_plus],
        "single_switches": single.switches.tolist(),
        "single_switches_max": int(single.switches.max()),
        "single_fraction_plus": [round(float(f), 3) for f in single.fraction_plus],
        "pt_seconds": round(result.tempering_seconds, 2),
        "single_seconds": round(result.single_seconds, 2),
        "target_met": bool(pt.switches.min() >= 20 and single.switches.max() < 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.benchmarks.tempering",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--sweeps", type=int, default=10_000, help="sampled sweeps per replica")
    parser.add_argument("--burn-in", type=int, default=500, help="sweeps adapting the ladder")
    parser.add_argument("--chains", type=int, default=4, help="independent tempering systems")
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--beta-min", type=float, default=0.3)
    parser.add_argument("--lam", type=float, default=BIMODAL_LAMBDA)
    parser.add_argument("--samplers", default=",".join(SAMPLERS), help="comma-separated names")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=out_path.output_file, help="write the figures as JSON here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    warmup.compile_kernels()
    rows = []
    for sampler in args.samplers.split(","):
        row = figures(sampler.strip(), args)
        rows.append(row)
        if not args.json:
            print(
                f"{row['sampler']:>12}: {row['sweeps']:,} sweeps x {args.replicas} replicas, "
                f"{args.chains} systems | PT cold chain switches min {row['pt_switches_min']} "
                f"mean {row['pt_switches_mean']} ({row['pt_seconds']} s) | single chain "
                f"switches max {row['single_switches_max']} ({row['single_seconds']} s) | "
                f"swap rates {min(row['swap_rates']):.2f}-{max(row['swap_rates']):.2f} | "
                f"target {'met' if row['target_met'] else 'NOT met'}",
                flush=True,
            )
    out = {
        "preset": {"size": 16, "boundary": "free", "alpha": 0.0, "lam": args.lam},
        "machine": platform.processor() or platform.machine(),
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "rows": rows,
    }
    if args.out is not None:
        out_path.write_json(args.out, out)
    if args.json:
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.benchmarks.tempering"))
