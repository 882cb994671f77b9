"""LSB 2's lattice pass on pairwise targets (``learning_kernels._lattice_sums``), in tiles:
the sums per piece, by a pass per piece or by a scatter, are numpy's; the draw that skips whole
tiles picks the site the plain running sum picks; a whole lattice's values are the torch
network's ``g``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.backends import learning_kernels as lk
from lsbcore.backends import network_terms
from lsbcore.backends.network_terms import network_scratch
from lsbcore.backends.structures import NetworkLattice, Pieces
from lsbcore.balancing.functions import NetworkBalancing


def network(hidden: int, seed: int) -> NetworkBalancing:
    return NetworkBalancing(hidden=hidden, generator=torch.Generator().manual_seed(seed))


def pieces_of(function: NetworkBalancing) -> Pieces:
    params = torch.nn.utils.parameters_to_vector(function.parameters()).detach().numpy()
    return Pieces(*lk.network_pieces(np.append(params, 0.0), function.hidden))


@pytest.mark.parametrize(("hidden", "n_sites"), [(10, 3000), (100, 2500), (10, 1024), (10, 7)])
def test_lattice_sums_are_the_networks_values_and_numpys_sums_per_piece(hidden, n_sites):
    """Few pieces (a pass per piece) and many (100 units: beyond ``MASKED_PIECES``, the
    scatter); lattices of several tiles, exactly one, and fewer sites than a tile."""
    function = network(hidden, seed=hidden)
    pieces = pieces_of(function)
    assert (pieces.slope.shape[0] <= network_terms.MASKED_PIECES) == (hidden == 10)
    rng = np.random.default_rng(0)
    s = rng.normal(0.0, 3.0, (2, n_sites))
    u = 1.0 / (1.0 + np.exp(-s)) - 0.5
    top = np.maximum(s.max(1), 0.0)
    scale, small = np.exp(np.maximum(s, 0.0) - top[:, None]), np.exp(-np.abs(s))
    lattice = NetworkLattice(*network_scratch(min(n_sites, lk.LATTICE_TILE)))
    tiles = np.empty(math.ceil(n_sites / lk.LATTICE_TILE))
    n_pieces = pieces.slope.shape[0]
    acc_icpt, acc_slope = np.zeros((2, n_pieces)), np.zeros((2, n_pieces))
    g = np.empty(n_sites)
    total = lk._lattice_sums(1, s, scale, small, u, pieces, lattice, g, tiles, acc_icpt, acc_slope)
    exact_g = torch.exp(function.log_g(torch.from_numpy(s[1]))).detach().numpy()
    np.testing.assert_allclose(g * math.exp(top[1]), exact_g, rtol=1e-13)
    assert total == pytest.approx(g.sum(), rel=1e-14)
    np.testing.assert_allclose(tiles.sum(), g.sum(), rtol=1e-14)
    assert not acc_icpt[0].any() and not acc_slope[0].any()  # the other chain's untouched
    # the sums per piece, from h's slope (sigmoid(z)) on both inputs, with numpy
    k1 = np.searchsorted(pieces.breakpoints, u[1], side="left")
    k2 = np.searchsorted(pieces.breakpoints, -u[1], side="left")
    z1 = pieces.slope[k1] * u[1] + pieces.intercept[k1]
    z2 = -pieces.slope[k2] * u[1] + pieces.intercept[k2]
    d1, d2 = 1.0 / (1.0 + np.exp(-z1)), 1.0 / (1.0 + np.exp(-z2))
    c1 = np.where(s[1] >= 0.0, small[1], 1.0)
    c2 = np.where(s[1] >= 0.0, 1.0, small[1])
    a1, a2 = 0.5 * scale[1] * c1 * d1, 0.5 * scale[1] * c2 * d2
    icpt, slope = np.zeros(n_pieces), np.zeros(n_pieces)
    np.add.at(icpt, k1, a1)
    np.add.at(icpt, k2, a2)
    np.add.at(slope, k1, a1 * u[1])
    np.add.at(slope, k2, -a2 * u[1])
    np.testing.assert_allclose(acc_icpt[1], icpt, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(acc_slope[1], slope, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("n_sites", [1, 1023, 1024, 1025, 5000])
def test_the_draw_by_tiles_picks_the_plain_running_sums_site(n_sites):
    rng = np.random.default_rng(n_sites)
    row = rng.exponential(size=n_sites) * (rng.random(n_sites) < 0.7)  # zeros among them
    row[0] = max(row[0], 1e-3)
    tiles = np.array(
        [row[a : a + lk.LATTICE_TILE].sum() for a in range(0, n_sites, lk.LATTICE_TILE)]
    )
    uniforms = np.concatenate([rng.random(400), [0.0, 1e-12, 0.5, 1.0 - 1e-12, 1.0]])
    for v in uniforms:
        assert lk._draw_by_tiles(row, tiles, v) == lk._draw(row, v)
