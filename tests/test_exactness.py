"""Every sampler targets the exact posterior (spec section 9), numerically robustly (section 7).

Statistical checks enumerate all states of a small lattice and compare visited states with the
exact posterior by total-variation distance; the threshold and its derivation are in conftest.py
(``tv_threshold``: 3 x the noise floor 0.4 sqrt(K_eff / N), K_eff <= K). Exact checks build the
full transition matrix from ``flip_probabilities()`` and tie it to ``step()`` statistically.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore import IsingPosterior, make_sampler, uniform_start
from lsbcore import exact as exact_chain
from lsbcore.samplers.registry import REGISTRY, SAMPLERS

# the pairwise-kernel samplers (the samplers on any target: test_every_pair.py)
EXACT_SAMPLERS = [
    name for name in SAMPLERS if name != "learned" and not REGISTRY[name].batched_only
]
# the samplers whose step is one proposed flip (they expose flip_probabilities)
SINGLE_SITE = [name for name in EXACT_SAMPLERS if REGISTRY[name].move == "site"]
FIXED_LB = ["barker", "sqrt", "min", "max"]
BOUNDARIES = ("free", "periodic")
# lambda per boundary on 3x3: the 3x3 torus has 18 edges (4 per site) against 12 on the free
# lattice, so lambda = 0.6 there makes the posterior bimodal with rare switches; 0.3 keeps the
# coupling clearly on while letting 2000 chains mix within the run.
LAM_3X3 = {"free": 0.6, "periodic": 0.3}
# the 3x3 runs: chains (independent, random starts), burn-in, thinning, thinned draws per chain.
# The uniform-site baselines move less per step (acceptance ~0.2 against ~0.6) but a step costs a
# third: they are thinned 3x more, which keeps their draws as nearly independent as the others'.
CHAINS, BURN_IN, THIN, DRAWS = 2000, 100, 6, 60
THIN_BASELINES = 18

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(autouse=True, params=["compiled", "torch"])
def backend(request, monkeypatch):
    """Every check runs on both paths: the compiled CPU kernels (frozen steps) and the torch
    steps (what CUDA runs, and every learning step)."""
    from conftest import default_backend

    default_backend(monkeypatch, request.param)
    return request.param


def build(name, target, n_chains, seed=0, x0=None, learn_steps=40, **options):
    """A sampler; learnable ones first learn on the target, and are returned frozen."""
    sampler = make_sampler(name, target, n_chains, seed=seed, x0=x0, **options)
    if sampler.learnable and learn_steps:
        sampler.step(learn_steps, learn=True)
    return sampler


def learned_on(name, target, seed=0, learn_steps=60):
    """The balancing function of ``name`` after learning on ``target`` (None if fixed)."""
    if name not in ("lsb1", "lsb2"):
        return None
    sampler = make_sampler(name, target, 16, seed=seed)
    sampler.step(learn_steps, learn=True)
    assert not sampler.learning_failed
    return sampler.balancing


def sampler_at(name, target, x0, balancing=None, seed=0):
    """A sampler with one chain per row of ``x0``; learned functions go through "learned"."""
    if balancing is not None:
        return make_sampler("learned", target, x0.shape[0], seed=seed, x0=x0, balancing=balancing)
    return make_sampler(name, target, x0.shape[0], seed=seed, x0=x0)


# ------------------------------------------------------------------------------ TV checks
@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_sampler_visits_states_with_the_exact_posterior_probabilities(name, boundary, exact):
    target = IsingPosterior(exact.random_alpha((3, 3), 0.5, seed=1), LAM_3X3[boundary], boundary)
    p = exact.exact_posterior(target)  # 512 states
    sampler = build(name, target, CHAINS, seed=3, learn_steps=30)
    if sampler.learnable:
        before = [q.detach().clone() for q in sampler.balancing.parameters()]
    thin = THIN_BASELINES if name in ("gibbs", "metropolis") else THIN
    burn_in = BURN_IN
    if REGISTRY[name].move == "sweep":  # a step is a sweep of all 9 sites
        burn_in, thin = BURN_IN // 9, 1
    counts = exact.histogram(sampler, burn_in, thin, DRAWS)
    if sampler.learnable:  # the tested chain was frozen: step() alone never learns
        for q, old in zip(sampler.balancing.parameters(), before, strict=True):
            assert torch.equal(q.detach(), old)
    distance = exact.tv(p, counts)
    # N = 1.2e5 draws; threshold 0.039 (free, K_eff = 127 of 512), 0.053 (periodic, K_eff = 236)
    threshold = exact.tv_threshold(p, CHAINS * DRAWS)
    print(f"{name} {boundary}: TV {distance:.4f}, threshold {threshold:.4f}")
    assert distance < threshold, f"TV {distance:.4f} >= {threshold:.4f}"


@pytest.mark.parametrize("name", ["sqrt", "gibbs", "lsb1"])
def test_each_chain_samples_its_own_alpha_image(name, exact):
    """alpha [B, H, W]: the two halves of the batch have different images and posteriors."""
    chains, height, width = 2000, 2, 3
    first = exact.random_alpha((height, width), 0.8, seed=21)
    second = exact.random_alpha((height, width), 0.8, seed=22)
    alpha = torch.cat([first.expand(chains // 2, -1, -1), second.expand(chains // 2, -1, -1)])
    target = IsingPosterior(alpha, 0.5, "free")
    sampler = build(name, target, chains, seed=4, learn_steps=20)
    halves = [slice(0, chains // 2), slice(chains // 2, chains)]
    counts = [np.zeros(64), np.zeros(64)]
    sampler.step(60)
    draws = 40
    for _ in range(draws):
        sampler.step(5)
        codes = exact.state_codes(sampler.x)
        for half, c in zip(halves, counts, strict=True):
            c += np.bincount(codes[half].numpy(), minlength=64)
    p_first, p_second = exact.exact_posterior(target, 0), exact.exact_posterior(target, chains - 1)
    assert exact.tv(p_first, p_second) > 0.3  # the two posteriors really differ
    for p, c in zip((p_first, p_second), counts, strict=True):
        distance, threshold = exact.tv(p, c), exact.tv_threshold(p, chains // 2 * draws)
        print(f"{name} per-chain alpha: TV {distance:.4f}, threshold {threshold:.4f}")
        assert distance < threshold


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_the_tv_check_would_catch_a_missing_mh_correction(boundary, exact):
    """Power of the TV test: without the acceptance step a locally balanced sampler would be
    the proposal chain Q alone. Its exact stationary law (from ``proposal_log_probs``) is far
    from the posterior, much farther than the threshold used above."""
    target = IsingPosterior(exact.random_alpha((3, 3), 0.5, seed=1), LAM_3X3[boundary], boundary)
    p = exact.exact_posterior(target)
    threshold = exact.tv_threshold(p, CHAINS * DRAWS)
    states = exact.all_states(3, 3)
    rows = np.arange(len(p))
    for name in FIXED_LB:
        sampler = make_sampler(name, target, len(p), x0=states)
        q = torch.exp(sampler.proposal_log_probs()).reshape(len(p), -1).numpy()
        np.testing.assert_allclose(q.sum(1), 1.0, rtol=0, atol=1e-12)
        chain = np.zeros((len(p), len(p)))
        for i in range(9):
            chain[rows, rows ^ (1 << i)] = q[:, i]
        stationary = exact_chain.stationary_vector(chain)
        distance = exact.tv(p, stationary)
        print(f"{name} {boundary} without MH: TV {distance:.4f}, threshold {threshold:.4f}")
        assert distance > max(0.1, 2 * threshold), name


# ------------------------------------------------------------------------------ exact matrix
def brute_flip_probabilities(name, balancing, target, states) -> np.ndarray:
    """``T(x -> x^i)`` straight from the definitions, every Z summed over all sites."""
    n, d = states.shape[0], target.n_sites
    s = target.flip_log_ratios(states).reshape(n, d)
    if name == "gibbs":
        return (torch.sigmoid(s) / d).numpy()
    if name == "metropolis":
        return (torch.exp(s.clamp(max=0.0)) / d).numpy()
    with torch.no_grad():
        log_g = balancing.log_g(s)
        log_z = torch.logsumexp(log_g, 1)
        out = torch.zeros(n, d, dtype=torch.float64)
        for i in range(d):
            flipped = states.reshape(n, d).clone()
            flipped[:, i] *= -1
            s_new = target.flip_log_ratios(flipped.view_as(states)).reshape(n, d)
            log_z_new = torch.logsumexp(balancing.log_g(s_new), 1)
            out[:, i] = torch.exp(log_g[:, i] - torch.maximum(log_z, log_z_new))
    return out.numpy()


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("shape", [(2, 2), (2, 3)])
@pytest.mark.parametrize("name", SINGLE_SITE)
def test_transition_matrix_satisfies_detailed_balance(name, shape, boundary, exact):
    target = IsingPosterior(exact.random_alpha(shape, 0.7, seed=5), 0.6, boundary)
    p = exact.exact_posterior(target)
    states = exact.all_states(*shape)
    balancing = learned_on(name, target)
    sampler = sampler_at(name, target, states, balancing)
    fp = sampler.flip_probabilities()
    assert fp.shape == states.shape and fp.dtype == torch.float64
    fp_np = fp.reshape(len(p), -1).numpy()
    assert np.isfinite(fp_np).all() and (fp_np >= 0).all()
    assert (fp_np.sum(1) <= 1.0 + 1e-12).all()

    # the same numbers straight from the definitions (Z of x and of x' summed over all sites)
    reference = brute_flip_probabilities(name, sampler_balancing(sampler), target, states)
    np.testing.assert_allclose(fp_np, reference, rtol=1e-10, atol=1e-300)

    t = exact.transition_matrix(fp)
    # the library's matrix (lsbcore.exact, a frozen copy of the learned g) is this chain's
    np.testing.assert_allclose(
        exact_chain.transition_matrix(target, name, balancing), t, rtol=1e-10, atol=1e-15
    )
    flow = p[:, None] * t
    off = ~np.eye(len(p), dtype=bool)
    scale = np.maximum(flow, flow.T)[off]
    assert (np.abs(flow - flow.T)[off] <= 1e-10 * scale).all(), "detailed balance fails"
    np.testing.assert_allclose(p @ t, p, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(exact_chain.stationary_vector(t), p, rtol=1e-8, atol=1e-12)


def sampler_balancing(sampler):
    return getattr(sampler, "balancing", None)


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("name", SINGLE_SITE)
def test_flip_probabilities_are_what_step_does(name, boundary, exact):
    """From one state, many one-step chains: the frequency of each flipped site (and of no flip)
    matches ``flip_probabilities`` within 5 binomial standard deviations, so the exact matrix
    above is the matrix of the chain ``step()`` runs."""
    shape = (2, 3)
    target = IsingPosterior(exact.random_alpha(shape, 0.7, seed=6), 0.6, boundary)
    balancing = learned_on(name, target)
    start = exact.all_states(*shape)[0b011010]
    per_run, runs = 15_000, 2
    n = per_run * runs
    counts = np.zeros(7)
    for seed in range(runs):
        x0 = start.expand(per_run, *shape).clone()
        sampler = sampler_at(name, target, x0, balancing, seed=seed)
        if seed == 0:
            expected = sampler.flip_probabilities()[0].reshape(-1).numpy()
            assert torch.allclose(
                sampler.flip_probabilities(), sampler.flip_probabilities()[:1].expand_as(x0)
            )
        sampler.step(1)
        changed = (sampler.x != x0).reshape(per_run, -1)
        assert (changed.sum(1) <= 1).all(), "a step flips at most one site"
        counts[:6] += changed.sum(0).numpy()
        counts[6] += int((changed.sum(1) == 0).sum())
        assert sampler.accept_rate == pytest.approx(changed.any(1).double().mean().item())
    probs = np.append(expected, 1.0 - expected.sum())
    sd = np.sqrt(probs * (1 - probs) / n)
    np.testing.assert_array_less(np.abs(counts / n - probs), 5 * sd + 1e-9)


# ------------------------------------------------------------------------------ extremes
def extreme_alpha(shape, boundary, lam, seed, free_sites=(), free_field=(0.4, -0.3)):
    """|alpha| in [1e3, 1e4] with random signs (sites pinned to sign(alpha)), except
    ``free_sites`` whose alpha cancels the pull of their pinned neighbours up to a moderate
    ``free_field``: the posterior puts all its mass on the 2^len(free_sites) states that agree
    with the pinned pattern, with nontrivial probabilities."""
    generator = torch.Generator().manual_seed(seed)
    height, width = shape
    sign = torch.where(torch.rand(shape, generator=generator) < 0.5, -1.0, 1.0).double()
    alpha = sign * 10 ** (3 + torch.rand(shape, generator=generator, dtype=torch.float64))
    pinned_site = next(i for i in range(height * width) if i not in free_sites)
    alpha.view(-1)[pinned_site] = 1e4 * sign.view(-1)[pinned_site]  # the extreme end itself
    probe = IsingPosterior(torch.zeros(shape, dtype=torch.float64), lam, boundary)
    pinned = torch.sign(alpha).unsqueeze(0)
    pull = probe.local_field(pinned)[0]  # lam * sum_j m_ij x_j under the pinned pattern
    for site, field in zip(free_sites, free_field, strict=False):
        r, c = divmod(site, width)
        alpha[r, c] = field - pull[r, c]
    return alpha


def assert_all_finite(sampler):
    x = sampler.x
    assert bool(((x == 1) | (x == -1)).all())
    assert bool(torch.isfinite(sampler.log_p).all())
    assert sampler.invariant_error() < 1e-9
    if hasattr(sampler, "proposal_log_probs"):
        log_q = sampler.proposal_log_probs()
        assert bool(torch.isfinite(log_q).all())
        torch.testing.assert_close(
            torch.logsumexp(log_q.reshape(x.shape[0], -1), 1),
            torch.zeros(x.shape[0], dtype=torch.float64),
        )
    if sampler.learnable:
        assert not sampler.learning_failed
        for q in sampler.balancing.parameters():
            assert bool(torch.isfinite(q).all())
        assert math.isfinite(sampler.eta)
        history = sampler.history.arrays()
        assert len(history["loss"]) > 0 and np.isfinite(history["loss"]).all()


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_extreme_parameters_keep_every_sampler_finite_and_exact(name, boundary, exact):
    shape, lam = (2, 3), 20.0
    # sites 0 and 5 are not neighbours on the 2x3 lattice, free or periodic
    alpha = extreme_alpha(shape, boundary, lam, seed=8, free_sites=(0, 5))
    assert alpha.abs().max() == 1e4
    target = IsingPosterior(alpha, lam, boundary)
    p = exact.exact_posterior(target)
    assert np.sort(p)[-4:].sum() > 1 - 1e-12 and np.sort(p)[-4] > 0.05
    chains, thin, draws = 300, 5, 30
    sampler = build(name, target, chains, seed=2, learn_steps=30)
    counts = exact.histogram(sampler, 40, thin, draws)
    assert_all_finite(sampler)
    distance, threshold = exact.tv(p, counts), exact.tv_threshold(p, chains * draws)
    print(f"{name} {boundary} extreme: TV {distance:.4f}, threshold {threshold:.4f}")
    assert distance < threshold


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("name", SINGLE_SITE)
def test_extreme_parameters_give_finite_flip_probabilities(name, boundary, exact):
    """The exact transition probabilities stay in [0, 1] (the app's slow-motion step shows
    them); a flip whose g overflows has probability 0, not NaN."""
    shape, lam = (2, 3), 20.0
    target = IsingPosterior(extreme_alpha(shape, boundary, lam, seed=8), lam, boundary)
    sampler = build(name, target, 64, seed=2, learn_steps=20)
    sampler.step(200)
    fp = sampler.flip_probabilities().reshape(64, -1)
    assert bool(torch.isfinite(fp).all()), "flip_probabilities has NaN/inf"
    assert bool((fp >= 0).all()) and bool((fp.sum(1) <= 1 + 1e-12).all())


@pytest.mark.parametrize("boundary", BOUNDARIES)
@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_extreme_parameters_on_3x3_concentrate_on_the_mode(name, boundary):
    shape, lam = (3, 3), 20.0
    alpha = extreme_alpha(shape, boundary, lam, seed=9)
    target = IsingPosterior(alpha, lam, boundary)
    sampler = build(name, target, 50, seed=1, learn_steps=20)
    sampler.step(200)
    assert_all_finite(sampler)
    mode = torch.sign(alpha)  # |alpha| >= 1e3 outweighs any coupling (at most 4 * 20)
    assert bool((sampler.x == mode).all()), "every chain sits at the (point-mass) mode"


@pytest.mark.parametrize("name", SINGLE_SITE)
def test_strong_coupling_with_a_weak_field_stays_finite(name, exact):
    target = IsingPosterior(exact.random_alpha((5, 5), 1.0, seed=3), 20.0, "free")
    sampler = build(name, target, 16, seed=1, learn_steps=20)
    sampler.step(500)
    # the transition probabilities computed from the cache equal a full recompute
    reference = brute_flip_probabilities(name, sampler_balancing(sampler), target, sampler.x)
    np.testing.assert_allclose(
        sampler.flip_probabilities().reshape(16, -1).numpy(), reference, rtol=1e-9, atol=1e-300
    )
    assert_all_finite(sampler)


# ------------------------------------------------------------------------------ cache drift
@pytest.mark.parametrize(
    ("shape", "boundary"), [((16, 16), "free"), ((12, 12), "periodic")], ids=["16x16", "12x12"]
)
@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_cached_state_equals_a_full_recompute_after_10000_steps(name, shape, boundary, exact):
    """resync_every = 1e9: only the incremental updates run, and they stay exact."""
    target = IsingPosterior(exact.random_alpha(shape, 1.0, seed=4), 0.4, boundary)
    sampler = make_sampler(name, target, 4, seed=1, resync_every=10**9)
    evals_at_start = sampler.n_target_evals
    if sampler.learnable:
        sampler.step(50, learn=True)
        assert sampler.invariant_error() < 1e-9  # after learning too
    x_before = sampler.x.clone()
    # a sweep updates every site: in 500 sweeps each cached log-ratio changes 500-750 times,
    # more often than in 10,000 single flips (100-300 times on 144-256 sites)
    steps = 500 if sampler.sites_per_step > 1 else 10_000
    sampler.step(steps)
    # no resync ran: only the neighbourhoods of each step were evaluated (a learning step also
    # evaluates the uniformly flipped site's neighbourhood)
    k = sampler.evals_per_step  # a sweep: every site's conditional once
    learned = 2 * k * 50 if sampler.learnable else 0
    assert sampler.n_target_evals == evals_at_start + k * steps + learned
    assert sampler.accept_rate > 0.1 and not torch.equal(sampler.x, x_before)
    assert sampler.invariant_error() < 1e-9
    x = sampler.x
    assert bool(((x == 1) | (x == -1)).all())


# ------------------------------------------------------------------------------ determinism
def run(name, target, seed, x0, chunks, learn=False):
    sampler = make_sampler(name, target, x0.shape[0], seed=seed, x0=x0)
    if sampler.learnable:
        for n in chunks:
            sampler.step(n, learn=True)
    for n in chunks:
        sampler.step(n)
    return sampler


def params_of(sampler):
    if not sampler.learnable:
        return []
    return [q.detach().clone() for q in sampler.balancing.parameters()] + [sampler.eta_raw]


@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_same_seed_gives_the_same_chain_and_other_seeds_differ(name, exact):
    target = IsingPosterior(exact.random_alpha((5, 5), 0.5, seed=2), 0.5, "periodic")
    x0 = uniform_start((5, 5), 8, seed=1)
    a = run(name, target, 7, x0, [40])
    b = run(name, target, 7, x0, [40])
    c = run(name, target, 8, x0, [40])
    assert torch.equal(a.x, b.x)
    assert a.n_target_evals == b.n_target_evals and a.accept_rate == b.accept_rate
    for pa, pb in zip(params_of(a), params_of(b), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.x, c.x)


@pytest.mark.parametrize("name", EXACT_SAMPLERS)
def test_chunking_the_steps_does_not_change_the_chain(name, exact):
    target = IsingPosterior(exact.random_alpha((4, 5), 0.5, seed=2), 0.5, "free")
    x0 = uniform_start((4, 5), 6, seed=1)
    whole = run(name, target, 3, x0, [30])
    pieces = run(name, target, 3, x0, [10, 10, 10])
    steps = run(name, target, 3, x0, [1] * 30)
    for other in (pieces, steps):
        assert torch.equal(whole.x, other.x)
        assert whole.n_steps == other.n_steps == (60 if whole.learnable else 30)
        assert whole.n_target_evals == other.n_target_evals
        for pa, pb in zip(params_of(whole), params_of(other), strict=True):
            assert torch.equal(pa, pb)
