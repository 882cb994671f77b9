"""Why flow-exact moves or not, measured: ``python -m lsbcore.studies flow-diagnose``.

On the flow paper's denoising posterior of a digit (``denoising``; free boundary, so its exact
``log Z`` comes from the transfer matrix up to 16 sites a row; at 28 x 28, the paper's size, from
annealed importance sampling, ``lsbcore.importance.annealed``, with its standard error), a flow
is trained the library's way and then measured:

- **its bound**: the ELBO over ``DRAWS`` of the flow's draws against ``log Z``, and the
  spread of the log-weights ``log q(v) - log r(v)`` under the flow (the independence sampler's
  acceptance falls fast as it grows);
- **the estimate of its mass** ``log r^(x)`` (``FlowModel``) at the flow's draws, from the flow's
  own ``w`` and from the dequantiser's draws: how good an importance proposal the dequantiser is;
- **the chains**: flow-exact's acceptance with the current state's estimate kept (the sampler) and
  redrawn from the dequantiser before every proposal (its former rule, also exact); the pixels
  that moved in some chain, against checkerboard Gibbs from the same starts;
- **the flow's spread against the posterior's**: the pixels that vary among ``DRAWS`` of the
  flow's draws and among as many states of the Gibbs chains (the last sweeps of each), and the
  mean over pixels of ``|P_flow(x_i = +1) - P_Gibbs(x_i = +1)|``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass

import torch

from lsbcore import interrupt, make_sampler, out_path
from lsbcore.importance.annealed import annealed_log_partition
from lsbcore.importance.transfer import MAX_WIDTH, transfer_log_partition
from lsbcore.methods.flows.model import FlowModel, split
from lsbcore.methods.flows.train import FlowTraining, TrainingSettings
from lsbcore.studies.flows.denoising import denoising_problem

DRAWS = 4096  # flow draws for the bound and the estimates' spread
#: AIS where the transfer matrix cannot go: its standard error at 28 x 28 is about 0.03 nats
AIS_RUNS, AIS_TEMPERATURES = 256, 2_000


@dataclass(frozen=True)
class Diagnosis:
    """What ``diagnose`` measured (see the module docstring); log values in nats."""

    size: int
    seed: int
    train_steps: int
    train_seconds: float
    log_z: float
    log_z_se: float  # 0 where exact (the transfer matrix)
    elbo: float
    log_weight_sd: float
    estimate_own_mean: float
    estimate_own_sd: float
    estimate_dequantiser_mean: float
    estimate_dequantiser_sd: float
    acceptance_kept: float
    acceptance_redrawn: float
    moved_kept: int
    moved_redrawn: int
    moved_gibbs: int
    varied_flow: int
    varied_gibbs: int
    marginal_gap: float

    @property
    def gap(self) -> float:
        return self.log_z - self.elbo


@torch.no_grad()
def _bound_and_estimates(flow: FlowModel, log_prob, generator) -> dict:
    v, _, log_r = flow.generate(flow.normal(DRAWS, generator))
    x, w = split(v)
    log_q = log_prob(x.double()) + (flow.log_q(w, x) - w.sum(-1)).double()
    log_weight = log_q - log_r.double()
    own = (log_r + w.sum(-1) - flow.log_q(w, x)).double()
    dequantiser = flow.log_r_estimate(x, 1, generator).double()
    return dict(
        elbo=float(log_weight.mean()),
        log_weight_sd=float(log_weight.std()),
        estimate_own_mean=float(own.mean()),
        estimate_own_sd=float(own.std()),
        estimate_dequantiser_mean=float(dequantiser.mean()),
        estimate_dequantiser_sd=float(dequantiser.std()),
    )


@torch.no_grad()
def _redrawn_chain(flow: FlowModel, log_prob, start, steps: int, generator):
    """flow-exact's former rule, K = 1: the current state's estimate redrawn from the
    dequantiser before every proposal. Returns (acceptance, sites moved in some chain)."""
    x, log_p, accepted = start.clone(), log_prob(start.double()), 0
    away = torch.zeros(start.shape[1], dtype=torch.bool)
    for _ in range(steps):
        log_r_now = flow.log_r_estimate(x, 1, generator).double()
        x_new, log_r_new = flow.propose(len(x), 1, generator)
        log_p_new = log_prob(x_new.double())
        log_alpha = log_p_new - log_p - log_r_new.double() + log_r_now
        u = torch.rand(len(x), generator=generator, dtype=torch.float64)
        accept = torch.log(u) < torch.nan_to_num(log_alpha, nan=-math.inf)
        x = torch.where(accept.unsqueeze(1), x_new, x)
        log_p = torch.where(accept, log_p_new, log_p)
        accepted += int(accept.sum())
        away |= (x != start).any(0)
    return accepted / (len(x) * steps), int(away.sum())


def diagnose(size: int = 16, train_steps: int = 1000, chains: int = 128, steps: int = 300,
             seed: int = 0) -> Diagnosis:  # fmt: skip
    """Train a flow ``train_steps`` steps on the denoising digit of ``size`` and measure it."""
    problem = denoising_problem(size=size, index=0, seed=0)  # one noisy digit for every seed
    target = problem.target
    if size <= MAX_WIDTH:
        log_z, log_z_se = transfer_log_partition(target), 0.0
    else:
        estimate = annealed_log_partition(target, AIS_RUNS, AIS_TEMPERATURES, seed)
        log_z, log_z_se = estimate.log_z, estimate.log_z_se
    training = FlowTraining(target, TrainingSettings(seed=seed))
    began = time.perf_counter()
    training.run(train_steps)
    seconds = time.perf_counter() - began
    flow = training.model
    generator = torch.Generator().manual_seed(seed + 1)

    def log_prob(x):
        return target.log_prob(x.view(-1, size, size))

    figures = _bound_and_estimates(flow, log_prob, generator)
    draws, _ = flow.propose(DRAWS, 1, generator)
    # every chain starts at a draw of the flow (flow-exact's own start, with its own estimate)
    kept = make_sampler("flow-exact", target, chains, seed=seed + 2, flow=flow)
    start = kept.x.reshape(chains, -1).clone()
    gibbs = make_sampler("checkerboard", target, chains, seed=seed + 3, x0=kept.x.clone())
    kept_away = torch.zeros(size * size, dtype=torch.bool)
    gibbs_away = torch.zeros(size * size, dtype=torch.bool)
    last = []  # the Gibbs chains' last states, as many as the flow's draws
    for step in range(steps):
        kept.step(1)
        gibbs.step(1)
        kept_away |= (kept.x.reshape(chains, -1) != start).any(0)
        gibbs_away |= (gibbs.x.reshape(chains, -1) != start).any(0)
        if step >= steps - math.ceil(DRAWS / chains):
            last.append(gibbs.x.reshape(chains, -1).clone())
    states = torch.cat(last)[:DRAWS]
    redrawn, moved_redrawn = _redrawn_chain(flow, log_prob, start.to(flow.dtype), steps, generator)
    return Diagnosis(
        size=size, seed=seed, train_steps=train_steps, train_seconds=seconds, log_z=log_z,
        log_z_se=log_z_se, **figures,
        acceptance_kept=kept.move_rate, acceptance_redrawn=redrawn,
        moved_kept=int(kept_away.sum()), moved_redrawn=moved_redrawn,
        moved_gibbs=int(gibbs_away.sum()), varied_flow=_varied(draws), varied_gibbs=_varied(states),
        marginal_gap=float(((draws.double() > 0).double().mean(0)
                            - (states > 0).double().mean(0)).abs().mean()),
    )  # fmt: skip


def _varied(states: torch.Tensor) -> int:
    """Sites at which the rows of ``states`` are not all equal."""
    return int((states != states[:1]).any(0).sum())


def report(d: Diagnosis) -> str:
    sites = d.size * d.size
    return "\n".join([
        f"{d.size}x{d.size} denoising digit, seed {d.seed}, flow trained {d.train_steps:,} steps "
        f"({d.train_seconds:.0f} s): log Z {d.log_z:.2f} "
        + (f"(AIS, +- {d.log_z_se:.2f})" if d.log_z_se else "(exact)")
        + f", ELBO {d.elbo:.2f}, gap "
        f"{d.gap:.2f} nats; sd of log q(v) - log r(v) under the flow {d.log_weight_sd:.2f}",
        f"  log r^(x) at the flow's draws: own w {d.estimate_own_mean:.2f} +- "
        f"{d.estimate_own_sd:.2f}; dequantiser's draws {d.estimate_dequantiser_mean:.2f} +- "
        f"{d.estimate_dequantiser_sd:.2f}",
        f"  flow-exact acceptance: estimate kept {d.acceptance_kept:.4f}, redrawn "
        f"{d.acceptance_redrawn:.4f}; sites moved in some chain: kept {d.moved_kept}/{sites}, "
        f"redrawn {d.moved_redrawn}/{sites}, checkerboard Gibbs {d.moved_gibbs}/{sites}",
        f"  sites that vary among {DRAWS:,} states: the flow's draws {d.varied_flow}/{sites}, "
        f"the Gibbs chains' last sweeps {d.varied_gibbs}/{sites}; mean |P_flow - P_Gibbs| over "
        f"sites {d.marginal_gap:.4f}",
    ])  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=16, choices=(8, 16, 28),
                        help="the digit's side (28: log Z by AIS)")  # fmt: skip
    parser.add_argument("--train-steps", type=int, nargs="+", default=[1000])
    parser.add_argument("--chains", type=int, default=128)
    parser.add_argument("--steps", type=int, default=300, help="sampler steps per chain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, choices=range(1, 11), metavar="N",
                        help="seeds SEED..SEED+N-1, each a new flow and new chains on the same "
                        "noisy digit (1)")  # fmt: skip
    parser.add_argument("--json", type=out_path.output_file, metavar="OUT",
                        help="also write the figures to this JSON file")  # fmt: skip
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    try:
        for train_steps in args.train_steps:
            for seed in range(args.seed, args.seed + args.seeds):
                rows.append(diagnose(args.size, train_steps, args.chains, args.steps, seed))
                print(report(rows[-1]), flush=True)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        out_path.write_json(args.json, {"rows": [asdict(r) | {"gap": r.gap} for r in rows]})
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.flows.diagnose"))
