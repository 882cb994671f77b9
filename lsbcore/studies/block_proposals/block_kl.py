"""The block-proposal source's KL experiment: a network trained on one (determinism, alpha) of
the source's grid networks, its KL to the exact block conditional on a grid of others.

The slides (``004``, "How good the proposal approximations are") claim that the KL divergences
between the neural block proposals and the true conditionals are "mostly concentrated at zero",
and that a network "only trained on one set p_determin and alpha" "generalise[s] well to other
p_determin and alpha" (histograms). This study measures both:

1. ``TRAIN_SIZE`` contexts of one setting (``--train-determinism``, ``--train-alpha``; the
   networks of ``source_networks``, whose docstring states how the two parameters make the
   tables) train one ``BlockProposal`` by the product's forward-KL loss (``nll_loss``: exact
   draws of the enumerated conditional);
2. on every cell of ``DETERMINISMS x ALPHAS``, ``--instances`` held-out contexts (networks and
   boundaries from ``held_out.HELD_OUT_SEED``, a stream training never reads) give
   ``KL(p || q)`` by enumeration of the block's ``2^(k^2)`` states, for three proposals:
   ``trained``; ``untrained`` (the same network before its first step: its known logits only);
   ``context-free``: the block's marginal over the training contexts, ``mean_c p(. | c)``,
   which is the best proposal that ignores the context (it minimises the training objective,
   ``E_c KL(p(. | c) || q)``, over every ``q`` that does not read ``c``), fitted on the data
   the network saw. Uniform would be a weaker straw man; the output states how far the fitted
   marginal is from it.

    python -m lsbcore.studies block-kl [--block-size K] [--instances N] [--steps S]
        [--train-determinism D] [--train-alpha A] [--json OUT] [--html OUT] [--summary OUT]
        [--docs FILE]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from datetime import date

import torch

from lsbcore import interrupt, out_path
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.methods.block_proposals.train import LEARNING_RATE, nll_loss
from lsbcore.studies.block_proposals import kl_summary
from lsbcore.studies.block_proposals.held_out import HELD_OUT_SEED
from lsbcore.studies.block_proposals.kl_summary import PROPOSALS, summarise
from lsbcore.studies.block_proposals.source_networks import (
    ALPHA_RANGE,
    EPSILON,
    source_contexts,
)
from lsbcore.studies.shared.arguments import add_output_files, float_in, int_in
from lsbcore.studies.shared.doc_section import replace_section

#: The held-out grid: three determinisms by three alphas (the training setting is its centre).
DETERMINISMS = (0.2, 0.5, 0.8)
ALPHAS = (0.25, 1.0, 4.0)
#: A KL below this (nats) counts as "near zero".
NEAR_ZERO = 0.1
#: Training: contexts drawn once, instances per step, exact draws per instance, hidden width.
TRAIN_SIZE = 16384
BATCH = 256
DRAWS = 4
HIDDEN = {2: 64, 3: 128}


# ----------------------------------------------------------------- the KL
def kl_rows(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """``KL(p || q) = sum_x p(x) (log p(x) - log q(x))`` per row, ``[N]`` (nats), from log
    probabilities ``[N, M]`` over the same ``M`` states (``log_q`` may be one row ``[M]``);
    states with ``p = 0`` add nothing."""
    log_q = log_q.expand_as(log_p)
    terms = torch.where(log_p > -torch.inf, log_p.exp() * (log_p - log_q), 0.0)
    return terms.sum(-1).clamp(min=0.0)


def context_free(motif: GridMotif, contexts: torch.Tensor) -> torch.Tensor:
    """``log mean_c p(. | c)``, ``[2^(k^2)]``: the block's marginal over ``contexts``, the
    forward-KL optimum among proposals that ignore the context."""
    return torch.logsumexp(motif.exact_log_probs(contexts), 0) - math.log(len(contexts))


def proposal_kls(proposals: dict, motif: GridMotif, c: torch.Tensor) -> dict:
    """``{name: KL [N]}`` for each proposal (a ``BlockProposal``, or a fixed ``log q [M]``)
    on contexts ``c [N, T]``, the exact conditional enumerated once."""
    log_p = motif.exact_log_probs(c)
    out = {}
    with torch.no_grad():
        for name, q in proposals.items():
            log_q = q.all_log_probs(c) if isinstance(q, BlockProposal) else q
            out[name] = kl_rows(log_p, log_q)
    return out


def summary(kl: torch.Tensor) -> dict:
    """Mean, median, 90th percentile and the share below ``NEAR_ZERO`` of KLs ``[N]``."""
    kl = kl.to(torch.float64)
    return {
        "mean": float(kl.mean()),
        "median": float(kl.median()),
        "p90": float(torch.quantile(kl, 0.9)),
        "below": float((kl < NEAR_ZERO).to(torch.float64).mean()),
    }


# ----------------------------------------------------------------- training
def train_on(contexts: torch.Tensor, k: int, steps: int, seed: int) -> BlockProposal:
    """A ``BlockProposal`` trained ``steps`` Adam steps on batches of ``contexts`` (the
    product's loss and learning-rate schedule: ``lsbcore.methods.block_proposals.train``)."""
    proposal = BlockProposal(k, hidden=HIDDEN[k], seed=seed)
    generator = torch.Generator().manual_seed(seed + 1)
    optimiser = torch.optim.Adam(proposal.parameters(), lr=LEARNING_RATE)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: 0.1 + 0.45 * (1 + math.cos(math.pi * s / steps))
    )
    proposal.train()
    for _ in range(steps):
        batch = contexts[torch.randint(0, len(contexts), (BATCH,), generator=generator)]
        loss = nll_loss(proposal, batch, generator, DRAWS)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
    return proposal.eval().requires_grad_(False)


