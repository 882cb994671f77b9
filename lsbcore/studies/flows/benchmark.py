"""Benchmark of the flow samplers on the 16 x 16 denoising task: the flow's training time per
1000 steps, and ESS per minute (sampling alone and with the training) of ``flow-exact``,
``flow-latent`` and two baselines (``gibbs``, ``checkerboard``), on a chosen device.

    python -m lsbcore.studies.flows.benchmark [--device cuda] [--train-steps 500] [--out bench.json]

Prints each figure as it is measured and writes them all as JSON (``--out``). The ESS is that
of ``lsbcore.studies.flows.comparison`` (mean over pixels of the bulk ESS over all chains).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import torch

from lsbcore import interrupt, out_path
from lsbcore.studies.flows.comparison import Protocol, measure, train, warm_up
from lsbcore.studies.flows.denoising import denoising_problem
from lsbcore.studies.flows.experiment import QUICK
from lsbcore.studies.shared.commit import commit

SAMPLERS = ("flow-exact", "flow-latent", "gibbs", "checkerboard")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.flows.benchmark",
        description="Flow training seconds per 1000 steps and ESS per minute on the 16x16 "
        "denoising posterior: flow-exact, flow-latent, gibbs, checkerboard.",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--size", type=int, choices=(8, 16), default=16)
    parser.add_argument("--train-steps", type=int, default=1000, help="flow training steps")
    parser.add_argument("--flow-steps", type=int, default=500, help="flow sampler steps")
    parser.add_argument("--steps", type=int, default=100_000, help="gibbs steps")
    parser.add_argument("--chains", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a seconds-long check")
    parser.add_argument(
        "--out", type=out_path.output_file, help="write the figures as JSON to this file"
    )
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device != "cpu" and not args.device.startswith("cuda"):
        parser.error(f"--device must be cpu or cuda, got {args.device[:40]!r}")
    if args.device != "cpu" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available here")
    for key, low in (
        ("train_steps", 1),
        ("flow_steps", 8),
        ("steps", 8),
        ("chains", 2),
        ("threads", 1),
    ):
        if getattr(args, key) < low:
            parser.error(f"--{key.replace('_', '-')} must be at least {low}")
    torch.set_num_threads(args.threads)
    if args.quick:
        protocol = QUICK  # the comparison's own seconds-long check
    else:
        protocol = Protocol(
            chains=args.chains,
            steps=args.steps,
            burn_in=args.steps // 10,
            short_steps=2000,
            short_burn_in=500,
            flow_steps=args.flow_steps,
            draws=min(1000, args.flow_steps),
            train_steps=args.train_steps,
        )
    problem = denoising_problem(args.size, 0, 0)
    device = torch.device(args.device)

    def say(text: str) -> None:
        print(text, flush=True)

    say(
        f"{problem.describe()}; device {device}, {args.threads} CPU thread(s), "
        f"{protocol.chains} chains"
    )
    warm_up(problem, SAMPLERS, protocol.chains)
    started = time.perf_counter()
    flow = train(problem, protocol, args.seed, device)
    per_1000 = flow.seconds * 1000 / max(flow.steps, 1)
    say(
        f"flow training: {flow.steps} steps in {flow.seconds:.1f} s = {per_1000:.1f} s per 1000 "
        f"steps; ELBO {flow.elbo:.2f}"
    )
    figures = {}
    for name in SAMPLERS:
        sampler_device = device if name.startswith("flow") else None
        result = measure(problem, name, protocol, args.seed, flow, sampler_device)
        figures[name] = result
        say(
            f"{name:13s} {result['steps']:>7,} steps in {result['seconds']:7.2f} s "
            f"({result['seconds'] * 1000 / result['steps']:.3f} ms/step): ESS "
            f"{result['ess']:.1f}, per min {result['ess_per_min']:.4g}, all-in "
            f"{result['ess_per_min_total']:.4g}"
        )
    out = {
        "problem": problem.describe(),
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "machine": platform.machine(),
        "threads": args.threads,
        "commit": commit(),
        "protocol": protocol.as_dict(),
        "training": {
            "steps": flow.steps,
            "seconds": flow.seconds,
            "seconds_per_1000_steps": per_1000,
            "elbo": flow.elbo,
        },
        "samplers": figures,
        "total_seconds": time.perf_counter() - started,
    }
    if args.out is not None:
        try:
            out_path.write_text(args.out, json.dumps(out, indent=1))
        except OSError as err:
            print(f"could not write {args.out}: {err.strerror or err}.", file=sys.stderr)
            return 1
        say(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.flows.benchmark"))
