"""The bimodal preset: where every local sampler fails.

A 16 x 16 Ising posterior with a free boundary, no data (``alpha = 0``, or a very weak field)
and a coupling far above the critical ``lambda_c = log(1 + sqrt 2) / 2 ~ 0.44``: almost all the
mass sits near the two uniform states, all +1 and all -1, equally likely by symmetry. A
single-site (or checkerboard) chain crosses from one to the other only through states with a
domain wall across the lattice, about ``exp(-2 lambda L)`` less likely, so it stays in the mode
it starts in.
"""

from __future__ import annotations

import torch

from lsbcore.checks import integer, real
from lsbcore.targets.ising import IsingPosterior

BIMODAL_SIZE = 16
BIMODAL_LAMBDA = 0.8


def bimodal_ising(
    size: int = BIMODAL_SIZE, lam: float = BIMODAL_LAMBDA, data: float = 0.0, seed: int = 0
) -> IsingPosterior:
    """The ``size x size`` free-boundary Ising posterior with coupling ``lam`` and field
    ``alpha = data * N(0, 1)`` per site (seeded; ``data = 0``: exactly symmetric modes)."""
    size = integer(size, "size", 2, 256)
    lam = real(lam, "lam", 0.0, 10.0)
    data = real(data, "data", 0.0, 10.0)
    generator = torch.Generator().manual_seed(integer(seed, "seed", 0, 2**63 - 1))
    alpha = data * torch.randn(size, size, generator=generator, dtype=torch.float64)
    return IsingPosterior(alpha, lam, "free")
