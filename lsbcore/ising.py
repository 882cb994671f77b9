"""The Ising posterior for binary segmentation (spec section 1).

    log p~(x) = sum_i alpha_i x_i + lambda * sum_{(i,j) in E} x_i x_j,   x in {-1, +1}^(H x W)

This file is the *target* side of the seam between target and sampler. A sampler only needs:

- ``flip_log_ratios(x)``: ``s_i(x) = log p~(x with i flipped) - log p~(x)`` for every site;
- ``neighbourhood`` / ``coupling``: which sites' log-ratios change when site ``i`` flips, and by
  how much: ``s_i -> -s_i`` and ``s_j -> s_j + coupling[i, k] * x_j * x_i`` (``x_i`` before the
  flip) for ``j = neighbourhood[i, k]``. For the Ising model ``coupling = 4 * lambda * m_ij``
  with ``m_ij`` the number of edges between ``i`` and ``j``.

Any pairwise binary MRF fits the same two tables, so a second target is a new file.
"""

from __future__ import annotations

import math

import numpy as np
import torch

BOUNDARIES = ("free", "periodic")


def _as_float_tensor(value, name: str) -> torch.Tensor:
    complex_ = value.is_complex() if isinstance(value, torch.Tensor) else np.iscomplexobj(value)
    if complex_:
        raise ValueError(f"{name} must hold real numbers, not complex ones.")
    if not isinstance(value, torch.Tensor):
        try:
            value = torch.as_tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(
                f"{name} must be a numeric array, got {type(value).__name__}."
            ) from err
    if not (value.is_floating_point() or value.dtype in (torch.int32, torch.int64)):
        raise ValueError(f"{name} must hold real numbers, got dtype {value.dtype}.")
    return value.to(torch.float64)


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


class IsingPosterior:
    """Unnormalised Ising posterior ``log p~(x) = <alpha, x> + lambda * sum_E x_i x_j``.

    Args:
        alpha: external field, ``[H, W]`` (one image for all chains) or ``[B, H, W]`` (one per
            chain, as in the paper's experiments). Finite real numbers.
        lam: coupling ``lambda >= 0`` (smoothness prior), finite.
        boundary: ``"free"`` (natural for images) or ``"periodic"`` (torus).
    """

    def __init__(self, alpha, lam: float, boundary: str = "free"):
        alpha = _as_float_tensor(alpha, "alpha")
        if alpha.dim() not in (2, 3):
            raise ValueError(
                f"alpha must have shape [H, W] or [B, H, W], got {tuple(alpha.shape)}."
            )
        if alpha.numel() == 0:
            raise ValueError(f"alpha must not be empty, got shape {tuple(alpha.shape)}.")
        if not bool(torch.isfinite(alpha).all()):
            raise ValueError("alpha must contain only finite values (no NaN or inf).")
        if (
            isinstance(lam, bool)
            or not isinstance(lam, (int, float))
            and not (isinstance(lam, torch.Tensor) and lam.numel() == 1)
        ):
            raise ValueError(f"lam must be a real number, got {type(lam).__name__}.")
        lam = float(lam)
        if not math.isfinite(lam) or lam < 0:
            raise ValueError(f"lam must be a finite number >= 0, got {lam}.")
        if boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}.")

        self.alpha = alpha if alpha.dim() == 3 else alpha.unsqueeze(0)  # [B or 1, H, W]
        self.lam = lam
        self.boundary = boundary
        self.height, self.width = self.alpha.shape[-2:]
        self.n_sites = self.height * self.width
        self.edges = lattice_edges(self.height, self.width, boundary)  # [E, 2]
        self.neighbourhood, self.coupling = self._flip_tables()

    @property
    def shape(self) -> tuple[int, int]:
        return (self.height, self.width)

    @property
    def batch(self) -> int:
        """Number of alpha images: 1 (shared) or B (one per chain)."""
        return self.alpha.shape[0]

    def _flip_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``neighbourhood [D, K]`` and ``coupling [D, K]``; column 0 is the site itself.

        Neighbours are listed once each, with their edge multiplicity folded into ``coupling``;
        unused slots repeat the site itself with coupling 0, so a sampler can gather and write
        a fixed-width neighbourhood without duplicates that disagree.
        """
        d = self.n_sites
        both = torch.cat([self.edges, self.edges.flip(1)])  # each edge in both directions
        # distinct (site, neighbour) pairs with their multiplicity, sorted by site then neighbour
        keys, count = torch.unique(both[:, 0] * d + both[:, 1], return_counts=True)
        pairs = torch.stack([keys // d, keys % d], 1)
        site = pairs[:, 0]
        degree = torch.bincount(site, minlength=d)
        first = torch.cumsum(degree, 0) - degree  # where each site's run of pairs starts
        slot = 1 + torch.arange(len(pairs)) - first[site]
        k = 1 + int(degree.max()) if len(pairs) else 1
        neighbourhood = torch.arange(d).unsqueeze(1).repeat(1, k)
        coupling = torch.zeros(d, k, dtype=torch.float64)
        neighbourhood[site, slot] = pairs[:, 1]
        coupling[site, slot] = 4.0 * self.lam * count.double()
        return neighbourhood, coupling

    def _check_state(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or tuple(x.shape[1:]) != self.shape:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must be a tensor of shape [B, {self.height}, {self.width}], got {got}."
            )
        if self.batch not in (1, x.shape[0]):
            raise ValueError(
                f"x has {x.shape[0]} chains but alpha holds {self.batch} images (one per chain)."
            )
        return x.to(torch.float64)

    def _alpha_on(self, device: torch.device) -> torch.Tensor:
        return self.alpha.to(device)

    def local_field(self, x: torch.Tensor) -> torch.Tensor:
        """``alpha_i + lambda * sum_{j ~ i} m_ij x_j`` for every site, ``[B, H, W]``."""
        x = self._check_state(x)
        flat = x.reshape(x.shape[0], -1)
        edges = self.edges.to(x.device)
        neighbour_sum = torch.zeros_like(flat)
        neighbour_sum.index_add_(1, edges[:, 0], flat[:, edges[:, 1]])
        neighbour_sum.index_add_(1, edges[:, 1], flat[:, edges[:, 0]])
        return self._alpha_on(x.device) + self.lam * neighbour_sum.view_as(x)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Unnormalised log posterior ``log p~(x)`` per chain, ``[B]`` (float64)."""
        x = self._check_state(x)
        flat = x.reshape(x.shape[0], -1)
        edges = self.edges.to(x.device)
        data = (self._alpha_on(x.device) * x).sum(dim=(1, 2))
        pairs = (flat[:, edges[:, 0]] * flat[:, edges[:, 1]]).sum(1)
        return data + self.lam * pairs

    def log_prob_from_ratios(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """``log p~(x)`` ``[B]`` from states ``x [B, D]`` and their flip log-ratios ``s [B, D]``.

        For any pairwise +-1 model ``sum_i s_i = -2 sum_i alpha_i x_i - 4 sum_E lambda x_i x_j``,
        so ``log p~ = (sum_i alpha_i x_i) / 2 - (sum_i s_i) / 4``: two sums, no neighbour lookups.
        """
        alpha = self._alpha_on(x.device).reshape(self.batch, -1)
        return 0.5 * (alpha * x).sum(1) - 0.25 * s.sum(1)

    def flip_log_ratios(self, x: torch.Tensor) -> torch.Tensor:
        """``s_i(x) = -2 x_i (alpha_i + lambda * sum_{j~i} x_j)``, ``[B, H, W]`` (float64)."""
        x = self._check_state(x)
        return -2.0 * x * self.local_field(x)
