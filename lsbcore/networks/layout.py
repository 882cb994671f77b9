"""Where to draw a Markov network's variables: a grid for grid networks, a spring layout else.

A network is drawn as a graph whose nodes are its variables and whose edges join every two
variables that share a factor (the network's moral graph). A target laid out in two dimensions
(``shape == (H, W)`` with ``H, W > 1``, as ``grid_network`` builds it) is drawn on that grid:
variable ``i`` at column ``i % W`` and row ``i // W``, row 0 on top. Any other target (an
uploaded UAI file is a row of variables) gets a Fruchterman-Reingold spring layout: every
pair of nodes repels with force ``k^2 / d``, every edge attracts with ``d^2 / k``
(``k = sqrt(1 / n)``, the ideal edge length in the unit square), and each node moves along its
net force by at most a temperature that cools linearly to zero. It is seeded (the same graph
and seed give the same picture) and its cost bounded: the iterations shrink as ``n^2`` grows so
that at most ``PAIR_BUDGET`` pair forces are computed in all.

No Streamlit here; plain numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from lsbcore.checks import integer

#: Most pair forces computed by one spring layout (iterations x n^2): a second or two of numpy
#: on one core (60 iterations at n = 1,000, 15 at 2,000).
PAIR_BUDGET = 60_000_000
#: Iterations of a spring layout when the budget allows (fewer for large graphs, never below 5).
SPRING_ITERATIONS = 100
MIN_ITERATIONS = 5
#: Most variables a layout is computed for (a picture of more is unreadable anyway).
MAX_NODES = 5_000


@dataclass(frozen=True)
class Layout:
    """Node positions ``[n, 2]`` (x right, y up, within ``[0, 1]^2`` for a spring layout), the
    edges ``[E, 2]`` (pairs ``i < j``, sorted) and which layout it is (``"grid"``/``"spring"``)."""

    positions: np.ndarray
    edges: np.ndarray
    kind: str


def factor_edges(scopes, n_variables: int) -> np.ndarray:
    """The pairs ``(i, j)``, ``i < j``, of variables that share at least one factor, sorted and
    without repeats, as an ``[E, 2]`` integer array."""
    n = integer(n_variables, "n_variables", 1)
    pairs = set()
    for f, scope in enumerate(scopes):
        scope = sorted(int(v) for v in scope)
        if scope and (scope[0] < 0 or scope[-1] >= n):
            raise ValueError(
                f"factor {f} names variable {scope[0] if scope[0] < 0 else scope[-1]}, outside "
                f"0..{n - 1}."
            )
        pairs.update((a, b) for a, b in combinations(scope, 2) if a != b)
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    return np.array(sorted(pairs), dtype=np.int64)


def grid_positions(shape) -> np.ndarray:
    """Variable ``i`` of an ``(H, W)`` grid at ``(i % W, H - 1 - i // W)``: row-major, row 0
    on top, one unit apart."""
    if len(shape) != 2:
        raise ValueError(f"a grid layout needs a shape (rows, columns), got {tuple(shape)}.")
    rows = integer(shape[0], "rows", 1)
    cols = integer(shape[1], "columns", 1)
    index = np.arange(rows * cols)
    return np.stack([index % cols, rows - 1 - index // cols], axis=1).astype(np.float64)


def spring_iterations(n: int) -> int:
    """Iterations of a spring layout of ``n`` nodes within ``PAIR_BUDGET`` pair forces."""
    return int(max(MIN_ITERATIONS, min(SPRING_ITERATIONS, PAIR_BUDGET // max(1, n * n))))


def spring_positions(n_nodes: int, edges, seed: int = 0, iterations: int | None = None):
    """A Fruchterman-Reingold layout of ``n_nodes`` nodes joined by ``edges`` ``[E, 2]``,
    within the unit square; deterministic given ``seed``."""
    n = integer(n_nodes, "n_nodes", 1, MAX_NODES)
    seed = integer(seed, "seed", 0)
    steps = spring_iterations(n) if iterations is None else integer(iterations, "iterations", 0)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(f"edges must join nodes 0..{n - 1}.")
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 2))
    if n == 1:
        return np.full((1, 2), 0.5)
    k = np.sqrt(1.0 / n)
    temperature = 0.1  # the largest move of the first iteration, a tenth of the square
    for it in range(steps):
        # repulsion k^2/d along (p_i - p_j)/d, one coordinate at a time (no [n, n, 2] array)
        dx = pos[:, 0:1] - pos[:, 0]
        dy = pos[:, 1:2] - pos[:, 1]
        weight = (k * k) / np.maximum(dx * dx + dy * dy, 1e-12)
        force = np.stack([(dx * weight).sum(1), (dy * weight).sum(1)], axis=1)
        if edges.size:
            d = pos[edges[:, 0]] - pos[edges[:, 1]]
            length = np.maximum(np.sqrt((d**2).sum(1)), 1e-6)
            pull = d * (length / k)[:, None]  # attraction d^2/k along d/|d|
            np.add.at(force, edges[:, 0], -pull)
            np.add.at(force, edges[:, 1], pull)
        size = np.maximum(np.sqrt((force**2).sum(1)), 1e-12)
        step = force * (np.minimum(size, temperature * (1 - it / steps)) / size)[:, None]
        pos = pos + step
    return _unit_square(pos)


def _unit_square(pos: np.ndarray) -> np.ndarray:
    """``pos`` scaled and shifted into ``[0, 1]^2``, aspect kept."""
    low = pos.min(0)
    span = float((pos.max(0) - low).max())
    return (pos - low) / span if span > 0 else np.full_like(pos, 0.5)


def network_layout(target, seed: int = 0) -> Layout:
    """The layout of ``target`` (anything with ``n_sites``, ``shape`` and ``scopes``): a grid
    when its shape is two-dimensional (at least two rows and two columns), else a seeded spring
    layout."""
    n = integer(target.n_sites, "the target's variables", 1, MAX_NODES)
    edges = factor_edges(target.scopes, n)
    shape = tuple(target.shape)
    if len(shape) == 2 and min(shape) > 1:  # a row (1, n) is no grid
        return Layout(grid_positions(shape), edges, "grid")
    return Layout(spring_positions(n, edges, seed), edges, "spring")


__all__ = [
    "Layout",
    "factor_edges",
    "grid_positions",
    "network_layout",
    "spring_iterations",
    "spring_positions",
]
