"""Locally balanced samplers on any target: propose flipping site ``i`` with
``Q(i|x) = g(t_i) / Z(x)``, ``t_i = e^{s_i}``, ``Z(x) = sum_i g(t_i)`` (spec 2), and the fast
variant FLSB (the LSB paper's section 3.3 and Algorithm 2).

Two kinds of ratios (``ratios=``):

- ``"exact"``: ``s_i = log p~(x with i flipped) - log p~(x)``, kept by the target's incremental
  update. With a balancing ``g`` the Metropolis-Hastings acceptance is ``min(1, Z(x)/Z(x'))``.
  On a target that is not pairwise a flip changes every ratio, so ``Z(x')`` needs all ``n``
  ratios at ``x'``: a step costs ``n`` evaluations (a pairwise target's flip changes only the
  flipped site's neighbourhood ``K``: ``K``).
- ``"gradient"`` (FLSB; GWG when ``g = sqrt``): ``s~_i = -2 x_i d_i`` with
  ``d = grad log p~(x)``, the first-order estimate of ``s_i``. ``s~_i(x')`` is not ``-s~_i(x)``,
  so the balancing shortcut fails; the step uses the full ratio
  ``p~(x') Q~(x|x') / (p~(x) Q~(x'|x))`` with ``log p~(x')`` exact: one evaluation (value and
  gradient at ``x'``; ``x``'s are kept from the step before).

Cached per chain on top of ``BatchedSampler`` (``x``, ``log p~(x)``), and the invariant:

- ``s [B, n]``: the ratios the proposal reads, exact ones (``BatchedSampler._s`` and the
  target's ``ratio_cache``) or ``s~ = -2 x grad log p~(x)`` (``_s_tilde``);
- ``log_g [B, n] = log g(e^s)`` under the current ``g`` and ``log_Z [B] = logsumexp(log_g)``.

A move commits the proposed state's ``s``, ``log_g`` and ``log_Z`` (computed for the acceptance
anyway) where accepted, so nothing is recomputed; a learning step changes ``g`` everywhere and
marks ``log_g`` stale, rebuilt before the next frozen step; ``resync`` recomputes all from ``x``.
``invariant_error()`` checks them against a recompute.

On a ``FactorGraph`` on the CPU with a fixed ``g`` and exact ratios, ``backend="auto"`` takes
compiled frozen steps (``factor_graph_steps``): the same chains from the same uniforms, a step
costing the flipped site's neighbourhood and ``O(sqrt(n))`` for the draw. On an ``RBM`` frozen
steps are compiled too (``rbm_steps``): with gradient ratios (FLSB) and a function the kernels
know, Gibbs with Gradients' kernel with ``g`` as a parameter; with exact ratios, any of the
paper's functions, every ratio at ``x'`` from the shift tables; and the learning steps of LSB 1
and LSB 2 with either kind of ratios (``backends.rbm_learning_kernels``). The same chains.

Zero mass: a flip into ``p~ = 0`` has ``s_i = -inf``; a ``g`` with ``g(0) > 0`` (``max(1, t)``,
LSB 1, LSB 2) still proposes it, and ``Z(x')`` is then undefined: such a move is rejected
explicitly, never through arithmetic on ``inf``. A chain whose every ``g`` is 0 stays put.

Learning (``step(n, learn=True)``): Algorithm 1 (spec 5) with the objective's ``T(x'|x)`` the
chain's own transition probability under ``theta``. With exact ratios it is
``g(t_i) / max(Z(x), Z(x'))`` and the loss is ``learning.objective.lsb_loss_and_grads`` on
``[4, B, n + 1]`` neighbourhoods (slot 0 the flipped site, then every site). With gradient
ratios (Algorithm 2, and the authors' RBM code with ``approx=True``) it is
``T = min(Q~(x'|x), p~(x')/p~(x) Q~(x|x'))`` with the approximate ``Q~`` forward and reverse and
``log p~`` exact, for ``x'`` and for the uniform flip ``x~`` alike (``lsb_mh_loss``): a learning
step scores ``x~`` as well, one more evaluation (``n`` more with exact ratios). No host read
happens inside a step: a non-finite loss pins the parameters to the last good ones on the device,
and ``step`` reads that flag once at its end (then warns, stops learning and goes on frozen).
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from lsbcore.balancing.functions import Balancing, sampler_balancing
from lsbcore.balancing.objective import lsb_loss_and_grads
from lsbcore.balancing.restarts import restarting_chains
from lsbcore.checks import real
from lsbcore.numerics import SGD_MOMENTUM
from lsbcore.samplers.balanced.backends import load_kernel_state
from lsbcore.samplers.balanced.common import check_objective, check_optimizer, take_balancing
from lsbcore.samplers.balanced.factor_graph_steps import FactorGraphSteps
from lsbcore.samplers.balanced.rbm_steps import RBMBalancedSteps
from lsbcore.samplers.batched import BatchedSampler
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.targets.base import Target

RATIOS = ("exact", "gradient")
# learning steps whose history waits on the device before one host read copies it over
PENDING_HISTORY = 256


# ----------------------------------------------------------------- the objective for any T
def mh_log_transition(
    log_q: torch.Tensor, log_q_reverse: torch.Tensor, log_ratio: torch.Tensor
) -> torch.Tensor:
    """``log T(x'|x) = log Q(x'|x) + min(0, log p~(x')/p~(x) + log Q(x|x') - log Q(x'|x))``,
    written ``min(log Q(x'|x), log_ratio + log Q(x|x'))``: the Metropolis-Hastings transition
    probability of a proposal whose reverse is not known to balance it."""
    return torch.minimum(log_q, log_ratio + log_q_reverse)


def lsb_mh_loss(
    log_t: torch.Tensor,
    log_t_uniform: torch.Tensor,
    log_p: torch.Tensor,
    log_ratio: torch.Tensor,
    log_q0: torch.Tensor,
    eta_raw: torch.Tensor,
) -> torch.Tensor:
    """Spec 5's loss for any transition probability, differentiable in ``log_t``,
    ``log_t_uniform`` and ``eta_raw``:

        mean_b [ w_b T(x'|x) (log T(x'|x) - log p~(x'))  +  M~_b (eta M~_b - p^_b (log eta + 1)) ]

    with ``M~ = 1 - T(x~|x)``, ``p^_b = exp(log p~(x_b) - max log p~)``, ``w_b = p^_b / Q0``.
    ``log_ratio`` is ``log p~(x') - log p~(x)``, ``log_q0`` the proposal's ``log Q_theta0(x'|x)``
    (``+inf`` gives ``w = 0``: a proposal that cannot be taken). All ``[B]``.
    """
    with torch.no_grad():
        log_p_hat = log_p - log_p.max()
        p_hat = torch.exp(log_p_hat)
        w = torch.exp(log_p_hat - log_q0)
        log_p_new = log_p + log_ratio
    t = torch.exp(log_t)
    m = -torch.expm1(log_t_uniform)
    eta = F.softplus(eta_raw)
    terms = w * t * (log_t - log_p_new) + m * (eta * m - p_hat * (torch.log(eta) + 1.0))
    return terms.mean()


def _select(accept: torch.Tensor, new, old):
    """``new`` where ``accept`` (``[B]``), ``old`` elsewhere, through a target's per-chain cache
    (``None``, a tensor with a leading chain axis, or tuples, lists and dicts of them)."""
    if new is old or new is None:
        return new
    if isinstance(new, torch.Tensor):
        if new.dim() == 0 or new.shape[0] != accept.shape[0]:
            raise ValueError(
                "a target's ratio cache must hold per-chain tensors (leading axis B), got shape "
                f"{tuple(new.shape)}."
            )
        return torch.where(accept.view(-1, *([1] * (new.dim() - 1))), new, old)
    if isinstance(new, (tuple, list)):
        return type(new)(_select(accept, a, b) for a, b in zip(new, old, strict=True))
    if isinstance(new, dict):
        return {key: _select(accept, new[key], old[key]) for key in new}
    raise ValueError(f"a target's ratio cache must be tensors, got {type(new).__name__}.")


class BatchedBalancedSampler(RBMBalancedSteps, FactorGraphSteps, BatchedSampler):
    """A locally balanced single-flip sampler on any ``Target`` (see the module docstring).

    Args:
        balancing: a fixed function, LSB 1, LSB 2 or a frozen loaded one.
        ratios: ``"exact"`` or ``"gradient"`` (FLSB; the target must provide ``"gradient"``).
        lr, optimizer, restart_prob, objective: Algorithm 1's learning rate, ``"adam"`` or
            ``"sgd"`` (momentum 0.9), the paper's ``pi`` and the objective (``"exact"`` only:
            ``"authors"`` is defined through a pairwise field).
        name: the registry's name (default: the function's, ``f`` before it for FLSB).
        common: ``seed``, ``device``, ``x0``, ``resync_every``, ``backend`` (``BatchedSampler``).
    """

    sites_per_step = 1

    def __init__(
        self,
        target: Target,
        n_chains: int,
        balancing: Balancing,
        ratios: str = "exact",
        lr: float = 1e-2,
        optimizer: str = "adam",
        restart_prob: float = 1e-8,
        objective: str = "exact",
        name: str | None = None,
        **common,
    ):
        take_balancing(self, balancing)  # balancing, learnable, learning_failed, history
        if ratios not in RATIOS:
            raise ValueError(f"ratios must be one of {RATIOS}, got {ratios!r}.")
        self.ratios = ratios
        self.uses_ratios = ratios == "exact"  # the base keeps exact s only when read
        self.needs = frozenset({"gradient"}) if ratios == "gradient" else frozenset()
        self.name = name or (balancing.name if ratios == "exact" else f"f{balancing.name}")
        self.lr = self._check_lr(lr)
        self.optimizer_name = check_optimizer(optimizer)
        self.restart_prob = real(restart_prob, "restart_prob", 0.0, 1.0)
        self.objective = check_objective(objective)
        self._stale = True
        super().__init__(target, n_chains, **common)
        if objective == "authors":
            raise ValueError(
                "the 'authors' objective is defined through a pairwise field (their code's "
                "log-ratio on an Ising posterior) and only the pairwise samplers compute it; "
                f"the batched {self.name!r} sampler on {target.describe()} learns with "
                "objective='exact'."
            )
        k = int(target.neighbourhood.shape[1]) if target.offers("pairwise") else self.n_sites
        self._exact_cost = k  # ratios rescored per scored state (module docstring)
        self.eta_raw = torch.zeros(1, dtype=torch.float64, device=self.device, requires_grad=True)
        self._torch_optimizer = None
        self._failed = torch.zeros((), dtype=torch.bool, device=self.device)
        self._pending: list[tuple[int, torch.Tensor]] = []
        if self.learnable:
            self._last_good = self._parameter_vector().clone()
        self._warned = False
        # drawn only by learners: a fixed function's stream is its steps' alone
        self._restart_wait = self._draw_restart_wait() if self.learnable else math.inf

    @staticmethod
    def _check_lr(lr) -> float:
        lr = real(lr, "lr", 0.0, 10.0)
        if lr == 0.0:
            raise ValueError("lr must be a number in (0, 10], got 0.")
        return lr

    # ----------------------------------------------------------------- the cache
    @property
    def evals_per_step(self) -> int:
        """``n`` (all ratios at ``x'``; ``K`` on a pairwise target) with exact ratios, 1 (value
        and gradient at ``x'``) with gradient ratios."""
        return self._exact_cost if self.ratios == "exact" else 1

    def _ratios_now(self) -> torch.Tensor:
        """The ratios the proposal reads at the current states ``[B, n]``."""
        return self._s if self.ratios == "exact" else self._s_tilde

    def _approximate_ratios(self, x: torch.Tensor) -> torch.Tensor:
        """``s~ = -2 x grad log p~(x)`` ``[B, n]``: flipping ``x_i`` moves it by ``-2 x_i``."""
        return -2.0 * x * self.target.grad_log_prob(x)

    def _after_resync(self) -> None:
        self.balancing.to(self.device)
        if self.ratios == "gradient":  # the gradient comes with the resync's evaluation
            with torch.no_grad():
                self._s_tilde = self._approximate_ratios(self._x)
        self._rebuild()

    @torch.no_grad()
    def _rebuild(self) -> None:
        """``log_g`` and ``log_Z`` from the ratios, under the current ``g``."""
        self._log_g = self.balancing.log_g(self._ratios_now())
        self._log_z = torch.logsumexp(self._log_g, 1)
        self._stale = False

    def invariant_error(self) -> float:
        """Largest gap between the cached ``log p~``, ``s``, ``log_g``, ``log_Z`` and a
        recompute from ``x`` (relative to their size, at least 1)."""
        errors = [super().invariant_error()]
        with torch.no_grad():
            if self.ratios == "gradient":
                s = self._approximate_ratios(self._x)
                errors.append(_gap(self._s_tilde, s))
            else:
                s = self.target.flip_log_ratios(self._x)
            if not self._stale:
                log_g = self.balancing.log_g(s)
                errors.append(_gap(self._log_g, log_g))
                errors.append(_gap(self._log_z, torch.logsumexp(log_g, 1)))
            errors.extend(self._compiled_cache_errors(s))  # where compiled steps ran last
        return max(errors)

    # ----------------------------------------------------------------- proposals
    def _choose_site(self, log_g: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Site ``i ~ g / Z`` per chain ``[B]`` by one inverse CDF from uniforms ``u [B]``.

        ``u < 1 - 2^-52`` keeps ``u * Z`` below the last cumulative sum, so the search lands on
        a positive term; a chain with ``Z = 0`` gets the last site and is rejected by the caller.
        """
        top = log_g.amax(1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, 0.0)
        cdf = torch.exp(log_g - top).cumsum(1)
        i = torch.searchsorted(cdf, u.unsqueeze(1) * cdf[:, -1:], right=True).squeeze(1)
        return i.clamp_(max=self.n_sites - 1)

    def _score(self, x_new: torch.Tensor, i: torch.Tensor):
        """What flipping site ``i`` to reach ``x_new`` gives: ``(log p~(x') - log p~(x) [B],
        s(x') [B, n], the target's cache at x' (exact ratios; None otherwise))``."""
        if self.ratios == "exact":
            s_new, cache = self.target.flip_log_ratios_after(self._x, x_new, self._s, self._cache)
            return self._s.gather(1, i.unsqueeze(1)).squeeze(1), s_new, cache
        log_p_new, grad_new = self.target.log_prob_and_grad(x_new)  # one pass where it can
        return log_p_new - self._log_p, -2.0 * x_new * grad_new, None

    def _log_acceptance(self, log_ratio, log_g_i, log_z, log_g_new_i, log_z_new):
        """``log A`` of flipping site ``i``, from ``log p~(x') - log p~(x)``, ``log g(t_i)`` and
        ``log Z`` at ``x`` and at ``x'`` (broadcast; NaN or ``-inf`` where undefined: see
        ``_alive``). Exact ratios: ``min(1, Z(x)/Z(x'))`` (the balancing property); gradient
        ratios: ``min(1, p~(x') Q~(x|x') / (p~(x) Q~(x'|x)))``."""
        if self.ratios == "exact":
            return (log_z - log_z_new).clamp(max=0.0)
        log_q, log_q_reverse = log_g_i - log_z, log_g_new_i - log_z_new
        return (log_ratio + log_q_reverse - log_q).clamp(max=0.0)

    @staticmethod
    def _alive(log_ratio, log_z) -> torch.Tensor:
        """Whether a flip may be taken: never into zero mass, nor from a chain with ``Z = 0``
        (whose proposal is undefined), whatever the arithmetic on ``inf`` gives."""
        return (log_ratio > -math.inf) & (log_z > -math.inf)

    def _step(self) -> None:
        if self._stale:  # the last learning step changed g everywhere
            self._rebuild()
        u = self._uniforms(2, self.n_chains)
        i = self._choose_site(self._log_g, u[0])
        x_new = self._flip_sites(i)
        log_ratio, s_new, cache = self._score(x_new, i)
        log_g_new = self.balancing.log_g(s_new)
        log_z_new = torch.logsumexp(log_g_new, 1)
        at_i = i.unsqueeze(1)
        log_a = self._log_acceptance(
            log_ratio,
            self._log_g.gather(1, at_i).squeeze(1),
            self._log_z,
            log_g_new.gather(1, at_i).squeeze(1),
            log_z_new,
        )
        alive = self._alive(log_ratio, self._log_z)
        accept = alive & (torch.log(u[1]) < log_a)
        self._last = StepInfo(
            site=i,
            accept_prob=torch.where(alive, torch.exp(log_a), 0.0),
            accepted=accept,
        )
        self._commit(accept, x_new, log_ratio, s_new, cache, log_g_new, log_z_new)

    def _commit(self, accept, x_new, log_ratio, s_new, cache, log_g_new=None, log_z_new=None):
        """Chains where ``accept`` go to ``x_new`` with its ratios (and cache, ``log_g``,
        ``log_Z``: None after a learning step, which leaves them stale); the rest stay."""
        keep = accept.unsqueeze(1)
        self._x = torch.where(keep, x_new, self._x)
        self._n_accepted += accept
        self._log_p = self._log_p + torch.where(accept, log_ratio, 0.0)
        if self.ratios == "exact":
            self._s = torch.where(keep, s_new, self._s)
            self._cache = _select(accept, cache, self._cache)
        else:
            self._s_tilde = torch.where(keep, s_new, self._s_tilde)
        if log_g_new is None:
            self._stale = True
        else:
            self._log_g = torch.where(keep, log_g_new, self._log_g)
            self._log_z = torch.where(accept, log_z_new, self._log_z)

    # ----------------------------------------------------------------- the exact law
    def proposal_log_probs(self) -> torch.Tensor:
        """``log Q(i | x)`` for every chain and site, ``[B, *shape]`` (``-inf`` everywhere for a
        chain with nothing to propose)."""
        with torch.no_grad():
            if self._stale:
                self._rebuild()
            log_q = self._log_g - self._log_z.unsqueeze(1)
            dead = torch.isneginf(self._log_z).unsqueeze(1)
            return torch.where(dead, -math.inf, log_q).view(self.x.shape)

    def flip_probabilities(self) -> torch.Tensor:
        """``T(x -> x with i flipped) = Q(i|x) A`` for every chain and site, ``[B, *shape]``.

        Every flipped state is scored afresh (``target.flip_log_ratios``, or the value and
        gradient), with the acceptance ``step`` uses: exact transition probabilities for
        ``lsbcore.exact`` and the teaching views. O(B n) states scored, in groups of sites.
        """
        if self.target.batch != 1:
            raise ValueError(
                "flip_probabilities scores the flipped states of every chain at once and needs "
                f"one target shared by the chains; this one holds {self.target.batch} (use "
                "target.chain(b))."
            )
        with torch.no_grad():
            if self._stale:
                self._rebuild()
            b, n = self._x.shape
            log_q = self._log_g - self._log_z.unsqueeze(1)  # [B, n]
            probs = torch.zeros(b, n, dtype=torch.float64, device=self.device)
            group = max(1, (1 << 20) // max(1, b * n))  # flipped states scored at once
            for first in range(0, n, group):
                sites = torch.arange(first, min(n, first + group), device=self.device)
                g = len(sites)
                flipped = self._x.unsqueeze(1).repeat(1, g, 1)  # [B, G, n]
                flipped[:, torch.arange(g), sites] *= -1.0
                flat = flipped.view(b * g, n)
                if self.ratios == "exact":
                    log_ratio = self._s[:, sites]  # [B, G]
                    s_new = self.target.flip_log_ratios(flat)
                else:
                    log_ratio = self.target.log_prob(flat).view(b, g) - self._log_p.unsqueeze(1)
                    s_new = self._approximate_ratios(flat)
                log_g_new = self.balancing.log_g(s_new).view(b, g, n)
                log_z_new = torch.logsumexp(log_g_new, 2)  # [B, G]
                log_z = self._log_z.unsqueeze(1)
                log_a = self._log_acceptance(
                    log_ratio,
                    self._log_g[:, sites],
                    log_z,
                    log_g_new[:, torch.arange(g), sites],
                    log_z_new,
                )
                alive = self._alive(log_ratio, log_z)
                probs[:, sites] = torch.where(alive, torch.exp(log_q[:, sites] + log_a), 0.0)
            return probs.view(self.x.shape)

    # ----------------------------------------------------------------- learning (spec 5)
    @property
    def eta(self) -> float:
        return float(F.softplus(self.eta_raw.detach()))

    def _learned_params(self) -> list[torch.Tensor]:
        return [*self.balancing.parameters(), self.eta_raw]

    def _parameter_vector(self) -> torch.Tensor:
        return torch.nn.utils.parameters_to_vector(self._learned_params()).detach()

    @property
    def _optimizer(self):
        """Adam or SGD with momentum over ``(theta, eta_raw)``, built on first use."""
        if self._torch_optimizer is None:
            params = self._learned_params()
            if self.optimizer_name == "adam":
                self._torch_optimizer = torch.optim.Adam(params, lr=self.lr)
            else:
                self._torch_optimizer = torch.optim.SGD(params, lr=self.lr, momentum=SGD_MOMENTUM)
            load_kernel_state(self, self._torch_optimizer)  # compiled learning ran before
        return self._torch_optimizer

    def step(self, n: int = 1, learn: bool = False, trace: torch.Tensor | None = None) -> None:
        super().step(n, learn=learn, trace=trace)
        if learn:
            self._settle_learning()

    def _learn_step(self) -> None:
        """One burn-in step of Algorithm 1: propose with ``theta0``, one optimiser step on the
        loss, accept with ``theta0``'s acceptance (the module docstring)."""
        if self.learning_failed:  # learning stopped in an earlier call: frozen steps
            with torch.no_grad():
                self._step()
            return
        if self._restart_wait <= 0:  # the paper's Q1: chains restart before this step
            with torch.no_grad():
                self._restart_some_chains()
            self._restart_wait = self._draw_restart_wait() + 1  # counting this step
        self._restart_wait -= 1
        u = self._uniforms(3, self.n_chains)
        s = self._ratios_now()
        log_g = self.balancing.log_g(s)  # [B, n], theta0, with gradient
        log_z = torch.logsumexp(log_g, 1)
        with torch.no_grad():
            i = self._choose_site(log_g.detach(), u[0])
            # x~: one uniformly chosen site j flipped (the one-sample rejection estimate)
            j = (u[2] * self.n_sites).long().clamp_(max=self.n_sites - 1)
            x_new, x_uniform = self._flip_sites(i), self._flip_sites(j)
            log_ratio, s_new, cache = self._score(x_new, i)
            log_ratio_u, s_uniform, _ = self._score(x_uniform, j)
            dead, dead_u = torch.isneginf(log_ratio), torch.isneginf(log_ratio_u)
            # zero mass: T = 0 for every theta; score x itself instead, so nothing is inf
            s_safe = torch.where(dead.unsqueeze(1), s, s_new)
            s_safe_u = torch.where(dead_u.unsqueeze(1), s, s_uniform)
        if self.ratios == "exact":
            # a chain whose every flip leads into zero mass with g(0) = 0 has Z = 0: its T is 0
            # for every theta, so its terms are constant; a finite stand-in for its log g (its
            # proposal is dead, w = 0) keeps 0 * inf out of the loss
            isolated = torch.isneginf(log_z.detach()).unsqueeze(1)
            log_g_loss = torch.where(isolated, 0.0, log_g)
            loss, accept_log_a = self._exact_objective(
                log_g_loss,
                torch.logsumexp(log_g_loss, 1),
                i,
                j,
                s_safe,
                s_safe_u,
                log_ratio,
                dead,
                dead_u,
            )
        else:
            loss, accept_log_a = self._gradient_objective(
                log_g, log_z, i, j, s_safe, s_safe_u, log_ratio, log_ratio_u, dead, dead_u
            )
        penalty = self.balancing.learning_penalty(self.generator, self.n_chains)
        if penalty is not None:  # the authors' monotonicity penalty adds to the gradient
            penalty.backward()
            loss = loss + penalty.detach()
        with torch.no_grad():
            self._optimizer.step()
            self.balancing.project_()  # LSB 2' keeps its slopes in [0, 1]
            self._guard(loss)
            accept = ~dead & (torch.log(u[1]) < accept_log_a)
            self._last = StepInfo(
                site=i,
                accept_prob=torch.where(dead, 0.0, torch.exp(accept_log_a)),
                accepted=accept,
            )
            self._commit(accept, x_new, log_ratio, s_new, cache)
            if self.history.wants(self.n_steps):
                self._pending.append((self.n_steps, self._history_row(loss)))
                if len(self._pending) >= PENDING_HISTORY:
                    self._flush_history()
        # x~ was scored too: its ratios (exact) or its value and gradient
        self.n_target_evals += self.evals_per_step

    def _exact_objective(self, log_g, log_z, i, j, s_new, s_uniform, log_ratio, dead, dead_u):
        """``lsb_loss_and_grads`` on neighbourhoods of ``n + 1`` slots: slot 0 the flipped
        site (out of the sums), then every site, since any flip may change every ratio. Its
        gradients go into ``(theta, eta_raw)``; returns the loss and ``theta0``'s ``log A``."""
        b = self.n_chains
        log_g_new = self.balancing.log_g(s_new)
        log_g_uniform = self.balancing.log_g(s_uniform)
        at_i, at_j = log_g.gather(1, i.unsqueeze(1)), log_g.gather(1, j.unsqueeze(1))
        # a uniform flip into zero mass: g(t_j) taken as 0 gives T(x~|x) = 0, M~ = 1
        at_j = torch.where(dead_u.unsqueeze(1), -math.inf, at_j)
        log_g_flips = torch.stack(
            [
                torch.cat([at_i, log_g], 1),
                torch.cat([log_g_new.gather(1, i.unsqueeze(1)), log_g_new], 1),
                torch.cat([at_j, log_g], 1),
                torch.cat([log_g_uniform.gather(1, j.unsqueeze(1)), log_g_uniform], 1),
            ]
        )  # [4, B, n + 1]
        unique = torch.ones(b, self.n_sites + 1, dtype=torch.float64, device=self.device)
        unique[:, 0] = 0.0
        with torch.no_grad():
            # a proposal into zero mass: w = 0 (log Q0 = inf) and a finite stand-in ratio
            log_q0 = torch.where(dead, math.inf, at_i.detach().squeeze(1) - log_z.detach())
            s_flipped = torch.where(dead, 0.0, log_ratio)
        loss, grad_log_z, grad_flips, grad_eta_raw, dz = lsb_loss_and_grads(
            log_z, log_g_flips, unique, unique, self._log_p, s_flipped, log_q0, self.eta_raw
        )
        self._optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward([log_z, log_g_flips], [grad_log_z, grad_flips])
        self.eta_raw.grad = grad_eta_raw
        # A_theta0 = Z / max(Z, Z') = 1 / (1 + relu(dz)), dz = (Z' - Z) / Z
        return loss.detach(), -torch.log1p(F.relu(dz[0]))

    def _gradient_objective(
        self, log_g, log_z, i, j, s_new, s_uniform, log_ratio, log_ratio_u, dead, dead_u
    ):
        """``lsb_mh_loss`` with ``T`` the FLSB chain's own transition probability under
        ``theta`` (approximate ``Q~`` forward and reverse, exact ``log p~``), by autograd;
        returns the loss and ``theta0``'s ``log A``."""
        sites = torch.stack([i, j]).unsqueeze(2)  # [2, B, 1]
        log_q = log_g.expand(2, -1, -1).gather(2, sites).squeeze(2) - log_z  # [2, B]
        log_g_rev = self.balancing.log_g(torch.stack([s_new, s_uniform]))  # [2, B, n]
        log_q_reverse = log_g_rev.gather(2, sites).squeeze(2) - torch.logsumexp(log_g_rev, 2)
        ratios = torch.where(
            torch.stack([dead, dead_u]), 0.0, torch.stack([log_ratio, log_ratio_u])
        )
        log_t = mh_log_transition(log_q, log_q_reverse, ratios)  # [2, B]
        log_t_uniform = torch.where(dead_u, -math.inf, log_t[1])  # T(x~|x) = 0: M~ = 1
        log_q0 = torch.where(dead, math.inf, log_q[0].detach())
        loss = lsb_mh_loss(log_t[0], log_t_uniform, self._log_p, ratios[0], log_q0, self.eta_raw)
        self._optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # theta0's acceptance: log A = log T - log Q = min(0, log R)
        with torch.no_grad():
            log_a = (log_t[0] - log_q[0]).detach()
        return loss.detach(), log_a

    def _guard(self, loss: torch.Tensor) -> None:
        """Keep the new parameters if they and the loss are finite, else pin the last good ones
        for good (on the device: ``step`` reads the flag once, at its end)."""
        params = self._parameter_vector()
        finite = torch.isfinite(params.sum() + loss)
        good = finite & ~self._failed
        kept = torch.where(good, params, self._last_good)
        torch.nn.utils.vector_to_parameters(kept, self._learned_params())
        self._last_good = kept.clone()  # the parameters are views of kept: the optimiser's
        self._failed = self._failed | ~finite

    def _history_row(self, loss: torch.Tensor) -> torch.Tensor:
        """``[loss, eta, failed, weights...]`` of this step, on the device."""
        eta = F.softplus(self.eta_raw.detach())
        parts = [loss.view(1), eta.view(1), self._failed.to(torch.float64).view(1)]
        log_weights = getattr(self.balancing, "log_weights", None)
        if log_weights is not None:
            parts.append(torch.exp(log_weights().detach()))
        return torch.cat(parts)

    def _flush_history(self) -> None:
        """Copy the pending history over (one host read), up to the first failed step."""
        if not self._pending:
            return
        steps = [step for step, _ in self._pending]
        rows = torch.stack([row for _, row in self._pending]).cpu().numpy()
        self._pending = []
        for step, row in zip(steps, rows, strict=True):
            if row[2] > 0:  # this step or an earlier one failed: learning stops here
                self.learning_failed = True
            if not self.learning_failed:
                self.history.record(step, row[0], row[1], row[3:] if len(row) > 3 else None)

    def _settle_learning(self) -> None:
        """After a call of learning steps: the history, and the stop if learning failed."""
        self._flush_history()
        if self.learning_failed or bool(self._failed):
            self.learning_failed = True
            self._stale = True
        if self.learning_failed and not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.name}: learning produced a non-finite loss or parameters by step "
                f"{self.n_steps}; it stops learning and keeps its last good balancing function.",
                RuntimeWarning,
                stacklevel=3,
            )

    # ----------------------------------------------------------------- restarts (Q1)
    def _draw_restart_wait(self) -> float:
        """Learning steps until the paper's Q1 next restarts a chain: each chain restarts with
        probability ``pi`` per step, so the wait until any of ``B`` does is geometric with
        ``p = 1 - (1 - pi)^B``; drawn once per restart, not per step."""
        if self.restart_prob <= 0:
            return math.inf
        if self.restart_prob >= 1:
            return 0
        p = -math.expm1(self.n_chains * math.log1p(-self.restart_prob))
        u = float(self._uniforms(1))
        return math.floor(math.log1p(-u) / math.log1p(-p)) if p < 1 else 0

    def _restart_some_chains(self) -> None:
        """Restart chains, given that at least one does: the first, ``J``, has
        ``P(J = j) ~ (1 - pi)^j pi`` on ``0..B-1``, every later one restarts with ``pi``. A
        restarted chain draws the target's start (uniform where every state has mass)."""
        b = self.n_chains
        restart = restarting_chains(self.restart_prob, self._uniforms(b + 1))
        fresh = self.target.start(b, self.generator).to(self.device, torch.float64)
        self._x = torch.where(restart.unsqueeze(1), fresh.reshape(b, -1), self._x)
        self.resync()


def _gap(cached: torch.Tensor, exact: torch.Tensor) -> float:
    """Largest gap relative to the size of the values (at least 1); inf where the two
    disagree on which entries are finite."""
    finite = torch.isfinite(exact)
    if not bool((finite == torch.isfinite(cached)).all()):
        return math.inf
    if not bool(finite.any()):
        return 0.0
    gap = (cached[finite] - exact[finite]).abs().max()
    return float(gap / exact[finite].abs().max().clamp(min=1.0))


def balanced_builder(kind: str, ratios: str = "exact"):
    """The registry's ``build_any`` for a balanced sampler: ``kind`` is a fixed function's name,
    ``"lsb1"``, ``"lsb2"``, ``"lsb2-monotone"`` or ``"learned"`` (a loaded function,
    ``balancing=``, frozen)."""

    def build(
        target, n_chains, hidden=10, groups=20, units=20, balancing=None, name=None, **common
    ):
        monotone = {k: common.pop(k) for k in ("init", "monotonicity", "penalty") if k in common}
        balancing = sampler_balancing(
            kind, hidden, common.get("seed", 0), balancing, groups=groups, units=units, **monotone
        )
        default = kind if ratios == "exact" else f"f{kind}"
        return BatchedBalancedSampler(
            target, n_chains, balancing, ratios=ratios, name=name or default, **common
        )

    return build
