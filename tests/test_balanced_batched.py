"""The locally balanced family, FLSB, Gibbs and Metropolis on any target, against exact answers.

Targets: a random log-table over all 2^n states (with and without zero-mass states), a cubic
``log p~`` (differentiable, not pairwise: its gradient's flip estimates are not exact), the same
with zero-mass states, and a random ``PairwiseMRF``. Every matrix is the sampler's own
``flip_probabilities()`` with one chain per state of positive mass.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lsbcore import PairwiseMRF
from lsbcore.balancing.functions import FIXED, Balancing, make_balancing
from lsbcore.balancing.objective import lsb_loss
from lsbcore.exact import transition_matrix
from lsbcore.exact.states import all_states, state_codes
from lsbcore.exact.transition import flip_matrix
from lsbcore.samplers.balanced import batched as balanced_batched
from lsbcore.samplers.balanced.batched import (
    BatchedBalancedSampler,
    balanced_builder,
    lsb_mh_loss,
    mh_log_transition,
)
from lsbcore.samplers.site.uniform_batched import BatchedUniformSiteSampler, uniform_builder
from lsbcore.targets.base import Target

KINDS = (*FIXED, "lsb1", "lsb2")
RATIO_KINDS = ("exact", "gradient")
pytestmark = pytest.mark.usefixtures("single_thread")  # many tiny ops: one thread is faster


# ----------------------------------------------------------------- targets
class TableTarget(Target):
    """``log p~`` an arbitrary table over all ``2^n`` states (-inf: zero mass)."""

    def __init__(self, log_table: torch.Tensor):
        self.n_sites = int(log_table.numel()).bit_length() - 1
        self.shape = (self.n_sites,)
        self.log_table = log_table

    def log_prob(self, x):
        return self.log_table[state_codes(self._flat(x))]


class CubicTarget(Target):
    """``log p~ = a.x + sum c_ijk x_i x_j x_k`` (zero mass on ``dead`` state codes): smooth and
    not pairwise, so ``-2 x_i d_i`` only approximates ``s_i``."""

    provides = frozenset({"gradient"})

    def __init__(self, n: int, seed: int = 0, dead=()):
        g = torch.Generator().manual_seed(seed)
        self.n_sites, self.shape = n, (n,)
        self.a = torch.randn(n, generator=g, dtype=torch.float64) * 0.7
        self.c = torch.randn(n, n, n, generator=g, dtype=torch.float64) * 0.15
        self.dead = torch.zeros(2**n, dtype=torch.bool)
        self.dead[list(dead)] = True

    def smooth(self, x):
        return x @ self.a + torch.einsum("bi,bj,bk,ijk->b", x, x, x, self.c)

    def log_prob(self, x):
        flat = self._flat(x)
        dead = self.dead[state_codes(flat.detach())].to(flat.device)
        return torch.where(dead, -math.inf, self.smooth(flat))

    def grad_log_prob(self, x):
        with torch.enable_grad():
            real = self._flat(x).detach().requires_grad_(True)
            (grad,) = torch.autograd.grad(self.smooth(real).sum(), real)
        return grad.view_as(x)


def random_table(n: int, seed: int, zeros: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(2**n, generator=g, dtype=torch.float64) * 1.5
    if zeros:
        table[torch.randperm(2**n, generator=g)[:zeros]] = -math.inf
    return table


def random_mrf(n: int, seed: int) -> PairwiseMRF:
    g = torch.Generator().manual_seed(seed)
    upper = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64) * 0.6, 1)
    upper *= torch.rand(n, n, generator=g, dtype=torch.float64) < 0.6
    return PairwiseMRF(torch.randn(n, generator=g, dtype=torch.float64) * 0.5, upper + upper.T)


TABLE = TableTarget(random_table(5, 1))
TABLE_ZEROS = TableTarget(random_table(5, 2, zeros=9))
CUBIC = CubicTarget(5, seed=3)
CUBIC_ZEROS = CubicTarget(5, seed=4, dead=(0, 5, 9, 17, 22, 31))


# ----------------------------------------------------------------- exact helpers
def exact_law(target) -> np.ndarray:
    return torch.softmax(target.log_prob(all_states(target.n_sites)), 0).numpy()


def alive_states(target) -> torch.Tensor:
    states = all_states(target.n_sites)
    return torch.isfinite(target.log_prob(states))


def matrix_of(sampler) -> np.ndarray:
    """The full matrix from a sampler built on the target's states of positive mass, in code
    order (``build_on_states``); a zero-mass state's row stays put."""
    target = sampler.target
    alive = alive_states(target)
    fp = torch.zeros(2**target.n_sites, target.n_sites, dtype=torch.float64)
    fp[alive] = sampler.flip_probabilities().reshape(-1, target.n_sites)
    p = flip_matrix(fp)
    dead = (~alive).numpy()
    p[dead] = np.eye(len(p))[dead]
    return p


