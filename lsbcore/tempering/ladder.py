"""The ladder of inverse temperatures ``1 = beta_0 > beta_1 > ... > beta_{R-1} >= 0`` of parallel
tempering: checked when given, geometric by default, and optionally adapted during burn-in toward
equal swap rates between neighbours.

Adaptation is stochastic approximation (Robbins-Monro) on the log spacings
``rho_r = log(log beta_r - log beta_{r+1})``: a pair that swaps more often than the average gets
a wider gap, one that swaps less a narrower one, with step sizes ``gamma_k = gamma / (1 + k)^0.6``
that shrink so the ladder settles; the ends stay at 1 and ``beta_min``. It runs only during
burn-in: a ladder that keeps moving with the chain's history would make the sampled chain
non-Markov, so after burn-in the ladder is fixed and the chain is a valid MCMC of the product
of ``p^beta_r``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from lsbcore.checks import integer, real

MAX_REPLICAS = 64
ADAPT_RATE = 0.5  # gamma: the first steps move a spacing by up to e^{+-0.5}
ADAPT_DECAY = 0.6  # gamma_k = gamma / (1 + k)^0.6: sum diverges, sum of squares converges


def check_ladder(betas) -> np.ndarray:
    """``betas`` as a float64 array, refusing anything that is not a tempering ladder."""
    if isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__"):
        raise ValueError(
            f"the ladder must be a sequence of inverse temperatures, got {type(betas).__name__}."
        )
    values = []
    for k, beta in enumerate(betas):
        if isinstance(beta, (bool, np.bool_)) or not isinstance(beta, numbers.Real):
            raise ValueError(f"beta_{k} must be a real number, got {beta!r}.")
        values.append(float(beta))
    ladder = np.asarray(values, dtype=np.float64)
    if not 2 <= len(ladder) <= MAX_REPLICAS:
        raise ValueError(
            f"the ladder needs between 2 and {MAX_REPLICAS} inverse temperatures, "
            f"got {len(ladder)}."
        )
    bad = np.flatnonzero(~np.isfinite(ladder) | (ladder < 0) | (ladder > 1))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"every beta must lie in [0, 1]; beta_{k} is {ladder[k]:g}.")
    if ladder[0] != 1.0:
        raise ValueError(
            f"the first beta must be 1 (the cold replica samples the target), got {ladder[0]:g}."
        )
    steps = np.diff(ladder)
    if (steps >= 0).any():
        k = int(np.flatnonzero(steps >= 0)[0])
        raise ValueError(
            "the ladder must be strictly decreasing (1 = beta_0 > beta_1 > ...); "
            f"beta_{k + 1} = {ladder[k + 1]:g} is not below beta_{k} = {ladder[k]:g}."
        )
    return ladder


def geometric_ladder(n_replicas: int, beta_min: float) -> np.ndarray:
    """``beta_r = beta_min^(r / (R - 1))``: equal ratios from 1 down to ``beta_min`` (equal
    spacing in log beta, a good start when the heat capacity is flat)."""
    n_replicas = integer(n_replicas, "n_replicas", 2, MAX_REPLICAS)
    beta_min = real(beta_min, "beta_min", 0.0, 1.0)
    if not 0 < beta_min < 1:
        raise ValueError(
            f"beta_min must lie strictly between 0 and 1 for a geometric ladder, got {beta_min:g}"
            " (give the ladder itself to end at beta = 0)."
        )
    ladder = beta_min ** (np.arange(n_replicas) / (n_replicas - 1))
    ladder[0], ladder[-1] = 1.0, beta_min
    return ladder


class LadderAdaptation:
    """Robbins-Monro on the log spacings toward equal swap rates (module docstring).

    ``update(rates)`` takes the mean swap acceptance probability of every pair over the last
    window and returns the new ladder.
    """

    def __init__(self, betas: np.ndarray, rate: float = ADAPT_RATE):
        betas = check_ladder(betas)
        if betas[-1] <= 0:
            raise ValueError(
                "an adapted ladder moves in log beta, so its hottest beta must be above 0, "
                f"got {betas[-1]:g}."
            )
        self.rate = real(rate, "adapt rate", 0.0, 10.0)
        self.span = -math.log(betas[-1])  # log beta_0 - log beta_{R-1}, kept fixed
        self.rho = np.log(-np.diff(np.log(betas)))  # [R - 1]
        self.n_updates = 0

    def ladder(self) -> np.ndarray:
        spacing = np.exp(self.rho - self.rho.max())
        spacing *= self.span / spacing.sum()
        log_beta = -np.concatenate([[0.0], np.cumsum(spacing)])
        betas = np.exp(log_beta)
        betas[-1] = math.exp(-self.span)  # the ends do not drift by rounding
        betas[0] = 1.0
        return betas

    def update(self, rates) -> np.ndarray:
        rates = np.asarray(rates, dtype=np.float64)
        if rates.shape != self.rho.shape:
            raise ValueError(f"rates must have {self.rho.size} entries, got {rates.shape}.")
        gamma = self.rate / (1.0 + self.n_updates) ** ADAPT_DECAY
        self.rho = self.rho + gamma * (rates - rates.mean())
        self.n_updates += 1
        return self.ladder()
