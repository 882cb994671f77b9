"""The RBM target: its marginal, log-ratios, cache, gradient and Gibbs ground truth, checked
against sums over every hidden state, enumeration of every visible state and autograd."""

from __future__ import annotations

import math

import pytest
import torch

from lsbcore.exact.states import all_states
from lsbcore.targets import rbm as rbm_module
from lsbcore.targets.rbm import RANDOM_WEIGHT_STD, RBM, softplus
from tests.batched_support import UniformMetropolis

pytestmark = pytest.mark.usefixtures("single_thread")


def tiny_rbm(n_visible: int = 6, n_hidden: int = 5, seed: int = 0, scale: float = 1.0) -> RBM:
    """Weights large enough that the marginal is far from uniform and every term matters."""
    return RBM.random(n_visible, n_hidden, seed=seed, scale=scale)


def brute_force_log_prob(rbm: RBM, x: torch.Tensor) -> torch.Tensor:
    """``log sum_h exp(b.v + c.h + h.W v)`` over all ``2^m`` hidden states, from the joint."""
    v = 0.5 * (1.0 + x)
    h = 0.5 * (1.0 + all_states(rbm.n_hidden))  # [2^m, m] in {0, 1}
    joint = (v @ rbm.b_visible).unsqueeze(1) + h @ rbm.b_hidden + (v @ rbm.W.T) @ h.T
    return torch.logsumexp(joint, 1)


def exact_distribution(rbm: RBM) -> torch.Tensor:
    log_p = rbm.log_prob(all_states(rbm.n_visible))
    return torch.softmax(log_p, 0)


def codes(x: torch.Tensor) -> torch.Tensor:
    """State codes of ``lsbcore.exact.states``: bit ``i`` set where site ``i`` is +1."""
    return ((x > 0).long() << torch.arange(x.shape[1])).sum(1)


# ----------------------------------------------------------------- the marginal
def test_log_prob_is_the_sum_over_every_hidden_state():
    rbm = tiny_rbm()
    x = all_states(rbm.n_visible)
    assert torch.allclose(rbm.log_prob(x), brute_force_log_prob(rbm, x), rtol=0, atol=1e-12)


def test_softplus_is_exact_in_float64_where_torch_cuts_it_off():
    a = torch.tensor([-745.0, -40.0, -1.0, 0.0, 1e-8, 3.0, 25.0, 40.0, 700.0], dtype=torch.float64)
    expected = [
        math.log1p(math.exp(v)) if v < 30 else v + math.log1p(math.exp(-v)) for v in a.tolist()
    ]
    got = softplus(a)
    for g, e in zip(got.tolist(), expected, strict=True):
        assert g == pytest.approx(e, rel=1e-15, abs=1e-300)
    # torch's softplus returns a itself above 20: an error of e^-25 here, which ours has not
    assert softplus(torch.tensor([25.0], dtype=torch.float64)).item() - 25.0 > 1e-11


def test_flip_log_ratios_are_log_prob_differences_at_every_state():
    rbm = tiny_rbm()
    x = all_states(rbm.n_visible)
    log_p = rbm.log_prob(x)
    s = rbm.flip_log_ratios(x)
    for i in range(rbm.n_visible):
        flipped = x.clone()
        flipped[:, i] *= -1
        assert torch.allclose(s[:, i], rbm.log_prob(flipped) - log_p, rtol=0, atol=1e-12)


def test_flip_log_ratios_in_blocks_equal_one_pass(monkeypatch):
    """Scoring the sites in blocks (to bound memory) changes nothing."""
    rbm = tiny_rbm(12, 7, seed=3)
    x = rbm.start(9, torch.Generator().manual_seed(0))
    whole = rbm.flip_log_ratios(x)
    monkeypatch.setattr("lsbcore.targets.rbm.FLIP_BLOCK", 9 * 7 * 5)  # blocks of 5 sites
    assert torch.equal(rbm.flip_log_ratios(x), whole)


