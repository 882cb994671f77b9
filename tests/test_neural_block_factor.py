"""Learned block proposals on grid factor graphs
(``lsbcore.methods.block_proposals.factor_context``): the
coefficients are the enumerated block conditional, read from outside the tile; the ratios are
the target's, zero mass included; a factor the motif cannot hold is refused in a sentence; and
``neural-block`` on a grid Bayesian network is exact (its enumerated law leaves the network's
distribution invariant and is reversible), with hard zeros and without."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import make_sampler
from lsbcore.methods.block_proposals.exact_law import apply_step, every_state, selection_matrices
from lsbcore.methods.block_proposals.factor_context import ZERO_GAP, FactorBlocks
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.proposal import BlockProposal
from lsbcore.methods.block_proposals.sampler import NeuralBlockSampler
from lsbcore.methods.block_proposals.tiling import Blocks, Tiling, interaction_pairs
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network

pytestmark = pytest.mark.usefixtures("single_thread")


def context(target, k: int) -> tuple[FactorBlocks, Tiling]:
    tiling = Tiling(tuple(target.shape), k, interaction_pairs(target))
    return FactorBlocks(target, GridMotif(k), tiling), tiling


def selections(tiling: Tiling):
    """Every (offset, colour) selection of the tiling."""
    for offset in range(len(tiling.offsets)):
        blocks = tiling.blocks(offset)
        for colour in range(blocks.n_colours):
            yield blocks.of_colour(colour)


def uniform_states(n_chains: int, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (2 * torch.randint(0, 2, (n_chains, n), generator=g) - 1).to(torch.float64)


def enumerated_conditional(target, x: torch.Tensor, sites: torch.Tensor, motif: GridMotif):
    """``log p(x_B = s | x_-B)`` for every block state ``s``, ``[B, 2^(k^2)]``, from
    ``target.log_prob`` of every completion of each chain's state."""
    full = x.unsqueeze(1).repeat(1, motif.n_states, 1)
    full[:, :, sites] = motif.states
    log_p = target.log_prob(full.reshape(-1, x.shape[1])).view(len(x), -1)
    return torch.log_softmax(log_p, 1)


def mixed_graph(seed: int = 0) -> FactorGraph:
    """A 5 x 6 factor graph of every shape the 2 x 2 motif holds, scopes in scrambled orders:
    single sites, horizontal, vertical and anti-diagonal pairs, (child, left, up) triangles
    and partial triangles, and pairs two columns apart (never inside one 2 x 2 tile)."""
    g = torch.Generator().manual_seed(seed)
    h, w = 5, 6
    scopes = []
    for r in range(h):
        for c in range(w):
            v = r * w + c
            scopes.append([v])
            if c + 1 < w:
                scopes.append([v + 1, v])
            if r + 1 < h:
                scopes.append([v, v + w])
            if r + 1 < h and c > 0:
                scopes.append([v + w - 1, v])
            if r > 0 and c > 0:
                scopes.append([v, v - 1, v - w])  # the child first
            if c + 2 < w:
                scopes.append([v, v + 2])
    tables = [torch.randn(2 ** len(s), generator=g, dtype=torch.float64) for s in scopes]
    return FactorGraph(h * w, scopes, tables, shape=(h, w))


def bad_proposal(k: int = 2) -> BlockProposal:
    """A network whose corrections are large and arbitrary: far from every conditional. In
    float64: in float32 a row's logits can differ at 1e-7 with the batch it is scored in, which
    large corrections turn into ~1e-5 in log q, above the 1e-13 detailed-balance check here
    (about the factor contexts, not rounding)."""
    q = BlockProposal(k, hidden=16, seed=5).double()
    g = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for layer in (q.out, q.out_context):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 6.0)
            layer.bias.fill_(-4.0)
    return q.eval().requires_grad_(False)


def exact_law(target) -> np.ndarray:
    log_p = target.log_prob(every_state(target)).numpy()
    pi = np.exp(log_p - log_p[np.isfinite(log_p)].max())
    return pi / pi.sum()