# ----------------------------------------------------------------- the study
def run_study(
    k: int = 3,
    instances: int = 1000,
    steps: int = 3000,
    train_determinism: float = 0.5,
    train_alpha: float = 1.0,
    seed: int = 0,
    train_size: int = TRAIN_SIZE,
    log=print,
) -> dict:
    """Train on one setting, measure every cell (see the module docstring): the results as a
    plain dict (``setup``, ``cells``: per cell its KLs and their ``summary`` per proposal)."""
    motif = GridMotif(k)
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)
    training = source_contexts(k, train_size, train_determinism, train_alpha, generator)
    trained = train_on(training, k, steps, seed)
    trained_seconds = time.perf_counter() - started
    log(f"trained on determinism {train_determinism:g}, alpha {train_alpha:g}: {steps} steps, "
        f"{trained_seconds:.0f} s")  # fmt: skip
    free = context_free(motif, training)
    uniform = torch.full_like(free, -motif.n * math.log(2.0))
    proposals = {
        "trained": trained,
        "untrained": BlockProposal(k, hidden=HIDDEN[k], seed=seed).eval(),
        "context-free": free,
    }
    cells = []
    for index, (d, a) in enumerate((d, a) for d in DETERMINISMS for a in ALPHAS):
        held_out = torch.Generator().manual_seed(HELD_OUT_SEED + index)
        c = source_contexts(k, instances, d, a, held_out)
        kls = proposal_kls(proposals, motif, c)
        cell = {"determinism": d, "alpha": a}
        for name in PROPOSALS:
            cell[name] = {**summary(kls[name]), "kl": [round(float(v), 6) for v in kls[name]]}
        cells.append(cell)
        log(format_cell(cell))
    return {
        "setup": {
            "block_size": k, "instances": instances, "steps": steps, "seed": seed,
            "train_determinism": train_determinism, "train_alpha": train_alpha,
            "train_size": train_size, "batch": BATCH, "draws": DRAWS, "hidden": HIDDEN[k],
            "epsilon": EPSILON, "near_zero": NEAR_ZERO,
            "context_free_kl_to_uniform": float(kl_rows(free.unsqueeze(0), uniform)[0]),
            "train_seconds": trained_seconds, "seconds": time.perf_counter() - started,
        },
        "cells": cells,
    }  # fmt: skip


