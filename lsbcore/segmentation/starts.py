"""Where a segmentation's chains start: at the data, at random, or half and half.

"data" puts every site at its likelier class (the sign of the field ``alpha``: the MAP at
lambda = 0), which is close to where a photo's posterior lives; "random" draws every site
uniformly, far from it. The settled indicator (split R-hat) only sees disagreement that the
starts let appear, so "mixed" (the default: even-numbered chains from the data, odd ones at
random) pairs fast arrival with over-dispersed starts.
"""

from __future__ import annotations

import torch

from lsbcore.samplers.base import uniform_start

STARTS = ("mixed", "data", "random")
START_LABELS = {
    "mixed": "half the chains from the data, half at random",
    "data": "every site at its likelier class",
    "random": "every site uniformly at random",
}


def photo_starts(alpha, n_chains: int, start: str = "mixed", seed: int = 0) -> torch.Tensor:
    """Starting states ``[n_chains, H, W]`` of +-1 for the field ``alpha`` ``[H, W]``."""
    if start not in STARTS:
        raise ValueError(f"start must be one of {', '.join(STARTS)}, got {start!r}.")
    alpha = torch.as_tensor(alpha, dtype=torch.float64)
    if alpha.dim() != 2:
        raise ValueError(f"alpha must have shape [H, W], got {tuple(alpha.shape)}.")
    likelier = torch.where(alpha >= 0, 1.0, -1.0).to(torch.float64)
    random = uniform_start(tuple(alpha.shape), n_chains, seed=seed + 1)
    if start == "random":
        return random
    data = likelier.expand(n_chains, *alpha.shape).clone()
    if start == "data":
        return data
    chains = torch.arange(n_chains).view(-1, 1, 1)
    return torch.where(chains % 2 == 0, data, random)


def chain_starts(n_chains: int, start: str) -> list[str]:
    """Each chain's start, in words (for labels): "data" or "random"."""
    if start == "mixed":
        return ["data" if b % 2 == 0 else "random" for b in range(n_chains)]
    return [start] * n_chains
