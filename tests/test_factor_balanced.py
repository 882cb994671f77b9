"""The locally balanced samplers with a fixed balancing function take compiled steps on a factor
graph (issue 45, item 1): the torch step's chains from the same uniforms, hard zeros exact, the
exact law of the enumerated chain, and a cache that equals a recompute after thousands of steps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lsbcore.balancing.base import Balancing
from lsbcore.balancing.functions import FIXED, make_balancing
from lsbcore.exact.states import all_states, state_codes
from lsbcore.exact.transition import flip_matrix
from lsbcore.samplers.balanced.batched import BatchedBalancedSampler
from lsbcore.samplers.registry import make_sampler
from lsbcore.targets.factor_graph import FactorGraph
from lsbcore.targets.grid_network import grid_network

pytestmark = pytest.mark.usefixtures("single_thread")


def tiny_graph() -> FactorGraph:
    """Five variables, factors of arity 1 to 3 and a constant; one entry of a three-variable
    table and one of a pair's are -inf (hard zeros)."""
    g = torch.Generator().manual_seed(8)
    scopes = [[], [0], [3], [1, 2], [1, 4], [0, 3, 4], [2, 3, 4]]
    tables = [torch.randn(2 ** len(s), generator=g, dtype=torch.float64) for s in scopes]
    tables[5][6] = -math.inf  # x0 = +1, x3 = +1, x4 = -1 has zero mass
    tables[4][0] = -math.inf  # x1 = x4 = -1 has zero mass
    return FactorGraph(5, scopes, tables)


def run(name, target, backend, n_chains=5, steps=400, **options):
    sampler = make_sampler(name, target, n_chains, seed=11, backend=backend, **options)
    assert sampler.backend == backend
    sampler.step(steps)
    return sampler


@pytest.mark.parametrize("name", FIXED)
@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_compiled_balanced_steps_give_the_torch_steps_chains(name, epsilon):
    graph = grid_network(6, 0.5, seed=2, epsilon=epsilon)
    compiled = run(name, graph, "compiled", resync_every=150)  # resyncs inside the run
    torch_run = run(name, graph, "torch", resync_every=150)
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.equal(compiled._n_accepted, torch_run._n_accepted)
    assert int(compiled._n_accepted.sum()) > 0
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0.0, atol=1e-9)
    finite = torch.isfinite(torch_run.log_ratios)
    assert torch.equal(finite, torch.isfinite(compiled.log_ratios))
    assert torch.allclose(compiled.log_ratios[finite], torch_run.log_ratios[finite], atol=1e-9)
    info, info_t = compiled.step_info, torch_run.step_info
    assert torch.equal(info.site, info_t.site)
    assert torch.equal(info.accepted, info_t.accepted)
    assert torch.allclose(info.accept_prob, info_t.accept_prob, rtol=1e-12, atol=0.0)
    for sampler in (compiled, torch_run):
        assert sampler.invariant_error() < 1e-9


@pytest.mark.parametrize("name", ["lsb1", "lsb2", "lsb2-monotone"])
@pytest.mark.parametrize("epsilon", [1e-3, 0.0])
def test_learned_functions_frozen_take_compiled_steps_with_the_torch_steps_chains(name, epsilon):
    """Burn-in learns on torch steps (both runs alike), then the frozen function's steps are
    compiled: the torch run's chains, its caches exact after a resync inside."""
    graph = grid_network(6, 0.5, seed=3, epsilon=epsilon)
    runs = {}
    for backend in ("compiled", "torch"):
        sampler = make_sampler(name, graph, 5, seed=11, backend=backend, resync_every=150)
        sampler.step(60, learn=True)
        sampler.balancing.frozen()
        sampler.step(400)
        runs[backend] = sampler
    compiled, torch_run = runs["compiled"], runs["torch"]
    assert torch.equal(compiled.x, torch_run.x)
    assert torch.equal(compiled._n_accepted, torch_run._n_accepted)
    assert torch.allclose(compiled.log_p, torch_run.log_p, rtol=0.0, atol=1e-9)
    assert torch.equal(compiled.step_info.site, torch_run.step_info.site)
    assert compiled.invariant_error() < 1e-9


def test_short_calls_keep_the_proposal_cache_and_give_one_long_calls_chains():
    """The kernel's cache is kept between calls (and rebuilt after a torch step): fifty calls
    of one step, a torch step among them, are one call of fifty steps."""
    graph = grid_network(6, 0.5, seed=4, epsilon=0.0)
    long = run("barker", graph, "compiled", steps=51)
    short = run("barker", graph, "compiled", steps=0)
    for t in range(51):
        if t == 25:
            short.set_backend("torch")
        short.step(1)
        short.set_backend("compiled")
    assert torch.equal(short.x, long.x)
    assert torch.equal(short._n_accepted, long._n_accepted)
    assert short.invariant_error() < 1e-9