def format_cell(cell: dict) -> str:
    parts = [
        f"{name} mean {cell[name]['mean']:.4f} median {cell[name]['median']:.4f} "
        f"<{NEAR_ZERO:g}: {cell[name]['below']:.0%}"
        for name in PROPOSALS
    ]
    return f"determinism {cell['determinism']:g}, alpha {cell['alpha']:g}: " + "; ".join(parts)


# ----------------------------------------------------------------- verdicts
def _is_training(cell: dict, setup: dict) -> bool:
    return (cell["determinism"], cell["alpha"]) == (
        setup["train_determinism"],
        setup["train_alpha"],
    )


def _name(cell: dict) -> str:
    return f"determinism {cell['determinism']:g}, alpha {cell['alpha']:g}"


def majority(share: float, n: int) -> str:
    """Whether a share of ``n`` KLs below ``NEAR_ZERO`` is a majority: ``"yes"``, ``"no"``, or
    ``"unclear"`` within two standard errors of one half (``sqrt(1 / (4 n))`` each)."""
    margin = 2 * math.sqrt(0.25 / max(n, 1))
    return "unclear" if abs(share - 0.5) < margin else "yes" if share > 0.5 else "no"


def near_zero_verdict(results: dict) -> tuple[str, str]:
    """Claim 1 on the training setting's cell: ``(verdict, evidence)``. Holds when most of the
    trained network's KLs are below ``NEAR_ZERO`` (``majority``) and most of the context-free
    proposal's are not; inconclusive when both are (ignoring the context does as well) or the
    share is within noise of one half; else does not hold."""
    setup = results["setup"]
    cell = next((c for c in results["cells"] if _is_training(c, setup)), None)
    if cell is None:
        return "inconclusive", "the training setting is not a cell of the grid"
    t, f, u = cell["trained"], cell["context-free"], cell["untrained"]
    evidence = (
        f"at the training setting ({_name(cell)}) {t['below']:.0%} of the trained network's KLs "
        f"are below {NEAR_ZERO:g} nats (median {t['median']:.3g}, mean {t['mean']:.3g}), "
        f"against {f['below']:.0%} of the context-free proposal's (median {f['median']:.3g}) "
        f"and {u['below']:.0%} of the untrained network's (median {u['median']:.3g})"
    )
    most = majority(t["below"], setup["instances"])
    if most == "unclear":
        return "inconclusive", evidence + (
            f": {t['below']:.0%} of {setup['instances']} is within two standard errors of half"
        )
    if most == "yes" and majority(f["below"], setup["instances"]) == "no":
        return "holds", evidence
    if most == "yes":
        return "inconclusive", evidence + ": ignoring the context is as close to zero"
    return "does not hold", evidence


def generalisation_verdict(results: dict) -> tuple[str, str]:
    """Claim 2 on the other cells: holds when most of the trained network's KLs are below
    ``NEAR_ZERO`` (``majority``) on every one, does not hold when they are clearly not on more
    than half of them, inconclusive otherwise (naming where); the evidence also names the cells
    where training made it worse than the untrained network."""
    setup = results["setup"]
    others = [c for c in results["cells"] if not _is_training(c, setup)]
    said = [majority(c["trained"]["below"], setup["instances"]) for c in others]
    bad = [c for c, m in zip(others, said, strict=True) if m != "yes"]
    worse = [c for c in others if c["trained"]["mean"] > c["untrained"]["mean"]]
    shares = ", ".join(f"{c['trained']['below']:.0%}" for c in others)
    evidence = (
        f"most of the trained network's KLs are below {NEAR_ZERO:g} nats on "
        f"{said.count('yes')} of the {len(others)} other settings, clearly not on "
        f"{said.count('no')} (its shares below {NEAR_ZERO:g} on the {len(others)}: {shares})"
    )
    if bad:
        evidence += "; not clearly at " + "; ".join(
            f"{_name(c)} (median {c['trained']['median']:.3g}, mean {c['trained']['mean']:.3g})"
            for c in bad
        )
    if worse:
        evidence += (
            f"; its mean KL is above the untrained network's on {len(worse)} of them ("
            + "; ".join(
                f"{_name(c)}: {c['trained']['mean']:.3g} against {c['untrained']['mean']:.3g}"
                for c in worse
            )
            + ")"
        )
    if not bad:
        return "holds", evidence
    if said.count("no") * 2 > len(others):
        return "does not hold", evidence
    return "inconclusive", evidence + ": it generalises to some settings and not to others"