def on_states(target, make) -> object:
    """``make(target, n_chains, x0=...)`` with one chain per state of positive mass."""
    states = all_states(target.n_sites)[alive_states(target)]
    return make(target, len(states), x0=states)


def balanced(kind, ratios="exact", **options):
    def make(target, n_chains, **common):
        balancing = make_balancing(kind, seed=0)
        return BatchedBalancedSampler(
            target, n_chains, balancing, ratios=ratios, **options, **common
        )

    return make


def frozen(balancing: Balancing, ratios="exact"):
    def make(target, n_chains, **common):
        function = copy.deepcopy(balancing).frozen()
        return BatchedBalancedSampler(target, n_chains, function, ratios=ratios, **common)

    return make


def uniform(rule):
    def make(target, n_chains, **common):
        return BatchedUniformSiteSampler(target, n_chains, rule=rule, **common)

    return make


def assert_exact_chain(p: np.ndarray, target) -> None:
    """Stochastic, reversible with respect to the enumerated law, and so stationary."""
    pi = exact_law(target)
    assert p.min() > -1e-14
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    flow = pi[:, None] * p
    assert np.abs(flow - flow.T).max() < 1e-12
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    # every state of positive mass is left with positive probability somewhere: the chain moves
    alive = pi > 0
    assert (np.diag(p)[alive] < 1.0 - 1e-9).any()


def learned(kind, target, ratios="exact", steps=40, seed=0) -> BatchedBalancedSampler:
    balancing = make_balancing(kind, seed=seed)
    sampler = BatchedBalancedSampler(target, 12, balancing, ratios=ratios, seed=seed, lr=0.05)
    sampler.step(steps, learn=True)
    assert not sampler.learning_failed
    return sampler


