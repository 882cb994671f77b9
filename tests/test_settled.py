"""The settled indicator: per-site split R-hat from block sums, against the textbook formula on
the draws themselves, and on chains that do and do not mix."""

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, MarginalEstimate, make_sampler
from lsbcore.diagnostics.settled import (
    MIN_DRAWS,
    RHAT_LIMIT,
    BlockSums,
    binary_split_rhat,
)


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


def test_block_sums_window_matches_the_draws_it_covers():
    rng = np.random.default_rng(1)
    chains, n, sites = 3, 203, 40
    draws = correlated_draws(rng, chains, n, sites)
    blocks = BlockSums(max_blocks=8)
    for t in range(n):
        blocks.add(torch.from_numpy(draws[:, t]), 1)
    first, second = blocks.window()
    counts = blocks.block_counts
    starts = np.concatenate([[0], np.cumsum(counts)])
    a = draws[:, starts[first[0]] : starts[first[-1] + 1]]
    b = draws[:, starts[second[0]] : starts[second[-1] + 1]]
    assert a.shape[1] == b.shape[1] >= n // 8  # equal halves here: every block holds its length
    settled = blocks.settledness()
    expected = classic_split_rhat(np.concatenate([a, b]).reshape(2 * chains, -1, sites))
    np.testing.assert_allclose(settled.rhat, expected, rtol=1e-5)
    assert settled.draws == a.shape[1] and settled.half_chains == 2 * chains
    assert settled.max_change == pytest.approx(np.abs(a.mean((0, 1)) - b.mean((0, 1))).max())
    np.testing.assert_allclose(
        blocks.window_mean(), np.concatenate([a, b], 1).mean((0, 1)), rtol=1e-6
    )


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
    assert verdict.unsettled_fraction > 0.9 and verdict.max_rhat > 2
    assert "Not settled" in verdict.reason


def test_a_weakly_coupled_posterior_from_opposite_starts_settles():
    verdict = _run(0.2, [1, 1, -1, -1], sweeps=4000)
    assert verdict.settled and verdict.draws >= MIN_DRAWS
    assert verdict.unsettled_fraction <= 0.01 and np.median(verdict.rhat) < RHAT_LIMIT
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
    from lsbcore.results import comparison_results

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
