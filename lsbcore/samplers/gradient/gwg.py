"""Gibbs-with-Gradients (Grathwohl et al. 2021, "Oops I took a gradient"), and the state that
every gradient-informed sampler keeps.

The flip log-ratios ``s_i(x) = log p~(x with i flipped) - log p~(x)`` are approximated to first
order by the gradient ``d = grad log p~(x)`` of a differentiable extension of ``log p~``: a flip
moves ``x_i`` by ``-2 x_i``, so

    s~_i(x) = -2 x_i d_i(x),          a_i(x) = s~_i(x) / 2 = -x_i d_i(x)

(``a``: the "half ratios", the log-weights of the sqrt balancing function). Gibbs-with-Gradients
proposes site ``i`` with ``q(i | x) = softmax(a(x))_i`` and accepts the flip ``x -> x'`` with

    A = min(1, p~(x') q(i | x') / (p~(x) q(i | x))),

the full Metropolis-Hastings ratio (the balancing shortcut ``Z(x) / Z(x')`` holds only for exact
ratios), so the chain leaves ``p~`` invariant whatever the quality of the approximation. On a
pairwise model ``log p~`` is multilinear, ``s~ = s`` exactly, and this is the locally balanced
``sqrt`` sampler.

``GradientSampler`` caches ``x``, ``log p~(x)`` and ``d(x)`` per chain (invariant: both equal a
recompute at ``x``; ``invariant_error`` checks it). A step evaluates the target once, value and
gradient together at the proposed state (the current state's are kept from the step before), so
``evals_per_step`` is 1 (``docs/method.md``).
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.samplers.batched import (
    BatchedSampler,
    factor_graph_compiled_refusal,
    rbm_compiled_refusal,
)
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.samplers.factor_graph_kernel import FactorGraphKernel
from lsbcore.targets.base import Target
from lsbcore.targets.factor_graph import FactorGraph

# Enumeration for the exact one-step laws: 2^12 states, as in lsbcore.exact
MAX_EXACT_SITES = 12
# States scored at once when every neighbour of every chain is evaluated (flip_probabilities)
STATES_PER_BATCH = 1 << 16


def value_and_grad(target: Target, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``log p~(x)`` ``[B]`` and its gradient ``[B, n]`` at flat states ``x [B, n]``, in one
    pass where the target can (``Target.log_prob_and_grad``)."""
    log_p, grad = target.log_prob_and_grad(x)
    return log_p, grad.reshape(x.shape)


