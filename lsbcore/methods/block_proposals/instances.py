"""Random instances of the motif (``lsbcore.methods.block_proposals.motif``) for meta-training and
held-out checks.

An instance is a context ``c [T]``: the coefficients of one ``k x k`` block's conditional given
its boundary. They are not invented directly: each is read from a small real target, a
``(k + 2) x (k + 2)`` grid whose central tile is the block, through the same block-context code
the ``neural-block`` sampler uses (``PairwiseBlocks`` for the Ising posterior, ``FactorBlocks``
for grid networks), so training sees exactly the kind of numbers the sampler will feed the
network. Two families:

- ``"ising"``: an ``IsingPosterior`` with a random field ``alpha`` and coupling ``lambda``, in a
  random chain state for the boundary;
- ``"network"``: a ``grid_network`` (``determinism``, ``epsilon``) in a random chain state.

What the sampler meets, and so what the training ranges (``TRAINING``) cover:

- the paper's cases (``lsbcore.cases``): ``alpha = mu * truth + U(-3, 3)``, ``mu`` in {1, 3}, so
  ``|alpha| <= 6``; ``lambda`` in {0, 1};
- photos (``lsbcore.segmentation``): smooth fields, ``|alpha|`` of median 10 to 27, clipped at 50;
  ``lambda`` around 1 (the photo benchmark goes to 1.5);
- grid networks: ``determinism`` anywhere in [0, 1], ``epsilon = 1e-3`` by default.

So the field scale is drawn log-uniformly in [0.3, 50] (noise-dominated to clean photo
fields), ``lambda`` uniformly in [0, 2], ``determinism`` in [0, 1] and ``epsilon``
log-uniformly in [1e-3, 0.2]. The boundary is a mix: a uniform random state (what a chain
holds at its start) a third of the time, otherwise a settled-looking one: a smooth half-plane
state or the field's sign with a few flips (Ising), an exact draw of the network (networks:
ancestral sampling, the network's own law).

The named out-of-range variants (``OUT_OF_RANGE``) move one parameter beyond training, to find
where the network stops generalising: ``"lambda"`` (couplings 2.5 to 6: the dashboard offers up
to 10), ``"field"`` (fields of 75 to 300: beyond the photos' clip of 50, as a steeper data term
would give), ``"epsilon"`` (tables of ``epsilon`` 1e-6 to 1e-4: sharper than the default
networks, log-odds of 9 to 14 per factor instead of at most 7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from lsbcore.checks import integer
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.pairwise_context import PairwiseBlocks
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling, interaction_pairs
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network
from lsbcore.targets.ising import IsingPosterior

#: The families of instances.
FAMILIES = ("ising", "network")
#: Boundary states of a network drawn per network built (networks are built one at a time).
STATES_PER_NETWORK = 32
#: Share of the settled-looking boundary states that flip a site of the field's sign (Ising).
SIGN_FLIPS = 0.1


@dataclass(frozen=True)
class Ranges:
    """Where the random instances' parameters are drawn (see the module docstring).

    ``lam``: uniform; ``field``: the field scale, log-uniform; ``determinism``: uniform;
    ``epsilon``: log-uniform; ``settled``: the share of boundary states that look settled (the
    rest uniform random); ``network_share``: the share of instances from grid networks.
    """

    lam: tuple[float, float] = (0.0, 2.0)
    field: tuple[float, float] = (0.3, 50.0)
    determinism: tuple[float, float] = (0.0, 1.0)
    epsilon: tuple[float, float] = (1e-3, 0.2)
    settled: float = 2.0 / 3.0
    network_share: float = 0.5

    def as_dict(self) -> dict:
        return {
            "lam": list(self.lam),
            "field": list(self.field),
            "determinism": list(self.determinism),
            "epsilon": list(self.epsilon),
            "settled": self.settled,
            "network_share": self.network_share,
        }


#: The training ranges.
TRAINING = Ranges()
#: One parameter beyond training each (the module docstring says why these).
OUT_OF_RANGE = {
    "lambda": replace(TRAINING, lam=(2.5, 6.0)),
    "field": replace(TRAINING, field=(75.0, 300.0)),
    "epsilon": replace(TRAINING, epsilon=(1e-6, 1e-4)),
}
#: Which family each out-of-range variant changes.
OUT_OF_RANGE_FAMILY = {"lambda": "ising", "field": "ising", "epsilon": "network"}


def _uniform(n: int, bounds, generator: torch.Generator) -> torch.Tensor:
    low, high = bounds
    return low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)


def _log_uniform(n: int, bounds, generator: torch.Generator) -> torch.Tensor:
    return _uniform(n, (math.log(bounds[0]), math.log(bounds[1])), generator).exp()


def half_planes(n: int, side: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` smooth states ``[n, side, side]`` of +-1: a random straight edge between a +1 and a
    -1 region (past the grid now and then: a constant state)."""
    angle = _uniform(n, (0.0, 2 * math.pi), generator)
    centre = _uniform(2 * n, (-1.0, side), generator).view(n, 2)
    r = torch.arange(side, dtype=torch.float64).view(1, side, 1)
    c = torch.arange(side, dtype=torch.float64).view(1, 1, side)
    d = torch.cos(angle).view(n, 1, 1) * (r - centre[:, :1, None]) + torch.sin(angle).view(
        n, 1, 1
    ) * (c - centre[:, 1:, None])
    return torch.where(d >= 0, 1.0, -1.0).to(torch.float64)


