"""The exact maximum a posteriori state of a pairwise binary target, by one minimum s-t cut.

With ``log p~(x) = sum_i h_i x_i + sum_E w_ij x_i x_j`` on ``x in {-1, +1}^n``, the energy
``-log p~`` is, up to a constant,

    sum_i [x_i = +1] 2 max(-h_i, 0) + [x_i = -1] 2 max(h_i, 0) + sum_E [x_i != x_j] 2 w_ij,

since ``-h x = -|h| + 2 max(-h x, 0)`` and ``-w x_i x_j = -w + 2 w [x_i != x_j]``. Every term is
non-negative, and with ``w_ij >= 0`` the energy is submodular: it is the capacity of an s-t cut
in which site ``i`` on the source side means ``x_i = +1`` (Greig, Porteous and Seheult 1989;
Kolmogorov and Zabih 2004). The minimum cut, found with Boykov-Kolmogorov's max-flow
(PyMaxflow), is therefore the global maximiser of ``log p~``. A negative weight breaks
submodularity (the problem is then NP-hard in general) and is refused.
"""

from __future__ import annotations

import maxflow
import numpy as np
import torch

from lsbcore.targets.pairwise_target import PairwiseTarget

MAX_SITES = 4_200_000  # about 2048 x 2048; the graph then takes roughly 1 GB


def exact_map(target: PairwiseTarget) -> torch.Tensor:
    """The global maximiser of ``target.log_prob``, one per field row.

    Returns a float64 tensor of +-1, ``[batch, *target.shape]``, on the field's device. Where
    several states tie for the maximum (a large coupling, a zero field), one of them.
    """
    if not isinstance(target, PairwiseTarget):
        raise ValueError(
            f"target must be an lsbcore Target on a pairwise model (IsingPosterior, PairwiseMRF), "
            f"got {type(target).__name__}."
        )
    if target.n_sites > MAX_SITES:
        raise ValueError(
            f"target has {target.n_sites:,} sites; exact_map solves at most {MAX_SITES:,} "
            "(the max-flow graph would need several GB of memory)."
        )
    weights = target.edge_weights.detach().cpu().numpy()
    field = target.field.detach().to("cpu", torch.float64).numpy()  # [batch, n]
    if not (np.isfinite(weights).all() and np.isfinite(field).all()):
        raise ValueError("target must have a finite field and finite edge weights.")
    if (weights < 0).any():
        raise ValueError(
            f"target has {int((weights < 0).sum()):,} negative edge weights: its energy is not "
            "submodular, so a minimum cut does not give its MAP; use another method (an "
            "annealed sampler, or exhaustive search on a few sites)."
        )
    edges = target.edges.detach().cpu().numpy()
    x = np.stack([_min_cut_state(row, edges, weights) for row in field])  # [batch, n]
    return torch.from_numpy(x).to(target.field.device).reshape(-1, *target.shape)


def _min_cut_state(h: np.ndarray, edges: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The +-1 state ``[n]`` of the minimum cut for one field ``h [n]`` (see the module)."""
    n = len(h)
    keep = weights > 0  # a zero-weight edge never costs anything
    graph = maxflow.Graph[float](n, int(keep.sum()))
    nodes = graph.add_nodes(n)
    # source capacity is paid when i lands on the sink side (x_i = -1), sink capacity when on
    # the source side (x_i = +1)
    graph.add_grid_tedges(nodes, 2.0 * np.maximum(h, 0.0), 2.0 * np.maximum(-h, 0.0))
    cost = 2.0 * weights[keep]  # a disagreeing edge costs 2 w, either way round
    # parallel edges (the 2-wide torus) are parallel arcs: their capacities simply add
    graph.add_edges(nodes[edges[keep, 0]], nodes[edges[keep, 1]], cost, cost)
    graph.maxflow()
    sink_side = graph.get_grid_segments(nodes)
    return np.where(sink_side, -1.0, 1.0)