def test_log_ratio_and_conditional_log_odds_follow_log_prob():
    rbm = tiny_rbm(8, 4, seed=1)
    g = torch.Generator().manual_seed(1)
    x = rbm.start(50, g)
    flips = torch.rand(50, 8, generator=g) < 0.4  # any number of sites, zero included
    x_new = torch.where(flips, -x, x)
    assert torch.allclose(
        rbm.log_ratio(x, x_new), rbm.log_prob(x_new) - rbm.log_prob(x), rtol=0, atol=1e-12
    )
    odds = rbm.conditional_log_odds(x)
    for i in range(8):
        up, down = x.clone(), x.clone()
        up[:, i], down[:, i] = 1.0, -1.0
        assert torch.allclose(odds[:, i], rbm.log_prob(up) - rbm.log_prob(down), atol=1e-12)


def test_states_in_the_drawing_layout_keep_it():
    rbm = RBM.random(6, 3, seed=2)
    laid_out = RBM(rbm.W, rbm.b_visible, rbm.b_hidden, shape=(2, 3))
    x = rbm.start(4, torch.Generator().manual_seed(0))
    assert laid_out.flip_log_ratios(x.view(4, 2, 3)).shape == (4, 2, 3)
    assert torch.equal(
        laid_out.flip_log_ratios(x.view(4, 2, 3)).reshape(4, 6), rbm.flip_log_ratios(x)
    )
    assert torch.equal(laid_out.log_prob(x.view(4, 2, 3)), rbm.log_prob(x))


# ----------------------------------------------------------------- incremental updates
def test_cached_pre_activations_follow_any_moves_to_1e_12():
    rbm = tiny_rbm(20, 9, seed=4, scale=0.7)
    g = torch.Generator().manual_seed(4)
    x = rbm.start(16, g)
    cache, s = rbm.ratio_cache(x), rbm.flip_log_ratios(x)
    assert rbm.offers("incremental")
    for step in range(300):
        if step % 2:  # one site per chain
            i = torch.randint(0, 20, (16,), generator=g)
            x_new = x.clone()
            x_new[torch.arange(16), i] *= -1
        else:  # 0 to about 6 sites per chain, some chains unchanged
            x_new = torch.where(torch.rand(16, 20, generator=g) < 0.15, -x, x)
        stays = (x_new == x).all(1)
        s_new, cache_new = rbm.flip_log_ratios_after(x, x_new, s, cache)
        assert torch.equal(cache_new[stays], cache[stays])  # exact zeros added
        x, s, cache = x_new, s_new, cache_new
        exact_a, exact_s = rbm.ratio_cache(x), rbm.flip_log_ratios(x)
        assert (cache - exact_a).abs().max() <= 1e-12 * max(1.0, exact_a.abs().max())
        assert (s - exact_s).abs().max() <= 1e-12 * max(1.0, exact_s.abs().max())


def test_a_sampler_keeps_the_rbm_cache_exact_over_thousands_of_steps():
    rbm = tiny_rbm(12, 6, seed=5, scale=0.5)
    sampler = UniformMetropolis(rbm, n_chains=64, seed=0, resync_every=10**6)
    sampler.step(3000)
    assert sampler.n_accepted > 1000  # the chains moved
    assert sampler.invariant_error() < 1e-11


# ----------------------------------------------------------------- gradient
def test_gradient_is_the_derivative_of_the_extension():
    rbm = tiny_rbm(10, 6, seed=6)
    g = torch.Generator().manual_seed(6)
    x_real = 2 * torch.rand(7, 10, generator=g, dtype=torch.float64) - 1
    with torch.enable_grad():
        leaf = x_real.clone().requires_grad_(True)
        (auto,) = torch.autograd.grad(rbm.log_prob(leaf).sum(), leaf)
    assert torch.allclose(rbm.grad_log_prob(x_real), auto, rtol=0, atol=1e-12)
    corners = rbm.start(5, g)
    grad = rbm.grad_log_prob(corners)
    h = 1e-5
    for i in range(10):
        e = torch.zeros(10, dtype=torch.float64)
        e[i] = h
        central = (rbm.log_prob(corners + e) - rbm.log_prob(corners - e)) / (2 * h)
        assert torch.allclose(grad[:, i], central, rtol=1e-7, atol=1e-8)


