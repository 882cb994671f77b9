"""The flow paper's denoising comparison by command:
``python -m lsbcore.experiment --target flow-denoising``.

Runs ``lsbcore.studies.flows.comparison`` on the 16 x 16 and 8 x 8 denoising posteriors
(``lsbcore.studies.flows.denoising``) for several seeds, prints a table per problem, and writes the
results (``--out``: results.json) and the generated section of ``docs/reproduction.md``
(``--docs``, ``lsbcore.studies.flows.report``).

The paper's protocol (section 5): the flow trained 10^3 to 10^4 iterations, 128 chains, 10^5
steps thinned by 10, no burn-in for the flow, 10^4 to 10^5 for the baselines. ``SCALED`` is what
fits about ten minutes of this project's 2-core CPU (the report says what was scaled and why);
``--quick`` runs in seconds, to check the pipeline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from lsbcore import interrupt, out_path
from lsbcore.studies.flows.comparison import SAMPLERS, Protocol, compare, seed_stats
from lsbcore.studies.flows.denoising import denoising_problem
from lsbcore.studies.flows.report import section, write_section
from lsbcore.studies.shared.arguments import int_in
from lsbcore.studies.shared.commit import commit
from lsbcore.studies.shared.results_out import write_results
from lsbcore.studies.shared.shown_command import shown_command

#: The paper's protocol (section 5; Table 1's smallest training and burn-in).
PAPER = dict(
    chains=128, steps=100_000, burn_in=10_000, flow_steps=100_000, train_steps=1_000, thin=10
)
#: The paper's measurement at a tenth of its length, which fits this project's 2-core CPU (the
#: flow samplers' steps cost most): every sampler 10^4 steps, every 10th state kept, so the ESS
#: per kept sample compares mixing, not thinnings; the paper's smallest burn-in and training.
SCALED = Protocol(
    chains=128,
    steps=10_000,
    burn_in=10_000,
    short_steps=10_000,
    short_burn_in=10_000,
    flow_steps=10_000,
    draws=1_000,
    train_steps=1_000,
)
QUICK = Protocol(
    chains=8,
    steps=400,
    burn_in=100,
    short_steps=80,
    short_burn_in=20,
    flow_steps=40,
    draws=20,
    train_steps=20,
    batch=16,
    importance=2,
    group=4,
)
SIZES = (28, 16, 8)  # 28: the paper's size, not run by default (the slowest)
DEFAULT_SIZES = (16, 8)
MAX_RESULTS_BYTES = 64 << 20


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 16,8, got {text[:40]!r}") from None
    if not sizes or any(s not in SIZES for s in sizes) or len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError(f"sizes must be distinct values among {SIZES}")
    return sizes


def _samplers(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SAMPLERS]
    if not names or unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"give distinct samplers from: {', '.join(SAMPLERS)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.experiment --target flow-denoising",
        description="The flow paper's Ising denoising comparison (Jaini et al. 2021, Table 1) on "
        "the shipped digits: flow-exact and flow-latent on a trained flow against Gibbs, "
        "Metropolis, the locally balanced samplers, GWG and checkerboard; ESS per 10^4 steps, "
        "per 1000 evaluations, per minute with and without the flow's training.",
        epilog=f"Default: the paper's measurement at a tenth of its length ({SCALED.chains} "
        f"chains, every sampler {SCALED.steps:,} steps thinned to {SCALED.draws:,} states, "
        f"{SCALED.train_steps:,} training steps; about 20 minutes on one core). --quick: "
        "seconds.",
    )
    parser.add_argument("--target", choices=("flow-denoising",), required=True)
    parser.add_argument("--quick", action="store_true", help="a seconds-long check")
    parser.add_argument(
        "--sizes",
        type=_sizes,
        default=list(DEFAULT_SIZES),
        help="digit sizes from 28,16,8 (default 16,8; 28 is the paper's size and the slowest)",
    )
    parser.add_argument("--digit", type=int_in(0, 1796), default=0, help="digit index (0)")
    parser.add_argument("--noise-seed", type=int_in(0, 2**31 - 1), default=0)
    parser.add_argument("--seeds", type=int_in(1, 20), help="sampler seeds SEED.. (3; quick 1)")
    parser.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0)
    parser.add_argument("--samplers", type=_samplers, default=list(SAMPLERS))
    parser.add_argument("--train-steps", type=int_in(0, 100_000), help="flow training steps")
    parser.add_argument("--flow-steps", type=int_in(8, 10**6), help="flow sampler steps")
    parser.add_argument("--chains", type=int_in(2, 4096))
    parser.add_argument("--threads", type=int_in(1, 256), default=1, help="torch threads (1)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (flow training and flows)")
    parser.add_argument(
        "--out", type=out_path.output_folder, help="write results.json into this folder"
    )
    parser.add_argument(
        "--docs", type=out_path.output_file, help="write the generated section into this file"
    )
    parser.add_argument(
        "--from-results",
        type=Path,
        help="write --docs from a results.json this command wrote, instead of running again",
    )
    parser.add_argument("--quiet", action="store_true")
    return parser


def run(
    sizes,
    protocol: Protocol,
    seeds,
    *,
    digit=0,
    noise_seed=0,
    samplers=SAMPLERS,
    device=None,
    log=None,
) -> dict:
    """The comparison on each size; a JSON-ready dict ``{"problems": {"16": ...}, ...}``."""
    say = log or (lambda message: None)
    started = time.perf_counter()
    problems = {}
    for size in sizes:
        problem = denoising_problem(size, digit, noise_seed)
        say(f"{problem.describe()}")
        problems[str(size)] = compare(problem, protocol, seeds, samplers, device, say)
    return {"problems": problems, "total_seconds": time.perf_counter() - started}


def summary(results: dict) -> str:
    """A plain-text table per problem for the terminal (mean over seeds)."""
    lines = []
    for size, data in results["problems"].items():
        lines.append(f"{size}x{size}: {data['problem']['description']}")
        lines.append(
            f"{'sampler':13s} {'ESS/1e4 steps':>13s} {'ESS/1000 ev':>11s} "
            f"{'ESS/min':>11s} {'all-in/min':>11s} {'accept':>7s} {'log p~':>9s}"
        )
        names = list(data["runs"][0]["samplers"]) if data["runs"] else []
        for name in names:
            cells = [
                seed_stats(data["runs"], name, k)[0]
                for k in (
                    "ess_per_1e4",
                    "ess_per_1000_evals",
                    "ess_per_min",
                    "ess_per_min_total",
                    "accept",
                    "mean_log_p",
                )
            ]
            lines.append(
                f"{name:13s} {cells[0]:13.3f} {cells[1]:11.3f} {cells[2]:11.4g} "
                f"{cells[3]:11.4g} {cells[4]:7.3f} {cells[5]:9.2f}"
            )
    lines.append(f"total {results['total_seconds']:.1f} s")
    return "\n".join(lines)


def _from_results(parser, args) -> int:
    """``--from-results``: the summary and the section of stored results."""
    path = args.from_results
    if not path.is_file() or path.stat().st_size > MAX_RESULTS_BYTES:
        parser.error(f"--from-results {path}: not a file of at most {MAX_RESULTS_BYTES >> 20} MB")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
        text = summary(results)
        docs = section(results)
    except (ValueError, KeyError, TypeError, OSError) as err:
        parser.error(f"--from-results {path}: not this command's results ({type(err).__name__})")
    if not args.quiet:
        print(text, file=sys.stderr, flush=True)
    if args.docs is not None:
        try:
            write_section(args.docs, docs)
        except OSError as err:
            print(f"could not write {args.docs}: {err.strerror or err}.", file=sys.stderr)
            return 1
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        parser.error(f"--device must be cpu or cuda, got {args.device[:40]!r}")
    if args.device != "cpu" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available here")
    if args.from_results is not None:
        return _from_results(parser, args)
    protocol = QUICK if args.quick else SCALED
    changes = {
        k: getattr(args, k)
        for k in ("train_steps", "flow_steps", "chains")
        if getattr(args, k) is not None
    }
    if "chains" in changes:  # fewer chains than a group: one group of them all
        changes["group"] = min(protocol.group, changes["chains"])
    if changes:
        protocol = Protocol(**{**protocol.as_dict(), **changes})
    name = ("quick" if args.quick else "scaled") + (" (changed)" if changes else "")
    seeds = list(range(args.seed, args.seed + (args.seeds or (1 if args.quick else 3))))
    code_commit = commit()  # the code that runs: read before the runs, not after
    torch.set_num_threads(args.threads)
    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    results = run(
        args.sizes,
        protocol,
        seeds,
        digit=args.digit,
        noise_seed=args.noise_seed,
        samplers=args.samplers,
        device=args.device,
        log=say,
    )
    results["config"] = {
        "command": shown_command(argv),
        "commit": code_commit,
        "protocol_name": name,
        "protocol": protocol.as_dict(),
        "paper": PAPER,
        "sizes": args.sizes,
        "digit": args.digit,
        "noise_seed": args.noise_seed,
        "seeds": seeds,
        "samplers": list(args.samplers),
        "threads": args.threads,
        "device": args.device,
    }
    if not args.quiet:
        print(summary(results), file=sys.stderr, flush=True)
    return write_results(results, args.out, args.docs, section, write_section, "flow", say)


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.flows.experiment"))
