"""The locally balanced sampler's compiled steps on a factor graph: the adapter between the
batched sampler's torch state and ``backends.factor_kernels.balanced_steps`` (through
``samplers.factor_graph_kernel``) and ``backends.factor_learning_kernels.exact_learning``.

The torch step (``balanced.batched``) keeps ``log g`` and ``log Z`` over all ``n`` sites and
rescores them after every flip; the kernels keep instead the ratios of the flip's neighbourhood
and a proposal cache, and read the torch step's uniforms as it reads them, so a seed gives the
same chains on both backends (a decision could differ only where a uniform falls within rounding
of a threshold).

Served: a ``FactorGraph`` on the CPU, any of the paper's balancing functions (``barker``,
``sqrt``, ``min``, ``max``, LSB 1, LSB 2 and LSB 2' frozen after burn-in), and the learning
steps of LSB 1, LSB 2 and LSB 2' (``factor_learning_kernels``: the torch learning step's chains,
parameters and losses; LSB 2' under the authors' penalty, which draws from the generator,
learns on torch steps), with exact ratios or gradient ones (FLSB 1 and 2); from a few chains
(``LEARNING_WORK_PER_SITE``) on all cores in chain groups (``exact_learning_parallel``).

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

import torch

from lsbcore.backends.structures import FactorChains
from lsbcore.samplers.balanced.backends import CompiledFunction
from lsbcore.samplers.balanced.compiled_learning import CompiledLearning
from lsbcore.samplers.batched import factor_graph_compiled_refusal
from lsbcore.samplers.factor_graph_kernel import FactorGraphKernel
from lsbcore.targets.factor_graph import FactorGraph

#: A learning step's work a chain and site in ``threads.learning_groups``' units, set from
#: timings of the 10 x 10 grid network (100 sites): two chain groups from 6 chains, where they
#: pay (LSB 1 0.90x at 4 chains, 1.19x at 8, 1.73x at 30; LSB 2 1.21x at 4, 1.90x at 30)
LEARNING_WORK_PER_SITE = 512


class FactorGraphSteps(CompiledLearning, CompiledFunction, FactorGraphKernel):
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
        """``n`` frozen steps by ``factor_kernels.balanced_steps`` (``_balanced_run``)."""
        s, cache = self._balanced_run(n, self._compiled_function(), *self._exact_ratios(),
                                      trace, truth)  # fmt: skip
        self._keep_ratios(s, cache)
        self._stale = True  # the torch step's log g and log Z: rebuilt where next read

    def _exact_ratios(self) -> tuple[torch.Tensor, tuple]:
        """The exact ratios ``s [B, n]`` of the chains' states and the target's ratio cache:
        the sampler's own with exact ratios, else the kept pair (gradient ratios, equal to
        them: the module docstring)."""
        if self.ratios == "exact":
            return self._s, self._cache
        return self._kept_exact_ratios()

    def _keep_ratios(self, s: torch.Tensor, cache: tuple) -> None:
        """The exact ratios and ratio cache a compiled call leaves, at the new ``self._x``: the
        sampler's ``s`` and cache, or (gradient ratios) its ``s~`` and the kept pair."""
        if self.ratios == "exact":
            self._s, self._cache = s, cache
        else:
            self._s_tilde = s
            self._keep_exact_ratios(s, cache)

    def _compiled_cache_errors(self, s: torch.Tensor) -> list[float]:
        """Gaps between the kernel's proposal cache, when live, and a recompute from the exact
        ratios ``s``: ``log Z`` (relative, as ``invariant_error``) and the proposal ``g / Z``."""
        cache = self._live_proposal(self._ratios_now())
        if cache is None:
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

    # ----------------------------------------------------------------- learning steps
    def learns_compiled(self) -> bool:
        """Whether ``step(learn=True)`` runs ``factor_learning_kernels.exact_learning``: LSB 1,
        LSB 2 or LSB 2' (projected) on a factor graph whose finite ratios stay within the kernel's
        ``LEARNING_LIMIT`` (``FactorGraph.ratio_bound``), with exact ratios or gradient ones (the
        module docstring), on the compiled backend or on ``"auto"`` wherever the frozen kernel
        runs."""
        if not isinstance(self.target, FactorGraph):
            return super().learns_compiled()
        if not self._learns_on_kernels(monotone=True):
            return False
        from lsbcore.backends.learned_function import LEARNING_LIMIT

        return self.target.ratio_bound() <= LEARNING_LIMIT

    def _kernel_learning(self, steps: int, trace) -> None:
        """``steps`` learning steps by ``factor_learning_kernels.exact_learning`` on copies of
        the chains' state and ratio cache (a view the caller holds keeps the old ones)."""
        if not isinstance(self.target, FactorGraph):
            return super()._kernel_learning(steps, trace)
        from lsbcore.backends import factor_learning_kernels as kernels
        from lsbcore.backends.threads import learning_groups, torch_threads_kept

        # a step's Z(x) and its gradient at every site: chains in groups on all cores
        groups = learning_groups(self.n_chains, LEARNING_WORK_PER_SITE * self.n_sites)
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
        exact = kernels.exact_learning_parallel if groups > 1 else kernels.exact_learning
        with torch_threads_kept():
            exact(
                kind, hidden, chains, self._factor_tables(), u.numpy(), learner, history,
                last.numpy(), failed, *self._kernel_trace(trace), groups,
            )  # fmt: skip
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._keep_ratios(s, (d_finite, d_zeros, zeros))
        self._after_kernel_learning(params, history, last, failed)
