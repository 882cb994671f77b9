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

Served: a ``FactorGraph`` on the CPU, any of the paper's balancing functions (``barker``,
``sqrt``, ``min``, ``max``, LSB 1, LSB 2 and LSB 2' frozen after burn-in), and the learning
steps of LSB 1 and LSB 2 (``factor_learning_kernels``: the torch learning step's chains,
parameters and losses), with exact ratios or gradient ones (FLSB 1 and 2).

Gradient ratios on a factor graph are the exact ones: ``log p~``'s extension (``FactorGraph``:
each table multilinear in its variables) is linear in each variable, so at a state of +-1 its
derivative in ``x_i`` is half the table's change under the flip and ``s~_i = -2 x_i d_i = s_i``
(measured: within 2e-15 of the incremental ratios). FLSB's proposal is then LSB's, its
acceptance ``min(1, p~(x') Q~(x|x') / (p~(x) Q~(x'|x)))`` is ``min(1, Z(x) / Z(x'))`` for a
balancing ``g`` (``g(t) = t g(1/t)``: the paper's functions, LSB 1's mixture, LSB 2's network)
and its learning objective's ``T = min(Q~(x'|x), p~(x')/p~(x) Q~(x|x'))`` is
``g(t_i) / max(Z(x), Z(x'))``, the exact objective's: FLSB runs the exact kernels, on the exact
ratios and ratio cache it keeps beside ``s~`` between compiled calls (``_exact_ratios``), and
gives the torch FLSB step's chains up to rounding (a tie of the two sides of FLSB's ``min``
splits its gradient where the exact objective takes one side: only where ``Z(x') = Z(x)`` to the
last bit).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lsbcore.backends.structures import FactorChains, FactorTables, ProposalCache
from lsbcore.samplers.balanced.backends import CompiledFunction
from lsbcore.samplers.balanced.compiled_learning import CompiledLearning
from lsbcore.samplers.batched import factor_graph_compiled_refusal
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.targets.factor_graph import FactorGraph


class FactorGraphSteps(CompiledLearning, CompiledFunction):
    """Compiled steps of ``BatchedBalancedSampler`` on a ``FactorGraph`` (a mixin: it uses the
    sampler's ``_x``, ``_log_p``, ``_n_accepted``, and ``_s`` with its ratio ``_cache`` or
    ``_s_tilde``)."""

    compiled_uniforms_per_step = 2  # as _step draws them: the site, then the decision

    def compiled_refusal(self) -> str | None:
        why = factor_graph_compiled_refusal(self)
        if why is not None:
            return why
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

        ratios, ratio_cache = self._exact_ratios()
        cache = self._proposal(ratios)
        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, accepted, s = (
            t.clone() for t in (self._x, self._log_p, self._n_accepted, ratios)
        )
        d_finite, d_zeros, zeros = (t.contiguous() for t in ratio_cache)
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
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._keep_ratios(s, (d_finite, d_zeros, zeros))
        self._stale = True  # the torch step's log g and log Z: rebuilt where next read
        self._last = StepInfo(site=site, accept_prob=prob, accepted=flipped)
        # valid for the next call if no resync or torch step comes between
        self._proposal_of = (self.n_steps + n, s, cache)

    def _exact_ratios(self) -> tuple[torch.Tensor, tuple]:
        """The exact ratios ``s [B, n]`` of the chains' states and the target's ratio cache:
        the sampler's own with exact ratios; with gradient ratios (equal to them: the module
        docstring) the ones a compiled call left, while the chains have not moved since, else
        computed afresh."""
        if self.ratios == "exact":
            return self._s, self._cache
        kept = getattr(self, "_exact_of", None)
        if kept is not None and kept[0] is self._x and kept[1] == self._x._version:
            return kept[2], kept[3]
        with torch.no_grad():
            return self.target.flip_log_ratios_after(self._x, self._x, None, None)

    def _keep_ratios(self, s: torch.Tensor, cache: tuple) -> None:
        """The exact ratios and ratio cache a compiled call leaves, at the new ``self._x``: the
        sampler's ``s`` and cache, or (gradient ratios) its ``s~`` and the kept pair."""
        if self.ratios == "exact":
            self._s, self._cache = s, cache
        else:
            self._s_tilde = s
            self._exact_of = (self._x, self._x._version, s, cache)

    def _proposal(self, s: torch.Tensor) -> ProposalCache:
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
        function = self._compiled_function()
        factor_kernels.proposal_cache(s.contiguous().numpy(), function, cache)
        self._proposal_of = (self.n_steps, s, cache)
        return cache

    def _compiled_cache_errors(self, s: torch.Tensor) -> list[float]:
        """Gaps between the kernel's proposal cache, when live, and a recompute from the exact
        ratios ``s``: ``log Z`` (relative, as ``invariant_error``) and the proposal ``g / Z``."""
        steps, kept_s, cache = getattr(self, "_proposal_of", (None, None, None))
        if steps != self.n_steps or kept_s is not self._ratios_now():
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

    # ----------------------------------------------------------------- learning steps
    def learns_compiled(self) -> bool:
        """Whether ``step(learn=True)`` runs ``factor_learning_kernels.exact_learning``: LSB 1
        or LSB 2 on a factor graph whose finite ratios stay within the kernel's
        ``LEARNING_LIMIT`` (``FactorGraph.ratio_bound``), with exact ratios or gradient ones (the
        module docstring), on the compiled backend or on ``"auto"`` wherever the frozen kernel
        runs."""
        if not isinstance(self.target, FactorGraph):
            return super().learns_compiled()
        if not self._learns_on_kernels():
            return False
        from lsbcore.backends.learned_function import LEARNING_LIMIT

        return self.target.ratio_bound() <= LEARNING_LIMIT

    def _kernel_learning(self, steps: int, trace) -> None:
        """``steps`` learning steps by ``factor_learning_kernels.exact_learning`` on copies of
        the chains' state and ratio cache (a view the caller holds keeps the old ones)."""
        if not isinstance(self.target, FactorGraph):
            return super()._kernel_learning(steps, trace)
        from lsbcore.backends.factor_learning_kernels import exact_learning

        ratios, ratio_cache = self._exact_ratios()
        u = self._uniforms(steps, 3, self.n_chains)
        x, log_p, accepted, s = (
            t.clone() for t in (self._x, self._log_p, self._n_accepted, ratios)
        )
        d_finite, d_zeros, zeros = (t.clone().contiguous() for t in ratio_cache)
        kind, hidden, learner, params, history, last, failed = self._kernel_learner(steps, log_p)
        chains = FactorChains(
            x.numpy(), log_p.numpy(), accepted.numpy(), s.numpy(), d_finite.numpy(),
            d_zeros.numpy(),
        )  # fmt: skip
        exact_learning(
            kind, hidden, chains, self._factor_tables(), u.numpy(), learner, history,
            last.numpy(), failed, *self._kernel_trace(trace),
        )  # fmt: skip
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._keep_ratios(s, (d_finite, d_zeros, zeros))
        self._after_kernel_learning(params, history, last, failed)