def half_ratios(x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``a_i = s~_i / 2 = -x_i d_i``: half the first-order flip log-ratios, ``x``'s shape."""
    return -x * grad


def log_acceptance(
    log_ratio: torch.Tensor, log_q_forward: torch.Tensor, log_q_reverse: torch.Tensor
) -> torch.Tensor:
    """``log A = min(0, log p~(x')/p~(x) + log q(x | x') - log q(x' | x))``; a move into zero
    mass (``log_ratio = -inf``) or with an undefined reverse proposal (NaN) is never taken."""
    log_a = (log_ratio + log_q_reverse - log_q_forward).clamp(max=0.0)
    return torch.where(torch.isnan(log_a), -torch.inf, log_a)


def draw_site(logits: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One site per row from ``softmax(logits)`` (``[B, n]``) by inverse CDF with ``u [B]`` in
    ``[0, 1)``, and its log-probability ``[B]`` (the normaliser comes with the CDF). A site
    whose weight underflows to 0 is never drawn."""
    top = logits.max(1, keepdim=True).values
    cdf = torch.exp(logits - top).cumsum(1)
    i = torch.searchsorted(cdf, u.unsqueeze(1) * cdf[:, -1:], right=True)
    i = i.clamp_(max=logits.shape[1] - 1)
    log_q = logits.gather(1, i) - top - torch.log(cdf[:, -1:])
    return i.view(-1), log_q.view(-1)


def enumerated_states(n: int, device=None) -> torch.Tensor:
    """Every state ``[2^n, n]``, row ``k`` being state code ``k`` (bit ``i`` set: site ``i`` is
    +1), the convention of ``lsbcore.exact.states``."""
    codes = torch.arange(2**n, device=device)
    return (2 * ((codes.unsqueeze(1) >> torch.arange(n, device=device)) & 1) - 1).double()


def state_code(x: torch.Tensor) -> torch.Tensor:
    """The code of every state in ``x [..., n]`` (``[...]`` int64)."""
    bits = (x > 0).long()
    return (bits << torch.arange(x.shape[-1], device=x.device)).sum(-1)


class GradientSampler(BatchedSampler):
    """Base of the gradient-informed samplers: caches ``d(x) = grad log p~(x)`` with ``x`` and
    ``log p~(x)``, and makes one Metropolis-Hastings decision per chain and step."""

    needs = frozenset({"gradient"})
    uses_ratios = False  # proposals read the gradient, never the exact ratios

    @property
    def evals_per_step(self) -> int:
        """One evaluation, value and gradient at the proposed state."""
        return 1

    def _after_resync(self) -> None:
        self._grad = self.target.grad_log_prob(self._x).reshape(self._x.shape)

    def _metropolis(self, x_new: torch.Tensor, log_q_forward: torch.Tensor, log_q_reverse):
        """Score ``x_new`` (value and gradient), accept per chain with the full MH ratio and
        move. ``log_q_reverse(x_new, grad_new)`` gives ``log q(x | x_new)`` ``[B]``. Returns
        ``log A`` and the decisions, ``[B]`` each."""
        log_p_new, grad_new = value_and_grad(self.target, x_new)
        log_ratio = log_p_new - self._log_p
        log_a = log_acceptance(log_ratio, log_q_forward, log_q_reverse(x_new, grad_new))
        accept = torch.log(self._uniforms(self.n_chains)) < log_a
        self._move(x_new, accept, log_ratio)
        self._grad = torch.where(accept.unsqueeze(1), grad_new, self._grad)
        return log_a, accept

    def invariant_error(self) -> float:
        """Largest relative gap between the cached ``log p~`` or gradient and a recompute."""
        with torch.no_grad():
            exact = self.target.grad_log_prob(self._x).reshape(self._x.shape)
            gap = (self._grad - exact).abs().max() / exact.abs().max().clamp(min=1.0)
        return max(super().invariant_error(), float(gap))

    def _check_enumerable(self) -> None:
        if self.n_sites > MAX_EXACT_SITES or self.target.batch != 1:
            raise ValueError(
                f"exact one-step laws enumerate all 2^n states of one target: at most "
                f"{MAX_EXACT_SITES} sites and one parameter set, got {self.n_sites} sites and "
                f"{self.target.batch} sets."
            )


class GibbsWithGradients(GradientSampler, FactorGraphKernel):
    """Gibbs-with-Gradients: one site per step from ``softmax(s~(x) / 2)``, MH-corrected with
    the reverse proposal at ``x'`` (see the module docstring). Registry name ``gwg``."""

    name = "gwg"
    sites_per_step = 1

    def _log_proposal(self, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """``log q(. | x) = log_softmax(a(x))`` over the sites, ``[..., n]``."""
        return torch.log_softmax(half_ratios(x, grad), -1)

    def proposal_log_probs(self) -> torch.Tensor:
        """``log q(i | x)`` for every chain and site, ``[B, *shape]``."""
        return self._log_proposal(self._x, self._grad).view(self.x.shape)

    def _site_log_prob(self, x: torch.Tensor, grad: torch.Tensor, i: torch.Tensor):
        """``log q(i | x)`` per row, ``[B]``: the proposal of flipping site ``i[b]``."""
        return self._log_proposal(x, grad).gather(1, i.unsqueeze(1)).squeeze(1)

    def _step(self) -> None:
        a = half_ratios(self._x, self._grad)  # [B, n]: log q(. | x) up to its normaliser
        i, log_q_forward = draw_site(a, self._uniforms(self.n_chains))

        def reverse(x_new, grad_new):  # q(i | x'): flipping i back
            return self._site_log_prob(x_new, grad_new, i)

        log_a, accept = self._metropolis(self._flip_sites(i), log_q_forward, reverse)
        self._last = StepInfo(site=i, accept_prob=torch.exp(log_a), accepted=accept)

    # ----------------------------------------------------------------- compiled steps
    compiled_uniforms_per_step = 2  # as _step draws them: the site, then the acceptance

    def compiled_refusal(self) -> str | None:
        if isinstance(self.target, FactorGraph):
            return factor_graph_compiled_refusal(self)
        return rbm_compiled_refusal(self, 1)

    def _compiled_steps(self, n: int, trace, truth) -> None:
        """``n`` steps on an RBM by ``rbm_kernels.gwg_steps``, on a factor graph by
        ``factor_kernels.balanced_steps`` with ``g = sqrt`` (its first-order ratios are the
        exact ones there: ``samplers.balanced.factor_graph_steps``), from the exact ratios kept
        beside ``d``: the torch step's uniforms, read as it reads them, so the same chains."""
        from lsbcore.backends.structures import Function
        from lsbcore.balancing.functions import FIXED

        empty = np.zeros(0)
        sqrt = Function(FIXED.index("sqrt"), np.zeros(4), empty, empty, empty)  # GWG's g
        if isinstance(self.target, FactorGraph):
            s, cache = self._balanced_run(n, sqrt, *self._kept_exact_ratios(), trace, truth)
            self._grad = -0.5 * self._x * s  # s~ = -2 x d, exactly (x = +-1)
            self._keep_exact_ratios(s, cache)
            return
        from lsbcore.backends.rbm_kernels import gwg_steps

        arrays = self.target.kernel_arrays()
        u = self._uniforms(n, 2, self.n_chains)
        x, log_p, grad = self._x.clone(), self._log_p.clone(), self._grad.clone()
        accepted = self._n_accepted.clone()
        last = torch.empty(3, self.n_chains, dtype=torch.float64)
        gwg_steps(
            x.numpy(), log_p.numpy(), grad.numpy(), accepted.numpy(), u.numpy(),
            arrays["w"], arrays["w_t"], arrays["b_vis"], arrays["c"], arrays["exp_w"],
            arrays["exp_neg_w"], last.numpy(), sqrt, trace, truth,
        )  # fmt: skip
        self._x, self._log_p, self._grad, self._n_accepted = x, log_p, grad, accepted
        self._last = StepInfo(site=last[0].long(), accept_prob=last[1], accepted=last[2] > 0)

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = q(i | x) A_i`` for every chain and site, ``[B, *shape]``:
        each neighbour scored exactly as ``step`` scores it (``n`` evaluations per chain)."""
        with torch.no_grad():
            b, n = self._x.shape
            log_q = self._log_proposal(self._x, self._grad)  # [B, n]
            log_t = torch.empty_like(log_q)
            # sites in groups, [G * B, n] neighbours at once (site-major, so that a target with
            # one parameter set per chain scores them one site at a time)
            group = 1 if self.target.batch > 1 else max(1, STATES_PER_BATCH // (b * n))
            for first in range(0, n, group):
                sites = torch.arange(first, min(n, first + group), device=self.device)
                flip = 1.0 - 2.0 * torch.nn.functional.one_hot(sites, n).double()  # [G, n]
                x_new = (flip.unsqueeze(1) * self._x).reshape(-1, n)  # [G * B, n]
                log_p_new, grad_new = value_and_grad(self.target, x_new)
                back = self._site_log_prob(x_new, grad_new, sites.repeat_interleave(b))
                log_q_reverse = back.view(len(sites), b).T  # [B, G]
                log_ratio = log_p_new.view(len(sites), b).T - self._log_p.unsqueeze(1)
                log_a = log_acceptance(log_ratio, log_q[:, sites], log_q_reverse)
                log_t[:, sites] = log_q[:, sites] + log_a
            return torch.exp(log_t).view(self.x.shape)
