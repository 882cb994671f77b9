"""The settled indicator: each site's Monte Carlo error from batch means of block sums and the
chains' agreement, against the textbook formulas on the draws themselves, and on chains that do
and do not mix (a chain stuck in a wrong region is caught)."""

import math

import numpy as np
import pytest
import torch

import lsbcore
from lsbcore import IsingPosterior, MarginalEstimate, make_sampler
from lsbcore.diagnostics.settled import (
    MIN_DRAWS,
    RHAT_LIMIT,
    STUCK_GAP,
    TOLERANCE,
    UNSETTLED_LIMIT,
    BlockSums,
    batch_means_error,
    binary_split_rhat,
)
from lsbcore.targets.ising import CRITICAL_LAMBDA


def classic_split_rhat(halves: np.ndarray) -> np.ndarray:
    """BDA3's split R-hat from the draws ``[M half-chains, n, D]`` (no rank normalisation)."""
    n = halves.shape[1]
    w = halves.var(1, ddof=1).mean(0)
    b = n * halves.mean(1).var(0, ddof=1)
    return np.sqrt(((n - 1) / n * w + b / n) / w)


def correlated_draws(rng, chains, n, sites, stay=0.8):
    """0/1 draws: each step keeps the last value with probability ``stay``, else redraws."""
    out = np.empty((chains, n, sites))
    out[:, 0] = rng.random((chains, sites)) < 0.5
    for t in range(1, n):
        fresh = rng.random((chains, sites)) < 0.4
        keep = rng.random((chains, sites)) < stay
        out[:, t] = np.where(keep, out[:, t - 1], fresh)
    return out


def test_binary_split_rhat_is_the_textbook_formula():
    rng = np.random.default_rng(0)
    draws = correlated_draws(rng, 4, 60, 50)
    halves = draws.reshape(4, 2, 30, 50).reshape(8, 30, 50)
    ours = binary_split_rhat(halves.mean(1), np.full(8, 30))
    np.testing.assert_allclose(ours, classic_split_rhat(halves), rtol=1e-12)


def test_constant_sites_give_one_and_chains_stuck_apart_give_infinity():
    means = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 0.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    rhat = binary_split_rhat(means, np.full(4, 10))
    assert rhat[0] == 1.0 and rhat[1] == 1.0 and math.isinf(rhat[2])


def _feed(draws: np.ndarray, max_blocks: int = 8) -> BlockSums:
    """Block sums of ``draws`` ``[chains, n, sites]``, one draw at a time."""
    blocks = BlockSums(max_blocks=max_blocks)
    for t in range(draws.shape[1]):
        blocks.add(torch.from_numpy(draws[:, t]), 1)
    return blocks


