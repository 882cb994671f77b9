"""Uninformed single-site baselines (spec 3): pick a site uniformly, then flip it with probability

- ``gibbs``: ``t / (1 + t) = sigmoid(s_i)`` (random-scan heat bath: the site is resampled from its
  conditional, which flips it with exactly this probability);
- ``metropolis``: ``min(1, t) = exp(min(0, s_i))``.

Both are exact and O(1) per step; they show what the informed proposals buy.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.samplers.base import Sampler
from lsbcore.samplers.chain_base import StepInfo


class UniformSiteSampler(Sampler):
    RULES = ("gibbs", "metropolis")

    def __init__(
        self,
        target,
        n_chains: int,
        rule: str,
        **common,
    ):
        if rule not in self.RULES:
            raise ValueError(f"rule must be one of {self.RULES}, got {rule!r}.")
        self.name = rule
        super().__init__(target, n_chains, **common)  # seed, device, x0, resync, backend

    def flip_log_probs(self) -> torch.Tensor:
        """``log P(flip | site i proposed)`` for every site, ``[B, H, W]``."""
        with torch.no_grad():
            s = self._s[:, : self.n_sites]
            log_p = torch.nn.functional.logsigmoid(s) if self.name == "gibbs" else s.clamp(max=0.0)
            return log_p.view_as(self.x)

    def _describe_last(self, i, s_i, accept) -> StepInfo:
        p = torch.sigmoid(s_i) if self.name == "gibbs" else torch.exp(s_i.clamp(max=0.0))
        return StepInfo(site=i, accept_prob=p.squeeze(1), accepted=accept.squeeze(1))

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = P(flip | i) / D`` per chain and site, ``[B, H, W]``."""
        return torch.exp(self.flip_log_probs()) / self.n_sites

    def proposal_log_probs(self) -> torch.Tensor:
        """``log Q(i | x)``: uniform over the sites, ``[B, H, W]``."""
        return torch.full_like(self.x, -math.log(self.n_sites))  # in float64, like the rest

    def _has_kernel(self, learn: bool = False) -> bool:
        return not learn

    def _compiled_steps(self, m: int, u, trace) -> None:
        from lsbcore.backends import kernels

        last = np.zeros((self.n_chains, 4))
        chains, tables = self._kernel_chains(trace), self._kernel_tables()
        kernels.uniform_site_steps(m, chains, tables, self.name == "gibbs", u, last)
        last = torch.from_numpy(last)
        self._last_refs = (last[:, 0].long(), last[:, 1:2], last[:, 2:3] > 0.5)

    uniforms_per_step = 2  # the site, the decision

    def _step(self, u) -> None:
        i = (u[0] * self.n_sites).long().clamp_(max=self.n_sites - 1).view(-1)
        index, _, _, s_old, x_new, s_new = self._flip_neighbourhood(i)
        s_i = s_old[:, :1]
        if self.name == "gibbs":
            accept = u[1] < torch.sigmoid(s_i)
        else:
            accept = torch.log(u[1]) < s_i  # u < min(1, t)
        self._last_refs = (i, s_i, accept)  # references only: nothing computed here
        self._write(accept, index[:, 0], x_new, s_new)
