"""Rao-Blackwellised marginals against enumeration on tiny lattices: the conditional is the exact
one, its mean under the target is the marginal (unbiased) with less variance than the spin's, and
chains estimate the marginal with a smaller error by it."""

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, MarginalEstimate, make_sampler
from lsbcore.diagnostics.rao_blackwell import conditional_probability, site_probabilities
from lsbcore.exact.states import all_states, exact_distribution, state_codes

ALPHA = torch.tensor([[0.4, -0.3, 0.1], [-0.6, 0.2, 0.5]], dtype=torch.float64)


def _enumerated(target):
    states = all_states(target.n_sites).view(-1, *target.shape)
    pi = exact_distribution(target)
    rb = conditional_probability(states, target.flip_log_ratios(states)).reshape(len(pi), -1)
    return states, pi, rb.numpy()


@pytest.mark.parametrize("boundary", ["free", "periodic"])
def test_the_conditional_is_the_exact_one(boundary):
    target = IsingPosterior(ALPHA, 0.7, boundary=boundary)
    states, _, rb = _enumerated(target)
    log_p = target.log_prob(states).numpy()
    flat = states.reshape(len(states), -1)
    for i in range(target.n_sites):
        up, down = flat.clone(), flat.clone()
        up[:, i], down[:, i] = 1.0, -1.0
        lp_up, lp_down = log_p[state_codes(up)], log_p[state_codes(down)]
        exact = 1.0 / (1.0 + np.exp(lp_down - lp_up))
        np.testing.assert_allclose(rb[:, i], exact, rtol=1e-12)


def test_its_mean_is_the_marginal_and_its_variance_is_smaller_than_the_spins():
    target = IsingPosterior(ALPHA, 0.7)
    states, pi, rb = _enumerated(target)
    spin = ((states.reshape(len(pi), -1) + 1) / 2).numpy()
    marginal = pi @ spin
    np.testing.assert_allclose(pi @ rb, marginal, rtol=1e-12)  # unbiased: the tower rule
    var_rb = pi @ rb**2 - marginal**2
    assert np.all(var_rb < 0.8 * marginal * (1 - marginal))


@pytest.mark.parametrize("name", ["checkerboard", "barker"])
def test_chains_estimate_the_marginal_with_a_smaller_error_by_it(name):
    """512 independent chains on a 3 x 3 lattice, each its own estimate from 60 sweeps: both
    estimates centre on the exact marginal, the Rao-Blackwellised one with less spread."""
    alpha = torch.linspace(-0.8, 0.8, 9, dtype=torch.float64).view(3, 3)
    target = IsingPosterior(alpha, 0.4)
    states = all_states(9).view(-1, 3, 3)
    exact = exact_distribution(target) @ ((states.reshape(-1, 9) + 1) / 2).numpy()
    chains = 512
    sampler = make_sampler(name, target, chains, seed=11)
    per_sweep = 1 if name == "checkerboard" else 9
    sampler.step(30 * per_sweep)
    spin, rb = MarginalEstimate(), MarginalEstimate()
    for _ in range(60):
        sampler.step(per_sweep)
        spin.update(sampler.x)
        rb.update(sampler.x, sampler.log_ratios)
    for estimate in (spin, rb):
        per_chain = estimate.per_chain().reshape(chains, 9)
        se = per_chain.std(0) / np.sqrt(chains)
        assert np.all(np.abs(per_chain.mean(0) - exact) < 4.5 * se)
    spread_rb = rb.per_chain().reshape(chains, 9).var(0)
    spread_spin = spin.per_chain().reshape(chains, 9).var(0)
    assert spread_rb.mean() < 0.75 * spread_spin.mean()


@pytest.mark.parametrize("name", ["checkerboard", "gibbs", "sqrt"])
def test_site_probabilities_read_the_samplers_cached_log_ratios(name):
    target = IsingPosterior(torch.randn(4, 5, generator=torch.Generator().manual_seed(2)), 0.8)
    sampler = make_sampler(name, target, 3, seed=4)
    sampler.step(37)
    x = sampler.x.clone()
    expected = conditional_probability(x, target.flip_log_ratios(x))
    torch.testing.assert_close(site_probabilities(sampler), expected)
    assert site_probabilities(sampler).shape == (3, 4, 5)


def test_marginal_estimate_uses_the_conditionals_when_given_log_ratios():
    target = IsingPosterior(ALPHA, 0.5)
    x = torch.tensor([[[1, -1, 1], [-1, -1, 1]], [[1, 1, 1], [-1, 1, -1]]], dtype=torch.float64)
    estimate = MarginalEstimate()
    estimate.update(x, target.flip_log_ratios(x))
    expected = conditional_probability(x, target.flip_log_ratios(x)).mean(0).numpy()
    np.testing.assert_allclose(estimate.mean(), expected)
    with pytest.raises(ValueError, match="one shape"):
        conditional_probability(x, target.flip_log_ratios(x)[:1])


def test_photo_segmentation_averages_conditionals_not_spins():
    """Counted spins would make every P a multiple of 1 / (draws in the window); the
    conditionals are not."""
    from lsbcore.segmentation.segment import segment

    image = torch.linspace(0, 1, 16 * 16).view(16, 16).numpy()
    result = segment(image, max_side=16, sweeps=64, n_chains=2, seed=3)
    verdict = result.settledness
    draws = verdict.batches * verdict.draws  # equal blocks: one draw per sweep
    scaled = result.working_probability * draws
    assert not np.allclose(scaled, np.round(scaled), atol=1e-3)
