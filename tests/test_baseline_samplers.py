"""The flow paper's two baselines (issue 42): discrete MH with independent bit flips
(``bit-flip-mh``) and discontinuous HMC on the +-1 embedding (``dhmc``), against exact answers.

Discrete MH: its transition matrix against the definition enumerated with integers, stochastic
and reversible with the enumerated posterior; the step's one-step law from one state against its
row; a run at the noise floor. dHMC has no matrix over ``x`` (its chain carries ``theta``):
runs at the noise floor on a 3 x 3 Ising posterior and a factor graph with hard zeros, exact
energy conservation of its integrator, and its auxiliary state kept consistent.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import FactorGraph, IsingPosterior, exact, make_sampler
from lsbcore.exact import all_states, exact_distribution, state_codes
from lsbcore.samplers.baselines.dhmc import DiscontinuousHMC, signs

pytestmark = pytest.mark.usefixtures("single_thread")  # tiny tensors: threads only cost

ISING = IsingPosterior(torch.linspace(-0.8, 1.0, 9).view(3, 3), 0.4, "free")


def hard_factor_graph(n: int = 8, seed: int = 0) -> FactorGraph:
    """Random pairwise factors on a chain and one random factor over three variables, one of
    whose rows is an exact zero: not pairwise, no gradient, an eighth of the states of zero
    mass, and still connected by single flips (every sampler here moves one site at a time
    somewhere: a parity factor's zeros would cut the space into pieces)."""
    g = torch.Generator().manual_seed(seed)
    scopes = [(i, i + 1) for i in range(n - 1)] + [(0, n // 2, n - 1)]
    tables = [torch.randn(4, generator=g, dtype=torch.float64) for _ in range(n)]
    tables[-1] = 1.5 * tables[-1].repeat(2)  # 8 rows: a three-variable table
    tables[-1][5] = -torch.inf
    return FactorGraph(n, scopes, tables)


# ----------------------------------------------------------------- discrete MH: the matrix
def definition_matrix(target, flip_prob: float) -> np.ndarray:
    """``P[x, y] = p^d (1 - p)^(n - d) min(1, p~(y) / p~(x))``, ``d`` the Hamming distance of the
    codes ``x ^ y``; the rest of each row on its diagonal."""
    n = target.n_sites
    pi = exact_distribution(target)
    codes = np.arange(2**n)
    d = np.array([[bin(x ^ y).count("1") for y in codes] for x in codes])
    q = flip_prob**d * (1.0 - flip_prob) ** (n - d)
    with np.errstate(divide="ignore", invalid="ignore"):
        accept = np.minimum(1.0, pi[None, :] / pi[:, None])
    p = np.where(pi[:, None] > 0, q * accept, 0.0)
    np.fill_diagonal(p, 0.0)
    p[codes, codes] = 1.0 - p.sum(1)
    return p


@pytest.mark.parametrize("flips", [1.0, 2.5, 4.5])
def test_discrete_mh_matrix_is_the_definition_stochastic_and_reversible(flips):
    pi = exact_distribution(ISING)
    p = exact.transition_matrix(ISING, "bit-flip-mh", flips=flips)
    np.testing.assert_allclose(p, definition_matrix(ISING, flips / 9), rtol=0, atol=1e-15)
    assert p.min() >= 0.0
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-13)
    flow = pi[:, None] * p
    np.testing.assert_allclose(flow, flow.T, rtol=0, atol=1e-16)
    assert exact.spectral_gap(p, pi) > 1e-3


def test_discrete_mh_never_proposes_into_zero_mass_with_weight():
    target = hard_factor_graph()
    pi = exact_distribution(target)
    p = exact.transition_matrix(target, "bit-flip-mh", flips=2.0)
    np.testing.assert_allclose(p, definition_matrix(target, 2.0 / 8), rtol=0, atol=1e-15)
    alive = pi > 0
    assert np.abs(p[alive][:, ~alive]).max() == 0.0
    np.testing.assert_allclose(pi @ p, pi, atol=1e-15)


def test_one_step_from_one_state_draws_its_row():
    """20,000 chains from one state, one step: the visited states against the matrix's row.
    ``E TV <= sqrt(K / N) / 2`` over the ``K`` reachable states, and TV exceeds its mean by 0.03
    with probability below 1e-7 (McDiarmid)."""
    chains, flips = 20_000, 2.0
    x0 = all_states(9)[300]
    row = definition_matrix(ISING, flips / 9)[300]
    sampler = make_sampler("bit-flip-mh", ISING, chains, seed=4, x0=x0.view(3, 3), flips=flips)
    sampler.step(1)
    visited = np.bincount(state_codes(sampler.x).numpy(), minlength=512) / chains
    tolerance = 0.5 * math.sqrt(np.count_nonzero(row) / chains) + 0.03
    assert 0.5 * np.abs(visited - row).sum() < tolerance
    # the proposal itself: each site flips with probability flips / n
    flipped = sampler.last_proposal["flips"].double().mean().item()
    assert abs(flipped - flips / 9) < 5 * math.sqrt(flips / 9 / (chains * 9))


# ----------------------------------------------------------------- runs at the noise floor
@pytest.mark.parametrize(
    ("name", "options", "chains", "burn_in", "thin", "draws"),
    [
        ("bit-flip-mh", {}, 1000, 300, 20, 50),
        ("bit-flip-mh", {"flips": 3.0}, 1000, 300, 20, 50),
        ("dhmc", {}, 2000, 30, 3, 20),
        ("dhmc", {"step_size": 0.9, "integrator_steps": 2}, 2000, 30, 3, 20),
    ],
)
def test_a_run_reaches_the_exact_ising_posterior(name, options, chains, burn_in, thin, draws):
    pi = exact_distribution(ISING)
    sampler = make_sampler(name, ISING, chains, seed=7, **options)
    counts = exact_histogram(sampler, burn_in, thin, draws)
    threshold = tv_threshold(pi, chains * draws)
    assert 0.5 * np.abs(counts / counts.sum() - pi).sum() < threshold
    assert sampler.invariant_error() < 1e-12


@pytest.mark.parametrize(
    ("name", "options", "burn_in", "thin"),
    # discrete MH's steps are cheap (one evaluation, ~1 flip): more of them than dHMC's
    [("bit-flip-mh", {}, 300, 20), ("dhmc", {}, 40, 4)],
)
def test_a_run_reaches_a_factor_graph_with_hard_zeros(name, options, burn_in, thin):
    """Not pairwise and not differentiable: a crossing into zero mass costs dU = +inf (dHMC
    reflects), a flip into it is refused (discrete MH); neither ever enters it."""
    target = hard_factor_graph()
    pi = exact_distribution(target)
    chains, draws = 2000, 20
    sampler = make_sampler(name, target, chains, seed=3, **options)
    counts = exact_histogram(sampler, burn_in, thin, draws)
    assert counts[pi == 0].sum() == 0
    assert 0.5 * np.abs(counts / counts.sum() - pi).sum() < tv_threshold(pi, chains * draws)


def exact_histogram(sampler, burn_in: int, thin: int, draws: int) -> np.ndarray:
    counts = np.zeros(2**sampler.n_sites)
    sampler.step(burn_in)
    for _ in range(draws):
        sampler.step(thin)
        assert torch.isfinite(sampler.log_p).all()
        counts += np.bincount(state_codes(sampler.x).numpy(), minlength=len(counts))
    return counts


def tv_threshold(p: np.ndarray, n_draws: int) -> float:
    """conftest's: 3 x the noise floor ``0.4 sqrt(K_eff / N)``, ``K_eff = (sum sqrt p)^2``."""
    return 3.0 * 0.4 * math.sqrt(float(np.sqrt(p).sum()) ** 2 / n_draws)


# ----------------------------------------------------------------- dHMC's integrator
@pytest.mark.parametrize("target", [ISING, hard_factor_graph()], ids=["ising", "factor-graph"])
def test_the_integrator_conserves_the_total_energy(target):
    """``H = -log p~(sign theta) + sum |p|`` before and after 20 integrator steps of size 0.3
    (``log p~`` evaluated afresh at the end): equal to rounding, while many crossings went
    through and many reflected (a kinetic energy that changed)."""
    chains = 500
    sampler = DiscontinuousHMC(target, chains, seed=2)
    g = torch.Generator().manual_seed(5)
    signs_p = torch.where(torch.rand(chains, target.n_sites, generator=g) < 0.5, 1.0, -1.0)
    p = signs_p.double() * torch.distributions.Exponential(1.0).sample(signs_p.shape).double()
    theta0 = sampler.theta.clone()
    dt = torch.full((chains,), 0.3, dtype=torch.float64)
    steps = torch.full((chains,), 20)
    h0 = -target.log_prob(signs(theta0)) + p.abs().sum(1)
    theta, p1, log_p, attempts = sampler.integrate(theta0, p, dt, steps)
    h1 = -target.log_prob(signs(theta)) + p1.abs().sum(1)
    assert float((h1 - h0).abs().max()) < 1e-10
    torch.testing.assert_close(log_p, target.log_prob(signs(theta)), rtol=0, atol=1e-10)
    assert theta.abs().max() <= 1.0
    flipped = (signs(theta) != signs(theta0)).sum()
    assert flipped > chains and int(attempts.sum()) > flipped  # crossings and reflections
    assert float((p1.abs().sum(1) - p.abs().sum(1)).abs().max()) > 1.0


def test_theta_stays_the_state_and_is_redrawn_for_a_new_state():
    sampler = make_sampler("dhmc", ISING, 50, seed=1)
    magnitudes = sampler.theta.abs()
    assert bool((signs(sampler.theta) == sampler.x.view(50, -1)).all())
    assert 0.0 < magnitudes.min() and magnitudes.max() <= 1.0
    sampler.step(5)
    assert bool((signs(sampler.theta) == sampler.x.view(50, -1)).all())
    assert sampler.n_accepted > 0
    flipped = -sampler.x.clone()
    sampler.set_state(flipped)
    assert bool((signs(sampler.theta) == flipped.view(50, -1)).all())
    assert sampler.invariant_error() < 1e-12


# ----------------------------------------------------------------- counts and seeds
def test_evaluations_are_counted_per_chain():
    mh = make_sampler("bit-flip-mh", ISING, 8, seed=1, flips=2.6)
    mh.step(10)
    assert mh.n_target_evals == 1 + 10  # the resync's log p~, then the proposed state
    assert mh.sites_per_step == 3 and mh.sweeps == pytest.approx(10 * 3 / 9)

    sampler = make_sampler("dhmc", ISING, 8, seed=1)
    tried = []
    integrate = sampler.integrate

    def counting(*args):
        out = integrate(*args)
        tried.append(int(out[3].sum()))
        return out

    sampler.integrate = counting
    sampler.step(10)
    assert sum(tried) > 8 * 10  # crossings were tried: the count below has power
    assert sampler.n_target_evals == 1 + sum(tried) // 8
    assert sampler.sites_per_step == 9


@pytest.mark.parametrize("name", ["bit-flip-mh", "dhmc"])
def test_one_seed_gives_the_same_chains(name):
    a, b = (make_sampler(name, ISING, 16, seed=9) for _ in range(2))
    a.step(20)
    b.step(20)
    assert torch.equal(a.x, b.x) and torch.equal(a.log_p, b.log_p)


# ----------------------------------------------------------------- options refused
@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("bit-flip-mh", {"flips": 0.0}, "flips must be a real number between 0.01 and"),
        ("bit-flip-mh", {"flips": 5.0}, r"flips must be at most half the target's 9 sites \(4.5"),
        ("bit-flip-mh", {"flips": math.nan}, "flips must be a real number"),
        ("dhmc", {"step_size": 0.0}, "step_size must be a real number between 0.01 and 1.0"),
        ("dhmc", {"step_size": 1.5}, "step_size must be a real number between 0.01 and 1.0"),
        ("dhmc", {"integrator_steps": 0}, "integrator_steps must be an integer between 1 and"),
        ("dhmc", {"integrator_steps": 2.5}, "integrator_steps must be an integer between 1"),
        ("dhmc", {"n_steps": 3}, r"unknown options for 'dhmc': \['n_steps'\]"),
    ],
)
def test_out_of_range_options_are_refused_in_a_sentence(name, options, message):
    with pytest.raises(ValueError, match=message) as info:
        make_sampler(name, ISING, 2, **options)
    assert str(info.value).count("\n") == 0 and str(info.value).endswith(".")


def test_dhmc_has_no_matrix_over_x_and_says_why():
    with pytest.raises(ValueError, match="dhmc has no transition matrix over x"):
        exact.transition_matrix(ISING, "dhmc")


def test_bit_flip_mh_marginal_in_a_comparison_matches_the_exact_one():
    """A bit-flip step moves any number of sites, so the comparison adds its whole states to the
    running marginal (the single-flip shortcut, which needs the one site moved, would index
    site -1): after mixing, the marginal is the enumerated posterior's within Monte Carlo error."""
    from lsbcore import Comparison

    comparison = Comparison(["bit-flip-mh"], ISING, 8, seed=3, device="cpu", thin=1)
    comparison.step(200)
    comparison.start_mixing()
    comparison.step(4000)
    estimate = comparison.marginals["bit-flip-mh"]
    assert estimate.count == 4000
    pi = exact_distribution(ISING)
    exact_marginal = pi @ ((all_states(9).numpy() + 1.0) / 2.0)
    got = estimate.mean().reshape(-1)
    assert np.abs(got - exact_marginal).max() < 0.05
