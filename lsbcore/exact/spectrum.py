"""What the eigenvalues of a transition matrix ``P`` say: its stationary vector, spectral gap
and relaxation time.

The absolute spectral gap is ``1 - max{|lambda| : lambda != 1 eigenvalue of P}``: after ``t``
steps the distance to the target shrinks like ``(1 - gap)^t``, so ``1 / gap`` (the relaxation
time) is the number of steps per factor ``e`` of convergence.
"""

from __future__ import annotations

import math

import numpy as np

#: Relative tolerance for detailed balance ``pi_x P[x, y] == pi_y P[y, x]``.
BALANCE_RTOL = 1e-9


def stationary_vector(p: np.ndarray) -> np.ndarray:
    """The solution of ``pi P = pi``, ``sum pi = 1`` (unique for an irreducible chain).

    One equation of ``(P^T - I) pi = 0`` is redundant, so it is replaced by the normalisation.
    """
    _check_square(p)
    system = p.T - np.eye(len(p))
    system[-1, :] = 1.0
    rhs = np.zeros(len(p))
    rhs[-1] = 1.0
    return np.linalg.solve(system, rhs)


def is_reversible(p: np.ndarray, pi: np.ndarray, rtol: float = BALANCE_RTOL) -> bool:
    """Whether ``P`` satisfies detailed balance with respect to ``pi``."""
    flow = np.abs(np.asarray(pi)[:, None] * p)  # abs: a diagonal may round to -1e-16
    return bool((np.abs(flow - flow.T) <= rtol * np.maximum(flow, flow.T)).all())


def second_eigenvalue_modulus(p: np.ndarray, pi: np.ndarray) -> float:
    """``max |lambda|`` over the eigenvalues of ``P`` other than the stationary 1.

    Reversible ``P``: ``D^1/2 P D^-1/2`` (``D = diag(pi)``) is symmetric, and under detailed
    balance its entry ``sqrt(pi_x / pi_y) P[x, y]`` equals ``sqrt(P[x, y] P[y, x])``, which needs
    no division by a tiny ``pi_y``; its real eigenvalues come from ``eigvalsh``. Otherwise (a
    systematic sweep) the general ``eigvals`` of ``P`` itself.
    """
    _check_square(p)
    if len(p) == 1:
        return 0.0
    if is_reversible(p, pi):
        moduli = np.abs(np.linalg.eigvalsh(np.sqrt(p * p.T)))  # ascending eigenvalues
        moduli = np.sort(moduli)
    else:
        moduli = np.sort(np.abs(np.linalg.eigvals(p)))
    return float(moduli[-2])  # the largest is the stationary eigenvalue 1


def spectral_gap(p: np.ndarray, pi: np.ndarray) -> float:
    """The absolute spectral gap ``1 - |lambda_2|`` of ``P`` with stationary law ``pi``."""
    return 1.0 - second_eigenvalue_modulus(p, pi)


def relaxation_time(gap: float) -> float:
    """``1 / gap`` in steps; infinite for a chain that does not converge (gap 0)."""
    return 1.0 / gap if gap > 0 else math.inf


def _check_square(p: np.ndarray) -> None:
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {p.shape}.")
