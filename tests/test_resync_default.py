"""How often a sampler recomputes its cached flip log-ratios exactly when no period is asked
(``chain_base.default_resync_every``): every 2,000 steps on the paper's lattices and wherever a
step is a sweep, about two sweeps' worth of site updates on a large target; an asked period is
kept; the resync happens at that step."""

from __future__ import annotations

import pytest
import torch

from lsbcore.samplers.chain_base import RESYNC_STEPS, default_resync_every
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.ising import IsingPosterior


@pytest.fixture(scope="module")
def ising_64() -> IsingPosterior:
    alpha = torch.randn(64, 64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return IsingPosterior(alpha, lam=1.0, boundary="free")


def test_the_default_period_is_two_sweeps_of_updates_and_at_least_2000_steps():
    assert RESYNC_STEPS == 2000
    assert default_resync_every(900, 1) == 2000  # the paper's 30 x 30
    assert default_resync_every(784, 1) == 2000  # the 28 x 28 RBM
    assert default_resync_every(65_536, 1) == 131_072  # a 256 x 256 photo, one site a step
    assert default_resync_every(65_536, 4) == 32_768  # blocks of four
    assert default_resync_every(65_536, 65_536) == 2000  # a sweep a step
    assert default_resync_every(1001, 1) == 2002
    assert default_resync_every(10, 0.5) == 2000  # fewer than one site a step on average


@pytest.mark.parametrize(
    ("name", "options", "period"),
    [
        ("gibbs", {}, 2 * 64 * 64),
        ("barker", {}, 2 * 64 * 64),
        ("block-gibbs", {"block_size": 4}, 2 * 64 * 64 // 4),
        ("checkerboard", {}, 2000),
        ("gibbs", {"resync_every": 300}, 300),
    ],
)
def test_samplers_resync_at_their_period(name, options, period, ising_64):
    sampler = make_sampler(name, ising_64, 2, seed=1, **options)
    assert sampler.resync_every == period
    sampler.step(period - 2)
    evals = sampler.n_target_evals
    sampler.step(1)  # a step alone
    assert sampler.n_target_evals - evals == sampler.evals_per_step
    assert sampler.steps_to_resync == 1
    evals = sampler.n_target_evals
    sampler.step(1)  # the step and the recompute (log p~, and every ratio where cached)
    assert sampler.n_target_evals - evals > sampler.evals_per_step
    assert sampler.steps_to_resync == period
    assert sampler.invariant_error() < 1e-10
