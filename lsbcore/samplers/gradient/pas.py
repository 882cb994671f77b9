"""The path auxiliary sampler (Sun, Dai, Xia and Ramamurthy, ICLR 2022, "Path auxiliary
proposal for MCMC in discrete space"): many flips per step along a path of single flips, each
drawn from a gradient-informed proposal, and one Metropolis-Hastings test for the whole path.

From ``x = y_0`` the path takes ``L`` single flips ``y_0 -> y_1 -> ... -> y_L = y`` (a site may
be flipped more than once). Every flip is drawn with the gradient ``d = grad log p~(x)`` taken
AT THE START STATE, as in the paper: the first-order estimate of flipping site ``i`` at ``y_l``
is ``-2 y_{l,i} d_i(x)``, so with the half ratios ``a_i = -x_i d_i(x)``

    q(i | y_l) = softmax(sigma_l * a)_i,      sigma_{l,i} = x_i y_{l,i}

(``sigma_l`` is -1 on the sites flipped an odd number of times so far): one gradient serves the
whole path. The reverse path ``y = y_L -> ... -> y_0 = x`` flips the same sites in the reverse
order, drawn the same way from ITS start ``y`` (half ratios ``a(y)`` from ``d(y)``). The path is
an auxiliary variable: the map (x, path) -> (y, reversed path) is an involution, so accepting
with

    A = min(1, p~(y) q(reversed path | y) / (p~(x) q(path | x)))

keeps ``p~`` invariant and reversible (``pi(x) P(x, y) = sum over paths of min(pi(x) q(path),
pi(y) q(reversed path))``, symmetric in x and y). ``A`` needs the value and gradient at ``y``
only: one target evaluation per step, whatever ``L``.

Path length: ``L`` is drawn per chain and step uniformly from ``{1, ..., 2R - 1}`` (mean ``R``,
the option ``path_length``), as in the authors' code. A fixed ``L`` would only reach states at a
Hamming distance of ``L``'s parity (an even ``L`` never leaves the parity class of ``x``), so
the chain would not be irreducible; ``L = 1`` is Gibbs-with-Gradients. ``R`` is at most
``MAX_PATH_LENGTH``: a step costs ``O(R n)`` operations per chain besides its one evaluation.
"""

from __future__ import annotations

import itertools

import torch

from lsbcore.checks import integer
from lsbcore.samplers.chain_base import StepInfo
from lsbcore.samplers.gradient.gwg import (
    GradientSampler,
    draw_site,
    enumerated_states,
    half_ratios,
    log_acceptance,
    state_code,
    value_and_grad,
)

#: Largest mean path length ``R`` (paths of up to ``2R - 1 = 127`` flips).
MAX_PATH_LENGTH = 64
#: Paths enumerated at most per chain by ``transition_probabilities`` (a check for tiny targets).
MAX_ENUMERATED_PATHS = 200_000
# numbers held at once by transition_probabilities ([chains, paths, flips, sites])
PATH_NUMBERS_PER_BATCH = 1 << 24


