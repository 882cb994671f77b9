"""What the block proposal learned: its KL to the exact block conditional on held-out instances.

``KL(p || q) = sum_x p(x | c) (log p(x | c) - log q(x | c))`` per instance, both sides
enumerated over the block's ``2^(k^2)`` states (``GridMotif.exact_log_probs``,
``BlockProposal.all_log_probs``). It is what forward-KL training lowers, and it bounds how often
the sampler's Metropolis-Hastings test refuses: an independence proposal with ``q = p`` is
always accepted.

``held_out_report`` measures it on fresh instances (a seed training never uses) in the training
ranges (each family) and beyond them (``instances.OUT_OF_RANGE``: one parameter at a time), then
along a sweep of each parameter held at one value, the trained network beside the untrained one:
where the sweep's KL climbs is where the network stops generalising.

    python -m lsbcore.studies.block_proposals.held_out --block-size K [--weights PATH] [--instances
    N]
        [--json OUT] [--html OUT]

``--html`` writes ``kl_histograms``: the KL's histogram per setting in and out of range,
trained over untrained, as one self-contained page.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

import torch

from lsbcore import interrupt
from lsbcore.checks import integer
from lsbcore.methods.block_proposals.instances import (
    OUT_OF_RANGE,
    OUT_OF_RANGE_FAMILY,
    TRAINING,
    draw_instances,
)
from lsbcore.methods.block_proposals.motif import BLOCK_SIDES
from lsbcore.methods.block_proposals.proposal import BlockProposal, load_proposal
from lsbcore.out_path import output_file, write_text

#: Held-out instances come from this seed (training seeds its own generator apart from it).
HELD_OUT_SEED = 271_828
#: Held-out instances per setting by default, per block size (k = 4 enumerates 65,536 states).
DEFAULT_INSTANCES = {2: 400, 3: 200, 4: 16}
#: The sweeps: one parameter held at each value, the others drawn from the training ranges.
SWEEPS = {
    "lambda": ("ising", "lam", (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)),
    "field": ("ising", "field", (1.0, 10.0, 50.0, 100.0, 200.0, 400.0)),
    "epsilon": ("network", "epsilon", (1e-1, 1e-3, 1e-4, 1e-5, 1e-6, 1e-8)),
}


def kl_to_exact(proposal: BlockProposal, c: torch.Tensor) -> torch.Tensor:
    """``KL(p(. | c) || q(. | c))`` per instance, ``[N]`` float64, by enumeration (nats)."""
    if c.dim() != 2 or c.shape[1] != proposal.motif.n_terms:
        raise ValueError(
            f"contexts must be [N, {proposal.motif.n_terms}] for {proposal.k} x {proposal.k} "
            f"blocks, got {tuple(c.shape)}."
        )
    c = c.to(torch.float64)
    out = torch.empty(c.shape[0], dtype=torch.float64)
    rows = max(1, (1 << 18) // proposal.motif.n_states)
    with torch.no_grad():
        for first in range(0, c.shape[0], rows):
            part = c[first : first + rows]
            log_p = proposal.motif.exact_log_probs(part)
            log_q = proposal.all_log_probs(part)
            terms = torch.where(log_p > -torch.inf, log_p.exp() * (log_p - log_q), 0.0)
            out[first : first + rows] = terms.sum(1).clamp(min=0.0)
    return out


def kl_sampled(
    proposal: BlockProposal, c: torch.Tensor, generator: torch.Generator, draws: int = 256
) -> torch.Tensor:
    """An unbiased estimate of ``KL(p || q)`` per instance, ``[N]``: the mean of ``log p(x) -
    log q(x)`` over ``draws`` exact samples ``x ~ p(. | c)`` (``p`` enumerated, ``q`` scored on
    the samples only). For ``k = 4``, where scoring ``q`` on all 65,536 states of every instance
    costs seconds, this costs milliseconds."""
    draws = integer(draws, "draws", 1, 1 << 20)
    motif = proposal.motif
    with torch.no_grad():
        log_p = motif.exact_log_probs(c)  # [N, M]
        x = motif.exact_samples(c, generator, draws)  # [N, draws, k^2]
        log_p_x = log_p.gather(1, motif.codes(x))  # [N, draws]
        log_q_x = proposal.log_prob(x.reshape(-1, motif.n), c.repeat_interleave(draws, 0))
        return (log_p_x - log_q_x.view(-1, draws)).mean(1)


def summary(kl: torch.Tensor) -> dict:
    """Mean, median, 90th percentile and maximum of KLs ``[N]``, and the KLs themselves (a
    histogram's input)."""
    kl = kl.to(torch.float64)
    return {
        "mean": float(kl.mean()),
        "median": float(kl.median()),
        "p90": float(torch.quantile(kl, 0.9)),
        "max": float(kl.max()),
        "kl": [float(v) for v in kl],
    }


def _settings(k: int) -> dict:
    """Every held-out setting: ``name -> (ranges, family)``."""
    settings = {
        "in range, ising": (TRAINING, "ising"),
        "in range, network": (TRAINING, "network"),
    }
    for name, ranges in OUT_OF_RANGE.items():
        settings[f"out of range, {name}"] = (ranges, OUT_OF_RANGE_FAMILY[name])
    for name, (family, field, values) in SWEEPS.items():
        for value in values:
            settings[f"sweep {name}={value:g}"] = (
                replace(TRAINING, **{field: (value, value)}),
                family,
            )
    return settings


def held_out_report(
    proposal: BlockProposal,
    n: int | None = None,
    sweeps: bool = True,
    baseline: BlockProposal | None = None,
) -> dict:
    """The KL distribution of ``proposal`` and of an untrained network (``baseline``, by default
    ``BlockProposal(k)``) on held-out instances, setting by setting:
    ``{setting: {"trained": summary, "untrained": summary}}`` (``summary``), settings in range,
    out of range and (with ``sweeps``) along each parameter's sweep (``SWEEPS``)."""
    k = proposal.k
    n = DEFAULT_INSTANCES[k] if n is None else integer(n, "instances", 1, 100_000)
    baseline = BlockProposal(k, proposal.hidden) if baseline is None else baseline
    report = {}
    for index, (name, (ranges, family)) in enumerate(_settings(k).items()):
        if name.startswith("sweep") and not sweeps:
            continue
        generator = torch.Generator().manual_seed(HELD_OUT_SEED + index)
        c = draw_instances(k, n, generator, ranges, family)
        report[name] = {
            "trained": summary(kl_to_exact(proposal, c)),
            "untrained": summary(kl_to_exact(baseline, c)),
        }
    return report


def format_report(report: dict) -> str:
    """The report as a table: mean, median, 90th percentile and maximum KL (nats), trained and
    untrained."""
    head = f"{'mean':>8} {'median':>8} {'p90':>8} {'max':>8}"
    lines = [f"{'':<24} {'trained':^35}   {'untrained':^35}", f"{'setting':<24} {head}   {head}"]
    for name, row in report.items():
        cells = [
            " ".join(f"{row[side][key]:>8.4f}" for key in ("mean", "median", "p90", "max"))
            for side in ("trained", "untrained")
        ]
        lines.append(f"{name:<24} {cells[0]}   {cells[1]}")
    return "\n".join(lines)


#: The settings the histograms show: in range, then out of range one parameter at a time.
HISTOGRAM_SETTINGS = ("in range, ising", "in range, network") + tuple(
    f"out of range, {name}" for name in OUT_OF_RANGE
)
#: KLs below this (nats) fall in the histograms' first bin (log axis).
KL_FLOOR = 1e-6


def kl_histograms(report: dict, k: int):
    """The KL per held-out instance as histograms (log10 of nats), one panel per setting of
    ``HISTOGRAM_SETTINGS`` that ``report`` holds, the trained network over the untrained one."""
    import math

    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    shown = [name for name in HISTOGRAM_SETTINGS if name in report]
    figure = make_subplots(rows=len(shown), cols=1, subplot_titles=shown, shared_xaxes=True)
    colours = {"trained": "#F1CE63", "untrained": "#9C755F"}
    for row, name in enumerate(shown, start=1):
        for side, colour in colours.items():
            values = [math.log10(max(v, KL_FLOOR)) for v in report[name][side]["kl"]]
            figure.add_trace(
                go.Histogram(
                    x=values, name=side, marker_color=colour, opacity=0.7,
                    xbins={"start": math.log10(KL_FLOOR), "end": 1.5, "size": 0.25},
                    showlegend=row == 1, legendgroup=side,
                ),
                row=row, col=1,
            )  # fmt: skip
    figure.update_layout(
        barmode="overlay", height=220 * len(shown) + 80,
        title=f"KL(p || q) of the {k} x {k} block proposal on held-out instances (nats, log10)",
    )  # fmt: skip
    figure.update_xaxes(title_text="log10 KL (nats)", row=len(shown), col=1)
    return figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.block_proposals.held_out",
        description="The KL of a block proposal to the exact block conditional on held-out "
        "instances, in and out of the training ranges, beside an untrained network.",
    )
    parser.add_argument("--block-size", type=int, required=True, help="k: 2, 3 or 4")
    parser.add_argument(
        "--weights", default=None, help="a weights file (default: the shipped one for k)"
    )
    parser.add_argument("--instances", type=int, default=None, help="instances per setting")
    parser.add_argument("--no-sweeps", action="store_true", help="skip the parameter sweeps")
    parser.add_argument("--json", type=output_file, help="also write the numbers to this file")
    parser.add_argument("--html", type=output_file, help="write the KL histograms to this page")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # small matrices: one thread is as fast, and the machine is shared
    try:
        if args.block_size not in BLOCK_SIDES:
            raise ValueError(f"--block-size must be one of {BLOCK_SIDES}, got {args.block_size}.")
        if args.instances is not None and not 1 <= args.instances <= 100_000:
            raise ValueError(f"--instances must be between 1 and 100000, got {args.instances}.")
        if args.weights is None:
            from lsbcore.methods.block_proposals.sampler import shipped_proposal

            proposal = shipped_proposal(args.block_size)
        else:
            proposal = load_proposal(args.weights)
            if proposal.k != args.block_size:
                raise ValueError(
                    f"{args.weights} proposes {proposal.k} x {proposal.k} blocks, not "
                    f"{args.block_size} x {args.block_size}."
                )
        report = held_out_report(proposal, args.instances, sweeps=not args.no_sweeps)
        print(format_report(report))
        if args.json:
            write_text(args.json, json.dumps(report))
        if args.html:
            page = kl_histograms(report, proposal.k).to_html(include_plotlyjs=True)
            write_text(args.html, page)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(
        interrupt.run_command(main, "python -m lsbcore.studies.block_proposals.held_out")
    )
