"""LSB 2' (``lsb2-monotone``): ``g(t) = min{h(t), t h(1/t)}`` with ``h`` a min-max network whose
slopes in ``log t`` lie in ``[0, 1]``, against exact answers: the balancing property, monotone
``h`` and ``g``, the exact ``g(0)``, the active-unit evaluation against the dense network, and
the frozen chain's law against enumeration."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from lsbcore import FactorGraph, IsingPosterior
from lsbcore.balancing.functions import make_balancing
from lsbcore.balancing.json_io import balancing_to_dict, balancing_to_json, load_balancing
from lsbcore.balancing.monotone import MonotoneBalancing
from lsbcore.exact import transition_matrix
from lsbcore.exact.states import all_states, state_codes
from lsbcore.exact.transition import flip_matrix
from lsbcore.samplers.balanced.batched import balanced_builder
from lsbcore.samplers.registry import make_sampler

pytestmark = pytest.mark.usefixtures("single_thread")  # many tiny ops: one thread is faster


def wild(seed: int, groups: int = 6, units: int = 5, project: bool = True) -> MonotoneBalancing:
    """A network with random parameters far from any learned one, projected onto [0, 1]."""
    net = MonotoneBalancing(groups, units)
    generator = torch.Generator().manual_seed(seed)
    normal = torch.randn(2, groups, units, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        net.slope.copy_(normal[0] * 2)
        net.intercept.copy_(normal[1] * 3)
    if project:
        net.project_()
    return net


def dense_log_g(net: MonotoneBalancing, s: torch.Tensor) -> torch.Tensor:
    """The network as written, every unit at every input (with autograd): the reference."""

    def phi(v):
        return (v[..., None, None] * net.slope + net.intercept).amin(-1).amax(-1)

    return torch.minimum(phi(s), s + phi(-s))


S50 = torch.linspace(-50.0, 50.0, 20001, dtype=torch.float64)


# ----------------------------------------------------------------- the balancing property
@pytest.mark.parametrize("seed", range(4))
def test_g_equals_t_g_of_one_over_t_to_1e_12_for_random_parameters(seed):
    for net in (wild(seed), wild(seed, project=False), make_balancing("lsb2-monotone", seed=seed)):
        with torch.no_grad():
            gap = net.log_g(S50) - (S50 + net.log_g(-S50))  # log g(t) - log(t g(1/t))
        assert float(gap.abs().max()) < 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_h_and_g_increase_and_phi_rises_no_faster_than_s_for_projected_parameters(seed):
    """Slopes in [0, 1] (here projected from wild values) make phi and log g increase with
    slope at most 1 on a fine grid: h monotone and t h(1/t) monotone (Proposition 3)."""
    s = torch.linspace(-30.0, 30.0, 60001, dtype=torch.float64)
    for net in (wild(seed), wild(seed, 20, 20), make_balancing("lsb2-monotone", seed=seed)):
        with torch.no_grad():
            for values in (net.phi(s), net.log_g(s)):
                rise = values.diff()
                assert float(rise.min()) >= -1e-12
                assert float((rise - s.diff()).max()) <= 1e-12


def test_the_monotonicity_check_has_power_without_the_projection():
    """The same check fails for wild slopes left unprojected: g is then not monotone."""
    s = torch.linspace(-30.0, 30.0, 60001, dtype=torch.float64)
    with torch.no_grad():
        rise = wild(0, project=False).log_g(s).diff()
    assert float(rise.min()) < -1e-3


# ----------------------------------------------------------------- g(0) and max(1, t)
def max_network(groups: int = 3, units: int = 4) -> MonotoneBalancing:
    """phi(s) = max(0, s) exactly: one group of flat lines through 0, one of slope-1 lines
    through 0, the rest lower everywhere."""
    net = MonotoneBalancing(groups, units)
    with torch.no_grad():
        net.slope.fill_(0.5)
        net.intercept.fill_(-5.0)
        net.slope[0], net.intercept[0] = 0.0, 0.0
        net.slope[1], net.intercept[1] = 1.0, 0.0
    return net


def test_a_network_set_to_max_1_t_equals_it_exactly_with_g0_one():
    net = max_network()
    s = torch.cat([S50, torch.tensor([-math.inf, math.inf], dtype=torch.float64)])
    lattice = S50[:20000].view(20, 1000)  # many inputs: the lookup in phi's pieces
    with torch.no_grad():
        assert torch.equal(net.log_g(s), s.clamp(min=0.0))
        assert torch.equal(net.log_g(lattice), lattice.clamp(min=0.0))
    assert net.g0() == 1.0


@pytest.mark.parametrize("seed", range(3))
def test_g0_is_the_limit_at_zero_from_the_end_pieces(seed):
    """g(0) > 0 exactly when phi ends flat at -inf and with slope 1 at +inf; it is then
    exp(min of the two end intercepts), the value g takes for every t below the last
    breakpoint; otherwise g(t) -> 0."""
    net = wild(seed)
    assert net.g0() == 0.0 or net.slope.min() == 0.0  # generic wild slopes: g(0) = 0
    far = torch.tensor([-1e3, -1e6], dtype=torch.float64)
    with torch.no_grad():
        if net.g0() == 0.0:
            assert float(dense_log_g(net, far)[1]) < -1e3 * 1e-3
        # flat lines in one group and slope-1 lines in another give g(0) > 0
        net.slope[0] = 0.0
        net.slope[1] = 1.0
        top_flat = net.intercept[0].min()  # group 0's minimum at -inf
        top_steep = net.intercept[1].min()  # group 1's minimum, s + phi(-s), at -inf
        others_flat = net.slope[2:].amax(1) == 0  # other groups that also end flat
        flat_end = torch.cat([top_flat.view(1), net.intercept[2:].amin(1)[others_flat]]).max()
        steep = net.slope[2:].amin(1) == 1
        steep_end = torch.cat([top_steep.view(1), net.intercept[2:].amin(1)[steep]]).max()
        expected = math.exp(float(torch.minimum(flat_end, steep_end)))
        assert net.g0() == pytest.approx(expected, rel=1e-15)
        assert float(torch.exp(dense_log_g(net, far))[1]) == pytest.approx(expected, rel=1e-12)
        # log g(-inf) is finite and so is its gradient: a flip into zero mass is scored
    value = net.log_g(torch.tensor([-math.inf, math.inf, 0.3], dtype=torch.float64))
    value.sum().backward()
    assert bool(torch.isfinite(value[0])) and value[1] == math.inf
    assert bool(torch.isfinite(net.slope.grad).all() and torch.isfinite(net.intercept.grad).all())


# ----------------------------------------------------------------- the fast evaluation
@pytest.mark.parametrize("size", [500, 20000], ids=["unit-by-unit", "pieces"])
@pytest.mark.parametrize("seed", range(3))
def test_the_active_unit_evaluation_equals_the_dense_network_with_its_gradient(size, seed):
    nets = (wild(seed), wild(seed, 20, 20), make_balancing("lsb2-monotone", seed=seed))
    generator = torch.Generator().manual_seed(seed)
    s = torch.randn(size, generator=generator, dtype=torch.float64) * 8
    for net in nets:
        fast = net.log_g(s)
        weights = torch.rand(size, generator=generator, dtype=torch.float64)
        grads = torch.autograd.grad((fast * weights).sum(), [net.slope, net.intercept])
        dense = dense_log_g(net, s)
        expected = torch.autograd.grad((dense * weights).sum(), [net.slope, net.intercept])
        torch.testing.assert_close(fast, dense, rtol=0, atol=1e-12)
        for got, want in zip(grads, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------- learning
def ising_3x3() -> IsingPosterior:
    alpha = torch.randn(3, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    return IsingPosterior(alpha, 0.6, "free")


def network_with_zeros() -> FactorGraph:
    """Six variables, pairwise and triple factors with hard zeros; its support is connected by
    single flips (checked), so a single-flip chain is ergodic on it."""
    generator = torch.Generator().manual_seed(11)
    scopes = [(0, 1), (1, 2, 3), (3, 4), (4, 5, 0), (2, 5), (1,)]
    tables = []
    for scope in scopes:
        table = torch.randn(2 ** len(scope), generator=generator, dtype=torch.float64)
        tables.append(table)
    tables[0][0] = tables[1][5] = tables[3][2] = tables[4][3] = -math.inf
    graph = FactorGraph(6, scopes, tables)
    log_p = graph.log_prob(all_states(6))
    alive = set(torch.isfinite(log_p).nonzero().flatten().tolist())
    seen, frontier = set(), [min(alive)]
    while frontier:
        code = frontier.pop()
        if code not in seen:
            seen.add(code)
            frontier += [code ^ (1 << i) for i in range(6) if code ^ (1 << i) in alive]
    assert seen == alive and 8 < 64 - len(alive) < 40
    return graph


@pytest.mark.parametrize("target", [ising_3x3(), network_with_zeros()], ids=["ising", "network"])
def test_learning_changes_g_keeps_it_balanced_and_its_slopes_in_0_1(target):
    """A large learning rate drives slopes against the bounds: the projection keeps every one
    in [0, 1] (some exactly at a bound), and g stays balanced and monotone."""
    sampler = make_sampler("lsb2-monotone", target, 16, seed=2, lr=0.3, groups=6, units=5)
    before = sampler.balancing.log_g(S50).detach().clone()
    sampler.step(60, learn=True)
    assert not sampler.learning_failed
    net = sampler.balancing
    slope = net.slope.detach()
    assert float(slope.min()) >= 0.0 and float(slope.max()) <= 1.0
    assert bool(((slope == 0) | (slope == 1)).any())  # the projection acted
    with torch.no_grad():
        after = net.log_g(S50)
        assert float((after - before).abs().max()) > 1e-3  # g changed
        assert float((after - (S50 + net.log_g(-S50))).abs().max()) < 1e-12
        assert float(after.diff().min()) >= -1e-12
    assert sampler.invariant_error() < 1e-9
    assert (
        len(sampler.history) > 0
        and torch.isfinite(torch.tensor(sampler.history.arrays()["loss"])).all()
    )


def with_flat_and_steep_ends(net: MonotoneBalancing) -> MonotoneBalancing:
    """The same network with group 0 flat and group 1 of slope 1: g(0) > 0."""
    net = copy.deepcopy(net)
    with torch.no_grad():
        net.slope[0], net.slope[1] = 0.0, 1.0
    assert net.g0() > 0
    return net


def learned_network(target) -> MonotoneBalancing:
    sampler = make_sampler("lsb2-monotone", target, 16, seed=3, lr=0.05, groups=5, units=4)
    sampler.step(40, learn=True)
    assert not sampler.learning_failed
    return sampler.balancing


def assert_exact_chain(target, balancing, exact) -> None:
    """The frozen chain's matrix (enumerated from its own flip probabilities) is reversible
    with respect to the target, and independent chains run with step() have the law
    ``start P^t``, early and after mixing (then the target's)."""
    states = all_states(target.n_sites)
    log_p = target.log_prob(states)
    alive = torch.isfinite(log_p)
    pi = torch.softmax(log_p, 0).numpy()
    p = transition_matrix(target, "lsb2-monotone", balancing=balancing)
    flow = pi[:, None] * p
    assert np.abs(flow - flow.T).max() < 1e-12
    np.testing.assert_allclose(pi @ p, pi, atol=1e-12)
    assert (p[np.ix_(alive.numpy(), ~alive.numpy())] == 0).all()  # never into zero mass
    start = states[alive]
    copies = 3000 // len(start)
    x0 = start.repeat(copies, 1).view(-1, *target.shape)
    sampler = make_sampler("learned", target, len(x0), seed=5, x0=x0, balancing=balancing)
    law = np.where(alive.numpy(), 1.0 / len(start), 0.0)
    live = alive.numpy()
    gap = 1.0 - np.sort(np.abs(np.linalg.eigvals(p[np.ix_(live, live)])))[-2]
    done = 0
    for t in (3, min(1000, math.ceil(10.0 / gap))):
        sampler.step(t - done)
        law = law @ np.linalg.matrix_power(p, t - done)
        done = t
        counts = np.bincount(state_codes(sampler.x).numpy(), minlength=len(law))
        assert exact.tv(law, counts) < exact.tv_threshold(law, sampler.n_chains)
    assert done * gap >= 10.0 and exact.tv(law, pi) < 1e-3  # mixed: the law is the target's
    assert exact.tv(pi, counts) < exact.tv_threshold(pi, sampler.n_chains)


def test_the_frozen_chain_after_learning_is_exact_on_an_ising_posterior(exact):
    target = ising_3x3()
    assert_exact_chain(target, learned_network(target), exact)


@pytest.mark.parametrize("ends", ["as-learned", "g0-positive"])
def test_the_frozen_chain_after_learning_is_exact_on_a_network_with_hard_zeros(ends, exact):
    """On a factor graph with -inf entries; with g(0) > 0 flips into zero mass are proposed
    (checked) and never taken (the matrix has no entry into zero mass)."""
    target = network_with_zeros()
    net = learned_network(target)
    if ends == "g0-positive":
        net = with_flat_and_steep_ends(net)
        sampler = make_sampler("learned", target, 8, seed=0, balancing=net)
        dead = torch.isneginf(target.flip_log_ratios(sampler.x))
        assert bool(dead.any())
        assert bool(torch.isfinite(sampler.proposal_log_probs()[dead]).all())
    assert_exact_chain(target, net, exact)


# ----------------------------------------------------------------- JSON
def test_a_learned_network_survives_a_json_round_trip_exactly_and_frozen():
    net = learned_network(ising_3x3())
    loaded = load_balancing(balancing_to_json(net, meta={"target": "ising"}))
    assert isinstance(loaded, MonotoneBalancing) and (loaded.groups, loaded.units) == (5, 4)
    assert not any(p.requires_grad for p in loaded.parameters())
    s = torch.cat([S50, torch.tensor([-math.inf], dtype=torch.float64)])
    with torch.no_grad():
        assert torch.equal(loaded.log_g(s), net.log_g(s))
    assert loaded.g0() == net.g0()
    # and the "learned" sampler runs it
    sampler = make_sampler("learned", ising_3x3(), 4, balancing=loaded)
    sampler.step(20)
    assert sampler.balancing is loaded or torch.equal(sampler.balancing.slope, loaded.slope)


def hostile(**changes) -> dict:
    data = balancing_to_dict(MonotoneBalancing(2, 3))
    data["parameters"].update(changes)
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        (hostile(slope=[0.5, 0.5, 1.5, 0.5, 0.5, 0.5]), r"'slope' must lie in \[0, 1\]"),
        (hostile(slope=[0.5, -1e-9, 0.5, 0.5, 0.5, 0.5]), r"'slope' must lie in \[0, 1\]"),
        (hostile(slope=[0.5] * 5), "'slope' must be a list of 6 numbers"),
        (hostile(intercept=[0.0] * 5 + [float("nan")]), "'intercept' must contain only finite"),
        (hostile(intercept=[0.0] * 5 + [1e300]), "'intercept' must contain only finite"),
        (hostile(intercept=[0.0] * 5 + [True]), "'intercept' must contain only finite"),
        (hostile(intercept="zeros"), "'intercept' must be a list of 6 numbers"),
        (hostile(groups=10**9), "'groups' must be an integer between 1 and 32"),
        (hostile(groups=2.0), "'groups' must be an integer between 1 and 32"),
        (hostile(units=0), "'units' must be an integer between 1 and 32"),
        (hostile(units=None), "'units' must be an integer between 1 and 32"),
    ],
)
def test_hostile_json_is_refused_in_a_sentence(data, message):
    with pytest.raises(ValueError, match=message) as info:
        load_balancing(data)
    assert str(info.value).endswith(".")


