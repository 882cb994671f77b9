"""Importance sampling of a pairwise binary target from a factorised proposal.

``N`` states are drawn from ``q`` in batches from one seeded generator; each batch's log weights
``log p~(x) - log q(x)`` are folded into running sums (``weights.WeightSums``) and dropped, so
memory stays at one batch however large ``N`` and the lattice are (and the ``3 sqrt(N)`` largest
log weights). The estimates: ``log Z``, the marginals ``P(x_i = +1)``, their delta-method error
bars, the Kish ESS, and the Pareto ``k`` of the weights' tail (``pareto``).

The error bars are only as good as the weights: when ``ESS`` is a handful of draws, the
weights' variance itself is badly estimated and ``se(log Z^)`` understates the error (the
estimate of ``log Z`` is also biased low, by about ``se^2 / 2``, since ``log`` is concave).
``pareto_k``, the usual diagnostic of a weighted estimate (PSIS), is fitted where the tail
allows; on the Ising windows it told no more than the ESS about the bar (README).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from lsbcore.cases import MAX_SEED
from lsbcore.checks import integer
from lsbcore.importance import pareto
from lsbcore.importance.mean_field import MeanField, mean_field, mean_field_proposal
from lsbcore.importance.proposal import FactorisedProposal, check_single_field, field_proposal
from lsbcore.importance.weights import WeightSums

#: Proposals by name: the field alone, or the naive mean-field fit.
PROPOSALS = ("field", "mean field")
MAX_SAMPLES = 10_000_000
#: Draws per batch: at most this many site values (8 MiB of float64) held at once.
BATCH_VALUES = 2**20


@dataclass(frozen=True)
class ImportanceEstimate:
    """What ``N`` weighted draws say about the target.

    ``log_z``/``log_z_se``: ``log Z^`` and its delta-method standard error; ``p_plus``/
    ``p_plus_se``: ``P^(x_i = +1)`` and its standard error, in the target's layout; ``ess``:
    Kish effective sample size; ``log_w_sd``: the standard deviation of the log weights (0 when
    ``q = p``); ``proposal``: its name; ``fit``: the mean-field fit, when the
    proposal came from one; ``seconds``: wall time of the sampling; ``pareto_k``: the Pareto
    shape of the weights' right tail (``pareto.pareto_khat``: NaN where it cannot be fitted).
    """

    log_z: float
    log_z_se: float
    ess: float
    n_samples: int
    log_w_sd: float
    p_plus: torch.Tensor
    p_plus_se: torch.Tensor
    proposal: str
    fit: MeanField | None
    seconds: float
    pareto_k: float = math.nan

    @property
    def reliable(self) -> bool | None:
        """The PSIS paper's verdict: ``pareto_k`` at most ``pareto.threshold(N)``; None where
        the tail could not be fitted. On the Ising windows it did not predict whether the error
        bar covered the exact ``log Z`` (``tools.importance_coverage``)."""
        if math.isnan(self.pareto_k):
            return None
        return self.pareto_k <= pareto.threshold(self.n_samples)

    @property
    def ess_fraction(self) -> float:
        """``ESS / N``: 1 when ``q = p``, ``1 / N`` when one draw carries all the weight."""
        return self.ess / self.n_samples

    @property
    def means(self) -> torch.Tensor:
        """``E^[x_i] = 2 P^(x_i = +1) - 1``."""
        return 2.0 * self.p_plus - 1.0

    @property
    def means_se(self) -> torch.Tensor:
        return 2.0 * self.p_plus_se


def make_proposal(target, proposal) -> tuple[FactorisedProposal, MeanField | None]:
    """A proposal by name (``PROPOSALS``) or as given, checked against ``target``."""
    if isinstance(proposal, FactorisedProposal):
        if proposal.n_sites != target.n_sites:
            raise ValueError(
                f"the proposal has {proposal.n_sites} sites but the target has {target.n_sites}."
            )
        return proposal, None
    if proposal == "field":
        return field_proposal(target), None
    if proposal == "mean field":
        fit = mean_field(target)
        return mean_field_proposal(target, fit), fit
    raise ValueError(
        f"proposal must be one of {PROPOSALS} or a FactorisedProposal, got {proposal!r}."
    )


def importance_sample(
    target,
    proposal="field",
    n_samples: int = 10_000,
    seed: int = 0,
    batch_size: int | None = None,
) -> ImportanceEstimate:
    """Estimate ``log Z``, the marginals and the ESS of a one-field ``target`` from
    ``n_samples`` draws of ``proposal`` ("field", "mean field" or a ``FactorisedProposal``).

    ``batch_size`` (draws per batch) defaults to about ``2^20 / n_sites``; the result does not
    depend on it beyond rounding (the draws come from one generator stream).
    """
    target = check_single_field(target)
    n_samples = integer(n_samples, "n_samples", 2, MAX_SAMPLES)
    seed = integer(seed, "seed", 0, MAX_SEED)
    if batch_size is None:
        batch_size = max(1, BATCH_VALUES // target.n_sites)
    batch_size = integer(batch_size, "batch_size", 1, MAX_SAMPLES)
    start = time.perf_counter()
    q, fit = make_proposal(target, proposal)
    generator = torch.Generator().manual_seed(seed)
    sums = WeightSums(target.n_sites, keep=pareto.tail_size(n_samples) + 1)
    for first in range(0, n_samples, batch_size):
        x = q.sample(min(batch_size, n_samples - first), generator)  # [b, n]
        sums.add(x, target.log_prob(x) - q.log_prob(x))
    return ImportanceEstimate(
        log_z=sums.log_z,
        log_z_se=sums.log_z_se,
        ess=sums.ess,
        n_samples=n_samples,
        log_w_sd=sums.log_w_sd,
        p_plus=sums.p_plus.reshape(target.shape),
        p_plus_se=sums.p_plus_se.reshape(target.shape),
        proposal=q.name,
        fit=fit,
        seconds=time.perf_counter() - start,
        pareto_k=pareto.pareto_khat(sums.top, n_samples),
    )
