"""Naive mean field of a pairwise binary target, and the factorised proposal it gives.

The factorised ``q`` closest to ``p`` in ``KL(q || p)`` has means ``m_i = E_q[x_i]`` satisfying

    m_i = tanh(h_i + sum_j J_ij m_j)                                    (naive mean field)

solved by damped fixed-point iterations ``m <- (1 - d) m + d tanh(h + J m)`` from the field's
solution ``m = tanh(h)``; damping stops the parallel update from oscillating between two
states when the couplings are strong. The proposal's log-odds are ``theta_i = 2 (h_i + sum_j
J_ij m_j)``, so that ``E_q[x_i] = tanh(theta_i / 2) = m_i`` at the fixed point.

Any factorised ``q`` with full support gives unbiased importance weights, so an unconverged fit
is still a valid proposal (only a worse one); ``MeanField.converged`` says which it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lsbcore.checks import integer, real
from lsbcore.importance.proposal import FactorisedProposal, check_single_field


@dataclass(frozen=True)
class MeanField:
    """A mean-field fit: the means ``m`` ``[n]``, the local mean fields ``h + J m`` ``[n]``,
    the iterations taken, the final residual ``max_i |tanh(h_i + sum_j J_ij m_j) - m_i|``
    and whether it fell below the tolerance."""

    m: torch.Tensor
    local_field: torch.Tensor
    iterations: int
    residual: float
    converged: bool


def mean_field(
    target, damping: float = 0.5, tolerance: float = 1e-10, max_iterations: int = 2000
) -> MeanField:
    """Solve ``m = tanh(h + J m)`` for a one-field ``target`` (see the module docstring)."""
    target = check_single_field(target)
    damping = real(damping, "damping", 0.0, 1.0)
    if damping == 0:
        raise ValueError("damping must be > 0 (0 would never move the means).")
    tolerance = real(tolerance, "tolerance", 0.0, 1.0)
    max_iterations = integer(max_iterations, "max_iterations", 1, 1_000_000)

    def field_at(m: torch.Tensor) -> torch.Tensor:  # h + J m: local_field is linear in x
        return target.local_field(m.unsqueeze(0))[0]

    m = torch.tanh(target.field[0])  # [n]: the solution without couplings
    iterations = 0
    while True:
        update = torch.tanh(field_at(m))
        residual = float((update - m).abs().max())
        if residual <= tolerance or iterations == max_iterations:
            break
        m = (1.0 - damping) * m + damping * update
        iterations += 1
    return MeanField(m, field_at(m), iterations, residual, residual <= tolerance)


def mean_field_proposal(target, fit: MeanField | None = None, **options) -> FactorisedProposal:
    """``q_i(+1) = sigmoid(2 (h_i + sum_j J_ij m_j))`` from a mean-field fit (``fit``, or one
    computed with ``options`` for ``mean_field``)."""
    target = check_single_field(target)
    fit = fit if fit is not None else mean_field(target, **options)
    return FactorisedProposal(2.0 * fit.local_field, target.shape, "mean field")