def path_log_prob(a: torch.Tensor, sites: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """``log q(path | start)``: the probability of flipping ``sites[..., 0]``, then
    ``sites[..., 1]``, ... from a start whose half ratios are ``a [..., n]``, each flip drawn
    from ``softmax(sigma * a)`` with ``sigma`` -1 on the sites flipped an odd number of times so
    far. ``active [..., L]`` (a prefix of each row) marks the flips the path takes; ``[...]``."""
    n = a.shape[-1]
    flip = torch.ones(*sites.shape, n, dtype=a.dtype, device=a.device)  # [..., L, n]
    turn = torch.where(active, -1.0, 1.0).to(a).expand(sites.shape)
    flip.scatter_(-1, sites.unsqueeze(-1), turn.unsqueeze(-1))
    sigma = flip.cumprod(-2) / flip  # signs before each step (-1 at its site where taken)
    logits = a.unsqueeze(-2) * sigma
    log_q = logits.gather(-1, sites.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)
    return torch.where(active, log_q, 0.0).sum(-1)


def reversed_path(sites: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """Each row's first ``length`` sites in reverse order (the rest as they were), ``[B, L]``."""
    step = torch.arange(sites.shape[-1], device=sites.device)
    source = torch.where(step < length.unsqueeze(-1), length.unsqueeze(-1) - 1 - step, step)
    return sites.gather(-1, source)


class PathAuxiliarySampler(GradientSampler):
    """PAS: a path of on average ``path_length`` gradient-informed flips per step, one MH test
    (see the module docstring). Registry name ``pas``."""

    name = "pas"

    def __init__(self, target, n_chains: int, path_length: int = 3, **common):
        self.path_length = integer(path_length, "path_length", 1, MAX_PATH_LENGTH)
        self.max_length = 2 * self.path_length - 1
        self.sites_per_step = self.path_length  # flips proposed per step, on average
        super().__init__(target, n_chains, **common)

    def _draw_path(self):
        """Path lengths ``[B]``, sites ``[B, L_max]``, the flips taken ``[B, L_max]``, the end
        state ``[B, n]`` and ``log q(path | x)`` ``[B]`` (the sum of each flip's
        ``draw_site`` log-probability: what ``path_log_prob`` gives, without a second pass).
        The loop runs over the path's steps, never over chains."""
        b, n = self._x.shape
        u = self._uniforms(b, self.max_length + 1)  # column 0: the length, then one per flip
        length = (u[:, 0] * self.max_length).long().clamp_(max=self.max_length - 1) + 1
        active = torch.arange(self.max_length, device=self.device) < length.unsqueeze(1)
        a = half_ratios(self._x, self._grad)
        sigma = torch.ones_like(a)  # x_i y_i along the path
        sites = torch.empty(b, self.max_length, dtype=torch.long, device=self.device)
        log_q = torch.zeros(b, dtype=torch.float64, device=self.device)
        for step in range(self.max_length):
            i, log_q_i = draw_site(sigma * a, u[:, step + 1])
            taken = active[:, step]
            sites[:, step] = i
            log_q += torch.where(taken, log_q_i, 0.0)
            sigma[self._chains, i] *= torch.where(taken, -1.0, 1.0)
        return length, sites, active, self._x * sigma, log_q

    def _step(self) -> None:
        length, sites, active, y, log_q_forward = self._draw_path()
        back = reversed_path(sites, length)

        def reverse(y, grad_y):  # the reversed path, drawn from y with y's own gradient
            return path_log_prob(half_ratios(y, grad_y), back, active)

        log_a, accept = self._metropolis(y, log_q_forward, reverse)
        self._last = StepInfo(
            accept_prob=torch.exp(log_a),
            accepted=accept,
            extra={"path_sites": sites, "path_length": length, "path_log_prob": log_q_forward},
        )

    def transition_probabilities(self) -> torch.Tensor:
        """The law of the next state from each chain's current state, ``[B, 2^n]`` float64
        (columns: state codes of ``lsbcore.exact.states``), for targets of at most 12 sites.

        Every ordered path of every length is enumerated and scored with ``path_log_prob`` (the
        step's reverse path; its forward, summed draw by draw, agrees: tested) and
        ``log_acceptance``, as ``step`` scores it; rejected mass stays on the diagonal.
        """
        self._check_enumerable()
        n = self.n_sites
        paths = sum(n**length for length in range(1, self.max_length + 1))
        if paths > MAX_ENUMERATED_PATHS:
            raise ValueError(
                f"{paths:,} paths of up to {self.max_length} flips on {n} sites are too many to "
                f"enumerate (at most {MAX_ENUMERATED_PATHS:,}); use a shorter path_length."
            )
        with torch.no_grad():
            states = enumerated_states(n, self.device)
            log_p_all, grad_all = value_and_grad(self.target, states)
            a_all = half_ratios(states, grad_all)  # [N, n]: each state as a path's start
            a_x = half_ratios(self._x, self._grad)
            probs = torch.zeros(self.n_chains, len(states), dtype=torch.float64, device=self.device)
            for length in range(1, self.max_length + 1):
                seqs = torch.tensor(
                    list(itertools.product(range(n), repeat=length)), device=self.device
                )  # [P, L]
                active = torch.ones_like(seqs, dtype=torch.bool)
                odd = torch.nn.functional.one_hot(seqs, n).sum(1) % 2  # [P, n]
                group = max(1, PATH_NUMBERS_PER_BATCH // (len(seqs) * length * n))
                for first in range(0, self.n_chains, group):  # chains in groups: [G, P, L, n]
                    rows = slice(first, first + group)
                    end = self._x[rows].unsqueeze(1) * (1.0 - 2.0 * odd)  # [G, P, n]
                    code = state_code(end)  # [G, P]
                    forward = seqs.expand(len(code), -1, -1)  # [G, P, L]
                    log_fwd = path_log_prob(a_x[rows].unsqueeze(1), forward, active)
                    back = reversed_path(forward, torch.full_like(code, length))
                    log_rev = path_log_prob(a_all[code], back, active)
                    log_ratio = log_p_all[code] - self._log_p[rows].unsqueeze(1)
                    log_a = log_acceptance(log_ratio, log_fwd, log_rev)
                    weight = torch.exp(log_fwd + log_a) / self.max_length
                    probs[rows].scatter_add_(1, code, weight)
            here = state_code(self._x).unsqueeze(1)
            probs.scatter_(1, here, 0.0)
            return probs.scatter_(1, here, 1.0 - probs.sum(1, keepdim=True))
