"""The discrete Langevin sampler with a Metropolis-Hastings correction (Zhang, Liu and Liu, ICML
2022, "A Langevin-like sampler for discrete distributions": DMALA).

The paper's proposal on ``v in {0, 1}^n``, with step size ``alpha`` and ``f = log p~``, is

    q(v' | v) ∝ exp(grad f(v) . (v' - v) / 2 - ||v' - v||^2 / (2 alpha)),

which factorises over the sites. A flip moves ``v_i`` by ``+-1``, so ``(v'_i - v_i)^2 = 1`` and
``grad f(v)_i (v'_i - v_i)`` is the first-order flip log-ratio ``s~_i``. That ratio does not
depend on the coordinates (with ``v = (1 + x) / 2``, ``df/dx = (df/dv) / 2`` while a flip moves
``x_i`` by ``-2 x_i``, twice as far), so on our spins ``x in {-1, +1}^n``, with ``d = grad log
p~(x)`` and the half ratios ``a_i = s~_i / 2 = -x_i d_i``, every site flips independently with

    q_i(flip | x) = sigmoid(a_i(x) - 1 / (2 alpha))

and ``alpha`` keeps the paper's meaning (the same proposal written on ``x`` literally would read
``||x' - x||^2 = 4`` per flip: its ``alpha`` is four times ours). The flipped set ``F`` is then
accepted with ``A = min(1, p~(x') q(F | x') / (p~(x) q(F | x)))``, ``q(F | x) = prod_{i in F}
q_i(flip | x) prod_{i not in F} q_i(stay | x)``: one target evaluation (value and gradient at
``x'``) per step, however many sites move.

``step_size`` (``alpha``) lies in ``[1e-3, 1e3]``: below, ``1 / (2 alpha) >= 500`` and no site
ever flips; above, the penalty ``1 / (2 alpha) <= 5e-4`` no longer changes the proposal. The
authors' RBM experiments use ``alpha = 0.2``, the default.
"""

from __future__ import annotations

import torch
from torch.nn.functional import logsigmoid

from lsbcore.checks import real
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.samplers.gradient.gwg import (
    GradientSampler,
    enumerated_states,
    half_ratios,
    log_acceptance,
    state_code,
    value_and_grad,
)

MIN_STEP_SIZE, MAX_STEP_SIZE = 1e-3, 1e3
# (chain, state) pairs scored at once by transition_probabilities, with n sites each
PAIRS_PER_BATCH = 1 << 20


def proposal_log_prob(logits: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    """``log q(F | x)`` from the flip logits ``[..., n]`` and the flipped set ``flips [..., n]``
    (bool): independent sites, ``log sigmoid(l)`` where flipped, ``log sigmoid(-l)`` elsewhere."""
    return torch.where(flips, logsigmoid(logits), logsigmoid(-logits)).sum(-1)


class DiscreteLangevin(GradientSampler):
    """DMALA: every site flips independently with ``sigmoid(s~_i / 2 - 1 / (2 alpha))``, then
    one MH test (see the module docstring). Registry name ``dmala``."""

    name = "dmala"

    def __init__(self, target, n_chains: int, step_size: float = 0.2, **common):
        self.step_size = real(step_size, "step_size", MIN_STEP_SIZE, MAX_STEP_SIZE)
        super().__init__(target, n_chains, **common)
        self.sites_per_step = self.n_sites  # any site may move

    def _flip_logits(self, x: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """``logit q_i(flip | x) = a_i(x) - 1 / (2 alpha)``, ``x``'s shape."""
        return half_ratios(x, grad) - 0.5 / self.step_size

    def flip_log_probs(self) -> torch.Tensor:
        """``log q_i(flip | x)`` per chain and site, ``[B, *shape]`` (the sites are proposed
        independently: these do not sum to one)."""
        return logsigmoid(self._flip_logits(self._x, self._grad)).view(self.x.shape)

    def _step(self) -> None:
        logits = self._flip_logits(self._x, self._grad)  # [B, n]
        flips = torch.log(self._uniforms(*logits.shape)) < logsigmoid(logits)
        x_new = torch.where(flips, -self._x, self._x)

        def reverse(x_new, grad_new):  # the same sites flipping back, proposed from x'
            return proposal_log_prob(self._flip_logits(x_new, grad_new), flips)

        log_a, accept = self._metropolis(x_new, proposal_log_prob(logits, flips), reverse)
        self._last = StepInfo(accept_prob=torch.exp(log_a), accepted=accept, extra={"flips": flips})

    def transition_probabilities(self) -> torch.Tensor:
        """The law of the next state from each chain's current state, ``[B, 2^n]`` float64
        (columns: state codes of ``lsbcore.exact.states``), for targets of at most 12
        sites: every flipped set scored with ``proposal_log_prob`` and
        ``log_acceptance``, as ``step`` scores it; rejected mass stays on the diagonal."""
        self._check_enumerable()
        with torch.no_grad():
            states = enumerated_states(self.n_sites, self.device)  # [N, n]
            log_p_all, grad_all = value_and_grad(self.target, states)
            back_logits = self._flip_logits(states, grad_all)  # [N, n]: proposals from each y
            logits = self._flip_logits(self._x, self._grad)  # [B, n]
            probs = torch.empty(self.n_chains, len(states), dtype=torch.float64, device=self.device)
            group = max(1, PAIRS_PER_BATCH // (len(states) * self.n_sites))
            for first in range(0, self.n_chains, group):  # chains in groups: [G, N, n] at once
                rows = slice(first, first + group)
                flips = self._x[rows].unsqueeze(1) != states  # [G, N, n]
                log_fwd = proposal_log_prob(logits[rows].unsqueeze(1), flips)
                log_rev = proposal_log_prob(back_logits, flips)
                log_ratio = log_p_all - self._log_p[rows].unsqueeze(1)
                probs[rows] = torch.exp(log_fwd + log_acceptance(log_ratio, log_fwd, log_rev))
            here = state_code(self._x).unsqueeze(1)
            probs.scatter_(1, here, 0.0)
            return probs.scatter_(1, here, 1.0 - probs.sum(1, keepdim=True))
