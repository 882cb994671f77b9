"""The Ising posterior for binary segmentation (spec section 1), a ``PairwiseTarget``.

    log p~(x) = sum_i alpha_i x_i + lambda * sum_{(i,j) in E} x_i x_j,   x in {-1, +1}^(H x W)

The field is the image term ``alpha`` and every lattice edge has weight ``lambda``, or
``lambda * c_ij`` with per-edge factors ``c`` (contrast-sensitive smoothing:
``segmentation.contrast``); the samplers' questions (log-ratios, their updates, conditionals)
are answered by ``PairwiseTarget``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from lsbcore.checks import ArgumentTypeError
from lsbcore.targets.base import MAX_SITES, MAX_VALUES, as_real_tensor, check_beta
from lsbcore.targets.pairwise_target import PairwiseTarget

BOUNDARIES = ("free", "periodic")
# The square lattice's critical coupling (Onsager): above it the prior alone is ordered, so a
# region the data says little about has two nearly equally likely labellings
CRITICAL_LAMBDA = math.log(1 + math.sqrt(2)) / 2  # 0.4407


def lattice_edges(height: int, width: int, boundary: str) -> torch.Tensor:
    """Edges ``[E, 2]`` of the 4-neighbour lattice, each counted once.

    Periodic boundary: a side of length 2 joins its two sites twice (the direct edge and the
    wrap-around edge: the torus is a multigraph there); a side of length 1 would give a
    self-loop, whose term ``x_i * x_i = 1`` is constant, so it is dropped.
    """
    index = torch.arange(height * width).view(height, width)
    pairs = [
        (index[:, :-1].reshape(-1), index[:, 1:].reshape(-1)),
        (index[:-1, :].reshape(-1), index[1:, :].reshape(-1)),
    ]
    if boundary == "periodic":
        if width > 1:
            pairs.append((index[:, -1], index[:, 0]))
        if height > 1:
            pairs.append((index[-1, :], index[0, :]))
    edges = torch.stack([torch.cat([a for a, _ in pairs]), torch.cat([b for _, b in pairs])], 1)
    return edges


class IsingPosterior(PairwiseTarget):
    """Unnormalised Ising posterior ``log p~(x) = <alpha, x> + lambda * sum_E x_i x_j``.

    Args:
        alpha: external field, ``[H, W]`` (one image for all chains) or ``[B, H, W]`` (one per
            chain, as in the paper's experiments). Finite real numbers.
        lam: coupling ``lambda >= 0`` (smoothness prior), finite.
        boundary: ``"free"`` (natural for images) or ``"periodic"`` (torus).
        edge_scale: None (every edge weighs ``lambda``) or ``[E]`` finite factors ``c_ij >= 0``
            in the order of ``lattice_edges``: edge ``(i, j)`` weighs ``lambda * c_ij``.
    """

    def __init__(self, alpha, lam: float, boundary: str = "free", edge_scale=None):
        alpha = as_real_tensor(alpha, "alpha")
        if alpha.dim() not in (2, 3):
            raise ValueError(
                f"alpha must have shape [H, W] or [B, H, W], got {tuple(alpha.shape)}."
            )
        if alpha.numel() == 0:
            raise ValueError(f"alpha must not be empty, got shape {tuple(alpha.shape)}.")
        if not bool(torch.isfinite(alpha).all()):
            raise ValueError("alpha must contain only finite values (no NaN or inf).")
        if isinstance(lam, torch.Tensor) and lam.numel() == 1 and lam.dtype != torch.bool:
            lam = lam.item()
        if isinstance(lam, bool | np.bool_) or not isinstance(lam, numbers.Real):
            raise ArgumentTypeError(f"lam must be a real number, got {type(lam).__name__}.")
        try:
            lam = float(lam)
        except OverflowError:  # an integer beyond float64's range
            lam = math.inf
        if not math.isfinite(lam) or lam < 0:
            raise ValueError(f"lam must be a finite number >= 0, got {lam}.")
        sites = alpha.shape[-1] * alpha.shape[-2]
        if sites > MAX_SITES or alpha.numel() > MAX_VALUES:
            raise ValueError(
                f"a lattice of at most {MAX_SITES:,} sites and {MAX_VALUES:,} field values in "
                f"all is supported, got {sites:,} sites x {alpha.numel() // sites:,} fields."
            )
        if boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}.")

        self.alpha = alpha if alpha.dim() == 3 else alpha.unsqueeze(0)  # [B or 1, H, W]
        self.lam = lam
        self.boundary = boundary
        self.height, self.width = self.alpha.shape[-2:]
        edges = lattice_edges(self.height, self.width, boundary)  # [E, 2]
        self.edge_scale = None if edge_scale is None else _edge_scale(edge_scale, len(edges))
        weights = torch.full((len(edges),), lam, dtype=torch.float64)
        if self.edge_scale is not None:
            weights = weights * self.edge_scale
        self._build((self.height, self.width), self.alpha, edges, weights)

    def chain(self, b: int) -> IsingPosterior:
        alpha = self.alpha[b if self.batch > 1 else 0]
        return IsingPosterior(alpha, self.lam, self.boundary, self.edge_scale)

    def tempered(self, beta: float) -> IsingPosterior:
        """``p~^beta``: the posterior with ``beta alpha`` and ``beta lambda``."""
        beta = check_beta(beta)
        alpha = self.alpha if self.batch > 1 else self.alpha[0]
        return IsingPosterior(alpha * beta, self.lam * beta, self.boundary, self.edge_scale)

    def colouring(self) -> torch.Tensor:
        """The checkerboard ``(row + col) % 2`` where the lattice is bipartite (free boundary or
        even sides); else the greedy colouring (an odd torus needs three colours)."""
        bipartite = self.boundary == "free" or (self.height % 2 == 0 and self.width % 2 == 0)
        if not bipartite or self.height * self.width == 1:
            return super().colouring()
        rows = torch.arange(self.height).unsqueeze(1)
        cols = torch.arange(self.width).unsqueeze(0)
        return ((rows + cols) % 2).reshape(-1)


def _edge_scale(scale, n_edges: int) -> torch.Tensor:
    """``scale`` checked: ``[n_edges]`` finite factors >= 0, as float64."""
    scale = as_real_tensor(scale, "edge_scale").reshape(-1)
    if len(scale) != n_edges:
        raise ValueError(
            f"edge_scale must hold one factor per edge ({n_edges:,}), got {len(scale):,}."
        )
    if not bool(torch.isfinite(scale).all()) or bool((scale < 0).any()):
        raise ValueError("edge_scale must hold finite factors >= 0.")
    return scale.to(torch.float64)