def test_an_unknown_kind_names_the_three_learned_kinds():
    data = hostile()
    data["kind"] = "lsb3"
    with pytest.raises(ValueError, match="'lsb1' or 'lsb2' or 'lsb2-monotone'"):
        load_balancing(data)


# ----------------------------------------------------------------- the registry
def test_the_registry_builds_it_with_compiled_frozen_steps_and_the_torch_chains():
    """Its frozen steps run the compiled kernels (``kernels.log_g`` reads phi's pieces) on a
    lattice and a factor graph, and give the torch steps' chains after a burn-in that learned
    on torch steps (no learning kernel knows its network)."""
    ising, graph = ising_3x3(), network_with_zeros()
    pairwise = make_sampler("lsb2-monotone", ising, 2, groups=3, units=7)
    assert pairwise.backend == "compiled"
    assert not pairwise._uses_compiled(True) and pairwise._uses_compiled(False)
    assert (pairwise.balancing.groups, pairwise.balancing.units) == (3, 7)
    assert pairwise.name == "lsb2-monotone" and pairwise.learnable
    assert make_sampler("lsb2-monotone", graph, 2).backend == "compiled"
    for target in (ising, graph):
        runs = []
        for backend in ("compiled", "torch"):
            sampler = make_sampler("lsb2-monotone", target, 4, seed=3, backend=backend)
            sampler.step(30, learn=True)
            sampler.balancing.frozen()
            sampler.step(300)
            runs.append(sampler)
        assert torch.equal(runs[0].x, runs[1].x)
        assert torch.equal(runs[0]._n_accepted, runs[1]._n_accepted)
        assert runs[0].invariant_error() < 1e-9
    with pytest.raises(ValueError, match="groups must be an integer between 1 and 32"):
        make_sampler("lsb2-monotone", ising, 2, groups=33)
    # one seed, one function; another seed, another
    a, b = (make_balancing("lsb2-monotone", seed=k) for k in (0, 1))
    assert torch.equal(a.slope, make_balancing("lsb2-monotone", seed=0).slope)
    assert not torch.equal(a.slope, b.slope)


