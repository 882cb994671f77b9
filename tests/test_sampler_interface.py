"""Every registered sampler offers the declared interface (``lsbcore.samplers.interface``): the
members the app, ``Comparison``, ``lsbcore.exact`` and the figures call, each called here and
checked against what it promises, on a tiny Ising posterior where everything can be enumerated.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, balancing_to_dict, exact, load_balancing, make_balancing
from lsbcore.samplers.interface import ChainSampler, MultiSiteSampler, SingleSiteSampler
from lsbcore.samplers.registry import REGISTRY, make_sampler

CHAINS = 3
# 12 sites: the most lsbcore.exact enumerates, and room for the largest default block (10)
SHAPE = (3, 4)
N_SITES = 12
TARGET = IsingPosterior(torch.linspace(-1.0, 1.2, N_SITES).view(SHAPE), 0.4, "free")


# 6 sites: the law of a multi-site step over all 2^n states (paths, balls) stays small
SMALL = IsingPosterior(torch.linspace(-0.8, 1.0, 6).view(2, 3), 0.4, "free")


def build(name: str, target=TARGET):
    options = {}
    if REGISTRY[name].needs_balancing:  # a function saved after learning, loaded frozen
        options["balancing"] = load_balancing(balancing_to_dict(make_balancing("lsb1")))
    if REGISTRY[name].takes_flow:  # the untrained flow: training is tested in test_flow_*.py
        options["train_steps"] = 0
    for option in REGISTRY[name].options:  # blocks that fit the target
        if option.name == "block_size" and option.default > target.n_sites:
            options["block_size"] = target.n_sites
    return make_sampler(
        name, target, CHAINS, seed=3, backend="torch", resync_every=10**6, **options
    )


class NotASampler:
    """Has a sampler's counters but nothing else: must not pass for one."""

    n_steps = n_site_updates = n_target_evals = 0


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_registered_sampler_is_a_chain_sampler_and_its_members_keep_their_promises(name):
    sampler = build(name)
    assert isinstance(sampler, ChainSampler)  # statistics raises here: the check must not
    assert sampler.last_proposal is None
    assert math.isnan(sampler.accept_rate)
    assert (sampler.name, sampler.target, sampler.n_chains) == (name, TARGET, CHAINS)
    assert sampler.n_sites == N_SITES and sampler.backend == "torch" and sampler.seed == 3
    assert isinstance(sampler.generator, torch.Generator)
    assert isinstance(sampler.learnable, bool) and sampler.learnable == REGISTRY[name].learnable
    assert isinstance(sampler.sites_per_step, int) and 1 <= sampler.sites_per_step <= N_SITES
    with pytest.raises(ValueError, match="track_statistics"):
        _ = sampler.statistics

    truth = torch.tensor([[1.0, -1.0, 1.0, 1.0], [-1.0, 1.0, 1.0, -1.0], [1.0, 1.0, -1.0, -1.0]])
    sampler.track_statistics(truth)
    before = (sampler.n_steps, sampler.n_site_updates, sampler.n_target_evals)
    trace = torch.zeros(4, CHAINS, 5, dtype=torch.float64)
    sampler.step(4, trace=trace)
    assert sampler.n_steps == before[0] + 4
    assert sampler.n_site_updates == before[1] + 4 * sampler.sites_per_step
    if name == "dhmc":  # its cost varies (crossing attempts): test_baseline_samplers.py counts it
        assert sampler.n_target_evals >= before[2] + sampler.evals_per_step
    else:
        assert sampler.n_target_evals == before[2] + 4 * sampler.evals_per_step
    assert sampler.sweeps == pytest.approx(sampler.n_site_updates / N_SITES)
    assert 0 <= sampler.n_accepted <= sampler.n_site_updates * CHAINS
    assert sampler.accept_rate == pytest.approx(
        sampler.n_accepted / (sampler.n_site_updates * CHAINS)
    )
    assert sampler.steps_to_resync == 10**6 - 4
    assert sampler.wall_seconds > 0

    # the state, its log p~ and log-ratios, and the running statistics agree with the target
    x = sampler.x
    assert tuple(x.shape) == (CHAINS, *SHAPE) and bool(((x == 1) | (x == -1)).all())
    torch.testing.assert_close(sampler.log_p, TARGET.log_prob(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(sampler.log_ratios, TARGET.flip_log_ratios(x), rtol=0, atol=1e-12)
    stats = sampler.statistics
    expected = torch.stack([TARGET.log_prob(x), x.sum((1, 2)), (x * truth).sum((1, 2))], 1)
    torch.testing.assert_close(stats, expected, rtol=0, atol=1e-9)
    torch.testing.assert_close(trace[-1, :, :3], expected, rtol=0, atol=1e-9)
    last = sampler.last_proposal  # None for a sweep: it proposes nothing
    if REGISTRY[name].move == "site":  # (bit-flip-mh moves one site a step on average, a set)
        assert set(last) >= {"site", "accept_prob", "accepted"}
    if last is not None:
        assert set(last) >= {"accept_prob", "accepted"}
        for key in {"site", "accept_prob", "accepted"} & set(last):
            assert tuple(last[key].shape) == (CHAINS,)
    assert sampler.invariant_error() < 1e-9

    # replacing the state, the target and the backend from outside keeps every cache exact
    start = -torch.ones(SHAPE, dtype=torch.float64)
    sampler.set_state(start)
    assert torch.equal(sampler.x, start.expand(CHAINS, *SHAPE))
    torch.testing.assert_close(sampler.log_p, TARGET.log_prob(sampler.x), rtol=0, atol=1e-12)
    cooler = TARGET.tempered(0.5)
    sampler.set_target(cooler)
    assert sampler.target is cooler
    torch.testing.assert_close(sampler.log_p, cooler.log_prob(sampler.x), rtol=0, atol=1e-12)
    sampler.set_backend("torch")
    sampler.step(2, learn=sampler.learnable)
    sampler.resync()
    assert sampler.invariant_error() < 1e-9


def test_the_interface_refuses_what_is_not_a_sampler():
    assert not isinstance(NotASampler(), ChainSampler)
    assert not isinstance(TARGET, ChainSampler)
    assert not isinstance(NotASampler(), SingleSiteSampler)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_sampler_that_proposes_one_site_says_where_and_with_what_probability(name):
    """One site per step: a ``SingleSiteSampler``, whose Q is a distribution over the sites and
    whose T, summed with the probability of staying, is one."""
    sampler = build(name)
    if REGISTRY[name].move != "site":  # bit-flip-mh moves one site a step on average, a set
        return
    assert isinstance(sampler, SingleSiteSampler)
    sampler.step(3)
    log_q = sampler.proposal_log_probs()
    flip = sampler.flip_probabilities()
    assert tuple(log_q.shape) == tuple(flip.shape) == (CHAINS, *SHAPE)
    q = torch.exp(log_q).reshape(CHAINS, -1)
    torch.testing.assert_close(q.sum(1), torch.ones(CHAINS, dtype=q.dtype), rtol=0, atol=1e-12)
    t = flip.reshape(CHAINS, -1)
    assert bool((t >= 0).all()) and bool((t <= q + 1e-12).all())  # T = Q A with A <= 1
    assert bool((t.sum(1) <= 1 + 1e-12).all())


@pytest.mark.parametrize("name", list(REGISTRY))
def test_a_sampler_that_moves_many_sites_gives_its_law_or_is_a_sweep_of_the_target(name):
    """Many sites per step: the law of the next state over all 2^n states (a
    ``MultiSiteSampler``), or a full sweep whose matrix ``lsbcore.exact`` builds itself."""
    sampler = build(name, SMALL)
    if REGISTRY[name].move == "site":
        return
    if not isinstance(sampler, MultiSiteSampler):
        # a sweep: checkerboard Gibbs (lsbcore.exact multiplies its colours), or dHMC, whose
        # next x depends on its theta too (runs check it: tests/test_baseline_samplers.py)
        assert sampler.sites_per_step == sampler.n_sites
        return
    law = sampler.transition_probabilities()
    assert tuple(law.shape) == (CHAINS, 2**SMALL.n_sites)
    assert bool((law >= 0).all())
    np.testing.assert_allclose(law.sum(1).numpy(), 1.0, atol=1e-12)


def test_the_exact_chain_reads_the_single_site_interface():
    """``lsbcore.exact`` builds a single-site sampler's matrix from ``flip_probabilities``: its
    rows are distributions and it keeps the posterior."""
    p = exact.transition_matrix(TARGET, "sqrt")
    pi = exact.exact_distribution(TARGET)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
