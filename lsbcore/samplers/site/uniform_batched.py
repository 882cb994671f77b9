"""Uninformed single-site baselines on any target (spec 3): pick a site ``i`` uniformly, then flip
it with probability

- ``gibbs``: ``t_i / (1 + t_i) = sigmoid(s_i)`` (random-scan heat bath: site ``i`` is drawn
  from its conditional, which flips it with exactly this probability);
- ``metropolis``: ``min(1, t_i) = exp(min(0, s_i))``.

The step scores one state, the proposed one, through ``target.log_ratio`` (a target may answer
it faster than two ``log p~``): one evaluation per step, and no flip log-ratios are kept
(``uses_ratios`` is False). A flip into zero mass has ``s_i = -inf`` and is never taken.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from lsbcore.samplers.batched import (
    BatchedSampler,
    factor_graph_compiled_refusal,
    rbm_compiled_refusal,
)
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.samplers.factor_graph_kernel import factor_tables, keep, still_kept
from lsbcore.targets.base import Target
from lsbcore.targets.factor_graph import FactorGraph

RULES = ("gibbs", "metropolis")


def log_flip_probability(rule: str, s: torch.Tensor) -> torch.Tensor:
    """``log P(flip | site proposed)`` from its log-ratio ``s`` (``-inf`` where ``s`` is)."""
    return F.logsigmoid(s) if rule == "gibbs" else s.clamp(max=0.0)


class BatchedUniformSiteSampler(BatchedSampler):
    """Random-scan ``gibbs`` or uniform-site ``metropolis`` on any ``Target``.

    ``common``: ``seed``, ``device``, ``x0``, ``resync_every``, ``backend`` (``BatchedSampler``).
    Cached: ``x`` and ``log p~(x)`` only.
    """

    uses_ratios = False
    sites_per_step = 1

    def __init__(self, target: Target, n_chains: int, rule: str = "gibbs", **common):
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}.")
        self.name = self.rule = rule
        super().__init__(target, n_chains, **common)

    @property
    def evals_per_step(self) -> int:
        return 1  # log p~ at the proposed state

    def _step(self) -> None:
        u = self._uniforms(2, self.n_chains)
        i = (u[0] * self.n_sites).long().clamp_(max=self.n_sites - 1)  # [B]
        x_new = self._flip_sites(i)
        s_i = self.target.log_ratio(self._x, x_new)  # [B]
        log_p_flip = log_flip_probability(self.rule, s_i)
        # u < P(flip); a flip into zero mass (s_i = -inf, or NaN from a faulty target) never
        accept = (torch.log(u[1]) < log_p_flip) & (s_i > -math.inf)
        self._last = StepInfo(site=i, accept_prob=torch.exp(log_p_flip), accepted=accept)
        self._move(x_new, accept, s_i)

    # ----------------------------------------------------------------- compiled steps
    compiled_uniforms_per_step = 2  # as _step draws them: the site, then the acceptance

    def compiled_refusal(self) -> str | None:
        if isinstance(self.target, FactorGraph):
            return factor_graph_compiled_refusal(self)
        return rbm_compiled_refusal(self, 1)

    def _compiled_steps(self, n: int, trace, truth) -> None:
        """``n`` steps on an RBM by ``rbm_kernels.uniform_site_steps`` (on a factor graph by
        ``factor_kernels.cached_site_steps``, from flip parts kept between calls): the torch
        step's uniforms, read as it reads them, so the same chains. The kernels advance copies
        of the chains in place and fill the last step's site, acceptance probability and
        flip."""
        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, accepted = self._x.clone(), self._log_p.clone(), self._n_accepted.clone()
        site = torch.empty(self.n_chains, dtype=torch.int64)
        prob = torch.empty(self.n_chains, dtype=torch.float64)
        flipped = torch.empty(self.n_chains, dtype=torch.bool)
        chains = (x.numpy(), log_p.numpy(), accepted.numpy(), u.numpy())
        last = (site.numpy(), prob.numpy(), flipped.numpy())
        if isinstance(self.target, FactorGraph):
            from lsbcore.backends.factor_kernels import cached_site_steps

            d_finite, d_zeros = self._flip_parts()
            cached_site_steps(
                *chains, self.rule == "gibbs", d_finite, d_zeros, factor_tables(self), *last,
                trace, truth,
            )  # fmt: skip
            self._x = x
            keep(self, "_flip_parts_of", d_finite, d_zeros)
        else:
            from lsbcore.backends.rbm_kernels import uniform_site_steps

            arrays = self.target.kernel_arrays()
            uniform_site_steps(
                *chains, RULES.index(self.rule),
                arrays["w_t"], arrays["b_vis"], arrays["c"], arrays["exp_w"], arrays["exp_neg_w"],
                *last, trace, truth,
            )  # fmt: skip
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._last = StepInfo(site=site, accept_prob=prob, accepted=flipped)

    def _flip_parts(self):
        """Every site's flip parts at the chains' states (``factor_kernels.flip_scores``): as
        the last compiled call left them while neither the chains nor the target changed and no
        resync came since (which bounds their rounding drift), else computed afresh."""
        kept = still_kept(self, "_flip_parts_of")
        if kept is not None:
            return kept
        from lsbcore.backends.factor_kernels import flip_scores

        d_finite, d_zeros = np.empty(self._x.shape), np.empty(self._x.shape)
        flip_scores(self._x.numpy(), factor_tables(self), d_finite, d_zeros)
        return d_finite, d_zeros

    def _after_resync(self) -> None:
        self._flip_parts_of = None
        super()._after_resync()

    # ----------------------------------------------------------------- the exact law
    def flip_log_probs(self) -> torch.Tensor:
        """``log P(flip | site i proposed)`` for every chain and site, ``[B, *shape]``."""
        with torch.no_grad():
            s = self.target.flip_log_ratios(self._x)  # [B, n], exact
            return log_flip_probability(self.rule, s).view(self.x.shape)

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = P(flip | i) / n`` for every chain and site,
        ``[B, *shape]``: the numbers ``step`` uses (``n`` evaluations per chain)."""
        return torch.exp(self.flip_log_probs()) / self.n_sites

    def proposal_log_probs(self) -> torch.Tensor:
        """``log Q(i | x) = -log n`` for every chain and site, ``[B, *shape]``."""
        return torch.full_like(self.x, -math.log(self.n_sites))


def uniform_builder(rule: str):
    """The registry's ``build_any`` for ``gibbs`` or ``metropolis``."""

    def build(target, n_chains, **common):
        return BatchedUniformSiteSampler(target, n_chains, rule=rule, **common)

    return build
