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
#: Lanczos vectors kept between restarts (ARPACK's default for one eigenvalue is 20). A metastable
#: target clusters eigenvalues next to ``|lambda_2|`` (seven within 2e-5 of it on a 3 x 4 window
#: at lambda = 1.5); with 20 that took 1.5 s of restarts, with 80 0.06 s.
LANCZOS_VECTORS = 80
#: ARPACK's restarts before the dense solve takes over (about 9 ms each on 4,096 states). Most
#: windows need under 10; the astronaut photo's 3 x 4 centre under max(1, t), whose top
#: eigenvalues cluster at 0.9634, needed 141-160 (1.4 s, against 3.4 s for the dense solve).
#: ARPACK's own default (ten per state) once spent 40 s failing before the dense solve.
ARPACK_RESTARTS = 300
#: The same for a non-reversible P (Arnoldi, a sweep's dense products: about 0.1 s a restart):
#: the checkerboard's 3 x 4 centres of 55 photo windows needed at most 5.
GENERAL_RESTARTS = 60
#: Relative tolerance for detailed balance ``pi_x P[x, y] == pi_y P[y, x]``.
BALANCE_RTOL = 1e-9
#: Absolute tolerance on a flow ``pi_x P[x, y]`` (flows sum to 1): where a photo's field makes
#: ``log p`` span more than 745, some ``pi_x`` round to 0 while the reverse flow is a denormal
#: (5e-324 seen), which would call a reversible chain non-reversible.
BALANCE_ATOL = 1e-300
#: Rows of a dense ``P`` checked for balance at a time (512 of 4,096 states: 16 MB a temporary).
BALANCE_ROWS = 512


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


def is_reversible(p, pi: np.ndarray, rtol: float = BALANCE_RTOL) -> bool:
    """Whether ``P`` (dense or scipy sparse) satisfies detailed balance with respect to ``pi``
    (to ``rtol``, or ``BALANCE_ATOL`` in absolute flow)."""
    if sparse.issparse(p):
        flow = abs(sparse.diags(np.asarray(pi)) @ p).tocsr()
        excess = abs(flow - flow.T) - rtol * flow.maximum(flow.T)  # <= 0 wherever balanced
        return bool(excess.max() <= BALANCE_ATOL)  # the max counts the implicit zeros too
    pi = np.asarray(pi)
    for start in range(0, len(pi), BALANCE_ROWS):  # by rows: no dense temporaries of P's size
        rows = slice(start, start + BALANCE_ROWS)
        flow = np.abs(pi[rows, None] * p[rows])  # abs: a diagonal may round to -1e-16
        back = np.abs(p[:, rows].T * pi[None, :])  # the same rows of flow.T
        if not (np.abs(flow - back) <= rtol * np.maximum(flow, back) + BALANCE_ATOL).all():
            return False
    return True


def second_eigenvalue_modulus(p, pi: np.ndarray) -> float:
    """``max |lambda|`` over the eigenvalues of ``P`` (dense or scipy sparse) other than the
    stationary 1.

    Reversible ``P``: ``D^1/2 P D^-1/2`` (``D = diag(pi)``) is symmetric, and under detailed
    balance its entry ``sqrt(pi_x / pi_y) P[x, y]`` equals ``sqrt(P[x, y] P[y, x])``, which needs
    no division by a tiny ``pi_y``; its eigenvalues are real. Otherwise (a systematic sweep) the
    general eigenvalues of ``P`` itself. Above ``DENSE_STATES`` states only the few extreme
    eigenvalues are computed (ARPACK): a dense solve of 4096 states takes seconds.
    """
    _check_square(p)
    if p.shape[0] == 1:
        return 0.0
    reversible = is_reversible(p, pi)
    if p.shape[0] > DENSE_STATES:
        try:
            # a dense non-reversible P (a sweep's: every entry nonzero) stays dense: as CSR it
            # would take half as much memory again, for no faster product
            dense_operand = not reversible and not sparse.issparse(p)
            return _extreme_modulus(p if dense_operand else sparse.csr_matrix(p), pi, reversible)
        except sparse_linalg.ArpackError:  # no convergence within ARPACK_RESTARTS, or error 3
            pass  # ("no shifts could be applied"): the dense solve is exact, slower
    p = p.toarray() if sparse.issparse(p) else p
    m = np.sqrt(p * p.T) if reversible else p
    eigenvalues = np.linalg.eigvalsh(m) if reversible else np.linalg.eigvals(m)
    return float(np.sort(np.abs(eigenvalues))[-2])  # the largest is the stationary 1


def _extreme_modulus(p, pi: np.ndarray, reversible: bool) -> float:
    """The second largest eigenvalue modulus from ARPACK.

    ``P``: CSR, or a dense array when not reversible. Reversible: the symmetric
    ``M = sqrt(P * P^T)`` has the unit eigenvector ``sqrt(pi)`` for
    its eigenvalue 1; with that direction projected out (``M - sqrt(pi) sqrt(pi)^T``, the same
    eigenvalues with 1 made 0) the largest modulus is the answer, from one Lanczos run. (The
    two ends asked for apart, ``|lambda_min|`` did not converge where a saturated field packs
    thousands of eigenvalues within 1e-11 of 0.) General: the 4 of largest modulus (a complex
    pair can tie for second place; the stationary 1 is the largest).
    """
    v0 = np.random.default_rng(0).random(p.shape[0])  # ARPACK's start, fixed: same answer
    if reversible:
        m = p.multiply(p.T).sqrt()
        root = np.sqrt(np.asarray(pi, dtype=np.float64))
        root /= np.linalg.norm(root)
        deflated = sparse_linalg.LinearOperator(
            m.shape, matvec=lambda v: m @ v - root * (root @ v), dtype=np.float64
        )
        value = sparse_linalg.eigsh(
            deflated,
            k=1,
            which="LM",
            v0=v0,
            ncv=min(LANCZOS_VECTORS, m.shape[0] - 1),
            maxiter=ARPACK_RESTARTS,
            return_eigenvectors=False,
        )
        return float(abs(value[0]))
    values = sparse_linalg.eigs(
        p, k=4, which="LM", v0=v0, maxiter=GENERAL_RESTARTS, return_eigenvectors=False
    )
    return float(np.sort(np.abs(values))[-2])


def spectral_gap(p, pi: np.ndarray) -> float:
    """The absolute spectral gap ``1 - |lambda_2|`` of ``P`` (dense or scipy sparse) with
    stationary law ``pi``."""
    return 1.0 - second_eigenvalue_modulus(p, pi)


def relaxation_time(gap: float) -> float:
    """``1 / gap`` in steps; infinite for a chain that does not converge (gap 0)."""
    return 1.0 / gap if gap > 0 else math.inf


def _check_square(p) -> None:
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ValueError(f"P must be a square matrix, got shape {p.shape}.")