# ----------------------------------------------------------------- detailed balance
@pytest.mark.parametrize("target", [TABLE, TABLE_ZEROS], ids=["table", "table-with-zeros"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_balancing_function_is_reversible_on_a_non_pairwise_table(kind, target):
    assert_exact_chain(matrix_of(on_states(target, balanced(kind))), target)


@pytest.mark.parametrize("target", [TABLE, TABLE_ZEROS], ids=["table", "table-with-zeros"])
@pytest.mark.parametrize("rule", ["gibbs", "metropolis"])
def test_gibbs_and_metropolis_are_reversible_on_a_non_pairwise_table(rule, target):
    p = matrix_of(on_states(target, uniform(rule)))
    assert_exact_chain(p, target)
    # the rules themselves: a flip of site i with probability sigmoid(s_i) / n or min(1, t) / n
    states = all_states(5)[alive_states(target)]
    s = target.flip_log_ratios(states)
    expected = torch.sigmoid(s) if rule == "gibbs" else torch.exp(s.clamp(max=0.0))
    sampler = on_states(target, uniform(rule))
    torch.testing.assert_close(sampler.flip_probabilities(), expected / 5)


@pytest.mark.parametrize("target", [CUBIC, CUBIC_ZEROS], ids=["cubic", "cubic-with-zeros"])
@pytest.mark.parametrize("kind", ["barker", "sqrt", "max", "lsb1", "lsb2"])
def test_flsb_is_reversible_on_a_smooth_non_pairwise_target(kind, target):
    assert_exact_chain(matrix_of(on_states(target, balanced(kind, "gradient"))), target)


@pytest.mark.parametrize("kind", ["lsb1", "lsb2"])
@pytest.mark.parametrize(
    "target, ratios",
    [(TABLE_ZEROS, "exact"), (CUBIC, "gradient"), (CUBIC_ZEROS, "gradient")],
    ids=["exact-table-with-zeros", "flsb-cubic", "flsb-cubic-with-zeros"],
)
def test_a_learned_function_frozen_after_learning_is_exact(kind, target, ratios):
    sampler = learned(kind, target, ratios)
    before = matrix_of(on_states(target, balanced(kind, ratios)))
    after = matrix_of(on_states(target, frozen(sampler.balancing, ratios)))
    assert_exact_chain(after, target)
    assert np.abs(after - before).max() > 1e-6  # learning changed the chain


def test_the_balancing_shortcut_would_be_wrong_for_gradient_ratios():
    """The detailed-balance check catches FLSB accepted with min(1, Z~(x)/Z~(x')) instead of
    the full ratio: approximate ratios do not satisfy t~_i(x') = 1/t~_i(x)."""
    sampler = on_states(CUBIC, balanced("sqrt", "gradient"))
    states = all_states(5)
    log_g = 0.5 * (-2 * states * CUBIC.grad_log_prob(states))  # sqrt on the estimates
    log_z = torch.logsumexp(log_g, 1)
    torch.testing.assert_close(sampler._log_z, log_z)  # the sampler's own Z~
    fp = torch.zeros(32, 5, dtype=torch.float64)
    for i in range(5):
        other = state_codes(states * torch.where(torch.arange(5) == i, -1.0, 1.0))
        fp[:, i] = torch.exp(log_g[:, i] - log_z + (log_z - log_z[other]).clamp(max=0))
    pi = exact_law(CUBIC)
    flow = pi[:, None] * flip_matrix(fp)
    assert np.abs(flow - flow.T).max() > 1e-4


# ----------------------------------------------------------------- brute force
def brute_flsb_probabilities(target, kind_log_g, states) -> torch.Tensor:
    """``Q~(i|x) min(1, p(x')Q~(x|x') / (p(x)Q~(x'|x)))`` site by site, state by state."""
    out = torch.zeros(len(states), target.n_sites, dtype=torch.float64)
    for k, x in enumerate(states):
        x = x.unsqueeze(0)

        def log_q(state, site):
            d = target.grad_log_prob(state)
            log_g = kind_log_g(-2.0 * state * d)[0]
            return float(log_g[site] - torch.logsumexp(log_g, 0))

        for i in range(target.n_sites):
            y = x.clone()
            y[0, i] *= -1
            log_py, log_px = float(target.log_prob(y)), float(target.log_prob(x))
            if log_py == -math.inf:
                continue
            log_r = log_py - log_px + log_q(y, i) - log_q(x, i)
            out[k, i] = math.exp(log_q(x, i) + min(0.0, log_r))
    return out


@pytest.mark.parametrize("kind", ["barker", "min", "lsb2"])
def test_flsb_proposal_and_transition_match_brute_force(kind):
    target = CUBIC_ZEROS
    sampler = on_states(target, balanced(kind, "gradient"))
    states = all_states(5)[alive_states(target)]
    function = make_balancing(kind, seed=0)
    with torch.no_grad():
        d = torch.stack([target.grad_log_prob(x.unsqueeze(0))[0] for x in states])
        log_g = function.log_g(-2.0 * states * d)
        torch.testing.assert_close(
            sampler.proposal_log_probs(), log_g - torch.logsumexp(log_g, 1, keepdim=True)
        )
        expected = brute_flsb_probabilities(target, function.log_g, states)
    torch.testing.assert_close(sampler.flip_probabilities(), expected)


def test_exact_ratio_probabilities_match_brute_force_on_a_table_with_zeros():
    target = TABLE_ZEROS
    sampler = on_states(target, balanced("max"))
    states = all_states(5)[alive_states(target)]
    codes = state_codes(states)
    log_p = target.log_table
    expected = torch.zeros(len(states), 5, dtype=torch.float64)
    for k, code in enumerate(codes.tolist()):

        def log_z(c):
            return math.log(
                sum(max(1.0, math.exp(log_p[c ^ (1 << i)] - log_p[c])) for i in range(5))
            )

        for i in range(5):
            other = code ^ (1 << i)
            if log_p[other] == -math.inf:
                continue  # proposed with g(0) = 1, never accepted
            log_g = max(0.0, float(log_p[other] - log_p[code]))
            log_a = min(0.0, log_z(code) - log_z(other))
            expected[k, i] = math.exp(log_g - log_z(code) + log_a)
    torch.testing.assert_close(sampler.flip_probabilities(), expected)


# ----------------------------------------------------------------- the pairwise classes
MRF = random_mrf(5, 7)


@pytest.mark.parametrize("name", KINDS)
def test_on_a_pairwise_mrf_the_batched_matrix_is_the_pairwise_samplers(name):
    expected = transition_matrix(MRF, name)
    np.testing.assert_allclose(matrix_of(on_states(MRF, balanced(name))), expected, atol=1e-12)


@pytest.mark.parametrize("rule", ["gibbs", "metropolis"])
def test_on_a_pairwise_mrf_gibbs_and_metropolis_are_the_pairwise_samplers(rule):
    expected = transition_matrix(MRF, rule)
    np.testing.assert_allclose(matrix_of(on_states(MRF, uniform(rule))), expected, atol=1e-12)


@pytest.mark.parametrize("kind", ["sqrt", "lsb1", "lsb2"])
def test_on_a_pairwise_mrf_flsb_is_the_exact_sampler(kind):
    """The gradient's flip estimates are exact on a pairwise binary model: FLSB is LSB there."""
    expected = transition_matrix(MRF, kind)
    got = matrix_of(on_states(MRF, balanced(kind, "gradient")))
    np.testing.assert_allclose(got, expected, atol=1e-12)


# ----------------------------------------------------------------- runs against enumeration
RUNS = [
    ("barker", TABLE_ZEROS, "exact"),
    ("max", TABLE_ZEROS, "exact"),
    ("lsb1", TABLE, "exact"),
    ("lsb2", TABLE_ZEROS, "exact"),
    ("sqrt", CUBIC_ZEROS, "gradient"),
    ("lsb1", CUBIC, "gradient"),
    ("lsb2", CUBIC_ZEROS, "gradient"),
    ("gibbs", TABLE_ZEROS, None),
    ("metropolis", TABLE_ZEROS, None),
]


def frozen_maker(name, target, ratios):
    """The sampler ``name`` as a homogeneous chain: a learned function learns first (on other
    chains), then is frozen."""
    if ratios is None:
        return uniform(name)
    balancing = make_balancing(name, seed=0)
    if balancing.learnable:
        teacher = BatchedBalancedSampler(target, 16, balancing, ratios=ratios, seed=9, lr=0.05)
        teacher.step(30, learn=True)
        assert not teacher.learning_failed
    return frozen(balancing, ratios)


@pytest.mark.parametrize("name, target, ratios", RUNS)
def test_a_run_has_the_exact_law_of_its_chain_and_reaches_the_target(name, target, ratios, exact):
    """Independent chains from a known start: after t steps their states are draws from
    ``start P^t`` (P enumerated), early (where a wrong step shows most) and after mixing, where
    that law is the target's."""
    make = frozen_maker(name, target, ratios)
    p = matrix_of(on_states(target, make))
    alive = alive_states(target)
    states = all_states(target.n_sites)[alive]
    copies = 3000 // len(states)
    sampler = make(target, copies * len(states), x0=states.repeat(copies, 1), seed=5)
    law = np.where(alive.numpy(), 1.0 / len(states), 0.0)
    gap = 1.0 - np.sort(np.abs(np.linalg.eigvals(p[np.ix_(alive, alive)])))[-2]
    pi = exact_law(target)
    done = 0
    for t in (3, min(300, math.ceil(10.0 / gap))):
        sampler.step(t - done)
        law = law @ np.linalg.matrix_power(p, t - done)
        done = t
        counts = np.bincount(state_codes(sampler.x).numpy(), minlength=len(law))
        assert exact.tv(law, counts) < exact.tv_threshold(law, sampler.n_chains)
    if done * gap >= 10.0:  # mixed: within e^-10 of the target
        assert exact.tv(law, pi) < 1e-3
        assert exact.tv(pi, counts) < exact.tv_threshold(pi, sampler.n_chains)
    assert sampler.invariant_error() < 1e-9


# ----------------------------------------------------------------- zero mass
@pytest.mark.parametrize(
    "target, ratios, kind, learn",
    [
        (TABLE_ZEROS, "exact", "max", False),
        (TABLE_ZEROS, "exact", "lsb1", False),
        (TABLE_ZEROS, "exact", "lsb1", True),
        (TABLE_ZEROS, "exact", "lsb2", True),
        (CUBIC_ZEROS, "gradient", "max", False),
        (CUBIC_ZEROS, "gradient", "lsb1", True),
    ],
)
def test_moves_into_zero_mass_are_proposed_and_never_accepted(target, ratios, kind, learn):
    """g(0) > 0 proposes flips into p~ = 0; none is taken, while learning or not, and learning
    stays finite."""
    sampler = BatchedBalancedSampler(target, 64, make_balancing(kind), ratios=ratios, seed=1)
    proposed_dead = 0
    for _ in range(150):
        before = sampler.x.clone()
        sampler.step(1, learn=learn)
        last = sampler.last_proposal
        proposal = before.clone()
        proposal[torch.arange(64), last["site"]] *= -1
        dead = torch.isneginf(target.log_prob(proposal))
        proposed_dead += int(dead.sum())
        assert not bool(last["accepted"][dead].any())
        assert bool((last["accept_prob"][dead] == 0).all())
        assert bool(torch.isfinite(target.log_prob(sampler.x)).all())
    assert proposed_dead > 20
    assert not sampler.learning_failed
    assert sampler.invariant_error() < 1e-9


def test_a_chain_with_nothing_to_propose_stays_put():
    """Every neighbour of state 0 has zero mass and g(0) = 0 (Barker): Z = 0, T(x -> x) = 1."""
    table = random_table(3, 0)
    table[[1, 2, 4]] = -math.inf
    target = TableTarget(table)
    x0 = all_states(3)[[0, 7]]
    sampler = BatchedBalancedSampler(target, 2, make_balancing("barker"), x0=x0)
    assert bool(torch.isneginf(sampler.proposal_log_probs()[0]).all())
    assert float(sampler.flip_probabilities()[0].sum()) == 0.0
    sampler.step(50)
    torch.testing.assert_close(sampler.x[0], x0[0])


# ----------------------------------------------------------------- learning
def test_learning_changes_the_lsb1_weights_and_records_them():
    sampler = learned("lsb1", TABLE, steps=60)
    weights = torch.softmax(sampler.balancing.theta.detach(), 0)
    assert float((weights - 0.25).abs().max()) > 1e-3
    history = sampler.history.arrays()
    assert len(history["step"]) == 60 and history["weights"].shape == (60, 4)
    np.testing.assert_allclose(history["weights"][-1], weights.numpy(), atol=1e-2)
    assert sampler.eta != pytest.approx(math.log(2.0))  # eta_raw learned from 0
    assert np.isfinite(history["loss"]).all()


@pytest.mark.parametrize("kind", ["lsb1", "lsb2"])
def test_flsb_learning_changes_the_function(kind):
    start = make_balancing(kind, seed=0)
    sampler = learned(kind, CUBIC, "gradient", steps=40)
    s = torch.linspace(-3, 3, 13, dtype=torch.float64)
    with torch.no_grad():
        assert float((sampler.balancing.log_g(s) - start.log_g(s)).abs().max()) > 1e-4


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_both_optimisers_learn(optimizer):
    balancing = make_balancing("lsb1")
    sampler = BatchedBalancedSampler(TABLE, 8, balancing, optimizer=optimizer, lr=0.1, seed=2)
    sampler.step(20, learn=True)
    assert float(balancing.theta.detach().abs().max()) > 1e-4


def test_the_exact_objective_is_the_mh_objective_under_the_balancing_property():
    """With exact ratios, lsb_mh_loss(min(Q, R Q_rev)) is spec 5's lsb_loss (g / max(Z, Z')):
    the same value and the same gradients in theta and eta."""
    target, n, b = TABLE_ZEROS, 5, 6
    states = all_states(n)[alive_states(target)][:b]
    s = target.flip_log_ratios(states)
    g = torch.Generator().manual_seed(0)
    i = torch.randint(0, n, (b,), generator=g)
    j = torch.randint(0, n, (b,), generator=g)
    live = torch.isfinite(s.gather(1, i[:, None]).squeeze(1)) & torch.isfinite(
        s.gather(1, j[:, None]).squeeze(1)
    )
    states, s, i, j = states[live], s[live], i[live], j[live]
    b = len(states)
    rows = torch.arange(b)
    flip = lambda x, k: x * torch.where(torch.arange(n) == k[:, None], -1.0, 1.0)  # noqa: E731
    s_i, s_u = target.flip_log_ratios(flip(states, i)), target.flip_log_ratios(flip(states, j))
    log_p = target.log_prob(states)
    values = []
    for form in ("spec", "mh"):
        function = make_balancing("lsb1")
        function.theta.data = torch.tensor([0.3, -0.2, 0.5, -0.4], dtype=torch.float64)
        eta_raw = torch.tensor([0.2], dtype=torch.float64, requires_grad=True)
        log_g = function.log_g(s)
        log_z = torch.logsumexp(log_g, 1)
        log_gi, log_gu = function.log_g(s_i), function.log_g(s_u)
        log_q0 = (log_g[rows, i] - log_z).detach()
        if form == "spec":
            flips = torch.stack(
                [
                    torch.cat([log_g[rows, i, None], log_g], 1),
                    torch.cat([log_gi[rows, i, None], log_gi], 1),
                    torch.cat([log_g[rows, j, None], log_g], 1),
                    torch.cat([log_gu[rows, j, None], log_gu], 1),
                ]
            )
            mask = torch.ones(b, n + 1, dtype=torch.float64)
            mask[:, 0] = 0
            loss = lsb_loss(log_z, flips, mask, mask, log_p, s[rows, i], log_q0, eta_raw)
        else:
            log_t = mh_log_transition(
                log_g[rows, i] - log_z, log_gi[rows, i] - torch.logsumexp(log_gi, 1), s[rows, i]
            )
            log_t_u = mh_log_transition(
                log_g[rows, j] - log_z, log_gu[rows, j] - torch.logsumexp(log_gu, 1), s[rows, j]
            )
            loss = lsb_mh_loss(log_t, log_t_u, log_p, s[rows, i], log_q0, eta_raw)
        loss.backward()
        values.append((loss.detach(), function.theta.grad.clone(), eta_raw.grad.clone()))
    for spec_value, mh_value in zip(*values, strict=True):
        torch.testing.assert_close(spec_value, mh_value)


@pytest.mark.parametrize("kind", ["lsb1", "lsb2"])
def test_on_a_pairwise_mrf_flsb_learns_exactly_as_lsb(kind):
    """Where the gradient's estimates are exact, Algorithm 2 (full MH ratio, lsb_mh_loss by
    autograd) and Algorithm 1 (lsb_loss_and_grads) are one algorithm: same seed, same chains,
    same losses and parameters."""
    runs = []
    for ratios in RATIO_KINDS:
        sampler = BatchedBalancedSampler(MRF, 12, make_balancing(kind, seed=0), ratios=ratios)
        states = []
        for _ in range(25):
            sampler.step(1, learn=True)
            states.append(sampler.x.clone())
        runs.append((torch.stack(states), sampler.history.arrays(), sampler._parameter_vector()))
    (x_exact, h_exact, p_exact), (x_fast, h_fast, p_fast) = runs
    assert torch.equal(x_exact, x_fast)
    np.testing.assert_allclose(h_fast["loss"], h_exact["loss"], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(p_fast, p_exact, rtol=1e-9, atol=1e-12)
    assert float((p_exact - make_balancing_vector(kind)).abs().max()) > 1e-4  # it learned


def make_balancing_vector(kind) -> torch.Tensor:
    params = [*make_balancing(kind, seed=0).parameters(), torch.zeros(1, dtype=torch.float64)]
    return torch.nn.utils.parameters_to_vector(params).detach()


@pytest.mark.parametrize(
    "kind, ratios, loss_name",
    [("lsb1", "exact", "lsb_loss_and_grads"), ("lsb2", "gradient", "lsb_mh_loss")],
)
def test_a_non_finite_loss_stops_learning_and_restores_the_last_good_parameters(
    kind, ratios, loss_name, monkeypatch
):
    target = CUBIC if ratios == "gradient" else TABLE
    sampler = BatchedBalancedSampler(target, 8, make_balancing(kind, seed=0), ratios=ratios)
    sampler.step(5, learn=True)
    good = sampler._parameter_vector().clone()
    history = len(sampler.history)
    original = getattr(balanced_batched, loss_name)

    def nan_loss(*args, **kwargs):
        out = original(*args, **kwargs)
        if isinstance(out, tuple):
            return (out[0] * math.nan, *out[1:])
        return out * math.nan

    monkeypatch.setattr(balanced_batched, loss_name, nan_loss)
    with pytest.warns(RuntimeWarning, match="stops learning and keeps its last good"):
        sampler.step(4, learn=True)
    assert sampler.learning_failed
    torch.testing.assert_close(sampler._parameter_vector(), good)
    assert len(sampler.history) == history  # nothing recorded from the failed step on
    monkeypatch.setattr(balanced_batched, loss_name, original)
    sampler.step(10, learn=True)  # frozen steps from now on
    torch.testing.assert_close(sampler._parameter_vector(), good)
    assert sampler.invariant_error() < 1e-9
    assert bool(torch.isfinite(sampler.flip_probabilities()).all())


def test_restarts_keep_the_chains_on_positive_mass():
    sampler = BatchedBalancedSampler(
        TABLE_ZEROS, 16, make_balancing("lsb1"), restart_prob=1.0, seed=3
    )
    sampler.step(20, learn=True)
    assert bool(torch.isfinite(TABLE_ZEROS.log_prob(sampler.x)).all())
    assert sampler.invariant_error() < 1e-9
    assert not sampler.learning_failed


def test_a_loaded_frozen_function_samples_but_does_not_learn():
    function = make_balancing("lsb1")
    function.theta.data = torch.tensor([1.0, -1.0, 0.5, 0.0], dtype=torch.float64)
    sampler = balanced_builder("learned")(TABLE, 4, balancing=function, seed=0)
    assert not sampler.learnable and sampler.name == "learned"
    sampler.step(10)
    with pytest.raises(ValueError, match="does not learn"):
        sampler.step(1, learn=True)


# ----------------------------------------------------------------- invariants and counts
@pytest.mark.parametrize(
    "kind, target, ratios, learn",
    [
        ("lsb2", TABLE_ZEROS, "exact", False),
        ("lsb1", TABLE_ZEROS, "exact", True),
        ("lsb2", CUBIC, "gradient", True),
        ("barker", CUBIC_ZEROS, "gradient", False),
    ],
)
def test_the_cached_state_equals_a_recompute_after_many_steps(kind, target, ratios, learn):
    sampler = BatchedBalancedSampler(
        target, 16, make_balancing(kind), ratios=ratios, resync_every=10**6, seed=4
    )
    sampler.step(1000, learn=learn)
    sampler.step(1)  # a frozen step rebuilds what learning left stale
    assert sampler.invariant_error() < 1e-9


def test_evaluations_are_counted_by_the_rule():
    n = 5
    exact = BatchedBalancedSampler(TABLE, 4, make_balancing("lsb1"))
    assert exact.n_target_evals == 1 + n  # the start: log p~ and every ratio
    exact.step(3)
    exact.step(2, learn=True)  # x' and x~: n each
    assert exact.n_target_evals == 1 + n + 3 * n + 2 * 2 * n
    fast = BatchedBalancedSampler(CUBIC, 4, make_balancing("lsb1"), ratios="gradient")
    assert fast.n_target_evals == 1  # value and gradient at the start
    fast.step(3)
    fast.step(2, learn=True)
    assert fast.n_target_evals == 1 + 3 + 2 * 2
    pairwise = BatchedBalancedSampler(MRF, 4, make_balancing("sqrt"))
    k = int(MRF.neighbourhood.shape[1])
    pairwise.step(3)
    assert pairwise.evals_per_step == k and pairwise.n_target_evals == 1 + n + 3 * k
    gibbs = BatchedUniformSiteSampler(TABLE, 4, rule="gibbs")
    gibbs.step(7)
    assert gibbs.n_target_evals == 1 + 7


# ----------------------------------------------------------------- reproducibility
def trajectory(make, seed, learn=False):
    sampler = make(seed)
    states = []
    for _ in range(30):
        sampler.step(1, learn=learn)
        states.append(sampler.x.clone())
    return torch.stack(states), sampler


@pytest.mark.parametrize(
    "make, learn",
    [
        (
            lambda seed: BatchedBalancedSampler(TABLE_ZEROS, 8, make_balancing("max"), seed=seed),
            False,
        ),
        (lambda seed: BatchedBalancedSampler(TABLE, 8, make_balancing("lsb1"), seed=seed), True),
        (
            lambda seed: BatchedBalancedSampler(
                CUBIC, 8, make_balancing("lsb2", seed=0), ratios="gradient", seed=seed
            ),
            True,
        ),
        (lambda seed: BatchedUniformSiteSampler(TABLE, 8, rule="metropolis", seed=seed), False),
    ],
    ids=["max", "lsb1-learning", "flsb2-learning", "metropolis"],
)
def test_one_seed_gives_one_chain_and_another_seed_another(make, learn):
    first, sampler_a = trajectory(make, 11, learn)
    again, sampler_b = trajectory(make, 11, learn)
    other, _ = trajectory(make, 12, learn)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    if learn:
        torch.testing.assert_close(sampler_a._parameter_vector(), sampler_b._parameter_vector())


# ----------------------------------------------------------------- refusals and validation
def test_gradient_ratios_are_refused_on_a_target_without_a_gradient():
    with pytest.raises(ValueError, match="needs a differentiable log p~"):
        BatchedBalancedSampler(TABLE, 2, make_balancing("lsb1"), ratios="gradient", name="flsb1")


def test_the_authors_objective_is_refused_off_the_pairwise_samplers():
    with pytest.raises(ValueError, match="'authors' objective is defined through a pairwise"):
        BatchedBalancedSampler(TABLE, 2, make_balancing("lsb1"), objective="authors")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"ratios": "approximate"}, "ratios must be one of"),
        ({"lr": 0}, "lr must be"),
        ({"lr": -1.0}, "lr must be"),
        ({"lr": math.nan}, "lr must be"),
        ({"lr": "0.1"}, "lr must be"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of"),
        ({"restart_prob": 1.5}, "restart_prob must be"),
        ({"restart_prob": True}, "restart_prob must be"),
        ({"objective": "mine"}, "objective must be one of"),
        ({"backend": "compiled"}, "serves the pairwise samplers only"),
        ({"x0": torch.ones(2, 4)}, "x0 must have shape"),
    ],
)
def test_bad_arguments_are_refused_in_a_sentence(options, message):
    with pytest.raises(ValueError, match=message):
        BatchedBalancedSampler(TABLE, 2, make_balancing("lsb1"), **options)


