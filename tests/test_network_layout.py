"""Where a Markov network's variables are drawn (lsbcore/networks/layout.py): grid positions
exact, the spring layout seeded, finite and bounded in cost, edges the factor-sharing pairs."""

from __future__ import annotations

import numpy as np
import pytest

from lsbcore.networks import layout
from lsbcore.networks.presets import preset
from lsbcore.targets.factor_graph import FactorGraph


def test_grid_positions_are_row_major_with_row_zero_on_top():
    pos = layout.grid_positions((2, 3))
    assert pos.tolist() == [[0, 1], [1, 1], [2, 1], [0, 0], [1, 0], [2, 0]]
    with pytest.raises(ValueError, match="rows, columns"):
        layout.grid_positions((6,))


def test_edges_are_the_pairs_that_share_a_factor():
    scopes = [(0, 1), (3, 2, 1), (), (4,), (1, 0)]  # a repeat, an empty and a unary factor
    edges = layout.factor_edges(scopes, 6)
    assert edges.tolist() == [[0, 1], [1, 2], [1, 3], [2, 3]]
    assert layout.factor_edges([(0,), (1,)], 2).shape == (0, 2)
    with pytest.raises(ValueError, match="outside 0..2"):
        layout.factor_edges([(0, 3)], 3)


def test_a_grid_network_is_drawn_on_its_grid_with_its_moral_graph():
    target = preset("mn1")
    drawn = layout.network_layout(target)
    assert drawn.kind == "grid" and drawn.positions.shape == (100, 2)
    assert np.array_equal(drawn.positions, layout.grid_positions((10, 10)))
    # every scope's pairs, by brute force over all pairs of variables
    expected = [
        [i, j]
        for i in range(100)
        for j in range(i + 1, 100)
        if any(i in s and j in s for s in target.scopes)
    ]
    assert drawn.edges.tolist() == expected


def ring(n: int) -> FactorGraph:
    scopes = [(i, (i + 1) % n) for i in range(n)]
    return FactorGraph(n, scopes, [np.log([1.0, 2.0, 2.0, 1.0])] * n)


def test_spring_layout_is_seeded_finite_and_in_the_unit_square():
    target = ring(12)
    a = layout.network_layout(target, seed=3)
    b = layout.network_layout(target, seed=3)
    c = layout.network_layout(target, seed=4)
    assert a.kind == "spring" and np.array_equal(a.positions, b.positions)
    assert not np.array_equal(a.positions, c.positions)
    # a row of variables (1, n) is not a grid
    row = FactorGraph(12, target.scopes, target.log_tables, shape=(1, 12))
    assert np.array_equal(layout.network_layout(row, seed=3).positions, a.positions)
    assert np.all(np.isfinite(a.positions))
    assert a.positions.min() == 0.0 and a.positions.max() == 1.0
    # a ring: neighbours end up closer together than the typical pair
    pos = a.positions
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    neighbours = np.mean([d[i, (i + 1) % 12] for i in range(12)])
    assert neighbours < d[np.triu_indices(12, 1)].mean()


def test_spring_layout_edge_cases_and_bounded_cost():
    assert layout.spring_positions(1, []).tolist() == [[0.5, 0.5]]
    two = layout.spring_positions(2, [[0, 1]], seed=0)
    assert np.all(np.isfinite(two))
    # coincident starts (zero distances) stay finite
    assert np.all(np.isfinite(layout.spring_positions(3, [[0, 1], [1, 2]], iterations=0)))
    assert layout.spring_iterations(100) == layout.SPRING_ITERATIONS
    n = 5_000
    its = layout.spring_iterations(n)
    assert its * n * n <= layout.PAIR_BUDGET or its == layout.MIN_ITERATIONS
    with pytest.raises(ValueError, match="edges must join nodes 0..2"):
        layout.spring_positions(3, [[0, 3]])
    with pytest.raises(ValueError, match="n_nodes"):
        layout.spring_positions(layout.MAX_NODES + 1, [])
