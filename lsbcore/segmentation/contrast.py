"""Contrast-sensitive smoothing: a lattice edge between unlike colours couples less.

GrabCut's pairwise term (Rother, Kolmogorov and Blake 2004, after Boykov and Jolly 2001) weighs
the edge ``(i, j)`` by ``exp(-beta |y_i - y_j|^2)``, with ``y`` the pixels' colours and
``beta = 1 / (2 <|y_i - y_j|^2>)``, the mean over the lattice's edges: an edge of average
contrast keeps ``exp(-1/2)`` of the coupling, one inside a flat region all of it. The factors
scale ``lambda`` edge by edge (``IsingPosterior(edge_scale=...)``), so ``lambda`` stays the
coupling between like colours and a boundary of the object's colour costs less to cut.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.targets.ising import lattice_edges


def contrast_scale(colours: np.ndarray, boundary: str = "free") -> torch.Tensor:
    """The factors ``exp(-beta |y_i - y_j|^2)`` ``[E]`` of the lattice's edges, in the order of
    ``lattice_edges``, for ``colours`` ``[H, W]`` (grey) or ``[H, W, C]``. A flat image (no
    contrast anywhere) gives factors of 1."""
    colours = np.asarray(colours, dtype=np.float64)
    height, width = colours.shape[:2]
    flat = torch.from_numpy(colours.reshape(height * width, -1))
    edges = lattice_edges(height, width, boundary)
    squared = (flat[edges[:, 0]] - flat[edges[:, 1]]).square().sum(1)  # [E]
    mean = float(squared.mean()) if len(squared) else 0.0
    if mean <= 0.0:
        return torch.ones(len(edges), dtype=torch.float64)
    return torch.exp(-squared / (2.0 * mean))