# ----------------------------------------------------------------- the coefficients
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("determinism, seed", [(0.0, 1), (0.5, 2), (0.9, 3)])
def test_the_coefficients_are_the_enumerated_block_conditional(k, determinism, seed):
    """For every tile of every offset and colour, softmax(features . c) is the conditional
    enumerated from ``target.log_prob`` over the tile's states, and c reads no site of its tiles
    (setting every tile of the selection anew leaves c as it was)."""
    target = grid_network(6, determinism, seed=seed, epsilon=1e-3)
    blocks_context, tiling = context(target, k)
    motif = blocks_context.motif
    x = uniform_states(3, 36, seed)
    other = uniform_states(3, 36, seed + 100)
    checked = 0
    for blocks in selections(tiling):
        c = blocks_context.coefficients(x, blocks)
        assert c.shape == (3, len(blocks.tops), motif.n_terms) and c.dtype == torch.float64
        for t in range(len(blocks.tops)):
            exact = enumerated_conditional(target, x, blocks.sites[t], motif)
            torch.testing.assert_close(motif.exact_log_probs(c[:, t]), exact, rtol=0, atol=1e-11)
            checked += 1
        moved = x.clone()
        moved[:, blocks.sites.reshape(-1)] = other[:, blocks.sites.reshape(-1)]
        assert torch.equal(blocks_context.coefficients(moved, blocks), c)
    assert checked >= k * k  # every offset has a tile on a 6 x 6 grid


def test_every_shape_the_motif_holds_in_any_scope_order_gives_the_exact_conditional():
    target = mixed_graph()
    blocks_context, tiling = context(target, 2)
    x = uniform_states(4, target.n_sites, 5)
    for blocks in selections(tiling):
        c = blocks_context.coefficients(x, blocks)
        for t in range(len(blocks.tops)):
            exact = enumerated_conditional(target, x, blocks.sites[t], blocks_context.motif)
            got = blocks_context.motif.exact_log_probs(c[:, t])
            torch.testing.assert_close(got, exact, rtol=0, atol=1e-11)


def test_hard_zeros_are_read_a_stated_gap_below_the_least_allowed_entry():
    """With epsilon = 0 the coefficients are those of the tables with each zero read as
    ``ZERO_GAP`` below its table's least finite entry: finite, and the exact conditional of
    that reading (here: the network itself with its zeros replaced)."""
    target = grid_network(5, 0.8, seed=4, epsilon=0.0)
    read = [
        torch.where(torch.isinf(t), t[torch.isfinite(t)].min() - ZERO_GAP, t)
        for t in target.log_tables
    ]
    assert any(bool(torch.isinf(t).any()) for t in target.log_tables)
    reading = FactorGraph(target.n_sites, target.scopes, read, shape=target.shape)
    blocks_context, tiling = context(target, 2)
    x = target.start(4, torch.Generator().manual_seed(1))
    for blocks in selections(tiling):
        c = blocks_context.coefficients(x, blocks)
        assert bool(torch.isfinite(c).all())
        for t in range(len(blocks.tops)):
            exact = enumerated_conditional(reading, x, blocks.sites[t], blocks_context.motif)
            got = blocks_context.motif.exact_log_probs(c[:, t])
            torch.testing.assert_close(got, exact, rtol=0, atol=1e-11)


# ----------------------------------------------------------------- the ratios
@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
@pytest.mark.parametrize("k", [2, 3])
def test_log_ratios_are_the_targets_differences_zero_mass_included(epsilon, k):
    """Each tile's move alone, scored from the tables: equal to ``log p~(x') - log p~(x)``,
    ``-inf`` exactly where ``x'`` has zero mass."""
    target = grid_network(7, 0.7, seed=5, epsilon=epsilon)
    blocks_context, tiling = context(target, k)
    g = torch.Generator().manual_seed(2)
    x = target.start(5, g)
    log_p = target.log_prob(x)
    assert bool(torch.isfinite(log_p).all())
    infinite = 0
    for blocks in selections(tiling):
        y = uniform_states(5 * len(blocks.tops), k * k, len(blocks.tops)).view(5, -1, k * k)
        c = blocks_context.coefficients(x, blocks)
        got = blocks_context.log_ratios(x, blocks, y, c)
        moved = x.unsqueeze(1).repeat(1, len(blocks.tops), 1)
        for t in range(len(blocks.tops)):
            moved[:, t, blocks.sites[t]] = y[:, t]
        expected = target.log_prob(moved.reshape(-1, x.shape[1])).view(5, -1) - log_p[:, None]
        assert torch.equal(torch.isinf(got), torch.isinf(expected))
        assert bool((got[torch.isinf(got)] == -math.inf).all())
        torch.testing.assert_close(got[~torch.isinf(got)], expected[~torch.isinf(expected)])
        infinite += int(torch.isinf(got).sum())
    assert (infinite > 0) == (epsilon == 0.0)