def _random_states(n: int, side: int, generator: torch.Generator) -> torch.Tensor:
    bits = torch.rand(n, side, side, generator=generator, dtype=torch.float64) < 0.5
    return torch.where(bits, 1.0, -1.0).to(torch.float64)


def _centre_tile(side: int, k: int, pairs: torch.Tensor):
    """The tiling of a ``side x side`` grid and its one tile at (1, 1)."""
    tiling = Tiling((side, side), k, pairs)
    return tiling, tiling.blocks(tiling.offsets.index((1, 1)))


def ising_instances(k: int, n: int, ranges: Ranges, generator: torch.Generator) -> torch.Tensor:
    """``n`` Ising contexts ``[n, T]``: ``alpha = s (a P + (1 - a) U(-1, 1))`` with ``s`` the
    field scale, ``a ~ U(0, 1)`` and ``P`` a half-plane (a clean image's edge), and ``lambda``.

    The coefficients are linear in ``(alpha, lambda)`` (a site's coefficient is ``alpha_i +
    lambda * sum of its outside neighbours``, a pair's is ``lambda``), so one target with the
    fields and ``lambda = 0`` and one with no field and ``lambda = 1`` give every instance its
    own ``lambda`` exactly: ``c = c_alpha + lambda c_1``."""
    motif = GridMotif(k)
    side = k + 2
    scale = _log_uniform(n, ranges.field, generator).view(n, 1, 1)
    signal = torch.rand(n, 1, 1, generator=generator, dtype=torch.float64)
    noise = 2 * torch.rand(n, side, side, generator=generator, dtype=torch.float64) - 1
    alpha = scale * (signal * half_planes(n, side, generator) + (1 - signal) * noise)
    lam = _uniform(n, ranges.lam, generator).view(n, 1)
    # boundary: random, a half-plane, or the field's sign with a few flips
    kind = torch.rand(n, 1, 1, generator=generator, dtype=torch.float64)
    flips = torch.rand(n, side, side, generator=generator) < SIGN_FLIPS
    follows = torch.where(flips, -1.0, 1.0) * torch.where(alpha >= 0, 1.0, -1.0)
    settled = torch.where(kind < ranges.settled / 2, half_planes(n, side, generator), follows)
    x = torch.where(kind < ranges.settled, settled, _random_states(n, side, generator))
    field_target = IsingPosterior(alpha, 0.0)
    tiling, tile = _centre_tile(side, k, interaction_pairs(field_target))
    flat = x.reshape(n, -1)
    c_alpha = PairwiseBlocks(field_target, motif, tiling).coefficients(flat, tile)[:, 0]
    coupling = IsingPosterior(torch.zeros(side, side, dtype=torch.float64), 1.0)
    c_one = PairwiseBlocks(coupling, motif, tiling).coefficients(flat, tile)[:, 0]
    return c_alpha + lam * c_one


