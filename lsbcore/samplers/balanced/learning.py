"""Learning the balancing function while sampling: Algorithm 1 of the LSB paper (spec 5).

Each learning step proposes a flip with the current function ``g_theta0``, takes one optimiser
step on the LSB objective (``learning.objective``) in ``(theta, eta)``, and accepts the proposal
with ``theta0``'s Metropolis-Hastings ratio, so the chain stays a valid MCMC chain step by step.
Chains restart from uniform random states with the paper's probability ``pi`` (its Q1). A
non-finite loss or parameter stops learning: the last good function is restored and the
sampler goes on with frozen steps.

The torch learning step lives here; a chunk of learning steps runs on the sampler's backend
(compiled or device through ``BalancedBackends``, torch here otherwise), and every backend's
chunk ends in ``_after_learning``. A mixin of ``LocallyBalancedSampler``.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import torch

from lsbcore.balancing.functions import MixtureBalancing
from lsbcore.balancing.objective import authors_log_ratio, lsb_loss_and_grads
from lsbcore.balancing.restarts import restarting_chains
from lsbcore.numerics import SGD_MOMENTUM
from lsbcore.samplers.balanced.backends import load_kernel_state
from lsbcore.samplers.balanced.common import check_objective, check_optimizer


class BalancedLearning:
    """Algorithm 1's learning steps for a learnable balancing function (LSB 1, LSB 2)."""

    learning_uniforms = 4  # a learning step: the proposal's two, the acceptance, x~'s site

    def _learning_chunk(self, m: int, trace) -> int:
        """Up to ``m`` learning steps on this sampler's backend; returns the steps taken.

        A chunk starts with the paper's Q1 restarts when they are due and ends before the next
        one, or after a step that diverged (learning stops; ``step`` goes on frozen).
        """
        if self._restart_wait <= 0:  # chains restart before this step (spec 5, pi)
            with torch.no_grad():
                self._restart_some_chains()
            self._restart_wait = self._next_restart() + 1  # counting this step
        m = int(min(m, self._restart_wait))
        u = self._draw_uniforms(m, self.learning_uniforms)
        if self._uses_compiled(True):
            taken = self._compiled_learning(m, u, trace)
        elif self.backend == "device" and self._has_device_learning():
            taken = self._device_learning(m, u, trace)
        else:
            taken = 0
            while taken < m and not self.learning_failed:
                self._learn_step(u[taken].split(1, dim=1))
                self._count_step()
                if trace is not None:
                    self._fill_trace(trace, taken)
                taken += 1
        self._restart_wait -= taken
        return taken

    def _after_learning(self, taken, status, params, losses, weights, last, log_p) -> None:
        """What every backend's learning chunk ends with: the parameters back into the
        function, the history, a stop after a divergence, the last step and the counts."""
        self._write_learned_params(params.to(self.device))
        self._last_good = params.clone()
        for t in range(taken):
            step = self.n_steps + t
            if self.history.wants(step):
                mixture = weights[t, :4] if isinstance(self.balancing, MixtureBalancing) else None
                self.history.record(step, float(losses[t]), float(weights[t, 4]), mixture)
        if status:
            self._stop_learning()
        if taken:
            self._last_refs = (last[:, 0].long(), last[:, 1:2], last[:, 2:3], last[:, 3:4] > 0.5)
            self._cache_stale = True
            self.n_target_evals += taken * self.neighbourhood_size  # the uniform flips x~
            self._count_step(taken)
            self._log_p_learning, self._log_p_step = log_p, self.n_steps

    def _setup_learning(self, lr, optimizer, restart_prob, objective) -> None:
        number = not isinstance(lr, (bool, np.bool_)) and isinstance(lr, numbers.Real)
        if not (number and 0 < float(lr) <= 10):  # False for NaN too
            raise ValueError(f"lr must be a number in (0, 10], got {lr!r}.")
        lr = float(lr)
        check_optimizer(optimizer)
        number = not isinstance(restart_prob, (bool, np.bool_))
        if not (number and isinstance(restart_prob, numbers.Real) and 0 <= restart_prob <= 1):
            raise ValueError(f"restart_prob must be a probability in [0, 1], got {restart_prob!r}.")
        check_objective(objective)
        self.lr, self.optimizer_name, self.restart_prob = float(lr), optimizer, float(restart_prob)
        self.objective = objective
        self.eta_raw = torch.zeros(1, dtype=torch.float64, device=self.device, requires_grad=True)
        self._log_p_learning, self._log_p_step = None, -1
        self._restart_wait = self._next_restart()
        self._torch_optimizer = None
        if self.learnable:
            params = [*self.balancing.parameters(), self.eta_raw]
            self._last_good = torch.nn.utils.parameters_to_vector(params).detach().clone()

    @property
    def _optimizer(self):
        """The torch optimiser of the torch learning step, built on first use: the first
        ``torch.optim`` construction in a process costs about 1.5 s, which compiled learning
        (its own optimiser state) never pays."""
        if self._torch_optimizer is None and self.learnable:
            params = [*self.balancing.parameters(), self.eta_raw]
            if self.optimizer_name == "adam":
                try:  # the fused kernel halves the per-step cost; older builds may lack it
                    self._torch_optimizer = torch.optim.Adam(params, lr=self.lr, fused=True)
                except (RuntimeError, TypeError, ValueError):
                    self._torch_optimizer = torch.optim.Adam(params, lr=self.lr)
            else:
                self._torch_optimizer = torch.optim.SGD(params, lr=self.lr, momentum=SGD_MOMENTUM)
            load_kernel_state(self, self._torch_optimizer)  # the kernels learned before
        return self._torch_optimizer

    @property
    def eta(self) -> float:
        return float(torch.nn.functional.softplus(self.eta_raw.detach()))

    def _next_restart(self) -> float:
        """Learning steps until the paper's Q1 next restarts a chain (spec 5, ``pi``).

        Each chain restarts with probability ``pi`` per learning step, independently, so the
        wait until any of the ``B`` chains does is geometric with ``p = 1 - (1 - pi)^B``: drawn
        once, not per step.
        """
        if self.restart_prob <= 0:
            return math.inf
        if self.restart_prob >= 1:
            return 0
        p = -math.expm1(self.n_chains * math.log1p(-self.restart_prob))
        u = float(self._restart_uniforms(1)[0])
        return math.floor(math.log1p(-u) / math.log1p(-p)) if p < 1 else 0

    def _restart_uniforms(self, n: int) -> torch.Tensor:
        """``n`` uniforms for the restarts, from the sampler's generator (the CUDA tests draw
        them on the host, as ``_draw_uniforms``, to follow a CPU twin)."""
        return torch.rand(n, generator=self.generator, dtype=torch.float64, device=self.device)

    def _restart_bits(self, shape) -> torch.Tensor:
        """Fair bits for the restarted states, from the sampler's generator."""
        return torch.randint(0, 2, shape, generator=self.generator, device=self.device)

    def _restart_some_chains(self) -> None:
        """Restart chains from uniform random states, given that at least one restarts.

        Exact: the first restarting chain ``J`` has ``P(J = j | J <= B) ~ (1 - pi)^j pi`` (a
        truncated geometric), and every chain after it restarts independently with ``pi``.
        """
        restart = restarting_chains(self.restart_prob, self._restart_uniforms(self.n_chains + 1))
        bits = self._restart_bits(self._x.shape)
        self._x = torch.where(restart.unsqueeze(1), (2 * bits - 1).to(torch.float64), self._x)
        self.resync()
        self._log_p_learning = None

    @torch.enable_grad()  # the caller may hold no_grad (the app's slow-motion step does)
    def _learn_step(self, u) -> None:
        """One burn-in step of Algorithm 1: propose, update (theta, eta), accept with theta0.

        ``log g_theta0`` over every site is evaluated once: its values give ``Z(x)`` and the
        proposal (the proposal and the acceptance use theta0), and the loss reuses them. The
        loss's gradient in ``log Z`` and in the neighbourhoods' ``log g`` comes by hand
        (``lsb_loss_and_grads``); LSB 1 chains it to theta by hand as well, LSB 2 by autograd
        through its network.
        """
        mixture = isinstance(self.balancing, MixtureBalancing)
        if mixture:
            log_z, i, shares = self._mixture_partition_and_site(u)
        else:
            log_g = self.balancing.log_g(self._s[:, : self.n_sites])  # [B, D], theta0, with grad
            log_z = torch.logsumexp(log_g, 1)
            if not bool(torch.isfinite(log_z.detach()).all()):
                with torch.no_grad():
                    self._stop_learning()
                    self._step(u[:3])
                return
            with torch.no_grad():  # i ~ g / Z by one inverse CDF: g changes everywhere anyway
                cdf = torch.exp(log_g.detach() - log_z.detach().unsqueeze(1)).cumsum(1)
                i = torch.searchsorted(cdf, u[0] * cdf[:, -1:], right=True).view(-1)
        with torch.no_grad():
            # x~: one uniformly chosen site j flipped (the one-sample rejection estimate); both
            # flips are looked up at once, [2, B, K]: the proposed x', then x~
            j = (u[3] * self.n_sites).long().clamp_(max=self.n_sites - 1).view(-1)
            index, unique, s_old, x_new, s_new = self._flip_neighbourhoods(torch.stack([i, j]))
            # [4, B, K]: x' before and after the flip, then x~ before and after
            s_flips = torch.stack([s_old, s_new], 1).view(4, self.n_chains, -1)
        if mixture:
            log_g_flips, responsibilities = self.balancing.log_g_and_responsibilities(s_flips)
        else:  # one evaluation of g_theta0 on both neighbourhoods, with gradient
            log_g_flips = self.balancing.log_g(s_flips)
        with torch.no_grad():
            log_q0 = log_g_flips[0, :, 0].detach() - log_z.detach()  # log Q_theta0(x'|x)
            log_p = self._learning_log_p()
            s_objective = self._objective_log_ratio(i, s_old[0, :, 0])
        loss, grad_log_z, grad_flips, grad_eta_raw, dz = lsb_loss_and_grads(
            log_z, log_g_flips, unique[0], unique[1], log_p, s_objective, log_q0, self.eta_raw
        )
        if mixture:  # log Z and log g depend on theta through the log-weights only
            n_components = shares.shape[1]
            grad_log_w = grad_log_z @ shares + grad_flips.reshape(-1) @ responsibilities.reshape(
                -1, n_components
            )
            self.balancing.theta.grad = self._log_softmax_backward(grad_log_w)
        else:
            self._optimizer.zero_grad(set_to_none=True)
            torch.autograd.backward([log_z, log_g_flips], [grad_log_z, grad_flips])
            penalty = self.balancing.learning_penalty(self.generator, self.n_chains)
            if penalty is not None:  # the authors' monotonicity penalty adds to the gradient
                penalty.backward()
                loss = loss + penalty.detach()
        self.eta_raw.grad = grad_eta_raw
        with torch.no_grad():
            self._optimizer.step()
            self.balancing.project_()  # LSB 2' keeps its slopes in [0, 1]
            self._parameter_writes += 1  # fused Adam leaves the version counters alone
            # one check: a non-finite loss or gradient leaves non-finite parameters or loss
            params = torch.nn.utils.parameters_to_vector(self._learned_params())
            if bool(torch.isfinite(params.sum() + loss)):
                self._last_good = params
            else:
                self._stop_learning()
            # the proposal's acceptance under theta0, in units of Z(x): A = Z / max(Z, Z')
            z_new = 1.0 + dz[0].unsqueeze(1)
            accept = u[2] * torch.clamp(z_new, min=1.0) < 1.0
            self._last_refs = (i, torch.ones_like(z_new), z_new, accept)
            self._write(accept, index[0], x_new[0], s_new[0])
            self._log_p_learning = log_p + torch.where(accept, s_old[0, :, :1], 0.0).squeeze(1)
            self._cache_stale = True  # g changed everywhere: rebuild before the next proposal
            if self.history.wants(self.n_steps):
                self.history.record(self.n_steps, float(loss), self.eta, self._weights_or_none())
        self.n_target_evals += self.neighbourhood_size  # the uniformly flipped neighbourhood

    def _log_softmax_backward(self, grad_log_w: torch.Tensor) -> torch.Tensor:
        """theta's gradient from that of ``log w = log_softmax(theta)``, as autograd computes it."""
        weights = torch.softmax(self.balancing.theta.detach(), 0)
        return grad_log_w - weights * grad_log_w.sum()

    def _flip_neighbourhoods(self, sites: torch.Tensor):
        """``_flip_neighbourhood`` for several sites per chain at once (``sites [F, B]``).

        Returns ``(index [F, B, K], unique, s_old, x_new, s_new)``, each ``[F, B, K]``: the
        same values, in fewer (batched) lookups.
        """
        f, b = sites.shape
        k = self._site_index.shape[-1]
        flat = sites.reshape(-1)
        slots = self._site_index[:, 0].index_select(0, flat).view(f, b, k)
        sign, coupling, unique = self._site_values.index_select(0, flat).view(f, b, 3, k).unbind(2)
        x_old = self._x.expand(f, -1, -1).gather(2, slots)
        s_old = self._s.expand(f, -1, -1).gather(2, slots)
        # s_i -> -s_i;  s_j -> s_j + coupling_ij * x_j * x_i   (spec 1, x_i before the flip)
        s_new = torch.addcmul(s_old * sign, coupling * x_old, x_old[..., :1])
        return slots, unique, s_old, x_old * sign, s_new

    def _mixture_partition_and_site(self, u: torch.Tensor):
        """LSB 1 shortcut (spec 5): ``Z_theta = sum_k w_k S_k`` with ``S_k = sum_i g_k(t_i)``.

        The component sums do not depend on theta, so ``log Z`` depends on theta through the
        four weights only (its gradient in ``log w`` is the components' shares ``w_k S_k / Z``,
        returned ``[B, 4]``), and the proposal draws a component ``k`` with that share and then
        a site ``i ~ g_k(t_i) / S_k``: together exactly ``Q(i) = g_theta(t_i) / Z``.
        """
        with torch.no_grad():
            log_sums, scaled = self.balancing.component_log_sums(self._s[:, : self.n_sites])
            logits = log_sums + self.balancing.log_weights().detach()
            log_z = torch.logsumexp(logits, 1)
            shares = torch.softmax(logits, 1)
            cdf = shares.cumsum(1)
            k = torch.searchsorted(cdf, u[0] * cdf[:, -1:], right=True)  # [B, 1]
            # NaN weights (a diverged theta) search past the end: stay in range, and let the NaN
            # loss stop learning
            k.clamp_(max=shares.shape[1] - 1)
            row = scaled.gather(1, k.unsqueeze(2).expand(-1, 1, self.n_sites)).squeeze(1)
            cdf = row.cumsum(1)
            i = torch.searchsorted(cdf, u[1] * cdf[:, -1:], right=True).view(-1)
        return log_z, i, shares

    def _authors_field(self) -> torch.Tensor | None:
        """The target's field ``[1 or B, D]`` when the objective uses the authors' log p~."""
        if self.objective != "authors":
            return None
        return self.target.field.to(device=self.device, dtype=torch.float64)

    def _objective_log_ratio(self, i: torch.Tensor, s_i: torch.Tensor) -> torch.Tensor:
        """``log p~(x') - log p~(x)`` as the objective sees it for the flips of sites ``i``."""
        field = self._authors_field()
        if field is None:
            return s_i
        rows = self._chains if field.shape[0] > 1 else torch.zeros_like(self._chains)
        x_i = self._x[self._chains, i]
        return authors_log_ratio(s_i, x_i, field[rows, i])

    def _learning_log_p(self) -> torch.Tensor:
        """``log p~(x)`` during learning: kept incrementally between consecutive learning steps."""
        cached = self._log_p_learning
        if cached is None or self._log_p_step != self.n_steps:
            cached = self.log_p
        self._log_p_step = self.n_steps + 1
        return cached

    def _stop_learning(self) -> None:
        """Restore the last good parameters, stop learning and say so."""
        self._write_learned_params(self._last_good)
        self.learning_failed = True
        warnings.warn(
            f"{self.name}: learning produced a non-finite loss or parameters at step "
            f"{self.n_steps}; it stops learning and keeps its last good balancing function.",
            RuntimeWarning,
            stacklevel=4,
        )

    def _learned_params(self):
        return [*self.balancing.parameters(), self.eta_raw]

    def _write_learned_params(self, vector: torch.Tensor) -> None:
        """Set the function's parameters and ``eta_raw`` from one flat vector. The write
        replaces their ``.data``, which leaves their version counters alone: counted here for
        ``_device_function``."""
        torch.nn.utils.vector_to_parameters(vector, self._learned_params())
        self._parameter_writes += 1

    def _weights_or_none(self):
        weights = getattr(self.balancing, "weights", None)
        return weights() if weights is not None else None