# ----------------------------------------------------------------- the Gibbs ground truth
def gibbs_kernel(rbm: RBM) -> torch.Tensor:
    """The exact v -> v' transition matrix of one alternating sweep, ``[2^n, 2^n]``."""
    v = 0.5 * (1.0 + all_states(rbm.n_visible))
    h = 0.5 * (1.0 + all_states(rbm.n_hidden))
    p_h1 = torch.sigmoid(v @ rbm.W.T + rbm.b_hidden)  # [2^n, m]
    p_h = torch.exp((h.unsqueeze(0) * p_h1.unsqueeze(1).log()
                     + (1 - h.unsqueeze(0)) * (-p_h1).log1p().unsqueeze(1)).sum(2))  # fmt: skip
    p_v1 = torch.sigmoid(h @ rbm.W + rbm.b_visible)  # [2^m, n]
    p_v = torch.exp((v.unsqueeze(0) * p_v1.unsqueeze(1).log()
                     + (1 - v.unsqueeze(0)) * (-p_v1).log1p().unsqueeze(1)).sum(2))  # fmt: skip
    return p_h @ p_v


def test_gibbs_samples_follow_the_exact_marginal():
    """50,000 independent chains after 40 sweeps. Their states are independent draws from the
    exact 40-step law ``p_40`` (uniform start times the kernel's 40th power), which is within
    1e-6 of the marginal here (checked). With N draws over K states, E[TV] <= 0.40 sqrt(K / N)
    (conftest's bound) = 0.029, and one draw moves TV by at most 1/N, so TV > E[TV] + 0.015
    has probability below exp(-2 0.015^2 N) = e^-22.5 (McDiarmid). The marginal itself is
    0.3 or more in TV from the uniform law and from the RBM with W negated, so a sampler
    that ignored the weights or their sign would fail."""
    rbm = tiny_rbm(8, 4, seed=7, scale=0.8)
    p = exact_distribution(rbm)
    p_40 = torch.full((256,), 1 / 256, dtype=torch.float64) @ torch.linalg.matrix_power(
        gibbs_kernel(rbm), 40
    )
    assert 0.5 * (p_40 - p).abs().sum() < 1e-6
    n = 50_000
    samples = rbm.gibbs(n, 40, seed=11)
    assert samples.shape == (n, 8) and set(samples.unique().tolist()) == {-1.0, 1.0}
    empirical = torch.bincount(codes(samples), minlength=256).to(torch.float64) / n
    tv = 0.5 * (empirical - p_40).abs().sum()
    assert tv < 0.40 * math.sqrt(256 / n) + 0.015
    negated = exact_distribution(RBM(-rbm.W, rbm.b_visible, rbm.b_hidden))
    assert 0.5 * (p - 1 / 256).abs().sum() > 0.3
    assert 0.5 * (p - negated).abs().sum() > 0.3


def test_gibbs_is_reproducible_from_its_seed():
    rbm = tiny_rbm(10, 3)
    assert torch.equal(rbm.gibbs(5, 20, seed=3), rbm.gibbs(5, 20, seed=3))
    assert not torch.equal(rbm.gibbs(5, 20, seed=3), rbm.gibbs(5, 20, seed=4))


# ----------------------------------------------------------------- construction
def test_random_rbm_follows_the_public_random_setting():
    """Weights N(0, 0.05) and biases N(0, 1), as the Gibbs-with-Gradients code's "random" RBM."""
    rbm = RBM.random(784, 500, seed=0)
    assert rbm.W.shape == (500, 784) and RANDOM_WEIGHT_STD == pytest.approx(0.05**0.5)
    assert rbm.W.std().item() == pytest.approx(0.05**0.5, rel=0.01)
    assert abs(rbm.W.mean().item()) < 0.002
    assert rbm.b_visible.std().item() == pytest.approx(1.0, rel=0.1)
    assert rbm.b_hidden.std().item() == pytest.approx(1.0, rel=0.15)
    again = RBM.random(784, 500, seed=0)
    assert torch.equal(again.W, rbm.W) and torch.equal(again.b_hidden, rbm.b_hidden)
    assert (
        RBM.random(5, 2, seed=0, scale=2.0).W.abs().max() > RBM.random(5, 2, seed=0).W.abs().max()
    )


