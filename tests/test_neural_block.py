"""Learned block proposals: the proposal is a distribution the sampler samples and scores
exactly, the context reads only the boundary, and the ``neural-block`` chain is exact whatever
the network (its enumerated law leaves the posterior invariant and is reversible)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from lsbcore import make_sampler
from lsbcore.methods.block_proposals.exact_law import (
    apply_step,
    every_state,
    selection_matrices,
    step_matrix,
)
from lsbcore.methods.block_proposals.motif import GridMotif
from lsbcore.methods.block_proposals.pairwise_context import PairwiseBlocks
from lsbcore.methods.block_proposals.proposal import BlockProposal, load_proposal
from lsbcore.methods.block_proposals.sampler import NeuralBlockSampler
from lsbcore.methods.block_proposals.tiling import Tiling, interaction_pairs
from lsbcore.samplers.registry import refusal
from lsbcore.targets.ising import IsingPosterior
from lsbcore.targets.pairwise import PairwiseMRF

pytestmark = pytest.mark.usefixtures("single_thread")


def posterior(shape=(4, 4), boundary="free", lam=0.6, seed=0, scale=0.8, chains=None):
    g = torch.Generator().manual_seed(seed)
    size = (chains, *shape) if chains else shape
    alpha = torch.randn(*size, generator=g, dtype=torch.float64) * scale
    return IsingPosterior(alpha, lam, boundary)


def exact_law(target) -> np.ndarray:
    log_p = target.log_prob(every_state(target)).numpy()
    pi = np.exp(log_p - log_p.max())
    return pi / pi.sum()


def bad_proposal(k: int = 2) -> BlockProposal:
    """A network whose corrections are large and arbitrary: far from every conditional."""
    q = BlockProposal(k, hidden=16, seed=5)
    with torch.no_grad():
        for layer in (q.out, q.out_context):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=torch.Generator()
                                           .manual_seed(9)) * 6.0)  # fmt: skip
            layer.bias.fill_(4.0)
    return q


def trained_proposal(k: int = 2) -> BlockProposal:
    """A small network fitted for a few hundred steps to exact block samples of this test's
    posteriors (the forward KL): good, not perfect."""
    q = BlockProposal(k, hidden=16, seed=1)
    g = torch.Generator().manual_seed(2)
    optimiser = torch.optim.Adam(q.parameters(), lr=1e-2)
    for _ in range(200):
        c = torch.zeros(64, q.motif.n_terms, dtype=torch.float64)
        c[:, q.motif.term_slice("site")] = torch.randn(64, k * k, generator=g) * 1.5
        c[:, q.motif.term_slice("horizontal")] = 0.6
        c[:, q.motif.term_slice("vertical")] = 0.6
        x = q.motif.exact_samples(c, g).squeeze(1)
        loss = -q.log_prob(x, c).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return q.eval().requires_grad_(False)


# ----------------------------------------------------------------- the motif
def test_the_motif_conditional_is_the_enumerated_block_conditional_of_an_ising_posterior():
    target = posterior((5, 6), "periodic", seed=3)
    motif = GridMotif(3)
    tiling = Tiling((5, 6), 3, interaction_pairs(target))
    context = PairwiseBlocks(target, motif, tiling)
    x = target.start(2, torch.Generator().manual_seed(4))
    blocks = tiling.blocks(4).of_colour(0)  # offset (1, 1)
    c = context.coefficients(x, blocks)
    for t in range(len(blocks.tops)):
        states = x.unsqueeze(1).repeat(1, motif.n_states, 1)  # [B, M, n]
        states[:, :, blocks.sites[t]] = motif.states
        log_p = target.log_prob(states.reshape(-1, 30)).view(2, -1)
        np.testing.assert_allclose(
            motif.exact_log_probs(c[:, t]), torch.log_softmax(log_p, 1), atol=1e-10
        )


def test_the_context_reads_no_site_of_its_tiles():
    target = posterior((6, 6), seed=1)
    tiling = Tiling((6, 6), 2, interaction_pairs(target))
    context = PairwiseBlocks(target, GridMotif(2), tiling)
    blocks = tiling.blocks(0).of_colour(1)
    x = target.start(3, torch.Generator().manual_seed(0))
    changed = x.clone()
    changed[:, blocks.sites.reshape(-1)] *= -1.0
    assert torch.equal(context.coefficients(x, blocks), context.coefficients(changed, blocks))
    outside = x.clone()
    assert 1 not in blocks.sites and 2 in blocks.sites
    outside[:, 1] *= -1.0  # a site outside the tiles, next to site 2 inside one
    assert not torch.equal(context.coefficients(x, blocks), context.coefficients(outside, blocks))


def test_a_lattice_with_an_edge_inside_a_tile_that_the_motif_cannot_hold_is_refused():
    n = 9
    J = np.zeros((n, n))
    for a, b in [(0, 1), (1, 2), (0, 3), (0, 4)]:  # (0, 4) is a diagonal of the 3 x 3 grid
        J[a, b] = J[b, a] = 0.5
    graph = PairwiseMRF(np.zeros(n), J)
    graph.shape = (3, 3)
    with pytest.raises(ValueError, match=r"joins sites \(0, 0\) and \(1, 1\) inside a block"):
        NeuralBlockSampler(graph, 2, proposal=BlockProposal(2))


# ----------------------------------------------------------------- the proposal
@pytest.mark.parametrize("k", [2, 3])
def test_the_proposal_is_a_distribution_and_sampling_draws_from_it(k):
    q = BlockProposal(k, hidden=24, seed=k)
    with torch.no_grad():  # a non-zero correction, so the network part is exercised
        q.out.weight.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    c = torch.randn(4, q.motif.n_terms, generator=g, dtype=torch.float64)
    with torch.no_grad():
        log_q = q.all_log_probs(c)  # brute force over every block state
        np.testing.assert_allclose(log_q.exp().sum(1), 1.0, atol=1e-12)
        draws = 40_000
        x, log_q_x = q.sample(c[:1].expand(draws, -1), g)
        np.testing.assert_allclose(log_q_x, log_q[0, q.motif.codes(x)], atol=1e-12)
        freq = torch.bincount(q.motif.codes(x), minlength=q.motif.n_states) / draws
    tv = 0.5 * (freq - log_q[0].exp()).abs().sum()
    # E[TV] <= 0.5 sqrt(M / draws): 0.01 for k = 2, 0.056 for k = 3
    assert tv < 0.5 * np.sqrt(q.motif.n_states / draws) + 0.01


def test_each_logit_reads_only_the_sites_before_it():
    q = BlockProposal(3, hidden=32, seed=0)
    with torch.no_grad():
        q.out.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
        c = torch.randn(1, q.motif.n_terms, dtype=torch.float64)
        x = torch.ones(1, 9, dtype=torch.float64)
        for i in range(9):
            later = x.clone()
            later[:, i:] = -1.0
            torch.testing.assert_close(q.logits(x, c)[:, : i + 1], q.logits(later, c)[:, : i + 1])
            earlier = x.clone()
            earlier[:, :i] = -1.0
            if i > 0:
                assert not torch.allclose(q.logits(x, c)[:, i], q.logits(earlier, c)[:, i])


def test_an_untrained_proposal_is_exact_on_a_block_without_inner_couplings():
    """The known part of each logit is the site's own conditional: with no coupling inside the
    block the sites are independent given the boundary, and the untrained proposal is exact."""
    q = BlockProposal(2)
    c = torch.zeros(3, q.motif.n_terms, dtype=torch.float64)
    c[:, q.motif.term_slice("site")] = torch.randn(3, 4, dtype=torch.float64) * 2
    with torch.no_grad():
        np.testing.assert_allclose(q.all_log_probs(c), q.motif.exact_log_probs(c), atol=1e-12)


def test_weights_round_trip_and_a_broken_file_is_refused(tmp_path):
    q = bad_proposal()
    q.info = {"steps": 3}
    q.save(tmp_path / "q.pt")
    back = load_proposal(tmp_path / "q.pt")
    c = torch.randn(5, q.motif.n_terms, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(back.all_log_probs(c), q.all_log_probs(c))
    assert back.info == {"steps": 3}
    (tmp_path / "bad.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="not a block proposal's weights file"):
        load_proposal(tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="no proposal weights"):
        load_proposal(tmp_path / "missing.pt")


def test_a_weights_file_with_nan_weights_is_refused_in_a_sentence(tmp_path):
    """Issue 47: a proposal whose weights were all NaN loaded, and would have proposed NaN."""
    q = bad_proposal()
    with torch.no_grad():
        for w in q.parameters():
            w.fill_(float("nan"))
    q.save(tmp_path / "nan.pt")
    with pytest.raises(ValueError, match="weights are not all finite"):
        load_proposal(tmp_path / "nan.pt")


# ----------------------------------------------------------------- exactness
@pytest.mark.parametrize(
    ("network", "boundary"), [("untrained", "free"), ("trained", "periodic"), ("bad", "free")]
)
def test_the_step_leaves_the_posterior_invariant_and_is_reversible_on_4x4(network, boundary):
    """The issue's check: the enumerated law of one step on a 4 x 4 lattice with 2 x 2 tiles
    (65,536 states, held sparse) against the enumerated posterior: rows sum to 1, pi P = pi, and
    detailed balance, read as u . (D P v) = v . (D P u) for random u, v (D = diag(pi))."""
    proposal = {"untrained": BlockProposal(2, hidden=16), "trained": trained_proposal(),
                "bad": bad_proposal()}[network]  # fmt: skip
    target = posterior((4, 4), boundary, seed=7, scale=1.2)
    selections = selection_matrices(target, block_size=2, proposal=proposal)
    pi = exact_law(target)
    row_sums = apply_step(selections, np.ones_like(pi), left=False)
    np.testing.assert_allclose(row_sums, 1.0, atol=1e-12)
    np.testing.assert_allclose(apply_step(selections, pi), pi, atol=1e-15)
    rng = np.random.default_rng(0)
    u, v = rng.standard_normal(len(pi)), rng.standard_normal(len(pi))
    forward = u @ (pi * apply_step(selections, v, left=False))
    backward = v @ (pi * apply_step(selections, u, left=False))
    assert abs(forward - backward) < 1e-13 * max(1.0, abs(forward))
    # and it moves: the magnetisation's lag-one autocorrelation under pi is below 1
    f = every_state(target).sum(1).numpy()
    f = f - pi @ f
    rho = (pi * f) @ apply_step(selections, f, left=False) / ((pi * f) @ f)
    assert rho < (0.9 if network != "bad" else 1.0 - 1e-6)  # a bad network moves, slowly


def test_a_dense_step_matrix_is_stochastic_stationary_and_symmetric_in_flow():
    target = posterior((3, 3), "periodic", seed=2, scale=1.0)
    p = step_matrix(target, block_size=2, proposal=bad_proposal()).toarray()
    pi = exact_law(target)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ p, pi, atol=1e-14)
    flow = pi[:, None] * p
    np.testing.assert_allclose(flow, flow.T, atol=1e-14)


def test_a_proposal_that_read_its_own_tile_would_be_caught():
    """The check above has teeth: a context that reads the tile (here: the tile's own spins
    added to its fields) makes the same enumeration fail stationarity."""
    target = posterior((3, 3), "free", seed=2, scale=1.0)

    class Peeking(PairwiseBlocks):
        def coefficients(self, x, blocks):
            c = super().coefficients(x, blocks)
            c[..., self.motif.term_slice("site")] += 0.7 * x[:, blocks.sites]
            return c

        def log_ratios(self, x, blocks, y, c):  # the true ratio, not read from c
            return PairwiseBlocks.log_ratios(self, x, blocks, y, super().coefficients(x, blocks))

    import lsbcore.methods.block_proposals.sampler as module

    original = module.PairwiseBlocks
    module.PairwiseBlocks = Peeking
    try:
        p = step_matrix(target, block_size=2, proposal=BlockProposal(2, hidden=8)).toarray()
    finally:
        module.PairwiseBlocks = original
    pi = exact_law(target)
    assert np.abs(pi @ p - pi).max() > 1e-4


def test_the_sampler_draws_the_law_it_reports():
    """One step from a fixed state, many chains (which share the step's offset and colour): the
    empirical next states against the enumerated law of the selection the step drew, for
    several seeds (so several selections): the sampler's step and its law are one chain."""
    target = posterior((3, 4), "free", seed=4, scale=1.0)
    proposal = trained_proposal()
    x0 = target.start(1, torch.Generator().manual_seed(3))
    start = np.zeros(2**12)
    start[int(((x0[0] > 0).long() * 2 ** torch.arange(12)).sum())] = 1.0
    chains, seen = 20_000, set()
    for seed in range(4):
        sampler = NeuralBlockSampler(
            target, chains, proposal=proposal, seed=seed, x0=x0.expand(chains, -1)
        )
        sampler.step(1)
        offset, colour = sampler.last_selection
        seen.add((offset, colour))
        blocks = sampler.selection(offset, colour)
        one = NeuralBlockSampler(target, 2**12, proposal=proposal, x0=every_state(target))
        law = start
        for _, cols, probs in one.tile_law(blocks):
            rows = np.repeat(np.arange(2**12), len(cols) // 2**12)
            law = law @ sp.csr_matrix((probs, (rows, cols)), shape=(2**12, 2**12))
        codes = ((sampler.x.reshape(chains, -1) > 0).long() * 2 ** torch.arange(12)).sum(1)
        empirical = np.bincount(codes.numpy(), minlength=2**12) / chains
        tv = 0.5 * np.abs(empirical - law).sum()
        assert tv < 0.5 * np.sqrt(np.count_nonzero(law) / chains) + 0.01
    assert len(seen) > 1


def test_chains_reach_the_posterior_in_total_variation():
    """From one uniform state, the chain's law after t steps (exact, P^t) falls to the
    posterior; 4,000 independent chains after 60 steps agree with it on the joint law of a
    3 x 3 lattice (512 states) to within sampling noise."""
    target = posterior((3, 3), "periodic", seed=6, scale=1.0)
    pi = exact_law(target)
    proposal = trained_proposal()
    sampler = NeuralBlockSampler(target, 4000, proposal=proposal, seed=3)
    sampler.step(60)
    codes = ((sampler.x.reshape(4000, -1) > 0).long() * 2 ** torch.arange(9)).sum(1)
    empirical = np.bincount(codes.numpy(), minlength=512) / 4000
    tv = 0.5 * np.abs(empirical - pi).sum()
    assert tv < 0.5 * np.sqrt(512 / 4000) + 0.02


# ----------------------------------------------------------------- the sampler
def test_the_cached_log_p_stays_exact_and_one_seed_gives_one_chain():
    target = posterior((12, 10), "periodic", seed=8, scale=2.0, chains=3)
    runs = []
    for _ in range(2):
        sampler = NeuralBlockSampler(target, 3, block_size=3, proposal=bad_proposal(3), seed=4)
        sampler.step(200)
        assert sampler.invariant_error() < 1e-10
        assert 0.0 < sampler.block_accept_rate < 1.0
        runs.append(sampler.x.clone())
    assert torch.equal(*runs)


def test_it_is_refused_where_there_is_no_grid_in_a_sentence():
    line = PairwiseMRF(np.zeros(6), np.eye(6, k=1) + np.eye(6, k=-1))
    assert "not as rows and columns" in refusal("neural-block", line)
    with pytest.raises(ValueError, match="at least 4 sites on each side"):
        make_sampler("neural-block", posterior((3, 8)), 2, block_size=4, weights="untrained")
    with pytest.raises(ValueError, match="block_size must be an integer between 2 and 4"):
        make_sampler("neural-block", posterior(), 2, block_size=5, weights="untrained")
    with pytest.raises(ValueError, match="weights must be one of"):
        make_sampler("neural-block", posterior(), 2, weights="mine")


def test_exact_tiles_are_block_gibbs_every_move_accepted():
    target = posterior((3, 3), "periodic", seed=2, scale=1.0)
    p = step_matrix(target, block_size=2, weights="exact").toarray()
    pi = exact_law(target)
    np.testing.assert_allclose(pi @ p, pi, atol=1e-14)
    flow = pi[:, None] * p
    np.testing.assert_allclose(flow, flow.T, atol=1e-14)
    sampler = make_sampler("neural-block", posterior((9, 7), seed=3), 3, block_size=3,
                           weights="exact", seed=2)  # fmt: skip
    sampler.step(30)
    assert sampler.block_accept_rate == 1.0
    assert sampler.invariant_error() < 1e-10


def test_a_segmentation_runs_on_neural_block_with_its_options():
    from lsbcore import segment

    image = np.zeros((24, 24))
    image[6:18, 6:18] = 1.0
    result = segment(image, sampler="neural-block", sweeps=8, max_side=24,
                     sampler_options={"block_size": 2, "weights": "untrained"})  # fmt: skip
    assert result.sweeps == 8 and result.working_mask[12, 12] != result.working_mask[1, 1]
    with pytest.raises(ValueError, match="sampler_options must be a dict"):
        segment(image, sampler="neural-block", sweeps=8, sampler_options=["block_size"])
    with pytest.raises(ValueError, match="block_size must be an integer between 2 and 4"):
        segment(image, sampler="neural-block", sweeps=8, sampler_options={"block_size": 7})


def test_tiles_of_a_grid_network_take_four_colours_and_a_smallest_grid_is_served():
    from lsbcore.methods.block_proposals.tiling import Tiling, interaction_pairs
    from lsbcore.targets.grid_network import grid_network

    network = grid_network(12, 0.5, seed=1)  # factors join tiles at their corners
    tiling = Tiling((12, 12), 2, interaction_pairs(network))
    assert [tiling.blocks(o).n_colours for o in range(4)] == [4, 4, 4, 4]
    for side in (4, 5):  # one whole 4 x 4 tile at one offset, none at the others
        sampler = make_sampler("neural-block", grid_network(side), 2, block_size=4,
                               weights="untrained")  # fmt: skip
        sampler.step(20)
        assert sampler.invariant_error() < 1e-10


def test_the_dense_law_of_each_chain_is_its_row_of_the_step_matrix():
    from lsbcore.methods.block_proposals.exact_law import sampler_at_every_state

    target = posterior((3, 3), "periodic", seed=5, scale=1.0)
    proposal = bad_proposal()
    sampler, codes = sampler_at_every_state(target, block_size=2, proposal=proposal)
    rows = sampler.transition_probabilities().numpy()
    p = step_matrix(target, block_size=2, proposal=proposal).toarray()
    np.testing.assert_allclose(rows, p[codes], atol=1e-14)
