"""A factorised proposal over ``{-1, +1}^n``: ``q(x) = prod_i q_i(x_i)``.

Each factor is given by its log-odds ``theta_i = log q_i(+1) - log q_i(-1)``, so that
``q_i(x_i) = sigmoid(theta_i x_i)`` for ``x_i = +-1`` and

    log q(x) = sum_i logsigmoid(theta_i x_i) = <theta, x> / 2 - sum_i log(2 cosh(theta_i / 2))

is exactly normalised (each factor sums to one over its two values); the second form costs one
product per state instead of a logsigmoid per site. Sampling draws every site
independently: ``x_i = +1`` when ``u_i < sigmoid(theta_i)``, ``u_i ~ U(0, 1)``.

``field_proposal``: ``theta = 2 h``, the target with its couplings removed (for the Ising
posterior, the data term alone: ``q_i(+1) = sigmoid(2 alpha_i)``). It is the target itself
when there are no couplings.
"""

from __future__ import annotations

import torch

from lsbcore.targets.base import as_real_tensor
from lsbcore.targets.pairwise_target import PairwiseTarget


class FactorisedProposal:
    """``q(x) = prod_i sigmoid(theta_i x_i)`` with log-odds ``theta`` ``[n]`` (float64).

    ``shape`` is the layout of a state for drawing (a target's ``shape``); ``name`` says where
    the log-odds came from ("field", "mean field").
    """

    def __init__(self, theta, shape=None, name: str = "factorised"):
        theta = as_real_tensor(theta, "theta").reshape(-1)
        if theta.numel() == 0:
            raise ValueError("theta must hold one log-odds per site, got none.")
        if not bool(torch.isfinite(theta).all()):
            raise ValueError("theta must contain only finite log-odds (no NaN or inf).")
        self.theta = theta  # [n]
        self.n_sites = theta.numel()
        self.shape = (self.n_sites,) if shape is None else tuple(int(v) for v in shape)
        if torch.Size(self.shape).numel() != self.n_sites:
            raise ValueError(f"shape {self.shape} does not hold {self.n_sites} sites.")
        self.name = name
        # sum_i log(2 cosh(theta_i / 2)), written without overflow for large |theta_i|
        self.log_normaliser = float(
            (0.5 * theta.abs() + torch.log1p(torch.exp(-theta.abs()))).sum()
        )

    @property
    def probabilities(self) -> torch.Tensor:
        """``q_i(+1) = sigmoid(theta_i)``, ``[n]``."""
        return torch.sigmoid(self.theta)

    @property
    def means(self) -> torch.Tensor:
        """``E_q[x_i] = tanh(theta_i / 2)``, ``[n]``."""
        return torch.tanh(0.5 * self.theta)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``log q(x)`` per state, ``[B]``, for states ``[B, n]`` or ``[B, *shape]`` of +-1."""
        flat = x.reshape(x.shape[0], -1).to(torch.float64)
        if flat.shape[1] != self.n_sites:
            raise ValueError(f"x must hold {self.n_sites} sites per state, got {flat.shape[1]}.")
        return 0.5 * (flat @ self.theta.to(flat.device)) - self.log_normaliser

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` independent states ``[n, n_sites]`` (float64, +-1) from ``generator``."""
        u = torch.rand(n, self.n_sites, generator=generator, dtype=torch.float64)
        return torch.where(u < self.probabilities, 1.0, -1.0).to(torch.float64)


def check_single_field(target) -> PairwiseTarget:
    """``target`` after refusing what is not a one-field ``PairwiseTarget``."""
    if not isinstance(target, PairwiseTarget):
        raise ValueError(
            f"target must be an lsbcore Target on a pairwise model, got {type(target).__name__}."
        )
    if target.batch != 1:
        raise ValueError(
            f"the target holds {target.batch} fields (one per chain); pick one chain's target "
            "with target.chain(b)."
        )
    return target


def field_proposal(target) -> FactorisedProposal:
    """``q_i(+1) = sigmoid(2 h_i)``: the target without its couplings (exact when there are
    none, since then ``p(x) = prod_i exp(h_i x_i) / (2 cosh h_i)``)."""
    target = check_single_field(target)
    return FactorisedProposal(2.0 * target.field[0], target.shape, "field")
