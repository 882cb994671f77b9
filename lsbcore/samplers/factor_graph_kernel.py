"""A batched sampler's frozen locally balanced steps on a factor graph by
``backends.factor_kernels.balanced_steps``: the state the kernel needs beside the sampler's own,
for the samplers that run it (``balanced.factor_graph_steps``: the locally balanced samplers and
FLSB; ``gradient.gwg``: Gibbs with Gradients, FLSB with ``sqrt``).

The kernel keeps the pairwise samplers' proposal cache (``ProposalCache``: ``gn`` in blocks of
``bs = ceil(sqrt(n))``, block sums, ``Z``, a per-chain shift), built here from the exact ratios
``s`` and valid while nothing else changes ``s``: a torch step, a resync or a new state rebuilds it
(``_proposal``). It works on the target's ratio cache (``d_finite``, ``d_zeros``:
``FactorGraph.ratio_cache``) and reads the torch step's uniforms as it reads them (the site,
then the decision), so a seed gives the same chains on both backends (a decision could differ
only where a uniform falls within rounding of a threshold).

A sampler that keeps exact ratios hands over its own; one that proposes from first-order ratios
(FLSB, GWG) keeps the exact pair beside them between compiled calls (``_kept_exact_ratios``):
on a factor graph the two are equal (``balanced.factor_graph_steps``' docstring).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.backends.structures import FactorChains, FactorTables, Function, ProposalCache
from lsbcore.samplers.chain_base import StepInfo


class FactorGraphKernel:
    """A mixin of a ``BatchedSampler`` on a ``FactorGraph`` (its ``_x``, ``_log_p``,
    ``_n_accepted``, ``_uniforms``)."""

    def _balanced_run(self, n: int, function: Function, s, ratio_cache, trace, truth):
        """``n`` frozen steps of ``function`` by ``factor_kernels.balanced_steps`` from the exact
        ratios ``s`` and ``ratio_cache`` of the chains' states, on copies (a view the caller
        holds keeps the old ones, as after a torch step): the chains move and ``_last`` is set;
        returns the ratios and ratio cache at the new states."""
        from lsbcore.backends import factor_kernels

        cache = self._proposal(s, function)
        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, accepted, s = (t.clone() for t in (self._x, self._log_p, self._n_accepted, s))
        d_finite, d_zeros, zeros = (t.clone().contiguous() for t in ratio_cache)
        site = torch.empty(self.n_chains, dtype=torch.int64)
        prob = torch.empty(self.n_chains, dtype=torch.float64)
        flipped = torch.empty(self.n_chains, dtype=torch.bool)
        chains = FactorChains(
            x.numpy(), log_p.numpy(), accepted.numpy(), s.numpy(), d_finite.numpy(),
            d_zeros.numpy(),
        )  # fmt: skip
        factor_kernels.balanced_steps(
            n, chains, self._factor_tables(), function, cache, u.numpy(), site.numpy(),
            prob.numpy(), flipped.numpy(), trace, truth,
        )  # fmt: skip
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._last = StepInfo(site=site, accept_prob=prob, accepted=flipped)
        # valid for the next call if no resync or torch step comes between
        self._proposal_of = (self.n_steps + n, s, cache)
        return s, (d_finite, d_zeros, zeros)

    def _kept_exact_ratios(self) -> tuple[torch.Tensor, tuple]:
        """The exact ratios ``s [B, n]`` of the chains' states and the target's ratio cache, as
        the last compiled call left them while neither the chains nor the target have changed
        since, else computed afresh (for the samplers that do not keep them)."""
        kept = still_kept(self, "_exact_of")
        if kept is not None:
            return kept
        with torch.no_grad():
            return self.target.flip_log_ratios_after(self._x, self._x, None, None)

    def _keep_exact_ratios(self, s: torch.Tensor, cache: tuple) -> None:
        """Keep the exact pair of the chains' current states (``_kept_exact_ratios``)."""
        keep(self, "_exact_of", s, cache)

    def _proposal(self, s: torch.Tensor, function: Function) -> ProposalCache:
        """The kernel's proposal cache for the ratios ``s``: kept from the last compiled call
        when nothing changed them since, else rebuilt (``factor_kernels.proposal_cache``)."""
        steps, kept, cache = getattr(self, "_proposal_of", (None, None, None))
        if steps == self.n_steps and kept is s:
            return cache
        from lsbcore.backends import factor_kernels

        d = self.n_sites
        block = math.isqrt(d - 1) + 1 if d > 1 else 1  # bs = ceil(sqrt(n)), as the pairwise
        n_blocks = -(-d // block)
        b = self.n_chains
        cache = ProposalCache(
            np.zeros((b, (n_blocks + 1) * block)), np.zeros((b, n_blocks)), np.zeros((b, 1)),
            np.zeros((b, 1)),
        )  # fmt: skip
        factor_kernels.proposal_cache(s.contiguous().numpy(), function, cache)
        self._proposal_of = (self.n_steps, s, cache)
        return cache

    def _live_proposal(self, s: torch.Tensor) -> ProposalCache | None:
        """The kernel's proposal cache if the last compiled call left it for the ratios ``s``
        and nothing ran since, else None."""
        steps, kept, cache = getattr(self, "_proposal_of", (None, None, None))
        return cache if steps == self.n_steps and kept is s else None

    def _factor_tables(self) -> FactorTables:
        """The target's tables as the kernels take them (``factor_tables``)."""
        return factor_tables(self)


def keep(sampler, name: str, *values) -> None:
    """Keep ``values`` on ``sampler`` under ``name``, valid for its chains' current states and
    target (``still_kept``)."""
    setattr(sampler, name, (sampler._x, sampler._x._version, sampler.target, values))


def still_kept(sampler, name: str) -> tuple | None:
    """The values ``keep`` put under ``name`` while neither the chains (the same tensor, not
    written since) nor the target have changed, else None."""
    kept = getattr(sampler, name, None)
    if (
        kept is not None
        and kept[0] is sampler._x
        and kept[1] == sampler._x._version
        and kept[2] is sampler.target
    ):
        return kept[3]
    return None


def factor_tables(sampler) -> FactorTables:
    """``sampler``'s factor graph's incidence and neighbourhoods as the kernels take them
    (numpy views), kept on the sampler once per target."""
    kept = getattr(sampler, "_factor_tables_of", (None, None))
    if kept[0] is not sampler.target:
        inc, near = sampler.target.incidence(), sampler.target.neighbourhoods()
        tables = FactorTables(
            inc.scopes.numpy(), inc.place.numpy(), inc.offsets.numpy(), inc.finite.numpy(),
            inc.zero.numpy(), inc.first.numpy(), inc.factors.numpy(), near.first.numpy(),
            near.members.numpy(), near.slot.numpy(),
        )  # fmt: skip
        sampler._factor_tables_of = kept = (sampler.target, tables)
    return kept[1]