def test_block_sums_window_matches_the_draws_it_covers():
    rng = np.random.default_rng(1)
    chains, n, sites = 3, 203, 40
    draws = correlated_draws(rng, chains, n, sites)
    blocks = _feed(draws)
    window = blocks.window()
    counts = blocks.block_counts
    assert window == list(range(blocks.n_closed - blocks.n_closed // 2, blocks.n_closed))
    starts = np.concatenate([[0], np.cumsum(counts)])
    batches = np.stack([draws[:, starts[i] : starts[i + 1]] for i in window])  # [k, B, n_b, D]
    k, n_b = len(window), batches.shape[2]
    assert k >= 2 and k * n_b >= 0.4 * sum(counts)  # the latter 40-50% of the closed draws
    verdict = blocks.settledness()
    flat = batches.reshape(k * chains, n_b, sites)
    np.testing.assert_allclose(verdict.rhat, classic_split_rhat(flat), rtol=1e-5)
    se = flat.mean(1).std(0, ddof=1) / np.sqrt(k * chains)
    t = {6: 2.5706, 9: 2.3060}[k * chains]  # Student's t, 97.5% quantile, M - 1 degrees
    np.testing.assert_allclose(verdict.error, t * se, rtol=1e-4)
    assert verdict.draws == n_b and verdict.batches == k * chains
    pooled = flat.mean((0, 1))
    np.testing.assert_allclose(blocks.window_mean(), pooled, rtol=1e-6)
    per_chain = batches.mean((0, 2))  # [B, D]
    gap = per_chain.max(0) - per_chain.min(0)
    assert verdict.disagreeing_fraction == pytest.approx(np.mean(gap > STUCK_GAP))
    half = k // 2
    change = batches[:half].mean((0, 1, 2)) - batches[half:].mean((0, 1, 2))
    assert verdict.max_change == pytest.approx(np.abs(change).max(), rel=1e-5)


def test_batch_means_error_is_unbiased_for_independent_batches_of_any_length():
    """Batch means with variance 1 / n_b: the mean of se^2 over many replications is the
    variance of the pooled mean, 1 / N, for equal and for unequal batches."""
    rng = np.random.default_rng(7)
    for lengths in (np.full(8, 50.0), np.array([10.0, 20, 40, 80, 30, 30])):
        means = rng.standard_normal((len(lengths), 200_000)) / np.sqrt(lengths)[:, None]
        se = batch_means_error(means, lengths)
        assert np.mean(se**2) == pytest.approx(1 / lengths.sum(), rel=0.01)
    equal = rng.random((8, 5))
    np.testing.assert_allclose(
        batch_means_error(equal, np.full(8, 3)), equal.std(0, ddof=1) / np.sqrt(8)
    )


def test_a_site_known_precisely_is_settled_though_r_hat_would_not_be():
    """A nearly certain site (P = 0.02) that leaves 0 rarely, for about 10 draws at a time:
    R-hat compares the chains' spread with the small P (1 - P) and puts most such sites over
    1.01, while P is known to within a few hundredths, and the verdict is that it has
    settled."""
    rng = np.random.default_rng(3)
    chains, n, sites = 4, 2000, 500
    draws = np.zeros((chains, n, sites))
    for t in range(1, n):  # a two-state chain: 0 -> 1 w.p. 0.002, 1 -> 0 w.p. 0.1
        leave = rng.random((chains, sites)) < np.where(draws[:, t - 1] > 0, 0.1, 0.002)
        draws[:, t] = np.where(leave, 1 - draws[:, t - 1], draws[:, t - 1])
    verdict = _feed(draws).settledness()
    assert np.mean(verdict.rhat > RHAT_LIMIT) > 0.5
    assert verdict.unsettled_fraction <= UNSETTLED_LIMIT and verdict.settled


def test_one_chain_of_many_stuck_in_a_wrong_region_is_caught_by_the_chains_agreement():
    """32 chains mix fast at P = 0.2; one is frozen at +1 on 5% of the sites. The standard
    error hardly notices (one batch in 32 chains), the chains' disagreement does."""
    rng = np.random.default_rng(5)
    draws = (rng.random((32, 256, 400)) < 0.2).astype(np.float64)
    draws[0, :, :20] = 1.0
    verdict = _feed(draws).settledness()
    assert verdict.unsettled_fraction <= UNSETTLED_LIMIT  # the error bound alone would pass
    assert verdict.disagreeing_fraction == pytest.approx(0.05)
    assert not verdict.settled and "disagree" in verdict.reason


def test_block_sums_memory_stays_bounded():
    blocks = BlockSums(max_blocks=8)
    for _ in range(5000):
        blocks.add(torch.ones(2, 3), 1)
    assert blocks.n_closed < 8 and blocks.count == 5000
    assert blocks.block_length >= 5000 // 8


def test_chunked_adds_give_the_same_window_as_single_draws_when_chunks_fit_blocks():
    rng = np.random.default_rng(2)
    draws = correlated_draws(rng, 2, 64, 10)
    one, chunked = BlockSums(), BlockSums()
    for t in range(64):
        one.add(torch.from_numpy(draws[:, t]), 1)
    for t in range(0, 64, 1):  # chunk of one draw: identical path
        chunked.add(torch.from_numpy(draws[:, t : t + 1].sum(1)), 1)
    np.testing.assert_allclose(one.settledness().rhat, chunked.settledness().rhat)


def test_marginal_estimate_feeds_its_blocks_on_both_paths():
    x = torch.where(
        torch.rand(64, 2, 3, 4, generator=torch.Generator().manual_seed(3)) < 0.5, 1, -1
    )
    by_update, by_add = MarginalEstimate(), MarginalEstimate()
    for t in range(64):
        by_update.update(x[t].double())
        by_add.add((x[t].double() + 1) / 2, 1)
    assert by_update.settledness().rhat.shape == (3, 4)
    np.testing.assert_allclose(by_update.settledness().rhat, by_add.settledness().rhat)
    assert MarginalEstimate().settledness() is None


def _run(lam, starts, sweeps=400):
    target = IsingPosterior(torch.zeros(8, 8), lam)
    x0 = torch.stack([torch.full((8, 8), float(s)) for s in starts])
    sampler = make_sampler("checkerboard", target, len(starts), seed=5, x0=x0)
    estimate = MarginalEstimate()
    for _ in range(sweeps):
        sampler.step(1)
        estimate.update(sampler.x)
    return estimate.settledness()


def test_a_bimodal_posterior_from_opposite_starts_is_not_settled():
    """lambda = 2, no data: the chains stay in the mode they started in (all +1 or all -1)."""
    verdict = _run(2.0, [1, 1, -1, -1])
    assert not verdict.settled
    assert verdict.unsettled_fraction > 0.9 and verdict.disagreeing_fraction > 0.9
    assert verdict.max_rhat > 2 and "Not settled" in verdict.reason


def test_a_weakly_coupled_posterior_from_opposite_starts_settles():
    verdict = _run(0.2, [1, 1, -1, -1], sweeps=4000)
    assert verdict.settled and verdict.draws >= MIN_DRAWS
    assert verdict.unsettled_fraction <= UNSETTLED_LIMIT and verdict.max_error < TOLERANCE
    assert verdict.reason.startswith("Settled")


def test_too_few_draws_is_never_settled():
    blocks = BlockSums()
    for _ in range(8):
        blocks.add(torch.ones(2, 5), 1)
    verdict = blocks.settledness()
    assert verdict.draws < MIN_DRAWS and not verdict.settled
    assert "Too few draws" in verdict.reason


@pytest.mark.parametrize("bad", [3, 5, True, 2.0])
def test_block_sums_refuses_bad_sizes(bad):
    with pytest.raises(ValueError, match="max_blocks"):
        BlockSums(max_blocks=bad)


def test_the_results_document_carries_the_verdict_only_for_one_shared_posterior():
    from lsbcore import Comparison, paper_case
    from lsbcore.studies.results import comparison_results

    target = IsingPosterior(torch.linspace(-4, 4, 64, dtype=torch.float64).view(8, 8), 0.3)
    shared = Comparison(["checkerboard"], target, 4, seed=1, thin=1)
    shared.step(10)
    shared.start_mixing()
    shared.step(3000)
    entry = comparison_results(shared, {}, {}, {})["samplers"]["checkerboard"]
    verdict = shared.marginals["checkerboard"].settledness()
    assert entry["settled"] is verdict.settled is True
    assert entry["unsettled_fraction"] == verdict.unsettled_fraction
    case = paper_case(1, n=8, n_chains=4)  # one noisy alpha per chain
    own = Comparison(["barker"], case.target, 4, x0=case.x0, thin=1)
    own.start_mixing()
    own.step(200)
    entry = comparison_results(own, {}, {}, {})["samplers"]["barker"]
    assert entry["settled"] is None and entry["unsettled_fraction"] is None


def test_on_a_texture_chains_disagree_above_the_critical_coupling_and_settle_below_it():
    # what the closing line's advice to lower lambda rests on (app/live.py): a gray photo with
    # faint noise gives a weak field everywhere; at lambda = 1 (over twice the critical 0.44)
    # chains started apart keep their own domains, at 0.3 they settle within the minimum
    noise = np.random.default_rng(0).standard_normal((48, 48))
    texture = np.clip(0.5 + 0.05 * noise, 0, 1)
    strong = lsbcore.segment(texture, lam=1.0, max_side=48, max_sweeps=300, seed=0)
    assert not strong.settled and strong.settledness.disagreeing_fraction > 0.05
    weak = lsbcore.segment(texture, lam=0.3, max_side=48, max_sweeps=300, seed=0)
    assert weak.settled and weak.sweeps < 300
    assert weak.settledness.disagreeing_fraction <= 0.01
    assert CRITICAL_LAMBDA == pytest.approx(0.4407, abs=1e-4)
