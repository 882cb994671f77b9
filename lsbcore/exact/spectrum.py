"""What the eigenvalues of a transition matrix ``P`` say: its stationary vector, spectral gap
and relaxation time.

The absolute spectral gap is ``1 - max{|lambda| : lambda != 1 eigenvalue of P}``: after ``t``
steps the distance to the target shrinks like ``(1 - gap)^t``, so ``1 / gap`` (the relaxation
time) is the number of steps per factor ``e`` of convergence.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as sparse_linalg

#: Up to this many states the eigenvalues come from a dense solve; above, from ARPACK.
DENSE_STATES = 256
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
    no division by a tiny ``pi_y``; its eigenvalues are real. Otherwise (a systematic sweep) the
    general eigenvalues of ``P`` itself. Above ``DENSE_STATES`` states only the few extreme
    eigenvalues are computed (ARPACK): a dense solve of 4096 states takes tens of seconds.
    """
    _check_square(p)
    if len(p) == 1:
        return 0.0
    reversible = is_reversible(p, pi)
    m = np.sqrt(p * p.T) if reversible else p
    if len(p) > DENSE_STATES:
        try:
            return _extreme_moduli(m, reversible)
        except sparse_linalg.ArpackError:  # no convergence, or ARPACK's error 3 ("no shifts
            pass  # could be applied") on a near-nilpotent P: the dense solve is exact, slower
    eigenvalues = np.linalg.eigvalsh(m) if reversible else np.linalg.eigvals(m)
    return float(np.sort(np.abs(eigenvalues))[-2])  # the largest is the stationary 1


def _extreme_moduli(m: np.ndarray, symmetric: bool) -> float:
    """The second largest eigenvalue modulus from a few extreme eigenvalues (ARPACK).

    Symmetric: the two largest (1 and lambda_2) and the smallest (the most negative), since
    ``|lambda|`` peaks at either end. General: the 4 of largest modulus (a complex pair can
    tie for second place; the stationary 1 is the largest).
    """
    rng = np.random.default_rng(0)  # ARPACK's start vector, fixed: same answer every call
    v0 = rng.random(len(m))
    matrix = sparse.csr_matrix(m)
    if symmetric:
        top = sparse_linalg.eigsh(matrix, k=2, which="LA", v0=v0, return_eigenvectors=False)
        bottom = sparse_linalg.eigsh(matrix, k=1, which="SA", v0=v0, return_eigenvectors=False)
        return float(max(np.min(top), abs(bottom[0])))
    values = sparse_linalg.eigs(matrix, k=4, which="LM", v0=v0, return_eigenvectors=False)
    return float(np.sort(np.abs(values))[-2])


def spectral_gap(p: np.ndarray, pi: np.ndarray) -> float:
    """The absolute spectral gap ``1 - |lambda_2|`` of ``P`` with stationary law ``pi``."""
    return 1.0 - second_eigenvalue_modulus(p, pi)


def relaxation_time(gap: float) -> float:
    """``1 / gap`` in steps; infinite for a chain that does not converge (gap 0)."""
    return 1.0 / gap if gap > 0 else math.inf


def _check_square(p: np.ndarray) -> None:
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {p.shape}.")
