"""The command that meta-trains the shipped block proposals (``lsbcore.methods.block_proposals
.train``) and records their held-out KL in the weights file's ``info``:

    python -m lsbcore.studies.block_proposals.train --block-size K [--steps N] [--batch B]
                                                   [--seed S] [--hidden H] [--out PATH]

writes the weights by default to ``assets/neural_block_k{K}.pt``, the file the sampler ships.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from lsbcore import interrupt, out_path
from lsbcore.methods.block_proposals.instances import TRAINING
from lsbcore.methods.block_proposals.motif import BLOCK_SIDES
from lsbcore.methods.block_proposals.proposal import MAX_HIDDEN
from lsbcore.methods.block_proposals.sampler import weights_file
from lsbcore.methods.block_proposals.train import (
    DEFAULTS,
    FINAL_WINDOW,
    MAX_BATCH,
    MAX_STEPS,
    progress_bar,
    train,
)
from lsbcore.studies.block_proposals.held_out import held_out_report


def held_out_info(report: dict) -> dict:
    """The mean and median of each held-out setting's KLs (``held_out.held_out_report``), for a
    weights file's ``info``."""
    return {
        name: {
            side: {"mean": row[side]["mean"], "median": row[side]["median"]}
            for side in ("trained", "untrained")
        }
        for name, row in report.items()
    }


def default_out(k: int) -> Path:
    return weights_file(k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.block_proposals.train",
        description="Meta-train the block proposal of neural-block on random instances of the "
        "k x k motif (forward KL to the exact block conditional).",
    )
    parser.add_argument("--block-size", type=int, required=True, help="k: 2, 3 or 4")
    parser.add_argument("--steps", type=int, default=None, help="Adam steps (default per k)")
    parser.add_argument("--batch", type=int, default=None, help="instances per step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=None, help="hidden units per layer")
    parser.add_argument(
        "--out", type=out_path.output_file,
        help="the weights file (default: assets/neural_block_k{K}.pt)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small matrices: one thread is as fast, and the machine is shared
    try:
        if args.block_size not in BLOCK_SIDES:
            raise ValueError(f"--block-size must be one of {BLOCK_SIDES}, got {args.block_size}.")
        k = args.block_size
        checks = (
            ("--steps", args.steps, 1, MAX_STEPS),
            ("--batch", args.batch, 1, MAX_BATCH),
            ("--seed", args.seed, 0, 2**63 - 1),
            ("--hidden", args.hidden, 1, MAX_HIDDEN),
        )
        for flag, value, low, high in checks:
            if value is not None and not low <= value <= high:
                raise ValueError(f"{flag} must be between {low} and {high}, got {value}.")
        out = args.out or default_out(k)
        if args.out is None:  # the shipped file: the same rule as a named one
            out_path.check_file(out, "--out")
        started = time.perf_counter()
        proposal, losses = train(
            k, args.steps, args.batch, args.seed, args.hidden, progress=progress_bar()
        )
        seconds = time.perf_counter() - started
        report = held_out_report(proposal, sweeps=False)
        proposal.info = {
            "ranges": TRAINING.as_dict(),
            "steps": len(losses),
            "batch": args.batch or DEFAULTS[k]["batch"],
            "draws": DEFAULTS[k]["draws"],
            "seed": args.seed,
            "hidden": proposal.hidden,
            "depth": proposal.depth,
            "final_loss": sum(losses[-FINAL_WINDOW:]) / len(losses[-FINAL_WINDOW:]),
            "seconds": round(seconds, 1),
            "held_out_kl": held_out_info(report),
        }
        proposal.save(out)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    info = proposal.info
    print(
        f"trained {k} x {k} proposal in {info['seconds']:.0f} s, final loss "
        f"{info['final_loss']:.4f}; held-out KL in nats (trained / untrained):",
        file=sys.stderr,
    )
    for name, kl in info["held_out_kl"].items():
        t, u = kl["trained"], kl["untrained"]
        print(
            f"  {name:<24} mean {t['mean']:.4f} / {u['mean']:.4f}, median {t['median']:.4f} / "
            f"{u['median']:.4f}",
            file=sys.stderr,
        )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.block_proposals.train"))