def ancestral_states(target, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` exact draws ``[n, n_variables]`` of a Bayesian network whose factors are each a
    variable's table given its parents (the child last in its scope, fastest in its table),
    listed parents first (as ``grid_network`` lists them)."""
    x = torch.zeros(n, target.n_variables, dtype=torch.float64)
    u = torch.rand(n, len(target.scopes), generator=generator, dtype=torch.float64)
    for f, (scope, table) in enumerate(zip(target.scopes, target.log_tables, strict=True)):
        index = torch.zeros(n, dtype=torch.long)
        for p in scope[:-1]:  # the last variable changes fastest: parents are the high bits
            index = 2 * index + (x[:, p] > 0).long()
        p_one = table.exp()[2 * index + 1]
        x[:, scope[-1]] = torch.where(u[:, f] < p_one, 1.0, -1.0)
    return x


def side_by_side(networks) -> FactorGraph:
    """One factor graph of ``P`` grid networks of one side ``s`` laid side by side, ``s x P s``
    (no factor crosses from one to the next), its factors in the networks' order."""
    side = networks[0].shape[0]
    width = side * len(networks)
    scopes, tables = [], []
    for j, net in enumerate(networks):
        for scope, table in zip(net.scopes, net.log_tables, strict=True):
            scopes.append([(v // side) * width + j * side + v % side for v in scope])
            tables.append(table)
    return FactorGraph(side * width, scopes, tables, shape=(side, width))


def network_instances(k: int, n: int, ranges: Ranges, generator: torch.Generator) -> torch.Tensor:
    """``n`` grid-network contexts ``[n, T]``: networks of side ``k + 2`` with random
    ``determinism`` and ``epsilon`` (one per ``STATES_PER_NETWORK`` instances), each network's
    centre tile in boundary states that are exact draws of the network or uniform random.

    The networks are laid side by side as one factor graph (``side_by_side``), so one
    ``FactorBlocks`` reads every network's tile in every state at once."""
    from lsbcore.methods.block_proposals.factor_context import FactorBlocks

    motif = GridMotif(k)
    side = k + 2
    n_networks = -(-n // STATES_PER_NETWORK)
    determinism = _uniform(n_networks, ranges.determinism, generator)
    epsilon = _log_uniform(n_networks, ranges.epsilon, generator)
    seeds = torch.randint(0, 2**62, (n_networks,), generator=generator)
    networks = [
        grid_network(side, float(determinism[j]), int(seeds[j]), float(epsilon[j]))
        for j in range(n_networks)
    ]
    target = side_by_side(networks)
    m = STATES_PER_NETWORK
    drawn = ancestral_states(target, m, generator)
    random = torch.where(torch.rand(drawn.shape, generator=generator) < 0.5, 1.0, -1.0)
    settled = torch.rand(m, 1, generator=generator, dtype=torch.float64) < ranges.settled
    x = torch.where(settled, drawn, random)
    tiling = Tiling((side, side * n_networks), k, interaction_pairs(target))
    tops = torch.tensor([[1, 1 + j * side] for j in range(n_networks)])
    cell = (torch.arange(k).unsqueeze(1) * side * n_networks + torch.arange(k)).reshape(-1)
    sites = (tops[:, 0] * side * n_networks + tops[:, 1]).unsqueeze(1) + cell
    tiles = Blocks(tops, sites, torch.zeros(n_networks, dtype=torch.long))
    c = FactorBlocks(target, motif, tiling).coefficients(x, tiles)  # [m, P, T]
    return c.transpose(0, 1).reshape(-1, motif.n_terms)[:n]


def draw_instances(
    k: int,
    n: int,
    generator: torch.Generator,
    ranges: Ranges = TRAINING,
    family: str | None = None,
) -> torch.Tensor:
    """``n`` motif contexts ``[n, T]`` float64 from ``ranges``: of one ``family``
    (``FAMILIES``), or both (``ranges.network_share`` of them from networks), shuffled."""
    integer(n, "n", 1, 10_000_000)
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}.")
    if family == "ising":
        return ising_instances(k, n, ranges, generator)
    if family == "network":
        return network_instances(k, n, ranges, generator)
    n_network = int(round(ranges.network_share * n))
    parts = [ising_instances(k, n - n_network, ranges, generator)]
    if n_network:
        parts.append(network_instances(k, n_network, ranges, generator))
    c = torch.cat(parts)
    return c[torch.randperm(n, generator=generator)]


__all__ = [
    "FAMILIES",
    "OUT_OF_RANGE",
    "OUT_OF_RANGE_FAMILY",
    "Ranges",
    "TRAINING",
    "draw_instances",
    "ising_instances",
    "network_instances",
]