def test_a_tile_listed_many_times_is_scored_once_per_entry():
    """As ``tile_law`` asks: one tile repeated with a different state in each entry."""
    target = grid_network(4, 0.5, seed=6, epsilon=0.0)
    blocks_context, _ = context(target, 2)
    motif = blocks_context.motif
    x = target.start(2, torch.Generator().manual_seed(3))
    top = torch.tensor([[1, 2]])
    sites = torch.tensor([[6, 7, 10, 11]])
    m = motif.n_states
    blocks = Blocks(top.expand(m, -1), sites.expand(m, -1), torch.zeros(m, dtype=torch.long))
    c = blocks_context.coefficients(x, blocks)
    assert torch.equal(c, c[:, :1].expand_as(c))
    y = motif.states.unsqueeze(0).expand(2, -1, -1)
    got = blocks_context.log_ratios(x, blocks, y, c)
    moved = x.unsqueeze(1).repeat(1, m, 1)
    moved[:, :, sites[0]] = y
    expected = target.log_prob(moved.reshape(-1, 16)).view(2, m) - target.log_prob(x)[:, None]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)  # -inf where expected
    assert bool(torch.isinf(got).any()) and bool(torch.isfinite(got).any())


# ----------------------------------------------------------------- refusals
def pair_graph(pair: tuple[int, int], shape=(4, 4)) -> FactorGraph:
    n = shape[0] * shape[1]
    scopes = [[v] for v in range(n)] + [list(pair)]
    tables = [torch.tensor([0.0, 0.3], dtype=torch.float64)] * n + [torch.zeros(4)]
    return FactorGraph(n, scopes, tables, shape=shape)


@pytest.mark.parametrize(
    "scope, k, named",
    [
        ((0, 5), 2, r"sites \(0, 0\) and \(1, 1\) inside a block"),  # diagonal neighbours
        ((10, 5), 2, r"sites \(2, 2\) and \(1, 1\) inside a block"),
        ((0, 2), 3, r"sites \(0, 0\) and \(0, 2\) inside a block"),  # two apart
        ((4, 12), 3, r"sites \(1, 0\) and \(3, 0\) inside a block"),
    ],
)
def test_a_factor_the_motif_cannot_hold_is_refused_naming_its_sites(scope, k, named):
    with pytest.raises(ValueError, match=named):
        context(pair_graph(scope), k)
    with pytest.raises(ValueError, match=named):
        make_sampler("neural-block", pair_graph(scope), 2, block_size=k, weights="untrained")


def test_refusals_name_the_smallest_uncovered_set_and_accept_what_fits():
    # an L of three sites: every pair is a term, the three together are not
    scopes = [[0, 1, 4]]
    l_shape = FactorGraph(16, scopes, [torch.zeros(8)], shape=(4, 4))
    with pytest.raises(ValueError, match=r"sites \(0, 0\), \(0, 1\) and \(1, 0\) inside"):
        context(l_shape, 2)
    # a four-site factor holding a diagonal pair: the pair is named
    square = FactorGraph(16, [[0, 1, 4, 5]], [torch.zeros(16)], shape=(4, 4))
    with pytest.raises(ValueError, match=r"sites \(0, 0\) and \(1, 1\) inside"):
        context(square, 2)
    # sites two apart never share a 2 x 2 tile: accepted there
    context(pair_graph((0, 2)), 2)
    context(grid_network(7, 0.5, seed=0), 4)


