"""The locally balanced sampler's compiled steps on a factor graph: the adapter between the
batched sampler's torch state and ``backends.factor_kernels.balanced_steps``.

The torch step (``balanced.batched``) keeps ``log g`` and ``log Z`` over all ``n`` sites and
rescores them after every flip; the kernel keeps instead the pairwise samplers' proposal cache
(``ProposalCache``: ``gn`` in blocks of ``bs = ceil(sqrt(n))``, block sums, ``Z``, a per-chain
shift), built here from the exact ratios ``s`` and valid while nothing else changes ``s``: a
torch step, a resync or a new state rebuilds it (``_proposal``). The kernel works on the
sampler's own ratio cache (``d_finite``, ``d_zeros``: ``FactorGraph.ratio_cache``) and reads the
torch step's uniforms as it reads them, so a seed gives the same chains on both backends (a
decision could differ only where a uniform falls within rounding of a threshold).

Served: a ``FactorGraph`` on the CPU, exact ratios, any of the paper's balancing functions
(``barker``, ``sqrt``, ``min``, ``max``, LSB 1 and LSB 2 frozen after burn-in), frozen steps.
Learning steps and gradient ratios (FLSB) take torch steps.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.backends.structures import FactorChains, FactorTables, ProposalCache
from lsbcore.samplers.balanced.backends import CompiledFunction
from lsbcore.samplers.batched import factor_graph_compiled_refusal
from lsbcore.samplers.chain_base import StepInfo


class FactorGraphSteps(CompiledFunction):
    """Compiled frozen steps of ``BatchedBalancedSampler`` on a ``FactorGraph`` (a mixin: it
    uses the sampler's ``_x``, ``_log_p``, ``_n_accepted``, ``_s`` and ratio ``_cache``)."""

    compiled_uniforms_per_step = 2  # as _step draws them: the site, then the decision

    def compiled_refusal(self) -> str | None:
        why = factor_graph_compiled_refusal(self)
        if why is not None:
            return why
        if self.ratios != "exact":
            return (
                f"the {self.name!r} sampler proposes from gradient estimates of the ratios "
                "(FLSB); the compiled steps on a factor graph read exact ratios only. Use "
                "backend='torch'."
            )
        if self._compiled_function() is None:
            return (
                f"the compiled steps on a factor graph know the paper's balancing functions, "
                f"not {self.balancing.name!r}; use backend='torch'."
            )
        return None

    def _compiled_steps(self, n: int, trace, truth) -> None:
        """``n`` frozen steps by ``factor_kernels.balanced_steps`` on copies of the chains'
        state (a view the caller holds keeps the old one, as after a torch step)."""
        from lsbcore.backends import factor_kernels

        cache = self._proposal()
        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, accepted, s = (
            t.clone() for t in (self._x, self._log_p, self._n_accepted, self._s)
        )
        d_finite, d_zeros, zeros = (t.contiguous() for t in self._cache)
        site = torch.empty(self.n_chains, dtype=torch.int64)
        prob = torch.empty(self.n_chains, dtype=torch.float64)
        flipped = torch.empty(self.n_chains, dtype=torch.bool)
        chains = FactorChains(
            x.numpy(), log_p.numpy(), accepted.numpy(), s.numpy(), d_finite.numpy(),
            d_zeros.numpy(),
        )  # fmt: skip
        factor_kernels.balanced_steps(
            n, chains, self._factor_tables(), self._compiled_function(), cache, u.numpy(),
            site.numpy(), prob.numpy(), flipped.numpy(), trace, truth,
        )  # fmt: skip
        self._x, self._log_p, self._n_accepted, self._s = x, log_p, accepted, s
        self._cache = (d_finite, d_zeros, zeros)
        self._stale = True  # the torch step's log g and log Z: rebuilt where next read
        self._last = StepInfo(site=site, accept_prob=prob, accepted=flipped)
        # valid for the next call if no resync or torch step comes between
        self._proposal_of = (self.n_steps + n, s, cache)

    def _proposal(self) -> ProposalCache:
        """The kernel's proposal cache for the current ``s``: kept from the last compiled call
        when nothing changed ``s`` since, else rebuilt (``factor_kernels.proposal_cache``)."""
        steps, s, cache = getattr(self, "_proposal_of", (None, None, None))
        if steps == self.n_steps and s is self._s:
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
        function = self._compiled_function()
        factor_kernels.proposal_cache(self._s.contiguous().numpy(), function, cache)
        self._proposal_of = (self.n_steps, self._s, cache)
        return cache

    def _compiled_cache_errors(self, s: torch.Tensor) -> list[float]:
        """Gaps between the kernel's proposal cache, when live, and a recompute from the exact
        ratios ``s``: ``log Z`` (relative, as ``invariant_error``) and the proposal ``g / Z``."""
        steps, kept_s, cache = getattr(self, "_proposal_of", (None, None, None))
        if steps != self.n_steps or kept_s is not self._s:
            return []
        gn, _, z, shift = (torch.from_numpy(a) for a in cache)
        log_g = self.balancing.log_g(s)
        log_z = torch.logsumexp(log_g, 1)
        cached = torch.log(z[:, 0]) + shift[:, 0]
        finite = torch.isfinite(log_z)
        if not bool((finite == torch.isfinite(cached)).all()):
            return [math.inf]
        if not bool(finite.any()):
            return [0.0]
        gap_z = (cached[finite] - log_z[finite]).abs().max() / log_z[finite].abs().max().clamp(
            min=1.0
        )
        q_cached = gn[finite, : self.n_sites] / z[finite]
        q = torch.softmax(log_g[finite], 1)
        return [float(gap_z), float((q_cached - q).abs().max())]

    def _factor_tables(self) -> FactorTables:
        """The target's incidence and neighbourhoods as the kernel takes them (numpy views,
        once per target)."""
        kept = getattr(self, "_factor_tables_of", (None, None))
        if kept[0] is not self.target:
            inc, near = self.target.incidence(), self.target.neighbourhoods()
            tables = FactorTables(
                inc.scopes.numpy(), inc.place.numpy(), inc.offsets.numpy(), inc.finite.numpy(),
                inc.zero.numpy(), inc.first.numpy(), inc.factors.numpy(), near.first.numpy(),
                near.members.numpy(), near.slot.numpy(),
            )  # fmt: skip
            self._factor_tables_of = kept = (self.target, tables)
        return kept[1]
