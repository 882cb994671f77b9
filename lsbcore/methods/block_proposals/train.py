"""Meta-training of the block proposal (``lsbcore.methods.block_proposals.proposal``) on random
motif instances.

Each step draws fresh instances ``c`` from the stated ranges
(``lsbcore.methods.block_proposals.instances``),
exact samples ``x ~ p(. | c)`` of each (``GridMotif.exact_samples``: the enumerated block
conditional), and takes an Adam step on the mean negative log-likelihood ``-log q(x | c)``. Its
expectation is ``E_c[KL(p || q) + H(p)]``: the forward KL plus an entropy that does not depend
on the network, so the loss is an unbiased estimate of what training lowers. Everything is
seeded (one generator for instances and samples, the network's initial weights from the same
seed) and runs on at most two threads: one seed gives the same weights twice.

    python -m lsbcore.studies.block_proposals.train --block-size K [--steps N] [--batch B] [--seed
    S]
                                   [--hidden H] [--out PATH]

writes the weights with ``info`` (ranges, steps, seed, final loss, held-out KL in and out of
range, seconds); by default to ``assets/neural_block_k{K}.pt``, the file the sampler ships.
"""

from __future__ import annotations

import math
import sys
import time

import torch

from lsbcore.checks import integer, real
from lsbcore.methods.block_proposals.instances import TRAINING, Ranges, draw_instances
from lsbcore.methods.block_proposals.motif import check_side
from lsbcore.methods.block_proposals.proposal import MAX_HIDDEN, BlockProposal

#: Per block size: the defaults (hidden width, steps, instances per step, exact draws per
#: instance). Several draws per instance steady the gradient (k = 3: 4 draws and 128 units took
#: the held-out mean KL from 0.059 to 0.018 on Ising blocks, 0.25 to 0.19 on networks); for k = 4
#: they also share its enumeration (65,536 states), the step's largest cost. Measured on 2
#: shared cores, one thread: about 40 s (k = 2), 90 s (k = 3) and 5 minutes (k = 4).
DEFAULTS = {
    2: {"hidden": 64, "steps": 3000, "batch": 256, "draws": 1},
    3: {"hidden": 128, "steps": 8000, "batch": 256, "draws": 4},
    4: {"hidden": 128, "steps": 1600, "batch": 64, "draws": 8},
}
#: Grid-network instances drawn once before training, per block size (a network is built per
#: 32 of them, which costs more than a step): each step takes its network instances from this
#: pool, its Ising instances fresh.
POOL = {2: 32768, 3: 32768, 4: 16384}
MAX_STEPS = 1_000_000
MAX_BATCH = 65_536
LEARNING_RATE = 3e-3
#: The final loss: the mean of the last this many steps' losses.
FINAL_WINDOW = 50


def train(
    k: int,
    steps: int | None = None,
    batch: int | None = None,
    seed: int = 0,
    hidden: int | None = None,
    depth: int = 2,
    draws: int | None = None,
    lr: float = LEARNING_RATE,
    ranges: Ranges = TRAINING,
    family: str | None = None,
    pool: int | None = None,
    progress=None,
) -> tuple[BlockProposal, list[float]]:
    """A ``BlockProposal`` for ``k x k`` blocks trained from nothing, and its loss per step.

    ``steps`` Adam steps on ``batch`` instances (``family``: one family or both, the Ising
    ones fresh each step, the network ones from a pool drawn first, ``POOL``), ``draws`` exact
    samples each (defaults per ``k``: ``DEFAULTS``), learning rate ``lr`` decayed along a
    cosine to a tenth; ``progress(step, steps, loss)`` is called after every step."""
    k = check_side(k)
    d = DEFAULTS[k]
    steps = integer(d["steps"] if steps is None else steps, "steps", 1, MAX_STEPS)
    batch = integer(d["batch"] if batch is None else batch, "batch", 1, MAX_BATCH)
    draws = integer(d["draws"] if draws is None else draws, "draws", 1, 1024)
    hidden = integer(d["hidden"] if hidden is None else hidden, "hidden", 1, MAX_HIDDEN)
    seed = integer(seed, "seed", 0, 2**63 - 1)
    lr = real(lr, "lr", 0.0, 1.0)
    proposal = BlockProposal(k, hidden=hidden, depth=depth, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(proposal.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: 0.1 + 0.45 * (1 + math.cos(math.pi * s / steps))
    )
    losses = []
    n_network = {"ising": 0, "network": batch}.get(family, round(ranges.network_share * batch))
    pool_size = integer(POOL[k] if pool is None else pool, "pool", 1, 1 << 20)
    if n_network:
        pool = torch.cat([
            draw_instances(k, min(1024, pool_size - first), generator, ranges, "network")
            for first in range(0, pool_size, 1024)
        ])  # fmt: skip
    proposal.train()
    for step in range(steps):
        parts = []
        if n_network < batch:
            parts.append(draw_instances(k, batch - n_network, generator, ranges, "ising"))
        if n_network:
            parts.append(pool[torch.randint(0, len(pool), (n_network,), generator=generator)])
        c = torch.cat(parts)  # [batch, T]
        loss = nll_loss(proposal, c, generator, draws)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step + 1, steps, losses[-1])
    return proposal.eval().requires_grad_(False), losses


def nll_loss(
    proposal: BlockProposal, c: torch.Tensor, generator: torch.Generator, draws: int = 1
) -> torch.Tensor:
    """The training loss: the mean of ``-log q(x | c)`` over ``draws`` exact samples ``x ~ p(. |
    c)`` of each instance ``c [N, T]`` (a scalar with gradient). Its expectation is the mean of
    ``KL(p || q) + H(p)`` over the instances."""
    x = proposal.motif.exact_samples(c, generator, draws).reshape(-1, proposal.motif.n)
    return -proposal.log_prob(x, c.repeat_interleave(draws, 0)).mean()


def progress_bar(stream=None, width: int = 24):
    """A progress callback drawing ``step/steps, loss, steps/s, ETA`` in place on stderr."""
    stream = sys.stderr if stream is None else stream
    started = time.perf_counter()

    def show(step: int, steps: int, loss: float) -> None:
        elapsed = time.perf_counter() - started
        if step < steps and step % max(1, steps // 200):
            return
        rate = step / max(elapsed, 1e-9)
        eta = (steps - step) / max(rate, 1e-9)
        filled = int(width * step / steps)
        bar = "#" * filled + "-" * (width - filled)
        stream.write(
            f"\rtraining [{bar}] {step}/{steps} loss {loss:.4f} {rate:.1f} steps/s "
            f"ETA {int(eta) // 60}m{int(eta) % 60:02d}s "
        )
        if step >= steps:
            stream.write("\n")
        stream.flush()

    return show