# ----------------------------------------------------------------- exactness
def check_step(target, proposal, moves: bool = True) -> None:
    """The enumerated law of one step (2 x 2 tiles, held sparse) against the enumerated
    network: rows of states of positive mass sum to 1, pi P = pi, detailed balance read as
    u . (D P v) = v . (D P u) for random u, v (D = diag(pi)), and (``moves``) the chain moves
    from the most likely state."""
    chosen = selection_matrices(target, block_size=2, proposal=proposal)
    pi = exact_law(target)
    positive = pi > 0
    rows = apply_step(chosen, np.ones_like(pi), left=False)
    np.testing.assert_allclose(rows[positive], 1.0, atol=1e-12)
    np.testing.assert_allclose(apply_step(chosen, pi), pi, rtol=0, atol=1e-15)
    np.testing.assert_allclose(apply_step(chosen, pi)[positive] / pi[positive], 1.0, atol=1e-10)
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal(len(pi)), rng.standard_normal(len(pi))
    forward = u @ (pi * apply_step(chosen, v, left=False))
    backward = v @ (pi * apply_step(chosen, u, left=False))
    assert abs(forward - backward) < 1e-13 * max(1.0, abs(forward))
    if moves:
        start = np.zeros_like(pi)
        start[int(np.argmax(pi))] = 1.0
        assert apply_step(chosen, start).max() < 0.999


@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_the_step_on_a_4x4_grid_network_is_stationary_and_reversible(epsilon):
    """The issue's check on a 4 x 4 grid network (65,536 states), hard zeros included."""
    target = grid_network(4, 0.6, seed=7, epsilon=epsilon)
    assert bool(torch.isinf(target.log_prob(every_state(target))).any()) == (epsilon == 0.0)
    check_step(target, BlockProposal(2, hidden=16))


@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_a_bad_network_is_exact_too(epsilon):
    """Large arbitrary corrections: low acceptance, the same exactness (3 x 4 and 4 x 4)."""
    shape = 3 if epsilon else 4
    target = grid_network(4, 0.6, seed=8, epsilon=epsilon)
    if shape == 3:  # the first three rows of the network: 4,096 states
        keep = [f for f, s in enumerate(target.scopes) if max(s) < 12]
        target = FactorGraph(
            12,
            [target.scopes[f] for f in keep],
            [target.log_tables[f] for f in keep],
            shape=(3, 4),
        )
    check_step(target, bad_proposal(), moves=False)  # it may hardly move: still exact


def test_a_context_that_read_its_own_tile_would_be_caught():
    """The check above has teeth: coefficients that see the tile break stationarity."""
    target = grid_network(3, 0.6, seed=7, epsilon=1e-3)

    class Peeking(FactorBlocks):
        def coefficients(self, x, blocks):
            c = super().coefficients(x, blocks)
            c[..., self.motif.term_slice("site")] += 0.7 * x[:, blocks.sites]
            return c

    import lsbcore.methods.block_proposals.factor_context as module

    original = module.FactorBlocks
    module.FactorBlocks = Peeking
    try:
        chosen = selection_matrices(target, block_size=2, proposal=BlockProposal(2, hidden=16))
    finally:
        module.FactorBlocks = original
    pi = exact_law(target)
    assert np.abs(apply_step(chosen, pi) - pi).max() > 1e-4


@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_a_run_keeps_its_cached_log_p_exact_and_never_leaves_the_support(epsilon):
    target = grid_network(9, 0.8, seed=3, epsilon=epsilon)
    for k in (2, 3):
        sampler = make_sampler("neural-block", target, 4, seed=1, block_size=k, weights="untrained")
        sampler.step(60)
        assert sampler.invariant_error() < 1e-9
        assert bool(torch.isfinite(sampler.log_p).all())
        assert 0.0 < sampler.block_accept_rate < 1.0
    again = NeuralBlockSampler(target, 4, block_size=3, weights="untrained", seed=1)
    again.step(60)
    assert torch.equal(again.x, sampler.x)  # one seed, one chain
