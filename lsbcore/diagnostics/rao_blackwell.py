"""Rao-Blackwellised marginals: average each site's conditional probability, not its spin.

For a state ``x`` drawn from the target, ``E[P(x_i = +1 | x_-i)] = P(x_i = +1)`` (the tower
rule), and the conditional has no more variance than the spin ``(x_i + 1) / 2`` it replaces
(``Var[E[Y | Z]] <= Var[Y]``): averaging it over a chain's draws gives the same marginal with a
smaller Monte Carlo error. That holds for any sampler whose states are draws of the target,
whatever moved them (Gelfand and Smith 1990; Robert and Casella, *Monte Carlo Statistical
Methods*, 4.7).

The conditional comes from the flip log-ratio ``s_i = log p~(x^i) - log p~(x)`` that every
sampler keeps: ``P(x_i = -x_i | x_-i) = sigmoid(s_i)``, so ``P(x_i = +1 | x_-i) =
sigmoid(-x_i s_i)`` (for ``x_i = +1`` the flip goes to -1, for ``x_i = -1`` to +1), computed in
log space with no ``exp`` of ``s`` itself.
"""

from __future__ import annotations

import torch

from lsbcore.samplers.interface import ChainSampler

__all__ = ["conditional_probability", "site_probabilities"]


def conditional_probability(x: torch.Tensor, log_ratios: torch.Tensor) -> torch.Tensor:
    """``P(x_i = +1 | x_-i) = sigmoid(-x_i s_i)`` per site, float64, ``x``'s shape.

    ``x`` holds +-1 and ``log_ratios`` the flip log-ratios ``s`` of the same states."""
    if x.shape != log_ratios.shape:
        raise ValueError(
            f"x {tuple(x.shape)} and log_ratios {tuple(log_ratios.shape)} must have one shape."
        )
    return torch.sigmoid(-x.double() * log_ratios.double())


def site_probabilities(sampler: ChainSampler) -> torch.Tensor:
    """``P(x_i = +1 | x_-i)`` ``[B, *shape]`` at a sampler's current states (on the CPU), from
    the log-ratios it keeps cached: O(sites), no target evaluation."""
    x = sampler.x.detach()
    return conditional_probability(x, sampler.log_ratios.detach()).cpu()
