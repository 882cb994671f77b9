"""Compiled locally balanced steps on an RBM, both kinds of ratios: frozen ones, and the learning
steps of LSB 1 and LSB 2.

- Gradient ratios (FLSB) with a fixed function or LSB 1's mixture (FLSB 1 frozen after
  burn-in): ``rbm_kernels.gwg_steps``, the kernel of Gibbs with Gradients with the proposal's
  ``g`` as a parameter, computed as ``g(t)`` itself (one ``exp`` a site). It keeps the gradient
  ``d`` per chain, which the torch step holds as ``s~ = -2 x d``: ``d = -x s~ / 2`` exactly,
  and back. LSB 2's network (FLSB 2) runs there too, as ``g(t)`` at every site at once
  (``backends.network_terms``: two written-out ``exp`` and ``log1p`` a site, the sites side by
  side), where its log-space form took about eight scalar library calls a site.
- Exact ratios (``barker``, ``sqrt``, ``min``, ``max``, LSB 1, LSB 2 and LSB 2' frozen after
  burn-in): ``rbm_kernels.balanced_steps``, on the torch step's own caches (the ratios ``s`` and
  the hidden pre-activations), every ratio at ``x'`` from a product of the shift tables (``n m``
  multiply-adds, where the torch step takes ``n m`` softplus).

``"auto"`` takes the kernels for every function at every size: measured faster than the torch
steps on every RBM and chain count tried, LSB 2 and FLSB 2 included (1.7-28x; BENCHMARKS.md).

The kernels read the torch step's uniforms as it reads them (the site, then the decision), so a
seed gives the torch chains (up to rounding).

Learning steps (burn-in) are compiled too (``rbm_learning_kernels``), LSB 1's and LSB 2's,
with exact ratios (``lsb1``, ``lsb2``: ``exact_learning``) and gradient ones (``flsb1``,
``flsb2``: ``gradient_learning``): the same chains, parameters and losses as the torch learning
step from the same uniforms, in chunks that end where the torch loop would restart chains (the
paper's Q1) or resync; the optimiser's state passes between the kernels and ``torch.optim``
when the backend changes. ``"auto"`` takes them wherever they run (``learns_compiled``). LSB 2'
and RBMs whose ratios exceed ``LEARNING_LIMIT`` learn on torch steps.
"""

from __future__ import annotations

import torch

from lsbcore.backends.structures import KIND_NETWORK
from lsbcore.samplers.balanced.backends import CompiledFunction
from lsbcore.samplers.balanced.compiled_learning import CompiledLearning
from lsbcore.samplers.batched import rbm_compiled_refusal
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.targets.rbm import RBM