def test_the_pairwise_and_the_batched_samplers_have_one_matrix():
    """On a pairwise target the registry builds the pairwise sampler; the batched one on the
    same frozen function is the same chain."""
    target = ising_3x3()
    net = learned_network(target)
    states = all_states(9).view(-1, 3, 3)
    batched = balanced_builder("learned")(target, 512, balancing=net.frozen(), x0=states)
    fp = batched.flip_probabilities().reshape(512, 9)
    np.testing.assert_allclose(
        flip_matrix(fp), transition_matrix(target, "lsb2-monotone", balancing=net), atol=1e-13
    )


def test_a_chain_whose_every_flip_leads_into_zero_mass_learns_without_a_non_finite_loss():
    """A ring whose factors forbid (x_i, x_{i+1}) = (-1, +1) has two states of positive mass,
    all -1 and all +1, and from each every flip leads into zero mass. With g(0) = 0 a chain
    there has Z = 0 and T = 0 for every theta: its terms of the loss are constants, and learning
    must go on (it once stopped on a 0 * inf in the loss) with the chains where they are."""
    n = 6
    scopes = [(i, (i + 1) % n) for i in range(n)]
    table = torch.log(torch.tensor([1.0, 0.0, 0.5, 2.0], dtype=torch.float64))
    ring = FactorGraph(n, scopes, [table] * n)
    sampler = make_sampler("lsb2-monotone", ring, n_chains=5, seed=0)
    assert sampler.balancing.g0() == 0.0
    start = sampler.x.clone()
    sampler.step(300, learn=True)
    assert not sampler.learning_failed
    assert all(torch.isfinite(p).all() for p in sampler.balancing.parameters())
    assert torch.equal(sampler.x, start)  # no move leaves the two states
    assert sampler.invariant_error() < 1e-12
