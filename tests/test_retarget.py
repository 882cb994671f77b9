"""Tempered targets and samplers moved to another state or target from outside: what
parallel tempering (replica exchange) and annealing are built on.

``target.tempered(beta)`` is ``p~^beta`` exactly; ``set_state`` / ``set_target`` leave a sampler
exactly as a fresh one built at that state and target (same caches, same next steps), and a
chain moved to ``tempered(beta)`` samples ``p^beta`` (against enumeration).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, PairwiseMRF, make_sampler
from lsbcore import exact as exact_chain
from lsbcore.samplers.registry import REGISTRY

NAMES = [name for name, spec in REGISTRY.items() if not (spec.needs_balancing or spec.batched_only)]

pytestmark = pytest.mark.usefixtures("single_thread")


def ising(boundary="free", shape=(3, 3), lam=0.6, seed=1, batch=None):
    generator = torch.Generator().manual_seed(seed)
    size = shape if batch is None else (batch, *shape)
    alpha = torch.randn(*size, generator=generator, dtype=torch.float64) * 0.5
    return IsingPosterior(alpha, lam, boundary)


def mrf(n=6, seed=2):
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(n, generator=generator, dtype=torch.float64) * 0.4
    upper = torch.triu(torch.randn(n, n, generator=generator, dtype=torch.float64), 1)
    return PairwiseMRF(h, upper + upper.T)


@pytest.mark.parametrize("make", [ising, lambda: ising("periodic", batch=3), mrf])
@pytest.mark.parametrize("beta", [0.0, 0.37, 1.0, 4.5])
def test_tempered_log_prob_is_beta_times(make, beta):
    target = make()
    hot = target.tempered(beta)
    states = exact_chain.all_states(target.n_sites).view(-1, *target.shape)
    for b in range(target.batch):
        expected = beta * target.chain(b).log_prob(states)
        assert torch.allclose(hot.chain(b).log_prob(states), expected, rtol=1e-12, atol=1e-12)
    assert type(hot) is type(target) and hot.batch == target.batch
    assert target.same_graph(hot)


def test_tempered_ising_keeps_its_parameters():
    target = ising(lam=0.8)
    hot = target.tempered(0.25)
    assert hot.lam == pytest.approx(0.2)
    assert torch.allclose(hot.alpha, 0.25 * target.alpha)
    assert hot.boundary == target.boundary


@pytest.mark.parametrize("beta", [-0.1, float("nan"), float("inf"), True, "1"])
def test_tempered_refuses_bad_beta(beta):
    with pytest.raises(ValueError, match="beta"):
        ising().tempered(beta)


@pytest.mark.parametrize("name", NAMES)
def test_set_state_equals_a_fresh_start(name, backend):
    target = ising()
    moved = make_sampler(name, target, 4, seed=5)
    moved.step(7)
    x = torch.from_numpy(np.random.default_rng(0).choice([-1.0, 1.0], size=(4, 3, 3)))
    moved.set_state(x)
    assert torch.equal(moved.x, x)
    assert moved.invariant_error() < 1e-12
    fresh = make_sampler(name, target, 4, seed=5, x0=x)
    assert torch.allclose(moved.log_p, fresh.log_p, rtol=1e-12)
    if hasattr(fresh, "flip_probabilities"):
        assert torch.allclose(moved.flip_probabilities(), fresh.flip_probabilities(), atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_set_target_equals_a_fresh_sampler_there(name, backend):
    target = ising()
    cold = target.tempered(2.0)
    moved = make_sampler(name, target, 4, seed=5)
    moved.step(9)
    x = moved.x.clone()
    moved.set_target(cold)
    assert moved.target is cold and torch.equal(moved.x, x)
    assert moved.invariant_error() < 1e-12
    fresh = make_sampler(name, cold, 4, seed=5, x0=x)
    assert torch.allclose(moved.log_p, fresh.log_p, rtol=1e-12)
    if hasattr(fresh, "flip_probabilities"):
        assert torch.allclose(moved.flip_probabilities(), fresh.flip_probabilities(), atol=1e-12)
    # the next steps use the new weights on either backend: generators aligned, same chains
    fresh.generator.set_state(moved.generator.get_state())
    moved.step(25)
    fresh.step(25)
    assert torch.equal(moved.x, fresh.x)
    assert moved.invariant_error() < 1e-9


def test_set_target_refuses_another_graph():
    sampler = make_sampler("barker", ising(), 2)
    with pytest.raises(ValueError, match="same graph"):
        sampler.set_target(ising("periodic"))
    with pytest.raises(ValueError, match="same graph"):
        sampler.set_target(ising(shape=(3, 4)))
    with pytest.raises(ValueError, match="fields"):
        sampler.set_target(ising(batch=3))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["barker", "max", "checkerboard"])
def test_a_retargeted_chain_samples_the_tempered_posterior(name, exact):
    """Built on p, moved to p^0.5 (a hotter posterior): its draws follow p^0.5 exactly."""
    target = ising(shape=(2, 3), lam=1.2)
    hot = target.tempered(0.5)
    sampler = make_sampler(name, target, 64, seed=11)
    sampler.step(50)
    sampler.set_target(hot)
    thin = 1 if REGISTRY[name].move == "sweep" else 6
    counts = exact.histogram(sampler, burn_in=30, thin=thin, draws=300)
    pi = exact_chain.exact_distribution(hot)
    assert exact.tv(pi, counts) < exact.tv_threshold(pi, counts.sum())
    # and not p itself: the temperature matters at this coupling
    assert exact.tv(exact_chain.exact_distribution(target), counts) > 0.1