class RBMBalancedSteps(CompiledLearning, CompiledFunction):
    """Compiled frozen steps of ``BatchedBalancedSampler`` on an ``RBM`` (a mixin before
    ``FactorGraphSteps``, which serves factor graphs; other targets go on to it)."""

    compiled_uniforms_per_step = 2  # as _step draws them: the site, then the decision

    def compiled_refusal(self) -> str | None:
        if not isinstance(self.target, RBM):
            return super().compiled_refusal()
        why = rbm_compiled_refusal(self)
        if why is not None:
            return why
        function = self._compiled_function()
        if function is None:
            return (
                f"the compiled steps on an RBM know the paper's balancing functions, not "
                f"{self.balancing.name!r}; use backend='torch'."
            )
        if self.ratios == "gradient" and function.kind > KIND_NETWORK:
            return (
                f"the compiled FLSB steps on an RBM know the paper's functions, not "
                f"{self.balancing.name!r}; use backend='torch'."
            )
        return None

    def _compiled_steps(self, n: int, trace, truth) -> None:
        if not isinstance(self.target, RBM):
            return super()._compiled_steps(n, trace, truth)
        if self.ratios == "exact":
            return self._exact_steps(n, trace, truth)
        from lsbcore.backends.rbm_kernels import gwg_steps

        arrays = self.target.kernel_arrays()
        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, accepted = self._x.clone(), self._log_p.clone(), self._n_accepted.clone()
        grad = (-0.5 * x * self._s_tilde).contiguous()
        last = torch.empty(3, self.n_chains, dtype=torch.float64)
        gwg_steps(
            x.numpy(), log_p.numpy(), grad.numpy(), accepted.numpy(), u.numpy(), arrays["w"],
            arrays["w_t"], arrays["b_vis"], arrays["c"], arrays["exp_w"], arrays["exp_neg_w"],
            last.numpy(), self._compiled_function(), trace, truth,
        )  # fmt: skip
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._s_tilde = -2.0 * x * grad
        # the torch step's log g and log Z: rebuilt only where a torch step reads them next
        # (the kernel computes its own), not after every call
        self._stale = True
        self._last = StepInfo(site=last[0].long(), accept_prob=last[1], accepted=last[2] > 0)

    def _exact_steps(self, n: int, trace, truth) -> None:
        """``n`` frozen steps with exact ratios by ``rbm_kernels.balanced_steps`` on copies of
        the chains' state and caches (a view the caller holds keeps the old ones)."""
        from lsbcore.backends.rbm_kernels import balanced_steps

        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, accepted = self._x.clone(), self._log_p.clone(), self._n_accepted.clone()
        s, a = self._s.clone().contiguous(), self._cache.clone().contiguous()
        last = torch.empty(3, self.n_chains, dtype=torch.float64)
        tables = self.target.ratio_tables()
        balanced_steps(
            x.numpy(), log_p.numpy(), accepted.numpy(), s.numpy(), a.numpy(), u.numpy(), tables,
            last.numpy(), self._compiled_function(), trace, truth,
        )  # fmt: skip
        self._x, self._log_p, self._n_accepted, self._s, self._cache = x, log_p, accepted, s, a
        self._stale = True  # the torch step's log g and log Z: rebuilt where next read
        self._last = StepInfo(site=last[0].long(), accept_prob=last[1], accepted=last[2] > 0)

    # ----------------------------------------------------------------- learning steps
    def learns_compiled(self) -> bool:
        """Whether ``step(learn=True)`` runs a compiled learning kernel: LSB 1 or LSB 2 with
        either kind of ratios on an RBM, every ratio within the kernels' ``LEARNING_LIMIT``, on
        the compiled backend, or on ``"auto"`` wherever the kernels can run: the learning
        kernels were measured faster than the torch learning step on every RBM and chain count
        tried (BENCHMARKS.md)."""
        if not isinstance(self.target, RBM):
            return super().learns_compiled()
        if not self._learns_on_kernels():
            return False
        from lsbcore.backends.learned_function import LEARNING_LIMIT

        return float(self.target.kernel_arrays()["ratio_bound"][0]) <= LEARNING_LIMIT

    def learning_work(self) -> int:
        """A chain's learning step in ``threads.learning_groups``' units (multiply-adds): the
        ratios at x' and x~, 2 n m."""
        return 2 * self.n_sites * self.target.n_hidden

    def _kernel_learning(self, steps: int, trace) -> None:
        """``steps`` learning steps by ``exact_learning`` (LSB 1, LSB 2) or ``gradient_learning``
        (FLSB 1, FLSB 2) on copies of the chains' state and caches."""
        if not isinstance(self.target, RBM):
            return super()._kernel_learning(steps, trace)
        from lsbcore.backends import rbm_learning_kernels as kernels
        from lsbcore.backends.threads import learning_groups, torch_threads_kept

        b = self.n_chains
        groups = learning_groups(b, self.learning_work())
        u = self._uniforms(steps, 3, b)
        x, log_p, accepted = self._x.clone(), self._log_p.clone(), self._n_accepted.clone()
        kind, hidden, learner, params, history, last, failed = self._kernel_learner(steps, log_p)
        if self.ratios == "exact":
            s, a = self._s.clone().contiguous(), self._cache.clone().contiguous()
            tabled = b * self.n_sites * self.target.n_hidden <= kernels.TABLE_LIMIT
            exact = kernels.exact_learning_parallel if groups > 1 else kernels.exact_learning
            with torch_threads_kept():
                exact(
                    kind, hidden, x.numpy(), accepted.numpy(), s.numpy(), a.numpy(), u.numpy(),
                    self.target.ratio_tables(), tabled, learner, history, last.numpy(), failed,
                    *self._kernel_trace(trace), groups,
                )  # fmt: skip
            self._s, self._cache = s, a
        else:  # the torch step's s~ = -2 x d, as the kernel's d and back (exact: x = +-1)
            grad = (-0.5 * x * self._s_tilde).contiguous()
            arrays = self.target.kernel_arrays()
            first_order = (
                kernels.gradient_learning_parallel if groups > 1 else kernels.gradient_learning
            )
            with torch_threads_kept():
                first_order(
                    kind, hidden, x.numpy(), log_p.numpy(), accepted.numpy(), grad.numpy(),
                    u.numpy(), arrays["w"], arrays["w_t"], arrays["b_vis"], arrays["c"],
                    arrays["exp_w"], arrays["exp_neg_w"], learner, history, last.numpy(), failed,
                    *self._kernel_trace(trace), groups,
                )  # fmt: skip
            self._s_tilde = -2.0 * x * grad
        self._x, self._log_p, self._n_accepted = x, log_p, accepted
        self._after_kernel_learning(params, history, last, failed)