def test_other_bad_inputs_are_refused_in_a_sentence():
    with pytest.raises(ValueError, match="balancing must be a Balancing"):
        BatchedBalancedSampler(TABLE, 2, "sqrt")
    with pytest.raises(ValueError, match="rule must be one of"):
        BatchedUniformSiteSampler(TABLE, 2, rule="heat-bath")
    with pytest.raises(ValueError, match="needs balancing=lsbcore.load_balancing"):
        balanced_builder("learned")(TABLE, 2)
    with pytest.raises(ValueError, match="a starting state has probability zero"):
        BatchedBalancedSampler(TABLE_ZEROS, 32, make_balancing("max"), x0=all_states(5))
    with pytest.raises(ValueError, match="does not learn"):
        BatchedBalancedSampler(TABLE, 2, make_balancing("sqrt")).step(1, learn=True)


def test_the_builders_name_their_samplers():
    assert balanced_builder("lsb2", "gradient")(CUBIC, 2, hidden=4).name == "flsb2"
    assert balanced_builder("lsb1", "gradient")(CUBIC, 2).balancing.name == "lsb1"
    assert balanced_builder("min")(TABLE, 2).name == "min"
    assert uniform_builder("gibbs")(TABLE, 2).name == "gibbs"


def test_a_trace_records_the_proposed_sites():
    sampler = BatchedBalancedSampler(TABLE, 3, make_balancing("sqrt"))
    sampler.track_statistics()
    trace = torch.zeros(5, 3, 5, dtype=torch.float64)
    sampler.step(5, trace=trace)
    assert bool(((trace[:, :, 4] >= 0) & (trace[:, :, 4] < 5)).all())
    torch.testing.assert_close(trace[-1, :, 0], sampler.log_p)


def test_softplus_eta_starts_at_log_2():
    sampler = BatchedBalancedSampler(TABLE, 2, make_balancing("lsb1"))
    assert sampler.eta == pytest.approx(float(F.softplus(torch.zeros(1))))
