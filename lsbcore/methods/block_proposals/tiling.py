"""Where the blocks of a step lie: ``k x k`` tiles of a grid, and which of them move together.

A step of ``neural-block`` picks an offset ``(o_r, o_c)`` in ``[0, k)^2`` uniformly; the tiles
of that offset have their top-left corners at ``(o_r + k t_r, o_c + k t_c)`` and lie wholly inside
the grid (tiles never wrap round a torus). Every site lies in a whole tile of some offset when
both sides are at least ``k``, so the chain can reach every state. The tiles of one offset are
coloured so that no interaction of the target joins two tiles of one colour; the step then
updates every tile of one colour, drawn uniformly, at once. Those updates commute (their
Metropolis-Hastings tests read disjoint sites and no term joins them), so the step is a
mixture of products of commuting reversible updates: reversible.

The colouring is the checkerboard of tiles where it is proper (any 4-neighbour lattice with
free boundaries), else the four colours of ``(t_r mod 2, t_c mod 2)`` where that is (a grid
network, whose factors join tiles at their corners), else a greedy colouring of the tiles'
adjacency (a torus whose tiles meet round the wrap). Fewer colours update more tiles a step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.pairwise_target import PairwiseTarget, greedy_colouring


@dataclass(frozen=True)
class Blocks:
    """The tiles of one offset: ``tops [T, 2]`` (row, column of each tile's top-left corner),
    ``sites [T, k^2]`` (site indices, row-major in the tile) and ``colour [T]``."""

    tops: torch.Tensor
    sites: torch.Tensor
    colour: torch.Tensor

    @property
    def n_colours(self) -> int:
        return int(self.colour.max()) + 1 if len(self.colour) else 0

    def of_colour(self, colour: int) -> Blocks:
        keep = self.colour == colour
        return Blocks(self.tops[keep], self.sites[keep], self.colour[keep])


def grid_shape(target, k: int) -> tuple[int, int]:
    """The target's grid ``(H, W)``, or a sentence why block proposals cannot run on it."""
    shape = tuple(target.shape)
    if len(shape) != 2:
        raise ValueError(
            f"neural-block proposes k x k blocks of a grid; {target.describe()} is laid out as "
            f"{shape}, not as rows and columns."
        )
    if min(shape) < k:
        raise ValueError(
            f"neural-block's {k} x {k} blocks need a grid at least {k} sites on each side; this "
            f"one is {shape[0]} x {shape[1]}."
        )
    return shape


def interaction_pairs(target) -> torch.Tensor:
    """Pairs of sites ``[P, 2]`` that some term of the target joins: a pairwise target's
    edges, every pair within a factor graph's scopes."""
    if isinstance(target, PairwiseTarget):
        return target.edges
    if isinstance(target, FactorGraph):
        pairs = [
            (a, b) for scope in target.scopes for i, a in enumerate(scope) for b in scope[i + 1 :]
        ]
        return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)
    raise ValueError(
        "neural-block runs on pairwise lattices and grid factor graphs, not on "
        f"{target.describe()}."
    )


class Tiling:
    """The tiles of every offset of a ``k``-tiling of an ``H x W`` grid, coloured against the
    interactions ``pairs [P, 2]`` (built once per offset, on first use)."""

    def __init__(self, shape: tuple[int, int], k: int, pairs: torch.Tensor):
        self.height, self.width = shape
        self.k = k
        self.pairs = pairs.long().reshape(-1, 2)
        self.offsets = tuple((r, c) for r in range(k) for c in range(k))
        self._blocks: dict[int, Blocks] = {}

    def blocks(self, offset: int) -> Blocks:
        """The coloured tiles of offset ``offset`` (an index into ``offsets``)."""
        if offset not in self._blocks:
            self._blocks[offset] = self._build(*self.offsets[offset])
        return self._blocks[offset]

    def _build(self, o_r: int, o_c: int) -> Blocks:
        k, h, w = self.k, self.height, self.width
        rows = torch.arange(o_r, max(o_r, h - k + 1), k)  # empty where no whole tile fits
        cols = torch.arange(o_c, max(o_c, w - k + 1), k)
        tops = torch.stack(torch.meshgrid(rows, cols, indexing="ij"), -1).reshape(-1, 2)
        inner = torch.arange(k)
        cell = (inner.unsqueeze(1) * w + inner.unsqueeze(0)).reshape(-1)  # [k^2] row-major
        sites = (tops[:, 0] * w + tops[:, 1]).unsqueeze(1) + cell.unsqueeze(0)  # [T, k^2]
        tile_of = torch.full((h * w,), -1, dtype=torch.long)
        tile_of[sites.reshape(-1)] = torch.arange(len(tops)).repeat_interleave(k * k)
        a, b = tile_of[self.pairs[:, 0]], tile_of[self.pairs[:, 1]]
        meet = (a >= 0) & (b >= 0) & (a != b)
        a, b = a[meet], b[meet]  # tiles some interaction joins
        index = torch.arange(len(tops))
        t_r, t_c = index // max(1, len(cols)), index % max(1, len(cols))
        colour = (t_r + t_c) % 2  # the checkerboard of tiles
        if bool((colour[a] == colour[b]).any()):  # diagonal terms: tiles meet at corners
            colour = 2 * (t_r % 2) + t_c % 2
        if bool((colour[a] == colour[b]).any()):  # a torus whose tiles meet round the wrap
            colour = _greedy(len(tops), a, b)
        return Blocks(tops, sites, colour)


def _greedy(n_tiles: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A greedy colouring of ``n_tiles`` tiles joined where ``a[e]`` meets ``b[e]``."""
    pairs = torch.unique(torch.cat([torch.stack([a, b], 1), torch.stack([b, a], 1)]), dim=0)
    degree = torch.bincount(pairs[:, 0], minlength=n_tiles)
    width = 1 + (int(degree.max()) if len(pairs) else 0)
    table = np.repeat(np.arange(n_tiles)[:, None], width, 1)  # unused slots repeat the tile
    first = torch.cumsum(degree, 0) - degree
    slot = 1 + torch.arange(len(pairs)) - first[pairs[:, 0]]
    table[pairs[:, 0].numpy(), slot.numpy()] = pairs[:, 1].numpy()
    return torch.from_numpy(greedy_colouring(table))
