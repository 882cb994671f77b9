"""The collapse of importance sampling in high dimension (Goodfellow et al., ch. 17).

A factorised proposal misses each site's coupling to its neighbours by a little; the log
weight ``log p~(x) - log q(x)`` is a sum of such misfits over all ``n`` sites, so its variance
grows about linearly in ``n`` and the weights ``w = exp(log w)`` become log-normal with a
spread that grows like ``exp(n)``: one draw ends up carrying almost all the weight. The Kish
``ESS / N`` falls towards ``1 / N`` as the lattice grows, whatever ``N`` was affordable.

``collapse_study`` measures that: one row per (lattice, proposal) with ``ESS / N``, the
Pareto ``k`` of the weights' tail, the estimate of ``log Z`` and its error bar, and the exact
``log Z`` where it can be computed.
``synthetic_posterior`` is the data model of the paper's cases on any side, free boundary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from lsbcore.cases import MAX_SEED, square_truth
from lsbcore.checks import integer, real
from lsbcore.importance.estimate import PROPOSALS, importance_sample
from lsbcore.importance.reference import exact_log_partition
from lsbcore.targets.ising import IsingPosterior

#: Sides of the default study; the largest lattice has 4,096 sites.
SIDES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
MAX_SIDE = 128


@dataclass(frozen=True)
class CollapseRow:
    """One lattice under one proposal: ``ess_fraction = ESS / N``; ``exact_log_z`` is None
    where no exact value is within reach."""

    shape: tuple
    sites: int
    proposal: str
    n_samples: int
    ess: float
    ess_fraction: float
    log_z: float
    log_z_se: float
    log_w_sd: float
    exact_log_z: float | None
    converged: bool | None  # the mean-field fit's, None for the field proposal
    seconds: float
    pareto_k: float = math.nan  # the weights' tail (estimate.ImportanceEstimate.pareto_k)

    @property
    def error(self) -> float | None:
        """``log Z^ - log Z`` where the exact value is known."""
        return None if self.exact_log_z is None else self.log_z - self.exact_log_z


def synthetic_posterior(
    side: int, lam: float = 0.5, mu: float = 1.0, sigma: float = 3.0, seed: int = 0
) -> IsingPosterior:
    """``alpha = mu * truth + U(-sigma, sigma)`` on a ``side x side`` lattice with a free
    boundary (the paper's data model: ``truth`` is +1 on the central square)."""
    side = integer(side, "side", 1, MAX_SIDE)
    lam, mu = real(lam, "lam", 0.0), real(mu, "mu")
    sigma, seed = real(sigma, "sigma", 0.0), integer(seed, "seed", 0, MAX_SEED)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.rand(side, side, generator=generator, dtype=torch.float64) * 2.0 - 1.0
    return IsingPosterior(mu * square_truth(side) + sigma * noise, lam, "free")


def collapse_study(
    targets: Iterable,
    proposals=("field",),
    n_samples: int = 10_000,
    seed: int = 0,
) -> list[CollapseRow]:
    """Importance-sample each one-field target with each proposal (names from ``PROPOSALS``),
    ``n_samples`` draws each, the same seed for all; rows in the order given."""
    proposals = tuple(proposals)
    for name in proposals:
        if name not in PROPOSALS:
            raise ValueError(f"proposals must be among {PROPOSALS}, got {name!r}.")
    rows = []
    for target in targets:
        exact = exact_log_partition(target)
        for name in proposals:
            est = importance_sample(target, name, n_samples, seed)
            rows.append(
                CollapseRow(
                    shape=tuple(target.shape),
                    sites=target.n_sites,
                    proposal=name,
                    n_samples=est.n_samples,
                    ess=est.ess,
                    ess_fraction=est.ess_fraction,
                    log_z=est.log_z,
                    log_z_se=est.log_z_se,
                    log_w_sd=est.log_w_sd,
                    exact_log_z=exact,
                    converged=None if est.fit is None else est.fit.converged,
                    seconds=est.seconds,
                    pareto_k=est.pareto_k,
                )
            )
    return rows
