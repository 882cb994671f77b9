"""A pairwise lattice's block conditionals as motif coefficients
(``lsbcore.methods.block_proposals.motif``).

For ``log p~(x) = sum_i h_i x_i + sum_E w_ij x_i x_j`` on an ``H x W`` grid, the conditional of a
tile ``B`` given the rest has

- single-site coefficients ``h_i + sum_{j not in B} w_ij x_j``: the local field with the tile's
  sites set to 0 (so it reads nothing inside the tile, as a proposal's context must);
- pair coefficients ``w_ij`` for the tile's horizontal, vertical and anti-diagonal edges, and no
  triangles.

That is the whole conditional when every edge inside a tile is one of those three kinds; a
target with another edge inside some tile (a diagonal, a long-range edge) is refused when the
sampler is built. Then ``log p~(y) - log p~(x) = (phi(y) - phi(x)) . c`` for a move of the tile
alone: the exact target ratio, one dot product per tile.
"""

from __future__ import annotations

import torch

from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling


class PairwiseBlocks:
    """Coefficients and exact log-ratios of ``k x k`` tiles of a ``PairwiseTarget`` grid."""

    def __init__(self, target, motif: GridMotif, tiling: Tiling):
        self.target, self.motif = target, motif
        h, w = tiling.height, tiling.width
        i, j = target.edges.min(1).values, target.edges.max(1).values
        weight = target.edge_weights
        row_i, col_i, row_j, col_j = i // w, i % w, j // w, j % w
        kinds = {
            "horizontal": (row_i == row_j) & (col_j == col_i + 1),
            "vertical": (col_i == col_j) & (row_j == row_i + 1),
            "anti-diagonal": (row_j == row_i + 1) & (col_j == col_i - 1),
        }
        self.maps = {}  # weight of each kind of edge by its first site (row-major), [H * W]
        placed = torch.zeros(len(i), dtype=torch.bool)
        for kind, is_kind in kinds.items():
            start = i[is_kind] if kind != "anti-diagonal" else i[is_kind]
            self.maps[kind] = torch.zeros(h * w, dtype=torch.float64).index_add_(
                0, start, weight[is_kind]
            )
            placed |= is_kind
        self._check_other_edges(tiling, i[~placed], j[~placed])
        # each pair term of the motif by kind: its first site in the tile (row-major)
        self._first = {
            kind: motif.terms[motif.term_slice(kind), 0] for kind in ("horizontal", "vertical")
        }
        self._first["anti-diagonal"] = motif.terms[motif.term_slice("anti-diagonal"), 0]

    def _check_other_edges(self, tiling: Tiling, i: torch.Tensor, j: torch.Tensor) -> None:
        """Refuse a target with an edge outside the motif's kinds inside some tile."""
        if len(i) == 0:
            return
        for offset in range(len(tiling.offsets)):
            blocks = tiling.blocks(offset)
            tile_of = torch.full((tiling.height * tiling.width,), -1, dtype=torch.long)
            tile_of[blocks.sites.reshape(-1)] = torch.arange(len(blocks.tops)).repeat_interleave(
                self.motif.n
            )
            inside = (tile_of[i] >= 0) & (tile_of[i] == tile_of[j])
            if bool(inside.any()):
                a, b = int(i[inside][0]), int(j[inside][0])
                w = tiling.width
                raise ValueError(
                    f"neural-block's {self.motif.k} x {self.motif.k} blocks model edges between "
                    "horizontal, vertical and anti-diagonal neighbours; this target joins sites "
                    f"({a // w}, {a % w}) and ({b // w}, {b % w}) inside a block."
                )

    def coefficients(self, x: torch.Tensor, blocks: Blocks) -> torch.Tensor:
        """The motif coefficients of every chain's tiles, ``[B, T_b, n_terms]`` float64, from
        ``x [B, n]``; they read only sites outside the tiles. ``blocks`` are tiles of one
        colour (no term joins two of them): every tile's sites are set to 0 at once."""
        sites = blocks.sites.to(x.device)  # [T_b, k^2]
        outside = x.clone()
        outside[:, sites.reshape(-1)] = 0.0
        field = self.target.local_field(outside)[:, sites]  # [B, T_b, k^2]
        c = torch.zeros(*field.shape[:2], self.motif.n_terms, dtype=torch.float64, device=x.device)
        c[..., self.motif.term_slice("site")] = field
        for kind, first in self._first.items():
            w = self.maps[kind].to(x.device)[sites[:, first.to(x.device)]]  # [T_b, terms]
            c[..., self.motif.term_slice(kind)] = w.unsqueeze(0)
        return c

    def log_ratios(self, x: torch.Tensor, blocks: Blocks, y: torch.Tensor, c: torch.Tensor):
        """``log p~(x with tile t set to y[:, t]) - log p~(x)`` for each tile alone (``y [B, T_b,
        k^2]``), ``[B, T_b]``: exact, from the tiles' coefficients ``c [B, T_b, n_terms]``."""
        x_blocks = x[:, blocks.sites]
        return self.motif.log_weights(y, c) - self.motif.log_weights(x_blocks, c)
