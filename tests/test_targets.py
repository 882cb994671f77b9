"""The target protocol: the Ising posterior and the general pairwise network answer the samplers'
questions exactly, and every sampler samples a pairwise network's exact distribution.

Exact answers come from enumeration (every state of up to 12 sites); the TV threshold is the
one of test_exactness.py (conftest.py explains it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, PairwiseMRF, make_sampler
from lsbcore import exact as exact_chain
from lsbcore.samplers.registry import REGISTRY, SAMPLERS

# the pairwise-kernel samplers (the samplers on any target: test_every_pair.py)
EXACT_SAMPLERS = [
    name for name in SAMPLERS if not (REGISTRY[name].needs_balancing or REGISTRY[name].batched_only)
]

pytestmark = pytest.mark.usefixtures("single_thread")


def random_network(n: int, density: float, scale: float, seed: int):
    """``h [n]`` and a symmetric ``J [n, n]`` with zero diagonal on a random graph."""
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(n, generator=generator, dtype=torch.float64) * 0.3
    weights = torch.randn(n, n, generator=generator, dtype=torch.float64) * scale
    keep = torch.rand(n, n, generator=generator) < density
    upper = torch.triu(weights * keep, diagonal=1)
    return h, upper + upper.T


def brute_log_p(h, J, states):
    return states @ h + 0.5 * ((states @ J) * states).sum(1)


# ------------------------------------------------------------------------------ the protocol
def test_pairwise_network_answers_from_its_definition(exact):
    h, J = random_network(7, 0.6, 0.8, seed=1)
    target = PairwiseMRF(h, J)
    states = exact.all_states(1, 7).reshape(-1, 7)
    torch.testing.assert_close(target.log_prob(states), brute_log_p(h, J, states))
    s = target.flip_log_ratios(states)
    for i in range(7):
        flipped = states.clone()
        flipped[:, i] *= -1
        expected = brute_log_p(h, J, flipped) - brute_log_p(h, J, states)
        torch.testing.assert_close(s[:, i], expected)
    # a Gibbs update's log-odds: log p(x_i = +1 | rest) - log p(x_i = -1 | rest)
    odds = target.conditional_log_odds(states)
    torch.testing.assert_close(odds, -s * states)
    torch.testing.assert_close(target.log_prob_from_ratios(states, s), target.log_prob(states))


def test_dense_sparse_and_scipy_couplings_give_one_target(exact):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    h, J = random_network(9, 0.4, 0.5, seed=2)
    states = exact.all_states(1, 9).reshape(-1, 9)
    dense = PairwiseMRF(h, J)
    for other in (
        PairwiseMRF(h.numpy(), J.numpy()),
        PairwiseMRF(h, J.to_sparse()),
        PairwiseMRF(h, scipy_sparse.csr_matrix(J.numpy())),
    ):
        torch.testing.assert_close(other.log_prob(states), dense.log_prob(states))
        assert torch.equal(other.neighbourhood, dense.neighbourhood)
    torch.testing.assert_close(dense.J, J)


def test_ising_posterior_is_the_pairwise_network_of_its_lattice(exact):
    """The same h and J through either class: same log p~ on every state (periodic 2-wide
    lattice included, where the torus joins two sites twice)."""
    alpha = exact.random_alpha((2, 3), 0.7, seed=3)
    for boundary in ("free", "periodic"):
        ising = IsingPosterior(alpha, 0.4, boundary)
        J = torch.zeros(6, 6, dtype=torch.float64)
        for (i, j), w in zip(ising.edges.tolist(), ising.edge_weights.tolist(), strict=True):
            J[i, j] += w
            J[j, i] += w
        mrf = PairwiseMRF(alpha.reshape(-1), J)
        states = exact.all_states(2, 3)
        torch.testing.assert_close(mrf.log_prob(states.reshape(64, 6)), ising.log_prob(states))
        torch.testing.assert_close(mrf.coupling.sum(1), ising.coupling.sum(1))


@pytest.mark.parametrize("seed", range(3))
def test_update_after_many_flips_equals_a_recompute(seed):
    h, J = random_network(12, 0.5, 0.7, seed=seed)
    target = PairwiseMRF(h, J)
    generator = torch.Generator().manual_seed(seed)
    x = (2 * torch.randint(0, 2, (5, 12), generator=generator) - 1).double()
    flips = torch.rand(5, 12, generator=generator) < 0.4  # adjacent sites flip together too
    x_new = torch.where(flips, -x, x)
    updated = target.update_ratios(x, x_new, target.flip_log_ratios(x))
    torch.testing.assert_close(updated, target.flip_log_ratios(x_new), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "target",
    [
        IsingPosterior(torch.zeros(4, 5), 1.0, "free"),
        IsingPosterior(torch.zeros(4, 6), 1.0, "periodic"),
        IsingPosterior(torch.zeros(3, 5), 1.0, "periodic"),  # odd torus: three colours
        PairwiseMRF(*random_network(12, 0.5, 1.0, seed=4)),
    ],
    ids=["free", "periodic-even", "periodic-odd", "random-graph"],
)
def test_colouring_is_proper(target):
    colour = target.colouring()
    edges = target.edges
    assert colour.shape == (target.n_sites,)
    assert bool((colour[edges[:, 0]] != colour[edges[:, 1]]).all())
    if isinstance(target, IsingPosterior) and target.boundary == "free":
        assert int(colour.max()) == 1  # the checkerboard


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda: PairwiseMRF(torch.zeros(3), torch.ones(3, 3)), "zero diagonal"),
        (lambda: PairwiseMRF(torch.zeros(3), torch.triu(torch.ones(3, 3), 1)), "symmetric"),
        (lambda: PairwiseMRF(torch.zeros(4), torch.zeros(3, 3)), "h has 4 sites"),
        (lambda: PairwiseMRF(torch.zeros(3), torch.zeros(3, 4)), "square"),
        (lambda: PairwiseMRF([float("nan")] * 2, torch.zeros(2, 2)), "finite"),
        (lambda: PairwiseMRF(torch.zeros(2), torch.full((2, 2), float("inf"))), "finite"),
        (lambda: PairwiseMRF(torch.zeros(2, 2, 2), torch.zeros(2, 2)), "shape"),
        (lambda: PairwiseMRF("abc", torch.zeros(2, 2)), "numeric"),
        (lambda: PairwiseMRF(torch.zeros(2), torch.zeros(2, 2) + 1j), "complex"),
    ],
)
def test_pairwise_network_refuses_bad_parameters_with_a_sentence(bad, message):
    with pytest.raises(ValueError, match=message):
        bad()


def test_samplers_refuse_something_that_is_not_a_target():
    with pytest.raises(ValueError, match="target must be an lsbcore target"):
        make_sampler("gibbs", torch.zeros(3, 3), 2)


# ------------------------------------------------------------------------------ exactness
CHAINS, BURN_IN, THIN, DRAWS = 1000, 150, 8, 60  # N = 60,000 draws: threshold 0.04-0.07
# (graph density, J scale). At scale 0.9 this graph is bimodal with switches too rare for any
# single-site or block sampler to cross within the test's budget (TV 0.04-0.13 for all alike):
# a case for tempering, not a test of exactness.
COUPLINGS = {"weak": (0.6, 0.3), "strong": (0.4, 0.6)}


@pytest.mark.parametrize("coupling", COUPLINGS)
@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_every_sampler_samples_a_random_pairwise_network_exactly(name, coupling, exact):
    """On the default backend; the other gives the same chains (test_kernels.py checks that
    chain for chain on this kind of network too)."""
    density, scale = COUPLINGS[coupling]
    h, J = random_network(10, density, scale, seed=11)
    target = PairwiseMRF(h, J)
    p = exact.exact_posterior(target)  # 1024 states
    sampler = make_sampler(name, target, CHAINS, seed=5)
    if sampler.learnable:
        sampler.step(40, learn=True)
    sweep = REGISTRY[name].move == "sweep"
    burn_in, thin = (BURN_IN // 10, 1) if sweep else (BURN_IN, THIN * (3 if name in (
        "gibbs", "metropolis") else 1))  # fmt: skip
    counts = exact.histogram(sampler, burn_in, thin, DRAWS)
    distance, threshold = exact.tv(p, counts), exact.tv_threshold(p, CHAINS * DRAWS)
    print(f"{name} {coupling} network: TV {distance:.4f}, threshold {threshold:.4f}")
    assert distance < threshold


def test_pairwise_network_with_one_field_per_chain(exact):
    """h ``[n_chains, n]``: each half of the batch samples its own distribution."""
    h, J = random_network(6, 0.6, 0.6, seed=12)
    other = -h + 0.5
    fields = torch.cat([h.expand(1000, -1), other.expand(1000, -1)])
    target = PairwiseMRF(fields, J)
    sampler = make_sampler("sqrt", target, 2000, seed=6)
    sampler.step(100)
    counts = [np.zeros(64), np.zeros(64)]
    for _ in range(40):
        sampler.step(6)
        codes = exact.state_codes(sampler.x).numpy()
        counts[0] += np.bincount(codes[:1000], minlength=64)
        counts[1] += np.bincount(codes[1000:], minlength=64)
    for c, chain in zip(counts, (0, 1999), strict=True):
        p = exact.exact_posterior(target, chain)
        assert exact.tv(p, c) < exact.tv_threshold(p, 1000 * 40)


# ------------------------------------------------------------------------------ block Gibbs
@pytest.mark.parametrize(
    "target",
    [
        IsingPosterior(torch.linspace(-0.8, 0.6, 6).view(2, 3), 0.7, "free"),
        IsingPosterior(torch.linspace(-0.8, 0.6, 9).view(3, 3), 0.4, "periodic"),
        PairwiseMRF(*random_network(7, 0.5, 0.8, seed=13)),
    ],
    ids=["free-2x3", "periodic-3x3", "random-graph"],
)
def test_checkerboard_sweep_leaves_the_exact_distribution_invariant(target, exact):
    p = exact.exact_posterior(target)
    t = exact_chain.sweep_matrix(target)
    np.testing.assert_allclose(t.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(p @ t, p, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("backend_name", ["compiled", "torch"])
def test_checkerboard_step_is_the_exact_sweep(backend_name, exact):
    """From one state, many one-sweep chains: the distribution of where they land matches the
    exact sweep matrix's row (TV against its noise floor)."""
    target = IsingPosterior(torch.linspace(-0.8, 0.6, 6).view(2, 3), 0.7, "free")
    states = exact.all_states(2, 3)
    start = 0b101101
    row = exact_chain.sweep_matrix(target)[start]
    chains = 20_000
    sampler = make_sampler(
        "checkerboard", target, chains, seed=7, x0=states[start], backend=backend_name
    )
    sampler.step(1)
    counts = np.bincount(exact.state_codes(sampler.x).numpy(), minlength=64)
    assert exact.tv(row, counts) < exact.tv_threshold(row, chains)
    assert sampler.n_site_updates == 6 and sampler.sweeps == 1.0


SINGLE_SITE = [n for n in EXACT_SAMPLERS if REGISTRY[n].move == "site"]


@pytest.mark.parametrize("name", SINGLE_SITE)
def test_single_site_transition_matrix_on_a_network_satisfies_detailed_balance(name, exact):
    """The full matrix of a single-site sampler on a random 7-site network (from
    ``flip_probabilities`` with one chain per state) is reversible with respect to the
    enumerated distribution, as on the lattice."""
    h, J = random_network(7, 0.5, 0.7, seed=14)
    target = PairwiseMRF(h, J)
    p = exact.exact_posterior(target)
    states = exact.all_states(1, 7).reshape(-1, 7)
    sampler = make_sampler(name, target, len(p), seed=1, x0=states)
    t = exact.transition_matrix(sampler.flip_probabilities())
    flow = p[:, None] * t
    off = ~np.eye(len(p), dtype=bool)
    assert (np.abs(flow - flow.T)[off] <= 1e-10 * np.maximum(flow, flow.T)[off]).all()
    np.testing.assert_allclose(p @ t, p, rtol=1e-10, atol=1e-15)
