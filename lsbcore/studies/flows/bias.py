"""How far ``flow-latent``'s states are from the target, measured against enumeration.

``python -m lsbcore.studies.flows.bias [--seed S] [--json OUT]`` trains one flow on a 3 x 3 Ising
posterior (every one of its 512 states enumerable) and, for the untrained, the half-trained and
the trained flow, runs

- ``flow-latent`` (the paper's chain in the flow's latent space, labelled approximate) and
- ``flow-exact`` (pseudo-marginal independence Metropolis-Hastings with the same flow, exact),

both started from the flow's own draws, first by the paper's protocol (no burn-in: every
``thin``-th state from the first step on), then after longer burn-ins, and prints the TV of
each one's histogram of states to the exact law, beside the noise floor: the mean TV of the same
number of independent exact draws, and each sampler's own noise (half the TV between the
histograms of two halves of its chains: correlated draws scatter more than independent ones).

What the numbers mean. The latent target (the paper's eq. 5) integrates to ``p(x)`` over each
orthant, so the latent chain is exact in the limit of a long run; at a finite length its states
carry the bias of its start (the flow's draws, whose law ``r`` is not ``p``) and of slow moves
between orthants. The rows after longer burn-ins show whether that bias shrinks with run length.
Draws of one chain are correlated, so the floor (independent draws) is a lower bound on the
noise of either sampler's TV; the ``noise`` columns measure it from the chains themselves (their
two halves differ by noise alone, bias cancels): a TV within about twice its noise is "within
noise", a TV many times its noise is bias. ``flow-exact``'s
TV by the paper's protocol also carries its start's bias (it starts from the same draws); it
loses it as fast as its acceptance lets it.

Deterministic for a seed (one generator per sampler, seeded from it, one thread).
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from lsbcore import interrupt, out_path
from lsbcore.checks import integer
from lsbcore.exact.states import exact_distribution, state_codes
from lsbcore.methods.flows.model import FlowModel, split
from lsbcore.methods.flows.train import FlowTraining, TrainingSettings
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.ising import IsingPosterior


@dataclass(frozen=True)
class BiasRow:
    """One flow and one run length: the two samplers' TVs to the exact law and the floor."""

    flow: str  # "untrained", "half-trained", "trained"
    train_steps: int
    elbo: float  # the flow's lower bound on log Z (mean of its last 20 training batches)
    burn_in: int  # 0: the paper's protocol
    draws: int  # states in each histogram (chains x recorded steps)
    tv_latent: float
    tv_exact: float
    tv_floor: float  # mean TV of `draws` independent exact draws
    noise_latent: float  # half the TV between the histograms of two halves of the chains
    noise_exact: float
    accept_latent: float  # proposals accepted (of z; of x for flow-exact)
    accept_exact: float


def default_target(seed: int = 5) -> IsingPosterior:
    """The 3 x 3 Ising posterior measured: field ``1.5 N(0, 1)`` (seeded), coupling 0.3."""
    g = torch.Generator().manual_seed(seed)
    return IsingPosterior(torch.randn(3, 3, generator=g, dtype=torch.float64) * 1.5, 0.3)


def iid_floor(p: np.ndarray, n_draws: int, seed: int, replicates: int = 20) -> float:
    """The mean TV to ``p`` of ``n_draws`` independent draws from ``p``."""
    rng = np.random.default_rng(seed)
    return float(np.mean([tv(p, rng.multinomial(n_draws, p)) for _ in range(replicates)]))


def tv(p: np.ndarray, counts: np.ndarray) -> float:
    return 0.5 * float(np.abs(p - counts / counts.sum()).sum())


