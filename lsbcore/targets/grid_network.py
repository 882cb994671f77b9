"""Grid Bayesian networks like the UAI competition's grids (the LSB paper's Table 3, MN 1 and 2).

The competition's files are not shipped, so this module generates networks of the same kind:
``side x side`` binary variables in row-major order, each conditioned on its upper and left
neighbours (the corner has no parent, the first row and column one). As we read them, the
2006 evaluation's grids (from Sang, Beame and Kautz, 2005, named by their share of deterministic
nodes, e.g. ``90-10-1``) are built this way; the paper says only "100 variables,
near-deterministic dependencies".

Our choices, since the paper names only that much:

- ``determinism`` is the fraction of the *variables* whose whole conditional table is
  near-deterministic (``round(determinism * n)`` of them, drawn at random): each row of such a
  table puts ``1 - epsilon`` on a value drawn uniformly and ``epsilon`` on the other;
- every other row is a uniform random Bernoulli, ``P(x = 1 | parents) ~ U(0, 1)``;
- ``epsilon = 1e-3`` by default: near-deterministic as the paper says, so that every state keeps
  positive probability and a single-site sampler stays irreducible; ``epsilon = 0`` gives exact
  zeros (the states a deterministic row forbids have probability zero, and ``start`` repairs the
  starting states).

Each variable's table is a factor over ``(up, left, variable)``, the child last and fastest, as a
UAI ``BAYES`` file lists it; the product of the tables is normalised (``log Z = 0``).
"""

from __future__ import annotations

import torch

from lsbcore.checks import integer, real
from lsbcore.targets.factor_graph import FactorGraph

#: Largest side: a million variables.
MAX_SIDE = 1024


def grid_network(
    side: int = 10, determinism: float = 0.5, seed: int = 0, epsilon: float = 1e-3
) -> FactorGraph:
    """A ``side x side`` grid Bayesian network (see the module docstring) from ``seed``."""
    side = integer(side, "side", 1, MAX_SIDE)
    determinism = real(determinism, "determinism", 0.0, 1.0)
    seed = integer(seed, "seed", 0, 2**63 - 1)
    epsilon = real(epsilon, "epsilon", 0.0, 0.5)
    n = side * side
    generator = torch.Generator().manual_seed(seed)
    deterministic = torch.zeros(n, dtype=torch.bool)
    deterministic[torch.randperm(n, generator=generator)[: round(determinism * n)]] = True
    scopes, log_tables = [], []
    for v in range(n):
        row, col = divmod(v, side)
        parents = ([v - side] if row > 0 else []) + ([v - 1] if col > 0 else [])
        rows = 2 ** len(parents)
        if deterministic[v]:
            value = torch.randint(0, 2, (rows,), generator=generator).to(torch.float64)
            p_one = value * (1.0 - epsilon) + (1.0 - value) * epsilon
        else:
            p_one = torch.rand(rows, generator=generator, dtype=torch.float64)
        table = torch.stack([1.0 - p_one, p_one], 1).reshape(-1)  # child fastest
        scopes.append(parents + [v])
        log_tables.append(torch.log(table))  # log 0 = -inf: exact zeros when epsilon = 0
    return FactorGraph(n, scopes, log_tables, shape=(side, side))


__all__ = ["grid_network", "MAX_SIDE"]
