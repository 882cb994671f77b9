"""Discrete Metropolis-Hastings with independent bit flips: the "random walk Metropolis-Hastings"
baseline of Jaini, Nielsen and Welling (AISTATS 2021, "Sampling in combinatorial spaces with
SurVAE flow augmented MCMC"), labelled "discrete MH" in their tables.

Every site of ``x in {-1, +1}^n`` flips independently with probability ``p``; the flipped set
``F`` has ``q(x' | x) = p^|F| (1 - p)^(n - |F|)``, the same both ways, so the move is accepted
with ``min(1, p~(x') / p~(x))``: one target evaluation (the proposed state) per step.

The option is ``flips``, the expected number of flipped sites ``n p`` (default 1, so
``p = 1/n``): a default in flips fits every size of target, where one flip probability would
flip hundreds of sites of a large lattice (and be refused almost always) or none of a small one.
It lies in ``[0.01, n / 2]``: ``p <= 1/2`` (beyond, the proposal is the complement's, mirrored).
A step counts ``round(flips)`` site updates (at least 1), the sites it moves on average, as PAS
counts its mean path length, so sweeps compare with single-site Metropolis.
"""

from __future__ import annotations

import math

import torch

from lsbcore.checks import real
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.samplers.gradient.gwg import MAX_EXACT_SITES, enumerated_states, state_code
from lsbcore.targets.base import MAX_SITES, Target

MIN_FLIPS, MAX_FLIPS = 0.01, MAX_SITES / 2


class BitFlipMetropolis(BatchedSampler):
    """Every site flips with probability ``p = flips / n``, then one Metropolis test (see the
    module docstring). Registry name ``bit-flip-mh``."""

    name = "bit-flip-mh"
    uses_ratios = False  # the step scores the proposed state only
    # a step counts round(flips) updates but may move any number of sites: the comparison's
    # marginal then adds whole states, not single flips
    moves_one_site = False

    def __init__(self, target: Target, n_chains: int, flips: float = 1.0, **common):
        flips = real(flips, "flips", MIN_FLIPS, MAX_FLIPS)
        super().__init__(target, n_chains, **common)
        if flips > self.n_sites / 2:
            raise ValueError(
                f"bit-flip-mh: flips must be at most half the target's {self.n_sites} sites "
                f"({self.n_sites / 2:g}: each site flips with probability flips / n <= 1/2), "
                f"got {flips:g}."
            )
        self.flips = flips
        self.flip_prob = flips / self.n_sites
        self.sites_per_step = max(1, round(flips))

    @property
    def evals_per_step(self) -> int:
        return 1  # log p~ at the proposed state

    def _step(self) -> None:
        u = self._uniforms(self.n_chains, self.n_sites + 1)
        flips = u[:, :-1] < self.flip_prob
        x_new = torch.where(flips, -self._x, self._x)
        log_ratio = self.target.log_ratio(self._x, x_new)
        # min(0, log ratio); zero mass (-inf) or a faulty target (NaN) is never entered
        log_a = torch.nan_to_num(log_ratio, nan=-math.inf).clamp(max=0.0)
        accept = torch.log(u[:, -1]) < log_a
        self._last = StepInfo(accepted=accept, accept_prob=torch.exp(log_a), extra={"flips": flips})
        self._move(x_new, accept, log_ratio)

    def transition_probabilities(self) -> torch.Tensor:
        """The law of the next state from each chain's state, ``[B, 2^n]`` float64 (columns:
        state codes of ``lsbcore.exact.states``), for targets of at most 12 sites: every state
        ``y`` at Hamming distance ``d`` is proposed with ``p^d (1 - p)^(n - d)`` and accepted
        with ``min(1, p~(y) / p~(x))``; rejected mass stays on the diagonal."""
        if self.n_sites > MAX_EXACT_SITES or self.target.batch != 1:
            raise ValueError(
                f"exact one-step laws enumerate all 2^n states of one target: at most "
                f"{MAX_EXACT_SITES} sites and one parameter set, got {self.n_sites} sites and "
                f"{self.target.batch} sets."
            )
        with torch.no_grad():
            states = enumerated_states(self.n_sites, self.device)  # [N, n]
            log_p_all = self.target.log_prob(states)  # [N]
            d = (self._x.unsqueeze(1) != states).sum(-1).double()  # [B, N]
            log_q = d * math.log(self.flip_prob) + (self.n_sites - d) * math.log1p(-self.flip_prob)
            log_a = (log_p_all - self._log_p.unsqueeze(1)).clamp(max=0.0)
            probs = torch.exp(log_q + log_a)
            here = state_code(self._x).unsqueeze(1)
            probs.scatter_(1, here, 0.0)
            return probs.scatter_(1, here, 1.0 - probs.sum(1, keepdim=True))
