"""A general pairwise binary network on any graph, a ``PairwiseTarget``.

    log p~(x) = sum_i h_i x_i + sum_{i<j} J_ij x_i x_j,     x in {-1, +1}^n

``J`` is a symmetric ``[n, n]`` matrix with zero diagonal, dense or sparse; its nonzero entries
above the diagonal are the graph's edges. This covers an RBM's joint distribution (a bipartite
``J``), grid networks and any user graph.
"""

from __future__ import annotations

import numpy as np
import torch

from lsbcore.targets.base import MAX_SITES, MAX_VALUES, as_real_tensor, check_beta
from lsbcore.targets.pairwise_target import PairwiseTarget


def _dense_or_sparse(J) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Upper-triangle edges ``[E, 2]`` and weights ``[E]`` of ``J``, and its size."""
    if hasattr(J, "tocoo") and not isinstance(J, (np.ndarray, torch.Tensor)):  # scipy.sparse
        coo = J.tocoo()
        rows = torch.as_tensor(np.asarray(coo.row, dtype=np.int64))
        cols = torch.as_tensor(np.asarray(coo.col, dtype=np.int64))
        values = as_real_tensor(np.asarray(coo.data), "J")
        shape = tuple(coo.shape)
    elif isinstance(J, torch.Tensor) and J.is_sparse:
        coo = J.coalesce()
        rows, cols = coo.indices()
        values = as_real_tensor(coo.values(), "J")
        shape = tuple(coo.shape)
    else:
        dense = as_real_tensor(J, "J")
        if dense.dim() != 2:
            raise ValueError(f"J must be a square [n, n] matrix, got shape {tuple(dense.shape)}.")
        rows, cols = torch.nonzero(dense, as_tuple=True)
        values = dense[rows, cols]
        shape = tuple(dense.shape)
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"J must be a square [n, n] matrix, got shape {shape}.")
    if not bool(torch.isfinite(values).all()):
        raise ValueError("J must contain only finite values (no NaN or inf).")
    keep = values != 0
    rows, cols, values = rows[keep], cols[keep], values[keep]
    if bool((rows == cols).any()):
        raise ValueError("J must have a zero diagonal (a term x_i x_i = 1 is a constant).")
    n = shape[0]
    # symmetric: the entries below the diagonal, mirrored, must equal those above
    upper, lower = rows < cols, rows > cols
    key_up = rows[upper] * n + cols[upper]
    key_low = cols[lower] * n + rows[lower]
    order_up, order_low = torch.argsort(key_up), torch.argsort(key_low)
    if not (
        torch.equal(key_up[order_up], key_low[order_low])
        and torch.allclose(values[upper][order_up], values[lower][order_low], rtol=1e-12, atol=0)
    ):
        raise ValueError("J must be symmetric (J[i, j] == J[j, i]).")
    edges = torch.stack([rows[upper][order_up], cols[upper][order_up]], 1)
    return edges, values[upper][order_up], n


class PairwiseMRF(PairwiseTarget):
    """``log p~(x) = sum_i h_i x_i + sum_{i<j} J_ij x_i x_j`` on spins ``x in {-1, +1}^n``.

    Args:
        h: field, ``[n]`` (shared by every chain) or ``[n_chains, n]`` (one per chain).
        J: symmetric ``[n, n]`` couplings with zero diagonal: a numpy array, a torch tensor
            (dense or sparse COO) or a scipy sparse matrix.
    """

    def __init__(self, h, J):
        h = as_real_tensor(h, "h")
        if h.dim() not in (1, 2) or h.numel() == 0:
            raise ValueError(f"h must have shape [n] or [n_chains, n], got {tuple(h.shape)}.")
        if not bool(torch.isfinite(h).all()):
            raise ValueError("h must contain only finite values (no NaN or inf).")
        edges, weights, n = _dense_or_sparse(J)
        if h.shape[-1] != n:
            raise ValueError(f"h has {h.shape[-1]} sites but J is [{n}, {n}].")
        if n > MAX_SITES or h.numel() > MAX_VALUES:
            raise ValueError(
                f"at most {MAX_SITES:,} sites and {MAX_VALUES:,} field values in all are "
                f"supported, got {n:,} sites x {h.numel() // n:,} fields."
            )
        self.h = h if h.dim() == 2 else h.unsqueeze(0)  # [batch, n]
        self._build((n,), self.h, edges, weights)

    @property
    def J(self) -> torch.Tensor:
        """The dense ``[n, n]`` coupling matrix (built on demand: O(n^2) memory)."""
        n = self.n_sites
        dense = torch.zeros(n, n, dtype=torch.float64)
        dense.index_put_((self.edges[:, 0], self.edges[:, 1]), self.edge_weights, accumulate=True)
        return dense + dense.T

    def chain(self, b: int) -> PairwiseMRF:
        single = PairwiseMRF.__new__(PairwiseMRF)
        single.h = self.h[b if self.batch > 1 else 0].unsqueeze(0)
        single._build(self.shape, single.h, self.edges, self.edge_weights)
        return single

    def tempered(self, beta: float) -> PairwiseMRF:
        """``p~^beta``: the network with ``beta h`` and ``beta J``."""
        beta = check_beta(beta)
        scaled = PairwiseMRF.__new__(PairwiseMRF)
        scaled.h = self.h * beta
        scaled._build(self.shape, scaled.h, self.edges, self.edge_weights * beta)
        return scaled