def test_rbm_provides_incremental_ratios_and_a_gradient_and_describes_itself():
    rbm = RBM.random(100, 25)
    assert rbm.provides == frozenset({"incremental", "gradient"})
    assert rbm.n_sites == 100 and rbm.shape == (100,)
    assert rbm.describe() == "an RBM with 100 visible and 25 hidden units"
    assert rbm.same_graph(RBM.random(100, 25, seed=1)) and not rbm.same_graph(RBM.random(100, 24))


W_OK = torch.zeros(3, 4)


@pytest.mark.parametrize(
    "args, message",
    [
        ((torch.zeros(4), torch.zeros(4), torch.zeros(3)), "W must be a 2-D array"),
        ((torch.zeros(0, 4), torch.zeros(4), torch.zeros(0)), "W must be a 2-D array"),
        ((W_OK, torch.zeros(5), torch.zeros(3)), "b_visible must hold one bias per visible"),
        ((W_OK, torch.zeros(4), torch.zeros(2)), "b_hidden must hold one bias per hidden"),
        ((W_OK.clone().fill_(math.nan), torch.zeros(4), torch.zeros(3)), "W must hold finite"),
        ((W_OK, torch.full((4,), math.inf), torch.zeros(3)), "b_visible must hold finite"),
        ((W_OK, torch.zeros(4), torch.full((3,), 2e6)), "b_hidden must be at most"),
        ((W_OK + 0j, torch.zeros(4), torch.zeros(3)), "W must hold real numbers"),
        ((W_OK, "abc", torch.zeros(3)), "b_visible must"),
    ],
)
def test_rbm_refuses_bad_parameters_in_a_sentence(args, message):
    with pytest.raises(ValueError, match=message):
        RBM(*args)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: RBM(W_OK, torch.zeros(4), torch.zeros(3), shape=(3, 2)), "product is the 4"),
        (lambda: RBM(W_OK, torch.zeros(4), torch.zeros(3), shape=("a",)), "shape must"),
        (lambda: RBM.random(0, 3), "n_visible must be an integer"),
        (lambda: RBM.random(4, 2.5), "n_hidden must be an integer"),
        (lambda: RBM.random(10**5, 10**4), "too many weights"),
        (lambda: RBM.random(4, 3, scale=-1.0), "scale must be a real number"),
        (lambda: RBM.random(4, 3).gibbs(0, 10), "n_chains must be an integer"),
        (lambda: RBM.random(4, 3).gibbs(2, -1), "steps must be"),
        (lambda: RBM.random(4, 3).gibbs(2, 1, seed=True), "seed must be"),
        (lambda: RBM.random(4, 3).log_prob(torch.zeros(2, 5)), "x must have shape"),
    ],
)
def test_rbm_refuses_bad_arguments_in_a_sentence(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_block_candidates_from_the_pre_activations_equal_whole_states(monkeypatch):
    """The RBM scores block moves from its hidden pre-activations; each candidate equals
    ``log_prob`` of the whole state, chunked or not."""
    from lsbcore.samplers.block.block_gibbs import flip_patterns

    rbm = RBM.random(20, 6, seed=1, scale=0.7)
    g = torch.Generator().manual_seed(0)
    x = rbm.start(7, g)
    sites = torch.stack([torch.randperm(20, generator=g)[:4] for _ in range(7)])
    flips = flip_patterns(4)
    whole = torch.stack(
        [rbm.log_prob(x.scatter(1, sites, x.gather(1, sites) * flip)) for flip in flips], 1
    )
    torch.testing.assert_close(rbm.block_log_probs(x, sites, flips), whole, rtol=0, atol=1e-12)
    monkeypatch.setattr(rbm_module, "FLIP_BLOCK", 3 * 7 * 6)  # three candidates per chunk
    torch.testing.assert_close(rbm.block_log_probs(x, sites, flips), whole, rtol=0, atol=1e-12)
