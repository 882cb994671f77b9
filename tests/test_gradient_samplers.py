"""The gradient samplers (gwg, pas, dmala) on any differentiable target, against exact answers:
proposals by hand and by brute-force frequencies, one-step laws by enumeration, detailed balance,
runs in TV against the enumerated target."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lsbcore
from lsbcore.exact import all_states, exact_distribution, spectral_gap, state_codes
from lsbcore.exact import transition_matrix as exact_matrix
from lsbcore.samplers.batched import refusal
from lsbcore.samplers.gradient.dmala import DiscreteLangevin
from lsbcore.samplers.gradient.gwg import GibbsWithGradients, enumerated_states, value_and_grad
from lsbcore.samplers.gradient.pas import PathAuxiliarySampler, path_log_prob
from lsbcore.targets.base import Target

pytestmark = pytest.mark.usefixtures("single_thread")  # tiny tensors: threads only cost

# Frequencies from N draws: |freq - p| <= Z sqrt(p (1 - p) / N) + 1 / N fails with probability
# about 6e-7 per cell at Z = 5 (seeded: the outcome is fixed, the margin says why it is safe).
Z = 5.0


class SoftplusCubic(Target):
    """A non-pairwise target on ``n`` spins, written in differentiable torch operations:
    ``log p~(x) = b.x + sum_j softplus(W_j.x + c_j) + sum_k t_k x_i x_j x_l`` (an RBM-like
    term and three-site interactions)."""

    provides = frozenset({"gradient"})

    def __init__(self, n: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.n_sites, self.shape = n, (n,)
        self.b = 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
        self.W = 0.7 * torch.randn(3, n, generator=g, dtype=torch.float64)
        self.c = 0.5 * torch.randn(3, generator=g, dtype=torch.float64)
        self.triples = torch.tensor([[i, (i + 1) % n, (i + 2) % n] for i in range(n)])
        self.t = 0.6 * torch.randn(n, generator=g, dtype=torch.float64)

    def log_prob(self, x):
        x = self._flat(x)
        cubic = (self.t * x[:, self.triples].prod(-1)).sum(1)
        return x @ self.b + torch.nn.functional.softplus(x @ self.W.T + self.c).sum(1) + cubic

    def grad_by_hand(self, x: np.ndarray) -> np.ndarray:
        """The gradient of ``log p~`` at one state, term by term in numpy."""
        b, w, c, t = (v.numpy() for v in (self.b, self.W, self.c, self.t))
        grad = b + w.T @ (1.0 / (1.0 + np.exp(-(w @ x + c))))
        for k, (i, j, m) in enumerate(self.triples.tolist()):
            grad[i] += t[k] * x[j] * x[m]
            grad[j] += t[k] * x[i] * x[m]
            grad[m] += t[k] * x[i] * x[j]
        return grad


class OneZeroState(SoftplusCubic):
    """``SoftplusCubic`` with state code ``FORBIDDEN`` of probability zero (still differentiable
    everywhere else)."""

    FORBIDDEN = 5

    def log_prob(self, x):
        flat = self._flat(x)
        code = ((flat > 0).long() << torch.arange(self.n_sites)).sum(1)
        return torch.where(code == self.FORBIDDEN, -torch.inf, super().log_prob(flat))


class NoGradient(SoftplusCubic):
    provides = frozenset()


def pairwise_mrf(n: int = 4, seed: int = 1):
    rng = np.random.default_rng(seed)
    j = np.triu(0.6 * rng.normal(size=(n, n)), 1)
    return lsbcore.PairwiseMRF(0.4 * rng.normal(size=n), j + j.T)


def small_rbm(n: int = 4, seed: int = 1):
    return lsbcore.RBM.random(n, 3, seed=seed, scale=1.0)


SAMPLERS = {
    "gwg": (GibbsWithGradients, {}),
    "pas": (PathAuxiliarySampler, {"path_length": 2}),
    "dmala": (DiscreteLangevin, {"step_size": 0.4}),
}


def one_step_law(sampler) -> np.ndarray:
    """``[B, 2^n]``: the sampler's exact law of the next state from each chain's state."""
    if isinstance(sampler, GibbsWithGradients):
        codes = state_codes(sampler.x).numpy()
        return flip_matrix_rows(sampler.flip_probabilities(), codes)
    return sampler.transition_probabilities().numpy()


def flip_matrix_rows(flip_probs: torch.Tensor, codes: np.ndarray) -> np.ndarray:
    n = flip_probs.shape[1]
    rows = np.zeros((len(codes), 2**n))
    fp = flip_probs.numpy()
    rows[np.arange(len(codes))[:, None], codes[:, None] ^ (1 << np.arange(n))] = fp
    rows[np.arange(len(codes)), codes] = 1.0 - fp.sum(1)
    return rows


def exact_chain(name: str, target, **options) -> np.ndarray:
    """The full ``[2^n, 2^n]`` matrix: one chain per state."""
    cls, defaults = SAMPLERS[name]
    states = all_states(target.n_sites)
    sampler = cls(target, len(states), x0=states, **{**defaults, **options})
    return one_step_law(sampler)


def assert_frequencies(counts: np.ndarray, p: np.ndarray, n: int) -> None:
    freq = counts / n
    margin = Z * np.sqrt(p * (1 - p) / n) + 1.0 / n
    assert (np.abs(freq - p) <= margin).all(), np.c_[freq, p, margin]


# ----------------------------------------------------------------- the test target itself
def test_value_and_grad_gives_the_hand_computed_gradient_and_log_prob():
    target = SoftplusCubic(5)
    x = all_states(5)[[3, 17, 30]]
    log_p, grad = value_and_grad(target, x)
    assert torch.allclose(log_p, target.log_prob(x), rtol=0, atol=1e-13)
    hand = np.stack([target.grad_by_hand(row) for row in x.numpy()])
    assert np.allclose(grad.numpy(), hand, rtol=0, atol=1e-12)


def test_enumerated_states_follow_the_exact_module_codes():
    assert torch.equal(enumerated_states(5), all_states(5))


# ----------------------------------------------------------------- proposals against brute force
def test_gwg_proposal_is_the_softmax_of_half_the_first_order_ratios():
    target = SoftplusCubic(5)
    x = all_states(5)[11]
    sampler = GibbsWithGradients(target, 1, x0=x)
    s_tilde = -2.0 * x.numpy() * target.grad_by_hand(x.numpy())
    by_hand = np.exp(s_tilde / 2) / np.exp(s_tilde / 2).sum()
    assert np.allclose(torch.exp(sampler.proposal_log_probs())[0].numpy(), by_hand, atol=1e-14)


def test_gwg_proposed_sites_follow_the_proposal():
    target, n_draws = SoftplusCubic(5), 40_000
    sampler = GibbsWithGradients(target, n_draws, x0=all_states(5)[11], seed=3)
    q = torch.exp(sampler.proposal_log_probs()[0]).numpy()
    sampler.step(1)
    counts = np.bincount(sampler.last_proposal["site"].numpy(), minlength=5)
    assert_frequencies(counts, q, n_draws)


def test_pas_path_probability_is_the_product_of_its_flips_by_hand():
    target = SoftplusCubic(4)
    x = all_states(4)[6].numpy()
    a = -x * target.grad_by_hand(x)  # half the first-order ratios at the start
    path = [2, 0, 2, 3]
    sigma, log_q = np.ones(4), 0.0
    for i in path:  # each flip from the gradient at the start, signs turned by earlier flips
        weights = np.exp(sigma * a)
        log_q += math.log(weights[i] / weights.sum())
        sigma[i] = -sigma[i]
    sites = torch.tensor([path + [1, 1]])  # two inactive slots at the end
    active = torch.tensor([[True] * 4 + [False] * 2])
    got = path_log_prob(torch.from_numpy(a).unsqueeze(0), sites, active)
    assert abs(float(got) - log_q) < 1e-13


def test_pas_ordered_paths_follow_their_path_probabilities():
    target, n_draws = SoftplusCubic(4), 60_000
    x = all_states(4)[6]
    sampler = PathAuxiliarySampler(target, n_draws, path_length=2, x0=x, seed=5)
    a = -x * target.grad_log_prob(x.unsqueeze(0))[0]
    sampler.step(1)
    last = sampler.last_proposal
    lengths = last["path_length"].numpy()
    assert_frequencies(np.bincount(lengths, minlength=4)[1:], np.full(3, 1 / 3), n_draws)
    two = last["path_sites"][torch.from_numpy(lengths == 2)][:, :2].numpy()  # paths of 2 flips
    counts = np.bincount(two[:, 0] * 4 + two[:, 1], minlength=16)
    pairs = torch.tensor([[i, j] for i in range(4) for j in range(4)])
    p = torch.exp(path_log_prob(a.expand(16, 4), pairs, torch.ones(16, 2, dtype=torch.bool)))
    assert abs(float(p.sum()) - 1.0) < 1e-12
    assert_frequencies(counts, p.numpy(), len(two))


def test_pas_scores_its_drawn_paths_as_path_log_prob_does():
    target = SoftplusCubic(7)
    sampler = PathAuxiliarySampler(target, 200, path_length=4, seed=3)
    x = sampler.x.clone()
    a = -x * target.grad_log_prob(x)  # half the first-order ratios at the paths' start
    sampler.step(1)
    last = sampler.last_proposal
    active = torch.arange(sampler.max_length) < last["path_length"].unsqueeze(1)
    expected = path_log_prob(a, last["path_sites"], active)
    assert torch.allclose(last["path_log_prob"], expected, rtol=0, atol=1e-12)


def test_dmala_flips_each_site_with_the_langevin_probability():
    target, n_draws, alpha = SoftplusCubic(5), 40_000, 0.4
    x = all_states(5)[19]
    sampler = DiscreteLangevin(target, n_draws, step_size=alpha, x0=x, seed=2)
    a = -x.numpy() * target.grad_by_hand(x.numpy())
    by_hand = 1.0 / (1.0 + np.exp(-(a - 1.0 / (2 * alpha))))
    assert np.allclose(torch.exp(sampler.flip_log_probs()[0]).numpy(), by_hand, atol=1e-14)
    sampler.step(1)
    counts = sampler.last_proposal["flips"].sum(0).numpy()
    assert_frequencies(counts, by_hand, n_draws)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_one_step_from_a_state_follows_the_exact_one_step_law(name):
    target, n_draws = SoftplusCubic(4), 60_000
    cls, options = SAMPLERS[name]
    sampler = cls(target, n_draws, x0=all_states(4)[9], seed=7, **options)
    law = one_step_law(cls(target, 1, x0=all_states(4)[9], **options))[0]
    sampler.step(1)
    counts = np.bincount(state_codes(sampler.x).numpy(), minlength=16)
    assert_frequencies(counts, law, n_draws)


# ----------------------------------------------------------------- the exact chains
@pytest.mark.parametrize("make_target", [SoftplusCubic, pairwise_mrf, small_rbm])
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("gwg", {}),
        ("pas", {"path_length": 1}),
        ("pas", {"path_length": 3}),
        ("dmala", {"step_size": 0.2}),
        ("dmala", {"step_size": 2.0}),
    ],
)
def test_transition_matrix_is_stochastic_and_reversible(make_target, name, options):
    target = make_target(4)
    p = exact_chain(name, target, **options)
    pi = exact_distribution(target)
    assert p.min() >= -1e-15 and np.abs(p.sum(1) - 1).max() < 1e-13
    flow = pi[:, None] * p
    assert np.abs(flow - flow.T).max() < 1e-14  # detailed balance
    assert np.abs(pi @ p - pi).max() < 1e-14  # so pi is stationary
    assert (1 - np.diag(p)).min() > 1e-3  # every state moves: the checks are not vacuous
    assert spectral_gap(p, pi) > 1e-3  # and the chain is ergodic


def test_gwg_is_the_sqrt_locally_balanced_sampler_on_a_pairwise_model():
    target = pairwise_mrf(5, seed=4)
    assert np.abs(exact_chain("gwg", target) - exact_matrix(target, "sqrt")).max() < 1e-14


def test_gwg_moves_like_sqrt_on_a_pairwise_model_with_one_field_per_chain():
    rng = np.random.default_rng(8)
    j = np.triu(0.5 * rng.normal(size=(6, 6)), 1)
    target = lsbcore.PairwiseMRF(0.5 * rng.normal(size=(3, 6)), j + j.T)  # 3 fields
    x0 = all_states(6)[[5, 40, 63]]
    sqrt = lsbcore.make_sampler("sqrt", target, 3, x0=x0, backend="torch")
    gwg = GibbsWithGradients(target, 3, x0=x0)
    assert torch.allclose(gwg.flip_probabilities(), sqrt.flip_probabilities(), rtol=0, atol=1e-14)
    assert torch.allclose(gwg.proposal_log_probs(), sqrt.proposal_log_probs(), atol=1e-13)


def test_on_the_non_pairwise_target_the_first_order_proposal_is_not_the_exact_one():
    """The exactness checks above hold through the MH correction, not because s~ = s."""
    target = SoftplusCubic(4)
    states = all_states(4)
    _, grad = value_and_grad(target, states)
    s_tilde = -2 * states * grad
    assert (target.flip_log_ratios(states) - s_tilde).abs().max() > 0.05
    sampler = GibbsWithGradients(target, 16, x0=states)
    exact_sqrt = torch.log_softmax(target.flip_log_ratios(states) / 2, 1)
    assert (sampler.proposal_log_probs() - exact_sqrt).abs().max() > 0.01


def test_pas_with_paths_of_one_flip_is_gwg():
    target = SoftplusCubic(4)
    gwg = exact_chain("gwg", target)
    assert np.abs(exact_chain("pas", target, path_length=1) - gwg).max() < 1e-14


@pytest.mark.parametrize("make_target", [lambda: SoftplusCubic(4, seed=2), small_rbm])
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_a_run_matches_the_enumerated_target_in_total_variation(name, make_target):
    """Independent chains from the target's uniform start: the empirical law of their states
    after T steps is within TV(v P^T, pi) + E TV(empirical, v P^T) + sqrt(log(1e6) / (2N)) of
    pi (McDiarmid: one chain moves the empirical TV by at most 1/N), with probability 1 - 1e-6."""
    target, n_chains, steps = make_target(), 6000, 60
    cls, options = SAMPLERS[name]
    sampler = cls(target, n_chains, seed=11, **options)
    sampler.step(steps)
    pi = exact_distribution(target)
    law = np.full(16, 1 / 16) @ np.linalg.matrix_power(exact_chain(name, target), steps)
    mixing = 0.5 * np.abs(law - pi).sum()
    sampling = 0.5 * np.sqrt(law * (1 - law) / n_chains).sum()
    tolerance = mixing + sampling + math.sqrt(math.log(1e6) / (2 * n_chains))
    empirical = np.bincount(state_codes(sampler.x).numpy(), minlength=16) / n_chains
    assert mixing < 0.01  # the run is long enough that the bound is about sampling noise
    assert 0.5 * np.abs(empirical - pi).sum() < tolerance


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_a_state_of_zero_probability_is_never_entered(name):
    target = OneZeroState(4)
    allowed = [k for k in range(16) if k != OneZeroState.FORBIDDEN]
    cls, options = SAMPLERS[name]
    law = one_step_law(cls(target, len(allowed), x0=all_states(4)[allowed], **options))
    assert law[:, OneZeroState.FORBIDDEN].max() == 0.0
    assert np.abs(law.sum(1) - 1).max() < 1e-13 and law.min() >= -1e-15
    pi = exact_distribution(target)[allowed]
    flow = pi[:, None] * law[:, allowed]
    assert np.abs(flow - flow.T).max() < 1e-14
    sampler = cls(target, 500, x0=all_states(4)[allowed[3]], seed=1, **options)
    sampler.track_statistics()
    trace = torch.zeros(50, 500, 5, dtype=torch.float64)
    sampler.step(50, trace=trace)
    assert torch.isfinite(trace[:, :, 0]).all()  # log p~ of every visited state


# ----------------------------------------------------------------- bookkeeping
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_one_evaluation_per_step_and_caches_stay_exact(name):
    cls, options = SAMPLERS[name]
    sampler = cls(SoftplusCubic(8), 16, seed=1, resync_every=10**6, **options)
    before = sampler.n_target_evals
    sampler.step(2000)
    assert sampler.evals_per_step == 1
    assert sampler.n_target_evals - before == 2000
    assert sampler.n_accepted > 0
    assert sampler.invariant_error() < 1e-12


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_the_same_seed_gives_the_same_chains(name):
    cls, options = SAMPLERS[name]

    def run(seed):
        sampler = cls(SoftplusCubic(6), 8, seed=seed, **options)
        sampler.step(40)
        return sampler.x.clone()

    assert torch.equal(run(4), run(4))
    assert not torch.equal(run(4), run(5))


def test_trace_records_the_proposed_site_or_a_multi_site_move():
    trace = torch.zeros(3, 4, 5, dtype=torch.float64)
    gwg = GibbsWithGradients(SoftplusCubic(5), 4, seed=2)
    gwg.track_statistics()
    gwg.step(3, trace=trace)
    assert torch.equal(trace[-1, :, 4].long(), gwg.last_proposal["site"])
    pas = PathAuxiliarySampler(SoftplusCubic(5), 4, seed=2)
    pas.track_statistics()
    pas.step(3, trace=trace)
    assert (trace[:, :, 4] == -1).all()


# ----------------------------------------------------------------- refusals and validation
@pytest.mark.parametrize("name", list(SAMPLERS))
def test_a_target_without_a_gradient_is_refused_in_a_sentence(name):
    cls, options = SAMPLERS[name]
    target = NoGradient(4)
    with pytest.raises(ValueError) as err:
        cls(target, 2, **options)
    assert str(err.value) == refusal(name, target, ["gradient"])
    assert "needs a differentiable log p~ (a gradient)" in str(err.value)


@pytest.mark.parametrize("bad", [0, 65, 2.5, True, "3", None])
def test_path_length_is_validated(bad):
    with pytest.raises(ValueError, match="path_length must be an integer between 1 and 64"):
        PathAuxiliarySampler(SoftplusCubic(4), 2, path_length=bad)


@pytest.mark.parametrize("bad", [0, -0.1, 1e-4, 2e3, float("nan"), float("inf"), True, "0.2"])
def test_step_size_is_validated(bad):
    with pytest.raises(ValueError, match="step_size must be"):
        DiscreteLangevin(SoftplusCubic(4), 2, step_size=bad)


def test_exact_laws_refuse_targets_too_large_to_enumerate():
    for sampler in (
        PathAuxiliarySampler(SoftplusCubic(13), 2),
        DiscreteLangevin(SoftplusCubic(13), 2),
    ):
        with pytest.raises(ValueError, match="at most 12 sites"):
            sampler.transition_probabilities()
    with pytest.raises(ValueError, match="too many to enumerate"):
        PathAuxiliarySampler(SoftplusCubic(10), 2, path_length=8).transition_probabilities()


def test_other_arguments_are_validated_by_the_base():
    with pytest.raises(ValueError, match="n_chains"):
        GibbsWithGradients(SoftplusCubic(4), 0)
    with pytest.raises(ValueError, match="x0 must contain only"):
        DiscreteLangevin(SoftplusCubic(4), 1, x0=torch.zeros(4))
    with pytest.raises(ValueError, match="backend"):
        PathAuxiliarySampler(SoftplusCubic(4), 1, backend="compiled")
