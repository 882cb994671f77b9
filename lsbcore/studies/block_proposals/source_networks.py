"""The block-proposal source's grid Bayesian networks, parameterised by a determinism and an
alpha, and the contexts of their central ``k x k`` block.

The slides (``004``, "How good the proposal approximations are") name the two parameters,
``p_determin`` and ``alpha``, without defining them. Our reading, stated wherever it is used:

- the network is ``lsbcore.targets.grid_network``'s: a ``side x side`` grid, each variable
  conditioned on its upper and left neighbours, its table a factor over ``(up, left, child)``;
- ``determinism`` is ``grid_network``'s: the share of the variables whose every table row is
  near-deterministic (``1 - epsilon`` on a value drawn uniformly, ``epsilon = 1e-3``: the
  product's default, so every state keeps positive probability);
- ``alpha`` is the concentration of the symmetric two-value Dirichlet that every other row is
  drawn from: ``P(x = 1 | parents) ~ Beta(alpha, alpha)``, clipped to ``[epsilon, 1 -
  epsilon]``. ``alpha = 1`` is ``grid_network``'s uniform row (up to the clip), so
  ``grid_network(side, d, seed, epsilon)`` is this family at ``alpha = 1``; a
  small alpha pushes rows towards 0 and 1 (more determinism), a large one towards 1/2.

A context is read as ``instances.network_instances`` reads one: the network has side ``k + 2``,
its central tile is the block and the ring around it the block's Markov blanket, held at an
exact (ancestral) draw of the network, and ``FactorBlocks`` turns the tables at that boundary
into the motif's coefficients.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.checks import integer, real
from lsbcore.methods.block_proposals.factor_context import FactorBlocks
from lsbcore.methods.block_proposals.instances import ancestral_states, side_by_side
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling, interaction_pairs
from lsbcore.targets.factor_graph import FactorGraph

#: Near-deterministic rows put ``1 - EPSILON`` on their value (``grid_network``'s default).
EPSILON = 1e-3
#: Boundary states drawn per network built: few, so that a training set of contexts spans many
#: networks (32 per network, 4,096 contexts from 128 networks, a k = 3 network overfitted:
#: its held-out KL doubled while its training KL fell fivefold).
STATES_PER_NETWORK = 4
#: The alphas accepted: a Beta(alpha, alpha) row below 0.01 is 0 or 1 to float precision.
ALPHA_RANGE = (0.01, 100.0)


def source_grid_network(
    side: int, determinism: float, alpha: float, seed: int, epsilon: float = EPSILON
) -> FactorGraph:
    """A ``side x side`` grid network of the source's family (see the module docstring)."""
    side = integer(side, "side", 1, 64)
    determinism = real(determinism, "determinism", 0.0, 1.0)
    alpha = real(alpha, "alpha", *ALPHA_RANGE)
    epsilon = real(epsilon, "epsilon", 0.0, 0.5)
    rng = np.random.default_rng(integer(seed, "seed", 0, 2**63 - 1))
    n = side * side
    deterministic = np.zeros(n, dtype=bool)
    deterministic[rng.permutation(n)[: round(determinism * n)]] = True
    scopes, log_tables = [], []
    for v in range(n):
        row, col = divmod(v, side)
        parents = ([v - side] if row > 0 else []) + ([v - 1] if col > 0 else [])
        rows = 2 ** len(parents)
        if deterministic[v]:
            value = rng.integers(0, 2, rows).astype(np.float64)
            p_one = value * (1.0 - epsilon) + (1.0 - value) * epsilon
        else:
            # kept within [epsilon, 1 - epsilon], as the deterministic rows are: a small alpha
            # draws rows of 1e-50 and exact zeros, which no motif coefficient can express
            p_one = rng.beta(alpha, alpha, rows).clip(epsilon, 1.0 - epsilon)
        p_one = torch.as_tensor(p_one, dtype=torch.float64)
        table = torch.stack([1.0 - p_one, p_one], 1).reshape(-1)  # child fastest
        scopes.append(parents + [v])
        log_tables.append(torch.log(table))
    return FactorGraph(n, scopes, log_tables, shape=(side, side))


def source_contexts(
    k: int, n: int, determinism: float, alpha: float, generator: torch.Generator
) -> torch.Tensor:
    """``n`` contexts ``[n, T]`` float64 of the central ``k x k`` block of networks of side
    ``k + 2`` (one network per ``STATES_PER_NETWORK`` contexts), the blanket at exact draws."""
    motif = GridMotif(k)
    n = integer(n, "n", 1, 10_000_000)
    side = k + 2
    n_networks = -(-n // STATES_PER_NETWORK)
    seeds = torch.randint(0, 2**62, (n_networks,), generator=generator)
    networks = [source_grid_network(side, determinism, alpha, int(s)) for s in seeds]
    target = side_by_side(networks)
    x = ancestral_states(target, STATES_PER_NETWORK, generator)
    width = side * n_networks
    tiling = Tiling((side, width), k, interaction_pairs(target))
    tops = torch.tensor([[1, 1 + j * side] for j in range(n_networks)])
    cell = (torch.arange(k).unsqueeze(1) * width + torch.arange(k)).reshape(-1)
    sites = (tops[:, 0] * width + tops[:, 1]).unsqueeze(1) + cell
    tiles = Blocks(tops, sites, torch.zeros(n_networks, dtype=torch.long))
    c = FactorBlocks(target, motif, tiling).coefficients(x, tiles)  # [states, networks, T]
    return c.transpose(0, 1).reshape(-1, motif.n_terms)[:n]


__all__ = ["ALPHA_RANGE", "EPSILON", "source_contexts", "source_grid_network"]