def test_a_chain_with_nothing_to_propose_stays_put_on_the_compiled_steps():
    """Every flip of state 0 leads into zero mass and g(0) = 0 (Barker): Z = 0, the chain stays
    and reports acceptance 0, as the torch step does; the other chain moves."""
    table = torch.randn(8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    table[[1, 2, 4]] = -math.inf
    graph = FactorGraph(3, [[0, 1, 2]], [table])
    x0 = all_states(3)[[0, 7]]
    compiled, torch_run = (
        run("barker", graph, backend, n_chains=2, steps=50, x0=x0)
        for backend in ("compiled", "torch")
    )
    torch.testing.assert_close(compiled.x[0], x0[0])
    assert torch.equal(compiled.x, torch_run.x)
    assert int(compiled._n_accepted[1]) > 0
    assert float(compiled.step_info.accept_prob[0]) == 0.0
    assert torch.equal(compiled.step_info.site, torch_run.step_info.site)
    assert compiled.invariant_error() < 1e-9


# ----------------------------------------------------------------- the exact law
def exact_matrix(graph: FactorGraph, name: str):
    """The enumerated transition matrix of ``name``'s torch chain (one chain per state of
    positive mass), the target's law and the states of positive mass."""
    states = all_states(graph.n_sites)
    log_p = graph.log_prob(states)
    alive = torch.isfinite(log_p)
    sampler = make_sampler(name, graph, int(alive.sum()), x0=states[alive], backend="torch")
    fp = torch.zeros(len(states), graph.n_sites, dtype=torch.float64)
    fp[alive] = sampler.flip_probabilities().reshape(-1, graph.n_sites)
    p = flip_matrix(fp)
    dead = (~alive).numpy()
    p[dead] = np.eye(len(p))[dead]
    return p, torch.softmax(log_p, 0).numpy(), alive


@pytest.mark.parametrize("name", FIXED)
def test_compiled_balanced_runs_have_the_exact_law_on_a_tiny_graph_with_hard_zeros(name, exact):
    """The enumerated matrix is reversible with respect to the target; independent compiled
    chains from every state of positive mass have the law ``start P^t`` after 3 steps and the
    target's law once mixed."""
    graph = tiny_graph()
    p, pi, alive = exact_matrix(graph, name)
    assert 4 <= int((~alive).sum()) <= 16  # the hard zeros took out states
    flow = pi[:, None] * p
    assert np.abs(flow - flow.T).max() < 1e-12
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    states = all_states(graph.n_sites)[alive]
    copies = 4000 // len(states)
    sampler = make_sampler(
        name, graph, copies * len(states), seed=5, x0=states.repeat(copies, 1), backend="compiled"
    )
    law = np.where(alive.numpy(), 1.0 / len(states), 0.0)
    gap = 1.0 - np.sort(np.abs(np.linalg.eigvals(p[np.ix_(alive, alive)])))[-2]
    assert gap > 0.01
    done = 0
    for t in (3, math.ceil(12.0 / gap)):
        sampler.step(t - done)
        law = law @ np.linalg.matrix_power(p, t - done)
        done = t
        counts = np.bincount(state_codes(sampler.x).numpy(), minlength=len(law))
        assert exact.tv(law, counts) < exact.tv_threshold(law, sampler.n_chains)
    assert exact.tv(law, pi) < 1e-4
    assert exact.tv(pi, counts) < exact.tv_threshold(pi, sampler.n_chains)
    assert sampler.invariant_error() < 1e-9


@pytest.mark.parametrize("name", FIXED)
def test_the_compiled_cache_equals_a_recompute_after_thousands_of_steps(name):
    graph = grid_network(8, 0.5, seed=1, epsilon=0.0)
    sampler = make_sampler(name, graph, 4, seed=3, backend="compiled", resync_every=10**6)
    sampler.step(5000)
    assert int(sampler._n_accepted.sum()) > 100
    assert sampler.invariant_error() < 1e-9


# ----------------------------------------------------------------- which backend
def test_auto_picks_the_compiled_steps_for_the_papers_functions_on_a_factor_graph():
    graph = grid_network(4, 0.5, seed=0)
    # the learned ones: frozen steps and learning steps compiled
    for name in (*FIXED, "lsb1", "lsb2", "lsb2-monotone"):
        assert make_sampler(name, graph, 2, backend="auto").backend == "compiled"
    # and gradient ratios (FLSB), which are the exact ones on a factor graph
    for name in ("flsb1", "flsb2"):
        assert make_sampler(name, graph, 2, backend="auto").backend == "compiled"


class Unknown(Balancing):
    """A balancing function no kernel knows (sqrt's log g, written anew)."""

    name = "unknown"

    def log_g(self, s: torch.Tensor) -> torch.Tensor:
        return 0.5 * s


def test_the_compiled_backend_is_refused_where_it_does_not_serve_in_a_sentence():
    graph = grid_network(4, 0.5, seed=0)
    with pytest.raises(ValueError, match="know the paper's balancing functions, not 'unknown'"):
        BatchedBalancedSampler(graph, 2, Unknown(), backend="compiled")
    assert BatchedBalancedSampler(graph, 2, Unknown(), backend="auto").backend == "torch"
    with pytest.raises(ValueError, match="know the paper's balancing functions, not 'unknown'"):
        BatchedBalancedSampler(graph, 2, Unknown(), ratios="gradient", backend="compiled")
    sqrt = BatchedBalancedSampler(graph, 2, make_balancing("sqrt"), ratios="gradient")
    assert sqrt.backend == "compiled"