# ----------------------------------------------------------------- the generated section
COMMAND = "python -m lsbcore.studies block-kl --docs docs/reproduction.md"
BEGIN = f"<!-- block-kl:begin (generated by {COMMAND}) -->"
END = "<!-- block-kl:end -->"
CLAIMS = (
    "The KL divergences from the neural block proposals to the true conditionals are mostly "
    "concentrated at zero (slides 004, 'How good the proposal approximations are').",
    "Trained on one p_determin and alpha, the proposals generalise well to other p_determin "
    "and alpha (same slide).",
)


def section(results: dict, command: str = COMMAND) -> str:
    """The ``block-kl`` section of ``docs/reproduction.md``: setup, table and verdicts."""
    s = results["setup"]
    k = s["block_size"]
    lines = [
        BEGIN,
        "## The block proposals' KL across determinisms and alphas (slides 004)",
        "",
        f"Generated by `{command}` on {date.today().isoformat()} ({s['seconds'] / 60:.1f} min, "
        f"training {s['train_seconds']:.0f} s). One {k} x {k} block proposal "
        f"(`BlockProposal`, {s['hidden']} hidden units) trained from scratch on "
        f"{s['train_size']:,} contexts of one setting, determinism {s['train_determinism']:g} "
        f"and alpha {s['train_alpha']:g}: {s['steps']:,} Adam steps of {s['batch']} contexts "
        f"with {s['draws']} exact draws each (the product's forward-KL loss). Then "
        f"{s['instances']:,} held-out contexts per cell (networks and boundaries from a seed "
        "training never reads) and KL(p || q) in nats, enumerated over the block's "
        f"{2 ** (k * k):,} states, for the trained network, the same network untrained "
        "(its exact last-site logits only) and the context-free proposal: the block's "
        "marginal over the training contexts, the best proposal that ignores the context "
        "(the minimiser of the training objective among them; its KL to uniform is "
        f"{s['context_free_kl_to_uniform']:.3f} nats).",
        "",
        "| determinism | alpha | trained: mean / median / share < 0.1 | untrained | context-free |",
        "|---|---|---|---|---|",
    ]
    for cell in results["cells"]:
        mark = " (training)" if _is_training(cell, s) else ""
        row = " | ".join(
            f"{cell[n]['mean']:.3g} / {cell[n]['median']:.3g} / {cell[n]['below']:.0%}"
            for n in PROPOSALS
        )
        lines.append(f"| {cell['determinism']:g}{mark} | {cell['alpha']:g} | {row} |")
    verdicts = (near_zero_verdict(results), generalisation_verdict(results))
    lines.append("")
    for claim, (verdict, evidence) in zip(CLAIMS, verdicts, strict=True):
        lines.append(
            f"- {claim} **{verdict.capitalize()} here.** {evidence[:1].upper()}{evidence[1:]}."
        )
    lines += [
        "",
        "How this differs from the source: the slides name p_determin and alpha without "
        "defining them; we read determinism as the share of variables whose tables are "
        f"near-deterministic (1 - {s['epsilon']:g} on a random value; exact 0/1 in the "
        "source, presumably) and alpha as the concentration of the Beta(alpha, alpha) every "
        "other row is drawn from, clipped to [0.001, 0.999] "
        "(`lsbcore/studies/block_proposals/source_networks.py`; "
        "alpha = 1 is `grid_network`'s uniform rows). Our motif is a "
        f"{k} x {k} block of a {k + 2} x {k + 2} grid network with its blanket held at an "
        "exact draw of the network; our proposal is the product's autoregressive network, "
        "not the source's mixture density network; the source's grid sizes, training length "
        "and settings are not given, so ours are small enough for two CPU cores.",
        "",
        END,
        "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------- the figure
def kl_figure(results: dict):
    """The 3 x 3 histograms of log10 KL (nats) from the full results, drawn as the dashboard
    draws the shipped summary (``kl_summary.kl_figure``)."""
    return kl_summary.kl_figure(summarise(results))


# ----------------------------------------------------------------- the command
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies block-kl",
        description="The block-proposal source's KL experiment: a proposal trained on one "
        "determinism and alpha of grid Bayesian networks, its KL to the exact block "
        "conditional on a 3 x 3 grid of them, beside an untrained and a context-free one.",
    )
    parser.add_argument("--block-size", type=int, choices=(2, 3), default=3,
                        help="k: the block's side (default 3)")  # fmt: skip
    parser.add_argument("--instances", type=int_in(1, 100_000), default=1000,
                        help="held-out contexts per cell (default 1000: a share of one half "
                        "then has a standard error of 0.016)")  # fmt: skip
    parser.add_argument("--steps", type=int_in(1, 1_000_000), default=3000,
                        help="training steps (default 3000)")  # fmt: skip
    parser.add_argument("--train-size", type=int_in(1, 1_000_000), default=TRAIN_SIZE,
                        help=f"training contexts (default {TRAIN_SIZE})")  # fmt: skip
    parser.add_argument("--train-determinism", type=float_in(0.0, 1.0), default=0.5,
                        help="the training networks' determinism (default 0.5)")  # fmt: skip
    parser.add_argument("--train-alpha", type=float_in(*ALPHA_RANGE), default=1.0,
                        help="the training networks' alpha (default 1)")  # fmt: skip
    parser.add_argument("--seed", type=int_in(0, 2**62), default=0,
                        help="training networks and weights (default 0)")  # fmt: skip
    add_output_files(parser)
    parser.add_argument("--html", type=out_path.output_file, metavar="OUT",
                        help="write the 3 x 3 KL histograms to this page")  # fmt: skip
    parser.add_argument("--summary", type=out_path.output_file, metavar="OUT",
                        help="write the histograms' counts and each cell's mean, median and "
                        "share below 0.1 (the dashboard's assets/block_kl.json)")  # fmt: skip
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small matrices: one thread is as fast, and the machine is shared
    try:
        results = run_study(
            args.block_size, args.instances, args.steps, args.train_determinism,
            args.train_alpha, args.seed, args.train_size,
            log=lambda line: print(line, flush=True),
        )  # fmt: skip
        for claim, (verdict, evidence) in zip(
            CLAIMS, (near_zero_verdict(results), generalisation_verdict(results)), strict=True
        ):
            print(f"{claim} {verdict.upper()}: {evidence}.")
        if args.json:
            out_path.write_json(args.json, results)
        if args.summary:
            out_path.write_json(args.summary, summarise(results))
        if args.html:
            out_path.write_text(args.html, kl_figure(results).to_html(include_plotlyjs=True))
        if args.docs:
            command = " ".join(["python -m lsbcore.studies block-kl", *_shown(argv)])
            replace_section(args.docs, section(results, command), BEGIN, END)
            print(f"wrote the block-kl section of {args.docs}")
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _shown(argv) -> list[str]:
    """The arguments as a section shows them (without machine-specific output paths)."""
    from lsbcore.studies.shared.shown_command import shown_argv

    argv = sys.argv[1:] if argv is None else argv
    return shown_argv(argv, private=("--json", "--html", "--summary"))


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies block-kl"))
