"""The LSB paper's RBM experiment by command: ``python -m lsbcore.experiment --target rbm-digits``.

Protocol (the paper's appendix D, on the Gibbs-with-Gradients code's setup): every sampler
starts from one shared uniform state of ``chains`` chains (16), learns for ``burn_in``
iterations (24,000) and samples ``steps`` more (120,000) with its balancing function frozen.
Checkpoints on a log grid of steps record, per sampler, the target evaluations per chain, its
own wall time and ``log10 MMD`` of its chains against ground-truth samples (``ground_truth``:
500 exact block-Gibbs samples after 10,000 sweeps, the GWG code's). The noise floor is the
same MMD for independent exact draws of ``chains`` samples (mean and spread over draws).

Mixing after burn-in, as the GWG code's ``rbm_sample.py`` measures it: the ESS of chain 0's
trajectory, per visible unit (its ``--ess_statistic dims``, the default) and per Hamming
distance to each ground-truth sample (``hamming``), by the ESS estimator it calls
(``gwg_ess``: TensorFlow Probability's default); plus the rank-normalised bulk ESS over all
chains (arviz-stats), per visible unit. ESS per evaluation divides by the mixing phase's
evaluations per chain, ESS per second by the sampler's mixing wall time.

Each seed draws a new start and new sampler streams; the model and the truth stay fixed.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch

from lsbcore import out_path
from lsbcore.rbm.ground_truth import TRUTH_SAMPLES, TRUTH_STEPS, floor_draws, ground_truth
from lsbcore.rbm.live import RBMComparison
from lsbcore.rbm.variants import LABELS
from lsbcore.samplers.registry import LEARN_OPTIONS
from lsbcore.studies.rbm.protocol import PAPER, PAPER_LABELS, QUICK
from lsbcore.studies.rbm.report import section, summary, write_section
from lsbcore.studies.rbm.seed import gwg_ess, log_grid, reach_floor, run_seed
from lsbcore.studies.shared.arguments import add_option_arguments, int_in
from lsbcore.studies.shared.commit import commit
from lsbcore.studies.shared.results_out import write_results
from lsbcore.studies.shared.shown_command import shown_argv
from lsbcore.targets.rbm import RBM

__all__ = [
    "PAPER",
    "PAPER_LABELS",
    "QUICK",
    "build_parser",
    "gwg_ess",
    "log_grid",
    "main",
    "reach_floor",
    "run",
]

FLOOR_DRAWS = 20  # independent exact draws for the floor's mean and spread
MODEL_CHOICES = ("digits-8x8", "digits-16x16", "digits-28x28")


def _run_here(rbm, labels, *, seeds, seed, burn_in, steps, chains, truth, checkpoints, options,
              say) -> list[dict]:  # fmt: skip
    """The seeds one after another in this process, every sampler in one comparison."""
    # one-off costs (first calls, autograd set-up) are paid here, not in a sampler's seconds
    warm = RBMComparison(rbm, labels, chains, seed=seed, truth=truth, **options)
    warm.step(2, learn=True)
    warm.start_mixing()
    warm.step(2)
    runs = []
    for s in range(seed, seed + seeds):
        t0 = time.perf_counter()
        result = run_seed(rbm, labels, s, burn_in=burn_in, steps=steps, chains=chains,
                          truth=truth, checkpoints=checkpoints, options=options)  # fmt: skip
        result["seed"], result["seconds"] = s, time.perf_counter() - t0
        say(f"seed {s}: {result['seconds']:.1f} s")
        runs.append(result)
    return runs


def run(rbm, labels, *, seeds, seed=0, burn_in, steps, chains, checkpoints=60,
        truth_samples=TRUTH_SAMPLES, truth_steps=TRUTH_STEPS, options=None,
        log=None, cells=None) -> dict:  # fmt: skip
    """The protocol over ``seeds`` seeds; a JSON-ready dict (see ``main``). ``cells``: a
    function that runs the seeds elsewhere (``cells.on_sweep``) and returns their results."""
    options = dict(options or {})
    say = log or (lambda message: None)
    started = time.perf_counter()
    say(f"ground truth: {truth_samples} samples x {truth_steps:,} sweeps of block Gibbs")
    truth = ground_truth(rbm, truth_samples, truth_steps, 0)
    floors = floor_draws(rbm, chains, FLOOR_DRAWS, truth_samples, truth_steps, 0)
    truth_seconds = time.perf_counter() - started
    finite = [f for f in floors if math.isfinite(f)]
    floor = {"mean": float(np.mean(finite)), "std": float(np.std(finite, ddof=1)),
             "draws": floors}  # fmt: skip
    if cells is not None:  # on the sweep: each (sampler, seed) a cell on a Dask worker
        runs = cells()
    else:
        runs = _run_here(rbm, labels, seeds=seeds, seed=seed, burn_in=burn_in, steps=steps,
                         chains=chains, truth=truth, checkpoints=checkpoints, options=options,
                         say=say)  # fmt: skip
    level = floor["mean"] + floor["std"]
    for result in runs:
        for figures in result["samplers"].values():
            figures["reach_floor"] = reach_floor(figures["curve"], level)
    return {
        "floor": floor,
        "floor_level": level,
        "runs": runs,
        "truth_seconds": truth_seconds,
        "total_seconds": time.perf_counter() - started,
    }


# ============================================================================ command line
def _labels(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in LABELS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown sampler(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"choose from: {', '.join(LABELS)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError("each sampler may be listed once")
    return names


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.experiment --target rbm-digits",
        description="The LSB paper's RBM experiment (section 5.2, appendix F) on a digits RBM: "
        "log-MMD to ground truth against evaluations and seconds, ESS per evaluation and per "
        "second, every sampler from one shared start.",
        epilog=f"Paper protocol (default): burn-in {PAPER['burn_in']:,}, {PAPER['steps']:,} "
        f"sampling iterations, {PAPER['chains']} chains. --quick: burn-in {QUICK['burn_in']}, "
        f"{QUICK['steps']:,} iterations. --scale F: the paper's numbers times F.",
    )
    parser.add_argument("--target", choices=("rbm-digits",), required=True)
    parser.add_argument(
        "--model", default="digits-8x8",
        help=f"a shipped model ({', '.join(MODEL_CHOICES)}) or an .npz from save_model",
    )  # fmt: skip
    parser.add_argument(
        "--samplers", type=_labels, default=list(PAPER_LABELS),
        help=f"comma-separated, from: {', '.join(LABELS)} (default: {','.join(PAPER_LABELS)})",
    )  # fmt: skip
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--quick", action="store_true", help="a minute-long check")
    length.add_argument("--scale", type=_fraction, help="shorten the paper's protocol by F")
    parser.add_argument("--burn-in", type=int_in(0, 10**7), help="burn-in iterations (learning)")
    parser.add_argument("--steps", type=int_in(4, 10**7), help="sampling iterations")
    parser.add_argument("--chains", type=int_in(2, 4096), help="chains per sampler (16)")
    parser.add_argument("--seeds", type=int_in(1, 20), default=1, help="seeds SEED..SEED+N-1")
    parser.add_argument("--seed", type=int_in(0, 2**31 - 1), default=0)
    parser.add_argument("--checkpoints", type=int_in(2, 1000), default=60,
                        help="MMD checkpoints on the log grid of steps (60)")  # fmt: skip
    parser.add_argument("--truth-samples", type=int_in(10, 100_000), default=TRUTH_SAMPLES)
    parser.add_argument("--truth-steps", type=int_in(1, 10**6), default=TRUTH_STEPS)
    lr, optimizer = (option for option in LEARN_OPTIONS if option.name in {"lr", "optimizer"})
    add_option_arguments(parser, (lr, optimizer))  # the learned samplers' (FLSB, LSB)
    parser.add_argument("--threads", type=int_in(1, 256), default=1,
                        help="torch threads (1: the fastest for 16 chains)")  # fmt: skip
    parser.add_argument(
        "--out", type=out_path.output_folder, help="write results.json into this folder"
    )
    parser.add_argument(
        "--docs", type=out_path.output_file,
        help="write the generated RBM section into this Markdown file (docs/reproduction.md)",
    )  # fmt: skip
    parser.add_argument(
        "--from-results", type=Path, metavar="JSON",
        help="write the section from a results.json of an earlier run (no sampling)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true")
    return parser


def _load(parser, name: str) -> RBM:
    from lsbcore.rbm.models import load_model

    try:
        return load_model(name)
    except (ValueError, OSError) as err:
        parser.error(f"--model {name!r}: {err}")


def main(argv=None) -> int:
    return execute(list(sys.argv[1:] if argv is None else argv), build_parser())


def execute(argv: list[str], parser, cells_for=None, command=("python", "-m",
            "lsbcore.experiment")) -> int:  # fmt: skip
    """The command with ``parser``'s ``argv``: the seeds here, or elsewhere when ``cells_for``
    (``lsbcore.studies.sweep.rbm_cells``) gives ``(cells, info)`` for ``run(cells=)`` from the
    arguments and the protocol; the results and the section say ``command``."""
    args = parser.parse_args(argv)
    protocol = dict(QUICK if args.quick else PAPER)
    name = "quick" if args.quick else "paper"
    if args.scale is not None:
        protocol = {"burn_in": round(PAPER["burn_in"] * args.scale),
                    "steps": max(4, round(PAPER["steps"] * args.scale)),
                    "chains": PAPER["chains"]}  # fmt: skip
        name = f"paper x {args.scale:g}"
    for key in ("burn_in", "steps", "chains"):
        if getattr(args, key) is not None:
            protocol[key] = getattr(args, key)
            name = "custom"
    if args.from_results is not None:
        return _from_results(parser, args)
    rbm = _load(parser, args.model)
    torch.set_num_threads(args.threads)
    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    say(
        f"{args.model}: {rbm.describe()}; {', '.join(args.samplers)}; {protocol['chains']} "
        f"chains, burn-in {protocol['burn_in']:,}, {protocol['steps']:,} sampling iterations, "
        f"{args.seeds} seed(s)"
    )
    cells, sweep_info = cells_for(args, protocol) if cells_for is not None else (None, {})
    try:
        results = run(
            rbm, args.samplers, seeds=args.seeds, seed=args.seed, burn_in=protocol["burn_in"],
            steps=protocol["steps"], chains=protocol["chains"], checkpoints=args.checkpoints,
            truth_samples=args.truth_samples, truth_steps=args.truth_steps,
            options={"lr": args.lr, "optimizer": args.optimizer}, log=say, cells=cells,
        )  # fmt: skip
    except (RuntimeError, ValueError) as err:
        if cells is None:
            raise
        print(f"{' '.join(command[2:])}: {err}", file=sys.stderr)
        return 1
    if sweep_info:
        results["sweep"] = sweep_info
    results["date"], results["commit"] = date.today().isoformat(), commit()
    results["config"] = {
        "command": shlex.join([*command, *shown_argv(argv)]),
        "model": args.model,
        "model_description": rbm.describe(),
        "n_visible": rbm.n_visible,
        "protocol": name,
        **protocol,
        "samplers": list(args.samplers),
        "seeds": list(range(args.seed, args.seed + args.seeds)),
        "checkpoints": args.checkpoints,
        "truth_samples": args.truth_samples,
        "truth_steps": args.truth_steps,
        "lr": args.lr,
        "optimizer": args.optimizer,
        "threads": args.threads,
    }
    if not args.quiet:
        print(summary(results), file=sys.stderr, flush=True)
    return write_results(results, args.out, args.docs, section, write_section, "RBM", say)


def _from_results(parser, args) -> int:
    """``--from-results``: the section (and summary) of an earlier run's results.json."""
    from lsbcore.studies.rbm.report import read_results

    try:
        results = read_results(args.from_results)
    except (OSError, ValueError) as err:
        parser.error(f"--from-results {args.from_results}: {getattr(err, 'strerror', None) or err}")
    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    if not args.quiet:
        print(summary(results), file=sys.stderr, flush=True)
    return write_results(results, args.out, args.docs, section, write_section, "RBM", say)