def _histograms(sampler, burn_in: int, steps: int, thin: int) -> np.ndarray:
    """Counts of the states of the first and of the second half of the chains, ``[2, 2^n]``."""
    k = 2**sampler.n_sites
    half = sampler.n_chains // 2
    counts = np.zeros((2, k))
    if burn_in:
        sampler.step(burn_in)
    for _ in range(steps // thin):
        sampler.step(thin)
        codes = state_codes(sampler.x).numpy()
        counts[0] += np.bincount(codes[:half], minlength=k)
        counts[1] += np.bincount(codes[half:], minlength=k)
    return counts


def self_noise(counts: np.ndarray) -> float:
    """The noise of a histogram's TV from its own two halves (independent chains, the same
    start law): half their TV to each other, which is what one histogram of them all scatters
    by for independent draws, and grows with the draws' correlation as the noise does."""
    return 0.5 * tv(counts[0] / counts[0].sum(), counts[1])


def _flow_draws(flow: FlowModel, rows: int, seed: int) -> torch.Tensor:
    with torch.no_grad():
        v, _, _ = flow.generate(flow.normal(rows, torch.Generator().manual_seed(seed)))
    return split(v)[0].double()


def measure_bias(target=None, train_steps: int = 300, chains: int = 512, steps: int = 200,
                 thin: int = 2, burn_ins=(0, 500, 2000), seed: int = 0, transforms: int = 2,
                 hidden: int = 32, importance: int = 4, step_scale: float = 1.0,
                 log=None) -> list[BiasRow]:  # fmt: skip
    """The table (module docstring): one row per flow (0, ``train_steps // 2`` and
    ``train_steps`` training steps) and burn-in; each histogram holds ``chains * (steps //
    thin)`` states. ``target`` defaults to ``default_target()`` (at most 16 sites)."""
    target = default_target() if target is None else target
    if target.n_sites > 16:
        raise ValueError(f"the bias is measured by enumeration: at most 16 sites, got "
                         f"{target.n_sites}.")  # fmt: skip
    integer(train_steps, "train_steps", 0, 100_000)
    integer(chains, "chains", 2, 1 << 20)
    integer(thin, "thin", 1, 10_000)
    integer(steps, "steps", thin, 1_000_000)
    burn_ins = tuple(integer(b, "burn_in", 0, 1_000_000) for b in burn_ins)
    p = exact_distribution(target)
    settings = TrainingSettings(seed=seed, transforms=transforms, hidden=hidden)
    training = FlowTraining(target, settings, dtype=torch.float64)
    levels = {"untrained": 0, "half-trained": train_steps // 2, "trained": train_steps}
    rows = []
    for level, n_train in levels.items():
        training.run(n_train - training.steps)
        flow = copy.deepcopy(training.model).requires_grad_(False)
        elbo = -float(np.mean([h[1] for h in training.history[-20:]])) if n_train else math.nan
        for burn_in in burn_ins:
            latent = make_sampler("flow-latent", target, chains, seed=seed + 1, flow=flow,
                                  step_scale=step_scale)  # fmt: skip
            halves_latent = _histograms(latent, burn_in, steps, thin)
            counts_latent = halves_latent.sum(0)
            start = _flow_draws(flow, chains, seed + 2).view(chains, *target.shape)
            exact = make_sampler("flow-exact", target, chains, seed=seed + 3, flow=flow,
                                 importance=importance, x0=start)  # fmt: skip
            halves_exact = _histograms(exact, burn_in, steps, thin)
            counts_exact = halves_exact.sum(0)
            draws = int(counts_latent.sum())
            row = BiasRow(level, n_train, elbo, burn_in, draws, tv(p, counts_latent),
                          tv(p, counts_exact), iid_floor(p, draws, seed + 4),
                          self_noise(halves_latent), self_noise(halves_exact),
                          latent.move_rate, exact.move_rate)  # fmt: skip
            rows.append(row)
            if log is not None:
                log(row)
    return rows


HEADER = ("flow", "train", "ELBO", "burn-in", "draws", "TV latent", "noise", "TV exact",
          "noise", "floor", "acc latent", "acc exact")  # fmt: skip


def format_row(row: BiasRow) -> str:
    return (f"{row.flow:>12} {row.train_steps:>5} {row.elbo:>6.2f} {row.burn_in:>7} "
            f"{row.draws:>7} {row.tv_latent:>9.4f} {row.noise_latent:>6.4f} "
            f"{row.tv_exact:>8.4f} {row.noise_exact:>6.4f} {row.tv_floor:>6.4f} "
            f"{row.accept_latent:>10.3f} {row.accept_exact:>9.3f}")  # fmt: skip


def format_header() -> str:
    widths = (12, 5, 6, 7, 7, 9, 6, 8, 6, 6, 10, 9)
    return " ".join(f"{h:>{w}}" for h, w in zip(HEADER, widths, strict=True))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lsbcore.studies.flows.bias",
        description="flow-latent's bias against enumeration on a 3 x 3 Ising posterior, beside "
        "flow-exact with the same flow and the noise floor of as many independent draws.",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the flow and the chains")
    parser.add_argument("--train-steps", type=int, default=300, help="the trained flow's steps")
    parser.add_argument("--chains", type=int, default=512)
    parser.add_argument("--steps", type=int, default=200, help="steps recorded per run")
    parser.add_argument("--thin", type=int, default=2)
    parser.add_argument("--burn-in", type=int, nargs="+", default=[0, 500, 2000],
                        help="burn-ins before recording (0: the paper's protocol)")  # fmt: skip
    parser.add_argument("--transforms", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument(
        "--step-scale", type=float, default=1.0,
        help="flow-latent's random-walk step in units of 2.38 / sqrt(n)",
    )  # fmt: skip
    parser.add_argument(
        "--json", type=out_path.output_file, metavar="OUT",
        help="also write the rows to this JSON file",
    )  # fmt: skip
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(format_header(), flush=True)
    start = time.perf_counter()
    try:
        rows = measure_bias(train_steps=args.train_steps, chains=args.chains, steps=args.steps,
                            thin=args.thin, burn_ins=tuple(args.burn_in), seed=args.seed,
                            transforms=args.transforms, hidden=args.hidden,
                            step_scale=args.step_scale,
                            log=lambda row: print(format_row(row), flush=True))  # fmt: skip
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"({time.perf_counter() - start:.0f} s; floor: the mean TV of as many independent "
          "exact draws; noise: half the TV between the two halves of the chains, the scatter of "
          "that sampler's own TV, correlation included)")  # fmt: skip
    if args.json:
        settings = {k: str(v) if k == "json" else v for k, v in vars(args).items()}
        out_path.write_json(args.json, {"args": settings, "rows": [asdict(r) for r in rows]})
    return 0


if __name__ == "__main__":
    raise SystemExit(interrupt.run_command(main, "python -m lsbcore.studies.flows.bias"))
